"""`ew-kernel-to-loops`: bufferized `ew.kernel`s become `scf.for` nests: loads, scalar code, stores.

One loop per dimension of the iteration space (the shape of the kernel's `outs`), outermost first,
so the innermost loop walks the last, contiguous dimension and is the one LLVM vectorizes. An input
of lower rank or with a static 1 where the iteration space is wider is broadcast: its load uses only
its own trailing dimensions, with index 0 where its size is 1.

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
        induction_vars: list[SSAValue] = []
        for upper in upper_bounds:
            body = Block([scf.YieldOp()], arg_types=[IndexType()])
            builder.insert(scf.ForOp(zero, upper, one, [], body))
            induction_vars.append(body.args[0])
            builder = Builder(InsertPoint.before(body.ops.first))

        for arg, source in zip(op.block.args, op.inputs, strict=True):
            indices = input_indices(ew.shape_of(source), induction_vars, zero)
            arg.replace_all_uses_with(builder.insert(memref.LoadOp.get(source, indices)).res)
        yielded = op.yield_op.values
        for scalar_op in list(op.block.ops)[:-1]:
            scalar_op.detach()
            builder.insert(scalar_op)
        for value, destination in zip(yielded, op.outputs, strict=True):
            builder.insert(memref.StoreOp.get(value, destination, induction_vars))
        rewriter.erase(op, safe_erase=False)


@dataclass(frozen=True)
class EwKernelToLoopsPass(ModulePass):
    """Lower every bufferized `ew.kernel` to an `scf.for` nest with `memref.load`/`memref.store`."""

    name = "ew-kernel-to-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(KernelToLoops(), apply_recursively=False).rewrite_module(op)
