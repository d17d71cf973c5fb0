"""`ew-kernel-to-loops`: bufferized `ew.kernel`s become `scf.for` nests: loads, scalar code, stores.

One loop per dimension of the iteration space (the shape of the kernel's `outs`), outermost first,
so the innermost loop walks the last, contiguous dimension and is the one LLVM vectorizes. An input
of lower rank or with a static 1 where the iteration space is wider is broadcast: its load uses only
its own trailing dimensions, with index 0 where its size is 1. A load, and what is computed from
loads alone, sits in the outermost loop whose index it uses (before all loops if none): a
`[t, 1]` scale is read once per row, a scalar input once per call. LLVM could not hoist those
itself (an output store may alias the load as far as it knows), and in the vectorized loop an
invariant chain of approximations (`pow(s, pow(b, b))`) made its loop vectorizer take minutes.

    ew.kernel ins(%x, %b : memref<?x?xf32>, memref<?xf32>) outs(%y : memref<?x?xf32>) {...}

becomes

    scf.for %i = %c0 to %d0 step %c1 {
      scf.for %j = %c0 to %d1 step %c1 {
        %xs = memref.load %x[%i, %j] : memref<?x?xf32>
        %bs = memref.load %b[%j] : memref<?xf32>
        ... the kernel's region ...
        memref.store %v, %y[%i, %j] : memref<?x?xf32>
      }
    }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import DiagnosticException

from xfuse.dialects import ew


def input_indices(
    input_shape: Sequence[int], induction_vars: Sequence[SSAValue], zero: SSAValue
) -> list[SSAValue]:
    """The indices an input of `input_shape` is read at, right-aligned to the iteration space."""
    offset = len(induction_vars) - len(input_shape)
    return [
        zero if size == 1 else induction_vars[offset + axis]
        for axis, size in enumerate(input_shape)
    ]


def _load_depth(input_shape: Sequence[int], rank: int) -> int:
    """The depth of the innermost loop whose index a load of `input_shape` uses (see above)."""
    offset = rank - len(input_shape)
    return max((offset + axis + 1 for axis, size in enumerate(input_shape) if size != 1), default=0)


def _loop_depths(kernel: ew.KernelOp, rank: int) -> dict[SSAValue, int]:
    """The loop depth each scalar of the region is computed at: that of the innermost loop whose
    index it depends on (0: before all loops). A constant goes to its outermost user's depth, so
    a region with nothing to hoist keeps its order."""
    depth = {
        arg: _load_depth(ew.shape_of(source), rank)
        for arg, source in zip(kernel.block.args, kernel.inputs, strict=True)
    }
    body = list(kernel.block.ops)[:-1]
    for op in body:
        depth[op.results[0]] = max((depth.get(v, 0) for v in op.operands), default=0)
    for op in body:
        if not op.operands:
            users = [use.operation for use in op.results[0].uses]
            depth[op.results[0]] = min(
                (depth[user.results[0]] if user.results else rank for user in users),
                default=rank,
            )
    return depth


class KernelToLoops(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.KernelOp, rewriter: PatternRewriter) -> None:
        if not op.is_bufferized:
            raise DiagnosticException(
                "'ew.kernel' must be bufferized before ew-kernel-to-loops (run ew-bufferize):\n"
                f"{op}"
            )
        builder = Builder(InsertPoint.before(op))
        zero = builder.insert(arith.ConstantOp.from_int_and_width(0, IndexType())).result
        one = builder.insert(arith.ConstantOp.from_int_and_width(1, IndexType())).result
        iteration = op.outputs[0]
        upper_bounds: list[SSAValue] = []
        for axis, size in enumerate(ew.shape_of(iteration)):
            if size == DYNAMIC_INDEX:
                axis_value = builder.insert(arith.ConstantOp.from_int_and_width(axis, IndexType()))
                upper_bounds.append(builder.insert(memref.DimOp(iteration, axis_value)).result)
            else:
                constant = arith.ConstantOp.from_int_and_width(size, IndexType())
                upper_bounds.append(builder.insert(constant).result)
        # levels[k] inserts at loop depth k: before the loop of depth k + 1, or in the innermost
        # body before its yield.
        levels = [builder]
        induction_vars: list[SSAValue] = []
        for upper in upper_bounds:
            body = Block([scf.YieldOp()], arg_types=[IndexType()])
            loop = levels[-1].insert(scf.ForOp(zero, upper, one, [], body))
            levels[-1] = Builder(InsertPoint.before(loop))
            induction_vars.append(body.args[0])
            levels.append(Builder(InsertPoint.before(body.ops.first)))
        depth = _loop_depths(op, len(induction_vars))
        for arg, source in zip(op.block.args, op.inputs, strict=True):
            indices = input_indices(ew.shape_of(source), induction_vars, zero)
            load = levels[depth[arg]].insert(memref.LoadOp.get(source, indices))
            arg.replace_all_uses_with(load.res)
        yielded = op.yield_op.values
        for scalar_op in list(op.block.ops)[:-1]:
            scalar_op.detach()
            levels[depth[scalar_op.results[0]]].insert(scalar_op)
        for value, destination in zip(yielded, op.outputs, strict=True):
            levels[-1].insert(memref.StoreOp.get(value, destination, induction_vars))
        rewriter.erase(op, safe_erase=False)


@dataclass(frozen=True)
class EwKernelToLoopsPass(ModulePass):
    """Lower every bufferized `ew.kernel` to an `scf.for` nest with `memref.load`/`memref.store`."""

    name = "ew-kernel-to-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(KernelToLoops(), apply_recursively=False).rewrite_module(op)
