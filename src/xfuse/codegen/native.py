"""LLVM dialect -> native code: xDSL's `convert_module`, llvmlite's O3 pipeline, MCJIT.

The target is the host CPU (its name and features, or `XFUSE_CPU_NAME` and `XFUSE_CPU_FEATURES`
where set, as numba's `NUMBA_CPU_NAME`: e.g. `znver3` to see an AVX2 host's code on an AVX-512
one), and the loop vectorizer uses its widest vectors: `<16 x float>` with AVX-512, `<8 x float>`
with AVX2. LLVM's Intel AVX-512 tunings prefer 256-bit vectors (`prefer-256-bit`); xfuse turns that
off so that every AVX-512 host, Intel or AMD Zen 4, runs the same 512-bit loops.
`create_mcjit_compiler` takes ownership of its TargetMachine, so each engine gets a fresh one; a
`NativeModule` keeps its engine alive for as long as any function pointer from it may be called.

Every loop the lowering makes comes from an elementwise `ew.kernel`: iteration i reads its inputs
at i (or at a broadcast index that no output of the kernel shares) and writes its outputs at i,
and an output is either the very same buffer as an input or does not overlap it (the runtime's
argument checks and `ew-bufferize` guarantee both). So no iteration depends on another, and the
innermost loops are marked parallel (`llvm.loop.parallel_accesses`): the vectorizer then needs no
runtime overlap check, which an in-place call (out is an input) would fail, falling back to the
scalar loop. They also get an interleave count chosen from the body's length (`mark_loops`),
and once vectorized, a compute-heavy one prefetches the lines it loads a few KiB ahead
(`xfuse.codegen.optimized_ir.prefetch_loads`, one of the rewrites of LLVM's optimized IR that
`generate_code` runs) on a host where that pays (`HostCpu.prefetches`).

A single-kernel program also gets a streaming twin of its function (`add_streaming_twins`):
the same loop with non-temporal vector stores, which the runtime calls for large calls on
outputs it has aligned (`HostCpu.streaming_bytes`).
"""

from __future__ import annotations

import functools
import itertools
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import llvmlite
import llvmlite.binding as llvm_binding
import llvmlite.ir as llvm_ir
from llvmlite.binding import ffi
from llvmlite.binding.executionengine import ExecutionEngine

from xfuse.codegen.libdevice import FUNCTION_PREFIX
from xfuse.codegen.optimized_ir import (
    ELEMENT_BYTES,
    PREFETCH_DISTANCE,
    RAW_RSQRT_ESTIMATES,
    ZEN3_PREFETCH_DISTANCE,
    pair_bf16_parts,
    prefetch_loads,
    reduce_rounded_remainders,
    same_rsqrt_estimates,
    saturate_exp2s,
    streaming_stores,
)
from xfuse.codegen.vector_functions import (
    LARGE_ARGUMENTS,
    WITHIN_ONE,
    FunctionAttributes,
    own_sine,
    trigonometric_of_large_arguments,
    within_one,
)
from xfuse.transforms import (
    BF16_HARDWARE_NARROWING,
    HEAD_LOOP,
    REMAINDER_LOOP,
    RSQRT_ESTIMATE,
    packed_entry_name,
    workspace_size_function,
)

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


@functools.cache
def _initialize() -> None:
    llvm_binding.initialize_native_target()
    llvm_binding.initialize_native_asmprinter()


# A fork while another thread was inside LLVM (compiling) left the child a lock that thread
# held, and LLVM's state mid-call: the child's first compile waited forever. The fork waits for
# llvmlite's lock around every LLVM call (`ffi.lib._lock._lock`, private in llvmlite 0.50), so
# no thread is inside LLVM as the child is made; the child gets a new one.
os.register_at_fork(
    before=lambda: ffi.lib._lock._lock.acquire(),
    after_in_parent=lambda: ffi.lib._lock._lock.release(),
    after_in_child=lambda: setattr(ffi.lib._lock, "_lock", threading.RLock()),
)


@dataclass(frozen=True)
class HostCpu:
    """The CPU that kernels are compiled for: a name and LLVM's feature string (`+avx2,...`)."""

    name: str
    features: str

    def has(self, feature: str) -> bool:
        """Whether the features turn `feature` on: its last sign is '+', as LLVM reads them
        (`...,+avx512bf16,...,-avx512bf16` is without, which `+` anywhere took for with)."""
        signs = [item[:1] for item in self.features.split(",") if item[1:] == feature]
        return signs[-1:] == ["+"]

    def masks(self, element_bytes: int) -> bool:
        """Whether vector loads and stores of `element_bytes`-sized elements can be masked:
        `vmaskmovps/pd` (AVX) for 4 and 8 bytes, AVX-512BW's masked moves for 1 and 2."""
        return self.has("avx512bw") or (element_bytes >= 4 and self.has("avx"))

    @property
    def amd_zen(self) -> bool:
        """An AMD Zen core (`znver1` to `znver5`), which the tuning below tells from Intel's."""
        return self.name.startswith("znver")

    @property
    def zen3(self) -> bool:
        """AMD's Zen 3 (`znver3`), whose prefetches were measured apart from Zen 4's."""
        return self.name == "znver3"

    @property
    def prefetches(self) -> bool:
        """Whether compute-heavy vector loops prefetch the lines they load (`prefetch_loads`):
        on Intel's cores (Emerald Rapids) that took 0.70-0.96x the time at 2^24, on AMD's Zen 3
        (`znver3`) 0.90-1.05x 4 KiB ahead (`x * sigmoid(x) * y` 0.90-0.95x and erf-GELU
        0.92-0.97x in three runs; 2 KiB does better there, `prefetch_distance`); on Zen 4 it
        took the loops of two or three input arrays 1.2-1.7x the time at every distance tried, 3
        to 16 KiB, and gained nothing on one input (docs/benchmarks.md). The other Zen cores
        (not measured) are taken to be like Zen 4, as before Zen 3 was."""
        return not self.amd_zen or self.zen3

    @property
    def prefetch_distance(self) -> int:
        """How many bytes ahead those loops prefetch: `ZEN3_PREFETCH_DISTANCE` (2 KiB) on Zen 3,
        else `PREFETCH_DISTANCE` (4 KiB, measured on Intel's cores)."""
        return ZEN3_PREFETCH_DISTANCE if self.zen3 else PREFETCH_DISTANCE

    @property
    def reduces_remainders(self) -> bool:
        """Whether vector loops take a clamped value's distance to its nearest integer in one
        `vreduceps` (AVX512DQ; `reduce_rounded_remainders`), and GELU's exp2 of it unclamped,
        its 2^n by `vscalefps` (`saturate_exp2s`): on Zen 4 the two took GELU + bias + residual
        0.78-0.86x the time in cache, the LLM bf16 GELUs 0.85-0.90x (docs/benchmarks.md).
        Intel's AVX-512 cores, not measured, are taken to gain too: the exp2's rounding and
        scaling take 5 vector ops where they took 7, on the loop's longest chain."""
        return self.has("avx512dq")

    @property
    def streaming_bytes(self) -> int:
        """From how many bytes read and written a call of one flat loop writes its outputs
        past the cache (non-temporal stores; `xfuse.runtime.call_plans`): below, normal stores are
        faster (the outputs stay cached for what reads them next), above, the outputs are not
        read into the cache first and do not evict the inputs. On Intel's cores 4 MiB (1.2-1.5x
        from 4 MiB, 0.6x at 1 MiB: `benchmarks/loop_and_call.py`); on AMD's Zen 16 MiB (on Zen 4,
        32 MiB of L3, normal stores took 0.58-0.99x the time of streaming ones at 4 and 8 MiB,
        0.90-1.08x at 16 MiB, 1.02-1.46x from 64 MiB; on Zen 3, 32 MiB of L3 too, 0.64-1.02x at
        4 and 8 MiB, 0.82-1.06x at 16 MiB, 1.01-1.75x from 32 MiB: docs/benchmarks.md)."""
        return (16 if self.amd_zen else 4) << 20

    @property
    def rounds_bf16(self) -> bool:
        """Whether LLVM makes every `fptrunc` f32 -> bfloat AVX512_BF16's `vcvtneps2bf16`: that
        takes AVX512VL too for a scalar or a narrower vector (without it, LLVM calls compiler-rt's
        `__truncsfbf2`, which MCJIT does not resolve)."""
        return self.has("avx512bf16") and self.has("avx512vl")

    @property
    def scales_by_ldexp(self) -> bool:
        """Whether LLVM makes `llvm.ldexp` on f32 `vscalefps`/`vscalefss` at every vector width
        the loop vectorizer may choose (AVX512F, and AVX512VL for 128- and 256-bit vectors);
        elsewhere it calls the C library's `ldexpf` for each element."""
        return self.has("avx512f") and self.has("avx512vl")

    @property
    def float_lanes(self) -> int:
        """f32 lanes in the widest vector register: 16 with AVX-512, 8 with AVX, else 4."""
        if self.has("avx512f"):
            return 16
        return 8 if self.has("avx") else 4


