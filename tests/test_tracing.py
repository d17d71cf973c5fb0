"""`@xfuse.jit` with numpy's own functions: every ufunc that is an `ew` op traces to that op."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    same = xfuse.jit(lambda a: (a * 2).astype(a.dtype, copy=False))
    assert same(x.astype(np.float32)).dtype == np.float32
    assert "ew.convert" not in next(iter(same.kernels.values())).ir("frontend")
    # bf16 to itself rounds what a kernel holds in f32: the frontend keeps it (of an argument,
    # `copy=False` is the argument itself, as numpy's is: already rounded).
    assert same(x).dtype == ml_dtypes.bfloat16
    frontend_irs = [k.ir("frontend") for k in same.kernels.values()]
    # (one array of [8, 64]: traced as the flat `[?]`, see test_shapes)
    converts = r"ew.convert %\w+ : tensor<\?xbf16> to tensor<\?xbf16>"
    assert any(re.search(converts, ir) for ir in frontend_irs)
    with pytest.raises(TypeError, match="astype.*int32.*xfuse computes in float16"):
        xfuse.jit(lambda a: a.astype(np.int32))(x)


def test_np_astype_is_the_method() -> None:
    """numpy 2's `np.astype(x, dtype)` was "np.astype cannot be traced", and the method's
    refusal of `casting=` said to call it."""
    x = SAMPLE.astype(ml_dtypes.bfloat16)
    got = xfuse.jit(lambda a: np.astype(a * 2, np.float64))(x)
    np.testing.assert_array_equal(got, np.astype(x * 2, np.float64))
    same = xfuse.jit(lambda a: np.astype(a, a.dtype, copy=False))
    assert same(SAMPLE).dtype == np.float32
    assert "ew.convert" not in next(iter(same.kernels.values())).ir("frontend")
    with pytest.raises(TypeError, match=r"np.astype\(\.\.\., device=\) cannot be traced"):
        xfuse.jit(lambda a: np.astype(a, np.float64, device="gpu"))(SAMPLE)


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


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (lambda a: np.clip(a > 0, 0.0, 1.0), r"a comparison's result is a boolean mask"),
        (lambda a: np.clip(a, a > 0, 1.0), r"a comparison's result is a boolean mask"),
        (lambda a: np.clip(a, [0.0, 1.0], 1.0), r"cannot combine a traced array with list"),
        (lambda a: np.clip(a, a_max=1.0), r"missing 1 required positional argument: 'a_min'"),
        (lambda a: np.clip(a, 0, 1, min=0), r"Passing `min` or `max` keyword argument when"),
    ],
)
def test_np_clip_of_what_does_not_trace_says_why(
    program: Callable[[np.ndarray], Any], message: str
) -> None:
    """numpy retries a TypeError of the array's `clip` on `np.asarray` of it: each said "a traced
    array has no data to make a numpy array", not what was wrong; numpy's own argument errors
    stay numpy's."""
    with pytest.raises((TypeError, ValueError), match=message):
        xfuse.jit(program)(np.float32([-1.0, 2.0]))


@pytest.mark.parametrize("arm", [np.ones(2, np.float32), "a", [1.0, 2.0]])
def test_a_where_arm_that_does_not_trace_says_why(arm: Any) -> None:
    """With a Python number as the other arm, an array arm said numpy's "only 0-dimensional
    arrays can be converted to Python scalars", not what to pass."""
    with pytest.raises(
        TypeError, match=rf"^cannot combine a traced array with {type(arm).__name__}"
    ):
        xfuse.jit(lambda a: np.where(a > 0, arm, 0.0))(np.float32([-1.0, 2.0]))


def test_a_traced_array_shows_its_dtype_and_shape() -> None:
    """`print(x)` in a jit function showed `<xfuse.frontend.tracing.Traced object at 0x...>`."""
    shown = []
    xfuse.jit(lambda x, y: shown.append(f"{x!r} {y > 0!r}") or x + y)(
        np.ones((3, 4), np.float32), np.float16(1)
    )
    traced = "its values exist at the call"
    # (a contiguous array beside a 0-d one is traced flat, [?]: see test_shapes)
    assert shown == [f"<traced float32 array [?]: {traced}> <traced bool array []: {traced}>"]


def test_python_math_on_a_traced_array_says_what_to_use() -> None:
    """`math.exp(x)` and `float(x)` on a proxy said "must be real number, not Traced"."""
    for program in (lambda a: math.exp(a), lambda a: float(a) * a, lambda a: range(a)):
        with pytest.raises(TypeError, match=r"not a Python number: .* \(np.exp\(x\)"):
            xfuse.jit(program)(SAMPLE)


