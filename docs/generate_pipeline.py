"""Write docs/pipeline.md: one program through every stage of xfuse, with the real IR at each.

    python docs/generate_pipeline.py          # rewrite docs/pipeline.md
    python docs/generate_pipeline.py --check  # exit 1 if docs/pipeline.md is out of date

The IR comes from `xfuse.compile` itself (`Kernel.ir(stage)`), so the tour cannot drift from the
compiler: tests/test_docs.py regenerates it and compares. The optimized LLVM IR depends on the
host CPU, so only its host-independent input (xDSL's `convert_module` output) is checked; the
vectorized loop is summarised between the `host-specific` markers, which the check ignores.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

PROGRAM = "out = tanh(x + b) * r;\n"
DOC = Path(__file__).with_name("pipeline.md")
HOST_BEGIN = "<!-- host-specific: begin -->"
HOST_END = "<!-- host-specific: end -->"

STAGE_NOTES: dict[str, tuple[str, str]] = {
    "frontend": (
        "The frontend",
        "`xfuse.frontend.language.parse_program` turns the source into one `func.func @main` of "
        "tensor-level `ew` ops. Inputs become arguments in order of first use (`x`, `b`, `r`, "
        "flat `tensor<?xf32>` by default); the last assignment is the result (an "
        "`output y, h;` declaration names others).",
    ),
    "ew-optimize": (
        "`ew-optimize`: canonicalize, CSE, DCE",
        "Constant folding, algebraic identities and common subexpressions. Nothing to do for this "
        "program, so the IR is unchanged.",
    ),
    "ew-fuse": (
        "`ew-fuse`: one kernel",
        "Greedy fusion puts the three ops in one `ew.kernel` whose region works on scalars: each "
        "`ew` op became its `arith`/`math` op (the mapping lives in "
        "`src/xfuse/transforms/scalar.py`). `ew-fuse{mode=none}` would make one kernel per op.",
    ),
    "ew-bufferize": (
        "`ew-bufferize`: destination-passing style",
        "Tensors become memrefs; the result becomes an extra argument `%out` that the kernel "
        "writes (`outs(...)`). Temporaries, if any, would get `memref.alloc`s planned by "
        "`xfuse.analysis.memory`.",
    ),
    "ew-workspace": (
        "`ew-workspace`: temporaries in a caller-owned workspace",
        "Nothing to do here: one kernel has no temporaries. In an unfused program each "
        "`memref.alloc` would become a `memref.view` of a trailing `%workspace: memref<?xi8>` "
        "argument at an aligned byte offset, plus a companion function "
        "`@main_workspace_bytes` that returns its size, so the runtime allocates the workspace "
        "once per shape and reuses it across calls instead of a `malloc`/`free` in every call.",
    ),
    "ew-kernel-to-loops": (
        "`ew-kernel-to-loops`: a loop nest",
        "Each kernel becomes an `scf.for` over its iteration space: load each input, run the "
        "region, store each result. A kernel of 2 or more dims is a nest where an array needs "
        "it (a `[d]` bias read at the row's index), one loop for each run of neighbouring dims "
        "that every input reads alike (all of it, or broadcast), so that LLVM's time does not "
        "grow with the rank; one whose arrays are all of its whole space (or scalars) is one "
        "loop over all its elements (a nest would end every row in LLVM's vector epilogue). "
        "This program has one kernel, so its loops stay in "
        "`@main`; in a function of several kernels each kernel's loops go into a private "
        "function of their own (`@main.kernel0`, ...), marked `ew.no_inline` and called where "
        "the kernel was, so that LLVM optimizes the program kernel by kernel; kernels alike in "
        "all that LLVM would see share one function, so each distinct kernel is compiled once. "
        "(xDSL's own route, `ew-to-linalg,convert-linalg-to-loops,lower-affine`, hoists and "
        "outlines nothing and took 1.3-3x the time: measured in docs/benchmarks.md.) In a "
        "kernel of bf16 arrays (not this one: `bf16-only`) the innermost loop is split in two "
        "(`vector-bytes=64`): a main loop to the largest multiple of 4 AVX-512 vectors "
        "(`arith.andi %n, -128`: 128 bf16) and a copy of it over the rest, which LLVM "
        "vectorizes with masked loads and stores instead of the scalar iterations it leaves "
        'such a loop (`{ew.loop = "remainder"}`); `xfuse.compile(masked_remainder=True)` '
        "splits every kernel's. A kernel bound by its loads and stores (not this one: `tanh` "
        "is a function `ew-expand-math` approximates) first runs the elements before its "
        "output's first 64-byte boundary in a loop of their own (`store-alignment=64`, "
        '`{ew.loop = "head"}`: one masked vector iteration), so that no store of the main '
        "loop straddles two cache lines.",
    ),
    "ew-expand-math": (
        "`ew-expand-math{math=approx}`: vectorizable math",
        "`math.tanh` is replaced by a clamped rational approximation in plain arithmetic, which "
        "LLVM can vectorize (`math=libm` would call `tanhf` instead and keep the loop scalar). "
        "Its ops carry fast-math `contract`, so LLVM fuses their multiplies and adds into FMAs; "
        "the program's own arithmetic carries no flags and rounds op by op, as numpy does.",
    ),
    "ew-to-llvm": (
        "`ew-to-llvm`: the `llvm` dialect",
        "Everything becomes xDSL's `llvm` dialect: the loop is basic blocks and branches, each "
        "memref argument a pointer plus one `i64` per dynamic dimension (the native calling "
        "convention), float ops keep their own fast-math flags (`fastmath=contract` would add "
        "`contract` to every one). `@main.packed` is what the runtime "
        "calls: it reads those arguments from one array of 8-byte words, so a program may have "
        "more arrays than a C call through ctypes takes (1024 arguments).",
    ),
}


def _fence(text: str, language: str = "mlir") -> str:
    return f"```{language}\n{text.rstrip()}\n```\n"


def generate() -> str:
    from xdsl.backend.llvm.convert import convert_module
    from xdsl.parser import Parser

    import xfuse
    from xfuse.transforms.default_pipeline import default_pipeline
    from xfuse.transforms.pipeline import pipeline_context

    kernel = xfuse.compile(PROGRAM)
    passes = default_pipeline()  # the host's f16c aside, the passes `xfuse.compile` ran
    assert list(kernel.stages) == ["frontend", *(p.name for p in passes)], kernel.stages
    parts = [
        "# The pipeline, stage by stage\n\n",
        "<!-- Generated by docs/generate_pipeline.py; tests/test_docs.py keeps it current. -->\n\n",
        "One program through every stage of `xfuse.compile`, with the IR each stage prints. The "
        "program:\n\n",
        _fence(PROGRAM, "text"),
        "\nSee any stage yourself: `k = xfuse.compile(src)` then `k.ir(stage)` (stages: "
        + ", ".join(f"`{s}`" for s in kernel.stages)
        + "; `k.ir()` the last), `k.llvm_ir`, `k.asm`; or run the passes one by one with "
        "`xfuse-opt prog.ew -p "
        "'ew-optimize,ew-fuse,...'` (`--print-between-passes` shows each), or all of them with "
        "`xfuse-opt prog.ew -p xfuse-default` (`xfuse.compile`'s options are its options: "
        "`xfuse-default{fuse=false math=libm}`).\n",
    ]
    for number, stage in enumerate(kernel.stages, 1):
        title, note = STAGE_NOTES[stage]
        pipeline = ",".join(str(p.spec()) for p in passes[: number - 1])
        command = f"xfuse-opt prog.ew -p '{pipeline}'" if pipeline else "xfuse-opt prog.ew"
        parts += [
            f"\n## {number}. {title}\n\n{note}\n\n",
            _fence(command, "sh"),
            "\n",
            _fence(kernel.ir(stage)),
        ]
    llvm_dialect = Parser(pipeline_context(), kernel.ir("ew-to-llvm")).parse_module()
    llvm_ir = str(convert_module(llvm_dialect, fallback_target_triple="x86_64-unknown-linux-gnu"))
    parts += [
        f"\n## {len(kernel.stages) + 1}. LLVM IR\n\n",
        "xDSL's `xdsl.backend.llvm.convert.convert_module` prints the `llvm` dialect as LLVM IR "
        "(llvmlite's `ir` module); `xfuse.codegen.native` then sets the host's triple and data "
        "layout, runs LLVM's O3 pipeline with loop and SLP vectorization (and its "
        "always-inliner after it, which puts xfuse's own vector functions, f32 sin and cos "
        "(`xfuse.codegen.vector_functions`), into the loops that call them), then rewrites the "
        "optimized IR where LLVM does not (`xfuse.codegen.optimized_ir`: in a loop whose arrays "
        "are all bf16, `pair_bf16_parts` takes the vector parts two at a time), and "
        "JIT-compiles it with MCJIT. A name the object "
        "code refers to that neither it nor the process defines (a declared function such as a "
        "typo's `expff` or libdevice's `__nv_exp`, or a call the code generator adds, such as "
        "`__truncsfhf2` without F16C) is a `ValueError` naming it, raised before any code can "
        "run: MCJIT links such a name to address 0 without a word, and a call crashed the "
        "process.\n\n",
        _fence(llvm_ir, "llvm"),
        f"\n## {len(kernel.stages) + 2}. What O3 made of it on this machine\n\n",
        HOST_BEGIN + "\n",
        _host_summary(kernel.llvm_ir, kernel.asm),
        HOST_END + "\n",
    ]
    return "".join(parts)


def _host_summary(optimized: str, asm: str) -> str:
    import llvmlite.binding as llvm

    widths = sorted({int(w) for w in re.findall(r"<(\d+) x float>", optimized)}, reverse=True)
    vector = f"`<{widths[0]} x float>` vectors" if widths else "no float vectors (scalar code)"
    instructions = [
        line for line in asm.splitlines() if line.startswith("\t") and "\t." not in line
    ]
    return (
        f"Generated on `{llvm.get_host_cpu_name()}`: the optimized LLVM IR "
        f"(`k.llvm_ir`, {len(optimized.splitlines())} lines) computes with {vector}; the host "
        f"assembly (`k.asm`) has {len(instructions)} instructions. Both differ by CPU, so this "
        "section is not checked.\n"
    )


def checked_part(text: str) -> str:
    """The document without its host-specific section."""
    return re.sub(re.escape(HOST_BEGIN) + ".*?" + re.escape(HOST_END), "", text, flags=re.S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    text = generate()
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        if checked_part(current) != checked_part(text):
            print(f"{DOC} is out of date: run python docs/generate_pipeline.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
