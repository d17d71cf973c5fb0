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


def _kernel_to_loops() -> type[ModulePass]:
    from xfuse.lowering.kernel_to_loops import EwKernelToLoopsPass

    return EwKernelToLoopsPass


def _expand_math() -> type[ModulePass]:
    from xfuse.lowering.expand_math import EwExpandMathPass

    return EwExpandMathPass


def _to_llvm() -> type[ModulePass]:
    from xfuse.lowering.to_llvm import EwToLlvmPass

    return EwToLlvmPass


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "ew-optimize": _optimize,
    "ew-strength-reduce": _strength_reduce,
    "ew-fuse": _fuse,
    "ew-bufferize": _bufferize,
    "ew-cost": _cost,
    "ew-to-linalg": _to_linalg,
    "ew-kernel-to-loops": _kernel_to_loops,
    "ew-expand-math": _expand_math,
    "ew-to-llvm": _to_llvm,
}
