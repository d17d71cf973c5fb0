"""The lowering on hand-written bufferized IR: numbers, vector width, shapes, dtypes, errors."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import mmap
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import llvmlite.binding as llvm_binding
import ml_dtypes
import numpy as np
import pytest
from llvm_loops import vector_body, vector_loops
from xdsl.dialects import arith, llvm, memref
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, VerifyException

import xfuse
from xfuse.benchmarking.assembly import hot_loop_mnemonics
from xfuse.codegen import native, optimized_ir
from xfuse.codegen.native import (
    LONG_BODY,
    LONG_BODY_INTERLEAVE,
    MAX_INTERLEAVED_ARRAYS,
    NARROW_LONG_BODY_INTERLEAVE,
    RAW_RSQRT_ESTIMATES,
    HostCpu,
    NativeModule,
    compile_llvm_dialect,
    compile_llvm_ir,
    host_cpu,
    interleave_count,
    libmvec_loaded,
)
from xfuse.codegen.optimized_ir import (
    PREFETCH_DISTANCE,
    ZEN3_PREFETCH_DISTANCE,
    pair_bf16_parts,
    prefetch_loads,
    reduce_rounded_remainders,
    saturate_exp2s,
)
from xfuse.frontend.language import parse_program
from xfuse.runtime.arrays import ArgumentError
from xfuse.runtime.compiler import Options, clear_cache, compile_bufferized, compile_module
from xfuse.runtime.kernel import Kernel
from xfuse.transforms.expand_math import EwExpandMathPass
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.kernel_to_loops import HEAD_MAX_OPS, MEMORY_BOUND_OPS
from xfuse.transforms.pipeline import apply_pipeline, pipeline_context
from xfuse.transforms.to_llvm import (
    EwToLlvmPass,
    FloatArithToLlvm,
    OpTypeDispatch,
    lowering_patterns,
    op_types,
    packed_entry_name,
    parse_fastmath,
)

if TYPE_CHECKING:
    from conftest import Gelu

GELU_KERNEL = """
func.func @main(%x: memref<?xf32>, %b: memref<?xf32>, %r: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x, %b, %r : memref<?xf32>, memref<?xf32>, memref<?xf32>)
            outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32, %bs: f32, %rs: f32):
    %h = arith.addf %xs, %bs : f32
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %k = arith.constant 0.044715 : f32
    %s = arith.constant 0.7978845608 : f32
    %h2 = arith.mulf %h, %h : f32
    %h3 = arith.mulf %h2, %h : f32
    %c = arith.mulf %k, %h3 : f32
    %inner = arith.addf %h, %c : f32
    %arg = arith.mulf %s, %inner : f32
    %t = math.tanh %arg : f32
    %t1 = arith.addf %one, %t : f32
    %hh = arith.mulf %half, %h : f32
    %y = arith.mulf %hh, %t1 : f32
    %o = arith.addf %y, %rs : f32
    ew.yield %o : f32
  }
  func.return
}
"""

UNFUSED_TEMPORARY = """
func.func @main(%x: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  ew.kernel ins(%x : memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%xs: f32):
    %e = math.exp %xs : f32
    ew.yield %e : f32
  }
  ew.kernel ins(%t, %x : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%ts: f32, %xs: f32):
    %s = arith.subf %ts, %xs : f32
    ew.yield %s : f32
  }
  memref.dealloc %t : memref<?xf32>
  func.return
}
"""


UNFUSED_IN_PLACE = """
func.func @main(%x: memref<?xf32>, %b: memref<?xf32>, %r: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x, %b : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32, %bs: f32):
    %h = arith.addf %xs, %bs : f32
    ew.yield %h : f32
  }
  ew.kernel ins(%out : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%hs: f32):
    %t = math.tanh %hs : f32
    ew.yield %t : f32
  }
  ew.kernel ins(%out, %r : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%ts: f32, %rs: f32):
    %s = arith.addf %ts, %rs : f32
    ew.yield %s : f32
  }
  func.return
}
"""


def broadcast_kernel(element: str) -> str:
    """out[t, d] = (x[t, d] + b[d]) * s[t, 0], computed in f32 on `element` storage."""
    extend = f"arith.extf %{{v}} : {element} to f32" if element != "f32" else None

    def widen(name: str) -> str:
        return (
            f"%{name}f = {extend.format(v=name + 's')}"
            if extend
            else f"%{name}f = arith.addf %{name}s, %zero : f32"
        )

    narrow = (
        f"%r = arith.truncf %m : f32 to {element}"
        if element != "f32"
        else "%r = arith.addf %m, %zero : f32"
    )
    return f"""
func.func @main(%x: memref<?x?x{element}>, %b: memref<?x{element}>, %s: memref<?x1x{element}>,
                %out: memref<?x?x{element}>) {{
  ew.kernel ins(%x, %b, %s : memref<?x?x{element}>, memref<?x{element}>, memref<?x1x{element}>)
            outs(%out : memref<?x?x{element}>) {{
  ^bb0(%xs: {element}, %bs: {element}, %ss: {element}):
    %zero = arith.constant 0.0 : f32
    {widen("x")}
    {widen("b")}
    {widen("s")}
    %a = arith.addf %xf, %bf : f32
    %m = arith.mulf %a, %sf : f32
    {narrow}
    ew.yield %r : {element}
  }}
  func.return
}}
"""


def compile_text(text: str, inputs: list[str], **options: object) -> Kernel:
    module = Parser(pipeline_context(), text).parse_module()
    return compile_bufferized(module, inputs, Options(**options))  # type: ignore[arg-type]


def test_a_functions_entry_keeps_its_names_with_its_memrefs_expanded() -> None:
    text = """
    func.func @named(memref<?x4x?xf32>, f32, index) {
    ^entry(%x: memref<?x4x?xf32>, %scale: f32, %n: index):
      cf.br ^next
    ^next:
      %c = arith.constant 0 : index
      %v = memref.load %x[%c, %c, %n] : memref<?x4x?xf32>
      %w = arith.mulf %v, %scale : f32
      memref.store %w, %x[%c, %c, %c] : memref<?x4x?xf32>
      func.return
    }
    """
    module = Parser(pipeline_context(), textwrap.dedent(text)).parse_module()
    EwToLlvmPass(packed=False).apply(pipeline_context(), module)
    (function,) = module.ops
    assert isinstance(function, llvm.FuncOp)
    entry = function.body.blocks[0]
    assert entry.name_hint == "entry"
    assert [arg.name_hint for arg in entry.args] == ["x", None, None, "scale", "n"]
    assert [str(arg.type) for arg in entry.args] == ["!llvm.ptr", "i64", "i64", "f32", "i64"]


def widest_float_vector(llvm_ir: str) -> int:
    """The most float lanes any instruction of the optimized IR uses (1 if it is all scalar)."""
    return max((int(n) for n in re.findall(r"<(\d+) x float>", llvm_ir)), default=1)


@pytest.fixture(scope="module")
def gelu_approx() -> Kernel:
    return compile_text(GELU_KERNEL, ["x", "b", "r"], math="approx")


@pytest.mark.parametrize("n", [0, 1, 17, 2**20 + 3])
@pytest.mark.parametrize("math", ["approx", "libm"])
def test_gelu_any_length(n: int, math: str, gelu_approx: Kernel, gelu: Gelu) -> None:
    kernel = (
        gelu_approx if math == "approx" else compile_text(GELU_KERNEL, ["x", "b", "r"], math=math)
    )
    rng = np.random.default_rng(n)
    x, b, r = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    out = kernel(x=x, b=b, r=r)
    assert out.shape == (n,) and out.dtype == np.float32
    np.testing.assert_allclose(out, gelu.reference(x, b, r), rtol=0, atol=2e-6)


@pytest.mark.parametrize(
    ("name", "features"), [("skylake", "avx2"), ("skylake", "+avx2, +fma"), ("", "+avx2")]
)
def test_a_cpu_feature_without_its_sign_is_an_error_naming_the_variables(
    use_cpu: Callable[[str, str], HostCpu], name: str, features: str
) -> None:
    """LLVM aborted the process on `avx2` (an assertion: "Feature flags should start with '+'
    or '-'"), which no `except` catches."""
    with pytest.raises(ValueError, match=r"^XFUSE_CPU_NAME must name an LLVM CPU .* start with"):
        use_cpu(name, features)
    assert use_cpu(*ZEN3).name == "znver3"


@pytest.mark.parametrize(
    ("name", "features", "said"),
    [
        ("zen9", "+avx2", "knows no such .*'zen9' is not a recognized processor"),
        ("znver3", "+avx2,+avx-2", r"knows no such .*'\+avx-2' is not a recognized feature"),
        ("i686", "", "cannot .*64-bit code requested"),
        ("znver3", "+avx2,-64bit", "cannot .*64-bit code requested"),
        ("x86-64", "-sse", "cannot .*SSE register return with SSE disabled"),
        ("x86-64", "-sse2", "cannot .*SSE2 register return with SSE2 disabled"),  # (a double)
        ("haswell", "+avx2,+fma,+f16c", "makes 256-bit vectors .* say 128 bits"),
        ("skylake-avx512", "", "makes 512-bit vectors .* say 128 bits"),
    ],
)
def test_a_cpu_llvm_cannot_make_code_for_or_makes_otherwise_is_an_error_saying_why(
    use_cpu: Callable[[str, str], HostCpu], name: str, features: str, said: str
) -> None:
    """LLVM said of a CPU or feature it does not know on stderr only and went on: an unknown
    CPU then aborted the process at the first compile ("LLVM ERROR: 64-bit code requested on a
    subtarget that doesn't support it!"), an unknown feature was dropped. A 32-bit CPU LLVM
    knows, `-64bit`, `-sse` or `-sse2` passed the check (of an empty module) and LLVM aborted
    the process at the first compile, which no `except` catches.
    xfuse reads the vector width (and masks, bf16 rounding) from the features as listed, LLVM
    from the CPU's own too and their dependences: `haswell` with `+avx2,+fma,+f16c` made AVX2
    code that `xfuse bench` called 128-bit, and whose masked remainders xfuse did not use;
    `-avx512f` after the host's list (which takes AVX512_BF16 with it) left bf16 rounding to a
    call MCJIT lacks: xfuse rounds with integers there, as where LLVM could use an instruction
    it was not told of (slower, not wrong)."""
    with pytest.raises(ValueError, match=rf"^XFUSE_CPU_NAME='{name}', .*: LLVM {said}"):
        use_cpu(name, features)
    assert not use_cpu("sapphirerapids", "+avx,+avx2,+fma,+f16c,+avx512f").rounds_bf16
    taken = use_cpu("znver4", "+avx,+avx2,+fma,+f16c,+avx512f,+avx512vl,+avx512bf16,-avx512f")
    assert taken.float_lanes == 8 and not taken.rounds_bf16
    x = np.linspace(-3, 3, 64).astype(ml_dtypes.bfloat16)
    got = xfuse.compile("out = x * 3;", dtype="bfloat16")(x)
    np.testing.assert_array_equal(got, (x.astype(np.float32) * 3).astype(ml_dtypes.bfloat16))
    assert use_cpu("x86-64", "").float_lanes == 4
    assert use_cpu(*ZEN3).name == "znver3"


def test_a_feature_is_as_its_last_sign_says() -> None:
    """LLVM reads the last: `+avx512bf16` anywhere was taken for bf16 rounding in hardware."""
    cpu = HostCpu("sapphirerapids", "+avx512f,+avx512vl,+avx512bf16,-avx512bf16")
    assert not cpu.has("avx512bf16") and not cpu.rounds_bf16 and cpu.has("avx512vl")
    assert HostCpu("x86-64", "-avx,+avx").has("avx") and not HostCpu("x86-64", "").has("avx")


FIRST_COMPILES_IN_THREADS = """
import os, sys, threading
import numpy as np
import xfuse

stderr = os.readlink("/proc/self/fd/2") if sys.stderr is not None else None
functions = [xfuse.jit(lambda x, i=i: np.exp(x) * (i + 2.0)) for i in range(4)]
barrier = threading.Barrier(4)

results = {}

def first_compile(i):
    barrier.wait()
    try:
        results[i] = float(functions[i](np.ones(8, np.float32))[0])
    except BaseException as error:
        results[i] = repr(error)

threads = [threading.Thread(target=first_compile, args=(i,)) for i in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
if stderr is not None:
    assert os.readlink("/proc/self/fd/2") == stderr, os.readlink("/proc/self/fd/2")
print(sorted(results.items()))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="Linux's /proc")
@pytest.mark.parametrize("stderr", ["a file", "closed"])
def test_checking_the_named_cpu_leaves_stderr_as_it_was(tmp_path: Path, stderr: str) -> None:
    """Threads each making the first compile saved each other's capture of stderr (fd 2) as
    stderr, which stayed in its place, a deleted file (3 runs in 10); a process without stderr
    (`2>&-`) failed with "'NoneType' object has no attribute 'flush'", then (its fd 2 a module
    file another thread imported, captured in its place) with "cannot import name"."""
    environment = {
        **os.environ,
        "XFUSE_CPU_NAME": ZEN3[0],
        "XFUSE_CPU_FEATURES": ZEN3[1],
        "XFUSE_CACHE": "0",
    }
    with open(tmp_path / "stderr.txt", "w") as file:
        for _ in range(3):
            run = subprocess.run(
                [sys.executable, "-c", FIRST_COMPILES_IN_THREADS],
                env=environment,
                stdout=subprocess.PIPE,
                stderr=file,
                text=True,
                timeout=300,
                preexec_fn=(lambda: os.close(2)) if stderr == "closed" else None,
                check=False,
            )
            want = [(i, float(np.float32(np.e) * np.float32(i + 2))) for i in range(4)]
            assert run.returncode == 0, (tmp_path / "stderr.txt").read_text()
            assert run.stdout == f"{want}\n"


def _run_for_zen3(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run in a process that compiles for Zen 3 (the named CPU checked), without the
    disk cache."""
    environment = {
        **os.environ,
        "XFUSE_CPU_NAME": ZEN3[0],
        "XFUSE_CPU_FEATURES": ZEN3[1],
        "XFUSE_CACHE": "0",
    }
    return subprocess.run(
        [sys.executable, "-c", script],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_checking_the_named_cpu_with_sys_stderr_closed_compiles() -> None:
    """`sys.stderr.close()` leaves fd 2 open: the capture flushed the closed file first and
    every compile failed with "I/O operation on closed file"."""
    run = _run_for_zen3(
        "import sys, numpy as np, xfuse\n"
        "sys.stderr.close()\n"
        "print(xfuse.compile('out = x * 2.0;')(x=np.ones(2, np.float32)))\n"
    )
    assert (run.returncode, run.stdout) == (0, "[2. 2.]\n"), run.stderr


# An AVX2-only host (AMD Zen 3) as XFUSE_CPU_NAME / XFUSE_CPU_FEATURES describe it.
ZEN3 = ("znver3", "+sse4.2,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+popcnt,+lzcnt,+movbe")


@pytest.fixture(params=["host", "znver3"])
def target_cpu(request: pytest.FixtureRequest, use_cpu: Callable[[str, str], HostCpu]) -> HostCpu:
    """This host's CPU, then an AVX2-only one (run here where the host has at least AVX2)."""
    if request.param == "host":
        return host_cpu()
    if not host_cpu().has("avx2"):
        pytest.skip("this host cannot run AVX2 code")
    return use_cpu(*ZEN3)


def test_loop_body_uses_the_widest_vectors(target_cpu: HostCpu, gelu: Gelu) -> None:
    kernel = compile_text(GELU_KERNEL, ["x", "b", "r"], math="approx")
    lanes = target_cpu.float_lanes
    body = kernel.llvm_ir
    assert re.search(rf"fmul (contract )?<{lanes} x float>", body), "the GELU loop stayed scalar"
    assert f"load <{lanes} x float>" in body
    assert f"store <{lanes} x float>" in body
    assert widest_float_vector(body) == lanes
    assert ("zmm" in kernel.asm) == (lanes == 16)
    rng = np.random.default_rng(5)
    x, b, r = (rng.standard_normal(1000, dtype=np.float32) for _ in range(3))
    np.testing.assert_allclose(kernel(x=x, b=b, r=r), gelu.reference(x, b, r), rtol=0, atol=2e-6)


def test_rsqrt_gives_an_element_the_same_bits_wherever_it_falls(target_cpu: HostCpu) -> None:
    """With AVX-512 LLVM estimated a 512-bit 1 / sqrt with `vrsqrt14ps` and a float or a
    narrower vector with `vrsqrtss`/`vrsqrtps`, and `approx.rsqrt`'s refinement rounded some
    results near a tie the other way: rsqrt(0.16070688) was 0x401FA5D2 in the main loop and
    0x401FA5D1 in the remainder or an aligned store's head, so by the address of a fresh
    output too. Every lane takes the same estimate now (`same_rsqrt_estimates`); 2^18
    consecutive floats around that one, in calls of 7 and 24 elements against one call."""
    kernel = xfuse.compile("out = rsqrt(x);")
    tie = int(np.float32(0.16070688).view(np.uint32))
    x = np.arange(tie - (1 << 17), tie + (1 << 17), dtype=np.uint32).view(np.float32)
    whole = kernel(x=x).view(np.uint32)
    # 1 / sqrt = 2.49449574947...: above the midpoint, but AVX2's estimate gives the one below
    assert whole[1 << 17] == (0x401FA5D2 if target_cpu.has("avx512f") else 0x401FA5D1)
    for chunk in (7, 24):
        size = len(x) // chunk * chunk
        calls = [kernel(x=x[i : i + chunk]) for i in range(0, size, chunk)]
        np.testing.assert_array_equal(np.concatenate(calls).view(np.uint32), whole[:size])
    if target_cpu.has("avx512f"):
        assert not re.search(r"vrsqrt(ss|ps)\s", kernel.asm), "a 12-bit estimate is left"


def test_approx_rsqrt_takes_the_hosts_estimate_not_the_divider(target_cpu: HostCpu) -> None:
    """`math=approx` rsqrt is the host's estimate refined by Newton steps: no division or
    square root is left in the vector loop, and over a sweep of every exponent it is within
    half an ulp (plus the float64 reference's own rounding), the specials exact."""
    kernel = xfuse.compile("out = rsqrt(x);", math="approx")
    vector = "zmm" if target_cpu.float_lanes == 16 else "ymm"
    estimate = "vrsqrt14ps" if vector == "zmm" else "vrsqrtps"
    assert re.search(rf"{estimate}\s.*%{vector}", kernel.asm)
    assert not re.search(rf"v(div|sqrt)ps\s.*%{vector}", kernel.asm)
    libm = xfuse.compile("out = rsqrt(x);", math="libm")
    assert re.search(rf"vdivps\s.*%{vector}", libm.asm)  # 1 / sqrt(x), correctly rounded twice
    # Before the last rounding the step is within ~1e-10 of 1 / sqrt(x): 0.5 ulp and a hair
    # (every positive float32, docs/math.md: 0.50099 as AVX2 code, 0.50005 as AVX-512 code).
    assert rsqrt_errors_in_ulps(kernel).max() <= 0.501
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, 1e-38], np.float32)
    with np.errstate(all="ignore"):
        expected = (1 / np.sqrt(specials.astype(np.float64))).astype(np.float32)
    results = kernel(x=specials)
    assert np.isnan(results[3:6]).all()
    np.testing.assert_array_equal(
        results[[0, 1, 2, 6, 7]].view(np.uint32), expected[[0, 1, 2, 6, 7]].view(np.uint32)
    )


