"""`ew-workspace`: a function's temporaries become views into one workspace the caller owns.

`ew-bufferize` plans one `memref.alloc` per buffer. Allocating them inside the native function
on every call costs page faults: glibc hands large blocks back to the OS on `free`, so each call
faults them in again. As with XLA's temp buffer, the caller owns the memory instead and reuses it
across calls. Each function with temporaries gets a trailing `%workspace: memref<?xi8>` argument;
each `memref.alloc` becomes a `memref.view` of it at a byte offset, and `memref.dealloc` goes away:

    %t = memref.alloc(%n) : memref<?xf32>   ->   %t = memref.view %workspace[%offset][%n]
                                                     : memref<?xi8> to memref<?xf32>

Buffers lie one after another in allocation order, each taking its bytes rounded up to a
multiple of `alignment` (`ew-bufferize` already gave temporaries with disjoint lifetimes one
buffer where it could). A companion `func.func @<name>_workspace_bytes`, with the function's
arguments minus the workspace, returns the bytes those arguments need: it reads only their
sizes, so the runtime calls it once per shape and allocates (or reuses) a workspace that large.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    i8,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xfuse.dialects.dtypes import element_bytes
from xfuse.dialects.failure import OpFailure, check_one_block
from xfuse.transforms import workspace_size_function
from xfuse.transforms.options import check_option
from xfuse.transforms.pipeline import check_new_symbol

WORKSPACE_TYPE = MemRefType(i8, [DYNAMIC_INDEX])
MIN_ALIGNMENT = 8
"""`ew-workspace`'s smallest `alignment`: the widest element's (f64), which LLVM assumes of every
load and store (at 1 or 2, an f32 temporary after 3 f16 ones started at byte 6)."""
MAX_ALIGNMENT = 4096
"""`ew-workspace`'s largest `alignment`: a page."""
_NO_OVERFLOW = {"overflowFlags": arith.IntegerOverflowAttr("none")}
"""The properties of `arith.addi` and `arith.muli` (as `arith.AddiOp(a, b)` sets them; `create`
copies them into each op)."""


@dataclass
class _Offsets:
    """Emits the index arithmetic that places buffers one after another, appending its ops to
    `ops`: each constant once, and each buffer's rounded bytes once per type and dynamic sizes
    (a function's temporaries are mostly of one type: each then costs one `arith.addi`, not
    eight ops, here and in every pass and LLVM after).

    The rounded bytes of each buffer are added, not the rounding of a sum: `offset` stays a flat
    sum that LLVM's scalar evolution folds to a few terms, where a rounding of a rounding of ... of
    the first buffer is an expression as deep as the buffer's place, and Loop Strength Reduction
    spent time growing with the square of the program on it."""

    alignment: int
    ops: list[Operation] = field(default_factory=list[Operation])
    _constants: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])
    _bytes: dict[tuple[Attribute, tuple[SSAValue, ...]], SSAValue] = field(
        default_factory=dict[tuple[Attribute, tuple[SSAValue, ...]], SSAValue]
    )

    def constant(self, value: int) -> SSAValue:
        if value not in self._constants:
            self.ops.append(constant := arith.ConstantOp(IntegerAttr(value, IndexType())))
            self._constants[value] = constant.result
        return self._constants[value]

    def _emit(
        self, op_type: type[arith.SignlessIntegerBinaryOperation], *operands: SSAValue
    ) -> SSAValue:
        """`op_type(*operands)` on indices (built with `create`: IRDL's builder costs 4x)."""
        overflows = issubclass(op_type, arith.SignlessIntegerBinaryOperationWithOverflow)
        op = op_type.create(
            operands=operands,
            result_types=[IndexType()],
            properties=_NO_OVERFLOW if overflows else {},
        )
        self.ops.append(op)
        return op.results[0]

    def rounded_bytes(self, type_: MemRefType[Attribute], sizes: Sequence[SSAValue]) -> SSAValue:
        """The bytes of a buffer of `type_` (dynamic `sizes`) rounded up to `alignment`."""
        key = (type_, tuple(sizes))
        if key not in self._bytes:
            dynamic = iter(sizes)
            end = self.constant(element_bytes(type_.get_element_type()))
            for size in type_.get_shape():
                dim = next(dynamic) if size == DYNAMIC_INDEX else self.constant(size)
                end = self._emit(arith.MuliOp, end, dim)
            padded = self._emit(arith.AddiOp, end, self.constant(self.alignment - 1))
            self._bytes[key] = self._emit(arith.AndIOp, padded, self.constant(-self.alignment))
        return self._bytes[key]

    def after(
        self, offset: SSAValue, type_: MemRefType[Attribute], sizes: Sequence[SSAValue]
    ) -> SSAValue:
        """Where the buffer after one of `type_` at the aligned `offset` may start."""
        return self._emit(arith.AddiOp, offset, self.rounded_bytes(type_, sizes))


