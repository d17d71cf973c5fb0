"""`ew-to-nvvm{math=approx|ptx-approx}`: each bufferized `ew.kernel` -> one GPU entry function.

The GPU counterpart of `ew-workspace` + `ew-kernel-to-loops`, run on the output of `ew-bufferize`.
A separate pass rather than an option of `ew-to-llvm`: the two targets differ in structure (the
host function becomes launches, each kernel its own function), not in how scalars lower, so the
GPU pipeline reuses `ew-expand-math{math=approx}` and `ew-to-llvm` (without the packed entries
the CPU runtime calls) after this pass:

    ew-bufferize -> ew-to-nvvm -> ew-expand-math{library=libdevice} -> ew-to-llvm{packed=false}
                 -> NVPTX, with libdevice linked in

Kernel `i` of host function `@f` becomes `func.func @f_kernel{i}` whose arguments are one
`!llvm.ptr` per operand (inputs, then outputs; device global memory, left in the generic address
space: NVPTX marks a kernel's pointer parameters global and infers `ld.global`/`st.global`), then
one `i64` per dynamic dimension of the iteration space (the first output's shape). The host
function is erased: its launch sequence (which kernel reads and writes which buffer, and the
temporaries to allocate) is `launch_sequence(bufferized module)`, which the runtime reads (a
`xfuse.transforms.launches.LaunchSequence`: plain data, which a disk-cache hit loads without xDSL).

The body is a grid-stride loop over 64-bit linear indices, the thread's first index
`ctaid.x * ntid.x + tid.x` and the stride `nctaid.x * ntid.x` read with the
`llvm.nvvm.read.ptx.sreg.*` intrinsics, in two parts:

- a vector loop, when every vector-accessed pointer is aligned to the vector (checked at run time,
  uniformly for the launch): each thread handles `V` consecutive elements, `V` = 16 bytes over the
  widest element (4 for f32, 8 for bf16/f16 alone, 2 for f64), so the widest operand moves with
  128-bit loads and stores (`ld.global.v4.b32`). Operands of the iteration's shape are loaded
  whole; a broadcast operand that varies along the last run of dims (below; a bias `b[d]` under
  `x[t, d]`) too, at the index of the first element, when that run's size is a multiple of `V`
  (all `V` elements then share a row); one broadcast along the last run is loaded once and used
  by every lane.
- a scalar loop over what is left (the tail, or everything when the vector loop does not apply).

Each lane runs its own copy of the kernel's scalar region (f16/bf16 operands are stored narrow
and computed in f32, as the region says; bf16 travels as its i16 bits, as in `ew-to-llvm`).
Broadcast operands are indexed like `ew-kernel-to-loops` does (right-aligned, index 0 where the
operand's size is a static 1), on the same runs of dims (`coalesced_axes`: neighbouring dims that
every input reads alike are one): each run's index that a broadcast operand reads comes from the
linear index (`delinearized`: a division by the size of each run after the outermost one read, a
remainder for each run read but the outermost of all), a row `[m, k]` under `[n, m, k]` one
remainder by m * k.

`math=approx` leaves f32 transcendentals to `ew-expand-math`'s vectorizable approximations (the
CPU's, same errors). `math=ptx-approx` uses the GPU's own instructions where one exists: `tanh`
is `tanh.approx.f32` (relative error about 2^-11) and `exp(x)` is `ex2.approx.f32(x * log2(e))`;
other functions use the approximations. f64 transcendentals are left to
`ew-expand-math{library=libdevice}`: there is no libm on the GPU, and they become calls to NVIDIA's
libdevice (`__nv_exp`, `__nv_tanh`, ...; pow by a constant 1, 2, 3, 4, -1 or +-1/2 becomes
multiplies and square roots instead), which `xfuse.codegen.ptx` links into the PTX.
"""

from __future__ import annotations

import math as pymath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, math, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    Float32Type,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import DiagnosticException

