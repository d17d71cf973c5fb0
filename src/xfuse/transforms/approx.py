"""Vectorizable float32 approximations of the `math` functions, emitted as plain `arith` ops.

Every function is straight-line code (clamps and special cases are `arith.select`s, never
branches), so LLVM's loop vectorizer turns a loop over it into full-width SIMD. Measured maximum
errors over a dense sweep of float32 inputs are in docs/math.md (`tests/test_math.py` checks them).
Each is a function of the op's operands written with xDSL's op constructors (`arith.AddfOp(a, b)`,
which take an op for its result), run by `expand` under an `ImplicitBuilder` that inserts them;
their constants are shared (`SharedConstants`): one op per value in each block.

- exp: Cody-Waite reduction x = n ln2 + r with n rounded by the 1.5 * 2**23 trick, e**r in
  Cephes' form (r + r^2 p(r), then + 1; p fitted for xfuse; of exp(-|y|) and Mish's e^y,
  whose results are rounded again, the same polynomial by Horner's rule alone, two ops fewer),
  and 2**n applied in one step (two integer ops build the exponent bits); results below
  2**-126 take a second scale factor so they round once into the denormals (always, without a
  select, where the argument is at most 44: exp(-|y|), Mish's e^y, or where a select takes
  exp's value only there, ELU's `select(x > 0, x, exp(x) - 1)`: `_largest_used`; there the
  trick's magic holds the exponent bias, so one integer op, a shift, builds the bits:
  `_rounding_magic`).
  On hosts with AVX-512 (`ew-expand-math{ldexp}`) 2**n is applied by one `llvm.ldexp`
  (`vscalefps`) instead, the same bits.
  Overflow is a select of +inf above the largest x whose exp is finite, not the last multiply's
  rounding: with `contract`, LLVM fuses that multiply into an FMA with the consumer
  (`exp(x) - 3e38`), which never rounds the product, so it would stay finite. exp(-|y|) (what
  sigmoid and softplus take) cannot overflow and has no such select, nor has ELU's exp.
- log: exponent and mantissa from the bits (denormals scaled first), Cephes' degree-9 polynomial.
  Of 1 + exp(y): softplus's form, max(y, 0) + log1p(exp(-|y|)), with the composition's special
  values (+0 where 1 + exp(y) rounds to 1, +inf where exp(y) overflows, its NaN): one exp
  without its overflow select and one polynomial, where the two took a full exp and log.
- log1p: of exp(-|y|) (softplus), whose argument is in [0, 1]: x + x (x p(x)) with one
  polynomial fitted for xfuse, no range reduction, special-case selects or division; elsewhere
  Goldberg's log(u) * x / (u - 1) with u = 1 + x.
- tanh: a minimax odd/even rational x p(x^2)/q(x^2) (degree 9/8) with FMAs, x clamped where the
  quotient is exactly 1 before it first passes 1 (|x| ~ 7.93), as erf's below; of softplus(y)
  (Mish, `y * tanh(softplus(y))`) or of log(1 + exp(y)) (with the composition's +0 and NaN):
  n / (n + 2) with n = e^y (e^y + 2).
- GELU's (0.5 x) (1 + tanh(u)) (`ew-expand-math` finds it): x / (1 + 2^t) with t = -2 u log2(e),
  the same function with a short exp2 (t clamped, rounded to n + r, 2^r of degree 5) in place
  of tanh's rational, and more accurate; of GELU's own u = c (h + a h^3), t = h (k + k a h^2).
- erf: a rational p(x)/q(x) (Eigen's fast erf), as x p(x^2) / q(x^2) with q(0) = 1 and FMAs,
  clamped where it is exactly 1 before it first passes 1 (|x| ~ 3.65).
- tanh and erf of y times (or divided by) a constant c fold c (1 / c) into their coefficients
  (`_scaled_argument`).
- pow: exp(y * log|x|) in f64 (the reduction of |x| in f32), rounded once to f32, with the C99
  special cases (negative bases with integer exponents, 0, 1); a constant y of 1, 2, 3, 4, -1 or
  +-1/2 never gets here (`expand_math.PowBySimpleConstant`).
- rsqrt: the host's estimate (an `arcp` division by sqrt, which LLVM's x86 backend turns into
  `vrsqrt14ps`/`vrsqrtps`), then a second-order step of ours with the residual 1 - x y^2
  computed with FMAs to one rounding; denormals scaled, 0 and inf selected.
"""

from __future__ import annotations

import functools
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from xdsl.builder import Builder, ImplicitBuilder
from xdsl.dialects import arith, llvm, math
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    UnitAttr,
)
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from xfuse.transforms import ROUNDING_MAGIC, RSQRT_ESTIMATE, is_rounding_magic

Value = SSAValue | Operation
"""An SSA value, or the single-result op that defines it (xDSL's op constructors take both)."""

_I1 = IntegerType(1)
_I32 = IntegerType(32)
_I64 = IntegerType(64)
_F32 = Float32Type()
_F64 = Float64Type()

_LOG2E = 1.44269504088896341
_EXP_FINITE_MAX = 88.72283172607421875  # float32 0x42B17217: exp of the next float32 overflows
_EXP_ZERO_BELOW = -104.0  # exp(-104) < 2**-150: rounds to 0, as does exp of anything below
_ONE_PLUS_EXP_IS_ONE_BELOW = -16.63553047180176  # float32 0xC1851591, the next above ln 2**-24
_EXP_NORMAL_BELOW = -86.5  # above it n >= -125, so 2**(n - 1) is a normal float32
_SQRT2 = 1.41421356
_FLOAT32_MIN_NORMAL = 2.0**-126
_LOGISTIC_EXP2_MIN = -30.0  # `_exp2_of_logistic`: 1 + 2^t rounds to 1 below -25
_LOGISTIC_EXP2_MAX = 128.5  # 2^t overflows from 128 on (n <= 128, so 2^(n-1) is a float32)
# (2^r - 1) / r on |r| <= 1/2, degree 4, minimax of 2^r's relative error (linear programming,
# 1.1e-7 with the float32 coefficients), highest first.
_LOGISTIC_EXP2_POLY = (
    0.0013274706434458494,
    0.00967196375131607,
    0.05550678074359894,
    0.24022234976291656,
    0.6931470632553101,
)
_FLOAT32_INFINITY_BITS = 0x7F800000
_ROUND_MAGIC_BITS = 0x4B400000  # ROUNDING_MAGIC's bits: the sum's are these plus the integer
_EXP_EARLY_BIAS = 126 + 64
"""The float32 exponent bias of 2**(n + 63), the factor `_exp` scales by where n <= 64."""
_EXP_EARLY_MAX = 44.0
"""The largest argument `_exp` without `full_range` is exact for (n <= 64)."""

