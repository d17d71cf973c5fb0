"""The lecture's four demos (dataflow, traffic bill, memory plan, CPU measurement) as figures.

Every figure comes from xfuse's own pipeline and analyses; every observation is a sentence
computed from those figures (a comparison decides what it says), so a different program or
machine gives different sentences. Rendering (tables, JSON) is in `lecture_cmd`.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.printer import Printer

from xfuse.analysis.cost import CostOptions, ProgramCost, cost_program
from xfuse.analysis.dataflow import analyze_dataflow
from xfuse.analysis.memory import Liveness, plan_memory
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.passes.pipeline import apply_pipeline, only_function
from xfuse.runtime import bench

GELU_SOURCE = """\
# GELU (tanh form) with bias and residual: the lecture's running example.
h = x + b;                                                            # bias
y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));  # GELU
out = y + r;                                                          # residual
"""
"""The lecture's running example, as in examples/gelu.ew (a test keeps the two equal)."""

GPU_DEVICE = "h100"
GPU_SHAPE = (4096, 14336)
"""Llama-3-8B's FFN: 4096 tokens x d_ff 14336."""
GPU_DTYPE = "bfloat16"
GPU_LAUNCH_US = 4.0
"""Launch overhead per kernel, the lecture's assumption."""
DECODE_SHAPE = (1, 14336)
"""One token of decode: where launch overhead, not bytes, sets the time."""


# ---------------------------------------------------------------------------------------------
# The program
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    source: str
    filename: str
    optimized: ModuleOp
    """After `ew-optimize`: one elementwise op per instruction."""
    ir: str
    """`optimized` as xDSL prints it."""
    names: dict[SSAValue, str]
    """Each value's name in `ir` (`%h`)."""

    @property
    def function(self) -> func.FuncOp:
        return only_function(self.optimized)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.names[a] for a in self.function.args)

    @property
    def outputs(self) -> tuple[str, ...]:
        returned = self.function.get_return_op()
        assert returned is not None
        return tuple(self.names[v] for v in returned.arguments)


def printed_names(module: ModuleOp) -> tuple[str, dict[SSAValue, str]]:
    """The module's text and the name the printer gave each SSA value in it (`%h`)."""
    stream = io.StringIO()
    printer = Printer(stream=stream)
    printer.print_op(module)
    text = stream.getvalue()
    names: dict[SSAValue, str] = {}
    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                for argument in block.args:
                    names[argument] = "%" + printer.print_ssa_value(argument)
        for result in op.results:
            # Named while printing the module: asking again returns that name.
            names[result] = "%" + printer.print_ssa_value(result)
    return text, names


def load_program(source: str = GELU_SOURCE, filename: str = "gelu.ew") -> Program:
    """Parse (float32, flat `?` inputs) and optimize; EwSyntaxError for a bad program."""
    optimized = apply_pipeline(parse_program(source, filename=filename), "ew-optimize")
    ir, names = printed_names(optimized)
    return Program(source, filename, optimized, ir, names)


def _operand_text(value: SSAValue, names: dict[SSAValue, str]) -> str:
    constant = ew.constant_value(value)
    return ew.format_float(constant) if constant is not None else names[value]


def op_text(op: Operation, names: dict[SSAValue, str]) -> str:
    """`mul(0.5, h)`: the op's mnemonic applied to its operands, constants written inline."""
    operands = ", ".join(_operand_text(v, names) for v in op.operands)
    return f"{op.name.removeprefix('ew.')}({operands})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "inf"


# ---------------------------------------------------------------------------------------------
# Demo 1: the dataflow graph
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataflowRow:
    index: int
    value: str
    op: str
    level: int
    readers: int
    """Operand slots of ops reading the value (the function's return not counted)."""
    last_use: int | None
    """Index of the last op reading it; None when only the return (or nothing) reads it."""
    is_output: bool


@dataclass(frozen=True)
class DataflowDemo:
    source: str
    ir: str
    rows: tuple[DataflowRow, ...]
    ops: int
    depth: int
    observations: tuple[str, ...]


