"""Element types: numpy names and dtypes <-> xDSL float types.

The names need no xDSL: a cached compile (`xfuse.compile` on a disk-cache hit) normalises its
dtypes without importing xDSL, which is imported for the types only.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from xdsl.ir import Attribute

DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")
_ALIASES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
SHORT_DTYPE_NAMES = {name: short for short, name in _ALIASES.items()}
"""float32 -> f32: the name the `.ew` language declares and converts with."""


def is_dtype_word(text: str) -> bool:
    """Whether `text` is one of xfuse's own names of a dtype (`float32` or `f32`), which the
    command line and pass options take: numpy's codes (`e`, `f4`, `float`: float64) are not."""
    return text in DTYPE_NAMES or text in SHORT_DTYPE_NAMES.values()


def dtype_name(dtype: Any) -> str:
    """Normalise "float32", "f32", "f4", np.float32 or np.dtype("float32") to "float32"."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name not in DTYPE_NAMES:  # numpy's spellings: "f4", "<f8", "e", "double", "float"
            with contextlib.suppress(TypeError):  # (not numpy's either: the error below)
                spelled = np.dtype(dtype)
                name = spelled.name if spelled.isnative else name  # (">f4": kernels are native)
    else:
        try:
            if dtype is None:  # (numpy's `np.dtype(None)` is float64, not a default: said here)
                raise TypeError
            spelled = np.dtype(dtype)
            # (a byte-swapped dtype's name is the native one's: `np.dtype(">f4")` was float32)
            name = spelled.name if spelled.isnative else str(spelled)
        except TypeError:
            raise TypeError(
                f"dtype must be a numpy dtype or its name, got {dtype!r}: one of "
                f"{', '.join(DTYPE_NAMES)}"
            ) from None
    if name not in DTYPE_NAMES:
        raise ValueError(f"unsupported dtype {dtype!r}: expected one of {', '.join(DTYPE_NAMES)}")
    return name


@functools.cache
def _element_types() -> dict[str, type[Attribute]]:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type

    types = (Float16Type, BFloat16Type, Float32Type, Float64Type)
    return dict(zip(DTYPE_NAMES, types, strict=True))


def element_type_for(dtype: Any) -> Attribute:
    """The xDSL element type of a dtype name or numpy dtype."""
    return _element_types()[dtype_name(dtype)]()


def dtype_of(element: Attribute) -> str:
    """The numpy name of an xDSL float element type."""
    for name, type_ in _element_types().items():
        if isinstance(element, type_):
            return name
    raise ValueError(f"no numpy dtype for element type {element}")


def promote(a: Attribute, b: Attribute) -> Attribute:
    """The element type two operands meet in, by numpy's promotion rules.

    Equal types stay; f64 wins over everything, f32 over f16 and bf16; f16 with bf16 gives f32,
    as numpy with ml_dtypes 0.7 (`np.result_type(np.float16, bfloat16)`) and JAX give it.
    """
    from xdsl.dialects.builtin import Float32Type, Float64Type

    if a == b:
        return a
    for wider in (Float64Type(), Float32Type()):
        if wider in (a, b):
            return wider
    return Float32Type()


def element_bytes(element: Attribute) -> int:
    """The bytes one element of an xDSL float (or integer) type takes in memory."""
    from xdsl.dialects.builtin import FixedBitwidthType

    return cast(FixedBitwidthType, element).size


@functools.cache
def numpy_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of an xfuse dtype name; bfloat16 comes from `ml_dtypes`."""
    if name == "bfloat16":
        import ml_dtypes  # here, not at the top: importing it costs ~1 s of CPU (every CLI run)

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def itemsize(dtype: Any) -> int:
    """The bytes one element of a dtype name or numpy dtype takes in memory: each name ends in
    its bits, so neither xDSL nor ml_dtypes (for bfloat16) is imported."""
    return int(dtype_name(dtype).rsplit("float", 1)[1]) // 8
