"""`ew-bufferize`: kernels on tensors -> kernels on memrefs, in destination-passing style.

The function takes its inputs, then one output buffer per result, and returns nothing:

    func.func @main(%x: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>) {
      %c0 = arith.constant 0 : index
      %n = memref.dim %x, %c0 : memref<?xf32>
      %t = memref.alloc(%n) : memref<?xf32>
      ew.kernel ins(%x, %b : memref<?xf32>, memref<?xf32>) outs(%t : memref<?xf32>) { ... }
      ew.kernel ins(%t : memref<?xf32>) outs(%out : memref<?xf32>) { ... }
      memref.dealloc %t : memref<?xf32>
      func.return
    }

A kernel result the function returns is written straight into its output buffer (into each of
them when it is returned twice) and later kernels read it from there. Every other result gets the
buffer `xfuse.analysis.memory.plan_memory` assigns it: one `memref.alloc` per planned buffer
right before its first writer, its `?` sizes read with `memref.dim` from an operand of that
kernel, and one `memref.dealloc` right after its last reader. Expects `ew-fuse` to have run.
"""

from __future__ import annotations

import collections
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    I32,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    TensorType,
    UnknownLoc,
    i32,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from xfuse.analysis.memory import MemoryPlan, plan_memory
from xfuse.analysis.statistics import PassStatistics, Statistic, render_statistics
from xfuse.dialects import ew
from xfuse.dialects.failure import OpFailure, check_one_block


@functools.cache
def _alloc_segments(dynamic_sizes: int) -> DenseArrayBase[I32]:
    """`memref.alloc`'s operand segment sizes with this many sizes and no symbols."""
    return DenseArrayBase.from_list(i32, [dynamic_sizes, 0])


def _alloc(sizes: Sequence[SSAValue], type_: MemRefType[Attribute]) -> memref.AllocOp:
    """`memref.AllocOp(sizes, [], type_)`, built with `create` and its segment sizes made once
    per count (IRDL's builder costs 4x the op, most of it building that array)."""
    return memref.AllocOp.create(
        operands=sizes,
        result_types=[type_],
        properties={"operandSegmentSizes": _alloc_segments(len(sizes))},
    )


@functools.cache  # a new MemRefType is built and verified: once per tensor type is enough
def memref_type(type_: Attribute) -> MemRefType[Attribute]:
    tensor = cast(TensorType[Attribute], type_)
    return MemRefType(tensor.get_element_type(), tensor.get_shape())


def output_names(results: Sequence[SSAValue]) -> list[str]:
    """The output buffers' names, one per returned value: its SSA name, else `out<i>` (`i` its
    position), which a value returned more than once also gets: each return is its own buffer;
    so do the results of one op, which share its name (`%k#0`, `%k#1`: two outputs 'k')."""
    returned = collections.Counter(results)
    hints = [v.name_hint if v.name_hint and returned[v] == 1 else None for v in results]
    named = collections.Counter(hints)
    return [
        hint if hint is not None and named[hint] == 1 else f"out{index}"
        for index, hint in enumerate(hints)
    ]


@dataclass(frozen=True)
class BufferizeStats:
    temporaries: int = 0
    allocated: int = 0
    reused: int = 0
    in_place: int = 0

    def __add__(self, other: BufferizeStats) -> BufferizeStats:
        return BufferizeStats(
            *(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__)
        )

    def report(self) -> PassStatistics:
        return PassStatistics(
            "ew-bufferize",
            (
                Statistic("temporaries", self.temporaries, "intermediate tensors (naive buffers)"),
                Statistic("buffers-allocated", self.allocated, "memref.alloc ops"),
                Statistic("buffers-reused", self.reused, "temporaries in a freed buffer"),
                Statistic("in-place-writes", self.in_place, "temporaries over a dying input"),
            ),
        )


