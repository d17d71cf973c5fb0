"""The CUDA target without a GPU: PTX that `ptxas` accepts, its shape, and the kernels run.

`ptxas -arch=sm_90` (CUDA's assembler, on the PATH of the development machines) checks the PTX of
the lecture program, of every op in every storage dtype and of random programs; the tests that
need it are skipped, saying so, where it is absent.

The kernels' logic (grid-stride loop, vector and scalar parts, broadcasting, launch sequence and
temporaries) runs on the CPU: `EmulatedDevice` JIT-compiles the same `llvm`-dialect entries for
the host, with the `llvm.nvvm.read.ptx.sreg.*` intrinsics answered by the emulated grid and
libdevice's functions by the C library's, and runs every thread of every block in turn, in host
memory. Only the PTX instructions themselves (`math="ptx-approx"`) and libdevice's code cannot
run here.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import importlib.util
import io
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llvmlite.binding as llvm_binding
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.parser import Parser

import xfuse
from xfuse.codegen import libdevice
from xfuse.codegen.libdevice import find_libdevice
from xfuse.codegen.native import host_target_machine
from xfuse.codegen.ptx import PtxModule, compile_ptx
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime.arrays import ArgumentError, ArgumentTypeError
from xfuse.runtime.cuda import CPU_KERNEL_ONLY, CudaDriver, CudaKernel, plan_launches
from xfuse.transforms.default_pipeline import default_pipeline, split_after
from xfuse.transforms.expand_math import EwExpandMathPass
from xfuse.transforms.pipeline import apply_pipeline, only_function, pipeline_context

if TYPE_CHECKING:
    from conftest import Gelu

ROOT = Path(__file__).parents[1]
PTXAS = shutil.which("ptxas")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on the PATH")
LIBDEVICE = find_libdevice()
needs_libdevice = pytest.mark.skipif(
    LIBDEVICE is None, reason="NVIDIA's libdevice (CUDA toolkit) is not installed"
)


def assemble(ptx: str, tmp_path: Path, arch: str = "sm_90") -> None:
    """`ptxas` accepts the PTX (fails the test with its message otherwise)."""
    source = tmp_path / "kernel.ptx"
    source.write_text(ptx)
    result = subprocess.run(
        [str(PTXAS), f"-arch={arch}", str(source), "-o", str(tmp_path / "kernel.cubin")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"ptxas rejected the PTX:\n{result.stderr}\n{ptx}"


# ---------------------------------------------------------------------------------------------
# PTX through ptxas
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "entry"),
    [('"a-b"', "a$2d$b"), ("a.b", "a$2e$b"), ('"1x"', "$31$x"), ('"é$"', "$e9$$24$"), ("f", "f")],
)
def test_an_entry_of_any_function_name_is_a_ptx_identifier(
    tmp_path: Path, name: str, entry: str
) -> None:
    """NVPTX aborted the process at `@"a-b"` ("Symbol name with unsupported characters") and
    wrote `.entry a.b_kernel0`, which ptxas refuses; the CPU compiled them."""
    from xfuse.runtime.compiler import Options, compile_module, parse_ir

    module = parse_ir(
        f"func.func @{name}(%x: tensor<?xf32>) -> tensor<?xf32> {{\n"
        "  %y = ew.neg %x : tensor<?xf32>\n  func.return %y : tensor<?xf32>\n}\n"
    )
    kernel = compile_module(module, options=Options(target="cuda"))
    assert f".entry {entry}_kernel0(" in kernel.ptx
    if PTXAS is not None:
        assemble(kernel.ptx, tmp_path)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("math_mode", ["approx", "ptx-approx"])
@pytest.mark.parametrize("fuse", [True, False])
def test_lecture_program_assembles(
    tmp_path: Path, fuse: bool, math_mode: str, arch: str, gelu: Gelu
) -> None:
    k = xfuse.compile(
        gelu.source, outputs=["out"], fuse=fuse, math=math_mode, target="cuda", arch=arch
    )
    assert k.ptx.count(".entry") == (1 if fuse else 11)
    assert f".target {arch}" in k.ptx
    assemble(k.ptx, tmp_path, arch)


DTYPES = ["float16", "bfloat16", "float32", "float64"]


def _call(op: ew.ElementwiseOpType) -> str:
    return f"{ew.mnemonic(op)}({', '.join(['x', 'y', 'x'][: ew.arity(op)])})"


@needs_ptxas
@pytest.mark.parametrize(
    ("dtype", "math_mode"),
    [
        *((dtype, "approx") for dtype in DTYPES),
        ("float32", "ptx-approx"),
        ("float64", "ptx-approx"),
    ],
)
def test_every_op_in_every_dtype_assembles(tmp_path: Path, dtype: str, math_mode: str) -> None:
    """Every op, each in its own kernel (unfused), in one module through ptxas (f64's
    transcendentals with libdevice linked in). `ptx-approx` changes only the f32 math, which f16
    and bf16 compute in (their conversions are the same as under `approx`): it is assembled for
    f32 and f64."""
    ops = ew.ELEMENTWISE_OPS
    source = "\n".join(f"o_{ew.mnemonic(op)} = {_call(op)};" for op in ops)
    outputs = [f"o_{ew.mnemonic(op)}" for op in ops]
    kernel = xfuse.compile(source, outputs, dtype=dtype, fuse=False, target="cuda", math=math_mode)
    assert kernel.ptx.count(".entry") == len(ops) >= 10
    assemble(kernel.ptx, tmp_path)


F64_MATH = {
    "exp": ("exp(x)", "exp"),
    "tanh": ("tanh(x)", "tanh"),
    "erf": ("erf(x)", "erf"),
    "log": ("log(x)", "log"),
    "log1p": ("log1p(x)", "log"),  # log(1 + x) corrected, as on the CPU
    "pow": ("pow(x, y)", "pow"),
}
"""The f64 transcendentals: the call of each, and the libdevice function it calls."""


@needs_libdevice
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("function", F64_MATH)
def test_f64_math_links_libdevice(tmp_path: Path, function: str, arch: str) -> None:
    """Each f64 transcendental calls libdevice's function, whose code is linked into
    the PTX (no external function left, nothing of libdevice's that the kernel does not call)."""
    call, called = F64_MATH[function]
    kernel = xfuse.compile(f"out = {call};", dtype="float64", target="cuda", arch=arch)
    assert f"llvm.call @__nv_{called}(" in kernel.ir("ew-to-llvm")
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assert "fma.rn.f64" in kernel.ptx  # libdevice's polynomials
    assert '!"nvvm-reflect-ftz", i32 0' in kernel.function.ptx.optimized_ir  # denormals kept
    assert LIBDEVICE is not None and kernel.function.ptx.libdevice == LIBDEVICE.digest
    assert len(kernel.ptx) < 60_000  # not the 500 other functions of libdevice
    assemble(kernel.ptx, tmp_path, arch)


def test_f32_math_links_no_libdevice() -> None:
    assert xfuse.compile("out = tanh(x) + exp(x);", target="cuda").function.ptx.libdevice is None


@pytest.fixture
def no_libdevice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A process that finds no libdevice: CUDA_HOME names an empty directory, and nothing else
    has one. Yields that CUDA_HOME."""
    home = tmp_path / "cuda"
    monkeypatch.setenv("CUDA_HOME", str(home))
    for name in ("CUDA_PATH", "CONDA_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc
    monkeypatch.setattr(libdevice, "_WHEEL_DIRECTORIES", ())
    monkeypatch.setattr(libdevice, "_INSTALLED_TOOLKITS", (str(tmp_path / "installed"),))
    libdevice.find_libdevice.cache_clear()
    xfuse.clear_cache()
    yield home
    libdevice.find_libdevice.cache_clear()
    xfuse.clear_cache()


def test_f64_math_without_libdevice_says_where_it_looked(no_libdevice: Path) -> None:
    with pytest.raises(libdevice.LibdeviceNotFoundError) as error:
        xfuse.compile("out = tanh(x) + erf(x);", dtype="float64", target="cuda")
    message = str(error.value)
    assert "calls __nv_erf, __nv_tanh (f64 math, or an f32 function xfuse has no" in message
    assert f"looked in: {no_libdevice / 'nvvm' / 'libdevice'}, nvidia/" in message
    assert "installed/nvvm/libdevice" in message
    # f32 math xfuse approximates and f64 arithmetic need no libdevice; f32 sin does.
    assert xfuse.compile("out = tanh(x);", target="cuda").function.ptx.libdevice is None
    xfuse.compile("out = x * x + 1;", dtype="float64", target="cuda")
    with pytest.raises(libdevice.LibdeviceNotFoundError, match="calls __nv_sinf "):
        xfuse.compile("out = sin(x);", target="cuda")


@needs_libdevice
def test_libdevice_is_found_through_cuda_home_or_the_nvcc_on_the_path(
    no_libdevice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert LIBDEVICE is not None
    toolkit = tmp_path / "toolkit"
    (toolkit / "nvvm" / "libdevice").mkdir(parents=True)
    (toolkit / "nvvm" / "libdevice" / libdevice.FILENAME).write_bytes(LIBDEVICE.bitcode)
    (toolkit / "bin").mkdir()
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (toolkit / "bin" / "nvcc").chmod(0o755)
    (tmp_path / "nvcc").symlink_to(toolkit / "bin" / "nvcc")  # on PATH (the fixture's)
    libdevice.find_libdevice.cache_clear()
    assert libdevice.find_libdevice().path == toolkit / "nvvm" / "libdevice" / libdevice.FILENAME
    no_libdevice.parent.joinpath("nvcc").unlink()
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    libdevice.find_libdevice.cache_clear()
    assert libdevice.find_libdevice().path == toolkit / "nvvm" / "libdevice" / libdevice.FILENAME
    assert libdevice.find_libdevice().digest == LIBDEVICE.digest


def test_an_nvcc_at_the_root_names_no_toolkit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`/nvcc` has no `<toolkit>/bin` above it: finding the toolkits was an IndexError."""
    monkeypatch.setattr(libdevice.shutil, "which", lambda name: "/nvcc")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    assert libdevice._named_toolkits() == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", r"is no bitcode that LLVM [\d.]+ reads \(file too small"),
        (b"hello\n", r"is no bitcode that LLVM [\d.]+ reads \(Invalid bitcode signature"),
        (b"BC\xc0\xde" + bytes(60), "is no bitcode that LLVM"),  # truncated
        ("define i32 @f() {\n  ret i32 0\n}", "does not define __nv_erf, __nv_tanh"),
        (  # a function of the kernel's name
            "define void @main_kernel0() {\n  ret void\n}",
            r"cannot be linked \(Linking globals named 'main_kernel0': symbol multiply defined",
        ),
    ],
    ids=["empty", "text", "truncated", "other-bitcode", "clashing-bitcode"],
)
def test_a_file_that_is_not_libdevice_is_a_clear_error(
    no_libdevice: Path, content: bytes | str, reason: str
) -> None:
    """Not LLVM's raw 'bitcode parsing error' or link error, nor PTX calling `.extern`
    functions that no GPU has. A str `content` is LLVM assembly, written as bitcode."""
    (no_libdevice / "nvvm" / "libdevice").mkdir(parents=True)
    path = no_libdevice / "nvvm" / "libdevice" / libdevice.FILENAME
    if isinstance(content, str):
        content = llvm_binding.parse_assembly(content).as_bitcode()
    path.write_bytes(content)
    with pytest.raises(
        libdevice.LibdeviceNotFoundError, match=f"^{re.escape(str(path))} {reason}"
    ) as error:
        xfuse.compile("out = tanh(x) + erf(x);", dtype="float64", target="cuda")
    assert "; the GPU kernel's f64 math needs NVIDIA's libdevice" in str(error.value)


