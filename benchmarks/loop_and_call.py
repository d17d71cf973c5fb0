"""The loop and the call (issue 16, items 2-4): each change side by side with its absence.

    python benchmarks/loop_and_call.py [--rounds 5] [--no-bf16-check]

Prints the host (target CPU, widest float vectors, load average), then, float32 unless said,
one thread, `out=` buffers, each time the best of `--rounds` interleaved round medians:
1. the interleave count: GELU (tanh) + bias + residual at 2^12, 2^16 and 2^24, the streaming
   `x + b + r` (the bandwidth ceiling) and the LLM GELU of `examples/gelu-llm.ew` (bf16 x, r and
   an f32 bias, [t, 4096]), each with xfuse's choice (`interleave=None`, 4 for a long loop body)
   and with LLVM's own (`interleave=0`);
2. non-temporal stores: GELU and `x + b + r` at 2^12 to 2^24 with `streaming=True` (the
   default: calls from `HostCpu.streaming_bytes` run through the streaming twin) and
   `streaming=False`;
3. `threads=2` against `threads=1` for GELU at 2^18 and 2^24 (the kernel's persistent pool, the
   calling thread runs one slice);
4. the cost of a call at n = 16: a checked call `k(x=..., out=...)`, one that allocates its
   output, a prepared call (`Kernel.prepare`) and its packed entry called through ctypes (slower
   than the prepared call, which skips ctypes: a builtin of `BOUND_CALL_IR` calls the entry),
   and an `@xfuse.jit` function's call by position;
5. where the host has `avx512bf16`: LLVM's `fptrunc` f32 -> bfloat (`vcvtneps2bf16`) against
   xfuse's integer rounding (`narrow_bits`), bit for bit, on every f32 subnormal and samples of
   normals and NaNs: why xfuse does not use the instruction.
Set `XFUSE_CPU_NAME` / `XFUSE_CPU_FEATURES` to see another CPU's code (e.g. `znver3` with AVX2
features, on an AVX-512 host).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

import xfuse
from xfuse.benchmarking.timing import host_summary, interleaved_medians
from xfuse.codegen.native import compile_llvm_ir, host_cpu
from xfuse.runtime.kernel import Kernel
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser

EXAMPLES = Path(__file__).parent.parent / "examples"
GELU = (EXAMPLES / "gelu.ew").read_text()
GELU_LLM = (EXAMPLES / "gelu-llm.ew").read_text()
CEILING = "out = x + b + r;"
LLM_WIDTH = 4096


def best_seconds(runs: list[Callable[[], object]], rounds: int, elements: int) -> list[float]:
    """Per run, the best of `rounds` interleaved round medians (about 4M elements per round)."""
    repeat = max(3, min(2000, (1 << 22) // max(elements, 1)))
    return [min(times) for times in interleaved_medians(runs, rounds, repeat)]


def float32_inputs(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(n, dtype=np.float32) for _ in range(3))


def same_bits_seconds(kernels: list[xfuse.Kernel], n: int, rounds: int) -> list[float]:
    """The best seconds of each kernel on the same n float32 `x, b, r`, after checking that
    they all write the same bits."""
    x, b, r = float32_inputs(n)
    outs = [np.empty(n, np.float32) for _ in kernels]
    runs = [k.prepare(x=x, b=b, r=r, out=o) for k, o in zip(kernels, outs, strict=True)]
    seconds = best_seconds(runs, rounds, n)
    assert all(np.array_equal(o.view(np.uint32), outs[0].view(np.uint32)) for o in outs)
    return seconds


def interleave_rows(rounds: int) -> None:
    print("| program | n | xfuse's choice (ns/el) | LLVM's (ns/el) | speedup |")
    print("|---|---|---|---|---|")
    for name, source in (("GELU + bias + residual", GELU), ("x + b + r", CEILING)):
        kernels = [xfuse.compile(source, interleave=choice) for choice in (None, 0)]
        for log_n in (12, 16, 24):
            n = 1 << log_n
            ours, llvms = same_bits_seconds(kernels, n, rounds)
            print(
                f"| {name} | 2^{log_n} | {ours / n * 1e9:.3f} | {llvms / n * 1e9:.3f} "
                f"| {llvms / ours:.2f}x |"
            )
    kernels = [xfuse.compile(GELU_LLM, interleave=choice) for choice in (None, 0)]
    for log_n in (12, 16, 24):
        n = 1 << log_n
        rng = np.random.default_rng(1)
        shape = (n // LLM_WIDTH, LLM_WIDTH)
        x, r = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for _ in range(2))
        b = rng.standard_normal(LLM_WIDTH, dtype=np.float32)
        outs = [np.empty(shape, ml_dtypes.bfloat16) for _ in kernels]
        runs = [k.prepare(x=x, b=b, r=r, out=o) for k, o in zip(kernels, outs, strict=True)]
        ours, llvms = best_seconds(runs, rounds, n)
        print(
            f"| LLM GELU bf16, f32 bias | 2^{log_n} | {ours / n * 1e9:.3f} "
            f"| {llvms / n * 1e9:.3f} | {llvms / ours:.2f}x |"
        )


def streaming_rows(rounds: int) -> None:
    print(f"non-temporal stores from {host_cpu().streaming_bytes >> 20} MiB moved per call")
    print(
        "| program | n | MiB moved | streaming=True (ns/el) | streaming=False (ns/el) | speedup |"
    )
    print("|---|---|---|---|---|---|")
    for name, source in (("GELU + bias + residual", GELU), ("x + b + r", CEILING)):
        kernels = [xfuse.compile(source, streaming=streaming) for streaming in (True, False)]
        for log_n in (12, 16, 18, 20, 22, 24):
            n = 1 << log_n
            on, off = same_bits_seconds(kernels, n, rounds)
            print(
                f"| {name} | 2^{log_n} | {16 * n / 2**20:g} | {on / n * 1e9:.3f} "
                f"| {off / n * 1e9:.3f} | {off / on:.2f}x |"
            )


def threads_rows(rounds: int) -> None:
    one, two = (xfuse.compile(GELU, threads=threads) for threads in (1, 2))
    print("| GELU | threads=1 (ms) | threads=2 (ms) | speedup |")
    print("|---|---|---|---|")
    for log_n in (18, 24):
        n = 1 << log_n
        x, b, r = float32_inputs(n)
        out = np.empty(n, np.float32)
        runs = [kernel.prepare(x=x, b=b, r=r, out=out) for kernel in (one, two)]
        t1, t2 = best_seconds(runs, rounds, n)
        print(f"| 2^{log_n} | {t1 * 1e3:.3f} | {t2 * 1e3:.3f} | {t1 / t2:.2f}x |")


def bare_native_call(kernel: Kernel, x: np.ndarray, out: np.ndarray) -> Callable[[], object]:
    """The packed entry of a prepared call, called through ctypes with nothing around it."""
    run = kernel.prepare(x=x, b=x, r=x, out=out)
    (arguments,) = run.argument_lists
    words = (ctypes.c_uint64 * len(arguments))(*arguments)
    entry = kernel.function.native_entry
    address = ctypes.addressof(words)
    return lambda: (words, entry(address))


@xfuse.jit(math="approx")
def jit_gelu(x: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    h = x + b
    return 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r


def call_rows(rounds: int) -> None:
    kernel = xfuse.compile(GELU)
    x, out = np.ones(16, np.float32), np.empty(16, np.float32)
    kernel(x=x, b=x, r=x, out=out)  # plans the shapes, as any earlier call would
    jit_gelu(x, x, x, out=out)
    runs = [
        lambda: kernel(x=x, b=x, r=x, out=out),
        lambda: kernel(x=x, b=x, r=x),
        kernel.prepare(x=x, b=x, r=x, out=out),
        bare_native_call(kernel, x, out),
        lambda: jit_gelu(x, x, x, out=out),
    ]
    checked, allocating, prepared, bare, jit = (
        min(times) for times in interleaved_medians(runs, rounds * 3, 200)
    )
    print(
        f"call at n = 16: checked k(..., out=) {checked * 1e6:.2f} us, checked allocating "
        f"{allocating * 1e6:.2f} us, prepared {prepared * 1e6:.2f} us, its packed entry through "
        f"ctypes {bare * 1e6:.2f} us (ctypes' own cost, which a prepared call skips), an "
        f"@xfuse.jit function's gelu(x, b, r, out=) {jit * 1e6:.2f} us"
    )


HARDWARE_BF16 = """
define void @narrow(ptr noalias %x, ptr noalias %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %source = getelementptr inbounds float, ptr %x, i64 %i
  %value = load float, ptr %source
  %narrow = fptrunc float %value to bfloat
  %bits = bitcast bfloat %narrow to i16
  %target = getelementptr inbounds i16, ptr %y, i64 %i
  store i16 %bits, ptr %target
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def bf16_check() -> None:
    """`fptrunc` to bfloat on the host against xfuse's software rounding, bit for bit."""
    native = compile_llvm_ir(HARDWARE_BF16)
    instructions = sorted({line.split()[0] for line in native.asm.splitlines() if "cvt" in line})
    narrow = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        native.address("narrow")
    )
    software = xfuse.compile("out = bf16(x);")
    rng = np.random.default_rng(3)
    subnormals = np.arange(1, 1 << 23, dtype=np.uint32)
    classes = {
        "subnormal": np.concatenate([subnormals, subnormals | 0x8000_0000]),
        "normal": rng.integers(0x0080_0000, 0x7F80_0000, 1 << 22, dtype=np.uint32)
        | (rng.integers(0, 2, 1 << 22, dtype=np.uint32) << 31),
        "NaN": rng.integers(0x7F80_0001, 0x8000_0000, 1 << 20, dtype=np.uint32)
        | (rng.integers(0, 2, 1 << 20, dtype=np.uint32) << 31),
    }
    print(f"f32 -> bf16 in hardware ({', '.join(instructions)}) vs xfuse's rounding:")
    for name, bits in classes.items():
        values = bits.view(np.float32)
        hardware = np.empty(values.size, np.uint16)
        narrow(values.ctypes.data, hardware.ctypes.data, values.size)
        ours = software(x=values).view(np.uint16)
        differ = np.flatnonzero(hardware != ours)
        example = (
            f", e.g. {bits[differ[0]]:#010x} -> {hardware[differ[0]]:#06x} (xfuse "
            f"{ours[differ[0]]:#06x})"
            if differ.size
            else ""
        )
        print(f"  {name}: {differ.size} of {values.size} differ{example}")


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--no-bf16-check", action="store_true")
    args = parser.parse_args()
    print(host_summary())
    print()
    interleave_rows(args.rounds)
    print()
    streaming_rows(args.rounds)
    print()
    threads_rows(args.rounds)
    print()
    call_rows(args.rounds)
    if host_cpu().has("avx512bf16") and not args.no_bf16_check:
        print()
        bf16_check()


if __name__ == "__main__":
    run_script(main)
