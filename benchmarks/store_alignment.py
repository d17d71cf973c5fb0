"""Loops bound by their loads and stores, with and without the head that aligns their stores.

    python benchmarks/store_alignment.py [--sizes 12 14 16 18] [--rounds 5] [--repeat 5]

A vector store that straddles two cache lines costs the core two: numpy's large arrays start 16
bytes past a line, so every AVX-512 store of a loop over them does, and every other AVX2 one. In
a loop bound by its loads and stores, `ew-kernel-to-loops{store-alignment=64}` (the default:
`xfuse.compile(aligned_stores=True)`) first runs the elements before the first output's first
64-byte boundary apart (one masked vector iteration), so the main loop's stores start on a line.
This times each program compiled with the head and without (`aligned_stores=False`), side by
side in interleaved rounds, as the kernel alone (its packed entry called from a native loop,
`native_calls`: no Python between calls; normal stores at every size) on arrays of 2^k elements
(`--sizes`, log2), float32 unless said, with every array:
- 16 bytes past a line (numpy's large arrays; the head then aligns the loads too);
- on a line (no head to run: what the head costs when there is nothing to align);
- the inputs 16 bytes past a line and the output on one (no head; the loads split either way);
- the output 16 bytes past and the inputs on a line (the head aligns the stores, and then the
  loads split).
Each cell is ns per element, the least of the rounds' medians; the last column is without over
with. A program bound by its math (silu) or by its conversions (bf16 `x * y`) gets no head, nor
does a nest whose rows are shorter than 256 bytes (the [t, 16] bias add): their rows show the
two compiles alike.
Prints the host with its load first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import xfuse
from xfuse.benchmarking.timing import (
    host_summary,
    interleaved_medians,
    native_calls,
)
from xfuse.runtime.arrays import aligned_empty
from xfuse.tools.cli import log2_size, positive_int
from xfuse.tools.scripts import run_script, script_parser


@dataclass(frozen=True)
class Program:
    source: str
    dtype: type = np.float32
    bias: str | None = None
    """The input that is one `[row]` row (the others are `[t, row]`); None: all are flat."""
    row: int = 4096
    """The rows' length where `bias` is given (4096: a hidden size of a small LLM)."""


PROGRAMS = {
    "residual add `x + r`": Program("out = x + r;"),
    "bias add `x + b`, [t, 4096] + [4096]": Program("input x[t, d], b[d]; out = x + b;", bias="b"),
    "bias add `x + b`, [t, 16] + [16] (rows of one line: no head)": Program(
        "input x[t, d], b[d]; out = x + b;", bias="b", row=16
    ),
    "leaky ReLU": Program("out = select(x > 0, x, 0.01 * x);"),
    "bf16 `x * y`": Program("input bf16 x[n], y[n]; out = x * y;", ml_dtypes.bfloat16),
    "silu (bound by its math: no head)": Program("out = x * sigmoid(x);"),
}

LAYOUTS = {
    "all 16 B past a line": (16, 16),
    "all on a line": (0, 0),
    "inputs 16 B past, output on a line": (16, 0),
    "output 16 B past, inputs on a line": (0, 16),
}
"""Name -> (the inputs' offset from a 64-byte line, the output's), in bytes."""

LINE = 64
CALL_ELEMENTS = 1 << 18
"""Elements a sample's calls compute in all (at least 16 calls), so a sample takes ~0.1 ms."""


def arrays(
    program: Program, names: Sequence[str], n: int, offsets: tuple[int, int]
) -> dict[str, np.ndarray]:
    """The inputs `names` of `program` and its `out`, of `n` elements, at `offsets` from a
    line."""
    rng = np.random.default_rng(0)
    element = np.dtype(program.dtype)
    shape = (n // program.row, program.row) if program.bias else (n,)

    def array(shape: tuple[int, ...], offset: int) -> np.ndarray:
        made = aligned_empty(shape, element, LINE, offset)
        made[...] = rng.standard_normal(shape, dtype=np.float32).astype(element)
        return made

    inputs, output = offsets
    given = {
        name: array((program.row,) if name == program.bias else shape, inputs) for name in names
    }
    return {**given, "out": array(shape, output)}


def main() -> None:
    parser = script_parser(__doc__ or "")
    parser.add_argument("--sizes", type=log2_size, nargs="+", default=[12, 14, 16, 18])
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--repeat", type=positive_int, default=5)
    args = parser.parse_args()
    print(host_summary())
    print(
        "\n| program | 2^k | arrays | with the head ns/el | without ns/el | without / with |"
        "\n|---|---:|---|---:|---:|---:|"
    )
    kernels = {  # (normal stores at every size: a streaming call aligns its outputs itself)
        name: tuple(
            xfuse.compile(program.source, streaming=False, aligned_stores=aligned)
            for aligned in (True, False)
        )
        for name, program in PROGRAMS.items()
    }
    for name, program in PROGRAMS.items():
        for k in args.sizes:
            n = max(1 << k, program.row) if program.bias else 1 << k
            calls = max(16, CALL_ELEMENTS // n)
            for layout, offsets in LAYOUTS.items():
                given = arrays(program, kernels[name][0].input_names, n, offsets)
                runs = [native_calls(kernel.prepare(**given), calls) for kernel in kernels[name]]
                medians = interleaved_medians(runs, args.rounds, args.repeat, warmup=1)
                with_head, without = (min(times) / calls / n * 1e9 for times in medians)
                print(
                    f"| {name} | {int(math.log2(n))} | {layout} | {with_head:.3f} | "
                    f"{without:.3f} | {without / with_head:.2f}x |",
                    flush=True,
                )


if __name__ == "__main__":
    run_script(main)
