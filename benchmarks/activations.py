"""Activations against the memory-speed ceiling: each program's fused kernel next to a streaming
kernel with the same traffic, one thread, `out=` buffers.

    python benchmarks/activations.py [--sizes 16 24] [--rounds 5] [--repeat 5]

Rows: silu, `x * sigmoid(x) * y`, erf-GELU, `log(1 + exp(x))` (as written, and rewritten to
`softplus(x)` by `ew-optimize{unsafe-math=true}`), softplus, the rsqrt scale
`x * rsqrt(y * y + 0.001) * z` and tanh-GELU. For each size and program, the fused kernel and
the ceiling (`xfuse.benchmarking.bench.bandwidth_ceiling`: every output the sum of the inputs,
compiled by xfuse) run in interleaved rounds; a time is the best round's median. "% of ceiling"
is the ceiling's time over the program's: 100% is memory speed. Also prints the kernel's max
error against the float64 reference and the host (CPU, vector width, load).

To compare two versions of xfuse, run this script once with each on `PYTHONPATH` (the ceiling,
measured in the same run, makes the percentages comparable across runs).
"""

from __future__ import annotations

import argparse

from xfuse.benchmarking.bench import (
    Variant,
    bandwidth_ceiling,
    measure_interleaved,
    prepare_workload,
    xfuse_fused,
)
from xfuse.benchmarking.timing import host_summary
from xfuse.runtime.compiler import compile

PROGRAMS: dict[str, str] = {
    "silu": "out = x * sigmoid(x);",
    "silu * y": "out = x * sigmoid(x) * y;",
    "erf-GELU": "out = 0.5 * x * (1 + erf(x * 0.70710678118654752));",
    "log(1 + exp(x))": "out = log(1 + exp(x));",
    "softplus": "out = softplus(x);",
    "rsqrt scale": "out = x * rsqrt(y * y + 0.001) * z;",
    "tanh-GELU": "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));",
}
UNSAFE = "ew-optimize{unsafe-math=true}"
"""The extra pass of the `log(1 + exp(x))` row that rewrites it to softplus."""


def rows(n: int, rounds: int, repeat: int) -> list[str]:
    lines = []
    for name, source in PROGRAMS.items():
        workload = prepare_workload(source, n)
        variants = [xfuse_fused(workload)]
        if name == "log(1 + exp(x))":
            unsafe = compile(source, extra_passes=UNSAFE)
            run = unsafe.prepare(**workload.arrays)
            variants.append(Variant("xfuse fused approx, unsafe-math", run, "fused"))
        ceiling, *kernels = measure_interleaved(
            workload, [bandwidth_ceiling(workload), *variants], rounds, repeat
        )
        for kernel in kernels:
            label = name + (" (unsafe-math)" if "unsafe" in kernel.variant else "")
            lines.append(
                f"| 2^{n.bit_length() - 1} | {label} | {kernel.time_s / n * 1e9:.3f} | "
                f"{ceiling.time_s / n * 1e9:.3f} | {ceiling.time_s / kernel.time_s:.0%} | "
                f"{kernel.max_error:.2g} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 24], help="log2 elements")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per round")
    args = parser.parse_args()
    print(host_summary())
    print()
    print("| n | program | ns/element | ceiling ns/element | % of ceiling | max abs error |")
    print("|---|---|---:|---:|---:|---:|")
    for k in args.sizes:
        for line in rows(1 << k, args.rounds, args.repeat):
            print(line, flush=True)


if __name__ == "__main__":
    main()
