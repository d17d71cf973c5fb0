"""The lecture's demo-4 table: GELU with bias and residual, numpy vs xfuse, one thread.

    python benchmarks/gelu.py [--sizes 16 20 24] [--repeat 7]

Rows: numpy one op at a time (fresh arrays), numpy with planned `out=` buffers, the fused kernel
with libm `tanhf`, xfuse's unfused pipeline (one kernel per op, planned temporaries), the fused
kernel with the rational tanh, and a streaming `x + b + r` kernel
(the same 16 bytes per element, trivial compute) as the bandwidth ceiling. xfuse kernels write
into a preallocated `out=` buffer through `Kernel.prepare` (arguments checked once); the cost of a
checked call `k(...)` is printed separately. Time is the median of `--repeat` runs after a warm-up.
Also prints the compile times (warm: parse to callable with no cache; from the on-disk cache, as
in a new process; cached in memory: the same call again) and the per-call cost of `threads=2`
against `threads=1` at 2^12 elements (too few to split: the kernel runs on the calling thread) and
2^16 (two slices of 2^15, one on a pool thread).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import xfuse
from xfuse.benchmarking.timing import (
    host_summary,
    median_seconds,
    milliseconds,
)
from xfuse.frontend.language import parse_program
from xfuse.tools.cli import log2_size, positive_int
from xfuse.tools.scripts import run_script, script_parser
from xfuse.transforms.optimize import EwOptimizePass
from xfuse.transforms.pipeline import pipeline_context

GELU = (Path(__file__).parent.parent / "examples" / "gelu.ew").read_text()
CEILING = "out = x + b + r;"
BYTES_PER_ELEMENT = 16  # three float32 reads, one write


def reference(x: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    h = x.astype(np.float64) + b
    return 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r


def optimized_module():
    module = parse_program(GELU)
    EwOptimizePass().apply(pipeline_context(), module)
    return module


def table(n: int, repeat: int) -> list[tuple[str, float, float | None]]:
    rng = np.random.default_rng(0)
    x, b, r = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    out = np.empty(n, np.float32)
    want = reference(x, b, r)
    numpy_per_op = xfuse.compile_numpy(optimized_module())
    numpy_planned = xfuse.compile_numpy_planned(optimized_module())
    libm = xfuse.compile(GELU, math="libm")
    approx = xfuse.compile(GELU, math="approx")
    unfused = xfuse.compile(GELU, math="approx", fuse=False)
    ceiling = xfuse.compile(CEILING)
    rows: list[tuple[str, Callable[[], np.ndarray]]] = [
        ("numpy per-op", lambda: numpy_per_op(x, b, r)[0]),
        ("numpy planned", lambda: numpy_planned(x, b, r)[0]),
        ("xfuse fused libm", libm.prepare(x=x, b=b, r=r, out=out)),
        ("xfuse unfused approx", unfused.prepare(x=x, b=b, r=r, out=out)),
        ("xfuse fused approx", approx.prepare(x=x, b=b, r=r, out=out)),
        ("ceiling x+b+r", ceiling.prepare(x=x, b=b, r=r, out=out)),
    ]
    results = []
    for name, run in rows:
        seconds = median_seconds(run, repeat)
        error = float(np.abs(run() - want).max()) if name != "ceiling x+b+r" else None
        results.append((name, seconds, error))
    return results


def compile_times() -> tuple[float, float, float]:
    """Seconds to compile GELU: warm (no cache: the whole pipeline), from the on-disk cache (as a
    new process would; a temporary cache directory, whatever `XFUSE_CACHE` and `XFUSE_CACHE_DIR`
    say, which are restored after), from the in-memory cache."""
    xfuse.compile("out = x * 2;")  # imports and LLVM initialization are not compile time
    saved = {name: os.environ.get(name) for name in ("XFUSE_CACHE", "XFUSE_CACHE_DIR")}
    try:
        with tempfile.TemporaryDirectory(prefix="xfuse-gelu-bench-") as cache_dir:
            xfuse.clear_cache()
            os.environ["XFUSE_CACHE"] = "0"
            start = time.perf_counter()
            xfuse.compile(GELU)
            warm = time.perf_counter() - start
            os.environ.update(XFUSE_CACHE="1", XFUSE_CACHE_DIR=cache_dir)
            xfuse.clear_cache()
            xfuse.compile(GELU)  # writes the on-disk entry
            xfuse.clear_cache()
            start = time.perf_counter()
            xfuse.compile(GELU)
            disk = time.perf_counter() - start
            start = time.perf_counter()
            xfuse.compile(GELU)
            cached = time.perf_counter() - start
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return warm, disk, cached


def checked_call_overhead() -> float:
    """Seconds a checked `k(x=..., out=...)` adds over the prepared native call (n = 16)."""
    kernel = xfuse.compile(GELU)
    x, b, r, out = (np.ones(16, np.float32) for _ in range(4))
    checked = median_seconds(lambda: kernel(x=x, b=b, r=r, out=out), 1001)
    prepared = median_seconds(kernel.prepare(x=x, b=b, r=r, out=out), 1001)
    return checked - prepared


def threads_call_overhead(log_n: int) -> tuple[float, float]:
    """Seconds per prepared call of fused GELU at 2^log_n elements with threads=1 and 2."""
    x, b, r, out = (np.ones(1 << log_n, np.float32) for _ in range(4))
    one, two = (xfuse.compile(GELU, threads=threads) for threads in (1, 2))
    calls = [kernel.prepare(x=x, b=b, r=r, out=out) for kernel in (one, two)]
    return median_seconds(calls[0], 2001), median_seconds(calls[1], 2001)


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--sizes", type=log2_size, nargs="+", default=[16, 20, 24], help="log2 n")
    parser.add_argument("--repeat", type=positive_int, default=7)
    args = parser.parse_args()
    print(host_summary())
    warm, disk, cached = compile_times()
    print(
        f"compile GELU: warm {warm * 1e3:.1f} ms, from the disk cache {disk * 1e3:.2f} ms, "
        f"cached in memory {cached * 1e3:.3f} ms"
    )
    print(f"argument checks of a call k(...): {checked_call_overhead() * 1e6:.1f} us")
    for log_n in (12, 16):
        one, two = threads_call_overhead(log_n)
        print(
            f"prepared call at 2^{log_n}: threads=1 {one * 1e6:.1f} us, threads=2 "
            f"{two * 1e6:.1f} us ({(two - one) * 1e6:+.1f} us)"
        )
    print()
    for log_n in args.sizes:
        n = 1 << log_n
        results = table(n, args.repeat)
        ceiling = results[-1][1]
        numpy_per_op = results[0][1]
        print(f"n = 2^{log_n} float32, 1 thread")
        print(
            "| variant | time (ms) | ns/element | GB/s | vs ceiling | vs numpy per-op "
            "| max abs error |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, seconds, error in results:
            print(
                f"| {name} | {milliseconds(seconds)} | {seconds / n * 1e9:.3f} | "
                f"{BYTES_PER_ELEMENT * n / seconds / 1e9:.1f} | {ceiling / seconds:.0%} | "
                f"{numpy_per_op / seconds:.1f}x | {'-' if error is None else f'{error:.2g}'} |"
            )
        print()


if __name__ == "__main__":
    run_script(main)
