"""Rendering `xfuse lecture`'s figures: rich tables for people, a plain dict for JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from xfuse.analysis.cost_report import nbytes, to_plain, us
from xfuse.benchmarking.timing import SEPARATION_LEVEL
from xfuse.tools.lecture import (
    DataflowDemo,
    LectureFigures,
    MeasureDemo,
    MeasureSetup,
    PlanDemo,
    TrafficDemo,
    format_duration,
    format_gbps,
    percent_of_ceiling,
    plural,
)


def _table(title: str, headers: list[str], left: int = 0) -> Table:
    """A table whose first `left` columns are left-aligned, the rest right-aligned (numbers)."""
    table = Table(title=title, title_justify="left")
    for index, header in enumerate(headers):
        table.add_column(header, justify="left" if index < left else "right")
    return table


def _header(console: Console, title: str) -> None:
    console.print()
    console.rule(Text(title, style="bold"), align="left")


def _observations(console: Console, lines: tuple[str, ...]) -> None:
    console.print(Text("Observations", style="bold"))
    for line in lines:
        console.print(Text(f"  - {line}"))


def print_dataflow(console: Console, demo: DataflowDemo) -> None:
    _header(console, "Demo 1: the dataflow graph of the optimized IR")
    console.print("Source:")
    console.print(Text("  " + demo.source.strip().replace("\n", "\n  ")))
    console.print("After ew-optimize:")
    console.print(Text(demo.ir))
    table = _table(
        f"{plural(demo.ops, 'op')}, depth {demo.depth}",
        ["#", "value", "op", "level", "read by (ops)", "last use (op #)"],
        left=3,
    )
    for row in demo.rows:
        last = "output" if row.is_output else "-" if row.last_use is None else str(row.last_use)
        table.add_row(str(row.index), row.value, row.op, str(row.level), str(row.readers), last)
    console.print(table)
    _observations(console, demo.observations)


def print_traffic(console: Console, demo: TrafficDemo) -> None:
    shape = "x".join(str(d) for d in demo.shape) or "0-d"
    _header(console, f"Demo 2: the memory-traffic bill, {shape} {demo.dtype} on an H100")
    console.print(
        f"{demo.elements:,} element{'s' * (demo.elements != 1)} per tensor = "
        f"{nbytes(demo.tensor_bytes)}; "
        f"{demo.device}: "
        f"{demo.bandwidth / 1e12:.2f} TB/s; {demo.launch_us:g} us per launch (assumed)."
    )
    table = _table(
        "time = max(bytes / bandwidth, FLOPs / peak) + launches x overhead (xfuse.analysis.cost)",
        ["", "tensors read+written", "bytes", "roofline time", "kernels", "launches", "total"],
        left=1,
    )
    for row in demo.rows:
        table.add_row(
            row.label,
            str(row.tensors),
            nbytes(row.bytes),
            us(row.roofline_time_s),
            str(row.kernels),
            us(row.launch_time_s),
            us(row.time_s),
        )
    console.print(table)
    console.print(
        f"Arithmetic intensity, fused: {demo.flops_per_element:.3g} FLOP per element, "
        f"{demo.intensity:.2f} FLOP/B; ridge points {demo.elementwise_ridge:.0f} FLOP/B (CUDA "
        f"cores) and {demo.tensor_core_ridge:.0f} FLOP/B (BF16 tensor cores)."
    )
    _observations(console, demo.observations)


def print_memory_plan(console: Console, demo: PlanDemo) -> None:
    _header(console, "Demo 3: the memory plan of the unfused program")
    table = _table(
        "greedy reuse of dead buffers (xfuse.analysis.memory)",
        ["value", "op", "buffer", "how"],
        left=2,
    )
    for row in demo.rows:
        table.add_row(row.value, row.op, f"buf{row.buffer}", row.how)
    console.print(table)
    size = "each" if demo.buffers_alike else "a temporary on average"
    console.print(
        f"Naive: {plural(demo.naive_buffers, 'temporary', 'temporaries')} = "
        f"{nbytes(demo.naive_bytes)}; planned: {plural(demo.planned_buffers, 'buffer')} = "
        f"{nbytes(demo.planned_bytes)} ({nbytes(demo.buffer_bytes)} {size}, at demo 2's shape "
        "and dtypes)."
    )
    _observations(console, demo.observations)


def _gbps(bandwidth: float | None) -> str:
    return "-" if bandwidth is None else format_gbps(bandwidth)


def _fused_traffic(setup: MeasureSetup) -> str:
    """What the fused traffic model counts: one kernel's inputs and outputs, or more kernels'."""
    if setup.fused_kernels == 1:
        return "inputs read once, outputs written once"
    # (each kernel its own: two that read one input read it twice, "inputs read once" said)
    each = f"{setup.fused_kernels} kernels: each reads its inputs once, writes its outputs once"
    if not setup.fused_intermediates:  # (2 independent kernels pass none: they were said to)
        return each
    return f"{each}, and the intermediates between them are written and read back"


def print_measurement(console: Console, demo: MeasureDemo) -> None:
    setup = demo.setup
    _header(
        console,
        f"Demo 4: measured, {setup.n:,} {setup.dtype} ({nbytes(setup.array_bytes)} per full "
        f"array), {setup.threads} thread",
    )
    console.print(f"host: {setup.host}")
    console.print(
        f"Traffic models: unfused {nbytes(setup.unfused_bytes)} (every op reads its operands "
        f"and writes its result), fused {nbytes(setup.fused_bytes)} ({_fused_traffic(setup)}); "
        f"ceiling kernel: {setup.ceiling_source}."
    )
    console.print(
        f"Each variant runs {plural(demo.rounds, 'round')} of {plural(demo.repeat, 'run')} "
        "after a warm-up, the variants taking turns in every round; its time is its best "
        "round's median. Two times count as different only where a rank test on their rounds "
        f"says so (exact Mann-Whitney U, {SEPARATION_LEVEL:.0%} level); otherwise their "
        "difference is within noise."
    )
    table = _table(
        "GB/s: the model's bytes over the time, not bytes measured at the memory",
        [
            "variant",
            "traffic model",
            "time",
            "worst round",
            "GB/s unfused model",
            "GB/s fused model",
            "of ceiling",
            "max error vs f64",
        ],
        left=2,
    )
    for row in demo.rows:
        table.add_row(
            row.variant,
            row.traffic,
            format_duration(row.time_s),
            format_duration(max(row.round_times_s)),
            _gbps(row.unfused_bandwidth),
            _gbps(row.fused_bandwidth),
            "-" if row.of_ceiling is None else percent_of_ceiling(row.of_ceiling),
            "-" if row.max_error is None else f"{row.max_error:.1e}",
        )
    console.print(table)
    _observations(console, demo.observations)


def print_lecture(console: Console, figures: LectureFigures) -> None:
    print_dataflow(console, figures.dataflow)
    print_traffic(console, figures.traffic)
    print_memory_plan(console, figures.memory_plan)
    print_measurement(console, figures.measurement)


def lecture_json(figures: LectureFigures) -> dict[str, Any]:
    return to_plain(figures)
