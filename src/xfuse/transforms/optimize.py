"""`ew-optimize`: the lecture's `optimize` (fold, simplify, share, drop) from xDSL's own passes."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Region
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriterListener,
    RewritePattern,
)
from xdsl.transforms.canonicalize import CanonicalizationRewritePattern
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import is_trivially_dead, region_dce

from xfuse.dialects.canonicalize import UNSAFE_IDENTITY_PATTERNS
from xfuse.dialects.ew import Ew
from xfuse.transforms.rewriting import located_walker


def sweep_dead(region: Region, listener: PatternRewriterListener | None = None) -> bool:
    """Erase what `region_dce` erases, telling `listener` of each erased op as it does (a dead
    op whole, its nested ops not), in one backward sweep of each block where every region holds
    at most one block: there each op's users come after it (or inside later ops), so an op is
    dead exactly when it is trivially dead once the ops after it are swept. `region_dce` (its
    fixed point takes at least two walks of the liveness, then one to erase: 2.5% of a 10^4-op
    compile) where a region has more blocks (it also erases unreachable ones). True if it
    erased anything."""
    if len(region.blocks) > 1 or any(len(r.blocks) > 1 for op in region.walk() for r in op.regions):
        return region_dce(region, listener)
    return _sweep(region, listener)


def _sweep(region: Region, listener: PatternRewriterListener | None) -> bool:
    erased = False
    for block in region.blocks:
        for op in reversed(list(block.ops)):
            if is_trivially_dead(op):
                if listener is not None:
                    listener.handle_operation_removal(op)
                block.erase_op(op, safe_erase=False)
                erased = True
            else:
                for nested in op.regions:
                    erased |= _sweep(nested, listener)
    return erased


@dataclass(frozen=True)
class EwOptimizePass(ModulePass):
    """canonicalize (folding + IEEE-exact identities, to a fixed point with dce), then cse.

    No dce runs after cse: canonicalize stops only when `sweep_dead` finds nothing dead, and cse
    replaces an op only by an equal one (same operands) and erases nothing but such ops and
    dead ones, so it leaves nothing dead (a second dce walked the whole program for nothing).

    The identities keep every bit of every result but a signalling NaN's quiet bit (as LLVM's
    own folds of them do): `x + (-0.0)`, `(-0.0) + x`, `x - (+0.0)`, `x * 1`, `1 * x`, `x / 1`
    and `-(-x)` become `x`; `x + 0.0` stays (`-0.0 + 0.0` is `+0.0`).
    A NaN that folding produces is the canonical quiet NaN. With `unsafe-math=true` also
    `x + (+0.0)`, `(+0.0) + x`, `x - (-0.0)` -> x (no signed zeros), x*0 -> 0, x-x -> 0 and
    x/c -> x*(1/c) and log(1 + exp(x)) -> softplus(x), which change results for inf, NaN,
    overflow or the sign of zero, and x*(1/c) finite ones by an ulp too (one rounding more:
    `x / 3` of 100.0 in float32 is 33.333336, not 33.333332).
    """

    name = "ew-optimize"

    unsafe_math: bool = False
    """Also apply algebraic identities that are not IEEE-exact."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Folding makes `ew.constant`s through the dialect (`materialize_constant`): load it, as
        # an MLIR pass loads its dependent dialects (a bare Context() failed on the first fold).
        if ctx.get_optional_dialect(Ew.name) is None:
            ctx.load_dialect(Ew)
        # xDSL's canonicalize, with the unsafe patterns beside it so they see each other's folds.
        patterns: list[RewritePattern] = [CanonicalizationRewritePattern()]
        if self.unsafe_math:
            patterns.extend(UNSAFE_IDENTITY_PATTERNS)
        applier = GreedyRewritePatternApplier(patterns, ctx=ctx, folding_enabled=True)
        located_walker(applier, post_walk_func=sweep_dead).rewrite_module(op)
        CommonSubexpressionElimination().apply(ctx, op)
