"""The lecture's four demos (dataflow, traffic bill, memory plan, CPU measurement) as figures.

Every figure comes from xfuse's own pipeline and analyses; every observation is a sentence
computed from those figures (a comparison decides what it says), so a different program or
machine gives different sentences. Demo 4's sentences come from `measure_observations`, a pure
function of the measured rounds (two times differ only when `timing.separable`) and of what the
fused kernels compile to (`BuildFacts`: libm calls, vectors), so tests can feed it any numbers.
Rendering (tables, JSON) is in `lecture_report`.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.printer import Printer

from xfuse.analysis.cost import CostOptions, ProgramCost, fitted_problem_shape
from xfuse.analysis.cost_report import nbytes
from xfuse.analysis.dataflow import analyze_dataflow
from xfuse.analysis.memory import Liveness, MemoryPlan, plan_memory
from xfuse.benchmarking import bench
from xfuse.benchmarking.timing import format_duration, host_description, separable, three_digits
from xfuse.codegen.native import host_cpu
from xfuse.dialects import ew
from xfuse.dialects.dtypes import numpy_dtype
from xfuse.frontend.builder import FunctionBuilder
from xfuse.frontend.language import ParsedProgram
from xfuse.runtime.cost_driver import cost_program, own_dtypes
from xfuse.transforms.pipeline import apply_pipeline, only_function

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
    output_names: tuple[str, ...]
    """The program's outputs, as it names them (`output a, a2; a2 = a;` returns `%a` twice)."""

    @property
    def function(self) -> func.FuncOp:
        return only_function(self.optimized)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.names[a] for a in self.function.args)

    @property
    def read_inputs(self) -> tuple[str, ...]:
        """The inputs some op or output reads (a declared input may go unused)."""
        return tuple(self.names[a] for a in self.function.args if a.uses)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(f"%{name}" for name in self.output_names)

    @functools.cached_property
    def declared_dtypes(self) -> set[str]:
        """The dtypes of its tensors where it declares or converts to any but `GPU_DTYPE`,
        which `cost_program` then prices each tensor in (parsed in that dtype, as it parses: a
        program declaring f32 was priced in f32 by demo 2 and in bf16 by demo 3); empty where
        all are of it, which demos 2 and 3 price in it."""
        parsed = ParsedProgram(self.source, None, FunctionBuilder(GPU_DTYPE), self.filename)
        return own_dtypes(only_function(parsed.module), GPU_DTYPE)


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
    parsed = ParsedProgram(source, None, FunctionBuilder(), filename)
    optimized = apply_pipeline(parsed.module, "ew-optimize")
    ir, names = printed_names(optimized)
    return Program(source, filename, optimized, ir, names, tuple(parsed.output_names))


def _operand_text(value: SSAValue, names: dict[SSAValue, str]) -> str:
    constant = ew.constant_value(value)
    return ew.format_float(constant) if constant is not None else names[value]


def op_text(op: Operation, names: dict[SSAValue, str]) -> str:
    """`mul(0.5, h)`: the op's mnemonic applied to its operands, constants written inline."""
    operands = ", ".join(_operand_text(v, names) for v in op.operands)
    return f"{op.name.removeprefix('ew.')}({operands})"


