"""xfuse's `ew-kernel-to-loops` against xDSL's own route to loops, `ew-to-linalg`,
`convert-linalg-to-loops`, `lower-affine`: the optimized LLVM IR of each, and the CPU time of
those passes (the minimum of `--repeat` runs).

    python benchmarks/linalg_loops.py [--repeat 5]

The programs: the lecture's GELU (fused and unfused), several outputs, 2-D with a row and a
column broadcast, bf16 storage, a scalar input, and compile_scaling.py's 10^3-op chain and wide
DAG. The rest of the pipeline is the same for both routes; the LLVM IR is compared without the
streaming twins, which both would get alike.
"""

from __future__ import annotations

import difflib
import time

from compile_scaling import chain, wide_dag
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.convert_linalg_to_loops import ConvertLinalgToLoopsPass
from xdsl.transforms.lower_affine import LowerAffinePass

from xfuse.benchmarking.timing import host_summary
from xfuse.codegen.native import optimize_llvm_dialect
from xfuse.frontend.language import parse_program
from xfuse.runtime.compiler import Options
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser
from xfuse.transforms.kernel_to_loops import EwKernelToLoopsPass
from xfuse.transforms.pipeline import pipeline_context
from xfuse.transforms.to_linalg import EwToLinalgPass

GELU = """h = x + b;
y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));
out = y + r;
"""

PROGRAMS: dict[str, tuple[str, bool]] = {
    "GELU": (GELU, True),
    "GELU unfused": (GELU, False),
    "3 outputs": ("output y, z, h; h = x + b; y = tanh(h); z = h * y;", True),
    "2-D, row and column": ("input x[t, d], b[d], c[t, 1]; out = tanh(x + b) * c;", True),
    "bf16": ("input bf16 x, r; input f32 b; out = bf16(x * b + r);", True),
    "scalar input": ("input s[]; input x[n]; out = x * s + 1;", True),
    "chain 10^3": (chain(1000), True),
    "wide DAG 10^3": (wide_dag(1000), True),
}

ROUTES: dict[str, tuple[ModulePass, ...]] = {
    "ew-kernel-to-loops": (EwKernelToLoopsPass(),),
    "xDSL linalg route": (EwToLinalgPass(), ConvertLinalgToLoopsPass(), LowerAffinePass()),
}


def compare(source: str, fuse: bool, repeat: int) -> tuple[list[float], list[str]]:
    """Per route: the CPU seconds of its passes (minimum of `repeat`) and the optimized LLVM IR."""
    context = pipeline_context()
    passes = Options(fuse=fuse).passes()
    stage = [p.name for p in passes].index(EwKernelToLoopsPass.name)
    before = parse_program(source)
    for pass_ in passes[:stage]:
        pass_.apply(context, before)
    seconds, llvm_ir = [], []
    for route in ROUTES.values():
        best = float("inf")
        module = ModuleOp([])
        for _ in range(repeat):
            module = before.clone()
            start = time.process_time()
            for pass_ in route:
                pass_.apply(context, module)
            best = min(best, time.process_time() - start)
        for pass_ in passes[stage + 1 :]:
            pass_.apply(context, module)
        seconds.append(best)
        llvm_ir.append(str(optimize_llvm_dialect(module)[0]))
    return seconds, llvm_ir


def main() -> None:
    parser = script_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=positive_int, default=5)
    args = parser.parse_args()
    print(host_summary())
    print("| program | " + " | ".join(f"{route} (ms)" for route in ROUTES) + " | LLVM IR |")
    print("|---" * (len(ROUTES) + 2) + "|")
    for label, (source, fuse) in PROGRAMS.items():
        seconds, (ours, theirs) = compare(source, fuse, args.repeat)
        diff = difflib.unified_diff(ours.splitlines(), theirs.splitlines(), n=0, lineterm="")
        changed = sum(line[:1] in "+-" and line[:3] not in ("+++", "---") for line in diff)
        verdict = "identical" if ours == theirs else f"differs ({changed} lines +/-)"
        times = " | ".join(f"{s * 1e3:.1f}" for s in seconds)
        print(f"| {label} | {times} | {verdict} |", flush=True)


if __name__ == "__main__":
    run_script(main)
