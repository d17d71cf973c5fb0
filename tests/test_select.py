"""Comparisons and `select` (numpy's `where`): in `.ew`, in `@xfuse.jit` and outside tracing.

A comparison is 1 where it holds and 0 elsewhere, of its operands' dtype; `select(c, a, b)` passes
the arm it picks through bit for bit. Under `@xfuse.jit` a comparison is numpy's boolean mask.
"""

from __future__ import annotations

import inspect
import math
import pickle
from collections.abc import Callable
from typing import Any

import dask.array
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xfuse
from xfuse.dialects import ew
from xfuse.frontend.language import EwSyntaxError
from xfuse.runtime.arrays import ArgumentError, ArgumentTypeError

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, np.inf, -np.inf, np.nan, 1e-3]


def specials(dtype: type) -> np.ndarray:
    return np.array(SPECIALS, dtype)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit for bit, as unsigned integers of the element's width (NaN payloads, -0)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    unsigned = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(unsigned), want.view(unsigned))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_leaky_relu_is_numpy_bit_for_bit_in_every_dtype(dtype: type) -> None:
    """The product rounds once to the dtype in both (a kernel computes f16 and bf16 in f32)."""
    x = np.concatenate([specials(dtype), np.linspace(-5, 5, 301).astype(dtype)])
    kernel = xfuse.compile("out = select(x > 0, x, 0.01 * x);", dtype=np.dtype(dtype).name)
    with np.errstate(invalid="ignore"):
        want = np.where(x > 0, x, x.dtype.type(0.01) * x)
    same_bits(kernel(x=x), want)


def same_numbers(got: np.ndarray, want: np.ndarray) -> None:
    """NaN where `want` is NaN (of any payload: IEEE leaves a NaN's payload open), elsewhere
    `want`'s bits."""
    with np.errstate(invalid="ignore"):  # (a NaN's cast)
        nan = np.isnan(want.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    same_bits(got[~nan], want[~nan])


def every_value_or_a_sweep(dtype: type) -> np.ndarray:
    """Every value of a 16-bit float; for f32 and f64 the specials, every power of two (the
    subnormals' too) and random numbers of every exponent, of both signs."""
    element = np.dtype(dtype)
    if element.itemsize == 2:
        return np.arange(1 << 16, dtype=np.uint16).view(element)
    rng = np.random.default_rng(21)
    powers = np.ldexp(1.0, np.arange(np.finfo(element).minexp - np.finfo(element).nmant, 128))
    spread = rng.uniform(1, 2, 4000) * np.exp2(rng.integers(-150, 128, 4000))
    magnitudes = np.concatenate([powers, spread, np.abs(specials(dtype))])
    with np.errstate(over="ignore"):
        return np.concatenate([magnitudes, -magnitudes]).astype(element)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("slope", [0.01, 0.2, 0.5, 0.999])
def test_a_leaky_relu_compares_its_arms_and_keeps_numpys_bits(dtype: type, slope: float) -> None:
    """`ew-optimize` makes `select(x > 0, x, c * x)` with 0 < c < 1 `select(x > c * x, x,
    c * x)` (`SelectOfAScaledArm`: one x86 `maxps`): on every 16-bit value and a sweep of
    f32 and f64 (±0, ±inf, subnormals whose product rounds to 0 or to themselves), numpy's
    `where(x > 0, x, c * x)` bit for bit, and NaN where it is NaN (ml_dtypes' product drops a
    NaN's payload, which the hardware's keeps: IEEE leaves it open)."""
    kernel = xfuse.compile(f"out = select(x > 0, x, {slope} * x);", dtype=np.dtype(dtype).name)
    if np.dtype(dtype).type(slope) != 1:  # (0.999 is 1 in bf16, and x * 1 is x)
        assert "ew.gt %x, %1" in kernel.stages["ew-optimize"]  # the arms, not 0
    x = every_value_or_a_sweep(dtype)
    with np.errstate(invalid="ignore", under="ignore"):
        want = np.where(x > 0, x, x.dtype.type(slope) * x)
    same_numbers(kernel(x=x), want)


def test_only_a_slope_between_0_and_1_compares_the_arms() -> None:
    """Past 1 the product of a positive x is larger than x, at 0 and below the product at +inf
    is NaN or -inf: the select keeps its compare with 0 (x > 0 against a 1.5 x or -x slope
    picks x where x > c x does not)."""
    for slope in ("1.5", "0", "-0.5"):
        kernel = xfuse.compile(f"out = select(x > 0, x, {slope} * x);")
        assert "ew.gt %x, %0" in kernel.stages["ew-optimize"], slope
        x = np.array([2.0, -2.0, np.inf, -np.inf, 0.0], np.float32)
        with np.errstate(invalid="ignore"):
            same_bits(kernel(x=x), np.where(x > 0, x, np.float32(slope) * x))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    ("source", "extremum", "slope"),
    [
        ("max(x, 0.01 * x)", ew.MaxOp, 0.01),  # leaky ReLU as numpy's users write it
        ("max(x * 0.2, x)", ew.MaxOp, 0.2),
        ("min(x, 3 * x)", ew.MinOp, 3.0),
        ("min(0.5 * x, x)", ew.MinOp, 0.5),
    ],
)
def test_a_max_or_min_of_x_and_a_scaled_x_is_a_select_of_the_same_numbers(
    dtype: type, source: str, extremum: type[ew.MaxOp | ew.MinOp], slope: float
) -> None:
    """`ew-optimize` makes `max(x, c * x)` (min, either order) with c > 0 a compare and select
    of the two (`ExtremumOfAScaledOperand`: one x86 `maxps`, where NaN-propagating max is six
    ops): on every 16-bit value and a sweep of f32 and f64, the max's (min's) bits, and NaN
    where it is NaN."""
    kernel = xfuse.compile(f"out = {source};", dtype=np.dtype(dtype).name)
    optimized = kernel.stages["ew-optimize"]
    assert "ew.select" in optimized and extremum.name not in optimized
    x = every_value_or_a_sweep(dtype)
    with np.errstate(invalid="ignore", under="ignore", over="ignore"):
        want = extremum.reference(x, x.dtype.type(slope) * x)
    same_numbers(kernel(x=x), want)