def plural(count: int, word: str, plural: str | None = None) -> str:
    """`1 op`, `2 ops`, `3 temporaries` (give the plural where adding an s is wrong)."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _is_are(count: int) -> str:
    return "is" if count == 1 else "are"


def _factor(larger: float, smaller: float) -> str:
    """`larger / smaller` with enough digits to tell it from 1: `1.07x`, `12.7x`, `131x`."""
    if not smaller:
        return "inf"
    ratio = larger / smaller
    digits = 3 if ratio < 1.0995 else 2 if ratio < 9.995 else 1 if ratio < 99.95 else 0
    return f"{ratio:,.{digits}f}x"


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
        # ops, not operand slots: `h * h` is one reader of h
        readers = len({use.operation for use in result.uses if use.operation is not returned})
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
    if ops == 1:
        shape = "a single op"
    elif ops == depth:
        shape = "a chain: each op waits for the one before it, there are no parallel branches"
    elif ops / depth < 1.5:
        shape = (
            "almost a chain: most ops wait for the one before it, there are few parallel branches"
        )
    else:
        shape = f"about {ops / depth:.1f} ops per level: the graph has parallel branches"
    lines = [
        f"{plural(ops, 'op')} in a graph of depth {depth}: {shape}. Elementwise parallelism "
        "lives in the elements (each one is independent), not in the graph."
    ]
    busiest = max(rows, key=lambda row: row.readers)
    if not busiest.readers:
        lines.append(
            "No op reads another op's result: every value goes straight to the output, so the "
            "unfused program has nothing to keep alive between ops."
        )
        return lines
    once = sum(1 for row in rows if row.readers == 1 and not row.is_output)  # (outputs live on)
    lifetime = (busiest.last_use if busiest.last_use is not None else ops) - busiest.index
    lines.append(
        f"{busiest.value} is read by {plural(busiest.readers, 'op')} and stays alive for "
        f"{plural(lifetime, 'step')}; {once or 'none'} of the {plural(ops, 'value')} "
        f"{_is_are(max(once, 1))} read by one op only and {'dies' if once <= 1 else 'die'} "
        "right after it. Demo 3's memory plan lives off that."
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
    roofline_time_s: float
    """Per kernel the longer of its bytes over the bandwidth and its FLOPs over the peak."""
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
    flops_per_element: float
    intensity: float
    """FLOPs per byte of the fused program."""
    elementwise_ridge: float
    tensor_core_ridge: float
    inputs_read_again: int
    """The inputs more than one fused kernel reads."""
    reads_again: int
    """Their reads after the first (two kernels of one input: 1)."""
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
        t.roofline_time_s,
        t.kernels,
        t.launch_time_s,
        t.time_s,
    )


def problem_shape(program: Program, shape: tuple[int, ...] = GPU_SHAPE) -> tuple[int, ...]:
    """`shape` (the lecture's [t, d]) as `program`'s problem (`fitted_problem_shape`)."""
    return fitted_problem_shape(program.function, shape)


def demo_traffic(program: Program) -> TrafficDemo:
    shape, decode_shape = problem_shape(program), problem_shape(program, DECODE_SHAPE)
    options = CostOptions(GPU_DEVICE, shape, GPU_DTYPE, GPU_LAUNCH_US)
    cost = cost_program(program.source, options, filename=program.filename)
    decode = cost_program(
        program.source,
        CostOptions(GPU_DEVICE, decode_shape, GPU_DTYPE, GPU_LAUNCH_US),
        filename=program.filename,
    )
    hw = options.hardware
    elements = math.prod(shape)
    declared = program.declared_dtypes
    fused = cost.fused.totals
    # the bytes of a tensor of those elements (the largest write was a [d] output's 28,672 B
    # beside "58,720,256 elements per tensor"): a full-shape one's, else of the widest dtype
    accesses = [a for k in cost.fused.kernels for a in (*k.reads, *k.writes)]
    full = [a.bytes for a in accesses if math.prod(a.shape) == elements]
    widest = max(numpy_dtype(d).itemsize for d in declared or {GPU_DTYPE})
    tensor_bytes = max(full, default=elements * widest)
    reads = Counter(a.name for k in cost.fused.kernels for a in k.reads)
    read_inputs = [ew.input_name(a) for a in program.function.args if a.uses]
    demo = TrafficDemo(
        device=hw.description,
        shape=shape,
        dtype="/".join(sorted(declared)) or GPU_DTYPE,
        elements=elements,
        tensor_bytes=tensor_bytes,
        bandwidth=hw.hbm_bandwidth,
        launch_us=GPU_LAUNCH_US,
        rows=(
            _traffic_row("unfused (one kernel per op)", cost, fused=False),
            _traffic_row("fused (ew-fuse)", cost, fused=True),
        ),
        flops_per_element=fused.flops / elements if elements else 0.0,
        intensity=fused.intensity,
        # (the program's own: its FLOPs over the time the model prices them at, each at its
        # precision's peak; one precision's ridge called a mixed f64/f32 program memory-bound
        # where its kernel was priced compute-bound)
        elementwise_ridge=fused.flops / fused.compute_time_s / hw.hbm_bandwidth
        if fused.flops and fused.compute_time_s
        else hw.ridge_point(cost.fused.compute_dtype),
        tensor_core_ridge=hw.tensor_core_ridge_point,
        inputs_read_again=sum(reads[name] > 1 for name in read_inputs),
        reads_again=sum(max(reads[name] - 1, 0) for name in read_inputs),
        decode_shape=decode_shape,
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
    read = ", ".join(program.read_inputs) or "nothing"
    moved = f"read {read}; write {', '.join(program.outputs)}"
    # (reads again were counted as passed between the kernels)
    between = fused.tensors - len(program.read_inputs) - len(program.outputs) - demo.reads_again
    if fused.kernels > 1 and between > 0:  # (the list named 2 tensors of a count of 4)
        moved += f"; and {between} more between its {fused.kernels} kernels"
    if demo.reads_again:  # ("2 inputs" of one read by 3 kernels)
        moved += (
            f"; and {plural(demo.inputs_read_again, 'input')} read "
            f"{plural(demo.reads_again, 'more time')} by other kernels"
        )
    memory_bound = demo.intensity < demo.elementwise_ridge
    # (a tiny or 0-d program: its launches, not its bytes, set its time; it was "memory-bound")
    launch_bound = fused.time_s > 0 and fused.launch_time_s > fused.time_s / 2
    if unfused.kernels == fused.kernels:
        lines = [
            f"Fused or not, the program is {plural(fused.kernels, 'kernel')} reading and writing "
            f"{plural(fused.tensors, 'tensor')} ({moved}): there is nothing to fuse, and "
            "both bills are the same."
        ]
    else:
        lines = [
            f"Unfused, the {plural(unfused.kernels, 'kernel')} read and write "
            f"{plural(unfused.tensors, 'tensor')}; fused, {fused.tensors} ({moved}): "
            f"{_factor(unfused.bytes, fused.bytes)} less traffic and "
            f"{_factor(unfused.time_s, fused.time_s)} less time."
            + (
                " An elementwise program's time is its bytes."
                if memory_bound and not launch_bound
                else ""
            )
        ]
    launch_share = unfused.launch_time_s / unfused.time_s if unfused.time_s else 0.0
    decode = "x".join(str(d) for d in demo.decode_shape) or "0-d"  # (as the header says)
    verdict = "the main cost" if demo.decode_launch_share > 0.5 else "not the main cost"
    launches = (
        f"Fusion also cuts launches from {unfused.kernels} to {fused.kernels}. At this size "
        "launches are {share} of the unfused time"
        if unfused.kernels > fused.kernels
        else "At this size launches are {share} of the time"
    ).format(share=f"{launch_share:.0%}")
    lines.append(
        f"{launches}; at decode size "
        f"({decode}) they are {demo.decode_launch_share:.0%}, {verdict}"
        + (
            ": fusion matters even more in decode."
            if unfused.kernels > fused.kernels and demo.decode_launch_share > launch_share
            else "."
        )
    )
    if launch_bound:
        lines.append(
            f"Fused, the program does {demo.intensity:.2f} FLOP per byte, but at this size its "
            f"launches set its time ({fused.launch_time_s * 1e6:.1f} of "
            f"{fused.time_s * 1e6:.1f} us): launch-bound, neither its bytes nor its arithmetic "
            "matter yet. Larger arrays, or fusing it into the kernel before it, amortize that."
        )
    elif memory_bound:
        lines.append(
            f"Fused, the program does {demo.intensity:.2f} FLOP per byte, below the ridge point "
            f"of {demo.elementwise_ridge:.0f} FLOP/B for the CUDA cores (and "
            f"{demo.tensor_core_ridge:.0f} for the tensor cores): memory-bound. The next step is "
            "to fuse it into the matmul before it (epilogue fusion), so its reads and writes "
            "vanish."
        )
    else:
        lines.append(
            f"Fused, the program does {demo.intensity:.2f} FLOP per byte, at or above the ridge "
            f"point of {demo.elementwise_ridge:.0f} FLOP/B for the CUDA cores: compute-bound, "
            "its arithmetic and not its bytes sets its time."
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
    """A temporary's bytes; their mean where they differ (`buffers_alike` False: a program of
    several dtypes)."""
    buffers_alike: bool
    max_live: int
    """Most temporaries alive between two ops."""
    least_buffers: int
    """The fewest buffers a plan can use: per dtype and shape (a buffer holds one), the most
    temporaries of it alive between two ops, summed (`max_live` where all are alike)."""
    in_place: int
    fused_buffers: int
    """Temporaries the fused program needs."""
    observations: tuple[str, ...]


def demo_memory_plan(program: Program) -> PlanDemo:
    function = program.function
    plan = plan_memory(function, reuse=True)
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
    dtype = None if program.declared_dtypes else GPU_DTYPE  # (as demo 2 prices them)
    shape = problem_shape(program)
    naive_bytes = plan.naive_bytes(shape, dtype)
    demo = PlanDemo(
        rows=rows,
        naive_buffers=plan.naive_count,
        planned_buffers=plan.planned_count,
        naive_bytes=naive_bytes,
        planned_bytes=plan.planned_bytes(shape, dtype),
        peak_live_bytes=plan.peak_live_bytes(shape, dtype),
        buffer_bytes=naive_bytes // plan.naive_count if plan.naive_count else 0,
        buffers_alike=len(set(plan.temporary_bytes(shape, dtype))) <= 1,
        max_live=_most_alive_between_ops(plan.liveness, plan.liveness.temporaries),
        least_buffers=_least_buffers(plan),
        in_place=len(plan.in_place),
        fused_buffers=plan_memory(fused_function).planned_count,
        observations=(),
    )
    return replace(demo, observations=tuple(_plan_observations(demo)))


def _most_alive_between_ops(liveness: Liveness, temporaries: Sequence[SSAValue]) -> int:
    """Of `temporaries`, those written by op i or before and read after it, at the worst i."""
    return max(
        (
            sum(
                1
                for v in temporaries
                if liveness.definition[v] <= step < liveness.last_use.get(v, -1)
            )
            for step in range(len(liveness.steps))
        ),
        default=0,
    )


def _least_buffers(plan: MemoryPlan) -> int:
    """`PlanDemo.least_buffers`: a buffer holds values of one dtype and shape
    (`DimClasses.key`), so the bound is per class: 2 `[d]` temporaries alive at once beside a
    `[t, d]` one need 3 (the demo said "2 are alive at once, so reuse saves nothing")."""
    by_class: dict[tuple[Any, ...], list[SSAValue]] = {}
    for value in plan.liveness.temporaries:
        by_class.setdefault(plan.dims.key(value), []).append(value)
    return sum(_most_alive_between_ops(plan.liveness, alike) for alike in by_class.values())


def _plan_observations(demo: PlanDemo) -> list[str]:
    fused = (
        "none at all: the intermediates never leave registers"
        if demo.fused_buffers == 0
        else plural(demo.fused_buffers, "buffer")
    )
    if not demo.naive_buffers:
        return [
            "The unfused program has no temporaries: every op writes an output, so there is "
            "nothing to plan."
        ]
    temporaries = plural(demo.naive_buffers, "temporary", "temporaries")
    alive = (
        f"{plural(demo.max_live, 'temporary', 'temporaries')} {_is_are(demo.max_live)} alive "
        "at once between two ops"
    )
    if demo.least_buffers != demo.max_live:  # (a buffer holds one dtype and shape)
        alive += (
            f", and a buffer holds values of one dtype and shape: at least "
            f"{plural(demo.least_buffers, 'buffer')}"
        )
    planned = plural(demo.planned_buffers, "buffer")
    if demo.naive_buffers == 1:
        lines = ["The unfused program has 1 temporary: there is no dead buffer to reuse."]
    elif demo.planned_buffers == demo.naive_buffers == demo.least_buffers:
        lines = [
            f"The unfused program has {temporaries}; {alive}, so reusing dead buffers saves "
            f"nothing: {planned}."
        ]
    else:
        bound = (
            "so no plan can use fewer"
            if demo.planned_buffers == demo.least_buffers
            else f"the greedy plan uses {demo.planned_buffers - demo.least_buffers} more than "
            "that"  # (a bound: no plan may reach it)
        )
        reuse = (
            f"Reusing dead buffers takes the {temporaries} down to {planned}"
            if demo.planned_buffers < demo.naive_buffers
            else f"The greedy plan reuses no buffer of the {temporaries}"
        )
        lines = [f"{reuse}; {alive}, {bound}."]
    if demo.in_place:
        lines.append(
            f"{demo.in_place} of the {temporaries} {_is_are(demo.in_place)} written in place, "
            "over a temporary that dies at that very op: element i is read before element i is "
            "written, so an elementwise op may overwrite its own input."
        )
    else:
        lines.append(
            "No temporary is written in place: no op writing one reads another temporary (of "
            "its type and shape) that dies there, and the program's inputs are never "
            "overwritten."
        )
    further = (
        f"Fusion goes further: the fused program needs {fused}."
        if demo.fused_buffers < demo.planned_buffers
        else f"Fusion saves no buffer here: the fused program needs {fused} too."
    )
    lines.append(
        "Eager frameworks reuse memory at run time (PyTorch's caching allocator); compilers "
        f"plan it ahead, as here. {further}"
    )
    return lines


# ---------------------------------------------------------------------------------------------
# Demo 4: measured on this CPU
# ---------------------------------------------------------------------------------------------

ProgressFactory = Callable[[str], AbstractContextManager[object]]
"""Called with what is about to run; the context lasts while it runs (a spinner, a log line)."""


def no_progress(what: str) -> AbstractContextManager[object]:
    return nullcontext()


ROUNDS = 5
"""Demo 4's rounds: each times every variant in turn (`bench.measure_interleaved`)."""

