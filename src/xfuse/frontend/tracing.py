"""Tracing Python functions into `ew` IR: `Traced` proxies record `ew` ops with
`FunctionBuilder`; `xfuse.tanh` and friends (`FUNCTIONS`, one per op with an `ew.python_name`)
work on proxies and, outside tracing, on numpy arrays. `xfuse.runtime.jit` compiles what is
traced here."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of, element_type_for, numpy_dtype
from xfuse.frontend.builder import FunctionBuilder, Value

_OPS_BY_UFUNC: dict[np.ufunc, type[ew.UnaryOp | ew.BinaryOp]] = {
    ufunc: op for op in ew.ELEMENTWISE_OPS if (ufunc := ew.numpy_ufunc(op)) is not None
}
"""numpy's ufuncs that are `ew` ops (`ew.numpy_ufunc`): `np.tanh(x)` traces to `ew.tanh`."""

_UFUNCS_OF_OPS: dict[np.ufunc, Callable[[Traced], Traced]] = {
    np.square: lambda x: x * x,
    np.reciprocal: lambda x: 1 / x,
}
"""numpy's ufuncs that are one `ew` op on a float array with a constant, each as numpy computes
it: `np.square(x)` is `x * x`, `np.reciprocal(x)` is `1 / x` (the same roundings)."""


