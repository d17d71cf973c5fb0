"""`@xfuse.jit` on N-d arrays: the same time per element as on their flat copy, and its call.

    python benchmarks/nd_calls.py [--rounds 5]

A jit function traces arrays all of one N-d shape flat (`[?]`) and its kernel runs them as one
loop, as `xfuse.compile` without shapes does (0.2.11; before, a loop nest whose every row ended
in LLVM's vector epilogue, and which streamed only rows of whole 64-byte lines). Prints the host
with its load, then, float32, one thread, `out=` buffers, the least of `--rounds` interleaved
round medians:
1. per program and shape, ns per element of the jit function on the `[t, d]` arrays and on the
   same arrays raveled (`[t * d]`), and their ratio (1.00x: the shape costs nothing);
2. a call at n = 16 with `out=`: the jit function by position and by name, and its kernel's
   own checked call (a repeated jit call finds its kernel by the arrays' dtypes and shapes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser


@xfuse.jit(math="approx")
def swiglu(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x * xfuse.sigmoid(x) * y


@xfuse.jit(math="approx")
def gelu_residual(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x))) + y


@xfuse.jit
def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x + y


PROGRAMS = {"x * sigmoid(x) * y": swiglu, "tanh-GELU(x) + y": gelu_residual, "x + y": add}
SHAPES = [(64, 100), (16384, 100), (4096, 1000), (16384, 1000), (16384, 1024)]


def shape_rows(rounds: int) -> None:
    print("| program | shape | [t, d] ns/el | [t * d] ns/el | ratio |")
    print("|---|---|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for name, function in PROGRAMS.items():
        for shape in SHAPES:
            x, y = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
            out = np.empty_like(x)
            flat_x, flat_y, flat_out = x.ravel(), y.ravel(), out.ravel()
            runs: list[Callable[[], object]] = [
                functools.partial(function, x, y, out=out),
                functools.partial(function, flat_x, flat_y, out=flat_out),
            ]
            repeat = max(3, min(200, (1 << 21) // x.size))
            shaped, flat = (min(t) for t in interleaved_medians(runs, rounds, repeat, warmup=2))
            print(
                f"| `{name}` | {list(shape)} | {shaped / x.size * 1e9:.3f} | "
                f"{flat / x.size * 1e9:.3f} | {shaped / flat:.2f}x |"
            )


def call_row(rounds: int) -> None:
    x = np.ones(16, np.float32)
    out = np.empty_like(x)
    swiglu(x, x, out=out)
    kernel = swiglu.kernels[(("x", "float32", x.shape), ("y", "float32", x.shape))]
    runs = [
        lambda: swiglu(x, x, out=out),
        lambda: swiglu(x=x, y=x, out=out),
        lambda: kernel(x, x, out=out),
    ]
    by_position, by_name, checked = (
        min(t) for t in interleaved_medians(runs, rounds * 3, 2000, warmup=1)
    )
    print(
        f"call at n = 16 with out=: jit by position {by_position * 1e6:.2f} us, by name "
        f"{by_name * 1e6:.2f} us, its kernel's checked call {checked * 1e6:.2f} us"
    )


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--rounds", type=positive_int, default=5)
    args = parser.parse_args()
    print(host_summary())
    shape_rows(args.rounds)
    call_row(args.rounds)


if __name__ == "__main__":
    run_script(main)
