"""Timing for benchmarks: the median of a few runs after a warm-up run, and the host they ran on."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(run: Callable[[], object], repeat: int = 3, warmup: int = 1) -> float:
    """Median wall time of `repeat` calls of `run`, after `warmup` untimed calls."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def host_float_lanes() -> int:
    """float32 lanes of the host's widest vectors (16 with AVX-512, 8 with AVX2, else 4)."""
    import llvmlite.binding as llvm_binding

    features = llvm_binding.get_host_cpu_features()
    if features.get("avx512f"):
        return 16
    return 8 if features.get("avx") else 4


def host_summary() -> str:
    """One line on what the numbers were measured on: CPU, vector width, CPUs, load average."""
    import os

    import llvmlite.binding as llvm_binding

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"host: {llvm_binding.get_host_cpu_name()}, <{host_float_lanes()} x float> vectors, "
        f"{os.cpu_count()} CPUs, load average {load} (1, 5, 15 min)"
    )
