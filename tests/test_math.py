"""Accuracy of the math implementations against float64 numpy, over a sweep of float32 inputs.

Every unary op is held to the `ACCURACY` its class declares (the measured maxima of docs/math.md,
from a dense sweep by `benchmarks/math_accuracy.py`, with headroom); here the sweep is sparser to
stay fast. Special values (+-0, +-inf, NaN, denormals, huge values) must come out exactly as the
float32-rounded reference.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm_binding
import llvmlite.ir as llvm_ir
import numpy as np
import pytest
from llvm_loops import vector_body
from xdsl.ir import Operation, Region
from xdsl.parser import Parser
from xdsl.pattern_rewriter import PatternRewriteWalker
from xdsl.utils.exceptions import DiagnosticException

import xfuse
from xfuse.codegen.native import (
    LIBMVEC_FUNCTIONS,
    HostCpu,
    call_libmvec,
    host_cpu,
    libmvec_loaded,
    libmvec_variants,
    libmvec_wrapper_name,
)
from xfuse.codegen.vector_functions import (
    LARGE_ARGUMENTS,
    OWN_REDUCTION_LIMIT,
    REDUCED_BELOW,
)
from xfuse.dialects import ew
from xfuse.runtime.compiler import clear_cache
from xfuse.runtime.split_calls import SplitChoice
from xfuse.transforms.approx import _EXP_POLY
from xfuse.transforms.expand_math import MATH_FUNCTIONS, EwExpandMathPass
from xfuse.transforms.options import MathLibrary
from xfuse.transforms.pipeline import pipeline_context

SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 3.4028235e38, -3.4028235e38],
    dtype=np.float32,
)

UNARY_OPS = [op for op in ew.ELEMENTWISE_OPS if issubclass(op, ew.UnaryOp)]


def sweep() -> np.ndarray:
    """Every 4099th positive float32 bit pattern (all exponents), both signs, and specials."""
    positive = np.arange(0, 0x7F800000, 4099, dtype=np.uint32).view(np.float32)
    return np.concatenate([positive, -positive, SPECIALS])


@np.errstate(all="ignore")
def check(got: np.ndarray, want: np.ndarray, bound: ew.ErrorBound) -> None:
    """`got` within `bound` of the float64 `want` where both are finite; the same NaNs and
    infinities as `want` rounded to float32."""
    want32 = want.astype(np.float32).astype(np.float64)
    got = got.astype(np.float64)
    nan_mismatch = np.isnan(got) != np.isnan(want32)
    inf_mismatch = (np.isinf(got) | np.isinf(want32)) & (got != want32) & ~np.isnan(want32)
    assert not nan_mismatch.any(), f"NaN where not expected at {np.flatnonzero(nan_mismatch)[:5]}"
    assert not inf_mismatch.any(), f"wrong infinity: got {got[inf_mismatch][:5]}"
    finite = np.isfinite(want32) & np.isfinite(got)
    excess = np.abs(got - want)[finite] - (bound.relative * np.abs(want[finite]) + bound.absolute)
    worst = int(np.argmax(excess))
    assert excess[worst] <= 0, (
        f"error {np.abs(got - want)[finite][worst]:.3g} at {want[finite][worst]!r} exceeds {bound}"
    )


@pytest.mark.parametrize("fastmath", ["none", "fast"])
@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize("op", UNARY_OPS, ids=ew.mnemonic)
def test_unary_accuracy(op: type[ew.UnaryOp], math_mode: str, fastmath: str) -> None:
    # The user's fast-math flags are for the program's arithmetic, never an op's own: under
    # `fast`, log1p's Goldberg form was reassociated (log1p(1e-6) = 9.5e-7, log1p(inf) = 88.7).
    x = sweep()
    if op is ew.ErfOp:  # the float64 reference is a Python loop: a sparser sweep
        x = np.concatenate([x[np.abs(x) < 8][::8], SPECIALS])
    kernel = xfuse.compile(f"out = {ew.mnemonic(op)}(x);", math=math_mode, fastmath=fastmath)
    with np.errstate(all="ignore"):
        want = op.reference(x.astype(np.float64))
    check(kernel(x=x), want, op.ACCURACY.bound(math_mode))


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_pow_accuracy_and_special_cases(math_mode: str) -> None:
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(-20, 20, 50_000)).astype(np.float32)
    y = rng.uniform(-4, 4, 50_000).astype(np.float32)
    base = np.array([0, -0.0, 1, -1, 2, -2, np.inf, -np.inf, np.nan, 0.5], dtype=np.float32)
    exponent = np.array([0, 1, -1, 2, 3, 0.5, np.inf, -np.inf, np.nan, -3], dtype=np.float32)
    grid_x, grid_y = (a.ravel() for a in np.meshgrid(base, exponent))
    x, y = np.concatenate([x, grid_x]), np.concatenate([y, grid_y])
    kernel = xfuse.compile("out = pow(x, y);", math=math_mode)
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64))
    check(kernel(x=x, y=y), want, ew.PowOp.ACCURACY.bound(math_mode))


def test_approx_pow_rounds_once_from_float64() -> None:
    """`math=approx` computes exp(y log|x|) in f64 and rounds once: the correctly rounded f32 but
    where the f64 value lies within ~1e-9 of a rounding boundary, never more than 1 ulp off, and
    +inf and the denormals exactly where C's pow has them. In f32 it was up to ~130 ulps off,
    and pow(3.4e38, 1) was +inf."""
    rng = np.random.default_rng(3)
    x = np.exp(rng.uniform(-100, 88, 1 << 18)).astype(np.float32)
    y = rng.uniform(-1.5, 1.5, x.size).astype(np.float32)
    # 2**k exact from the denormals to +inf; not 2**-150, halfway between 0 and 2**-149, which
    # the f64 value's error may round either way
    powers_of_two = np.concatenate([[-160, -151], np.arange(-149, 130)]).astype(np.float32)
    x = np.concatenate([x, np.full(powers_of_two.size + 2, 2, np.float32)])
    x[-2:] = 3.4028235e38
    y = np.concatenate([y, powers_of_two, [1, 0.99999994]]).astype(np.float32)
    kernel = xfuse.compile("out = pow(x, y);")
    got = kernel(x=x, y=y)
    with np.errstate(over="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32))
    assert ulps.max() <= 1 and np.count_nonzero(ulps) < x.size / 1000
    exact = slice(-powers_of_two.size - 2, None)  # 2**k through the denormals to +inf, x**1
    np.testing.assert_array_equal(got[exact], want[exact])


def wide_range_and_specials(dtype: type, seed: int) -> np.ndarray:
    """Magnitudes from below the denormals to beyond the overflow, both signs, and the special
    values (+-0, +-1, +-inf, NaN, the smallest denormal, the largest float)."""
    info = np.finfo(dtype)
    rng = np.random.default_rng(seed)
    logs = rng.uniform(np.log(float(info.smallest_subnormal)), np.log(float(info.max)), 50_000)
    x = (np.exp(logs) * rng.choice([-1.0, 1.0], logs.size)).astype(dtype)
    specials = np.array([0, 1, np.inf, np.nan, info.smallest_subnormal, info.max], dtype)
    return np.concatenate([x, specials, -specials])


def assert_same_special_values(got: np.ndarray, want: np.ndarray) -> None:
    """Where `want` (C's pow, rounded) is +-0, +-inf or NaN, `got` is the same (NaN's sign
    aside)."""
    special = ~np.isfinite(want) | (want == 0)
    assert np.array_equal(got[special], want[special], equal_nan=True)
    signed = special & ~np.isnan(want)
    assert np.array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


def compile_vectorized_pow(exponent: float, dtype: type) -> xfuse.Kernel:
    """`out = pow(x, exponent)` under `math=approx`, asserted to call no pow and to vectorize."""
    kernel = xfuse.compile(f"out = pow(x, {exponent});", math="approx", dtype=np.dtype(dtype).name)
    vector = "x float>" if dtype == np.float32 else "x double>"
    assert "@pow" not in kernel.llvm_ir and vector in kernel.llvm_ir
    return kernel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("power", "roundings"), [(1, 0), (2, 1), (3, 2), (4, 3), (-1, 1)])
def test_approx_pow_by_a_whole_constant_multiplies(dtype: type, power: int, roundings: int) -> None:
    """pow(x, 1|2|3|4|-1) is x, x * x, (x * x) * x, (x * x) * (x * x), 1 / x: vectorized (no pow
    call, no exp(n log|x|)), each op rounding once, with C's special values; an overflow stays
    +inf next to a subtraction (no contraction of the last multiply)."""
    info = np.finfo(dtype)
    x = wide_range_and_specials(dtype, seed=power + 1)
    got = compile_vectorized_pow(power, dtype)(x=x)
    with np.errstate(all="ignore"):
        wide = np.power(x.astype(np.longdouble), power)
        want = wide.astype(dtype)
        # Each op's rounding, relative; where the result is a denormal, its spacing.
        bound = roundings * float(info.eps) / 2 * np.abs(wide) + float(info.smallest_subnormal)
        assert (np.abs(got.astype(np.longdouble) - wide) <= bound)[np.isfinite(want)].all()
        if roundings <= 1:  # pow's correctly rounded value, bit for bit
            exact = {1: x, 2: x * x, -1: 1 / x}[power]
            assert np.array_equal(got, exact, equal_nan=True)
    assert_same_special_values(got, want)
    if power > 1:  # an overflow next to a subtraction
        near_max = float(info.max) * 0.9
        subtracted = xfuse.compile(
            f"out = pow(x, {power}) - {near_max!r};", math="approx", dtype=np.dtype(dtype).name
        )
        huge = np.array([float(info.max) ** (1 / power) * 1.5], dtype)
        assert subtracted(x=huge)[0] == np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("power", [0.5, -0.5])
def test_approx_pow_by_a_half_is_a_square_root(dtype: type, power: float) -> None:
    """pow(x, 1/2) is sqrt(x), and pow(x, -1/2) rsqrt(x) (1 / sqrt(x) in f64, bit for bit; in
    f32 within rsqrt's accuracy), where finite, with C's pow's special values: +0 and +inf at -0
    (sqrt's is -0, rsqrt's -inf), +inf and +0 at -inf (NaN for both), NaN for a negative x."""
    x = wide_range_and_specials(dtype, seed=7)
    got = compile_vectorized_pow(power, dtype)(x=x)
    with np.errstate(all="ignore"):
        root = np.sqrt(x)
        finite = np.isfinite(root) & (root != 0)
        if power > 0 or dtype == np.float64:
            assert np.array_equal(got[finite], (root if power > 0 else 1 / root)[finite])
        else:
            want = 1 / np.sqrt(x[finite].astype(np.float64))
            check(got[finite], want, ew.RsqrtOp.ACCURACY.approx)
    # numpy's power takes sqrt's values at -0 and -inf: the C library's pow is the reference.
    c_pow = ctypes.CDLL(ctypes.util.find_library("m")).pow
    c_pow.restype, c_pow.argtypes = ctypes.c_double, [ctypes.c_double, ctypes.c_double]
    others = ~finite
    want = np.array([c_pow(float(v), power) for v in x[others]]).astype(dtype)
    assert_same_special_values(got[others], want)
    assert np.isnan(got[np.isfinite(x) & (x < 0)]).all()


def test_approx_tanh_vectorizes_and_libm_does_not() -> None:
    approx = xfuse.compile("out = tanh(x);", math="approx")
    libm = xfuse.compile("out = tanh(x);", math="libm")
    assert "x float>" in approx.llvm_ir and "tanhf" not in approx.llvm_ir
    assert "@tanhf" in libm.llvm_ir


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_tanh_saturates_to_exactly_one_and_never_beyond(math_mode: str) -> None:
    # approx clamped its input at 7.9053, where its rational is below 1: tanh(inf) was not 1.
    kernel = xfuse.compile("out = tanh(x);", math=math_mode)
    large = np.array([10.0, 10.5, 11.0, 88.0, 3.4e38, np.inf], np.float32)
    out = kernel(x=np.concatenate([large, -large]))
    np.testing.assert_array_equal(out, np.repeat(np.float32([1.0, -1.0]), large.size))
    # Around the clamps (approx's rational exceeds 1 there) the result stays within [-1, 1].
    near = np.linspace(6.0, 12.0, 100_003, dtype=np.float32)
    assert np.abs(kernel(x=np.concatenate([near, -near]))).max() == 1.0


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_erf_of_denormals_keeps_their_digits(math_mode: str) -> None:
    # erf(x) = 2x / sqrt(pi) near 0: 1e-45 gives the smallest denormal, not 0 (approx computed
    # x p(x^2) first, which underflowed).
    x = np.array([1e-45, 3e-45, 1e-42, 1e-40, 1e-39, 1e-38], np.float32)
    x = np.concatenate([x, -x])
    out = xfuse.compile("out = erf(x);", math=math_mode)(x=x).astype(np.float64)
    want = (x.astype(np.float64) * (2 / np.sqrt(np.pi))).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=2.0**-149)


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize(
    ("source", "scale", "span"),
    [
        ("out = erf(x);", 1.0, (3.3, 4.5)),
        ("out = erf(x * 0.70710678118654752);", float(np.float32(0.70710678118654752)), (3.3, 4.5)),
        (
            "out = erf(x / 1.4142135623730951);",
            1 / float(np.float32(1.4142135623730951)),
            (3.3, 4.5),
        ),
        ("out = erf(x * -3.0);", -3.0, (3.3, 4.5)),
        ("out = tanh(x);", 1.0, (7.3, 9.0)),
        ("out = tanh(0.7978845608 * x);", float(np.float32(0.7978845608)), (7.3, 9.0)),
        ("out = tanh(x * -5.0);", -5.0, (7.3, 9.0)),
    ],
)
def test_erf_and_tanh_never_pass_one(
    source: str, scale: float, span: tuple[float, float], math_mode: str
) -> None:
    # approx's rationals exceed 1 by up to 3 ulps past c x ~ 3.65 (erf) and 7.93 (tanh), where
    # they are clamped (erf(x / sqrt 2) was -1.0000002 at x = -5.2): every float32 around that.
    bits = np.float32([span[0] / abs(scale), span[1] / abs(scale)]).view(np.int32)
    x = np.arange(bits[0], bits[1], dtype=np.int32).view(np.float32)
    x = np.concatenate([x, -x, np.float32([np.inf, -np.inf])])
    out = xfuse.compile(source, math=math_mode)(x=x)
    assert np.abs(out).max() == 1.0
    np.testing.assert_array_equal(out[-2:], np.float32([1.0, -1.0]) * np.sign(scale))


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize(
    ("op", "constant", "source"),
    [
        (ew.ErfOp, 0.70710678118654752, "out = erf(x * 0.70710678118654752);"),
        (ew.ErfOp, 1.4142135623730951, "out = erf(x / 1.4142135623730951);"),
        (ew.ErfOp, 1.702, "out = erf(1.702 * x);"),
        (ew.ErfOp, -3.0, "out = erf(x * -3.0);"),
        (ew.ErfOp, 16.0, "out = erf(x * 16.0);"),
        (ew.ErfOp, 16.0, "out = erf(x / 16);"),
        (ew.TanhOp, 0.7978845608, "out = tanh(0.7978845608 * x);"),
        (ew.TanhOp, -5.0, "out = tanh(x * -5.0);"),
        (ew.TanhOp, 0.0625, "out = tanh(x * 0.0625);"),
        (ew.TanhOp, -0.3, "out = tanh(x / -0.3);"),
    ],
)
def test_erf_and_tanh_of_a_scaled_argument_keep_their_accuracy(
    op: type[ew.UnaryOp], constant: float, source: str, math_mode: str
) -> None:
    # approx folds the constant (a divisor's reciprocal) into the rational's coefficients
    # (docs/math.md): as accurate as the function of the rounded product or quotient, and +-1
    # exactly where that saturates.
    c = float(np.float32(constant))
    scale = 1 / c if "/" in source else c
    x = sweep()
    if op is ew.ErfOp:
        x = np.concatenate([x[np.abs(x) < 8 / abs(scale)][::8], SPECIALS])
    with np.errstate(all="ignore"):
        want = op.reference(x.astype(np.float64) * scale)
    check(xfuse.compile(source, math=math_mode)(x=x), want, op.ACCURACY.bound(math_mode))


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize(
    "source",
    [
        "out = 0.5 * x * (1 + erf(x * 0.70710678118654752));",
        "out = x * 0.5 * (1.0 + erf(x / 1.4142135623730951));",
        "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));",
    ],
)
def test_gelu_saturates_to_exactly_zero_and_x(source: str, math_mode: str) -> None:
    # erf and tanh are exactly -1 far left, so 1 + erf is 0 there, even where contraction makes
    # an FMA of it (a folded erf ending in a multiply gave 1 + erf = -5e-8: GELU(-100) was
    # 2.5e-6, GELU(-inf) +inf); 0 * -inf is NaN, as in float64.
    x = np.array([-np.inf, -3.4e38, -1e10, -100.0, 100.0, 1e10, 3.4e38, np.inf, np.nan], np.float32)
    out = xfuse.compile(source, math=math_mode)(x=np.repeat(x, 37))[::37]
    expected = [np.nan, -0.0, -0.0, -0.0, 100.0, 1e10, 3.4e38, np.inf, np.nan]
    np.testing.assert_array_equal(out, np.float32(expected))
    assert np.signbit(out[1:4]).all()


@pytest.mark.parametrize(
    ("f", "product"),
    [("erf(x * 0.70710678118654752)", "0.5 * x * {}"), ("erf(x)", "{} * (x * 0.5)")],
)
def test_gelu_halves_in_the_approximation_bit_for_bit(f: str, product: str) -> None:
    # approx computes (0.5 x) (1 + erf) as x (0.5 + erf / 2), erf / 2 from its numerator halved:
    # the same bits as the multiply by 0.5, which stays where 1 + erf has another use, but where
    # 0.5 x is a denormal.
    x = np.concatenate([sweep(), np.linspace(-12, 12, 100_001, dtype=np.float32)])
    folded = xfuse.compile("out = " + product.format(f"(1 + {f})") + ";")
    kept = xfuse.compile(f"output out, s; s = 1 + {f}; out = " + product.format("s") + ";")
    assert folded.llvm_ir.count("fmul") < kept.llvm_ir.count("fmul")  # the 0.5 x is gone
    got, (want, _) = folded(x=x), kept(x=x)
    normal = ~(np.abs(x) < 2.0**-125)
    np.testing.assert_array_equal(got[normal].view(np.uint32), want[normal].view(np.uint32))
    np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=2.0**-149)


GELU_C = float(np.float32(0.7978845608))
GELU_A = float(np.float32(0.044715))
TANH_GELUS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # GELU's own cube in two orders and through pow (t = h (k + k a h^2)), and tanh(x) (t = u k).
    "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));": (
        lambda x: GELU_C * (x + GELU_A * x**3)
    ),
    "out = x * 0.5 * (1 + tanh((x * x * x * 0.044715 + x) * 0.7978845608));": (
        lambda x: GELU_C * (x + GELU_A * x**3)
    ),
    "out = (1 + tanh(0.7978845608 * (x + 0.044715 * pow(x, 3)))) * (0.5 * x);": (
        lambda x: GELU_C * (x + GELU_A * x**3)
    ),
    "out = 0.5 * x * (1 + tanh(x));": lambda x: x,
}


@pytest.mark.parametrize("source", TANH_GELUS)
@np.errstate(all="ignore")
def test_tanh_gelu_is_a_logistic(source: str) -> None:
    # approx computes (0.5 x) (1 + tanh(u)) as x / (1 + 2^t), t = -2 u log2(e): the same
    # function, more accurate than through tanh's rational (9.2e-7 absolute for GELU, 1.2e-6 for
    # tanh(x), 3.1 ulps for x > 0 and, where 1 + tanh cancelled to 0 from x ~ -4.85, relative
    # error 1; now t's rounding, up to ~|t| 2^-23 with |t| <= 128). -0 only where 2^t overflows
    # (GELU's x < -9.9, where it is below 3e-38; x < -44.4 for tanh(x), 1.3e-37).
    x = np.concatenate([sweep(), np.linspace(-12, 12, 200_001, dtype=np.float32)])
    got = xfuse.compile(source)(x=x).astype(np.float64)
    x64 = x.astype(np.float64)
    want = x64 / (1 + np.exp(-2 * TANH_GELUS[source](x64)))
    check(got, want, ew.ErrorBound(relative=2e-5, absolute=1.3e-37))
    finite = np.isfinite(want) & (np.abs(x) <= 12)
    assert np.abs(got - want)[finite].max() <= 6.5e-7
    positive = finite & (want >= np.finfo(np.float32).tiny)
    relative = np.abs(got - want)[positive] / want[positive]
    assert relative.max() <= 2.6e-7  # 2.3 ulps of the float32 result at most


@pytest.mark.parametrize(
    ("c", "a"),
    [("3e38", "3e38"), ("1", "0"), ("1", "-0.5"), ("-0.8", "0.0447"), ("1e-30", "1e-20")],
)
@np.errstate(all="ignore")
def test_tanh_gelu_of_any_constants_keeps_ieee_special_values(c: str, a: str) -> None:
    # t = h (k + k a h^2) only for c > 0 and a > 0 with k and k a normal: an infinite k made
    # 0 * inf of h = 0 (NaN where GELU is 0), a = 0 0 * inf of a huge h, and a < 0 -inf where
    # the written h + a h^3 is inf - inf at h = -inf. Otherwise t = u k: NaN, infinities and
    # signs of zero as the composition of libm's calls.
    source = f"out = 0.5 * x * (1 + tanh({c} * (x + {a} * x * x * x)));"
    x = np.float32([-np.inf, -1e20, -3, -1, -0.0, 0.0, 1e-30, 1, 3, 1e20, np.inf, np.nan])
    got, want = xfuse.compile(source)(x=x), xfuse.compile(source, math="libm")(x=x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(
        np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)])
    )


@pytest.mark.parametrize(
    "source",
    ["out = sigmoid(x);", "out = softplus(x);", "out = tanh(softplus(x));", "out = exp(x);"],
)
def test_exp_tails_round_once_into_the_denormals(source: str) -> None:
    # All four are ~e^x here, a float32 denormal below x ~ -87.3 and 0 below -103.97: exp's
    # relative error plus one rounding into the denormals (half of 2^-149), none flushed to 0.
    x = np.linspace(-104, -80, 24001, dtype=np.float32)
    out = xfuse.compile(source)(x=x).astype(np.float64)
    want = np.exp(x.astype(np.float64))
    assert np.all(np.abs(out - want) <= 1e-7 * want + 2.0**-150)


def test_exps_polynomial_is_as_close_to_e_to_the_r_as_its_fit_says() -> None:
    # `_EXP_POLY`, fitted for xfuse: 1 + r + r^2 p(r) with its float32 coefficients, in
    # float64, within 4.7e-9 of e^r relative on |r| <= 0.35 (any but the highest coefficient
    # 1e-4 off its value would show; Cephes' p of degree 5 was 1.1e-9, the earlier fits of
    # degree 4 5.0e-8).
    r = np.linspace(-0.35, 0.35, 100_001)
    value = 1 + r + r * r * np.polyval(np.float32(_EXP_POLY).astype(np.float64), r)
    assert np.max(np.abs(value / np.exp(r) - 1)) <= 4.8e-9


def test_exp_of_minus_abs_by_horners_rule_is_as_accurate_as_documented() -> None:
    # exp(-|x|) (sigmoid's, softplus's) takes e^r by Horner's rule alone, two ops fewer than
    # Cephes' form (which exp(x) keeps): over every 61st float32 <= 0 within 7.5e-8 relative
    # where the result is normal (Cephes' form: 8.05e-8) and 0.85 of a step of 2^-149 where it
    # is a denormal (Cephes' form: 0.74); docs/math.md has every float32's.
    x = np.arange(0x80000000, 0x80000000 + 0x42D00000, 61, dtype=np.uint32).view(np.float32)
    kernel = xfuse.compile("out = exp(-abs(x));")
    # The highest coefficient over 2^63 in the integer scaling, itself where vscalefps scales.
    scale = 1.0 if host_cpu().scales_by_ldexp else 2.0**-63
    constants = re.findall(r"arith\.constant ([-\d.e+]+) : f32", kernel.ir("ew-expand-math"))
    assert np.float32(_EXP_POLY[0] * scale) in {np.float32(c) for c in constants}
    got, want = kernel(x=x).astype(np.float64), np.exp(x.astype(np.float64))
    normal = want >= 2.0**-126
    assert np.max(np.abs(got - want)[normal] / want[normal]) <= 7.6e-8
    assert np.max(np.abs(got - want)[~normal]) <= 0.86 * 2.0**-149


EXP_PROGRAMS = [
    "out = exp(x);",
    "out = exp(x) - 3e38;",
    "out = select(x > 0, x, exp(x) - 1);",
    "out = sigmoid(x);",
    "out = x * sigmoid(x);",
    "out = softplus(x);",
    "out = log(1 + exp(x));",
    "out = x * tanh(softplus(x));",
]


def test_exp_scaled_by_ldexp_has_the_bits_of_the_integer_scaling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On AVX-512 hosts exp applies 2^n with vscalefps (`ew-expand-math{ldexp}`): one rounding
    # of e^r, then the exact scaling or one rounding into the denormals, as the integer ops do.
    # Elsewhere the form is LLVM's call of the C library's ldexpf, as exact: its bits are
    # checked on every host (they were only where xfuse takes the form).
    x = np.concatenate([sweep(), np.linspace(-104, 89, 200_001, dtype=np.float32)])
    monkeypatch.setenv("XFUSE_CACHE", "0")  # the disk cache's key holds the CPU, not the option
    scaling = "vscalefps" if host_cpu().scales_by_ldexp else "ldexpf"

    def outputs(ldexp: bool) -> dict[str, np.ndarray]:
        monkeypatch.setattr(HostCpu, "scales_by_ldexp", property(lambda self: ldexp))
        clear_cache()
        kernels = {source: xfuse.compile(source) for source in EXP_PROGRAMS}
        for kernel in kernels.values():
            assert (scaling in kernel.asm) == ldexp
        with np.errstate(all="ignore"):
            return {source: kernel(x=x) for source, kernel in kernels.items()}

    try:
        scaled, built = outputs(True), outputs(False)
    finally:
        clear_cache()
    for source in EXP_PROGRAMS:
        np.testing.assert_array_equal(
            scaled[source].view(np.uint32), built[source].view(np.uint32), err_msg=source
        )


def test_exp_scales_without_ldexp_where_it_would_be_a_call(
    use_cpu: Callable[[str, str], HostCpu],
) -> None:
    # Without AVX-512 LLVM calls ldexpf for each element: the integer scaling stays.
    assert not use_cpu("x86-64-v3", "+avx,+avx2,+fma,+f16c,+bmi,+bmi2").scales_by_ldexp
    kernel = xfuse.compile("out = x * sigmoid(x);")
    assert "ldexp" not in kernel.llvm_ir
    assert re.search(r"vpslld\s+\$23, %ymm", kernel.asm)


SELECTED_EXPS = {
    ("select(x > 0, x, F - 1)", "exp(x)"): True,  # ELU
    ("1.0507 * select(x > 0, x, 1.6733 * (F - 1))", "exp(x)"): True,  # SELU
    ("select(x < 20, F * 3, x)", "exp(x)"): True,
    ("select(30 <= x, x, F + x)", "exp(x)"): True,
    ("select(x < 50, F * 3, x)", "exp(x)"): False,  # exp of up to 50 counts: past 44
    ("select(x > 0, F, x)", "exp(x)"): False,
    ("select(x > 20, x, F)", "log1p(exp(x))"): True,  # PyTorch's softplus
    ("select(x > 20, x, F)", "log(1 + exp(x))"): True,
    ("select(x > 90, x, F)", "log1p(exp(x))"): False,  # overflows from 88.72
}


@pytest.mark.parametrize(
    ("expression", "function", "short"), [(*k, v) for k, v in SELECTED_EXPS.items()]
)
def test_exp_that_counts_only_up_to_a_bound_has_the_bits_of_the_full_range(
    expression: str, function: str, short: bool
) -> None:
    # Where a select takes exp(x) only for x <= 44 (or NaN), exp has no overflow select and
    # (without ldexp) no denormal selects, log1p(exp(x)) and log(1 + exp(x)) no overflow select
    # where taken for x <= 88.72 only; there they have the full range's bits (every float32,
    # AVX-512 and AVX2 code, 2026-12-05). The same function also returned has its full range.
    x = np.concatenate([sweep(), np.linspace(-110, 110, 200_001, dtype=np.float32)])
    selected = xfuse.compile(f"out = {expression.replace('F', function)};")
    returned = xfuse.compile(f"f = {function}; out = {expression.replace('F', 'f')};", ["out", "f"])
    assert ("0x7f800000" not in selected.ir("ew-expand-math")) == short
    assert "0x7f800000" in returned.ir("ew-expand-math")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(
            selected(x=x).view(np.uint32), returned(x=x)[0].view(np.uint32)
        )


ORDERED_PREDICATES = {
    "olt": np.less,
    "ole": np.less_equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
}


@pytest.mark.parametrize("predicate", [*ORDERED_PREDICATES, "ult", "ule", "ugt", "uge"])
@pytest.mark.parametrize("x_first", [True, False])
@pytest.mark.parametrize("arm", [1, 2])
def test_exp_takes_its_short_form_exactly_where_no_x_above_44_reaches_its_select_arm(
    predicate: str, x_first: bool, arm: int
) -> None:
    # `select(cmpf(x, 20), ...)` with exp(x) in one arm, every predicate and operand order: the
    # full range (its +inf constant) wherever some x above 44 takes that arm, as numpy's
    # compares say (of numbers, not NaN: there an unordered predicate is its ordered one).
    operands = "%x, %c" if x_first else "%c, %x"
    arms = "%e, %x" if arm == 1 else "%x, %e"
    module = Parser(
        pipeline_context(),
        f"""func.func @f(%x: f32) -> f32 {{
          %c = arith.constant 2.000000e+01 : f32
          %e = math.exp %x : f32
          %p = arith.cmpf {predicate}, {operands} : f32
          %r = arith.select %p, {arms} : f32
          func.return %r : f32
        }}""",
    ).parse_module()
    EwExpandMathPass().apply(pipeline_context(), module)
    compare = ORDERED_PREDICATES["o" + predicate[1:]]
    large = np.array([45.0, 1e30, np.inf], np.float32)
    taken = compare(large, 20.0) if x_first else compare(np.float32(20.0), large)
    assert ("0x7f800000" in str(module)) == bool(np.any(taken if arm == 1 else ~taken))


@pytest.mark.parametrize("library", ["libm", "libdevice"])
def test_a_math_op_on_f16_is_refused_naming_the_pass(library: MathLibrary) -> None:
    # xfuse-opt showed the message without saying which pass of its pipeline gave it.
    module = Parser(
        pipeline_context(),
        """func.func @f(%x: f16) -> f16 {
          %y = math.tanh %x : f16
          func.return %y : f16
        }""",
    ).parse_module()
    with pytest.raises(
        DiagnosticException,
        match="ew-expand-math: 'math.tanh' on f16: only f32 and f64 have a lowering",
    ):
        EwExpandMathPass(library=library).apply(pipeline_context(), module)


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_tanh_of_softplus_is_as_accurate_as_documented(math_mode: str) -> None:
    # approx computes the pair as one function (n / (n + 2), n = e^x (e^x + 2)): 2.5e-7 relative
    # at most in docs/math.md; the two approximations in turn were 4.7e-7.
    x = sweep()
    kernel = xfuse.compile("out = tanh(softplus(x));", math=math_mode)
    with np.errstate(all="ignore"):
        want = np.tanh(ew.SoftplusOp.reference(x.astype(np.float64)))
    check(kernel(x=x), want, ew.ErrorBound(4e-7))


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_mish_keeps_special_values_and_large_x(math_mode: str) -> None:
    x = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 9.0, 9.1, 9.2, 44.5, 89.0, 1e30, 3.4028235e38],
        np.float32,
    )
    out = xfuse.compile("out = x * tanh(softplus(x));", math=math_mode)(x=x)
    with np.errstate(all="ignore"):
        want = rounded(x * np.tanh(ew.SoftplusOp.reference(x.astype(np.float64))))
    # +-0 keep their sign (-0 * 0.6), -inf * 0 is NaN, and from x ~ 9.01 the factor is 1, so
    # the result is x itself (no NaN of inf / inf where e^x (e^x + 2) overflows).
    np.testing.assert_array_equal(
        out.view(np.uint32)[:2], want.astype(np.float32).view(np.uint32)[:2]
    )
    np.testing.assert_array_equal(out[2:5], [np.inf, np.nan, np.nan])
    np.testing.assert_array_equal(out[6:], x[6:])
    assert abs(out[5] - want[5]) <= 2 * np.spacing(np.float32(9.0))


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize("name", [ew.mnemonic(op) for op in UNARY_OPS])
def test_one_function_at_f32_and_f64_in_one_program(name: str, math_mode: str) -> None:
    kernel = xfuse.compile(
        f"input f32 x; input f64 y; out = {name}(x) + {name}(y);", math=math_mode
    )
    x = np.array([0.25, 2.0, 9.0, 30.0], np.float32)
    y = np.array([4.0, 0.5, 1e300, 0.0])
    reference = ew.OPS_BY_MNEMONIC[name].reference
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(np.float32).astype(np.float64) + reference(y)
    np.testing.assert_allclose(kernel(x=x, y=y), want, rtol=1e-6)


F64_RANGES = {
    "exp": (-745.5, 709.9),  # from results that round to 0, through the denormals, to +inf
    "log": (0.0, 1e300),
    "log1p": (-1.0, 1e10),
    "tanh": (-20.0, 20.0),
    "erf": (-6.0, 6.0),
    "pow": (0.0, 100.0),
    "sin": (-1e6, 1e6),
    "cos": (-1e6, 1e6),
    "tan": (-1e6, 1e6),
    "asin": (-1.0, 1.0),
    "acos": (-1.0, 1.0),
    "atan": (-1e3, 1e3),
    "atan2": (-100.0, 100.0),
    "sinh": (-710.0, 710.0),
    "cosh": (-710.0, 710.0),
    "asinh": (-1e10, 1e10),
    "acosh": (1.0, 1e10),
    "atanh": (-1.0, 1.0),  # to -inf and +inf
    "exp2": (-1075.0, 1024.0),  # from 0 through the denormals to +inf
    "expm1": (-50.0, 709.9),
    "log2": (0.0, 1e300),
    "log10": (0.0, 1e300),
    "cbrt": (-1e300, 1e300),
}
F32_RANGES = {
    "sin": (-1e8, 1e8),  # libmvec's fast path, xfuse's f64 one beyond 10^4, libmvec's scalar one
    "cos": (-1e8, 1e8),
    "tan": (-1e8, 1e8),
    "sinh": (-89.0, 89.0),
    "cosh": (-89.0, 89.0),
    "exp2": (-150.0, 128.0),
    "expm1": (-20.0, 88.8),
    "log2": (0.0, 1e30),
    "log10": (0.0, 1e30),
    "cbrt": (-1e30, 1e30),
}
"""Where float32's range is narrower than `F64_RANGES`'."""
F64_SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 5e-324, -5e-324]
    + [2.2250738585072014e-308, 1e-300, 1e308, -1e308, 709.79, -745.2, 3.0, -3.0]
)
LIBMVEC_ULPS = 4
"""glibc's bound for its vector math functions (ulps of the correctly rounded result)."""


def long_double_reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`name` in x87's 80-bit long double (an erf of it: libm's f64 erf, within 1 ulp)."""
    if name == "erf":
        return np.array([math.erf(v) for v in x], np.longdouble)
    op = ew.OPS_BY_MNEMONIC[name]
    operands = [x.astype(np.longdouble), y.astype(np.longdouble)][: ew.arity(op)]
    return op.reference(*operands)


@dataclass(frozen=True)
class LibmvecFunction:
    """One function that goes through glibc's libmvec: its program (of x, and of x and y for
    pow and atan2) compiled with math=approx for `dtype`, and where its inputs come from."""

    name: str
    dtype: type
    source: str
    kernel: xfuse.Kernel

    @property
    def binary(self) -> bool:
        return LIBMVEC_FUNCTIONS[self.name] == 2

    @property
    def c_name(self) -> str:
        """The C library's name of the function in `dtype` (`sinf` for float32)."""
        return self.name + ("f" if self.dtype is np.float32 else "")

    @property
    def range(self) -> tuple[float, float]:
        ranges = F32_RANGES if self.dtype is np.float32 else {}
        return ranges.get(self.name, F64_RANGES[self.name])

    def inputs(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        arrays = {"x": x.astype(self.dtype), "y": y.astype(self.dtype)}
        return arrays if self.binary else {"x": arrays["x"]}


F32_LIBMVEC = sorted(f.libm for f in MATH_FUNCTIONS.values() if f.approximation is None)
"""The float32 functions that `math=approx` computes with libmvec (it approximates the others)."""


@pytest.fixture(
    params=[
        pytest.param(
            (name, dtype),
            marks=pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec on this host"),
            id=f"{name}-{np.dtype(dtype).name}",
        )
        for dtype, names in ((np.float64, sorted(LIBMVEC_FUNCTIONS)), (np.float32, F32_LIBMVEC))
        for name in names
    ],
)
def libmvec(request: pytest.FixtureRequest) -> LibmvecFunction:
    """Each `LIBMVEC_FUNCTIONS` function in float64, and in float32 where xfuse has no
    approximation of it, where libmvec is loaded."""
    name, dtype = request.param
    operands = "x, y" if LIBMVEC_FUNCTIONS[name] == 2 else "x"
    source = f"out = {name}({operands});"
    kernel = xfuse.compile(source, dtype=np.dtype(dtype).name)
    return LibmvecFunction(name, dtype, source, kernel)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sin_and_cos_stay_within_one(dtype: str) -> None:
    """glibc's variants returned f32 `sin(1.570681)` 1.0000001 and f64
    `cos(2302.7874150871507)` -1.0000000000000002: `asin(sin(x))` was NaN, numpy's pi/2."""
    x = np.array([1.570681, 4.7125044, 9963.561, 2302.7874150871507] * 4 + [np.nan, -np.inf], dtype)
    for function, inverse in (("sin", "asin"), ("cos", "acos")):
        kernel = xfuse.compile(f"y = {function}(x); z = {inverse}(y); output y, z;", dtype=dtype)
        y, z = kernel(x)
        assert np.all(np.abs(y[:16]) <= 1.0) and np.all(np.isnan(y[16:]))
        assert not np.any(np.isnan(z[:16]))
        reference = getattr(np, function)(x[:16].astype(np.float64))
        np.testing.assert_allclose(y[:16], reference, rtol=4 * np.finfo(dtype).eps, atol=0)


def test_math_vectorizes_through_libmvec_and_keeps_the_c_librarys_special_values(
    libmvec: LibmvecFunction,
) -> None:
    # math=approx: f64 loops (and f32 ones of the functions xfuse does not approximate) call
    # glibc's vector functions of the host's widest vectors (`_ZGVeN8v_exp` with AVX-512,
    # `_ZGVdN4v_exp` with AVX2, `_ZGVeN16v_sinf`), within its 4 ulps, with libm's special values
    # (+-0, +-inf, NaN, overflow, underflow); math=libm keeps libm's calls.
    approx, dtype = libmvec.kernel, libmvec.dtype
    libm = xfuse.compile(libmvec.source, dtype=np.dtype(dtype).name, math="libm")
    lanes, _ = libmvec_variants(libmvec.c_name, host_cpu())[0]
    element = "float" if dtype is np.float32 else "double"
    assert re.search(rf"call <{lanes} x {element}> @_ZGV\w+N{lanes}v+_\w+\(", approx.llvm_ir)
    assert "_ZGV" not in libm.llvm_ir
    rng = np.random.default_rng(7)
    x = rng.uniform(*libmvec.range, 1 << 14)
    x[:2] = libmvec.range  # the ends: exp's 0 and +inf
    inputs = libmvec.inputs(x, rng.uniform(-4.0, 4.0, x.size))
    got = approx(**inputs)
    with np.errstate(all="ignore"):
        want = long_double_reference(libmvec.name, inputs["x"], inputs.get("y", inputs["x"]))
        wanted = want.astype(dtype)  # +-inf beyond the dtype's range
    finite = np.isfinite(wanted)
    ulp = np.spacing(np.abs(want[finite]).astype(dtype)).astype(np.longdouble)
    error = np.abs(got[finite].astype(np.longdouble) - want[finite]) / ulp
    assert error.max() <= LIBMVEC_ULPS + (libmvec.name == "erf"), error.max()
    np.testing.assert_array_equal(got[~finite], wanted[~finite])
    with np.errstate(over="ignore"):
        specials = F64_SPECIALS.astype(dtype)
    if libmvec.binary:
        grid = np.meshgrid(specials, specials)
        arguments = {"x": grid[0].ravel(), "y": grid[1].ravel()}
    else:
        arguments = {"x": specials}
    got, want = approx(**arguments), libm(**arguments)
    special = ~np.isfinite(want) | (want == 0)
    # NaN where libm's is NaN (IEEE leaves its sign open: libm's log(-1) was +NaN in one process
    # and x86's default -NaN in another), the same infinities and signed zeros.
    np.testing.assert_array_equal(got[special], want[special])
    signed = special & ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
    assert np.all(np.isfinite(got[~special]) & (got[~special] != 0))


def test_libmvec_results_do_not_depend_on_where_an_element_falls_in_the_loop(
    libmvec: LibmvecFunction,
) -> None:
    # An element is computed by one libmvec variant whether it falls in the vector loop or in
    # its remainder: before, the remainder called libm's scalar function (and the half-width
    # epilogue another variant), which round differently, so the bits changed with the array's
    # length, a split call's slices, a streaming call's head (the out buffer's start) and dask's
    # chunks: identical calls of a `threads=2` kernel differed as its split choice changed.
    kernel, dtype = libmvec.kernel, libmvec.dtype
    split = xfuse.compile(libmvec.source, dtype=np.dtype(dtype).name, threads=2)
    split.split_choice = SplitChoice.always()
    rng = np.random.default_rng(11)
    low, high = libmvec.range
    inputs = libmvec.inputs(
        rng.uniform(max(low, -3.0), min(high, 3.0), 400), rng.uniform(-4.0, 4.0, 400)
    )
    want = kernel(**inputs)
    bits = np.uint32 if dtype is np.float32 else np.uint64
    for shift in range(1, 40):  # the same values, each at another place in the loop
        ones = np.ones(shift, dtype)
        shifted = {name: np.concatenate([ones, array]) for name, array in inputs.items()}
        got = kernel(**shifted)[shift:]
        np.testing.assert_array_equal(got.view(bits), want.view(bits), f"{shift}")
    n = (1 << 16) + 24  # split in two slices of 32776 and 32792 elements: one has a remainder
    inputs = libmvec.inputs(
        rng.uniform(max(low, -30.0), min(high, 30.0), n), rng.uniform(-4.0, 4.0, n)
    )
    np.testing.assert_array_equal(kernel(**inputs).view(bits), split(**inputs).view(bits))


@pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec on this host")
@pytest.mark.parametrize("name", sorted(LARGE_ARGUMENTS))
def test_trigonometry_of_large_arguments_rounds_once_from_float64(name: str) -> None:
    """libmvec's sinf and cosf took their scalar path beyond |x| = 10^4 (12-13 ns per element
    against 0.3), tanf a slow one beyond 8192: from there to `REDUCED_BELOW` xfuse reduces in
    f64 and rounds once, within half an ulp, on random arguments and on the floats nearest to
    multiples of pi/2 (where sin, cos or tan is smallest or largest); each element's bits are
    its value's, whatever lanes share its vector (alone, among small ones, among huge ones)."""
    kernel = xfuse.compile(f"out = {name[:-1]}(x);")
    assert "_ZGV" in kernel.llvm_ir and ".xfuse" in kernel.llvm_ir
    limit = LARGE_ARGUMENTS[name].libmvec_limit
    rng = np.random.default_rng(3)
    low, high = np.log(limit), np.log(REDUCED_BELOW)
    random = np.exp(rng.uniform(low, high, 1 << 16)) * rng.choice([-1.0, 1.0], 1 << 16)
    nearest = np.arange(5300, 42_000_000, 997) * (np.pi / 2)
    # The float32s nearest to multiples of pi/2 from 10^4 to 2^40, by continued fractions of
    # 2^k 2 / pi: |x 2 / pi - n| from 1.3e-9 (sin, cos or tan at its smallest or largest).
    hardest = [21999384576.0, 87997538304.0, 42781604.0, 52516.43359375, 2709675.5, 620046656.0]
    x = np.concatenate([random, nearest, -nearest, hardest, np.negative(hardest)])
    x = x.astype(np.float32)
    x = x[(np.abs(x) > limit) & (np.abs(x) < REDUCED_BELOW)]
    got = kernel(x=x)
    want = getattr(np, name[:-1])(x.astype(np.longdouble))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.longdouble)
    error = np.abs(got.astype(np.longdouble) - want) / ulp
    assert error.max() <= 0.5001, (x[np.argmax(error)], error.max())
    # The same elements among others: small ones (sin's and cos's own path where the host has
    # FMA, else and for tan libmvec's fast path), huge ones (libmvec's scalar path), special
    # values; alone they were all of their vectors.
    others = np.array([0.5, -3.0, 1e9, -3e38, np.inf, np.nan, 100.0, 0.0], np.float32)
    mixed = np.empty(2 * x.size, np.float32)
    mixed[0::2] = x
    mixed[1::2] = np.resize(others, x.size)
    result = kernel(x=mixed)
    np.testing.assert_array_equal(result[0::2].view(np.uint32), got.view(np.uint32))
    libm = xfuse.compile(f"out = {name[:-1]}(x);", math="libm")
    alone = kernel(x=np.resize(others, x.size))
    np.testing.assert_array_equal(result[1::2], alone)
    np.testing.assert_array_equal(np.isnan(alone), np.isnan(libm(x=np.resize(others, x.size))))


