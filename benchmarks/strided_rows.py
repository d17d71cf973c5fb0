"""SwiGLU on the two halves of one projection's output: strided inputs read where they are.

    python benchmarks/strided_rows.py [--rows 1024] [--d 14336] [--rounds 5] [--repeat 5]
        [--rope-tokens 4096] [--heads 32] [--head-dim 128]

An LLM's MLP often computes its gate and up projections as one matmul, `[t, 2d]`, and then
`silu(gate) * up` on its halves `gu[:, :d]` and `gu[:, d:]`: neither half is C-contiguous. A
kernel runs such inputs one native call per row on the array itself
(`xfuse.runtime.kernel.Kernel._row_plan`); before, a call copied each one
(`np.ascontiguousarray`). Per dtype (float32, bfloat16), the median time of a checked call with
`out=` in each of `--rounds` rounds (`interleaved_medians`), and its least (in us where the
contiguous call takes under a ms, else in ms):
- on the halves (rows read where they are), `out=` starting on a 64-byte line (every output
  row then does: the rows stream), then `out=` from `np.empty` (16 bytes past one: each row's
  head with normal stores, then its rest streaming, `CallPlan.row_heads`), then the first
  with a `threads=2` kernel (its split choice settled in the warm-up);
- on the halves copied first in the call, what a call did before;
- on C-contiguous arrays of the same values (the same kernel, one call);
- numpy's `gate / (1 + exp(-gate)) * up` on the halves (float32 only), with `out=` buffers;
- on the halves into the left half of a `[t, 2d]` buffer (on a line: `out=` strided rows,
  written where they are), then the result of a call without `out=` assigned into that half
  (`half[...] = k(...)`, what such a call had to do before).
The ratios are each row's time over the contiguous call's. Then RoPE (rotary position
embedding, float32) on the halves of `q` `[--rope-tokens, --heads, --head-dim]`, `x1 =
q[..., :h]`, `x2 = q[..., h:]`, with cos and sin tables `[t, 1, h]` broadcast over the heads,
into the halves of one output buffer (t x heads rows of h elements, run along the grid of two
axes: `xfuse.runtime.call_plans.RowGrid`): a checked call, a prepared one, the same call on
contiguous copies, and numpy's. Prints the host with its load first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.runtime.arrays import aligned_empty
from xfuse.runtime.kernel import ROW_CALL_MIN_ELEMENTS
from xfuse.runtime.split_calls import SETTLING_CALLS
from xfuse.tools.cli import option_type, positive_int
from xfuse.tools.scripts import run_script, script_parser

SWIGLU = "out = x * sigmoid(x) * y;"
ROPE = (Path(__file__).parent.parent / "examples" / "rope.ew").read_text()


def table(dtype: np.dtype, rows: int, d: int, rounds: int, repeat: int) -> None:
    """Time the calls on halves of `dtype` and print their table."""
    source = f"input {dtype.name.replace('float', 'f')} x, y;" + SWIGLU
    kernel, split = xfuse.compile(source), xfuse.compile(source, threads=2)
    both = np.random.default_rng(0).standard_normal((rows, 2 * d)).astype(dtype)
    gate, up = both[:, :d], both[:, d:]
    contiguous_gate, contiguous_up = np.ascontiguousarray(gate), np.ascontiguousarray(up)
    out, scratch = aligned_empty(gate.shape, dtype), np.empty_like(contiguous_gate)
    numpy_out = np.empty_like(contiguous_gate)  # 16 bytes past a line, as numpy allocates
    half = aligned_empty(both.shape, dtype)[:, :d]

    def assign_into_half() -> None:
        half[...] = kernel(gate, up)

    def numpy_swiglu() -> None:
        np.negative(gate, out=scratch)
        np.exp(scratch, out=scratch)
        np.add(scratch, 1, out=scratch)
        np.divide(gate, scratch, out=scratch)
        np.multiply(scratch, up, out=out)

    runs = {
        "halves, read where they are": lambda: kernel(gate, up, out=out),
        "halves, read where they are, out= off the lines": lambda: kernel(gate, up, out=numpy_out),
        "halves, read where they are, threads=2": lambda: split(gate, up, out=out),
        "halves, copied first (as before)": lambda: kernel(
            np.ascontiguousarray(gate), np.ascontiguousarray(up), out=out
        ),
        "C-contiguous arrays": lambda: kernel(contiguous_gate, contiguous_up, out=out),
    }
    if dtype == np.float32:
        runs["numpy on the halves"] = numpy_swiglu
    runs["halves into half of a [t, 2d] out="] = lambda: kernel(gate, up, out=half)
    runs["halves, the result assigned into that half"] = assign_into_half
    for _ in range(SETTLING_CALLS):
        split(gate, up, out=out)
    timed_table(f"{dtype.name} [{rows}, {d}] halves of [{rows}, {2 * d}]", runs, rounds, repeat)


def timed_table(
    title: str, runs: dict[str, Callable[[], object]], rounds: int, repeat: int
) -> None:
    """Time `runs` (interleaved) and print their table under `title`, each row's least over
    that of the run labelled "C-contiguous arrays"."""
    medians = interleaved_medians(list(runs.values()), rounds, repeat, warmup=1)
    reference = min(medians[list(runs).index("C-contiguous arrays")])
    unit, scale = ("us", 1e6) if reference < 1e-3 else ("ms", 1e3)
    print(f"\n{title}, checked calls with out= ({unit}; the least and every round's median)")
    print("| call | least | round medians | over the contiguous call |")
    print("|---|---:|---|---:|")
    for label, times in zip(runs, medians, strict=True):
        listed = " ".join(f"{t * scale:.2f}" for t in times)
        ratio = min(times) / reference
        print(f"| {label} | {min(times) * scale:.2f} | {listed} | {ratio:.2f}x |")


def rope_table(tokens: int, heads: int, head_dim: int, rounds: int, repeat: int) -> None:
    """Time RoPE on the halves of `q` (examples/rope.ew) and print its table."""
    kernel = xfuse.compile(ROPE)
    rng = np.random.default_rng(0)
    half = head_dim // 2
    q = rng.standard_normal((tokens, heads, head_dim)).astype(np.float32)
    angles = rng.uniform(0, 100, (tokens, 1, half)).astype(np.float32)
    cos, sin = np.cos(angles), np.sin(angles)
    x1, x2 = q[..., :half], q[..., half:]
    rotated = aligned_empty(q.shape, np.dtype(np.float32))
    out1, out2 = rotated[..., :half], rotated[..., half:]
    copies = np.ascontiguousarray(x1), np.ascontiguousarray(x2)
    contiguous_out = np.empty_like(copies[0]), np.empty_like(copies[0])
    products = np.empty_like(copies[0]), np.empty_like(copies[0])

    def numpy_rope() -> None:
        for first, second, sign, out in ((x1, x2, -1, out1), (x2, x1, 1, out2)):
            np.multiply(first, cos, out=products[0])
            np.multiply(second, sin, out=products[1])
            (np.add if sign > 0 else np.subtract)(*products, out=out)

    runs = {
        "halves, read and written where they are": lambda: kernel(
            x1, x2, cos, sin, out=(out1, out2)
        ),
        "the same, prepared": kernel.prepare(x1, x2, cos, sin, out=(out1, out2)),
        "C-contiguous arrays": lambda: kernel(*copies, cos, sin, out=contiguous_out),
        "numpy on the halves": numpy_rope,
    }
    shapes = f"q [{tokens}, {heads}, {head_dim}], tables [{tokens}, 1, {half}]"
    timed_table(f"RoPE float32 on the halves of {shapes}", runs, rounds, repeat)


@option_type
def row_size(text: str) -> int:
    """`--d`: a half's rows are written where they are only from `ROW_CALL_MIN_ELEMENTS` on
    (a narrower `out=` failed after the other tables, in a traceback)."""
    size = positive_int(text)
    if size < ROW_CALL_MIN_ELEMENTS:
        raise ValueError(
            f"expected an integer >= {ROW_CALL_MIN_ELEMENTS} (rows narrower are refused as an "
            f"out= view), got {size}"
        )
    return size


@option_type
def even_size(text: str) -> int:
    """`--head-dim`: RoPE rotates two halves, so an even width, each half a row a call reads
    where it is (`ROW_CALL_MIN_ELEMENTS`): an odd one, or one under 64 whose halves a prepared
    call would copy, failed after the SwiGLU tables, in a traceback."""
    size = positive_int(text)
    if size % 2 or size < 2 * ROW_CALL_MIN_ELEMENTS:
        raise ValueError(
            f"expected an even integer >= {2 * ROW_CALL_MIN_ELEMENTS} (RoPE's two halves, each "
            f"read where it is), got {size}"
        )
    return size


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--rows", type=positive_int, default=1024, help="t")
    parser.add_argument("--d", type=row_size, default=14336, help="each half's width")
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--repeat", type=positive_int, default=5)
    parser.add_argument("--rope-tokens", type=positive_int, default=4096, help="RoPE's t")
    parser.add_argument("--heads", type=positive_int, default=32, help="RoPE's heads")
    parser.add_argument("--head-dim", type=even_size, default=128, help="RoPE's head width")
    args = parser.parse_args()
    print(host_summary())
    for dtype in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)):
        table(dtype, args.rows, args.d, args.rounds, args.repeat)
    rope_table(args.rope_tokens, args.heads, args.head_dim, args.rounds, args.repeat)
    print(f"\nload average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    run_script(main)