def demo_dataflow(program: Program) -> DataflowDemo:
    dataflow = analyze_dataflow(program.function)
    returned = program.function.get_return_op()
    assert returned is not None
    outputs = set(returned.arguments)
    rows = []
    for index, op in enumerate(dataflow.ops):
        (result,) = op.results
        info = dataflow[result]
        readers = sum(1 for use in result.uses if use.operation is not returned)
        last = (
            info.last_use
            if info.last_use is not None and info.last_use < len(dataflow.ops)
            else None
        )
        rows.append(
            DataflowRow(
                index,
                program.names[result],
                op_text(op, program.names),
                info.level,
                readers,
                last,
                result in outputs,
            )
        )
    return DataflowDemo(
        program.source,
        program.ir,
        tuple(rows),
        len(dataflow.ops),
        dataflow.depth,
        tuple(_dataflow_observations(rows, dataflow.depth)),
    )


def _dataflow_observations(rows: list[DataflowRow], depth: int) -> list[str]:
    if not rows:
        return ["The program computes nothing: its outputs are inputs or constants."]
    ops = len(rows)
    width = ops / depth
    shape = (
        "a chain: almost every op waits for the one before it, there are hardly any parallel "
        "branches"
        if width < 1.5
        else f"about {width:.1f} ops per level: the graph has some parallel branches"
    )
    lines = [
        f"{_plural(ops, 'op')} in a graph of depth {depth}: {shape}. Elementwise parallelism "
        "lives in the elements (each one is independent), not in the graph."
    ]
    busiest = max(rows, key=lambda row: row.readers)
    once = sum(1 for row in rows if row.readers == 1)
    lifetime = (busiest.last_use if busiest.last_use is not None else ops) - busiest.index
    lines.append(
        f"{busiest.value} is read by {_plural(busiest.readers, 'op')} and stays alive for "
        f"{_plural(lifetime, 'step')}; {once} of the {ops} values are read exactly once and die "
        "right after. Demo 3's memory plan lives off that."
    )
    return lines


# ---------------------------------------------------------------------------------------------
# Demo 2: the memory-traffic bill on a GPU
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrafficRow:
    label: str
    tensors: int
    """Whole-tensor reads plus writes."""
    bytes: int
    memory_time_s: float
    kernels: int
    launch_time_s: float
    time_s: float


@dataclass(frozen=True)
class TrafficDemo:
    device: str
    shape: tuple[int, ...]
    dtype: str
    elements: int
    tensor_bytes: int
    bandwidth: float
    launch_us: float
    rows: tuple[TrafficRow, TrafficRow]
    """Unfused, then fused."""
    flops_per_element: int
    intensity: float
    """FLOPs per byte of the fused program."""
    elementwise_ridge: float
    tensor_core_ridge: float
    decode_shape: tuple[int, ...]
    decode_launch_share: float
    """Share of the unfused program's time that is launch overhead at `decode_shape`."""
    observations: tuple[str, ...]


def _traffic_row(label: str, cost: ProgramCost, fused: bool) -> TrafficRow:
    t = (cost.fused if fused else cost.unfused).totals
    return TrafficRow(
        label,
        t.tensor_accesses,
        t.bytes,
        max(t.memory_time_s, t.compute_time_s),
        t.kernels,
        t.launch_time_s,
        t.time_s,
    )


def demo_traffic(program: Program) -> TrafficDemo:
    options = CostOptions(GPU_DEVICE, GPU_SHAPE, GPU_DTYPE, GPU_LAUNCH_US)
    cost = cost_program(program.source, options, filename=program.filename)
    decode = cost_program(
        program.source, CostOptions(GPU_DEVICE, DECODE_SHAPE, GPU_DTYPE, GPU_LAUNCH_US)
    )
    hw = options.hardware
    elements = GPU_SHAPE[0] * GPU_SHAPE[1]
    dtype = options.dtype or GPU_DTYPE
    fused = cost.fused.totals
    demo = TrafficDemo(
        device=hw.description,
        shape=GPU_SHAPE,
        dtype=dtype,
        elements=elements,
        tensor_bytes=max((a.bytes for k in cost.fused.kernels for a in k.writes), default=0),
        bandwidth=hw.hbm_bandwidth,
        launch_us=GPU_LAUNCH_US,
        rows=(
            _traffic_row("unfused (one kernel per op)", cost, fused=False),
            _traffic_row("fused (ew-fuse)", cost, fused=True),
        ),
        flops_per_element=fused.flops // elements if elements else 0,
        intensity=fused.intensity,
        elementwise_ridge=hw.ridge_point(dtype),
        tensor_core_ridge=hw.tensor_core_ridge_point,
        decode_shape=DECODE_SHAPE,
        decode_launch_share=(
            decode.unfused.totals.launch_time_s / decode.unfused.totals.time_s
            if decode.unfused.totals.time_s
            else 0.0
        ),
        observations=(),
    )
    return replace(demo, observations=tuple(_traffic_observations(demo, program)))