def rsqrt_errors_in_ulps(kernel: Kernel, root: str = "x", *ones: str) -> np.ndarray:
    """`kernel`'s `out`, 1 / sqrt(`root`) (times its inputs `ones`, all 1.0 here), against
    float64's on a sweep of positive float32 `root` through every exponent, in ulps of the
    float32 result."""
    positive = np.arange(1, 0x7F800000, 4099 * 64 + 1, dtype=np.uint32).view(np.float32)
    inputs = {root: positive} | {name: np.ones_like(positive) for name in ones}
    got = kernel(**inputs).astype(np.float64)
    want = 1 / np.sqrt(positive.astype(np.float64))
    return np.abs(got - want) / np.spacing(want.astype(np.float32)).astype(np.float64)


VECTOR_PRODUCT = re.compile(r"^\s+v(fn?m(add|sub)\d+|mul)ps\s", re.MULTILINE)
"""A vector multiply or FMA of f32 lanes in assembly."""


def test_approx_rsqrt_takes_the_bare_estimate_unless_the_program_allows_estimates(
    target_cpu: HostCpu,
) -> None:
    """approx rsqrt's own step refines the host's bare estimate: LLVM adds no Newton step of its
    own (4 instructions a vector) where no other op lets it estimate; a program's op with
    `arcp` (here `fastmath="arcp"` on its multiply) keeps LLVM's step for the function, its own
    reciprocals estimated as LLVM does. Both within 0.501 ulp."""
    source = "out = rsqrt(y) * x;"
    bare = xfuse.compile(source, math="approx")
    stepped = xfuse.compile(source, math="approx", fastmath="arcp")
    assert RAW_RSQRT_ESTIMATES in bare.llvm_ir
    assert RAW_RSQRT_ESTIMATES not in stepped.llvm_ir
    approximating = xfuse.compile(source, math="approx", fastmath="afn")
    assert RAW_RSQRT_ESTIMATES not in approximating.llvm_ir  # `afn` lets LLVM estimate too
    assert len(VECTOR_PRODUCT.findall(bare.asm)) < len(VECTOR_PRODUCT.findall(stepped.asm))
    assert RAW_RSQRT_ESTIMATES not in xfuse.compile("out = x * y;").llvm_ir
    for kernel in (bare, stepped):
        assert rsqrt_errors_in_ulps(kernel, "y", "x").max() <= 0.501


def test_approx_rsqrt_of_a_square_plus_a_constant_is_within_half_an_ulp(
    target_cpu: HostCpu,
) -> None:
    """`y * y + 0.001` is never 0 nor denormal: rsqrt takes the estimate on it directly (no
    scaling, no +-0 select: filecheck's ew-expand-math.mlir), and over every exponent of y,
    both signs, it is within 0.501 ulp of 1 / sqrt of the sum as numpy rounds it, 0 where
    y * y overflows, NaN at NaN."""
    kernel = xfuse.compile("out = rsqrt(y * y + 0.001);")
    positive = np.arange(1, 0x7F800000, 4099 * 64 + 1, dtype=np.uint32).view(np.float32)
    y = np.concatenate([positive, -positive, np.float32([0.0, -0.0, np.inf, -np.inf, 1e30])])
    with np.errstate(over="ignore"):
        total = y * y + np.float32(0.001)
    want = 1 / np.sqrt(total.astype(np.float64))
    got = kernel(y=y).astype(np.float64)
    assert np.isinf(total).sum() > 100
    np.testing.assert_array_equal(got[np.isinf(total)], 0.0)
    finite = np.isfinite(total)
    ulp = np.spacing(want[finite].astype(np.float32)).astype(np.float64)
    assert (np.abs(got[finite] - want[finite]) <= 0.501 * ulp).all()
    assert np.isnan(kernel(y=np.float32([np.nan]))).all()


RUNTIME_ALIAS_CHECK = re.compile(r"diff\.check|vector\.memcheck|found\.conflict")


def function_bodies(llvm_ir: str) -> dict[str, str]:
    """Each defined function's text (from `define` to its closing brace), by name."""
    return {
        found[1]: found[0]
        for found in re.finditer(r'^define [^@]*@"?([\w.]+)"?\(.*?^}', llvm_ir, re.M | re.S)
    }


def vectorized_loop_count(llvm_ir: str) -> int:
    """Main loops the loop vectorizer turned into full-width vector loops (not the masked
    remainder loops that follow them)."""
    return sum("llvm.masked." not in loop for loop in vector_loops(llvm_ir))


def test_in_place_kernels_vectorize_without_alias_checks() -> None:
    # The last two kernels write over the buffer they read, and `r` may be `out` as far as the
    # code knows: a runtime overlap check would send in-place calls to the scalar loop.
    kernel = compile_text(UNFUSED_IN_PLACE, ["x", "b", "r"], math="approx")
    assert vectorized_loop_count(kernel.llvm_ir) == 3, "an in-place kernel loop stayed scalar"
    assert not RUNTIME_ALIAS_CHECK.search(kernel.llvm_ir)
    assert widest_float_vector(kernel.llvm_ir) >= host_cpu().float_lanes
    n = 1003
    rng = np.random.default_rng(3)
    x, b, r = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    want = np.tanh(x.astype(np.float64) + b) + r
    np.testing.assert_allclose(kernel(x=x, b=b, r=r), want, atol=2e-6)


def test_fused_loop_has_no_alias_check(gelu_approx: Kernel, gelu: Gelu) -> None:
    # k(x=x, ..., out=x) is a legal in-place call: it must take the vector loop too.
    assert vectorized_loop_count(function_bodies(gelu_approx.llvm_ir)["main.packed"]) == 1
    assert not RUNTIME_ALIAS_CHECK.search(gelu_approx.llvm_ir)
    n = 2**10 + 3
    x = np.linspace(-6, 6, n, dtype=np.float32)
    b, r = np.full(n, 0.5, np.float32), np.full(n, -1, np.float32)
    want = gelu.reference(x, b, r)
    gelu_approx(x=x, b=b, r=r, out=x)
    np.testing.assert_allclose(x, want, rtol=0, atol=2e-6)


SILU_KERNEL = """
func.func @main(%x: memref<?xDT>, %out: memref<?xDT>) {
  ew.kernel ins(%x : memref<?xDT>) outs(%out : memref<?xDT>) {
  ^bb0(%xs: DT):
    %one = arith.constant 1.0 : f32
    %xf = EXT
    %n = arith.negf %xf : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %s = arith.divf %xf, %d : f32
    %r = TRUNC
    ew.yield %r : DT
  }
  func.return
}
"""


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_remainder_is_one_masked_vector_loop(target_cpu: HostCpu, dtype: str) -> None:
    # With `masked_remainder`, after the main vector loop, the last elements run in a masked
    # vector loop (where the host masks the element size: AVX2 has no masked 16-bit moves), not
    # in a vector epilogue and then one scalar iteration (the whole scalar polynomial) per
    # element, as they do by default but in a kernel of bf16 arrays (`bf16-only`: the same code).
    element = {"float32": "f32", "bfloat16": "bf16"}[dtype]
    casts = (
        ("arith.extf %xs : bf16 to f32", "arith.truncf %s : f32 to bf16")
        if dtype == "bfloat16"
        else ("arith.mulf %xs, %one : f32", "arith.mulf %s, %one : f32")
    )
    text = SILU_KERNEL.replace("DT", element).replace("EXT", casts[0]).replace("TRUNC", casts[1])
    default = function_bodies(compile_text(text, ["x"], math="approx").llvm_ir)["main.packed"]
    kernel = compile_text(text, ["x"], math="approx", masked_remainder=True)
    body = function_bodies(kernel.llvm_ir)["main.packed"]
    assert (default == body) == (dtype == "bfloat16")
    assert dtype == "bfloat16" or "llvm.masked.store" not in default
    masked = re.findall(r"llvm\.masked\.store\.v(\d+)", body)
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    if target_cpu.masks(np_dtype.itemsize):
        assert vectorized_loop_count(body) == 1
        assert masked and int(masked[0]) >= target_cpu.float_lanes
        assert "vec.epilog" not in body, "the main loop kept a vector epilogue"
        assert not re.search(r"store (float|i16|bfloat) ", body), "a scalar loop is left"
    else:  # the remainder is a plain vector loop of its own
        assert vectorized_loop_count(body) == 2 and not masked
    # Every element runs the same operations wherever it falls: a period of 21 values (signed
    # zeros, infinities, subnormals, overflow) repeated over main and remainder gives the
    # same bits in every period, for lengths up to 100, in place too.
    period = np.array(
        [0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, 88.0, -88.0, 1e30, -1e30, 0.5, -3.25]
        + list(np.linspace(-9, 9, 9)),
        dtype=np.float32,
    ).astype(np_dtype)
    x = np.tile(period, 5)[:100]
    want = kernel(x=x[: len(period)]).view(np.uint16 if np_dtype.itemsize == 2 else np.uint32)
    with np.errstate(over="ignore", invalid="ignore"):
        reference = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))
    for n in range(101):
        got = kernel(x=x[:n])
        bits = got.view(want.dtype)
        np.testing.assert_array_equal(bits, np.resize(want, n), err_msg=f"n = {n}")
        in_place = x[:n].copy()
        kernel(x=in_place, out=in_place)
        np.testing.assert_array_equal(in_place.view(want.dtype), bits)
    finite = np.isfinite(reference)
    tolerance = 1e-2 if dtype == "bfloat16" else 1e-6
    np.testing.assert_allclose(
        got[finite].astype(np.float64), reference[finite], rtol=tolerance, atol=1e-30
    )