_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
# e**r ~ 1 + r + r^2 p(r) on |r| <= 0.35 (ln 2 / 2 and the reduction's slack), p of degree 4,
# highest first: a minimax fit of e**r's relative error for xfuse (linear programming, 3.3e-9
# before the coefficients' rounding to float32, 4.7e-9 after; two earlier fits of this degree
# were 5.0e-8 off and less accurate than Cephes'). It replaced Cephes' p of degree 5, one FMA
# more: over every float32 exp(x) is within 8.50e-8 relative where the result is normal
# (Cephes': 8.46e-8) and its denormal results within 0.750 of a step of 2^-149 both ways.
_EXP_POLY = (
    0.001381313311867416,
    0.008369424380362034,
    0.04166845604777336,
    0.16666515171527863,
    0.4999999403953552,
)
_EXP_HORNER_POLY = (*_EXP_POLY, 1.0, 1.0)
"""The same polynomial as e**r itself, 1 + r + r^2 p(r) by Horner's rule alone (`_exp`'s
`horner`): two ops fewer (no r^2, no step adding r), but its rounding of ~1 inside the rule
adds up to 0.35 ulp before the last: exp(x) within 7.71e-8 relative where the result is normal
(every float32 x <= 0; Cephes' form 8.50e-8) and 0.875 of a step of 2^-149 where it is a
denormal (Cephes' form 0.750). exp(-|y|) and Mish's e^y take it: their results are rounded
again (sigmoid, softplus, log-sigmoid, log(1 + exp(y)), Mish: the same maximum errors), and
their loops ran 1.03-1.15x faster; exp(x) and ELU's `exp(x) - 1` keep Cephes' form (ELU's loop
spilled more with Horner's: 0.88-0.92x)."""
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
# (log1p(x) - x) / x^2 on [0, 1], degree 8, fitted for xfuse: minimax of the error weighted by
# x^2 / log1p(x) (what it adds to log1p's relative error; Lawson's iteration), each coefficient
# rounded to float32 in turn from the constant term up, the rest refitted: 5.3e-9 at most.
_LOG1P_OF_UNIT_POLY = (
    -0.003290468594059348,
    0.020086241886019707,
    -0.05745723098516464,
    0.10661128163337708,
    -0.15344880521297455,
    0.19692102074623108,
    -0.24958018958568573,
    0.33330464363098145,
    -0.4999993145465851,
)
# pow in f64 (`_log_f64`, `_exp_f64_to_f32`): (log1p(f) - f) / f^2 on [sqrt(1/2) - 1, sqrt(2) - 1]
# and (e**r - 1 - r) / r^2 on |r| <= ln(2) / 2 (both + 1e-3), fitted for xfuse (least squares at
# 600 Chebyshev nodes in 40-digit arithmetic, weighted by the relative error of the whole):
# log(1 + f) within 2.2e-11 relative, e**r within 6.1e-11.
_POW_LOG1P_POLY = (
    0.051704893395068896,
    -0.0974946370484542,
    0.10052223929728146,
    -0.09960473693104568,
    0.11007720311952687,
    -0.12494068747954716,
    0.14290552745816237,
    -0.16667080164551423,
    0.19999901080446467,
    -0.2499999182134438,
    0.33333334005213194,
    -0.5000000004000255,
)
_POW_EXP_POLY = (
    0.0001982639175639325,
    0.001394634900748196,
    0.00833343112850212,
    0.0416662657278023,
    0.16666666154994983,
    0.5000000079477831,
)
_LN2_F64 = 0.6931471805599453  # ln 2 rounded to f64: n ln 2 is off by < 1e-14 for |n| <= 160
_ROUND_MAGIC_F64 = 6755399441055744.0  # 1.5 * 2**52: adding it rounds |v| < 2**51 to an integer
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
_TANH_OF_SOFTPLUS_ONE_FROM = 9.1  # tanh(softplus(y)) rounds to 1 in float32 from y ~ 9.011
_SCAN_CHUNK = 1 << 17
_FOLDED_SCALE_MIN = 1 / 16  # `_scaled_argument`: the smallest |c| folded, and 1 / it the largest
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


@dataclass(frozen=True)
class _OddRational:
    """An odd rational x p(x^2) / q(x^2) of a function that saturates at +-1 (tanh, erf), with
    the span of c x where `_clamped_rational` looks for its clamp."""

    numerator: tuple[float, ...]
    denominator: tuple[float, ...]
    """q's coefficients, highest degree first; divided by q(0) before use, so q(0) = 1."""
    scan_from: float
    """Below it 1 - f is many ulps of 1 more than the rational's error and rounding: the
    quotient stays below 1 there."""
    scan_to: float
    """Past it the quotient has passed 1 (for every scale measured)."""


_TANH = _OddRational(_TANH_NUMERATOR, _TANH_DENOMINATOR, scan_from=7.5, scan_to=8.5)
"""1 - tanh(7.5) = 6.1e-7, 10 ulps of 1, twice the rational's error; its quotient first passes
1 at c x ~ 7.93 (7.91-7.93 for 8 scales from 1/16 to 16, 2026-12-03)."""
_ERF = _OddRational(_ERF_NUMERATOR, _ERF_DENOMINATOR, scan_from=3.5, scan_to=4.0)
"""Below 3.5 1 - erf > 7.4e-7, 12 ulps of 1 (its quotient stayed below 1 - 5 ulps up to c x =
3.55 for 12 scales from 1/16 to 16, 2026-12-03); it passes 1 by up to 3 ulps from c x ~ 3.65
(where 1 - erf is ~2.4e-7; Eigen's fast erf does the same)."""


_IMPLICIT_BUILDER_LOCK = threading.Lock()
"""xDSL 0.75's `ImplicitBuilder` patches `Operation.__post_init__` for the whole process; two
threads inside one at once leave it patched twice, and every later op then inserts twice."""

# A fork while another thread was inside an expansion left the child this lock held (its first
# compile of an approximation waited forever) and the patch in place: the fork waits until no
# thread is inside one, as for llvmlite's lock (`xfuse.codegen.native`).
os.register_at_fork(
    before=_IMPLICIT_BUILDER_LOCK.acquire,
    after_in_parent=_IMPLICIT_BUILDER_LOCK.release,
    after_in_child=_IMPLICIT_BUILDER_LOCK.release,
)


@dataclass
class SharedConstants:
    """The constants of the approximations that one pass expands: one `arith.constant` per value
    (bits and type) in each block, at the block's start, which every expansion in the block
    uses. A kernel of five tanh then holds each coefficient once, not five times: LLVM sees the
    same immediates, and the passes after have a third fewer ops to rewrite (the tanh chain of
    `benchmarks/compile_scaling.py`: 16,607 of its 43,219 ops were constants)."""

    ops: dict[tuple[Block, FloatAttr | IntegerAttr], SSAValue] = field(
        default_factory=dict[tuple[Block, FloatAttr | IntegerAttr], SSAValue]
    )

    def get(self, value: FloatAttr | IntegerAttr, block: Block) -> SSAValue:
        """The constant `value` of `block`, made at its start on first use."""
        shared = self.ops.get((block, value))
        if shared is None:
            constant = arith.ConstantOp.create(
                result_types=[value.type], properties={"value": value}
            )
            # The `ImplicitBuilder` of `expand` inserted it before the expanded op: move it.
            constant.detach()
            block.insert_op_before(constant, cast(Operation, block.first_op))
            shared = self.ops[(block, value)] = constant.result
        return shared


@dataclass(frozen=True)
class _Expansion:
    """What the approximations of one `expand` call build with."""

    constants: SharedConstants
    block: Block
    """The block of the op expanded, whose start holds the constants."""
    ldexp: bool
    """exp applies 2**n with `llvm.ldexp` (see `expand`)."""
    op: Operation
    """The op expanded (its results' uses say where its value matters: `_largest_used`)."""


_EXPANDING: ContextVar[_Expansion] = ContextVar("_EXPANDING")


@contextmanager
def _expanding(expansion: _Expansion) -> Iterator[None]:
    token = _EXPANDING.set(expansion)
    try:
        yield
    finally:
        _EXPANDING.reset(token)


def expand(
    approximation: Callable[..., SSAValue],
    op: Operation,
    constants: SharedConstants,
    *,
    ldexp: bool = False,
) -> SSAValue:
    """The value of `approximation` on `op`'s operands, its ops inserted before `op` (the
    approximations below create `arith` ops, which `ImplicitBuilder` inserts there) and its
    constants taken from `constants`. With `ldexp`, exp scales e**r by 2**n with one
    `llvm.ldexp` (AVX-512's `vscalefps`) instead of building 2**n from integer ops; only for
    hosts with AVX-512, where LLVM lowers it so (elsewhere it calls `ldexpf` per element)."""
    block = op.parent_block()
    assert block is not None, "expand needs an op in a block"
    before = op.prev_op
    with (
        _IMPLICIT_BUILDER_LOCK,
        _expanding(_Expansion(constants, block, ldexp, op)),
        ImplicitBuilder(Builder(InsertPoint.before(op))),
    ):
        result = approximation(*op.operands)
    _mark_inserted(op, before)
    return result


def _mark_inserted(end: Operation, before: Operation | None) -> None:
    """Give the ops an expansion inserted (those after `before`, up to `end`) `end`'s location,
    and the float arithmetic among them `contract`: the approximations are written, and their
    clamps and special values checked, for LLVM fusing their multiplies and adds into FMAs; the
    program's own arithmetic carries no flags (`ew-to-llvm{fastmath=none}`), so no FMA joins an
    expansion's multiply with the program's add, which could hide an overflow."""
    current = end.prev_op
    while current is not None and current is not before:
        add_fastmath(current, {FastMathFlag.ALLOW_CONTRACT})
        current.location = end.location
        current = current.prev_op


