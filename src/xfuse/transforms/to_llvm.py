"""`ew-to-llvm`: `func`/`scf`/`cf`/`arith`/`math`/`memref` -> xDSL's `llvm` dialect.

xDSL has no conversion of these dialects to `llvm` (its JIT shells out to `mlir-opt`), so this is
ours. `scf` goes to `cf` with xDSL's own `convert-scf-to-cf`; the rest is one pattern per op.

Calling convention (the runtime relies on it): every memref argument becomes an `!llvm.ptr` to its
first element followed by one `i64` per dynamic (`?`) dimension of its type; arrays are
C-contiguous, except that a `strided<[s0, s1, ...], offset: o>` layout with static strides and
offset is honoured (`x[i, j]` is element `o + i * s0 + j * s1` from the pointer). Layouts the
descriptor cannot express (`?` strides or offset, other affine maps) are rejected, as are memref
results (results come back through output arguments); a `func.call` passes memrefs the same
way. No alignment is promised beyond the element's (numpy buffers are often only 16-byte
aligned). Element types: `index` -> i64; bf16 is stored as i16; f16, f32, f64 are LLVM's own.
Conversions to and from f16 and bf16 are integer code (`narrow_bits`, `widen_bits`): exact, one
rounding to nearest even (f64 -> f16 and f64 -> bf16 too), NaNs quieted with their sign and
payload kept (by the + - * / that a widening feeds, where those are all its users and LLVM
cannot fold their other operands to constants). LLVM's
`fptrunc`/`fpext` on half and bfloat would call compiler-rt (`__truncdfhf2`, `__truncsfbf2`,
`__extendhfsf2`) on CPUs without AVX-512 FP16/BF16 or F16C, and MCJIT resolves none of them;
AVX512_BF16's `vcvtneps2bf16` (what `fptrunc` to bfloat becomes where the CPU has it) treats
f32 subnormals as zero (0x007fffff gives 0x0000, not 0x0080): with the `avx512bf16` option, f32 ->
bf16 uses it with a fixup for those (`narrow_bf16_in_hardware`), to the same bits.
`memref.view` of a byte buffer is its pointer moved on by the byte shift (`ew-workspace` places
the pipeline's temporaries so); a `memref.alloc`/`dealloc` left in the IR calls `malloc`/`free`.

While patterns run, a converted memref is an `builtin.unrealized_conversion_cast` of its pointer
and dynamic sizes to the memref type; memref ops read the pieces from it, and the casts are erased
at the end.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import UnionType
from typing import Union, cast, get_args, get_origin

from xdsl.context import Context
from xdsl.dialects import arith, cf, func, llvm, math, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AnyFloat,
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    ShapedType,
    StridedLayoutAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    UnrealizedConversionCastOp,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter
from xdsl.transforms.convert_scf_to_cf import ForLowering, IfLowering
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from xfuse.dialects.dtypes import element_bytes
from xfuse.dialects.ew import op_name
from xfuse.dialects.failure import OpFailure
from xfuse.transforms import (
    BF16_HARDWARE_NARROWING,
    LOOP_ROLE,
    RSQRT_ESTIMATE,
    packed_entry_name,
)
from xfuse.transforms.options import PassOptionError
from xfuse.transforms.pipeline import (
    check_new_symbol,
    check_no_nested_module,
    declared_already,
)
from xfuse.transforms.rewriting import located_walker

_I8 = IntegerType(8)
_I16 = IntegerType(16)
_I32 = IntegerType(32)
_PTR = llvm.LLVMPointerType()


def convert_type(type_: Attribute) -> Attribute:
    """The LLVM type of a scalar: index -> i64, bf16 -> i16 (its bits), others unchanged."""
    if isinstance(type_, IndexType):
        return i64
    if isinstance(type_, BFloat16Type):
        return _I16
    return type_


def native_argument_types(type_: Attribute) -> list[Attribute]:
    """A function argument's native arguments: pointer + one i64 per `?` dim for a memref."""
    if isinstance(type_, MemRefType):
        shape = cast(MemRefType[Attribute], type_).get_shape()
        return [_PTR] + [i64] * sum(1 for d in shape if d == DYNAMIC_INDEX)
    return [convert_type(type_)]


def parse_fastmath(flags: str, pass_name: str = "ew-to-llvm") -> llvm.FastMathAttr:
    """`"contract,afn"` -> the attribute; `"none"` -> no flags; `"fast"` -> all of them (LLVM's
    spelling); `PassOptionError` for `pass_name`'s `fastmath` otherwise, an empty string or entry
    (`""`, `"contract,,afn"`) included, as mlir-opt rejects `fastmath<>`."""
    names = [name.strip() for name in flags.split(",")]
    valid = [flag.value for flag in llvm.FastMathFlag]
    if not set(names) <= {"none", "fast", *valid}:
        expected = f"none, fast or a comma list of {', '.join(valid)}"
        raise PassOptionError(pass_name, "fastmath", flags, expected)
    if "fast" in names:
        return llvm.FastMathAttr("fast")
    return llvm.FastMathAttr(tuple(llvm.FastMathFlag(name) for name in names if name != "none"))


# ---------------------------------------------------------------------------------------------
# Memrefs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Descriptor:
    """A lowered memref: its data pointer and its sizes (SSA values or static ints)."""

    pointer: SSAValue
    sizes: list[SSAValue | int]


def descriptor(value: SSAValue) -> Descriptor:
    cast_op = value.owner
    if not isinstance(cast_op, UnrealizedConversionCastOp):
        message = "ew-to-llvm: a memref that does not come from an argument or memref.alloc"
        if isinstance(cast_op, Operation):
            raise OpFailure(f"{message} ('{cast_op.name}' makes it)", cast_op)
        raise OpFailure(f"{message} (a block's argument)", next(iter(value.uses)).operation)
    pointer, *dynamic = cast_op.inputs
    dynamic_sizes = iter(dynamic)
    shape = cast(MemRefType[Attribute], value.type).get_shape()
    sizes: list[SSAValue | int] = [next(dynamic_sizes) if d == DYNAMIC_INDEX else d for d in shape]
    return Descriptor(pointer, sizes)


def memref_from_pieces(pointer: SSAValue, sizes: Sequence[SSAValue], type_: Attribute) -> Operation:
    return UnrealizedConversionCastOp.create(operands=[pointer, *sizes], result_types=[type_])


_NO_OVERFLOW_FLAGS: dict[str, Attribute] = {"overflowFlags": IntegerAttr(0, _I32)}
"""What `llvm.AddOp(lhs, rhs)` and the other ops with overflow flags get: none."""


def _integer_op(op_type: type[Operation], lhs: SSAValue, rhs: SSAValue) -> Operation:
    """`op_type(lhs, rhs)` (`llvm.AddOp`, `llvm.MulOp`, ...), the op its constructor makes, built
    with `create` (the constructor builds and verifies new attributes for every op)."""
    properties = _NO_OVERFLOW_FLAGS if issubclass(op_type, llvm.ArithmeticBinOpOverflow) else {}
    return op_type.create(operands=[lhs, rhs], result_types=[lhs.type], properties=properties)


def _constant(value: int, ops: list[Operation]) -> SSAValue:
    op = llvm.ConstantOp(IntegerAttr(value, i64), i64)
    ops.append(op)
    return op.result


def _size_value(size: SSAValue | int, ops: list[Operation]) -> SSAValue:
    return _constant(size, ops) if isinstance(size, int) else size


def has_identity_layout(type_: MemRefType[Attribute]) -> bool:
    """Row-major over the sizes, dynamic ones included: no layout, or the identity map."""
    layout = type_.layout
    return isinstance(layout, NoneAttr) or (
        isinstance(layout, AffineMapAttr)
        and layout.data == AffineMap.identity(type_.get_num_dims())
    )


