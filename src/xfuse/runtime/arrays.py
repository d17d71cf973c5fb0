"""Checking numpy arguments against a compiled function's signature, before any native call.

Every mistake raises `ArgumentError` (a ValueError) or TypeError naming the argument, so a bad
call never reaches native code: no segfault, no partial write.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DYNAMIC_INDEX

from xfuse.dialects.ew import format_shape


class ArgumentError(ValueError):
    """A bad argument to a compiled kernel; the message names the argument."""


def numpy_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of an xfuse dtype name; bfloat16 comes from `ml_dtypes`."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class Parameter:
    """One array argument of a compiled function: name, numpy dtype name, type shape (`?` dims)
    and, for an input declared with named dims, the dims' names (the frontend's `ew.dims`)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    dims: tuple[str, ...] | None = None

    @functools.cached_property
    def dynamic_axes(self) -> tuple[int, ...]:
        return tuple(axis for axis, size in enumerate(self.shape) if size == DYNAMIC_INDEX)

    @functools.cached_property
    def named_axes(self) -> tuple[tuple[int, str], ...]:
        """(axis, name) of each dim with a name: dims of one name must have one size."""
        return tuple((axis, d) for axis, d in enumerate(self.dims or ()) if d.isidentifier())

    def describe(self) -> str:
        if self.dims is not None:
            return f"{self.dtype}[{', '.join(self.dims)}]"
        return f"{self.dtype}{format_shape(self.shape)}"


def bind_shapes(parameters: Sequence[Parameter], arrays: Sequence[np.ndarray]) -> tuple[int, ...]:
    """Check the arrays' shapes against the parameters; returns the iteration (broadcast) shape.

    Dims are right-aligned as in numpy. A static dim must match exactly; all `?` and static non-1
    sizes on one axis must agree (a `?` never broadcasts: declare a 1 to broadcast); dims with the
    same name must have the same size, whatever their axes.
    """
    rank = max((len(p.shape) for p in parameters), default=0)
    sizes: list[tuple[int, str] | None] = [None] * rank
    named: dict[str, tuple[int, str]] = {}
    for parameter, array in zip(parameters, arrays, strict=True):
        if array.ndim != len(parameter.shape):
            raise ArgumentError(
                f"argument '{parameter.name}': expected {len(parameter.shape)} dimensions "
                f"({parameter.describe()}), got shape {array.shape}"
            )
        for axis, name in parameter.named_axes:
            size, first = named.setdefault(name, (array.shape[axis], parameter.name))
            if size != array.shape[axis]:
                raise ArgumentError(
                    f"argument '{parameter.name}': dimension {axis} ({name}) has size "
                    f"{array.shape[axis]} but '{first}' has {name} = {size} "
                    f"({parameter.describe()}), got shape {array.shape}"
                )
        for axis, (declared, actual) in enumerate(zip(parameter.shape, array.shape, strict=True)):
            if declared != DYNAMIC_INDEX and declared != actual:
                raise ArgumentError(
                    f"argument '{parameter.name}': dimension {axis} must be {declared} "
                    f"({parameter.describe()}), got shape {array.shape}"
                )
            if declared == 1:
                continue
            position = rank - len(parameter.shape) + axis
            bound = sizes[position]
            if bound is None:
                sizes[position] = (actual, parameter.name)
            elif bound[0] != actual:
                raise ArgumentError(
                    f"argument '{parameter.name}': dimension {axis} has size {actual} but "
                    f"'{bound[1]}' has {bound[0]} there (shapes must match or be declared 1)"
                )
    return tuple(1 if bound is None else bound[0] for bound in sizes)


def output_shape(parameter: Parameter, iteration: Sequence[int]) -> tuple[int, ...]:
    offset = len(iteration) - len(parameter.shape)
    return tuple(
        iteration[offset + axis] if size == DYNAMIC_INDEX else size
        for axis, size in enumerate(parameter.shape)
    )


def check_input(parameter: Parameter, value: Any) -> np.ndarray:
    """The array to pass for an input: checked dtype; a C-contiguous aligned copy if needed."""
    if not isinstance(value, np.ndarray):
        raise TypeError(
            f"argument '{parameter.name}': expected a numpy array of {parameter.describe()}, "
            f"got {type(value).__name__}"
        )
    expected = numpy_dtype(parameter.dtype)
    if value.dtype != expected:
        raise TypeError(
            f"argument '{parameter.name}': expected dtype {parameter.dtype}, got {value.dtype} "
            f"(convert with .astype)"
        )
    if not (value.flags.c_contiguous and value.flags.aligned):
        return np.ascontiguousarray(value)  # documented: strided inputs are copied
    return value


def check_output(parameter: Parameter, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A caller's `out` buffer must already be exactly right: it is written in place."""
    label = f"out '{parameter.name}'"
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{label}: expected a numpy array, got {type(value).__name__}")
    if value.dtype != numpy_dtype(parameter.dtype):
        raise TypeError(f"{label}: expected dtype {parameter.dtype}, got {value.dtype}")
    if value.shape != shape:
        raise ArgumentError(f"{label}: expected shape {shape}, got {value.shape}")
    if not value.flags.c_contiguous or not value.flags.aligned:
        raise ArgumentError(f"{label}: must be C-contiguous and aligned")
    if not value.flags.writeable:
        raise ArgumentError(f"{label}: the array is read-only")
    return value


def same_buffer(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.ctypes.data == b.ctypes.data
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
    )


def check_aliasing(
    inputs: Mapping[str, np.ndarray],
    outputs: Mapping[str, np.ndarray],
    in_place_allowed: bool,
) -> None:
    """Outputs never overlap each other; one may alias an input only as an exact in-place update."""
    names = list(outputs)
    for index, name in enumerate(names):
        out = outputs[name]
        if out.size == 0:
            continue
        for other in names[index + 1 :]:
            if np.may_share_memory(out, outputs[other]):
                raise ArgumentError(f"out '{name}' overlaps out '{other}'")
        for input_name, array in inputs.items():
            if not np.may_share_memory(out, array):
                continue
            if not (in_place_allowed and same_buffer(out, array)):
                reason = (
                    "only an exact alias of a same-shaped input is an in-place update"
                    if in_place_allowed
                    else "this program has several kernels, so an in-place update is unsafe"
                )
                raise ArgumentError(f"out '{name}' overlaps input '{input_name}': {reason}")