def test_a_numpy_scalar_of_a_dtype_xfuse_lacks_is_a_clear_error() -> None:
    """(A timedelta64 or datetime64 scalar leaked numpy's DTypePromotionError, "The DType
    <class 'numpy.dtypes.Float32DType'> could not be promoted".)"""
    with pytest.raises(TypeError, match="float32 array with a complex64 scalar: xfuse computes"):
        xfuse.jit(lambda x: x * np.complex64(1))(SAMPLE)
    for scalar in (np.timedelta64(1), np.datetime64("2026-12-06")):
        with pytest.raises(TypeError, match=r"float32 array with a \w+64\S* scalar: xfuse"):
            xfuse.jit(lambda x, s=scalar: x * s)(SAMPLE)
        with pytest.raises(TypeError, match=r"clip: .* float32 array with bounds of \w+64"):
            xfuse.jit(lambda x, s=scalar: np.clip(x, s, 1))(SAMPLE)


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


X_SPECIALS = np.array([-2.5, -0.0, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan], np.float32)

ZERO_D = np.array(3.0)
"""A 0-d float64 array: numpy types it as its scalar (NEP 50: float64 beside float32)."""

NUMPY_ALIKE = {
    # numpy's logical functions take numbers, true where nonzero (a float was taken for a
    # mask's 1: `np.logical_and(m, 2.0)` held 2)
    "logical and of a float": lambda x: np.logical_xor(np.logical_and(x > 0, 2.0), x > 0),
    "logical not of floats": lambda x: np.logical_not(x),
    "logical or, a float first": lambda x: np.logical_or(0.0, x),
    # a numpy scalar first (a RecursionError for a bool; "cannot combine ... with ndarray" for
    # a float, which numpy's scalar operator hands over as a 0-d array)
    "numpy bool first": lambda x: np.logical_and(np.True_, x > 0) | (np.False_ ^ (x < 0)),
    "numpy float first in a comparison": lambda x: np.where(np.float32(0) < x, x, 0.0),
    "numpy float first in logaddexp": lambda x: np.logaddexp(np.float32(1), x),
    "heaviside of a scalar": lambda x: np.heaviside(np.float32(0), x) + np.heaviside(2.0, x),
    # fmin of a NaN scalar is the other operand, promoted (it was float32 beside a float64 NaN)
    "fmin of a float64 NaN": lambda x: np.fmin(np.float64(np.nan), x),
    # +x and x.astype(x.dtype) are copies: `+=` on them writes no argument
    "in place on +x": lambda x: _added_in_place(+x),
    "in place on astype's copy": lambda x: _added_in_place(x.astype(np.float32)),
    "clip with numpy's keywords": lambda x: x.clip(min=0.0) + np.clip(x, min=-1.0, max=1.0),
    # x == y took x + log(2) in x's dtype: log(2) rounded to float16 (3,560 float32 ulps off at 0)
    "logaddexp of a narrower first operand": lambda x: np.logaddexp(x.astype(np.float16), x),
    "logaddexp of a wider second operand": lambda x: np.logaddexp(x, x.astype(np.float64)),
    # a scalar first: numpy's clip ufunc, through the scalar's clip (was "cannot be traced")
    "clip of a scalar": lambda x: np.clip(0.5, x, x + 1) + np.float32(2).clip(x, None),
    # a 0-d array is a numpy scalar on either side (`x * s0` was "cannot combine")
    "a 0-d array either side": lambda x: np.where(x < ZERO_D, x * ZERO_D - ZERO_D * x, x / ZERO_D),
    # a 0-d bool array beside a mask, as a bool (`m | np.array(True)` was refused, not its
    # reflection)
    "a 0-d bool array beside a mask": lambda x: np.where(
        ((x > 0) | np.array(False)) ^ ((x < 1) & np.array(True)), x, 0.0
    ),
}


def _added_in_place(h: np.ndarray) -> np.ndarray:
    h += 1
    return h


