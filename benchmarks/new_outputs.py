"""Calls that return a new output, against calls into an `out=` buffer, by size.

    python benchmarks/new_outputs.py [--mib 16 32 64 128] [--rounds 5] [--repeat 5]

From 32 MiB numpy's `np.empty` maps memory afresh for each array, whose pages the system clears
when the call first writes them; a kernel's new output of that size is memory an earlier output
let go instead (`xfuse.runtime.output_pool`). Per output size (float32 `x * sigmoid(x) * r`),
the median time of a call in each of `--rounds` rounds (`interleaved_medians`), its least, and
the minor page faults of one call (`getrusage`):
- into an `out=` buffer made once;
- with a new output (the previous call's let go first, as a loop `y = k(x, r)` does);
- the same with the pool off (`XFUSE_OUTPUT_POOL_BYTES=0`: `np.empty`'s memory, as before);
- numpy's `x * r` with a new output and into `out=`, for scale.
Prints the host with its load first.
"""

from __future__ import annotations

import argparse
import os
import resource
from collections.abc import Callable

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.runtime.output_pool import release_output_memory
from xfuse.tools.cli import positive_int

SOURCE = "out = x * sigmoid(x) * r;"


def pool_off(call: Callable[[], object]) -> Callable[[], object]:
    """`call` with the pool turned off while it runs."""

    def run() -> object:
        os.environ["XFUSE_OUTPUT_POOL_BYTES"] = "0"
        try:
            return call()
        finally:
            del os.environ["XFUSE_OUTPUT_POOL_BYTES"]

    return run


def page_faults(call: Callable[[], object]) -> int:
    """Minor page faults of one call (after one untimed)."""
    call()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    call()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def table(mib: int, rounds: int, repeat: int) -> None:
    kernel = xfuse.compile(SOURCE)
    n = (mib << 20) // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    r, out = x.copy(), np.empty_like(x)
    runs = {
        "into out=": lambda: kernel(x, r, out=out),
        "new output": lambda: kernel(x, r),
        "new output, pool off (np.empty's)": pool_off(lambda: kernel(x, r)),
        "numpy x * r, new output": lambda: x * r,
        "numpy x * r, into out=": lambda: np.multiply(x, r, out=out),
    }
    faults = [page_faults(run) for run in runs.values()]
    medians = interleaved_medians(list(runs.values()), rounds, repeat, warmup=1)
    reference = min(medians[0])
    print(f"\n{mib} MiB output ({n:,} float32), {SOURCE} (ms; least, every round's median)")
    print("| call | least | round medians | over into out= | page faults a call |")
    print("|---|---:|---|---:|---:|")
    for (label, _), times, count in zip(runs.items(), medians, faults, strict=True):
        listed = " ".join(f"{t * 1e3:.2f}" for t in times)
        ratio = min(times) / reference
        print(f"| {label} | {min(times) * 1e3:.2f} | {listed} | {ratio:.2f}x | {count:,} |")
    release_output_memory()


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--mib", type=positive_int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--repeat", type=positive_int, default=5)
    args = parser.parse_args()
    print(host_summary())
    for mib in args.mib:
        table(mib, args.rounds, args.repeat)
    print(f"\nload average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