MEMORY_SPEED_SHARE = 0.9
"""The least share of the ceiling's speed at which demo 4 calls a kernel that its rounds cannot
tell from the ceiling memory-bound; below it (a noisy `--quick` run at 61%) it says only that
the rounds cannot tell."""

VARIANTS = (
    "numpy per-op",
    "numpy planned",
    "xfuse fused libm",
    "xfuse fused approx",
    "bandwidth ceiling",
)
"""Demo 4's variants, in the order they are timed and shown."""


def percent_of_ceiling(share: float) -> str:
    """`share` in whole percent, as the table and the sentences give it: rounded, but down
    where it would read as `MEMORY_SPEED_SHARE` and is under it (89.5% reads "89%", not the
    "90%" a sentence says it falls short of; rounding every share under it down, 5.9% was "5%"
    in the text beside the table's "6%")."""
    text = f"{share:.0%}"
    if share < MEMORY_SPEED_SHARE and int(text.rstrip("%")) >= MEMORY_SPEED_SHARE * 100:
        return f"{math.floor(share * 100)}%"
    return text


@dataclass(frozen=True)
class BuildFacts:
    """What a fused kernel compiles to, read from its optimized LLVM IR."""

    math: str
    """The `math` option it was built with: "libm" or "approx"."""
    libm_calls: tuple[str, ...]
    """The C library functions it calls (`tanhf`); LLVM intrinsics are not calls."""
    vectorized: bool
    """Whether its code computes on vectors of floats."""


