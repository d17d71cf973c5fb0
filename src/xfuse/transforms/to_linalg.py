"""`ew-to-linalg`: export fused kernels as upstream MLIR (`linalg.generic` over `arith`/`math`).

Each `ew.kernel` becomes one `linalg.generic` with all-parallel loops over its iteration space and
the kernel's scalar region as the body (`ew.yield` -> `linalg.yield`). Inputs of lower rank or
with size-1 dimensions get broadcasting indexing maps (numpy's rules: align trailing dimensions,
read index 0 along a size-1 dimension); results get identity maps. On tensors each result starts
from a `tensor.empty` whose dynamic sizes are read (`tensor.dim`) from an input that spans that
dimension; on buffers the kernel's `outs` become the generic's `outs`. Leftover `ew.constant`s
become `arith.constant dense<...>` splats.

The result holds only upstream dialects (func, arith, math, tensor, linalg, memref) and prints in a
syntax `mlir-opt` accepts; fusion's `ew.expansion` marks are dropped. Unfused elementwise ops
(`ew.add`, ...) are not exported: run `ew-fuse` first (`ew-fuse{mode=none}` gives one kernel per
op).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from xfuse.dialects import ew
from xfuse.dialects.failure import OpFailure
from xfuse.transforms.rewriting import located_walker
from xfuse.transforms.scalar import unmark_expansion


def broadcasting_map(operand_shape: tuple[int, ...], iteration_shape: tuple[int, ...]) -> AffineMap:
    """How the loops over `iteration_shape` index an operand that broadcasts to it.

    Trailing dimensions align; a size-1 operand dimension of a wider loop reads index 0.
    """
    rank = len(iteration_shape)
    leading = rank - len(operand_shape)
    results = tuple(
        AffineExpr.constant(0)
        if size == 1 and iteration_shape[leading + axis] != 1
        else AffineExpr.dimension(leading + axis)
        for axis, size in enumerate(operand_shape)
    )
    return AffineMap(rank, 0, results)


def _known_size(value: SSAValue, axis: int) -> SSAValue | None:
    """The size of dynamic dimension `axis` of `value` if the IR already holds it: the size
    given to the `tensor.empty` init of the `linalg.generic` that produced `value`."""
    producer = value.owner
    if not isinstance(producer, GenericOp) or not isinstance(value, OpResult):
        return None
    init = producer.outputs[value.index].owner
    if not isinstance(init, tensor.EmptyOp):
        return None
    dynamic_axes = [a for a, size in enumerate(ew.shape_of(value)) if size == DYNAMIC_INDEX]
    return init.dynamic_sizes[dynamic_axes.index(axis)]


def _dynamic_size(
    kernel: ew.KernelOp, axis: int, iteration_shape: tuple[int, ...]
) -> tuple[list[Operation], SSAValue]:
    """The run-time size of dynamic iteration dimension `axis`, and the new ops computing it.

    Read from an input that spans the dimension, reusing a producer's size where there is one:
    a `tensor.dim` of a producer's result would be its second use, and upstream's
    linalg-fuse-elementwise-ops only fuses producers with one use.
    """
    rank = len(iteration_shape)
    spanning: list[tuple[SSAValue, int]] = []
    for operand in kernel.inputs:
        shape = ew.shape_of(operand)
        operand_axis = axis - (rank - len(shape))
        if operand_axis < 0 or shape[operand_axis] == 1:
            continue
        if shape[operand_axis] != DYNAMIC_INDEX:
            constant = arith.ConstantOp(IntegerAttr(shape[operand_axis], IndexType()))
            return [constant], constant.result
        if (known := _known_size(operand, operand_axis)) is not None:
            return [], known
        spanning.append((operand, operand_axis))
    if not spanning:
        raise OpFailure(
            f"ew-to-linalg: no input of this kernel gives the size of its dynamic dimension {axis}",
            kernel,
        )
    operand, operand_axis = spanning[0]
    index = arith.ConstantOp(IntegerAttr(operand_axis, IndexType()))
    dim = tensor.DimOp(operand, index)
    return [index, dim], dim.result


class KernelToGeneric(RewritePattern):
    """`ew.kernel` (tensor or buffer form) -> `linalg.generic` with the same body."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, kernel: ew.KernelOp, rewriter: PatternRewriter) -> None:
        iteration_shape = ew.shape_of(kernel.destinations()[0])
        rank = len(iteration_shape)
        new_ops: list[Operation] = []
        if kernel.is_bufferized:
            outputs: list[SSAValue] = list(kernel.outputs)
            result_types: list[Attribute] = []
        else:
            dynamic_sizes: list[SSAValue] = []
            for axis, size in enumerate(iteration_shape):
                if size == DYNAMIC_INDEX:
                    size_ops, size_value = _dynamic_size(kernel, axis, iteration_shape)
                    new_ops.extend(size_ops)
                    dynamic_sizes.append(size_value)
            inits = [tensor.EmptyOp(dynamic_sizes, result.type) for result in kernel.res]
            new_ops.extend(inits)
            outputs = [init.tensor for init in inits]
            result_types = list(kernel.res.types)

        yield_op = kernel.yield_op
        rewriter.replace(yield_op, YieldOp(*yield_op.values))
        body = rewriter.move_region_contents_to_new_regions(kernel.body)
        for op in body.walk():
            unmark_expansion(op)
        for output in outputs:
            body.block.insert_arg(ew.element_type(output.type), len(body.block.args))

        maps = [broadcasting_map(ew.shape_of(v), iteration_shape) for v in kernel.inputs]
        maps += [AffineMap.identity(rank)] * len(outputs)
        generic = GenericOp(
            inputs=list(kernel.inputs),
            outputs=outputs,
            body=body,
            indexing_maps=[AffineMapAttr(m) for m in maps],
            iterator_types=[IteratorTypeAttr.parallel()] * rank,
            result_types=result_types,
        )
        rewriter.insert(new_ops, InsertPoint.before(kernel))
        rewriter.replace(kernel, generic)


class ConstantToArith(RewritePattern):
    """`ew.constant` outside kernels -> an `arith.constant` dense splat in the element type."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, constant: ew.ConstantOp, rewriter: PatternRewriter) -> None:
        type_ = cast(TensorType[Attribute], constant.result.type)
        # The literal as a kernel holds it: an f32 `1.0e300` is inf (packing it raised)
        value = ew.constant_value(constant.result)
        assert value is not None
        splat = DenseIntOrFPElementsAttr.from_list(type_, [value])
        rewriter.replace(constant, arith.ConstantOp(splat))


@dataclass(frozen=True)
class EwToLinalgPass(ModulePass):
    """Export `ew.kernel`s as `linalg.generic` and `ew.constant`s as `arith.constant` splats."""

    name = "ew-to-linalg"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in op.walk():
            if not isinstance(kernel, ew.KernelOp):
                continue
            for inner in kernel.block.walk():
                if inner.dialect_name() == "llvm":  # (mlir-opt's deallocation refused it)
                    raise OpFailure(
                        f"ew-to-linalg: '{inner.name}' is no upstream op that mlir-opt's "
                        "bufferization takes (its memory effects are unknown): export before "
                        "ew-expand-math{ldexp=true}, or after it with ldexp=false",
                        inner,
                    )
        located_walker(
            GreedyRewritePatternApplier([KernelToGeneric(), ConstantToArith()]),
            apply_recursively=False,
        ).rewrite_module(op)
        for leftover in op.walk():
            if leftover.dialect_name() == "ew":
                raise OpFailure(
                    f"ew-to-linalg: '{leftover.name}' is not inside a kernel; run ew-fuse first",
                    leftover,
                )
