"""Ops on a broadcast row fused into the full kernel (computed again for every row) or a small
kernel of their own: `ew-fuse{recompute=all}` (before 0.2.26) against its default `cheap`.

    python benchmarks/broadcast_recompute.py [--rows 1024] [--columns 4096] [--rounds 5]

Prints the host, then two tables. The first: per program (a `[d]` row's `exp`, `sin(cos(...))`
chain and a few arith instructions; a `[t, 1]` column's `rsqrt(v + eps)` and `sin(v)`), float32
`[rows, columns]` into an `out=` buffer, one thread, the kernels and ms of each rule, the best
of `--rounds` interleaved round medians, and their ratio. `cheap` gives the row's libm calls,
which the kernel would make again for every row, a kernel of their own, and leaves arithmetic
and what LLVM computes once a row (the column's) in the kernel: the same code as `all`, a ratio
within noise of 1. The second: a row's `sin` and `sin(cos(sin(cos(...))))` at a few static
rows and columns (`SMALL_SHAPES`), prepared calls in us, where a kernel of its own costs the
most beside what it saves.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime.compiler import Kernel, compile_bufferized
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser
from xfuse.transforms.default_pipeline import default_pipeline, split_after
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.options import Recompute
from xfuse.transforms.pipeline import apply_pipeline, only_function

PROGRAMS: list[tuple[str, str]] = [
    ("exp of a [d] row", "input x[t, d], b[d];\nout = x + exp(b);"),
    ("sin(cos(...)) of a [d] row", "input x[t, d], b[d];\nout = x + sin(cos(sin(cos(b))));"),
    ("rsqrt of a [t, 1] column", "input x[t, d], v[t, 1];\nout = x * rsqrt(v + 1e-6);"),
    ("sin of a [t, 1] column", "input x[t, d], v[t, 1];\nout = x * sin(v);"),
    ("b * 2 + 1 of a [d] row", "input x[t, d], b[d];\nout = x + (b * 2 + 1);"),
]


def compiled(source: str, recompute: Recompute) -> tuple[Kernel, int]:
    """`source` through xfuse's default pipeline with `ew-fuse{recompute=...}`, and its
    kernel count."""
    tensor_passes, _ = split_after(default_pipeline(), "ew-bufferize")
    passes = [
        dataclasses.replace(p, recompute=recompute) if isinstance(p, EwFusePass) else p
        for p in tensor_passes
    ]
    frontend = parse_program(source)
    names = [str(ew.input_name(argument)) for argument in only_function(frontend).args]
    module = apply_pipeline(frontend, passes)
    kernels = sum(isinstance(op, ew.KernelOp) for op in only_function(module).walk())
    return compile_bufferized(module, names), kernels


SMALL_SHAPES = [(2, 8), (8, 8), (8, 16), (2, 64), (2, 4096)]
"""Static `[t, d]` shapes of the second table: a few rows, the row's calls made again t - 1
times over d elements."""


def timed_row(
    name: str, source: str, arrays: dict[str, np.ndarray], rounds: int, repeat: int, scale: float
) -> str:
    """A table row: `source` compiled with each rule, its kernels and the best round median of a
    prepared call into an `out=` buffer (times `scale`), and their ratio."""
    kernels = [compiled(source, rule) for rule in ("all", "cheap")]
    out = np.empty_like(arrays["x"])
    runs = []
    for kernel, _ in kernels:
        given = {n: arrays[n] for n in kernel.input_names}
        np.testing.assert_allclose(kernel(**given), kernels[0][0](**given), rtol=1e-6)
        runs.append(kernel.prepare(**given, out=out))
    every, cheap = (min(t) * scale for t in interleaved_medians(runs, rounds, repeat))
    return (
        f"| {name} | {every:.3f} ({kernels[0][1]}) | {cheap:.3f} ({kernels[1][1]}) "
        f"| {every / cheap:.2f} |"
    )


def main() -> None:
    parser = script_parser(__doc__.split("\n")[0])
    parser.add_argument("--rows", type=positive_int, default=1024, help="t")
    parser.add_argument("--columns", type=positive_int, default=4096, help="d")
    parser.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds")
    args = parser.parse_args()
    print(host_summary())
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 2.0, (args.rows, args.columns)).astype(np.float32)
    arrays = {"x": x, "b": x[0].copy(), "v": x[:, :1].copy()}
    print(f"\nfloat32 [{args.rows}, {args.columns}], one thread, ms (kernels)")
    print("| program | recompute=all | cheap (default) | all / cheap |")
    print("|---|---:|---:|---:|")
    for name, source in PROGRAMS:
        print(timed_row(name, source, arrays, args.rounds, 7, 1e3))
    print("\nfloat32, static shapes, one thread, us (kernels)")
    print("| program | recompute=all | cheap (default) | all / cheap |")
    print("|---|---:|---:|---:|")
    for rows, columns in SMALL_SHAPES:
        x = rng.uniform(0.1, 2.0, (rows, columns)).astype(np.float32)
        arrays = {"x": x, "b": x[0].copy()}
        for expression in ("sin(b)", "sin(cos(sin(cos(b))))"):
            source = f"input x[{rows}, {columns}], b[{columns}];\nout = x + {expression};"
            name = f"`x + {expression}` at [{rows}, {columns}]"
            print(timed_row(name, source, arrays, args.rounds, 500, 1e6))


if __name__ == "__main__":
    run_script(main)
