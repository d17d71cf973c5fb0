"""Interop with upstream MLIR: `ew-to-linalg` exports that mlir-opt accepts, compiles and runs.

Skipped where Debian's mlir-22-tools (mlir-opt, mlir-translate) are not installed, except the
tests that need no tools.
"""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, memref
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.passes.to_linalg import EwToLinalgPass
from xfuse.runtime import mlir_peer
from xfuse.runtime.mlir_peer import MlirToolsMissing, compile_with_mlir, find_mlir_tool

needs_mlir = pytest.mark.skipif(
    find_mlir_tool("mlir-opt") is None or find_mlir_tool("mlir-translate") is None,
    reason="upstream mlir-opt/mlir-translate not installed (apt-get install mlir-22-tools)",
)

# What ew-fuse makes of examples/gelu.ew (tensor form), written out by hand.
GELU = """
func.func @main(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>) -> tensor<?xf32> {
  %out = ew.kernel ins(%x, %b, %r : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%xs: f32, %bs: f32, %rs: f32):
    %h = arith.addf %xs, %bs : f32
    %half = arith.constant 0.5 : f32
    %hh = arith.mulf %half, %h : f32
    %c = arith.constant 0.044715 : f32
    %ch = arith.mulf %c, %h : f32
    %ch2 = arith.mulf %ch, %h : f32
    %ch3 = arith.mulf %ch2, %h : f32
    %inner = arith.addf %h, %ch3 : f32
    %k = arith.constant 0.7978845608 : f32
    %scaled = arith.mulf %k, %inner : f32
    %t = math.tanh %scaled : f32
    %one = arith.constant 1.0 : f32
    %onet = arith.addf %one, %t : f32
    %y = arith.mulf %hh, %onet : f32
    %o = arith.addf %y, %rs : f32
    ew.yield %o : f32
  }
  func.return %out : tensor<?xf32>
}
"""

# Two kernels in a row (as ew-fuse{mode=none} leaves them), with broadcasting inputs, f16 data
# computed in f32, a second result and a constant result.
CHAIN = """
func.func @main(%m: tensor<?x4xf16>, %row: tensor<4xf16>, %col: tensor<?x1xf16>,
                %s: tensor<f16>) -> (tensor<?x4xf16>, tensor<?x4xf16>, tensor<3xf16>) {
  %p = ew.kernel ins(%m, %row, %s : tensor<?x4xf16>, tensor<4xf16>, tensor<f16>)
      -> tensor<?x4xf16> {
  ^bb0(%a: f16, %b: f16, %c: f16):
    %ae = arith.extf %a : f16 to f32
    %be = arith.extf %b : f16 to f32
    %ce = arith.extf %c : f16 to f32
    %ab = arith.mulf %ae, %be : f32
    %abc = arith.subf %ab, %ce : f32
    %t = arith.truncf %abc : f32 to f16
    ew.yield %t : f16
  }
  %e, %q = ew.kernel ins(%p, %col : tensor<?x4xf16>, tensor<?x1xf16>)
      -> tensor<?x4xf16>, tensor<?x4xf16> {
  ^bb0(%a: f16, %b: f16):
    %ae = arith.extf %a : f16 to f32
    %be = arith.extf %b : f16 to f32
    %mx = arith.maximumf %ae, %be : f32
    %er = math.erf %mx : f32
    %sq = math.sqrt %be : f32
    %t1 = arith.truncf %er : f32 to f16
    %t2 = arith.truncf %sq : f32 to f16
    ew.yield %t1, %t2 : f16, f16
  }
  %k = ew.constant -2.5 : tensor<3xf16>
  func.return %e, %q, %k : tensor<?x4xf16>, tensor<?x4xf16>, tensor<3xf16>
}
"""


def parse(source: str) -> ModuleOp:
    context = Context()
    for dialect in (builtin.Builtin, func.Func, arith.Arith, math_dialect.Math, memref.MemRef):
        context.load_dialect(dialect)
    context.load_dialect(ew.Ew)
    module = Parser(context, source).parse_module()
    module.verify()
    return module


def exported(source: str) -> str:
    module = parse(source)
    EwToLinalgPass().apply(Context(), module)
    module.verify()
    return str(module)