def test_a_max_of_x_and_a_negatively_scaled_x_or_of_another_array_stays_a_max() -> None:
    """With c < 0 the two are zeros of opposite signs at ±0 (max orders -0 below +0, a compare
    does not) and infinities of opposite signs: the max stays."""
    for slope in ("-0.5", "-2"):
        kernel = xfuse.compile(f"out = max(x, {slope} * x);")
        assert "ew.max" in kernel.stages["ew-optimize"], slope
        x = np.array([0.0, -0.0, 2.0, -2.0, np.inf, -np.inf], np.float32)
        with np.errstate(invalid="ignore"):
            want = ew.MaxOp.reference(x, np.float32(slope) * x)
        same_bits(kernel(x=x), want)
    other = xfuse.compile("out = max(x, 0.5 * y);")  # another array scaled: any order
    assert "ew.max" in other.stages["ew-optimize"]
    x, y = np.float32([1.0, -1.0, 0.0]), np.float32([4.0, -4.0, -0.0])
    same_bits(other(x=x, y=y), ew.MaxOp.reference(x, np.float32(0.5) * y))


def ieee_extremum(a: float, b: float, larger: bool) -> float:
    """IEEE 754-2019's maximum (`larger`) or minimum of two numbers: NaN where either is, and
    -0 below +0."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        return max(a, b, key=lambda z: math.copysign(1, z) * (1 if larger else -1))
    return max(a, b) if larger else min(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_max_and_min_are_ieee_maximum_and_minimum(dtype: type) -> None:
    """On every pair of special values, in `.ew` and traced (`np.maximum`, `np.minimum`):
    NaN where either operand is, max(-0, +0) = +0 and min(-0, +0) = -0 in either order (numpy's
    `maximum` gives its SIMD loop's operand there, as README says)."""
    x = specials(dtype)[:, None].repeat(len(SPECIALS), 1).ravel()
    y = specials(dtype)[None, :].repeat(len(SPECIALS), 0).ravel()
    kernel = xfuse.compile(
        "a = max(x, y); b = min(x, y);", dtype=np.dtype(dtype).name, outputs=["a", "b"]
    )
    traced = xfuse.jit(lambda x, y: (np.maximum(x, y), np.minimum(x, y)))
    pairs = list(zip(x.astype(np.float64), y.astype(np.float64), strict=True))
    for got in (kernel(x=x, y=y), traced(x, y)):
        for result, larger in zip(got, (True, False), strict=True):
            want = np.array([ieee_extremum(a, b, larger) for a, b in pairs]).astype(dtype)
            assert np.array_equal(np.isnan(result), np.isnan(want))
            numbers = ~np.isnan(want)
            same_bits(result[numbers], want[numbers])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_each_comparison_is_one_and_zero_of_the_dtype(dtype: type) -> None:
    x = specials(dtype)[:, None].repeat(len(SPECIALS), 1).ravel()
    y = specials(dtype)[None, :].repeat(len(SPECIALS), 0).ravel()
    source = "a = x < y; b = x <= y; c = x > y; d = x >= y; e = x == y; f = x != y;"
    kernel = xfuse.compile(source, dtype=np.dtype(dtype).name, outputs=list("abcdef"))
    ufuncs = [np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal]
    for got, ufunc in zip(kernel(x=x, y=y), ufuncs, strict=True):
        same_bits(got, ufunc(x, y).astype(dtype))  # +0 where it does not hold, NaN unequal


def test_select_tests_its_condition_against_zero_a_nan_being_true() -> None:
    c = np.array([0.0, -0.0, np.nan, 1e-45, -np.inf], np.float32)
    x, y = np.full(5, 1.0, np.float32), np.full(5, 2.0, np.float32)
    same_bits(xfuse.compile("out = select(c, x, y);")(c=c, x=x, y=y), np.where(c, x, y))


def test_select_has_its_arms_dtype_and_tests_a_wider_condition_in_its_own() -> None:
    """numpy's `where`: a float64 condition of 1e-300 picks the float32 arm (it is 0 in float32);
    a comparison's 1 and 0 convert as they are."""
    c = np.array([1e-300, 0.0, np.nan, -2.0], np.float64)
    x, y = np.float32([1, 2, 3, 4]), np.float32([5, 6, 7, 8])
    source = "input f64 c; input f32 x, y; out = select(c, x, y); cmp = select(c > 0, x, 9);"
    kernel = xfuse.compile(source, outputs=["out", "cmp"])
    out, compared = kernel(c=c, x=x, y=y)
    same_bits(out, np.where(c, x, y))
    same_bits(compared, np.where(c > 0, x, np.float32(9)))
    frontend = kernel.ir("frontend")
    assert frontend.count("ew.ne") == 1 and frontend.count("ew.gt") == 1


def test_a_condition_on_the_arms_fuses_to_one_kernel_and_unfused_agrees() -> None:
    source = "out = select(x > y, x - y, exp(x) - 1);"
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    y = np.float32(0.5) * x[::-1]
    fused = xfuse.compile(source)
    assert fused.ir("ew-fuse").count("ew.kernel") == 1
    unfused = xfuse.compile(source, fuse=False)
    same_bits(fused(x=x, y=y), unfused(x=x, y=y))
    np.testing.assert_allclose(fused(x=x, y=y), np.where(x > y, x - y, np.expm1(x)), atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
def test_jit_elu_and_masks_are_numpys(dtype: type) -> None:
    x = np.concatenate([specials(dtype), np.linspace(-4, 4, 97).astype(dtype)])
    y = x[::-1].copy()

    @xfuse.jit
    def masked(x, y):
        inside = (x > -1) & (x < 1) | ~(y == y) ^ (x >= y)
        return (
            np.where(inside, x, y),
            np.where(np.logical_not(x <= 0), x, 0),
            inside.astype(x.dtype),
        )

    picked, relu, inside = masked(x, y)
    with np.errstate(invalid="ignore"):
        want_inside = (x > -1) & (x < 1) | ~(y == y) ^ (x >= y)
        same_bits(picked, np.where(want_inside, x, y))
        same_bits(relu, np.where(np.logical_not(x <= 0), x, dtype(0)))  # 0 at NaN and -0
        same_bits(inside, want_inside.astype(dtype))


def test_jit_where_has_its_arms_dtype_and_keeps_a_tiny_condition_true() -> None:
    """numpy's `where` takes its dtype from the arms alone (float64 for two Python numbers); a
    float64 condition of 1e-300 is true, though it is 0 in float32."""
    c = np.array([1e-300, 0.0, -1.0], np.float64)
    x = np.array([1.0, 2.0, 3.0], np.float32)

    @xfuse.jit
    def picks(c, x):
        return (
            np.where(c, x, -x),
            np.where(x > 2, 1.0, 0.0),
            xfuse.where(c, x, np.float16(7)),
            np.where(x > 2, np.float16(7), 1),
        )

    arms, numbers, typed, scalars = picks(c, x)
    same_bits(scalars, np.where(x > 2, np.float16(7), 1))  # float16: the int is weak
    same_bits(arms, np.where(c, x, -x))
    same_bits(numbers, np.where(x > 2, 1.0, 0.0))  # float64, not the float32 compared
    same_bits(typed, np.where(c, x, np.float16(7)))


def test_outside_tracing_xfuse_comparisons_and_where_are_numpys() -> None:
    x, y = np.float32([1, 2, np.nan]), np.float32([2, 2, 1])
    np.testing.assert_array_equal(xfuse.less(x, y), np.less(x, y))
    assert xfuse.not_equal(x, y).dtype == np.bool_
    same_bits(xfuse.where(x > 1, x, 0.5), np.where(x > 1, x, np.float32(0.5)))
    c = np.float64([1e-300, 0, 1])
    same_bits(xfuse.where(c, x, 0.5), np.where(c, x, 0.5))  # the arms' float32
    tiny = np.array([np.longdouble("1e-4000"), 0, np.nan])  # (0 once a float64: the other arm)
    same_bits(xfuse.where(tiny, x, 0.5), np.where(tiny, x, np.float32(0.5)))


def test_outside_tracing_sign_ops_and_where_keep_nan_bits_and_scalars_are_numpys() -> None:
    """numpy's where, abs, negative and copysign pass a NaN's bits on, as the kernels do: in
    float64, a signalling float32 NaN came back quiet and every bfloat16 NaN canonical
    (ml_dtypes' narrowing). And `xfuse.maximum(1.0, 2.0)` (sigmoid, erf, relu, made of a
    where) was a 0-d array where numpy's ufuncs give a scalar."""
    bf16 = np.array([0x7F81, 0xFFC3], np.uint16).view(ml_dtypes.bfloat16)
    signalling = np.array([0x7F800001, 0xFF800001], np.uint32).view(np.float32)
    for x in (bf16, signalling):
        bits = f"u{x.itemsize}"
        for got, want in (
            (xfuse.where(True, x, 0), np.where(True, x, x.dtype.type(0))),
            (xfuse.abs(x), np.abs(x)),
            (xfuse.copysign(x, -1.0), np.copysign(x, x.dtype.type(-1))),
            # (a NaN given as a Python float or np.float64 was made the positive canonical one)
            (xfuse.where(x != 0, -math.nan, x), np.where(x != 0, x.dtype.type(-math.nan), x)),
        ):
            np.testing.assert_array_equal(got.view(bits), want.view(bits))
    for got, want in (
        (xfuse.maximum(1.0, 2.0), np.maximum(1.0, 2.0)),
        (xfuse.sigmoid(np.float32(0)), np.float32(0.5)),
        (xfuse.minimum(np.array(1.0), 2.0), np.minimum(np.array(1.0), 2.0)),
    ):
        assert type(got) is type(want) and got == want
    assert isinstance(xfuse.where(True, 1.0, 2.0), np.ndarray)  # (np.where's is an array)


def test_xfuse_functions_take_their_operands_and_no_complex_numbers() -> None:
    """An extra operand went to numpy's ufunc as its `out` and was dropped (`xfuse.exp(x, y)`
    was exp(x)); inside jit it was an internal error ("UnaryOp.__init__() takes 2 positional
    arguments"); a complex array lost its imaginary part with a warning."""
    x = np.float32([1, 2, 3])
    for call, message in (
        (lambda: xfuse.exp(x, x), r"^xfuse.exp\(\) takes 1 argument \(x\), 2 given$"),
        (lambda: xfuse.power(x, 2, x), r"^xfuse.power\(\) takes 2 arguments \(x, y\), 3 given$"),
        (lambda: xfuse.exp(), r"^xfuse.exp\(\) takes 1 argument \(x\), 0 given$"),
        (lambda: xfuse.jit(lambda a: xfuse.atan2(a))(x), r"xfuse.atan2\(\) takes 2 arguments"),
        (lambda: xfuse.jit(lambda a: xfuse.exp(a, a))(x), r"xfuse.exp\(\) takes 1 argument"),
        (lambda: xfuse.sqrt(np.complex64([4 + 3j])), r"real numbers, not an array of complex64"),
        # (None was NaN, a string a number)
        (lambda: xfuse.maximum(x, None), r"^xfuse.maximum\(\): .* real numbers, not None$"),
        (lambda: xfuse.exp("3"), r"^xfuse.exp\(\): xfuse computes with real numbers, not '3'$"),
        (lambda: xfuse.maximum(x, np.array(["2"])), r"real numbers, not an array of <U1"),
        # (a ValueError from the dtype's lookup: "unsupported dtype dtype('float128')")
        (lambda: xfuse.exp(np.ones(3, np.longdouble)), r"^xfuse.exp\(\): xfuse computes in "),
        (lambda: xfuse.maximum(x, np.longdouble(2)), r"float64, not float128 \(convert with"),
    ):
        with pytest.raises(TypeError, match=message):
            call()
    assert str(inspect.signature(xfuse.where)) == "(condition, x, y, /)"
    assert str(inspect.signature(xfuse.atan2)) == "(x, y, /)"


def test_xfuse_functions_take_python_integers_beyond_int64() -> None:
    """A Python int beyond int64 and uint64 is a real number numpy's ufuncs and jit take (as
    the array's dtype, NEP 50): eager xfuse.<fn> refused it as "not a real number"."""
    x = np.float32([1, 2])
    for got, want in (
        (xfuse.maximum(x, 2**64), np.maximum(x, 2**64)),
        (xfuse.where(np.array([True, False]), x, -(2**70)), np.where([True, False], x, -(2**70))),
        (xfuse.jit(lambda a: np.maximum(a, 2**64))(x), np.maximum(x, 2**64)),
    ):
        assert got.dtype == np.float32 and np.array_equal(got, want.astype(np.float32))
    with pytest.raises(OverflowError):  # beyond float64, as numpy's
        xfuse.maximum(x, 10**400)


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (lambda x: (x > 0) * x, r"ew.mul: a comparison's result is a boolean mask"),
        (lambda x: np.where(x > 0, x > 1, x), r"where: its arms are values"),
        (lambda x: np.where(True, x, 0.0), r"the condition must be a traced array"),
        (lambda x: (x > 0) & x, r"`&` on traced arrays takes masks"),
        (lambda x: ~x, r"`~` on traced arrays takes masks"),
        (lambda x: np.where(x > 0), r"np.where\(condition\) gives the indices"),
        (lambda x: np.where(x > 0, 1, 0), r"the arms 1 and 0 make an array that is not of floats"),
        (lambda x: x if x > 0 else -x, r"no truth value: .* np\.where\(x > 0"),
        (lambda x: (x > 0) < x, r"ew.lt: a comparison's result is a boolean mask"),
    ],
)
def test_jit_misuses_of_a_mask_say_what_to_write(program, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        xfuse.jit(program)(np.float32([1, -1]))


def test_jit_returns_a_comparison_as_numpys_booleans() -> None:
    """It was a TypeError: a kernel computes the mask's 1 and 0, the call tests them against 0;
    the second call takes the quick path, a dask call stays lazy."""
    x, y = np.float32([1, -2, np.nan, 0]), np.float32([0, -2, 1, -0.0])
    compare = xfuse.jit(lambda x, y: (x == y, x + y, np.isnan(x) | (x > y)))
    for _ in range(2):
        equal, total, either = compare(x, y)
        assert equal.dtype == either.dtype == np.bool_ and total.dtype == np.float32
        np.testing.assert_array_equal(equal, x == y)
        np.testing.assert_array_equal(either, np.isnan(x) | (x > y))
        np.testing.assert_array_equal(total, x + y)
    single = xfuse.jit(lambda x: x > 0)
    np.testing.assert_array_equal(single(x), x > 0)
    assert xfuse.jit(lambda x: x > 0)(np.float32(3)).shape == ()  # a 0-d array, as for values
    lazy = single(dask.array.from_array(x, chunks=2))
    assert isinstance(lazy, dask.array.Array) and lazy.dtype == np.bool_
    assert lazy.compute().dtype == np.bool_
    np.testing.assert_array_equal(lazy.compute(), x > 0)


def test_a_boolean_result_goes_into_an_out_buffer_of_booleans_or_of_its_dtype() -> None:
    x, y = np.float32([1, -2, np.nan, 0]), np.float32([0, -2, 1, -0.0])
    compare = xfuse.jit(lambda x, y: (x == y, x + y))
    booleans, numbers = np.empty(4, np.bool_), np.empty(4, np.float32)
    for out in [(booleans, None), {"out0": booleans}, [booleans, numbers]]:
        equal, _ = compare(x, y, out=out)
        assert equal is booleans
        np.testing.assert_array_equal(booleans, x == y)
    ones, _ = compare(x, y, out=(numbers, None))  # numpy casts booleans into a float out
    assert ones is numbers
    np.testing.assert_array_equal(numbers, (x == y).astype(np.float32))
    with pytest.raises(TypeError, match=r"out 'out0': expected dtype bool .* or float32"):
        compare(x, y, out=(np.empty(4, np.int32), None))


def test_boolean_out_buffers_of_fortran_order_beside_fortran_inputs() -> None:
    """Where every input and `out` buffer is Fortran-ordered the kernel runs on transposes: a
    boolean buffer's stand-in is Fortran-ordered too (a C-ordered one made the call refuse the
    other buffer, "or Fortran-ordered, where every input and out buffer is")."""
    x = np.asfortranarray(np.random.default_rng(6).standard_normal((6, 8)).astype(np.float32))
    y = np.asfortranarray(x[::-1] * 0.5)
    sums, masks = np.empty_like(x, order="F"), np.empty(x.shape, np.bool_, order="F")
    got = xfuse.jit(lambda x, y: (x + y, x < y))(x, y, out=(sums, masks))
    assert got[0] is sums and got[1] is masks
    np.testing.assert_array_equal(sums, x + y)
    np.testing.assert_array_equal(masks, x < y)


def test_boolean_out_buffers_are_compared_only_where_their_bytes_meet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each boolean buffer was tested against every other with `np.shares_memory`: 500 masks
    into `out=` took 76 ms a call, now 2.5 (their overlap is found by a sweep)."""
    masks = xfuse.jit(lambda x: tuple(x > i for i in range(60)))
    x = np.arange(16, dtype=np.float32)
    buffers = [np.empty(16, np.bool_) for _ in range(60)]
    masks(x, out=buffers)  # (compiled)
    shares = []
    original = np.shares_memory
    monkeypatch.setattr(np, "shares_memory", lambda *a, **k: shares.append(a) or original(*a, **k))
    results = masks(x, out=buffers)
    assert shares == []  # apart: no test
    assert all(
        r is b and (b == (x > i)).all()
        for i, (r, b) in enumerate(zip(results, buffers, strict=True))
    )
    one = np.empty(16 * 60, np.bool_)
    with pytest.raises(ArgumentError, match=r"^out 'out58' overlaps out 'out59'$"):
        masks(x, out=[*(one[16 * i : 16 * i + 16] for i in range(59)), one[-17:-1]])


def test_a_boolean_out_buffer_is_checked_before_the_call() -> None:
    """As the kernel checks its own `out` buffers: a wrong shape was found only after the call
    had written the other buffers, a read-only one was numpy's ValueError, and one sharing the
    other buffer's bytes wrote over its results without a word."""
    x, y = np.float32([1, -2, np.nan, 0]), np.float32([0, -2, 1, -0.0])
    compare = xfuse.jit(lambda x, y: (x == y, x + y))
    numbers = np.full(4, 7, np.float32)
    with pytest.raises(ArgumentError, match=r"out 'out0': expected shape \(4,\), got \(3,\)"):
        compare(x, y, out=(np.empty(3, np.bool_), numbers))
    read_only = np.empty(4, np.bool_)
    read_only.flags.writeable = False
    with pytest.raises(ArgumentError, match=r"out 'out0': the array is read-only"):
        compare(x, y, out=(read_only, numbers))
    with pytest.raises(ArgumentError, match=r"out 'out0' overlaps out 'out1'"):
        compare(x, y, out=(numbers.view(np.bool_)[4:8], numbers))
    np.testing.assert_array_equal(numbers, 7)
    strided = np.zeros(8, np.bool_)  # interleaved: their extents overlap, no element does
    evens = xfuse.jit(lambda x, y: (x == y, x != y))(x, y, out=(strided[::2], strided[1::2]))
    np.testing.assert_array_equal(strided, [0, 1, 1, 0, 0, 1, 1, 0])
    assert evens[0].base is strided
    # Not arrays: the kernel's own errors, TypeErrors (a numpy bool was taken for a buffer and
    # called read-only, a ValueError; a string "expected dtype bool ..., got None").
    positive = xfuse.jit(lambda x: x > 0)
    for buffer, message in (
        (np.bool_(True), r"out 'out': a numpy scalar is immutable"),
        ("abc", r"out 'out': expected a numpy array, got str"),
        # (taken, as the docs' table says they are not: a masked array's mask overwritten)
        (np.ma.array(np.ones(4, np.bool_), mask=[1, 0, 0, 1]), r"out 'out': a masked array's"),
        (np.matrix(np.ones(4, np.bool_)), r"out 'out': np.matrix is not taken"),
        ([True] * 4, r"out: expected a numpy array \(or a list/tuple of arrays, one per output"),
    ):
        with pytest.raises(ArgumentTypeError, match=message):
            positive(x, out=buffer)
    fortran = np.asfortranarray(np.float32([[1, -2, 3], [0, 5, -6]]))
    mask, _ = compare(fortran, fortran * 0)
    assert mask.flags.f_contiguous  # as numpy's, which keeps the layout of its operands
    np.testing.assert_array_equal(mask, fortran == 0)


def test_a_mask_function_cleared_between_its_lookups_still_returns_masks() -> None:
    """Another thread's clear of the full caches between the call's look-up of the kernel and
    of which results are masks (made to happen here) gave floats, kept by its plain calls."""
    positive = xfuse.jit(lambda x: x > 0)
    x = np.float32([1, -1])
    positive(x)
    forms = positive.forms

    class ClearedAfterGet(dict[Any, Any]):
        def get(self, key: Any, default: Any = None) -> Any:
            value = super().get(key, default)
            forms.clear()
            return value

    positive.kernels = ClearedAfterGet(positive.kernels)
    positive._plain_calls.clear()
    for _ in range(2):  # the second call by the plain calls' path
        result = positive(x)
        assert result.dtype == np.bool_
        np.testing.assert_array_equal(result, [True, False])


def test_a_mask_is_of_dtype_bool_and_astype_bool_makes_one() -> None:
    """A mask's `.dtype` was the compared dtype (float32), so `np.where(m, x, 0).astype(m.dtype)`
    returned numbers where numpy returns booleans, and `astype(bool)` was refused."""
    x = np.float32([1.0, -1.0, np.nan, 0.0, -0.0])

    def picked_as_the_masks_dtype(x: np.ndarray) -> np.ndarray:
        m = x > 0
        assert m.dtype == np.bool_ and (x + 1).dtype == np.float32
        return np.where(m, x, 0).astype(m.dtype)

    for function in (
        picked_as_the_masks_dtype,
        lambda x: x.astype(bool),  # true where nonzero, NaN too
        lambda x: (x > 0).astype(np.bool_),
        lambda x: (x > 0).astype(np.float32) * 2,
    ):
        got, want = xfuse.jit(function)(x), function(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_a_local_jit_function_with_boolean_results_pickles_them() -> None:
    cloudpickle = pytest.importorskip("cloudpickle", reason="by-value functions need cloudpickle")
    positive = xfuse.jit(lambda x: x > 0)
    x = np.float32([1, -1])
    positive(x)
    loaded = pickle.loads(cloudpickle.dumps(positive))
    assert loaded.kernels.keys() == positive.kernels.keys()  # no tracing again
    assert loaded(x).dtype == np.bool_
    np.testing.assert_array_equal(loaded(x), [True, False])


@pytest.mark.parametrize(
    ("condition", "value"),
    [("1e-50", 1e-50), ("1e-30 * 1e-30", 1e-60), ("0/0", math.nan), ("-0.0", -0.0), ("0", 0.0)],
)
def test_a_literal_condition_is_tested_as_numpy_tests_a_python_number(
    condition: str, value: float
) -> None:
    """In float64, whatever the arms' dtype: `select(1e-50, x, y)` of f32 arms tested 1e-50 in
    f32, 0, and picked y where numpy's `where` picks x (so did two literal arms, folded)."""
    x = np.ones(3, np.float32)
    want = np.where(value, x, -x)
    np.testing.assert_array_equal(xfuse.compile(f"z = select({condition}, x, y);")(x=x, y=-x), want)
    assert xfuse.compile(f"z = select({condition}, 1, 2);")() == np.where(value, 1.0, 2.0)


def test_select_takes_three_arguments_and_comparisons_one_operator_each() -> None:
    with pytest.raises(EwSyntaxError, match=r"'select' takes 3 arguments, got 2"):
        xfuse.compile("out = select(x, y);")
    with pytest.raises(EwSyntaxError, match=r"1:13: .*comparisons do not chain"):
        xfuse.compile("out = x < y == z;")
    with pytest.raises(EwSyntaxError, match=r"expected '=' .*found '=='"):
        xfuse.compile("out == x;")


def test_comparisons_are_their_own_ops_and_select_the_only_one_of_three_operands() -> None:
    comparisons = [op for op in ew.ELEMENTWISE_OPS if issubclass(op, ew.CompareOp)]
    assert [ew.mnemonic(op) for op in comparisons] == ["lt", "le", "gt", "ge", "eq", "ne"]
    assert [op for op in ew.ELEMENTWISE_OPS if ew.arity(op) == 3] == [ew.SelectOp]


# ---------------------------------------------------------------------------------------------
# Differential: random jit functions of exact ops, masks and np.where against numpy itself
# ---------------------------------------------------------------------------------------------

VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-30, -1e-40, 3e38, np.inf, -np.inf, np.nan]
VALUES += [0.3, -0.7, 1.25, -3.5, 0.005, 123.456]  # ties and near-ties once scaled
COMPARE = [np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal]
ARITHMETIC = [np.add, np.subtract, np.multiply, np.divide]
ROUNDING = [np.floor, np.ceil, np.trunc, np.rint, np.fix, np.round, lambda v: np.round(v, 2)]
"""Not np.maximum or np.minimum: numpy's give either zero of a tie of -0 and +0, `ew.max` +0."""


@st.composite
def exact_programs(draw: st.DrawFn) -> Callable[..., Any]:
    """A function of x, y, z (numpy or traced alike) whose every op IEEE decides bit for bit:
    + - * / (numpy's float32 and xfuse's are the same roundings, never contracted into an FMA),
    comparisons, masks combined with & | ^ ~, np.where on masks or on values, negation, the
    roundings to integers (and np.round's to decimals, numpy's multiply, rint and divide)."""
    steps = draw(st.lists(st.tuples(st.integers(0, 6), *[st.integers(0, 99)] * 4), max_size=8))

    def program(x: Any, y: Any, z: Any) -> Any:
        arrays = [x, y, z]
        values, masks = list(arrays), []
        for kind, a, b, c, d in steps:
            pick = [values[i % len(values)] for i in (a, b, c)]
            if kind == 0:
                values.append(ARITHMETIC[d % len(ARITHMETIC)](pick[0], pick[1]))
            elif kind == 1:
                masks.append(COMPARE[d % len(COMPARE)](pick[0], pick[1]))
            elif kind == 2 and len(masks) >= 2:
                m, n = masks[a % len(masks)], masks[b % len(masks)]
                masks.append([m & n, m | n, m ^ n, ~m][d % 4])
            elif kind == 3 and masks:
                values.append(np.where(masks[d % len(masks)], pick[0], pick[1]))
            elif kind == 4:
                values.append(np.where(pick[0], pick[1], -pick[2]))  # a value's nonzero
            elif kind == 5:
                values.append(ROUNDING[d % len(ROUNDING)](pick[0] * 2.5))
            else:
                values.append(np.where(masks[d % len(masks)], pick[0], 0.25) if masks else -pick[0])
        return values[-1], (masks[-1] if masks else arrays[0] > 0).astype(arrays[0].dtype)

    return program


@settings(max_examples=150, deadline=None, database=None)
@given(exact_programs(), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**32 - 1))
def test_random_masked_programs_are_numpys_bit_for_bit(program, dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    arrays = [rng.choice(np.array(VALUES, dtype), 64) for _ in range(3)]
    with np.errstate(all="ignore"):
        want = program(*arrays)
    got = xfuse.jit(program)(*arrays)
    for g, w in zip(got, want, strict=True):
        # IEEE leaves a NaN's sign open (x86's invalid operations give -NaN, LLVM's maximum and
        # folding +NaN): any NaN for a NaN, every other value bit for bit, -0 included
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan)
        same_bits(np.where(nan, 0, g), np.where(nan, 0, w).astype(dtype))
