"""Where a call's outputs go: new ones by size, and a loop nest's `out=` off a cache line.

    python benchmarks/outputs.py [--mib 16 32 64 128] [--rows 1024] [--rounds 5] [--repeat 5]

Part 1, new outputs. From 32 MiB numpy's `np.empty` maps memory afresh for each array, whose pages
the system clears when the call first writes them; a kernel's new output of that size is memory
an earlier output let go instead (`xfuse.runtime.output_pool`). Per output size (float32
`x * sigmoid(x) * r`), the median time of a call in each of `--rounds` rounds
(`interleaved_medians`), its least, and the minor page faults of one call (`getrusage`):
- into an `out=` buffer made once;
- with a new output (the previous call's let go first, as a loop `y = k(x, r)` does);
- the same with the pool off (`XFUSE_OUTPUT_POOL_BYTES=0`: `np.empty`'s memory, as before);
- numpy's `x * r` with a new output and into `out=`, for scale.

Part 2, a loop nest (`[rows, 14336]` with a `[14336]` bias: SwiGLU of `x + b` in float32, the
LLM GELU with bias and residual in bfloat16) into an `out=` starting on a 64-byte line, into one
from `np.empty` (16 bytes past a line: the call runs `ShiftedRows`, which streams), and with a
new output, side by side as above.
Prints the host with its load first.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from unittest import mock

import ml_dtypes
import numpy as np

import xfuse
from xfuse.benchmarking.timing import (
    host_summary,
    interleaved_medians,
    milliseconds,
)
from xfuse.runtime.arrays import aligned_empty, data_pointer
from xfuse.runtime.output_pool import release_output_memory
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser

SOURCE = "out = x * sigmoid(x) * r;"
NEST_WIDTH = 14336
NEST_SOURCES = {
    "float32": "input x[t, d], r[t, d], b[d]; out = x * sigmoid(x + b) * r;",
    "bfloat16": "input bf16 x[t, d], r[t, d], b[d]; h = x + b;"
    "out = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r;",
}


def pool_off(call: Callable[[], object]) -> Callable[[], object]:
    """`call` with the pool turned off while it runs (a user's own setting back after it)."""

    def run() -> object:
        with mock.patch.dict(os.environ, XFUSE_OUTPUT_POOL_BYTES="0"):
            return call()

    return run


def page_faults(call: Callable[[], object]) -> int:
    """Minor page faults of one call (after one untimed)."""
    call()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    call()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def print_table(
    title: str, runs: dict[str, Callable[[], object]], rounds: int, repeat: int
) -> None:
    """Time `runs` side by side and print their table, over the first run's least time."""
    faults = [page_faults(run) for run in runs.values()]
    medians = interleaved_medians(list(runs.values()), rounds, repeat, warmup=1)
    reference = min(medians[0])
    print(f"\n{title} (ms; least, every round's median)")
    print(f"| call | least | round medians | over {next(iter(runs))} | page faults a call |")
    print("|---|---:|---|---:|---:|")
    for (label, _), times, count in zip(runs.items(), medians, faults, strict=True):
        listed = " ".join(f"{milliseconds(t)}" for t in times)
        ratio = min(times) / reference
        print(f"| {label} | {milliseconds(min(times))} | {listed} | {ratio:.2f}x | {count:,} |")


def new_outputs(mib: int, rounds: int, repeat: int) -> None:
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
    print_table(f"{mib} MiB output ({n:,} float32), {SOURCE}", runs, rounds, repeat)
    release_output_memory()


def loop_nest(dtype: np.dtype, rows: int, rounds: int, repeat: int) -> None:
    """Part 2 for one dtype."""
    source = NEST_SOURCES[dtype.name]
    kernel = xfuse.compile(source)
    rng = np.random.default_rng(0)
    x, r = (rng.standard_normal((rows, NEST_WIDTH)).astype(dtype) for _ in range(2))
    b = rng.standard_normal(NEST_WIDTH).astype(dtype)
    on_a_line, from_numpy = aligned_empty(x.shape, dtype), np.empty_like(x)
    runs = {
        "into out= on a line": lambda: kernel(x=x, r=r, b=b, out=on_a_line),
        f"into out= from np.empty ({data_pointer(from_numpy) % 64} bytes past a line)": (
            lambda: kernel(x=x, r=r, b=b, out=from_numpy)
        ),
        "new output": lambda: kernel(x=x, r=r, b=b),
    }
    print_table(f"{dtype.name} [{rows}, {NEST_WIDTH}], {source}", runs, rounds, repeat)


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--mib", type=positive_int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--rows", type=positive_int, default=1024, help="the loop nest's t")
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--repeat", type=positive_int, default=5)
    args = parser.parse_args()
    print(host_summary())
    for mib in args.mib:
        new_outputs(mib, args.rounds, args.repeat)
    for dtype in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)):
        loop_nest(dtype, args.rows, args.rounds, args.repeat)
    print(f"\nload average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    run_script(main)