def gelu_reference(x: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    h = x.astype(np.float64) + b
    return 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r


def chain_reference(m, row, col, s) -> tuple[np.ndarray, np.ndarray]:
    p = (m.astype(np.float64) * row - s).astype(np.float16).astype(np.float64)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    e = erf(np.maximum(p, col.astype(np.float64)))
    q = np.broadcast_to(np.sqrt(col.astype(np.float64)), e.shape)
    return e, q


@needs_mlir
@pytest.mark.parametrize("source", [GELU, CHAIN], ids=["gelu", "chain"])
def test_mlir_opt_parses_and_verifies_the_export(source: str):
    text = exported(source)
    assert "ew." not in text
    upstream = subprocess.run(
        [find_mlir_tool("mlir-opt"), "--verify-each", "--mlir-print-op-generic"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert upstream.returncode == 0, upstream.stderr
    assert upstream.stdout.count('"linalg.generic"') == source.count("ew.kernel")


@needs_mlir
@pytest.mark.parametrize("math_lowering", ["libm", "polynomial"])
@pytest.mark.parametrize("length", [0, 1, 17, 1003])
def test_upstream_gelu_matches_numpy(length: int, math_lowering: str):
    kernel = compile_with_mlir(parse(GELU), math=math_lowering)
    rng = np.random.default_rng(length)
    x, b, r = (rng.standard_normal(length).astype(np.float32) * 3 for _ in range(3))
    y = kernel(x, b=b, r=r)
    assert y.dtype == np.float32 and y.shape == (length,)
    np.testing.assert_allclose(y, gelu_reference(x, b, r), rtol=2e-6, atol=2e-6)


@needs_mlir
@pytest.mark.parametrize("math_lowering", ["libm", "polynomial"])
def test_upstream_fuses_the_chain_without_temporaries(math_lowering: str):
    kernel = compile_with_mlir(parse(CHAIN), math=math_lowering)
    # linalg-fuse-elementwise-ops merged the two generics, and the results are written straight
    # into the caller's buffers: nothing is allocated.
    assert "malloc" not in kernel.llvm_ir
    # libm's erff, or upstream's polynomial in plain arithmetic.
    assert ("@erff" in kernel.llvm_ir) == (math_lowering == "libm")
    rng = np.random.default_rng(7)
    m = rng.standard_normal((5, 4)).astype(np.float16)
    row = rng.standard_normal(4).astype(np.float16)
    col = np.abs(rng.standard_normal((5, 1))).astype(np.float16)
    s = np.array(0.25, dtype=np.float16)
    e, q, k = kernel(m, row, col, s)
    expected_e, expected_q = chain_reference(m, row, col, s)
    assert e.shape == q.shape == (5, 4) and e.dtype == np.float16
    np.testing.assert_allclose(e, expected_e, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(q, expected_q, rtol=2e-3)
    np.testing.assert_array_equal(k, np.full(3, -2.5, np.float16))


@needs_mlir
def test_upstream_kernel_writes_into_out_and_checks_its_arguments():
    kernel = compile_with_mlir(parse(GELU))
    x, b, r = (np.linspace(-3, 3, 8, dtype=np.float32) for _ in range(3))
    out = np.zeros(8, np.float32)
    assert kernel(x, b, r, out=out) is out
    np.testing.assert_allclose(out, gelu_reference(x, b, r), rtol=2e-6, atol=2e-6)

    with pytest.raises(TypeError, match="missing argument.*'r'"):
        kernel(x, b)
    with pytest.raises(TypeError, match="argument 'b' must be float32, got float64"):
        kernel(x, b.astype(np.float64), r)
    with pytest.raises(ValueError, match="argument 'b' has size 5 along axis 0 where argument 'x'"):
        kernel(x, b[:5], r)
    with pytest.raises(ValueError, match="argument 'r' must be C-contiguous"):
        kernel(x, b, np.linspace(0, 1, 16, dtype=np.float32)[::2])
    with pytest.raises(ValueError, match=r"argument 'out\[0\]' shares memory"):
        kernel(x, b, r, out=x)
    with pytest.raises(TypeError, match="unexpected argument 'z'"):
        kernel(x, b, r, z=x)


def test_unfused_ops_are_not_exported():
    module = parse_program("y = x + 1;")
    with pytest.raises(DiagnosticException, match="'ew.add' is not inside a kernel; run ew-fuse"):
        EwToLinalgPass().apply(Context(), module)


def test_missing_tools_raise_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(mlir_peer, "TOOL_DIRECTORIES", ())
    with pytest.raises(MlirToolsMissing, match="mlir-opt not found.*mlir-22-tools"):
        compile_with_mlir(parse(GELU))
