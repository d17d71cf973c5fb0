"""`xfuse.compile`'s pipeline, spelled once: `default_pipeline` builds it from the pass classes;
the compile driver, the cost driver, the docs generator and the tests take it from here, and
`xfuse-opt -p xfuse-default` runs it (`XfuseDefaultPass`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from xfuse.transforms.bufferize import EwBufferizePass
from xfuse.transforms.expand_math import EwExpandMathPass
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.kernel_to_loops import EwKernelToLoopsPass
from xfuse.transforms.optimize import EwOptimizePass
from xfuse.transforms.options import (
    CpuMath,
    GpuMath,
    Math,
    PassOptionError,
    Target,
    expected_values,
    is_cpu_math,
    is_gpu_math,
)
from xfuse.transforms.to_llvm import EwToLlvmPass
from xfuse.transforms.to_nvvm import EwToNvvmPass
from xfuse.transforms.workspace import EwWorkspacePass

REMAINDER_VECTOR_BYTES = 64
"""`ew-kernel-to-loops`'s `vector-bytes`: the widest x86 vectors (AVX-512), on every host, so
that the pipeline's output stays host-independent. A main-loop block is then 4 vectors with
AVX-512 and 8 with AVX2, and the masked remainder loop up to 4 or 8 vectors (measured alike on
AVX2: docs/benchmarks.md). For the kernels of bf16 arrays only (`bf16-only`), but with
`masked_remainder`: for every kernel it made compiles ~20% slower, and the test suite ~30 s,
for up to ~200 ns per call; a bf16 kernel's last elements took up to ~0.7 us without it."""


STORE_ALIGNMENT = 64
"""`ew-kernel-to-loops`'s `store-alignment`: a cache line, which AVX-512's stores fill and two
of AVX2's, on every host (the pipeline's output stays host-independent)."""


def default_pipeline(
    *,
    fuse: bool = True,
    reuse: bool = True,
    math: Math = "approx",
    fastmath: str = "none",
    f16c: bool = False,
    avx512bf16: bool = False,
    ldexp: bool = False,
    target: Target = "cpu",
    masked_remainder: bool = False,
    aligned_stores: bool = True,
    extra: Sequence[ModulePass] = (),
) -> tuple[ModulePass, ...]:
    """The passes from the frontend's `ew` ops on tensors to the `llvm` dialect, in order.

    `extra` runs right after `ew-optimize`; `math` is `ew-expand-math`'s (`target="cpu"`) or
    `ew-to-nvvm`'s (`target="cuda"`: kernels outlined for the GPU instead of looped on the host).
    """
    tensor_passes = (
        EwOptimizePass(),
        *extra,
        EwFusePass(mode="greedy" if fuse else "none", math=math if is_cpu_math(math) else "approx"),
        EwBufferizePass(reuse=reuse),
    )
    if target == "cuda":
        if not is_gpu_math(math):  # the CPU's libm
            raise PassOptionError(EwToNvvmPass.name, "math", math, expected_values(GpuMath))
        return (
            *tensor_passes,
            EwToNvvmPass(math=math),
            EwExpandMathPass(math="approx", fastmath=fastmath, library="libdevice"),
            EwToLlvmPass(packed=False),
        )
    if not is_cpu_math(math):  # the GPU's ptx-approx
        raise PassOptionError(EwExpandMathPass.name, "math", math, expected_values(CpuMath))
    return (
        *tensor_passes,
        EwWorkspacePass(),
        EwKernelToLoopsPass(
            vector_bytes=REMAINDER_VECTOR_BYTES,
            bf16_only=not masked_remainder,
            store_alignment=STORE_ALIGNMENT if aligned_stores else 0,
        ),
        # The flags go on the program's ops before the approximations are expanded (which keep
        # their own), not on every op in ew-to-llvm.
        EwExpandMathPass(math=math, ldexp=ldexp, fastmath=fastmath),
        EwToLlvmPass(f16c=f16c, avx512bf16=avx512bf16),
    )


def split_after(
    passes: Sequence[ModulePass], name: str
) -> tuple[tuple[ModulePass, ...], tuple[ModulePass, ...]]:
    """`passes` up to and including the first named `name`, and the rest (split after
    `"ew-bufferize"`: the passes on tensors, and those on buffers)."""
    end = [p.name for p in passes].index(name) + 1
    return tuple(passes[:end]), tuple(passes[end:])


@dataclass(frozen=True)
class XfuseDefaultPass(ModulePass):
    """`xfuse.compile`'s whole CPU pipeline, `ew-optimize` to `ew-to-llvm` (`default_pipeline`).

    Its options are `xfuse.compile`'s; the output is host-independent (`f16c`, `avx512bf16` and
    `ldexp` off unless asked).
    """

    name = "xfuse-default"

    fuse: bool = True
    """Fuse (`ew-fuse{mode=greedy}`), or one kernel per op (`mode=none`)."""

    reuse: bool = True
    """`ew-bufferize`'s buffer reuse and in-place writes."""

    math: CpuMath = "approx"
    """`ew-expand-math`'s: vectorizable approximations, or calls to the C library."""

    fastmath: str = "none"
    """`ew-expand-math`'s fast-math flags for the program's own arithmetic ("contract": FMAs,
    unsafe)."""

    f16c: bool = False
    """`ew-to-llvm`'s f16 conversions in one instruction (x86 with F16C)."""

    avx512bf16: bool = False
    """`ew-to-llvm`'s f32 -> bf16 rounding in hardware (x86 with AVX512_BF16; for xfuse's own
    code generation only, see `EwToLlvmPass.avx512bf16`)."""

    ldexp: bool = False
    """`ew-expand-math`'s exp scaling by `llvm.ldexp` (x86 with AVX-512, see
    `EwExpandMathPass.ldexp`)."""

    masked_remainder: bool = False
    """`ew-kernel-to-loops{vector-bytes=64}`: the last elements in a masked vector loop (without
    it, `bf16-only`: in the kernels of bf16 arrays alone)."""
    aligned_stores: bool = True
    """`ew-kernel-to-loops{store-alignment=64}`: a loop bound by its loads and stores first runs
    the elements before its first output's first 64-byte boundary (without it, no such head)."""

    def __post_init__(self) -> None:
        # Its passes check the options they are given (`math`, `fastmath`): named as its own.
        try:
            self.passes()
        except PassOptionError as error:
            raise PassOptionError(self.name, error.option, error.value, error.expected) from None

    def passes(self) -> tuple[ModulePass, ...]:
        """The pipeline it runs, made from its options."""
        return default_pipeline(
            fuse=self.fuse,
            reuse=self.reuse,
            math=self.math,
            fastmath=self.fastmath,
            f16c=self.f16c,
            avx512bf16=self.avx512bf16,
            ldexp=self.ldexp,
            masked_remainder=self.masked_remainder,
            aligned_stores=self.aligned_stores,
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PassPipeline(self.passes()).apply(ctx, op)
