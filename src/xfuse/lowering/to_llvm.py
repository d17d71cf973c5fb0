"""`ew-to-llvm`: `func`/`scf`/`cf`/`arith`/`math`/`memref` -> xDSL's `llvm` dialect.

xDSL has no conversion of these dialects to `llvm` (its JIT shells out to `mlir-opt`), so this is
ours. `scf` goes to `cf` with xDSL's own `convert-scf-to-cf`; the rest is one pattern per op.

Calling convention (the runtime relies on it): every memref argument becomes an `!llvm.ptr` to its
first element followed by one `i64` per dynamic (`?`) dimension of its type; arrays are
C-contiguous. No alignment is promised beyond the element's (numpy buffers are often only 16-byte
aligned). Element types: `index` -> i64; bf16 is stored as i16 (`arith.extf` shifts it into the
high half of an f32, `arith.truncf` rounds to nearest even); f16, f32, f64 are LLVM's own.
`memref.view` of a byte buffer is its pointer moved on by the byte shift (`ew-workspace` places
the pipeline's temporaries so); a `memref.alloc`/`dealloc` left in the IR calls `malloc`/`free`.

While patterns run, a converted memref is an `builtin.unrealized_conversion_cast` of its pointer
and dynamic sizes to the memref type; memref ops read the pieces from it, and the casts are erased
at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects import arith, cf, func, llvm, math, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter
from xdsl.transforms.convert_scf_to_cf import ForLowering, IfLowering
from xdsl.utils.exceptions import DiagnosticException

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


def parse_fastmath(flags: str) -> llvm.FastMathAttr:
    """`"contract,afn"` -> the attribute; `"none"` or `""` -> no flags."""
    names = [f.strip() for f in flags.split(",") if f.strip() and f.strip() != "none"]
    try:
        return llvm.FastMathAttr(tuple(llvm.FastMathFlag(name) for name in names))
    except ValueError:
        valid = ", ".join(flag.value for flag in llvm.FastMathFlag)
        raise DiagnosticException(
            f"ew-to-llvm: bad fastmath flags {flags!r}: expected 'none' or a list of {valid}"
        ) from None


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
        raise DiagnosticException(
            f"ew-to-llvm: memref {value} does not come from an argument or alloc"
        )
    pointer, *dynamic = cast_op.inputs
    dynamic_sizes = iter(dynamic)
    shape = cast(MemRefType[Attribute], value.type).get_shape()
    sizes: list[SSAValue | int] = [next(dynamic_sizes) if d == DYNAMIC_INDEX else d for d in shape]
    return Descriptor(pointer, sizes)


def memref_from_pieces(pointer: SSAValue, sizes: Sequence[SSAValue], type_: Attribute) -> Operation:
    return UnrealizedConversionCastOp.get([pointer, *sizes], [type_])


def _constant(value: int, ops: list[Operation]) -> SSAValue:
    op = llvm.ConstantOp(IntegerAttr(value, i64), i64)
    ops.append(op)
    return op.result


def _size_value(size: SSAValue | int, ops: list[Operation]) -> SSAValue:
    return _constant(size, ops) if isinstance(size, int) else size


def _element_pointer(
    value: SSAValue, indices: Sequence[SSAValue], ops: list[Operation]
) -> SSAValue:
    """The address of `value[indices]`, row-major (ops to insert are appended to `ops`)."""
    pieces = descriptor(value)
    if not indices:
        return pieces.pointer
    linear = indices[0]
    for index, size in zip(indices[1:], pieces.sizes[1:], strict=True):
        scaled = llvm.MulOp(linear, _size_value(size, ops))
        offset = llvm.AddOp(scaled.res, index)
        ops += [scaled, offset]
        linear = offset.res
    element = convert_type(cast(MemRefType[Attribute], value.type).get_element_type())
    gep = llvm.GEPOp.from_mixed_indices(pieces.pointer, [linear], element, inbounds=True)
    ops.append(gep)
    return gep.result


class LoadToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.LoadOp, rewriter: PatternRewriter) -> None:
        ops: list[Operation] = []
        pointer = _element_pointer(op.memref, op.indices, ops)
        rewriter.replace(op, [*ops, llvm.LoadOp(pointer, convert_type(op.res.type))])


class StoreToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.StoreOp, rewriter: PatternRewriter) -> None:
        ops: list[Operation] = []
        pointer = _element_pointer(op.memref, op.indices, ops)
        rewriter.replace(op, [*ops, llvm.StoreOp(op.value, pointer)])


def _static_index(value: SSAValue) -> int:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp | llvm.ConstantOp) and isinstance(
        owner.value, IntegerAttr
    ):
        return owner.value.value.data
    raise DiagnosticException(f"ew-to-llvm: memref.dim needs a constant index, got {value}")


class DimToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DimOp, rewriter: PatternRewriter) -> None:
        size = descriptor(op.source).sizes[_static_index(op.index)]
        if isinstance(size, int):
            rewriter.replace(op, llvm.ConstantOp(IntegerAttr(size, i64), i64))
        else:
            rewriter.replace(op, [], [size])


class AllocToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter) -> None:
        type_ = cast(MemRefType[Attribute], op.memref.type)
        ops: list[Operation] = []
        dynamic = iter(op.dynamic_sizes)
        element_bytes = _byte_width(type_.get_element_type())
        total = _constant(element_bytes, ops)
        for size in type_.get_shape():
            product = llvm.MulOp(
                total, next(dynamic) if size == DYNAMIC_INDEX else _constant(size, ops)
            )
            ops.append(product)
            total = product.res
        call = llvm.CallOp("malloc", total, return_type=_PTR)
        rewriter.replace(
            op, [*ops, call, memref_from_pieces(call.returned, op.dynamic_sizes, type_)]
        )


class ViewToLlvm(RewritePattern):
    """A view of a byte buffer (a temporary in the workspace): the pointer `byte_shift` bytes on."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.ViewOp, rewriter: PatternRewriter) -> None:
        start = llvm.GEPOp.from_mixed_indices(
            descriptor(op.source).pointer, [op.byte_shift], _I8, inbounds=True
        )
        rewriter.replace(op, [start, memref_from_pieces(start.result, op.sizes, op.result.type)])


class DeallocToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DeallocOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.CallOp("free", descriptor(op.memref).pointer))


def _byte_width(element: Attribute) -> int:
    widths = {Float16Type: 2, BFloat16Type: 2, Float32Type: 4, Float64Type: 8}
    return widths[type(element)]


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


def lower_function(op: func.FuncOp) -> llvm.FuncOp:
    """The `llvm.func` of a `func.func`: memref arguments expanded, body moved over."""
    inputs = [t for type_ in op.function_type.inputs for t in native_argument_types(type_)]
    outputs = [convert_type(t) for t in op.function_type.outputs]
    if len(outputs) > 1:
        raise DiagnosticException(f"ew-to-llvm: '{op.sym_name.data}' returns more than one value")
    function_type = llvm.LLVMFunctionType(inputs, outputs[0] if outputs else None)
    body = op.detach_region(op.body)
    if body.blocks:
        _expand_entry_arguments(cast(Block, body.first_block))
    return external_function(op.sym_name.data, function_type, body)


def packed_entry_name(name: str) -> str:
    """The symbol of `name`'s packed entry (see `packed_entry`)."""
    return f"{name}.packed"


def packed_entry(function: llvm.FuncOp) -> llvm.FuncOp:
    """A function taking one pointer to an array of 8-byte words, one per native argument of
    `function` (a pointer or an i64), that calls `function` with them and returns its result.

    Callers use it instead of `function`, so any number of arguments fits in a call (a C call
    through ctypes takes at most 1024); O3 inlines `function` into it.
    """
    function_type = function.function_type
    words = Block(arg_types=[_PTR])
    arguments = []
    for position, type_ in enumerate(function_type.inputs):
        if type_ not in (_PTR, i64):
            raise DiagnosticException(
                f"ew-to-llvm: '{function.sym_name.data}' takes a {type_} argument: a packed "
                "entry passes only pointers and i64 sizes"
            )
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


def _expand_entry_arguments(entry: Block) -> None:
    for arg in list(entry.args):
        if not isinstance(arg.type, MemRefType):
            Rewriter.replace_value_with_new_type(arg, convert_type(arg.type))
            continue
        position = arg.index
        pieces = [
            entry.insert_arg(type_, position + offset)
            for offset, type_ in enumerate(native_argument_types(arg.type))
        ]
        pieces[0].name_hint = arg.name_hint
        cast_op = memref_from_pieces(pieces[0], pieces[1:], arg.type)
        entry.insert_op_before(cast_op, entry.first_op) if entry.first_op else entry.add_op(cast_op)
        arg.replace_all_uses_with(cast_op.results[0])
        entry.erase_arg(arg)


class ReturnToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.ReturnOp(op.arguments[0] if op.arguments else None))


class CallToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.CallOp, rewriter: PatternRewriter) -> None:
        result_types = [convert_type(t) for t in op.result_types]
        call = llvm.CallOp(
            op.callee, *op.arguments, return_type=result_types[0] if result_types else None
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
        if isinstance(value, IntegerAttr):
            value = IntegerAttr(value.value.data, cast(IntegerType, type_))
        elif not isinstance(value, FloatAttr) or isinstance(op.result.type, BFloat16Type):
            raise DiagnosticException(f"ew-to-llvm: unsupported constant {op}")
        rewriter.replace(op, llvm.ConstantOp(value, type_))


_FLOAT_BINARY: dict[type[Operation], type[llvm.AbstractFloatArithOp]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}


@dataclass(frozen=True)
class FloatArithToLlvm(RewritePattern):
    fastmath: llvm.FastMathAttr

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: arith.AddfOp | arith.SubfOp | arith.MulfOp | arith.DivfOp,
        rewriter: PatternRewriter,
    ) -> None:
        rewriter.replace(op, _FLOAT_BINARY[type(op)](op.lhs, op.rhs, self.fastmath))


@dataclass(frozen=True)
class NegToLlvm(RewritePattern):
    fastmath: llvm.FastMathAttr

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.NegfOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.FNegOp(op.operand, self.fastmath))


_INTEGER_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
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
        | arith.ShLIOp
        | arith.ShRSIOp
        | arith.ShRUIOp
        | arith.AndIOp
        | arith.OrIOp
        | arith.XOrIOp,
        rewriter: PatternRewriter,
    ) -> None:
        llvm_type = _INTEGER_BINARY[type(op)]
        rewriter.replace(op, llvm_type(op.lhs, op.rhs))  # pyright: ignore[reportCallIssue]


class MinMaxToLlvm(RewritePattern):
    """NaN-propagating `maximumf`/`minimumf` -> `llvm.maximum`/`llvm.minimum` (vectorizable)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.MaximumfOp | arith.MinimumfOp, rewriter: PatternRewriter
    ) -> None:
        kind = "maximum" if isinstance(op, arith.MaximumfOp) else "minimum"
        suffix = {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64"}[type(op.result.type)]
        rewriter.replace(
            op, llvm.CallIntrinsicOp(f"llvm.{kind}.{suffix}", [op.lhs, op.rhs], [op.result.type])
        )


class CmpfToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpfOp, rewriter: PatternRewriter) -> None:
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        rewriter.replace(op, llvm.FCmpOp(op.lhs, op.rhs, predicate))


class CmpiToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter) -> None:
        name = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        predicate = list(llvm.ICmpPredicateFlag).index(llvm.ICmpPredicateFlag(name))
        rewriter.replace(op, llvm.ICmpOp(op.lhs, op.rhs, IntegerAttr(predicate, i64)))


class SelectToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.SelectOp(op.cond, op.lhs, op.rhs))


class CastsToLlvm(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.BitcastOp | arith.SIToFPOp | arith.IndexCastOp, rewriter: PatternRewriter
    ) -> None:
        source, result = op.operands[0], op.results[0]
        if isinstance(op, arith.SIToFPOp):
            rewriter.replace(op, llvm.SIToFPOp(source, result.type))
        elif isinstance(op, arith.BitcastOp):
            rewriter.replace(op, llvm.BitcastOp(source, result.type))
        elif convert_type(source.type) == convert_type(result.type):
            rewriter.replace(op, [], [source])
        else:
            raise DiagnosticException(f"ew-to-llvm: unsupported cast {op}")


class ExtfToLlvm(RewritePattern):
    """f16/f32 -> wider with `fpext`; bf16 -> f32 by moving its 16 bits into the high half."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ExtFOp, rewriter: PatternRewriter) -> None:
        # The operand may already be lowered: bf16 then arrives as its i16 bits.
        if not isinstance(op.input.type, BFloat16Type | IntegerType):
            rewriter.replace(op, llvm.FPExtOp(op.input, op.result.type))
            return
        if not isinstance(op.result.type, Float32Type):
            raise DiagnosticException(f"ew-to-llvm: bf16 widens only to f32: {op}")
        wide = llvm.ZExtOp(op.input, _I32)
        sixteen = llvm.ConstantOp(IntegerAttr(16, _I32), _I32)
        high = llvm.ShlOp(wide.res, sixteen.result)
        rewriter.replace(op, [wide, sixteen, high, llvm.BitcastOp(high.res, op.result.type)])