def build_facts(mode: str, llvm_ir: str) -> BuildFacts:
    """The facts of the kernel built with `math=mode` whose optimized LLVM IR is `llvm_ir`."""
    from llvmlite import binding

    declared = binding.parse_assembly(llvm_ir).functions
    calls = sorted(f.name for f in declared if f.is_declaration and not f.name.startswith("llvm."))
    vectorized = re.search(r"<\d+ x (half|bfloat|float|double)>", llvm_ir) is not None
    return BuildFacts(mode, tuple(calls), vectorized)


@dataclass(frozen=True)
class MeasureSetup:
    """What demo 4 knows before timing anything: sizes, traffic models and the fused builds."""

    n: int
    dtype: str
    threads: int
    array_bytes: int
    """Bytes of the largest input (a full-size array; a broadcast bias is smaller)."""
    unfused_bytes: int
    fused_bytes: int
    fused_kernels: int
    """The kernels of the fused program (`bench.Workload.fused_kernels`)."""
    fused_intermediates: int
    """Tensors one of them writes and another reads (`bench.Workload.fused_intermediates`)."""
    numpy_calls: int
    """numpy calls per run, each allocating its result when run op by op."""
    ceiling_source: str
    ceiling_bytes: int
    """Bytes the ceiling kernel moves (`bench.ceiling_bytes`); unlike `fused_bytes` where the
    program's outputs are not all of its inputs' full shape or an input is read by none."""
    libm_build: BuildFacts
    approx_build: BuildFacts
    same_code: bool
    """Whether the two fused builds have the same optimized LLVM IR."""
    approx_streams: bool
    """Whether the fused approx kernel's call writes its outputs with non-temporal stores at
    this size (`xfuse.runtime.kernel.Kernel.streams`); the ceiling's stores are normal."""
    host: str
    """The host it runs on (`host_description`: CPU, vector width, load average before)."""

    @property
    def ceiling_bounds(self) -> bool:
        """Whether the ceiling moves the fused program's bytes, so that its speed bounds the
        program's and a share of it means something."""
        return self.ceiling_bytes == self.fused_bytes


