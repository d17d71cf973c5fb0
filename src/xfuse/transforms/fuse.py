"""`ew-fuse`: elementwise ops -> `ew.kernel` ops on tensors, each a region of scalar arith/math.

Greedy fusion merges groups of ops along def-use edges while the result stays legal:
- one iteration shape per kernel: an edge between two ops of the group's shape merges them; a
  group of a smaller shape that broadcasts to its consumer's (a bias `[d]` computed on the way into
  a `[t, d]` kernel) is absorbed only when nothing outside the two groups needs its values, so it
  is computed in the region and never materialized, unless it calls functions the kernel
  would call again for each of its rows (`recompute`: a `[d]` row's `sin` in a `[t, d]` kernel,
  t times an element; it is then a small kernel of its own). Ops of different
  shapes joined only through a broadcast are not merged, because two `?` dims of unrelated
  inputs may differ at run time; for the same reason independent subgraphs stay separate
  kernels, unless they read a common value of their shape (sibling fusion: it is then read
  once);
- no cycles: groups merge only when no path leaves the pair and comes back into it;
- at most `max-ops` scalar ops per kernel, counting each op as the ops it becomes in a float32
  kernel after `ew-expand-math`'s approximations (`op_size`: a `tanh` is 15, an `add` 1):
  LLVM's time on a loop grows faster than the loop (its loop vectorizer's most), so a long
  chain becomes several kernels (each passing its last values to the next through memory).
Ops are visited in program order, each use once per sweep, until a sweep merges nothing (a
later sweep looks only at the uses a merge may have made legal): a
union-find keeps the groups, each with its shape, size, neighbour groups and a position in a
topological order of the groups, so a cycle check only searches the groups ranked between the
pair. Fusing a chain or a DAG of n ops takes time about linear in n.
A value with several users is computed once per kernel; one also needed outside its kernel (by
another kernel or the function's results) becomes an extra kernel result. Constants become
`arith.constant` immediates in the regions. f16/bf16 values are computed in f32; an
`ew.convert` fuses like any elementwise op (`arith.truncf`/`arith.extf` in the region).

After the pass every function result is defined by an `ew.kernel`: a result that is a function
argument is one more result of the first kernel that reads it over its own shape (greedy mode:
it is read once), else it gets a copy kernel; one that is a constant gets a constant kernel. So
bufferization only ever routes kernel results into the caller's output buffers. Dead elementwise
ops are dropped.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import Float32Type, Float64Type, FloatAttr, LocationAttr, ModuleOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import is_trivially_dead
from xdsl.utils.disjoint_set import IntDisjointSet

from xfuse.analysis.statistics import PassStatistics, Statistic, render_statistics
from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of, itemsize
from xfuse.dialects.failure import OpFailure
from xfuse.transforms.expand_math import EwExpandMathPass, simple_power
from xfuse.transforms.options import CpuMath, FuseMode, Recompute, check_choice, check_option
from xfuse.transforms.scalar import (
    emit_constant,
    emit_convert,
    emit_scalar,
    narrow,
    widen,
)

FusibleOp = ew.ElementwiseOp | ew.ConvertOp
"""What fusion puts into kernels: the elementwise ops and the conversions."""
Shape = tuple[int, ...]
DEFAULT_MAX_OPS = 128


def scalar_size(op_type: type[Operation], exponent: float | None = None) -> int:
    """The ops (constants aside) that one `op_type` becomes in a float32 kernel after
    `ew-expand-math{math=approx}`: what `max-ops` counts (1 for `ew.add`, 15 for `ew.tanh`);
    with `exponent`, a constant right operand (`op_size`: `ew.pow` by 3 is one `math.fpowi`)."""
    return len(scalar_ops(op_type, exponent))


@functools.cache
def scalar_ops(
    op_type: type[Operation],
    exponent: float | None = None,
    f64: bool = False,
    math: CpuMath = "approx",
) -> tuple[str, ...]:
    """The names of the ops `scalar_size` counts (an `ew.convert`: its cast); of an f64 op
    with `f64`, after `ew-expand-math{math=...}` (f64 has no approximation: libm's calls)."""
    if not issubclass(op_type, ew.ElementwiseOp):
        return ("arith.extf",)
    element = Float64Type() if f64 else Float32Type()
    arity = ew.arity(op_type)
    block = Block(arg_types=[element] * arity)
    builder = Builder(InsertPoint.at_end(block))
    args = list(block.args)
    if exponent is not None:
        args[1] = builder.insert(arith.ConstantOp(FloatAttr(exponent, element))).result
    emit_scalar(op_type, builder, args, element)
    return expanded(block, math)


def expanded(block: Block, math: CpuMath) -> tuple[str, ...]:
    """The names of the ops (constants aside) that `block`'s ops become in
    `ew-expand-math{math=...}` (it is changed: a function's body)."""
    arguments = [argument.type for argument in block.args]
    block.add_op(func.ReturnOp())
    function = func.FuncOp("expanded", (arguments, []), Region(block))
    EwExpandMathPass(math=math).apply(Context(), ModuleOp([function]))
    return tuple(
        op.name for op in block.ops if not isinstance(op, arith.ConstantOp | func.ReturnOp)
    )


def op_ops(op: Operation, f64: bool = False, math: CpuMath = "approx") -> tuple[str, ...]:
    """`scalar_ops` of `op`, whose constant exponent counts where `ew-expand-math` computes
    pow without exp(y log|x|) (`simple_power`): pow(x, 3) is 1, not exp(3 log|x|)'s ~100."""
    exponent = simple_power(ew.constant_value(op.rhs)) if isinstance(op, ew.PowOp) else None
    return scalar_ops(type(op), exponent, f64, math)


def op_size(op: Operation) -> int:
    """`scalar_size` of `op` (`op_ops`)."""
    return len(op_ops(op))


def libm_calls(op: Operation, math: CpuMath = "approx") -> int:
    """The function calls `op` becomes with `ew-expand-math{math=...}` (libm's `sinf`; an f64
    `tanh`'s; any transcendental's under `math=libm`), not instructions (`arith`, `math.fma`,
    `math.sqrt`: LLVM intrinsics). f16 and bf16 ops compute in f32."""
    f64 = isinstance(ew.element_type(op.results[0].type), Float64Type)
    return op_ops(op, f64, math).count("func.call")


def calls_libm(kernel: ew.KernelOp, math: CpuMath) -> bool:
    """Whether `kernel`'s region makes a libm call once `ew-expand-math{math=...}` lowers it,
    as `libm_calls` counts them for an `ew` op."""
    return any(
        _math_op_calls_libm(type(op), tuple(o.type for o in op.operands), math)
        for op in kernel.body.walk()
        if op.dialect_name() == "math"
    )


@functools.cache
def _math_op_calls_libm(
    op_type: type[Operation], operand_types: tuple[Attribute, ...], math: CpuMath
) -> bool:
    block = Block(arg_types=operand_types)
    block.add_op(op_type.create(operands=list(block.args), result_types=[operand_types[0]]))
    return "func.call" in expanded(block, math)


def hoisted(small: Shape, big: Shape) -> bool:
    """A group of shape `small` in a kernel of shape `big` is loop-invariant in each loop it
    repeats along, all inside the loops it varies along: LLVM computes it once per element (a
    `[t, 1]` column's once a row, before the row's loop; a 0-d value's before the nest), not a
    `[d]` row's, which varies inside the `t` loop it repeats along."""
    aligned = (1,) * (len(big) - len(small)) + tuple(small)
    pairs = enumerate(zip(aligned, big, strict=True))
    lacking = [axis for axis, (size, other) in pairs if size == 1 != other]
    varying = [axis for axis, size in enumerate(aligned) if size != 1]
    return not (lacking and varying) or min(lacking) > max(varying)


def broadcasts_into(small: Shape, big: Shape) -> bool:
    """Every dim of `small` is 1 or the aligned dim of `big` (type-level, right-aligned)."""
    offset = len(big) - len(small)
    return offset >= 0 and all(s in (1, big[offset + i]) for i, s in enumerate(small))


class _Partition:
    """Union-find over the body's ops (constants and the terminator excluded), and the DAG of
    its groups.

    Each group keeps what the legality checks need, updated as groups merge, so no check walks
    a group's members: its shape, its size (a sum of `scalar_size`s), its neighbour groups (sets
    of member indices, resolved to groups when read) and a position `rank` in a topological
    order of the groups. The order bounds the search for a path between two groups to the
    groups ranked between them, and is repaired after each merge as in Pearce and Kelly's
    dynamic topological order (JEA 2007).
    """

    def __init__(
        self,
        ops: Sequence[Operation],
        max_ops: int,
        recompute: Recompute = "cheap",
        math: CpuMath = "approx",
    ):
        self.ops = list(ops)
        self.max_ops = max_ops
        self.recompute_all = recompute == "all"
        self.index = {op: i for i, op in enumerate(self.ops)}
        count = len(self.ops)
        self.sets = IntDisjointSet(size=count)
        self.members = [[i] for i in range(count)]
        self.sizes = [op_size(op) for op in self.ops]
        self.rank = list(range(count))
        self.successors: list[set[int]] = [set() for _ in range(count)]
        self.predecessors: list[set[int]] = [set() for _ in range(count)]
        self.escapes = [False] * count
        """Some value of the group is used outside the partition (returned, say)."""
        self.fusible = [isinstance(op, FusibleOp) for op in self.ops]
        """Per op (and so per group: only fusible groups merge)."""
        self.calls = [
            libm_calls(op, math) if fusible else 0
            for op, fusible in zip(self.ops, self.fusible, strict=True)
        ]
        """Per group: the functions its ops call per element (`libm_calls`)."""
        self.narrow = [
            fusible and itemsize(dtype_of(ew.element_type(op.results[0].type))) < 4
            for op, fusible in zip(self.ops, self.fusible, strict=True)
        ]
        """Per group: some value of it is f16 or bf16 (a kernel of its own would store it so
        rounded, where the consumer's kernel keeps it in f32)."""
        self.op_shapes: list[Shape] = [
            ew.shape_of(op.results[0]) if fusible else ()
            for op, fusible in zip(self.ops, self.fusible, strict=True)
        ]
        """The shape of each op's result (fusion changes no op)."""
        self.shapes = list(self.op_shapes)
        """The shape of each group (at its root)."""
        self.producers = [
            [self.index[o.owner] for o in op.operands if o.owner in self.index] for op in self.ops
        ]
        """The ops of the partition whose results each op reads, per operand."""
        self.searched = 0
        """Groups visited by the cycle checks: the fusion's cost beyond one look per use."""
        for i in range(count):
            for user in self.users(i):
                j = self.index.get(user)
                if j is None:
                    self.escapes[i] = True
                elif j != i:
                    self.successors[i].add(j)
                    self.predecessors[j].add(i)

    def find(self, i: int) -> int:
        return self.sets[i]

    def users(self, i: int) -> Iterator[Operation]:
        for result in self.ops[i].results:
            for use in result.uses:
                yield use.operation

    def neighbours(self, table: list[set[int]], group: int) -> set[int]:
        """`group`'s successor or predecessor groups (`table`), resolved and stored back."""
        resolved = {self.find(i) for i in table[group]}
        resolved.discard(group)
        table[group] = resolved
        return resolved

    def successor_groups(self, group: int) -> set[int]:
        return self.neighbours(self.successors, group)

    def is_fusible(self, group: int) -> bool:
        return self.fusible[group]

    def used_only_by(self, group: int, other: int) -> bool:
        """No value of `group` is needed outside `group` and `other` (nor returned)."""
        return not self.escapes[group] and self.successor_groups(group) <= {other}

    def fits(self, a: int, b: int) -> bool:
        """Both groups are fusible, and small enough to share one kernel."""
        return (
            self.is_fusible(a)
            and self.is_fusible(b)
            and self.sizes[a] + self.sizes[b] <= self.max_ops
        )

    def between(self, start: int, table: list[set[int]], low: int, high: int) -> set[int]:
        """The groups ranked strictly between `low` and `high` reached from `start` along
        `table`'s edges (successors or predecessors)."""
        reached: set[int] = set()
        pending = [start]
        while pending:
            for group in self.neighbours(table, pending.pop()):
                if low < self.rank[group] < high and group not in reached:
                    self.searched += 1
                    reached.add(group)
                    pending.append(group)
        return reached

    def merge_unless_cycle(self, a: int, b: int) -> bool:
        """Merge groups a and b, unless that closes a cycle (a path leaves them and comes
        back); returns whether they merged."""
        first, last = (a, b) if self.rank[a] < self.rank[b] else (b, a)
        low, high = self.rank[first], self.rank[last]
        # Every group on a path from `first` into `last` is ranked between them.
        feeding_last = self.between(last, self.predecessors, low, high)
        # (The walk left each visited group's predecessors resolved to groups.)
        if any(first in self.predecessors[group] for group in feeding_last):
            return False
        # The merged group goes after what feeds `last` and before what `first` feeds.
        fed_by_first = self.between(first, self.successors, low, high) if feeding_last else set()
        slots = sorted(self.rank[g] for g in (first, last, *feeding_last, *fed_by_first))
        below = sorted(feeding_last, key=self.rank.__getitem__)
        above = sorted(fed_by_first, key=self.rank.__getitem__)
        for group, slot in zip(below, slots[: len(below)], strict=True):
            self.rank[group] = slot
        for group, slot in zip(above, slots[len(slots) - len(above) :], strict=True):
            self.rank[group] = slot
        merged_rank = slots[len(below)]
        self.sets.union(a, b)
        root = self.find(a)
        other = b if root == a else a
        self.rank[root] = merged_rank
        self.members[root] += self.members[other]
        self.members[other] = []
        self.sizes[root] += self.sizes[other]
        self.calls[root] += self.calls[other]
        self.narrow[root] = self.narrow[root] or self.narrow[other]
        for table in (self.successors, self.predecessors):
            if len(table[root]) < len(table[other]):
                table[root], table[other] = table[other], table[root]
            table[root] |= table[other]
            table[other] = set()
        self.escapes[root] = self.escapes[root] or self.escapes[other]
        if self.shapes[root] != self.shapes[other]:
            self.shapes[root] = ew.broadcast_shapes(self.shapes[root], self.shapes[other])
        return True

    def may_recompute(self, group: int, shape: Shape) -> bool:
        """`group` may be absorbed into a kernel of `shape`, which may meet each of its elements
        several times: unless it calls functions (libm's) that the kernel would call again for
        each of its rows (not `hoisted`). A `[d]` row's `sin(cos(...))` in a `[t, d]` kernel
        took 6.88x the time of its own small kernel and the `[t, d]` one (12.4x with AVX2
        code), and 1.07-5.74x at static shapes of 16 to 8,192 elements (a call's workspace
        costs nothing, `CallPlan.held_workspace`). On a GPU too: a kernel of its own costs a
        launch, a deep chain per element more (the cost model's `[4096, 14336]` f32 with a
        row's 20 `sin`/`cos`: 267.8 us in one kernel, 148.3 split). Arithmetic costs less
        than the extra kernel's temporary (a row's `exp`: 1.00x with AVX-512, 1.37x slower
        split at `[2, 2^22]`): benchmarks/broadcast_recompute.py, docs/benchmarks.md. A group
        of f16 or bf16 values joins whatever it costs: its own kernel would store them rounded
        to their type, where the fused kernel computes on in f32 (docs/shapes-and-dtypes.md)."""
        if self.recompute_all or self.narrow[group] or not self.calls[group]:
            return True  # (f16/bf16 values: fused, they keep f32 precision, as the docs promise)
        return hoisted(self.shapes[group], shape)

    def try_merge(self, producer: int, consumer: int, a: int, b: int) -> bool:
        """Merge the groups `a` and `b` of `producer` and its `consumer` if that is legal."""
        shape_a, shape_b = self.shapes[a], self.shapes[b]
        if shape_a == shape_b:
            legal = self.op_shapes[producer] == self.op_shapes[consumer] == shape_a
        elif broadcasts_into(shape_a, shape_b):
            legal = self.used_only_by(a, b) and self.may_recompute(a, shape_b)
        elif broadcasts_into(shape_b, shape_a):
            legal = self.used_only_by(b, a) and self.may_recompute(b, shape_a)
        else:
            legal = False
        return legal and self.merge_unless_cycle(a, b)

    def try_merge_siblings(self, a: int, b: int, shared: SSAValue) -> bool:
        """Two readers of `shared` (in groups `a` and `b`) fuse (reading it once) when it ties
        their shapes together."""
        legal = self.shapes[a] == self.shapes[b] == ew.shape_of(shared)
        return legal and self.merge_unless_cycle(a, b)

    def fuse_greedily(self) -> None:
        readers: dict[SSAValue, list[int]] = {}
        for index, op in enumerate(self.ops):
            for operand in op.operands:
                if ew.constant_value(operand) is None:
                    readers.setdefault(operand, []).append(index)
        # The pairs of ops that may fuse, in the order each sweep looks at them: each use
        # (producer, consumer) in program order, then two readers of a value (None for a use):
        # the first with each other one, then each with the next, which fill a kernel of the
        # readers the first's could not take (they were a kernel each: 300 readers of x, 173).
        pairs: list[tuple[int, int, SSAValue | None]] = [
            (producer, consumer, None)
            for consumer in range(len(self.ops))
            for producer in self.producers[consumer]
        ]
        pairs += [
            (users[0], other, shared) for shared, users in readers.items() for other in users[1:]
        ]
        pairs += [
            (earlier, later, shared)
            for shared, users in readers.items()
            for earlier, later in itertools.pairwise(users[1:])
        ]
        # Merges can enable others (a broadcast group whose other users joined its consumer):
        # sweep until nothing changes. A pair in one group, or in two too big to share a kernel,
        # stays so (groups only merge and grow) and is left out of the later sweeps, where it
        # would fail again and change nothing: so a sweep confirming that nothing changes looks
        # only at pairs whose legality a merge may have changed (often none).
        find, fits = self.find, self.fits
        changed = True
        while changed:
            changed = False
            retry: list[tuple[int, int, SSAValue | None]] = []
            for first, second, shared in pairs:
                a, b = find(first), find(second)
                if a == b or not fits(a, b):
                    continue
                if shared is None:
                    merged = self.try_merge(first, second, a, b)
                else:
                    merged = self.try_merge_siblings(a, b, shared)
                if merged:
                    changed = True
                else:
                    retry.append((first, second, shared))
            pairs = retry

    def groups_in_order(self) -> list[list[Operation]]:
        """The groups in a topological order, earliest first op first among the ready ones."""
        roots = [i for i in range(len(self.ops)) if self.find(i) == i]
        successors = {root: self.successor_groups(root) for root in roots}
        pending = dict.fromkeys(roots, 0)
        for root in roots:
            for successor in successors[root]:
                pending[successor] += 1
        ready = [(min(self.members[root]), root) for root in roots if pending[root] == 0]
        heapq.heapify(ready)
        order: list[list[Operation]] = []
        while ready:
            _, root = heapq.heappop(ready)
            order.append([self.ops[i] for i in sorted(self.members[root])])
            for successor in successors[root]:
                pending[successor] -= 1
                if pending[successor] == 0:
                    heapq.heappush(ready, (min(self.members[successor]), successor))
        assert len(order) == len(roots), "fusion groups form a cycle"
        return order


@dataclass(frozen=True)
class FusionStats:
    elementwise_ops: int = 0
    kernels: int = 0
    fused_ops: int = 0
    copy_kernels: int = 0
    constants_inlined: int = 0
    groups_searched: int = 0

    def __add__(self, other: FusionStats) -> FusionStats:
        return FusionStats(
            *(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__)
        )

    def report(self) -> PassStatistics:
        return PassStatistics(
            "ew-fuse",
            (
                Statistic("elementwise-ops", self.elementwise_ops, "elementwise ops in the input"),
                Statistic("kernels", self.kernels, "kernels formed"),
                Statistic("fused-ops", self.fused_ops, "ops sharing a kernel with another op"),
                Statistic("copy-kernels", self.copy_kernels, "copy/constant kernels for results"),
                Statistic("constants-inlined", self.constants_inlined, "arith.constant immediates"),
                Statistic(
                    "groups-searched", self.groups_searched, "groups visited by cycle checks"
                ),
            ),
        )


def _compute_type_of(value: SSAValue) -> Attribute:
    return ew.compute_type(ew.element_type(value.type))


def _drop_unused(block: Block) -> None:
    """Erase the body's dead ops (widenings that a narrowing gave back unused, the scalars of
    unused ops): what `region_dce` does to one block without regions, in one backward sweep
    instead of its two walks with their trait lookups, since each op's users come after it."""
    for op in reversed(list(block.ops)):
        if is_trivially_dead(op):
            block.erase_op(op)


def _build_kernel(group: Sequence[Operation]) -> tuple[ew.KernelOp, list[SSAValue], int]:
    """The kernel computing `group`; also the tensor values it replaces and its constant count."""
    members = set(group)
    # In order of first use; a dict, not a list, finds a value read again in O(1).
    inputs = list(
        dict.fromkeys(
            operand
            for op in group
            for operand in op.operands
            if operand.owner not in members and ew.constant_value(operand) is None
        )
    )
    outputs = [
        op.results[0]
        for op in group
        if any(use.operation not in members for use in op.results[0].uses)
    ]
    output_set = set(outputs)
    stored: dict[SSAValue, SSAValue] = {}  # each output in its element type: what is yielded
    block = Block(arg_types=[ew.element_type(v.type) for v in inputs])
    builder = Builder(InsertPoint.at_end(block))
    # Each value is held in the compute type of its own element type (kernels may mix dtypes).
    scalars: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(inputs, block.args, strict=True):
        last_before = block.last_op
        scalars[value] = widen(builder, arg, _compute_type_of(value))
        _locate_after(block, last_before, ew.location_of(value))  # (an extf was loc(unknown))
    constants = 0
    for op in group:
        last_before = block.last_op
        args: list[SSAValue] = []
        for operand in op.operands:
            if operand not in scalars:
                literal = ew.constant_value(operand)
                assert literal is not None
                scalars[operand] = emit_constant(builder, literal, _compute_type_of(operand))
                constants += 1
            args.append(scalars[operand])
        result = op.results[0]
        if isinstance(op, ew.ConvertOp):
            scalars[result] = emit_convert(builder, args[0], ew.element_type(result.type))
        else:
            scalars[result] = emit_scalar(type(op), builder, args, _compute_type_of(result))
        if result in output_set:
            # Rounded to its dtype where it is computed: the ops after it read what is stored,
            # as the next kernel would after a split (`p = x * y; q = p / y;` in f16 with p =
            # inf computed q from the unrounded p). No widening is left where none reads it.
            stored[result] = narrow(builder, scalars[result], ew.element_type(result.type))
            if any(use.operation in members for use in result.uses):  # else it would be dead
                scalars[result] = widen(builder, stored[result], _compute_type_of(result))
        _locate_after(block, last_before, op.location)
    yielded = [stored[v] for v in outputs]
    builder.insert(ew.YieldOp(*yielded))
    _drop_unused(block)
    kernel = ew.KernelOp(inputs, [], [v.type for v in outputs], Region(block))
    kernel.location = group[-1].location  # the consumer's, as MLIR's fusions locate theirs
    return kernel, outputs, constants


def _locate_after(block: Block, last_before: Operation | None, location: LocationAttr) -> None:
    """Give the ops of `block` after `last_before` (all where None) `location`: the scalar ops
    that compute an `ew` op keep its source location (`xfuse-opt --print-debuginfo`)."""
    op = block.first_op if last_before is None else last_before.next_op
    while op is not None:
        op.location = location
        op = op.next_op


def _result_kernel(value: SSAValue) -> ew.KernelOp:
    """A copy kernel for a returned argument, a constant kernel for a returned constant."""
    literal = ew.constant_value(value)
    element = ew.element_type(value.type)
    inputs = [] if literal is not None else [value]
    block = Block(arg_types=[element for _ in inputs])
    builder = Builder(InsertPoint.at_end(block))
    scalar = (
        narrow(builder, emit_constant(builder, literal, ew.compute_type(element)), element)
        if literal is not None
        else block.args[0]
    )
    builder.insert(ew.YieldOp(scalar))
    kernel = ew.KernelOp(inputs, [], [value.type], Region(block))
    kernel.location = ew.location_of(value)
    return kernel


def _copy_reader(value: BlockArgument, order: dict[ew.KernelOp, int]) -> ew.KernelOp | None:
    """The first kernel (`order`: the body's kernels in program order) that reads the returned
    argument `value` over its own shape: it can write the copy too, reading `value` once."""
    shape = ew.shape_of(value)
    readers = [
        use.operation
        for use in value.uses
        if use.operation in order and all(ew.shape_of(r) == shape for r in use.operation.res)
    ]
    return min(readers, key=order.__getitem__, default=None)


def _add_copies(
    kernel: ew.KernelOp, values: Sequence[BlockArgument], terminator: Operation
) -> None:
    """Rebuild `kernel` to also yield its inputs `values` unchanged, as the function's results
    where `terminator` returns them."""
    inputs = list(kernel.inputs)
    yield_op = kernel.yield_op
    block_args = kernel.block.args
    yield_op.operands = (*yield_op.operands, *(block_args[inputs.index(v)] for v in values))
    region = kernel.detach_region(kernel.body)
    types = [*kernel.res.types, *(v.type for v in values)]
    merged = ew.KernelOp(inputs, [], types, region)
    merged.location = kernel.location
    Rewriter.insert_op(merged, InsertPoint.before(kernel))
    # Each result takes the name of the value it replaces (xDSL carries it over): `%x_1`.
    for old, new in zip(kernel.res, merged.res[: len(kernel.res)], strict=True):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(kernel)
    for value, copy in zip(values, merged.res[len(kernel.res) :], strict=True):
        value.replace_uses_with_if(copy, lambda use: use.operation is terminator)


def fuse_function(
    function: func.FuncOp,
    greedy: bool = True,
    max_ops: int = DEFAULT_MAX_OPS,
    recompute: Recompute = "cheap",
    math: CpuMath = "approx",
) -> FusionStats:
    """Rewrite the elementwise ops of `function` into kernels of at most `max_ops` scalar ops each;
    returns what it did."""
    body = function.body.block
    terminator = body.last_op
    assert terminator is not None
    partition = _Partition(
        [op for op in body.ops if op is not terminator and not isinstance(op, ew.ConstantOp)],
        max_ops,
        recompute,
        math,
    )
    if greedy:
        partition.fuse_greedily()
    stats = FusionStats(
        elementwise_ops=sum(partition.is_fusible(i) for i in partition.index.values()),
        groups_searched=partition.searched,
    )
    order: dict[ew.KernelOp, int] = {}  # the kernels built, in program order
    for group in partition.groups_in_order():
        if not isinstance(group[0], FusibleOp):
            group[0].detach()
            body.insert_op_before(group[0], terminator)
            continue
        kernel, outputs, constants = _build_kernel(group)
        if outputs:
            body.insert_op_before(kernel, terminator)
            order[kernel] = len(order)
            for old, new in zip(outputs, kernel.res, strict=True):
                old.replace_all_uses_with(new)
            stats += FusionStats(
                kernels=1,
                fused_ops=len(group) if len(group) > 1 else 0,
                constants_inlined=constants,
            )
        for op in reversed(group):
            Rewriter.erase_op(op)
    copies: dict[ew.KernelOp, list[BlockArgument]] = {}
    for value in dict.fromkeys(terminator.operands):
        reader = _copy_reader(value, order) if greedy and isinstance(value, BlockArgument) else None
        if reader is not None:
            copies.setdefault(reader, []).append(value)
        elif isinstance(value, BlockArgument) or ew.constant_value(value) is not None:
            kernel = _result_kernel(value)
            body.insert_op_before(kernel, terminator)
            # Named after what it returns (xDSL carries the name over): `%x_1`, not `%0`.
            value.replace_uses_with_if(kernel.res[0], lambda use: use.operation is terminator)
            stats += FusionStats(kernels=1, copy_kernels=1)
    for reader, values in copies.items():
        _add_copies(reader, values, terminator)
    for op in list(body.ops):
        if isinstance(op, ew.ConstantOp) and not op.result.uses:
            Rewriter.erase_op(op)
    return stats


def _check_fusible(function: func.FuncOp) -> None:
    """ew-fuse takes one block of `ew` ops on tensors (kernels on tensors are left as they are)."""
    for block in function.body.blocks:
        for op in block.ops:
            on_tensors = not (isinstance(op, ew.KernelOp) and op.is_bufferized)
            fusible = isinstance(op, FusibleOp | ew.ConstantOp | ew.KernelOp) and on_tensors
            returns = isinstance(op, func.ReturnOp) and len(function.body.blocks) == 1
            if not (fusible or returns):
                raise OpFailure(
                    f"ew-fuse: cannot fuse '{ew.op_name(op)}': ew-fuse takes ew ops on tensors in "
                    "one block (run it before ew-bufferize)",
                    op,
                )
    ew.check_tensor_signature(function, "ew-fuse")


@dataclass(frozen=True)
class EwFusePass(ModulePass):
    """Fuse elementwise ops into `ew.kernel` ops: greedily (as few kernels as legal) or one each."""

    name = "ew-fuse"

    mode: FuseMode = "greedy"
    """greedy: maximal legal fusion; none: one kernel per op (the unfused baseline)."""

    max_ops: int = DEFAULT_MAX_OPS
    """The most scalar ops one kernel computes, each `ew` op counted as the ops it becomes after
    `ew-expand-math` (`scalar_size`: `tanh` 15, `add` 1): a longer chain is split into several
    kernels, so that the code LLVM optimizes per loop stays small (its cost grows faster than
    linearly)."""

    recompute: Recompute = "cheap"
    """Whether a group of a smaller shape that calls functions (libm's `sinf`) is absorbed into
    a kernel that calls them again for each of its rows (a `[d]` row's `sin(b)` in a `[t, d]`
    kernel): cheap, never (it gets a kernel of its own; arithmetic, a `[t, 1]` column's calls,
    which LLVM makes once a row, and f16/bf16 values join whatever it costs); all, always (the
    rule before 0.2.26)."""

    math: CpuMath = "approx"
    """The `math` of the `ew-expand-math` that follows (`xfuse-default` gives it its own): which
    ops become libm calls, for `recompute` (all of exp, tanh, ... with libm; f64 ones with
    approx too)."""

    stats: bool = False
    """Print the pass statistics (ops fused, kernels formed) to stderr."""

    def __post_init__(self) -> None:
        check_choice(self, "mode", FuseMode)
        check_choice(self, "recompute", Recompute)
        check_choice(self, "math", CpuMath)
        # (at most a `long`, as mlir-opt's integer options: `max-ops=0x7fffffffffffffffff` was no
        # limit)
        check_option(self, "max_ops", 1 <= self.max_ops < 2**63, "an integer from 1 to 2^63 - 1")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        total = FusionStats()
        for function in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
            if function.body.blocks:
                _check_fusible(function)
                total += fuse_function(
                    function, self.mode == "greedy", self.max_ops, self.recompute, self.math
                )
        if self.stats:
            print(render_statistics([total.report()]), file=sys.stderr)