@pytest.mark.parametrize("name", list(NUMPY_ALIKE))
def test_a_traced_function_gives_numpys_values_and_dtype(name: str) -> None:
    function = NUMPY_ALIKE[name]
    want = function(X_SPECIALS.copy())
    got = xfuse.jit(function)(X_SPECIALS.copy())
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_a_bitwise_operator_takes_no_float_and_the_argument_itself_is_not_written() -> None:
    """numpy's `m & 0.5` is a TypeError (a float was taken for a mask's 1); `x += 1` on the
    argument itself (or a name for it) is refused, not on a copy of it."""
    with pytest.raises(TypeError, match="`&` on traced arrays takes masks"):
        xfuse.jit(lambda x: (x > 0) & 0.5)(X_SPECIALS)

    def aliased(x: np.ndarray) -> np.ndarray:
        h = x
        return _added_in_place(h)

    def uncopied(x: np.ndarray) -> np.ndarray:  # numpy's astype(copy=False) is x itself
        return _added_in_place(x.astype(x.dtype, copy=False))

    for function in (_added_in_place, aliased, uncopied):
        with pytest.raises(TypeError, match=r"on the argument '[hx]' \(or a name bound to it\)"):
            xfuse.jit(function)(X_SPECIALS)
    # a 0-d argument may be a numpy scalar, which numpy rebinds and no out= takes
    with pytest.raises(
        TypeError, match=r"update the caller's 0-d array in numpy \(a numpy scalar it"
    ) as info:
        xfuse.jit(_added_in_place)(np.float32(2))
    assert "out=" not in str(info.value)


def test_masks_copy_through_nan_to_num_and_refuse_unary_plus() -> None:
    """np.nan_to_num of a mask failed naming `where` (numpy: a copy); `+mask` was taken where
    numpy and xfuse's np.positive refuse it."""
    x = np.float32([-1.0, 0.0, 2.0, np.nan])
    np.testing.assert_array_equal(xfuse.jit(lambda a: np.nan_to_num(a > 0))(x), x > 0)
    with pytest.raises(TypeError, match=r"^\+ \(np\.positive\): a comparison's result is a"):
        xfuse.jit(lambda a: +(a > 0))(x)
    np.testing.assert_array_equal(xfuse.jit(lambda a: copy.copy(a > 0))(x), x > 0)


def test_numpys_constructors_of_a_traced_array_say_what_to_write() -> None:
    """`np.float32(x)` said "setting an array element with a sequence"."""
    for function in (lambda x: np.float32(x), lambda x: np.asarray(x)):
        with pytest.raises(TypeError, match=r"convert it with x.astype\(dtype\)"):
            xfuse.jit(function)(X_SPECIALS)


def test_a_0d_result_beside_arrays_of_two_axes() -> None:
    """A flat kernel (all `?` arrays, one shape) with a 0-d output: refused, blaming the 2-d
    argument (`expected 1 dimensions`), traced or compiled."""
    s, x = np.float32(5), np.arange(6, dtype=np.float32).reshape(2, 3)
    scaled, shifted = xfuse.jit(lambda s, x: (s * 2, x + s))(s, x)
    assert (scaled.shape, float(scaled)) == ((), 10.0)
    np.testing.assert_array_equal(shifted, x + s)
    kernel = xfuse.compile("input s[]; a = s * 2; b = x + s; output a, b;")
    for _ in range(2):  # the checked call, then the remembered plan's
        scaled, shifted = kernel(s, x)
        assert scaled.shape == () and shifted.shape == (2, 3)
        np.testing.assert_array_equal(shifted, x + s)
    buffers = np.empty((), np.float32), np.empty((2, 3), np.float32)
    assert kernel(s, x, out=buffers)[1] is buffers[1] and float(buffers[0]) == 10.0


def test_a_parameter_named_beyond_mlirs_characters() -> None:
    """`λ` is a Python identifier but no MLIR name: xDSL's ValueError while tracing."""

    def doubled(λ: np.ndarray) -> np.ndarray:
        return λ * 2

    traced = xfuse.jit(doubled)
    np.testing.assert_array_equal(traced(λ=X_SPECIALS), X_SPECIALS * 2)
    (kernel,) = traced.kernels.values()
    assert str(kernel.signature).startswith("(λ: float32")


@pytest.mark.parametrize(
    "function",
    [
        lambda x: np.logical_and(x > 0, [False, False, False]),  # (its truth was the list's)
        lambda x: np.logical_or(x, None),
        lambda x: np.heaviside([1.0, -1.0, 0.0], x),  # (numpy read the list as a dtype)
        lambda x: np.logaddexp(x.astype(np.float16), [1.0, 2.0, 3.0]),
        lambda x: np.heaviside(np.array([1.0, -1.0, 0.0]), x),
    ],
)
def test_operands_that_do_not_trace_are_refused_by_every_function(
    function: Callable[[Any], Any],
) -> None:
    """`np.logical_and(x > 0, [False] * 3)` was `x > 0`, silently (a list is true); the others
    failed in numpy's dtype machinery ("Field elements must be 2- or 3-tuples")."""
    with pytest.raises(TypeError, match=r"^cannot combine a traced array with (list|NoneType|nd)"):
        xfuse.jit(function)(np.array([-1.0, 0.5, 0.0], np.float32))