def _traffic_observations(demo: TrafficDemo, program: Program) -> list[str]:
    unfused, fused = demo.rows
    lines = [
        f"Unfused, the {_plural(unfused.kernels, 'kernel')} read and write "
        f"{unfused.tensors} whole tensors; fused, {fused.tensors} (read "
        f"{', '.join(program.inputs)}; write {', '.join(program.outputs)}): "
        f"{_ratio(unfused.bytes, fused.bytes)} less traffic and "
        f"{_ratio(unfused.time_s, fused.time_s)} less time. An elementwise program's time is its "
        "bytes."
    ]
    launch_share = unfused.launch_time_s / unfused.time_s if unfused.time_s else 0.0
    decode = "x".join(str(d) for d in demo.decode_shape)
    verdict = "the main cost" if demo.decode_launch_share > 0.5 else "a large cost"
    lines.append(
        f"Fusion also cuts launches from {unfused.kernels} to {fused.kernels}. At this size "
        f"launches are {launch_share:.0%} of the unfused time; at decode size ({decode}) they "
        f"are {demo.decode_launch_share:.0%}, {verdict}: fusion matters even more in decode."
    )
    bound = "still memory-bound" if demo.intensity < demo.elementwise_ridge else "compute-bound"
    lines.append(
        f"Fused, the program does {demo.intensity:.2f} FLOP per byte, against a ridge point of "
        f"{demo.elementwise_ridge:.0f} FLOP/B for the CUDA cores and "
        f"{demo.tensor_core_ridge:.0f} for the tensor cores: {bound}. The next step is to fuse it "
        "into the matmul before it (epilogue fusion), so its reads and writes vanish."
    )
    return lines


# ---------------------------------------------------------------------------------------------
# Demo 3: the memory plan of the unfused program
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    value: str
    op: str
    buffer: int
    how: str
    """"new", "in place" (over an input dying at this op) or "reused" (freed earlier)."""


@dataclass(frozen=True)
class PlanDemo:
    rows: tuple[PlanRow, ...]
    naive_buffers: int
    planned_buffers: int
    naive_bytes: int
    planned_bytes: int
    peak_live_bytes: int
    buffer_bytes: int
    max_live: int
    """Most temporaries alive between two ops: no plan can use fewer buffers."""
    in_place: int
    fused_buffers: int
    """Temporaries the fused program needs."""
    observations: tuple[str, ...]


def demo_memory_plan(program: Program) -> PlanDemo:
    function = program.function
    plan = plan_memory(function, reuse=True)
    shape = (GPU_SHAPE[0] * GPU_SHAPE[1],)
    fused = apply_pipeline(program.optimized, "ew-fuse")
    fused_function = only_function(fused)
    rows = tuple(
        PlanRow(
            program.names[value],
            op_text(value.owner, program.names) if isinstance(value.owner, Operation) else "",
            plan.buffer_of[value],
            "in place" if value in plan.in_place else "reused" if value in plan.reused else "new",
        )
        for value in plan.liveness.temporaries
    )
    naive_bytes = plan.naive_bytes(shape, GPU_DTYPE)
    demo = PlanDemo(
        rows=rows,
        naive_buffers=plan.naive_count,
        planned_buffers=plan.planned_count,
        naive_bytes=naive_bytes,
        planned_bytes=plan.planned_bytes(shape, GPU_DTYPE),
        peak_live_bytes=plan.peak_live_bytes(shape, GPU_DTYPE),
        buffer_bytes=naive_bytes // plan.naive_count if plan.naive_count else 0,
        max_live=_most_alive_between_ops(plan.liveness),
        in_place=len(plan.in_place),
        fused_buffers=plan_memory(fused_function).planned_count,
        observations=(),
    )
    return replace(demo, observations=tuple(_plan_observations(demo)))