def measure_setup(workload: bench.Workload) -> MeasureSetup:
    """Demo 4's setup for a workload: its traffic and what its fused kernels compile to."""
    from xfuse.runtime.compiler import compile

    kernels = {
        mode: compile(workload.source, workload.outputs, math=mode, filename=workload.filename)
        for mode in ("libm", "approx")
    }
    steps = [
        op
        for op in only_function(workload.module).body.block.ops
        if not isinstance(op, ew.ConstantOp | func.ReturnOp)
    ]
    return MeasureSetup(
        n=workload.n,
        dtype="/".join(sorted({array.dtype.name for array in workload.arrays.values()})),
        threads=1,
        array_bytes=max((array.nbytes for array in workload.arrays.values()), default=0),
        unfused_bytes=workload.unfused_bytes,
        fused_bytes=workload.fused_bytes,
        fused_kernels=workload.fused_kernels,
        fused_intermediates=workload.fused_intermediates,
        numpy_calls=len(steps),
        ceiling_source="; ".join(
            bench.ceiling_source(
                workload.input_names, workload.output_names, bench.ceiling_conversions(workload)
            )
            .rstrip(";\n")
            .split(";\n")
        ),
        ceiling_bytes=bench.ceiling_bytes(workload),
        libm_build=build_facts("libm", kernels["libm"].llvm_ir),
        approx_build=build_facts("approx", kernels["approx"].llvm_ir),
        same_code=kernels["libm"].llvm_ir == kernels["approx"].llvm_ir,
        approx_streams=kernels["approx"].streams(
            **{name: array.shape for name, array in workload.arrays.items()}
        ),
        host=host_description(),
    )


@dataclass(frozen=True)
class MeasureRow:
    variant: str
    traffic: str
    """The traffic model it moves: "unfused" or "fused"."""
    time_s: float
    """Its best round."""
    round_times_s: tuple[float, ...]
    """The median of each round, in the order the rounds ran."""
    unfused_bandwidth: float | None
    """Unfused traffic bytes per second of its time; None for the fused variants, which never
    write the temporaries that traffic model counts, and for numpy on a program with no op."""
    fused_bandwidth: float | None
    """Fused traffic bytes per second of its time; None for numpy on a program with no op (it
    makes no call: its outputs are its inputs, and it moves no bytes)."""
    of_ceiling: float | None
    """The ceiling's time over its time; None where `fused_bandwidth` is."""
    max_error: float | None


@dataclass(frozen=True)
class MeasureDemo:
    setup: MeasureSetup
    rounds: int
    repeat: int
    """Timed runs per variant in each round (their median is the round's time)."""
    rows: tuple[MeasureRow, ...]
    """One per name in `VARIANTS`, in that order."""
    observations: tuple[str, ...]

    def row(self, variant: str) -> MeasureRow:
        (row,) = [r for r in self.rows if r.variant == variant]
        return row


