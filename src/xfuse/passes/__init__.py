"""xfuse's passes, one per file. `ALL_PASSES` is what `xfuse-opt` and the pipelines register.

Each entry names the module and class of a pass; the module is imported only when the pass is
used, so `xfuse-opt --help` and `import xfuse` stay fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

_PASS_LOCATIONS: dict[str, tuple[str, str]] = {
    "ew-optimize": ("xfuse.passes.optimize", "EwOptimizePass"),
    "ew-strength-reduce": ("xfuse.passes.strength_reduce", "EwStrengthReducePass"),
    "ew-fuse": ("xfuse.passes.fuse", "EwFusePass"),
    "ew-bufferize": ("xfuse.passes.bufferize", "EwBufferizePass"),
    "ew-cost": ("xfuse.passes.cost", "EwCostPass"),
    "ew-to-linalg": ("xfuse.passes.to_linalg", "EwToLinalgPass"),
    "ew-workspace": ("xfuse.lowering.workspace", "EwWorkspacePass"),
    "ew-kernel-to-loops": ("xfuse.lowering.kernel_to_loops", "EwKernelToLoopsPass"),
    "ew-expand-math": ("xfuse.lowering.expand_math", "EwExpandMathPass"),
    "ew-to-llvm": ("xfuse.lowering.to_llvm", "EwToLlvmPass"),
    "ew-to-nvvm": ("xfuse.lowering.to_nvvm", "EwToNvvmPass"),
}


def _lazy(module: str, class_name: str) -> Callable[[], type[ModulePass]]:
    return lambda: getattr(importlib.import_module(module), class_name)


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    name: _lazy(*location) for name, location in _PASS_LOCATIONS.items()
}
