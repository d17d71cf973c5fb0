"""Canonicalization patterns of the `ew` dialect.

The IEEE-exact identities are attached to the ops (`ElementwiseCanonicalization`), so xDSL's own
`canonicalize` pass applies them next to constant folding: `x + (-0.0)`, `(-0.0) + x`,
`x - (+0.0)`, `x * 1`, `1 * x`, `x / 1`, `-(-x)`, `select(c, x, x)` and `select` of a constant
condition give `x` (or the arm it picks) bit for bit, for every x including ±0, ±inf and NaN;
leaky ReLU's `select(x > 0, x, c * x)` compares its arms instead, the same bits
(`SelectOfAScaledArm`).
`x + (+0.0)` is not one: `-0.0 + 0.0` is `+0.0`. The unsafe identities (they change results for
NaN, inf, overflow or the sign of zero) are applied only when `ew-optimize{unsafe-math=true}`
asks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from xfuse.dialects import ew


def _is_constant(value: SSAValue, literal: float) -> bool:
    """`value` is an `ew.constant` holding `literal` (±0 or 1) in its element type, sign of zero
    included."""
    held = ew.constant_value(value)
    return held == literal and math.copysign(1.0, held) == math.copysign(1.0, literal)


def _replace_keeping_type(rewriter: PatternRewriter, op: Operation, value: SSAValue) -> None:
    """Replace `op` by `value` unless that would drop a broadcast (the types differ)."""
    if value.type == op.results[0].type:
        rewriter.replace(op, [], [value])


class RightIdentity(RewritePattern):
    """`x op c -> x` for each `op: c` of `identities` (c compared with its sign of zero)."""

    def __init__(self, identities: Mapping[type[ew.BinaryOp], float]):
        self.identities = identities

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.BinaryOp, rewriter: PatternRewriter) -> None:
        identity = self.identities.get(type(op))
        if identity is not None and _is_constant(op.rhs, identity):
            _replace_keeping_type(rewriter, op, op.lhs)


class LeftIdentity(RewritePattern):
    """`c op x -> x` for each `op: c` of `identities` (c compared with its sign of zero)."""

    def __init__(self, identities: Mapping[type[ew.BinaryOp], float]):
        self.identities = identities

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.BinaryOp, rewriter: PatternRewriter) -> None:
        identity = self.identities.get(type(op))
        if identity is not None and _is_constant(op.lhs, identity):
            _replace_keeping_type(rewriter, op, op.rhs)


class DoubleNegation(RewritePattern):
    """--x -> x (negation flips the sign bit only, so twice is the identity, NaN included)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.NegOp, rewriter: PatternRewriter) -> None:
        inner = op.operand.owner
        if isinstance(inner, ew.NegOp):
            rewriter.replace(op, [], [inner.operand])


class RoundingOfARoundedValue(RewritePattern):
    """An f16/bf16 value converted to its own type -> the value, where it holds that type's
    numbers already: a function's argument (an array of that dtype) or a conversion's result
    (rounded where it stands). Kept after any other op, whose result a fused kernel holds in
    f32 (`ew.ConvertOp`); unfused, it would be a copy kernel of the same bits."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.ConvertOp, rewriter: PatternRewriter) -> None:
        operand = op.operand
        if operand.type == op.result.type and (
            isinstance(operand, BlockArgument) or isinstance(operand.owner, ew.ConvertOp)
        ):
            rewriter.replace(op, [], [operand])


class SelectOfAKnownArm(RewritePattern):
    """`select(c, a, b)` -> `a` where c is a constant nonzero or NaN, `b` where it is ±0, and
    `select(c, a, a)` -> `a`: the op passes the arm it picks through bit for bit."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.SelectOp, rewriter: PatternRewriter) -> None:
        condition = ew.constant_value(op.condition)
        if op.on_true == op.on_false or (condition is not None and condition != 0.0):
            _replace_keeping_type(rewriter, op, op.on_true)
        elif condition is not None:  # ±0
            _replace_keeping_type(rewriter, op, op.on_false)


class SelectOfAScaledArm(RewritePattern):
    """`select(x > 0, x, c * x)` (or `x * c`) with a constant 0 < c < 1, leaky ReLU ->
    `select(x > c * x, x, c * x)`, the same bits for every x: where x > 0, c * x <= x (rounding
    keeps order, and where it gives x both arms are one number); at ±0, below 0 and at NaN both
    compares are false (c * x at -inf is -inf); at +inf c * x is +inf, x's bits. A select of a
    compare of its own arms is one x86 `maxps`, where the compare with 0 and a blend are two
    ops: leaky ReLU's loop took 0.78-0.89x the time at 2^12 float32, 0.62x as AVX2 code
    (docs/benchmarks.md)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.SelectOp, rewriter: PatternRewriter) -> None:
        compare, x = op.condition.owner, op.on_true
        if not (isinstance(compare, ew.GtOp) and compare.lhs == x and _is_zero(compare.rhs)):
            return
        c = _scale(op.on_false, x)
        if c is not None and 0.0 < c < 1.0:
            greater = rewriter.insert(ew.GtOp(x, op.on_false), InsertPoint.before(op))
            rewriter.replace(op, ew.SelectOp(greater, x, op.on_false, op.result.type))


class ExtremumOfAScaledOperand(RewritePattern):
    """`max(x, c * x)` and `min(x, c * x)` (either order, `x * c` too) with a constant c > 0 ->
    `select(x > c * x, x, c * x)` (`<` for min), the same numbers for every x: a NaN-propagating
    max or min, which orders -0 below +0, takes six x86 ops, but x and c * x are NaN together,
    zeros of one sign and infinities of one sign, and otherwise ordered as the compare says,
    where a compare and a select is one `maxps` (`minps`). Leaky ReLU as numpy's users write
    it, `np.maximum(x, 0.01 * x)`, took 0.42-0.57x the time at 2^12 float32, 0.35-0.36x as AVX2
    code (docs/benchmarks.md). The NaN of a NaN x is c * x's (x's quieted) where max may give
    x's."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.MaxOp | ew.MinOp, rewriter: PatternRewriter) -> None:
        for x, scaled in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            c = _scale(scaled, x)
            if c is not None and c > 0.0:
                compare = ew.GtOp(x, scaled) if isinstance(op, ew.MaxOp) else ew.LtOp(x, scaled)
                rewriter.insert(compare, InsertPoint.before(op))
                rewriter.replace(op, ew.SelectOp(compare, x, scaled, op.result.type))
                return


