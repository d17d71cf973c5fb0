"""`ew-strength-reduce`: replace `pow` by a constant exponent with cheaper exact ops.

The worked example of docs/writing-a-pass.md: one small pattern, one pass, one FileCheck file.

    %p = ew.pow %x, %two : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
becomes
    %p = ew.mul %x, %x : tensor<?xf32>

pow(x, 2) and x * x are both the exact square rounded once, so the rewrite is IEEE-exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from xfuse.dialects import ew
from xfuse.transforms.options import check_option
from xfuse.transforms.rewriting import located_walker


@dataclass(frozen=True)
class PowToMultiply(RewritePattern):
    """pow(x, n) -> x * x * ... * x for a small whole exponent 2 <= n <= max_exponent."""

    max_exponent: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.PowOp, rewriter: PatternRewriter) -> None:
        exponent = ew.constant_value(op.rhs)
        if exponent is None or not exponent.is_integer():
            return
        if not 2 <= exponent <= self.max_exponent or op.lhs.type != op.result.type:
            return
        # Multiplying left to right keeps each step one rounding, like the source would.
        products = [ew.MulOp(op.lhs, op.lhs)]
        for _ in range(int(exponent) - 2):
            products.append(ew.MulOp(products[-1].result, op.lhs))
        rewriter.replace(op, products)


@dataclass(frozen=True)
class EwStrengthReducePass(ModulePass):
    """Rewrite `ew.pow` by a small constant whole exponent into multiplications."""

    name = "ew-strength-reduce"

    max_exponent: int = 2
    """Largest exponent to expand, 2 to 16; only 2 is exact, larger ones round once per
    multiply: x^16 is 15 roundings of up to half an ulp each (pow is within one ulp), and
    beyond that the expansion only gets less accurate and longer."""

    def __post_init__(self) -> None:
        in_range = 2 <= self.max_exponent <= 16
        check_option(self, "max_exponent", in_range, "an integer from 2 to 16")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        located_walker(PowToMultiply(self.max_exponent)).rewrite_module(op)
