"""ew-bufferize: destination-passing IR, its memory plan proved safe, and its numbers right.

Two independent checks, neither using the planner's own bookkeeping to judge it:
- `check_plan` replays a `MemoryPlan` over the function's ops as they stand in the IR and fails
  when a buffer's value is overwritten before a later read;
- `run_bufferized` interprets the bufferized IR on numpy arrays (freed and fresh buffers hold
  NaN), so a clobbered or early-freed buffer shows up in the results, compared with a float64
  evaluation of the original ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, Float64Type, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from xfuse.analysis.memory import MemoryPlan, plan_memory
from xfuse.dialects import ew
from xfuse.frontend.builder import FunctionBuilder, Value
from xfuse.frontend.language import parse_program
from xfuse.transforms.bufferize import EwBufferizePass
from xfuse.transforms.expand_math import MATH_FUNCTIONS
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.scalar import emit_scalar

if TYPE_CHECKING:
    from conftest import Evaluate, Gelu


# ---------------------------------------------------------------------------------------------
# An interpreter for the bufferized IR (float64 on numpy arrays)
# ---------------------------------------------------------------------------------------------


def _scalar_semantics() -> dict[str, Callable[..., Any]]:
    """What each scalar op of a kernel region computes, from the op facts: an `ew` op that lowers
    to one scalar op on its operands gives that op its `reference`; a `math` op of
    `MATH_FUNCTIONS` computes the `ew` op named like its libm function (`math.log1p`: `ew.log1p`).
    Conversions are exact in float64, `arith.select` is `np.where` and `math.copysign` (in
    sigmoid's region) `np.copysign`."""
    semantics: dict[str, Callable[..., Any]] = {
        "arith.select": np.where,
        "math.copysign": np.copysign,
        "arith.extf": lambda x: x,
        "arith.truncf": lambda x: x,
    }
    for op in ew.ELEMENTWISE_OPS:
        block = Block(arg_types=[Float64Type()] * ew.arity(op))
        emit_scalar(op, Builder(InsertPoint.at_end(block)), block.args, Float64Type())
        scalars = list(block.ops)
        if len(scalars) == 1 and tuple(scalars[0].operands) == block.args:
            known = semantics.setdefault(scalars[0].name, op.reference)
            assert known is op.reference, f"two ops lower to {scalars[0].name}"
    for math_op, function in MATH_FUNCTIONS.items():
        semantics[math_op.name] = ew.OPS_BY_MNEMONIC[function.libm].reference
    return semantics


SCALAR_NUMPY = _scalar_semantics()


ORDERED_COMPARISONS: dict[int, Callable[..., Any]] = {
    arith.CMPF_COMPARISON_OPERATIONS.index(name): compare
    for name, compare in (("olt", np.less), ("ogt", np.greater), ("oeq", np.equal))
}
"""`arith.cmpf` predicates by number (numpy's comparisons are false for NaN, as ordered ones)."""


def run_region(
    kernel: ew.KernelOp, inputs: Sequence[np.ndarray], shape: tuple[int, ...]
) -> list[np.ndarray]:
    env: dict[SSAValue, Any] = dict(zip(kernel.block.args, inputs, strict=True))
    with np.errstate(all="ignore"):
        for op in kernel.block.ops:
            if isinstance(op, arith.ConstantOp):
                env[op.result] = np.float64(cast(Any, op.value).value.data)
            elif isinstance(op, ew.YieldOp):
                return [np.broadcast_to(env[v], shape) for v in op.values]
            elif isinstance(op, arith.CmpfOp):
                compare = ORDERED_COMPARISONS[op.predicate.value.data]
                env[op.result] = compare(env[op.lhs], env[op.rhs])
            else:
                env[op.results[0]] = SCALAR_NUMPY[op.name](*(env[v] for v in op.operands))
    raise AssertionError("no yield")


def run_bufferized(function: func.FuncOp, args: Sequence[np.ndarray]) -> None:
    """Run destination-passing IR on numpy buffers (inputs, then outputs), in place."""
    block = function.body.block
    env: dict[SSAValue, Any] = dict(zip(block.args, args, strict=True))
    inputs_and_outputs = {id(a) for a in args}
    for op in block.ops:
        if isinstance(op, arith.ConstantOp):
            env[op.result] = cast(Any, op.value).value.data
        elif isinstance(op, memref.DimOp):
            env[op.result] = env[op.source].shape[env[op.index]]
        elif isinstance(op, memref.AllocOp):
            sizes = iter(env[v] for v in op.dynamic_sizes)
            shape = [next(sizes) if d == DYNAMIC_INDEX else d for d in op.memref.type.get_shape()]
            env[op.memref] = np.full(shape, np.nan)
        elif isinstance(op, memref.DeallocOp):
            assert id(env[op.memref]) not in inputs_and_outputs, "dealloc of a caller's buffer"
            env[op.memref][...] = np.nan
        elif isinstance(op, ew.KernelOp):
            assert op.is_bufferized
            outs = [env[v] for v in op.outputs]
            assert all(o.shape == outs[0].shape for o in outs)
            values = run_region(op, [env[v] for v in op.inputs], outs[0].shape)
            for out, value in zip(outs, values, strict=True):
                out[...] = value
        else:
            assert isinstance(op, func.ReturnOp) and not op.operands


def compile_and_run(
    module: ModuleOp, args: Sequence[np.ndarray], mode: str, reuse: bool, evaluate: Evaluate
) -> list[np.ndarray]:
    expected = evaluate(module, *args)
    EwFusePass(mode=mode).apply(Context(), module)
    EwBufferizePass(reuse=reuse).apply(Context(), module)
    module.verify()
    function = cast(func.FuncOp, module.body.block.first_op)
    outputs = [np.full(e.shape, np.nan) for e in expected]
    run_bufferized(function, [*args, *outputs])
    for got, want in zip(outputs, expected, strict=True):
        # Region constants are rounded to f32; everything else runs in float64 here.
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12, equal_nan=True)
    return outputs


