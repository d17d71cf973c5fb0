"""Compile time of every stage at 10^2, 10^3 and 10^4 ops: a chain, a wide DAG, a tanh chain.

    python benchmarks/compile_scaling.py [--sizes 100 1000 10000] [--llvm-kernels 300]
                                         [--fused-only]

Three program shapes: a chain (`a = a * 0.999 + 0.001;` repeated: each op uses the one before),
a wide DAG over [t, d], [d] and [t, 1] inputs where each op reads the op before and one far back
(values shared by many ops) plus a broadcast input, and a tanh chain (`a = tanh(a);` repeated:
each op expands to a rational approximation of ~25 scalar ops). Each is compiled fused and
unfused, stage by stage as `xfuse.compile` runs them: the frontend, every pass, then LLVM in two
parts: "LLVM opt" (xDSL's translation to LLVM IR and LLVM's O3 optimizer) and "codegen" (code
generation and linking by MCJIT). Times are CPU seconds of this process (`time.process_time`),
which a busy shared host inflates less than the wall clock; a cost that grows linearly grows 10x
per row. The tanh chain is run at a tenth of each size (its ops are ~15 times bigger).

Each distinct kernel reaches LLVM as a function of its own (`ew-kernel-to-loops` gives alike
kernels one function, which each calls), so LLVM's time grows with the number of distinct
kernels; "kernels" counts them all, as they run. The unfused programs (a kernel per op) are
handed to LLVM only up to `--llvm-kernels` kernels, to keep the run short.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import llvmlite.binding as llvm_binding
from xdsl.dialects.builtin import ModuleOp

import xfuse
from xfuse.benchmarking.timing import host_summary
from xfuse.codegen.native import generate_code, optimize_llvm_dialect
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime.compiler import Options, collector_paused
from xfuse.tools.cli import non_negative_int, positive_int
from xfuse.tools.scripts import run_script, script_parser
from xfuse.transforms.pipeline import pipeline_context


# At least one statement each: a program has one (`--sizes 1` measures that).
def chain(ops: int) -> str:
    return "a = a * 0.999 + 0.001;\n" * max(1, ops // 2)


def tanh_chain(ops: int) -> str:
    return "a = tanh(a);\n" * max(1, ops // 10)


def wide_dag(ops: int) -> str:
    lines = ["input x[t, d], y[t, d]; input b[d]; input c[t, 1];", "v0 = x * y;"]
    for i in range(1, ops // 2):
        lines.append(f"v{i} = v{i - 1} * v{i // 2} + {('b', 'c', 'x')[i % 3]};")
    return "\n".join(lines)


PROGRAMS: dict[str, Callable[[int], str]] = {
    "chain": chain,
    "wide DAG": wide_dag,
    "tanh chain": tanh_chain,
}


def _cpu_seconds(run: Callable[[], object]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def stage_times(source: str, fuse: bool, llvm_kernels: int) -> tuple[int, int, dict[str, float]]:
    """(ops, kernels, CPU seconds per stage) of one compile of `source`."""
    times: dict[str, float] = {}
    module = ModuleOp([])

    def parse() -> None:
        nonlocal module
        module = parse_program(source)

    times["frontend"] = _cpu_seconds(parse)
    ops = sum(1 for op in module.walk() if isinstance(op, ew.UnaryOp | ew.BinaryOp))
    options = Options(fuse=fuse)
    context = pipeline_context()
    for name, pass_ in options.tensor_passes():
        times[name] = _cpu_seconds(lambda p=pass_: p.apply(context, module))
    kernels = sum(1 for op in module.walk() if isinstance(op, ew.KernelOp))
    for name, pass_ in options.buffer_passes():
        times[name] = _cpu_seconds(lambda p=pass_: p.apply(context, module))
    if kernels <= llvm_kernels:
        optimized: list[tuple[llvm_binding.ModuleRef, list[str]]] = []
        times["LLVM opt"] = _cpu_seconds(
            lambda: optimized.append(optimize_llvm_dialect(module, options.opt_level))
        )
        times["codegen"] = _cpu_seconds(
            lambda: generate_code(optimized[0][0], options.opt_level, optimized[0][1])
        )
    return ops, kernels, times


def main() -> None:
    parser = script_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument(
        "--llvm-kernels",
        type=non_negative_int,
        default=300,
        help="largest kernel count to run LLVM on",
    )
    parser.add_argument("--fused-only", action="store_true", help="skip the unfused programs")
    args = parser.parse_args()
    xfuse.compile("out = x * 2;")  # imports and LLVM initialization are not compile time
    print(host_summary())
    print(f"CPU seconds per stage; LLVM ('-') only up to {args.llvm_kernels} kernels\n")
    header = None
    for label, program in PROGRAMS.items():
        for fuse in (True,) if args.fused_only else (True, False):
            for size in args.sizes:
                with collector_paused():  # as in `xfuse.compile`
                    ops, kernels, times = stage_times(program(size), fuse, args.llvm_kernels)
                stages = [*times] if "codegen" in times else [*times, "LLVM opt", "codegen"]
                if header is None:
                    header = stages
                    print("| program | mode | ops | kernels | " + " | ".join(header) + " | total |")
                    print("|---" * (len(header) + 5) + "|")
                cells = [f"{times[s]:.2f}" if s in times else "-" for s in header]
                print(
                    f"| {label} | {'fused' if fuse else 'unfused'} | {ops} | {kernels} | "
                    + " | ".join(cells)
                    + f" | {sum(times.values()):.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    run_script(main)