from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of, element_bytes
from xfuse.dialects.failure import OpFailure, check_one_block
from xfuse.transforms.kernel_to_loops import (
    coalesced_axes,
    collapsed_shape,
    delinearized,
    input_indices,
    read_runs,
    size_product,
)
from xfuse.transforms.launches import Launch, LaunchSequence, Temporary
from xfuse.transforms.options import GpuMath, check_choice
from xfuse.transforms.pipeline import only_function
from xfuse.transforms.rewriting import locate_unlocated, located_walker
from xfuse.transforms.to_llvm import convert_type, has_identity_layout

VECTOR_BYTES = 16
"""The widest global load and store of one thread (`ld.global.v4.b32`)."""

_PTR = llvm.LLVMPointerType()
_LOG2_E = 1 / pymath.log(2)


_NOT_IN_PTX_IDENTIFIER = re.compile(r"^[0-9]|[^A-Za-z0-9_]")
"""A character `entry_name` escapes: a leading digit, or any but ASCII letters, digits, `_`."""


def entry_name(function: str, index: int) -> str:
    """The GPU entry of the `index`-th `ew.kernel` of host function `function`, a PTX
    identifier: a character of the name that is none (`.`, `-`, non-ASCII, a leading digit, and
    `$`, which escapes) as `$<hex>$` (`@"a-b"` gives `a$2d$b_kernel0`), one name to one entry
    (NVPTX aborted the process at `@"a-b"`, and wrote `.entry a.b_kernel0`, which ptxas
    refuses)."""
    escaped = _NOT_IN_PTX_IDENTIFIER.sub(lambda match: f"${ord(match[0]):x}$", function)
    return f"{escaped}_kernel{index}"


# ---------------------------------------------------------------------------------------------
# The launch sequence (read by the runtime from the bufferized module)
# ---------------------------------------------------------------------------------------------


