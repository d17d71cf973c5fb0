"""Vectorizable float32 approximations of the `math` functions, emitted as plain `arith` ops.

Every function is straight-line code (clamps and special cases are `arith.select`s, never
branches), so LLVM's loop vectorizer turns a loop over it into full-width SIMD. Measured maximum
errors over a dense sweep of float32 inputs are in docs/math.md (`tests/test_math.py` checks them).

- exp: Cody-Waite reduction x = n ln2 + r with n rounded by the 1.5 * 2**23 trick, Cephes' degree-6
  polynomial for e**r, and 2**n applied as two exact power-of-two factors (so results down to
  2**-149 are right). Overflow is a select of +inf above the largest x whose exp is finite, not
  the last multiply's rounding: with `contract`, LLVM fuses that multiply into an FMA with the
  consumer (`exp(x) - 3e38`), which never rounds the product, so it would stay finite.
- log: exponent and mantissa from the bits (denormals scaled first), Cephes' degree-9 polynomial.
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
_ROUND_MAGIC = 12582912.0  # 1.5 * 2**23: adding it rounds |v| < 2**22 to an integer in the low bits
_ROUND_MAGIC_BITS = 0x4B400000
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


def exp(e: Float32Emitter, x: SSAValue) -> SSAValue:
    clamped = e.clamp(x, -104.0, 89.0)
    shifted = e.add(e.mul(clamped, e.f(_LOG2E)), e.f(_ROUND_MAGIC))
    n = e.isub(e.bits(shifted), e.i(_ROUND_MAGIC_BITS))
    n_float = e.sub(shifted, e.f(_ROUND_MAGIC))
    r = e.sub(clamped, e.mul(n_float, e.f(_LN2_HI)))
    r = e.sub(r, e.mul(n_float, e.f(_LN2_LO)))
    p = e.polynomial(r, _EXP_POLY)
    mantissa = e.add(e.add(e.mul(e.mul(r, r), p), r), e.f(1.0))
    half = e.ashr(n, e.i(1))
    scale_a = e.from_bits(e.shl(e.iadd(half, e.i(127)), e.i(23)))
    scale_b = e.from_bits(e.shl(e.iadd(e.isub(n, half), e.i(127)), e.i(23)))
    result = e.mul(e.mul(mantissa, scale_a), scale_b)
    return e.select(e.cmp("ogt", x, e.f(_EXP_FINITE_MAX)), e.f(float("inf")), result)


def log(e: Float32Emitter, x: SSAValue) -> SSAValue:
    denormal = e.cmp("olt", x, e.f(1.1754943508222875e-38))
    scaled = e.select(denormal, e.mul(x, e.f(8388608.0)), x)
    bits = e.bits(scaled)
    exponent = e.isub(e.ashr(bits, e.i(23)), e.select(denormal, e.i(150), e.i(127)))
    mantissa = e.from_bits(e.ior(e.iand(bits, e.i(0x007FFFFF)), e.i(0x3F800000)))
    above_sqrt2 = e.cmp("ogt", mantissa, e.f(1.41421356))
    mantissa = e.select(above_sqrt2, e.mul(mantissa, e.f(0.5)), mantissa)
    exponent = e.iadd(exponent, e.select(above_sqrt2, e.i(1), e.i(0)))
    exponent_float = e.to_float(exponent)
    f = e.sub(mantissa, e.f(1.0))
    z = e.mul(f, f)
    y = e.mul(e.mul(f, z), e.polynomial(f, _LOG_POLY))
    y = e.add(y, e.mul(exponent_float, e.f(_LN2_LO)))
    y = e.sub(y, e.mul(z, e.f(0.5)))
    result = e.add(e.add(f, y), e.mul(exponent_float, e.f(_LN2_HI)))
    result = e.select(e.cmp("oeq", x, e.f(float("inf"))), x, result)
    result = e.select(e.cmp("oeq", x, e.f(0.0)), e.f(float("-inf")), result)
    return e.select(e.cmp("ult", x, e.f(0.0)), e.f(float("nan")), result)


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
