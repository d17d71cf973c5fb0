"""The lecture's demo-4 table: GELU with bias and residual, numpy vs xfuse, one thread.

    python benchmarks/gelu.py [--sizes 16 20 24] [--repeat 7] [--tokens 1024] [--d-ff 14336]

Rows: numpy one op at a time (fresh arrays), numpy with planned `out=` buffers, the fused kernel
with libm `tanhf`, xfuse's unfused pipeline (one kernel per op, planned temporaries), the fused
kernel with the rational tanh, and a streaming `x + b + r` kernel
(the same 16 bytes per element, trivial compute) as the bandwidth ceiling. xfuse kernels write
into a preallocated `out=` buffer through `Kernel.prepare` (arguments checked once); the cost of a
checked call `k(...)` is printed separately. Time is the median of `--repeat` runs after a warm-up.
Also prints the compile times (warm: parse to callable with an empty cache; cached: same again).

A second table runs the lecture's real layout: x, r of shape [tokens, d_ff] and a [d_ff] bias
(the lecture's 4096 x 14336 with fewer tokens to fit this machine), in float32 and in bfloat16
storage (computed in float32), each against the ceiling kernel of its own dtype and shape.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import xfuse
from xfuse.frontend.language import parse_program
from xfuse.passes.optimize import EwOptimizePass
from xfuse.runtime.compiler import _context

GELU = (Path(__file__).parent.parent / "examples" / "gelu.ew").read_text()
CEILING = "out = x + b + r;"
BYTES_PER_ELEMENT = 16  # three float32 reads, one write


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def reference(x: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    h = x.astype(np.float64) + b
    return 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r


def optimized_module():
    module = parse_program(GELU)
    EwOptimizePass().apply(_context(), module)
    return module


def table(n: int, repeat: int) -> list[tuple[str, float, float]]:
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
        error = float(np.abs(run() - want).max()) if name != "ceiling x+b+r" else float("nan")
        results.append((name, seconds, error))
    return results


def lecture_shape_table(tokens: int, d_ff: int, repeat: int) -> list[tuple[str, float, int, float]]:
    """(variant, seconds, bytes moved, max abs error) on [tokens, d_ff] with a [d_ff] bias."""
    import ml_dtypes

    rng = np.random.default_rng(0)
    x32, r32 = (rng.standard_normal((tokens, d_ff), dtype=np.float32) for _ in range(2))
    b32 = rng.standard_normal(d_ff, dtype=np.float32)
    shapes = {"x": ("t", "d"), "b": ("d",), "r": ("t", "d")}
    results = []
    numpy_per_op = xfuse.compile_numpy(optimized_module())
    for dtype, label in ((np.float32, "float32"), (ml_dtypes.bfloat16, "bfloat16")):
        x, b, r = (a.astype(dtype) for a in (x32, b32, r32))
        want = reference(*(a.astype(np.float64) for a in (x, b, r)))
        out = np.empty_like(x)
        tensor_bytes = 3 * x.nbytes + b.nbytes  # x, r and out in full; the bias once
        approx = xfuse.compile(GELU, dtype=label, shapes=shapes)
        ceiling = xfuse.compile(CEILING, dtype=label, shapes=shapes)
        rows: list[tuple[str, Callable[[], object]]] = [
            (f"xfuse fused approx {label}", approx.prepare(x=x, b=b, r=r, out=out)),
            (f"ceiling x+b+r {label}", ceiling.prepare(x=x, b=b, r=r, out=out)),
        ]
        if dtype == np.float32:  # numpy's bfloat16 arithmetic (ml_dtypes) is not a baseline
            rows.insert(0, ("numpy per-op float32", functools.partial(numpy_per_op, x, b, r)))
        for name, run in rows:
            seconds = median_seconds(run, repeat)
            result = run()
            got = result[0] if isinstance(result, tuple) else result
            error = float("nan") if name.startswith("ceiling") else _max_error(got, want)
            results.append((name, seconds, tensor_bytes, error))
    return results


def _max_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max())


def compile_times() -> tuple[float, float]:
    xfuse.compile("out = x * 2;")  # imports and LLVM initialization are not compile time
    xfuse.clear_cache()
    start = time.perf_counter()
    xfuse.compile(GELU)
    warm = time.perf_counter() - start
    start = time.perf_counter()
    xfuse.compile(GELU)
    return warm, time.perf_counter() - start


def checked_call_overhead() -> float:
    """Seconds a checked `k(x=..., out=...)` adds over the prepared native call (n = 16)."""
    kernel = xfuse.compile(GELU)
    x, b, r, out = (np.ones(16, np.float32) for _ in range(4))
    checked = median_seconds(lambda: kernel(x=x, b=b, r=r, out=out), 1001)
    prepared = median_seconds(kernel.prepare(x=x, b=b, r=r, out=out), 1001)
    return checked - prepared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 20, 24], help="log2 n")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=1024, help="rows of the lecture-shape table")
    parser.add_argument("--d-ff", type=int, default=14336, help="columns (and bias length)")
    args = parser.parse_args()
    warm, cached = compile_times()
    print(f"compile GELU: warm {warm * 1e3:.1f} ms, cached {cached * 1e3:.3f} ms")
    print(f"argument checks of a call k(...): {checked_call_overhead() * 1e6:.1f} us\n")
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
                f"| {name} | {seconds * 1e3:.3f} | {seconds / n * 1e9:.3f} | "
                f"{BYTES_PER_ELEMENT * n / seconds / 1e9:.1f} | {ceiling / seconds:.0%} | "
                f"{numpy_per_op / seconds:.1f}x | {error:.2g} |"
            )
        print()
    print(f"[{args.tokens}, {args.d_ff}] with a [{args.d_ff}] bias, 1 thread")
    print("| variant | time (ms) | ns/element | GB/s | vs ceiling (same dtype) | max abs error |")
    print("|---|---|---|---|---|---|")
    results = lecture_shape_table(args.tokens, args.d_ff, args.repeat)
    ceilings = {name.split()[-1]: seconds for name, seconds, _, _ in results if "ceiling" in name}
    elements = args.tokens * args.d_ff
    for name, seconds, moved, error in results:
        print(
            f"| {name} | {seconds * 1e3:.3f} | {seconds / elements * 1e9:.3f} | "
            f"{moved / seconds / 1e9:.1f} | {ceilings[name.split()[-1]] / seconds:.0%} | "
            f"{error:.2g} |"
        )


if __name__ == "__main__":
    main()
