"""Upstream MLIR as a peer compiler: xfuse's fused IR, compiled by `mlir-opt` instead of by xfuse.

`compile_with_mlir(module)` takes a module after `ew-fuse` (tensor-form `ew.kernel`s in
`func.func @main`), exports it with `ew-to-linalg`, turns `@main` into destination-passing style
(one extra memref argument per result, filled by `bufferization.materialize_in_destination`), and
runs upstream MLIR's own pipeline on it:

    linalg-fuse-elementwise-ops, eliminate-empty-tensors, one-shot-bufferize (function
    boundaries), buffer-deallocation-pipeline, convert-linalg-to-loops, then to the llvm dialect
    and `mlir-translate --mlir-to-llvmir`

The LLVM IR is optimised by llvmlite (O3 with loop and SLP vectorization) and run by MCJIT, so
numbers differ from xfuse's own kernels only by what the two compilers generate. Transcendentals
go one of two ways (`math=`):
- "libm": `math.tanh` becomes the `llvm.tanh` intrinsic, `math.erf` a call to `erff`; exact to
  libm, but the calls keep loops scalar (GELU, 2^24 f32: ~300 ms here).
- "polynomial": upstream's polynomial approximations (tanh, erf, exp, log, ...), which mlir-opt
  exposes only as `--test-math-polynomial-approximation`; plain arithmetic that vectorizes
  (~1e-6 error; the same GELU ~13 ms).

Tools are looked up on PATH, then in `/usr/lib/llvm-22/bin` (Debian's `mlir-22-tools`).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import llvmlite.binding as llvm
import numpy as np
from xdsl.context import Context
from xdsl.dialects import bufferization, func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    MemRefType,
    ModuleOp,
    ShapedType,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from xfuse.codegen.native import host_target_machine, run_llvm_pipeline
from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of
from xfuse.runtime.arrays import ArgumentError, ArgumentTypeError, bind_arguments
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
    if completed.returncode != 0:
        raise MlirPeerError(f"{name} {' '.join(arguments)} failed:\n{completed.stderr}")
    return completed.stdout


def _function_named(module: ModuleOp, function_name: str) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == function_name:
            return op
    raise MlirPeerError(f"the module has no function @{function_name}")


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


def upstream_llvm_ir(
    module: ModuleOp, function_name: str = "main", math: MathLowering = "libm"
) -> str:
    """The LLVM IR upstream MLIR makes of one function of `module` (after `ew-fuse`), in
    destination-passing style."""
    function = _function_named(module, function_name).clone()
    exported = ModuleOp([function])
    EwToLinalgPass().apply(Context(), exported)
    to_destination_passing(function)
    lowered = _run_tool("mlir-opt", upstream_pipeline(math), str(exported))
    return _run_tool("mlir-translate", ["--mlir-to-llvmir"], lowered)


def _describe(value: SSAValue | None) -> str:
    if value is None:
        return "the declared type"
    if isinstance(value, BlockArgument):
        return f"argument '{value.name_hint or value.index}'"
    return f"intermediate %{value.name_hint}" if value.name_hint else "an intermediate value"


def bind_shapes(
    function: func.FuncOp, shapes: Mapping[SSAValue, tuple[int, ...]]
) -> dict[SSAValue, tuple[int, ...]]:
    """Run-time shapes of every tensor value of `function`, from those of its arguments.

    Every op of a fused function (kernels, elementwise ops, constants) broadcasts its operands
    to its result: a dimension whose type says 1 (or that is missing) stretches, every other
    one must equal the rest. Raises ValueError on a mismatch, naming the values involved.
    """
    bound = dict(shapes)
    for op in function.body.block.ops:
        for result in op.results:
            if not isinstance(result.type, ShapedType):
                continue
            result_shape = tuple(result.type.get_shape())
            sizes = [None if size == DYNAMIC_INDEX else size for size in result_shape]
            origins: list[SSAValue | None] = [None] * len(result_shape)
            for operand in op.operands:
                declared_shape = cast(ShapedType, operand.type).get_shape()
                leading = len(result_shape) - len(declared_shape)
                for axis, (declared, actual) in enumerate(
                    zip(declared_shape, bound[operand], strict=True), start=leading
                ):
                    if declared == 1:
                        continue
                    if sizes[axis] is None:
                        sizes[axis], origins[axis] = actual, operand
                    elif sizes[axis] != actual:
                        raise ValueError(
                            f"{_describe(operand)} has size {actual} along axis {axis} where "
                            f"{_describe(origins[axis])} has {sizes[axis]} (in '{op.name}'; "
                            "'?' dimensions do not broadcast)"
                        )
            bound[result] = tuple(1 if size is None else size for size in sizes)
    return bound


def _memref_arguments(array: np.ndarray) -> list[Any]:
    """The expanded memref descriptor: allocated, aligned, offset, sizes..., strides..."""
    pointer = ctypes.c_void_p(array.ctypes.data)
    strides = [stride // array.itemsize for stride in array.strides]
    return [pointer, pointer, 0, *array.shape, *strides]


def _memref_ctypes(rank: int) -> list[Any]:
    return [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * (1 + 2 * rank)


def _jit(llvm_ir: str, symbol: str) -> tuple[llvm.ExecutionEngine, int]:
    # MCJIT takes ownership of the target machine: a fresh one per engine.
    machine = host_target_machine(opt_level=3)
    module = llvm.parse_assembly(llvm_ir)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    run_llvm_pipeline(module, machine, opt_level=3)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    address = engine.get_function_address(symbol)
    if not address:
        raise MlirPeerError(f"no function @{symbol} in the LLVM IR from mlir-translate")
    return engine, address


@dataclass(frozen=True)
class _Parameter:
    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


def _parameter(value: SSAValue, fallback_name: str) -> _Parameter:
    type_ = cast(ShapedType, value.type)
    return _Parameter(
        value.name_hint or fallback_name,
        np.dtype(dtype_of(ew.element_type(type_))),
        tuple(type_.get_shape()),
    )


class MlirKernel:
    """A function compiled by upstream MLIR; call it with numpy arrays like the xfuse function.

    `kernel(x, b, r)` or `kernel(x=..., b=..., r=...)`; `out=` takes one preallocated
    C-contiguous array per result (not sharing memory with an input). Returns the result array,
    or a tuple of them for several results.
    """

    def __init__(self, module: ModuleOp, function_name: str = "main", math: MathLowering = "libm"):
        self._function = _function_named(module, function_name).clone()
        self.inputs = [
            _parameter(arg, f"arg{index}") for index, arg in enumerate(self._function.args)
        ]
        return_op = self._function.body.block.last_op
        assert isinstance(return_op, func.ReturnOp)
        self.outputs = [
            _parameter(value, f"result{index}") for index, value in enumerate(return_op.arguments)
        ]
        self.llvm_ir = upstream_llvm_ir(module, function_name, math)
        self._engine, address = _jit(self.llvm_ir, function_name)
        ranks = [len(p.shape) for p in (*self.inputs, *self.outputs)]
        argument_types = [t for rank in ranks for t in _memref_ctypes(rank)]
        self._entry: Callable[..., None] = ctypes.CFUNCTYPE(None, *argument_types)(address)

    def _collect_inputs(
        self, args: Sequence[np.ndarray], kwargs: Mapping[str, np.ndarray]
    ) -> list[np.ndarray]:
        given = bind_arguments([p.name for p in self.inputs], args, kwargs)
        return [
            self._check(parameter, given[parameter.name], parameter.name)
            for parameter in self.inputs
        ]

    @staticmethod
    def _check(parameter: _Parameter, array: Any, label: str) -> np.ndarray:
        if not isinstance(array, np.ndarray):
            raise ArgumentTypeError(
                f"argument '{label}' must be a numpy array, got {type(array).__name__}"
            )
        if array.dtype != parameter.dtype:
            raise ArgumentTypeError(
                f"argument '{label}' must be {parameter.dtype}, got {array.dtype}"
            )
        if array.ndim != len(parameter.shape) or any(
            declared not in (DYNAMIC_INDEX, actual)
            for declared, actual in zip(parameter.shape, array.shape, strict=False)
        ):
            raise ArgumentError(
                f"argument '{label}' must have shape {ew.format_shape(parameter.shape)}, "
                f"got {array.shape}"
            )
        if not array.flags.c_contiguous:
            raise ArgumentError(f"argument '{label}' must be C-contiguous")
        return array

    def __call__(
        self,
        *args: np.ndarray,
        out: Sequence[np.ndarray] | np.ndarray | None = None,
        **kwargs: np.ndarray,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        inputs = self._collect_inputs(args, kwargs)
        shapes = bind_shapes(
            self._function,
            {arg: array.shape for arg, array in zip(self._function.args, inputs, strict=True)},
        )
        return_op = self._function.body.block.last_op
        assert isinstance(return_op, func.ReturnOp)
        result_shapes = [shapes[value] for value in return_op.arguments]
        outputs = self._outputs(out, result_shapes, inputs)
        self._entry(*(a for array in (*inputs, *outputs) for a in _memref_arguments(array)))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _outputs(
        self,
        out: Sequence[np.ndarray] | np.ndarray | None,
        shapes: Sequence[tuple[int, ...]],
        inputs: Sequence[np.ndarray],
    ) -> list[np.ndarray]:
        if out is None:
            return [
                np.empty(shape, parameter.dtype)
                for parameter, shape in zip(self.outputs, shapes, strict=True)
            ]
        arrays = [out] if isinstance(out, np.ndarray) else list(out)
        if len(arrays) != len(self.outputs):
            raise ArgumentTypeError(
                f"'out' must hold {len(self.outputs)} arrays, got {len(arrays)}"
            )
        for index, (parameter, shape, array) in enumerate(
            zip(self.outputs, shapes, arrays, strict=True)
        ):
            label = f"out[{index}]"
            self._check(_Parameter(parameter.name, parameter.dtype, shape), array, label)
            if not array.flags.writeable:
                raise ArgumentError(f"argument '{label}' must be writeable")
            if any(np.may_share_memory(array, other) for other in (*inputs, *arrays[:index])):
                raise ArgumentError(f"argument '{label}' shares memory with another argument")
        return arrays


def compile_with_mlir(
    module: ModuleOp, function_name: str = "main", math: MathLowering = "libm"
) -> MlirKernel:
    """Compile `module` (after `ew-fuse`) with upstream MLIR; raises MlirToolsMissing without it."""
    return MlirKernel(module, function_name, math)