def test_a_libdevice_that_is_a_fifo_or_a_link_loop_is_passed_over(no_libdevice: Path) -> None:
    """Opening a FIFO to read it waits for a writer: it was a hang."""
    directory = no_libdevice / "nvvm" / "libdevice"
    directory.mkdir(parents=True)
    os.mkfifo(directory / libdevice.FILENAME)
    loop = no_libdevice.parent / "installed" / "nvvm" / "libdevice"
    loop.mkdir(parents=True)
    (loop / libdevice.FILENAME).symlink_to(libdevice.FILENAME)
    found: list[libdevice.Libdevice | None] = []
    search = threading.Thread(target=lambda: found.append(libdevice.find_libdevice()))
    search.start()
    search.join(timeout=30)  # a guard against the hang, not a timing
    if search.is_alive():  # release it: a writer opens the FIFO
        os.close(os.open(directory / libdevice.FILENAME, os.O_WRONLY | os.O_NONBLOCK))
        search.join()
    assert found == [None]


def test_a_c_library_call_in_gpu_code_is_a_clear_error() -> None:
    """ew-expand-math's default library is the CPU's: its calls have no definition on a GPU."""
    module = parse_program("input f64 x;\nout = tanh(x);")
    passes = [*default_pipeline(target="cuda")]
    passes[-2] = EwExpandMathPass()
    with pytest.raises(ValueError, match=r"calls 'tanh', which the GPU does not have"):
        compile_ptx(apply_pipeline(module, passes))


def test_ew_to_nvvm_on_tensors_says_what_to_run_first() -> None:
    """An `ew.add` has a GPU lowering, once fused and bufferized: the error says so."""
    with pytest.raises(
        Exception, match=r"'ew.add' is not inside .* \(run ew-fuse and ew-bufferize first\)"
    ):
        apply_pipeline(parse_program("out = x + y;"), "ew-to-nvvm")


@pytest.mark.parametrize("source", ["out = x;", "input s[]; out = s;"])
def test_ew_to_nvvm_refuses_a_function_on_tensors_that_launches_nothing(source: str) -> None:
    """A function that returns its input has no op to refuse: it was erased, with nothing in
    its place, and the pass succeeded."""
    with pytest.raises(
        Exception, match=r"^ew-to-nvvm: 'func.func' @main takes or returns tensor<.*run ew-buff"
    ):
        apply_pipeline(parse_program(source), "ew-to-nvvm")


def test_ew_to_nvvm_of_two_functions_names_itself_and_them() -> None:
    """Its message lacked the pass's name (`ew-to-nvvm: ...`, as every pass's) and named the
    functions only as 'func.func', 'func.func'."""
    module = apply_pipeline(
        parse_program("out = x + y;"), "ew-optimize,ew-fuse,ew-bufferize,ew-workspace"
    )
    module.body.block.add_op(only_function(module).clone())
    only = [op for op in module.ops if isinstance(op, func.FuncOp)][-1]
    only.sym_name = StringAttr("other")
    with pytest.raises(Exception, match=r"^ew-to-nvvm: it takes one 'func.func' of bufferized"):
        apply_pipeline(module, "ew-to-nvvm")
    with pytest.raises(Exception, match=r"holds 'func.func' @main, 'func.func' @other$"):
        apply_pipeline(module, "ew-to-nvvm")


@pytest.mark.parametrize("layout", [", strided<[2]>", ", strided<[1], offset: 5>"])
def test_ew_to_nvvm_refuses_a_buffer_laid_out_otherwise_than_row_major(layout: str) -> None:
    """A strided operand lowered as a contiguous one: `x[2 i]` read as `x[i]`, silently."""
    source = f"""func.func @f(%x: memref<8xf32{layout}>, %o: memref<8xf32>) {{
      ew.kernel ins(%x : memref<8xf32{layout}>) outs(%o : memref<8xf32>) {{
      ^bb0(%a: f32):
        %e = arith.negf %a : f32
        ew.yield %e : f32
      }}
      func.return
    }}"""
    module = Parser(pipeline_context(), source).parse_module()
    with pytest.raises(
        Exception, match=r"'ew.kernel' on memref<8xf32, strided<.*>>: only the identity"
    ):
        apply_pipeline(module, "ew-to-nvvm")
    plain = source.replace(layout, "")
    assert "llvm.getelementptr" in str(
        apply_pipeline(Parser(pipeline_context(), plain).parse_module(), "ew-to-nvvm")
    )


F64_SIMPLE_POWERS = "\n".join(
    f"p{i} = pow(x, {y});" for i, y in enumerate(("1", "2", "3", "4", "-1", "0.5", "-0.5"))
)


def test_f64_pow_by_a_simple_constant_runs_like_the_cpu_kernel(tmp_path: Path) -> None:
    """pow(x, 2), pow(x, -1/2), ... need no libm (`PowBySimpleConstant`): they have a GPU
    lowering in f64 too, with C's pow's special values, as on the CPU."""
    outputs = [f"p{i}" for i in range(7)]
    cpu = xfuse.compile(F64_SIMPLE_POWERS, outputs, dtype="float64")
    compiled = xfuse.compile(F64_SIMPLE_POWERS, outputs, dtype="float64", target="cuda")
    if PTXAS is not None:
        assemble(compiled.ptx, tmp_path)
    gpu, _ = emulated(compiled)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e200, -1e200, 1e-310, -2.5, 3.0, 0.7]
    x = np.array(specials * 3, np.float64)  # vector loop and scalar tail
    for got, want in zip(gpu(x=x), cpu(x=x), strict=True):
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    half, minus_half = gpu(x=np.array([-0.0, -np.inf]))[5:]
    assert list(half) == [0.0, np.inf] and not np.signbit(half[0])  # C's pow(-0, 1/2) = +0
    assert list(minus_half) == [np.inf, 0.0]