FLOAT_ARITHMETIC = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp)
"""The float ops that carry fast-math flags into LLVM (`ew-to-llvm`)."""


def add_fastmath(op: Operation, flags: set[FastMathFlag]) -> None:
    """Join `flags` to the fast-math flags of `op` if it is `FLOAT_ARITHMETIC` (else nothing)."""
    if isinstance(op, FLOAT_ARITHMETIC):
        own = cast(arith.FastMathFlagsAttr, op.properties["fastmath"])
        op.properties["fastmath"] = arith.FastMathFlagsAttr(own.data | flags)


def _constant(value: FloatAttr | IntegerAttr) -> SSAValue:
    expansion = _EXPANDING.get()
    return expansion.constants.get(value, expansion.block)


def _f32(value: float) -> SSAValue:
    return _constant(_float_attribute(float(value).hex(), _F32))


def _f64(value: float) -> SSAValue:
    return _constant(_float_attribute(float(value).hex(), _F64))


def _constants_like(x: Value) -> Callable[[float], SSAValue]:
    """`_f64` for an f64 value, else `_f32`: constants of x's type."""
    return _f64 if SSAValue.get(x).type == _F64 else _f32


@functools.cache
def _float_attribute(hex_value: str, type_: Float32Type | Float64Type) -> FloatAttr:
    """The attribute of a value, made once per value and type: keyed by its hex text, which
    tells -0.0 from 0.0 (equal as float keys)."""
    return FloatAttr(float.fromhex(hex_value), type_)


@functools.cache
def _integer_attribute(value: int, type_: IntegerType) -> IntegerAttr:
    return IntegerAttr(value, type_)


def _i32(value: int) -> SSAValue:
    return _constant(_integer_attribute(value, _I32))


def _i64(value: int) -> SSAValue:
    return _constant(_integer_attribute(value, _I64))


_NO_FASTMATH = {"fastmath": arith.FastMathFlagsAttr("none")}


def _float_op(
    op_type: type[arith.FloatingPointLikeBinaryOperation], lhs: Value, rhs: Value
) -> SSAValue:
    """`op_type(lhs, rhs)`, the op its constructor makes, built with `create` (the generic
    constructor costs twice the op: the polynomials are most of the expanded ops)."""
    lhs = SSAValue.get(lhs)
    operands = [lhs, SSAValue.get(rhs)]
    return op_type.create(
        operands=operands, result_types=[lhs.type], properties=_NO_FASTMATH
    ).result


@functools.cache
def _compare_properties(predicate: str) -> dict[str, Attribute]:
    return {
        "predicate": IntegerAttr(arith.CMPF_COMPARISON_OPERATIONS.index(predicate), 64),
        **_NO_FASTMATH,
    }


def _compare(lhs: Value, rhs: Value, predicate: str) -> arith.CmpfOp:
    """`arith.CmpfOp(lhs, rhs, predicate)`, built with `create` as `_float_op` is."""
    return arith.CmpfOp.create(
        operands=[SSAValue.get(lhs), SSAValue.get(rhs)],
        result_types=[_I1],
        properties=_compare_properties(predicate),
    )


def _select(condition: Value, if_true: Value, if_false: Value) -> arith.SelectOp:
    """`arith.SelectOp(condition, if_true, if_false)`, built with `create` as `_float_op` is."""
    if_true = SSAValue.get(if_true)
    return arith.SelectOp.create(
        operands=[SSAValue.get(condition), if_true, SSAValue.get(if_false)],
        result_types=[if_true.type],
    )


def _polynomial(x: Value, coefficients: Sequence[float], *, fused: bool = False) -> Value:
    """Horner's rule in x's type (f32 or f64); coefficients from the highest degree down.
    `fused`: each step one `math.fma`, whatever the fast-math flags (else a multiply and an add,
    which `contract` lets LLVM fuse)."""
    constant = _constants_like(x)
    result: Value = constant(coefficients[0])
    for coefficient in coefficients[1:]:
        if fused:
            result = math.FmaOp(result, x, constant(coefficient))
        else:
            result = _float_op(
                arith.AddfOp, _float_op(arith.MulfOp, result, x), constant(coefficient)
            )
    return result


def _clamp(x: Value, low: float, high: float) -> SSAValue:
    """x limited to [low, high]; NaN stays NaN (ordered compares are false for it)."""
    x = _select(_compare(x, _f32(high), "ogt"), _f32(high), x)
    return _select(_compare(x, _f32(low), "olt"), _f32(low), x).result


def _is_non_positive(x: SSAValue) -> bool:
    """x is -|y| (softplus and sigmoid take exp of it): <= 0 or NaN, never large."""
    return isinstance(x.owner, arith.NegfOp) and isinstance(x.owner.operand.owner, math.AbsFOp)


def _least_value(x: SSAValue, depth: int = 4) -> float:
    """A number an f32 or f64 `x` is never below but where it is NaN, from the ops that compute
    it (-inf where they do not say; `depth` ops back): a constant is itself, a square (`y * y`)
    and |y| are at least 0, max(a, b) at least the larger of a's and b's, and a + b at least
    their sum rounded (rounding is monotonic, so with an FMA too). -0 counts as 0. (e^y is
    expanded before the ops that use it are: its `math.exp` is gone by then.)"""
    owner = x.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        return owner.value.value.data
    if depth == 0:
        return float("-inf")
    if isinstance(owner, arith.MulfOp) and owner.lhs == owner.rhs:
        return 0.0
    if isinstance(owner, math.AbsFOp):
        return 0.0
    if isinstance(owner, arith.MaximumfOp | arith.MaxnumfOp):
        return max(_least_value(owner.lhs, depth - 1), _least_value(owner.rhs, depth - 1))
    if isinstance(owner, arith.AddfOp):
        precision = np.float32 if isinstance(x.type, Float32Type) else np.float64  # x's rounding
        with np.errstate(invalid="ignore", over="ignore"):  # -inf + inf: nothing known
            least = float(
                precision(_least_value(owner.lhs, depth - 1))
                + precision(_least_value(owner.rhs, depth - 1))
            )
        return float("-inf") if least != least else least
    return float("-inf")


def _rounding_magic(offset: int) -> float:
    """1.5 * 2**23 + `offset` (even, up to 255): adding it to v (|v| < 2**21) rounds v to an
    integer n, and the sum's bits are 0x4B400000 + n + offset, so shifted left by 23 they are
    those of 2**(n + offset - 127) where 0 < n + offset < 255: the power of two with no integer
    add. n is the same as with 1.5 * 2**23 alone (an even offset keeps the ties' parity)."""
    assert is_rounding_magic(ROUNDING_MAGIC + offset), offset
    return ROUNDING_MAGIC + offset


def exp(x: SSAValue) -> SSAValue:
    expanded = _EXPANDING.get().op  # math.exp(x)
    if _is_non_positive(x):
        return _exp(x, full_range=False, horner=True)
    return _exp(x, full_range=_largest_used(expanded.results[0], x) > _EXP_EARLY_MAX)


_INF = float("inf")
_ARM_BOUNDED_ABOVE = {
    **dict.fromkeys(("olt", "ole", "ult", "ule"), True),
    **dict.fromkeys(("ogt", "oge", "ugt", "uge"), False),
}
"""For `cmpf(x, c)`: the select arm (True, False) taken only where x <= c or x is NaN."""
_SWAPPED = {"olt": "ogt", "ogt": "olt", "ole": "oge", "oge": "ole"}
_SWAPPED |= {"ult": "ugt", "ugt": "ult", "ule": "uge", "uge": "ule"}
"""The predicate of `cmpf(c, x)` as one of `cmpf(x, c)`."""


