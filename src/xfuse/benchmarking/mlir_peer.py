"""Upstream MLIR as a peer compiler: xfuse's fused IR, compiled by `mlir-opt` instead of by xfuse.

`compile_with_mlir(module)` takes a module after `ew-fuse` (tensor-form `ew.kernel`s in
`func.func @main`), exports it with `ew-to-linalg`, turns `@main` into destination-passing style
(one extra memref argument per result, filled by `bufferization.materialize_in_destination`), and
runs upstream MLIR's own pipeline on it:

    linalg-fuse-elementwise-ops, eliminate-empty-tensors, one-shot-bufferize (function
    boundaries), buffer-deallocation-pipeline, convert-linalg-to-loops, then to the llvm dialect
    and `mlir-translate --mlir-to-llvmir`

The LLVM IR goes through xfuse's own optimizer and JIT (`xfuse.codegen.native.compile_llvm_ir`:
O3 with loop and SLP vectorization, MCJIT), and a call is checked by the runtime's argument checks,
so numbers differ from xfuse's own kernels only by what the two compilers generate. Transcendentals
go one of two ways (`math=`):
- "libm": `math.tanh` becomes the `llvm.tanh` intrinsic, `math.erf` a call to `erff` (and
  `math.expm1` and `math.log1p` calls to `expm1f` and `log1pf`: `call_libm`); exact to libm,
  but the calls keep loops scalar (GELU, 2^24 f32: ~300 ms here).
- "polynomial": upstream's polynomial approximations (tanh, erf, exp, log, ...), which mlir-opt
  exposes only as `--test-math-polynomial-approximation`; plain arithmetic that vectorizes
  (~1e-6 error; the same GELU ~13 ms).

Tools are looked up on PATH, then in `/usr/lib/llvm-22/bin` (Debian's `mlir-22-tools`).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, bufferization, func
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    Float64Type,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Attribute
from xdsl.rewriter import InsertPoint, Rewriter

from xfuse.codegen.native import compile_llvm_ir, host_cpu
from xfuse.runtime import arrays
from xfuse.runtime.compiler import signature
from xfuse.transforms.expand_math import libm_name
from xfuse.transforms.pipeline import only_function
from xfuse.transforms.to_linalg import EwToLinalgPass

TOOL_DIRECTORIES = ("/usr/lib/llvm-22/bin",)
"""Where to look for mlir-opt and mlir-translate when they are not on PATH."""

MathLowering = Literal["libm", "polynomial"]

_BUFFERIZE: tuple[str, ...] = (
    "--linalg-fuse-elementwise-ops",
    "--eliminate-empty-tensors",
    "--one-shot-bufferize=bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map",
    "--buffer-deallocation-pipeline",
    "--convert-linalg-to-loops",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
)
_TO_LLVM: tuple[str, ...] = (
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    # f32 -> bf16 in integer arithmetic: LLVM's `fptrunc` to bfloat is `vcvtneps2bf16` on an
    # AVX512-BF16 host, which flushes subnormals to zero (xfuse's own lowering fixes them up:
    # `xfuse.transforms.to_llvm`)
    "--arith-expand=include-bf16=true",
    "--finalize-memref-to-llvm",
    "--convert-arith-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
)


def upstream_pipeline(math: MathLowering = "libm") -> tuple[str, ...]:
    """mlir-opt's arguments from the exported linalg module to the llvm dialect."""
    approximate = ("--test-math-polynomial-approximation",) if math == "polynomial" else ()
    return (*_BUFFERIZE, *approximate, *_TO_LLVM)


_NEAR_ZERO_FUNCTIONS = (math_dialect.ExpM1Op, math_dialect.Log1pOp)
"""The `math` ops `--convert-math-to-llvm` computes from another function, exp(x) - 1 and
log(1 + x), which lose every digit near 0 (softplus(-20) was 0 in f32): `call_libm` calls the
C library for them before. (`--convert-math-to-libm` first would, but it refuses
`math.copysign`.)"""


def call_libm(module: ModuleOp) -> None:
    """Replace `module`'s `_NEAR_ZERO_FUNCTIONS` with calls to the C library's (`expm1f`, ...),
    declared in it."""
    declared: set[str] = set()
    for op in list(module.walk()):
        type_ = op.results[0].type if isinstance(op, _NEAR_ZERO_FUNCTIONS) else None
        if not isinstance(type_, Float32Type | Float64Type):  # (the C library's types only)
            continue
        name = libm_name(op, type_)
        if name not in declared:
            declared.add(name)
            module.body.block.add_op(func.FuncOp.external(name, [type_], [type_]))
        Rewriter.replace_op(op, func.CallOp(name, list(op.operands), [type_]))