def strided_layout(type_: MemRefType[Attribute], op: Operation) -> tuple[list[int], int] | None:
    """The static (strides, offset) in elements of a `strided<...>` layout, None for the identity
    layout (row-major over the sizes, dynamic ones included); any other layout is rejected.

    The descriptor carries only the pointer and the dynamic sizes, so `?` strides and offsets,
    and affine maps other than the identity, have no lowering.
    """
    if has_identity_layout(type_):
        return None
    layout = type_.layout
    if isinstance(layout, StridedLayoutAttr):
        strides, offset = layout.get_strides(), layout.get_offset()
        if offset is not None and all(stride is not None for stride in strides):
            return [cast(int, stride) for stride in strides], offset
    raise OpFailure(
        f"ew-to-llvm: '{op.name}' on {type_}: only the identity layout and strided layouts with "
        "static strides and offset have a lowering (the descriptor has no strides or offset)",
        op,
    )


def _element_pointer(
    op: Operation, value: SSAValue, indices: Sequence[SSAValue], ops: list[Operation]
) -> SSAValue:
    """The address of `value[indices]` for `op` (ops to insert are appended to `ops`)."""
    pieces = descriptor(value)
    type_ = cast(MemRefType[Attribute], value.type)
    layout = strided_layout(type_, op)

    def emit(new: Operation) -> SSAValue:
        ops.append(new)
        return new.results[0]

    if layout is None:  # row-major: ((i0 * d1 + i1) * d2 + i2) ...
        if not indices:
            return pieces.pointer
        linear = indices[0]
        for index, size in zip(indices[1:], pieces.sizes[1:], strict=True):
            scaled = emit(_integer_op(llvm.MulOp, linear, _size_value(size, ops)))
            linear = emit(_integer_op(llvm.AddOp, scaled, index))
    else:  # offset + i0 * s0 + i1 * s1 ...
        strides, offset = layout
        linear = _constant(offset, ops)
        for index, stride in zip(indices, strides, strict=True):
            if stride != 1:
                index = emit(_integer_op(llvm.MulOp, index, _constant(stride, ops)))
            linear = emit(_integer_op(llvm.AddOp, linear, index))
    return emit(_gep(pieces.pointer, linear, convert_type(type_.get_element_type())))


def _gep(pointer: SSAValue, index: SSAValue, element: Attribute) -> llvm.GEPOp:
    """`getelementptr inbounds <element>, ptr %pointer, i64 %index`."""
    return llvm.GEPOp.create(
        operands=[pointer, index], result_types=[_PTR], properties=_element_gep_properties(element)
    )


@functools.cache
def _element_gep_properties(element: Attribute) -> dict[str, Attribute]:
    """The properties of `getelementptr inbounds <element>, ptr %p, i64 %index`, as
    `GEPOp.from_mixed_indices` makes them, built once per element type (that builds and
    verifies new attributes for every access)."""
    return {
        "rawConstantIndices": DenseArrayBase.from_list(_I32, [llvm.GEP_USE_SSA_VAL]),
        "elem_type": element,
        "noWrapFlags": IntegerAttr(0, _I32),
        "inbounds": UnitAttr(),
    }


def contiguous(type_: Attribute, op: Operation) -> MemRefType[Attribute]:
    """`type_`, which `op` makes from bytes or reshapes, if its layout is the identity (else
    rejected)."""
    memref_type = cast(MemRefType[Attribute], type_)
    if strided_layout(memref_type, op) is not None:
        raise OpFailure(
            f"ew-to-llvm: '{op.name}' on {memref_type}: only the identity layout has a lowering", op
        )
    return memref_type


class LoadToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.LoadOp, rewriter: PatternRewriter) -> None:
        ops: list[Operation] = []
        pointer = _element_pointer(op, op.memref, op.indices, ops)
        load = llvm.LoadOp.create(operands=[pointer], result_types=[convert_type(op.res.type)])
        rewriter.replace(op, [*ops, load])


_STORE_PROPERTIES: dict[str, Attribute] = {"ordering": IntegerAttr(0, i64)}
"""A plain store's (what `llvm.StoreOp(value, pointer)` gives it)."""


class StoreToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.StoreOp, rewriter: PatternRewriter) -> None:
        ops: list[Operation] = []
        pointer = _element_pointer(op, op.memref, op.indices, ops)
        store = llvm.StoreOp.create(operands=[op.value, pointer], properties=_STORE_PROPERTIES)
        rewriter.replace(op, [*ops, store])


def _static_index(dim: memref.DimOp) -> int:
    owner = dim.index.owner
    if isinstance(owner, arith.ConstantOp | llvm.ConstantOp) and isinstance(
        owner.value, IntegerAttr
    ):
        index = owner.value.value.data
        rank = len(cast(MemRefType, dim.source.type).get_shape())
        if not 0 <= index < rank:  # (3 was an IndexError, -1 the last dim's size)
            raise OpFailure(f"ew-to-llvm: memref.dim index {index} of a rank-{rank} memref", dim)
        return index
    raise OpFailure("ew-to-llvm: memref.dim needs a constant index", dim)


class DimToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DimOp, rewriter: PatternRewriter) -> None:
        size = descriptor(op.source).sizes[_static_index(op)]
        if isinstance(size, int):
            rewriter.replace(op, llvm.ConstantOp(IntegerAttr(size, i64), i64))
        else:
            rewriter.replace(op, [], [size])


class AllocToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter) -> None:
        type_ = contiguous(op.memref.type, op)
        ops: list[Operation] = []
        dynamic = iter(op.dynamic_sizes)
        total = _constant(element_bytes(type_.get_element_type()), ops)
        for size in type_.get_shape():
            factor = next(dynamic) if size == DYNAMIC_INDEX else _constant(size, ops)
            product = _integer_op(llvm.MulOp, total, factor)
            ops.append(product)
            total = product.results[0]
        call = llvm.CallOp("malloc", total, return_type=_PTR)
        rewriter.replace(
            op, [*ops, call, memref_from_pieces(call.returned, op.dynamic_sizes, type_)]
        )


class ViewToLlvm(RewritePattern):
    """A view of a byte buffer (a temporary in the workspace): the pointer `byte_shift` bytes on."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.ViewOp, rewriter: PatternRewriter) -> None:
        contiguous(op.result.type, op)
        start = _gep(descriptor(op.source).pointer, op.byte_shift, _I8)
        rewriter.replace(op, [start, memref_from_pieces(start.result, op.sizes, op.result.type)])


class AlignedPointerToLlvm(RewritePattern):
    """A memref's address as an index (`ew-kernel-to-loops` aligns stores by it): its pointer
    as an i64."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: memref.ExtractAlignedPointerAsIndexOp, rewriter: PatternRewriter
    ) -> None:
        rewriter.replace(op, llvm.PtrToIntOp(descriptor(op.source).pointer, i64))


