"""`ew-optimize`: the lecture's `optimize` (fold, simplify, share, drop) from xDSL's own passes."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from xfuse.passes.canonicalize import UNSAFE_IDENTITY_PATTERNS


@dataclass(frozen=True)
class EwOptimizePass(ModulePass):
    """canonicalize (folding + IEEE-safe identities), then cse and dce.

    With `unsafe-math=true` also x*0 -> 0, x-x -> 0 and x/c -> x*(1/c), which change results
    for inf, NaN or signed zeros.
    """

    name = "ew-optimize"

    unsafe_math: bool = False
    """Also apply algebraic identities that are not IEEE-exact."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        CanonicalizePass().apply(ctx, op)
        if self.unsafe_math:
            PatternRewriteWalker(
                GreedyRewritePatternApplier(list(UNSAFE_IDENTITY_PATTERNS))
            ).rewrite_module(op)
            CanonicalizePass().apply(ctx, op)
        CommonSubexpressionElimination().apply(ctx, op)
        DeadCodeElimination().apply(ctx, op)