def demo_measure(
    program: Program, n: int, repeat: int, progress: ProgressFactory = no_progress
) -> MeasureDemo:
    """Time each variant on inputs of `n` elements, one thread: `ROUNDS` rounds of `repeat`
    runs, interleaved; a variant's time is its best round's median.

    Inputs are float32 unless the program declares other dtypes or shapes.
    """
    with progress(f"demo 4: inputs, float64 reference and fused kernels, n = {n:,}"):
        workload = bench.prepare_workload(program.source, n, filename=program.filename)
        setup = measure_setup(workload)
        variants = [
            bench.numpy_per_op(workload),
            bench.numpy_planned(workload),
            bench.xfuse_fused(workload, "libm"),
            bench.xfuse_fused(workload, "approx"),
            bench.bandwidth_ceiling(workload),
        ]
    with progress(
        f"demo 4: timing {len(variants)} variants, {ROUNDS} rounds of {repeat}, n = {n:,}"
    ):
        measured = bench.measure_interleaved(workload, variants, ROUNDS, repeat)
    return measure_demo(setup, measured, ROUNDS, repeat)


def measure_demo(
    setup: MeasureSetup, measured: Sequence[bench.Measurement], rounds: int, repeat: int
) -> MeasureDemo:
    """Demo 4's figures and observations from its setup and the measurements (one per name in
    `VARIANTS`, in that order): no timing here, so a test can give it any numbers."""
    if [m.variant for m in measured] != list(VARIANTS):
        raise ValueError(f"expected measurements of {', '.join(VARIANTS)}")
    rows = tuple(_measure_row(setup, m, measured[-1].time_s) for m in measured)
    demo = MeasureDemo(setup, rounds, repeat, rows, ())
    return replace(demo, observations=tuple(measure_observations(demo)))


def _measure_row(setup: MeasureSetup, measured: bench.Measurement, ceiling_s: float) -> MeasureRow:
    time_s = measured.time_s
    moves = measured.traffic == "fused" or setup.numpy_calls > 0
    return MeasureRow(
        measured.variant,
        measured.traffic,
        time_s,
        measured.round_times_s,
        setup.unfused_bytes / time_s if measured.traffic == "unfused" and moves else None,
        setup.fused_bytes / time_s if moves else None,
        # (no share of a ceiling that bounds nothing: the lecture quotes none, nor bench's JSON)
        ceiling_s / time_s if moves and setup.ceiling_bounds else None,
        measured.max_error,
    )


def format_gbps(bytes_per_second: float) -> str:
    """GB/s to three significant digits: `18.5`, `0.0410`."""
    return three_digits(bytes_per_second / 1e9)


def _compare(a: MeasureRow, b: MeasureRow) -> int:
    """-1 if `a` is faster than `b` beyond noise, 1 if slower, 0 if they are not separable (or
    their best rounds disagree with their ranks, so no factor between them could be quoted)."""
    if not separable(a.round_times_s, b.round_times_s):
        return 0
    slower_pairs = sum((x > y) - (x < y) for x in a.round_times_s for y in b.round_times_s)
    by_rank = 1 if slower_pairs > 0 else -1
    return by_rank if by_rank == (1 if a.time_s > b.time_s else -1) else 0


def _versus(a: MeasureRow, b: MeasureRow, name: str) -> str:
    """`2.31x faster than numpy op by op (12.2 ms)`, `... slower ...` or `within noise of ...`."""
    other = f"{name} ({format_duration(b.time_s)})"
    match _compare(a, b):
        case -1:
            return f"{_factor(b.time_s, a.time_s)} faster than {other}"
        case 1:
            return f"{_factor(a.time_s, b.time_s)} slower than {other}"
        case _:
            return f"within noise of {other}"


def _calls(functions: Sequence[str]) -> str:
    return " and ".join(", ".join(functions).rsplit(", ", 1))


def measure_observations(demo: MeasureDemo) -> list[str]:
    """Demo 4's observations: each one chosen by the measured times (two times count as
    different only when `timing.separable`) and the fused builds' code."""
    per_op, planned, libm, approx, ceiling = (demo.row(name) for name in VARIANTS)
    return [
        _planned_observation(demo.setup, per_op, planned),
        _libm_observation(demo.setup, per_op, libm, approx, ceiling),
        _approx_observation(demo.setup, per_op, libm, approx),
        _ceiling_observation(demo.setup, approx, ceiling),
    ]


def _planned_observation(setup: MeasureSetup, per_op: MeasureRow, planned: MeasureRow) -> str:
    times = f"{format_duration(per_op.time_s)} op by op, {format_duration(planned.time_s)} planned"
    calls = plural(setup.numpy_calls, "numpy call")
    allocated = (
        "the fresh array its 1 numpy call allocates"
        if setup.numpy_calls == 1
        else f"the fresh arrays its {calls} allocate"
    )
    cost = "costs" if setup.numpy_calls == 1 else "cost"
    if not setup.numpy_calls:
        return (
            f"The program has no op, so numpy makes no call and allocates nothing, planned or "
            f"not ({times})."
        )
    match _compare(planned, per_op):
        case -1:
            return (
                f"Planned out= buffers take numpy from {format_duration(per_op.time_s)} to "
                f"{format_duration(planned.time_s)}, {_factor(per_op.time_s, planned.time_s)} "
                f"faster: the same {calls} and traffic, minus a fresh array allocated for each "
                "(for large arrays, new pages the OS must map and zero)."
            )
        case 1:
            return (
                f"Planned out= buffers make numpy {_factor(planned.time_s, per_op.time_s)} "
                f"slower here ({times}): at this size {allocated} {cost} nothing worth saving."
            )
        case _:
            return (
                f"Planned out= buffers make no difference beyond noise here ({times}): on this "
                f"run, what {allocated} {cost} cannot be told from noise."
            )


