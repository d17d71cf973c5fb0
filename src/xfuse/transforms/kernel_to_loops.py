"""`ew-kernel-to-loops`: bufferized `ew.kernel`s become `scf.for` nests: loads, scalar code, stores.

One loop per run of dimensions of the iteration space (the shape of the kernel's `outs`; runs
below), outermost first, so the innermost loop walks the last run, contiguous, and is the one
LLVM vectorizes. An input of lower rank or with a static 1 where the iteration space is
wider is broadcast: its load uses only its own trailing dimensions, with index 0 where its size
is 1. A load, and what is computed from loads alone, sits in the innermost loop whose index it
uses (before all loops if none): a `[t, 1]` scale is read once per row, a scalar input once per
call. LLVM could not hoist those itself (an output store may alias the load as far as it
knows), and in the vectorized loop an invariant chain of approximations (`pow(s, pow(b, b))`)
made its loop vectorizer take minutes.

    ew.kernel ins(%x, %b : memref<?x?xf32>, memref<?xf32>) outs(%y : memref<?x?xf32>) {...}

becomes

    %xf = memref.collapse_shape %x [[0, 1]] : memref<?x?xf32> into memref<?xf32>
    %yf = memref.collapse_shape %y [[0, 1]] : memref<?x?xf32> into memref<?xf32>
    scf.for %i = %c0 to %d0 step %c1 {
      %row = arith.muli %i, %d1 : index
      scf.for %j = %c0 to %d1 step %c1 {
        %at = arith.addi %row, %j : index
        %xs = memref.load %xf[%at] : memref<?xf32>
        %bs = memref.load %b[%j] : memref<?xf32>
        ... the kernel's region ...
        memref.store %v, %yf[%at] : memref<?xf32>
      }
    }

Arrays of the whole iteration space (`x` and `y` here: contiguous, the output's shape) are read
and written through one-dimensional views at one linear index, so however many a kernel has, LLVM
sees one address computation and one row length: with one per array (each array's own `?`
sizes, which LLVM cannot know are equal), a kernel of dozens of arrays cost its register
allocator and Loop Strength Reduction a quarter to a third more time.

Neighbouring dimensions along which every input is read alike (each either all of it or
broadcast), and those of size 1, are one run, one loop over the product of their sizes
(`coalesced_axes`); an array not read at the linear index is seen with each run's dims as one
(`collapsed_view`: `[t, 1, 1, d]` under `[t, a, b, d]` as `[t, 1, d]`). A kernel whose every
array is contiguous and of the whole iteration space or read once (a scalar, all sizes 1) is
then one loop over all its elements. A nest ran LLVM's vector epilogue, and up to 7 scalar
iterations, at every row: `x * sigmoid(x) * y` on `[16384, 100]` float32 took 0.80 ns an element
as a nest, 0.44 as one loop (as on `[1638400]`); and LLVM's time grew with the nest's depth:
`x * y`, y a `[16]` row under x of 16 dims, compiled in 5.4 s as 16 loops, 0.09 s as 2 (this
Zen 4, 2026-12-07). Where runs are still more than `max-loop-depth` (`MAX_LOOP_DEPTH`; an input read
along every other dim), the outer ones are one loop over their product (`MergedRuns`), and the
indices an array needs of them are that loop's index's quotients and remainders
(`delinearized`), made in each iteration of that loop, before the loops inside.

With `vector-bytes` set (the default pipeline sets 64, AVX-512's width, on every host, for the
kernels of bf16 arrays with `bf16-only`, for all with `xfuse.compile(masked_remainder=True)`), the
innermost loop is split in two: a main loop over the largest multiple of `MAIN_LOOP_VECTORS`
vectors of that width of the kernel's narrowest element type, and a remainder loop over the rest,
which starts at the main loop's bound and is marked `{ew.loop = "remainder"}` (`LOOP_ROLE`:
`xfuse.codegen.native.mark_loops` finds it by that). LLVM then vectorizes the main loop with no
epilogue at all (it proves the trip count a multiple of its vectors) and the remainder as one
masked vector loop, instead of a smaller vector epilogue and up to 7 scalar iterations, each
running the whole scalar polynomial (docs/benchmarks.md). Each element runs the same operations
wherever it falls.

With `store-alignment` set (the default pipeline sets 64, a cache line), a kernel bound by its
loads and stores (`bound_by_memory`) first runs, in a loop of its own marked `{ew.loop =
"head"}`, the elements before its first output's first aligned address (`head_length`, made
once: in a nest, every row's where rows are whole lines, `split_head`), and then the main loop
over the rest, still counting from 0:

    %p = "memref.extract_aligned_pointer_as_index"(%out) : (memref<?xf32>) -> index
    ... %h = min((-%p mod 64) / 4, %n) ...
    scf.for %i = %c0 to %h step %c1 { ... } {ew.loop = "head"}
    %rest = arith.subi %n, %h : index
    scf.for %j = %c0 to %rest step %c1 {
      %i = arith.addi %h, %j : index
      ...
    }

In a function of several kernels, each kernel's loop nest is a function of its own, `func.func
private @<function>.kernel<i>` taking the kernel's distinct memrefs, marked `ew.no_inline` (LLVM
must not inline it), and called where the kernel was. LLVM then optimizes and generates code
kernel by kernel: given one function of all of a program's loops, its register allocator and
Loop Strength Reduction took time growing faster than the program (a wide DAG of 10^4 ops:
minutes), and so compile time grows about linearly in the number of kernels. A call per kernel
per run is all it costs. The function that calls the kernels is not optimized at all
(`optnone`, see `xfuse.codegen.native`): it computes addresses and calls.

Kernels alike in everything LLVM would see of them share one function (numbered in order of
first use), which each of them calls where it was, like MLIR's `duplicate-function-elimination`
but before the loops are built: the same argument types (shapes, layouts, element types), the
same ops one for one with equal attributes and properties (a constant's bits, so 0.0 is not
-0.0; fast-math flags), fed from the same places (xDSL's `is_structurally_equivalent`); which
of a kernel's memrefs are one value (in place) is in its signature. Nearly all kernels of a long
chain are alike (the chain of 10^4 ops: 79 kernels, 3 functions), and each function costs the
passes after this one and LLVM about as much as the next: the program still runs every kernel,
but compiles each distinct one once.

xDSL's own route to loops, `ew-to-linalg,convert-linalg-to-loops,lower-affine`, was measured
against this pass (`benchmarks/linalg_loops.py`, docs/benchmarks.md) and is not used: its LLVM IR
differs for every program (its loops are bounded by an input's size instead of the output's, the
same number from another load; it hoists no load, so a scalar or `[t, 1]` input is loaded again
in every vector iteration; it outlines no kernel), and its three passes took 1.3-3x the CPU time
of this one (GELU 0.8 vs 1.9 ms, the 10^3-op chain 26 vs 44 ms, the wide DAG 71 vs 189 ms).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BFloat16Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from xfuse.dialects import ew
from xfuse.dialects.failure import OpFailure
from xfuse.transforms import HEAD_LOOP, LOOP_ROLE, REMAINDER_LOOP
from xfuse.transforms.expand_math import MATH_FUNCTIONS
from xfuse.transforms.options import check_option
from xfuse.transforms.pipeline import check_new_symbol
from xfuse.transforms.rewriting import locate_unlocated, located_walker
from xfuse.transforms.to_llvm import NO_INLINE


def input_indices(
    input_shape: Sequence[int], induction_vars: Sequence[SSAValue], zero: SSAValue
) -> list[SSAValue]:
    """The indices an input of `input_shape` is read at, right-aligned to the iteration space."""
    offset = len(induction_vars) - len(input_shape)
    return [
        zero if size == 1 else induction_vars[offset + axis]
        for axis, size in enumerate(input_shape)
    ]


def flattens(source: SSAValue, iteration_shape: Sequence[int]) -> bool:
    """Whether `source` is read and written through its one-dimensional view at the kernel's
    linear index: a contiguous memref of the whole (at least 2-D) iteration space, no dim 1."""
    type_ = cast(MemRefType[Attribute], source.type)
    shape = type_.get_shape()
    return (
        len(shape) >= 2
        and shape == tuple(iteration_shape)
        and 1 not in shape
        and isinstance(type_.layout, NoneAttr)
    )


def flat_view(source: SSAValue) -> memref.CollapseShapeOp:
    """`source`, a contiguous memref, as one dimension of all its elements."""
    result_type, properties = _flattened(cast(MemRefType[Attribute], source.type))
    return memref.CollapseShapeOp.create(
        operands=[source], result_types=[result_type], properties=properties
    )


@functools.cache
def _flattened(type_: MemRefType[Attribute]) -> tuple[MemRefType[Attribute], dict[str, Attribute]]:
    """The type and properties of `flat_view` of a memref of `type_`, built once per type (a
    kernel of the wide DAG of 10^4 ops flattens ~50 arrays of one type)."""
    shape = type_.get_shape()
    size = DYNAMIC_INDEX if DYNAMIC_INDEX in shape else math.prod(shape)
    all_axes = ArrayAttr([ArrayAttr([IntegerAttr(axis, i64) for axis in range(len(shape))])])
    return MemRefType(type_.get_element_type(), [size]), {"reassociation": all_axes}


def coalesced_axes(kernel: ew.KernelOp) -> list[list[int]]:
    """The iteration space's axes in runs that each run as one loop: neighbouring axes along
    which every input is read alike (each either all of it or broadcast: size 1 or absent),
    and axes of size 1, which join either. Each array not read once (a scalar, all sizes 1)
    must be contiguous, to be seen with a run's dims as one (`collapsed_view`); where one is
    not, each axis is a loop of its own. A nest of one loop per axis compiled in time growing
    with the rank (`x * y` with y a `[d]` row under 16-dim x: 5.4 s, two loops 0.09 s)."""
    shape = ew.shape_of(kernel.outputs[0])
    rank = len(shape)
    arrays = [*kernel.inputs, *kernel.outputs]
    if not all(
        isinstance(cast(MemRefType[Attribute], array.type).layout, NoneAttr)
        or _load_depth(ew.shape_of(array), rank) == 0
        for array in arrays
    ):
        return [[axis] for axis in range(rank)]

    offsets = [rank - len(ew.shape_of(source)) for source in kernel.inputs]

    def read_along(axis: int) -> tuple[bool, ...]:
        """Which inputs are read along `axis` (those broadcast along it are not)."""
        return tuple(
            axis >= offset and ew.shape_of(source)[axis - offset] != 1
            for source, offset in zip(kernel.inputs, offsets, strict=True)
        )

    runs: list[list[int]] = []
    run_reads: tuple[bool, ...] | None = None  # None: only axes of size 1 in the run so far
    for axis, size in enumerate(shape):
        reads = None if size == 1 else read_along(axis)
        if runs and (reads is None or run_reads is None or reads == run_reads):
            runs[-1].append(axis)
            run_reads = run_reads if reads is None else reads
        else:
            runs.append([axis])
            run_reads = reads
    return runs


def collapsed_view(
    source: SSAValue, runs: Sequence[Sequence[int]], rank: int
) -> memref.CollapseShapeOp | None:
    """`source` (right-aligned to an iteration space of `rank` dims) with the dims of each of
    `runs` it has seen as one (`coalesced_axes`); None where each run holds at most one of them
    or it is read once."""
    shape = ew.shape_of(source)
    groups = _run_groups(len(shape), runs, rank)
    if all(len(group) == 1 for group in groups) or _load_depth(shape, rank) == 0:
        return None
    type_ = cast(MemRefType[Attribute], source.type)
    reassociation = ArrayAttr(
        [ArrayAttr([IntegerAttr(axis, i64) for axis in group]) for group in groups]
    )
    return memref.CollapseShapeOp.create(
        operands=[source],
        result_types=[MemRefType(type_.get_element_type(), _group_sizes(shape, groups))],
        properties={"reassociation": reassociation},
    )


def collapsed_shape(
    shape: Sequence[int], runs: Sequence[Sequence[int]], rank: int
) -> tuple[int, ...]:
    """`shape` (right-aligned to an iteration space of `rank` dims) with the dims of each of
    `runs` it has as one, as `collapsed_view` sees an array of it."""
    return _group_sizes(shape, _run_groups(len(shape), runs, rank))


def _run_groups(array_rank: int, runs: Sequence[Sequence[int]], rank: int) -> list[list[int]]:
    """The dims of each of `runs` that an array of `array_rank` dims, right-aligned to an
    iteration space of `rank` dims, has (the runs it has none of left out)."""
    offset = rank - array_rank
    groups = [[axis - offset for axis in run if axis >= offset] for run in runs]
    return [group for group in groups if group]


def _group_sizes(shape: Sequence[int], groups: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Each group of dims' size: their product, dynamic where one of them is."""
    return tuple(
        DYNAMIC_INDEX
        if any(shape[axis] == DYNAMIC_INDEX for axis in group)
        else math.prod(shape[axis] for axis in group)
        for group in groups
    )


