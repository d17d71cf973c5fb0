"""Rendering the cost model's results: rich tables for people, plain dicts for JSON."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from xfuse.analysis.cost import (
    CostTotals,
    FunctionCost,
    KernelCost,
    ProgramCost,
    format_shape,
)

LONGEST_FIXED_US = 1e9
"""From here on (about 17 minutes) a time is shown in exponent form (`--launch-us 1e308` showed
every one of its 309 digits)."""


def us(seconds: float) -> str:
    """`1,234.5 us`, and `1.23e+20 us` from `LONGEST_FIXED_US` on: the seconds' exponent form
    shifted by 6, so that a time whose microseconds are past the floats shows too (with
    `--launch-us 1e308`, examples/gelu.ew's unfused total, 11 launches, was `inf us`)."""
    micro = seconds * 1e6
    if abs(micro) < LONGEST_FIXED_US:
        return f"{micro:,.1f} us"
    mantissa, _, exponent = f"{seconds:.3g}".partition("e")
    return f"{mantissa}e{int(exponent) + 6:+03d} us" if exponent else f"{mantissa} us"


def nbytes(count: int) -> str:
    """`3,288,334,336 B (3.29 GB)`: exact, then decimal units as bandwidths use them."""
    if count < 1000:
        return f"{count:,} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        shown = f"{count / scale:.2f}"
        if float(shown) < 1000 or unit == "GB":  # as rounded (999,995 B was 1000.00 kB)
            break
    return f"{count:,} B ({shown} {unit})"


def setting(cost: FunctionCost) -> str:
    """`h100-sxm, 4096x14336 bfloat16, launch 4 us, HBM only`."""
    o = cost.options
    memory = "L2-aware" if o.l2 else "HBM only"
    dtype = o.dtype or "IR dtypes"
    return (
        f"{o.hardware.name}, {format_shape(o.shape)} {dtype}, launch {o.launch_us:g} us, {memory}"
    )


def summary_line(cost: FunctionCost) -> str:
    """One line per function: the figures the lecture quotes."""
    t = cost.totals
    hbm = f" ({t.hbm_bytes:,} from HBM)" if cost.options.l2 else ""
    return (
        f"@{cost.function}: {t.kernels} kernel{'' if t.kernels == 1 else 's'}, "
        f"{t.tensor_accesses} tensor reads+writes, "
        f"{t.bytes:,} bytes{hbm}, {t.flops:,} FLOPs, "
        f"{us(t.roofline_time_s)} + {us(t.launch_time_s)} launch "
        f"= {us(t.time_s)}"
    )


def _tensors(kernel: KernelCost) -> str:
    reads = ", ".join(a.name + (" (L2)" if a.from_l2 else "") for a in kernel.reads)
    writes = ", ".join(a.name for a in kernel.writes)
    return f"{reads} -> {writes}"


def _ops(kernel: KernelCost) -> str:
    if len(kernel.ops) <= 3:
        return " ".join(kernel.ops) or "copy"
    return f"{len(kernel.ops)} ops"


def kernel_table(cost: FunctionCost, label: str = "") -> Table:
    title = f"{label} @{cost.function} on {setting(cost)}".lstrip()
    table = Table(title=title, title_justify="left")
    for header in ("#", "ops", "reads -> writes", "bytes", "FLOP/el", "FLOP/B", "time", "bound"):
        table.add_column(
            header, justify="left" if header in ("ops", "reads -> writes") else "right"
        )
    for k in cost.kernels:
        table.add_row(
            str(k.index),
            _ops(k),
            _tensors(k),
            f"{k.bytes:,}",
            str(k.flops_per_element),
            f"{k.intensity:.2f}",
            us(k.time_s),
            k.bound,
        )
    return table


def _total_rows(t: CostTotals) -> list[tuple[str, str]]:
    return [
        ("kernels", str(t.kernels)),
        ("tensor reads+writes", str(t.tensor_accesses)),
        ("bytes moved", nbytes(t.bytes)),
        ("bytes from HBM", nbytes(t.hbm_bytes)),
        ("FLOPs", f"{t.flops:,}"),
        ("FLOP/B", f"{t.intensity:.3f}"),
        ("memory time", us(t.memory_time_s)),
        ("compute time", us(t.compute_time_s)),
        ("launch overhead", us(t.launch_time_s)),
        ("predicted time", us(t.time_s)),
    ]


def comparison_table(program: ProgramCost) -> Table:
    """Unfused and fused side by side (and their HBM-only figures with `l2=True`)."""
    columns = [("unfused", program.unfused), ("fused", program.fused)]
    if program.hbm_only is not None:
        fused_hbm, unfused_hbm = program.hbm_only
        columns += [("unfused, HBM only", unfused_hbm), ("fused, HBM only", fused_hbm)]
    table = Table(title=setting(program.fused), title_justify="left")
    table.add_column("")
    for label, _ in columns:
        table.add_column(label, justify="right")
    rows = [_total_rows(cost.totals) for _, cost in columns]
    for index, (label, _) in enumerate(rows[0]):
        table.add_row(label, *(r[index][1] for r in rows))
    return table


def less(ratio: float, what: str) -> str:
    """`12.7x less traffic`, `no traffic left` where fusion leaves none (`ratio` inf: it
    printed `infx`), or `1.9x more time` where it takes more (a fused kernel recomputing a
    broadcast row's chain per element: it printed `0.5x less time`)."""
    if not math.isfinite(ratio):
        return f"no {what} left"
    if 0 < ratio < 1 and f"{ratio:.1f}" != "1.0":
        return f"{1 / ratio:.1f}x more {what}"
    return f"{ratio:.1f}x less {what}"


def print_program(console: Console, program: ProgramCost) -> None:
    hw = program.fused.options.hardware
    dtype = program.fused.compute_dtype
    c = program.comparison
    console.print(comparison_table(program))
    # (under the L2 model the bytes moved and those from HBM differ: both ratios, named)
    unfused_hbm, fused_hbm = program.unfused.totals.hbm_bytes, program.fused.totals.hbm_bytes
    from_hbm = (
        f" ({unfused_hbm / fused_hbm:.1f}x from HBM)"
        if program.fused.options.l2 and fused_hbm
        else ""
    )
    console.print(
        f"fusion: {less(c.traffic_ratio, 'traffic')}{from_hbm}, {less(c.time_ratio, 'time')}, "
        f"{c.kernels_saved} fewer launch{'es' * (c.kernels_saved != 1)}"
    )
    console.print(
        f"{hw.description}: HBM {hw.hbm_bandwidth / 1e12:.3g} TB/s, elementwise peak "
        f"{hw.elementwise_peak(dtype) / 1e12:.3g} TFLOP/s (CUDA cores, "
        f"{'f64' if dtype == 'float64' else 'f32'} compute) -> ridge "
        f"{hw.ridge_point(dtype):.1f} FLOP/B; BF16 tensor cores "
        f"{hw.bf16_tensor_core_peak / 1e12:g} TFLOP/s -> ridge "
        f"{hw.tensor_core_ridge_point:.1f} FLOP/B"
    )
    if program.epilogue is not None:
        e = program.epilogue
        console.print(
            f"epilogue what-if ({e.input} from a matmul, kernel {e.kernel} in its epilogue): "
            f"{e.separate_bytes:,} bytes -> {e.epilogue_bytes:,} bytes, "
            f"{us(e.separate_time_s)} -> {us(e.epilogue_time_s)}, "
            f"{e.launches_saved} launch saved"
        )
    for label, cost in (("unfused", program.unfused), ("fused", program.fused)):
        console.print(kernel_table(cost, label))


def print_function(console: Console, cost: FunctionCost) -> None:
    """The `ew-cost` pass's report for one function."""
    console.print(f"ew-cost {summary_line(cost)}")
    console.print(kernel_table(cost))


def to_plain(value: Any) -> Any:
    """JSON-safe: dataclasses to dicts, tuples to lists, and a float JSON has no number for
    as its name, "inf", "-inf" or "nan" (null is a figure not there: an unchecked error; a
    NaN error was null too)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def program_json(program: ProgramCost) -> dict[str, Any]:
    hw = program.fused.options.hardware
    return {"device": to_plain(hw), **to_plain(program)}
