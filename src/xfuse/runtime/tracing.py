"""`@xfuse.jit`: compile a Python function of arrays by tracing it once per dtype/shape signature.

    @xfuse.jit(math="approx")
    def gelu(x, b, r):
        h = x + b
        return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

On the first call with a new signature (dtypes and shapes of the arrays) the function runs on
`Traced` proxies that record `ew` ops with `FunctionBuilder`; the module is compiled with
`xfuse.compile`'s pipeline and cache. Dims of size 1 are declared 1 (they broadcast), the others
`?`. Arrays may mix dtypes: they promote as in numpy (bf16 + f32 -> f32), Python numbers take
the dtype of the array they meet. `xfuse.tanh` and friends (`FUNCTIONS`, one per op with an
`ew.python_name`) work on proxies and, outside tracing, on numpy arrays. Dask arrays are traced
by their dtype and shape like numpy arrays, and the kernel then returns lazy dask arrays
(`xfuse.runtime.dask_arrays`).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from xfuse.dialects import ew
from xfuse.dtypes import dtype_name
from xfuse.frontend.builder import FunctionBuilder, Value
from xfuse.runtime.arrays import ArgumentTypeError
from xfuse.runtime.compiler import Options, check_threads, compile_module
from xfuse.runtime.dask_arrays import is_dask_array
from xfuse.runtime.kernel import Kernel

_OPS_BY_UFUNC: dict[np.ufunc, type[ew.UnaryOp | ew.BinaryOp]] = {
    ufunc: op for op in ew.ELEMENTWISE_OPS if (ufunc := ew.numpy_ufunc(op)) is not None
}
"""numpy's ufuncs that are `ew` ops (`ew.numpy_ufunc`): `np.tanh(x)` traces to `ew.tanh`."""


class Traced:
    """A value of the function being traced; arithmetic on it records `ew` ops."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our reflected operators

    def __init__(self, builder: FunctionBuilder, value: SSAValue):
        self.builder = builder
        self.value = value

    def _lift(self, other: Any) -> Value:
        if isinstance(other, Traced):
            return other.value
        if isinstance(other, numbers.Real):
            return self.builder.literal(float(other))
        raise TypeError(
            f"cannot combine a traced array with {type(other).__name__}: inside @xfuse.jit use "
            "the function's array arguments and Python numbers"
        )

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

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        op_type = _OPS_BY_UFUNC.get(ufunc)
        if method != "__call__" or kwargs or op_type is None:
            supported = ", ".join(sorted(f"np.{u.__name__}" for u in _OPS_BY_UFUNC))
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


class JitFunction:
    """A traced-and-compiled Python function; one `Kernel` per dtype/shape signature."""

    def __init__(self, function: Callable[..., Any], options: Options, threads: int):
        self.function = function
        self.options = options
        self.threads = threads
        self.signature = inspect.signature(function)
        self.kernels: dict[tuple[Any, ...], Kernel] = {}
        """The kernels compiled so far, by the (name, dtype, shape) of each argument."""
        functools.update_wrapper(self, function)

    def __repr__(self) -> str:
        return (
            f"<xfuse.jit {self.function.__name__}{self.signature}: "
            f"{len(self.kernels)} compiled, {self.options}, threads={self.threads}>"
        )

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickles by name where importable, else as the function and its kernels."""
        from xfuse.runtime.pickling import jit_reduction

        return jit_reduction(self)

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ArgumentTypeError(f"{self.function.__name__}(): {error}") from None
        arrays = dict(bound.arguments)
        for name, value in arrays.items():
            if not isinstance(value, np.ndarray) and not is_dask_array(value):
                raise ArgumentTypeError(
                    f"argument '{name}': expected a numpy array (or a dask array), "
                    f"got {type(value).__name__}"
                )
        key = tuple((name, a.dtype.name, a.shape) for name, a in arrays.items())
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = self.compile(arrays)
        return kernel(out=out, **arrays)

    def compile(self, arrays: dict[str, np.ndarray]) -> Kernel:
        """Trace the function on proxies shaped like `arrays` and compile it."""
        dtypes: dict[str, str] = {}
        for name, array in arrays.items():
            try:
                dtypes[name] = dtype_name(array.dtype)
            except ValueError as error:
                raise ArgumentTypeError(f"argument '{name}': {error}") from None
        shapes = {name: tuple(1 if d == 1 else None for d in a.shape) for name, a in arrays.items()}
        builder = FunctionBuilder(dtypes, shapes)
        proxies = {name: Traced(builder, builder.input(name)) for name in arrays}
        result = self.function(**proxies)
        results = list(result) if isinstance(result, tuple | list) else [result]
        if not results or not all(isinstance(r, Traced) for r in results):
            raise TypeError(
                f"{self.function.__name__}() must return traced arrays computed from its arguments"
            )
        names = ["out"] if len(results) == 1 else [f"out{i}" for i in range(len(results))]
        module = builder.finish([(n, r.value) for n, r in zip(names, results, strict=True)])
        return compile_module(module, names, self.options, self.threads)


def jit(
    function: Callable[..., Any] | None = None,
    *,
    fuse: bool = True,
    math: str = "approx",
    threads: int = 1,
    fastmath: str = "contract",
) -> Any:
    """Decorate a function of numpy arrays to compile it on first call (`@xfuse.jit` or
    `@xfuse.jit(math="libm")`)."""
    options = Options(fuse=fuse, math=math, fastmath=fastmath)  # checks each option
    threads = check_threads(threads)

    def decorate(f: Callable[..., Any]) -> JitFunction:
        return JitFunction(f, options, threads)

    return decorate if function is None else decorate(function)