OWN_SINE_WORST = {
    "sin": [9107.4765625, 1.6626709699630737],
    "cos": [9963.560546875, 1.3170393705368042],
}
"""Where xfuse's own f32 sin and cos were least accurate over every float32 up to
`OWN_REDUCTION_LIMIT` (docs/math.md), and where each was at its worst in [0, 2]."""


@pytest.mark.skipif(
    not (libmvec_loaded() and host_cpu().has("fma")),
    reason="xfuse computes sin and cos itself where the host has FMA (libmvec beyond 10^4)",
)
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_own_sine_and_cosine_are_inlined_in_the_loop_within_an_ulp_to_their_limit(
    name: str,
) -> None:
    """f32 sin and cos up to |x| = 10^4 are xfuse's own polynomials, inlined in the vector
    loop, whose only call, to the function for large arguments, is behind a branch (SIREN's
    `sin(30 x)` took 2.3 cycles an element in cache on Zen 3 through libmvec, 1.5 so): within
    1.02 float32 ulps of the bound on a sweep of every 127th float32 up to the limit, at the
    worst inputs of every float32 there, never beyond +-1, with the C library's special
    values, zeros' signs and NaNs' bits, and cos(+-0) exactly 1."""
    kernel = xfuse.compile(f"out = {name}(x);")
    body = vector_body(kernel.llvm_ir)
    assert re.search(r"@llvm\.fma\.v(8|16)f32\(", body)
    assert not re.search(r"call (?!.*@llvm\.)", body), body
    assert re.search(r"call preserve_allcc <\d+ x float> @\"?_ZGV[\w.]+\.cold\(", kernel.llvm_ir)
    limit = np.float32(OWN_REDUCTION_LIMIT).view(np.uint32)
    magnitudes = np.arange(0, limit + 1, 127, dtype=np.uint32).view(np.float32)
    x = np.concatenate([magnitudes, -magnitudes, OWN_SINE_WORST[name]]).astype(np.float32)
    got = kernel(x=x)
    want = getattr(np, name)(x.astype(np.float64))
    error = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float32).tiny)
    assert error.max() / ew.FLOAT32_ULP <= 1.02, (x[np.argmax(error)], error.max())
    assert np.abs(got).max() <= 1.0
    tiny = np.array([0.0, -0.0, 1e-45, -1e-45, 1.2e-38, -3e-39], np.float32)
    # NaNs of either sign and several payloads (x86's default NaN, 0/0's, is negative) keep
    # their bits, as the C library's functions keep them, among ordinary lanes or alone.
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7FC00002, 0xFFC00002, 0x7FC12345], np.uint32)
    specials = np.concatenate([tiny, [np.inf, -np.inf], nans.view(np.float32)])
    specials = np.concatenate([specials, np.repeat(specials, 9)]).astype(np.float32)
    libm = xfuse.compile(f"out = {name}(x);", math="libm")
    got, want = kernel(x=specials), libm(x=specials)
    finite = np.isfinite(specials)
    np.testing.assert_array_equal(got.view(np.uint32)[finite], want.view(np.uint32)[finite])
    assert np.all(np.isnan(got[np.isinf(specials)]))
    is_nan = np.isnan(specials)
    np.testing.assert_array_equal(got.view(np.uint32)[is_nan], specials.view(np.uint32)[is_nan])
    if name == "sin":
        np.testing.assert_array_equal(got[:6].view(np.uint32), tiny.view(np.uint32))
    else:
        assert np.all(got[:2] == 1.0)


@pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec on this host")
def test_without_fma_sin_calls_libmvec_in_the_loop(
    use_cpu: Callable[[str, str], HostCpu],
) -> None:
    """The reduction of xfuse's own sin needs FMA's single rounding: a host without it (an
    x86-64 before Haswell, as `XFUSE_CPU_FEATURES` names one here) calls libmvec's variant in
    the loop, as before."""
    use_cpu("x86-64-v2", "+sse4.2,+popcnt")
    kernel = xfuse.compile("out = sin(x);")
    body = vector_body(kernel.llvm_ir)
    assert re.search(r"call <4 x float> @\"?_ZGVbN4v_sinf", body), body
    x = np.linspace(-20.0, 20.0, 1001, dtype=np.float32)
    np.testing.assert_allclose(kernel(x=x), np.sin(x.astype(np.float64)), rtol=0, atol=3e-7)


@pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec on this host")
def test_vector_functions_branch_on_frozen_conditions() -> None:
    """A masked remainder loop passes its masked-off lanes to a vector function as a masked
    load's poison, and a branch on poison is undefined behaviour: each conditional branch of
    xfuse's vector functions (its own sin and cos, the reduction of large arguments of sin,
    cos and tan) takes a frozen condition."""
    module = llvm_ir.Module()
    single = llvm_ir.FloatType()
    unary = llvm_ir.FunctionType(single, [single])
    for name in sorted(LARGE_ARGUMENTS):
        caller = llvm_ir.Function(module, unary, f"{name}_caller")
        builder = llvm_ir.IRBuilder(caller.append_basic_block())
        builder.ret(builder.call(llvm_ir.Function(module, unary, name), caller.args))
    call_libmvec(module, host_cpu())
    text = str(module)
    branches = re.findall(r"^\s*br i1 (%\"?[\w.]+\"?),", text, re.MULTILINE)
    frozen = re.findall(r"^\s*(%\"?[\w.]+\"?) = freeze i1 ", text, re.MULTILINE)
    # 3 in each reduction of large arguments, 1 in each of xfuse's sin and cos
    defined = re.findall(r'^define .*@"?([\w.]+)"?\(', text, re.MULTILINE)
    reductions = sum(name.endswith(".xfuse") for name in defined)
    own = sum(name.endswith(".own") for name in defined)
    assert reductions == len(LARGE_ARGUMENTS) and own == (2 if host_cpu().has("fma") else 0)
    assert len(branches) == 3 * reductions + own, text
    assert sorted(branches) == sorted(frozen)


@pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec on this host")
def test_call_libmvec_calls_a_wrapper_in_the_place_of_the_c_librarys_declaration() -> None:
    # The calls of libm's f64 exp call its wrapper, which has the libmvec variant, is kept until
    # the vectorizer has run, and takes the declaration's place in the module: before the
    # functions after it (the streaming twins, which `add_streaming_twins` appends), as a
    # function's place in the module is its place in the object code.
    double = llvm_ir.DoubleType()
    module = llvm_ir.Module()
    unary = llvm_ir.FunctionType(double, [double])
    first = llvm_ir.Function(module, unary, "first")
    exp = llvm_ir.Function(module, unary, "exp")
    twin = llvm_ir.Function(module, unary, "twin")
    for function in (first, twin):
        builder = llvm_ir.IRBuilder(function.append_basic_block())
        builder.ret(builder.call(exp, function.args))
    call_libmvec(module, host_cpu())
    lanes, variant = libmvec_variants("exp", host_cpu())[0]
    wrapper = libmvec_wrapper_name("exp")
    parsed = llvm_binding.parse_assembly(str(module))
    parsed.verify()
    assert [function.name for function in parsed.functions] == ["first", wrapper, "twin", variant]
    for name in ("first", "twin"):
        calls = [str(i) for b in parsed.get_function(name).blocks for i in b.instructions]
        assert f"call double @{wrapper}(double" in calls[0]
    variant_attribute = f'"vector-function-abi-variant"="_ZGV_LLVM_N{lanes}v_{wrapper}({variant})"'
    assert variant_attribute in str(parsed)
    kept = str(parsed.get_global_variable("llvm.compiler.used"))
    assert f"[ptr @{variant}, ptr @{wrapper}]" in kept


