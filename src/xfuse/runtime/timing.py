"""Wall-clock timing for benchmarks: the median of a few runs after a warm-up run."""

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
