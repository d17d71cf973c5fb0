"""A roofline picture of a priced program: each kernel a point, fused and unfused (matplotlib)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xfuse.analysis.cost import FunctionCost, KernelCost, ProgramCost, format_shape
from xfuse.analysis.cost_report import less

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class KernelPoint:
    """One spot of the roofline and the kernels that land on it."""

    intensity: float
    """FLOP per byte."""
    attained: float
    """FLOP per second, launch included."""
    kernels: tuple[KernelCost, ...]

    @property
    def label(self) -> str:
        """`tanh` (a kernel of one op), `11 ops` (a fused kernel), `6 kernels: addf x3, mulf x3`."""
        if len(self.kernels) == 1:
            (kernel,) = self.kernels
            return kernel.ops[0] if len(kernel.ops) == 1 else f"{len(kernel.ops)} ops"
        names = Counter(k.ops[0] if len(k.ops) == 1 else f"{len(k.ops)} ops" for k in self.kernels)
        parts = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in names.items())
        return f"{len(self.kernels)} kernels: {parts}"


def kernel_points(cost: FunctionCost) -> list[KernelPoint]:
    """The kernels merged by spot (same intensity and attained FLOP/s to 6 digits), in order of
    first appearance: eleven unfused one-op kernels of two kinds are two points, not eleven
    labels printed over each other. Kernels without FLOPs (copies, conversions) are left out:
    at 0 FLOP/B a log-log plot has no place for them."""
    spots: dict[tuple[str, str], list[KernelCost]] = {}
    for kernel in (k for k in cost.kernels if k.flops):
        attained = kernel.flops / kernel.time_s
        spots.setdefault((f"{kernel.intensity:.6g}", f"{attained:.6g}"), []).append(kernel)
    return [
        KernelPoint(kernels[0].intensity, kernels[0].flops / kernels[0].time_s, tuple(kernels))
        for kernels in spots.values()
    ]


def roofline_figure(program: ProgramCost) -> Figure:
    """A log-log roofline (FLOP/B against attained FLOP/s, launch included), every roof and
    every point labelled."""
    from xfuse.tools.cli import import_pyplot

    plt = import_pyplot()
    import numpy as np

    hw = program.fused.options.hardware
    dtype = program.fused.compute_dtype
    compute = "f64" if dtype == "float64" else "f32"
    peak = hw.elementwise_peak(dtype)
    kinds = ((program.unfused, "o", "unfused"), (program.fused, "*", "fused"))
    spots = [kernel_points(cost) for cost, _, _ in kinds]
    points = [p.intensity for spot in spots for p in spot]
    no_flops = sum(not k.flops for cost, _, _ in kinds for k in cost.kernels)
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
    for (_, marker, label), spot in zip(kinds, spots, strict=True):
        _plot_kernels(axes, spot, marker, label)
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("attained FLOP/s (launch overhead included)")
    axes.set_title(
        f"{hw.description}\n@{program.fused.function}: {format_shape(program.fused.options.shape)} "
        f"{compute} compute, "
        f"{less(program.comparison.traffic_ratio, 'traffic')} fused"
        + (f" ({no_flops} kernel{'s' * (no_flops > 1)} without FLOPs not shown)" * (no_flops > 0)),
        fontsize=10,
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    axes.set_xlim(low, high)
    figure.tight_layout()
    # Labels after the layout, which fixes where everything lands on screen.
    _label_points(axes, [p for spot in spots for p in spot])
    # Where no kernel is, along the memory roofs.
    candidates = np.geomspace(low * 1.2, hw.ridge_point(dtype) / 4, 50)
    clear = max(candidates, key=lambda x: min((abs(np.log(x / p)) for p in points), default=0))
    _label_roof(axes, clear, hw.hbm_bandwidth, f"HBM {hw.hbm_bandwidth / 1e12:.2f} TB/s")
    if program.fused.options.l2:
        _label_roof(axes, clear, hw.l2_bandwidth, f"L2 {hw.l2_bandwidth / 1e12:.1f} TB/s")
    for flops, text in (
        # (as the text report: `.0f` showed the A100's 19.5 and 9.7 as 20 and 10, `.3g` the
        # B200's 2250 as 2.25e+03)
        (peak, f"CUDA cores, {compute} compute: {peak / 1e12:.3g} TFLOP/s"),
        (
            hw.bf16_tensor_core_peak,
            f"BF16 tensor cores: {hw.bf16_tensor_core_peak / 1e12:g} TFLOP/s",
        ),
    ):
        axes.annotate(
            text,
            (high / 1.2, flops),
            xytext=(0, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=8,
        )
    return figure


def _label_roof(axes: Axes, x: float, bandwidth: float, text: str) -> None:
    """Write `text` just above a memory roof (FLOP/s = bandwidth x intensity), along it."""
    import math

    start, end = axes.transData.transform([(x, x * bandwidth), (x * 10, x * 10 * bandwidth)])
    angle = math.degrees(math.atan2(end[1] - start[1], end[0] - start[0]))
    axes.annotate(
        text,
        (x, x * bandwidth),
        xytext=(0, 4),
        textcoords="offset points",
        rotation=angle,
        rotation_mode="anchor",
        ha="left",
        va="bottom",
        fontsize=8,
    )


def plot_roofline(program: ProgramCost, path: Path) -> None:
    """Write `roofline_figure` to `path`."""
    from xfuse.tools.cli import save_figure

    save_figure(roofline_figure(program), path)


def _plot_kernels(axes: Axes, points: list[KernelPoint], marker: str, label: str) -> None:
    axes.loglog(
        [p.intensity for p in points],
        [p.attained for p in points],
        marker,
        linestyle="none",
        markersize=9,
        label=label,
    )


LABEL_HEIGHT_PT = 14
"""A point label's box height (8 pt text and its padding), with some air."""


def _label_points(axes: Axes, points: list[KernelPoint]) -> None:
    """Label each point below its marker, off the roof it sits on (to the right, or to the left
    in the right third of the plot, where the roof is flat); from the highest point down, a
    label that would overlap the one above moves down until it clears it."""
    points_per_pixel = 72 / axes.figure.dpi
    right_third = axes.transAxes.transform((2 / 3, 0))[0]
    above: float | None = None
    """The bottom of the label placed last, in points from the figure's bottom."""
    for point in sorted(points, key=lambda p: p.attained, reverse=True):
        x, y = axes.transData.transform((point.intensity, point.attained))
        y *= points_per_pixel
        top = y - 10 if above is None else min(y - 10, above)
        above = top - LABEL_HEIGHT_PT
        leftwards = x > right_third
        axes.annotate(
            point.label,
            (point.intensity, point.attained),
            xytext=(-10 if leftwards else 10, top - y),
            textcoords="offset points",
            ha="right" if leftwards else "left",
            va="top",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.7", "alpha": 0.85},
            arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6},
        )
