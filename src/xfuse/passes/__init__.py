"""xfuse's passes, one per file. `ALL_PASSES` is what `xfuse-opt` and the pipelines register."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def _optimize() -> type[ModulePass]:
    from xfuse.passes.optimize import EwOptimizePass

    return EwOptimizePass


def _strength_reduce() -> type[ModulePass]:
    from xfuse.passes.strength_reduce import EwStrengthReducePass

    return EwStrengthReducePass


def _fuse() -> type[ModulePass]:
    from xfuse.passes.fuse import EwFusePass

    return EwFusePass


def _bufferize() -> type[ModulePass]:
    from xfuse.passes.bufferize import EwBufferizePass

    return EwBufferizePass


def _cost() -> type[ModulePass]:
    from xfuse.passes.cost import EwCostPass

    return EwCostPass


def _to_linalg() -> type[ModulePass]:
    from xfuse.passes.to_linalg import EwToLinalgPass

    return EwToLinalgPass


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "ew-optimize": _optimize,
    "ew-strength-reduce": _strength_reduce,
    "ew-fuse": _fuse,
    "ew-bufferize": _bufferize,
    "ew-cost": _cost,
    "ew-to-linalg": _to_linalg,
}