def _scale(value: SSAValue, x: SSAValue) -> float | None:
    """c where `value` is `c * x` or `x * c` of an `ew.constant` c (finite), else None."""
    product = value.owner
    if not isinstance(product, ew.MulOp):
        return None
    for factor, operand in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
        c = ew.constant_value(factor)
        if operand == x and c is not None and math.isfinite(c):
            return c
    return None


SAFE_IDENTITY_PATTERNS: tuple[RewritePattern, ...] = (
    RightIdentity({ew.AddOp: -0.0, ew.SubOp: 0.0, ew.MulOp: 1.0, ew.DivOp: 1.0}),
    LeftIdentity({ew.AddOp: -0.0, ew.MulOp: 1.0}),
    DoubleNegation(),
    SelectOfAKnownArm(),
    SelectOfAScaledArm(),
    ExtremumOfAScaledOperand(),
)
SAFE_IDENTITIES = GreedyRewritePatternApplier(list(SAFE_IDENTITY_PATTERNS))
"""The patterns as one, first match wins: what xDSL's `canonicalize` builds of several patterns
for every op it visits, built once (the ops' canonicalization patterns)."""


def _replace_by_constant(rewriter: PatternRewriter, op: ew.BinaryOp, literal: float) -> None:
    """A constant needs a static shape: a dynamically shaped result keeps its op."""
    if ew.DYNAMIC_INDEX not in tuple(op.result.type.get_shape()):
        rewriter.replace(op, ew.ConstantOp(literal, op.result.type))


def _is_zero(value: SSAValue) -> bool:
    """`value` is an `ew.constant` zero of either sign."""
    return ew.constant_value(value) == 0.0


class MultiplyByZero(RewritePattern):
    """x * ±0 -> +0 and ±0 * x -> +0: wrong for x = inf or NaN, and for the sign of zero."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.MulOp, rewriter: PatternRewriter) -> None:
        if _is_zero(op.lhs) or _is_zero(op.rhs):
            _replace_by_constant(rewriter, op, 0.0)


class SubtractSelf(RewritePattern):
    """x - x -> 0: wrong for x = inf or NaN."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.SubOp, rewriter: PatternRewriter) -> None:
        if op.lhs == op.rhs:
            _replace_by_constant(rewriter, op, 0.0)


SMALLEST_NORMAL = {
    Float16Type: 2.0**-14,
    BFloat16Type: 2.0**-126,
    Float32Type: 2.0**-126,
    Float64Type: 2.0**-1022,
}
"""Each float element type's smallest normal number."""


class DivideByConstant(RewritePattern):
    """x / c -> x * (1/c): one rounding more, but a multiply is far cheaper than a divide. Not
    where 1/c is not a normal number, as LLVM's `arcp` does not: `x / 1e-40` in f32 was x * inf
    (1e-10 / 1e-40 is 1e30), and a denormal 1/c loses bits."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.DivOp, rewriter: PatternRewriter) -> None:
        divisor = ew.constant_value(op.rhs)
        if divisor is None or divisor == 0.0 or divisor == 1.0:
            return
        element = ew.element_type(op.rhs.type)
        inverse = ew.round_to_element(1.0 / divisor, element)
        if not math.isfinite(inverse) or abs(inverse) < SMALLEST_NORMAL[type(element)]:
            return
        reciprocal = ew.ConstantOp(1.0 / divisor, op.rhs.type)
        rewriter.replace(op, [reciprocal, ew.MulOp(op.lhs, reciprocal.result, op.result.type)])


class LogOnePlusExp(RewritePattern):
    """log(1 + exp(x)) and log(exp(x) + 1) -> softplus(x): where exp(x) overflows (x > 88.7 in
    f32) the log is +inf and softplus is x, and below -17 the log is 0 and softplus exp(x)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.LogOp, rewriter: PatternRewriter) -> None:
        total = op.operand.owner
        if not isinstance(total, ew.AddOp):
            return
        for one, exp in ((total.lhs, total.rhs), (total.rhs, total.lhs)):
            if _is_constant(one, 1.0) and isinstance(exp.owner, ew.ExpOp):
                x = exp.owner.operand
                if x.type == op.result.type:  # 1 + exp(x) broadcasts x: keep the log
                    rewriter.replace(op, ew.SoftplusOp(x))
                return


UNSAFE_IDENTITY_PATTERNS: tuple[RewritePattern, ...] = (
    # No signed zeros (nsz): x + (+0.0) and x - (-0.0) turn x = -0.0 into +0.0.
    RightIdentity({ew.AddOp: 0.0, ew.SubOp: -0.0}),
    LeftIdentity({ew.AddOp: 0.0}),
    MultiplyByZero(),
    SubtractSelf(),
    DivideByConstant(),
    LogOnePlusExp(),
)