class CollapseShapeToLlvm(RewritePattern):
    """A contiguous memref seen with each group of its dims as one (`ew-kernel-to-loops` reads
    arrays of a kernel's whole iteration space at one linear index, and the others with each
    run of dims its loop walks as one): the same pointer, each group's size the product of the
    group's sizes."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.CollapseShapeOp, rewriter: PatternRewriter) -> None:
        contiguous(op.src.type, op)
        result_type = contiguous(op.result.type, op)
        pieces = descriptor(op.src)
        ops: list[Operation] = []
        sizes: list[SSAValue] = []
        for group, size in zip(op.reassociation, result_type.get_shape(), strict=True):
            if size != DYNAMIC_INDEX:
                continue
            product: SSAValue | None = None
            for axis in group:
                factor = _size_value(pieces.sizes[axis.value.data], ops)
                if product is not None:
                    ops.append(multiply := _integer_op(llvm.MulOp, product, factor))
                    factor = multiply.res
                product = factor
            assert product is not None, "a dynamic dim collapses a non-empty group"
            sizes.append(product)
        rewriter.replace(op, [*ops, memref_from_pieces(pieces.pointer, sizes, result_type)])


class DeallocToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DeallocOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.CallOp("free", descriptor(op.memref).pointer))


# ---------------------------------------------------------------------------------------------
# Functions and control flow
# ---------------------------------------------------------------------------------------------


def external_function(
    name: str, function_type: llvm.LLVMFunctionType, body: Region | None = None
) -> llvm.FuncOp:
    """An external `llvm.func`, with the `unnamed_addr` its custom syntax parses back to (0):
    otherwise the printed IR would parse to a different module."""
    return llvm.FuncOp(
        name,
        function_type,
        linkage=llvm.LinkageAttr("external"),
        body=body,
        other_props={"unnamed_addr": IntegerAttr(0, 64)},
    )


def _reject_memref_results(op: func.FuncOp | func.CallOp, results: Sequence[Attribute]) -> None:
    """A memref result would need a descriptor the caller unpacks; results come back through
    output arguments instead (destination-passing style, what `ew-bufferize` makes)."""
    returned = next((t for t in results if isinstance(t, MemRefType)), None)
    if returned is None:
        return
    where = f"@{op.sym_name.data}" if isinstance(op, func.FuncOp) else f"call of {op.callee}"
    raise OpFailure(
        f"ew-to-llvm: '{op.name}' {where} returns {returned}: memref results have no lowering; "
        "pass the result buffer as an argument (destination-passing style, as ew-bufferize does)",
        op,
    )


NO_INLINE = "ew.no_inline"
"""The attribute of a function LLVM must not inline (`ew-kernel-to-loops` puts it on each
kernel's function): the `ew` dialect's own, because xDSL parses `llvm.func`'s `no_inline`
property back as an attribute from the custom form and as the property from the generic one."""


def is_private(op: func.FuncOp) -> bool:
    return op.sym_visibility is not None and op.sym_visibility.data == "private"


def lower_function(op: func.FuncOp) -> llvm.FuncOp:
    """The `llvm.func` of a `func.func`: memref arguments expanded, body moved over. A private
    function gets internal linkage and keeps its `NO_INLINE` attribute."""
    inputs = [t for type_ in op.function_type.inputs for t in native_argument_types(type_)]
    _reject_memref_results(op, op.function_type.outputs)
    outputs = [convert_type(t) for t in op.function_type.outputs]
    if len(outputs) > 1:
        raise OpFailure(f"ew-to-llvm: '{op.sym_name.data}' returns more than one value", op)
    function_type = llvm.LLVMFunctionType(inputs, outputs[0] if outputs else None)
    body = op.detach_region(op.body)
    if body.blocks:
        _expand_entry_arguments(body)
    lowered = external_function(op.sym_name.data, function_type, body)
    lowered.location = op.location  # (as MLIR's func-to-llvm keeps it)
    if is_private(op) and body.blocks:
        lowered.linkage = llvm.LinkageAttr("internal")
    if NO_INLINE in op.attributes:
        lowered.attributes[NO_INLINE] = UnitAttr()
    return lowered


def packed_entry(function: llvm.FuncOp) -> llvm.FuncOp | None:
    """A function taking one pointer to an array of 8-byte words, one per native argument of
    `function` (a pointer or an i64), that calls `function` with them and returns its result;
    None for a function taking anything else (hand-written IR: the runtime calls only the
    lowered memref functions, whose arguments are all pointers and sizes).

    Callers use it instead of `function`, so any number of arguments fits in a call (a C call
    through ctypes takes at most 1024); O3 inlines `function` into it, but a `@main` that calls
    kernels' functions (`optnone`). That call of 2N arguments costs LLVM time that grows with
    N's square (CalledValuePropagation, instruction selection): a sum of 800 inputs compiled in
    1.4 CPU s, of 1,600 in 4.1, of 3,200 in 15.7 (Intel Xeon, 2026-12-06).
    """
    function_type = function.function_type
    if any(type_ not in (_PTR, i64) for type_ in function_type.inputs):
        return None
    words = Block(arg_types=[_PTR])
    arguments = []
    for position, type_ in enumerate(function_type.inputs):
        slot = llvm.GEPOp.from_mixed_indices(words.args[0], [position], i64, inbounds=True)
        load = llvm.LoadOp(slot, type_)
        words.add_ops([slot, load])
        arguments.append(load.dereferenced_value)
    returns = not isinstance(function_type.output, llvm.LLVMVoidType)
    call = llvm.CallOp(
        function.sym_name, *arguments, return_type=function_type.output if returns else None
    )
    words.add_ops([call, llvm.ReturnOp(call.returned if returns else None)])
    packed_type = llvm.LLVMFunctionType([_PTR], function_type.output if returns else None)
    return external_function(packed_entry_name(function.sym_name.data), packed_type, Region(words))


def _expand_entry_arguments(body: Region) -> None:
    """`body`'s entry block made anew: each memref argument as its native arguments (its pointer,
    then its dynamic sizes: `native_argument_types`), rebuilt into a memref at the block's start,
    and any other argument of its LLVM type. One new block, not an `insert_arg` a piece and an
    `erase_arg` a memref: each renumbers every argument after it (xDSL), a time growing with the
    square of a program's arrays (4.4 of 25 s compiling a sum of 3,000 inputs)."""
    entry = cast(Block, body.first_block)
    pieces_types = [
        native_argument_types(arg.type)
        if isinstance(arg.type, MemRefType)
        else [convert_type(arg.type)]
        for arg in entry.args
    ]
    expanded = Block(arg_types=[type_ for types in pieces_types for type_ in types])
    expanded.name_hint = entry.name_hint
    native_arguments = iter(expanded.args)
    memrefs: list[Operation] = []
    for arg, types in zip(entry.args, pieces_types, strict=True):
        pieces = [next(native_arguments) for _ in types]
        pieces[0].name_hint = arg.name_hint
        if isinstance(arg.type, MemRefType):
            memrefs.append(memref_from_pieces(pieces[0], pieces[1:], arg.type))
            arg.replace_all_uses_with(memrefs[-1].results[0])
        else:
            arg.replace_all_uses_with(pieces[0])
    expanded.add_ops(reversed(memrefs))  # (the last argument's first, as the IR has always had)
    for op in list(entry.ops):
        op.detach()
        expanded.add_op(op)
    body.insert_block_before(expanded, entry)
    body.detach_block(entry).erase()


class ReturnToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.ReturnOp(op.arguments[0] if op.arguments else None))


def _native_arguments(value: SSAValue) -> list[SSAValue]:
    """A memref passed to a function as the callee takes it: its pointer, then its dynamic
    sizes (see `native_argument_types`)."""
    pieces = descriptor(value)
    return [pieces.pointer, *(size for size in pieces.sizes if isinstance(size, SSAValue))]


