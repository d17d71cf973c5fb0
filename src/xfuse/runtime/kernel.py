"""A compiled program callable on numpy arrays.

The native function follows the lowering's calling convention (`xfuse.lowering.to_llvm`): for
each input, then each output, a pointer to its first element and one i64 per `?` dimension.
ctypes releases the GIL during the call, so `threads=N` runs N slices of the outermost dimension
concurrently (each slice is a call on offset pointers with a smaller outer size).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DYNAMIC_INDEX

from xfuse.runtime.arrays import (
    ArgumentError,
    Parameter,
    bind_shapes,
    check_aliasing,
    check_input,
    check_output,
    numpy_dtype,
    output_shape,
)
from xfuse.runtime.native import NativeModule

MIN_ELEMENTS_PER_THREAD = 1 << 15
"""Below this many elements per thread, splitting costs more than it saves."""


def native_argument_count(parameter: Parameter) -> int:
    return 1 + len(parameter.dynamic_axes)


class NativeFunction:
    """A function of the native module with its parameters (inputs, then outputs)."""

    def __init__(
        self,
        native: NativeModule,
        name: str,
        inputs: Sequence[Parameter],
        outputs: Sequence[Parameter],
    ):
        self.native = native  # keeps the engine (and the code) alive
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        parameters = (*self.inputs, *self.outputs)
        argument_types: list[Any] = []
        for parameter in parameters:
            argument_types += [ctypes.c_void_p] + [ctypes.c_int64] * len(parameter.dynamic_axes)
        self._function = ctypes.CFUNCTYPE(None, *argument_types)(native.address(name))
        self._splittable = (
            all(
                not p.shape  # a scalar (a constant output): nothing to split
                or len(p.shape) < max(len(q.shape) for q in parameters)
                or p.shape[0] in (DYNAMIC_INDEX, 1)
                for p in parameters
            )
            if parameters
            else False
        )

    def run(self, argument_lists: Sequence[Sequence[int]]) -> None:
        """Call the native function once per argument list, concurrently if several."""
        if len(argument_lists) == 1:
            self._function(*argument_lists[0])
            return
        with ThreadPoolExecutor(len(argument_lists)) as pool:
            for call in [pool.submit(self._function, *a) for a in argument_lists]:
                call.result()

    def chunks(self, iteration: tuple[int, ...], threads: int) -> list[tuple[int, int]]:
        """Row ranges of axis 0 to run on separate threads (one range: no split)."""
        if threads <= 1 or not iteration or not self._splittable:
            return [(0, iteration[0] if iteration else 1)]
        total = int(np.prod(iteration))
        count = max(1, min(threads, iteration[0], total // MIN_ELEMENTS_PER_THREAD))
        bounds = np.linspace(0, iteration[0], count + 1).astype(int)
        return [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def _native_arguments(
    parameters: Sequence[Parameter],
    arrays: Sequence[np.ndarray],
    rank: int,
    chunk: tuple[int, int] | None,
) -> list[int]:
    """Pointer and `?` sizes per array; restricted to rows chunk[0]:chunk[1] of axis 0 if given."""
    arguments: list[int] = []
    for parameter, array in zip(parameters, arrays, strict=True):
        pointer = array.ctypes.data
        shape = list(array.shape)
        if chunk is not None and array.ndim == rank and rank and parameter.shape[0] != 1:
            low, high = chunk
            pointer += low * array.strides[0]
            shape[0] = high - low
        arguments.append(pointer)
        arguments += [shape[axis] for axis in parameter.dynamic_axes]
    return arguments


class PreparedCall:
    """A checked call of a kernel: calling it runs the native code and returns the outputs."""

    def __init__(self, kernel: Kernel, arrays: list[np.ndarray], iteration: tuple[int, ...]):
        self.kernel = kernel  # keeps the native code alive
        self.arrays = arrays  # keeps the buffers alive
        self.outputs = arrays[len(kernel.function.inputs) :]
        function = kernel.function
        parameters = (*function.inputs, *function.outputs)
        chunks = function.chunks(iteration, kernel.threads)
        self.argument_lists = [
            _native_arguments(
                parameters, arrays, len(iteration), chunk if len(chunks) > 1 else None
            )
            for chunk in chunks
        ]

    def __call__(self) -> Any:
        self.kernel.function.run(self.argument_lists)
        return self.outputs[0] if len(self.outputs) == 1 else tuple(self.outputs)


@dataclass(eq=False)
class Program:
    """The cacheable result of compiling: native code, its signature and every stage's IR."""

    function: NativeFunction
    stages: dict[str, str]
    in_place_allowed: bool
    """True when the program is one kernel, so an output may overwrite a same-shaped input."""
    options: Any


