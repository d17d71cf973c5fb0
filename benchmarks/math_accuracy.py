"""Measure the maximum error of each math implementation over a dense float32 sweep.

    python benchmarks/math_accuracy.py [--stride 64] [--only tanh exp ...]

Inputs: every `stride`-th float32 bit pattern (both signs, all exponents), plus +-0, +-inf, NaN,
the smallest denormal and the largest float. The reference is numpy in float64 on the same
float32 inputs. Prints the host, then the Markdown table of docs/math.md. Errors on special
values (inf, NaN) are reported as mismatches: a NaN where the reference is not NaN (or the other
way) or a wrong inf.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary
from xfuse.dialects import ew
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser

MEASURED: tuple[type[ew.UnaryOp | ew.BinaryOp], ...] = tuple(
    op for op in ew.ELEMENTWISE_OPS if op.ACCURACY != ew.CORRECTLY_ROUNDED
)
"""The ops whose error is a bound measured here (their `ACCURACY`), not IEEE's correct rounding."""
SLOW_REFERENCE = {ew.ErfOp}
"""A reference that loops in Python (math.erf): measured on fewer inputs."""


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


def _softplus(x: np.ndarray) -> np.ndarray:
    return ew.SoftplusOp.reference(x)


def _log_one_plus_exp(x: np.ndarray) -> np.ndarray:
    """log(1 + e^x) with the float32 composition's IEEE values: 0 where float32's 1 + e^x rounds
    to 1, +inf where float32's e^x overflows; exact in between (where the composition's rounding
    of 1 + e^x counts as its error)."""
    e32 = np.exp(x).astype(np.float32)
    value = np.where(np.float32(1) + e32 == 1, 0.0, np.logaddexp(x, 0.0))
    return np.where(np.isinf(e32), np.inf, value)


def _tanh_gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(u)) as x / (1 + e^(-2u)), u = c (x + a x^3) of the float32 constants:
    the same function, without float64's own cancellation of 1 + tanh(u) far left."""
    c, a = float(np.float32(0.7978845608)), float(np.float32(0.044715))
    return x / (1 + np.exp(-2 * c * (x + a * x**3)))


COMPOSITES: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "tanh(softplus(x))": ("out = tanh(softplus(x));", lambda x: np.tanh(_softplus(x))),
    "Mish, x * tanh(softplus(x))": (
        "out = x * tanh(softplus(x));",
        lambda x: x * np.tanh(_softplus(x)),
    ),
    "log(1 + exp(x))": ("out = log(1 + exp(x));", _log_one_plus_exp),
    "erf(x / sqrt 2)": (
        "out = erf(x * 0.70710678118654752);",
        lambda x: ew.ErfOp.reference(x * float(np.float32(0.70710678118654752))),
    ),
    "tanh(0.798 x)": (
        "out = tanh(0.7978845608 * x);",
        lambda x: np.tanh(x * float(np.float32(0.7978845608))),
    ),
    "tanh-GELU, 0.5 x (1 + tanh(0.798 (x + 0.0447 x^3)))": (
        "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));",
        _tanh_gelu,
    ),
}
"""Programs whose approximation is not the composition of their ops' (`ew-expand-math` computes
tanh(softplus(x)), log(1 + exp(x)) and GELU's (0.5 x) (1 + tanh(u)) as one function, erf and tanh
of c x with c folded into their coefficients): their source and float64 reference (of the
product's exact value)."""
SLOW_COMPOSITES = {"erf(x / sqrt 2)"}
"""Composites whose reference loops in Python (`SLOW_REFERENCE`)."""


def measure(
    name: str, source: str, reference: Callable[..., np.ndarray], mode: str, *inputs: np.ndarray
) -> Accuracy:
    names = "xy"[: len(inputs)]
    with np.errstate(all="ignore"):
        kernel = xfuse.compile(source, math=mode)
        got = kernel(**dict(zip(names, inputs, strict=True))).astype(np.float64)
        want = reference(*(a.astype(np.float64) for a in inputs))
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
            int(inputs[0].size),
        )


def binary_inputs(op: type[ew.BinaryOp], count: int) -> tuple[np.ndarray, np.ndarray]:
    """For pow, bases of every magnitude e^-20..e^20 and exponents in [-4, 4] (its working
    range); for another op (atan2), both operands of either sign and every magnitude
    e^-20..e^20; then every pair of special values."""
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(-20, 20, count)).astype(np.float32)
    base = np.array([0, -0.0, 1, -1, 2, -2, np.inf, -np.inf, np.nan, 0.5], dtype=np.float32)
    if op is ew.PowOp:
        y = rng.uniform(-4, 4, count).astype(np.float32)
        second = np.array([0, 1, -1, 2, 3, 0.5, np.inf, -np.inf, np.nan, -3], dtype=np.float32)
    else:
        x *= rng.choice(np.float32([-1, 1]), count)
        y = np.exp(rng.uniform(-20, 20, count)).astype(np.float32)
        y *= rng.choice(np.float32([-1, 1]), count)
        second = base
    bx, by = np.meshgrid(base, second)
    return np.concatenate([x, bx.ravel()]), np.concatenate([y, by.ravel()])


def measure_op(op: type[ew.UnaryOp | ew.BinaryOp], mode: str, *inputs: np.ndarray) -> Accuracy:
    name = ew.mnemonic(op)
    source = f"out = {name}({', '.join('xy'[: len(inputs)])});"
    return measure(name, source, op.reference, mode, *inputs)


def measure_all(stride: int, only: Sequence[str] = ()) -> list[Accuracy]:
    x = sweep(stride)
    small = x[np.abs(x) < 6] if stride < 4096 else x
    thinned = small[:: max(1, small.size // 2_000_000)]
    results = []
    for mode in ("approx", "libm"):
        for op in MEASURED:
            if only and ew.mnemonic(op) not in only:
                continue
            if issubclass(op, ew.BinaryOp):
                results.append(measure_op(op, mode, *binary_inputs(op, x.size // 8)))
            elif op in SLOW_REFERENCE:
                results.append(measure_op(op, mode, thinned))
            else:
                results.append(measure_op(op, mode, x))
        for name, (source, reference) in COMPOSITES.items():
            if not only or name in only:
                inputs = thinned if name in SLOW_COMPOSITES else x
                results.append(measure(name, source, reference, mode, inputs))
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
    parser = script_parser(__doc__)
    parser.add_argument(
        "--stride", type=positive_int, default=64, help="sweep every n-th bit pattern"
    )
    names = [*dict.fromkeys(ew.mnemonic(op) for op in MEASURED), *COMPOSITES]
    parser.add_argument(
        "--only",
        nargs="+",
        default=(),
        choices=names,
        metavar="NAME",
        help=f"these functions: {', '.join(names)}",
    )
    args = parser.parse_args()
    print(host_summary())
    print(table(measure_all(args.stride, args.only)))


if __name__ == "__main__":
    run_script(main)