class CallToLlvm(RewritePattern):
    """`func.call` -> `llvm.call`, each memref argument passed as its native arguments."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.CallOp, rewriter: PatternRewriter) -> None:
        _reject_memref_results(op, op.result_types)
        result_types = [convert_type(t) for t in op.result_types]
        arguments = [
            native
            for argument in op.arguments
            for native in (
                _native_arguments(argument) if isinstance(argument.type, MemRefType) else [argument]
            )
        ]
        call = llvm.CallOp(
            op.callee, *arguments, return_type=result_types[0] if result_types else None
        )
        rewriter.replace(op, call)


class BranchToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.BranchOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.BrOp(op.successor, *op.arguments))


class CondBranchToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.ConditionalBranchOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(
            op,
            llvm.CondBrOp(
                op.cond, op.then_block, op.then_arguments, op.else_block, op.else_arguments
            ),
        )


# ---------------------------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------------------------


class ConstantToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        value = op.value
        type_ = convert_type(op.result.type)
        if isinstance(op.result.type, BFloat16Type):  # (it was "unsupported constant")
            _reject_bf16(op, op.result.type)
        if isinstance(value, IntegerAttr):
            value = IntegerAttr(value.value.data, cast(IntegerType, type_))
        elif not isinstance(value, FloatAttr):
            raise OpFailure("ew-to-llvm: unsupported constant", op)
        rewriter.replace(
            op, llvm.ConstantOp.create(result_types=[type_], properties={"value": value})
        )


def _reject_bf16(op: Operation, type_: Attribute) -> None:
    """bf16 is i16 bits in LLVM (`convert_type`): no float op takes it."""
    if isinstance(type_, BFloat16Type) or type_ == _I16:
        raise OpFailure(
            f"ew-to-llvm: '{op.name}' on bf16 has no lowering (bf16 is stored as i16: compute "
            "in f32, arith.extf then arith.truncf, as ew-fuse's kernels do)",
            op,
        )


_FLOAT_BINARY: dict[type[Operation], type[llvm.AbstractFloatArithOp]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}


@functools.cache
def combined_fastmath(
    op_flags: arith.FastMathFlagsAttr, option: llvm.FastMathAttr
) -> llvm.FastMathAttr:
    """The op's own fast-math flags together with the pass option's (a union: either may allow)."""
    return llvm.FastMathAttr(option.data | {llvm.FastMathFlag(f.value) for f in op_flags.data})


@dataclass(frozen=True)
class FloatArithToLlvm(RewritePattern):
    fastmath: llvm.FastMathAttr

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: arith.AddfOp | arith.SubfOp | arith.MulfOp | arith.DivfOp,
        rewriter: PatternRewriter,
    ) -> None:
        _reject_bf16(op, op.result.type)
        flags = combined_fastmath(op.fastmath, self.fastmath)
        rewriter.replace(
            op,
            _FLOAT_BINARY[type(op)].create(
                operands=[op.lhs, op.rhs],
                result_types=[op.lhs.type],
                properties={"fastmathFlags": flags},
                attributes={
                    name: value for name, value in op.attributes.items() if name == RSQRT_ESTIMATE
                },
            ),
        )


@dataclass(frozen=True)
class NegToLlvm(RewritePattern):
    fastmath: llvm.FastMathAttr

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.NegfOp, rewriter: PatternRewriter) -> None:
        _reject_bf16(op, op.result.type)
        rewriter.replace(op, llvm.FNegOp(op.operand, combined_fastmath(op.fastmath, self.fastmath)))


_INTEGER_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemUIOp: llvm.URemOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
}


class IntegerArithToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: arith.AddiOp
        | arith.SubiOp
        | arith.MuliOp
        | arith.DivUIOp
        | arith.RemUIOp
        | arith.ShLIOp
        | arith.ShRSIOp
        | arith.ShRUIOp
        | arith.AndIOp
        | arith.OrIOp
        | arith.XOrIOp,
        rewriter: PatternRewriter,
    ) -> None:
        rewriter.replace(op, _integer_op(_INTEGER_BINARY[type(op)], op.lhs, op.rhs))


_INTRINSIC_SUFFIXES: dict[type[Attribute], str] = {
    Float16Type: "f16",
    Float32Type: "f32",
    Float64Type: "f64",
}


def float_intrinsic(op: Operation, name: str) -> llvm.CallIntrinsicOp:
    """A call of `llvm.<name>.<f16|f32|f64>` on the operands of `op`, float scalars of its result
    type (`llvm.powi`, overloaded on its exponent's type too, is `llvm.powi.f32.i32`).

    The name is mangled here, not by xDSL's converter: it declares the `llvm.intr.*` ops' intrinsics
    under the bare name (`llvm.sqrt`), so one program with an f32 and an f64 sqrt reused the first
    declaration for both and llvmlite rejected the second call.
    """
    type_ = op.results[0].type  # (operands may be lowered already: bf16 arrives as i16)
    suffix = _INTRINSIC_SUFFIXES.get(type(type_))
    if suffix is None:
        raise OpFailure(f"ew-to-llvm: '{op.name}' on {type_} has no lowering", op)
    if isinstance(op, math.FPowIOp):
        suffix += f".i{cast(IntegerType, op.rhs.type).width.data}"
    return llvm.CallIntrinsicOp(f"llvm.{name}.{suffix}", op.operands, [type_])


class MinMaxToLlvm(RewritePattern):
    """NaN-propagating `maximumf`/`minimumf` -> `llvm.maximum`/`llvm.minimum` (vectorizable)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.MaximumfOp | arith.MinimumfOp, rewriter: PatternRewriter
    ) -> None:
        kind = "maximum" if isinstance(op, arith.MaximumfOp) else "minimum"
        rewriter.replace(op, float_intrinsic(op, kind))


_NO_FASTMATH: dict[str, Attribute] = {"fastmathFlags": llvm.FastMathAttr("none")}
"""What `llvm.SelectOp(cond, lhs, rhs)` gets: no fast-math flags."""


@functools.cache
def _fcmp_properties(predicate: int) -> dict[str, Attribute]:
    """The properties of `llvm.FCmpOp(lhs, rhs, <arith.cmpf's predicate number>)`."""
    name = arith.CMPF_COMPARISON_OPERATIONS[predicate]
    flag = IntegerAttr(llvm.FCmpPredicateFlag(name).to_int(), i64)
    return {"predicate": flag, **_NO_FASTMATH}


class CmpfToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpfOp, rewriter: PatternRewriter) -> None:
        _reject_bf16(op, op.lhs.type)
        predicate = op.predicate.value.data
        constant = {"false": 0, "true": 1}.get(arith.CMPF_COMPARISON_OPERATIONS[predicate])
        if constant is not None:  # whatever the operands (xDSL's llvm names it `_true`: a
            # ValueError, as llvm.fcmp's predicate, and llvmlite's fcmp takes neither)
            rewriter.replace(op, llvm.ConstantOp(IntegerAttr(constant, i1), i1))
            return
        properties = _fcmp_properties(predicate)
        lowered = llvm.FCmpOp.create(
            operands=[op.lhs, op.rhs], result_types=[i1], properties=properties
        )
        rewriter.replace(op, lowered)


class CmpiToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter) -> None:
        name = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        predicate = list(llvm.ICmpPredicateFlag).index(llvm.ICmpPredicateFlag(name))
        rewriter.replace(op, llvm.ICmpOp(op.lhs, op.rhs, IntegerAttr(predicate, i64)))


class SelectToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter) -> None:
        lowered = llvm.SelectOp.create(
            operands=[op.cond, op.lhs, op.rhs],
            result_types=[op.lhs.type],
            properties=_NO_FASTMATH,
        )
        rewriter.replace(op, lowered)


class CastsToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.BitcastOp | arith.SIToFPOp | arith.IndexCastOp, rewriter: PatternRewriter
    ) -> None:
        source, result = op.operands[0], op.results[0]
        if isinstance(op, arith.SIToFPOp):
            _reject_bf16(op, result.type)
            rewriter.replace(op, llvm.SIToFPOp(source, result.type))
        elif isinstance(op, arith.BitcastOp):
            # bf16 is i16 in LLVM (llvmlite has no bfloat): i16 <-> bf16 is then a no-op cast.
            rewriter.replace(op, llvm.BitcastOp(source, convert_type(result.type)))
        elif convert_type(source.type) == convert_type(result.type):
            rewriter.replace(op, [], [source])
        else:
            raise OpFailure("ew-to-llvm: unsupported cast", op)


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE binary format: total width, fraction (explicit mantissa) bits, exponent bias."""

    width: int
    fraction: int
    bias: int

    @property
    def sign(self) -> int:
        return 1 << (self.width - 1)

    @property
    def infinity(self) -> int:
        return self.sign - (1 << self.fraction)

    @property
    def min_exponent(self) -> int:
        """The exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def max_exponent(self) -> int:
        """The exponent of the largest finite number."""
        return (self.infinity >> self.fraction) - 1 - self.bias

    def power_of_two(self, exponent: int) -> int:
        """The bits of the normal number 2**exponent."""
        return (exponent + self.bias) << self.fraction


