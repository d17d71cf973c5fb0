"""Pattern rewriting that keeps source locations, as MLIR's does.

xDSL gives the ops a pattern makes `loc(unknown)`; MLIR's builders take the matched op's
location. `located_walker` is xDSL's `PatternRewriteWalker` whose new ops take the location of
the op the pattern matched where they have none, so that `xfuse-opt --print-debuginfo` shows
an expanded `math.tanh`'s arithmetic, or a folded constant, at the `.ew` token it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import LocationAttr, UnknownLoc
from xdsl.ir import Operation, Region
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)


@dataclass
class _Locating(RewritePattern):
    """`pattern`, remembering the op it is tried on (`matched`) for the walker's listener."""

    pattern: RewritePattern
    matched: Operation | None = field(default=None, init=False)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        self.matched = op
        self.pattern.match_and_rewrite(op, rewriter)

    def locate(self, inserted: Operation) -> None:
        if self.matched is not None and isinstance(inserted.location, UnknownLoc):
            inserted.location = self.matched.location


def located_walker(
    pattern: RewritePattern,
    *,
    apply_recursively: bool = True,
    walk_reverse: bool = False,
    post_walk_func: Callable[[Region, PatternRewriterListener], bool] | None = None,
) -> PatternRewriteWalker:
    """xDSL's `PatternRewriteWalker` of `pattern`, with its options, whose inserted ops that
    have no location take the matched op's."""
    locating = _Locating(pattern)
    return PatternRewriteWalker(
        locating,
        apply_recursively=apply_recursively,
        walk_reverse=walk_reverse,
        post_walk_func=post_walk_func,
        listener=PatternRewriterListener(operation_insertion_handler=[locating.locate]),
    )


def locate_unlocated(op: Operation, location: LocationAttr) -> None:
    """Give `op`, the ops inside it and their blocks' arguments that have no location
    `location`: a lowering's ops at the op they lower, as MLIR's are (a GPU entry's, whose loop
    and loads were `loc(unknown)`)."""
    for inner in op.walk():
        if isinstance(inner.location, UnknownLoc):
            inner.location = location
        for argument in (a for region in inner.regions for b in region.blocks for a in b.args):
            if isinstance(argument.location, UnknownLoc):
                argument.location = location
