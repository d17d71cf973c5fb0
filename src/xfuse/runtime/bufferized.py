"""The checks `compile_bufferized` makes of hand-written bufferized IR before compiling it.

A `Kernel` runs a function as one elementwise iteration space: it checks only the arguments'
shapes (right-aligned, every `?` of an axis one size), may split a call into slices of rows or
run it in place, and reads what the function wrote. The IR must then be what `ew-bufferize`
makes (`xfuse.transforms.bufferize`): `ew.kernel`s on memrefs, temporaries from `memref.alloc`
sized by `memref.dim` on the same axis, `memref.dealloc`, index constants, a `func.return` of
nothing. Anything else ran past the end of a buffer or gave wrong numbers silently: a temporary
of `n + 1` elements (or with `x`'s dims swapped) made its kernel read `x` past its end; a load
outside the kernels read each slice's own first element in a split call; a kernel writing an
input changed the caller's array; an output no kernel writes came back uninitialized; a
`memref.dealloc` of an argument freed the caller's array (numpy freed it again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType, NoneAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from xfuse.dialects import ew
from xfuse.runtime.arrays import Parameter

PREFIX = "compile_bufferized"


def argument_names(function: func.FuncOp, input_names: Sequence[str]) -> list[str]:
    """The parameters' names: `input_names` for the leading arguments, then each output's SSA
    name (`out<i>` where it has none); an error for names that do not fit the function."""
    if (
        isinstance(input_names, str)
        or not isinstance(input_names, Sequence)
        or not all(isinstance(name, str) for name in input_names)
    ):
        raise TypeError(f"{PREFIX}: input_names must be a list of names, got {input_names!r}")
    if "" in input_names:  # (an input no call could pass by name)
        raise ValueError(f"{PREFIX}: an input name is empty, got {list(input_names)!r}")
    args = function.body.block.args
    if len(input_names) > len(args):
        raise ValueError(
            f"{PREFIX}: {len(input_names)} input names for a function of {len(args)} arguments"
        )
    names = [*input_names] + [
        arg.name_hint or f"out{i}" for i, arg in enumerate(args[len(input_names) :])
    ]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise ValueError(f"{PREFIX}: two arguments are named '{repeated}' ({names})")
    return names


def check_arguments(function: func.FuncOp, names: Sequence[str]) -> None:
    """DiagnosticException naming the argument (`names`: the arguments') that is no memref of
    floats without a layout. Run before the module verifies: the verifier's message for a
    kernel's `memref<?xi32>` operand named no argument."""
    for index, (name, arg) in enumerate(zip(names, function.body.block.args, strict=True)):
        argument = f"{PREFIX}: argument '{name}' (#{index}) is a {arg.type}"
        if not isinstance(arg.type, MemRefType):
            raise DiagnosticException(
                f"{argument}: the function must be bufferized (memref arguments: inputs, then "
                "output buffers; run ew-bufferize)"
            )
        if not isinstance(arg.type.element_type, ew.FLOAT_ELEMENT_TYPES):
            raise DiagnosticException(
                f"{argument}: a Kernel takes arrays of {ew.FLOAT_NAMES}, not "
                f"{arg.type.element_type}"
            )
        if not isinstance(arg.type.layout, NoneAttr):
            raise DiagnosticException(
                f"{argument}: a Kernel passes C-contiguous arrays, so only memrefs without a "
                "layout can be its arguments"
            )


def check_function(function: func.FuncOp, names: Sequence[str], input_count: int) -> None:
    """DiagnosticException naming the argument or op where `function`'s body is not in the form
    the module docstring describes (`names`: the arguments', the first `input_count` inputs)."""
    args = function.body.block.args
    if len(args) == input_count:  # (its call was a SyntaxError of the call glue)
        raise DiagnosticException(
            f"{PREFIX}: 'func.func' @{function.sym_name.data} has no output buffer: a kernel "
            "computes at least one output"
        )
    label = {arg: f"'{name}'" for arg, name in zip(args, names, strict=True)}
    inputs = set(args[:input_count])
    written: set[SSAValue] = set()
    for op in function.body.block.ops:
        if isinstance(op, ew.KernelOp):
            if not op.is_bufferized:
                raise DiagnosticException(f"{PREFIX}: 'ew.kernel' must be bufferized:\n{op}")
            for value in op.inputs:
                if value not in inputs and value not in written:
                    raise DiagnosticException(
                        f"{PREFIX}: 'ew.kernel' reads {_described(value, label)} before any "
                        f"kernel writes it:\n{op}"
                    )
            for value in op.outputs:
                if value in inputs:
                    raise DiagnosticException(
                        f"{PREFIX}: 'ew.kernel' writes input {label[value]}: an input is the "
                        f"caller's array, read only:\n{op}"
                    )
            written.update(op.outputs)
        elif isinstance(op, memref.AllocOp):
            _check_alloc(op)
        elif isinstance(op, memref.DimOp):
            _constant_index(op)
        elif isinstance(op, memref.DeallocOp) and not isinstance(op.memref.owner, memref.AllocOp):
            raise DiagnosticException(
                f"{PREFIX}: 'memref.dealloc' of {_described(op.memref, label)}, which no "
                f"'memref.alloc' made: the caller owns its memory:\n{op}"
            )
        elif not (
            isinstance(op, arith.ConstantOp | memref.DeallocOp)
            or (isinstance(op, func.ReturnOp) and not op.arguments)
        ):
            raise DiagnosticException(
                f"{PREFIX}: '{op.name}' is not of the ew-bufferize form (ew.kernel, "
                "memref.alloc sized by memref.dim, memref.dim, memref.dealloc, arith.constant, "
                "func.return of nothing): a Kernel may run a call in slices of rows, each "
                f"seeing its own rows only:\n{op}"
            )
    for arg in args[input_count:]:
        if arg not in written:
            raise DiagnosticException(
                f"{PREFIX}: no 'ew.kernel' writes output {label[arg]}: it would be returned "
                "uninitialized"
            )


def _described(value: SSAValue, label: dict[SSAValue, str]) -> str:
    return label.get(value) or (f"%{value.name_hint}" if value.name_hint else "a temporary")


def _constant_index(op: memref.DimOp) -> int:
    """The axis `op` reads: a constant within its source's rank, else an error naming it."""
    index = op.index.owner
    source = op.source.type
    if (
        isinstance(index, arith.ConstantOp)
        and isinstance(index.value, IntegerAttr)
        and isinstance(source, MemRefType)
        and 0 <= index.value.value.data < source.get_num_dims()
    ):
        return index.value.value.data
    raise DiagnosticException(
        f"{PREFIX}: 'memref.dim' must read a constant axis of its memref's rank:\n{op}"
    )


def _check_alloc(op: memref.AllocOp) -> None:
    """Each `?` of a temporary is a `memref.dim` of a `?` on the same (right-aligned) axis: its
    kernels loop over it and read their inputs at every index of it."""
    if op.symbol_operands:
        raise DiagnosticException(f"{PREFIX}: 'memref.alloc' with symbols is not taken:\n{op}")
    shape = op.memref.type.get_shape()
    dynamic = [axis for axis, size in enumerate(shape) if size == DYNAMIC_INDEX]
    for axis, size in zip(dynamic, op.dynamic_sizes, strict=True):
        dim = size.owner
        if isinstance(dim, memref.DimOp):
            read = _constant_index(dim)
            source = cast(MemRefType[Attribute], dim.source.type).get_shape()
            if len(source) - read == len(shape) - axis and source[read] == DYNAMIC_INDEX:
                continue
        raise DiagnosticException(
            f"{PREFIX}: 'memref.alloc' size {axis} must be a 'memref.dim' of a ? on the same "
            f"axis (right-aligned) of an argument or temporary:\n{op}"
        )


def check_output_sizes(inputs: Sequence[Parameter], outputs: Sequence[Parameter]) -> None:
    """A `?` of an output on an axis beyond every input's: nothing gives its size (the call
    made one up from another axis's)."""
    rank = max((len(p.shape) for p in inputs), default=0)
    for output in outputs:
        beyond = len(output.shape) - rank
        for axis, size in enumerate(output.shape[: max(beyond, 0)]):
            if size == DYNAMIC_INDEX:
                raise DiagnosticException(
                    f"{PREFIX}: output '{output.name}' ({output.describe()}) has a ? on "
                    f"dimension {axis}, which no input has (inputs have at most {rank}), so "
                    "nothing gives its size: make it static"
                )
