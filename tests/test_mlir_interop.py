"""Interop with upstream MLIR: `ew-to-linalg` exports that mlir-opt accepts, compiles and runs.

Skipped where Debian's mlir-22-tools (mlir-opt, mlir-translate) are not installed, except the
tests that need no tools.
"""

from __future__ import annotations

import functools
import io
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from ml_dtypes import bfloat16
from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException

import xfuse
from xfuse.benchmarking import bench, mlir_peer, peers
from xfuse.benchmarking.mlir_peer import (
    MathLowering,
    MlirKernel,
    MlirPeerError,
    MlirToolsMissing,
    compile_with_mlir,
    find_mlir_tool,
)
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.transforms.expand_math import EwExpandMathPass
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.optimize import EwOptimizePass
from xfuse.transforms.to_linalg import EwToLinalgPass

if TYPE_CHECKING:
    from conftest import Gelu

needs_mlir = pytest.mark.skipif(
    find_mlir_tool("mlir-opt") is None or find_mlir_tool("mlir-translate") is None,
    reason="upstream mlir-opt/mlir-translate not installed (apt-get install mlir-22-tools)",
)


# Every elementwise op once, on inputs inside every op's domain (x > 0).
ALL_OPS = "".join(
    f"{op.name[3:]}_r = {op.name[3:]}({', '.join(['x', 'y', 'x'][: ew.arity(op)])});\n"
    for op in ew.ELEMENTWISE_OPS
)
ALL_OPS_OUTPUTS = [f"{op.name[3:]}_r" for op in ew.ELEMENTWISE_OPS]

# Broadcasting (a row, a column, a scalar), f16 data, outputs of different shapes, a constant.
BROADCAST = "p = m * row - s; e = erf(max(p, col)); q = sqrt(col); k = -2.5;"
BROADCAST_SHAPES = {"m": [None, 4], "row": [4], "col": [None, 1], "s": []}


def fused(source: str, mode: str = "greedy", **frontend: Any) -> ModuleOp:
    module = parse_program(source, **frontend)
    EwOptimizePass().apply(Context(), module)
    EwFusePass(mode=mode).apply(Context(), module)
    module.verify()
    return module


def exported(module: ModuleOp) -> str:
    EwToLinalgPass().apply(Context(), module)
    module.verify()
    return str(module)


@functools.cache
def gelu_kernel(
    source: str, mode: str = "greedy", math_lowering: MathLowering = "libm"
) -> MlirKernel:
    return compile_with_mlir(fused(source, mode), math=math_lowering)


EXPORTED: dict[str, dict[str, Any]] = {
    "all-ops": dict(source=ALL_OPS, outputs=ALL_OPS_OUTPUTS),
    "broadcast": dict(
        source=BROADCAST, outputs=["e", "q", "k"], dtype="float16", shapes=BROADCAST_SHAPES
    ),
}


def parsed_back(text: str) -> ModuleOp:
    """`text` parsed as xfuse-opt parses it: in a context of every xDSL dialect."""
    context = Context()
    for name, factory in get_all_dialects().items():
        context.register_dialect(name, factory)
    module = Parser(context, text).parse_module()
    module.verify()
    return module


def generic_form(module: ModuleOp) -> str:
    text = io.StringIO()
    Printer(text, print_generic_format=True).print_op(module)
    return text.getvalue()


@pytest.mark.parametrize("program", ["gelu", *EXPORTED])
def test_the_export_parses_back_to_the_same_text(program: str, gelu: Gelu) -> None:
    """A kernel of several outputs is a `linalg.generic` of several results, `-> (t1, t2)`,
    which xDSL's parser read as a function type ("Expected '->'"): the export did not parse
    back (`xfuse.dialects.xdsl_patches`). Now every export does, to the same text, also in the
    generic form."""
    frontend = dict(source=gelu.source) if program == "gelu" else dict(EXPORTED[program])
    text = exported(fused(frontend.pop("source"), **frontend))
    assert ("} -> (tensor<" in text) is (program == "all-ops")  # (its kernel's results)
    parsed = parsed_back(text)
    assert str(parsed) == text
    generic = generic_form(parsed)
    assert generic_form(parsed_back(generic)) == generic


