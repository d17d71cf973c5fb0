"""Running a pass pipeline (`xfuse-opt`'s `-p` syntax) on a module, from Python."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from xfuse.passes import ALL_PASSES


def pipeline_context() -> Context:
    """A context with every dialect xfuse's stages use, from `ew` on tensors down to `llvm`."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.cf import Cf
    from xdsl.dialects.llvm import LLVM
    from xdsl.dialects.math import Math
    from xdsl.dialects.memref import MemRef
    from xdsl.dialects.scf import Scf

    from xfuse.dialects.ew import Ew

    ctx = Context()
    for dialect in (Builtin, func.Func, Arith, Math, MemRef, Scf, Cf, LLVM, Ew):
        ctx.load_dialect(dialect)
    return ctx


def only_function(module: ModuleOp) -> func.FuncOp:
    """The module's one `func.func` (xfuse programs have exactly one); ValueError otherwise."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise ValueError(f"expected one function in the module, found {len(functions)}")
    return functions[0]


def apply_pipeline(module: ModuleOp, pipeline: str) -> ModuleOp:
    """A copy of `module` after `pipeline` (e.g. `"ew-optimize,ew-fuse{mode=none}"`)."""
    compiled = module.clone()
    PassPipeline.parse_spec(ALL_PASSES, pipeline).apply(pipeline_context(), compiled)
    return compiled