def launch_sequence(module: ModuleOp) -> LaunchSequence:
    """What the host function of a bufferized module does, in order, as launches."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        names = (
            ", ".join(
                f"'{op.name}' @{op.sym_name.data}"
                if isinstance(op, func.FuncOp)
                else f"'{op.name}'"
                for op in module.ops
            )
            or "nothing"
        )
        raise DiagnosticException(
            f"ew-to-nvvm: it takes one 'func.func' of bufferized kernels (the output of "
            f"ew-bufferize); the module holds {names}"
        )
    (function,) = functions
    check_one_block(function, "ew-to-nvvm")
    buffers: dict[SSAValue, int] = {arg: arg.index for arg in function.body.block.args}
    temporaries: list[Temporary] = []
    launches: list[Launch] = []
    for op in function.body.block.ops:
        if isinstance(op, memref.AllocOp):
            buffers[op.memref] = len(function.body.block.args) + len(temporaries)
            temporaries.append(_temporary(op))
        elif isinstance(op, ew.KernelOp):
            if not op.is_bufferized:
                raise OpFailure(
                    "ew-to-nvvm: 'ew.kernel' must be bufferized first (run ew-bufferize)", op
                )
            laid_out = [v for v in (*op.inputs, *op.outputs) if not has_identity_layout(v.type)]
            if laid_out:
                raise OpFailure(
                    f"ew-to-nvvm: '{op.name}' on {laid_out[0].type}: only the identity layout "
                    "has a GPU lowering (its entries index every buffer row-major)",
                    op,
                )
            operands = tuple(buffers[value] for value in (*op.inputs, *op.outputs))
            entry = entry_name(function.sym_name.data, len(launches))
            iteration = ew.shape_of(op.outputs[0])
            dynamic = tuple(axis for axis, size in enumerate(iteration) if size == DYNAMIC_INDEX)
            launches.append(Launch(entry, operands, len(op.inputs), dynamic))
        elif op.dialect_name() == "ew":
            raise OpFailure(
                f"ew-to-nvvm: '{op.name}' is not inside an 'ew.kernel' on buffers (run ew-fuse "
                "and ew-bufferize first)",
                op,
            )
        elif not isinstance(op, memref.DeallocOp | memref.DimOp | arith.ConstantOp | func.ReturnOp):
            raise OpFailure(f"ew-to-nvvm: no GPU lowering for '{op.name}'", op)
    function_type = function.function_type
    unbufferized = [
        t for t in (*function_type.inputs, *function_type.outputs) if not isinstance(t, MemRefType)
    ]
    if unbufferized or function_type.outputs.data:
        # (its ops said what to run first; one that copies an input to its output has none,
        # and was erased with nothing in its place)
        what = f"takes or returns {unbufferized[0]}" if unbufferized else "returns values"
        tensors = any(isinstance(t, TensorType) for t in unbufferized)
        raise OpFailure(
            f"ew-to-nvvm: '{function.name}' @{function.sym_name.data} {what}: it lowers a "
            "bufferized function (memref arguments, results written into them)"
            + (": run ew-bufferize first" if tensors else ""),
            function,
        )
    return LaunchSequence(tuple(temporaries), tuple(launches))


def _temporary(op: memref.AllocOp) -> Temporary:
    type_ = cast(MemRefType[Attribute], op.memref.type)
    dynamic = iter(op.dynamic_sizes)
    shape: list[int | tuple[int, int]] = []
    for size in type_.get_shape():
        if size != DYNAMIC_INDEX:
            shape.append(size)
            continue
        dim = next(dynamic).owner
        axis_op = dim.index.owner if isinstance(dim, memref.DimOp) else None
        if not (
            isinstance(dim, memref.DimOp)
            and isinstance(dim.source, BlockArgument)
            and isinstance(axis_op, arith.ConstantOp)
        ):
            raise OpFailure(
                "ew-to-nvvm: a temporary's size must be an argument's, at a constant axis", op
            )
        axis = axis_op.value
        shape.append((dim.source.index, cast(IntegerAttr, axis).value.data))
    return Temporary(dtype_of(type_.get_element_type()), tuple(shape))


# ---------------------------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------------------------


class _Emitter:
    """Appends llvm/arith ops at a builder's insertion point and returns their results."""

    def __init__(self, builder: Builder):
        self.builder = builder

    def __call__(self, op: Operation) -> SSAValue:
        return self.builder.insert(op).results[0]

    def i64(self, value: int) -> SSAValue:
        return self(llvm.ConstantOp(IntegerAttr(value, i64), i64))

    def special_register(self, name: str) -> SSAValue:
        value = self(llvm.CallIntrinsicOp(f"llvm.nvvm.read.ptx.sreg.{name}.x", [], [i32]))
        return self(llvm.ZExtOp(value, i64))


@dataclass(frozen=True)
class _Operand:
    pointer: SSAValue
    shape: tuple[int, ...]
    """Its shape in runs of dims (`collapsed_shape`)."""
    storage: Attribute
    """The LLVM type of an element in memory (bf16 -> i16)."""
    element: Attribute
    """The type the kernel's region sees."""

    def is_full(self, run_shape: Sequence[int]) -> bool:
        return len(self.shape) == len(run_shape) and not any(
            size == 1 and full != 1 for size, full in zip(self.shape, run_shape, strict=True)
        )

    def varies_along_last_run(self, run_shape: Sequence[int]) -> bool:
        return bool(self.shape) and not (self.shape[-1] == 1 and run_shape[-1] != 1)