class _FunctionBufferizer:
    """Rebuilds one function's body on memrefs, following a memory plan."""

    def __init__(self, function: func.FuncOp, plan: MemoryPlan):
        self.plan = plan
        old = function.body.block
        results = plan.liveness.results
        self.block = Block(
            arg_types=[memref_type(a.type) for a in old.args]
            + [memref_type(r.type) for r in results]
        )
        self.buffers: dict[SSAValue, SSAValue] = dict(zip(old.args, self.block.args, strict=False))
        self.outputs = self.block.args[len(old.args) :]
        self.destinations: dict[SSAValue, list[SSAValue]] = {}
        for out, returned in zip(self.outputs, results, strict=True):
            self.destinations.setdefault(returned, []).append(out)
        for new, old_value in zip(self.block.args, old.args, strict=False):
            new.name_hint = old_value.name_hint
            new.location = old_value.location
        for new, name, result in zip(self.outputs, output_names(results), results, strict=True):
            new.name_hint = name
            new.location = ew.location_of(result)  # an output buffer: where its value is made
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.index_constants: dict[int, SSAValue] = {}
        self.allocated: dict[int, SSAValue] = {}
        self.sizes: dict[tuple[int, int], SSAValue] = {}

    def index_constant(self, axis: int, at: Operation) -> SSAValue:
        """The `index` constant `axis`, made once, at the first kernel `at` that reads it."""
        if axis not in self.index_constants:
            constant = arith.ConstantOp(IntegerAttr(axis, IndexType()))
            constant.location = at.location
            anchor = list(self.index_constants.values())
            if anchor:
                self.block.insert_op_after(constant, cast(Operation, anchor[-1].owner))
            elif self.block.first_op is None:
                self.block.add_op(constant)
            else:
                self.block.insert_op_before(constant, self.block.first_op)
            self.index_constants[axis] = constant.result
        return self.index_constants[axis]

    def allocate(self, buffer: int, operands: Sequence[SSAValue], at: Operation) -> SSAValue:
        """`memref.alloc` of a planned buffer; each `?` size is read once per class of equal dims,
        with `memref.dim` on an operand of the kernel `at` that first writes the buffer."""
        planned = self.plan.buffers[buffer]
        type_ = memref_type(planned.type)
        shape = tuple(type_.get_shape())
        sizes: list[SSAValue] = []
        for axis, dim in enumerate(shape):
            if dim != DYNAMIC_INDEX:
                continue
            dim_class = self.plan.dims.dim_class(planned.values[0], axis)
            if dim_class not in self.sizes:
                self.sizes[dim_class] = self.read_size(axis - len(shape), operands, at)
            sizes.append(self.sizes[dim_class])
        return self.builder.insert(_alloc(sizes, type_)).results[0]

    def read_size(self, axis: int, operands: Sequence[SSAValue], at: Operation) -> SSAValue:
        """`memref.dim` of the first operand whose (right-aligned) `axis` is dynamic."""
        for value in operands:
            shape = ew.shape_of(value)
            if -len(shape) <= axis and shape[axis] == DYNAMIC_INDEX:
                index = self.index_constant(len(shape) + axis, at)
                return self.builder.insert(memref.DimOp(value, index)).result
        raise OpFailure("ew-bufferize: no operand gives a dynamic size of this kernel's buffer", at)

    def kernel(self, index: int, kernel: ew.KernelOp) -> None:
        """Bufferize `kernel` (the `index`th), its buffers allocated before it and those it
        reads last freed after it, all at its location (as MLIR's bufferization places them)."""
        before = self.block.last_op
        try:
            ins = [self.buffers[v] for v in kernel.inputs]
        except KeyError:
            raise OpFailure(
                "ew-bufferize: an input of this kernel is not a tensor in memory", kernel
            ) from None
        yielded = list(kernel.yield_op.values)
        outs: list[SSAValue] = []
        yields: list[SSAValue] = []
        for result, value in zip(kernel.res, yielded, strict=True):
            destinations = list(self.destinations.get(result, ()))
            if not destinations:
                buffer = self.plan.buffer_of[result]
                if buffer not in self.allocated:
                    self.allocated[buffer] = self.allocate(buffer, [*ins, *outs], kernel)
                destinations = [self.allocated[buffer]]
            self.buffers[result] = destinations[0]
            outs.extend(destinations)
            yields.extend([value] * len(destinations))
        region = kernel.detach_region(kernel.body)
        old_yield = region.block.last_op
        assert old_yield is not None
        region.block.insert_op_before(ew.YieldOp(*yields), old_yield)
        region.block.erase_op(old_yield)
        bufferized = ew.KernelOp(ins, outs, [], region)
        bufferized.location = kernel.location
        self.builder.insert(bufferized)
        for buffer, planned in enumerate(self.plan.buffers):
            if planned.last_step == index:
                self.builder.insert(memref.DeallocOp.get(self.allocated[buffer]))
        made = before.next_op if before is not None else self.block.first_op
        while made is not None:
            if isinstance(made.location, UnknownLoc):
                made.location = kernel.location
            made = made.next_op