def read_runs(read_shapes: Iterable[Sequence[int]], runs: int) -> set[int]:
    """The runs (of `runs`, outermost 0) that an array of one of `read_shapes` (in runs,
    right-aligned) reads: those where its size is not 1."""
    return {
        runs - len(shape) + run
        for shape in read_shapes
        for run, size in enumerate(shape)
        if size != 1
    }


MAX_LOOP_DEPTH = 8
"""`max-loop-depth`'s default, the deepest loop nest a kernel is: the outer runs of dims beyond
(`coalesced_axes`) are one loop over their product, each run's index from its index (a division
and a remainder a run, in each iteration of that loop, before the loops inside). LLVM's time
grows with a nest's depth: `x * y`, y read along every other dim of x, compiled in 0.11 s at 4
dims, 0.36 s at 8, 4.4 s at 16; but where the inner nest is short, the merged loop's index
arithmetic costs: x of shape `(2,) * 20` ran in 1.35 ms as 20 loops, 1.64 ms with 8 the most
(0.35 s to compile, not 6.2), 2.34 with 6, 4.77 with 4; (16, 16, 16, 16, 16, 4, 4) 11.5 ms with
6 or more, 14.0 with 4 (Zen 4, 2026-12-07)."""


def index_constant(builder: Builder, value: int) -> SSAValue:
    """An `index` constant of `value`, inserted by `builder`."""
    return builder.insert(arith.ConstantOp.from_int_and_width(value, IndexType())).result


