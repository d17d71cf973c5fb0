"""The C library's functions (`sin` ... `atan2`, glibc's libmvec under `math=approx`) against numpy.

    python benchmarks/library_functions.py [--rounds 5] [--sizes 16 24]

Prints the host, then two tables, every time one thread, float32, `out=` buffers and prepared
calls against numpy's ufunc into the same buffer, the best of `--rounds` interleaved round
medians (each round times xfuse and numpy in turn), in ns per element:
1. each function alone at 2^n elements for each n of `--sizes`, on arguments in its domain
   (`DOMAINS`: x uniform in [-10, 10] unless said);
2. sin, cos and tan at 2^16 on x uniform in [-m, m] for m from 100 to 10^14: glibc's variants
   take a slow path beyond |x| = 10^4 (8192 for tan), where xfuse reduces in f64 itself up to
   2^40 (`trigonometric_of_large_arguments` in `src/xfuse/codegen/vector_functions.py`; below
   10^4 xfuse computes f32 sin and cos itself where the host has FMA, `own_sine` there).
docs/benchmarks.md, "The C library's functions through libmvec", has the tables of 2026-12-05.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.dialects import ew
from xfuse.tools.cli import log2_size, positive_int
from xfuse.tools.scripts import run_script, script_parser

FUNCTIONS = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh")
FUNCTIONS += ("acosh", "atanh", "exp2", "expm1", "log2", "log10", "cbrt")
DOMAINS: dict[str, tuple[float, float]] = {
    "asin": (-10 / 11, 10 / 11),
    "acos": (-10 / 11, 10 / 11),
    "atanh": (-10 / 11, 10 / 11),
    "acosh": (1.0, 3.5),
    "log2": (0.5, 3.0),
    "log10": (0.5, 3.0),
}
"""x's range where [-10, 10] leaves a function's domain (lanes there take glibc's slow path,
numpy's too: `log2` of uniform [-10, 10] ran at 6.2 ns per element, numpy 6.2)."""
SECOND_OPERAND = (0.5, 3.0)
"""atan2's second operand."""
MAGNITUDES = (1e2, 1e4, 3e4, 1e5, 1e6, 1e8, 1e10, 1e12, 1e14)


def time_against_numpy(name: str, x: np.ndarray, y: np.ndarray, rounds: int) -> tuple[float, float]:
    """ns per element of xfuse's kernel of `name` and of numpy's ufunc on the same arrays."""
    op = ew.OPS_BY_MNEMONIC[name]
    binary = ew.arity(op) == 2
    arrays = {"x": x, "y": y} if binary else {"x": x}
    out = np.empty_like(x)
    operands = ", ".join(arrays)
    prepared = xfuse.compile(f"out = {name}({operands});").prepare(**arrays, out=out)
    ufunc = ew.numpy_ufunc(op)
    assert ufunc is not None, name
    numpy_run: Callable[[], object] = lambda: ufunc(*arrays.values(), out=out)  # noqa: E731
    times = interleaved_medians([prepared, numpy_run], rounds, 7, calls=max(1, (1 << 20) // x.size))
    xfuse_time, numpy_time = (min(t) / x.size * 1e9 for t in times)
    return xfuse_time, numpy_time


def alone_table(sizes: list[int], rounds: int) -> None:
    print("\n1. each function alone, ns/element (x in its domain)")
    header = " | ".join(f"2^{n} xfuse | numpy" for n in sizes)
    print(f"| function | {header} |")
    print("|---|" + "---:|---:|" * len(sizes))
    rng = np.random.default_rng(0)
    for name in FUNCTIONS:
        cells = []
        for n in sizes:
            x = rng.uniform(*DOMAINS.get(name, (-10.0, 10.0)), 1 << n).astype(np.float32)
            y = rng.uniform(*SECOND_OPERAND, 1 << n).astype(np.float32)
            cells += [f"{t:.2f}" for t in time_against_numpy(name, x, y, rounds)]
        print(f"| {name} | {' | '.join(cells)} |")


def magnitudes_table(rounds: int) -> None:
    print("\n2. sin, cos and tan at 2^16, x uniform in [-m, m], ns/element")
    print("| function | " + " | ".join(f"{m:.0e}" for m in MAGNITUDES) + " |")
    print("|---|" + "---:|" * len(MAGNITUDES))
    rng = np.random.default_rng(1)
    for name in ("sin", "cos", "tan"):
        rows: tuple[list[str], list[str]] = ([], [])
        for m in MAGNITUDES:
            x = rng.uniform(-m, m, 1 << 16).astype(np.float32)
            for row, t in zip(rows, time_against_numpy(name, x, x, rounds), strict=True):
                row.append(f"{t:.2f}")
        print(f"| xfuse {name} | {' | '.join(rows[0])} |")
        print(f"| numpy {name} | {' | '.join(rows[1])} |")


def main() -> None:
    parser = script_parser(__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds", type=positive_int, default=5, help="interleaved rounds per cell"
    )
    parser.add_argument(
        "--sizes", type=log2_size, nargs="+", default=[16, 24], help="log2 sizes of table 1"
    )
    args = parser.parse_args()
    print(host_summary())
    alone_table(args.sizes, args.rounds)
    magnitudes_table(args.rounds)


if __name__ == "__main__":
    run_script(main)