class Kernel:
    """A compiled elementwise program: `k(x=..., b=...)` -> array (or a tuple for several outputs).

    `out=` takes the output buffer (or a sequence / name->array mapping for several outputs) to
    write in place. Inputs are checked first (dtype, shape, broadcasting, aliasing); a strided or
    misaligned input is copied to a contiguous array. `k.ir(stage)` shows the IR after any stage,
    `k.llvm_ir` the optimized LLVM IR, `k.asm` the host assembly.
    """

    def __init__(self, program: Program, threads: int = 1):
        self.program = program  # shared with the compile cache; keeps the engine alive
        self.function = program.function
        self.stages = program.stages
        self.in_place_allowed = program.in_place_allowed
        self.options = program.options
        self.threads = threads

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.function.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.function.outputs)

    def ir(self, stage: str) -> str:
        """The IR after `stage` (see `.stages` for the names, in pipeline order)."""
        if stage not in self.stages:
            raise KeyError(f"no stage '{stage}': stages are {', '.join(self.stages)}")
        return self.stages[stage]

    @property
    def llvm_ir(self) -> str:
        return self.function.native.optimized_ir

    @property
    def asm(self) -> str:
        return self.function.native.asm

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        return self.prepare(*args, out=out, **kwargs)()

    def prepare(self, *args: Any, out: Any = None, **kwargs: Any) -> PreparedCall:
        """Check the arguments once; the returned call runs the native code with no checks.

        For loops and benchmarks: `run = k.prepare(x=x, out=y)` then `run()` as often as needed
        (the arrays' contents may change between runs, not the arrays themselves).
        """
        inputs = self._bind_inputs(args, kwargs)
        arrays = [check_input(p, inputs[p.name]) for p in self.function.inputs]
        iteration = bind_shapes(self.function.inputs, arrays)
        shapes = [output_shape(p, iteration) for p in self.function.outputs]
        outputs = self._bind_outputs(out, shapes)
        check_aliasing(
            dict(zip(self.input_names, arrays, strict=True)),
            dict(zip(self.output_names, outputs, strict=True)),
            self.in_place_allowed,
        )
        return PreparedCall(self, [*arrays, *outputs], iteration)

    def _bind_inputs(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        names = self.input_names
        if len(args) > len(names):
            raise TypeError(
                f"expected at most {len(names)} inputs ({', '.join(names)}), got {len(args)}"
            )
        bound = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"unknown argument '{name}': inputs are {', '.join(names)}")
            if name in bound:
                raise TypeError(f"argument '{name}' given twice")
            bound[name] = value
        missing = [name for name in names if name not in bound]
        if missing:
            raise TypeError(f"missing input(s): {', '.join(missing)}")
        return bound

    def _bind_outputs(self, out: Any, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
        parameters = self.function.outputs
        if out is None:
            return [
                np.empty(shape, numpy_dtype(p.dtype))
                for p, shape in zip(parameters, shapes, strict=True)
            ]
        if isinstance(out, np.ndarray):
            given: list[Any] = [out]
        elif isinstance(out, Mapping):
            unknown = set(out) - set(self.output_names)
            if unknown:
                raise TypeError(
                    f"out: unknown output(s) {sorted(unknown)}: outputs are {self.output_names}"
                )
            given = [out.get(name) for name in self.output_names]
        elif isinstance(out, list | tuple):
            given = list(out)
        else:
            raise TypeError(
                f"out: expected a numpy array, a list/tuple or a name->array mapping, "
                f"got {type(out).__name__}"
            )
        if len(given) != len(parameters):
            raise ArgumentError(f"out: expected {len(parameters)} buffer(s), got {len(given)}")
        return [
            np.empty(shape, numpy_dtype(p.dtype))
            if buffer is None
            else check_output(p, buffer, shape)
            for p, buffer, shape in zip(parameters, given, shapes, strict=True)
        ]