def multiplied(builder: Builder, factors: Sequence[SSAValue]) -> SSAValue:
    """The product of `factors` (one or more), left to right."""
    product = factors[0]
    for factor in factors[1:]:
        product = builder.insert(arith.MuliOp(product, factor)).result
    return product


def size_product(
    builder: Builder, sizes: Sequence[SSAValue | int], type_: IntegerType | IndexType
) -> SSAValue:
    """The product of `sizes` of `type_`, each a value or a known int: the values times the
    product of the known ones (left out where it is 1, and the only factor where no value is)."""
    known = math.prod(size for size in sizes if isinstance(size, int))
    values = [size for size in sizes if not isinstance(size, int)]
    if known != 1 or not values:
        values.append(builder.insert(arith.ConstantOp.from_int_and_width(known, type_)).result)
    return multiplied(builder, values)


def run_size(builder: Builder, iteration: SSAValue, run: Sequence[int]) -> SSAValue:
    """The number of elements of `run`, dims of `iteration` (`size_product` of its sizes)."""
    shape = ew.shape_of(iteration)
    sizes = [
        builder.insert(memref.DimOp(iteration, index_constant(builder, axis))).result
        if shape[axis] == DYNAMIC_INDEX
        else shape[axis]
        for axis in run
    ]
    return size_product(builder, sizes, IndexType())


