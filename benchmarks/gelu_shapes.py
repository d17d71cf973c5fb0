"""GELU at the lecture's layer shape, scaled to this machine: [t, 14336] inputs, a [14336] bias.

    python benchmarks/gelu_shapes.py [--rows 512] [--repeat 5]

Prints the host, then one table per storage choice (all f32; all bf16; bf16 activations with an
f32 bias and a bf16 result; a bf16 GELU alone, whose bias the matmul before it added), each
declared in the program (`input bf16 x[t, d], r[t, d];`). Rows: numpy with planned `out=` buffers
(ml_dtypes' bf16 for the bf16 programs), the fused kernel, and the streaming ceiling with the same
arrays (`x + r + b`). GB/s is the fused traffic (each input and the output once, in its own dtype)
over the time; one thread, median of `--repeat`.
"""

from __future__ import annotations

from xfuse.benchmarking import bench
from xfuse.benchmarking.timing import host_summary, milliseconds
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser

GELU = """
h = x + b;
y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));
"""
PROGRAMS = {
    "f32 x, r [t, d], f32 b [d]": "input f32 x[t, d], r[t, d], b[d];" + GELU + "out = y + r;",
    "bf16 x, r [t, d], bf16 b [d]": "input bf16 x[t, d], r[t, d], b[d];" + GELU + "out = y + r;",
    "bf16 x, r [t, d], f32 b [d] -> bf16": (
        "input bf16 x[t, d], r[t, d];\ninput f32 b[d];" + GELU + "out = bf16(y + r);"
    ),
    "bf16 x [t, d] alone (the bias added by the matmul before)": (
        "input bf16 x[t, d];" + GELU.replace("x + b", "x") + "out = y;"
    ),
}


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--rows", type=positive_int, default=512, help="t (the lecture has 4096)")
    parser.add_argument("--repeat", type=positive_int, default=5)
    args = parser.parse_args()
    print(host_summary())
    n = args.rows * bench.ROW_LENGTH
    for label, source in PROGRAMS.items():
        workload = bench.prepare_workload(source, n)
        variants = [
            bench.numpy_planned(workload),
            bench.xfuse_fused(workload, "approx"),
            bench.bandwidth_ceiling(workload),
        ]
        measured = [bench.measure(workload, v, args.repeat) for v in variants]
        ceiling = measured[-1].time_s
        print(
            f"{label}: [{args.rows}, {bench.ROW_LENGTH}], fused traffic "
            f"{workload.fused_bytes / 1e6:.1f} MB, 1 thread"
        )
        print("| variant | time (ms) | GB/s (fused traffic) | vs ceiling | max abs error |")
        print("|---|---|---|---|---|")
        for m in measured:
            error = "-" if m.max_error is None else f"{m.max_error:.2g}"
            print(
                f"| {m.variant} | {milliseconds(m.time_s)} | "
                f"{workload.fused_bytes / m.time_s / 1e9:.1f} | {ceiling / m.time_s:.0%} | "
                f"{error} |"
            )
        print()


if __name__ == "__main__":
    run_script(main)