def _largest_used(value: SSAValue, x: SSAValue, depth: int = 6) -> float:
    """The largest `x` where `value` can matter (inf where its uses do not bound it; `depth`
    ops on): every use of `value` is an arm of a select, which takes it only where its
    condition says (`x` at most c in `select(x > c, _, value)`, `select(x < c, value, _)`, either
    order, unordered too; NaN x is not bounded, so its value counts), or float arithmetic,
    where it matters where that op's result does. ELU's `select(x > 0, x, exp(x) - 1)`: exp's
    value matters for x <= 0 only (or NaN), so it needs no overflow select."""
    if depth == 0:
        return _INF
    largest = float("-inf")
    for use in value.uses:
        user = use.operation
        if isinstance(user, arith.SelectOp) and use.index > 0:
            largest = max(
                largest,
                min(_arm_bound(user, use.index == 1, x), _largest_used(user.result, x, depth - 1)),
            )
        elif isinstance(user, FLOAT_ARITHMETIC):
            largest = max(largest, _largest_used(user.results[0], x, depth - 1))
        else:
            return _INF
    return largest


def _arm_bound(select: arith.SelectOp, arm: bool, x: SSAValue) -> float:
    """c where `select`'s condition is `cmpf(x, c)` (either order) and its `arm` is taken only
    where x <= c or x is NaN; inf where not."""
    compare = select.cond.owner
    if not isinstance(compare, arith.CmpfOp):
        return _INF
    predicate = compare.predicate.value.data
    name = arith.CMPF_COMPARISON_OPERATIONS[predicate]
    if compare.lhs == x:
        bound = _constant_value(compare.rhs)
    elif compare.rhs == x:
        bound, name = _constant_value(compare.lhs), _SWAPPED.get(name, name)
    else:
        return _INF
    if bound is None or bound != bound or _ARM_BOUNDED_ABOVE.get(name) is not arm:
        return _INF  # x > NaN is never true: the false arm takes every x
    return bound


def _exp(x: SSAValue, full_range: bool, horner: bool = False) -> SSAValue:
    """exp(x); without `full_range` only where x <= 44 (exp(-|y|); Mish's e^y, unused above 9.1;
    ELU's, unused above 0), and whatever the arithmetic makes above (NaN for inf). `horner`:
    e**r by `_EXP_HORNER_POLY` (only without `full_range`), else by Cephes' form."""
    # No upper clamp: above 88.72 the final select gives +inf whatever the arithmetic made.
    below = _compare(x, _f32(_EXP_ZERO_BELOW), "olt")
    clamped = _select(below, _f32(_EXP_ZERO_BELOW), x)
    offset = 0 if full_range else _EXP_EARLY_BIAS
    magic = _f32(_rounding_magic(offset))
    shifted = arith.AddfOp(arith.MulfOp(clamped, _f32(_LOG2E)), magic)
    n_float = arith.SubfOp(shifted, magic)
    r = arith.SubfOp(clamped, arith.MulfOp(n_float, _f32(_LN2_HI)))
    r = arith.SubfOp(r, arith.MulfOp(n_float, _f32(_LN2_LO)))
    scaled_e_r = _horner_exp_of_reduced(r.result) if horner else _cephes_exp_of_reduced(r.result)
    result = _times_power_of_two(scaled_e_r, shifted.result, clamped.result, offset)
    if not full_range:
        return result
    overflows = _compare(x, _f32(_EXP_FINITE_MAX), "ogt")
    return _select(overflows, _f32(float("inf")), result).result


_ScaledExp = Callable[[float], SSAValue]
"""e**r times a power of two, built where it is asked for (`_times_power_of_two`)."""


def _cephes_exp_of_reduced(r: SSAValue) -> _ScaledExp:
    """Cephes' form: e**r - 1 = r + r^2 p(r), then its scale s as s (e**r - 1) + s, the 1
    added last, after the exact scaling (a rounding of ~1 inside Horner's rule adds up to 0.35
    ulp: `_EXP_HORNER_POLY`)."""
    p = _polynomial(r, _EXP_POLY)
    minus_one = arith.AddfOp(arith.MulfOp(arith.MulfOp(r, r), p), r).result

    def scaled(scale: float) -> SSAValue:
        if scale == 1.0:
            return arith.AddfOp(minus_one, _f32(1.0)).result
        return arith.AddfOp(arith.MulfOp(minus_one, _f32(scale)), _f32(scale)).result

    return scaled


def _horner_exp_of_reduced(r: SSAValue) -> _ScaledExp:
    """e**r by `_EXP_HORNER_POLY`, its scale carried by every coefficient: exact, as each
    step's sum is a normal float32 (near its coefficient times the scale, the least 1.4e-3
    times 2^-63), so it rounds as e**r's own does."""
    return lambda scale: _polynomial(r, [c * scale for c in _EXP_HORNER_POLY])


def _times_power_of_two(
    scaled_e_r: _ScaledExp, shifted: SSAValue, clamped: SSAValue, offset: int
) -> SSAValue:
    """e**r 2**n from e**r (`scaled_e_r`) and n + `offset` in the low bits of `shifted`
    (`_exp`'s rounding trick, `_rounding_magic(offset)`), of `clamped`, exp's argument clamped
    below: one rounding of e**r, then the scaling, exact or rounded once into the denormals, in
    each of the two forms (the same bits). `offset` is 0 for the full range, else
    `_EXP_EARLY_BIAS`."""
    if _EXPANDING.get().ldexp:
        # vscalefps: n = -150 gives 0 or 2**-149, n = 128 a finite result where e**r < 1.
        n = arith.SubiOp(arith.BitcastOp(shifted, _I32), _i32(_ROUND_MAGIC_BITS + offset))
        e_r = scaled_e_r(1.0)
        return llvm.CallIntrinsicOp("llvm.ldexp.f32.i32", [e_r, n], [_F32]).results[0]
    exponent = arith.ShLIOp(arith.BitcastOp(shifted, _I32), _i32(23))
    # 2**n is scaled as 2 e**r times 2**(n - 1): n reaches 128 below the overflow threshold, and
    # 2**128 is not a float32. Below 2**-126 2**(n - 1) is not a normal float32: scale by
    # 2**(n + 63) instead, and e**r by 2**-63, so that the result rounds once into the
    # denormals. Either way e**r is scaled by the power of two exactly, fused or not, and
    # rounds as e**r does: the same bits.
    if offset:
        # n <= 64: 2**(n + 63) is a normal float32 for every n, so always the two factors: no
        # compare, selects and constants to keep (silu's 64-element AVX-512 loop: 133 -> 111
        # instructions, and no constants spilled to the stack; docs/benchmarks.md). Its bits
        # are the shifted (n + 190): the magic's offset, so no integer add.
        early = scaled_e_r(2.0**-63)
        return arith.MulfOp(early, arith.BitcastOp(exponent, _F32)).result
    twice = scaled_e_r(2.0)
    tiny = _compare(clamped, _f32(_EXP_NORMAL_BELOW), "olt")
    bias = _select(tiny, _i32(_EXP_EARLY_BIAS << 23), _i32(126 << 23))
    scaled = arith.MulfOp(twice, arith.BitcastOp(arith.AddiOp(exponent, bias), _F32))
    return arith.MulfOp(scaled, _select(tiny, _f32(2.0**-64), _f32(1.0))).result


def _log_of_reduced(f: Value, exponent: Value) -> Value:
    """log((1 + f) 2**exponent) for f in [sqrt(1/2) - 1, sqrt(2) - 1] (Cephes)."""
    z = arith.MulfOp(f, f)
    y = arith.MulfOp(arith.MulfOp(f, z), _polynomial(f, _LOG_POLY))
    y = arith.AddfOp(y, arith.MulfOp(exponent, _f32(_LN2_LO)))
    y = arith.SubfOp(y, arith.MulfOp(z, _f32(0.5)))
    return arith.AddfOp(arith.AddfOp(f, y), arith.MulfOp(exponent, _f32(_LN2_HI)))