def test_f64_math_runs_like_the_cpu_kernel_calling_libm() -> None:
    """The kernel around libdevice's calls (here answered by the C library, as the CPU's
    `math="libm"` kernel calls it): the same bits, special values included."""
    calls = [call for call, _ in F64_MATH.values()] + ["sigmoid(x)", "softplus(x)"]
    source = "\n".join(f"o{i} = {call};" for i, call in enumerate(calls))
    outputs = [f"o{i}" for i in range(len(calls))]
    cpu = xfuse.compile(source, outputs, dtype="float64", math="libm")
    gpu, _ = emulated(xfuse.compile(source, outputs, dtype="float64", target="cuda"))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e200, -1e200, 1e-310, -2.5, 3.0, 0.7]
    x = np.array(specials * 3, np.float64)  # vector loop and scalar tail
    y = np.array([2.0, -1.5, 0.5] * 11, np.float64)
    for got, want in zip(gpu(x=x, y=y), cpu(x=x, y=y), strict=True):
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def _load(name: str, path: Path) -> Any:
    """A Python file of the repository as a module (tests and benchmarks are not packages)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


RANDOM = _load("random_programs", ROOT / "tests" / "test_random_programs.py")


@needs_ptxas
@settings(
    max_examples=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors]
)
@given(program=RANDOM.programs(max_ops=20), fuse=st.booleans())
def test_random_programs_assemble(program: Any, fuse: bool) -> None:
    """Each program fused or unfused (both for the lecture's: test_lecture_program_assembles)."""
    import tempfile

    k = xfuse.compile(program.source(), outputs=program.output_names, fuse=fuse, target="cuda")
    with tempfile.TemporaryDirectory() as directory:
        assemble(k.ptx, Path(directory))


# ---------------------------------------------------------------------------------------------
# The PTX's shape
# ---------------------------------------------------------------------------------------------


def test_fused_gelu_ptx_is_one_entry_with_128_bit_accesses_and_a_grid_stride_loop(
    gelu: Gelu,
) -> None:
    ptx = xfuse.compile(gelu.source, outputs=["out"], target="cuda").ptx
    assert ".visible .entry main_kernel0(" in ptx
    assert ptx.count("ld.global.v4.b32") == 3  # x, b, r: 4 floats each
    assert ptx.count("st.global.v4.b32") == 1
    for register in ("%ctaid.x", "%ntid.x", "%tid.x", "%nctaid.x"):
        assert register in ptx
    assert "tanh.approx.f32" not in ptx  # math="approx": the CPU's rational approximation


def test_ptx_approx_uses_the_gpus_instructions() -> None:
    ptx = xfuse.compile("out = tanh(x) + exp(x);", target="cuda", math="ptx-approx").ptx
    assert "tanh.approx.f32" in ptx
    assert "ex2.approx.f32" in ptx


def test_bf16_moves_eight_elements_per_access_and_computes_in_f32() -> None:
    k = xfuse.compile("out = x * y + 1;", dtype="bfloat16", target="cuda")
    assert "ld.global.v4.b32" in k.ptx  # 8 bf16 = 128 bits
    assert "mul.rn.f32" in k.ptx and "add.rn.f32" in k.ptx  # each rounded, as written
    contracted = xfuse.compile(
        "out = x * y + 1;", dtype="bfloat16", target="cuda", fastmath="contract"
    )
    assert "fma.rn.f32" in contracted.ptx and "mul.rn.f32" not in contracted.ptx


@needs_ptxas
@pytest.mark.parametrize("fastmath", ["contract,afn", "fast"])
def test_afn_approximates_the_programs_divisions_only(fastmath: str, tmp_path: Path) -> None:
    # NVPTX makes an f32 `fdiv afn` a `div.approx.f32` (2 ulps, 0 for divisors beyond 2^126):
    # the user's flags are for the program's own `x / y`, tanh's approximation keeps IEEE's
    # division (`div.rn.f32`), as on the CPU. Counted against each part compiled alone.
    def divisions(source: str, fastmath: str) -> tuple[int, int]:
        ptx = xfuse.compile(source, target="cuda", fastmath=fastmath).ptx
        return ptx.count("div.rn.f32"), ptx.count("div.approx.f32")

    program_divisions = divisions("out = x / y;", "none")[0]
    tanh_divisions = divisions("out = tanh(x);", "none")[0]
    assert program_divisions > 0 and tanh_divisions > 0
    assert divisions("out = x / y;", fastmath) == (0, program_divisions)
    assert divisions("out = tanh(x);", fastmath) == (tanh_divisions, 0)
    assert divisions("out = x / y + tanh(x);", fastmath) == (tanh_divisions, program_divisions)
    both = xfuse.compile("out = x / y + tanh(x);", target="cuda", fastmath=fastmath)
    assemble(both.ptx, tmp_path)


@pytest.mark.parametrize("fastmath", ["contract,afn", "fast"])
def test_fastmath_leaves_the_scalar_forms_of_ops_as_written(fastmath: str) -> None:
    # sigmoid, log1p and softplus are one op of the program each: the flags find none of the
    # program's arithmetic in their kernels, whose PTX is `none`'s (with `afn`, sigmoid's and
    # log1p's divisions were `div.approx.f32`). Beside sigmoid, the program's own `x / y` is.
    for function in ("sigmoid", "log1p", "softplus"):
        source = f"out = {function}(x);"
        ptx = xfuse.compile(source, target="cuda", fastmath=fastmath).ptx
        assert ptx == xfuse.compile(source, target="cuda").ptx
        assert "div.approx" not in ptx
    ptx = xfuse.compile("out = sigmoid(x);", target="cuda").ptx
    sigmoid_divisions = ptx.count("div.rn.f32")
    assert sigmoid_divisions > 0
    ptx = xfuse.compile("out = x / y + sigmoid(x);", target="cuda", fastmath=fastmath).ptx
    assert ptx.count("div.rn.f32") == sigmoid_divisions
    assert ptx.count("div.approx.f32") > 0


def test_ptx_approx_exp_scales_by_log2_e_as_written_under_fast() -> None:
    # exp(x) = ex2(x * log2(e)): the multiply is the approximation's, rounded as written
    # (`mul.rn`), whatever flags the program's own arithmetic gets (it overflows to +inf from
    # the CPU's input); `fast` on it made it `mul.f32`, which ptxas may fuse or reassociate.
    ptx = xfuse.compile("out = exp(x);", target="cuda", math="ptx-approx", fastmath="fast").ptx
    assert ptx.count("ex2.approx.f32") == ptx.count("mul.rn.f32") > 0
    assert "mul.f32" not in ptx


def test_stages_are_visible(gelu: Gelu) -> None:
    k = xfuse.compile(gelu.source, outputs=["out"], target="cuda")
    assert list(k.stages)[-3:] == ["ew-to-nvvm", "ew-expand-math", "ew-to-llvm"]
    assert "scf.for" in k.ir("ew-to-nvvm")
    assert "ptx_kernel" in k.llvm_ir


def test_bad_target_options_name_the_option(gelu: Gelu) -> None:
    with pytest.raises(ValueError, match="target must be"):
        xfuse.compile(gelu.source, target="rocm")
    with pytest.raises(ValueError, match="arch must be"):
        xfuse.compile(gelu.source, target="cuda", arch="sm_70")
    with pytest.raises(ValueError, match="math must be 'approx' or 'ptx-approx' for cuda"):
        xfuse.compile(gelu.source, target="cuda", math="libm")
    with pytest.raises(ValueError, match="threads applies to target='cpu' only"):
        xfuse.compile(gelu.source, target="cuda", threads=4)
    # The CPU loops' options and the GPU's arch would do nothing on the other target.
    for cpu_only in (
        {"interleave": 4},
        {"streaming": False},
        {"masked_remainder": True},
        {"aligned_stores": False},
    ):
        (name,) = cpu_only
        with pytest.raises(ValueError, match=f"{name} applies to target='cpu' only"):
            xfuse.compile(gelu.source, target="cuda", **cpu_only)
    with pytest.raises(ValueError, match="arch applies to target='cuda' only"):
        xfuse.compile(gelu.source, arch="sm_80")


def test_arith_bitcast_to_bf16_lowers_to_its_i16_bits() -> None:
    module = Parser(
        pipeline_context(),
        """
        func.func @f(%x: i16) -> i16 {
          %b = arith.bitcast %x : i16 to bf16
          %i = arith.bitcast %b : bf16 to i16
          func.return %i : i16
        }
        """,
    ).parse_module()
    lowered = apply_pipeline(module, "ew-to-llvm")
    assert "bf16" not in str(lowered)
    convert_module(lowered, fallback_target_triple="x86_64-unknown-linux-gnu")  # no bf16 there


# ---------------------------------------------------------------------------------------------
# Running the kernels on an emulated GPU
# ---------------------------------------------------------------------------------------------


_REGISTERS = {"ctaid": 0, "ntid": 0, "tid": 0, "nctaid": 0}
"""The special registers as the emulated thread running now reads them (`EmulatedDevice.launch`
sets them; the `llvm.nvvm.read.ptx.sreg.<name>.x` of every engine call `emulated_<name>.x`)."""


@functools.cache
def _register_callbacks() -> tuple[Any, ...]:
    """The functions `emulated_<name>.x`, answering from `_REGISTERS` (kept alive here)."""
    callbacks = []
    for name in _REGISTERS:
        callback = ctypes.CFUNCTYPE(ctypes.c_int32)(lambda name=name: _REGISTERS[name])
        callbacks.append(callback)
        llvm_binding.add_symbol(f"emulated_{name}.x", ctypes.cast(callback, ctypes.c_void_p).value)
    return tuple(callbacks)


@functools.cache
def _emulated_engine(llvm_dialect: str) -> Any:
    """The host's code of a program's `llvm`-dialect entries, made once per program: the tests
    run most programs at several sizes and alignments (a new engine each took a third of them)."""
    _register_callbacks()
    module = Parser(pipeline_context(), llvm_dialect).parse_module()
    text = str(
        convert_module(module, fallback_target_triple=llvm_binding.get_process_triple())
    ).replace("llvm.nvvm.read.ptx.sreg.", "emulated_")
    # libdevice's functions are the host's C library's here (`__nv_exp` is `exp`).
    text = text.replace('@"__nv_', '@"')
    engine = llvm_binding.create_mcjit_compiler(
        llvm_binding.parse_assembly(text), host_target_machine()
    )
    engine.finalize_object()
    return engine


class EmulatedDevice:
    """The `xfuse.runtime.cuda.Device` protocol on the CPU (see the module docstring).

    `offset` bytes are added to every allocation: 4 makes f32 buffers miss the 16-byte alignment
    of the vector loop, so everything runs in the scalar loop."""

    multiprocessors = 1

    def __init__(self, llvm_dialect: str, offset: int = 0):
        self._llvm_dialect = llvm_dialect
        self._offset = offset
        self._buffers: dict[int, np.ndarray] = {}
        self.launches: list[tuple[str, int]] = []

    def load(self, ptx: PtxModule) -> Any:
        return _emulated_engine(self._llvm_dialect)

    def allocate(self, nbytes: int) -> int:
        buffer = np.full(nbytes + 64 + self._offset, 0xCC, np.uint8)
        address = buffer.ctypes.data
        address += -address % 64 + self._offset
        self._buffers[address] = buffer
        return address

    def free(self, pointer: int) -> None:
        del self._buffers[pointer]

    def copy_to_device(self, pointer: int, array: np.ndarray) -> None:
        ctypes.memmove(pointer, array.ctypes.data, array.nbytes)

    def copy_to_host(self, array: np.ndarray, pointer: int) -> None:
        ctypes.memmove(array.ctypes.data, pointer, array.nbytes)

    def resident_blocks(self, module: Any, entry: str, block: int) -> int:
        return 8  # an entry of up to 32 registers a thread on sm_90: grids of 2048 threads

    def launch(
        self, module: Any, entry: str, grid: int, block: int, arguments: Sequence[Any]
    ) -> None:
        self.launches.append((entry, grid))
        function = ctypes.CFUNCTYPE(None, *(type(a) for a in arguments))(
            module.get_function_address(entry)
        )
        _REGISTERS.update(ntid=block, nctaid=grid)
        for block_index in range(grid):
            for thread in range(block):
                _REGISTERS.update(ctaid=block_index, tid=thread)
                function(*arguments)

    def synchronize(self) -> None:
        pass


def emulated(kernel: Any, offset: int = 0) -> tuple[CudaKernel, EmulatedDevice]:
    device = EmulatedDevice(kernel.ir("ew-to-llvm"), offset)
    return CudaKernel(kernel.program, device), device


def _inputs(names: Sequence[str], shapes: dict[str, tuple[int, ...]], dtype: Any) -> dict:
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal(shapes[n]).astype(dtype) for n in names}


