"""xfuse's passes, one per file. `ALL_PASSES` is what `xfuse-opt` and the pipelines register.

Each entry names the module and class of a pass; the module is imported only when the pass is
used, so `xfuse-opt --help` and `import xfuse` stay fast.

The symbol names the lowering gives the functions the runtime calls are here too, where the
runtime reads them without importing the passes (and xDSL): a cached compile never loads xDSL.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.passes import ModulePass

_PASS_LOCATIONS: dict[str, tuple[str, str]] = {
    "ew-optimize": ("xfuse.transforms.optimize", "EwOptimizePass"),
    "ew-strength-reduce": ("xfuse.transforms.strength_reduce", "EwStrengthReducePass"),
    "ew-fuse": ("xfuse.transforms.fuse", "EwFusePass"),
    "ew-bufferize": ("xfuse.transforms.bufferize", "EwBufferizePass"),
    "ew-cost": ("xfuse.transforms.cost", "EwCostPass"),
    "ew-to-linalg": ("xfuse.transforms.to_linalg", "EwToLinalgPass"),
    "ew-workspace": ("xfuse.transforms.workspace", "EwWorkspacePass"),
    "ew-kernel-to-loops": ("xfuse.transforms.kernel_to_loops", "EwKernelToLoopsPass"),
    "ew-expand-math": ("xfuse.transforms.expand_math", "EwExpandMathPass"),
    "ew-to-llvm": ("xfuse.transforms.to_llvm", "EwToLlvmPass"),
    "ew-to-nvvm": ("xfuse.transforms.to_nvvm", "EwToNvvmPass"),
    "xfuse-default": ("xfuse.transforms.default_pipeline", "XfuseDefaultPass"),
}


def _lazy(module: str, class_name: str) -> Callable[[], type[ModulePass]]:
    return lambda: getattr(importlib.import_module(module), class_name)


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    name: _lazy(*location) for name, location in _PASS_LOCATIONS.items()
}

_OWN_PASSES = dict(ALL_PASSES)
"""xfuse's passes as the package registers them, to tell one a script put in `ALL_PASSES`, in
the place of one of them too (`own_passes_only`)."""


def own_passes_only(pipeline: str) -> bool:
    """Whether every pass `pipeline` (`xfuse-opt -p` syntax) names is one of xfuse's package,
    read without xDSL (options and `builtin.module(...)` dropped; what is not read so counts
    as not). The disk cache keeps only programs of such passes, whose code its toolchain
    fingerprint covers: a pass a script puts in `ALL_PASSES`, under a new name or in the place
    of one of xfuse's, is known by its name alone."""
    names = re.sub(r"\{[^{}]*\}", "", pipeline).replace("builtin.module(", "").replace(")", "")
    return all(
        name in _OWN_PASSES and ALL_PASSES.get(name) is _OWN_PASSES[name]
        for name in map(str.strip, names.split(","))
        if name
    )


def packed_entry_name(name: str) -> str:
    """The symbol of `name`'s packed entry (see `xfuse.transforms.to_llvm.packed_entry`), in
    ASCII, as llvmlite looks symbols up (`@"é"`'s was a UnicodeEncodeError): a non-ASCII name is
    spelled by its UTF-8 bytes in hex."""
    spelled = name if name.isascii() else f"xfuse.utf8.{name.encode().hex()}"
    return f"{spelled}.packed"


BF16_HARDWARE_NARROWING = "xfuse.fptrunc.f32.bf16"
"""The function `ew-to-llvm{avx512bf16=true}` calls to round an f32 to bf16 bits (i16) in
hardware; `xfuse.codegen.native` makes each call an `fptrunc` to LLVM's `bfloat` (which llvmlite
cannot spell), AVX512_BF16's `vcvtneps2bf16` once vectorized."""


LOOP_ROLE = "ew.loop"
"""The attribute of an `scf.for` that `ew-kernel-to-loops` made for part of a loop's elements:
`HEAD_LOOP` or `REMAINDER_LOOP`. `ew-to-llvm` names the loop's header block after it (`^head`,
`^remainder`), and `xfuse.codegen.native.mark_loops` finds the loop in LLVM IR by that name."""

HEAD_LOOP = "head"
"""The elements before the first output's aligned stores (`ew-kernel-to-loops{store-alignment}`)."""

REMAINDER_LOOP = "remainder"
"""The elements after the main loop's last block (`ew-kernel-to-loops{vector-bytes}`)."""


RSQRT_ESTIMATE = "ew.rsqrt_estimate"
"""The attribute of `approx.rsqrt`'s `arcp` division 1 / sqrt(s), which LLVM replaces by the
host's estimate and which `approx.rsqrt`'s own step refines from an estimate within 2^-10: where
no other op of a module lets LLVM estimate (`arcp`, `afn`), `xfuse.codegen.native` asks LLVM
for the bare estimate, without LLVM's own Newton step (`raw_rsqrt_estimates`)."""


ROUNDING_MAGIC = 1.5 * 2.0**23
"""`xfuse.transforms.approx`'s rounding trick: adding it (or it plus an even offset below 256,
`is_rounding_magic`) to a float32 v with |v| below `ROUNDED_EXACTLY_BELOW` rounds v to an
integer n, ties to even, in the low bits of the sum; (v + m) - m is n, v - n the remainder that
`xfuse.codegen.optimized_ir.reduce_rounded_remainders` takes in one op."""
ROUNDED_EXACTLY_BELOW = 2.0**21
"""The magnitude below which the rounding trick rounds exactly (`ROUNDING_MAGIC`)."""


def is_rounding_magic(value: float) -> bool:
    """Whether `value` is a magic of the rounding trick: `ROUNDING_MAGIC` plus an even offset in
    [0, 256) (an even one keeps the ties' parity; the offset goes into the sum's low bits)."""
    offset = value - ROUNDING_MAGIC
    return offset.is_integer() and 0 <= offset < 256 and int(offset) % 2 == 0


def workspace_size_function(name: str) -> str:
    """The name of the companion that returns the workspace bytes function `name` needs."""
    return f"{name}_workspace_bytes"
