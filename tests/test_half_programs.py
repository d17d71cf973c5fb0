"""Random f16 and bf16 programs of IEEE-exact ops against numpy (with ml_dtypes), bit for bit.

The ops (+ - * / neg abs sqrt, literals, and `f16(...)`/`bf16(...)` of a value of that type) are
ones whose f16/bf16 result IEEE decides: numpy
computes each in float32 and rounds to the narrow type, as an xfuse kernel does, and float32 holds
enough bits that the double rounding is innocuous. Two exact references:
- `fuse=False`, one kernel per op, stores every intermediate in its dtype: numpy's per-op result;
- `fuse=True`, one kernel, keeps unstored intermediates in f32 (docs/shapes-and-dtypes.md): the
  program `ew-optimize` leaves (the per-op reference checks its rewrites, exact with every value
  rounded) in float32 from the widened inputs, literals rounded to the narrow type first, each
  output and each explicit conversion rounded where it is computed (the ops after it read it
  rounded). Of the source program it may differ: CSE makes an expression written again the
  output it repeats, `-(-y)` is `y` where `-y` is an output (rounded), `y` not.
Signs of zero and infinities are compared exactly, NaN as NaN (its payload is the hardware's).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.ir import Operation

import xfuse
from xfuse.dialects import ew
from xfuse.runtime.compiler import parse_ir
from xfuse.runtime.kernel import Kernel

if TYPE_CHECKING:
    from conftest import Evaluate

BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": operator.neg,
    "abs": np.abs,
    "sqrt": np.sqrt,
}
ROUND = "round"
"""The program's explicit conversion to its own dtype: `f16(...)` or `bf16(...)`."""
LITERALS = (0.1, 1.1, 3.0, 0.5, -0.0, 1e5, 300.7, 1e-9)
"""Inexact in both types (0.1, 1.1, 300.7), exact, a signed zero, f16's overflow and underflow."""
DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


@dataclass(frozen=True)
class Step:
    op: str
    operands: tuple[int | float, ...]
    """Earlier values (by index: the inputs first) or literals."""


@dataclass(frozen=True)
class HalfProgram:
    inputs: int
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    def source(self, dtype: np.dtype) -> str:
        def name(operand: int | float) -> str:
            return repr(operand) if isinstance(operand, float) else f"v{operand}"

        conversion = {"float16": "f16", "bfloat16": "bf16"}[dtype.name]
        lines = []
        for index, step in enumerate(self.steps, start=self.inputs):
            function = conversion if step.op == ROUND else step.op
            if step.op in BINARY:
                lhs, rhs = map(name, step.operands)
                lines.append(f"v{index} = {lhs} {step.op} {rhs};")
            else:
                lines.append(f"v{index} = {function}({name(step.operands[0])});")
        return "\n".join(lines)

    def evaluate(self, inputs: Sequence[np.ndarray], dtype: np.dtype) -> list[np.ndarray]:
        """The outputs as numpy computes them, op by op."""
        values = list(inputs)

        def value(operand: int | float) -> np.ndarray:
            if isinstance(operand, float):  # a weak literal: rounded to the narrow type
                return np.asarray(dtype.type(operand))
            return values[operand]

        with np.errstate(all="ignore"):
            for step in self.steps:
                operands = [value(operand) for operand in step.operands]
                if step.op == ROUND:
                    result = operands[0].astype(dtype)
                else:
                    function = BINARY.get(step.op) or UNARY[step.op]
                    result = np.asarray(function(*operands), dtype)
                values.append(result)
        return [values[index] for index in self.outputs]


def evaluate_fused(
    kernel: Kernel, inputs: dict[str, np.ndarray], dtype: np.dtype, evaluate: Evaluate
) -> list[np.ndarray]:
    """The outputs as one kernel computes the program `ew-optimize` leaves: in float32, each op
    by its float64 `reference` rounded to float32 (correctly rounded: the ops are IEEE-exact and
    float64 has over twice float32's bits), each literal, explicit conversion and output rounded
    to `dtype` where it is computed (a literal from its float64 value, once, as xfuse rounds
    it)."""
    module = parse_ir(kernel.ir("ew-optimize"))
    (function,) = module.ops
    assert isinstance(function, func.FuncOp)
    returned = function.body.block.ops.last
    assert isinstance(returned, func.ReturnOp)

    def rounded(op: Operation, value: np.ndarray) -> np.ndarray:
        if isinstance(op, ew.ConstantOp):
            return np.asarray(value).astype(dtype).astype(np.float64)
        computed = np.asarray(value).astype(np.float32)
        if isinstance(op, ew.ConvertOp) or op.results[0] in returned.operands:
            computed = computed.astype(dtype)
        return computed.astype(np.float64)

    return [out.astype(dtype) for out in evaluate(module, rounded=rounded, **inputs)]


