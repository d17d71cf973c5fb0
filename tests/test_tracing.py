"""`@xfuse.jit` with numpy's own functions: every ufunc that is an `ew` op traces to that op."""

from __future__ import annotations

import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xfuse
from xfuse.dialects import ew
from xfuse.frontend.tracing import _OPS_BY_UFUNC

SAMPLE = np.array([-2.5, -1.0, -0.0, 0.0, 0.25, 1.0, 3.0], dtype=np.float32)


@pytest.mark.parametrize("ufunc", sorted(_OPS_BY_UFUNC, key=lambda u: u.__name__), ids=str)
def test_numpy_ufunc_traces_to_its_op(ufunc: np.ufunc) -> None:
    op_type = _OPS_BY_UFUNC[ufunc]

    @xfuse.jit(math="libm")
    def apply(x, y):
        result = ufunc(x, y) if ufunc.nin == 2 else ufunc(x)
        return result.astype(x.dtype) if issubclass(op_type, ew.CompareOp) else result

    x, y = SAMPLE, np.abs(SAMPLE[::-1]) + np.float32(0.5)
    got = apply(x, y)
    (kernel,) = apply.kernels.values()
    assert op_type.name in kernel.ir("frontend"), f"np.{ufunc.__name__} did not record {op_type}"
    with np.errstate(all="ignore"):
        want = ufunc(*(a.astype(np.float64) for a in (x, y)[: ufunc.nin])).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=0, equal_nan=True)


def test_numpy_ufuncs_mix_with_operators_and_python_numbers() -> None:
    @xfuse.jit
    def gelu(x):
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * np.power(x, 3))))

    h = SAMPLE.astype(np.float64)
    want = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
    np.testing.assert_allclose(gelu(SAMPLE), want, atol=2e-6)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
@pytest.mark.parametrize(
    "scalar",
    [np.float64(0.1), np.float32(0.1), np.float16(1e5), ml_dtypes.bfloat16(0.1), np.int64(3)],
    ids=lambda s: f"{type(s).__name__}({s})",
)
def test_numpy_scalars_are_typed_as_in_numpy(dtype: type, scalar: np.generic) -> None:
    """NEP 50: a numpy scalar keeps its dtype where a Python number takes the array's
    (`np.sqrt(2 / np.pi) * x` is float64 for a float32 `x`, `x + np.float16(1e5)` inf). Traced
    as a Python float, both were float32, and the second finite."""

    @xfuse.jit
    def scaled(x):
        return x * scalar + scalar

    x = SAMPLE.astype(dtype)
    with np.errstate(over="ignore"):
        want = x * scalar + scalar
    got = scaled(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_astype_converts_as_the_languages_conversions_do() -> None:
    """`.astype` in a traced function is `ew.convert`: the LLM GELU written in Python with its
    result stored as bf16 gives the bits of `examples/gelu-llm.ew` (`bf16(y + r)`)."""

    @xfuse.jit
    def gelu_llm(x, b, r):
        h = x + b
        y = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        return (y + r).astype(ml_dtypes.bfloat16)

    rng = np.random.default_rng(0)
    x, r = (rng.standard_normal((8, 64)).astype(ml_dtypes.bfloat16) for _ in range(2))
    b = rng.standard_normal(64).astype(np.float32)
    got = gelu_llm(x, b, r)
    source = (Path(__file__).parent.parent / "examples" / "gelu-llm.ew").read_text()
    want = xfuse.compile(source)(x=x, b=b, r=r)
    assert got.dtype == want.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    (kernel,) = gelu_llm.kernels.values()
    assert kernel.ir("frontend").count("ew.convert") == 3  # x and r to f32, the result back
    same = xfuse.jit(lambda a: a.astype(a.dtype, copy=False) * 2)
    assert same(x.astype(np.float32)).dtype == np.float32
    assert "ew.convert" not in next(iter(same.kernels.values())).ir("frontend")
    # bf16 to itself rounds what a kernel holds in f32: the frontend keeps it.
    assert same(x).dtype == ml_dtypes.bfloat16
    frontend_irs = [k.ir("frontend") for k in same.kernels.values()]
    # (one array of [8, 64]: traced as the flat `[?]`, see test_shapes)
    assert any("ew.convert %a : tensor<?xbf16> to tensor<?xbf16>" in ir for ir in frontend_irs)
    with pytest.raises(TypeError, match="astype.*int32.*xfuse computes in float16"):
        xfuse.jit(lambda a: a.astype(np.int32))(x)


def test_np_clip_traces_to_max_and_min() -> None:
    """`np.clip` (ReLU6, hardswish's `x * np.clip(x + 3, 0, 6) / 6`) is numpy's
    minimum(maximum(x, a_min), a_max), either bound None or an array; it was "traced arrays
    have no truth value" (numpy's fallback compared the proxies)."""
    x = np.concatenate([np.linspace(-10, 10, 41, dtype=np.float32), [np.nan, -0.0]])
    bound = np.linspace(-1, 1, x.size, dtype=np.float32)
    programs = [
        lambda a, b: a * np.clip(a + 3, 0, 6) / 6 + b,
        lambda a, b: np.clip(a, min=b, max=None),
        lambda a, b: a.clip(None, 2) + b,
        lambda a, b: np.clip(a, b, 1),
    ]
    for program in programs:
        np.testing.assert_array_equal(xfuse.jit(program)(x, bound), program(x, bound))


def test_python_math_on_a_traced_array_says_what_to_use() -> None:
    """`math.exp(x)` and `float(x)` on a proxy said "must be real number, not Traced"."""
    for program in (lambda a: math.exp(a), lambda a: float(a) * a, lambda a: range(a)):
        with pytest.raises(TypeError, match=r"not a Python number: .* \(np.exp\(x\)"):
            xfuse.jit(program)(SAMPLE)


def test_a_numpy_scalar_of_a_dtype_xfuse_lacks_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="float32 array with a complex64 scalar: xfuse computes"):
        xfuse.jit(lambda x: x * np.complex64(1))(SAMPLE)


def test_square_and_reciprocal_trace_as_numpy_computes_them() -> None:
    @xfuse.jit
    def both(x):
        return np.square(x), np.reciprocal(x)

    square, reciprocal = both(SAMPLE)
    kernel = next(iter(both.kernels.values()))
    assert "ew.mul" in kernel.ir("frontend") and "ew.div" in kernel.ir("frontend")
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(square, np.square(SAMPLE))
        np.testing.assert_array_equal(reciprocal, np.reciprocal(SAMPLE))


def test_ufuncs_without_an_op_and_control_flow_say_what_to_do() -> None:
    @xfuse.jit
    def length(x):
        return np.hypot(x, 1)

    with pytest.raises(
        TypeError, match=r"np\.hypot cannot be traced: inside @xfuse\.jit use .*np\.tanh"
    ):
        length(SAMPLE)

    @xfuse.jit
    def branchy(x):
        return x if x > 0 else -x

    with pytest.raises(TypeError, match=r"data-dependent control flow .* np\.where\(x > 0"):
        branchy(SAMPLE)


def test_every_op_with_a_numpy_ufunc_is_traceable() -> None:
    with_ufunc = [op for op in ew.ELEMENTWISE_OPS if ew.numpy_ufunc(op) is not None]
    assert set(_OPS_BY_UFUNC.values()) == set(with_ufunc)
    assert {"ew.tanh", "ew.exp", "ew.log", "ew.sqrt", "ew.max", "ew.add"} <= {
        op.name for op in with_ufunc
    }