class MlirToolsMissing(RuntimeError):
    """mlir-opt or mlir-translate cannot be found."""


class MlirPeerError(RuntimeError):
    """Upstream MLIR rejected the exported module, or its code could not be loaded."""


def find_mlir_tool(name: str) -> str | None:
    """The path of an upstream MLIR tool (`mlir-opt`, `mlir-translate`), or None."""
    found = shutil.which(name)
    if found is not None:
        return found
    for directory in TOOL_DIRECTORIES:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _run_tool(name: str, arguments: Sequence[str], source: str) -> str:
    tool = find_mlir_tool(name)
    if tool is None:
        raise MlirToolsMissing(
            f"{name} not found on PATH or in {', '.join(TOOL_DIRECTORIES)}: install Debian's "
            "mlir-22-tools (apt-get install mlir-22-tools) to use upstream MLIR as a peer"
        )
    completed = subprocess.run(
        [tool, *arguments], input=source, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:  # (what it said first on the message's first line: a
        # skipped peer's reason in `xfuse bench` is that line)
        said = [line for line in completed.stderr.splitlines() if line.strip()]
        first = said[0] if said else f"exit status {completed.returncode}"
        raise MlirPeerError(
            f"{name} failed: {first} (arguments: {' '.join(arguments)})\n{completed.stderr}"
        )
    return completed.stdout


def to_destination_passing(function: func.FuncOp) -> None:
    """Give `function` one memref argument per tensor result and write each result into it."""
    return_op = function.body.block.last_op
    assert isinstance(return_op, func.ReturnOp)
    for value in return_op.arguments:
        type_ = cast(TensorType[Attribute], value.type)
        destination = function.body.block.insert_arg(
            MemRefType(type_.element_type, type_.get_shape()), len(function.body.block.args)
        )
        destination.name_hint = "out"
        Rewriter.insert_op(
            bufferization.MaterializeInDestinationOp(
                operands=[value, destination],
                properties={"restrict": UnitAttr(), "writable": UnitAttr()},
                result_types=[[]],
            ),
            InsertPoint.before(return_op),
        )
    Rewriter.replace_op(return_op, func.ReturnOp())
    function.update_function_type()
    # xfuse's argument attributes (`ew.dims`) name the inputs only: a function whose arguments
    # outnumber them does not print its signature right, and upstream needs none of them.
    function.arg_attrs = None


UPSTREAM_ENTRY = "_xfuse_upstream_entry"
"""The name of the function upstream compiles: never a C library function's (a function named
`tanhf` called itself where its `math.tanh` became a call of `tanhf`)."""


def signed_zero_ties(module: ModuleOp) -> None:
    """`arith.maximumf` and `minimumf` of equal operands as the AND (max) or OR (min) of their
    bits, +0 above -0 in either order as upstream defines them: `--arith-expand`, which the
    peer runs for bf16's rounding, expands them to a compare and select that returns the second
    of two zeros (xfuse's IEEE 754-2019 `maximum` and `minimum` did not agree)."""
    for op in list(module.walk()):
        if not isinstance(op, arith.MaximumfOp | arith.MinimumfOp):
            continue
        lhs, rhs = op.operands
        type_ = cast(AnyFloat, op.result.type)
        bits_type = IntegerType(type_.bitwidth)
        lhs_bits, rhs_bits = arith.BitcastOp(lhs, bits_type), arith.BitcastOp(rhs, bits_type)
        combine = arith.AndIOp if isinstance(op, arith.MaximumfOp) else arith.OrIOp
        combined = combine(lhs_bits, rhs_bits)
        tie = arith.BitcastOp(combined, type_)
        equal = arith.CmpfOp(lhs, rhs, "oeq")
        kept = type(op)(lhs, rhs)
        chosen = arith.SelectOp(equal, tie, kept)
        Rewriter.replace_op(
            op, [lhs_bits, rhs_bits, combined, tie, equal, kept, chosen], [chosen.result]
        )


def upstream_llvm_ir(module: ModuleOp, math: MathLowering = "libm") -> str:
    """The LLVM IR upstream MLIR makes of the one function of `module` (after `ew-fuse`), in
    destination-passing style, as `UPSTREAM_ENTRY`."""
    function = only_function(module).clone()
    function.sym_name = StringAttr(UPSTREAM_ENTRY)
    exported = ModuleOp([function])
    EwToLinalgPass().apply(Context(), exported)
    signed_zero_ties(exported)
    to_destination_passing(function)
    if math == "libm":
        call_libm(exported)
    lowered = _run_tool("mlir-opt", upstream_pipeline(math), str(exported))
    return _run_tool("mlir-translate", ["--mlir-to-llvmir"], lowered)


_BF16_ROUNDING = re.compile(r"fptrunc (?:<\d+ x )?(double|float)>? .* to (?:<\d+ x )?bfloat")


def check_runnable(llvm_ir: str) -> None:
    """MlirPeerError where upstream's code rounds to bf16 through a compiler-rt function that
    MCJIT does not resolve (the call would jump to address 0): `__truncdfbf2` from f64 always,
    `__truncsfbf2` from f32 where the host has no AVX512-BF16 instruction for it (what
    `HostCpu.rounds_bf16` says). xfuse's own lowering rounds in integer code there."""
    for source in {match.group(1) for match in _BF16_ROUNDING.finditer(llvm_ir)}:
        if source == "double" or not host_cpu().rounds_bf16:
            helper = "__truncdfbf2" if source == "double" else "__truncsfbf2"
            raise MlirPeerError(
                f"upstream's code rounds {source} to bf16 by calling compiler-rt's {helper}, "
                "which the JIT cannot resolve on this host"
            )


def _memref_arguments(array: np.ndarray) -> list[Any]:
    """The expanded memref descriptor: allocated, aligned, offset, sizes..., strides..."""
    pointer = ctypes.c_void_p(arrays.data_pointer(array))
    strides = [stride // array.itemsize for stride in array.strides]
    return [pointer, pointer, 0, *array.shape, *strides]


def _memref_ctypes(rank: int) -> list[Any]:
    return [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * (1 + 2 * rank)


class MlirKernel:
    """The one function of a module, compiled by upstream MLIR; called like an `xfuse.Kernel`.

    `kernel(x, b, r)` or `kernel(x=..., b=..., r=...)`, `out=` as for a kernel (an array, a
    list/tuple or a name->array mapping); returns the result array, or a tuple of them for several
    results. The arguments are checked by the runtime's checks (`xfuse.runtime.arrays`), with the
    same messages; the code is JIT-compiled by xfuse's (`xfuse.codegen.native.compile_llvm_ir`).
    """

    def __init__(
        self,
        module: ModuleOp,
        math: MathLowering = "libm",
        output_names: Sequence[str] | None = None,
    ):
        self.inputs, self.outputs = signature(module, output_names)
        self.llvm_ir = upstream_llvm_ir(module, math)
        check_runnable(self.llvm_ir)
        self._native = compile_llvm_ir(self.llvm_ir)  # keeps the code alive
        ranks = [len(p.shape) for p in (*self.inputs, *self.outputs)]
        argument_types = [t for rank in ranks for t in _memref_ctypes(rank)]
        address = self._native.address(UPSTREAM_ENTRY)
        self._entry: Callable[..., None] = ctypes.CFUNCTYPE(None, *argument_types)(address)
        self._names = [p.name for p in (*self.inputs, *self.outputs)]
        self.call_signature = arrays.CallSignature([p.name for p in self.inputs])
        self.__signature__ = self.call_signature.signature

    def __call__(self, /, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        given = self.call_signature.bind(args, kwargs)
        inputs = [arrays.check_input(p, given[p.name]) for p in self.inputs]
        input_shapes = [array.shape for array in inputs]
        iteration = arrays.bind_shapes(self.inputs, input_shapes, self.outputs)
        shapes = [arrays.output_shape(p, iteration) for p in self.outputs]
        outputs = arrays.bind_outputs(self.outputs, out, shapes)
        checked = [*inputs, *outputs]
        # The destinations are `restrict`: upstream's code may assume they alias no input.
        arrays.check_aliasing(
            self._names,
            checked,
            [arrays.data_pointer(array) for array in checked],
            len(inputs),
            in_place_allowed=False,
            in_place_refusal="upstream MLIR's code assumes that outputs alias no input",
        )
        self._entry(*(a for array in checked for a in _memref_arguments(array)))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def compile_with_mlir(
    module: ModuleOp, math: MathLowering = "libm", output_names: Sequence[str] | None = None
) -> MlirKernel:
    """Compile `module` (after `ew-fuse`) with upstream MLIR; raises MlirToolsMissing without it.
    Its outputs are named as `xfuse.runtime.compiler.compile_module` names them (`output_names`,
    the program's: a constant output `k` was `out1` without them)."""
    return MlirKernel(module, math, output_names)