FORMATS: dict[type[Attribute], FloatFormat] = {
    Float16Type: FloatFormat(16, 10, 15),
    BFloat16Type: FloatFormat(16, 7, 127),
    Float32Type: FloatFormat(32, 23, 127),
    Float64Type: FloatFormat(64, 52, 1023),
}
_FLOAT_OF_WIDTH: dict[int, Attribute] = {32: Float32Type(), 64: Float64Type()}


class _Emitter:
    """Collects the LLVM ops of a conversion, with short names for them."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def __call__(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def integer(self, value: int, width: int) -> SSAValue:
        as_signed = value - (1 << width) if value >= 1 << (width - 1) else value
        type_ = IntegerType(width)
        return self(llvm.ConstantOp(IntegerAttr(as_signed, type_), type_))

    def integer_compare(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        index = list(llvm.ICmpPredicateFlag).index(llvm.ICmpPredicateFlag(predicate))
        return self(llvm.ICmpOp(a, b, IntegerAttr(index, i64)))


def narrow_bits(
    emit: _Emitter, value: SSAValue, source: FloatFormat, target: FloatFormat
) -> SSAValue:
    """The i16 bits of the f32/f64 `value` rounded to nearest even in the 16-bit `target`, in
    integer ops and one float add: one correct rounding (f64 -> f16 through f32 would round twice)
    that needs no compiler-rt call (`fptrunc` to half or bfloat calls `__truncdfhf2` or
    `__truncsfbf2` without AVX-512 FP16/BF16, and MCJIT resolves neither). NaN stays a NaN of its
    sign, quieted, with the top of its payload; overflow gives inf; subnormals round correctly."""
    width = source.width
    shift = source.fraction - target.fraction

    def constant(number: int) -> SSAValue:
        return emit.integer(number, width)

    bits = emit(llvm.BitcastOp(value, IntegerType(width)))
    # With the same exponents (f32 -> bf16) the sign rides along: no rounding carry reaches it.
    same_exponents = (source.min_exponent, source.max_exponent) == (
        target.min_exponent,
        target.max_exponent,
    )
    magnitude = bits if same_exponents else emit(llvm.AndOp(bits, constant(source.sign - 1)))
    kept = emit(llvm.LShrOp(magnitude, constant(shift)))
    # Normal results: re-bias the exponent and round the integer: add half an ulp less one plus
    # the lowest kept bit (ties go to the even neighbour), then drop the low bits.
    odd = emit(llvm.AndOp(kept, constant(1)))
    rebias = ((target.bias - source.bias) << source.fraction) + (1 << (shift - 1)) - 1
    rounded = emit(llvm.AddOp(emit(llvm.AddOp(magnitude, constant(rebias))), odd))
    result = emit(llvm.LShrOp(rounded, constant(shift)))
    if target.min_exponent > source.min_exponent:
        # Below the target's normals the FPU rounds: in |x| + 2**k, with k chosen so that the
        # sum's ulp is the target's smallest subnormal, the low bits count those subnormals.
        float_type = _FLOAT_OF_WIDTH[width]
        magic = constant(
            source.power_of_two(target.min_exponent - target.fraction + source.fraction)
        )
        total = emit(
            llvm.FAddOp(
                emit(llvm.BitcastOp(magnitude, float_type)),
                emit(llvm.BitcastOp(magic, float_type)),
            )
        )
        subnormal = emit(llvm.SubOp(emit(llvm.BitcastOp(total, IntegerType(width))), magic))
        tiny = emit.integer_compare(
            "ult", magnitude, constant(source.power_of_two(target.min_exponent))
        )
        result = emit(llvm.SelectOp(tiny, subnormal, result))
    if target.max_exponent < source.max_exponent:
        too_big = emit.integer_compare(
            "uge", magnitude, constant(source.power_of_two(target.max_exponent + 1))
        )
        result = emit(llvm.SelectOp(too_big, constant(target.infinity), result))
    quiet = 1 << (target.fraction - 1)
    if same_exponents:  # `kept` is sign, all-ones exponent and the payload's top
        quiet_nan = emit(llvm.OrOp(kept, constant(quiet)))
    else:
        payload = emit(llvm.AndOp(kept, constant((1 << target.fraction) - 1)))
        quiet_nan = emit(llvm.OrOp(payload, constant(target.infinity | quiet)))
    is_nan = emit(llvm.FCmpOp(value, value, "uno"))
    result = emit(llvm.SelectOp(is_nan, quiet_nan, result))
    if not same_exponents:
        sign = emit(llvm.AndOp(emit(llvm.LShrOp(bits, constant(width - 16))), constant(1 << 15)))
        result = emit(llvm.OrOp(result, sign))
    return emit(llvm.TruncOp(result, _I16))


BF16_HARDWARE_SIGNATURE = llvm.LLVMFunctionType([Float32Type()], _I16)


def narrow_bf16_in_hardware(emit: _Emitter, value: SSAValue) -> SSAValue:
    """The i16 bits of the f32 `value` rounded to bf16, as `narrow_bits` gives them, by a call to
    `BF16_HARDWARE_NARROWING` (AVX512_BF16's `vcvtneps2bf16` once `xfuse.codegen.native` has made
    it an `fptrunc`: round to nearest even, a NaN quieted with its sign and its payload's top,
    one instruction for 16 lanes that also packs them). That instruction treats a subnormal
    input as zero, so a subnormal (or zero) `value` goes in with the exponent field's lowest bit
    set: that is `value` + copysign(2^-126, value) exactly, a normal number whose bf16 ulp
    (2^-133) is that of bf16's subnormals, so it rounds as `value` would (2^-126 is an even
    number of those ulps), and its bf16 bits less 0x0080 are `value`'s."""
    bits = emit(llvm.BitcastOp(value, _I32))
    exponent = emit(llvm.AndOp(bits, emit.integer(0x7F800000, 32)))
    tiny = emit.integer_compare("eq", exponent, emit.integer(0, 32))
    lifted = emit(llvm.OrOp(bits, emit.integer(0x00800000, 32)))
    operand = emit(llvm.SelectOp(tiny, lifted, bits))
    rounded = emit(
        llvm.CallOp(
            BF16_HARDWARE_NARROWING,
            emit(llvm.BitcastOp(operand, Float32Type())),
            return_type=_I16,
        )
    )
    lowered = emit(llvm.SubOp(rounded, emit.integer(0x0080, 16)))
    return emit(llvm.SelectOp(tiny, lowered, rounded))