@dataclass(frozen=True)
class MergedRuns:
    """How a nest of one loop per run fits in `max-loop-depth` loops: its first `count` runs are
    one loop over their product (fewer than 2: a loop per run, as they are)."""

    count: int

    @staticmethod
    def beyond(runs: int, max_loop_depth: int) -> MergedRuns:
        """The outer runs of `runs` that do not fit in `max_loop_depth` loops, and the one more
        whose loop walks them."""
        return MergedRuns(max(0, runs - max_loop_depth + 1))

    def loop_bounds(self, builder: Builder, run_sizes: Sequence[SSAValue]) -> list[SSAValue]:
        """Each loop's trip count, outermost first."""
        if self.count < 2:
            return list(run_sizes)
        return [multiplied(builder, run_sizes[: self.count]), *run_sizes[self.count :]]

    def loop_depth(self, run_depth: int) -> int:
        """The loop depth of what the runs up to `run_depth` index (0: before all loops)."""
        if self.count < 2:
            return run_depth
        return max(min(run_depth, 1), run_depth - self.count + 1)

    def run_indices(
        self,
        builder: Builder,
        induction_vars: Sequence[SSAValue],
        run_sizes: Sequence[SSAValue],
        read_shapes: Iterable[Sequence[int]],
        zero: SSAValue,
    ) -> list[SSAValue]:
        """Each run's index: a merged run's, where an array of `read_shapes` (in runs,
        right-aligned) reads it, divided out of the first loop's index by `builder` (in that
        loop, before the loops inside), else 0 (no array reads it)."""
        if self.count < 2:
            return list(induction_vars)
        wanted = {run for run in read_runs(read_shapes, len(run_sizes)) if run < self.count}
        outer = delinearized(builder, induction_vars[0], run_sizes[: self.count], wanted)
        return [*(outer.get(run, zero) for run in range(self.count)), *induction_vars[1:]]


def delinearized(
    builder: Builder, linear: SSAValue, sizes: Sequence[SSAValue], wanted: set[int]
) -> dict[int, SSAValue]:
    """The indices at positions `wanted` of the element at `linear` in a row-major space of
    `sizes`: the last position's the remainder by its size, each before it that of the
    quotient, the first the quotient itself."""
    indices: dict[int, SSAValue] = {}
    if not wanted:
        return indices
    lowest = min(wanted)
    rest = linear
    for position in reversed(range(lowest + 1, len(sizes))):
        if position in wanted:
            indices[position] = builder.insert(arith.RemUIOp(rest, sizes[position])).result
        rest = builder.insert(arith.DivUIOp(rest, sizes[position])).result
    indices[lowest] = (
        rest if lowest == 0 else builder.insert(arith.RemUIOp(rest, sizes[lowest])).result
    )
    return indices


def _load_depth(input_shape: Sequence[int], rank: int) -> int:
    """The depth of the innermost loop whose index a load of `input_shape` uses (see above)."""
    offset = rank - len(input_shape)
    return max((offset + axis + 1 for axis, size in enumerate(input_shape) if size != 1), default=0)


def _loop_depths(kernel: ew.KernelOp, load_depths: Sequence[int], runs: int) -> dict[SSAValue, int]:
    """The run depth each scalar of the region is computed at, in a nest of `runs` runs where
    each input is loaded at its `load_depths`: that of the innermost run whose index it depends
    on (0: before all loops; `MergedRuns.loop_depth` gives the loop). A constant goes to its
    outermost user's depth, so a region with nothing to hoist keeps its order."""
    depth: dict[SSAValue, int] = dict(zip(kernel.block.args, load_depths, strict=True))
    body = list(kernel.block.ops)[:-1]
    for op in body:
        depth[op.results[0]] = max((depth.get(v, 0) for v in op.operands), default=0)
    for op in body:
        if not op.operands:
            users = [use.operation for use in op.results[0].uses]
            depth[op.results[0]] = min(
                (depth[user.results[0]] if user.results else runs for user in users),
                default=runs,
            )
    return depth


def kernel_function_name(function: str, index: int) -> str:
    """The symbol of the function that runs the `index`-th distinct kernel of `function`."""
    return f"{function}.kernel{index}"


def distinct_operands(kernel: ew.KernelOp) -> list[SSAValue]:
    """The memrefs `kernel` takes, each once, in order of first use: its function's arguments."""
    return list(dict.fromkeys(kernel.operands))


def outline_kernel(kernel: ew.KernelOp, name: str) -> func.FuncOp:
    """Move `kernel` into a new private `ew.no_inline` function `name` that takes its distinct
    memrefs, and call that where the kernel was."""
    memrefs = distinct_operands(kernel)
    body = Block(arg_types=[memref.type for memref in memrefs])
    for memref_value, arg in zip(memrefs, body.args, strict=True):
        arg.name_hint = memref_value.name_hint
        arg.location = kernel.location
    call = func.CallOp(name, memrefs, [])
    Rewriter.insert_op(call, InsertPoint.before(kernel))
    kernel.detach()
    kernel.operands = [body.args[memrefs.index(operand)] for operand in kernel.operands]
    returned = func.ReturnOp()
    body.add_ops([kernel, returned])
    function = func.FuncOp(name, (body.arg_types, []), Region(body), visibility="private")
    function.attributes[NO_INLINE] = UnitAttr()
    for made in (call, returned, function):  # at the kernel's place, as its loops
        made.location = kernel.location
    return function