def _one_plus_exp_argument(value: SSAValue) -> SSAValue | None:
    """y where `value` is 1 + exp(y) or exp(y) + 1 (`math.exp`, not expanded yet) used only by
    the log being expanded, else None. Computing that log as log(1 + e^y) is right only where
    nothing else sees the sum's rounding: Goldberg's log1p, log(u) x / (u - 1) with u = 1 + x,
    needs the log of the rounded u (log1p(exp(y)) was off by up to half its value near y = -15.5
    when its log(u) was softplus)."""
    if value.uses.get_length() != 1:
        return None
    total = value.owner
    e = beside_constant(total, 1.0) if isinstance(total, arith.AddfOp) else None
    return e.owner.operand if e is not None and isinstance(e.owner, math.ExpOp) else None


def _log_of_one_plus_exp(y: SSAValue, sum_rounded: bool = True) -> SSAValue:
    """log(1 + exp(y)) as the composition of the two approximations gives it where IEEE decides
    the result, computed as softplus elsewhere: max(y, 0) + log1p(exp(-|y|)), one exp without
    its overflow select and `_log1p_of_unit`, where the composition took a full exp and log.
    Without `sum_rounded`, it is log1p(exp(y)), whose composition keeps e^y's digits where
    1 + exp(y) rounds to 1, as softplus does: no select there.

    The composition's special values, bit for bit, selected: +0 where 1 + exp(y) rounds to 1,
    that is exp(y) <= 2**-24, y < ln 2**-24 (-inf included; softplus is e**y there); +inf where
    exp(y) overflows (y > 88.72, +inf included; no select where the value counts only below:
    PyTorch's softplus, `select(y > 20, y, log1p(exp(y)))`, `_largest_used`); for NaN the
    composition's NaN (log's select of a constant), not the NaN of y's payload and -|y|'s sign
    that the sum would carry. Elsewhere softplus's value, within its documented error of
    log(1 + e**y): the composition's log of 1 + exp(y) rounded is off by up to 6e-8 (half an
    ulp of 1) absolute, which is relative error up to 1 just above ln 2**-24. (Making exp(-|y|)
    0 there instead, by its clamp, was slower: exp(-104) computes denormals, for y in (-104,
    -16.6) too.)"""
    e = _exp(arith.NegfOp(math.AbsFOp(y)).result, full_range=False, horner=True)
    relu = _select(_compare(y, _f32(0.0), "ogt"), y, _f32(0.0))
    result = _float_op(arith.AddfOp, relu, _log1p_of_unit(e))
    if sum_rounded:
        rounds_to_one = _compare(y, _f32(_ONE_PLUS_EXP_IS_ONE_BELOW), "olt")
        result = _select(rounds_to_one, _f32(0.0), result)
    if _largest_used(_EXPANDING.get().op.results[0], y) > _EXP_FINITE_MAX:
        result = _select(_compare(y, _f32(_EXP_FINITE_MAX), "ogt"), _f32(float("inf")), result)
    return _select(_compare(y, y, "uno"), _f32(float("nan")), result).result


def _reduced_for_log(x: SSAValue) -> tuple[SSAValue, SSAValue]:
    """f and k (i32) with x = (1 + f) 2**k, 1 + f in [sqrt(1/2), sqrt(2)), f exact, for an f32 x
    > 0 from its bits (denormals scaled by 2**23 first)."""
    denormal = _compare(x, _f32(1.1754943508222875e-38), "olt")
    scaled = _select(denormal, arith.MulfOp(x, _f32(8388608.0)), x)
    bits = arith.BitcastOp(scaled, _I32)
    biased_exponent = arith.ShRSIOp(bits, _i32(23))
    exponent = arith.SubiOp(biased_exponent, _select(denormal, _i32(150), _i32(127)))
    mantissa_bits = arith.OrIOp(arith.AndIOp(bits, _i32(0x007FFFFF)), _i32(0x3F800000))
    mantissa = arith.BitcastOp(mantissa_bits, _F32)
    above_sqrt2 = _compare(mantissa, _f32(_SQRT2), "ogt")
    mantissa = _select(above_sqrt2, arith.MulfOp(mantissa, _f32(0.5)), mantissa)
    exponent = arith.AddiOp(exponent, _select(above_sqrt2, _i32(1), _i32(0)))
    return arith.SubfOp(mantissa, _f32(1.0)).result, exponent.result


def log(x: SSAValue) -> SSAValue:
    argument = _one_plus_exp_argument(x)
    if argument is not None:
        return _log_of_one_plus_exp(argument)
    f, exponent = _reduced_for_log(x)
    result = _log_of_reduced(f, arith.SIToFPOp(exponent, _F32))
    result = _select(_compare(x, _f32(float("inf")), "oeq"), x, result)
    result = _select(_compare(x, _f32(0.0), "oeq"), _f32(float("-inf")), result)
    return _select(_compare(x, _f32(0.0), "ult"), _f32(float("nan")), result).result


def _log1p_of_unit(x: SSAValue) -> SSAValue:
    """log(1 + x) for x in [0, 1] or NaN (exp(-|y|)): x + x (x p(x)), one polynomial and no
    range reduction, select or division.

    p approximates (log1p(x) - x) / x^2, which is analytic on [0, 1] (its nearest singularity is
    at -1); the error of x^2 p(x) is weighted by x^2 / log1p(x) <= 1.45, so the last, rounded
    addition of x keeps the result within about half an ulp plus the error of x itself. Exact
    at 0 (+0) and x where x^2 p(x) is below half an ulp of x (the deep tail of softplus).
    """
    polynomial = _polynomial(x, _LOG1P_OF_UNIT_POLY)
    return arith.AddfOp(arith.MulfOp(x, arith.MulfOp(x, polynomial)), x).result


def log1p(x: SSAValue) -> SSAValue:
    if isinstance(x.owner, math.ExpOp):
        y = x.owner.operand
        return (
            _log1p_of_unit(x) if _is_non_positive(y) else _log_of_one_plus_exp(y, sum_rounded=False)
        )
    # Goldberg: u = 1 + x; log(u) * x / (u - 1) corrects u's rounding (x where u rounds to 1).
    u = arith.AddfOp(_f32(1.0), x)
    log_u = log(u.result)
    corrected = arith.DivfOp(arith.MulfOp(log_u, x), arith.SubfOp(u, _f32(1.0)))
    result = _select(_compare(u, _f32(1.0), "oeq"), x, corrected)
    # log(u) from 2^24 on (u is then within half an ulp of 1 + x, and x log(u) overflowed from
    # 3.9e36) and at a NaN x: log's NaN, where x log(u) would keep whichever of two NaNs the
    # multiply's operand order says. As `_log1p` in scalar.py, which the ew ops take.
    return _select(_compare(x, _f32(2.0**24), "uge"), log_u, result).result


def times_half_plus(x: SSAValue, half: SSAValue) -> SSAValue:
    """x (0.5 + half): GELU's (0.5 x) (1 + f) with half = f / 2 (`ew-expand-math`'s
    `gelu_form`)."""
    return arith.MulfOp(x, arith.AddfOp(_f32(0.5), half)).result


def gelu_of_tanh(x: SSAValue, u: SSAValue) -> SSAValue:
    """GELU's (0.5 x) (1 + tanh(u)) as x / (1 + 2^t) with t = -2 u log2(e): the same function
    ((1 + tanh(u)) / 2 is the logistic of 2 u), with one short exp2 (`_exp2_of_logistic`) and one
    division for tanh's rational and its division. The factor -2 log2(e) goes into u's constant:
    of c y (`_scaled_argument`) t = y (-2 c log2(e)), of GELU's own c (h + a h^3)
    (`_cubic_argument`) t = h (k + k a h^2) with k = -2 c log2(e), one multiply fewer. That
    form only for c > 0 and a > 0 (GELU's) with k and k a normal float32s: then t has u's sign
    and infinities wherever u has them (u = NaN at h = -inf is t = +inf there, and -inf / inf is
    NaN), where a = 0 would make 0 * inf of a huge h, and an infinite k of h = 0."""
    cubic = _cubic_argument(u)
    if cubic is not None:
        h, k, ka = cubic
        square = _float_op(arith.MulfOp, h, h)
        inner = _float_op(arith.AddfOp, _float_op(arith.MulfOp, square, _f32(ka)), _f32(k))
        t = _float_op(arith.MulfOp, h, inner)
    else:
        y, scale = _scaled_argument(u)
        t = _float_op(arith.MulfOp, y, _f32(_rounded_to_float32(-2 * scale * _LOG2E)))
    power = _exp2_of_logistic(t)
    return _float_op(arith.DivfOp, x, _float_op(arith.AddfOp, power, _f32(1.0)))


