"""A roofline picture of a priced program: each kernel a point, fused and unfused (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from xfuse.analysis.cost import FunctionCost, ProgramCost, format_shape

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def plot_roofline(program: ProgramCost, path: Path) -> None:
    """Write a log-log roofline (FLOP/B against attained FLOP/s, launch included) to `path`."""
    from xfuse.tools.cli import import_pyplot

    plt = import_pyplot()
    import numpy as np

    hw = program.fused.options.hardware
    dtype = next((k.writes[0].dtype for k in program.fused.kernels), "float32")
    peak = hw.elementwise_peak(dtype)
    points = [k.intensity for c in (program.fused, program.unfused) for k in c.kernels]
    low = min([*points, hw.ridge_point(dtype)]) / 4
    high = max([*points, hw.tensor_core_ridge_point]) * 4
    intensity = np.geomspace(low, high, 200)

    figure, axes = plt.subplots(figsize=(8, 5.5))
    axes.loglog(intensity, np.minimum(peak, intensity * hw.hbm_bandwidth), "k-", label="HBM roof")
    axes.loglog(
        intensity,
        np.minimum(hw.bf16_tensor_core_peak, intensity * hw.hbm_bandwidth),
        "k:",
        label="BF16 tensor cores (matmul only)",
    )
    if program.fused.options.l2:
        axes.loglog(
            intensity, np.minimum(peak, intensity * hw.l2_bandwidth), "k--", label="L2 roof"
        )
    for cost, marker, label in ((program.unfused, "o", "unfused"), (program.fused, "*", "fused")):
        _plot_kernels(axes, cost, marker, label)
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("attained FLOP/s (launch overhead included)")
    axes.set_title(
        f"{hw.description}\n@{program.fused.function}: {format_shape(program.fused.options.shape)} "
        f"{dtype}, "
        f"{program.comparison.traffic_ratio:.1f}x less traffic fused",
        fontsize=10,
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _plot_kernels(axes: Axes, cost: FunctionCost, marker: str, label: str) -> None:
    xs = [k.intensity for k in cost.kernels]
    ys = [k.flops / k.time_s if k.time_s else 0.0 for k in cost.kernels]
    axes.loglog(xs, ys, marker, linestyle="none", markersize=9, label=label)
    labelled: set[tuple[float, float]] = set()
    for kernel, x, y in zip(cost.kernels, xs, ys, strict=True):
        if (round(x, 2), round(y, -9)) in labelled:  # one label per spot: they would overprint
            continue
        labelled.add((round(x, 2), round(y, -9)))
        name = kernel.ops[0] if len(kernel.ops) == 1 else f"{len(kernel.ops)} ops"
        axes.annotate(name, (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
