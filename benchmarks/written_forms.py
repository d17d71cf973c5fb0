"""Activations as users write them, against their canonical spelling; arrays in other layouts.

    python benchmarks/written_forms.py [--n 16] [--rounds 5]

Prints the host, then two tables, every time one thread, the best of `--rounds` interleaved
round medians (each round times every run in turn):
1. per form (PyTorch's reference GELUs with `pow(x, 3)` and `erf(x / sqrt(2))`, `x ** 0.5`, a
   hand-written Mish, ...), float32, 2^n elements in an `out=` buffer: its ns per element, the
   canonical spelling's, and their ratio (docs/math.md says which forms xfuse computes alike and
   why the others, IEEE operations as written, stay as they are);
2. a tanh-GELU on a 1024 x 1024 float32 array in C order, Fortran order, as a transposed view
   and strided, against numpy's unfused ops on the same array (a Fortran-ordered input runs as
   it is, a strided one is copied first: README, "A non-contiguous ... input").
"""

from __future__ import annotations

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.tools.cli import log2_size, positive_int
from xfuse.tools.scripts import run_script, script_parser

FORMS: list[tuple[str, str, str]] = [
    (
        "tanh-GELU with pow(x, 3)",
        "y = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * pow(x, 3))));",
        "y = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));",
    ),
    (
        "erf-GELU with x / sqrt(2)",
        "y = x * 0.5 * (1.0 + erf(x / 1.4142135623730951));",
        "y = x * 0.5 * (1.0 + erf(x * 0.7071067811865476));",
    ),
    ("pow(x, 2) + 1", "y = pow(x, 2) + 1;", "y = x * x + 1;"),
    ("pow(x, 0.5)", "y = pow(x, 0.5);", "y = sqrt(x);"),
    ("pow(x, -1)", "y = pow(x, -1);", "y = 1 / x;"),
    ("pow(x, -0.5)", "y = pow(x, -0.5);", "y = rsqrt(x);"),
    ("Mish by hand", "y = x * tanh(log(1 + exp(x)));", "y = x * tanh(softplus(x));"),
    ("log1p(exp(x))", "y = log1p(exp(x));", "y = softplus(x);"),
    ("1 / sqrt(x)", "y = 1 / sqrt(x);", "y = rsqrt(x);"),
    ("tanh through exp", "y = (exp(2 * x) - 1) / (exp(2 * x) + 1);", "y = tanh(x);"),
]
"""(name, as written, canonical spelling): the same function of x > 0."""

GELU = "y = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));"


def numpy_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def forms_table(n: int, rounds: int) -> None:
    x = np.random.default_rng(0).uniform(0.1, 4.0, 1 << n).astype(np.float32)
    out = np.empty_like(x)
    print(f"\n1. 2^{n} float32 in cache, ns/element")
    print("| form | as written | canonical | ratio |")
    print("|---|---:|---:|---:|")
    for name, written, canonical in FORMS:
        runs = [xfuse.compile(source).prepare(x=x, out=out) for source in (written, canonical)]
        as_written, best = (min(t) / x.size * 1e9 for t in interleaved_medians(runs, rounds, 9))
        print(f"| {name} | {as_written:.2f} | {best:.2f} | {as_written / best:.2f} |")


def layouts_table(rounds: int) -> None:
    base = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    layouts = {
        "C order": base,
        "Fortran order": np.asfortranarray(base),
        "x.T of a C array": base.T,
        "x[:, ::2] (copied)": base[:, ::2],
    }
    kernel = xfuse.compile(GELU)
    print("\n2. tanh-GELU on 1024 x 1024 float32 arrays, ns/element")
    print("| layout | xfuse | numpy |")
    print("|---|---:|---:|")
    for name, x in layouts.items():
        runs = [lambda x=x: kernel(x=x), lambda x=x: numpy_gelu(x)]
        xfuse_time, numpy_time = (
            min(t) / x.size * 1e9 for t in interleaved_medians(runs, rounds, 7)
        )
        print(f"| {name} | {xfuse_time:.2f} | {numpy_time:.2f} |")


def main() -> None:
    parser = script_parser(__doc__.split("\n")[0])
    parser.add_argument("--n", type=log2_size, default=16, help="log2 of the elements of table 1")
    parser.add_argument(
        "--rounds", type=positive_int, default=5, help="interleaved rounds per cell"
    )
    args = parser.parse_args()
    print(host_summary())
    forms_table(args.n, args.rounds)
    layouts_table(args.rounds)


if __name__ == "__main__":
    run_script(main)