class TruncfToLlvm(RewritePattern):
    """f64/f32 -> narrower with `fptrunc` (round to nearest even); f32 -> bf16 in integer ops."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.TruncFOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.result.type, BFloat16Type):
            rewriter.replace(op, llvm.FPTruncOp(op.input, op.result.type))
            return
        if not isinstance(op.input.type, Float32Type):
            raise DiagnosticException(f"ew-to-llvm: bf16 is made only from f32: {op}")
        ops: list[Operation] = []

        def constant(value: int) -> SSAValue:
            ops.append(c := llvm.ConstantOp(IntegerAttr(value, _I32), _I32))
            return c.result

        def emit(new: Operation) -> SSAValue:
            ops.append(new)
            return new.results[0]

        bits = emit(llvm.BitcastOp(op.input, _I32))
        upper = emit(llvm.LShrOp(bits, constant(16)))
        # Round to nearest even: add 0x7fff plus the lowest kept bit, then keep the top half.
        odd = emit(llvm.AndOp(upper, constant(1)))
        rounded = emit(llvm.AddOp(bits, emit(llvm.AddOp(odd, constant(0x7FFF)))))
        rounded_upper = emit(llvm.LShrOp(rounded, constant(16)))
        # NaN keeps its sign and stays a (quiet) NaN instead of rounding into infinity.
        quiet_nan = emit(llvm.OrOp(upper, constant(0x40)))
        is_nan = emit(llvm.FCmpOp(op.input, op.input, "uno"))
        chosen = emit(llvm.SelectOp(is_nan, quiet_nan, rounded_upper))
        rewriter.replace(op, [*ops, llvm.TruncOp(chosen, _I16)])


class MathToLlvm(RewritePattern):
    """The `math` ops left after `ew-expand-math`: exact LLVM intrinsics."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: math.SqrtOp | math.AbsFOp | math.FloorOp, rewriter: PatternRewriter
    ) -> None:
        if isinstance(op, math.SqrtOp):
            rewriter.replace(op, llvm.FSqrtOp(op.operand))
        elif isinstance(op, math.AbsFOp):
            rewriter.replace(op, llvm.FAbsOp(op.operand, op.result.type))
        else:
            rewriter.replace(op, llvm.FFloorOp(op.operand))


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


def _declare_allocator(module: ModuleOp) -> None:
    declared = {op.sym_name.data for op in module.ops if isinstance(op, llvm.FuncOp)}
    uses = {
        op.callee.string_value()
        for op in module.walk()
        if isinstance(op, llvm.CallOp) and op.callee is not None
    }
    signatures = {
        "malloc": llvm.LLVMFunctionType([i64], _PTR),
        "free": llvm.LLVMFunctionType([_PTR], None),
    }
    for name, function_type in signatures.items():
        if name in uses and name not in declared:
            declaration = external_function(name, function_type)
            module.body.block.insert_op_before(
                declaration, cast(Operation, module.body.block.first_op)
            )


@dataclass(frozen=True)
class EwToLlvmPass(ModulePass):
    """Lower loops over memrefs (`func`, `scf`, `cf`, `arith`, `math`, `memref`) to `llvm`."""

    name = "ew-to-llvm"

    fastmath: str = "contract"
    """Fast-math flags on float arithmetic, e.g. "contract" (fused multiply-add), "none", "fast"."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        flags = parse_fastmath(self.fastmath)
        # xDSL's convert-scf-to-cf, walking backwards: each loop then splits a block with only
        # the ops up to the next (already lowered) loop left to move, near the region's start
        # (forwards, a function of n loops costs O(n^2) in `Block.split_before`).
        PatternRewriteWalker(
            GreedyRewritePatternApplier([IfLowering(), ForLowering()]), walk_reverse=True
        ).rewrite_module(op)
        for function in list(op.ops):
            if isinstance(function, func.FuncOp):
                lowered = lower_function(function)
                Rewriter.replace_op(function, lowered)
                if lowered.body.blocks:
                    op.body.block.insert_op_after(packed_entry(lowered), lowered)
        for function in op.ops:
            for block in list(function.regions[0].blocks)[1:] if function.regions else []:
                for arg in block.args:
                    Rewriter.replace_value_with_new_type(arg, convert_type(arg.type))
        patterns: list[RewritePattern] = [
            LoadToLlvm(),
            StoreToLlvm(),
            DimToLlvm(),
            AllocToLlvm(),
            DeallocToLlvm(),
            ViewToLlvm(),
            ReturnToLlvm(),
            CallToLlvm(),
            BranchToLlvm(),
            CondBranchToLlvm(),
            ConstantToLlvm(),
            FloatArithToLlvm(flags),
            NegToLlvm(flags),
            IntegerArithToLlvm(),
            MinMaxToLlvm(),
            CmpfToLlvm(),
            CmpiToLlvm(),
            SelectToLlvm(),
            CastsToLlvm(),
            ExtfToLlvm(),
            TruncfToLlvm(),
            MathToLlvm(),
        ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns), apply_recursively=False
        ).rewrite_module(op)
        leftover = next(
            (
                o
                for o in op.walk()
                if o is not op
                and not o.name.startswith("llvm.")
                and not isinstance(o, UnrealizedConversionCastOp)
            ),
            None,
        )
        if leftover is not None:
            raise DiagnosticException(f"ew-to-llvm: no lowering for '{leftover.name}':\n{leftover}")
        for cast_op in [o for o in op.walk() if isinstance(o, UnrealizedConversionCastOp)]:
            Rewriter.erase_op(cast_op)
        _declare_allocator(op)