# ---------------------------------------------------------------------------------------------
# An independent checker of memory plans
# ---------------------------------------------------------------------------------------------


def check_plan(function: func.FuncOp, plan: MemoryPlan) -> None:
    """Replay the function's compute ops: each read of a temporary must find it in its buffer."""
    block = function.body.block
    returned = set(cast(Operation, block.last_op).operands)
    ops = [op for op in block.ops if isinstance(op, ew.KernelOp | ew.ElementwiseOp)]
    held: dict[int, SSAValue] = {}
    for step, op in enumerate(ops):
        reads = [v for v in op.operands if v in plan.buffer_of]
        for value in reads:
            buffer = plan.buffer_of[value]
            assert held.get(buffer) is value, f"step {step}: {value} was overwritten"
            assert plan.buffers[buffer].first_step <= step <= plan.buffers[buffer].last_step
        written = []
        for value in op.results:
            if value in returned:
                assert value not in plan.buffer_of
                continue
            buffer = plan.buffer_of[value]
            written.append(buffer)
            assert plan.buffers[buffer].type == value.type
            buffer_span = plan.buffers[buffer]
            assert buffer_span.first_step <= step <= buffer_span.last_step
            # Writing over a value read by this same step is only safe element for element.
            if any(plan.buffer_of[r] == buffer for r in reads):
                assert held[buffer].type == value.type
            held[buffer] = value
        assert len(written) == len(set(written)), f"step {step} writes two results to one buffer"
    if not plan.reuse:
        assert len(set(plan.buffer_of.values())) == len(plan.buffer_of)


# ---------------------------------------------------------------------------------------------
# Random graphs
# ---------------------------------------------------------------------------------------------

UNARY = ["neg", "abs", "tanh", "sigmoid", "relu"]
BINARY = ["add", "sub", "mul", "max", "min"]
INPUT_SHAPES: dict[str, tuple[str, ...]] = {"x": ("t", "d"), "r": ("t", "d"), "b": ("d",)}


@st.composite
def random_graphs(draw: st.DrawFn) -> ModuleOp:
    """A function of 1 to 12 random ops over x, r: [t, d], b: [d] and constants."""
    names = draw(st.lists(st.sampled_from(list(INPUT_SHAPES)), min_size=1, max_size=3, unique=True))
    builder = FunctionBuilder(shapes={n: INPUT_SHAPES[n] for n in names})
    values = [builder.input(n) for n in names]
    for _ in range(draw(st.integers(1, 12))):

        def operand() -> Value:
            if draw(st.integers(0, 9)) == 0:
                return builder.literal(draw(st.sampled_from([0.5, 2.0, -1.5])))
            return values[draw(st.integers(0, len(values) - 1))]

        if draw(st.booleans()):
            op_type = ew.OPS_BY_MNEMONIC[draw(st.sampled_from(UNARY))]
            values.append(builder.apply(op_type, operand()))
        else:
            op_type = ew.OPS_BY_MNEMONIC[draw(st.sampled_from(BINARY))]
            values.append(builder.apply(op_type, operand(), operand()))
    computed = values[len(names) :]
    picks = draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=3))
    outputs = [computed[-1], *(values[i] for i in picks)]
    return builder.finish([(f"o{i}", v) for i, v in enumerate(outputs)])