def _exp2_of_logistic(t: SSAValue) -> SSAValue:
    """2^t where only 1 + 2^t matters (`gelu_of_tanh`): t clamped to [-30, 128.5] (below -25
    1 + 2^t rounds to 1; from 128 on 2^t overflows to +inf, so -inf / (1 + 2^t) is NaN and a
    finite x / (1 + 2^t) is -0), NaN kept; t = n + r with n rounded by the 1.5 * 2^23 trick
    (r = t - n exact: no multiply), 2 * 2^r = 2 + r (2 P(r)) with P of degree 4 (1.1e-7
    relative), scaled by 2^(n-1) from the trick's bits as `_times_power_of_two` does."""
    clamped = _clamp(t, _LOGISTIC_EXP2_MIN, _LOGISTIC_EXP2_MAX)
    magic = _f32(_rounding_magic(126))  # the bits of 2^(n-1) are the shifted (n + 126)
    shifted = arith.AddfOp(clamped, magic)
    r = arith.SubfOp(clamped, arith.SubfOp(shifted, magic))
    twice_p = _polynomial(r, [2 * c for c in _LOGISTIC_EXP2_POLY])
    twice = arith.AddfOp(arith.MulfOp(twice_p, r), _f32(2.0))
    scale = arith.BitcastOp(arith.ShLIOp(arith.BitcastOp(shifted, _I32), _i32(23)), _F32)
    return arith.MulfOp(twice, scale).result


def _cubic_argument(u: SSAValue) -> tuple[SSAValue, float, float] | None:
    """h, k and k a (`_cubic_constants`) where u is c (h + a h^3) as written (any order of the
    sum and of each product, the constants float32), each intermediate used only once, else
    None."""
    scaled = u.owner
    if not isinstance(scaled, arith.MulfOp):
        return None
    for sum_value, factor in ((scaled.lhs, scaled.rhs), (scaled.rhs, scaled.lhs)):
        c = _constant_value(factor)
        total = sum_value.owner
        if c is None or not isinstance(total, arith.AddfOp) or not sum_value.has_one_use():
            continue
        for h, cube in ((total.lhs, total.rhs), (total.rhs, total.lhs)):
            a = _cube_coefficient(cube, h)
            folded = _cubic_constants(c, a) if a is not None else None
            if folded is not None:
                return h, *folded
    return None


def _cubic_constants(c: float, a: float) -> tuple[float, float] | None:
    """k = -2 c log2(e) and k a rounded to float32 (`gelu_of_tanh`), or None unless c > 0,
    a > 0 and both are normal float32s."""
    k = _rounded_to_float32(-2 * c * _LOG2E)
    ka = _rounded_to_float32(-2 * c * _LOG2E * a)
    normal = all(_FLOAT32_MIN_NORMAL <= abs(v) < float("inf") for v in (k, ka))
    return (k, ka) if c > 0 and a > 0 and normal else None


def _cube_coefficient(value: SSAValue, h: SSAValue) -> float | None:
    """a where `value` is a product of h, h, h and the constant a (any association; h^3 also as
    `math.fpowi` of 3, which `pow(h, 3)` becomes), each product used once, else None."""
    factors: list[SSAValue] = []
    pending = [value]
    while pending:
        current = pending.pop()
        owner = current.owner
        if isinstance(owner, arith.MulfOp) and current.has_one_use() and current is not h:
            pending += [owner.lhs, owner.rhs]
        elif isinstance(owner, math.FPowIOp) and current.has_one_use() and _is_three(owner.rhs):
            factors += [owner.lhs] * 3
        else:
            factors.append(current)
    values = [_constant_value(f) for f in factors]
    constants = [v for v in values if v is not None]
    variables = [f for f, v in zip(factors, values, strict=True) if v is None]
    if len(constants) == 1 and len(variables) == 3 and all(f == h for f in variables):
        return constants[0]
    return None


def _is_three(value: SSAValue) -> bool:
    """`value` is the integer constant 3."""
    owner = value.owner
    held = owner.value if isinstance(owner, arith.ConstantOp) else None
    return isinstance(held, IntegerAttr) and held.value.data == 3


def _constant_value(value: SSAValue) -> float | None:
    """The value of a float constant rounded to float32 (what an f32 op computes with), else
    None."""
    owner = value.owner
    held = owner.value if isinstance(owner, arith.ConstantOp) else None
    return _rounded_to_float32(held.value.data) if isinstance(held, FloatAttr) else None


def beside_constant(op: arith.AddfOp | arith.MulfOp, literal: float) -> SSAValue | None:
    """The other operand of `op` where one is the constant `literal` (either order), else
    None."""
    if is_constant(op.lhs, literal):
        return op.rhs
    return op.lhs if is_constant(op.rhs, literal) else None


def is_constant(value: SSAValue, literal: float) -> bool:
    """`value` is a float constant holding `literal` in its own type (f32 or f64: the f64
    log-sigmoid folds too), sign of zero included."""
    held = value.owner.value if isinstance(value.owner, arith.ConstantOp) else None
    return isinstance(held, FloatAttr) and held == FloatAttr(literal, held.type)


def _is_zero(value: SSAValue) -> bool:
    return is_constant(value, 0.0)


def softplus_argument(value: SSAValue) -> SSAValue | None:
    """y where `value` is softplus(y) as fusion writes it, `(y > 0 ? y : 0) + log1p(exp(-|y|))`
    (`xfuse.transforms.scalar`), else None."""
    total = value.owner
    if not isinstance(total, arith.AddfOp):
        return None
    relu, log1p = total.lhs.owner, total.rhs.owner
    if not (isinstance(relu, arith.SelectOp) and isinstance(log1p, math.Log1pOp)):
        return None
    positive, exp_op = relu.cond.owner, log1p.operand.owner
    y = relu.lhs
    if not (
        isinstance(exp_op, math.ExpOp)
        and _is_non_positive(exp_op.operand)
        and isinstance(positive, arith.CmpfOp)
        and arith.CMPF_COMPARISON_OPERATIONS[positive.predicate.value.data] == "ogt"
        and positive.lhs == y
        and _is_zero(positive.rhs)
        and _is_zero(relu.rhs)
    ):
        return None
    absolute = exp_op.operand.owner.operand.owner  # -|y|: negf of absf (_is_non_positive)
    return y if isinstance(absolute, math.AbsFOp) and absolute.operand == y else None


def _tanh_of_softplus(y: SSAValue) -> SSAValue:
    """tanh(log(1 + e)) = n / (n + 2) with e = exp(y) and n = e (e + 2) (Mish's factor): one exp
    and one division for softplus's exp and log1p and tanh's rational. Toward y = -inf it is e
    (n = 2e exactly once e is tiny) with exp's relative error, down to the denormals; NaN stays
    NaN; above y = 9.1 (it rounds to 1 from ~9.011) it is 1, whatever exp (without its overflow
    select) and n (overflowing from y ~ 44: inf / inf) make there."""
    e = _exp(y, full_range=False, horner=True)
    n = arith.MulfOp(e, arith.AddfOp(e, _f32(2.0)))
    ratio = arith.DivfOp(n, arith.AddfOp(n, _f32(2.0)))
    saturated = _compare(y, _f32(_TANH_OF_SOFTPLUS_ONE_FROM), "ogt")
    return _select(saturated, _f32(1.0), ratio).result