def _most_alive_between_ops(liveness: Liveness) -> int:
    """Temporaries written by op i or before and read after it, at the worst i."""
    return max(
        (
            sum(
                1
                for v in liveness.temporaries
                if liveness.definition[v] <= step < liveness.last_use.get(v, -1)
            )
            for step in range(len(liveness.steps))
        ),
        default=0,
    )


def _plan_observations(demo: PlanDemo) -> list[str]:
    if not demo.naive_buffers:
        return ["The unfused program has no temporaries: every op writes an output."]
    lines = [
        f"Reusing dead buffers takes the {demo.naive_buffers} temporaries down to "
        f"{_plural(demo.planned_buffers, 'buffer')}; {demo.max_live} temporaries are alive "
        "at once between two ops, so no plan can use fewer."
    ]
    lines.append(
        f"{demo.in_place} of the {demo.naive_buffers} temporaries are written in place, over an "
        "input that dies at that very op: element i is read before element i is written, so "
        "an elementwise op may overwrite its own input."
    )
    fused = (
        "none at all: the intermediates never leave registers"
        if demo.fused_buffers == 0
        else f"{_plural(demo.fused_buffers, 'buffer')}"
    )
    lines.append(
        f"Eager frameworks reuse memory at run time (PyTorch's caching allocator); compilers "
        f"plan it ahead, as here. Fusion goes further: the fused program needs {fused}."
    )
    return lines


# ---------------------------------------------------------------------------------------------
# Demo 4: measured on this CPU
# ---------------------------------------------------------------------------------------------

ProgressFactory = Callable[[str], AbstractContextManager[object]]
"""Called with what is about to run; the context lasts while it runs (a spinner, a log line)."""


def no_progress(what: str) -> AbstractContextManager[object]:
    return nullcontext()


@dataclass(frozen=True)
class MeasureRow:
    variant: str
    traffic: str
    """The traffic model it moves: "unfused" or "fused"."""
    time_s: float
    unfused_bandwidth: float
    """Unfused traffic bytes per second of its time."""
    fused_bandwidth: float
    """Fused traffic bytes per second of its time."""
    of_ceiling: float
    """The ceiling's time over its time."""
    max_error: float | None


@dataclass(frozen=True)
class MeasureDemo:
    n: int
    dtype: str
    threads: int
    repeat: int
    array_bytes: int
    """Bytes of the largest input (a full-size array; a broadcast bias is smaller)."""
    unfused_bytes: int
    fused_bytes: int
    ceiling_source: str
    rows: tuple[MeasureRow, ...]
    """numpy per-op, numpy planned, fused libm, fused approx, bandwidth ceiling."""
    observations: tuple[str, ...]

    def row(self, variant: str) -> MeasureRow:
        (row,) = [r for r in self.rows if r.variant == variant]
        return row