def bufferize_function(function: func.FuncOp, reuse: bool = True) -> BufferizeStats:
    """Rewrite `function` (kernels on tensors) into destination-passing style on memrefs."""
    check_one_block(function, "ew-bufferize")
    for op in function.body.block.ops:
        if not isinstance(op, ew.KernelOp | func.ReturnOp):
            # an ew op is one ew-fuse puts in a kernel; another (`scf.for`, `memref.alloc`) is
            # of IR past ew-bufferize, which ew-fuse would not help
            hint = (
                "run ew-fuse first"
                if op.dialect_name() == "ew"
                else "ew-bufferize takes ew.kernel ops on tensors, the output of ew-fuse"
            )
            raise OpFailure(f"ew-bufferize: '{op.name}' is not inside an ew.kernel ({hint})", op)
        if isinstance(op, ew.KernelOp) and op.is_bufferized:
            raise OpFailure(
                f"ew-bufferize: '{op.name}' is already bufferized (on memrefs): ew-bufferize "
                "takes ew.kernel ops on tensors (the output of ew-fuse)",
                op,
            )
        for index, result in enumerate(op.results):  # the memref would silently drop it
            if cast(TensorType[Attribute], result.type).encoding != NoneAttr():
                raise OpFailure(
                    f"ew-bufferize: '{op.name}' result #{index} has type {result.type}: "
                    "ew-bufferize takes tensors with no encoding",
                    op,
                )
        if isinstance(op, func.ReturnOp):  # (its output buffer would never be written)
            for index, value in enumerate(op.arguments):
                if isinstance(value, BlockArgument):
                    named = f" (%{value.name_hint})" if value.name_hint else ""
                    raise OpFailure(
                        f"ew-bufferize: result #{index} is the function's argument "
                        f"#{value.index}{named}: no kernel writes its output buffer (run ew-fuse "
                        "first, which copies it in one)",
                        op,
                    )
    ew.check_tensor_signature(function, "ew-bufferize")
    plan = plan_memory(function, reuse)
    bufferizer = _FunctionBufferizer(function, plan)
    for index, step in enumerate(plan.liveness.steps):
        bufferizer.kernel(index, cast(ew.KernelOp, step.op))
    returning = func.ReturnOp()
    returning.location = cast(func.ReturnOp, function.get_return_op()).location
    bufferizer.builder.insert(returning)
    function.body.detach_block(0)
    function.body.add_block(bufferizer.block)
    function.function_type = FunctionType.from_lists([a.type for a in bufferizer.block.args], [])
    if function.arg_attrs is not None:  # the inputs keep theirs (`ew.dims`); outputs get none
        extra = len(bufferizer.block.args) - len(function.arg_attrs.data)
        function.arg_attrs = ArrayAttr([*function.arg_attrs.data, *[DictionaryAttr({})] * extra])
    function.res_attrs = None
    return BufferizeStats(
        temporaries=plan.naive_count,
        allocated=plan.planned_count,
        reused=len(plan.reused),
        in_place=len(plan.in_place),
    )


@dataclass(frozen=True)
class EwBufferizePass(ModulePass):
    """Tensors -> memrefs in destination-passing style, with liveness-based buffer planning."""

    name = "ew-bufferize"

    reuse: bool = True
    """Share buffers between temporaries whose lifetimes do not overlap, and write in place."""

    stats: bool = False
    """Print the pass statistics (buffers allocated, reused, written in place) to stderr."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        total = BufferizeStats()
        for function in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
            if function.body.blocks:
                total += bufferize_function(function, self.reuse)
        if self.stats:
            print(render_statistics([total.report()]), file=sys.stderr)