def _libm_observation(
    setup: MeasureSetup,
    per_op: MeasureRow,
    libm: MeasureRow,
    approx: MeasureRow,
    ceiling: MeasureRow,
) -> str:
    build = setup.libm_build
    if not build.libm_calls:
        code = (
            "the same code"
            if setup.same_code
            else "code without libm calls (though not the same code)"
        )
        shape = "vectorized by LLVM" if build.vectorized else "which LLVM left scalar"
        gap = "within noise of each other"
        if _compare(libm, approx):
            slow, fast = max(libm.time_s, approx.time_s), min(libm.time_s, approx.time_s)
            noise = " that is this machine's noise, not the code" if setup.same_code else ""
            gap = f"a {_factor(slow, fast)} gap{noise}"
        return (
            "No op of this program calls libm, so the fused libm and approx builds compile to "
            f"{code}, {shape}: {format_duration(libm.time_s)} and "
            f"{format_duration(approx.time_s)}, {gap}."
        )
    calls = _calls(build.libm_calls)
    versus = _versus(libm, per_op, "numpy op by op")
    cut = (
        f", though fusion cut the traffic {_factor(setup.unfused_bytes, setup.fused_bytes)}"
        if setup.unfused_bytes > setup.fused_bytes
        else ""
    )
    slower = _compare(libm, per_op)
    text = (
        f"{'Surprise: the' if slower == 1 else 'The'} fused loop calling {calls} takes "
        f"{format_duration(libm.time_s)}, {versus}{cut if slower >= 0 else ''}."
    )
    if not build.vectorized:
        text += (
            f" LLVM left the loop around the call{'s' if len(build.libm_calls) > 1 else ''} "
            "scalar: its code has no vector instructions."
        )
    if not setup.ceiling_bounds:
        return text
    versus_ceiling = _compare(libm, ceiling)
    share = libm.of_ceiling or 0.0
    percent = percent_of_ceiling(share)
    if versus_ceiling < 0 or (versus_ceiling == 0 and share >= MEMORY_SPEED_SHARE):
        return text + (
            f" It reaches {percent} of the bandwidth ceiling, as fast as memory allows: even "
            "with its libm calls, memory bandwidth sets its speed."
        )
    if versus_ceiling == 0:  # (as `_ceiling_observation`: memory-bound only from 90%)
        return text + (
            f" It reaches {percent} of the bandwidth ceiling, within noise of it in these "
            "rounds, too close to say whether memory or its libm calls set its speed."
        )
    text += f" It reaches only {percent} of the bandwidth ceiling, which moves the same bytes: "
    faster = _compare(approx, libm) < 0
    if faster and not setup.approx_build.libm_calls:
        return text + (
            f"its libm calls, not memory, set its speed (the approx build, which replaces them "
            f"with arithmetic, is {_factor(libm.time_s, approx.time_s)} faster)."
        )
    if faster and _calls_vector_forms(setup.approx_build):
        vector, replaced = _vector_forms_of(setup)
        return text + (
            f"its scalar libm calls, not memory, set its speed (the approx build, which calls "
            f"vector forms of {_calls(vector)}{_replaced(replaced)}, is "
            f"{_factor(libm.time_s, approx.time_s)} faster)."
        )
    return text + "something besides memory bandwidth sets its speed."


def _vector_forms_of(setup: MeasureSetup) -> tuple[list[str], list[str]]:
    """The functions the approx build calls libmvec's vector forms of (`tanf` of
    `_ZGVeN16v_tanf`), and the libm build's other calls, which the approx build computes."""
    vector = [call.split("_", 2)[2] for call in setup.approx_build.libm_calls]
    return vector, [call for call in setup.libm_build.libm_calls if call not in vector]


def _replaced(functions: Sequence[str]) -> str:
    return f" and replaces {_calls(functions)} with arithmetic" if functions else ""


def _calls_vector_forms(build: BuildFacts) -> bool:
    """`build`'s loop is vectorized and calls only glibc's libmvec functions (the vector ABI's
    `_ZGV...` names), as an f64 approx build does for the functions it does not approximate."""
    calls = build.libm_calls
    return build.vectorized and bool(calls) and all(call.startswith("_ZGV") for call in calls)


