"""LLVM dialect -> PTX: xDSL's `convert_module`, then llvmlite's NVPTX target (no GPU needed).

The module is what `ew-to-nvvm`, `ew-expand-math` and `ew-to-llvm` make: one function per kernel.
xDSL's converter ignores function attributes, so each defined function is made a kernel entry
(`ptx_kernel` calling convention, printed as `.entry`) on the llvmlite module. Pointers stay in
the generic address space (xDSL's converter mistranslates a `getelementptr` on an address-space-1
pointer); NVPTX marks a kernel's pointer parameters global and infers `ld.global`/`st.global`.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import llvmlite.binding as llvm_binding

from xfuse.transforms.options import CpuMath, GpuMath, Math, Target

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURES = "+ptx80"
"""PTX ISA 8.0 (CUDA 12.0): the first with sm_90, accepted by CUDA 12 and 13 drivers."""
ARCHES = ("sm_80", "sm_90")
"""GPU architectures xfuse emits PTX for: Ampere (A100) and Hopper (H100, H200)."""


@functools.cache
def _initialize() -> None:
    llvm_binding.initialize_all_targets()
    llvm_binding.initialize_all_asmprinters()


MATH_MODES: dict[Target, tuple[Math, ...]] = {
    "cpu": typing.get_args(CpuMath),
    "cuda": typing.get_args(GpuMath),
}
"""The `math=` choices of each target: no libm on the GPU, no PTX instructions on the CPU."""


def check_arch(arch: str) -> None:
    if arch not in ARCHES:
        raise ValueError(f"arch must be one of {', '.join(ARCHES)}, got {arch!r}")


def check_target(target: str, arch: str, math: str, threads: int) -> None:
    """`xfuse.compile`'s target options: ValueError naming the bad one."""
    if target not in MATH_MODES:
        raise ValueError(f"target must be 'cpu' or 'cuda', got {target!r}")
    modes = MATH_MODES[target]
    if math not in modes:
        raise ValueError(f"math must be {' or '.join(map(repr, modes))} for {target}, got {math!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if target == "cuda" and threads != 1:
        raise ValueError("threads applies to target='cpu' only (a GPU kernel uses the whole GPU)")
    check_arch(arch)


def nvptx_target_machine(arch: str, opt_level: int = 3) -> llvm_binding.TargetMachine:
    check_arch(arch)
    _initialize()
    target = llvm_binding.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=PTX_FEATURES, opt=opt_level)


@dataclass(frozen=True)
class PtxModule:
    """A module's optimized NVVM IR, its PTX, and the names of its kernel entries."""

    optimized_ir: str
    ptx: str
    entries: tuple[str, ...]
    arch: str


def compile_ptx(module: ModuleOp, arch: str = "sm_90", opt_level: int = 3) -> PtxModule:
    """Translate an all-`llvm` xDSL module of kernel functions, optimize it, emit PTX."""
    from xdsl.backend.llvm.convert import convert_module  # not needed to check options

    target_machine = nvptx_target_machine(arch, opt_level)
    llvm_module = convert_module(
        module, fallback_target_triple=TRIPLE, data_layout=str(target_machine.target_data)
    )
    entries = []
    for function in llvm_module.functions:
        if function.blocks:
            function.calling_convention = "ptx_kernel"
            entries.append(function.name)
    backing = llvm_binding.parse_assembly(str(llvm_module))
    backing.verify()
    options = llvm_binding.PipelineTuningOptions(speed_level=opt_level)
    with (
        options,
        llvm_binding.create_pass_builder(target_machine, options) as pass_builder,
        pass_builder.getModulePassManager() as module_pass_manager,
    ):
        module_pass_manager.run(backing, pass_builder)
    ptx = target_machine.emit_assembly(backing)
    return PtxModule(str(backing), ptx, tuple(entries), arch)