def _kernel_key(kernel: ew.KernelOp) -> Hashable:
    """Everything LLVM would see of `kernel`, hashable: kernels of equal keys are alike, with
    what one reads standing for what the other reads. The types of its distinct memrefs (the
    outlined function's signature) and which of them each operand is (a kernel reading and
    writing one memref differs from one reading one and writing another); its attributes,
    properties and result types; its block's argument types; and each op one for one: its name,
    attributes, properties (a constant's bits: 0.0 is not -0.0; fast-math flags), result types
    (a rounding to f16 is not one to bf16, which xDSL's `is_structurally_equivalent` does not
    compare) and operands, each the position of the block argument or earlier result it is. A
    kernel with an op with regions (xfuse makes none) is alike no other: kept, it is correct.
    No op has successors: only a terminator may, and a kernel's is `ew.yield`."""
    block = kernel.block
    if any(op.regions for op in block.ops):
        return kernel
    memrefs: dict[SSAValue, int] = {}
    pattern = tuple(memrefs.setdefault(operand, len(memrefs)) for operand in kernel.operands)
    # By id: SSAValue's own hash is a Python call, and values are equal only if identical.
    positions = {id(arg): index for index, arg in enumerate(block.args)}
    ops: list[Hashable] = []
    for op in block.ops:
        operands = tuple(positions.get(id(value), value) for value in op.operands)
        ops.append(
            (
                op.name,
                tuple(sorted(op.attributes.items())),
                tuple(sorted(op.properties.items())),
                tuple(result.type for result in op.results),
                operands,
            )
        )
        positions.update((id(result), len(positions)) for result in op.results)
    return (
        tuple(memref.type for memref in memrefs),
        pattern,
        tuple(sorted(kernel.attributes.items())),
        tuple(sorted(kernel.properties.items())),
        tuple(kernel.result_types),
        tuple(block.arg_types),
        tuple(ops),
    )


@dataclass
class AlikeKernels:
    """The kernels of one function outlined so far, by `_kernel_key`: finding the alike kernels
    among k costs about as much as reading them once (one hash of each), not k^2 comparisons."""

    kept: dict[Hashable, ew.KernelOp] = field(default_factory=dict[Hashable, ew.KernelOp])

    def twin_or_keep(self, kernel: ew.KernelOp) -> func.FuncOp | None:
        """The function of an outlined kernel alike `kernel` in everything LLVM would see of
        it (see `_kernel_key`). None if there is none, and then `kernel` is kept: outline it
        next."""
        kept = self.kept.setdefault(_kernel_key(kernel), kernel)
        return None if kept is kernel else cast(func.FuncOp, kept.parent_op())


MAX_VECTOR_BYTES = 64
"""`ew-kernel-to-loops`'s largest `vector-bytes`: AVX-512's, the widest vector of any host xfuse
compiles for (a wider one would only make the main loop's block, and its mask, absurd)."""

MAX_STORE_ALIGNMENT = 64
"""`ew-kernel-to-loops`'s largest `store-alignment`: a cache line, what a store must not cross."""

MAIN_LOOP_VECTORS = 4
"""Vectors one iteration of the vectorized main loop computes: LLVM's interleave count on x86
(`xfuse.codegen.native.LONG_BODY_INTERLEAVE` for long bodies, LLVM's own choice, also 4, for
short ones)."""


HEAD_MIN_ROW_BYTES = MAIN_LOOP_VECTORS * MAX_VECTOR_BYTES
"""The shortest row of a nest that gets a head: one block of the main loop (256 bytes). A bias
add `x + b` on [t, d] float32 16 bytes past a line, with the head against without: d = 64
(256 bytes) 0.88x the time, 128 0.86x, 256 0.81x, 4096 0.68-0.81x; d = 16 (64 bytes, a head of
12 and a main loop of 4) 1.00x, and as 1.9x when each row computed its own head (Intel Xeon,
2026-12-05, docs/benchmarks.md)."""