def widen_bits(
    emit: _Emitter, bits: SSAValue, source: FloatFormat, target: FloatFormat, quiet: bool = True
) -> SSAValue:
    """The f32/f64 value of the 16-bit float whose i16 `bits` are given: exact, in integer ops
    and, for subnormals, an exact int-to-float and scaling (`fpext` from half calls compiler-rt's
    `__extendhfsf2` without F16C). A NaN keeps its sign and payload and comes out quiet; without
    `quiet` a signaling one stays signaling (for users that quiet it, `_QuietingUsers`)."""
    width = target.width
    float_type = _FLOAT_OF_WIDTH[width]

    def constant(number: int) -> SSAValue:
        return emit.integer(number, width)

    wide = emit(llvm.ZExtOp(bits, IntegerType(width)))
    if (source.min_exponent, source.max_exponent) == (target.min_exponent, target.max_exponent):
        # The same exponents (bf16 -> f32): sign, exponent and fraction move up as they are.
        result = emit(llvm.ShlOp(wide, constant(width - source.width)))
    else:
        magnitude = emit(llvm.AndOp(wide, constant(source.sign - 1)))
        shifted = emit(llvm.ShlOp(magnitude, constant(target.fraction - source.fraction)))
        rebias = constant((target.bias - source.bias) << target.fraction)
        result = emit(llvm.AddOp(shifted, rebias))
        # A subnormal is its fraction times the smallest subnormal: exact in the wider format.
        count = emit(llvm.SIToFPOp(magnitude, float_type))
        smallest = 2.0 ** (source.min_exponent - source.fraction)
        unit = emit(llvm.ConstantOp(FloatAttr(smallest, cast(AnyFloat, float_type)), float_type))
        scaled = emit(llvm.BitcastOp(emit(llvm.FMulOp(count, unit)), IntegerType(width)))
        is_subnormal = emit.integer_compare("ult", magnitude, constant(1 << source.fraction))
        result = emit(llvm.SelectOp(is_subnormal, scaled, result))
        infinity = emit(llvm.OrOp(shifted, constant(target.infinity)))  # and NaN
        is_infinite = emit.integer_compare("uge", magnitude, constant(source.infinity))
        result = emit(llvm.SelectOp(is_infinite, infinity, result))
        sign = emit(llvm.AndOp(wide, constant(source.sign)))
        result = emit(llvm.OrOp(result, emit(llvm.ShlOp(sign, constant(width - source.width)))))
    if quiet:
        # IEEE: converting a signaling NaN gives a quiet one. (Not with `llvm.canonicalize`:
        # LLVM 22 aborts legalizing it for <2 x float>.)
        quiet_nan = emit(llvm.OrOp(result, constant(1 << (target.fraction - 1))))
        result_magnitude = emit(llvm.AndOp(result, constant(target.sign - 1)))
        is_nan = emit.integer_compare("ugt", result_magnitude, constant(target.infinity))
        result = emit(llvm.SelectOp(is_nan, quiet_nan, result))
    return emit(llvm.BitcastOp(result, float_type))


def _format(type_: Attribute) -> FloatFormat:
    # A bf16 value whose producer is lowered already arrives as its i16 bits.
    return FORMATS[BFloat16Type if isinstance(type_, IntegerType) else type(type_)]


def _is_bf16(type_: Attribute) -> bool:
    return _format(type_) is FORMATS[BFloat16Type]


def _is_f16_f32_pair(a: Attribute, b: Attribute) -> bool:
    return {type(a), type(b)} == {Float16Type, Float32Type}


_QUIETING_ARITHMETIC = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp)

_NAN_PROPAGATING = (arith.MaximumfOp, arith.MinimumfOp)
"""`llvm.maximum`/`llvm.minimum`: a NaN operand gives a NaN, not always quieted on x86."""

_NAN_PASSING = (arith.NegfOp, math.AbsFOp, arith.SelectOp, *_NAN_PROPAGATING)
"""Ops that pass a NaN operand on as it is, maybe signaling (`_QuietingUsers.is_unquieted`)."""


_ORDERED_PREDICATES = frozenset(
    arith.CMPF_COMPARISON_OPERATIONS.index(p) for p in ("oeq", "ogt", "oge", "olt", "ole", "one")
)


_KEPT_CONSTANT_BELOW = 2.0**-126
"""A constant of a smaller magnitude (+-0 and the denormals, to be safe) is taken to let LLVM
drop an op of it: x + -0 and x - 0 are x."""


@dataclass
class _QuietingUsers:
    """Which widenings need not quiet a signaling NaN (`is_unquieted`), for one module: each
    value is looked at once, in loops, not recursion (a chain of `max(y, y)` is a DAG whose
    paths double at each op, and a kernel may hold thousands of ops)."""

    unknown: dict[SSAValue, bool] = field(default_factory=dict)
    """`is_unknown`'s answers so far."""

    def is_unknown(self, value: SSAValue) -> bool:
        """`value` is one that LLVM cannot fold to a constant: a load, a widening, negation or
        |.| of one, + - * /, an FMA, `maximumf` or `minimumf` of such a value, one scaled by
        `llvm.ldexp` (without fast-math flags that assume no NaN, no IEEE identity makes x * 0,
        x - x or x / x a constant; a NaN there gives NaN), or a clamp of one: `select(u < c, c,
        u)` or another ordered compare of u with u where it is false, as `ew-expand-math`'s
        clamps are (a NaN u gives u, so it is no constant)."""
        pending = [(value, _unknown_if_any(value))]
        while pending:
            current, operands = pending[-1]
            needed = [v for v in operands or () if v not in self.unknown]
            if needed:
                pending.extend((v, _unknown_if_any(v)) for v in needed)
                continue
            pending.pop()
            self.unknown[current] = operands is None or any(self.unknown[v] for v in operands)
        return self.unknown[value]

    def keeps_op(self, other: SSAValue) -> bool:
        """LLVM keeps + - * / of a value with `other`: `other` is unknown (`is_unknown`), or a
        constant no IEEE identity drops the op for (x * 1, x * -1 = -x, x / 1, x / -1, x + -0
        and x - 0 are dropped; x * 2 becomes x + x, x / 4 x * 0.25, still arithmetic)."""
        if self.is_unknown(other):
            return True
        constant = other.owner
        if not isinstance(constant, arith.ConstantOp) or not isinstance(constant.value, FloatAttr):
            return False
        literal = constant.value.value.data
        return abs(literal) != 1.0 and abs(literal) >= _KEPT_CONSTANT_BELOW

    def is_unquieted(self, widening: arith.ExtFOp) -> bool:
        """A signaling NaN from the widening is quieted, to the same bits, before anything sees
        it, so the widening need not quiet it (3 vector ops and a mask less a widened input):
        every use is + - * / of it that LLVM keeps (`keeps_op`; the hardware's arithmetic,
        x86's SSE/AVX and PTX, gives the same bits for a signaling NaN operand as for the quiet
        NaN a widening makes of it), a narrowing (it quiets a NaN, keeping its payload's top), a
        compare or the sign of a copysign (the same for both NaNs), or a negation, |.|, a
        copysign's magnitude, a select's arm, `maximumf` or `minimumf` whose result's uses are
        such in turn (each gives a quieted NaN the bits it gives the signaling one, quieted).
        Any other user (a store, a bitcast) may show the signaling NaN. (Where two NaNs meet in
        one op, x86 keeps the first operand's, and which comes first is LLVM's choice, with or
        without the quieting: a NaN's sign and payload are not defined there, as numpy's are
        not.)"""
        pending = [widening.result]
        reached = set(pending)
        while pending:
            value = pending.pop()
            users = {use.operation for use in value.uses}
            if not users:
                return False
            for user in users:
                if isinstance(user, _QUIETING_ARITHMETIC):
                    if not all(o is value or self.keeps_op(o) for o in user.operands):
                        return False
                elif isinstance(user, _NAN_PASSING) or (
                    isinstance(user, math.CopySignOp) and user.lhs is value
                ):
                    if user.results[0] not in reached:
                        reached.add(user.results[0])
                        pending.append(user.results[0])
                elif not isinstance(user, arith.CmpfOp | math.CopySignOp | arith.TruncFOp):
                    return False
        return True


def _unknown_if_any(value: SSAValue) -> list[SSAValue] | None:
    """The values of which `value` is unknown if any is (`_QuietingUsers.is_unknown`; [] for
    none: it is not), or None where it is unknown itself (a load)."""
    owner = value.owner
    if isinstance(owner, memref.LoadOp):
        return None
    if isinstance(owner, arith.ExtFOp | arith.NegfOp | math.AbsFOp):
        return [owner.operands[0]]
    if isinstance(owner, llvm.CallIntrinsicOp) and owner.intrin.data.startswith("llvm.ldexp."):
        return [owner.operands[0]]  # (exp's 2**n, `ew-expand-math{ldexp}`)
    if isinstance(owner, arith.SelectOp):
        compare = owner.cond.owner
        clamp = (
            isinstance(compare, arith.CmpfOp)
            and compare.predicate.value.data in _ORDERED_PREDICATES
            and owner.rhs in compare.operands
        )
        return [owner.rhs] if clamp else []
    if isinstance(owner, (*_QUIETING_ARITHMETIC, *_NAN_PROPAGATING, math.FmaOp)):
        return list(owner.operands)
    return []


