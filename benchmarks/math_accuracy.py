"""Measure the maximum error of each math implementation over a dense float32 sweep.

    python benchmarks/math_accuracy.py [--stride 64]

Inputs: every `stride`-th float32 bit pattern (both signs, all exponents), plus +-0, +-inf, NaN,
the smallest denormal and the largest float. The reference is numpy in float64 on the same
float32 inputs. Prints the Markdown table of docs/math.md. Errors on special values (inf, NaN) are
reported as mismatches: a NaN where the reference is not NaN (or the other way) or a wrong inf.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import xfuse
from xfuse.dialects import ew

UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    name: ew.OPS_BY_MNEMONIC[name].reference
    for name in ("tanh", "exp", "log", "erf", "sigmoid", "softplus", "sqrt", "rsqrt")
}
SLOW_REFERENCE = {"erf"}


@dataclass(frozen=True)
class Accuracy:
    function: str
    math: str
    max_abs: float
    max_rel: float
    specials_wrong: int
    count: int


def sweep(stride: int) -> np.ndarray:
    bits = np.arange(0, 1 << 31, stride, dtype=np.uint32)
    positive = bits.view(np.float32)
    specials = np.array([0.0, np.inf, np.nan, 1e-45, 3.4028235e38, 1.0, 0.5, 2.0], dtype=np.float32)
    values = np.concatenate([positive, -positive, specials, -specials])
    return values[~np.isnan(values) | np.isnan(values)]


def measure(name: str, mode: str, x: np.ndarray, y: np.ndarray | None = None) -> Accuracy:
    with np.errstate(all="ignore"):
        if y is None:
            kernel = xfuse.compile(f"out = {name}(x);", math=mode)
            got = kernel(x=x).astype(np.float64)
            want = UNARY[name](x.astype(np.float64))
        else:
            kernel = xfuse.compile("out = pow(x, y);", math=mode)
            got = kernel(x=x, y=y).astype(np.float64)
            want = np.power(x.astype(np.float64), y.astype(np.float64))
        want32 = want.astype(np.float32).astype(np.float64)
        finite = np.isfinite(want32) & np.isfinite(got)
        same_special = (
            (np.isnan(got) == np.isnan(want32))
            & (np.isinf(got) == np.isinf(want32))
            & (~np.isinf(got) | (got == want32))
        )
        error = np.abs(got - want)[finite]
        scale = np.maximum(np.abs(want[finite]), np.finfo(np.float32).tiny)
        return Accuracy(
            name,
            mode,
            float(error.max(initial=0.0)),
            float((error / scale).max(initial=0.0)),
            int((~same_special).sum()),
            int(x.size),
        )


def pow_inputs(count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(-20, 20, count)).astype(np.float32)
    y = rng.uniform(-4, 4, count).astype(np.float32)
    base = np.array([0, -0.0, 1, -1, 2, -2, np.inf, -np.inf, np.nan, 0.5], dtype=np.float32)
    exponent = np.array([0, 1, -1, 2, 3, 0.5, np.inf, -np.inf, np.nan, -3], dtype=np.float32)
    bx, by = np.meshgrid(base, exponent)
    return np.concatenate([x, bx.ravel()]), np.concatenate([y, by.ravel()])


def measure_all(stride: int) -> list[Accuracy]:
    x = sweep(stride)
    small = x[np.abs(x) < 6] if stride < 4096 else x
    results = []
    for mode in ("approx", "libm"):
        for name in UNARY:
            inputs = small[:: max(1, small.size // 2_000_000)] if name in SLOW_REFERENCE else x
            results.append(measure(name, mode, inputs))
        results.append(measure("pow", mode, *pow_inputs(x.size // 8)))
    return results


def table(results: list[Accuracy]) -> str:
    lines = [
        "| function | math | max abs error | max rel error | special-value mismatches | inputs |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.function} | {r.math} | {r.max_abs:.3g} | {r.max_rel:.3g} | "
            f"{r.specials_wrong} | {r.count:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stride", type=int, default=64, help="sweep every n-th bit pattern")
    args = parser.parse_args()
    print(table(measure_all(args.stride)))


if __name__ == "__main__":
    main()
