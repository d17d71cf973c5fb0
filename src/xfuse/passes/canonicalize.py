"""Canonicalization patterns of the `ew` dialect.

The IEEE-safe identities are attached to the ops (`ElementwiseCanonicalization`), so xDSL's own
`canonicalize` pass applies them next to constant folding. The unsafe ones (they change results
for NaN, inf or signed zeros) are applied only when `ew-optimize{unsafe-math=true}` asks.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from xfuse.dialects import ew


def _is_constant(value: SSAValue, literal: float) -> bool:
    folded = ew.constant_value(value)
    return folded is not None and folded == literal


def _replace_keeping_type(rewriter: PatternRewriter, op: Operation, value: SSAValue) -> None:
    """Replace `op` by `value` unless that would drop a broadcast (the types differ)."""
    if value.type == op.results[0].type:
        rewriter.replace(op, [], [value])


class RightIdentity(RewritePattern):
    """x + 0 -> x, x - 0 -> x, x * 1 -> x, x / 1 -> x (x + 0 may turn -0 into +0 no more)."""

    IDENTITIES = {ew.AddOp: 0.0, ew.SubOp: 0.0, ew.MulOp: 1.0, ew.DivOp: 1.0}

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.BinaryOp, rewriter: PatternRewriter) -> None:
        identity = self.IDENTITIES.get(type(op))
        if identity is not None and _is_constant(op.rhs, identity):
            _replace_keeping_type(rewriter, op, op.lhs)


class LeftIdentity(RewritePattern):
    """0 + x -> x, 1 * x -> x."""

    IDENTITIES = {ew.AddOp: 0.0, ew.MulOp: 1.0}

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.BinaryOp, rewriter: PatternRewriter) -> None:
        identity = self.IDENTITIES.get(type(op))
        if identity is not None and _is_constant(op.lhs, identity):
            _replace_keeping_type(rewriter, op, op.rhs)


class DoubleNegation(RewritePattern):
    """--x -> x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.NegOp, rewriter: PatternRewriter) -> None:
        inner = op.operand.owner
        if isinstance(inner, ew.NegOp):
            rewriter.replace(op, [], [inner.operand])


SAFE_IDENTITY_PATTERNS: tuple[RewritePattern, ...] = (
    RightIdentity(),
    LeftIdentity(),
    DoubleNegation(),
)


def _replace_by_constant(rewriter: PatternRewriter, op: ew.BinaryOp, literal: float) -> None:
    """A constant needs a static shape: a dynamically shaped result keeps its op."""
    if ew.DYNAMIC_INDEX not in tuple(op.result.type.get_shape()):
        rewriter.replace(op, ew.ConstantOp(literal, op.result.type))


class MultiplyByZero(RewritePattern):
    """x * 0 -> 0 and 0 * x -> 0: wrong for x = inf or NaN, and for the sign of zero."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.MulOp, rewriter: PatternRewriter) -> None:
        if _is_constant(op.lhs, 0.0) or _is_constant(op.rhs, 0.0):
            _replace_by_constant(rewriter, op, 0.0)


class SubtractSelf(RewritePattern):
    """x - x -> 0: wrong for x = inf or NaN."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.SubOp, rewriter: PatternRewriter) -> None:
        if op.lhs == op.rhs:
            _replace_by_constant(rewriter, op, 0.0)


class DivideByConstant(RewritePattern):
    """x / c -> x * (1/c): one rounding more, but a multiply is far cheaper than a divide."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.DivOp, rewriter: PatternRewriter) -> None:
        divisor = ew.constant_value(op.rhs)
        if divisor is None or divisor == 0.0 or divisor == 1.0:
            return
        reciprocal = ew.ConstantOp(1.0 / divisor, op.rhs.type)
        rewriter.replace(op, [reciprocal, ew.MulOp(op.lhs, reciprocal.result, op.result.type)])


UNSAFE_IDENTITY_PATTERNS: tuple[RewritePattern, ...] = (
    MultiplyByZero(),
    SubtractSelf(),
    DivideByConstant(),
)