def test_generics_of_several_results_parse_inside_one_another() -> None:
    """Each generic reads its own results after its own body, one nested in another's too, and
    one without results (on memrefs) reads none."""
    maps = "indexing_maps = [" + ", ".join(["affine_map<(d0) -> (d0)>"] * 3) + "]"
    head = f'{{{maps}, iterator_types = ["parallel"]}} ins(%t : tensor<4xf32>) '
    text = (
        "builtin.module {\n"
        "  func.func @f(%t : tensor<4xf32>, %m : memref<4xf32>) -> "
        "(tensor<4xf32>, tensor<4xf32>) {\n"
        f"    %u, %v = linalg.generic {head}outs(%t, %t : tensor<4xf32>, tensor<4xf32>) {{\n"
        "    ^bb0(%x : f32, %y : f32, %z : f32):\n"
        f"      %a, %b = linalg.generic {head}outs(%t, %t : tensor<4xf32>, tensor<4xf32>) {{\n"
        "      ^bb1(%p : f32, %q : f32, %r : f32):\n"
        "        linalg.yield %p, %q : f32, f32\n"
        "      } -> (tensor<4xf32>, tensor<4xf32>)\n"
        "      linalg.yield %x, %y : f32, f32\n"
        "    } -> (tensor<4xf32>, tensor<4xf32>)\n"
        "    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], "
        'iterator_types = ["parallel"]} outs(%m : memref<4xf32>) {\n'
        "    ^bb2(%w : f32):\n"
        "      linalg.yield %w : f32\n"
        "    }\n"
        "    func.return %u, %v : tensor<4xf32>, tensor<4xf32>\n"
        "  }\n"
        "}"
    )
    parsed = parsed_back(text)
    generics = [op for op in parsed.walk() if op.name == "linalg.generic"]
    assert [len(op.results) for op in generics] == [2, 2, 0]
    assert str(parsed_back(str(parsed))) == str(parsed)