def _memref_type(alloc: memref.AllocOp) -> MemRefType[Attribute]:
    return cast(MemRefType[Attribute], alloc.memref.type)


def _size_function(
    function: func.FuncOp, allocs: Sequence[memref.AllocOp], alignment: int
) -> func.FuncOp:
    """The companion of `function`: the same arguments; returns the workspace bytes they need.

    It copies the ops that the allocs' sizes come from (`memref.dim` of arguments and index
    arithmetic in the entry block) and adds up the aligned buffers.
    """
    needed: set[Operation] = set()
    pending = [size.owner for alloc in allocs for size in alloc.dynamic_sizes]
    while pending:
        owner = pending.pop()
        if not isinstance(owner, Operation) or owner in needed:
            continue
        if not isinstance(owner, memref.DimOp) and not (
            owner.name.startswith("arith.") and not owner.regions
        ):
            raise OpFailure(
                "ew-workspace: a temporary's size must come from argument sizes and index "
                "arithmetic, not from this op",
                owner,
            )
        needed.add(owner)
        pending += [operand.owner for operand in owner.operands]
    entry = function.body.block
    body = Block(arg_types=function.function_type.inputs)
    values: dict[SSAValue, SSAValue] = {}
    for arg, copy in zip(entry.args, body.args, strict=True):
        copy.name_hint = arg.name_hint
        values[arg] = copy
    body.add_ops(op.clone(value_mapper=values) for op in entry.ops if op in needed)
    offsets = _Offsets(alignment)
    total = offsets.constant(0)
    for alloc in allocs:
        sizes = [values[size] for size in alloc.dynamic_sizes]
        total = offsets.after(total, _memref_type(alloc), sizes)
    body.add_ops([*offsets.ops, func.ReturnOp(total)])
    return func.FuncOp(
        workspace_size_function(function.sym_name.data),
        (function.function_type.inputs, [IndexType()]),
        Region(body),
    )


def _place_in_workspace(
    function: func.FuncOp, allocs: Sequence[memref.AllocOp], alignment: int
) -> None:
    """Append the workspace argument; each alloc becomes a view of it, each dealloc nothing."""
    entry = function.body.block
    workspace = entry.insert_arg(WORKSPACE_TYPE, len(entry.args))
    workspace.name_hint = "workspace"
    if function.arg_attrs is not None:  # one per argument, or the printer drops the workspace
        function.arg_attrs = ArrayAttr([*function.arg_attrs.data, DictionaryAttr({})])
    function.update_function_type()
    offsets = _Offsets(alignment)
    previous: memref.ViewOp | None = None
    for alloc in allocs:
        offset = (
            offsets.constant(0)
            if previous is None
            else offsets.after(
                previous.byte_shift,
                cast(MemRefType[Attribute], previous.result.type),
                previous.sizes,
            )
        )
        # `create`, not IRDL's generic builder (which costs 4x the op: 1249 views in the
        # 10^4-op wide DAG); the same operands and result type.
        previous = memref.ViewOp.create(
            operands=[workspace, offset, *alloc.dynamic_sizes], result_types=[_memref_type(alloc)]
        )
        for made in (*offsets.ops, previous):  # at the temporary's kernel, as its alloc was
            made.location = alloc.location
        Rewriter.insert_op(offsets.ops, InsertPoint.before(alloc))
        offsets.ops = []
        Rewriter.replace_op(alloc, previous)
    for dealloc in [op for op in function.walk() if isinstance(op, memref.DeallocOp)]:
        Rewriter.erase_op(dealloc)