class _EntryBuilder:
    """Builds the entry of one kernel: see the module docstring."""

    def __init__(self, kernel: ew.KernelOp, name: str):
        self.kernel = kernel
        shape = ew.shape_of(kernel.outputs[0])
        # The iteration space and every operand seen in runs of dims, each run one axis
        # (`coalesced_axes`): fewer divisions of the linear index, a row under [n, m, k] one
        # remainder by m * k.
        runs = coalesced_axes(kernel)
        self.run_shape = collapsed_shape(shape, runs, len(shape))
        types = [cast(MemRefType[Attribute], v.type) for v in (*kernel.inputs, *kernel.outputs)]
        dynamic_count = sum(1 for size in shape if size == DYNAMIC_INDEX)
        block = Block(arg_types=[_PTR] * len(types) + [i64] * dynamic_count)
        self.entry = func.FuncOp(name, FunctionType.from_lists(block.arg_types, []), Region(block))
        emit = self.emit = _Emitter(Builder(InsertPoint.at_end(block)))
        dynamic = iter(block.args[len(types) :])
        sizes = [next(dynamic) if size == DYNAMIC_INDEX else size for size in shape]
        self.run_sizes = [
            size_product(emit.builder, [sizes[axis] for axis in run], i64) for run in runs
        ]
        self.operands = [
            _Operand(
                pointer,
                collapsed_shape(t.get_shape(), runs, len(shape)),
                convert_type(t.get_element_type()),
                t.get_element_type(),
            )
            for pointer, t in zip(block.args[: len(types)], types, strict=True)
        ]
        widest = max(element_bytes(o.storage) for o in self.operands)
        self.lanes = VECTOR_BYTES // widest if self.run_shape else 1

    def build(self) -> func.FuncOp:
        emit = self.emit
        total = size_product(emit.builder, self.run_sizes, i64)
        block_size = emit.special_register("ntid")
        block_start = emit(llvm.MulOp(emit.special_register("ctaid"), block_size))
        first = emit(llvm.AddOp(block_start, emit.special_register("tid")))
        stride = emit(llvm.MulOp(emit.special_register("nctaid"), block_size))
        start = first
        if self.lanes > 1:
            start = emit(llvm.AddOp(self._vector_loop(total, first, stride), first))
        body = self._loop(start, total, stride)
        values = self._load_scalars(body, body.args[0])
        results = self._region(body, values)
        for operand, value in zip(self.operands[len(self.kernel.inputs) :], results, strict=True):
            self._store(body, operand, value, body.args[0])
        emit.builder.insert(func.ReturnOp())
        return self.entry

    def _loop(self, start: SSAValue, stop: SSAValue, step: SSAValue) -> Block:
        body = Block([scf.YieldOp()], arg_types=[i64])
        self.emit.builder.insert(scf.ForOp(start, stop, step, [], body))
        return body

    def _vector_loop(self, total: SSAValue, first: SSAValue, stride: SSAValue) -> SSAValue:
        """The vector loop; returns the linear index where the scalar loop starts."""
        emit, lanes = self.emit, self.lanes
        vectorized = [o for o in self.operands if o.varies_along_last_run(self.run_shape)]
        zero, ok = emit.i64(0), None
        for operand in vectorized:
            misaligned = emit(
                llvm.AndOp(
                    emit(llvm.PtrToIntOp(operand.pointer)),
                    emit.i64(lanes * element_bytes(operand.storage) - 1),
                )
            )
            aligned = emit(llvm.ICmpOp(misaligned, zero, _predicate("eq")))
            ok = aligned if ok is None else emit(llvm.AndOp(ok, aligned))
        if any(not o.is_full(self.run_shape) for o in self.operands):
            row = emit(llvm.URemOp(self.run_sizes[-1], emit.i64(lanes)))
            whole_rows = emit(llvm.ICmpOp(row, zero, _predicate("eq")))
            ok = whole_rows if ok is None else emit(llvm.AndOp(ok, whole_rows))
        vector_count = emit(llvm.UDivOp(total, emit.i64(lanes)))
        if ok is not None:
            vector_count = emit(llvm.SelectOp(ok, vector_count, zero))
        body = self._loop(first, vector_count, stride)
        inner = _Emitter(Builder(InsertPoint.before(cast(Operation, body.last_op))))
        base = inner(llvm.MulOp(body.args[0], inner.i64(lanes)))
        per_lane: list[list[SSAValue]] = [[] for _ in range(lanes)]
        run_indices = self._run_indices(inner, base, zero)
        for operand in self.operands[: len(self.kernel.inputs)]:
            index = self._index(inner, operand, base, run_indices, zero)
            if not operand.varies_along_last_run(self.run_shape):
                value = self._load(inner, operand, operand.storage, index)
                value = self._to_region(inner, operand, value)
                for lane in per_lane:
                    lane.append(value)
                continue
            vector_type = VectorType(operand.storage, [lanes])
            vector = self._load(inner, operand, vector_type, index)
            for k, lane in enumerate(per_lane):
                mask = DenseArrayBase.from_list(i32, [k])
                one = VectorType(operand.storage, [1])
                piece = inner(llvm.ShuffleVectorOp(vector, vector, mask, one))
                lane.append(
                    self._to_region(inner, operand, inner(llvm.BitcastOp(piece, one.element_type)))
                )
        results = [self._region(body, values) for values in per_lane]
        for position, operand in enumerate(self.operands[len(self.kernel.inputs) :]):
            vector_type = VectorType(operand.storage, [lanes])
            vector = inner(llvm.UndefOp(vector_type))
            for k, lane_results in enumerate(results):
                stored = self._to_storage(inner, operand, lane_results[position])
                lane = inner(llvm.ConstantOp(IntegerAttr(k, i32), i32))
                vector = inner(llvm.InsertElementOp(vector, stored, lane))
            pointer = inner(
                llvm.GEPOp.from_mixed_indices(
                    operand.pointer, [base], operand.storage, inbounds=True
                )
            )
            alignment = lanes * element_bytes(operand.storage)
            inner.builder.insert(llvm.StoreOp(vector, pointer, alignment=alignment))
        return self.emit(llvm.MulOp(vector_count, self.emit.i64(lanes)))

    def _run_indices(self, emit: _Emitter, linear: SSAValue, zero: SSAValue) -> list[SSAValue]:
        """Each run's index at a linear index where a broadcast operand reads that run, else
        `zero` (no index at all where no broadcast operand reads a run)."""
        broadcast = (o.shape for o in self.operands if not o.is_full(self.run_shape))
        wanted = read_runs(broadcast, len(self.run_sizes))
        if not wanted:
            return []
        indices = delinearized(emit.builder, linear, self.run_sizes, wanted)
        return [indices.get(run, zero) for run in range(len(self.run_sizes))]

    def _index(
        self,
        emit: _Emitter,
        operand: _Operand,
        linear: SSAValue,
        run_indices: Sequence[SSAValue],
        zero: SSAValue,
    ) -> SSAValue:
        """An operand's linear index at the iteration's `linear` (`_run_indices`)."""
        if operand.is_full(self.run_shape):
            return linear
        indices = input_indices(operand.shape, run_indices, zero)
        offset = len(self.run_sizes) - len(operand.shape)
        result: SSAValue | None = None
        for run, index in enumerate(indices):
            if result is None:
                result = index
                continue
            size = self.run_sizes[offset + run] if operand.shape[run] != 1 else emit.i64(1)
            result = emit(llvm.AddOp(emit(llvm.MulOp(result, size)), index))
        return result if result is not None else zero

    def _load(
        self, emit: _Emitter, operand: _Operand, type_: Attribute, index: SSAValue
    ) -> SSAValue:
        pointer = emit(
            llvm.GEPOp.from_mixed_indices(operand.pointer, [index], operand.storage, inbounds=True)
        )
        alignment = element_bytes(operand.storage) * (
            type_.get_shape()[0] if isinstance(type_, VectorType) else 1
        )
        return emit(llvm.LoadOp(pointer, type_, alignment=alignment))

    def _to_region(self, emit: _Emitter, operand: _Operand, value: SSAValue) -> SSAValue:
        if operand.storage == operand.element:
            return value
        return emit(arith.BitcastOp(value, operand.element))

    def _to_storage(self, emit: _Emitter, operand: _Operand, value: SSAValue) -> SSAValue:
        if operand.storage == operand.element:
            return value
        return emit(arith.BitcastOp(value, operand.storage))

    def _load_scalars(self, body: Block, linear: SSAValue) -> list[SSAValue]:
        emit = _Emitter(Builder(InsertPoint.before(cast(Operation, body.last_op))))
        zero = emit.i64(0)
        run_indices = self._run_indices(emit, linear, zero)
        return [
            self._to_region(
                emit,
                o,
                self._load(emit, o, o.storage, self._index(emit, o, linear, run_indices, zero)),
            )
            for o in self.operands[: len(self.kernel.inputs)]
        ]

    def _store(self, body: Block, operand: _Operand, value: SSAValue, linear: SSAValue) -> None:
        emit = _Emitter(Builder(InsertPoint.before(cast(Operation, body.last_op))))
        pointer = emit(
            llvm.GEPOp.from_mixed_indices(operand.pointer, [linear], operand.storage, inbounds=True)
        )
        stored = self._to_storage(emit, operand, value)
        emit.builder.insert(llvm.StoreOp(stored, pointer, alignment=element_bytes(operand.storage)))

    def _region(self, body: Block, values: Sequence[SSAValue]) -> list[SSAValue]:
        """A copy of the kernel's scalar region on `values`, before `body`'s terminator."""
        mapping: dict[SSAValue, SSAValue] = dict(zip(self.kernel.block.args, values, strict=True))
        builder = Builder(InsertPoint.before(cast(Operation, body.last_op)))
        for op in list(self.kernel.block.ops)[:-1]:
            builder.insert(op.clone(value_mapper=mapping))
        return [mapping.get(v, v) for v in self.kernel.yield_op.values]