def main_loop_block(kernel: ew.KernelOp, vector_bytes: int) -> int:
    """The elements one main-loop iteration computes: `MAIN_LOOP_VECTORS` vectors of
    `vector_bytes` of the kernel's narrowest element type (a power of two; 0 where they hold
    no whole element, f64 in 1-byte vectors)."""
    narrowest = min(
        max(1, operand.type.element_type.bitwidth // 8)
        for operand in kernel.operands
        if isinstance(operand.type, MemRefType)
    )
    return MAIN_LOOP_VECTORS * vector_bytes // narrowest


def has_bf16(kernel: ew.KernelOp) -> bool:
    """Whether `kernel` reads or writes a bf16 array."""
    return any(
        isinstance(operand.type, MemRefType) and isinstance(operand.type.element_type, BFloat16Type)
        for operand in kernel.operands
    )


def split_remainder(loop: scf.ForOp, block: int) -> None:
    """Run `loop` (from 0, step 1) to the largest multiple of `block` (a power of two) below its
    bound, and a copy of it, the `REMAINDER_LOOP`, from there to the bound."""
    builder = Builder(InsertPoint.before(loop))
    mask = index_constant(builder, -block)
    main_bound = builder.insert(arith.AndIOp(loop.ub, mask)).result
    remainder = loop.clone()
    remainder.attributes[LOOP_ROLE] = StringAttr(REMAINDER_LOOP)
    Rewriter.insert_op(remainder, InsertPoint.after(loop))
    loop.operands = [loop.lb, main_bound, loop.step]
    remainder.operands = [main_bound, remainder.ub, remainder.step]


def head_length(
    builder: Builder, output: SSAValue, row_length: SSAValue, rows: bool, alignment: int
) -> SSAValue:
    """The elements of each row of `output` (a contiguous memref) before its first address that
    is a multiple of `alignment` bytes (a power of two), at most the row's `row_length`: made
    once, before the loops. In a nest (`rows`) every row starts as far before such an address
    only where a row is whole multiples of it (an LLM's rows are: 4096, 14336 float32); where
    not, or where a row is shorter than `HEAD_MIN_ROW_BYTES`, 0 (no head)."""

    index = functools.partial(index_constant, builder)
    element = cast(MemRefType[Attribute], output.type).element_type
    shift = max(1, element.bitwidth // 8).bit_length() - 1  # ew's element types: 1 to 8 bytes
    address = builder.insert(memref.ExtractAlignedPointerAsIndexOp.get(output)).aligned_pointer
    # The bytes up to the next multiple of `alignment`: (-address) mod alignment.
    negated = builder.insert(arith.SubiOp(index(0), address)).result
    gap = builder.insert(arith.AndIOp(negated, index(alignment - 1))).result
    elements = builder.insert(arith.ShRUIOp(gap, index(shift))).result
    if rows:
        row_bytes = builder.insert(arith.ShLIOp(row_length, index(shift))).result
        partial = builder.insert(arith.AndIOp(row_bytes, index(alignment - 1))).result
        whole = builder.insert(arith.CmpiOp(partial, index(0), "eq")).result
        long = builder.insert(arith.CmpiOp(row_bytes, index(HEAD_MIN_ROW_BYTES), "uge")).result
        both = builder.insert(arith.AndIOp(whole, long)).result
        elements = builder.insert(arith.SelectOp(both, elements, index(0))).result
    fewer = builder.insert(arith.CmpiOp(elements, row_length, "ult")).result
    return builder.insert(arith.SelectOp(fewer, elements, row_length)).result


def split_head(loop: scf.ForOp, length: SSAValue) -> None:
    """Before `loop` (from 0, step 1), run a copy of it, the `HEAD_LOOP`, over its first
    `length` elements (`head_length`), and shift `loop` to start there: it still counts from 0
    (to its bound less `length`), its index plus `length` the element, so `split_remainder`
    splits it as a loop from 0. (Its trip count is then whole blocks, but LLVM no longer proves
    it and keeps a scalar epilogue that never runs: only with `masked_remainder` in f32.)"""
    head = loop.clone()
    head.attributes[LOOP_ROLE] = StringAttr(HEAD_LOOP)
    Rewriter.insert_op(head, InsertPoint.before(loop))
    head.operands = [head.lb, length, head.step]
    rest = arith.SubiOp(loop.ub, length)
    Rewriter.insert_op(rest, InsertPoint.before(loop))
    loop.operands = [loop.lb, rest.result, loop.step]
    counter = loop.body.block.args[0]
    element_index = arith.AddiOp(length, counter)
    Rewriter.insert_op(element_index, InsertPoint.at_start(loop.body.block))
    counter.replace_all_uses_with(element_index.result)
    element_index.operands = [length, counter]  # (its own use was replaced too)


def bound_by_memory(kernel: ew.KernelOp) -> bool:
    """Whether `kernel`'s loop is bound by its loads and stores rather than by its arithmetic:
    its arrays are of 4- or 8-byte elements (a kernel of f16 or bf16 arrays is bound by its
    conversions: bf16 `x * y` ran as fast with its stores aligned), no op of its region is a
    function `ew-expand-math` approximates or calls (`MATH_FUNCTIONS`), and it has at most
    `MEMORY_BOUND_OPS` ops per array it reads or writes, `HEAD_MAX_OPS` in all."""
    if any(
        isinstance(operand.type, MemRefType) and operand.type.element_type.bitwidth < 32
        for operand in kernel.operands
    ):
        return False
    ops = [op for op in kernel.block.ops if not isinstance(op, arith.ConstantOp | ew.YieldOp)]
    return not any(type(op) in MATH_FUNCTIONS for op in ops) and len(ops) <= min(
        MEMORY_BOUND_OPS * len(distinct_operands(kernel)), HEAD_MAX_OPS
    )


MEMORY_BOUND_OPS = 4
"""The most arithmetic ops per array a loop `bound_by_memory` has: on numpy's large arrays (16
bytes past a line), a chain of k ops on one float32 input at 2^12 (1 array read, 1 written)
took with the head 0.49x the time without at k = 1, 0.54x at 2, 0.76x at 4, 0.86-0.95x at 6
and 8, 1.00-1.03x at 12 and 16: past ~4 ops per array the arithmetic, not the split stores,
sets the pace (Intel Xeon, 2026-12-05, docs/benchmarks.md)."""

HEAD_MAX_OPS = 16
"""The most ops of a kernel with a head: a head is a second copy of the loop for LLVM to compile,
and the fused wide DAG of 999 ops of `benchmarks/compile_scaling.py` (kernels of ~125 ops over
many arrays, where the per-array rule alone gave every kernel a head) took 0.53 -> 0.88 CPU s."""


@dataclass
class KernelToLoops(RewritePattern):
    vector_bytes: int = 0
    """The target's vector width in bytes; 0: no remainder loop of its own."""
    bf16_only: bool = False
    """A remainder loop of its own only in kernels with a bf16 array (`has_bf16`)."""
    store_alignment: int = 0
    """Bytes the first output's stores are aligned to by a head loop (`split_head`); 0: none."""
    max_loop_depth: int = MAX_LOOP_DEPTH
    """The deepest nest: the outer runs beyond are one loop (`delinearized`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.KernelOp, rewriter: PatternRewriter) -> None:
        aligns_stores = self.store_alignment and bound_by_memory(op)  # before its ops move
        builder = Builder(InsertPoint.before(op))
        zero = index_constant(builder, 0)
        one = index_constant(builder, 1)
        iteration = op.outputs[0]
        iteration_shape = ew.shape_of(iteration)

        runs = coalesced_axes(op)
        # Arrays read at one linear index (`flattens`) are viewed flat, below; the others with
        # each run's dims as one.
        views: dict[SSAValue, SSAValue] = {}
        for array in (*op.inputs, *op.outputs):
            if array not in views and not flattens(array, iteration_shape):
                view = collapsed_view(array, runs, len(iteration_shape))
                views[array] = array if view is None else builder.insert(view).result
        run_sizes = [run_size(builder, iteration, run) for run in runs]
        merged = MergedRuns.beyond(len(runs), self.max_loop_depth)
        upper_bounds = merged.loop_bounds(builder, run_sizes)
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
        load_depths = [
            len(runs) if source not in views else _load_depth(ew.shape_of(views[source]), len(runs))
            for source in op.inputs
        ]
        depth = {
            value: merged.loop_depth(run_depth)
            for value, run_depth in _loop_depths(op, load_depths, len(runs)).items()
        }
        first_body = levels[min(1, len(upper_bounds))]  # (where the first loop's ops go)
        read_shapes = {ew.shape_of(view) for view in views.values()}  # (not at the linear index)
        run_indices = merged.run_indices(first_body, induction_vars, run_sizes, read_shapes, zero)
        flat: dict[SSAValue, SSAValue] = {}
        linear: list[SSAValue] = []

        def flat_access(source: SSAValue) -> tuple[SSAValue, list[SSAValue]]:
            """The one-dimensional view of `source` (`flattens`) and the linear index its
            element is at: arrays of the whole iteration space share one (so LLVM sees one
            address computation and one set of sizes for all of them, not one per array)."""
            if source not in flat:
                flat[source] = levels[0].insert(flat_view(source)).result
            if not linear:  # ((i0 * n1 + i1) * n2 + i2) ..., each product in the loop outside
                index = induction_vars[0]
                for depth in range(2, len(induction_vars) + 1):
                    row = levels[depth - 1].insert(arith.MuliOp(index, upper_bounds[depth - 1]))
                    added = arith.AddiOp(row, induction_vars[depth - 1])
                    index = levels[depth].insert(added).result
                linear.append(index)
            return flat[source], linear

        for arg, source in zip(op.block.args, op.inputs, strict=True):
            if source in views:
                source = views[source]
                indices = input_indices(ew.shape_of(source), run_indices, zero)
            else:
                source, indices = flat_access(source)
            element = cast(MemRefType[Attribute], source.type).element_type
            # `create`, not IRDL's generic builder (4x the cost), for each array access
            load = memref.LoadOp.create(operands=[source, *indices], result_types=[element])
            levels[depth[arg]].insert(load)
            arg.replace_all_uses_with(load.res)
        yielded = op.yield_op.values
        for scalar_op in list(op.block.ops)[:-1]:
            scalar_op.detach()
            levels[depth[scalar_op.results[0]]].insert(scalar_op)
        for value, destination in zip(yielded, op.outputs, strict=True):
            if destination in views:
                target = views[destination]
                indices = input_indices(ew.shape_of(target), run_indices, zero)
            else:
                target, indices = flat_access(destination)
            levels[-1].insert(memref.StoreOp.create(operands=[value, target, *indices]))
        innermost = induction_vars[-1].owner.parent_op() if induction_vars else None
        assert innermost is None or isinstance(innermost, scf.ForOp)
        first_output = cast(MemRefType[Attribute], op.outputs[0].type)
        if innermost and aligns_stores and isinstance(first_output.layout, NoneAttr):
            rows = len(upper_bounds) > 1
            length = head_length(
                levels[0], op.outputs[0], upper_bounds[-1], rows, self.store_alignment
            )
            split_head(innermost, length)
        block = main_loop_block(op, self.vector_bytes)
        # A block of one element leaves no remainder (and one of none had an empty main loop).
        if innermost and block > 1 and (not self.bf16_only or has_bf16(op)):
            split_remainder(innermost, block)
        _locate_lowering(cast(Operation, zero.owner), op)
        rewriter.erase(op, safe_erase=False)


def _locate_lowering(first: Operation, kernel: ew.KernelOp) -> None:
    """Give the ops lowering `kernel` (`first` up to it, and their loops' bodies) that have no
    location the kernel's, as MLIR's lowerings locate theirs: `--print-debuginfo` printed the
    loops `loc(unknown)`, and an error at one (`ew-cost` on loops) had no line."""
    lowered: Operation | None = first
    while lowered is not None and lowered is not kernel:
        locate_unlocated(lowered, kernel.location)
        lowered = lowered.next_op


@dataclass(frozen=True)
class EwKernelToLoopsPass(ModulePass):
    """Lower every bufferized `ew.kernel` to an `scf.for` nest with `memref.load`/`memref.store`;
    in a function of several kernels, in an `ew.no_inline` function that the kernel's place calls,
    one per distinct kernel (alike kernels share one)."""

    name = "ew-kernel-to-loops"

    vector_bytes: int = 0
    """The target's vector width in bytes, a power of two up to 64 (AVX-512's,
    `MAX_VECTOR_BYTES`): split each innermost loop into a main loop and a remainder loop (see the
    module's docstring); 0 keeps one loop."""

    bf16_only: bool = False
    """With `vector_bytes`, split only the loops of kernels that read or write a bf16 array:
    there LLVM's own epilogue is scalar (a loop that rounds to bf16 in hardware is vectorized
    at the width `xfuse.codegen.native.mark_loops` sets, which leaves it no vector epilogue),
    and each of up to 127 last elements ran the whole polynomial alone (bf16 SwiGLU: 787 ns for
    127 elements, 126 with the masked remainder; Intel Xeon, 2026-12-04). A loop nest of other
    arrays keeps LLVM's vector epilogue at every row: split too, `x * sigmoid(x) * y` on
    [16384, 100] float32 took 0.42 ns an element instead of 0.71, but GELU + bias + residual's
    nest compiled in 115 ms instead of 61 (docs/benchmarks.md)."""

    store_alignment: int = 0
    """Bytes, a power of two up to 64 (a cache line): in a kernel bound by its loads and stores
    (`bound_by_memory`) whose first output is contiguous, the innermost loop first runs the
    elements before that output's first address that is a multiple of it (in a nest whose rows
    are whole multiples of it and `HEAD_MIN_ROW_BYTES` or more, as many in every row) in a loop
    of its own, the head (`split_head`: one masked vector iteration with AVX-512, two with
    AVX2, see `xfuse.codegen.native.mark_loops`), so that the main loop's vector stores never
    straddle two cache lines (numpy's large arrays start 16 bytes into a page: then every
    AVX-512 store and every other AVX2 one did, and `x + r` took 1.8-1.9x as long at 2^12
    float32, 1.1-1.3x at 2^16; docs/benchmarks.md); 0: no head."""

    max_loop_depth: int = MAX_LOOP_DEPTH
    """The most loops a kernel's nest is, 1 to 2^63 - 1: the outer runs of dims beyond (each run a
    loop: `coalesced_axes`) are one loop over their product, each run's index an array reads
    divided out of its index (`delinearized`). LLVM's time grows with a nest's depth, and a
    merged loop costs index arithmetic where the loops inside are short (`MAX_LOOP_DEPTH`)."""

    def __post_init__(self) -> None:
        check_option(  # (an mlir-opt integer option is a long, as ew-fuse's max-ops)
            self,
            "max_loop_depth",
            1 <= self.max_loop_depth < 2**63,
            "an integer from 1 to 2^63 - 1",
        )
        for option, largest in (
            ("vector_bytes", MAX_VECTOR_BYTES),
            ("store_alignment", MAX_STORE_ALIGNMENT),
        ):
            size = getattr(self, option)
            power_of_two_or_0 = 0 <= size <= largest and not size & (size - 1)
            check_option(self, option, power_of_two_or_0, f"0 or a power of two up to {largest}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in list(op.ops):
            if not isinstance(function, func.FuncOp):
                continue
            kernels = [k for k in function.walk() if isinstance(k, ew.KernelOp)]
            for kernel in kernels:
                if not kernel.is_bufferized:
                    raise OpFailure(
                        "ew-kernel-to-loops: 'ew.kernel' must be bufferized first (run "
                        "ew-bufferize)",
                        kernel,
                    )
            if len(kernels) < 2:
                continue  # LLVM sees one kernel either way (and its streaming twin stays whole)
            place = function
            alike = AlikeKernels()
            distinct = 0
            for kernel in kernels:
                twin = alike.twin_or_keep(kernel)
                if twin is not None:
                    call = func.CallOp(twin.sym_name.data, distinct_operands(kernel), [])
                    call.location = kernel.location
                    Rewriter.replace_op(kernel, call)
                    continue
                name = kernel_function_name(function.sym_name.data, distinct)
                check_new_symbol(op, name, self.name, f"a kernel of @{function.sym_name.data}")
                outlined = outline_kernel(kernel, name)
                op.body.block.insert_op_after(outlined, place)
                place = outlined
                distinct += 1
        located_walker(
            KernelToLoops(
                self.vector_bytes, self.bf16_only, self.store_alignment, self.max_loop_depth
            ),
            apply_recursively=False,
        ).rewrite_module(op)