@pytest.mark.parametrize("offset", [0, 4], ids=["aligned", "misaligned"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("n", [0, 1, 7, 4 * 2048 + 5])
def test_gelu_runs_like_the_cpu_kernel(n: int, fuse: bool, offset: int, gelu: Gelu) -> None:
    cpu = xfuse.compile(gelu.source, outputs=["out"], fuse=fuse)
    gpu, device = emulated(
        xfuse.compile(gelu.source, outputs=["out"], fuse=fuse, target="cuda"), offset
    )
    args = _inputs(cpu.input_names, dict.fromkeys(cpu.input_names, (n,)), np.float32)
    np.testing.assert_allclose(gpu(**args), cpu(**args), rtol=2e-6, atol=2e-7)
    assert len(device.launches) == (1 if fuse else 11)


def test_a_kernel_without_shapes_takes_arrays_of_any_one_shape_flat(gelu: Gelu) -> None:
    """As the CPU's (README: "0-d to N-d"): the GPU kernel refused a [5, 8] array and a numpy
    scalar (`expected 1 dimensions`)."""
    cpu = xfuse.compile(gelu.source)
    gpu, _ = emulated(xfuse.compile(gelu.source, target="cuda"))
    rng = np.random.default_rng(3)
    for shape in [(5, 8), (2, 3, 4), ()]:
        args = {name: rng.standard_normal(shape).astype(np.float32) for name in "xbr"}
        got = gpu(**args)
        assert got.shape == shape
        np.testing.assert_allclose(got, cpu(**args), rtol=2e-6, atol=2e-7)
    args = {name: rng.standard_normal((5, 8)).astype(np.float32) for name in "xbr"}
    buffer = np.zeros((5, 8), np.float32)
    assert gpu(**args, out=buffer) is buffer
    np.testing.assert_allclose(buffer, cpu(**args), rtol=2e-6, atol=2e-7)
    with pytest.raises(ArgumentError, match="out 'out': a GPU call writes an N-d output through"):
        gpu(**args, out=np.zeros((8, 5), np.float32).T)
    # A buffer of the same size but another shape was written flat and returned as given.
    for shape in [(8, 5), (40,), (1, 40)]:
        for wrong in [np.zeros(shape, np.float32), FakeDeviceArray(np.zeros(shape, np.float32))]:
            with pytest.raises(ArgumentError) as error:
                gpu(**args, out=wrong)
            assert str(error.value) == f"out 'out': expected shape (5, 8), got {shape}"
            with pytest.raises(ArgumentError, match=re.escape(str(error.value))):
                cpu(**args, out=np.zeros(shape, np.float32))  # (the CPU's error)


def test_out_takes_a_mapping_and_nones_and_a_call_returns_a_tuple_as_the_cpus() -> None:
    """docs/calling-kernels.md: `out=` is "a list or tuple of buffers in that order, or a
    mapping from output names to buffers", a `None` allocated by the call: the GPU kernel took
    a mapping for one buffer ("expected 2 buffer(s), got 1"), refused a None, and returned a
    list as the caller's list."""
    source = "h = x * 2; y = h + 1; output y, h;"
    cpu = xfuse.compile(source)
    gpu, _ = emulated(xfuse.compile(source, target="cuda"))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = cpu(x)
    for make_out in (lambda h: {"h": h}, lambda h: [None, h], lambda h: (np.empty_like(x), h)):
        buffer = np.zeros_like(x)
        got = gpu(x, out=make_out(buffer))
        assert type(got) is tuple and got[1] is buffer and got[0].shape == x.shape
        for array, expected in zip(got, want, strict=True):
            np.testing.assert_array_equal(array, expected)
    with pytest.raises(ArgumentError, match="^out 'y': with device-array inputs, pass the"):
        gpu(FakeDeviceArray(x), out={"h": FakeDeviceArray(np.zeros_like(x))})


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_a_cuda_program_is_loaded_from_the_disk_cache(
    cache: Path, lowerings: list[str], tmp_path: Path, arch: str, gelu: Gelu
) -> None:
    """A new process (here: after emptying the in-memory cache) gets the PTX from disk, keyed
    by the options with the arch, without running the GPU lowering."""
    compiled = xfuse.compile(gelu.source, fuse=False, target="cuda", arch=arch)
    xfuse.clear_cache()
    loaded = xfuse.compile(gelu.source, fuse=False, target="cuda", arch=arch)
    assert len(lowerings) == 1
    assert isinstance(loaded, CudaKernel)
    assert loaded.ptx == compiled.ptx
    assert f".target {arch}" in loaded.ptx
    assert loaded.function.sequence == compiled.function.sequence
    assert loaded.ir("ew-to-llvm") == compiled.ir("ew-to-llvm")  # recomputed on demand
    assemble(loaded.ptx, tmp_path, arch)
    gpu, device = emulated(loaded)
    args = _inputs(loaded.input_names, dict.fromkeys(loaded.input_names, (1000,)), np.float32)
    cpu = xfuse.compile(gelu.source, fuse=False)
    np.testing.assert_allclose(gpu(**args), cpu(**args), rtol=2e-6, atol=2e-7)
    assert len(device.launches) == 11


BROADCAST = """
input bf16 x[t, d];
input bf16 b[d];
input f32 s[t, 1];
h = x + b;
y = tanh(h) * s + exp(x);
"""


@pytest.mark.parametrize("offset", [0, 2], ids=["aligned", "misaligned"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("d", [8, 6])  # a multiple of the 4 lanes, or not (scalar loop)
def test_broadcasting_mixed_dtypes_run_like_the_cpu_kernel(d: int, fuse: bool, offset: int) -> None:
    cpu = xfuse.compile(BROADCAST, outputs=["y", "h"], fuse=fuse)
    gpu, _ = emulated(
        xfuse.compile(BROADCAST, outputs=["y", "h"], fuse=fuse, target="cuda"), offset
    )
    rng = np.random.default_rng(1)
    args = {
        "x": rng.standard_normal((37, d)).astype(ml_dtypes.bfloat16),
        "b": rng.standard_normal(d).astype(ml_dtypes.bfloat16),
        "s": rng.standard_normal((37, 1)).astype(np.float32),
    }
    for got, want in zip(gpu(**args), cpu(**args), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(
            got.astype(np.float32), want.astype(np.float32), rtol=1e-5, atol=1e-6
        )


RUNS = [
    # y's dims as runs of x's: one run of two dims (m * k a multiple of the 4 lanes though k is
    # not: the vector loop's test is on the run's size, filecheck's @row_under_3d), a column of
    # a run, a leading 1, a dim of its own
    (["n", "m", "k"], ["m", "k"], (3, 4, 6)),
    (["n", "m", "k"], ["m", "k"], (3, 5, 7)),
    (["n", "m", "k"], ["n", 1, 1], (3, 5, 8)),
    (["n", "m", "k"], [1, "m", "k"], (2, 3, 4)),
    (["n", "m", "k"], ["m", 1], (3, 5, 8)),
    (["a", "b", "c", "d"], ["b", 1, "d"], (2, 3, 5, 4)),
    (["a", 1, "c", "d"], ["c", "d"], (2, 1, 3, 4)),
]


@pytest.mark.parametrize("offset", [0, 4], ids=["aligned", "misaligned"])
@pytest.mark.parametrize(("x_dims", "y_dims", "shape"), RUNS)
def test_broadcasts_over_runs_of_dims_run_like_the_cpu_kernel(
    x_dims: list[Any], y_dims: list[Any], shape: tuple[int, ...], offset: int
) -> None:
    """Each entry sees the iteration space in runs of dims (`coalesced_axes`) and divides the
    linear index by the sizes of runs, not of dims: the same bits as the CPU's kernel."""
    source = "out = x * y + x;"
    shapes = {"x": x_dims, "y": y_dims}
    cpu = xfuse.compile(source, shapes=shapes)
    gpu, _ = emulated(xfuse.compile(source, shapes=shapes, target="cuda"), offset)
    sizes = dict(zip(x_dims, shape, strict=True))
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal([sizes.get(dim, 1) for dim in y_dims]).astype(np.float32)
    got, want = gpu(x=x, y=y), cpu(x=x, y=y)
    assert got.shape == shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_broadcasts_run_like_the_cpu_kernel(data: st.DataObject) -> None:
    """x of a random shape (ranks 0-5, each dim static or named, a named one 0 to 5) and two
    inputs broadcast over its trailing dims, each dim kept or 1, in f16, f32 or f64 (8, 4 or 2
    lanes): the emulated entries' runs of dims give the CPU's bits."""
    rank = data.draw(st.integers(0, 5), label="rank")
    dim_size = st.integers(0, 9).map(lambda k: 0 if k == 0 else 1 + k % 5)  # (0: one in 10)
    shape = tuple(data.draw(st.lists(dim_size, min_size=rank, max_size=rank), label="shape"))
    named = data.draw(st.lists(st.booleans(), min_size=rank, max_size=rank), label="named")
    # (a static size is positive: `.ew` refuses a 0)
    dims: list[Any] = [
        f"d{axis}" if named[axis] or size == 0 else size for axis, size in enumerate(shape)
    ]

    def broadcast(name: str) -> tuple[list[Any], tuple[int, ...]]:
        count = data.draw(st.integers(0, rank), label=f"{name}'s rank")
        ones = data.draw(
            st.lists(st.booleans(), min_size=count, max_size=count), label=f"{name}'s 1s"
        )
        kept = range(rank - count, rank)
        return (
            [1 if one else dims[axis] for axis, one in zip(kept, ones, strict=True)],
            tuple(1 if one else shape[axis] for axis, one in zip(kept, ones, strict=True)),
        )

    (y_dims, y_shape), (z_dims, z_shape) = broadcast("y"), broadcast("z")
    dtype = data.draw(st.sampled_from([np.float16, np.float32, np.float64]), label="dtype")
    offset = data.draw(st.sampled_from([0, 4]), label="offset")
    source = "out = x * y + z;"
    shapes = {"x": dims, "y": y_dims, "z": z_dims}
    dtype_name = np.dtype(dtype).name
    cpu = xfuse.compile(source, shapes=shapes, dtype=dtype_name)
    gpu, _ = emulated(xfuse.compile(source, shapes=shapes, dtype=dtype_name, target="cuda"), offset)
    rng = np.random.default_rng(7)
    args = {
        name: rng.standard_normal(array_shape).astype(dtype)
        for name, array_shape in [("x", shape), ("y", y_shape), ("z", z_shape)]
    }
    got, want = gpu(**args), cpu(**args)
    assert got.shape == shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8))


def test_a_row_of_two_dims_under_three_is_one_remainder_and_no_division() -> None:
    """y `[m, k]` under x `[n, m, k]`, dynamic: one 64-bit remainder by m * k in each of the
    two loops (the IR divided by k and took remainders by k and m: a `div.u64` and a `rem.u64`
    a loop in the PTX)."""
    ptx = xfuse.compile(
        "out = x * y;", shapes={"x": ["n", "m", "k"], "y": ["m", "k"]}, target="cuda"
    ).ptx
    assert re.findall(r"\b(?:div|rem)\.u64\b", ptx) == ["rem.u64", "rem.u64"]


class SixBlocksAMultiprocessor:
    """The part of a 132-multiprocessor GPU that plans launches: 6 blocks of 256 threads fit on
    a multiprocessor (an entry of 33-40 registers a thread on sm_90)."""

    multiprocessors = 132

    def resident_blocks(self, module: Any, entry: str, block: int) -> int:
        assert (module, block) == ("module", 256)
        return 6


@pytest.mark.parametrize(
    ("shape", "grid"),
    [((1000,), 4), ((3, 2**31 + 5), 132 * 6), ((2**33,), 132 * 6)],
)
def test_launches_cover_any_size_with_at_most_one_wave_of_blocks(
    shape: tuple[int, ...], grid: int
) -> None:
    """Sizes past 2^31 elements travel as int64 (the entries index in 64 bits); the grid is
    at most as many blocks of 256 threads as fit on the multiprocessors at once, the grid-stride
    loop takes the rest."""
    source = "input f32 x[t, d];\ninput f32 b[d];\nout = x + b;" if len(shape) == 2 else "out = x;"
    function = xfuse.compile(source, target="cuda").function
    shapes = [shape, shape[-1:], shape] if len(shape) == 2 else [shape, shape]
    pointers = [4096 * (i + 1) for i in range(len(shapes))]
    device: Any = SixBlocksAMultiprocessor()  # plans, but loads and launches nothing
    ((entry, grid_, block, arguments),) = plan_launches(
        function, shapes, pointers, device, "module"
    )
    assert (entry, grid_, block) == ("main_kernel0", grid, 256)
    assert [a.value for a in arguments] == [*pointers, *shape]
    assert all(isinstance(a, ctypes.c_int64) for a in arguments[len(pointers) :])


def test_constant_and_copied_outputs_run() -> None:
    source = "t1 = 2.0;\nt2 = x0 + t1;\nt3 = x0;\n"
    gpu, device = emulated(xfuse.compile(source, outputs=["t1", "t2", "x0"], target="cuda"))
    x = np.arange(5, dtype=np.float32)
    constant, total, copy = gpu(x0=x)
    assert constant == 2.0 and constant.shape == ()
    np.testing.assert_array_equal(total, x + 2)
    np.testing.assert_array_equal(copy, x)


class FakeDeviceArray:
    """A device array as CuPy or PyTorch show it: only `__cuda_array_interface__` (in host
    memory of the emulated device)."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape,
            "typestr": array.dtype.str,
            "data": (array.ctypes.data, False),
            "strides": None,
            "version": 3,
        }


def test_device_arrays_are_used_in_place(gelu: Gelu) -> None:
    gpu, _ = emulated(xfuse.compile(gelu.source, outputs=["out"], target="cuda"))
    args = _inputs(gpu.input_names, dict.fromkeys(gpu.input_names, (1000,)), np.float32)
    want = xfuse.compile(gelu.source, outputs=["out"])(**args)
    out = np.zeros(1000, np.float32)
    device_args = {name: FakeDeviceArray(array) for name, array in args.items()}
    with pytest.raises(ArgumentError, match="pass the outputs as device arrays in out="):
        gpu(**device_args)
    result = gpu(**device_args, out=FakeDeviceArray(out))
    assert isinstance(result, FakeDeviceArray)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-7)


def test_device_array_arguments_are_checked(gelu: Gelu) -> None:
    gpu, _ = emulated(xfuse.compile(gelu.source, outputs=["out"], target="cuda"))
    x = FakeDeviceArray(np.zeros(8, np.float64))
    ok = FakeDeviceArray(np.zeros(8, np.float32))
    # an ArgumentTypeError, as on the CPU (a caller catching ArgumentError missed a TypeError)
    with pytest.raises(ArgumentTypeError, match="argument 'x': expected dtype float32, got float"):
        gpu(x=x, b=ok, r=ok, out=ok)
    for key, value, message in (
        ("typestr", "zz", "malformed .*data type 'zz'"),
        ("typestr", None, "malformed .*typestr None is no string"),  # (it read float64)
        ("data", None, "malformed"),
        ("data", ("16", False), "malformed"),  # (taken as the pointer 16)
        ("strides", 4, "malformed"),  # (a bare TypeError)
        ("shape", (-8,), r"no negative size, got \(-8,\)"),
        ("shape", (8.0,), "malformed"),
    ):
        bad = FakeDeviceArray(np.zeros(8, np.float32))
        bad.__cuda_array_interface__[key] = value
        with pytest.raises(ArgumentError, match=f"argument 'b': .*{message}"):
            gpu(x=ok, b=bad, r=ok, out=ok)
    strided = FakeDeviceArray(np.zeros(16, np.float32)[::2])
    strided.__cuda_array_interface__["strides"] = (8,)
    with pytest.raises(ArgumentError, match="argument 'b': a device array must be C-contiguous"):
        gpu(x=ok, b=strided, r=ok, out=ok)
    with pytest.raises(ArgumentError, match="argument 'r'"):
        gpu(x=ok, b=ok, r=FakeDeviceArray(np.zeros(9, np.float32)), out=ok)
    # The interface's read-only flag and mask (a read-only out was written, as a masked array
    # was read whole); a read-only input is read as numpy's is.
    memory = np.zeros(8, np.float32)
    read_only = FakeDeviceArray(memory)
    read_only.__cuda_array_interface__["data"] = (memory.ctypes.data, True)
    with pytest.raises(ArgumentError, match="out 'out': the array is read-only"):
        gpu(x=ok, b=ok, r=ok, out=read_only)
    masked = FakeDeviceArray(np.zeros(8, np.float32))
    masked.__cuda_array_interface__["mask"] = FakeDeviceArray(np.ones(8, np.bool_))
    with pytest.raises(ArgumentError, match="argument 'b': a masked device array"):
        gpu(x=ok, b=masked, r=ok, out=ok)
    gpu(x=read_only, b=ok, r=ok, out=ok)


def test_device_arrays_that_alias_are_checked_as_on_the_cpu() -> None:
    """An exact alias of an input runs in place in a kernel of one launch, a partial overlap is
    refused naming both: each raised AttributeError ('DeviceArray' has no 'size')."""
    gpu, _ = emulated(xfuse.compile("out = x * 2;", target="cuda"))
    memory = np.arange(16, dtype=np.float32)
    same = FakeDeviceArray(memory[:8])
    assert gpu(x=same, out=same) is same
    np.testing.assert_array_equal(memory, [*(np.arange(8) * 2), *range(8, 16)])
    with pytest.raises(ArgumentError, match="out 'out' overlaps input 'x'"):
        gpu(x=FakeDeviceArray(memory[:8]), out=FakeDeviceArray(memory[4:12]))
    # As on the CPU, several launches too where only the last writes outputs (each launch ends
    # before the next starts), not where an earlier one writes an output a later one reads.
    unfused, _ = emulated(xfuse.compile("out = sin(x * 2) + x;", target="cuda", fuse=False))
    assert unfused(x=same, out=same) is same
    twice = np.arange(8) * 2
    np.testing.assert_allclose(memory[:8], np.sin(twice * 2) + twice, atol=1e-6)
    source = "out1 = x * 2; out2 = out1 + x;"
    gpu, _ = emulated(xfuse.compile(source, ["out1", "out2"], target="cuda", fuse=False))
    with pytest.raises(ArgumentError, match="out 'out1' overlaps input 'x'"):
        gpu(x=same, out=(same, FakeDeviceArray(memory[8:])))


def test_numpy_arguments_are_checked_like_on_the_cpu(gelu: Gelu) -> None:
    gpu, _ = emulated(xfuse.compile(gelu.source, outputs=["out"], target="cuda"))
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="missing a required argument: 'r'"):
        gpu(x=x, b=x)
    with pytest.raises(ArgumentError, match="argument 'r'"):
        gpu(x=x, b=x, r=np.zeros(5, np.float32))
    with pytest.raises(TypeError, match=r"^out: expected a numpy array \(or a list/tuple of"):
        gpu(x=x, b=x, r=x, out=[0.0] * 4)  # was "expected 1 buffer(s), got 4"


def test_without_a_gpu_a_call_raises_a_clear_error(gelu: Gelu) -> None:
    if importlib.util.find_spec("cuda") is not None:
        pytest.skip("cuda-python is installed: whether a GPU is present decides the outcome")
    k = xfuse.compile(gelu.source, outputs=["out"], target="cuda")
    x = np.zeros(4, np.float32)
    with pytest.raises(
        xfuse.CudaUnavailableError, match=r"cuda-python \(pip install 'xfuse\[cuda\]'\)"
    ):
        k(x=x, b=x, r=x)
    assert ".entry" in k.ptx  # compiling PTX still works


def test_compile_ptx_from_a_bufferized_module(gelu: Gelu) -> None:
    module = xfuse.compile(gelu.source, outputs=["out"]).ir("ew-bufferize")
    parsed = Parser(pipeline_context(), module).parse_module()
    _, on_buffers = split_after(default_pipeline(target="cuda"), "ew-bufferize")
    lowered = apply_pipeline(parsed, on_buffers)
    assert isinstance(lowered, ModuleOp)
    assert compile_ptx(lowered, "sm_80").entries == ("main_kernel0",)


class _Result(Enum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_INVALID_CONTEXT = 201


_SUCCESS = _Result.CUDA_SUCCESS


def _fake_driver(monkeypatch: pytest.MonkeyPatch, **functions: Any) -> None:
    """`cuda.bindings.driver` as cuda-python shows it, with the given functions."""
    driver = types.SimpleNamespace(
        CUresult=_Result, cuGetErrorName=lambda error: (_Result.CUDA_SUCCESS, error.name.encode())
    )
    vars(driver).update(functions)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = driver  # type: ignore[attr-defined]
    cuda = types.ModuleType("cuda")
    cuda.bindings = bindings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)


def test_a_missing_driver_library_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(flags: int) -> None:
        raise RuntimeError('"cuda" is an NVIDIA driver library: install the display driver')

    _fake_driver(monkeypatch, cuInit=missing)
    with pytest.raises(xfuse.CudaUnavailableError, match="no usable CUDA driver: .*display driver"):
        CudaDriver()


@pytest.mark.parametrize(
    ("init_result", "message"),
    [
        (_Result.CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"),
        (_Result.CUDA_SUCCESS, "no NVIDIA GPU"),
    ],
)
def test_a_driver_without_a_gpu_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, init_result: _Result, message: str
) -> None:
    _fake_driver(
        monkeypatch,
        cuInit=lambda flags: (init_result,),
        cuDeviceGetCount=lambda: (_Result.CUDA_SUCCESS, 0),
    )
    with pytest.raises(xfuse.CudaUnavailableError, match=message):
        CudaDriver()


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, **functions: Any) -> None:
    """`_fake_driver` of a GPU with 132 multiprocessors, opened, with the given functions (in
    the place of those it opens with too)."""
    success = _Result.CUDA_SUCCESS
    opened: dict[str, Any] = {
        "cuInit": lambda flags: (success,),
        "cuDeviceGetCount": lambda: (success, 1),
        "cuDeviceGet": lambda ordinal: (success, 0),
        "cuDevicePrimaryCtxRetain": lambda device: (success, 7),
        "cuCtxSetCurrent": lambda context: (success,),
        "CUdevice_attribute": types.SimpleNamespace(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT=16),
        "cuDeviceGetAttribute": lambda attribute, device: (success, 132),
    }
    _fake_driver(monkeypatch, **(opened | functions))


def test_a_failing_call_on_a_working_gpu_is_a_cuda_error_naming_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of memory is not `CudaUnavailableError`, which a caller may answer with the CPU."""
    _fake_gpu(
        monkeypatch,
        cuMemAlloc=lambda nbytes: (_Result.CUDA_ERROR_OUT_OF_MEMORY, 0),
        cuModuleLoadData=lambda image: (_Result.CUDA_ERROR_NO_BINARY_FOR_GPU, None),
    )
    driver = CudaDriver()
    assert driver.multiprocessors == 132
    with pytest.raises(xfuse.CudaError, match="cuMemAlloc: CUDA driver error CUDA_ERROR_OUT_OF_M"):
        driver.allocate(1 << 40)
    # PTX this GPU cannot run (sm_90 on an A100) is the machine's limit, not a failure.
    with pytest.raises(xfuse.CudaUnavailableError, match="cannot run PTX for sm_90 .* arch=.sm_80"):
        driver.load(PtxModule("", "", ("main_kernel0",), "sm_90"))


def test_every_thread_calls_with_the_context_current(monkeypatch: pytest.MonkeyPatch) -> None:
    """A context is current on the thread that made it so (NVIDIA's cuCtxSetCurrent): the
    driver did that once, on the first thread, and a call from another failed with
    CUDA_ERROR_INVALID_CONTEXT."""
    current = threading.local()

    def set_current(context: int) -> tuple[_Result]:
        current.context = context
        return (_SUCCESS,)

    def allocate(nbytes: int) -> tuple[_Result, int]:
        if getattr(current, "context", None) != 7:
            return (_Result.CUDA_ERROR_INVALID_CONTEXT, 0)
        return (_SUCCESS, 4096)

    _fake_gpu(monkeypatch, cuCtxSetCurrent=set_current, cuMemAlloc=allocate)
    driver = CudaDriver()
    pointers: list[int] = []
    for _ in range(2):  # (each thread once, the second call on one too)
        worker = threading.Thread(target=lambda: pointers.append(driver.allocate(8)))
        worker.start()
        worker.join()
    assert pointers == [4096, 4096] and driver.allocate(8) == 4096
    # a failed binding is tried again at the thread's next call (it was taken as done)
    failures = iter([(_Result.CUDA_ERROR_OUT_OF_MEMORY,)])
    monkeypatch.setattr(
        sys.modules["cuda.bindings.driver"],
        "cuCtxSetCurrent",
        lambda context: next(failures, None) or set_current(context),
    )
    results: list[object] = []

    def twice() -> None:
        for _ in range(2):
            try:
                results.append(driver.allocate(8))
            except xfuse.CudaError as error:
                results.append(str(error))

    worker = threading.Thread(target=twice)
    worker.start()
    worker.join()
    assert results == ["cuCtxSetCurrent: CUDA driver error CUDA_ERROR_OUT_OF_MEMORY", 4096]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize(("resident", "grid"), [(6, 132 * 6), (0, 132)])
def test_a_grid_is_one_wave_of_the_blocks_the_driver_says_fit(
    monkeypatch: pytest.MonkeyPatch, gelu: Gelu, fuse: bool, resident: int, grid: int
) -> None:
    """The fused GELU's 36-40 registers a thread fit 6 blocks of 256 threads on a multiprocessor
    of sm_90, not the 8 its 2048 threads would take: the grid is what the driver says fits, asked
    once per entry. An entry that fits none (too many registers) gets one block a multiprocessor,
    for cuLaunchKernel to refuse by name."""
    success = _Result.CUDA_SUCCESS
    queries: list[tuple[Any, ...]] = []
    launches: list[tuple[Any, ...]] = []
    pointers = iter(range(4096, 1 << 40, 4096))

    def occupancy(function: Any, block: int, shared_bytes: int) -> tuple[_Result, int]:
        queries.append((function, block, shared_bytes))
        return success, resident

    def launch(function: Any, *dimensions_and_arguments: Any) -> tuple[_Result]:
        grid_x, grid_y, grid_z, block_x, block_y, block_z, *_ = dimensions_and_arguments
        launches.append((function, (grid_x, grid_y, grid_z), (block_x, block_y, block_z)))
        return (success,)

    _fake_gpu(
        monkeypatch,
        cuModuleLoadData=lambda image: (success, 1),
        cuModuleGetFunction=lambda module, name: (success, f"{module}:{name.decode()}"),
        cuOccupancyMaxActiveBlocksPerMultiprocessor=occupancy,
        cuMemAlloc=lambda nbytes: (success, next(pointers)),
        cuMemFree=lambda pointer: (success,),
        cuMemcpyHtoD=lambda device, host, nbytes: (success,),
        cuMemcpyDtoH=lambda host, device, nbytes: (success,),
        cuLaunchKernel=launch,
        cuCtxSynchronize=lambda: (success,),
    )
    compiled = xfuse.compile(gelu.source, outputs=["out"], fuse=fuse, target="cuda")
    kernel = CudaKernel(compiled.program, CudaDriver())
    x = np.zeros(2**20, np.float32)  # 4096 blocks: more than a wave
    kernel(x=x, b=x, r=x)
    kernel(x=x, b=x, r=x)
    functions = [f"1:{entry}" for entry in compiled.function.ptx.entries]
    assert len(functions) == (1 if fuse else 11)
    assert launches == [(function, (grid, 1, 1), (256, 1, 1)) for function in functions * 2]
    assert queries == [(function, 256, 0) for function in functions]


def test_the_gpu_validation_script_compiles_and_predicts_without_a_gpu(tmp_path: Path) -> None:
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    json_path = str(tmp_path / "r.json")
    report = script.main(["--dry-run", "--shape", "64x128", "--arch", "sm_80", "--json", json_path])
    kernels = [len(v.kernels) for v in report.variants]
    assert kernels == [1, 11, 1, 11]  # bf16 and f32, fused and unfused
    assert all(v.measured_s is None and v.predicted_s > 0 for v in report.variants)
    assert all(v.arch == "sm_80" for v in report.variants)  # the kernels are compiled for it
    assert '"dtype": "bfloat16"' in (tmp_path / "r.json").read_text()
    assert [(m.function, m.bound_ulps) for m in report.math] == [
        ("exp", 1),
        ("tanh", 1),
        ("erf", 3),
    ]
    assert all(m.max_ulps is None for m in report.math)  # compiled only
    assert all(m.error is None for m in report.math) == (LIBDEVICE is not None)


def test_the_gpu_validation_scripts_f64_check_measures_ulps_and_special_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its f64 exp check on the emulated GPU, where `__nv_exp` is glibc's exp (within 1 ulp)."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    compile_ = xfuse.compile
    monkeypatch.setattr(xfuse, "compile", lambda *a, **k: emulated(compile_(*a, **k))[0])
    (exp,) = (check for check in script.F64_MATH if check.function == "exp")
    result = script.check_math(object(), exp, "sm_90")
    assert 0.5 <= result.max_ulps < 1 and result.specials_match
    broken = dataclasses.replace(exp, reference=lambda x: np.exp(x.astype(np.longdouble)) * 2)
    result = script.check_math(object(), broken, "sm_90")
    assert result.max_ulps > 1e15 and not result.specials_match


def test_the_gpu_validation_script_without_a_gpu_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a traceback: the reason (here no GPU; elsewhere no cuda-python) and `--dry-run`."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")

    def no_gpu() -> None:
        raise xfuse.CudaUnavailableError("no NVIDIA GPU found (cuDeviceGetCount is 0)")

    monkeypatch.setattr("xfuse.runtime.cuda.cuda_device", no_gpu)
    with pytest.raises(SystemExit) as exit_:
        script.main(["--shape", "64x128"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "no NVIDIA GPU found" in error and "--dry-run" in error


def test_the_gpu_validation_script_times_through_xfuses_driver_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its CUDA events go through `CudaDriver.call`: a failing one is `xfuse.CudaError` naming
    the call, as the kernels' calls are. Each timing destroys its two events, failing or not."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    elapsed_ms = iter([3.0, 1.0, 2.0])
    created, live = _fake_event_gpu(
        monkeypatch, cuEventElapsedTime=lambda start, stop: (_SUCCESS, next(elapsed_ms))
    )
    gpu = script.Gpu()
    assert gpu.name == "NVIDIA H200"
    assert gpu.time(lambda: None, 3, warmup=0) == 2e-3  # the median
    assert (len(created), live) == (2, set())
    monkeypatch.setattr(
        sys.modules["cuda.bindings.driver"],
        "cuEventSynchronize",
        lambda event: (_Result.CUDA_ERROR_OUT_OF_MEMORY,),
    )
    with pytest.raises(
        xfuse.CudaError, match="cuEventSynchronize: CUDA driver error CUDA_ERROR_OUT"
    ):
        gpu.time(lambda: None, 1)
    assert (len(created), live) == (4, set())
    # A sticky fault fails the destroys as well: the error still names the first failing call.
    monkeypatch.setattr(
        sys.modules["cuda.bindings.driver"],
        "cuEventDestroy",
        lambda event: (_Result.CUDA_ERROR_OUT_OF_MEMORY,),
    )
    with pytest.raises(xfuse.CudaError, match="cuEventSynchronize"):
        gpu.time(lambda: None, 1)


def _fake_event_gpu(
    monkeypatch: pytest.MonkeyPatch, **functions: Any
) -> tuple[list[int], set[int]]:
    """`_fake_gpu` with an H200's name and CUDA events (`functions` replace any), opened by
    `xfuse.runtime.cuda.cuda_device`: the events created, and those not destroyed yet."""
    created: list[int] = []
    live: set[int] = set()

    def create(flags: int) -> tuple[_Result, int]:
        created.append(len(created) + 1)
        live.add(created[-1])
        return _SUCCESS, created[-1]

    def destroy(event: int) -> tuple[_Result]:
        live.remove(event)
        return (_SUCCESS,)

    events = {
        "cuDeviceGetName": lambda length, device: (_SUCCESS, b"NVIDIA H200".ljust(length, b"\0")),
        "cuEventCreate": create,
        "cuEventDestroy": destroy,
        "cuEventRecord": lambda event, stream: (_SUCCESS,),
        "cuEventSynchronize": lambda event: (_SUCCESS,),
        "cuEventElapsedTime": lambda start, stop: (_SUCCESS, 1.0),
    }
    _fake_gpu(monkeypatch, **(events | functions))
    monkeypatch.setattr("xfuse.runtime.cuda.cuda_device", CudaDriver)
    return created, live


@pytest.mark.parametrize(
    ("failing", "message"),
    [
        (
            {"cuMemcpyDtoD": lambda target, source, nbytes: (_Result.CUDA_ERROR_OUT_OF_MEMORY,)},
            "cuMemcpyDtoD: CUDA driver error CUDA_ERROR_OUT_OF_MEMORY",
        ),
        (  # the GPU cannot run the PTX: CudaUnavailableError, after the copy was timed
            {"cuModuleLoadData": lambda image: (_Result.CUDA_ERROR_NO_BINARY_FOR_GPU, None)},
            "cannot run PTX for sm_90",
        ),
    ],
    ids=["driver call", "PTX not loadable"],
)
def test_the_gpu_validation_script_says_which_driver_call_failed_mid_run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failing: dict[str, Any],
    message: str,
) -> None:
    """A driver call failing after the GPU opened (the copy's, the PTX's loading) is one line
    and status 1, not a traceback; the timing's events are destroyed all the same."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    pointers = iter(range(4096, 1 << 20, 4096))
    working = {
        "cuMemAlloc": lambda nbytes: (_SUCCESS, next(pointers)),
        "cuMemcpyDtoD": lambda target, source, nbytes: (_SUCCESS,),
        "cuMemFree": lambda pointer: (_SUCCESS,),
    }
    _, live = _fake_event_gpu(monkeypatch, **(working | failing))
    with pytest.raises(SystemExit) as exit_:
        script.main(["--shape", "64x128"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("gpu_validate: ") and message in err and err.count("\n") == 1
    assert live == set()


def test_the_gpu_validation_script_writes_only_json_to_stdout_with_json_dash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    script.main(["--dry-run", "--shape", "64x128", "--json", "-"])
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["variants"]) == 4
    assert captured.err.startswith("host: ")  # the report, host line first


class _ValidationDevice(EmulatedDevice):
    """The emulated GPU under `benchmarks/gpu_validate.py`: each program's PTX runs as that
    program's host code (`programs`), its calibration kernel does nothing, its L2-flushing
    buffer is never touched, and every CUDA event says 1 ms."""

    FLUSH = 1 << 40

    def __init__(self, programs: dict[str, str]):
        super().__init__("")
        self.programs = programs

    def load(self, ptx: PtxModule) -> Any:
        return None if ".entry empty" in ptx.ptx else _emulated_engine(self.programs[ptx.ptx])

    def allocate(self, nbytes: int) -> int:
        return self.FLUSH if nbytes > 1 << 26 else super().allocate(nbytes)

    def free(self, pointer: int) -> None:
        if pointer != self.FLUSH:
            super().free(pointer)

    def launch(
        self, module: Any, entry: str, grid: int, block: int, arguments: Sequence[Any]
    ) -> None:
        if module is not None:
            super().launch(module, entry, grid, block, arguments)

    def call(self, name: str, *arguments: Any) -> Any:
        results = {"cuDeviceGet": 0, "cuDeviceGetName": b"emulated\0", "cuEventCreate": 1}
        return results.get(name, 1.0 if name == "cuEventElapsedTime" else None)


def test_the_gpu_validation_script_checks_each_variants_whole_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its result check read the output after timing each kernel alone, again and again: an
    unfused kernel that updates a temporary in place had by then left its successor wrong
    inputs: the unfused GELU came out wrong by 461 (bf16) and 463 (f32) at 4x8 on the emulated
    GPU, 2026-12-05 19:20 UTC (right through `CudaKernel`)."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    programs: dict[str, str] = {}
    compile_ = xfuse.compile

    def compile_and_keep(*arguments: Any, **options: Any) -> Any:
        kernel = compile_(*arguments, **options)
        if options.get("target") == "cuda":
            programs[kernel.function.ptx.ptx] = kernel.ir("ew-to-llvm")
        return kernel

    monkeypatch.setattr(xfuse, "compile", compile_and_keep)
    device = _ValidationDevice(programs)
    monkeypatch.setattr("xfuse.runtime.cuda.cuda_device", lambda: device)
    report = script.main(["--shape", "4x8", "--repeat", "1"])
    assert [(v.dtype, v.fused) for v in report.variants] == [
        (dtype, fuse) for dtype in ("bfloat16", "float32") for fuse in (True, False)
    ]
    assert all(variant.ok for variant in report.variants), report.variants
    # (not the f64 math checks: here the host's libm answers libdevice's calls, whose bounds
    # they hold; tanh came out at 1.95 ulps, libdevice's 1)


def test_the_gpu_validation_script_leaves_out_a_torch_without_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With PyTorch's CPU-only wheel installed its torch timing made a CUDA tensor, and the run
    (and the test above, in a venv that has that wheel for `xfuse bench --peers`) failed with
    "Torch not compiled with CUDA enabled": it times torch only where torch has CUDA."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")

    def no_cuda_tensor(*arguments: Any, **options: Any) -> Any:
        raise AssertionError("Torch not compiled with CUDA enabled")

    cpu_only = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: False), randn=no_cuda_tensor
    )
    monkeypatch.setitem(sys.modules, "torch", cpu_only)
    report = script.Report("h200", (4, 8), gpu="fake")
    script.time_torch(None, report, types.SimpleNamespace(shape=(4, 8), repeat=1))
    assert report.torch == {}


def test_the_gpu_validation_script_fails_a_wrong_result() -> None:
    """Its GELU line printed an error 125,000 times its tolerance with no verdict, and the run
    exited 0 whatever failed: each checked line says ok or FAILED, the run's status 1."""
    script = _load("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    report = script.Report("h200", (4096, 14336), gpu="fake")
    good = script.VariantResult("float32", True, "sm_90", [], 1e-3, max_error=1e-6, tolerance=6e-5)
    report.variants.append(good)
    assert not report.failed()
    for wrong in (7.5, math.nan):
        report.variants.append(dataclasses.replace(good, fused=False, max_error=wrong))
        assert report.failed()
        text = io.StringIO()
        script.print_report(report, text)
        assert ": ok\n" in text.getvalue() and "(tolerance 6e-05): FAILED" in text.getvalue()
        report.variants.pop()
    report.math.append(script.MathResult("exp", 1, max_ulps=0.5, specials_match=False))
    assert report.failed()


def test_a_kernel_without_shapes_takes_n_d_and_0_d_device_arrays_flat() -> None:
    """A 2-d torch or CuPy tensor was refused ("expected 1 dimensions") where a numpy array of
    that shape ran; a strided one still is, as on the CPU."""
    gpu, _ = emulated(xfuse.compile("out = x * 2 + y;", target="cuda"))
    x = np.arange(40, dtype=np.float32).reshape(5, 8)
    out = np.zeros((5, 8), np.float32)
    device_out = FakeDeviceArray(out)
    assert gpu(x=FakeDeviceArray(x), y=FakeDeviceArray(x), out=device_out) is device_out
    np.testing.assert_array_equal(out, x * 3)
    scalar = np.zeros((), np.float32)
    three, one = np.array(3, np.float32), np.array(1, np.float32)
    gpu(x=FakeDeviceArray(three), y=FakeDeviceArray(one), out=FakeDeviceArray(scalar))
    assert scalar == 7
    strided = FakeDeviceArray(x)
    strided.__cuda_array_interface__["strides"] = (4, 20)
    with pytest.raises(ArgumentError, match="argument 'x': a device array must be C-contiguous"):
        gpu(x=strided, y=FakeDeviceArray(x), out=FakeDeviceArray(out))


def test_a_gpu_kernel_refuses_to_pickle_saying_so() -> None:
    """It failed on a lambda of its stages (an AttributeError naming `_lower.<locals>`)."""
    kernel = xfuse.compile("out = tanh(x) + y;", target="cuda")
    with pytest.raises(TypeError, match=r"a GPU kernel \(target='cuda'\) cannot be pickled"):
        pickle.dumps(kernel)


def test_a_cpu_kernels_attribute_on_a_gpu_kernel_names_its_target() -> None:
    """`k.prepare(...)` of a target='cuda' kernel was a bare AttributeError; every public name
    a CPU `Kernel` has and a `CudaKernel` lacks says why (add it to CPU_KERNEL_ONLY in
    src/xfuse/runtime/cuda.py)."""
    kernel = xfuse.compile("out = x * 2;", target="cuda")
    cpu = xfuse.compile("out = x * 2;")
    cpu_only = {n for n in dir(cpu) if not n.startswith("_")} - set(dir(kernel))
    assert cpu_only == set(CPU_KERNEL_ONLY)
    for name in cpu_only:
        with pytest.raises(AttributeError, match="a CPU kernel's \\(target='cpu'\\)"):
            getattr(kernel, name)
    with pytest.raises(AttributeError, match="^'CudaKernel' object has no attribute 'nothing'$"):
        kernel.nothing  # noqa: B018
