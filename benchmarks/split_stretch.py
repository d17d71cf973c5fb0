"""CPU time of a `threads=2` checked call that stays on one thread, against a one-thread kernel's.

    python benchmarks/split_stretch.py [--rounds 40] [--calls 100] [--control]

At 2^18 float32 elements (hardswish, quick-GELU; `out=` buffers), the `threads=2` kernel's size
class is set in its untimed one-thread stretch for good (`SplitTimes.one_thread_until`), so every
call is what most calls are where the split loses. Each round times a block of `--calls` checked
calls of each kernel in random order (`time.thread_time_ns`: waiting for a core does not count);
prints the median per-call times and the median of the rounds' ratios (one thread's time over
the `threads=2` kernel's: 1.0 is no cost). `--control` compares two one-thread kernels instead,
the noise of the measure. Prints the host (with the load average) before, the load average after.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser

PROGRAMS = {
    "hardswish": "out = x * min(max(x + 3, 0), 6) / 6;",
    "quick-GELU": "out = x * sigmoid(1.702 * x);",
}
ELEMENTS = 1 << 18
ENDLESS = 1 << 40


def block(kernel: xfuse.Kernel, x: np.ndarray, out: np.ndarray, calls: int) -> float:
    """CPU nanoseconds per checked call, over `calls` calls."""
    start = time.thread_time_ns()
    for _ in range(calls):
        kernel(x=x, out=out)
    return (time.thread_time_ns() - start) / calls


def staying_on_one_thread(kernel: xfuse.Kernel, x: np.ndarray, out: np.ndarray) -> None:
    """Put the kernel's size class of `x` in an untimed one-thread stretch that does not end."""
    kernel(x=x, out=out)  # (makes the plan, and the size class)
    for times in kernel.split_choice.classes.values():
        times.chosen, times.splitting, times.chosen_calls = True, False, ENDLESS
        times.one_thread_until = ENDLESS


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--rounds", type=positive_int, default=40)
    parser.add_argument(
        "--calls", type=positive_int, default=100, help="calls of a kernel per block"
    )
    parser.add_argument("--control", action="store_true", help="two one-thread kernels")
    args = parser.parse_args()
    load = Path("/proc/loadavg")
    print(host_summary())
    rng = np.random.default_rng(0)
    for name, source in PROGRAMS.items():
        one = xfuse.compile(source)
        other = xfuse.compile(source, threads=1 if args.control else 2)
        x = rng.standard_normal(ELEMENTS, dtype=np.float32)
        outs = {one: np.empty_like(x), other: np.empty_like(x)}
        staying_on_one_thread(other, x, outs[other])
        assert all(t.one_thread_until == ENDLESS for t in other.split_choice.classes.values())
        for kernel, out in outs.items():  # warm up
            block(kernel, x, out, args.calls)
        times: dict[xfuse.Kernel, list[float]] = {one: [], other: []}
        ratios = []
        for _ in range(args.rounds):
            order = list(outs.items())
            random.shuffle(order)
            for kernel, out in order:
                times[kernel].append(block(kernel, x, out, args.calls))
            ratios.append(times[one][-1] / times[other][-1])
        np.testing.assert_array_equal(outs[one], outs[other])
        what = "one thread (control)" if args.control else "threads=2 staying on one thread"
        print(
            f"{name}: one thread {statistics.median(times[one]) / 1e3:.1f} us, {what} "
            f"{statistics.median(times[other]) / 1e3:.1f} us CPU a call; median ratio "
            f"{statistics.median(ratios):.3f}"
        )
    print("load average:", " ".join(load.read_text().split()[:3]))


if __name__ == "__main__":
    run_script(main)