class Traced:
    """A value of the function being traced; arithmetic on it records `ew` ops."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our reflected operators

    def __init__(self, builder: FunctionBuilder, value: SSAValue):
        self.builder = builder
        self.value = value

    def _lift(self, other: Any) -> Value:
        if isinstance(other, Traced):
            return other.value
        if isinstance(other, np.generic):
            return self._numpy_scalar(other)
        if isinstance(other, numbers.Real):
            return self.builder.literal(float(other))
        raise TypeError(
            f"cannot combine a traced array with {type(other).__name__}: inside @xfuse.jit use "
            "the function's array arguments and Python numbers"
        )

    def _numpy_scalar(self, scalar: np.generic) -> SSAValue:
        """A numpy scalar is typed (NEP 50), unlike a Python number: a constant of the dtype
        numpy gives it with this array. `np.sqrt(2 / np.pi) * x` is float64 for a float32 `x`,
        as in numpy, and `x + np.float16(1e5)` is inf (float16 has no 1e5)."""
        array_dtype = self.dtype
        try:
            element = element_type_for(np.result_type(array_dtype, scalar))
        except ValueError:
            raise TypeError(
                f"cannot combine a traced {array_dtype} array with a {scalar.dtype} scalar: "
                "xfuse computes in float16, bfloat16, float32 and float64"
            ) from None
        return self.builder.convert(self.builder.literal(float(scalar)), element)

    def apply(self, op_type: type[ew.UnaryOp | ew.BinaryOp], *operands: Any) -> Traced:
        values = [self._lift(operand) for operand in operands]
        try:
            result = self.builder.apply(op_type, *values)
            assert isinstance(result, SSAValue)  # a Traced operand is never weak
            return Traced(self.builder, result)
        except ValueError as error:
            raise ValueError(f"{op_type.name}: {error}") from None

    def __add__(self, other: Any) -> Traced:
        return self.apply(ew.AddOp, self, other)

    def __radd__(self, other: Any) -> Traced:
        return self.apply(ew.AddOp, other, self)

    def __sub__(self, other: Any) -> Traced:
        return self.apply(ew.SubOp, self, other)

    def __rsub__(self, other: Any) -> Traced:
        return self.apply(ew.SubOp, other, self)

    def __mul__(self, other: Any) -> Traced:
        return self.apply(ew.MulOp, self, other)

    def __rmul__(self, other: Any) -> Traced:
        return self.apply(ew.MulOp, other, self)

    def __truediv__(self, other: Any) -> Traced:
        return self.apply(ew.DivOp, self, other)

    def __rtruediv__(self, other: Any) -> Traced:
        return self.apply(ew.DivOp, other, self)

    def __pow__(self, other: Any) -> Traced:
        return self.apply(ew.PowOp, self, other)

    def __rpow__(self, other: Any) -> Traced:
        return self.apply(ew.PowOp, other, self)

    def __neg__(self) -> Traced:
        return self.apply(ew.NegOp, self)

    def __pos__(self) -> Traced:
        return self

    def __abs__(self) -> Traced:
        return self.apply(ew.AbsOp, self)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the traced array (`x.astype(y.dtype)`)."""
        return numpy_dtype(dtype_of(ew.element_type(self.value.type)))

    def astype(self, dtype: Any) -> Traced:
        """The traced array converted to `dtype` as numpy converts (round to nearest even):
        an `ew.convert`, the `.ew` language's `bf16(...)`; the same array where the dtype is its
        own f32 or f64 (an f16 or bf16 one rounds what a kernel holds in f32, as numpy's value
        is rounded). `(y + r).astype(ml_dtypes.bfloat16)` stores an f32 result in bf16."""
        try:
            element = element_type_for(dtype)
        except ValueError:
            raise TypeError(
                f"astype({dtype!r}): xfuse computes in float16, bfloat16, float32 and float64"
            ) from None
        return Traced(self.builder, self.builder.convert(self.value, element, explicit=True))

    def clip(self, a_min: Any = None, a_max: Any = None, out: None = None) -> Traced:
        """`np.clip(x, a_min, a_max)` (numpy calls this method): minimum(maximum(x, a_min),
        a_max), as numpy defines it; either bound may be None. ReLU6 is `np.clip(x, 0, 6)`."""
        if out is not None:
            raise TypeError("np.clip(..., out=) cannot be traced: @xfuse.jit returns its results")
        clipped = self if a_min is None else self.apply(ew.MaxOp, self, a_min)
        return clipped if a_max is None else clipped.apply(ew.MinOp, clipped, a_max)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        op_type = _OPS_BY_UFUNC.get(ufunc)
        composite = _UFUNCS_OF_OPS.get(ufunc)
        if method == "__call__" and not kwargs and composite is not None:
            return composite(*inputs)
        if method != "__call__" or kwargs or op_type is None:
            traceable = [*_OPS_BY_UFUNC, *_UFUNCS_OF_OPS]
            supported = ", ".join(sorted(f"np.{u.__name__}" for u in traceable))
            raise TypeError(
                f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method} cannot be "
                f"traced{' with keyword arguments' if kwargs else ''}: inside @xfuse.jit use "
                f"{supported}, or xfuse's functions (xfuse.erf, xfuse.sigmoid, ...)"
            )
        return self.apply(op_type, *inputs)

    def _data_dependent(self, *_: Any) -> Any:
        raise TypeError(
            "traced arrays have no truth value and no comparisons: @xfuse.jit traces one path "
            "through the function, so data-dependent control flow (`if x > 0:`) cannot be "
            "compiled; compute it with arithmetic instead, e.g. xfuse.relu(x), "
            "xfuse.maximum(x, y) or xfuse.minimum(x, y)"
        )

    __bool__ = __lt__ = __le__ = __gt__ = __ge__ = _data_dependent

    def _not_a_number(self, *_: Any) -> Any:
        raise TypeError(
            "a traced array is not a Python number: inside @xfuse.jit use numpy's or xfuse's "
            "functions on it (np.exp(x), xfuse.sqrt(x)), not the math module's or float()"
        )

    __float__ = __int__ = __index__ = __complex__ = _not_a_number


def _elementwise(op_type: type[ew.UnaryOp | ew.BinaryOp], name: str) -> Callable[..., Any]:
    """The function `xfuse.<name>`: records the op on traced values, else computes with numpy."""

    def function(*args: Any) -> Any:
        traced = next((a for a in args if isinstance(a, Traced)), None)
        if traced is not None:
            return traced.apply(op_type, *args)
        arrays = [np.asarray(a) for a in args]
        dtype = np.result_type(*arrays)
        with np.errstate(all="ignore"):
            result = op_type.reference(*(a.astype(np.float64) for a in arrays))
        return result.astype(dtype) if np.issubdtype(dtype, np.floating) else result

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Elementwise `{op_type.name}` on traced values or numpy arrays."
    return function


FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: _elementwise(op, name)
    for op in ew.ELEMENTWISE_OPS
    if (name := ew.python_name(op)) is not None
}
"""`xfuse.tanh`, `xfuse.maximum`, ...: one function per `ew` op that has a Python name."""


def __getattr__(name: str) -> Callable[..., Any]:
    function = FUNCTIONS.get(name)
    if function is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return function
