"""The dataflow and memory-plan analyses on the lecture's GELU and small cases."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from xdsl.dialects import func

from xfuse.analysis.dataflow import analyze_dataflow
from xfuse.analysis.memory import analyze_liveness, plan_memory, value_bytes
from xfuse.analysis.statistics import PassStatistics, Statistic, render_statistics
from xfuse.frontend.language import parse_program
from xfuse.transforms.fuse import fuse_function

if TYPE_CHECKING:
    from conftest import Gelu


def gelu_function(source: str, mode: str | None = None) -> func.FuncOp:
    """The lecture's GELU function, unfused (mode None) or after ew-fuse in `mode`."""
    function = parse_program(source).body.block.first_op
    assert isinstance(function, func.FuncOp)
    if mode is not None:
        fuse_function(function, greedy=mode == "greedy")
    return function


@pytest.mark.parametrize("mode", [None, "none"])
def test_gelu_dataflow(mode: str | None, gelu: Gelu) -> None:
    dataflow = analyze_dataflow(gelu_function(gelu.source, mode))
    assert len(dataflow.ops) == 11
    assert dataflow.depth == 10
    h = dataflow[dataflow.ops[0].results[0]]
    assert h.uses == 5
    assert h.level == 1
    assert h.last_use == 5  # h + 0.044715*h*h*h, the sixth op
    assert dataflow["x"].level == 0 and dataflow["x"].op is None
    out = dataflow[dataflow.ops[-1].results[0]]
    assert out.level == 10 and out.last_use == 11  # read by the return only


def test_gelu_fused_dataflow_is_one_kernel(gelu: Gelu) -> None:
    dataflow = analyze_dataflow(gelu_function(gelu.source, "greedy"))
    assert len(dataflow.ops) == 1
    assert dataflow.depth == 1


@pytest.mark.parametrize("mode", [None, "none"])
def test_gelu_memory_plan(mode: str | None, gelu: Gelu) -> None:
    function = gelu_function(gelu.source, mode)
    planned, naive = plan_memory(function), plan_memory(function, reuse=False)
    assert (planned.naive_count, planned.planned_count) == (10, 3)
    assert naive.planned_count == 10
    assert len(planned.in_place) == 7 and not planned.reused
    n = 1 << 20
    assert planned.planned_bytes((n,)) == 3 * 4 * n
    assert planned.naive_bytes((n,)) == naive.planned_bytes((n,)) == 10 * 4 * n
    assert planned.planned_bytes((n,), "bfloat16") == 3 * 2 * n
    assert planned.peak_live_bytes((n,)) == 3 * 4 * n
    # Without in-place writes a step's dying input and its result are live together.
    assert naive.peak_live_bytes((n,)) == 4 * 4 * n


def test_gelu_fused_needs_no_temporaries(gelu: Gelu) -> None:
    plan = plan_memory(gelu_function(gelu.source, "greedy"))
    assert plan.naive_count == plan.planned_count == 0
    assert plan.peak_live_bytes((1024,)) == 0


def test_liveness_of_gelu(gelu: Gelu) -> None:
    liveness = analyze_liveness(gelu_function(gelu.source))
    assert len(liveness.steps) == 11
    assert len(liveness.temporaries) == 10
    h = liveness.steps[0].writes[0]
    assert liveness.definition[h] == 0 and liveness.last_use[h] == 5
    # A step's dying inputs and its results are both live during it.
    assert [len(liveness.live_at(i)) for i in range(11)] == [1, 2, 3, 4, 4, 4, 3, 3, 3, 3, 1]


def test_unrelated_dynamic_shapes_share_no_buffer() -> None:
    # exp(x) dies before log(y) is written, but x and y may differ in size at run time.
    source = "a = exp(x); b = neg(a); c = log(y); d = abs(c); e = b + 0; f = d + 0;"
    function = parse_program(source, outputs=["b", "d"]).body.block.first_op
    assert isinstance(function, func.FuncOp)
    fuse_function(function, greedy=False)
    plan = plan_memory(function)
    assert plan.planned_count == 2
    same_shape = parse_program(source, outputs=["b", "d"], shapes={"x": (8,), "y": (8,)})
    function = same_shape.body.block.first_op
    assert isinstance(function, func.FuncOp)
    fuse_function(function, greedy=False)
    assert plan_memory(function).planned_count == 1


def test_value_bytes_broadcasts_dynamic_dims_from_the_right() -> None:
    function = parse_program(
        "y = x + b;", shapes={"x": ("t", "d"), "b": ("d",)}, dtype="bfloat16"
    ).body.block.first_op
    assert isinstance(function, func.FuncOp)
    x, b = function.body.block.args
    assert value_bytes(b.type, (4096, 14336)) == 14336 * 2
    assert value_bytes(x.type, (4096, 14336)) == 4096 * 14336 * 2
    assert value_bytes(x.type, (4, 8), "float64") == 4 * 8 * 8


def test_render_statistics() -> None:
    report = PassStatistics("ew-fuse", (Statistic("kernels", 1, "kernels formed"),))
    assert report["kernels"] == 1
    text = render_statistics([report])
    assert "'ew-fuse'" in text and "(kernels) 1 : kernels formed" in text


def test_plan_bytes_fold_the_problem_shape_to_the_programs_rank(gelu: Gelu) -> None:
    """The lecture priced the plan at a flattened (n,) problem, and `[t, d]` temporaries bound
    their two dims from one size by a wrapped-around index: examples/gelu-llm.ew's 13
    temporaries came to 89.6 PB (n x n each), not 13 x 117 MB."""
    shape, n = (4096, 14336), 4096 * 14336
    declared = parse_program(
        "input bf16 x[t, d]; input f32 b[d]; h = x + b; y = tanh(h) * h; out = bf16(y);"
    ).body.block.first_op
    assert isinstance(declared, func.FuncOp)
    plan = plan_memory(declared)
    assert plan.naive_count == 4  # x as f32, h, tanh(h), y: all [t, d] f32
    assert plan.naive_bytes(shape) == 4 * 4 * n
    assert plan.naive_bytes(shape, "bfloat16") == 4 * 2 * n
    flat = plan_memory(gelu_function(gelu.source))  # `[?]` tensors: the shape folds to (n,)
    assert flat.naive_bytes(shape) == flat.naive_bytes((n,)) == 10 * 4 * n
    with pytest.raises(ValueError, match="a problem of 1 dims for rank-2 tensors"):
        plan.naive_bytes((n,))
    (x, _) = declared.body.block.args
    with pytest.raises(ValueError, match="a rank-2 type in a problem of 1 dims"):
        value_bytes(x.type, (n,))
