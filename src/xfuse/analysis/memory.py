"""Liveness over the kernel order and the memory plan of the intermediate tensors.

A step is a compute op in program order: a kernel, or an unfused elementwise op (so the lecture's
op-by-op program can be planned too). Function arguments are the caller's inputs and function
results go to the caller's output buffers; the temporaries are the other values steps write.
Constants are scalar immediates and take no memory.

Planning with reuse is a linear scan: a written temporary takes, in order of preference, the
buffer of an input that dies at this very step (an in-place write, legal because element i is
read before element i is written), then a buffer freed by an earlier step, then a new buffer.
Buffers are only shared between values of the same element type and the same shape, where a `?`
dim counts as the same only when the ops tie it to the other (unrelated inputs may differ).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.disjoint_set import DisjointSet

from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of, itemsize


@dataclass(frozen=True)
class Step:
    op: Operation
    reads: tuple[SSAValue, ...]
    """Tensor values read (each once, in operand order); constants are not read from memory."""
    writes: tuple[SSAValue, ...]


@dataclass(frozen=True)
class Liveness:
    steps: tuple[Step, ...]
    definition: Mapping[SSAValue, int]
    """Step writing each value (function arguments are absent)."""
    last_use: Mapping[SSAValue, int]
    """Last step reading each value that some step reads."""
    results: tuple[SSAValue, ...]
    """What the function returns, in order (a value may repeat)."""
    temporaries: tuple[SSAValue, ...]
    """Values written by steps that are not results: each needs a buffer, own or shared."""

    def live_at(self, step: int) -> list[SSAValue]:
        """Temporaries that hold memory during `step` (written by then, read at or after it)."""
        return [
            v
            for v in self.temporaries
            if self.definition[v] <= step <= self.last_use.get(v, self.definition[v])
        ]


def _is_compute(op: Operation) -> bool:
    return isinstance(op, ew.KernelOp | ew.ElementwiseOp | ew.ConvertOp)


def analyze_liveness(function: func.FuncOp) -> Liveness:
    block = function.body.block
    steps = tuple(
        Step(
            op,
            tuple(dict.fromkeys(v for v in op.operands if ew.constant_value(v) is None)),
            tuple(op.results),
        )
        for op in block.ops
        if _is_compute(op)
    )
    definition = {v: i for i, step in enumerate(steps) for v in step.writes}
    last_use = {v: i for i, step in enumerate(steps) for v in step.reads}
    terminator = block.last_op
    results = tuple(terminator.operands) if isinstance(terminator, func.ReturnOp) else ()
    returned = set(results)
    temporaries = tuple(v for v in definition if v not in returned)
    return Liveness(steps, definition, last_use, results, temporaries)


class DimClasses:
    """Which `?` dims are equal at run time: those the ops tie together (xDSL's union-find)."""

    def __init__(self, steps: Sequence[Step]):
        self.sets: DisjointSet[tuple[SSAValue, int]] = DisjointSet()
        self._members: set[tuple[SSAValue, int]] = set()
        for step in steps:
            space = step.writes[0]
            space_shape = ew.shape_of(space)
            for value in (*step.writes, *step.reads):
                shape = ew.shape_of(value)
                offset = len(space_shape) - len(shape)
                for axis, dim in enumerate(shape):
                    if dim == DYNAMIC_INDEX and space_shape[offset + axis] == DYNAMIC_INDEX:
                        self.sets.union(
                            self._member((value, axis)), self._member((space, offset + axis))
                        )

    def _member(self, dim: tuple[SSAValue, int]) -> tuple[SSAValue, int]:
        """`dim`, added to the sets as a class of its own the first time it is seen."""
        if dim not in self._members:
            self._members.add(dim)
            self.sets.add(dim)
        return dim

    def dim_class(self, value: SSAValue, axis: int) -> tuple[int, int]:
        """Equal for two `?` dims the ops prove equal at run time."""
        root_value, root_axis = self.sets.find(self._member((value, axis)))
        return (id(root_value), root_axis)

    def key(self, value: SSAValue) -> tuple[Any, ...]:
        """Equal keys: same element type and provably the same shape at run time."""
        dims = tuple(
            dim if dim != DYNAMIC_INDEX else self.dim_class(value, axis)
            for axis, dim in enumerate(ew.shape_of(value))
        )
        return (ew.element_type(value.type), dims)


def value_bytes(type_: Attribute, shape: Sequence[int], dtype: Any = None) -> int:
    """Bytes of a tensor/memref type with its `?` dims taken right-aligned from `shape`."""
    return math.prod(ew.bind_shape(type_, shape)) * itemsize(
        dtype or dtype_of(ew.element_type(type_))
    )


@dataclass(frozen=True)
class PlannedBuffer:
    type: Attribute
    """The tensor type of the values it holds."""
    values: tuple[SSAValue, ...]
    """The temporaries it holds, one after the other."""
    first_step: int
    """Allocate before this step."""
    last_step: int
    """Free after this step."""


@dataclass(frozen=True)
class MemoryPlan:
    liveness: Liveness
    reuse: bool
    buffers: tuple[PlannedBuffer, ...]
    buffer_of: Mapping[SSAValue, int]
    """Temporary -> index in `buffers`."""
    in_place: frozenset[SSAValue]
    """Temporaries written over an input that dies at their step."""
    reused: frozenset[SSAValue]
    """Temporaries written into a buffer freed by an earlier step."""
    dims: DimClasses
    """Which `?` dims are equal at run time."""

    @property
    def naive_count(self) -> int:
        """One buffer per temporary."""
        return len(self.liveness.temporaries)

    @property
    def planned_count(self) -> int:
        return len(self.buffers)

    def _problem(self, shape: Sequence[int]) -> tuple[int, ...]:
        """`shape` folded to the function's largest tensor rank, as the cost model folds it: a
        4096x14336 problem over flat `[?]` tensors, and over `[t, d]` ones, alike."""
        rank = max(
            (len(ew.shape_of(v)) for s in self.liveness.steps for v in (*s.reads, *s.writes)),
            default=0,
        )
        return ew.fold_shape(shape, rank)

    def planned_bytes(self, shape: Sequence[int], dtype: Any = None) -> int:
        """Bytes of the plan's buffers (`?` dims from `shape`, see `_problem`; element type or
        `dtype`)."""
        problem = self._problem(shape)
        return sum(value_bytes(b.type, problem, dtype) for b in self.buffers)

    def temporary_bytes(self, shape: Sequence[int], dtype: Any = None) -> list[int]:
        """Each temporary's bytes, in program order (as `planned_bytes` sizes them)."""
        problem = self._problem(shape)
        return [value_bytes(v.type, problem, dtype) for v in self.liveness.temporaries]

    def naive_bytes(self, shape: Sequence[int], dtype: Any = None) -> int:
        return sum(self.temporary_bytes(shape, dtype))

    def peak_live_bytes(self, shape: Sequence[int], dtype: Any = None) -> int:
        """Most temporary bytes allocated at once (inputs and outputs are the caller's)."""
        problem = self._problem(shape)
        return max(
            (
                sum(
                    value_bytes(b.type, problem, dtype)
                    for b in self.buffers
                    if b.first_step <= step <= b.last_step
                )
                for step in range(len(self.liveness.steps))
            ),
            default=0,
        )


def plan_memory(function: func.FuncOp, reuse: bool = True) -> MemoryPlan:
    """Assign every temporary of `function` a buffer; with `reuse`, share and write in place."""
    liveness = analyze_liveness(function)
    classes = DimClasses(liveness.steps)
    temporaries = set(liveness.temporaries)
    holders: list[list[SSAValue]] = []
    spans: list[list[int]] = []
    buffer_of: dict[SSAValue, int] = {}
    key_of: list[tuple[Any, ...]] = []
    """Per buffer the key (`DimClasses.key`) every value it holds has."""
    free: dict[tuple[Any, ...], list[int]] = {}
    """Free buffers by key, the most recently freed last."""
    in_place: set[SSAValue] = set()
    reused: set[SSAValue] = set()
    for index, step in enumerate(liveness.steps):
        dying = [
            buffer_of[v] for v in step.reads if v in buffer_of and liveness.last_use[v] == index
        ]
        claimed: set[int] = set()
        for value in step.writes:
            if value not in temporaries:
                continue
            key = classes.key(value)
            fits = [b for b in dying if b not in claimed and key_of[b] == key]
            if reuse and fits:
                buffer = fits[0]
                in_place.add(value)
            elif reuse and free.get(key):
                buffer = free[key].pop()
                reused.add(value)
            else:
                buffer = len(holders)
                holders.append([])
                spans.append([index, index])
                key_of.append(key)
            holders[buffer].append(value)
            buffer_of[value] = buffer
            claimed.add(buffer)
        for value in (*step.reads, *step.writes):
            if value in buffer_of:
                spans[buffer_of[value]][1] = index
        freed = [b for b in dying if b not in claimed] + [
            buffer_of[v] for v in step.writes if v in temporaries and v not in liveness.last_use
        ]
        for buffer in freed:
            free.setdefault(key_of[buffer], []).append(buffer)
    buffers = tuple(
        PlannedBuffer(values[0].type, tuple(values), first, last)
        for values, (first, last) in zip(holders, spans, strict=True)
    )
    return MemoryPlan(
        liveness, reuse, buffers, buffer_of, frozenset(in_place), frozenset(reused), classes
    )