def test_a_ufunc_of_a_mask_names_itself() -> None:
    """Refused as the op it is made of ("where: its arms are values" for np.sign); np.isinf and
    np.isfinite of a mask are numpy's of booleans, as np.isnan's already was."""
    x = np.array([-1.0, 0.5, np.nan], np.float32)
    for ufunc in (np.sign, np.square, np.fabs, np.signbit, np.reciprocal):
        with pytest.raises(TypeError, match=rf"^np\.{ufunc.__name__}: a comparison's result"):
            xfuse.jit(lambda x, u=ufunc: u(x > 0))(x)
    for ufunc in (np.isinf, np.isfinite, np.isnan):
        np.testing.assert_array_equal(xfuse.jit(lambda x, u=ufunc: u(x > 0))(x), ufunc(x > 0))


ONES = np.ones(3, np.float32)
TWO = np.array(2.0, np.float32)
TWOS = np.full(3, 2.0, np.float32)


def test_jit_defaults_positional_only_and_called_from_a_trace() -> None:
    """An array default after a skipped number default, both positional-only, went by keyword
    ("positional-only arguments passed as keyword"); a jit function leaving its array default
    when another traces it met the caller's trace as "cannot combine ... ndarray"."""

    def g(x, s=2.0, b=ONES, /):  # type: ignore[no-untyped-def]
        return x * s + b

    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(xfuse.jit(g)(x), g(x))
    inner = xfuse.jit(lambda x, b=ONES: x + b)
    with pytest.raises(TypeError, match=r"its array default 'b' is an input of its own kernel"):
        xfuse.jit(lambda x: inner(x) * 2)(x)
    np.testing.assert_array_equal(xfuse.jit(lambda x, b: inner(x, b) * 2)(x, x), (x + x) * 2)
    # a 0-d default combines, as a number does, and one the function does not read is no error
    scaled = xfuse.jit(lambda x, s=TWO: x * s)
    unread = xfuse.jit(lambda x, b=ONES, use=False: x + b if use else x * 2)
    for called in (scaled, unread):
        np.testing.assert_array_equal(xfuse.jit(lambda x, f=called: f(x) + 1)(x), x * 2 + 1)
    # the default the trace met is named, and another array's error is left as it is
    second = xfuse.jit(lambda x, v=ONES, w=TWOS: x + w)
    with pytest.raises(TypeError, match=r"its array default 'w' is an input"):
        xfuse.jit(lambda x: second(x) + 1)(x)
    global_read = xfuse.jit(lambda x, w=TWOS: x * ONES)
    with pytest.raises(TypeError, match=r"^cannot combine a traced array with ndarray"):
        xfuse.jit(lambda x: global_read(x) + 1)(x)
    # an array made of a default: the hint, hedged; a default that is no array: no "array
    # default" (a string's was called one, and passing it changed nothing)
    doubled = xfuse.jit(lambda x, w=TWOS: x + 2 * w)
    with pytest.raises(TypeError, match=r"\(if it came from an array default of .*'w', pass it"):
        xfuse.jit(lambda x: doubled(x) + 1)(x)
    # every default that is the array met is named (the first of them was, maybe unread), and
    # a positional-only one is passed by position (`w=` fails there)
    shared = xfuse.jit(lambda x, scale=ONES, shift=ONES: x * 2 + shift)
    with pytest.raises(TypeError, match=r"defaults 'scale', 'shift' \(one array\) are inputs"):
        xfuse.jit(lambda x: shared(x) + 1)(x)

    def positional(x, w=ONES, /):  # type: ignore[no-untyped-def]
        return x + w

    inner_positional = xfuse.jit(positional)
    with pytest.raises(TypeError, match=r"'w' is an input .*: pass w as its argument 2$"):
        xfuse.jit(lambda x: inner_positional(x) * 2)(x)
    # the caller passed that array itself (a default's too): no hint to pass it
    with pytest.raises(TypeError, match=r"^cannot combine a traced array with ndarray"):
        xfuse.jit(lambda x: shared(x, scale=ONES) + 1)(x)
    text = xfuse.jit(lambda x, s="ab": x + s)
    with pytest.raises(TypeError, match=r"^cannot combine a traced array with str"):
        xfuse.jit(lambda x: text(x) + 1)(x)


def test_astype_takes_no_positional_arguments_but_the_dtype() -> None:
    """numpy's second is `order`: `x.astype(np.float32, False)` was taken as copy=False."""
    with pytest.raises(TypeError, match=r"do not trace by position; pass copy= by keyword"):
        xfuse.jit(lambda x: x.astype(np.float32, False))(np.ones(3, np.float32))