def _scaled_argument(x: SSAValue) -> tuple[SSAValue, float]:
    """y and c where x is y * d (either order; c = d) or y / d (c = 1 / d, exact in float64)
    with d a float32 constant of magnitude in [1/16, 16], else x and 1. tanh and erf are odd
    rationals x p(x^2) / q(x^2): of c y they are y p'(y^2) / q'(y^2) with c folded into the
    coefficients, one multiply or division fewer (GELU's erf(x * 0.7071) and PyTorch's
    erf(x / sqrt(2)), tanh(0.798 (x + 0.0447 x^3))) and one rounding fewer. Within the bounds
    every scaled coefficient is a normal float32 (the smallest: erf's highest, 4e-24 at 1/16)."""
    scaled = x.owner
    if isinstance(scaled, arith.MulfOp):
        candidates = [(scaled.lhs, scaled.rhs, False), (scaled.rhs, scaled.lhs, False)]
    elif isinstance(scaled, arith.DivfOp):
        candidates = [(scaled.lhs, scaled.rhs, True)]
    else:
        return x, 1.0
    for y, factor, divides in candidates:
        c = _constant_value(factor)
        if c is not None and _FOLDED_SCALE_MIN <= abs(c) <= 1 / _FOLDED_SCALE_MIN:
            return y, 1 / c if divides else c
    return x, 1.0


def _rounded_to_float32(value: float) -> float:
    """`value` rounded to the nearest float32, as a Python float."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _scaled_coefficients(
    coefficients: Sequence[float], scale: float, odd: bool, by: float = 1.0
) -> list[float]:
    """The coefficients (highest degree first) of `by` p(c^2 t) (times c where `odd`): p in x^2
    of an odd or even rational in x, of x = c y, as a polynomial in t = y^2."""
    degree = len(coefficients) - 1
    return [
        by * coefficient * scale ** (2 * (degree - index) + odd)
        for index, coefficient in enumerate(coefficients)
    ]


def tanh(x: SSAValue) -> SSAValue:
    """tanh(x); GELU's (0.5 x) (1 + tanh(u)) is `gelu_of_tanh`."""
    argument = softplus_argument(x)
    composed = argument is None and isinstance(x.owner, math.LogOp)
    if composed:
        argument = _one_plus_exp_argument(cast(math.LogOp, x.owner).operand)
    if argument is not None:
        ratio = _tanh_of_softplus(argument)
        if composed:
            # tanh of log(1 + exp(y)) as written (a hand-written Mish): the composition's +0
            # where 1 + exp(y) rounds to 1 and its NaN (`_log_of_one_plus_exp`), else the pair's.
            rounds_to_one = _compare(argument, _f32(_ONE_PLUS_EXP_IS_ONE_BELOW), "olt")
            ratio = _select(rounds_to_one, _f32(0.0), ratio)
            is_nan = _compare(argument, argument, "uno")
            ratio = _select(is_nan, _f32(float("nan")), ratio).result
        return ratio
    return _odd_rational(x, _TANH, 1.0)


def _check_power_of_two(value: float) -> None:
    """A result scale must be a positive power of two: scaling by anything else would round."""
    numerator, denominator = value.as_integer_ratio()
    exact = value > 0 and numerator & (numerator - 1) == 0 and denominator & (denominator - 1) == 0
    assert exact, f"{value} is not a positive power of two: scaling by it would round"


@functools.cache
def _clamped_rational(
    function: _OddRational, scale: float
) -> tuple[float, list[float], list[float]] | None:
    """The clamp L of f(c y)'s y and its rational's float32 coefficients (q(0) = 1), or None
    where no float32 y makes the quotient exactly 1 before it first exceeds 1.

    L is the last y before the quotient first passes 1 where it, evaluated as `_odd_rational`
    does (FMAs), is exactly 1: |f| <= 1 everywhere, f(+-inf) = +-1, and GELU's 0 * inf sees
    exactly +-1, with no select after the division. Found by evaluating every float32 y from c y =
    `scan_from` on, in chunks, up to the chunk where the quotient first exceeds 1 (erf: ~0.6 M
    floats, tanh: ~0.9 M; 10-60 ms, once per function and scale in a process)."""
    normalized = 1 / function.denominator[-1]
    numerator = [
        _rounded_to_float32(c)
        for c in _scaled_coefficients(function.numerator, scale, odd=True, by=normalized)
    ]
    denominator = [
        _rounded_to_float32(c)
        for c in _scaled_coefficients(function.denominator, scale, odd=False, by=normalized)
    ]
    # |quotient| is that of |c|'s coefficients: c's sign only negates the numerator's.
    first = np.float32(function.scan_from / abs(scale)).view(np.int32)
    last = np.float32(function.scan_to / abs(scale)).view(np.int32)
    limit = None
    for chunk_start in range(int(first), int(last) + 1, _SCAN_CHUNK):
        bits = np.arange(chunk_start, min(chunk_start + _SCAN_CHUNK, int(last) + 1))
        y = bits.astype(np.int32).view(np.float32)
        square = y * y
        quotient = np.abs(y * _horner_fma32(numerator, square) / _horner_fma32(denominator, square))
        past_one = np.flatnonzero(quotient > 1)
        end = past_one[0] if past_one.size else y.size
        ones = np.flatnonzero(quotient[:end] == 1)
        if ones.size:
            limit = float(y[ones[-1]])
        if past_one.size:
            break
    return None if limit is None else (limit, numerator, denominator)


def _horner_fma32(coefficients: Sequence[float], t: np.ndarray) -> np.ndarray:
    """`_polynomial(fused=True)` in numpy on float32 `t`: each step's product is exact in
    float64 and the sum rounds there and then to float32 (an FMA's result, but for the double
    rounding of a float64 sum on a float32 midpoint)."""
    t64 = t.astype(np.float64)
    result = np.full(t.shape, coefficients[0], np.float64)
    rounded = np.empty(t.shape, np.float32)
    for coefficient in coefficients[1:]:
        np.multiply(result, t64, out=result)
        np.add(result, coefficient, out=result)
        np.copyto(rounded, result, casting="unsafe")
        np.copyto(result, rounded)
    return rounded


def erf(x: SSAValue, result_scale: float = 1.0) -> SSAValue:
    """erf(x) times `result_scale`, a power of two: scaling the numerator's coefficients scales
    every step of the rational exactly (GELU's 0.5 erf, `ew-expand-math`)."""
    return _odd_rational(x, _ERF, result_scale)


def _odd_rational(x: SSAValue, function: _OddRational, result_scale: float) -> SSAValue:
    """`function`'s rational of x, x clamped where the quotient is exactly +-1
    (`_clamped_rational`), times `result_scale` (a power of two, in the numerator's
    coefficients: exact); of c y (`_scaled_argument`) with c folded in where that clamp exists."""
    _check_power_of_two(result_scale)
    y, scale = _scaled_argument(x)
    rational = _clamped_rational(function, scale)
    if rational is None:
        y, scale = x, 1.0
        rational = _clamped_rational(function, scale)
        assert rational is not None, "the unscaled rational's clamp is exact"
    limit, numerator, denominator = rational
    clamped = _clamp(y, -limit, limit)
    y2 = arith.MulfOp(clamped, clamped)
    # q(0) = 1, so y p(y^2) keeps a tiny y's digits (erf(1e-45) is not 0, tanh(-0) is -0). The
    # division last: at the clamp the quotient is exactly +-1, which no FMA that contraction
    # makes of a last multiply and its consumer (GELU's 1 + f) could make of a product (GELU(-inf)
    # would be +inf, not NaN). The Horner steps are FMAs whatever the fast-math flags: the clamp
    # was found for exactly those values.
    scaled = [coefficient * result_scale for coefficient in numerator]
    product = arith.MulfOp(clamped, _polynomial(y2, scaled, fused=True))
    return arith.DivfOp(product, _polynomial(y2, denominator, fused=True)).result


def _log_f64(a: SSAValue) -> SSAValue:
    """log(a) in f64 of an f32 a >= 0 or NaN (pow's |x|): k and 1 + f in [sqrt(1/2), sqrt(2))
    from a's bits in f32 (16 lanes to f64's 8; denormals scaled first), f exact, then
    k ln 2 + f + f^2 q(f) in f64, within 2.2e-11 relative. -inf at 0, a itself at +inf and NaN."""
    f, exponent = _reduced_for_log(a)
    f64 = arith.ExtFOp(f, _F64)
    q = _polynomial(f64, _POW_LOG1P_POLY)
    log1p = arith.AddfOp(arith.MulfOp(arith.MulfOp(f64, f64), q), f64)
    result = arith.AddfOp(arith.MulfOp(arith.SIToFPOp(exponent, _F64), _f64(_LN2_F64)), log1p)
    result = _select(_compare(a, _f32(0.0), "oeq"), _f64(float("-inf")), result)
    return _select(_compare(a, _f32(float("inf")), "uge"), arith.ExtFOp(a, _F64), result).result