def _check_scalar_cast(op: arith.ExtFOp | arith.TruncFOp) -> None:
    """The casts ew-to-llvm lowers are of one float (a kernel's loops cast an element at a
    time; an f16 or bf16 one may be its i16 bits by now): a vector's failed as an internal
    KeyError."""
    if isinstance(op.input.type, ShapedType):
        raise OpFailure(
            f"ew-to-llvm: '{op.name}' of {op.input.type}: only scalar float casts are lowered",
            op,
        )


@dataclass(frozen=True)
class ExtfToLlvm(RewritePattern):
    """f32 -> f64 with `fpext`; f16 and bf16 (i16 bits) -> f32/f64 with `widen_bits` (quieting a
    NaN except for the `unquieted` widenings, whose users quiet it: `_QuietingUsers`, decided
    before any op is lowered), or f16 -> f32 with `fpext` where `f16c` says the target converts
    it in hardware."""

    f16c: bool = False
    unquieted: frozenset[arith.ExtFOp] = frozenset()

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ExtFOp, rewriter: PatternRewriter) -> None:
        _check_scalar_cast(op)
        if isinstance(op.input.type, Float32Type) or (
            self.f16c and _is_f16_f32_pair(op.input.type, op.result.type)
        ):
            rewriter.replace(op, llvm.FPExtOp(op.input, op.result.type))
            return
        emit = _Emitter()
        bits = op.input
        if isinstance(op.input.type, Float16Type):
            bits = emit(llvm.BitcastOp(op.input, _I16))
        target = FORMATS[type(op.result.type)]
        widen_bits(emit, bits, _format(op.input.type), target, op not in self.unquieted)
        rewriter.replace(op, emit.ops)


@dataclass(frozen=True)
class TruncfToLlvm(RewritePattern):
    """f64 -> f32 with `fptrunc`; f32/f64 -> f16 and bf16 (i16 bits) with `narrow_bits`, or f32
    -> f16 with `fptrunc` where `f16c` says the target converts it in hardware, f32 -> bf16 with
    `narrow_bf16_in_hardware` where `avx512bf16` does."""

    f16c: bool = False
    avx512bf16: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.TruncFOp, rewriter: PatternRewriter) -> None:
        _check_scalar_cast(op)
        if isinstance(op.result.type, Float32Type) or (
            self.f16c and _is_f16_f32_pair(op.input.type, op.result.type)
        ):
            rewriter.replace(op, llvm.FPTruncOp(op.input, op.result.type))
            return
        emit = _Emitter()
        if self.avx512bf16 and isinstance(op.input.type, Float32Type) and _is_bf16(op.result.type):
            narrow_bf16_in_hardware(emit, op.input)
            rewriter.replace(op, emit.ops)
            return
        bits = narrow_bits(emit, op.input, FORMATS[type(op.input.type)], _format(op.result.type))
        if isinstance(op.result.type, Float16Type):
            emit(llvm.BitcastOp(bits, op.result.type))
        rewriter.replace(op, emit.ops)


_MATH_INTRINSICS: dict[type[Operation], str] = {
    math.SqrtOp: "sqrt",
    math.AbsFOp: "fabs",
    math.FloorOp: "floor",
    math.CeilOp: "ceil",
    math.TruncOp: "trunc",
    math.RoundEvenOp: "roundeven",
    math.CopySignOp: "copysign",
    math.FPowIOp: "powi",
}


class MathToLlvm(RewritePattern):
    """The `math` ops left after `ew-expand-math`: exact LLVM intrinsics (`math.fma` rounds
    a * b + c once; `math.fpowi`'s `llvm.powi` by a constant becomes multiplies, each rounding
    once). Their fast-math flags are dropped, which is always safe: xDSL's converter cannot
    attach flags to an intrinsic call."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: math.SqrtOp
        | math.AbsFOp
        | math.FloorOp
        | math.CeilOp
        | math.TruncOp
        | math.RoundEvenOp
        | math.FmaOp
        | math.CopySignOp
        | math.FPowIOp,
        rewriter: PatternRewriter,
    ) -> None:
        if isinstance(op, math.FmaOp):
            _reject_bf16(op, op.result.type)  # (it made an i16 llvm.intr.fma)
            rewriter.replace(op, llvm.FMAOp(op.a, op.b, op.c))
        else:
            rewriter.replace(op, float_intrinsic(op, _MATH_INTRINSICS[type(op)]))


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


def lowering_patterns(
    fastmath: llvm.FastMathAttr,
    f16c: bool,
    unquieted: frozenset[arith.ExtFOp],
    avx512bf16: bool = False,
) -> list[RewritePattern]:
    """ew-to-llvm's patterns, one per op (see `EwToLlvmPass` for the options)."""
    return [
        LoadToLlvm(),
        StoreToLlvm(),
        DimToLlvm(),
        AllocToLlvm(),
        DeallocToLlvm(),
        ViewToLlvm(),
        AlignedPointerToLlvm(),
        CollapseShapeToLlvm(),
        ReturnToLlvm(),
        CallToLlvm(),
        BranchToLlvm(),
        CondBranchToLlvm(),
        ConstantToLlvm(),
        FloatArithToLlvm(fastmath),
        NegToLlvm(fastmath),
        IntegerArithToLlvm(),
        MinMaxToLlvm(),
        CmpfToLlvm(),
        CmpiToLlvm(),
        SelectToLlvm(),
        CastsToLlvm(),
        ExtfToLlvm(f16c, unquieted),
        TruncfToLlvm(f16c, avx512bf16),
        MathToLlvm(),
    ]


def op_types(pattern: RewritePattern) -> tuple[type[Operation], ...] | None:
    """The op types that `pattern` matches, read from its `op_type_rewrite_pattern` (the type
    hint of its op, which that decorator keeps in its closure); None where that is not known."""
    return _class_op_types(type(pattern))


@functools.cache
def _class_op_types(pattern_class: type[RewritePattern]) -> tuple[type[Operation], ...] | None:
    """`op_types` of the patterns of `pattern_class`, read once per class (each compile's
    `OpTypeDispatch` asks for every pattern of each op type it meets: ~460 reads a compile)."""
    method = pattern_class.match_and_rewrite
    cells = dict(zip(method.__code__.co_freevars, method.__closure__ or (), strict=True))
    if "expected_type" not in cells:
        return None
    expected = cells["expected_type"].cell_contents
    return get_args(expected) if get_origin(expected) in (Union, UnionType) else (expected,)


@dataclass
class OpTypeDispatch(GreedyRewritePatternApplier):
    """A `GreedyRewritePatternApplier` (no folding) that tries on an op only the patterns that
    match its type: one lookup per op, where the applier calls each of ew-to-llvm's 23 patterns
    on each of the ~40,000 ops of a program of 10^4 elementwise ops. A pattern whose op types
    `op_types` cannot read is tried on every op."""

    _by_type: dict[type[Operation], list[RewritePattern]] = field(
        default_factory=dict[type[Operation], list[RewritePattern]], init=False
    )

    def patterns_for(self, op_type: type[Operation]) -> list[RewritePattern]:
        """The patterns that may rewrite an op of `op_type`, in order."""
        if op_type not in self._by_type:
            classes = tuple(type(pattern) for pattern in self.rewrite_patterns)
            self._by_type[op_type] = [
                self.rewrite_patterns[index] for index in _matching_patterns(classes, op_type)
            ]
        return self._by_type[op_type]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        assert not self.folding_enabled, "OpTypeDispatch does not fold"
        if self.dce_enabled and is_trivially_dead(op):
            rewriter.erase(op)
            return
        for pattern in self.patterns_for(type(op)):
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return


@functools.cache
def _matching_patterns(
    pattern_classes: tuple[type[RewritePattern], ...], op_type: type[Operation]
) -> tuple[int, ...]:
    """The positions of the patterns of `pattern_classes` that may rewrite an op of `op_type`
    (`OpTypeDispatch.patterns_for`): the same for every compile, whose dispatcher is new."""
    return tuple(
        index
        for index, pattern_class in enumerate(pattern_classes)
        if (types := _class_op_types(pattern_class)) is None or issubclass(op_type, types)
    )


