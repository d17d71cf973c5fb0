"""numpy baselines generated from the optimized `ew` IR (the lecture's `compile_numpy[_planned]`).

- `compile_numpy`: one numpy call per op, each allocating a fresh array (plain numpy code).
- `compile_numpy_planned`: the same calls with `out=` buffers: temporaries are assigned by
  liveness (a buffer is reused once its value is dead) and allocated once per input shape, so
  repeated calls allocate nothing.

Both compute in each value's dtype, like the numpy code they stand for (an `ew.convert` is an
`astype`). Ops without a numpy ufunc (`erf`) use the float64 reference and round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of
from xfuse.runtime.arrays import numpy_dtype
from xfuse.runtime.compiler import check_module
from xfuse.transforms.pipeline import only_function

Ufunc = Callable[..., np.ndarray]


def _sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # (numpy's ufuncs return a scalar of a 0-d `x` without `out=`, which takes no `out=`)
    out = np.negative(x, out=np.empty(np.shape(x), x.dtype) if out is None else out)
    np.exp(out, out=out)
    np.add(out, 1, out=out)
    return np.reciprocal(out, out=out)


def _rsqrt(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    out = np.sqrt(x, out=np.empty(np.shape(x), x.dtype) if out is None else out)
    return np.reciprocal(out, out=out)


def _relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0), out=out)


def _softplus(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.logaddexp(x, x.dtype.type(0), out=out)


def _select(
    condition: np.ndarray, x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    result = np.where(condition, x, y)  # a float condition: nonzero, as `ew.select`'s
    if out is None:
        return result
    out[...] = result
    return out


def _mask_of(comparison: np.ufunc) -> Ufunc:
    """numpy's `comparison` stored as 1 and 0 in the operands' dtype, as the `ew` op holds it
    (numpy's booleans would add as a logical or)."""

    def function(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(np.broadcast_shapes(x.shape, y.shape), np.result_type(x, y))
        return comparison(x, y, out=out)

    return function


_NUMPY_CODE: dict[type[Operation], Ufunc] = {
    ew.SigmoidOp: _sigmoid,
    ew.RsqrtOp: _rsqrt,
    ew.ReluOp: _relu,
    ew.SoftplusOp: _softplus,
    ew.SelectOp: _select,
    **{op: _mask_of(op.NUMPY_UFUNC) for op in ew.ELEMENTWISE_OPS if issubclass(op, ew.CompareOp)},
}
"""The numpy code a user writes for ops numpy has no ufunc for (or whose ufunc gives booleans)."""


def _rounded_reference(op_type: ew.ElementwiseOpType) -> Ufunc:
    """The op's float64 reference, rounded to the operands' dtype."""

    def function(*args: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        with np.errstate(all="ignore"):
            result = op_type.reference(*(a.astype(np.float64) for a in args))
        result = result.astype(np.result_type(*args))
        if out is None:
            return result
        out[...] = result
        return out

    return function


def numpy_function(op_type: ew.ElementwiseOpType) -> Ufunc:
    """How the baselines compute `op_type`: numpy code (`_NUMPY_CODE`), else its numpy ufunc
    (`ew.numpy_ufunc`), else its float64 reference rounded to the operands' dtype (`erf`)."""
    return _NUMPY_CODE.get(op_type) or ew.numpy_ufunc(op_type) or _rounded_reference(op_type)


NUMPY_FUNCTIONS: dict[type[Operation], Ufunc] = {
    op: numpy_function(op) for op in ew.ELEMENTWISE_OPS
}


@dataclass(frozen=True)
class Step:
    """One numpy call: `function(*operands, out=buffer)` defining `result`."""

    function: Ufunc
    operands: tuple[SSAValue, ...]
    result: SSAValue


def _converter(dtype: np.dtype[Any]) -> Ufunc:
    """`ew.convert` to `dtype` (numpy's astype: round to nearest even)."""

    def convert(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            return x.astype(dtype)
        np.copyto(out, x, casting="unsafe")
        return out

    return convert


def _numpy_dtype(value: SSAValue) -> np.dtype[Any]:
    return numpy_dtype(dtype_of(ew.element_type(value.type)))


@dataclass(frozen=True)
class NumpyProgram:
    inputs: tuple[BlockArgument, ...]
    outputs: tuple[SSAValue, ...]
    constants: dict[SSAValue, np.generic]
    """Each constant as a numpy scalar of its own dtype."""
    steps: tuple[Step, ...]
    made_by: str
    """The function that made it (`compile_numpy`, `compile_numpy_planned`), errors name."""

    def bind(self, arrays: Sequence[np.ndarray]) -> zip[tuple[SSAValue, np.ndarray]]:
        """The inputs paired with `arrays`, one each (positional: the function's run takes no
        keywords); a TypeError naming the inputs otherwise (zip's ValueError named none)."""
        if len(arrays) != len(self.inputs):
            names = ", ".join(ew.input_name(value) or "?" for value in self.inputs) or "none"
            raise TypeError(
                f"{self.made_by}'s function takes {len(self.inputs)} array(s), positionally "
                f"(inputs: {names}), {len(arrays)} given"
            )
        return zip(self.inputs, arrays, strict=True)


def _program(module: ModuleOp, taker: str) -> NumpyProgram:
    check_module(taker, module)
    function = only_function(module)
    constants: dict[SSAValue, np.generic] = {}
    steps: list[Step] = []
    for op in function.body.block.ops:
        if isinstance(op, ew.ConstantOp):
            constants[op.result] = _numpy_dtype(op.result).type(op.literal)
        elif isinstance(op, ew.ConvertOp):
            steps.append(Step(_converter(_numpy_dtype(op.result)), (op.operand,), op.result))
        elif type(op) in NUMPY_FUNCTIONS:
            steps.append(Step(NUMPY_FUNCTIONS[type(op)], tuple(op.operands), op.results[0]))
        elif not isinstance(op, func.ReturnOp):
            raise ValueError(f"no numpy baseline for '{op.name}' (expects tensor-level ew ops)")
    returned = function.get_return_op()
    assert returned is not None
    return NumpyProgram(
        tuple(function.body.block.args),
        tuple(returned.arguments),
        constants,
        tuple(steps),
        taker,
    )


def compile_numpy(module: ModuleOp) -> Callable[..., tuple[np.ndarray, ...]]:
    """A function of the inputs (in order) running the ops one numpy call at a time."""
    program = _program(module, "compile_numpy")

    def run(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        values: dict[SSAValue, Any] = dict(program.constants)
        values.update(program.bind(arrays))
        for step in program.steps:
            values[step.result] = step.function(*(values[v] for v in step.operands))
        return tuple(values[v] for v in program.outputs)

    return run


def plan_buffers(steps: Sequence[Step], keep: Sequence[SSAValue]) -> dict[SSAValue, int]:
    """Buffer index per step result, reusing a buffer of the same type once its value is dead.

    Values in `keep` (the outputs) get a buffer of their own that is never reused.
    """
    last_use: dict[SSAValue, int] = {}
    for index, step in enumerate(steps):
        for operand in step.operands:
            last_use[operand] = index
    buffer_of: dict[SSAValue, int] = {}
    buffer_types: list[Attribute] = []
    free: list[int] = []
    for index, step in enumerate(steps):
        type_ = step.result.type
        match = next((b for b in free if buffer_types[b] == type_), None)
        if match is not None and step.result not in keep:
            free.remove(match)
            buffer_of[step.result] = match
        else:
            buffer_of[step.result] = len(buffer_types)
            buffer_types.append(type_)
        # operands dying here free their buffers after this step (so never the step's own out=)
        for operand in set(step.operands):
            if last_use.get(operand) == index and operand in buffer_of and operand not in keep:
                free.append(buffer_of[operand])
    return buffer_of


def compile_numpy_planned(module: ModuleOp) -> Callable[..., tuple[np.ndarray, ...]]:
    """Like `compile_numpy`, but every op writes into a planned, preallocated `out=` buffer.

    The returned arrays are the planned buffers themselves: they are overwritten by the next call.
    """
    program = _program(module, "compile_numpy_planned")
    buffer_of = plan_buffers(program.steps, program.outputs)
    buffers_by_shape: dict[tuple[tuple[int, ...], ...], list[np.ndarray]] = {}

    def run(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        values: dict[SSAValue, Any] = dict(program.constants)
        values.update(program.bind(arrays))
        shapes = tuple(a.shape for a in arrays)
        buffers = buffers_by_shape.get(shapes)
        if buffers is None:
            buffers = buffers_by_shape[shapes] = _allocate(program, buffer_of, arrays)
        for step in program.steps:
            out = buffers[buffer_of[step.result]]
            values[step.result] = step.function(*(values[v] for v in step.operands), out=out)
        return tuple(values[v] for v in program.outputs)

    return run


def _allocate(
    program: NumpyProgram, buffer_of: dict[SSAValue, int], arrays: Sequence[np.ndarray]
) -> list[np.ndarray]:
    """One array per planned buffer, shaped by a dry run of numpy's broadcasting."""
    shapes: dict[SSAValue, tuple[int, ...]] = {v: () for v in program.constants}
    shapes.update({v: a.shape for v, a in zip(program.inputs, arrays, strict=True)})
    sizes: dict[int, tuple[tuple[int, ...], np.dtype[Any]]] = {}
    for step in program.steps:
        shapes[step.result] = np.broadcast_shapes(*(shapes[v] for v in step.operands))
        sizes[buffer_of[step.result]] = (shapes[step.result], _numpy_dtype(step.result))
    return [np.empty(*sizes[index]) for index in range(len(sizes))]