@needs_mlir
@pytest.mark.parametrize("mode", ["greedy", "none"])
@pytest.mark.parametrize("program", ["gelu", *EXPORTED])
def test_mlir_opt_parses_and_verifies_the_export(program: str, mode: str, gelu: Gelu):
    frontend = dict(source=gelu.source) if program == "gelu" else dict(EXPORTED[program])
    module = fused(frontend.pop("source"), mode, **frontend)
    kernels = sum(isinstance(op, ew.KernelOp) for op in module.walk())
    text = exported(module)
    assert "ew." not in text
    upstream = subprocess.run(
        [find_mlir_tool("mlir-opt"), "--verify-each", "--mlir-print-op-generic"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert upstream.returncode == 0, upstream.stderr
    assert upstream.stdout.count('"linalg.generic"') == kernels


def test_a_failing_tool_says_what_it_said_first_on_its_first_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`xfuse bench` skips a failed peer with the first line of its error, which ended at
    "failed:" (the tool's own words on the lines after it)."""
    tool = tmp_path / "mlir-opt"
    tool.write_text("#!/bin/sh\necho 'mlir-opt boom' >&2\nexit 3\n")
    tool.chmod(0o755)
    monkeypatch.setattr(mlir_peer, "TOOL_DIRECTORIES", (str(tmp_path),))
    monkeypatch.setenv("PATH", "")
    with pytest.raises(MlirPeerError, match=r"^mlir-opt failed: mlir-opt boom \(arguments: "):
        mlir_peer._run_tool("mlir-opt", ["--canonicalize"], "")


@needs_mlir
@pytest.mark.parametrize("math_lowering", ["libm", "polynomial"])
@pytest.mark.parametrize("mode", ["greedy", "none"])
@pytest.mark.parametrize("length", [0, 1, 17, 1003])
def test_upstream_gelu_matches_numpy(
    length: int, mode: str, math_lowering: MathLowering, gelu: Gelu
):
    kernel = gelu_kernel(gelu.source, mode, math_lowering)
    rng = np.random.default_rng(length)
    x, b, r = (rng.standard_normal(length).astype(np.float32) * 3 for _ in range(3))
    y = kernel(x, b=b, r=r)
    assert y.dtype == np.float32 and y.shape == (length,)
    np.testing.assert_allclose(y, gelu.reference(x, b, r), rtol=2e-6, atol=2e-6)


@needs_mlir
@pytest.mark.parametrize("math_lowering", ["libm", "polynomial"])
def test_upstream_runs_every_op(math_lowering: MathLowering):
    kernel = compile_with_mlir(fused(ALL_OPS, outputs=ALL_OPS_OUTPUTS), math=math_lowering)
    rng = np.random.default_rng(3)
    x = rng.uniform(0.1, 3.0, 64).astype(np.float32)
    y = rng.uniform(-2.0, 2.0, 64).astype(np.float32)
    results = kernel(x, y)
    for op, result in zip(ew.ELEMENTWISE_OPS, results, strict=True):
        args = (x, y, x)[: ew.arity(op)]
        expected = op.reference(*(a.astype(np.float64) for a in args))
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6, err_msg=op.name)


@needs_mlir
@pytest.mark.parametrize("math_lowering", ["libm", "polynomial"])
def test_upstream_fuses_the_unfused_chain_without_temporaries(math_lowering: MathLowering):
    module = fused(
        BROADCAST, "none", outputs=["e", "q", "k"], dtype="float16", shapes=BROADCAST_SHAPES
    )
    kernel = compile_with_mlir(module, math=math_lowering)
    # linalg-fuse-elementwise-ops merged the one-op kernels, and the results are written straight
    # into the caller's buffers: nothing is allocated.
    assert "malloc" not in kernel.llvm_ir
    # libm's erff, or upstream's polynomial in plain arithmetic.
    assert ("@erff" in kernel.llvm_ir) == (math_lowering == "libm")
    rng = np.random.default_rng(7)
    m = rng.standard_normal((5, 4)).astype(np.float16)
    row = rng.standard_normal(4).astype(np.float16)
    col = np.abs(rng.standard_normal((5, 1))).astype(np.float16)
    s = np.array(0.25, dtype=np.float16)
    e, q, k = kernel(m=m, row=row, col=col, s=s)
    assert e.shape == (5, 4) and q.shape == (5, 1) and k.shape == ()
    assert e.dtype == q.dtype == k.dtype == np.float16
    p = m.astype(np.float64) * row - s
    np.testing.assert_allclose(e, ew.ErfOp.reference(np.maximum(p, col)), rtol=4e-3, atol=4e-3)
    np.testing.assert_allclose(q, np.sqrt(col.astype(np.float64)), rtol=1e-3)
    assert k == -2.5


@needs_mlir
@pytest.mark.parametrize(
    ("math_lowering", "xfuse_math", "tolerance"),
    # Both call libm: at most FMA contraction differs (2 ulp). Upstream's polynomials vs xfuse's
    # approximations: two methods, each within ~3e-7 of the truth here (docs/math.md).
    [("libm", "libm", 2.5e-7), ("polynomial", "approx", 2e-6)],
)
def test_upstream_agrees_with_xfuse(
    math_lowering: MathLowering, xfuse_math: str, tolerance: float, gelu: Gelu
) -> None:
    upstream = compile_with_mlir(fused(ALL_OPS, outputs=ALL_OPS_OUTPUTS), math=math_lowering)
    own = xfuse.compile(ALL_OPS, outputs=ALL_OPS_OUTPUTS, math=xfuse_math)
    rng = np.random.default_rng(11)
    x = rng.uniform(0.1, 3.0, 1003).astype(np.float32)
    y = rng.uniform(-2.0, 2.0, 1003).astype(np.float32)
    for name, theirs, ours in zip(ALL_OPS_OUTPUTS, upstream(x, y), own(x=x, y=y), strict=True):
        assert theirs.dtype == ours.dtype == np.float32
        np.testing.assert_allclose(theirs, ours, rtol=tolerance, atol=tolerance, err_msg=name)

    gelu_upstream = gelu_kernel(gelu.source, "greedy", math_lowering)
    gelu_own = xfuse.compile(gelu.source, math=xfuse_math)
    x, b, r = (rng.standard_normal(1003).astype(np.float32) * 3 for _ in range(3))
    np.testing.assert_allclose(
        gelu_upstream(x, b=b, r=r), gelu_own(x=x, b=b, r=r), rtol=tolerance, atol=tolerance
    )


@needs_mlir
def test_upstream_kernel_writes_into_out_and_checks_its_arguments(gelu: Gelu):
    """The peer takes a call as a kernel does, checked by the runtime's own checks."""
    kernel = gelu_kernel(gelu.source)
    own = xfuse.compile(gelu.source)
    x, b, r = (np.linspace(-3, 3, 8, dtype=np.float32) for _ in range(3))
    out = np.zeros(8, np.float32)
    assert kernel(x, b, r, out=out) is out
    np.testing.assert_allclose(out, gelu.reference(x, b, r), rtol=2e-6, atol=2e-6)
    assert kernel(x, b, r, out={"out": out}) is out
    # A strided input is copied, as by a kernel.
    strided = np.linspace(-3, 3, 16, dtype=np.float32)[::2]
    np.testing.assert_allclose(kernel(x, b, strided), gelu.reference(x, b, strided), rtol=2e-6)

    bad_calls: list[tuple[tuple[Any, ...], dict[str, Any], type[Exception], str]] = [
        ((x, b), {}, xfuse.ArgumentTypeError, "missing a required argument: 'r'"),
        ((x, b.astype(np.float64), r), {}, xfuse.ArgumentTypeError, "argument 'b': expected dtype"),
        ((x, b[:5], r), {}, xfuse.ArgumentError, "argument 'b': dimension 0 has size 5 but 'x'"),
        ((x, b, r), {"z": x}, xfuse.ArgumentTypeError, "unexpected keyword argument 'z'"),
        ((x, b, r), {"out": np.zeros(4, np.float32)}, xfuse.ArgumentError, "out 'out'"),
    ]
    for args, kwargs, error, message in bad_calls:
        for callee in (kernel, own):
            with pytest.raises(error, match=message):
                callee(*args, **kwargs)
    # A kernel of one loop may update an input in place; upstream's `restrict` code may not.
    with pytest.raises(xfuse.ArgumentError, match="out 'out' overlaps input 'x': upstream MLIR"):
        kernel(x, b, r, out=x)


@needs_mlir
def test_upstream_runs_a_program_with_named_dims(gelu: Gelu) -> None:
    """The output memrefs it appends had no argument attributes beside the inputs' `ew.dims`:
    the printed signature dropped them ("use of undeclared SSA value name %out_1"; also for
    examples/gelu-llm.ew, whose bf16 rounding upstream's code runs only with AVX512-BF16)."""
    program = "input x[t, d], r[t, d]; input b[d]; h = x + b; out = h * r + 1;"
    kernel = compile_with_mlir(fused(program))
    own = xfuse.compile(program)
    rng = np.random.default_rng(5)
    x, r = (rng.standard_normal((3, 8)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(kernel(x=x, r=r, b=b), own(x=x, r=r, b=b))


@needs_mlir
def test_the_upstream_peer_of_an_nd_workload_runs() -> None:
    """The peer's outputs were flat buffers of n elements, which the kernel of a `[t, d]`
    workload (`examples/gelu-llm.ew`'s shapes) or RoPE's `[t, h, d]` refused ("out 'out':
    expected shape (4, 14336), got (57344,)"): `xfuse bench --peers` skipped it."""
    rope = (
        "input x1[?, ?, ?], x2[?, ?, ?], cos[?, 1, ?], sin[?, 1, ?];\n"
        "out1 = x1 * cos - x2 * sin;\nout2 = x2 * cos + x1 * sin;\noutput out1, out2;"
    )
    workload = bench.prepare_workload(rope, 1 << 12)
    measured = bench.measure(workload, peers.mlir_variant(workload), repeat=1)
    assert measured.max_error is not None and measured.max_error < 1e-5


@needs_mlir
@pytest.mark.parametrize(
    "outputs",
    [
        "input x[t, d], y[d];\na = x * y;\nb = exp(y);\noutput a, b;",
        "input x[t, d];\na = x * 2;\nk = 2.5;\noutput a, k;",
    ],
)
def test_the_upstream_peer_of_outputs_of_other_shapes_runs(outputs: str) -> None:
    """Its buffers were all of the inputs' broadcast shape: a `[d]` or 0-d output's call was
    refused ("out 'b': expected shape (14336,), got (4, 14336)") and the peer skipped."""
    workload = bench.prepare_workload(outputs, 1 << 12)
    measured = bench.measure(workload, peers.mlir_variant(workload), repeat=1)
    assert measured.max_error is not None and measured.max_error < 1e-5


@needs_mlir
def test_the_upstream_peers_libm_is_libms_near_0_and_rounds_bf16_subnormals() -> None:
    """`--convert-math-to-llvm` ran before `--convert-math-to-libm` and made `expm1` exp(x) - 1
    and `log1p` log(1 + x): softplus(-20) was 0 in f32 (numpy 2.06e-9), expm1(1e-5) 0.13% off.
    And f32 -> bf16 was `vcvtneps2bf16` on an AVX512-BF16 host, which flushes subnormals: now
    integer arithmetic (`--arith-expand`), xfuse's and numpy's bits."""
    x = np.float32([1e-5, 1e-3, -5.0, -20.0])
    for source in ("out = expm1(x);", "out = softplus(x);", "out = log1p(x * 1e-3);"):
        upstream = compile_with_mlir(fused(source), math="libm")(x)
        np.testing.assert_allclose(upstream, xfuse.compile(source, math="libm")(x), rtol=2.5e-7)
    tiny = np.float32([1e-39, 6e-39, -3e-40, 1.0])
    rounded = compile_with_mlir(fused("input f32 x; out = bf16(x);"))(tiny)
    np.testing.assert_array_equal(rounded.view(np.uint16), tiny.astype(bfloat16).view(np.uint16))


@needs_mlir
def test_the_upstream_peer_names_its_outputs_as_the_program() -> None:
    """Named from SSA hints, a constant output `k` was `out1`, and `out=` by its name an
    "unknown output" error; the peer of a workload takes the program's names."""
    source = "out = x + 1; k = 2.5; output out, k;"
    kernel = compile_with_mlir(fused(source), output_names=["out", "k"])
    assert [p.name for p in kernel.outputs] == ["out", "k"]
    k = np.empty((), np.float32)
    total, constant = kernel(np.ones(3, np.float32), out={"k": k})
    assert constant is k and k == 2.5
    np.testing.assert_array_equal(total, [2, 2, 2])
    workload = bench.prepare_workload(source, 64)
    measured = bench.measure(workload, peers.mlir_variant(workload), repeat=1)
    assert measured.max_error is not None and measured.max_error < 1e-6


@needs_mlir
def test_upstream_rounding_f64_to_bf16_is_a_peer_error_not_a_crash() -> None:
    """Upstream's LLVM IR has `fptrunc double to bfloat`, which x86 code generation makes a call
    to compiler-rt's `__truncdfbf2`: MCJIT does not resolve it, and the call segfaulted."""
    with pytest.raises(MlirPeerError, match="rounds double to bf16 by calling .*__truncdfbf2"):
        compile_with_mlir(fused("input f64 x; out = bf16(x * 2);"))


def test_unfused_ops_are_not_exported():
    module = parse_program("y = x + 1;")
    with pytest.raises(DiagnosticException, match="'ew.add' is not inside a kernel; run ew-fuse"):
        EwToLinalgPass().apply(Context(), module)


def test_an_llvm_op_in_a_kernel_is_not_exported() -> None:
    """`ew-expand-math{ldexp=true}` calls an LLVM intrinsic, which mlir-opt's buffer deallocation
    refuses ("ops with unknown memory side effects"): the export said it held upstream ops."""
    module = parse_program("out = exp(x);")
    for pass_ in (EwOptimizePass(), EwFusePass(), EwExpandMathPass(ldexp=True)):
        pass_.apply(Context(), module)
    with pytest.raises(DiagnosticException, match=r"'llvm\.call_intrinsic' is no upstream op"):
        EwToLinalgPass().apply(Context(), module)


def test_missing_tools_raise_a_clear_error(monkeypatch: pytest.MonkeyPatch, gelu: Gelu):
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(mlir_peer, "TOOL_DIRECTORIES", ())
    with pytest.raises(MlirToolsMissing, match="mlir-opt not found.*mlir-22-tools"):
        compile_with_mlir(fused(gelu.source))


@needs_mlir
@pytest.mark.parametrize("math_lowering", ["libm", "polynomial"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_upstream_max_and_min_order_signed_zeros_as_xfuse(
    dtype: str, math_lowering: MathLowering
) -> None:
    """`--arith-expand` (run for bf16's rounding) made `maximumf` a compare and select that
    returned the second of two zeros: max(0, -0) was -0 where xfuse gives +0, in every dtype."""
    source = "input x, y; a = max(x, y); b = min(x, y); output a, b;"
    storage = bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = np.array([0.0, -0.0, 1.0, np.nan, -2.0], storage)
    y = np.array([-0.0, 0.0, np.nan, 1.0, 3.0], storage)
    upstream = compile_with_mlir(fused(source, dtype=dtype), math=math_lowering)(x, y)
    own = xfuse.compile(source, dtype=dtype)(x=x, y=y)
    for got, want in zip(upstream, own, strict=True):
        assert got.tobytes() == want.tobytes()


@needs_mlir
def test_upstream_compiles_a_function_named_as_a_c_library_one() -> None:
    """A function named `tanhf` whose `math.tanh` became a call of `tanhf` called itself: it
    returned its input (or crashed, with more calls)."""
    module = fused("input x; out = tanh(x);", function_name="tanhf")
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(compile_with_mlir(module, math="libm")(x), np.tanh(x), rtol=1e-6)