@functools.cache
def host_cpu() -> HostCpu:
    """This host's CPU, or the one `XFUSE_CPU_NAME` and `XFUSE_CPU_FEATURES` name (read once)."""
    _initialize()
    name = os.environ.get("XFUSE_CPU_NAME")
    features = os.environ.get("XFUSE_CPU_FEATURES")
    if name is None and features is None:
        name, features = (
            llvm_binding.get_host_cpu_name(),
            llvm_binding.get_host_cpu_features().flatten(),
        )
    elif name is None or features is None:
        raise ValueError("set both XFUSE_CPU_NAME and XFUSE_CPU_FEATURES, or neither")
    else:  # (LLVM aborts the process on a feature without its sign: an assertion)
        unsigned = [item for item in features.split(",") if features and item[:1] not in "+-"]
        if not name or unsigned:
            raise ValueError(
                f"XFUSE_CPU_NAME must name an LLVM CPU (znver3) and each feature of "
                f"XFUSE_CPU_FEATURES start with '+' or '-' (+avx2,+fma), got "
                f"XFUSE_CPU_NAME={name!r}, XFUSE_CPU_FEATURES={features!r}"
            )
        features = _checked_features(name, features)
    if HostCpu(name, features).has("avx512f"):
        features += ",-prefer-256-bit"
    return HostCpu(name, features)


_SUBTARGET_PROBE = """
import sys

sys.path.insert(0, sys.argv[3])  # (isolated: where this process found llvmlite, alone)
import llvmlite.binding as llvm

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
module = llvm.parse_assembly(
    "define float @scalar(float %a) { ret float %a }\\n"
    "define double @wide(double %a) { ret double %a }\\n"
    "define <16 x float> @vector(<16 x float> %a, <16 x float> %b) #0 {\\n"
    "  %c = fmul <16 x float> %a, %b\\n  ret <16 x float> %c\\n}\\n"
    'attributes #0 = { "min-legal-vector-width"="512" }\\n'
    "define bfloat @rounded(float %a) {\\n"
    "  %b = fptrunc float %a to bfloat\\n  ret bfloat %b\\n}\\n"
)
module.triple = llvm.get_process_triple()
target = llvm.Target.from_triple(module.triple)
machine = target.create_target_machine(cpu=sys.argv[1], features=sys.argv[2], jit=True)
print(machine.emit_assembly(module))
"""
"""Code for scalar (f32, f64) and vector functions made for the CPU and features its arguments
name, with llvmlite from the folder the third names: its assembly, whose registers say how wide
the vectors are (`zmm`: 512 bits), and whose rounding to bfloat is an instruction or a call."""