def _predicate(name: str) -> IntegerAttr:
    return IntegerAttr(list(llvm.ICmpPredicateFlag).index(llvm.ICmpPredicateFlag(name)), i64)


# ---------------------------------------------------------------------------------------------
# Math
# ---------------------------------------------------------------------------------------------


class PtxApproxMath(RewritePattern):
    """f32 `math.tanh` -> `tanh.approx.f32`; `math.exp(x)` -> `ex2.approx.f32(x * log2(e))`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.TanhOp | math.ExpOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.result.type, Float32Type):
            return
        if isinstance(op, math.TanhOp):
            rewriter.replace(
                op,
                llvm.CallIntrinsicOp("llvm.nvvm.tanh.approx.f32", [op.operand], [op.result.type]),
            )
            return
        log2_e = arith.ConstantOp(FloatAttr(_LOG2_E, op.result.type))
        # `llvm` already: `ew-expand-math{fastmath}` gives the program's `arith` ops the user's
        # flags, and this multiply is the approximation's.
        scaled = llvm.FMulOp(op.operand, log2_e.result)
        power = llvm.CallIntrinsicOp("llvm.nvvm.ex2.approx.f", [scaled.res], [op.result.type])
        rewriter.replace(op, [log2_e, scaled, power])


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EwToNvvmPass(ModulePass):
    """Outline each bufferized `ew.kernel` into a GPU entry with a grid-stride loop (see the
    module docstring); the host function is erased (`launch_sequence` reads it first)."""

    name = "ew-to-nvvm"

    math: GpuMath = "approx"
    """`approx`: the CPU's f32 approximations; `ptx-approx`: `tanh.approx.f32`, `ex2.approx.f32`."""

    def __post_init__(self) -> None:
        check_choice(self, "math", GpuMath)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        launch_sequence(op)  # rejects host code that is not launches
        host = only_function(op)
        kernels = [k for k in host.body.block.ops if isinstance(k, ew.KernelOp)]
        for index, kernel in enumerate(kernels):
            entry = _EntryBuilder(kernel, entry_name(host.sym_name.data, index)).build()
            locate_unlocated(entry, kernel.location)  # (its loop and loads, as the CPU's)
            op.body.block.insert_op_before(entry, host)
        host.detach()
        host.erase(safe_erase=False)
        if self.math == "ptx-approx":
            located_walker(PtxApproxMath(), apply_recursively=False).rewrite_module(op)