NAN_PAYLOADS = {
    "float32": [0x7FC12345, 0xFFC00002, 0x7F800001],
    "float16": [0x7E05, 0xFE01, 0x7C01],
    "bfloat16": [0x7FC1, 0xFFC1, 0x7F81],
}
"""NaNs of each float type: quiet with a payload, negative, signalling."""
FUNCTIONS_OF_ONE_ARGUMENT = (
    "exp", "exp2", "expm1", "log", "log2", "log1p", "tanh", "sigmoid", "softplus", "erf",
    "sqrt", "rsqrt", "sin", "cos", "atan", "cbrt",
)  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_a_functions_nan_is_the_same_bits_wherever_it_falls(
    target_cpu: HostCpu, dtype: type
) -> None:
    """Each function of one argument gives a NaN the same bits at every place of the array:
    in a vector part or another (AVX2 code splits a 16-bit vector in two), the main loop or the
    remainder. bf16 log1p gave its payload or log's NaN by the element's place (below)."""
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    name = np.dtype(dtype).name
    for function in FUNCTIONS_OF_ONE_ARGUMENT:
        kernel = xfuse.compile(f"out = {function}(x);", dtype=name)
        for payload in NAN_PAYLOADS[name]:
            first = kernel(x=np.full(1, payload, bits).view(dtype)).view(bits)[0]
            assert np.isnan(first.view(dtype)), f"{function}({payload:#x})"
            for n in (5, 16, 33, 70):
                got = kernel(x=np.full(n, payload, bits).view(dtype)).view(bits)
                np.testing.assert_array_equal(got, first, f"{function}({payload:#x}), n = {n}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_log1p_of_a_nan_is_logs_nan_wherever_it_falls(target_cpu: HostCpu, dtype: type) -> None:
    """log1p's Goldberg form multiplies log(1 + x) by x: at a NaN x two NaNs met there, log's
    0x7FC00000 and x's own, and which one a multiply keeps is the operand order LLVM gave that
    vector part, so in AVX2 code a bf16 NaN came out as its payload or as log's NaN by its
    place in the array (in blocks of 8). A NaN x takes log(1 + x)'s branch, as x >= 2^24 does:
    log's NaN, as log(x) gives it, in every lane of every loop on every host."""
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    log1p = xfuse.compile("out = log1p(x);", dtype=np.dtype(dtype).name)
    log = xfuse.compile("out = log(x);", dtype=np.dtype(dtype).name)
    for payload in NAN_PAYLOADS[np.dtype(dtype).name]:
        for n in (1, 5, 16, 33, 70, 135):
            x = np.full(n, payload, bits).view(dtype)
            got = log1p(x=x).view(bits)
            assert np.isnan(got.view(dtype)).all(), hex(payload)
            np.testing.assert_array_equal(got, log(x=x).view(bits), f"{payload:#x}, n = {n}")


SIGNALLING_NAN_KERNEL = """
func.func @main(%x: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32):
    %nan = arith.constant 0x7F800001 : f32
    %zero = arith.constant 0.0 : f32
    %positive = arith.cmpf ogt, %xs, %zero : f32
    %r = arith.select %positive, %xs, %nan : f32
    ew.yield %r : f32
  }
  func.return
}
"""


def test_a_signalling_nan_constant_keeps_its_bits_in_the_kernel() -> None:
    """xDSL's f32 packing and llvmlite's f32 constants went through a C double, which quieted
    a signalling NaN: the kernel stored 0x7FC00001 for the constant 0x7F800001 that a select
    passes on bit for bit."""
    kernel = compile_text(SIGNALLING_NAN_KERNEL, ["x"])
    got = kernel(x=np.float32([-1.0, 2.0] * 20)).view(np.uint32)
    np.testing.assert_array_equal(got, [0x7F800001, 0x40000000] * 20)


LOG1P_KERNEL = """
func.func @main(%x: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32):
    %r = math.log1p %xs : f32
    ew.yield %r : f32
  }
  func.return
}
"""


def test_math_log1p_of_a_nan_is_logs_nan_wherever_it_falls(target_cpu: HostCpu) -> None:
    """`math.log1p` written in the IR, not of an exp, is the same Goldberg form under
    `math=approx` (`approx.log1p`): a NaN x takes log(1 + x)'s value there too."""
    kernel = compile_text(LOG1P_KERNEL, ["x"], math="approx")
    log = xfuse.compile("out = log(x);")
    for payload in (0x7FC12345, 0xFFC00002, 0x7F800001):
        for n in (1, 5, 16, 33, 70):
            x = np.full(n, payload, np.uint32).view(np.float32)
            got = kernel(x=x).view(np.uint32)
            np.testing.assert_array_equal(got, log(x=x).view(np.uint32), f"{payload:#x}, n = {n}")
    special = np.array([np.inf, -1.0, -2.0, 0.0, -0.0, 1e-30, 3e38], np.float32)
    with np.errstate(all="ignore"):
        want = np.log1p(special.astype(np.float64)).astype(np.float32)
    got = kernel(x=special)
    np.testing.assert_array_equal(got, want)  # 3e38 was inf: x log(u) overflowed
    signed = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


def outputs_at_every_line_offset(
    shape: tuple[int, ...], dtype: np.dtype
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For each element offset from a 64-byte boundary: a buffer of zeros and, in it at that
    offset, a contiguous output of `shape` with room before and after it."""
    size = int(np.prod(shape))
    per_line = 64 // dtype.itemsize
    for offset in range(per_line):
        buffer = np.zeros(size + 3 * per_line, dtype)
        start = offset + (-buffer.ctypes.data // dtype.itemsize) % per_line + per_line
        yield buffer, buffer[start : start + size].reshape(shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_load_store_loop_runs_the_elements_before_an_aligned_store_apart(
    target_cpu: HostCpu, dtype: str
) -> None:
    """A loop bound by its loads and stores (no approximated function, no 16-bit floats) runs
    the elements before its output's first 64-byte boundary in a head of its own
    (`ew-kernel-to-loops{store-alignment=64}`), where the host masks the element size in masked
    vector iterations (one or two), the rest in the main vector loop, whose stores then start
    on a line. At every offset from a line and for every length around the head's, numpy's
    bits, in place too, and nothing written outside the output."""
    np_dtype = np.dtype(dtype)
    element = {"float32": "f32", "float64": "f64"}[dtype]
    # Interleaved 4 times, but not the head (`mark_loops`).
    kernel = xfuse.compile(f"input {element} x[n], y[n];\nout = x * y + x;", interleave=4)
    body = function_bodies(kernel.llvm_ir)["main.packed"]
    main_loop = next(loop for loop in vector_loops(body) if "llvm.masked." not in loop)
    head = body[: body.index(main_loop)]
    # Its length: (-address mod 64) / size as LLVM writes it, (-address >> log2 size) & (line
    # elements - 1), of the output's address (the last argument word but its size).
    per_line = 64 // np_dtype.itemsize
    shift = np_dtype.itemsize.bit_length() - 1
    length = rf"= ptrtoint ptr (%\S+) to i64\n.*= sub i64 0, .*\n.*= lshr i64 .*, {shift}\n"
    assert re.search(length + rf".*= and i64 .*, {per_line - 1}\n", head)
    if target_cpu.masks(np_dtype.itemsize):  # masked vector iterations, no scalar one
        lanes = target_cpu.float_lanes * 4 // np_dtype.itemsize
        assert head.count("call void @llvm.masked.store") == -(-per_line // lanes)
        assert not re.search(r"store (float|double) ", head)
    rng = np.random.default_rng(11)
    lengths = (0, 1, 2, per_line - 1, per_line, per_line + 1, 2 * per_line + 3, 100, 257)
    for n in lengths:
        x, y = (rng.standard_normal(n).astype(np_dtype) for _ in range(2))
        want = x * y + x
        np.testing.assert_array_equal(kernel(x=x, y=y), want)
        for buffer, out in outputs_at_every_line_offset((n,), np_dtype):
            kernel(x=x, y=y, out=out)
            np.testing.assert_array_equal(out, want, f"n = {n}")
            assert np.count_nonzero(buffer) == np.count_nonzero(want)
            out[:] = x
            kernel(x=out, y=y, out=out)
            np.testing.assert_array_equal(out, want, f"n = {n}")


def test_loops_bound_by_their_arithmetic_have_no_head() -> None:
    """Bound by their conversions (bf16 `x * y` ran as fast with its stores aligned), their
    math, more than `MEMORY_BOUND_OPS` ops per array or `HEAD_MAX_OPS` in all, such loops run
    from their first element: the head would cost time, and compile time, for nothing."""

    def sum_of(terms: int, distinct: bool = False) -> str:
        return "out = " + " + ".join(f"x{i}" if distinct else "x" for i in range(terms)) + ";"

    for source in (
        "input bf16 x[n], y[n]; out = x * y;",
        "out = exp(x);",  # an approximation
        sum_of(2 * MEMORY_BOUND_OPS + 2),  # one add more than 2 arrays allow
        sum_of(HEAD_MAX_OPS + 2, distinct=True),  # one add more than any kernel's head allows
    ):
        assert "ptrtoint" not in xfuse.compile(source).llvm_ir, source
    scaled = functools.reduce(
        lambda inner, _: f"({inner} * 1.5 + 2.5)", range(MEMORY_BOUND_OPS), "x"
    )
    for source in (
        "out = x * y;",
        sum_of(2 * MEMORY_BOUND_OPS + 1),
        f"out = {scaled};",  # its constants are not ops
        sum_of(HEAD_MAX_OPS + 1, distinct=True),
    ):
        assert "ptrtoint" in xfuse.compile(source).llvm_ir, source


@pytest.mark.parametrize("d", [1, 17, 64, 65, 256])
def test_a_nests_rows_share_one_head_where_rows_are_whole_lines(
    target_cpu: HostCpu, d: int
) -> None:
    """In a nest (a `[d]` bias), each row runs a head as long as the first row's where rows are
    whole 64-byte lines and one main-loop block or more (64 and 256 float32 here), none where
    not: every row length and output offset gives numpy's bits."""
    kernel = xfuse.compile("input f32 x[t, d], b[d];\nout = x * 2 + b;")
    assert "ptrtoint" in kernel.llvm_ir
    rng = np.random.default_rng(d)
    x = rng.standard_normal((5, d), dtype=np.float32)
    b = rng.standard_normal(d, dtype=np.float32)
    for buffer, out in outputs_at_every_line_offset((5, d), np.dtype(np.float32)):
        kernel(x=x, b=b, out=out)
        np.testing.assert_array_equal(out, x * 2 + b)
        assert np.count_nonzero(buffer) == np.count_nonzero(out)


def vector_stores_per_iteration(llvm_ir: str) -> int:
    """Full-width vector stores in the first vector loop's body (its interleave count)."""
    return len(re.findall(r"store <", vector_body(llvm_ir)))


@pytest.mark.parametrize(
    ("text", "interleave", "stores"),
    [
        (GELU_KERNEL, None, LONG_BODY_INTERLEAVE),  # a long body: interleaved 4 times
        (GELU_KERNEL, 1, 1),
        (GELU_KERNEL, 2, 2),
    ],
)
def test_interleave_count(
    text: str, interleave: int | None, stores: int, target_cpu: HostCpu, gelu: Gelu
) -> None:
    kernel = compile_text(text, ["x", "b", "r"], math="approx", interleave=interleave)
    assert vector_stores_per_iteration(kernel.llvm_ir) == stores
    n = 1000
    rng = np.random.default_rng(9)
    x, b, r = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    np.testing.assert_allclose(kernel(x=x, b=b, r=r), gelu.reference(x, b, r), rtol=0, atol=2e-6)


@pytest.mark.parametrize(
    ("bias", "stores"), [("f32", NARROW_LONG_BODY_INTERLEAVE), ("f16", LONG_BODY_INTERLEAVE)]
)
def test_a_long_loop_of_16_and_32_bit_floats_interleaves_more(
    bias: str, stores: int, target_cpu: HostCpu
) -> None:
    """With an f32 array among f16 ones, LLVM vectorizes a loop at f32's lanes, one register a
    vector, half as wide as a loop of f16 arrays alone: interleaved 8 times, not 4, it has as
    many chains in flight (`narrow_at_float_lanes`). Both compute numpy's f32 tanh within
    docs/math.md's bound, rounded to f16."""
    kernel = xfuse.compile(f"input f16 x[n]; input {bias} b[n]; out = f16(tanh(x + b));")
    assert vector_stores_per_iteration(kernel.llvm_ir) == stores
    rng = np.random.default_rng(12)
    x = rng.standard_normal(1000).astype(np.float16)
    b = rng.standard_normal(1000).astype(np.dtype(np.float32 if bias == "f32" else np.float16))
    want = np.tanh(x.astype(np.float64) + b.astype(np.float64))
    np.testing.assert_allclose(kernel(x=x, b=b).astype(np.float64), want, rtol=1e-3, atol=1e-4)


def test_interleave_count_follows_the_body_length() -> None:
    assert interleave_count(LONG_BODY) == LONG_BODY_INTERLEAVE
    assert interleave_count(LONG_BODY - 1) == 0  # a short body: LLVM's own choice
    assert interleave_count(LONG_BODY, float_register_vectors=True) == NARROW_LONG_BODY_INTERLEAVE
    assert interleave_count(LONG_BODY - 1, float_register_vectors=True) == 0
    assert interleave_count(LONG_BODY, MAX_INTERLEAVED_ARRAYS) == LONG_BODY_INTERLEAVE
    assert interleave_count(LONG_BODY, MAX_INTERLEAVED_ARRAYS + 1) == 1  # addresses spill


LLM_GELU_BF16 = """input bf16 x[t, d], r[t, d], b[d];
h = x + b;
out = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r;"""
LLM_GELU_F32_BIAS = """input bf16 x[t, d], r[t, d];
input f32 b[d];
h = x + b;
out = bf16(0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r);"""


def test_loops_rounding_bf16_in_hardware_take_one_register_of_floats() -> None:
    """LLVM's cost model would vectorize a plain f32 -> bf16 loop 4 wide and the LLM GELU 32
    wide (two registers a value, constants reloaded each iteration): where the host rounds bf16
    in hardware each such loop is as wide as its float registers, a long one interleaved 8
    (whose parts `pair_bf16_parts` rounds two at a time on AVX-512)."""
    cpu = host_cpu()
    if not cpu.rounds_bf16:
        pytest.skip("this host has no AVX512_BF16")
    for source in ("out = bf16(x);", LLM_GELU_BF16):
        widths = re.findall(r"<(\d+) x float>", vector_body(xfuse.compile(source).llvm_ir))
        assert set(widths) == {str(cpu.float_lanes)}, source
    body = vector_body(xfuse.compile(LLM_GELU_BF16).llvm_ir)
    rounded = len(re.findall(r"fptrunc <\d+ x float>", body))
    assert rounded + 2 * body.count("cvtne2ps2bf16") == NARROW_LONG_BODY_INTERLEAVE


def test_bf16_loops_calling_libm_compile_silently(
    use_cpu: Callable[[str, str], HostCpu], capfd: pytest.CaptureFixture[str]
) -> None:
    """A loop that rounds bf16 in hardware and calls libm's `tanhf` cannot be vectorized: it
    gets no vector width, which made LLVM print "loop not vectorized" on stderr (a
    compile for an AVX512_BF16 host; nothing runs)."""
    features = "+avx2,+fma,+f16c,+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512bf16"
    assert use_cpu("sapphirerapids", features).rounds_bf16
    kernel = xfuse.compile("input bf16 x[n]; y = tanh(x);", math="libm")
    assert "@tanhf" in kernel.llvm_ir and "fptrunc" in kernel.llvm_ir
    assert capfd.readouterr().err == ""


def avx512_bf16_host() -> HostCpu:
    cpu = host_cpu()
    if not cpu.rounds_bf16 or cpu.float_lanes != 16:
        pytest.skip("this host has no AVX512_BF16 on 512-bit vectors")
    return cpu


@pytest.mark.parametrize("interleave", [None, 2])
def test_bf16_loop_parts_widen_and_round_in_pairs(
    interleave: int | None, use_cpu: Callable[[str, str], HostCpu]
) -> None:
    """On AVX-512 with AVX512_BF16, the LLM GELU (bf16 x, r and bias) takes two parts of 16
    elements at a time: each of its bf16 arrays is read 64 bytes at a time and widened by two
    unpacks with zero, not a zero-extending load and a shift a part, and its results are rounded
    by one `vcvtne2ps2bf16` a pair, then put in order by one permute of quadwords; the same
    bits as integer rounding in order, on every bf16 input, at sizes that stream and on rows with
    a remainder. The loop's straight path has no subnormal fixup: one mask test a pair checks
    that no result is a zero."""
    cpu = avx512_bf16_host()
    kernel = xfuse.compile(LLM_GELU_BF16, interleave=interleave)
    loop = hot_loop_mnemonics(kernel.asm)
    parts = interleave or NARROW_LONG_BODY_INTERLEAVE
    permutes = loop.count("vpermq") + loop.count("vpermpd")
    assert loop.count("vcvtne2ps2bf16") == permutes == loop.count("vptestmw") == parts // 2
    assert loop.count("vpunpcklwd") == loop.count("vpunpckhwd") == 3 * parts // 2
    assert "vpmovzxwd" not in loop and "vcvtneps2bf16" not in loop
    assert "vptestnmd" not in loop and "vpaddw" not in loop  # the fixup is out of line
    every = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(16, 4096)
    rng = np.random.default_rng(3)
    random = rng.standard_normal((300, 4096 + 40)).astype(ml_dtypes.bfloat16)
    cases = [
        (every, np.zeros_like(every), every[0]),  # the math on every x (and a bias of them)
        (np.zeros_like(every), every, every[1]),  # y + r is r: subnormals, zeros, inf, NaN
        (random, random[::-1], random[0]),  # 2.4 MB an array: streams; a remainder of 40
    ]
    results = [kernel(x=x, r=r, b=b) for x, r, b in cases]
    features = [f for f in cpu.features.split(",") if f not in ("+avx512bf16", "-prefer-256-bit")]
    use_cpu(cpu.name, ",".join([*features, "-avx512bf16"]))
    software = xfuse.compile(LLM_GELU_BF16, interleave=interleave)
    assert "vcvtne2ps2bf16" not in software.asm
    for (x, r, b), result in zip(cases, results, strict=True):
        np.testing.assert_array_equal(
            result.view(np.uint16), software(x=x, r=r, b=b).view(np.uint16)
        )


def test_bf16_pairs_fix_a_subnormal_in_any_one_lane() -> None:
    """A loop whose bf16 parts are paired stores its results unfixed, checks its f32 values for
    subnormals only in an iteration where some result is a zero, and fixes only then: with one
    subnormal result in one lane (each lane of 128 in turn), with none, with a zero, or with a
    zero and a subnormal, every element is ml_dtypes' rounding of the exact product (bf16 *
    bf16 is exact in f32 and f64), signs included."""
    avx512_bf16_host()
    kernel = xfuse.compile("input bf16 x, y; out = x * y;")
    loop = hot_loop_mnemonics(kernel.asm)
    assert "vcvtne2ps2bf16" in loop and "vptestnmd" not in loop and "vfpclassps" not in loop
    lanes = 128  # a multiple of the elements of one iteration
    rng = np.random.default_rng(4)
    shape = (4 * lanes, lanes)
    signs = rng.choice([-1.0, 1.0], shape)
    x = (signs * rng.uniform(1, 2, shape)).astype(ml_dtypes.bfloat16)
    y = rng.uniform(1, 2, shape).astype(ml_dtypes.bfloat16)
    lane, other = np.arange(lanes), (np.arange(lanes) + lanes // 2) % lanes
    subnormal = (lane, lane), (3 * lanes + lane, other)  # rows 0-127 and 384-511
    zero = 2 * lanes + lane, 3 * lanes + lane  # rows 256-511; rows 128-255 are all normal
    # 2^-70 * 2^-60 * [1, 4): subnormal products below 2^-126 that need rounding (ties too)
    for rows, columns in subnormal:
        x[rows, columns] *= ml_dtypes.bfloat16(2.0**-70)
        y[rows, columns] *= ml_dtypes.bfloat16(2.0**-60)
    for rows in zero:
        x[rows, lane] = np.where(signs[rows, lane] < 0, -0.0, 0.0)
    out = kernel(x=x, y=y)
    want = (x.astype(np.float64) * y.astype(np.float64)).astype(ml_dtypes.bfloat16)
    for rows, columns in subnormal:
        assert (np.abs(want[rows, columns].astype(np.float32)) < 2.0**-126).all()
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


TWO_BF16_PARTS = """define void @f(ptr %x, ptr %out, i64 %n) {
entry:
  br label %vector.body

vector.body:
  %index = phi i64 [ 0, %entry ], [ %index.next, %vector.body ]
  %p0 = getelementptr inbounds i16, ptr %x, i64 %index
  %p1 = getelementptr inbounds nuw i8, ptr %p0, i64 32
  %l0 = load <16 x i16>, ptr %p0, align 2
  %l1 = load <16 x i16>, ptr %p1, align 2
  %z0 = zext <16 x i16> %l0 to <16 x i32>
  %z1 = zext <16 x i16> %l1 to <16 x i32>
  %s0 = shl nuw <16 x i32> %z0, splat (i32 16)
  %s1 = shl nuw <16 x i32> %z1, splat (i32 16)
  %f0 = bitcast <16 x i32> %s0 to <16 x float>
  %f1 = bitcast <16 x i32> %s1 to <16 x float>
  %y0 = fmul <16 x float> %f0, splat (float 3.0)
  %y1 = fmul <16 x float> %f1, splat (float 3.0)
  %b0 = bitcast <16 x float> %y0 to <16 x i32>
  %b1 = bitcast <16 x float> %y1 to <16 x i32>
  %e0 = and <16 x i32> %b0, splat (i32 2139095040)
  %e1 = and <16 x i32> %b1, splat (i32 2139095040)
  %t0 = icmp eq <16 x i32> %e0, zeroinitializer
  %t1 = icmp eq <16 x i32> %e1, zeroinitializer
  %o0 = or <16 x i32> %b0, splat (i32 8388608)
  %o1 = or <16 x i32> %b1, splat (i32 8388608)
  %u0 = select <16 x i1> %t0, <16 x i32> %o0, <16 x i32> %b0
  %u1 = select <16 x i1> %t1, <16 x i32> %o1, <16 x i32> %b1
  %v0 = bitcast <16 x i32> %u0 to <16 x float>
  %v1 = bitcast <16 x i32> %u1 to <16 x float>
  %r0 = fptrunc <16 x float> %v0 to <16 x bfloat>
  %r1 = fptrunc <16 x float> %v1 to <16 x bfloat>
  %c0 = bitcast <16 x bfloat> %r0 to <16 x i16>
  %c1 = bitcast <16 x bfloat> %r1 to <16 x i16>
  %d0 = add <16 x i16> %c0, splat (i16 -128)
  %d1 = add <16 x i16> %c1, splat (i16 -128)
  %w0 = select <16 x i1> %t0, <16 x i16> %d0, <16 x i16> %c0
  %w1 = select <16 x i1> %t1, <16 x i16> %d1, <16 x i16> %c1
  %q0 = getelementptr inbounds i16, ptr %out, i64 %index
  %q1 = getelementptr inbounds nuw i8, ptr %q0, i64 32
  store <16 x i16> %w0, ptr %q0, align 2
  store <16 x i16> %w1, ptr %q1, align 2
  %index.next = add nuw i64 %index, 32
  %done = icmp eq i64 %index.next, %n
  br i1 %done, label %exit, label %vector.body

exit:
  %count = phi i64 [ %index.next, %vector.body ]
  ret void
}
"""
"""A vector loop as LLVM makes it of `out = bf16(3 * x)` on bf16 x: two parts of 16 elements
(widened, multiplied, rounded by `fptrunc` with the subnormal fixup); its exit has a phi of
the loop's last block."""


def test_pair_bf16_parts_pairs_a_loop_of_bf16_parts() -> None:
    """Two bf16 parts become one 64-byte load, unpacks, one `vcvtne2ps2bf16` and one permute
    of quadwords, the subnormal fixup in blocks of its own: the loop's last block is a new one,
    which the phis of the loop's header and exit name; the loop computes every bf16 input's
    `3 * x` rounded as ml_dtypes does."""
    paired = pair_bf16_parts(TWO_BF16_PARTS)
    assert paired.count("load <32 x i16>") == 1 and "store <8 x i64>" in paired
    assert "%count = phi i64 [ %index.next, %xfuse.pair0.latch ]" in paired
    assert "@llvm.x86.avx512bf16.cvtne2ps2bf16.512(" in paired
    llvm_binding.parse_assembly(paired).verify()
    avx512_bf16_host()
    native = compile_llvm_ir(TWO_BF16_PARTS)
    assert "vcvtne2ps2bf16" in native.asm and "vpunpcklwd" in native.asm
    x = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    out = run_loop(native, x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (x.astype(np.float32) * np.float32(3)).astype(ml_dtypes.bfloat16)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(out[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(out[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()


def test_pair_bf16_parts_renames_the_phis_of_a_loop_right_after() -> None:
    """A remainder loop whose block follows the paired loop's (LLVM's layout of a bf16 kernel's
    main loop and masked remainder loop, `ew-kernel-to-loops{bf16-only}`) enters from the
    paired loop's new last block: its phi names that block (it named the old one, and LLVM
    aborted the process on the broken function)."""
    exit_block = """  br i1 %done, label %exit, label %vector.body

exit:
  %count = phi i64 [ %index.next, %vector.body ]"""
    assert exit_block in TWO_BF16_PARTS
    remainder = TWO_BF16_PARTS.replace(
        exit_block,
        """  br i1 %done, label %vector.body7, label %vector.body

vector.body7:
  %rest = phi i64 [ %index.next, %vector.body ], [ %rest.next, %vector.body7 ]
  %rest.next = add nuw i64 %rest, 1
  %rest.done = icmp uge i64 %rest.next, %n
  br i1 %rest.done, label %exit, label %vector.body7

exit:
  %count = phi i64 [ %rest.next, %vector.body7 ]""",
    )
    llvm_binding.parse_assembly(remainder).verify()
    paired = pair_bf16_parts(remainder)
    assert "%rest = phi i64 [ %index.next, %xfuse.pair0.latch ], [ %rest.next, %vector.body7 ]" in (
        paired
    )
    llvm_binding.parse_assembly(paired).verify()


@pytest.mark.parametrize(
    ("line", "replacement"),
    [
        # a lane-crossing op
        (
            "%y1 = fmul <16 x float> %f1, splat (float 3.0)",
            "%y1 = shufflevector <16 x float> %f1, <16 x float> %f0, <16 x i32> "
            + "<"
            + ", ".join(f"i32 {i}" for i in range(1, 17))
            + ">",
        ),
        # parts that are not the consecutive halves of 32 elements
        ("ptr %q0, i64 32", "ptr %q0, i64 64"),
        # a call that is not an elementwise intrinsic
        (
            "%y1 = fmul <16 x float> %f1, splat (float 3.0)",
            "%y1 = call <16 x float> @g(<16 x float> %f1)",
        ),
        # a load that is not a bf16 widening
        ("%z1 = zext <16 x i16> %l1 to <16 x i32>", "%z1 = sext <16 x i16> %l1 to <16 x i32>"),
    ],
)
def test_pair_bf16_parts_leaves_other_loops_alone(line: str, replacement: str) -> None:
    """A body with a lane-crossing op, parts that do not pair, a call that is not elementwise
    or a load it does not know comes back as it was."""
    assert line in TWO_BF16_PARTS
    other = TWO_BF16_PARTS.replace(line, replacement)
    assert pair_bf16_parts(other) == other


@pytest.mark.parametrize(
    ("source", "interleave"),
    [
        (LLM_GELU_BF16, 1),  # one part: nothing to pair
        (LLM_GELU_F32_BIAS, None),  # an f32 bias: a load that is not a bf16 widening
        ("input f32 x; out = bf16(x);", None),  # f32 loads
    ],
)
def test_bf16_loops_that_do_not_pair_keep_their_parts(source: str, interleave: int | None) -> None:
    """`pair_bf16_parts` leaves a loop whose parts do not pair (one part), or that reads an
    array other than bf16, as LLVM made it: one `vcvtneps2bf16` a part."""
    avx512_bf16_host()
    loop = hot_loop_mnemonics(xfuse.compile(source, interleave=interleave).asm)
    assert "vcvtne2ps2bf16" not in loop and "vpunpcklwd" not in loop
    assert "vcvtneps2bf16" in loop


def vector_loop(element: str, parts: int, body: list[str], exit_phi: bool = False) -> str:
    """A function `f(x, out, n)` with a vector loop as LLVM makes one: its block `vector.body`
    points `%p0`, `%p1`, ... and `%q0`, `%q1`, ... at `parts` consecutive 32-byte parts of x
    and of out (arrays of `element`) from `%index`, runs `body` and steps `%index` by the
    parts' elements; with `exit_phi`, the exit block has a phi of the count."""
    lines = [
        "define void @f(ptr %x, ptr %out, i64 %n) {",
        "entry:",
        "  br label %vector.body",
        "",
        "vector.body:",
        "  %index = phi i64 [ 0, %entry ], [ %index.next, %vector.body ]",
        f"  %p0 = getelementptr inbounds {element}, ptr %x, i64 %index",
        f"  %q0 = getelementptr inbounds {element}, ptr %out, i64 %index",
    ]
    for part in range(1, parts):
        lines += [
            f"  %p{part} = getelementptr inbounds nuw i8, ptr %p0, i64 {32 * part}",
            f"  %q{part} = getelementptr inbounds nuw i8, ptr %q0, i64 {32 * part}",
        ]
    elements = parts * 32 // {"float": 4, "i16": 2}[element]
    count = ["  %count = phi i64 [ %index.next, %vector.body ]"] if exit_phi else []
    return "\n".join(
        [
            *lines,
            *body,
            f"  %index.next = add nuw i64 %index, {elements}",
            "  %done = icmp eq i64 %index.next, %n",
            "  br i1 %done, label %exit, label %vector.body",
            "",
            "exit:",
            *count,
            "  ret void",
            "}",
            "",
        ]
    )


def bf16_parts_in_software(parts: int = 2, low_bits: bool = False) -> str:
    """A vector loop as LLVM makes it of `out = bf16(3 * x)` on bf16 x where the host has no
    AVX512_BF16 (AVX2): `parts` parts of 16 elements, each rounded in integer ops
    (`narrow_bits`: NaNs quieted by a select). With `low_bits`, of x with its f32 bits' low
    half set, not `3 * x`: a NaN whose rounding would carry into its kept bits (a bf16 NaN
    times 3 has a low half of zeros), which LLVM's optimizer would fold."""
    body = []
    for k in range(parts):
        computed = (
            [
                f"  %v{k} = or <16 x i32> %s{k}, splat (i32 65535)",
                f"  %y{k} = bitcast <16 x i32> %v{k} to <16 x float>",
            ]
            if low_bits
            else [
                f"  %f{k} = bitcast <16 x i32> %s{k} to <16 x float>",
                f"  %y{k} = fmul <16 x float> %f{k}, splat (float 3.0)",
            ]
        )
        body += [
            f"  %l{k} = load <16 x i16>, ptr %p{k}, align 2",
            f"  %z{k} = zext <16 x i16> %l{k} to <16 x i32>",
            f"  %s{k} = shl nuw <16 x i32> %z{k}, splat (i32 16)",
            *computed,
            f"  %b{k} = bitcast <16 x float> %y{k} to <16 x i32>",
            f"  %k{k} = lshr <16 x i32> %b{k}, splat (i32 16)",
            f"  %o{k} = and <16 x i32> %k{k}, splat (i32 1)",
            f"  %h{k} = add <16 x i32> %b{k}, splat (i32 32767)",
            f"  %r{k} = add <16 x i32> %h{k}, %o{k}",
            f"  %d{k} = lshr <16 x i32> %r{k}, splat (i32 16)",
            f"  %m{k} = or <16 x i32> %k{k}, splat (i32 64)",
            f"  %u{k} = fcmp uno <16 x float> %y{k}, zeroinitializer",
            f"  %w{k} = select <16 x i1> %u{k}, <16 x i32> %m{k}, <16 x i32> %d{k}",
            f"  %c{k} = trunc nuw <16 x i32> %w{k} to <16 x i16>",
            f"  store <16 x i16> %c{k}, ptr %q{k}, align 2",
        ]
    return vector_loop("i16", parts, body, exit_phi=True)


def with_f32_bias(loop: str, late: bool = False) -> str:
    """`bf16_parts_in_software()`'s loop (two parts) computing `x + bias` with an f32 `bias`
    (a fourth argument), not `3 * x`; `late`: the pointer to the bias's second part made after
    the first part's value is used (a pair's load would come before its pointer)."""
    loop = loop.replace("i64 %n) {", "i64 %n, ptr %bias) {")
    for part in "01":
        loop = loop.replace(
            f"  %y{part} = fmul <16 x float> %f{part}, splat (float 3.0)",
            f"  %g{part} = load <16 x float>, ptr %e{part}, align 4\n"
            f"  %y{part} = fadd <16 x float> %f{part}, %g{part}",
        )
    first = "  %e0 = getelementptr inbounds float, ptr %bias, i64 %index\n"
    second = "  %e1 = getelementptr inbounds nuw i8, ptr %e0, i64 64\n"
    loop = loop.replace("  %l0 = ", first + ("" if late else second) + "  %l0 = ")
    if late:
        loop = loop.replace("  %l1 = ", second + "  %l1 = ")
    return loop


def test_pair_bf16_parts_deals_an_f32_array_into_even_and_odd_elements() -> None:
    """Beside bf16 parts paired as words, a pair of parts of an f32 array is loaded and dealt
    by two shuffles into the even elements and the odd ones: `x + bias` on every bf16 x and
    f32 biases no bf16 holds is ml_dtypes' rounding of the f32 sum, NaNs quieted. Where the
    pointer to its second part is made after the first part's value is used, the parts stay
    as they are (and the NaN quieting goes out of line)."""
    loop = with_f32_bias(bf16_parts_in_software())
    llvm_binding.parse_assembly(loop).verify()
    paired = pair_bf16_parts(loop)
    assert paired.count("shufflevector <16 x float>") == 2 and "load <16 x i32>" in paired
    native = compile_llvm_ir(loop)
    assert "xfuse.pair0.floats0.even" in native.optimized_ir
    function = ctypes.CFUNCTYPE(
        None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p
    )(native.address("f"))
    x = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    bias = np.random.default_rng(8).standard_normal(x.size).astype(np.float32) * 3
    out = np.empty_like(x)
    function(x.ctypes.data, out.ctypes.data, x.size, bias.ctypes.data)
    with np.errstate(over="ignore", invalid="ignore"):
        want = rounded_as_narrow_bits(x.astype(np.float32) + bias)
    np.testing.assert_array_equal(out.view(np.uint16), want)
    late = with_f32_bias(bf16_parts_in_software(), late=True)
    llvm_binding.parse_assembly(late).verify()
    kept = pair_bf16_parts(late)
    assert "shufflevector" not in kept and "xfuse.pair0.fixup:" in kept
    llvm_binding.parse_assembly(kept).verify()


def run_loop(native: NativeModule, x: np.ndarray) -> np.ndarray:
    """The bits that the loop `f(x, out, n)` of `native` (`TWO_BF16_PARTS`',
    `bf16_parts_in_software`'s) makes of bf16 `x`."""
    loop = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        native.address("f")
    )
    out = np.empty_like(x)
    loop(x.ctypes.data, out.ctypes.data, x.size)
    return out.view(np.uint16)


def rounded_as_narrow_bits(values: np.ndarray) -> np.ndarray:
    """The bits of the f32 `values` rounded to bf16 as `narrow_bits` rounds: to nearest even
    as ml_dtypes, and a NaN to its sign, its top bits and the quiet bit."""
    quieted = ((values.view(np.uint32) >> 16) | 0x40).astype(np.uint16)
    with np.errstate(invalid="ignore"):  # NaN
        rounded = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    return np.where(np.isnan(values), quieted, rounded)


def test_pair_bf16_parts_pairs_a_loop_rounding_in_software() -> None:
    """Two bf16 parts rounded in integer ops become one load of 32-bit words, whose low halves
    a shift widens and whose high halves a mask, and one store of words, NaNs' quieting in
    a block of its own (the loop's last block a new one, which the phis name); no shuffle.
    The loop computes every bf16 input's `3 * x` bit for bit as the parts did: NaNs (in both
    halves of a word) quieted with their signs and the top of their payloads."""
    paired = pair_bf16_parts(bf16_parts_in_software())
    assert paired.count("load <16 x i32>") == 1 and "shufflevector" not in paired
    assert paired.count("store <16 x i32>") == 2 and "store <16 x i16>" not in paired
    assert "%count = phi i64 [ %index.next, %xfuse.pair0.latch ]" in paired
    assert "declare" not in paired
    llvm_binding.parse_assembly(paired).verify()
    native = compile_llvm_ir(bf16_parts_in_software())
    assert "xfuse.pair0.fixup" in native.optimized_ir
    every = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = rounded_as_narrow_bits(every.astype(np.float32) * np.float32(3))
    np.testing.assert_array_equal(run_loop(native, every), want)


@pytest.mark.parametrize("parts", [4, 3, 1])
def test_software_bf16_rounding_quiets_a_nan_in_any_one_lane(parts: int) -> None:
    """A loop whose bf16 parts round in integer ops stores numbers' rounded bits, checks for
    NaNs one compare for two parts and stores again only where there is one: paired (4 parts)
    or not (3 parts, 1), a NaN whose rounding would carry, of either sign and with and without
    the quiet bit, in each lane of an iteration in turn (in pairs the even and the odd halves
    of every word), next to numbers, is quieted and the numbers rounded; and every bf16 input
    so."""
    loop = bf16_parts_in_software(parts, low_bits=True)
    rewritten = pair_bf16_parts(loop)
    assert rewritten.count(".nan = fcmp uno") == (parts + 1) // 2
    # Not optimized first: LLVM would fold the low half's bits into the rounding.
    native = compile_llvm_ir(loop, 0, codegen_level=2)
    assert "xfuse.pair0.fixup" in native.optimized_ir
    lanes = 16 * parts
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, (4 * lanes, lanes)).astype(ml_dtypes.bfloat16)
    nans = np.array([0x7F81, 0xFFC1, 0x7FFF, 0xFF80 | 0x2A], dtype=np.uint16)
    lane = np.arange(4 * lanes) % lanes
    x[np.arange(4 * lanes), lane] = nans.view(ml_dtypes.bfloat16).repeat(lanes)
    every = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    every = np.concatenate([every, np.zeros(-every.size % lanes, every.dtype)])
    for inputs in (x.reshape(-1), every):
        values = ((inputs.view(np.uint16).astype(np.uint32) << 16) | 0xFFFF).view(np.float32)
        np.testing.assert_array_equal(run_loop(native, inputs), rounded_as_narrow_bits(values))


@pytest.mark.parametrize(
    ("line", "replacement", "quieted_out_of_line"),
    [
        # a vector constant whose lanes differ (each lane would meet another element's)
        (
            "%y1 = fmul <16 x float> %f1, splat (float 3.0)",
            "%y1 = fmul <16 x float> %f1, <" + ", ".join(f"float {k}.0" for k in range(16)) + ">",
            True,
        ),
        # parts that are not the consecutive halves of 32 elements
        ("ptr %q0, i64 32", "ptr %q0, i64 64", True),
        # a store of words other than `narrow_bits`' choice
        (
            "%c1 = trunc nuw <16 x i32> %w1 to <16 x i16>",
            "%c1 = trunc nuw <16 x i32> %b1 to <16 x i16>",
            False,
        ),
        # NaN's bits not its kept bits quieted
        (
            "%m1 = or <16 x i32> %k1, splat (i32 64)",
            "%m1 = or <16 x i32> %k1, splat (i32 65)",
            False,
        ),
        # lanes chosen by another condition than a NaN
        (
            "%u1 = fcmp uno <16 x float> %y1, zeroinitializer",
            "%u1 = fcmp uno <16 x float> %y1, %y0",
            False,
        ),
    ],
)
def test_pair_bf16_parts_leaves_other_software_loops_unpaired(
    line: str, replacement: str, quieted_out_of_line: bool
) -> None:
    """A body rounding in integer ops with a vector constant of different lanes or parts that
    do not pair keeps its parts (its NaN quieting goes out of line all the same); one with a
    store or a NaN's result it does not know comes back as it was."""
    assert line in bf16_parts_in_software()
    other = bf16_parts_in_software().replace(line, replacement)
    llvm_binding.parse_assembly(other).verify()
    rewritten = pair_bf16_parts(other)
    assert "load <16 x i32>" not in rewritten and "store <16 x i32>" not in rewritten
    assert ("xfuse.pair0.fixup:" in rewritten) == quieted_out_of_line
    assert (rewritten == other) == (not quieted_out_of_line)
    llvm_binding.parse_assembly(rewritten).verify()


SOFTWARE_BF16_CPUS = {
    "znver3": "+sse4.2,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+popcnt,+lzcnt,+movbe",
    "skylake-avx512": "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512dq,+avx512vl",
}
"""CPUs that round bf16 in integer ops: AVX2 (parts of 16 lanes, two registers) and AVX-512
without AVX512_BF16 (parts of 32 lanes)."""


@pytest.mark.parametrize("cpu", SOFTWARE_BF16_CPUS)
def test_bf16_loop_parts_round_in_software_in_pairs(
    cpu: str, use_cpu: Callable[[str, str], HostCpu]
) -> None:
    """Without AVX512_BF16 the LLM GELU (bf16 x and r, a bf16 or an f32 bias) reads each bf16
    array as 32-bit words and stores words: no zero-extending load, no pack or permute, and no
    blend for NaNs on the loop's straight path; an f32 bias is dealt into even and odd elements
    by shuffles. The same bits as the unpaired loop (`interleave=1`: one part), NaNs where it
    has them, on every bf16 input, at sizes that stream and on rows with a remainder."""
    if "avx512f" in SOFTWARE_BF16_CPUS[cpu] and not host_cpu().has("avx512f"):
        pytest.skip("this host has no AVX-512")
    assert not use_cpu(cpu, SOFTWARE_BF16_CPUS[cpu]).rounds_bf16
    every = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(16, 4096)
    random = np.random.default_rng(6).standard_normal((300, 4096 + 40)).astype(ml_dtypes.bfloat16)
    cases = [
        (every, np.zeros_like(every), every[0]),
        (np.zeros_like(every), every, every[1]),
        (every, every[::-1], every[7]),
        (random, random[::-1], random[0]),
    ]
    for source, bias in ((LLM_GELU_BF16, "bf16"), (LLM_GELU_F32_BIAS, "f32")):
        kernel = xfuse.compile(source)
        loop = hot_loop_mnemonics(kernel.asm)
        for widening_or_packing in ("vpmovzxwd", "vpackusdw", "vblendvps", "vpblendmd"):
            assert widening_or_packing not in loop, (bias, widening_or_packing)
        assert "vcmpunordps" in loop or "vcmpps" in loop
        unpaired = xfuse.compile(source, interleave=1)
        assert ".load0.even = shl" in kernel.llvm_ir and ".even" not in unpaired.llvm_ir
        assert (".floats0.even = shufflevector" in kernel.llvm_ir) == (bias == "f32")
        for x, r, b in cases:
            if bias == "f32":  # f32 values that no bf16 holds
                with np.errstate(invalid="ignore"):  # NaN
                    b = b.astype(np.float32) * np.float32(1 + 2**-20)
            got, want = kernel(x=x, r=r, b=b), unpaired(x=x, r=r, b=b)
            nan = np.isnan(want.astype(np.float32))
            np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
            np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def f32_loop(multiplies: int) -> str:
    """A vector loop as LLVM makes it of `out = x * 3 * 3 ...` (`multiplies` products a part)
    on f32 x: four parts of 8 elements (32 bytes), so two a cache line."""
    body = []
    for part in range(4):
        body.append(f"  %y{part}.0 = load <8 x float>, ptr %p{part}, align 4")
        body += [
            f"  %y{part}.{k + 1} = fmul <8 x float> %y{part}.{k}, splat (float 3.0)"
            for k in range(multiplies)
        ]
        body.append(f"  store <8 x float> %y{part}.{multiplies}, ptr %q{part}, align 4")
    return vector_loop("float", 4, body)


def test_prefetch_loads_prefetches_each_line_a_compute_heavy_loop_loads() -> None:
    """A loop of 4 float ops of 64-byte vectors per cache line it loads and stores (32 products
    of 32 bytes over 4 lines) prefetches `PREFETCH_DISTANCE` bytes ahead of its loads, one
    prefetch a line (the parts at 0 and 64 bytes, not those at 32 and 96), into every cache
    level; one of 2 (16 such products: 32-byte ops count for half) does not."""
    heavy = prefetch_loads(f32_loop(8))
    prefetched = re.findall(r"getelementptr i8, ptr (%p\d), i64 (\d+)", heavy)
    assert prefetched == [("%p0", str(PREFETCH_DISTANCE)), ("%p2", str(PREFETCH_DISTANCE))]
    assert heavy.count("call void @llvm.prefetch.p0(ptr %xfuse.prefetch0.") == 2
    assert ", i32 0, i32 3, i32 1)" in heavy
    llvm_binding.parse_assembly(heavy).verify()
    # A module that declares the intrinsic already (as LLVM prints it: with attributes).
    declared = f32_loop(8) + "declare void @llvm.prefetch.p0(ptr readonly, i32, i32, i32)\n"
    llvm_binding.parse_assembly(prefetch_loads(declared)).verify()
    assert prefetch_loads(f32_loop(4)) == f32_loop(4)
    assert prefetch_loads(TWO_BF16_PARTS) == TWO_BF16_PARTS


GELU_EXP2_MAGIC = "0x4168000FC0000000"
"""1.5 * 2^23 + 126 as LLVM prints it: the rounding magic of GELU's exp2 (`_exp2_of_logistic`)."""


def rounded_remainder_loop(
    high: str = "1.285000e+02", low: str = "-3.000000e+01", magic: str = GELU_EXP2_MAGIC
) -> str:
    """A vector loop as O3 makes GELU's exp2 of one `<16 x float>` part: t = v clamped to
    [low, high] by two selects, then r = t - ((t + magic) - magic), stored."""
    negated = f"0xC{magic[3:]}"
    body = [
        "  %v = load <16 x float>, ptr %p0, align 4",
        f"  %above = fcmp ogt <16 x float> %v, splat (float {high})",
        f"  %high = select <16 x i1> %above, <16 x float> splat (float {high}), <16 x float> %v",
        f"  %below = fcmp olt <16 x float> %high, splat (float {low})",
        f"  %t = select <16 x i1> %below, <16 x float> splat (float {low}), <16 x float> %high",
        f"  %shifted = fadd contract <16 x float> %t, splat (float {magic})",
        f"  %rounded = fadd contract <16 x float> %shifted, splat (float {negated})",
        "  %r = fsub contract <16 x float> %t, %rounded",
        "  store <16 x float> %r, ptr %q0, align 4",
    ]
    return vector_loop("float", 2, body)


def test_reduce_rounded_remainders_takes_a_clamped_remainder_in_one_op() -> None:
    """GELU's r = t - ((t + m) - m) of a t clamped to [-30, 128.5] becomes one `vreduceps`
    of t (AVX512DQ), declared once; what the trick rounded stays (the shifted sum's bits)."""
    loop = rounded_remainder_loop()
    reduced = reduce_rounded_remainders(loop)
    assert (
        "  %r = call <16 x float> @llvm.x86.avx512.mask.reduce.ps.512(<16 x float> %t, i32 0,"
        " <16 x float> %t, i16 -1, i32 4)"
    ) in reduced
    assert reduced.count("declare <16 x float> @llvm.x86.avx512.mask.reduce.ps.512(") == 1
    assert "%shifted = fadd contract <16 x float> %t" in reduced
    llvm_binding.parse_assembly(reduced).verify()


@pytest.mark.parametrize(
    ("loop", "why"),
    [
        (rounded_remainder_loop(high="8.388608e+06"), "a bound beyond 2^21"),
        (rounded_remainder_loop(low="-8.388608e+06"), "a bound beyond -2^21"),
        (rounded_remainder_loop(magic="0x4168000FE0000000"), "an odd offset: other ties"),
        (rounded_remainder_loop(magic="0x4170000000000000"), "2^24: no rounding magic"),
        (
            rounded_remainder_loop().replace("%t, splat (float 0x41", "%v, splat (float 0x41"),
            "t unclamped",
        ),
        (
            rounded_remainder_loop().replace(
                "%below = fcmp olt <16 x float> %high", "%below = fcmp olt <16 x float> %v"
            ),
            "a select of another value's compare",
        ),
        (
            rounded_remainder_loop().replace("splat (float 0xC168000FC0000000)", "%v"),
            "no magic taken off",
        ),
        (rounded_remainder_loop().replace("<16 x", "<8 x"), "an AVX2 vector"),
    ],
)
def test_reduce_rounded_remainders_leaves_other_differences(loop: str, why: str) -> None:
    """Only the trick's remainder of a value clamped within 2^21 is a `vreduceps`: elsewhere
    the trick's rounding may differ from it (or there is no `<16 x float>` one)."""
    assert reduce_rounded_remainders(loop) == loop, why


def logistic_exp2_loop(high: str = "1.285000e+02", low: str = "-3.000000e+01") -> str:
    """`rounded_remainder_loop` as `reduce_rounded_remainders` leaves it, then GELU's 1 + 2^t
    from it: 2 e^r (a stand-in product) times 2^(n-1) from t + m's bits shifted left 23."""
    loop = reduce_rounded_remainders(rounded_remainder_loop(high, low))
    scaling = [
        "  %e = fmul contract <16 x float> %r, splat (float 2.000000e+00)",
        "  %words = bitcast <16 x float> %shifted to <16 x i32>",
        "  %exponent = shl <16 x i32> %words, splat (i32 23)",
        "  %scale = bitcast <16 x i32> %exponent to <16 x float>",
        "  %power = fmul contract <16 x float> %e, %scale",
        "  %denominator = fadd contract <16 x float> %power, splat (float 1.000000e+00)",
        "  store <16 x float> %denominator, ptr %q1, align 4",
    ]
    stored = "  store <16 x float> %r, ptr %q0, align 4"
    return loop.replace(stored, "\n".join([stored, *scaling]))


def test_saturate_exp2s_drops_a_clamp_that_only_saturates() -> None:
    """GELU's exp2, clamped to [-30, 128.5] and only added to 1, is computed on t unclamped:
    t + m and `vreduceps` of the unclamped value, 2^(n-1) by `vscalefps` of the exponent
    t + m - (1.5 * 2^23 + 127) (the shifted bits' own), the add of 1 as it was."""
    saturated = saturate_exp2s(logistic_exp2_loop())
    assert "%shifted = fadd contract <16 x float> %v, splat (float 0x4168000FC0000000)" in saturated
    assert "@llvm.x86.avx512.mask.reduce.ps.512(<16 x float> %v, i32 0," in saturated
    assert (
        "  %xfuse.exponent0.power = fadd <16 x float> %shifted, splat (float 0xC168000FE0000000)"
    ) in saturated
    assert (
        "  %power = call <16 x float> @llvm.x86.avx512.mask.scalef.ps.512(<16 x float> %e,"
        " <16 x float> %xfuse.exponent0.power, <16 x float> %e, i16 -1, i32 4)"
    ) in saturated
    assert (
        "%denominator = fadd contract <16 x float> %power, splat (float 1.000000e+00)" in saturated
    )
    llvm_binding.parse_assembly(saturated).verify()


@pytest.mark.parametrize(
    ("loop", "why"),
    [
        (logistic_exp2_loop(low="-2.000000e+01"), "1 + 2^-20 is not 1: the clamp counts"),
        (logistic_exp2_loop(high="1.270000e+02"), "2^127 is finite: the clamp counts"),
        (
            logistic_exp2_loop().replace(
                "store <16 x float> %denominator", "store <16 x float> %power"
            ),
            "2^t used other than added to 1",
        ),
        (
            logistic_exp2_loop().replace("splat (float 1.000000e+00)", "splat (float 3.0)"),
            "2^t added to 3",
        ),
        (
            logistic_exp2_loop().replace(
                "shl <16 x i32> %words, splat (i32 23)", "shl <16 x i32> %words, splat (i32 22)"
            ),
            "not the exponent's bits",
        ),
        (
            logistic_exp2_loop().replace(
                "store <16 x float> %r, ptr %q0", "store <16 x float> %shifted, ptr %q0"
            ),
            "t + m used for more than 2^n",
        ),
        (rounded_remainder_loop(), "no scaling"),
    ],
)
def test_saturate_exp2s_keeps_a_clamp_that_counts(loop: str, why: str) -> None:
    """Where the clamp does more than saturate 1 + 2^t (or there is no such exp2), it stays."""
    assert saturate_exp2s(loop) == loop, why


def test_avx512dq_hosts_take_gelus_rounded_remainders_in_one_op(
    use_cpu: Callable[[str, str], HostCpu],
) -> None:
    """tanh-GELU's main loop (4 parts) takes its exp2's remainders in 4 `vreduceps` and its
    2^(n-1) by 4 `vscalefps`, unclamped, where the host has AVX512DQ (Zen 4: code only read
    here), in two adds and a subtraction a part, clamped by a minimum and a maximum, on AVX2
    (Zen 3); the LLM bf16 GELU's (8 parts) in 8."""
    gelu = "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));"
    for cpu, parts in ((("znver4", ZEN4_FEATURES), 4), (ZEN3, 0)):
        assert use_cpu(*cpu).reduces_remainders == bool(parts)
        loop = hot_loop_mnemonics(xfuse.compile(gelu).asm)
        assert loop.count("vreduceps") == parts
        assert loop.count("vsubps") == (0 if parts else 4)
        # the clamp gone where `vscalefps` saturates 2^t (`saturate_exp2s`)
        assert loop.count("vscalefps") == parts
        assert loop.count("vminps") == loop.count("vmaxps") == (0 if parts else 4)
    use_cpu("znver4", ZEN4_FEATURES)
    assert hot_loop_mnemonics(xfuse.compile(LLM_GELU_BF16).asm).count("vreduceps") == 8


@pytest.mark.skipif(not host_cpu().has("avx512dq"), reason="runs AVX512DQ code")
@pytest.mark.parametrize(
    "source",
    [
        "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));",
        "out = 0.5 * x * (1 + tanh(0.7978845608 * x));",
        "out = 0.5 * x * (1 + tanh(0.7978845608 * y));",  # a NaN t, not x, gives the NaN
        LLM_GELU_BF16,
        LLM_GELU_F32_BIAS,
    ],
)
def test_rounded_remainders_in_one_op_keep_every_bit(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loops with `vreduceps` give the bits of those without, on a sweep of float32 bit
    patterns (every 4099th: signed zeros, subnormals, infinities and NaNs among them), or
    every bf16 one, and the clamp's bounds (t = -30 and 128.5 at x = +-inf and about -10)."""
    reduced = xfuse.compile(source)
    assert "vreduceps" in reduced.asm
    monkeypatch.setattr(HostCpu, "reduces_remainders", property(lambda _cpu: False))
    monkeypatch.setenv("XFUSE_CACHE", "0")  # the disk cache has the loops with `vreduceps`
    clear_cache()
    kept = xfuse.compile(source)
    assert "vreduceps" not in kept.asm
    if "bf16" in source:
        x = np.arange(2**16, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(64, 1024)
        r = np.roll(x, 7, axis=1)
        b = np.roll(x[0], 3).astype(np.float32 if "f32 b" in source else ml_dtypes.bfloat16)
        arguments = {"x": x, "r": r, "b": b}
    else:
        patterns = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
        near_bounds = np.float32([-10.1, -10.05, -10.0, -9.99, 0.0, -0.0, np.inf, -np.inf])
        values = np.concatenate([patterns.view(np.float32), near_bounds])
        arguments = {name: np.roll(values, 7 * k) for k, name in enumerate(reduced.input_names)}
    got, want = reduced(**arguments), kept(**arguments)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(
        got.view(np.uint16 if got.itemsize == 2 else np.uint32),
        want.view(np.uint16 if want.itemsize == 2 else np.uint32),
    )


@pytest.fixture
def intel_core(use_cpu: Callable[[str, str], HostCpu], host_features: str) -> HostCpu:
    """This host's features under the name of an Intel core, where compute-heavy loops
    prefetch (`HostCpu.prefetches`): code that runs here."""
    return use_cpu("sapphirerapids", host_features)


ZEN4_FEATURES = f"{ZEN3[1]},+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512bf16"
"""Zen 4's and Zen 5's vector features (as listed in full: `HostCpu` reads them)."""


INTEL_AVX512_FEATURES = f"{ZEN4_FEATURES},+avx512fp16"
"""The vector features of Intel's AVX-512 server cores (Sapphire Rapids on), as listed in full."""


@pytest.fixture(params=["host", "avx512"])
def intel_core_to_read(
    request: pytest.FixtureRequest, use_cpu: Callable[[str, str], HostCpu], host_features: str
) -> HostCpu:
    """An Intel core with this host's features, then with AVX-512's: code a test only reads, so
    that an AVX2 host checks AVX-512's too (the suite written on Zen 3 missed f32 sine's cold
    blocks, laid out after the 512-bit loop)."""
    features = host_features if request.param == "host" else INTEL_AVX512_FEATURES
    return use_cpu("sapphirerapids", features)


@pytest.mark.parametrize(
    ("source", "prefetches"),
    [
        ("out = x * sigmoid(x);", True),
        (LLM_GELU_BF16, True),
        ("out = x + b + r;", False),  # a streaming kernel: the benchmarks' ceiling
        ("out = x * min(max(x + 3, 0), 6) / 6;", True),  # hardswish: 2.5 float ops a line
        ("out = x * rsqrt(y * y + 0.001) * z;", True),  # 3.75
        ("out = (x * 0.5 + 1) * x + 2;", False),  # 2
        pytest.param(  # a call of libmvec's sinf counts as its ops (at 2^24: 0.59 -> 0.37 ns)
            "out = sin(30 * x);",
            True,
            marks=pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec"),
        ),
    ],
)
def test_compute_heavy_loops_prefetch_every_line_they_load(
    source: str, prefetches: bool, intel_core_to_read: HostCpu
) -> None:
    """Each line an iteration of a compute-heavy loop loads is prefetched once (the bf16
    loop's too, whose loads `pair_bf16_parts` replaced); a loop of little math has none."""
    assert intel_core_to_read.prefetches
    kernel = xfuse.compile(source)
    loop = hot_loop_mnemonics(kernel.asm)
    body = vector_body(kernel.llvm_ir)
    loaded_bytes = sum(
        int(lanes) * {"float": 4, "i32": 4, "i16": 2}[element]
        for lanes, element in re.findall(r"= load <(\d+) x (float|i32|i16)>", body)
    )
    # lines, a part one too: an AVX2 iteration loading 32 bytes of an array prefetches once
    # (each line twice over two iterations)
    loaded = -(-loaded_bytes // 64)
    assert loop.count("prefetcht0") == (loaded if prefetches else 0)
    assert ("prefetcht0" in loop) == prefetches
    distances = set(PREFETCHED_OFFSET.findall(kernel.llvm_ir))
    assert distances == ({str(PREFETCH_DISTANCE)} if prefetches else set())


PREFETCHED_OFFSET = re.compile(
    r"= getelementptr i8, ptr %[^,]+, i64 (\d+)\n\s+call void @llvm\.prefetch"
)
"""The byte offset of each prefetched address from its load's (`prefetch_loads`)."""


@pytest.mark.parametrize(
    ("cpu", "prefetches"),
    [
        (ZEN3, True),
        (("znver1", ZEN3[1]), False),
        (("znver2", ZEN3[1]), False),
        (("znver4", ZEN4_FEATURES), False),
        (("znver5", ZEN4_FEATURES), False),
    ],
)
def test_amd_zen_cores_prefetch_where_it_was_measured_to_pay(
    cpu: tuple[str, str], prefetches: bool, use_cpu: Callable[[str, str], HostCpu]
) -> None:
    """On Zen 4 the prefetches made loops of several inputs slower (none there nor on Zen 5,
    nor on the unmeasured Zen 1 and 2); on Zen 3 they took 0.90-1.05x the time
    (docs/benchmarks.md): its loops prefetch, 2 KiB ahead where Intel's prefetch 4
    (`ZEN3_PREFETCH_DISTANCE`)."""
    assert use_cpu(*cpu).prefetches == prefetches
    for source in ("out = x * sigmoid(x);", "out = x * rsqrt(y * y + 0.001) * z;"):
        kernel = xfuse.compile(source)
        assert ("llvm.prefetch" in kernel.llvm_ir) == prefetches
        assert ("prefetcht0" in kernel.asm) == prefetches
        distances = set(PREFETCHED_OFFSET.findall(kernel.llvm_ir))
        assert distances == ({str(ZEN3_PREFETCH_DISTANCE)} if prefetches else set())


def test_prefetches_past_the_arrays_end_do_not_fault(
    monkeypatch: pytest.MonkeyPatch, intel_core: HostCpu
) -> None:
    """A compute-heavy loop prefetches past the end of its input: into a page that may not be
    read, which does not fault; and the results are the bits of the loop without prefetches."""
    page = mmap.PAGESIZE
    mapping = mmap.mmap(-1, 2 * page)
    libc = ctypes.CDLL(None, use_errno=True)
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    no_access = 0  # PROT_NONE, which the mmap module does not name
    assert libc.mprotect(ctypes.c_void_p(address + page), page, no_access) == 0
    try:
        x = np.frombuffer(mapping, np.float32, page // 4)  # ends where the guard page starts
        x[:] = np.linspace(-30, 30, x.size, dtype=np.float32)
        kernel = xfuse.compile("out = x * sigmoid(x);")
        assert "prefetcht0" in kernel.asm
        result = kernel(x=x)
        monkeypatch.setattr(optimized_ir, "PREFETCH_MIN_FLOAT_OPS", 10**9)
        monkeypatch.setenv("XFUSE_CACHE", "0")  # the disk cache has the loop with prefetches
        clear_cache()
        plain = xfuse.compile("out = x * sigmoid(x);")
        assert "prefetcht0" not in plain.asm
        np.testing.assert_array_equal(result.view(np.uint32), plain(x=x).view(np.uint32))
        del x
    finally:
        libc.mprotect(ctypes.c_void_p(address + page), page, mmap.PROT_READ | mmap.PROT_WRITE)
        clear_cache()


@pytest.mark.parametrize(
    ("arrays", "stores"),
    [(MAX_INTERLEAVED_ARRAYS, LONG_BODY_INTERLEAVE), (MAX_INTERLEAVED_ARRAYS + 1, 1)],
)
def test_a_loop_over_more_arrays_than_registers_is_not_interleaved(
    arrays: int, stores: int, target_cpu: HostCpu
) -> None:
    """A long loop body over more arrays than x86-64 has registers for their addresses is not
    interleaved, and where the host masks its loads and stores its tail is masked: one vector
    loop, no vector epilogue, no scalar loop (each a copy of all those addresses, whose
    register allocation and Loop Strength Reduction were most of LLVM's time)."""
    names = [f"x{i}" for i in range(arrays - 1)]
    kernel = xfuse.compile(f"out = {' + '.join(names)};")
    body = function_bodies(kernel.llvm_ir)["main.packed"]
    if arrays > MAX_INTERLEAVED_ARRAYS and target_cpu.masks(4):
        (loop,) = vector_loops(body)
        assert loop.count("call void @llvm.masked.store") == stores
        assert "vec.epilog" not in body and not re.search(r"store float ", body)
    else:
        assert vector_stores_per_iteration(kernel.llvm_ir) == stores
        (loop,) = vector_loops(body)
        assert "llvm.masked." not in loop
    rng = np.random.default_rng(5)
    for n in (0, 1, 15, 17, 100):
        inputs = {name: rng.standard_normal(n, dtype=np.float32) for name in names}
        expected = functools.reduce(np.add, inputs.values())  # left to right, as written
        np.testing.assert_array_equal(kernel(**inputs), expected)


@pytest.mark.parametrize(
    ("interleave", "error"),
    [
        (-1, ValueError),
        (3, ValueError),
        (6, ValueError),
        (12, ValueError),
        (17, ValueError),
        (32, ValueError),
        (2.0, TypeError),
        (True, TypeError),
    ],
)
def test_bad_interleave_is_rejected(interleave: object, error: type[Exception]) -> None:
    """LLVM's loop vectorizer ignores an interleave hint that is not a power of two up to 16: 6
    was accepted and compiled to LLVM's own choice (interleave 1 for a long body), silently."""
    message = r"interleave must be None, 0 or a power of two up to 16 \(LLVM's loop vectorizer"
    with pytest.raises(error, match=message):
        Options(interleave=interleave)  # type: ignore[arg-type]


@pytest.mark.parametrize("interleave", [2, 4, 8, 16])
def test_each_accepted_interleave_is_the_loops(interleave: int) -> None:
    """An accepted count is what LLVM interleaves: silu's hot loop divides once a vector."""
    loop = hot_loop_mnemonics(xfuse.compile("out = x * sigmoid(x);", interleave=interleave).asm)
    assert loop.count("vdivps") == interleave


def test_streaming_twin_stores_past_the_cache(target_cpu: HostCpu) -> None:
    """A single-kernel program gets a streaming twin whose vector stores are non-temporal (and
    aligned: the runtime calls it on 64-byte aligned outputs) with an `sfence` before it returns;
    the function itself keeps normal stores."""
    kernel = compile_text(GELU_KERNEL, ["x", "b", "r"], math="approx")
    bodies = function_bodies(kernel.llvm_ir)
    assert set(bodies) == {"main.packed", "main.streaming.packed"}
    lanes = target_cpu.float_lanes
    assert "!nontemporal" not in bodies["main.packed"]
    streaming = bodies["main.streaming.packed"]
    assert re.search(rf"store <{lanes} x float> .*, align {lanes * 4}, !nontemporal", streaming)
    assert "call void @llvm.x86.sse.sfence()" in streaming
    assert "vmovntps" in kernel.asm and "sfence" in kernel.asm
    assert kernel.function.streaming_entry is not None
    assert (
        compile_text(GELU_KERNEL, ["x", "b", "r"], streaming=False).function.streaming_entry is None
    )


def test_a_loop_nests_streaming_twin_stores_whole_rows_past_the_cache(
    target_cpu: HostCpu, gelu: Gelu
) -> None:
    """The twin of a [t, d] program with a [d] bias: its entry promises LLVM rows of whole
    cache lines (`llvm.assume` on d, which the runtime checks), so the inner loop's vector
    stores are aligned and non-temporal; the function itself keeps normal stores."""
    kernel = xfuse.compile(gelu.shaped_source)
    bodies = function_bodies(kernel.llvm_ir)
    lanes = target_cpu.float_lanes
    assert "!nontemporal" not in bodies["main.packed"]
    streaming = bodies["main.streaming.packed"]
    assert "call void @llvm.assume(" in streaming
    assert re.search(rf"store <{lanes} x float> .*, align {lanes * 4}, !nontemporal", streaming)
    assert not re.search(r"store <\d+ x float> .*, align 4,", streaming)


def test_libm_tanh_is_a_call(gelu_approx: Kernel) -> None:
    libm = compile_text(GELU_KERNEL, ["x", "b", "r"], math="libm")
    assert "call float @tanhf" in libm.llvm_ir or "tail call float @tanhf" in libm.llvm_ir
    assert "tanhf" not in gelu_approx.llvm_ir


def test_unaligned_buffers(gelu_approx: Kernel, gelu: Gelu) -> None:
    n = 1001
    storage = np.zeros(4 * n + 16, np.float32)
    # Offsets of 1 and 3 floats: 4- and 12-byte aligned only, never 16/64.
    x, b, r = storage[1 : n + 1], storage[n + 3 : 2 * n + 3], storage[2 * n + 5 : 3 * n + 5]
    x[:] = np.linspace(-5, 5, n)
    b[:] = 0.25
    r[:] = -1
    out = storage[3 * n + 7 : 4 * n + 7]
    gelu_approx(x=x, b=b, r=r, out=out)
    np.testing.assert_allclose(out, gelu.reference(x, b, r), atol=2e-6)


def test_temporaries_live_in_the_workspace() -> None:
    kernel = compile_text(UNFUSED_TEMPORARY, ["x"], math="libm")
    assert "memref.view %workspace" in kernel.ir("ew-workspace")
    assert "@malloc" not in kernel.llvm_ir and "@free" not in kernel.llvm_ir
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    np.testing.assert_allclose(kernel(x=x), np.exp(x.astype(np.float64)) - x, rtol=1e-6)


@pytest.mark.parametrize(
    ("element", "dtype", "tolerance"),
    [("f32", np.float32, 1e-6), ("f16", np.float16, 1e-3), ("bf16", ml_dtypes.bfloat16, 8e-3)],
)
def test_broadcast_2d_storage_types(element: str, dtype: type, tolerance: float) -> None:
    kernel = compile_text(broadcast_kernel(element), ["x", "b", "s"])
    rng = np.random.default_rng(1)
    t, d = 5, 37
    x = rng.standard_normal((t, d)).astype(dtype)
    b = rng.standard_normal(d).astype(dtype)
    s = rng.standard_normal((t, 1)).astype(dtype)
    out = kernel(x=x, b=b, s=s)
    assert out.shape == (t, d) and out.dtype == np.dtype(dtype)
    want = (x.astype(np.float64) + b.astype(np.float64)) * s.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tolerance, atol=tolerance)
    assert widest_float_vector(kernel.llvm_ir) >= host_cpu().float_lanes, (
        f"{element} loop is scalar"
    )


def test_bf16_rounds_to_nearest_even() -> None:
    kernel = compile_text(broadcast_kernel("bf16"), ["x", "b", "s"])
    # 1 + 2**-8 is halfway between two bf16 values: round to even (1.0); 1 + 3 * 2**-8 rounds up.
    bits = np.array([[0x3F80, 0x3F81, 0x7FC0, 0x7F80]], dtype=np.uint16)
    x = bits.view(ml_dtypes.bfloat16)
    half_ulp = np.array([2.0**-8, 2.0**-8, 0.0, 0.0], dtype=ml_dtypes.bfloat16)
    zero = np.zeros(4, ml_dtypes.bfloat16)
    one = np.ones((1, 1), ml_dtypes.bfloat16)
    out = kernel(x=x, b=zero, s=one).view(np.uint16)
    assert out[0, 0] == 0x3F80 and out[0, 1] == 0x3F81
    assert np.isnan(out.view(ml_dtypes.bfloat16).astype(np.float32)[0, 2])
    assert out[0, 3] == 0x7F80  # inf stays inf
    exact = (x.astype(np.float32) + half_ulp.astype(np.float32)).astype(ml_dtypes.bfloat16)
    summed = kernel(x=x[:, :2], b=half_ulp[:2], s=one)
    assert summed.view(np.uint16).tolist() == exact[:, :2].view(np.uint16).tolist()


def test_a_function_without_outputs_is_rejected_when_compiled() -> None:
    """Its kernel compiled, and its call was a SyntaxError of the generated call glue."""
    text = "func.func @main(%x: memref<?xf32>) {\n  func.return\n}\n"
    with pytest.raises(DiagnosticException, match="@main has no output buffer"):
        compile_text(text, ["x"])
    tensors = "func.func @main(%x: tensor<?xf32>) {\n  func.return\n}\n"
    with pytest.raises(DiagnosticException, match="@main returns nothing"):
        compile_module(Parser(pipeline_context(), tensors).parse_module())


def test_compile_module_verifies_its_input() -> None:
    """A result shape its operands do not broadcast to compiled, then failed every call."""
    text = (
        "func.func @main(%x: tensor<?xf32>) -> tensor<?x?xf32> {\n"
        "  %y = ew.mul %x, %x : tensor<?xf32>, tensor<?xf32> -> tensor<?x?xf32>\n"
        "  func.return %y : tensor<?x?xf32>\n}\n"
    )
    with pytest.raises(VerifyException, match=r"result dimension 0 is \? but no operand has"):
        compile_module(Parser(pipeline_context(), text).parse_module())


@pytest.mark.parametrize("cached", [False, True])
def test_compile_module_finds_its_function_by_the_module_not_its_text(
    cached: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`func.func public @main` (upstream's spelling of the default) was "substring not found"
    (the name was read from the printed text), a string attribute holding "func.func @other("
    named the entry `other`; a private function, which LLVM drops, is refused by name."""
    if cached:
        monkeypatch.setenv("XFUSE_CACHE", "1")
        monkeypatch.setenv("XFUSE_CACHE_DIR", str(tmp_path))
    body = (
        "@main(%x: tensor<?xf32>) -> tensor<?xf32> {\n  %y = ew.neg %x : tensor<?xf32>\n"
        "  func.return %y : tensor<?xf32>\n}"
    )
    x = np.float32([1.0, -2.0])
    modules = [
        f"func.func public {body}\n",
        f'builtin.module attributes {{note = "func.func @other(x"}} {{\n  func.func {body}\n}}\n',
    ]
    for text in modules:
        clear_cache()
        np.testing.assert_array_equal(
            compile_module(Parser(pipeline_context(), text).parse_module())(x), -x
        )
    with pytest.raises(DiagnosticException, match=r"'func\.func' @main is private: a kernel"):
        compile_module(Parser(pipeline_context(), f"func.func private {body}\n").parse_module())
    bufferized = (
        "func.func private @main(%x: memref<?xf32>, %out: memref<?xf32>) {\n"
        "  ew.kernel ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {\n"
        "  ^bb0(%s: f32):\n    %n = arith.negf %s : f32\n    ew.yield %n : f32\n  }\n"
        "  func.return\n}\n"
    )
    with pytest.raises(DiagnosticException, match=r"^compile_bufferized: 'func\.func' @main is"):
        compile_bufferized(Parser(pipeline_context(), bufferized).parse_module(), ["x"])


def test_compile_module_checks_its_arguments_as_compile_does() -> None:
    """`threads=0` was taken (and `"2"` a raw TypeError); a source string an AttributeError
    ("'str' object has no attribute 'verify'")."""
    module = Parser(
        pipeline_context(),
        "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  func.return %x : tensor<?xf32>\n}\n",
    ).parse_module()
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        compile_module(module, threads=0)
    with pytest.raises(TypeError, match="threads must be an integer >= 1, got '2'"):
        compile_module(module, threads="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="compile_module takes a builtin.module .*, not str"):
        compile_module("y = x;")  # type: ignore[arg-type]


def test_unbufferized_kernel_is_rejected() -> None:
    text = """
    func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
      %y = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
      ^bb0(%xs: f32):
        ew.yield %xs : f32
      }
      func.return %y : tensor<?xf32>
    }
    """
    with pytest.raises(DiagnosticException, match="must be bufferized"):
        compile_text(text, ["x"])
    # the pass itself names itself, as every pass's message does
    with pytest.raises(
        DiagnosticException, match="^ew-kernel-to-loops: 'ew.kernel' must be bufferized first"
    ):
        apply_pipeline(Parser(pipeline_context(), text).parse_module(), "ew-kernel-to-loops")


@pytest.mark.parametrize("fastmath", ["turbo", "", "contract,,afn"])
def test_bad_fastmath_flag_is_rejected_by_the_compile_options(fastmath: str) -> None:
    """Before any pass runs, in the words of `xfuse.compile`'s other options (the pass's own
    check: `tests/test_opt.py`). An empty string, or entry, was none: mlir-opt rejects
    `fastmath<>`."""
    expected = f"^fastmath must be none, fast or a comma list of .*afn, got '{fastmath}'$"
    with pytest.raises(ValueError, match=expected):
        compile_text(UNFUSED_TEMPORARY, ["x"], fastmath=fastmath)


def native_main(text: str, **options: object) -> tuple[Callable[..., None], NativeModule]:
    """`@main` of bufferized IR through the buffer passes and the JIT, called with its native
    arguments (pointers and sizes) through its packed entry: no runtime argument checks."""
    module = Parser(pipeline_context(), text).parse_module()
    ctx = pipeline_context()
    for _, pass_ in Options(**options).buffer_passes():  # type: ignore[arg-type]
        pass_.apply(ctx, module)
    native = compile_llvm_dialect(module)
    packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(native.address(packed_entry_name("main")))

    def call(*arguments: int) -> None:
        words = (ctypes.c_uint64 * len(arguments))(*arguments)  # alive through the call
        packed(ctypes.addressof(words))

    return call, native


STRIDED_KERNEL = """
func.func @main(%x: memref<?x4xf32, strided<[10, 2], offset: 3>>, %out: memref<?x4xf32>) {
  ew.kernel ins(%x : memref<?x4xf32, strided<[10, 2], offset: 3>>) outs(%out : memref<?x4xf32>) {
  ^bb0(%xs: f32):
    %one = arith.constant 1.0 : f32
    %y = arith.addf %xs, %one : f32
    ew.yield %y : f32
  }
  func.return
}
"""


@pytest.mark.parametrize("rows", [1, 7, 100])
def test_strided_layout_reads_a_strided_view(rows: int) -> None:
    main, _native = native_main(STRIDED_KERNEL)
    base = np.arange(rows * 10 + 3, dtype=np.float32)
    view = np.lib.stride_tricks.as_strided(base[3:], shape=(rows, 4), strides=(40, 8))
    out = np.zeros((rows, 4), np.float32)
    main(base.ctypes.data, rows, out.ctypes.data, rows)
    np.testing.assert_array_equal(out, view + 1)


def test_strided_one_dimensional_view() -> None:
    text = """
    func.func @main(%x: memref<?xf32, strided<[2], offset: 1>>, %out: memref<?xf32>) {
      ew.kernel ins(%x : memref<?xf32, strided<[2], offset: 1>>) outs(%out : memref<?xf32>) {
      ^bb0(%xs: f32):
        %y = arith.mulf %xs, %xs : f32
        ew.yield %y : f32
      }
      func.return
    }
    """
    main, _native = native_main(text)
    base = np.random.default_rng(0).standard_normal(2 * 1000 + 1).astype(np.float32)
    out = np.zeros(1000, np.float32)
    main(base.ctypes.data, 1000, out.ctypes.data, 1000)
    np.testing.assert_array_equal(out, base[1::2] * base[1::2])


@pytest.mark.parametrize(
    "layout",
    ["strided<[?]>", "strided<[1], offset: ?>", "affine_map<(d0) -> (d0 floordiv 2)>"],
)
def test_layouts_without_a_lowering_are_rejected(layout: str) -> None:
    text = f"""
    func.func @main(%x: memref<8xf32, {layout}>, %out: memref<8xf32>) {{
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<8xf32, {layout}>
      memref.store %v, %out[%c0] : memref<8xf32>
      func.return
    }}
    """
    with pytest.raises(DiagnosticException, match="'memref.load' on memref<8xf32, .*layout"):
        native_main(text)


def test_strided_alloc_is_rejected() -> None:
    text = """
    func.func @main(%out: memref<8xf32>) {
      %t = memref.alloc() : memref<8xf32, strided<[2]>>
      func.return
    }
    """
    module = Parser(pipeline_context(), text).parse_module()
    with pytest.raises(DiagnosticException, match="'memref.alloc' on memref<8xf32, strided"):
        EwToLlvmPass().apply(pipeline_context(), module)


def test_kernel_arguments_must_be_contiguous() -> None:
    with pytest.raises(
        DiagnosticException, match="argument 'x' \\(#0\\) is a memref<\\?x4xf32, strided"
    ):
        compile_text(STRIDED_KERNEL, ["x"])


def copy(source: str, dest: str, source_type: str = "memref<?xf32>", dest_type: str = "") -> str:
    """An `ew.kernel` copying `source` into `dest` (of `source_type` unless `dest_type`)."""
    return f"""
  ew.kernel ins(%{source} : {source_type}) outs(%{dest} : {dest_type or source_type}) {{
  ^bb0(%element: f32):
    ew.yield %element : f32
  }}"""


def bufferized_main(arguments: str, *body: str) -> str:
    return f"func.func @main({arguments}) {{{''.join(body)}\n  func.return\n}}"


def test_a_dynamic_input_takes_a_temporarys_static_size() -> None:
    """A kernel writing a `memref<8xf32>` temporary from a `?` input loops over 8: the input is
    8 (as `compile_module` makes it on tensors), and the call says so for another size (an x of
    2 was read past its end, one of 20 gave 12 elements of garbage)."""
    text = bufferized_main(
        "%x: memref<?xf32>, %out: memref<?xf32>",
        "\n  %t = memref.alloc() : memref<8xf32>",
        copy("x", "t", "memref<?xf32>", "memref<8xf32>"),
        copy("t", "out", "memref<8xf32>", "memref<?xf32>"),
    )
    kernel = compile_text(text, ["x"])
    assert kernel.signature == "(x: float32[8]) -> (out: float32[8])"
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x=x), x)
    for n in (2, 20):
        with pytest.raises(ArgumentError, match="argument 'x': dimension 0 must be 8"):
            kernel(x=np.zeros(n, np.float32))


@pytest.mark.parametrize(
    ("arguments", "inputs"),
    [("%x: memref<?xf32>, %out: memref<?x?xf32>", ["x"]), ("%out: memref<?xf32>", [])],
)
def test_an_output_dim_no_input_has_is_rejected(arguments: str, inputs: list[str]) -> None:
    """Nothing gives the size of such a dim: the call made one up from another axis (x of 3
    gave a [3, 3] result) or raised an IndexError (no inputs)."""
    source = "x" if inputs else None
    body = (
        copy("x", "out", "memref<?xf32>", "memref<?x?xf32>")
        if source
        else """
  ew.kernel ins() outs(%out : memref<?xf32>) {
    %c = arith.constant 1.5 : f32
    ew.yield %c : f32
  }"""
    )
    with pytest.raises(DiagnosticException, match="output 'out' .* has a \\? on dimension 0"):
        compile_text(bufferized_main(arguments, body), inputs)


TWO_D = "%x: memref<?x?xf32>, %out: memref<?x?xf32>"
DIMS = """
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t0 = memref.dim %x, %c0 : memref<?x?xf32>
  %d0 = memref.dim %x, %c1 : memref<?x?xf32>"""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (  # a temporary of [d, d] read x of [t, d] past its end
            bufferized_main(
                TWO_D,
                DIMS,
                "\n  %t = memref.alloc(%d0, %d0) : memref<?x?xf32>",
                copy("x", "t", "memref<?x?xf32>"),
                copy("x", "out", "memref<?x?xf32>"),
            ),
            "'memref.alloc' size 0 must be a 'memref.dim' of a \\? on the same axis",
        ),
        (  # n + 1 elements: read x one past its end
            bufferized_main(
                TWO_D,
                DIMS,
                "\n  %m = arith.addi %d0, %c1 : index",
                "\n  %t = memref.alloc(%t0, %m) : memref<?x?xf32>",
                copy("x", "t", "memref<?x?xf32>"),
                copy("x", "out", "memref<?x?xf32>"),
            ),
            "'arith.addi' is not of the ew-bufferize form",
        ),
        (  # out = x - x[0]: each slice of a split call read its own first element
            bufferized_main(
                "%x: memref<?xf32>, %out: memref<?xf32>",
                """
  %c0 = arith.constant 0 : index
  %first = memref.load %x[%c0] : memref<?xf32>
  %s = memref.alloc() : memref<1xf32>
  memref.store %first, %s[%c0] : memref<1xf32>
  ew.kernel ins(%x, %s : memref<?xf32>, memref<1xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32, %ss: f32):
    %d = arith.subf %xs, %ss : f32
    ew.yield %d : f32
  }""",
            ),
            "'memref.load' is not of the ew-bufferize form",
        ),
        (  # the caller's x was overwritten
            bufferized_main(
                "%x: memref<?xf32>, %out: memref<?xf32>", copy("x", "x"), copy("x", "out")
            ),
            "'ew.kernel' writes input 'x'",
        ),
        (  # returned uninitialized
            bufferized_main(
                "%x: memref<?xf32>, %y: memref<?xf32>, %out: memref<?xf32>", copy("x", "y")
            ),
            "no 'ew.kernel' writes output 'out'",
        ),
        (  # free() of the caller's array, which numpy freed again: heap corruption
            bufferized_main(
                "%x: memref<?xf32>, %out: memref<?xf32>",
                copy("x", "out"),
                "\n  memref.dealloc %x : memref<?xf32>",
            ),
            "'memref.dealloc' of 'x', which no 'memref.alloc' made",
        ),
        (  # read uninitialized
            bufferized_main("%x: memref<?xf32>, %out: memref<?xf32>", copy("out", "out")),
            "'ew.kernel' reads 'out' before any kernel writes it",
        ),
        (
            bufferized_main("%s: f32, %x: memref<?xf32>, %out: memref<?xf32>", copy("x", "out")),
            "argument 's' \\(#0\\) is a f32: the function must be bufferized",
        ),
    ],
)
def test_ir_a_kernel_cannot_run_safely_is_rejected(text: str, error: str) -> None:
    inputs = ["s", "x"] if "%s: f32" in text else ["x"]
    with pytest.raises(DiagnosticException, match=error):
        compile_text(text, inputs)


@pytest.mark.parametrize(
    ("arguments", "input_names", "error"),
    [
        # the verifier's message named the kernel's operand, not the argument
        (
            "%x: memref<?xi32>, %out: memref<?xf32>",
            ["x"],
            "argument 'x' (#0) is a memref<?xi32>: a Kernel takes arrays of f16, bf16, f32 or "
            "f64, not i32",
        ),
        (
            "%x: memref<?xf32>, %out: memref<4xi64>",
            ["x"],
            "argument 'out' (#1) is a memref<4xi64>: a Kernel takes arrays of f16, bf16, f32 or "
            "f64, not i64",
        ),
        # named as the caller passes it
        (
            "%x: memref<4xf80>, %out: memref<?xf32>",
            ["a"],
            "argument 'a' (#0) is a memref<4xf80>: a Kernel takes arrays of f16, bf16, f32 or "
            "f64, not f80",
        ),
        # unread, it verified and failed in numpy's dtypes: "no numpy dtype for element type i32"
        (
            "%n: memref<?xi32>, %x: memref<?xf32>, %out: memref<?xf32>",
            ["n", "x"],
            "argument 'n' (#0) is a memref<?xi32>: a Kernel takes arrays of f16, bf16, f32 or "
            "f64, not i32",
        ),
    ],
)
def test_an_argument_of_integers_is_named(
    arguments: str, input_names: list[str], error: str
) -> None:
    types = dict(argument.split(": ") for argument in arguments.split(", "))
    text = bufferized_main(arguments, copy("x", "out", types["%x"], types["%out"]))
    with pytest.raises(DiagnosticException, match=f"^compile_bufferized: {re.escape(error)}$"):
        compile_text(text, input_names)


@pytest.mark.parametrize(
    ("names", "exception", "error"),
    [
        (["x", "y", "z"], ValueError, "3 input names for a function of 2 arguments"),
        ("xy", TypeError, "input_names must be a list of names, got 'xy'"),
        (["out"], ValueError, "two arguments are named 'out'"),
        ([""], ValueError, r"an input name is empty, got \[''\]"),  # (no call could name it)
    ],
)
def test_input_names_must_fit_the_function(
    names: list[str], exception: type[Exception], error: str
) -> None:
    text = bufferized_main("%x: memref<?xf32>, %out: memref<?xf32>", copy("x", "out"))
    with pytest.raises(exception, match=error):
        compile_text(text, names)
    with pytest.raises(TypeError, match=r"^compile_bufferized takes a builtin\.module"):
        compile_bufferized(text, ["x"])  # type: ignore[arg-type]


def test_memref_result_is_a_located_diagnostic() -> None:
    text = """
    func.func @main(%x: memref<?xf32>) -> memref<?xf32> {
      func.return %x : memref<?xf32>
    }
    """
    with pytest.raises(DiagnosticException, match="'func.func' @main returns memref<\\?xf32>"):
        native_main(text)


def fma_kernel(element: str) -> str:
    memref_type = f"memref<?x{element}>"
    return f"""
    func.func @main(%a: {memref_type}, %b: {memref_type}, %c: {memref_type}, %out: {memref_type}) {{
      ew.kernel ins(%a, %b, %c : {memref_type}, {memref_type}, {memref_type})
                outs(%out : {memref_type}) {{
      ^bb0(%as: {element}, %bs: {element}, %cs: {element}):
        %r = math.fma %as, %bs, %cs : {element}
        ew.yield %r : {element}
      }}
      func.return
    }}
    """


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_fma_rounds_once(math_mode: str) -> None:
    kernel32 = compile_text(fma_kernel("f32"), ["a", "b", "c"], math=math_mode)
    a = np.array([1 + 2**-12, 3.0, np.inf, np.nan], np.float32)
    c = np.array([-(1 + 2**-11), 1.0, -np.inf, 1.0], np.float32)
    # (1 + 2^-12)^2 - (1 + 2^-11) is exactly 2^-24; rounding the product first gives 0.
    got = kernel32(a=a, b=a, c=c)
    np.testing.assert_array_equal(got, np.array([2**-24, 10.0, np.nan, np.nan], np.float32))
    rng = np.random.default_rng(7)
    a64, b64, c64 = (rng.standard_normal(1000) for _ in range(3))
    kernel64 = compile_text(fma_kernel("f64"), ["a", "b", "c"], math=math_mode)
    exact = [
        float(Fraction(x) * Fraction(y) + Fraction(z))
        for x, y, z in zip(a64, b64, c64, strict=True)
    ]
    np.testing.assert_array_equal(kernel64(a=a64, b=b64, c=c64), np.array(exact))


def test_op_fastmath_flags_are_kept_and_joined_with_the_option() -> None:
    text = """
    func.func @main(%x: memref<?xf32>, %out: memref<?xf32>) {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<?xf32>
      %a = arith.addf %v, %v fastmath<nnan> : f32
      %m = arith.mulf %a, %a : f32
      %n = arith.negf %m fastmath<fast> : f32
      memref.store %n, %out[%c0] : memref<?xf32>
      func.return
    }
    """
    module = Parser(pipeline_context(), text).parse_module()
    EwToLlvmPass(fastmath="contract,afn").apply(pipeline_context(), module)
    flags = {
        op.name: {flag.value for flag in op.fastmathFlags.data}
        for op in module.walk()
        if isinstance(op, llvm.FAddOp | llvm.FMulOp | llvm.FNegOp)
    }
    assert flags == {
        "llvm.fadd": {"nnan", "contract", "afn"},
        "llvm.fmul": {"contract", "afn"},
        "llvm.fneg": {f.value for f in llvm.FastMathFlag},
    }


@pytest.mark.parametrize(
    "op",
    [
        "math.sqrt %x : bf16",
        "arith.maximumf %x, %x : bf16",
        # bf16 is i16 in LLVM: these made `llvm.fadd` on i16 (xDSL's verifier, or LLVM's parse
        # error from compile_bufferized) or, sitofp, IR that printed and did not translate
        "arith.addf %x, %x : bf16",
        "arith.mulf %x, %x : bf16",
        "arith.negf %x : bf16",
        "arith.sitofp %i : i32 to bf16",
    ],
)
def test_intrinsic_on_bf16_is_a_diagnostic(op: str) -> None:
    text = f"""
    func.func @f(%x: bf16, %i: i32) -> bf16 {{
      %s = {op}
      func.return %s : bf16
    }}
    """
    module = Parser(pipeline_context(), text).parse_module()
    name = op.split()[0]
    with pytest.raises(DiagnosticException, match=f"'{name}' on bf16 has no lowering"):
        EwToLlvmPass().apply(pipeline_context(), module)


@pytest.mark.parametrize(
    ("function", "remedy"),
    [
        ("func.func private @ext(tensor<?xf32>) -> tensor<?xf32>", "declare it on memrefs"),
        (
            "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
            "  func.return %x : tensor<?xf32>\n}",
            "run ew-bufferize and ew-kernel-to-loops first",
        ),
    ],
)
def test_a_function_on_tensors_says_what_to_do(function: str, remedy: str) -> None:
    """A declaration on tensors, which ew-bufferize leaves as it is, was told to run
    ew-bufferize (inside xfuse-default, which had run it)."""
    module = Parser(pipeline_context(), function).parse_module()
    with pytest.raises(DiagnosticException, match=f"lowers loops over memrefs \\({remedy}"):
        EwToLlvmPass().apply(pipeline_context(), module)


def test_fastmath_fast_means_every_flag() -> None:
    assert parse_fastmath("fast") == llvm.FastMathAttr("fast")
    assert parse_fastmath("none") == llvm.FastMathAttr(None)


@pytest.mark.parametrize(
    "program",
    ["y = select(x * b + b > 0, x, b);", "y = (x * b + b > 0) * x;"],
    ids=["select-of-a-compare", "mask-times"],
)
def test_the_arithmetic_before_a_selects_compare_takes_the_fastmath_flags(program: str) -> None:
    """`select` on a comparison's mask selects on its compare: the arithmetic before that
    compare, the program's own, was marked the select's expansion and took no flags."""
    passes = [EwFusePass(), EwExpandMathPass(fastmath="contract")]
    module = apply_pipeline(parse_program(f"input x[n], b[n];\n{program}"), passes)
    arithmetic = [op for op in module.walk() if isinstance(op, arith.MulfOp | arith.AddfOp)]
    assert len(arithmetic) >= 2
    contract = arith.FastMathFlagsAttr([arith.FastMathFlag.ALLOW_CONTRACT])
    assert all(op.fastmath == contract for op in arithmetic)


def test_lowering_tries_only_the_patterns_of_an_ops_type() -> None:
    """ew-to-llvm looks up an op's patterns by its type, not one `isinstance` per pattern: each
    pattern's op types are known (else it would be tried on every op)."""
    patterns = lowering_patterns(parse_fastmath("contract"), f16c=False, unquieted=frozenset())
    assert all(op_types(pattern) for pattern in patterns)
    dispatch = OpTypeDispatch(patterns)
    (float_arith,) = dispatch.patterns_for(arith.MulfOp)
    assert isinstance(float_arith, FloatArithToLlvm)
    assert len(dispatch.patterns_for(memref.LoadOp)) == 1
    assert dispatch.patterns_for(llvm.FAddOp) == []  # already lowered: nothing to try


F64_EXP = """
func.func @main(%x: memref<?xf64>, %out: memref<?xf64>) {
  ew.kernel ins(%x : memref<?xf64>) outs(%out : memref<?xf64>) {
  ^bb0(%xs: f64):
    %e = math.exp %xs : f64
    ew.yield %e : f64
  }
  func.return
}
"""


def test_a_cpu_compile_of_libdevice_calls_names_the_function() -> None:
    # `xfuse-opt -p '...,ew-expand-math{library=libdevice},ew-to-llvm' -t llvm` makes such IR;
    # MCJIT left `__nv_exp` unresolved, and calling the code crashed the process.
    module = Parser(pipeline_context(), F64_EXP).parse_module()
    ctx = pipeline_context()
    for _, pass_ in Options().buffer_passes():
        if isinstance(pass_, EwExpandMathPass):
            pass_ = dataclasses.replace(pass_, library="libdevice")
        pass_.apply(ctx, module)
    message = r"^the CPU code uses '__nv_exp', which neither it nor this process defines "
    libdevice = r"; NVIDIA's libdevice \(__nv_exp\) exists only on the GPU \(ew-expand-math"
    with pytest.raises(ValueError, match=message + r"\(the JIT cannot link it\)" + libdevice):
        compile_llvm_dialect(module)
    with pytest.raises(ValueError, match=message):
        compile_llvm_ir(_calling("double", "__nv_exp"))


def _calling(type_: str, callee: str) -> str:
    """LLVM IR of `f(x)`: `callee(x)`, declared, of `type_` to `type_`."""
    return (
        f"declare {type_} @{callee}({type_})\n"
        f"define {type_} @f({type_} %x) {{\n"
        f"  %y = call {type_} @{callee}({type_} %x)\n  ret {type_} %y\n}}\n"
    )


def test_a_cpu_compile_of_an_unknown_function_or_variable_names_them() -> None:
    # MCJIT linked `@expff` (a typo of expf) to address 0, and the call crashed the process;
    # an unresolved weak name left the module's other names (`expf`, ...) at 0 too.
    with pytest.raises(ValueError, match=r"^the CPU code uses 'expff', which neither it nor "):
        compile_llvm_ir(_calling("float", "expff"))
    with pytest.raises(ValueError, match=r"uses 'expff', 'nowhere', .* cannot link them\)$"):
        compile_llvm_ir(
            "@nowhere = extern_weak global float\n"
            + _calling("float", "expff").replace(
                "ret float %y", "store float %y, ptr @nowhere\n  ret float %y"
            )
        )


def test_a_call_that_code_generation_adds_must_resolve_too(
    use_cpu: Callable[[str, str], native.HostCpu],
) -> None:
    # Without F16C, LLVM's code generator makes an `fptrunc` to half a call of compiler-rt's
    # `__truncsfhf2`, which this process does not define for MCJIT: the IR declares nothing,
    # the module compiled, and a call of it crashed the process.
    use_cpu("x86-64", "")
    compile_llvm_ir("define void @nothing() {\n  ret void\n}\n")  # an engine: its symbols
    if llvm_binding.address_of_symbol("__truncsfhf2") is not None:
        pytest.skip("this process defines __truncsfhf2 (libgcc loaded for the JIT)")
    narrowing = "define half @narrow(float %x) {\n  %h = fptrunc float %x to half\n  ret half %h\n}"
    with pytest.raises(native.UnresolvedSymbolsError, match=r"^the CPU code uses '__truncsfhf2'"):
        compile_llvm_ir(narrowing)


def test_object_code_that_refers_to_an_unknown_name_is_not_linked() -> None:
    # A disk-cache entry's object code, compiled where its names resolved, was linked as it
    # was: an unknown name went to address 0 (`compile_llvm_ir` checks, loading did not).
    module = llvm_binding.parse_assembly(_calling("float", "xfuse_nowhere"))
    object_code = native.host_target_machine(3).emit_object(module)
    assert native.undefined_symbols(object_code) == {"xfuse_nowhere"}
    with pytest.raises(native.UnresolvedSymbolsError, match=r"uses 'xfuse_nowhere', which"):
        native.load_object_code(object_code, str(module), 3)
    assert native.undefined_symbols(b"not an ELF file") is None


def test_declared_symbols_are_those_llvm_lists_as_declarations() -> None:
    """Read from the text as LLVM prints it (quoted names, attributes before `global`), the
    same names as llvmlite's module lists as declarations, less the intrinsics."""
    module = llvm_binding.parse_assembly(
        '@"a b" = external local_unnamed_addr global i32\n@weak = extern_weak global i8\n'
        '@defined = global i32 1\n!named = !{!0}\n!0 = !{!"x = external y"}\n'
        "declare extern_weak void @w()\n"
        'declare noundef float @"e f"(float) local_unnamed_addr #0\n'
        "define float @f(float %x) {\n  call void @w()\n"
        '  %y = call float @"e f"(float %x)\n  %z = call float @llvm.fabs.f32(float %y)\n'
        "  ret float %z\n}\nattributes #0 = { nounwind }\n"
    )
    declared = [
        value.name
        for value in [*module.functions, *module.global_variables]
        if value.is_declaration and not value.name.startswith("llvm.")
    ]
    assert declared == ["w", "e f", "a b", "weak"]
    assert native.declared_symbols(str(module)) == declared


def test_a_cpu_compile_links_the_c_library_intrinsics_and_mcjits_own_functions() -> None:
    """What the process or MCJIT defines links: libm's `expf`, the intrinsic `llvm.exp.f32`
    (code generation's, a call to expf), `atexit` (MCJIT's own: glibc's shared library has
    none)."""
    exp = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)
    for callee in ("expf", "llvm.exp.f32"):
        native = compile_llvm_ir(_calling("float", callee))
        assert exp(native.address("f"))(1.0) == np.float32(np.e)
    native = compile_llvm_ir(
        "declare i32 @atexit(ptr)\n"
        "define i64 @f() {\n  %a = ptrtoint ptr @atexit to i64\n  ret i64 %a\n}\n"
    )
    assert ctypes.CFUNCTYPE(ctypes.c_uint64)(native.address("f"))() != 0