def _checked_features(name: str, features: str) -> str:
    """`features` for CPU `name`, checked by LLVM, with `-avx512bf16` added where LLVM takes
    AVX512_BF16 away with what the list takes (`...,-avx512f` after the host's list: `+` is
    read where it appears, and xfuse's bf16 rounding was a call MCJIT lacks); a ValueError
    naming both variables where LLVM cannot make this process's code with them.

    Asked of a child process: LLVM says of a CPU or feature it does not know on stderr only and
    goes on (dropping a feature), and it aborts the process at the first function made for a
    32-bit CPU (`i686`, and an unknown one), for `-64bit` ("64-bit code requested on a
    subtarget that doesn't support it"), or `-sse` and `-sse2` ("SSE register return with SSE
    disabled", of a float and a double), which no `except` catches. (An empty module, made here
    with stderr captured, raised the first only.) A child that fails before LLVM says anything
    checks nothing."""

    def refused(why: str) -> ValueError:
        return ValueError(f"XFUSE_CPU_NAME={name!r}, XFUSE_CPU_FEATURES={features!r}: {why}")

    if not sys.executable:  # (an embedding interpreter: no Python to run)
        return features
    packages = os.path.dirname(os.path.dirname(os.path.abspath(llvmlite.__file__)))
    probe = subprocess.run(
        [sys.executable, "-I", "-c", _SUBTARGET_PROBE, name, features, packages],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    lines = list(dict.fromkeys(line for line in probe.stderr.splitlines() if line.strip()))
    unknown = [line for line in lines if "is not a recognized" in line]
    triple = llvm_binding.get_process_triple()
    if unknown:
        raise refused(f"LLVM knows no such CPU or feature for {triple} ({'; '.join(unknown)})")
    said = [line for line in lines if line.startswith(("LLVM ERROR", "error:"))]
    if probe.returncode != 0 and said:  # (not a child that failed before LLVM: no check)
        raise refused(f"LLVM cannot make code for {triple} with them ({said[-1]})")
    if probe.returncode != 0:
        return features
    # The widths and masks xfuse chooses are read from the features as listed (`HostCpu.has`):
    # a CPU's own features left out (`haswell` with `+avx2,+fma`) made AVX2 code that xfuse
    # took for SSE's 128 bits.
    widest = 512 if "zmm" in probe.stdout else 256 if "ymm" in probe.stdout else 128
    cpu = HostCpu(name, features)
    listed = cpu.float_lanes * 32
    if widest != listed:
        raise refused(
            f"LLVM makes {widest}-bit vectors for them, but the features as listed say {listed} "
            "bits (+avx: 256, +avx512f: 512); list the CPU's features in full, as LLVM's host "
            "features are (xfuse reads the vector width and the instructions it may use from "
            "them)"
        )
    if "__truncsfbf2" in probe.stdout and cpu.rounds_bf16:
        return f"{features},-avx512bf16"
    return features


def _process_target() -> llvm_binding.Target:
    _initialize()
    return llvm_binding.Target.from_triple(llvm_binding.get_process_triple())


def host_target_machine(opt_level: int = 3) -> llvm_binding.TargetMachine:
    """A new TargetMachine for the host CPU (MCJIT consumes one per engine)."""
    cpu = host_cpu()
    return _process_target().create_target_machine(
        cpu=cpu.name, features=cpu.features, opt=opt_level, jit=True
    )


def optimizing_target_machine(opt_level: int = 3) -> llvm_binding.TargetMachine:
    """The host CPU's TargetMachine for what does not consume one (the optimizer's pass
    builders, `NativeModule.asm`): made once per CPU and level (0.55 ms each, and a compile
    made three), where `host_target_machine` makes the one MCJIT takes."""
    cpu = host_cpu()
    return _target_machine(cpu.name, cpu.features, opt_level)


@functools.cache
def _target_machine(name: str, features: str, opt_level: int) -> llvm_binding.TargetMachine:
    return _process_target().create_target_machine(
        cpu=name, features=features, opt=opt_level, jit=True
    )


@dataclass
class NativeModule:
    """A JIT-compiled module: its optimized LLVM IR, its object code, its assembly, and function
    addresses."""

    optimized_ir: str
    opt_level: int
    object_code: bytes = field(repr=False)
    """The host object file MCJIT linked: what the on-disk cache keeps (`load_object_code`)."""
    _engine: ExecutionEngine = field(repr=False)

    def find(self, name: str) -> int | None:
        """The address of the module's function `name`, or None if it defines none (the engine
        looks the name up: no need to read the IR)."""
        return self._engine.get_function_address(name) or None

    def address(self, name: str) -> int:
        address = self.find(name)
        if address is None:
            raise LookupError(f"no native function '{name}' in the compiled module")
        return address

    @functools.cached_property
    def asm(self) -> str:
        """The host assembly (generated on first use: it costs a second code generation)."""
        module = llvm_binding.parse_assembly(self.optimized_ir)
        return optimizing_target_machine(self.opt_level).emit_assembly(module)


class _DistinctNode(llvm_ir.values.MDValue):
    """A `distinct` metadata node (llvmlite prints only uniqued ones): access groups, loop IDs."""

    # Distinct nodes are never the same node, whatever their operands (llvmlite compares those).
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def descr(self, buf: list[str]) -> None:
        buf.append("distinct ")
        super().descr(buf)


def _distinct_node(module: llvm_ir.Module, operands: list[llvm_ir.Value]) -> _DistinctNode:
    return _DistinctNode(module, operands, name=str(len(module.metadata)))


def _innermost_loops(
    function: llvm_ir.Function,
) -> list[tuple[llvm_ir.instructions.Terminator, set[llvm_ir.Block]]]:
    """(latch branch, blocks) of each innermost natural loop, from the branches' targets."""
    predecessors: dict[llvm_ir.Block, list[llvm_ir.Block]] = {b: [] for b in function.blocks}
    order = {block: index for index, block in enumerate(function.blocks)}
    back_edges = []
    for block in function.blocks:
        for target in block.terminator.operands:
            if isinstance(target, llvm_ir.Block):
                predecessors[target].append(block)
                # Blocks are in program order, so a branch backwards closes a loop.
                if order[target] <= order[block]:
                    back_edges.append((block, target))
    loops = []
    for latch, header in back_edges:
        blocks, pending = {header}, [latch]
        while pending:
            block = pending.pop()
            if block not in blocks:
                blocks.add(block)
                pending += predecessors[block]
        loops.append((latch.terminator, blocks))
    return [
        (latch, blocks) for latch, blocks in loops if not any(other < blocks for _, other in loops)
    ]


def interleave_count(
    body_length: int, arrays: int = 1, float_register_vectors: bool = False
) -> int:
    """How many vector iterations the vectorizer interleaves in a loop of `body_length` LLVM
    instructions (before O3) that reads and writes `arrays` arrays, `float_register_vectors` if
    it moves 16-bit floats at one register of f32 lanes a vector (`narrow_at_float_lanes`): 0
    leaves the choice to LLVM's cost model.

    A long body is one long dependency chain per vector (a polynomial, a division): LLVM's model
    interleaves it once, and the core then waits on latency; forcing `LONG_BODY_INTERLEAVE`
    overlaps that many chains (measured in `benchmarks/loop_and_call.py`, docs/benchmarks.md),
    `NARROW_LONG_BODY_INTERLEAVE` where a 16-bit loop's vectors are one float register each.
    A short body is bound by loads and stores, where LLVM's own choice is as good. A loop over
    more arrays than `MAX_INTERLEAVED_ARRAYS`, whose addresses no longer fit in registers, is
    not interleaved: its register allocation and Loop Strength Reduction, most of its compile
    time, grow with the interleaved body (the wide DAG of 10^4 ops of
    `benchmarks/compile_scaling.py`, ~100 arrays a loop: LLVM's 14.5 s became 9.5), and its
    speed barely changes (that DAG at 10^3 and 10^4 ops, [2 to 256, 1024] f32: 0.88-1.15x the
    time of the interleaved loop, noisy host).
    """
    if arrays > MAX_INTERLEAVED_ARRAYS:
        return 1
    if body_length < LONG_BODY:
        return 0
    return NARROW_LONG_BODY_INTERLEAVE if float_register_vectors else LONG_BODY_INTERLEAVE


LONG_BODY = 24
"""Instructions (loads, address arithmetic, math, stores) from which a loop body counts as long."""

LONG_BODY_INTERLEAVE = 4

NARROW_LONG_BODY_INTERLEAVE = 8
"""For a long loop of 16-bit floats whose vectors are one register of f32 lanes
(`narrow_at_float_lanes`), where a loop of 16-bit arrays alone gets two registers a vector from
LLVM: 8 of them give it as many chains as 4 give that one. Against interleave 4, where it rounds
to bf16 in hardware, in four loaded runs (docs/benchmarks.md), the LLM GELU with a bf16 bias
took 0.75-0.94x the time in every comparison (2^12, 2^16, 2^24), the one with an f32 bias
0.81-1.05x (less in 6 of 9); the f32 GELU's loop took the same (1.03 against 1.05 cycles an
element). Where it rounds in integer ops, the LLM GELU with an f32 bias (bf16 x and r) in cache
took 0.89-0.90x as AVX2 code, 0.93-0.94x as AVX-512 code without AVX512_BF16; with f16 x and r
0.95x as AVX2 code, 0.92x natively, 0.96-1.01x as AVX-512 code without AVX512_BF16 (Intel Xeon,
2026-12-05); with a bf16 bias, at two registers a vector, 8 took 1.02-1.04x: it keeps 4."""


def narrow_at_float_lanes(blocks: set[llvm_ir.Block]) -> bool:
    """Whether the loop of `blocks` moves 16-bit floats at one register of f32 lanes a vector:
    it rounds to bf16 in hardware (vectorized at the host's float lanes, `mark_loops`), or it
    moves 32-bit elements too (LLVM's cost model then vectorizes at their lanes)."""
    sizes = _accessed_bytes(blocks)
    return _narrows_bf16_in_hardware(blocks) or (2 in sizes and 4 in sizes)


MAX_INTERLEAVED_ARRAYS = 16
"""The most arrays a loop may read and write and be interleaved: x86-64 has 16 general-purpose
registers for their addresses."""


def is_edge_loop(blocks: set[llvm_ir.Block]) -> bool:
    """Whether the loop of `blocks` runs only some of a row's first or last elements: a head or
    remainder loop of `ew-kernel-to-loops`, whose header block `ew-to-llvm` names after its
    `LOOP_ROLE` (llvmlite numbers names met again: `remainder.1`)."""
    header = min(blocks, key=lambda block: block.function.blocks.index(block))
    return header.name.split(".")[0] in (HEAD_LOOP, REMAINDER_LOOP)


def _accessed_arrays(blocks: set[llvm_ir.Block]) -> int:
    """How many arrays the loop of `blocks` loads or stores: the distinct base pointers of the
    element addresses (`getelementptr`) it accesses."""
    addresses = [
        instruction.operands[0 if isinstance(instruction, llvm_ir.LoadInstr) else 1]
        for block in blocks
        for instruction in block.instructions
        if isinstance(instruction, llvm_ir.LoadInstr | llvm_ir.StoreInstr)
    ]
    return len({id(a.pointer) if isinstance(a, llvm_ir.GEPInstr) else id(a) for a in addresses})


def _accessed_bytes(blocks: set[llvm_ir.Block]) -> set[int]:
    """The sizes of the elements the loads and stores of `blocks` access (1 for a type that
    `ELEMENT_BYTES` does not list: the narrowest, so the least often maskable)."""
    types = [
        instruction.type
        if isinstance(instruction, llvm_ir.LoadInstr)
        else instruction.operands[0].type
        for block in blocks
        for instruction in block.instructions
        if isinstance(instruction, llvm_ir.LoadInstr | llvm_ir.StoreInstr)
    ]
    return {ELEMENT_BYTES.get(str(type_), 1) for type_ in types}


def _loop_flag(module: llvm_ir.Module, name: str) -> llvm_ir.MDValue:
    """A loop property `!{!"name", i1 true}`."""
    return module.add_metadata(
        [llvm_ir.MetaDataString(module, name), llvm_ir.Constant(llvm_ir.IntType(1), 1)]
    )


class _BFloatType(llvm_ir.Type):
    """LLVM's `bfloat`, which llvmlite does not have."""

    def _to_string(self) -> str:
        return "bfloat"


def lower_bf16_hardware_narrowings(module: llvm_ir.Module) -> None:
    """Each call to `BF16_HARDWARE_NARROWING` (see `xfuse.transforms.to_llvm`'s
    `narrow_bf16_in_hardware`) becomes `fptrunc` to `bfloat` and a bitcast of that to i16: what
    the loop vectorizer widens and X86 selects as `vcvtneps2bf16` with AVX512_BF16 (without it,
    a call to compiler-rt's `__truncsfbf2`, which MCJIT does not resolve: `ew-to-llvm` makes the
    calls only where the target CPU has it). The declaration goes too."""
    callee = module.globals.pop(BF16_HARDWARE_NARROWING, None)
    if callee is None:
        return
    lowered: dict[llvm_ir.Instruction, llvm_ir.Instruction] = {}
    for function in module.functions:
        for block in function.blocks:
            instructions: list[llvm_ir.Instruction] = []
            for instruction in block.instructions:
                if isinstance(instruction, llvm_ir.CallInstr) and instruction.callee is callee:
                    rounded = llvm_ir.CastInstr(
                        block, "fptrunc", instruction.args[0], _BFloatType()
                    )
                    bits = llvm_ir.CastInstr(block, "bitcast", rounded, instruction.type)
                    instructions += [rounded, bits]
                    lowered[instruction] = bits
                else:
                    instructions.append(instruction)
            block.instructions = instructions
    for function in module.functions:
        for block in function.blocks:
            for instruction in block.instructions:
                for operand in [o for o in instruction.operands if o in lowered]:
                    instruction.replace_usage(operand, lowered[operand])


LIBMVEC_FUNCTIONS = {
    **{"exp": 1, "log": 1, "log1p": 1, "tanh": 1, "erf": 1, "pow": 2},
    **dict.fromkeys(["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh"], 1),
    **dict.fromkeys(["asinh", "acosh", "atanh", "exp2", "expm1", "log2", "log10", "cbrt"], 1),
    "atan2": 2,
}
"""The C library functions `ew-expand-math` calls (`math=libm`, and under `approx` f64's and
the f32 ones xfuse has no approximation of) that glibc's vector math library (libmvec, glibc
2.35+ for all but exp, log, pow, sin and cos) also has for vectors, by their f64 name (`sin`;
f32's is `sinf`) and operand count."""

LIBMVEC_ISAS = (("e", 8, "avx512f"), ("d", 4, "avx2"), ("b", 2, None))
"""The x86-64 vector function ABI's variants: its ISA letter, f64 lanes (twice as many f32),
and the feature whose registers carry the vectors (`_ZGVeN8v_exp` takes and returns a zmm;
None: SSE2's, which every x86-64 CPU has)."""


@functools.cache
def libmvec_loaded() -> bool:
    """Whether glibc's libmvec is in the process for MCJIT to link against (loaded here once:
    code compiled earlier and cached on disk may call it too); False on other hosts."""
    if not llvm_binding.get_process_triple().startswith("x86_64") or sys.platform != "linux":
        return False
    try:
        llvm_binding.load_library_permanently("libmvec.so.1")
    except RuntimeError:  # no such library (not glibc)
        return False
    return True


def libmvec_function(name: str) -> tuple[llvm_ir.FunctionType, int] | None:
    """The type of the C library's `name` and its lanes per f64 lane (`sin`: double(double) and
    1; `sinf`: float(float) and 2) if libmvec has it (`LIBMVEC_FUNCTIONS`), else None."""
    element: llvm_ir.Type = llvm_ir.DoubleType()
    operands = LIBMVEC_FUNCTIONS.get(name)
    if operands is None and name.endswith("f"):
        element, operands = llvm_ir.FloatType(), LIBMVEC_FUNCTIONS.get(name[:-1])
    if operands is None:
        return None
    lanes_per_f64_lane = 2 if isinstance(element, llvm_ir.FloatType) else 1
    return llvm_ir.FunctionType(element, [element] * operands), lanes_per_f64_lane


def _libmvec_variant(isa: str, f64_lanes: int, name: str) -> tuple[int, str]:
    """The lanes and the symbol of the C library's `name` in the variant of `isa`."""
    function = libmvec_function(name)
    assert function is not None, name
    ftype, lanes_per_f64_lane = function
    lanes = f64_lanes * lanes_per_f64_lane
    return lanes, f"_ZGV{isa}N{lanes}{'v' * len(ftype.args)}_{name}"


@functools.cache
def libmvec_symbols() -> frozenset[str]:
    """Every variant (`LIBMVEC_ISAS`) of every `LIBMVEC_FUNCTIONS` function, f64 and f32, that
    this process's libmvec has: what MCJIT resolves (none without libmvec)."""
    if not libmvec_loaded():
        return frozenset()
    return frozenset(
        symbol
        for name in LIBMVEC_FUNCTIONS
        for c_name in (name, name + "f")
        for isa, f64_lanes, _ in LIBMVEC_ISAS
        if llvm_binding.address_of_symbol(symbol := _libmvec_variant(isa, f64_lanes, c_name)[1])
    )


def libmvec_variants(name: str, cpu: HostCpu) -> list[tuple[int, str]]:
    """(lanes, symbol) of each libmvec variant of the C library's `name` (f64 `sin` or f32
    `sinf`) that `cpu`'s vectors can pass and this host's libmvec has, widest first."""
    return [
        variant
        for isa, f64_lanes, feature in LIBMVEC_ISAS
        if (feature is None or cpu.has(feature))
        and (variant := _libmvec_variant(isa, f64_lanes, name))[1] in libmvec_symbols()
    ]


def libmvec_wrapper_name(name: str) -> str:
    """The kernel's C library function `name` (of `LIBMVEC_FUNCTIONS`, f64 `sin` or f32 `sinf`)
    where `call_libmvec` maps it."""
    return f"xfuse.libmvec.{name}"


def _libmvec_wrapper(
    module: llvm_ir.Module, declaration: llvm_ir.Function, variant: llvm_ir.Function
) -> llvm_ir.Function:
    """The definition of `libmvec_wrapper_name` of the C library's `declaration`: its libmvec
    variant `variant` on its operands in lane 0 (1.0, no special value, in the others), lane 0 of
    its result; the loop vectorizer calls `variant` itself on as many elements at a time."""
    wrapper = llvm_ir.Function(module, declaration.ftype, libmvec_wrapper_name(declaration.name))
    wrapper.linkage = "internal"
    vector = variant.ftype.return_type
    lanes = vector.count
    wrapper.attributes = FunctionAttributes(
        [
            "noinline",
            "nounwind",
            "willreturn",
            "memory(none)",
            f'"vector-function-abi-variant"="_ZGV_LLVM_N{lanes}{"v" * len(wrapper.args)}_'
            f'{wrapper.name}({variant.name})"',
        ]
    )
    builder = llvm_ir.IRBuilder(wrapper.append_basic_block())
    ones = vector([1.0] * lanes)
    lane0 = llvm_ir.IntType(64)(0)
    vectors = []
    for position, argument in enumerate(wrapper.args):
        argument.name = f"a{position}"
        vectors.append(builder.insert_element(ones, argument, lane0, name=f"v{position}"))
    result = builder.call(variant, vectors, name="r")
    builder.ret(builder.extract_element(result, lane0, name="e"))
    return wrapper


def call_libmvec(module: llvm_ir.Module, cpu: HostCpu) -> None:
    """Make the libm calls (`LIBMVEC_FUNCTIONS`, f64 and f32) of `module` compute with one
    libmvec variant (the widest of `libmvec_variants`; for `LARGE_ARGUMENTS` xfuse's vector
    function around it, and for f32 sin and cos where `cpu` has FMA xfuse's own, `own_sine`,
    which calls it only for large arguments), which the loop vectorizer calls on vectors: each
    call becomes one of a function of the kernel's own (`libmvec_wrapper_name`, not inlined, in
    the place of the C library's declaration), that has the variant (LLVM's
    "vector-function-abi-variant") and no access to memory (xfuse never reads errno: clang's
    -fno-math-errno) and runs it on one element where a loop's remainder calls it, and the
    variants and wrappers are declared and kept (`llvm.compiler.used`) until the vectorizer has
    run (a wrapper kept so keeps its parameters whatever its calls pass). In cache a loop of
    libm's f64 exp took 5.4 ns per element, one of `_ZGVeN8v_exp` calls 0.8, as numpy's `np.exp`
    (AVX-512, docs/benchmarks.md).

    One variant, in the remainder too: libm's scalar functions and libmvec's variants of
    another width round differently (up to their ulps), so an element computed in a vector
    loop and in its remainder (or half-width epilogue) differed: the bits of f64 `tanh(x)`
    depended on where an element fell in the loop, which changed with the array's length, a
    split call's slices (`threads`, chosen by timing: identical calls differed), a streaming
    call's head (where the `out` buffer starts) and dask's chunks. The remainder's calls, each
    a vector call, cost no more than libm's (f64 tanh over 31 elements: 0.30 us, libm's 0.48)."""
    variants: list[llvm_ir.Function] = []
    wrappers: dict[str, llvm_ir.Function] = {}  # by the C library's function they replace
    for declaration in module.functions:
        name = declaration.name
        function = libmvec_function(name)
        if (
            function is None
            or not declaration.is_declaration
            or declaration.ftype != function[0]
            or not (found := libmvec_variants(name, cpu))
        ):
            continue
        lanes, symbol = found[0]
        vector = llvm_ir.VectorType(function[0].return_type, lanes)
        operands = [vector] * len(function[0].args)
        variants.append(llvm_ir.Function(module, llvm_ir.FunctionType(vector, operands), symbol))
        large = LARGE_ARGUMENTS.get(name)
        if large is not None:
            variants.append(trigonometric_of_large_arguments(module, variants[-1], large))
        if name in WITHIN_ONE:
            variants.append(within_one(module, variants[-1]))
        if large is not None and not large.tangent and cpu.has("fma"):  # sinf and cosf
            variants.append(own_sine(module, variants[-1], large.quarter_turns))
        wrappers[name] = _libmvec_wrapper(module, declaration, variants[-1])
    if not wrappers:
        return
    for function in module.functions:
        for block in function.blocks:
            for instruction in block.instructions:
                if (
                    isinstance(instruction, llvm_ir.CallInstr)
                    and instruction.callee.name in wrappers
                ):
                    instruction.replace_callee(wrappers[instruction.callee.name])
    # Each wrapper takes the place of the declaration it replaces, which nothing calls now (a
    # function's place in the module is its place in the object code), not the module's end.
    added = {wrapper.name for wrapper in wrappers.values()}
    entries = [(name, value) for name, value in module.globals.items() if name not in added]
    module.globals.clear()
    for name, value in entries:
        value = wrappers.get(name, value)
        module.globals[value.name] = value
    # The wrappers are kept too: used there, their address counts as taken, so IPSCCP and dead
    # argument elimination leave their parameters alone. Otherwise a constant operand of every
    # call (pow(x, 1.5)) was dropped from the internal wrapper, whose variant attribute then no
    # longer matched its type: the verifier's "invalid name for a VFABI variant" and an LLVM
    # ERROR that aborted the process.
    kept = [*variants, *wrappers.values()]
    used_type = llvm_ir.ArrayType(llvm_ir.PointerType(), len(kept))
    used = llvm_ir.GlobalVariable(module, used_type, "llvm.compiler.used")
    used.linkage = "appending"
    used.section = "llvm.metadata"
    used.initializer = used_type(kept)


def _loop_property(module: llvm_ir.Module, name: str, value: int) -> llvm_ir.MDValue:
    return module.add_metadata(
        [llvm_ir.MetaDataString(module, name), llvm_ir.Constant(llvm_ir.IntType(32), value)]
    )


def _narrows_bf16_in_hardware(blocks: set[llvm_ir.Block]) -> bool:
    """Whether the loop of `blocks` rounds to bf16 in hardware (see
    `lower_bf16_hardware_narrowings`)."""
    return any(
        isinstance(instruction, llvm_ir.CastInstr) and isinstance(instruction.type, _BFloatType)
        for block in blocks
        for instruction in block.instructions
    )


def _calls_functions(blocks: set[llvm_ir.Block]) -> bool:
    """Whether the loop of `blocks` calls a function that is not an LLVM intrinsic (libm's
    under `math=libm`), which may keep LLVM from vectorizing it."""
    return any(
        isinstance(instruction, llvm_ir.CallInstr)
        and not instruction.callee.name.startswith("llvm.")
        for block in blocks
        for instruction in block.instructions
    )


def mark_loops(module: llvm_ir.Module, interleave: int | None = None) -> None:
    """Mark each innermost loop's memory accesses as free of loop-carried dependences, and give
    it an interleave count: `interleave`, or where None the one `interleave_count` chooses from
    its body's length (0: LLVM's choice).

    A head or remainder loop (`is_edge_loop`: what `ew-kernel-to-loops{store-alignment=...}`
    runs before the main loop and `{vector-bytes=...}` after it) is not interleaved, and where
    the host masks loads and stores of its element sizes (`HostCpu.masks`) vectorized with
    masks (`llvm.loop.vectorize.predicate.enable`): one masked vector iteration per vector of
    elements, where LLVM would run a vector epilogue and then scalar iterations (AVX2 has no
    masked 16-bit moves: there it stays a plain vector loop with its own epilogue). So is a
    loop over more arrays than `MAX_INTERLEAVED_ARRAYS`: its one masked loop replaces a vector
    loop, a vector epilogue and a scalar loop, each with all those addresses, which made most of
    its code generation time (the wide DAG of 10^4 ops of `benchmarks/compile_scaling.py`:
    LLVM's 10.8 CPU s became 5.5), and it runs as fast (that DAG at 10^3 ops on [256, 1024],
    [64, 1000] and [2, 1024] f32: 0.91-0.97x the time, same bits; at 10^4 ops on [64 or 16,
    1000 or 1024] and [2, 1024]: 0.87-1.10x, noisy; on [1000 or 200, 7], where the tail is
    most of each row, 0.48-0.53x).

    A loop that rounds to bf16 in hardware is vectorized as wide as the host's float vectors:
    LLVM 22's cost model prices `fptrunc` to `<16 x bfloat>` so high that it vectorized a plain
    f32 -> bf16 loop 4 wide (1.3 cycles an element in cache, against 0.3 at 16 wide), and the
    bf16 GELU 32 wide, with constants reloaded each iteration (docs/benchmarks.md); a long one
    is interleaved `NARROW_LONG_BODY_INTERLEAVE` times. Not where it calls a function (libm's
    `tanhf`): a width asks LLVM to vectorize, and where it cannot, LLVM printed a "loop not
    vectorized" remark on stderr at every compile."""
    for function in module.functions:
        for latch, blocks in _innermost_loops(function):
            group = _distinct_node(module, [])
            for block in blocks:
                for instruction in block.instructions:
                    if isinstance(instruction, llvm_ir.LoadInstr | llvm_ir.StoreInstr):
                        instruction.set_metadata("llvm.access.group", group)
            properties = [
                module.add_metadata(
                    [llvm_ir.MetaDataString(module, "llvm.loop.parallel_accesses"), group]
                )
            ]
            rounds_bf16 = _narrows_bf16_in_hardware(blocks)
            arrays = _accessed_arrays(blocks)
            count = (
                interleave_count(
                    sum(len(block.instructions) for block in blocks),
                    arrays,
                    narrow_at_float_lanes(blocks),
                )
                if interleave is None
                else interleave
            )
            edge = is_edge_loop(blocks)
            if edge:
                count = 1
            if (edge or arrays > MAX_INTERLEAVED_ARRAYS) and all(
                map(host_cpu().masks, _accessed_bytes(blocks))
            ):
                properties.append(_loop_flag(module, "llvm.loop.vectorize.predicate.enable"))
            if rounds_bf16 and not _calls_functions(blocks):
                properties.append(
                    _loop_property(module, "llvm.loop.vectorize.width", host_cpu().float_lanes)
                )
            if count:
                properties.append(_loop_property(module, "llvm.loop.interleave.count", count))
            loop_id = _distinct_node(module, [])
            loop_id.operands = (loop_id, *properties)
            latch.set_metadata("llvm.loop", loop_id)


def _hide_packed_functions(module: llvm_ir.Module) -> None:
    """Make each function that has a packed entry internal: callers use the entry, and where
    O3 inlines the function there (not a `@main` that calls kernels' functions, `optnone`:
    `_carry_function_attributes`), the function itself is dropped, not compiled twice."""
    names = {function.name for function in module.functions}
    for function in module.functions:
        if packed_entry_name(function.name) in names:
            function.linkage = "internal"


def _carry_function_attributes(module: ModuleOp, llvm_module: llvm_ir.Module) -> None:
    """Give the llvmlite functions the linkage of their `llvm.func`s, which xDSL's converter
    drops, and LLVM's `noinline` where they have `NO_INLINE`: each kernel's function (see
    `ew-kernel-to-loops`) stays a function of its own, so that LLVM optimizes one kernel at a
    time, not one function of all of them.

    A function that calls kernels' functions gets `optnone` (and `noinline`, which `optnone`
    needs): it only computes addresses in the workspace (integer arithmetic) and calls, once
    per kernel of a call of the program, so O3 gains nothing there, and O3 on it (the wide DAG
    of 10^4 ops of `benchmarks/compile_scaling.py`: 79 calls of ~50 arguments) took a third of
    LLVM's optimizer time. The kernels' optimized IR is the same either way."""
    from xdsl.dialects import llvm

    from xfuse.transforms.to_llvm import NO_INLINE

    functions = [f for f in module.ops if isinstance(f, llvm.FuncOp) and f.body.blocks]
    kernels = {f.sym_name.data for f in functions if NO_INLINE in f.attributes}
    for function in functions:
        converted = llvm_module.get_global(function.sym_name.data)
        if function.linkage.linkage.data != "external":
            converted.linkage = function.linkage.linkage.data
        if NO_INLINE in function.attributes:
            converted.attributes.add("noinline")
        elif kernels and any(
            isinstance(op, llvm.CallOp) and op.callee.string_value() in kernels
            for op in function.walk()
        ):
            converted.attributes.add("noinline")
            converted.attributes.add("optnone")


RSQRT14_WIDTHS = {True: (1, 4, 8, 16), False: (1, 16)}
"""The widths (lanes) `same_rsqrt_estimates` takes on an AVX-512 host, with AVX512VL or without
(its 128- and 256-bit estimates are VL's)."""


def raw_rsqrt_estimates(module: ModuleOp, llvm_module: llvm_ir.Module) -> None:
    """Give every function `RAW_RSQRT_ESTIMATES` where the module's only ops that let LLVM
    estimate (`arcp`, `afn`) are `approx.rsqrt`'s divisions (`RSQRT_ESTIMATE`): they refine
    the host's bare estimate themselves, and LLVM's own step before theirs was 4 more
    instructions a vector and two more constants to keep in registers (`x * rsqrt(y * y +
    0.001) * z` in cache took 0.9x the time without it, docs/benchmarks.md). An op of the
    program's own with either flag (a `fastmath` option) keeps LLVM's step for all of them:
    the attribute is a whole function's, and a function's code is inlined into others."""
    from xdsl.dialects import llvm

    estimating = {llvm.FastMathFlag.ALLOW_RECIP, llvm.FastMathFlag.APPROX_FUNC}
    marked = False
    for op in module.walk():
        flags = op.properties.get("fastmathFlags")
        if isinstance(flags, llvm.FastMathAttr) and flags.data & estimating:
            if RSQRT_ESTIMATE not in op.attributes:
                return
            marked = True
    if not marked:
        return
    for function in llvm_module.functions:
        if not function.is_declaration:
            function.attributes = FunctionAttributes(function.attributes)
            function.attributes.add(RAW_RSQRT_ESTIMATES)


STREAMING_ALIGNMENT = 64
"""The byte alignment a streaming twin's caller guarantees for every output (a cache line)."""


def streaming_name(name: str) -> str:
    """The symbol of `name`'s streaming twin (see `add_streaming_twins`)."""
    return f"{name}.streaming"


def add_streaming_twins(module: ModuleOp) -> list[str]:
    """Give the kernel function of a single-kernel program (a function with a packed entry that
    stores, in a module without a workspace) a twin `@<name>.streaming` with its own packed
    entry, whose stores bypass the cache (`mark_streaming_stores`, `streaming_stores`): for
    calls too large for the cache, on outputs aligned to `STREAMING_ALIGNMENT` (the runtime
    runs the unaligned head with the function itself). Returns the twins' names."""
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import StringAttr, SymbolRefAttr

    functions = {op.sym_name.data: op for op in module.ops if isinstance(op, llvm.FuncOp)}
    twins = []
    for name, function in list(functions.items()):
        packed = functions.get(packed_entry_name(name))
        if (
            packed is None
            or workspace_size_function(name) in functions
            or not any(isinstance(op, llvm.StoreOp) for op in function.walk())
        ):
            continue
        twin, twin_packed = function.clone(), packed.clone()
        twin.properties["sym_name"] = StringAttr(streaming_name(name))
        twin_packed.properties["sym_name"] = StringAttr(packed_entry_name(streaming_name(name)))
        for call in twin_packed.walk():
            if isinstance(call, llvm.CallOp) and call.callee == SymbolRefAttr(name):
                call.properties["callee"] = SymbolRefAttr(streaming_name(name))
        module.body.block.add_ops([twin, twin_packed])
        twins.append(streaming_name(name))
    return twins


def _stored_arguments(function: llvm_ir.Function) -> dict[int, int | None]:
    """The positions of the pointer arguments that `function` stores through, each with the
    bytes of the elements stored (None: of more than one size, or of a type `ELEMENT_BYTES`
    lacks)."""
    positions: dict[int, int | None] = {}
    for block in function.blocks:
        for instruction in block.instructions:
            if isinstance(instruction, llvm_ir.StoreInstr):
                pointer = instruction.operands[1]
                while isinstance(pointer, llvm_ir.GEPInstr):
                    pointer = pointer.pointer
                if isinstance(pointer, llvm_ir.Argument):
                    position = function.args.index(pointer)
                    size = ELEMENT_BYTES.get(str(instruction.operands[0].type))
                    previous = positions.get(position, size)
                    positions[position] = size if previous == size else None
    return positions


def mark_streaming_stores(module: llvm_ir.Module, twins: list[str], outputs: int) -> None:
    """Before O3: in each twin's packed entry, promise `STREAMING_ALIGNMENT` for the output
    pointers it loads (`!align`: LLVM then proves its vector stores aligned) and fence the
    non-temporal stores before returning (`sfence`: they are weakly ordered).

    The outputs are the last `outputs` pointer arguments, which the runtime aligns; a twin that
    stores through any other pointer gets no promise (its stores then stay normal ones). An
    output's sizes after its first (`?` axes past the outermost `?` one) are promised to be
    multiples of `STREAMING_ALIGNMENT` bytes in its elements (`llvm.assume`), which the runtime
    also ensures (`xfuse.runtime.call_plans.streaming_sizes`): then every row of a loop nest starts
    aligned, and LLVM proves the inner loop's vector stores so too."""
    if not twins:
        return
    alignment = module.add_metadata([llvm_ir.Constant(llvm_ir.IntType(64), STREAMING_ALIGNMENT)])
    sfence = llvm_ir.Function(
        module, llvm_ir.FunctionType(llvm_ir.VoidType(), []), "llvm.x86.sse.sfence"
    )
    for name in twins:
        function = module.get_global(name)
        pointers = [
            position
            for position, argument in enumerate(function.args)
            if isinstance(argument.type, llvm_ir.PointerType)
        ]
        stored = _stored_arguments(function)
        promised = stored if set(stored) <= set(pointers[len(pointers) - outputs :]) else {}
        entry = module.get_global(packed_entry_name(name))
        for block in entry.blocks:
            for instruction in list(block.instructions):
                if isinstance(instruction, llvm_ir.CallInstr) and instruction.callee.name == name:
                    builder = llvm_ir.IRBuilder(block)
                    builder.position_before(instruction)
                    for position, element_bytes in promised.items():
                        instruction.args[position].set_metadata("align", alignment)
                        sizes = itertools.takewhile(
                            lambda a: not isinstance(a.type, llvm_ir.PointerType),
                            instruction.args[position + 1 :],
                        )
                        for size in list(sizes)[1:] if element_bytes else []:
                            lines = STREAMING_ALIGNMENT // element_bytes
                            low_bits = builder.and_(size, size.type(lines - 1))
                            builder.assume(builder.icmp_unsigned("==", low_bits, size.type(0)))
            if isinstance(block.terminator, llvm_ir.Ret):
                builder = llvm_ir.IRBuilder(block)
                builder.position_before(block.terminator)
                builder.call(sfence, [])


def compile_llvm_dialect(
    module: ModuleOp,
    opt_level: int = 3,
    interleave: int | None = None,
    streaming_outputs: int = 0,
    libmvec: bool = False,
) -> NativeModule:
    """Translate an all-`llvm` xDSL module, optimize it (loop + SLP vectorization), JIT it.

    `interleave` is the loops' interleave count (see `mark_loops`; None: chosen per loop);
    `streaming_outputs` > 0 adds streaming twins (`add_streaming_twins`) on x86 hosts, for a
    program of one kernel whose last `streaming_outputs` pointer arguments are its outputs;
    `libmvec` lets vectorized loops call glibc's vector variants of libm calls
    (`call_libmvec`: `math=approx`; `math=libm` keeps the C library's scalar functions)."""
    backing, twins = optimize_llvm_dialect(
        module, opt_level, interleave, streaming_outputs, libmvec
    )
    return generate_code(backing, opt_level, twins)


def optimize_llvm_dialect(
    module: ModuleOp,
    opt_level: int = 3,
    interleave: int | None = None,
    streaming_outputs: int = 0,
    libmvec: bool = False,
) -> tuple[llvm_binding.ModuleRef, list[str]]:
    """The first half of `compile_llvm_dialect`: xDSL's translation and LLVM's optimizer; also
    the names of the streaming twins, whose stores `generate_code` makes non-temporal."""
    from xdsl.backend.llvm.convert import convert_module  # not needed to load cached code

    from xfuse.dialects import xdsl_patches  # (nor xDSL: a cache hit loads none)

    xdsl_patches.keep_llvm_nan_payloads()  # (a NaN constant's bits, as `-t llvm` prints)
    target_machine = optimizing_target_machine(opt_level)
    twins = (  # (stores become non-temporal in vector loops only)
        add_streaming_twins(module)
        if streaming_outputs
        and opt_level >= VECTORIZING_OPT_LEVEL
        and target_machine.triple.startswith("x86_64")
        else []
    )
    llvm_module = convert_module(
        module,
        fallback_target_triple=target_machine.triple,
        data_layout=str(target_machine.target_data),
    )
    lower_bf16_hardware_narrowings(llvm_module)
    mark_loops(llvm_module, interleave)
    _carry_function_attributes(module, llvm_module)
    raw_rsqrt_estimates(module, llvm_module)
    mark_streaming_stores(llvm_module, twins, streaming_outputs)
    _hide_packed_functions(llvm_module)
    if libmvec:
        call_libmvec(llvm_module, host_cpu())
    return optimize_llvm_ir(str(llvm_module), target_machine, opt_level), twins


def optimize_llvm_ir(
    llvm_ir: str, target_machine: llvm_binding.TargetMachine, opt_level: int
) -> llvm_binding.ModuleRef:
    """LLVM IR text parsed, set to `target_machine`'s triple and data layout, verified and
    optimized (`run_llvm_pipeline`)."""
    backing = llvm_binding.parse_assembly(llvm_ir)
    backing.triple = target_machine.triple
    backing.data_layout = str(target_machine.target_data)
    backing.verify()
    run_llvm_pipeline(backing, target_machine, opt_level)
    return backing


_MCJIT_OWN_SYMBOLS = frozenset(
    ("stat", "fstat", "lstat", "stat64", "fstat64", "lstat64", "atexit", "mknod")
)
"""The C library functions MCJIT resolves to its own copies on glibc, whose shared library lacks
some of them (`atexit` is in libc_nonshared.a; LLVM's
`RTDyldMemoryManager::getSymbolAddressInProcess`): the process's symbol table has no such name."""


def declared_symbols(llvm_ir: str) -> list[str]:
    """The functions (not LLVM's intrinsics, `llvm.*`) and then the variables that LLVM IR text
    declares, which the process must define: found by splitting the text at each declaration, as
    compiling regular expressions for them took ~2 ms of a new process's disk-cache hit
    (`xfuse.runtime.bound_calls.BOUND_CALL_IR`'s), and reading a compiled module's functions
    through llvmlite up to 0.4 ms of a compile (this: 0.04 ms)."""
    text = "\n" + llvm_ir  # each declaration starts a line, the first one too
    functions = [
        declared.split("@", 1)[1].split("(", 1)[0] for declared in text.split("\ndeclare ")[1:]
    ]
    variables = [
        line[1:]
        for linkage in (" = external ", " = extern_weak ")
        for before in text.split(linkage)[:-1]
        if (line := before.rsplit("\n", 1)[1]).startswith("@")
    ]
    names = [name.strip('"') for name in functions + variables]
    return [name for name in names if not name.startswith("llvm.")]


_ELF_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
"""An ELF64 section header: name, type, flags, address, offset, size, link (a symbol table's
string table), info, alignment, entry size."""
_ELF_SYMBOL = struct.Struct("<IBBHQQ")
"""An ELF64 symbol: name (an offset into its string table), info, other, section, value, size."""
_ELF64_LITTLE_ENDIAN = b"\x7fELF\x02\x01"
_SYMBOL_TABLE = 2  # SHT_SYMTAB
_UNDEFINED = 0  # SHN_UNDEF: in no section


def undefined_symbols(object_code: bytes) -> set[str] | None:
    """The names an ELF64 little-endian object file (what MCJIT generates on x86-64 Linux)
    refers to and does not define, from its symbol table: the functions and variables its IR
    declares and uses, and those the code generator calls on its own (`__truncsfbf2` for an
    `fptrunc` to bfloat without AVX512_BF16, `memset`); None for another format. Read from the
    bytes (~5 us; through llvmlite's `ObjectFileRef` sections ~90 us: Zen 4, 2026-12-03)."""
    if not object_code.startswith(_ELF64_LITTLE_ENDIAN):
        return None
    (table,) = struct.unpack_from("<Q", object_code, 0x28)
    entry_size, count = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [
        _ELF_SECTION_HEADER.unpack_from(object_code, table + index * entry_size)
        for index in range(count)
    ]
    names = set()
    for _, kind, _, _, offset, size, link, *_ in sections:
        if kind != _SYMBOL_TABLE:
            continue
        strings = sections[link][4]
        symbols = object_code[offset : offset + size]
        for name, _, _, section, _, _ in _ELF_SYMBOL.iter_unpack(symbols):
            if section == _UNDEFINED and name:  # the table's first entry has no name
                start = strings + name
                names.add(object_code[start : object_code.index(b"\0", start)].decode())
    return names


def referenced_symbols(object_code: bytes, llvm_ir: str) -> Iterable[str]:
    """What the object code of `llvm_ir` needs the process to define: its undefined symbols
    (`undefined_symbols`), or where it is not ELF, the functions and variables `llvm_ir`
    declares (`declared_symbols`: not the code generator's own calls)."""
    undefined = undefined_symbols(object_code)
    return declared_symbols(llvm_ir) if undefined is None else undefined


class UnresolvedSymbolsError(ValueError):
    """CPU code refers to names that neither it nor this process defines: MCJIT cannot link it
    (`_check_symbols_resolve`)."""


def _check_symbols_resolve(names: Iterable[str]) -> None:
    """UnresolvedSymbolsError (a ValueError) naming those of `names` (what a module's code
    refers to, `referenced_symbols`) that neither this process (as MCJIT sees it once an engine
    exists: the process itself, the libraries loaded for it such as libmvec, the symbols added
    to it) nor MCJIT itself defines. MCJIT reports none: it links such a reference to address
    0, and a call through it crashed the process (a segfault); a weak one too, as one unresolved
    name left the module's other references (`expf`) at 0 as well. Checked once MCJIT has
    linked the code (its JIT code model's 64-bit addresses take a 0), which calls nothing: an
    engine that fails the check is dropped uncalled."""
    unresolved = sorted(
        name
        for name in names
        if name not in _MCJIT_OWN_SYMBOLS and llvm_binding.address_of_symbol(name) is None
    )
    if not unresolved:
        return
    listed = ", ".join(f"'{name}'" for name in unresolved)
    message = (
        f"the CPU code uses {listed}, which neither it nor this process defines (the JIT "
        f"cannot link {'it' if len(unresolved) == 1 else 'them'})"
    )
    if libdevice := [name for name in unresolved if name.startswith(FUNCTION_PREFIX)]:
        message += (
            f"; NVIDIA's libdevice ({', '.join(libdevice)}) exists only on the GPU "
            "(ew-expand-math{library=libdevice} is the GPU pipeline's; the CPU's is library=libm)"
        )
    raise UnresolvedSymbolsError(message)


def compile_llvm_ir(
    llvm_ir: str, opt_level: int = 3, codegen_level: int | None = None
) -> NativeModule:
    """LLVM IR made elsewhere (upstream MLIR's `mlir-translate`, a benchmark's hand-written
    loop) through the same optimizer and JIT as xfuse's own; `codegen_level`: the code
    generator's level where it differs from the optimizer's."""
    machine = optimizing_target_machine(opt_level)
    backing = optimize_llvm_ir(llvm_ir, machine, opt_level)
    return generate_code(backing, opt_level if codegen_level is None else codegen_level)


VECTORIZING_OPT_LEVEL = 2
"""The lowest `opt_level` at which LLVM's loop and SLP vectorizers run (`run_llvm_pipeline`):
below it a loop has no vector store for a streaming twin to make non-temporal."""


def run_llvm_pipeline(
    module: llvm_binding.ModuleRef, target_machine: llvm_binding.TargetMachine, opt_level: int
) -> None:
    """LLVM's `default<O{opt_level}>` pipeline on `module` for `target_machine`, with the loop
    and SLP vectorizers from O2 on, then LLVM's always-inliner: the vectorizer calls a vector
    function such as `own_sine` (xfuse's f32 sin) in the loop only once O3's own inliner has
    run, and there it would cost a call a vector and the loop's registers around it."""
    options = llvm_binding.PipelineTuningOptions(speed_level=opt_level)
    options.loop_vectorization = opt_level >= VECTORIZING_OPT_LEVEL
    options.slp_vectorization = opt_level >= VECTORIZING_OPT_LEVEL
    with (
        options,
        llvm_binding.create_pass_builder(target_machine, options) as pass_builder,
        pass_builder.getModulePassManager() as module_pass_manager,
    ):
        module_pass_manager.run(module, pass_builder)
        with llvm_binding.create_new_module_pass_manager() as inliner:
            inliner.add_always_inliner_pass()
            inliner.run(module, pass_builder)


def _eliminate_dead_code(module: llvm_binding.ModuleRef, opt_level: int) -> None:
    """LLVM's dead code elimination on every function of `module` (what `pair_bf16_parts`
    replaced, so that `NativeModule.optimized_ir` shows the code that runs)."""
    options = llvm_binding.PipelineTuningOptions(speed_level=opt_level)
    with (
        options,
        llvm_binding.create_pass_builder(optimizing_target_machine(opt_level), options) as builder,
        llvm_binding.create_new_function_pass_manager() as passes,
    ):
        passes.add_dead_code_elimination_pass()
        for function in module.functions:
            if not function.is_declaration:
                passes.run(function, builder)


def generate_code(
    backing: llvm_binding.ModuleRef, opt_level: int = 3, twins: Sequence[str] = ()
) -> NativeModule:
    """The second half of `compile_llvm_dialect`: code generation and linking by MCJIT (after
    pairing the parts of bf16 loops, `pair_bf16_parts`, taking rounded remainders in one op
    and GELU's exp2 unclamped where the host has the ops, `reduce_rounded_remainders` and
    `saturate_exp2s`, AVX-512's rsqrt estimate at every width, `same_rsqrt_estimates`,
    prefetching in compute-heavy loops where the host gains by it,
    `prefetch_loads`, and marking the stores of `twins`, see `streaming_stores`)."""
    optimized_ir = str(backing)
    rewritten = pair_bf16_parts(optimized_ir)
    if host_cpu().reduces_remainders:
        rewritten = saturate_exp2s(reduce_rounded_remainders(rewritten))
    if host_cpu().has("avx512f"):
        rewritten = same_rsqrt_estimates(rewritten, RSQRT14_WIDTHS[host_cpu().has("avx512vl")])
    if host_cpu().prefetches:
        rewritten = prefetch_loads(rewritten, host_cpu().prefetch_distance)
    if rewritten != optimized_ir:
        backing = llvm_binding.parse_assembly(rewritten)
        _eliminate_dead_code(backing, opt_level)
        optimized_ir = str(backing)
    if twins:
        optimized_ir = streaming_stores(optimized_ir, twins)
        backing = llvm_binding.parse_assembly(optimized_ir)
    engine = llvm_binding.create_mcjit_compiler(backing, host_target_machine(opt_level))
    objects: list[bytes] = []
    # MCJIT hands each object file it generates to the cache's notify function: keep it.
    engine.set_object_cache(lambda _module, code: objects.append(bytes(code)), lambda _: None)
    engine.finalize_object()
    object_code = b"".join(objects)
    _check_symbols_resolve(referenced_symbols(object_code, optimized_ir))
    return NativeModule(optimized_ir, opt_level, object_code, engine)


def load_object_code(object_code: bytes, optimized_ir: str, opt_level: int) -> NativeModule:
    """A `NativeModule` from the object code of an earlier `compile_llvm_dialect` on this host:
    MCJIT links it as it is, with no optimization and no code generation.

    The engine needs a module; its object cache hands MCJIT `object_code` as that empty module's
    object, so MCJIT does not run its code generator even on the empty module (adding the object
    with `add_object_file` did, and that took half of a cached compile). With no code to generate,
    the engine's TargetMachine is never used for code generation: a generic one for the process's
    triple is made in a tenth of the time of one for the host CPU's name and features. Code
    that calls libmvec (`call_libmvec`, its symbols named `_ZGV...`) loads it first, for MCJIT
    to link (0.3 ms, which other code does not pay). UnresolvedSymbolsError where the code
    refers to a name this process does not define (the process that compiled it had it)."""
    if b"_ZGV" in object_code:
        libmvec_loaded()
    engine = llvm_binding.create_mcjit_compiler(
        llvm_binding.parse_assembly(""), _process_target().create_target_machine(jit=True)
    )
    engine.set_object_cache(getbuffer_func=lambda _module: object_code)
    engine.finalize_object()
    _check_symbols_resolve(referenced_symbols(object_code, optimized_ir))
    return NativeModule(optimized_ir, opt_level, object_code, engine)