def _approx_observation(
    setup: MeasureSetup, per_op: MeasureRow, libm: MeasureRow, approx: MeasureRow
) -> str:
    error = f"{approx.max_error:.1e}" if approx.max_error is not None else "unchecked"
    build = setup.approx_build
    versus = _versus(approx, per_op, "numpy op by op")
    if _calls_vector_forms(build):
        vector, replaced = _vector_forms_of(setup)
        return (
            f"The approx build calls glibc's vector forms ({_calls(build.libm_calls)}) of "
            f"{_calls(vector)}{_replaced(replaced)}: ew-expand-math has no approximation for "
            f"{_calls(vector)} in {setup.dtype}, and LLVM "
            f"vectorizes the loop with libmvec. It takes {format_duration(approx.time_s)}, "
            f"{versus} and {_versus(approx, libm, 'the libm build')}, with a max error of {error}."
        )
    if build.libm_calls:
        calls = _calls(build.libm_calls)
        same = ", so it is the same code as the libm build" if setup.same_code else ""
        return (
            f"The approx build still calls {calls}: ew-expand-math has no approximation for "
            f"{'it' if len(build.libm_calls) == 1 else 'them'} in {setup.dtype}{same}. It takes "
            f"{format_duration(approx.time_s)}, {versus}, with a max error of {error}."
        )
    if not setup.libm_build.libm_calls:
        return (
            f"Fused, the loop takes {format_duration(approx.time_s)}, {versus}, with a max error "
            f"of {error}."
        )
    shape = (
        "LLVM vectorizes the whole loop"
        if build.vectorized
        else "LLVM still leaves the loop scalar"
    )
    return (
        f"With approximations in plain arithmetic in place of "
        f"{_calls(setup.libm_build.libm_calls)}, {shape}: {format_duration(approx.time_s)}, "
        f"{versus} and {_versus(approx, libm, 'the libm build')}, with a max error of {error}. "
        "ML compilers generate such polynomial or rational forms of exp, tanh and erf."
    )


def _ceiling_observation(setup: MeasureSetup, approx: MeasureRow, ceiling: MeasureRow) -> str:
    calls = setup.approx_build.libm_calls
    cause = (
        f"its calls to {_calls(calls)}"
        if calls
        else "its arithmetic, or at small sizes the fixed cost of each call"
    )
    if not setup.ceiling_bounds:
        # (which moves more says which cause weighs more: a program of 2 kernels with a [d]
        # output moved less than the ceiling, and was said to read its intermediates back)
        why = (
            f"its {setup.fused_kernels} kernels write intermediates and read them back"
            if setup.fused_intermediates and setup.fused_bytes > setup.ceiling_bytes
            else f"an input that more than one of its {setup.fused_kernels} kernels reads"
            if setup.fused_kernels > 1 and setup.fused_bytes > setup.ceiling_bytes
            else "an output not of the inputs' full shape, or an input no output reads"
        )
        return (
            f"The ceiling ({setup.ceiling_source}) moves {nbytes(setup.ceiling_bytes)} where "
            f"the fused program moves {nbytes(setup.fused_bytes)} ({why}): not the same "
            "traffic, so it bounds nothing here and no share of it is quoted."
        )
    share, bandwidth = approx.of_ceiling, ceiling.fused_bandwidth
    assert share is not None and bandwidth is not None  # (fused rows move their traffic)
    text = (
        f"The ceiling ({setup.ceiling_source}) streams the fused traffic at "
        f"{format_gbps(bandwidth)} GB/s on one core; the fused approx kernel moves the same "
        f"bytes at {percent_of_ceiling(share)} of its speed"
    )
    cached = host_cpu().streaming_bytes
    # (`--n 1`'s 16 bytes at 0.07 GB/s were said to be bound by memory bandwidth)
    in_cache = (
        f"in cache: {nbytes(setup.fused_bytes)} moved, under the {nbytes(cached)} from which "
        "this host streams past it; the cache and each call's fixed cost, not memory bandwidth, "
        "set both speeds"
    )
    comparison = _compare(approx, ceiling)
    memory_bound = comparison == -1 or (comparison == 0 and share >= MEMORY_SPEED_SHARE)
    if memory_bound and setup.fused_bytes < cached and not setup.approx_streams:
        within = "the same within noise" if comparison == 0 else "faster beyond noise"
        return f"{text}, {within}, {in_cache}."
    match comparison:
        case 1:
            return f"{text}: something besides memory bandwidth ({cause}) sets its speed."
        case 0 if share >= MEMORY_SPEED_SHARE:
            return (
                text + ", the same within noise: memory bandwidth, not arithmetic, sets its speed."
            )
        case 0:
            return (
                f"{text}, within noise of it in these rounds, which cannot tell what sets its "
                "speed (more runs a round, or more elements, would)."
            )
        case _ if setup.approx_streams:
            return (
                f"{text}, faster beyond noise: it writes its outputs with non-temporal stores, "
                "which do not first read each output line into the cache as the ceiling's "
                "normal stores do. Memory bandwidth, not arithmetic, sets its speed."
            )
        case _:
            return text + ", faster beyond noise: memory bandwidth, not arithmetic, sets its speed."


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
    """The four demos; demo 4 measures inputs of `n` elements in `ROUNDS` rounds of `repeat`
    runs."""
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