def workspace_size_functions(module: ModuleOp) -> set[func.FuncOp]:
    """The companions `EwWorkspacePass` added to `module` (and its nested modules): each
    `@<f>_workspace_bytes` beside a function `@<f>`, taking its arguments but the workspace,
    returning an index."""
    companions: set[func.FuncOp] = set()
    for nested in [m for m in module.walk() if isinstance(m, ModuleOp)]:
        functions = {f.sym_name.data: f for f in nested.ops if isinstance(f, func.FuncOp)}
        for name, function in functions.items():
            companion = functions.get(workspace_size_function(name))
            inputs = list(function.function_type.inputs)
            if companion is not None and (
                inputs[-1:] == [WORKSPACE_TYPE]
                and list(companion.function_type.inputs) == inputs[:-1]
                and list(companion.function_type.outputs) == [IndexType()]
            ):
                companions.add(companion)
    return companions


@dataclass(frozen=True)
class EwWorkspacePass(ModulePass):
    """Temporaries (`memref.alloc`) -> views of a trailing workspace argument, plus a companion
    function `@<name>_workspace_bytes` that sizes it."""

    name = "ew-workspace"

    alignment: int = 64
    """Byte alignment of each temporary in the workspace: a power of two (64 = a cache line)
    from 8, an f64's (`MIN_ALIGNMENT`), to 4096, a page (`MAX_ALIGNMENT`). Offsets are from the
    workspace's start, which the runtime aligns to a cache line: more only pads (and near 2**63
    overflows the index arithmetic)."""

    def __post_init__(self) -> None:
        alignment = self.alignment
        in_range = MIN_ALIGNMENT <= alignment <= MAX_ALIGNMENT
        check_option(
            self,
            "alignment",
            in_range and not alignment & (alignment - 1),
            f"a power of two from {MIN_ALIGNMENT} to {MAX_ALIGNMENT}",
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Each module's functions, nested ones too: their companions go beside them.
        for module in [m for m in op.walk() if isinstance(m, ModuleOp)]:
            self._apply_to_functions_of(module)

    def _apply_to_functions_of(self, op: ModuleOp) -> None:
        for function in list(op.ops):
            if not isinstance(function, func.FuncOp) or not function.body.blocks:
                continue
            allocs = [o for o in function.walk() if isinstance(o, memref.AllocOp)]
            if not allocs:
                continue
            check_one_block(function, "ew-workspace")  # (xDSL's `block` failed, naming none)
            entry = function.body.block
            outside = next((a for a in allocs if a.parent_block() is not entry), None)
            if outside is not None:
                raise OpFailure(
                    f"ew-workspace: a temporary outside the entry block of "
                    f"'{function.sym_name.data}'",
                    outside,
                )
            # A view of the workspace is contiguous: a strided temporary cannot be one.
            laid_out = next((a for a in allocs if _memref_type(a).layout != NoneAttr()), None)
            if laid_out is not None:
                raise OpFailure(
                    f"ew-workspace: a temporary with a layout in '{function.sym_name.data}' (the "
                    "workspace holds contiguous buffers only)",
                    laid_out,
                )
            caller = next(
                (
                    call
                    for caller in op.ops  # (this module's functions: a nested one's calls its own)
                    if isinstance(caller, func.FuncOp)
                    for call in caller.walk()
                    if isinstance(call, func.CallOp)
                    and call.callee.root_reference.data == function.sym_name.data
                ),
                None,
            )
            if caller is not None:  # (the pass adds an argument: the call would lack it)
                raise OpFailure(
                    f"ew-workspace: @{function.sym_name.data} has temporaries and is called "
                    "(its callers have no workspace to pass)",
                    caller,
                )
            check_new_symbol(
                op,
                workspace_size_function(function.sym_name.data),
                self.name,
                f"the function that sizes @{function.sym_name.data}'s workspace",
            )
            size_function = _size_function(function, allocs, self.alignment)
            _place_in_workspace(function, allocs, self.alignment)
            op.body.block.insert_op_after(size_function, function)
