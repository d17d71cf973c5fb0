"""Wall-clock timing for benchmarks: the median of a few runs after a warm-up run."""

from __future__ import annotations

import os
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


def host_summary() -> str:
    """The host as benchmarks print it: LLVM's CPU name, widest float vectors, load average."""
    import llvmlite.binding as llvm_binding

    from xfuse.runtime.native import host_target_machine

    host_target_machine()  # initializes the native target
    features = llvm_binding.get_host_cpu_features()
    bits = 512 if features.get("avx512f") else 256 if features.get("avx") else 128
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"host: {llvm_binding.get_host_cpu_name()}, {os.cpu_count()} CPUs, widest float vectors "
        f"{bits} bits (<{bits // 32} x float>), load average {load}"
    )
