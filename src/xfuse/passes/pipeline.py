"""Running a pass pipeline (`xfuse-opt`'s `-p` syntax) on a module, from Python."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from xfuse.passes import ALL_PASSES


def pipeline_context() -> Context:
    """A context with every dialect xfuse's tensor and buffer stages use."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.math import Math
    from xdsl.dialects.memref import MemRef

    from xfuse.dialects.ew import Ew

    ctx = Context()
    for dialect in (Builtin, Func, Arith, Math, MemRef, Ew):
        ctx.load_dialect(dialect)
    return ctx


def apply_pipeline(module: ModuleOp, pipeline: str) -> ModuleOp:
    """A copy of `module` after `pipeline` (e.g. `"ew-optimize,ew-fuse{mode=none}"`)."""
    compiled = module.clone()
    PassPipeline.parse_spec(ALL_PASSES, pipeline).apply(pipeline_context(), compiled)
    return compiled
