"""f64 transcendentals: glibc's libmvec (`math="approx"`) against libm's scalar calls and numpy.

    python benchmarks/f64_math.py [--n 16] [--rounds 7] [--samples 20]

Under `math="approx"` an f64 loop calls libmvec's vector functions (`call_libmvec` in
`src/xfuse/codegen/native.py`); `math="libm"` keeps libm's scalar calls, which every f64 kernel
made before. Prints the host, then per program the time per element of each (one thread, 2^n
float64 elements in `out=` buffers, in one process, the variants taking turns in `--rounds` rounds:
the best round's median), and per function the largest error in ulps of each over 2^`--samples`
random inputs against x87's 80-bit long double (erf against libm's f64 erf).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.tools.cli import log2_size, positive_int
from xfuse.tools.scripts import run_script, script_parser

PROGRAMS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "exp": ("out = exp(x);", np.exp),
    "log": ("out = log(x);", np.log),
    "tanh": ("out = tanh(x);", np.tanh),
    "silu": ("out = x * sigmoid(x);", lambda x: x / (1 + np.exp(-x))),
    "tanh-GELU": (
        "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));",
        lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x))),
    ),
    "erf-GELU": ("out = 0.5 * x * (1 + erf(x * 0.7071067811865476));", None),
    "pow(x, 1.5)": ("out = pow(x, 1.5);", lambda x: np.power(x, 1.5)),
}
"""Each program and numpy's own way to compute it (None: numpy has no erf)."""

RANGES = {
    "exp": (-745.5, 709.9),
    "log": (0.0, 1e300),
    "log1p": (-1.0, 1e10),
    "tanh": (-20.0, 20.0),
    "erf": (-6.0, 6.0),
    "pow": (0.0, 100.0),
}


def speed_rows(n: int, rounds: int) -> None:
    x = np.abs(np.random.default_rng(0).standard_normal(1 << n)) + 0.5
    out = np.empty_like(x)
    print(f"\n2^{n} float64, one thread: ns/element (libm's time over libmvec's)")
    print("| program | libmvec (approx) | libm | numpy |")
    print("|---|---:|---:|---:|")
    for name, (source, numpy_way) in PROGRAMS.items():
        kernels = [xfuse.compile(source, dtype="float64", math=m) for m in ("approx", "libm")]
        runs = [k.prepare(x=x, out=out) for k in kernels]
        if numpy_way is not None:
            runs.append(lambda numpy_way=numpy_way: numpy_way(x))
        times = [min(t) / x.size * 1e9 for t in interleaved_medians(runs, rounds, 5)]
        numpy_cell = f"{times[2]:.2f}" if numpy_way is not None else "-"
        print(
            f"| {name} | {times[0]:.2f} | {times[1]:.2f} ({times[1] / times[0]:.1f}x) "
            f"| {numpy_cell} |"
        )


def reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if name == "erf":
        return np.array([math.erf(v) for v in x], np.longdouble)
    if name == "pow":
        return np.power(x.astype(np.longdouble), y.astype(np.longdouble))
    return getattr(np, name)(x.astype(np.longdouble))


def ulp_rows(samples: int) -> None:
    print(f"\nlargest error in ulps over 2^{samples} random inputs (pow: y in [-4, 4])")
    print("| function | range | libmvec (approx) | libm | the approx kernel calls |")
    print("|---|---|---:|---:|---|")
    rng = np.random.default_rng(1)
    for name, bounds in RANGES.items():
        x = rng.uniform(*bounds, 1 << samples)
        y = rng.uniform(-4.0, 4.0, x.size)
        source = "out = pow(x, y);" if name == "pow" else f"out = {name}(x);"
        inputs = {"x": x, "y": y} if name == "pow" else {"x": x}
        with np.errstate(all="ignore"):
            want = reference(name, x, y)
            finite = np.isfinite(want.astype(np.float64))  # (long double's range is wider)
        ulp = np.spacing(np.abs(want[finite]).astype(np.float64)).astype(np.longdouble)
        kernels = [xfuse.compile(source, dtype="float64", math=m) for m in ("approx", "libm")]
        errors = [
            np.max(np.abs(k(**inputs)[finite].astype(np.longdouble) - want[finite]) / ulp)
            for k in kernels
        ]
        calls = sorted(set(re.findall(r"call <\d+ x double> @(_ZGV\w+)\(", kernels[0].llvm_ir)))
        print(
            f"| {name} | [{bounds[0]:g}, {bounds[1]:g}] | {float(errors[0]):.2f} "
            f"| {float(errors[1]):.2f} | {', '.join(f'`{c}`' for c in calls) or 'none'} |"
        )


def main() -> None:
    parser = script_parser(__doc__.split("\n")[0])
    parser.add_argument("--n", type=log2_size, default=16, help="log2 of the elements timed")
    parser.add_argument("--rounds", type=positive_int, default=7)
    parser.add_argument(
        "--samples", type=log2_size, default=20, help="log2 of the inputs per function"
    )
    args = parser.parse_args()
    print(host_summary())
    speed_rows(args.n, args.rounds)
    ulp_rows(args.samples)


if __name__ == "__main__":
    run_script(main)