def _declare_callees(module: ModuleOp, uses: set[str]) -> None:
    """Declares the functions of `uses` (the names `module` calls) that the lowering calls
    (`malloc`, `free`, `BF16_HARDWARE_NARROWING`)."""
    signatures = {
        "malloc": llvm.LLVMFunctionType([i64], _PTR),
        "free": llvm.LLVMFunctionType([_PTR], None),
        BF16_HARDWARE_NARROWING: BF16_HARDWARE_SIGNATURE,
    }
    for name, function_type in signatures.items():
        declaration = external_function(name, function_type)
        if name in uses and not declared_already(module, declaration, "ew-to-llvm"):
            module.body.block.insert_op_before(
                declaration, cast(Operation, module.body.block.first_op)
            )


class NamedForLowering(ForLowering):
    """xDSL's `scf.for` lowering; a loop with a `LOOP_ROLE` has its header block (the one that
    compares the index with the bound) named after it (`^head`, `^remainder`), as LLVM IR shows
    it to `xfuse.codegen.native.mark_loops`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        role = op.attributes.get(LOOP_ROLE)
        if isinstance(role, StringAttr):
            op.body.block.name_hint = role.data
        super().match_and_rewrite(op, rewriter)


@dataclass(frozen=True)
class EwToLlvmPass(ModulePass):
    """Lower loops over memrefs (`func`, `scf`, `cf`, `arith`, `math`, `memref`) to `llvm`."""

    name = "ew-to-llvm"

    fastmath: str = "none"
    """Fast-math flags added to every float `addf`/`subf`/`mulf`/`divf`/`negf`: "none", "fast"
    (all flags) or a comma list of LLVM's flags, e.g. "contract" (fused multiply-add) or
    "contract,afn". They are a union with the op's own `fastmath<...>`: an op keeps every flag it
    has and gains the option's (so `fastmath=none`, the default, lowers `fastmath<fast>` as fast
    and an op without flags as IEEE's rounding of each op). `contract` is unsafe: an FMA rounds
    once where the program rounds twice, so it may keep finite what overflows as written (`2 * x
    - x` at 3.4e38 is not inf) and make an element's bits depend on whether it lands in a vector
    or a scalar iteration. Other ops carry no flags into LLVM. `xfuse.compile` gives its flags to
    `ew-expand-math{fastmath}` instead, which keeps them off the approximations' ops."""

    packed: bool = True
    """Also give every public function with a body a packed entry `@<name>.packed(ptr)` taking
    one pointer to its argument words, which the runtime calls (ctypes passes at most 1024
    arguments); off for GPU entries, which the driver launches with their own arguments."""

    f16c: bool = False
    """Convert between f16 and f32 with `fpext`/`fptrunc`, one instruction each on x86 CPUs with
    F16C (`xfuse.compile` sets it where the target CPU has F16C). Off, every f16 and bf16
    conversion is integer code: without F16C, LLVM would call compiler-rt's `__extendhfsf2` and
    `__truncsfhf2`, which the JIT does not resolve. f64 <-> f16 is integer code either way in
    this pass (no instruction rounds f64 to f16 once; xfuse's frontend widens f16 to f64
    through f32, exactly)."""

    avx512bf16: bool = False
    """Round f32 to bf16 with AVX512_BF16's `vcvtneps2bf16` (`narrow_bf16_in_hardware`, to the
    same bits as the integer code; `xfuse.compile` sets it where the target CPU has it and
    AVX512VL, `xfuse.codegen.native.HostCpu.rounds_bf16`).
    The output then calls `xfuse.fptrunc.f32.bf16`, which `xfuse.codegen.native` makes an
    `fptrunc` to `bfloat` (llvmlite has no `bfloat`): only xfuse's own code generation takes it."""

    def __post_init__(self) -> None:
        parse_fastmath(self.fastmath)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        flags = parse_fastmath(self.fastmath)
        check_no_nested_module(op, self.name)
        for function in op.ops:
            if isinstance(function, func.FuncOp):
                types = (*function.function_type.inputs, *function.function_type.outputs)
                for type_ in (t for t in types if isinstance(t, TensorType)):
                    # (ew-bufferize leaves a declaration as it is: it has no body to bufferize)
                    remedy = (
                        "declare it on memrefs, as ew-bufferize's functions take them"
                        if not function.body.blocks
                        else "run ew-bufferize and ew-kernel-to-loops first"
                    )
                    raise OpFailure(
                        f"ew-to-llvm: 'func.func' @{function.sym_name.data} takes or returns "
                        f"{type_}: ew-to-llvm lowers loops over memrefs ({remedy})",
                        function,
                    )
        # xDSL's convert-scf-to-cf, walking backwards: each loop then splits a block with only
        # the ops up to the next (already lowered) loop left to move, near the region's start
        # (forwards, a function of n loops costs O(n^2) in `Block.split_before`). One walk
        # lowers every loop (each is on the walker's list from the start, and lowering a loop
        # moves the loops inside it, it does not erase them): no second walk of the whole
        # program to find nothing left.
        located_walker(
            GreedyRewritePatternApplier([IfLowering(), NamedForLowering()]),
            walk_reverse=True,
            apply_recursively=False,
        ).rewrite_module(op)
        for function in list(op.ops):
            if isinstance(function, func.FuncOp):
                has_entry = self.packed and function.body.blocks and not is_private(function)
                if has_entry:
                    name = function.sym_name.data
                    check_new_symbol(op, packed_entry_name(name), self.name, f"@{name}'s entry")
                lowered = lower_function(function)
                Rewriter.replace_op(function, lowered)
                packed = packed_entry(lowered) if has_entry else None
                if packed is not None:
                    op.body.block.insert_op_after(packed, lowered)
        for function in op.ops:
            for block in list(function.regions[0].blocks)[1:] if function.regions else []:
                for arg in block.args:
                    Rewriter.replace_value_with_new_type(arg, convert_type(arg.type))
        quieting = _QuietingUsers()
        unquieted = frozenset(
            o for o in op.walk() if isinstance(o, arith.ExtFOp) and quieting.is_unquieted(o)
        )
        patterns = lowering_patterns(flags, self.f16c, unquieted, self.avx512bf16)
        # No dead code is left to find: the walk of `convert-scf-to-cf` above erased it (users
        # first, so dead chains go whole), and what is dead since, the casts of unused memref
        # arguments, is erased with the other casts below.
        located_walker(
            OpTypeDispatch(patterns, dce_enabled=False), apply_recursively=False
        ).rewrite_module(op)
        # One walk over the lowered program, not one for each: a leftover op is an error; the
        # casts go, and the functions called are declared.
        casts: list[UnrealizedConversionCastOp] = []
        callees: set[str] = set()
        for lowered in op.walk():
            if isinstance(lowered, UnrealizedConversionCastOp):
                casts.append(lowered)
            elif isinstance(lowered, llvm.CallOp):
                if lowered.callee is not None:
                    callees.add(lowered.callee.string_value())
            elif lowered is not op and not lowered.name.startswith("llvm."):
                raise _no_lowering(lowered)
        for cast_op in casts:
            Rewriter.erase_op(cast_op)
        _declare_callees(op, callees)


def _no_lowering(leftover: Operation) -> OpFailure:
    hint = ""
    if leftover.name.startswith("math."):
        hint = (
            " (ew-expand-math lowers the transcendentals of MATH_FUNCTIONS in "
            "src/xfuse/transforms/expand_math.py; this pass the exact ones of "
            "_MATH_INTRINSICS in src/xfuse/transforms/to_llvm.py)"
        )
    name = op_name(leftover)
    return OpFailure(f"ew-to-llvm: no lowering for '{name}'{hint}", leftover)