def demo_measure(
    program: Program, n: int, repeat: int, progress: ProgressFactory = no_progress
) -> MeasureDemo:
    """Time each variant on inputs of `n` elements, one thread (median of `repeat` runs).

    Inputs are float32 unless the program declares other dtypes or shapes.
    """
    with progress(f"demo 4: inputs and float64 reference, n = {n:,}"):
        workload = bench.prepare_workload(program.source, n, filename=program.filename)
    builders: list[tuple[str, Callable[[], bench.Variant]]] = [
        ("numpy per-op", lambda: bench.numpy_per_op(workload)),
        ("numpy planned", lambda: bench.numpy_planned(workload)),
        ("xfuse fused libm", lambda: bench.xfuse_fused(workload, "libm")),
        ("xfuse fused approx", lambda: bench.xfuse_fused(workload, "approx")),
        ("bandwidth ceiling", lambda: bench.bandwidth_ceiling(workload)),
    ]
    measured = []
    for index, (name, build) in enumerate(builders, 1):
        with progress(f"demo 4: measuring {name} ({index}/{len(builders)}), n = {n:,}"):
            measured.append(bench.measure(workload, build(), repeat))
    ceiling = measured[-1].time_s
    rows = tuple(
        MeasureRow(
            m.variant,
            m.traffic,
            m.time_s,
            workload.unfused_bytes / m.time_s,
            workload.fused_bytes / m.time_s,
            ceiling / m.time_s,
            m.max_error,
        )
        for m in measured
    )
    demo = MeasureDemo(
        n=workload.n,
        dtype="/".join(sorted({array.dtype.name for array in workload.arrays.values()})),
        threads=1,
        repeat=repeat,
        array_bytes=max(array.nbytes for array in workload.arrays.values()),
        unfused_bytes=workload.unfused_bytes,
        fused_bytes=workload.fused_bytes,
        ceiling_source=bench.ceiling_source(workload.input_names, workload.output_names)
        .strip()
        .rstrip(";"),
        rows=rows,
        observations=(),
    )
    return replace(demo, observations=tuple(_measure_observations(demo)))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _measure_observations(demo: MeasureDemo) -> list[str]:
    per_op, planned = demo.row("numpy per-op"), demo.row("numpy planned")
    libm, approx = demo.row("xfuse fused libm"), demo.row("xfuse fused approx")
    ceiling = demo.row("bandwidth ceiling")
    lines = []
    if planned.time_s < per_op.time_s:
        lines.append(
            f"Planned out= buffers take numpy from {_ms(per_op.time_s)} to "
            f"{_ms(planned.time_s)} ({_ratio(per_op.time_s, planned.time_s)}): the same ops and "
            "traffic, minus allocating fresh arrays (and the OS zeroing and mapping new pages)."
        )
    else:
        lines.append(
            f"Planned out= buffers did not help numpy here ({_ms(per_op.time_s)} op by op, "
            f"{_ms(planned.time_s)} planned): at this size fresh allocations are cheap "
            "(recycled by the allocator, not new pages)."
        )
    traffic_cut = _ratio(demo.unfused_bytes, demo.fused_bytes)
    if libm.time_s > per_op.time_s:
        lines.append(
            f"Surprise: the fused loop calling libm takes {_ms(libm.time_s)}, "
            f"{_ratio(libm.time_s, per_op.time_s)} the time of unfused numpy. Fusion cut the "
            f"traffic {traffic_cut}, but a scalar libm call per element made the kernel "
            "compute-bound: the bottleneck moved. numpy's own transcendentals are vectorized."
        )
    else:
        lines.append(
            f"The fused loop calling libm takes {_ms(libm.time_s)}, "
            f"{_ratio(per_op.time_s, libm.time_s)} faster than unfused numpy, yet only "
            f"{libm.of_ceiling:.0%} of the bandwidth ceiling: its scalar libm calls, not memory, "
            "set its speed."
        )
    error = f"{approx.max_error:.1e}" if approx.max_error is not None else "unchecked"
    lines.append(
        f"With approximations in plain arithmetic (multiply, add, divide) LLVM vectorizes the "
        f"whole loop: {_ms(approx.time_s)}, {_ratio(per_op.time_s, approx.time_s)} faster than "
        f"unfused numpy and {approx.of_ceiling:.0%} of the ceiling, with a max error of "
        f"{error}. ML compilers generate such polynomial or rational forms of exp, tanh and erf."
    )
    lines.append(
        f"The ceiling ({demo.ceiling_source}) streams the fused traffic at "
        f"{ceiling.fused_bandwidth / 1e9:.1f} GB/s on one core: "
        + (
            "the fused approx kernel is within 20% of it: memory bandwidth, not arithmetic, "
            "sets its speed."
            if approx.of_ceiling >= 0.8
            else f"the fused approx kernel reaches {approx.of_ceiling:.0%} of it, so on this run "
            "something besides bandwidth held it back (its arithmetic, or other processes "
            "sharing the core)."
        )
    )
    return lines


# ---------------------------------------------------------------------------------------------
# All four
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LectureFigures:
    program: str
    """The source file's name."""
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dataflow: DataflowDemo
    traffic: TrafficDemo
    memory_plan: PlanDemo
    measurement: MeasureDemo


def run_lecture(
    program: Program, n: int, repeat: int, progress: ProgressFactory = no_progress
) -> LectureFigures:
    """The four demos; demo 4 measures inputs of `n` elements, median of `repeat` runs."""
    with progress("demos 1-3: dataflow, traffic bill, memory plan"):
        dataflow = demo_dataflow(program)
        traffic = demo_traffic(program)
        memory_plan = demo_memory_plan(program)
    return LectureFigures(
        program.filename,
        program.inputs,
        program.outputs,
        dataflow,
        traffic,
        memory_plan,
        demo_measure(program, n, repeat, progress),
    )
