"""Vectorizable float32 approximations of the `math` functions, emitted as plain `arith` ops.

Every function is straight-line code (clamps and special cases are `arith.select`s, never
branches), so LLVM's loop vectorizer turns a loop over it into full-width SIMD. Measured maximum
errors over a dense sweep of float32 inputs are in docs/math.md (`tests/test_math.py` checks them).

- exp: Cody-Waite reduction x = n ln2 + r with n rounded by the 1.5 * 2**23 trick, Cephes' degree-6
  polynomial for e**r, and 2**n applied in one step (two integer ops build the exponent bits);
  results below 2**-126 take a second scale factor so they round once into the denormals.
  Overflow is a select of +inf above the largest x whose exp is finite, not the last multiply's
  rounding: with `contract`, LLVM fuses that multiply into an FMA with the consumer
  (`exp(x) - 3e38`), which never rounds the product, so it would stay finite. exp(-|y|) (what
  sigmoid and softplus take) cannot overflow and has no such select.
- log: exponent and mantissa from the bits (denormals scaled first), Cephes' degree-9 polynomial.
- log1p: of exp(-|y|) (softplus), whose argument is in [0, 1]: log(1 + x) with the rounding of
  1 + x corrected, no special-case selects, no division; elsewhere Goldberg's
  log(u) * x / (u - 1) with u = 1 + x.
- tanh: a minimax odd/even rational x p(x^2)/q(x^2) (degree 9/8), x^2 <= 8.5^2, clamped to +-1.
- erf: a rational p(x)/q(x) on |x| <= 4 (Eigen's fast erf), as x times the ratio.
- pow: exp(y * log|x|) with the C99 special cases (negative bases with integer exponents, 0, 1).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import SSAValue

_I32 = IntegerType(32)
_F32 = Float32Type()

_LOG2E = 1.44269504088896341
_EXP_FINITE_MAX = 88.72283172607421875  # float32 0x42B17217: exp of the next float32 overflows
_EXP_ZERO_BELOW = -104.0  # exp(-104) < 2**-150: rounds to 0, as does exp of anything below
_EXP_NORMAL_BELOW = -86.5  # above it n >= -125, so 2**(n - 1) is a normal float32
_SQRT2 = 1.41421356
_ROUND_MAGIC = 12582912.0  # 1.5 * 2**23: adding it rounds |v| < 2**22 to an integer in the low bits
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_POLY = (
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
)
_LOG_POLY = (
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
)
# Past 7.9053 the rational below exceeds 1 (by >= 10 ulp at the clamp): clamping the result to
# [-1, 1] makes it exactly +-1 from |x| ~ 8.1 on, where tanh is within 2.3e-7 of it.
_TANH_CLAMP = 8.5
# A minimax rational x p(x^2) / q(x^2), degree 9 over 8, fitted for xfuse on [0, 7.9053]
# (linear programming on the equioscillating error): as accurate as Eigen's degree 13/6 (max abs
# error 3.4e-7 in float32) with 4 fewer operations. q(0) = 1, and x p(x^2) keeps tanh(-0) = -0.
_TANH_NUMERATOR = (
    2.4018950627032817e-08,
    2.780174011931157e-05,
    3.916955653644184e-03,
    1.3731748720424103e-01,
    9.999998221097897e-01,
)
_TANH_DENOMINATOR = (
    1.1979767505623117e-06,
    3.984851726970423e-04,
    2.746697981138055e-02,
    4.7065075462135775e-01,
    1.0,
)
_ERF_CLAMP = 4.0
_ERF_NUMERATOR = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_DENOMINATOR = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


class Float32Emitter:
    """Short names for emitting f32/i32 `arith` ops at a builder's insertion point."""

    def __init__(self, builder: Builder):
        self.builder = builder

    def f(self, value: float) -> SSAValue:
        return self.builder.insert(arith.ConstantOp(FloatAttr(value, _F32))).result

    def i(self, value: int) -> SSAValue:
        return self.builder.insert(arith.ConstantOp(IntegerAttr(value, _I32))).result

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.AddfOp(a, b)).result

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.SubfOp(a, b)).result

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.MulfOp(a, b)).result

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.DivfOp(a, b)).result

    def cmp(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.CmpfOp(a, b, predicate)).result

    def select(self, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.SelectOp(condition, a, b)).result

    def both(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.AndIOp(a, b)).result

    def invert(self, a: SSAValue) -> SSAValue:
        true = self.builder.insert(arith.ConstantOp(IntegerAttr(1, IntegerType(1)))).result
        return self.builder.insert(arith.XOrIOp(a, true)).result

    def abs(self, a: SSAValue) -> SSAValue:
        return self.builder.insert(math.AbsFOp(a)).result

    def floor(self, a: SSAValue) -> SSAValue:
        return self.builder.insert(math.FloorOp(a)).result

    def bits(self, a: SSAValue) -> SSAValue:
        return self.builder.insert(arith.BitcastOp(a, _I32)).result

    def from_bits(self, a: SSAValue) -> SSAValue:
        return self.builder.insert(arith.BitcastOp(a, _F32)).result

    def iadd(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.AddiOp(a, b)).result

    def isub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.SubiOp(a, b)).result

    def shl(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.ShLIOp(a, b)).result

    def ashr(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.ShRSIOp(a, b)).result

    def iand(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.AndIOp(a, b)).result

    def ior(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(arith.OrIOp(a, b)).result

    def to_float(self, a: SSAValue) -> SSAValue:
        return self.builder.insert(arith.SIToFPOp(a, _F32)).result

    def polynomial(self, x: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """Horner's rule; coefficients from the highest degree down."""
        result = self.f(coefficients[0])
        for coefficient in coefficients[1:]:
            result = self.add(self.mul(result, x), self.f(coefficient))
        return result

    def clamp(self, x: SSAValue, low: float, high: float) -> SSAValue:
        """x limited to [low, high]; NaN stays NaN (ordered compares are false for it)."""
        x = self.select(self.cmp("ogt", x, self.f(high)), self.f(high), x)
        return self.select(self.cmp("olt", x, self.f(low)), self.f(low), x)


def _is_non_positive(x: SSAValue) -> bool:
    """x is -|y| (softplus and sigmoid take exp of it): <= 0 or NaN, never large."""
    return isinstance(x.owner, arith.NegfOp) and isinstance(x.owner.operand.owner, math.AbsFOp)


def exp(e: Float32Emitter, x: SSAValue) -> SSAValue:
    # No upper clamp: above 88.72 the final select gives +inf whatever the arithmetic made.
    clamped = e.select(e.cmp("olt", x, e.f(_EXP_ZERO_BELOW)), e.f(_EXP_ZERO_BELOW), x)
    shifted = e.add(e.mul(clamped, e.f(_LOG2E)), e.f(_ROUND_MAGIC))
    n_float = e.sub(shifted, e.f(_ROUND_MAGIC))
    r = e.sub(clamped, e.mul(n_float, e.f(_LN2_HI)))
    r = e.sub(r, e.mul(n_float, e.f(_LN2_LO)))
    # 2 e**r, every step exactly twice Cephes' (1 + r + r^2 p(r)), so that 2**(n - 1) scales it:
    # n reaches 128 below the overflow threshold, and 2**128 is not a float32.
    p = e.polynomial(r, [2.0 * c for c in _EXP_POLY])
    twice = e.add(e.add(e.mul(e.mul(r, r), p), e.add(r, r)), e.f(2.0))
    # The magic's bits are 0x4B400000 + n, and its own bits leave a 32-bit shift by 23.
    exponent = e.shl(e.bits(shifted), e.i(23))
    # Below 2**-126 2**(n - 1) is not a normal float32: scale by 2**(n + 63) instead, then by
    # 2**-64, so that the result rounds once into the denormals (elsewhere the factor is 1).
    tiny = e.cmp("olt", clamped, e.f(_EXP_NORMAL_BELOW))
    bias = e.select(tiny, e.i((126 + 64) << 23), e.i(126 << 23))
    scaled = e.mul(twice, e.from_bits(e.iadd(exponent, bias)))
    result = e.mul(scaled, e.select(tiny, e.f(2.0**-64), e.f(1.0)))
    if _is_non_positive(x):
        return result
    return e.select(e.cmp("ogt", x, e.f(_EXP_FINITE_MAX)), e.f(float("inf")), result)


def _log_of_reduced(e: Float32Emitter, f: SSAValue, exponent: SSAValue) -> SSAValue:
    """log((1 + f) 2**exponent) for f in [sqrt(1/2) - 1, sqrt(2) - 1] (Cephes)."""
    z = e.mul(f, f)
    y = e.mul(e.mul(f, z), e.polynomial(f, _LOG_POLY))
    y = e.add(y, e.mul(exponent, e.f(_LN2_LO)))
    y = e.sub(y, e.mul(z, e.f(0.5)))
    return e.add(e.add(f, y), e.mul(exponent, e.f(_LN2_HI)))


def log(e: Float32Emitter, x: SSAValue) -> SSAValue:
    denormal = e.cmp("olt", x, e.f(1.1754943508222875e-38))
    scaled = e.select(denormal, e.mul(x, e.f(8388608.0)), x)
    bits = e.bits(scaled)
    exponent = e.isub(e.ashr(bits, e.i(23)), e.select(denormal, e.i(150), e.i(127)))
    mantissa = e.from_bits(e.ior(e.iand(bits, e.i(0x007FFFFF)), e.i(0x3F800000)))
    above_sqrt2 = e.cmp("ogt", mantissa, e.f(_SQRT2))
    mantissa = e.select(above_sqrt2, e.mul(mantissa, e.f(0.5)), mantissa)
    exponent = e.iadd(exponent, e.select(above_sqrt2, e.i(1), e.i(0)))
    result = _log_of_reduced(e, e.sub(mantissa, e.f(1.0)), e.to_float(exponent))
    result = e.select(e.cmp("oeq", x, e.f(float("inf"))), x, result)
    result = e.select(e.cmp("oeq", x, e.f(0.0)), e.f(float("-inf")), result)
    return e.select(e.cmp("ult", x, e.f(0.0)), e.f(float("nan")), result)


def _log1p_of_unit(e: Float32Emitter, x: SSAValue) -> SSAValue:
    """log(1 + x) for x in [0, 1] or NaN: no denormal, zero, negative or infinite case to select.

    u = 1 + x is in [1, 2], so its mantissa is u or u / 2, and the rounding error of u,
    c = x - (u - 1), is exact (Sterbenz): log1p(x) = log(u) + c / u. |c| <= 2**-24, so
    1 / u ~ 1 - f + f^2 / 2 (f = u - 1; relative error f^2 |1 - f| / 2) is close enough for that
    term, and it is exact at u = 1, where log1p(x) = c = x.
    """
    u = e.add(e.f(1.0), x)
    f = e.sub(u, e.f(1.0))
    rounding = e.sub(x, f)
    above_sqrt2 = e.cmp("ogt", u, e.f(_SQRT2))
    reduced = e.select(above_sqrt2, e.sub(e.mul(u, e.f(0.5)), e.f(1.0)), f)
    log_u = _log_of_reduced(e, reduced, e.select(above_sqrt2, e.f(1.0), e.f(0.0)))
    reciprocal = e.add(e.mul(f, e.sub(e.mul(f, e.f(0.5)), e.f(1.0))), e.f(1.0))
    return e.add(e.mul(rounding, reciprocal), log_u)


def log1p(e: Float32Emitter, x: SSAValue) -> SSAValue:
    if isinstance(x.owner, math.ExpOp) and _is_non_positive(x.owner.operand):
        return _log1p_of_unit(e, x)
    # Goldberg: u = 1 + x; log(u) * x / (u - 1) corrects u's rounding (x where u rounds to 1).
    u = e.add(e.f(1.0), x)
    corrected = e.div(e.mul(log(e, u), x), e.sub(u, e.f(1.0)))
    result = e.select(e.cmp("oeq", u, e.f(1.0)), x, corrected)
    return e.select(e.cmp("oeq", x, e.f(float("inf"))), x, result)


def tanh(e: Float32Emitter, x: SSAValue) -> SSAValue:
    # x^2 is clamped, not x (one select, not two): past the clamp x p(c^2) / q(c^2) only grows
    # (to inf for huge x), and the result's clamp to [-1, 1] makes all of that +-1.
    limit = _TANH_CLAMP * _TANH_CLAMP
    square = e.mul(x, x)
    x2 = e.select(e.cmp("ogt", square, e.f(limit)), e.f(limit), square)
    numerator = e.mul(x, e.polynomial(x2, _TANH_NUMERATOR))
    return e.clamp(e.div(numerator, e.polynomial(x2, _TANH_DENOMINATOR)), -1.0, 1.0)


def erf(e: Float32Emitter, x: SSAValue) -> SSAValue:
    clamped = e.clamp(x, -_ERF_CLAMP, _ERF_CLAMP)
    x2 = e.mul(clamped, clamped)
    # x times the ratio, not x p / q: x p(0) underflows for tiny x (erf(1e-45) would be 0).
    ratio = e.div(e.polynomial(x2, _ERF_NUMERATOR), e.polynomial(x2, _ERF_DENOMINATOR))
    return e.mul(clamped, ratio)


def pow(e: Float32Emitter, x: SSAValue, y: SSAValue) -> SSAValue:
    log_magnitude = log(e, e.abs(x))
    # y * log|x| is 0 where log|x| is 0, even for y = inf or NaN: pow(+-1, inf) = pow(1, NaN) = 1.
    exponent = e.select(e.cmp("oeq", log_magnitude, e.f(0.0)), e.f(0.0), e.mul(y, log_magnitude))
    magnitude = exp(e, exponent)
    y_is_integer = e.cmp("oeq", e.floor(y), y)
    half_y = e.mul(y, e.f(0.5))
    y_is_odd = e.both(y_is_integer, e.cmp("one", e.floor(half_y), half_y))
    # The sign bit, not x < 0: pow(-0.0, -1) is -inf.
    sign_bit = e.builder.insert(arith.CmpiOp(e.bits(x), e.i(0), "slt")).result
    negated = e.builder.insert(arith.NegfOp(magnitude)).result
    result = e.select(e.both(sign_bit, y_is_odd), negated, magnitude)
    # A finite negative base needs an integer exponent (pow(-inf, 0.5) is +inf, not NaN).
    negative_finite = e.both(e.cmp("olt", x, e.f(0.0)), e.cmp("one", x, e.f(float("-inf"))))
    result = e.select(e.both(negative_finite, e.invert(y_is_integer)), e.f(float("nan")), result)
    return e.select(e.cmp("oeq", y, e.f(0.0)), e.f(1.0), result)