def test_f64_pow_of_a_negative_base_is_pow_of_its_magnitude_signed() -> None:
    """f64 pow under `approx` calls pow on |x| (libmvec's pow of a negative base is its scalar
    fallback: 27.5 against 5.2 ns per element) and selects C's sign and NaN: the same values as
    libm's pow of x, within libmvec's ulps."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0.1, 100, 1 << 12) * rng.choice([-1.0, 1.0], 1 << 12)
    y = np.round(rng.uniform(-40, 40, x.size))
    y[::4] += 0.5  # a negative base with these is NaN
    approx = xfuse.compile("out = pow(x, y);", dtype="float64")
    assert "math.absf" in approx.ir("ew-expand-math")
    got = approx(x=x, y=y)
    want = xfuse.compile("out = pow(x, y);", dtype="float64", math="libm")(x=x, y=y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.count_nonzero(np.isnan(want)) > x.size / 16
    finite = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))  # NaN's aside
    error = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert error.max() <= LIBMVEC_ULPS


def rounded(values: np.ndarray) -> np.ndarray:
    """float64 values rounded to float32 and back (one op's result in the reference)."""
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(np.float64)


OVERFLOW_X = np.array([88.0, 88.7, 88.72283, 88.72284, 89.0, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize(
    ("source", "reference"),
    [
        ("out = exp(x) - 3e38;", lambda e, x: e - rounded(np.array(3e38))),
        ("out = exp(x) - x;", lambda e, x: e - x),
        ("out = 2 * exp(x) + x;", lambda e, x: rounded(2 * e) + x),
    ],
)
def test_overflowing_approx_exp_stays_infinite_next_to_other_ops(
    source: str, reference: object, fuse: bool
) -> None:
    kernel = xfuse.compile(source, fuse=fuse, math="approx")
    x = OVERFLOW_X.astype(np.float64)
    with np.errstate(all="ignore"):
        want = reference(rounded(np.exp(x)), x)  # type: ignore[operator]
    check(kernel(x=OVERFLOW_X), want, ew.ErrorBound(1e-6))


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize(
    ("source", "power"),
    [
        ("out = pow(x, 2) - 3e38;", lambda x: x**2),
        ("out = pow(x, 128) - 3e38;", lambda x: x**128),
        ("out = pow(2, x) - 3e38;", lambda x: 2**x),
    ],
)
def test_overflowing_approx_pow_stays_infinite_next_to_other_ops(
    source: str, power: object, fuse: bool
) -> None:
    # A constant exponent folds pow's special-case selects away: the 2**n scaling meets the fsub.
    kernel = xfuse.compile(source, fuse=fuse, math="approx")
    x = np.array([2e19, 2.0, 1.5, 127.9, 128.0, -89.0, np.inf, -np.inf, np.nan], np.float32)
    with np.errstate(all="ignore"):
        want = rounded(power(x.astype(np.float64))) - rounded(np.array(3e38))  # type: ignore[operator]
    check(kernel(x=x), want, ew.ErrorBound(2e-5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_programs_arithmetic_rounds_as_written(dtype: type) -> None:
    # No FMA joins the program's multiplies and adds by default: numpy's bits at every length
    # (vector body and remainder alike), overflows included (2 x - x at 3.4e38 was 3.4e38 with
    # `contract`, and x x - y y finite where both squares overflow).
    source = "out = 2 * x - x + (x * x - y * y) * 0.5 + x * y * 0.999 + 0.001;"
    kernel = xfuse.compile(source, dtype=np.dtype(dtype).name)
    rng = np.random.default_rng(7)
    big = np.finfo(dtype).max
    x = np.concatenate([rng.standard_normal(1000), [big, -big, big / 3, 1e20, np.inf]])
    y = np.concatenate([rng.standard_normal(1000), [big, big, -big, -1e20, 1.0]])
    x, y = x.astype(dtype), y.astype(dtype)
    with np.errstate(all="ignore"):
        want = 2 * x - x + (x * x - y * y) * dtype(0.5) + x * y * dtype(0.999) + dtype(0.001)
    for n in (x.size, 1000, 999, 37, 5):
        np.testing.assert_array_equal(kernel(x=x[-n:], y=y[-n:]), want[-n:])
    contracted = xfuse.compile(source, dtype=np.dtype(dtype).name, fastmath="contract")
    assert "fmul contract" in contracted.llvm_ir and "fmul contract" not in kernel.llvm_ir


@pytest.mark.parametrize("fastmath", ["fast", "contract,afn"])
def test_fastmath_leaves_the_approximations_as_written(fastmath: str) -> None:
    # The flags are for the program's own arithmetic (none here, or log-sigmoid's negations,
    # which ew-expand-math folds away): the approximations, and the forms fusion writes for
    # sigmoid, log1p and softplus, keep their bits. With `fast` on their ops, LLVM reassociated
    # exp's rounding to an integer away (exp(0.5) was 2.0, exp(9) 8192), tanh(+-inf) was NaN,
    # log1p(1e-6) 9.5e-7 and sigmoid(0) 0.49999997 (a reciprocal).
    x = np.concatenate([sweep(), np.linspace(-100, 100, 1001, dtype=np.float32)])
    functions = ("exp", "tanh", "erf", "log", "sigmoid", "log1p", "softplus")
    for source in [f"out = {f}(x);" for f in functions] + ["out = -softplus(-x);"]:
        with np.errstate(all="ignore"):
            want = xfuse.compile(source)(x=x)
            np.testing.assert_array_equal(xfuse.compile(source, fastmath=fastmath)(x=x), want)


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_keeps_tiny_values_and_its_special_cases(math_mode: str, dtype: type) -> None:
    # log(1 + x) rounds 1 + x to 1 for tiny x and returns 0: log1p returns x there (-0 too).
    # From 2^24 on it is log(1 + x) itself; at -1 it is -inf, below NaN.
    x = np.array(
        [1e-45, 1e-30, -1e-30, 1e-8, -0.0, 0.0, -1.0, -2.0, np.inf, -np.inf, np.nan]
        + [2.0**24 - 1, 2.0**24, 3.4e38, -0.999, 0.5],
        dtype,
    )
    out = xfuse.compile("out = log1p(x);", math=math_mode, dtype=np.dtype(dtype).name)(x=x)
    with np.errstate(all="ignore"):
        want = np.log1p(x.astype(np.float64)).astype(dtype)
    np.testing.assert_allclose(out, want, rtol=4e-7, atol=0)
    signed = ~np.isnan(want)  # a NaN's sign is the hardware's
    assert np.array_equal(np.signbit(out[signed]), np.signbit(want[signed]))


def test_expanding_math_in_threads_at_once_leaves_xdsl_as_it_was() -> None:
    """The approximations are built under xDSL's `ImplicitBuilder`, which patches
    `Operation.__post_init__` process-wide while it is active: expansions in several threads at
    once must restore it (two overlapping ones used to leave it patched, and every op created
    under a later implicit builder was then inserted twice)."""
    ctx = pipeline_context()
    source = """
    func.func @f(%x: f32, %y: f32) -> f32 {
      %p = math.powf %x, %y : f32
      %l = math.log1p %p : f32
      func.return %l : f32
    }"""
    module = Parser(ctx, source).parse_module()
    post_init = Operation.__post_init__
    failures: list[Exception] = []

    def expand_repeatedly() -> None:
        try:
            for _ in range(20):
                EwExpandMathPass().apply(ctx, module.clone())
        except Exception as error:  # reported below, from the main thread
            failures.append(error)

    threads = [threading.Thread(target=expand_repeatedly) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so that expansions overlap
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        patched, Operation.__post_init__ = Operation.__post_init__, post_init  # for later tests
    assert not failures
    assert patched is post_init


def test_approximation_constants_keep_the_sign_of_zero() -> None:
    """The approximations make each constant attribute once per value and type: -0.0 and 0.0,
    equal as float keys, stay two attributes with their own sign bits."""
    from xdsl.dialects.builtin import f32, f64

    from xfuse.transforms.approx import _float_attribute

    negative, positive = (_float_attribute(value.hex(), f32) for value in (-0.0, 0.0))
    assert np.signbit(negative.value.data) and not np.signbit(positive.value.data)
    assert _float_attribute((1.5).hex(), f32) is _float_attribute((1.5).hex(), f32)
    assert _float_attribute((1.5).hex(), f64).type == f64


@pytest.mark.parametrize(
    ("body", "walks"),
    [
        ("%r = arith.mulf %x, %x : f32", 0),  # nothing to expand: the IR is left as it is
        ("%r = math.tanh %x : f32", 1),
        ("%n = arith.negf %x : f32\n      %r = math.rsqrt %n : f32", 2),
    ],
)
def test_expanding_math_walks_the_program_only_for_the_rewrites_it_has_ops_for(
    monkeypatch: pytest.MonkeyPatch, body: str, walks: int
) -> None:
    # Each rewrite walked the whole program, even one without any op it rewrites (0.07 CPU s
    # of a 10^4-op compile without math ops).
    module = Parser(
        pipeline_context(),
        f"func.func @f(%x: f32) -> f32 {{\n      {body}\n      func.return %r : f32\n    }}",
    ).parse_module()
    before = str(module)
    walked: list[type] = []
    rewrite_region = PatternRewriteWalker.rewrite_region

    def spy(walker: PatternRewriteWalker, region: Region) -> bool:
        walked.append(type(walker.pattern))
        return rewrite_region(walker, region)

    monkeypatch.setattr(PatternRewriteWalker, "rewrite_region", spy)
    EwExpandMathPass().apply(pipeline_context(), module)
    assert len(walked) == walks
    assert (str(module) == before) == (walks == 0)