def arguments(module: ModuleOp, rng: np.random.Generator) -> list[np.ndarray]:
    sizes = {"t": 3, "d": 4}
    function = cast(func.FuncOp, module.body.block.first_op)
    return [
        rng.uniform(-1, 1, [sizes[d] for d in INPUT_SHAPES[cast(str, a.name_hint)]])
        for a in function.body.block.args
    ]


@settings(max_examples=200, deadline=None)
@given(random_graphs(), st.sampled_from(["unfused", "none", "greedy"]))
def test_plans_never_overwrite_a_live_value(module: ModuleOp, mode: str) -> None:
    if mode != "unfused":
        EwFusePass(mode=mode).apply(Context(), module)
    function = cast(func.FuncOp, module.body.block.first_op)
    for reuse in (True, False):
        plan = plan_memory(function, reuse)
        check_plan(function, plan)
        assert plan.planned_count <= plan.naive_count


@settings(max_examples=60, deadline=None)
@given(random_graphs(), st.sampled_from(["none", "greedy"]), st.booleans())
def test_bufferized_random_graphs_compute_the_reference(
    evaluate_float64: Evaluate, module: ModuleOp, mode: str, reuse: bool
) -> None:
    args = arguments(module, np.random.default_rng(0))
    compile_and_run(module, args, mode, reuse, evaluate_float64)


# ---------------------------------------------------------------------------------------------
# Fixed cases
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["greedy", "none"])
@pytest.mark.parametrize("reuse", [True, False])
def test_gelu_bufferized_matches_reference(
    mode: str, reuse: bool, gelu: Gelu, evaluate_float64: Evaluate
) -> None:
    rng = np.random.default_rng(1)
    args = [rng.uniform(-3, 3, 17) for _ in range(3)]
    outputs = compile_and_run(parse_program(gelu.source), args, mode, reuse, evaluate_float64)
    np.testing.assert_allclose(outputs[0], gelu.reference(*args), rtol=1e-6)


@pytest.mark.parametrize("mode", ["greedy", "none"])
def test_gelu_signature_is_destination_passing(mode: str, gelu: Gelu) -> None:
    module = parse_program(gelu.source)
    EwFusePass(mode=mode).apply(Context(), module)
    EwBufferizePass().apply(Context(), module)
    function = cast(func.FuncOp, module.body.block.first_op)
    assert [a.name_hint for a in function.body.block.args] == ["x", "b", "r", "out"]
    assert all(isinstance(t, MemRefType) for t in function.function_type.inputs)
    assert not function.function_type.outputs
    ops = list(function.body.block.ops)
    allocs = [op for op in ops if isinstance(op, memref.AllocOp)]
    deallocs = [op for op in ops if isinstance(op, memref.DeallocOp)]
    assert len(allocs) == len(deallocs) == (0 if mode == "greedy" else 3)
    assert sum(isinstance(op, ew.KernelOp) for op in ops) == (1 if mode == "greedy" else 11)


def test_broadcast_bias_bf16(evaluate_float64: Evaluate) -> None:
    module = parse_program(
        "h = x + b * 2; g = sigmoid(h); s = exp(b);",
        outputs=["g", "s"],
        dtype="bfloat16",
        shapes={"x": ("t", "d"), "b": ("d",)},
    )
    rng = np.random.default_rng(2)
    compile_and_run(
        module, [rng.uniform(-1, 1, (3, 5)), rng.uniform(-1, 1, 5)], "none", True, evaluate_float64
    )


def test_results_that_are_arguments_or_constants(evaluate_float64: Evaluate) -> None:
    module = parse_program("y = x; z = 2.5; w = x * 1.5;", outputs=["y", "z", "w", "y"])
    outputs = compile_and_run(module, [np.arange(4.0)], "greedy", True, evaluate_float64)
    np.testing.assert_array_equal(outputs[1], 2.5)


def test_rejects_unfused_ops(gelu: Gelu) -> None:
    module = parse_program(gelu.source)
    with pytest.raises(PassFailedException, match="ew.add' is not inside an ew.kernel"):
        EwBufferizePass().apply(Context(), module)