def _exp_f64_to_f32(t: SSAValue) -> SSAValue:
    """exp(t) of an f64 t, rounded once to f32 (+inf where it overflows, through the denormals to
    0): t clamped to [-110, 90] (0 and +inf in f32 beyond), t = n ln 2 + r with n rounded by the
    1.5 * 2**52 trick, e**r = 1 + r + r^2 e(r) within 6.1e-11 relative, 2**n from integer ops."""
    t = _select(_compare(t, _f64(-110.0), "olt"), _f64(-110.0), t)
    t = _select(_compare(t, _f64(90.0), "ogt"), _f64(90.0), t)
    shifted = arith.AddfOp(arith.MulfOp(t, _f64(_LOG2E)), _f64(_ROUND_MAGIC_F64))
    n = arith.SubfOp(shifted, _f64(_ROUND_MAGIC_F64))
    r = arith.SubfOp(t, arith.MulfOp(n, _f64(_LN2_F64)))
    e_r_minus_one = arith.AddfOp(arith.MulfOp(arith.MulfOp(r, r), _polynomial(r, _POW_EXP_POLY)), r)
    e_r = arith.AddfOp(e_r_minus_one, _f64(1.0))
    # The magic's bits are 0x4338000000000000 + n, its low 12 bits 0: shifted by 52, n's bits.
    exponent = arith.ShLIOp(arith.BitcastOp(shifted, _I64), _i64(52))
    scale = arith.BitcastOp(arith.AddiOp(exponent, _i64(1023 << 52)), _F64)
    return arith.TruncFOp(arith.MulfOp(e_r, scale), _F32).result


def pow(x: SSAValue, y: SSAValue) -> SSAValue:
    """x**y as exp(y log|x|) in f64, rounded once to f32: y log|x| is within ~2e-9 of its value
    (|y log|x|| <= 110 where the result is not 0 or inf), so the result is correctly rounded
    but where it lies within ~2e-9 relative of a rounding boundary, and overflows exactly where
    x**y does. In f32 its error was up to ~130 ulps, and pow(3.4e38, 1) was +inf. The C99
    special cases are selects: negative bases with integer exponents, 0, 1, inf, NaN."""
    log_magnitude = _log_f64(math.AbsFOp(x).result)
    # y * log|x| is 0 where log|x| is 0, even for y = inf or NaN: pow(+-1, inf) = pow(1, NaN) = 1.
    log_is_zero = _compare(log_magnitude, _f64(0.0), "oeq")
    product = arith.MulfOp(arith.ExtFOp(y, _F64), log_magnitude)
    magnitude = _exp_f64_to_f32(_select(log_is_zero, _f64(0.0), product).result)
    return signed_power(x, y, magnitude)


def signed_power(x: SSAValue, y: SSAValue, magnitude: SSAValue) -> SSAValue:
    """pow(x, y) from magnitude = pow(|x|, y) (f32 or f64), by C99's rules: negated for a
    negative x (-0 and -inf too) and an odd integer y, NaN for a finite negative x and a y that
    is not an integer, 1 for y = +-0 (also for a NaN x). f64 pow under `approx` is libmvec's
    pow of |x| and this: its own takes a scalar fallback for a negative base."""
    constant = _constants_like(x)
    bits, zero_bits = (_I64, _i64(0)) if constant is _f64 else (_I32, _i32(0))
    y_is_integer = _compare(math.FloorOp(y), y, "oeq")
    half_y = arith.MulfOp(y, constant(0.5))
    y_is_odd = arith.AndIOp(y_is_integer, _compare(math.FloorOp(half_y), half_y, "one"))
    # The sign bit, not x < 0: pow(-0.0, -1) is -inf.
    sign_bit = arith.CmpiOp(arith.BitcastOp(x, bits), zero_bits, "slt")
    negated = arith.NegfOp(magnitude)
    result = _select(arith.AndIOp(sign_bit, y_is_odd), negated, magnitude)
    # A finite negative base needs an integer exponent (pow(-inf, 0.5) is +inf, not NaN).
    negative = _compare(x, constant(0.0), "olt")
    negative_finite = arith.AndIOp(negative, _compare(x, constant(float("-inf")), "one"))
    y_is_fraction = arith.XOrIOp(y_is_integer, _constant(IntegerAttr(1, _I1)))
    needs_integer = arith.AndIOp(negative_finite, y_is_fraction)
    result = _select(needs_integer, constant(float("nan")), result)
    return _select(_compare(y, constant(0.0), "oeq"), constant(1.0), result).result


def rsqrt(x: SSAValue) -> SSAValue:
    """1 / sqrt(x) within ~0.5 ulp, from an estimate the divider does not compute.

    `arcp` lets LLVM replace 1 / sqrt(s) by the host's estimate (x86: `vrsqrt14ps`, within
    2^-14, on 512-bit vectors; `vrsqrtps`/`vrsqrtss`, 1.5 * 2^-12, elsewhere), bare where the
    division carries `RSQRT_ESTIMATE` and nothing else in the module lets LLVM estimate (see
    `xfuse.codegen.native.raw_rsqrt_estimates`), else with a Newton step of LLVM's (~3e-7);
    where LLVM keeps the division, y is 1 / sqrt(s) itself. Ours is the second-order step
    y (1 + e / 2 + 3 e^2 / 8) with e = 1 - s y^2, whose error is 5/16 of e^3 (|e| <= 3 * 2^-12:
    1.2e-10, 0.002 ulp) plus its rounding: e is computed from s y = h + l exactly (two FMAs),
    so the last FMA's rounding is nearly all. The estimate sees no denormal (`vrsqrtps` takes
    one as 0): those are scaled by 2^32 and the result by 2^16. At +-0 and +inf the step makes
    0 * inf = NaN: the result there is s's bits with the exponent field flipped (+-inf, +0). A
    negative or NaN s gives NaN from the estimate on. Where x is never below the smallest
    normal float (`y * y + 1e-5`, `_least_value`), only +inf is selected (+0): 10 ops fewer."""
    if _least_value(x) >= _FLOAT32_MIN_NORMAL:
        refined = _refined_rsqrt(x)
        return _select(_compare(x, _f32(float("inf")), "oeq"), _f32(0.0), refined).result
    small = _compare(x, _f32(_FLOAT32_MIN_NORMAL), "olt")
    s = _select(small, arith.MulfOp(x, _f32(2.0**32)), x)
    refined = _refined_rsqrt(s)
    zero_or_inf = arith.OrIOp(_compare(s, _f32(0.0), "oeq"), _compare(s, _f32(float("inf")), "oeq"))
    flipped = arith.XOrIOp(arith.BitcastOp(s, _I32), _i32(_FLOAT32_INFINITY_BITS))
    result = _select(zero_or_inf, arith.BitcastOp(flipped, _F32), refined)
    return arith.MulfOp(result, _select(small, _f32(2.0**16), _f32(1.0))).result


def _refined_rsqrt(s: Value) -> SSAValue:
    """`rsqrt`'s estimate of 1 / sqrt(s) and its step: NaN at +-0 and +inf."""
    y = arith.DivfOp(
        _f32(1.0), math.SqrtOp(s), arith.FastMathFlagsAttr([arith.FastMathFlag.ALLOW_RECIP])
    )
    y.attributes[RSQRT_ESTIMATE] = UnitAttr()
    h = arith.MulfOp(s, y)
    low = math.FmaOp(s, y, arith.NegfOp(h))
    e = math.FmaOp(arith.NegfOp(low), y, math.FmaOp(arith.NegfOp(h), y, _f32(1.0)))
    half_series = math.FmaOp(e, _f32(0.375), _f32(0.5))
    return math.FmaOp(arith.MulfOp(y, half_series), e, y).result