@st.composite
def half_programs(draw: st.DrawFn) -> HalfProgram:
    inputs = draw(st.integers(1, 3))
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from([*BINARY, *UNARY, ROUND]))
        last = inputs + len(steps) - 1
        operand = st.integers(max(0, last - 2), last) | st.integers(0, last)
        operands: list[int | float] = [draw(operand) for _ in range(2 if op in BINARY else 1)]
        if op in BINARY and draw(st.booleans()):
            operands[draw(st.integers(0, 1))] = draw(st.sampled_from(LITERALS))
        steps.append(Step(op, tuple(operands)))
    last = inputs + len(steps) - 1
    extra = draw(st.lists(st.integers(inputs, last), max_size=2))
    return HalfProgram(inputs, tuple(steps), tuple(dict.fromkeys([last, *extra])))


SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 6e-8, 1e-40, 3.0e38, -1.0, 0.1)
"""Zeros, infinities, NaN, f16's largest and smallest denormal, bf16 denormal and near-overflow."""


def half_inputs(seed: int, count: int, dtype: np.dtype, n: int = 67) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for _ in range(count):
        data = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
        special = rng.random(n) < 0.2
        data[special] = rng.choice(SPECIALS, int(special.sum()))
        with np.errstate(over="ignore"):
            arrays.append(data.astype(np.float32).astype(dtype))
    return arrays


def assert_same_bits(got: np.ndarray, want: np.ndarray, context: str) -> None:
    assert got.dtype == want.dtype, context
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan), context
    bits = got.view(np.uint16)[~nan], want.view(np.uint16)[~nan]
    assert np.array_equal(*bits), f"{context}: {got[~nan]} != {want[~nan]}"


CSE_MAKES_AN_OUTPUT = HalfProgram(
    3,
    tuple(
        Step(op, operands)
        for op, operands in [
            ("sqrt", (1,)),
            ("sqrt", (1,)),
            ("+", (2, 2)),
            ("neg", (3,)),
            ("+", (0.1, 4)),
            ("neg", (5,)),
            ("neg", (7,)),
        ]
    ),
    (9, 3),
)
"""v4 = sqrt(v1) repeats the output v3: the kernel's v7 = 0.1 + v4 reads it rounded."""

NEGATION_OF_AN_OUTPUT = HalfProgram(
    1,
    tuple(
        Step(op, operands)
        for op, operands in [
            ("sqrt", (0,)),
            ("+", (0, 0)),
            ("+", (0, 0)),
            ("neg", (1,)),
            ("neg", (4,)),
            ("+", (3, 3)),
            ("+", (4, 4)),
            ("+", (5, 6)),
        ]
    ),
    (8, 4),
)
"""v5 = -v4 of the output v4 = -v1 is v1 = sqrt(v0) itself, unrounded."""


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fuse", [False, True], ids=["per-op", "fused"])
@given(program=half_programs(), seed=st.integers(0, 2**32 - 1))
@example(program=CSE_MAKES_AN_OUTPUT, seed=0)
@example(program=NEGATION_OF_AN_OUTPUT, seed=0)
def test_half_programs_match_numpy_bit_for_bit(
    program: HalfProgram, seed: int, dtype: np.dtype, fuse: bool, evaluate_float64: Evaluate
) -> None:
    source = program.source(dtype)
    outputs = [f"v{index}" for index in program.outputs]
    inputs = half_inputs(seed, program.inputs, dtype)
    kernel = xfuse.compile(source, outputs=outputs, dtype=dtype.name, fuse=fuse)
    read = inspect.signature(kernel).parameters  # only the inputs the program reads
    used = {f"v{i}": array for i, array in enumerate(inputs) if f"v{i}" in read}
    with np.errstate(all="ignore"):
        got = kernel(**used)
    got = [got] if len(outputs) == 1 else list(got)
    if fuse:
        want = evaluate_fused(kernel, used, dtype, evaluate_float64)
    else:
        want = program.evaluate(inputs, dtype)
    for name, result, expected in zip(outputs, got, want, strict=True):
        assert_same_bits(result, expected, f"{name} of\n{source}")
