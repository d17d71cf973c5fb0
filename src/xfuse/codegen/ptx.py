"""LLVM dialect -> PTX: xDSL's `convert_module`, then llvmlite's NVPTX target (no GPU needed).

The module is what `ew-to-nvvm`, `ew-expand-math` and `ew-to-llvm` make: one function per kernel.
xDSL's converter ignores function attributes, so each defined function is made a kernel entry
(`ptx_kernel` calling convention, printed as `.entry`) on the llvmlite module. Pointers stay in
the generic address space (xDSL's converter mistranslates a `getelementptr` on an address-space-1
pointer); NVPTX marks a kernel's pointer parameters global and infers `ld.global`/`st.global`.

A module that calls libdevice's functions (`__nv_exp`: the f64 transcendentals of
`ew-expand-math{library=libdevice}`) has libdevice linked in before O3, as clang's
`-mlink-builtin-bitcode` does: every function but the entries is made internal, so O3 inlines
what the kernels call and drops the rest, and NVPTX's NVVMReflect pass answers libdevice's
`__nvvm_reflect("__CUDA_FTZ")` from the module flag `nvvm-reflect-ftz` = 0 (denormals kept, as
everywhere in xfuse). The PTX then has no external function.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import llvmlite.binding as llvm_binding
from llvmlite import ir as llvm_ir

from xfuse.codegen.libdevice import (
    FUNCTION_PREFIX,
    Libdevice,
    LibdeviceNotFoundError,
    require_libdevice,
)
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
    if not isinstance(arch, str):
        raise TypeError(f"arch must be a string, one of {', '.join(ARCHES)}, got {arch!r}")
    if arch not in ARCHES:
        raise ValueError(f"arch must be one of {', '.join(ARCHES)}, got {arch!r}")


def check_target(target: str, arch: str, math: str, threads: int) -> None:
    """`xfuse.compile`'s target options: ValueError naming the bad one (TypeError for one that
    is no string)."""
    for name, value in (("target", target), ("math", math)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {value!r}")
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
    libdevice: str | None = None
    """The SHA-256 of the libdevice linked in (`Libdevice.digest`); None if none is."""


def compile_ptx(module: ModuleOp, arch: str = "sm_90", opt_level: int = 3) -> PtxModule:
    """Translate an all-`llvm` xDSL module of kernel functions, optimize it, emit PTX."""
    from xdsl.backend.llvm.convert import convert_module  # not needed to check options

    from xfuse.dialects import xdsl_patches  # (nor xDSL: a cache hit loads none)

    xdsl_patches.keep_llvm_nan_payloads()  # (a NaN constant's bits, as `-t llvm` prints)
    target_machine = nvptx_target_machine(arch, opt_level)
    llvm_module = convert_module(
        module, fallback_target_triple=TRIPLE, data_layout=str(target_machine.target_data)
    )
    entries = []
    for function in llvm_module.functions:
        if function.blocks:
            function.calling_convention = "ptx_kernel"
            entries.append(function.name)
    library = _library_calls(llvm_module)
    libdevice = require_libdevice(library) if library else None
    if libdevice is not None:
        # NVVMReflect's default is 0 too; set as clang sets it, so that it cannot change.
        flag = [llvm_ir.IntType(32)(_OVERRIDE), "nvvm-reflect-ftz", llvm_ir.IntType(32)(0)]
        llvm_module.add_named_metadata("llvm.module.flags", flag)
    backing = llvm_binding.parse_assembly(str(llvm_module))
    if libdevice is not None:
        _link(backing, libdevice, library, entries)
    backing.verify()
    options = llvm_binding.PipelineTuningOptions(speed_level=opt_level)
    with (
        options,
        llvm_binding.create_pass_builder(target_machine, options) as pass_builder,
        pass_builder.getModulePassManager() as module_pass_manager,
    ):
        module_pass_manager.run(backing, pass_builder)
    ptx = target_machine.emit_assembly(backing)
    digest = libdevice.digest if libdevice is not None else None
    return PtxModule(str(backing), ptx, tuple(entries), arch, digest)


_OVERRIDE = 4
"""The module flag behaviour clang gives `nvvm-reflect-ftz` (`llvm::Module::Override`)."""


def _library_calls(module: llvm_ir.Module) -> list[str]:
    """The libdevice functions `module` declares; ValueError for any other external function
    (the GPU has no libm: a C library call left by `ew-expand-math{library=libm}`)."""
    calls = []
    for function in module.functions:
        name = function.name
        if function.blocks or name.startswith("llvm."):
            continue
        if not name.startswith(FUNCTION_PREFIX):
            raise ValueError(
                f"the GPU kernel calls '{name}', which the GPU does not have (its math functions "
                f"are libdevice's: run ew-expand-math{{library=libdevice}})"
            )
        calls.append(name)
    return sorted(calls)


def _link(
    module: llvm_binding.ModuleRef, libdevice: Libdevice, calls: list[str], entries: list[str]
) -> None:
    """Link libdevice into `module`, everything but the `entries` internal (see the docstring).
    `LibdeviceNotFoundError` if the file found is not bitcode or does not define the `calls`."""
    try:
        library = llvm_binding.parse_bitcode(libdevice.bitcode)
    except RuntimeError as error:  # a truncated, empty or text file, or a newer LLVM's bitcode
        reason = str(error).removeprefix("LLVM bitcode parsing error").strip()
        llvm = ".".join(map(str, llvm_binding.llvm_version_info))
        raise _unusable(libdevice, f"is no bitcode that LLVM {llvm} reads ({reason})") from None
    # Its triple is nvptx64-nvidia-gpulibs: the linker warns on a mismatch.
    library.triple, library.data_layout = module.triple, module.data_layout
    try:
        module.link_in(library)
    except RuntimeError as error:  # some other bitcode, defining a kernel's name
        raise _unusable(libdevice, f"cannot be linked ({' '.join(str(error).split())})") from None
    missing = [name for name in calls if module.get_function(name).is_declaration]
    if missing:  # some other bitcode: the PTX would call functions that no GPU has
        raise _unusable(libdevice, f"does not define {', '.join(missing)}")
    for value in (*module.functions, *module.global_variables):
        if not value.is_declaration and value.name not in entries:
            value.linkage = llvm_binding.Linkage.internal


def _unusable(libdevice: Libdevice, reason: str) -> LibdeviceNotFoundError:
    return LibdeviceNotFoundError(
        f"{libdevice.path} {reason}; the GPU kernel's f64 math needs NVIDIA's libdevice "
        f"(reinstall the CUDA toolkit, or set CUDA_HOME to another)"
    )
