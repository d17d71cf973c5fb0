"""LLVM dialect -> native code: xDSL's `convert_module`, llvmlite's O3 pipeline, MCJIT.

The target is the host CPU (its name and features), so the loop vectorizer uses its widest
vectors (`<16 x float>` with AVX-512). `create_mcjit_compiler` takes ownership of its
TargetMachine, so each engine gets a fresh one; a `NativeModule` keeps its engine alive for as long
as any function pointer from it may be called.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import llvmlite.binding as llvm_binding
from llvmlite.binding.executionengine import ExecutionEngine
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects.builtin import ModuleOp


@functools.cache
def _initialize() -> None:
    llvm_binding.initialize_native_target()
    llvm_binding.initialize_native_asmprinter()


def host_target_machine(opt_level: int = 3) -> llvm_binding.TargetMachine:
    """A new TargetMachine for this CPU (MCJIT consumes one per engine)."""
    _initialize()
    target = llvm_binding.Target.from_triple(llvm_binding.get_process_triple())
    return target.create_target_machine(
        cpu=llvm_binding.get_host_cpu_name(),
        features=llvm_binding.get_host_cpu_features().flatten(),
        opt=opt_level,
        jit=True,
    )


@dataclass
class NativeModule:
    """A JIT-compiled module: its optimized LLVM IR, its assembly, and function addresses."""

    optimized_ir: str
    opt_level: int
    _engine: ExecutionEngine = field(repr=False)

    def address(self, name: str) -> int:
        address = self._engine.get_function_address(name)
        if not address:
            raise LookupError(f"no native function '{name}' in the compiled module")
        return address

    @functools.cached_property
    def asm(self) -> str:
        """The host assembly (generated on first use: it costs a second code generation)."""
        module = llvm_binding.parse_assembly(self.optimized_ir)
        return host_target_machine(self.opt_level).emit_assembly(module)


def compile_llvm_dialect(module: ModuleOp, opt_level: int = 3) -> NativeModule:
    """Translate an all-`llvm` xDSL module, optimize it (loop + SLP vectorization), JIT it."""
    target_machine = host_target_machine(opt_level)
    llvm_module = convert_module(
        module,
        fallback_target_triple=target_machine.triple,
        data_layout=str(target_machine.target_data),
    )
    backing = llvm_binding.parse_assembly(str(llvm_module))
    backing.verify()
    options = llvm_binding.PipelineTuningOptions(speed_level=opt_level)
    options.loop_vectorization = opt_level >= 2
    options.slp_vectorization = opt_level >= 2
    with (
        options,
        llvm_binding.create_pass_builder(target_machine, options) as pass_builder,
        pass_builder.getModulePassManager() as module_pass_manager,
    ):
        module_pass_manager.run(backing, pass_builder)
    optimized_ir = str(backing)
    engine = llvm_binding.create_mcjit_compiler(backing, host_target_machine(opt_level))
    engine.finalize_object()
    return NativeModule(optimized_ir, opt_level, engine)
