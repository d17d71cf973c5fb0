"""Tracing Python functions into `ew` IR: `Traced` proxies record `ew` ops with
`FunctionBuilder`; `xfuse.tanh` and friends (`FUNCTIONS`, one per op with an `ew.python_name`)
work on proxies and, outside tracing, on numpy arrays. `xfuse.runtime.jit` compiles what is
traced here."""

from __future__ import annotations

import inspect
import math
import operator
import sys
from collections.abc import Callable
from typing import Any, NoReturn, cast

import numpy as np
from numpy._core import umath
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue

from xfuse.dialects import ew
from xfuse.dialects.dtypes import DTYPE_NAMES, dtype_of, element_type_for, numpy_dtype
from xfuse.dialects.xdsl_patches import NAN_LAYOUTS
from xfuse.frontend.array_kinds import array_kind_problem
from xfuse.frontend.builder import FunctionBuilder, Value

_OPS_BY_UFUNC: dict[np.ufunc, ew.ElementwiseOpType] = {
    ufunc: op for op in ew.ELEMENTWISE_OPS if (ufunc := ew.numpy_ufunc(op)) is not None
}
"""numpy's ufuncs that are `ew` ops (`ew.numpy_ufunc`): `np.tanh(x)` traces to `ew.tanh`."""


def _ignoring_nan(extremum: np.ufunc, a: Any, b: Any) -> Any:
    """`extremum(a, b)` (np.maximum or np.minimum, `ew.max` or `ew.min`), but the other operand
    where one is NaN: numpy's fmax and fmin, with IEEE 754-2019's maximumNumber's -0 < +0 (numpy's
    loops give either zero of a tie, by dtype)."""
    result = extremum(a, b)
    for value, other in ((b, a), (a, b)):
        if isinstance(value, Traced):
            result = np.where(value != value, other, result)
        elif value != value:  # a NaN scalar: the other operand everywhere, of the result's dtype
            result = other.astype(result.element_dtype)
    return result


def _traced_first(operation: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A commutative operator of two operands, the traced one on the left: numpy's scalar on
    the left (`np.True_ & m`) hands the ufunc back to the traced array, whose operator a scalar
    on the left would hand to numpy again (a RecursionError)."""
    return lambda a, b: operation(a, b) if isinstance(a, Traced) else operation(b, a)


def _truth(value: Any) -> Any:
    """`value` as numpy's logical functions take it: a mask as it is, numbers true where
    nonzero (NaN too): `np.logical_and(x > 0, 2.0)` is `x > 0`, `np.logical_not(x)` is `x == 0`
    (the bitwise operators take masks and bools only, as numpy's take booleans and integers)."""
    value = _traced_or_scalar(value)  # (a list's truth was its length's: silently wrong)
    if isinstance(value, Traced):
        return value if value.mask else value != 0
    return bool(value)


def _fmax(a: Any, b: Any) -> Any:
    return _ignoring_nan(np.maximum, a, b)


def _fmin(a: Any, b: Any) -> Any:
    return _ignoring_nan(np.minimum, a, b)


def _sign(x: Any) -> Any:
    """numpy's sign: 1, -1, +0 for either zero, NaN for NaN (itself)."""
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, np.where(x == 0, 0.0, x)))


def _scalar_exponent(exponent: Any) -> bool:
    """Whether `exponent` is a scalar to numpy: a Python or numpy number, or a traced 0-d
    value numpy holds as a scalar (`Traced._is_numpy_scalar`); not an array, a 0-d one too."""
    if isinstance(exponent, Traced):
        return exponent._is_numpy_scalar and not exponent.mask
    return isinstance(exponent, int | float | np.generic) and not isinstance(exponent, np.bool_)


def _heaviside(x: Any, h0: Any) -> Any:
    """numpy's heaviside: 0 below 0, 1 above, `h0` at ±0, and for a NaN x the loop's NaN
    (`_heaviside_nan`); of a scalar x, that value at every element of the traced `h0`, in
    numpy's dtype of the two."""
    x, h0 = _traced_or_scalar(x), _traced_or_scalar(h0)
    if isinstance(h0, Traced) and h0.mask:  # (as any arithmetic on a mask: the mask error)
        return h0.apply(ew.MaxOp, h0, 0.0)
    if not isinstance(x, Traced):
        dtype = np.result_type(x, h0.element_dtype)
        x = dtype.type(x)  # (numpy's loop compares x in that dtype: 1e-60 is 0 in float32)
        value = 0.0 if x < 0 else 1.0 if x > 0 else None if x == 0 else _heaviside_nan(x, dtype)
        if value is None:
            return h0.astype(dtype)
        # (either arm is the value: any mask of h0 spreads it over h0's shape)
        return np.where(h0 != h0, dtype.type(value), dtype.type(value))
    dtype = np.result_type(x.element_dtype, h0.element_dtype if isinstance(h0, Traced) else h0)
    at_zero = np.where(x == 0, h0, _heaviside_nan(x, dtype))  # (h0's NaN bits kept)
    return np.where(x < 0, 0.0, np.where(x > 0, 1.0, at_zero))


def _heaviside_nan(x: Any, dtype: np.dtype[Any]) -> Any:
    """What numpy's heaviside of `dtype` gives where x is NaN: its own NaN (positive, quiet:
    `NPY_NAN`), but x itself in bfloat16 (ml_dtypes' loop passes it on)."""
    if dtype == numpy_dtype("bfloat16"):
        return x
    return np.where(x != x, np.nan, x) if isinstance(x, Traced) else np.nan


def _nan_to_num(
    x: Traced, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None
) -> Traced:
    """numpy's nan_to_num: NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (the
    dtype's largest finite numbers by default), each rounded to x's dtype first, as numpy
    stores them into x's copy; for bfloat16 too (numpy's returns a bfloat16 array as it is,
    not knowing it for a float)."""
    if not copy:
        raise TypeError(
            "np.nan_to_num(x, copy=False) writes x in numpy, and @xfuse.jit does not write its "
            "arguments: drop copy=False (the result is returned)"
        )
    if x.mask:  # a copy, as numpy's of a non-float array (it failed naming `where`)
        return x.copied()
    import ml_dtypes  # here: importing it costs ~1 s of CPU (see numpy_dtype)

    largest = ml_dtypes.finfo(x.element_dtype).max
    fill = [
        x.element_dtype.type(default if value is None else value)
        for value, default in ((nan, 0.0), (posinf, largest), (neginf, -largest))
    ]
    replaced = np.where(x == -np.inf, fill[2], x)
    return np.where(x != x, fill[0], np.where(x == np.inf, fill[1], replaced))


class NotCombinableError(TypeError):
    """An operand that does not trace (an array, a string, a list), `operand`: a jit function
    called from a trace tells its own array default by it."""

    def __init__(self, operand: Any):
        super().__init__(
            f"cannot combine a traced array with {type(operand).__name__}: inside @xfuse.jit use "
            "the function's array arguments, Python numbers (int, float: float(value) for "
            "another kind of number) and numpy scalars"
        )
        self.operand = operand

    def __reduce__(self) -> tuple[type[TypeError], tuple[Any, ...]]:
        return TypeError, self.args  # (its operand, an array of the trace, does not travel)


def _not_combinable(other: Any) -> TypeError:
    """The error of an operand that does not trace (an array, a string, a list)."""
    return NotCombinableError(other)


def _traced_or_scalar(value: Any) -> Any:
    """`value` where it traces: a traced array, a Python number, a numpy scalar (a 0-d array as
    its scalar), as `Traced._lift` takes them; else `_not_combinable`, for the functions that
    compute with their operands before lifting them."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, Traced | int | float | np.generic):
        return value
    raise _not_combinable(value)


def _rounded_in(number: float, dtype: np.dtype[Any]) -> bool:
    """Whether `dtype` holds another value than the Python `number` (a mask holds its 1s and 0s
    in the dtype it compared)."""
    with np.errstate(over="ignore"):
        try:
            return float(dtype.type(number)) != number  # (numpy would round `number` too)
        except OverflowError:  # (an int past float64's range)
            return True


def _in_float32_where_narrower(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` as numpy's float16 loops (and ml_dtypes' bfloat16 ones) of a ufunc compute
    it: in float32 from the widened operands, rounded once to the result's dtype."""

    def traced(*args: Any) -> Any:
        args = tuple(map(_traced_or_scalar, args))  # (numpy read a list as a dtype's fields)
        dtype = np.result_type(*(a.element_dtype if isinstance(a, Traced) else a for a in args))
        if dtype.itemsize >= 4:
            return function(*args)
        # (a Python number takes the narrow dtype first, NEP 50, as numpy's loop gets it)
        wide = [
            a.astype(np.float32)
            if isinstance(a, Traced)
            else np.float32(dtype.type(a))
            if isinstance(a, int | float)
            else a
            for a in args
        ]
        return function(*wide).astype(dtype)

    return traced


def _logaddexp(x: Any, y: Any, base2: bool) -> Any:
    """numpy's logaddexp (logaddexp2 where `base2`): log(b^x + b^y) as the larger plus
    log1p(b^-|x - y|) (in base b), x + log_b(2) where x == y (infinities of one sign); NaN
    where either is (numpy's loops branch on x - y > 0, the same values)."""
    difference = abs(x - y)
    if base2:
        tail, same = np.log1p(np.exp2(-difference)) * (1 / math.log(2)), 1.0
    else:
        tail, same = np.log1p(np.exp(-difference)), math.log(2)
    larger = np.maximum(x, y)  # (x where x == y, in the promoted dtype: x + same was in x's)
    return np.where(x == y, larger + same, larger + tail)


def _times_numpys_constant(ufunc: np.ufunc) -> Callable[[Traced], Traced]:
    """numpy's deg2rad or rad2deg: x times its constant in x's dtype (`ufunc` of 1)."""

    def traced(x: Traced) -> Traced:
        return x * ufunc(x.element_dtype.type(1))

    return _in_float32_where_narrower(traced)


_UFUNCS_OF_OPS: dict[np.ufunc, Callable[..., Traced]] = {
    # np.clip of an array or scalar (`np.clip(0.5, x, y)`), as numpy's clip method calls it
    umath.clip: lambda a, low, high: np.minimum(np.maximum(a, low), high),
    np.square: lambda x: x * x,
    np.reciprocal: lambda x: 1 / x,
    np.positive: lambda x: +x,
    np.logical_and: _traced_first(lambda a, b: _truth(a) & _truth(b)),
    np.logical_or: _traced_first(lambda a, b: _truth(a) | _truth(b)),
    np.logical_xor: _traced_first(lambda a, b: _truth(a) ^ _truth(b)),
    np.logical_not: lambda a: ~_truth(a),
    np.bitwise_and: _traced_first(operator.and_),
    np.bitwise_or: _traced_first(operator.or_),
    np.bitwise_xor: _traced_first(operator.xor),
    np.invert: lambda a: ~a,
    np.isnan: lambda a: a != a,
    # of a mask, as numpy's of booleans: none is inf, all are finite
    np.isinf: lambda a: a != a if a.mask else abs(a) == np.inf,
    np.isfinite: lambda a: a == a if a.mask else abs(a) < np.inf,
    np.fmax: _fmax,
    np.fmin: _fmin,
    np.sign: _sign,
    np.heaviside: _heaviside,
    np.fabs: abs,
    np.signbit: lambda x: np.copysign(1, x) < 0,
    np.logaddexp: _in_float32_where_narrower(lambda x, y: _logaddexp(x, y, base2=False)),
    np.logaddexp2: _in_float32_where_narrower(lambda x, y: _logaddexp(x, y, base2=True)),
    np.deg2rad: _times_numpys_constant(np.deg2rad),
    np.radians: _times_numpys_constant(np.radians),
    np.rad2deg: _times_numpys_constant(np.rad2deg),
    np.degrees: _times_numpys_constant(np.degrees),
}
"""numpy's ufuncs written with `ew` ops, each as numpy computes it: `np.square(x)` is `x * x`,
`np.reciprocal(x)` is `1 / x` (the same roundings); `np.positive` is the array itself; the
logical and bitwise ones are the operators on masks (`Traced.mask`), `np.isnan` and its
siblings masks; `np.fmax`, `np.sign` and their siblings comparisons and `np.where`s;
`np.fabs` is `abs`, `np.signbit` the sign `np.copysign` gives 1; `np.logaddexp(2)`,
`np.deg2rad` and `np.rad2deg` (and `np.radians`, `np.degrees`) as numpy defines them, in
float32 for float16 and bfloat16 (`_in_float32_where_narrower`)."""

_UFUNCS_OF_MASKS = frozenset(
    {
        *(np.logical_and, np.logical_or, np.logical_xor, np.logical_not),
        *(np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert),
        *(np.isnan, np.isinf, np.isfinite),
    }
)
"""The ufuncs of `_UFUNCS_OF_OPS` that take a mask; any other of one is refused naming itself
(`np.sign(m)` said "where: its arms are values", the op it is made of)."""

_SQRT_POWER_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""The dtypes whose `np.power` loop takes a scalar exponent of 0.5 as `np.sqrt` (numpy's
`POWER_FAST_PATH`: sqrt(-0) is -0 and sqrt(-inf) NaN, where C's pow gives +0 and +inf); float16's
and bfloat16's loops call pow."""


_ELEMENTWISE_ONLY = (
    "@xfuse.jit compiles numpy's arithmetic and comparisons, the ufuncs that are `ew` ops, "
    "np.clip, np.where, np.round, np.nan_to_num and xfuse's functions into elementwise "
    "kernels, and no other numpy function or method; compute it outside the jit function, on "
    "its arguments or its results"
)
"""Why a numpy function other than those (a reduction, np.dot, ...) cannot be traced."""

_ROUNDING_FUNCTIONS: frozenset[Callable[..., Any]] = frozenset({np.round, np.around})
"""numpy's rounding functions that are not ufuncs and take `decimals` (`Traced.round`); np.fix
is np.trunc, the ufuncs np.rint, np.floor, np.ceil and np.trunc are `ew` ops."""

_KEYWORD_HINTS = {
    "out": "the jit function returns its results: return them, and pass out= to its call to "
    "store them in a buffer",
    "dtype": "convert with .astype(dtype) instead",
}
"""What to write instead of a ufunc keyword `@xfuse.jit` does not trace, where there is one."""

_CLIP_PARAMETERS = frozenset({"a", "a_min", "a_max", "min", "max", "out"})
"""The keywords of np.clip that trace (`out` only as None: checked apart)."""
_CLIP_BOUNDS = frozenset({(), ("a_min", "a_max"), ("min",), ("max",), ("min", "max")})
"""The bounds np.clip takes by name, as numpy's clip allows them (its older `a_min` and `a_max`
both, or the array API's `min` or `max`); numpy says what is wrong with any other."""


_UFUNC_DEFAULTS: dict[str, object] = {
    "where": True,
    "casting": "same_kind",
    "order": "K",
    "dtype": None,
    "subok": True,
}
"""A ufunc's keywords at numpy's defaults, which change nothing: traced as if left out
(`np.add(x, 1, where=True)` was "where= is not supported in tracing")."""

_ASTYPE_DEFAULTS: dict[str, object] = {"order": "K", "casting": "unsafe", "subok": True}
"""`ndarray.astype`'s, likewise."""


def _is_default(name: str, value: object, default: object) -> bool:
    """`value` of keyword `name` is `default`: the same bool (a numpy bool too for `where`, as
    numpy takes it there alone), None, or the same string."""
    if isinstance(default, bool):
        kinds = bool | np.bool_ if name == "where" else bool
        return isinstance(value, kinds) and bool(value) is default
    return value is None if default is None else isinstance(value, str) and value == default


def _without_defaults(keywords: dict[str, Any], defaults: dict[str, object]) -> dict[str, Any]:
    """`keywords` less those at their `defaults` value."""
    return {
        name: value
        for name, value in keywords.items()
        if not (name in defaults and _is_default(name, value, defaults[name]))
    }


def _keywords_not_traced(function: str, keywords: list[str]) -> TypeError:
    """The error for `np.<function>` called with `keywords` that do not trace."""
    listed = ", ".join(f"{keyword}=" for keyword in keywords)
    hint = next((_KEYWORD_HINTS[k] for k in keywords if k in _KEYWORD_HINTS), None)
    several = len(keywords) > 1
    return TypeError(
        f"np.{function}(..., {listed}) cannot be traced: the keyword argument"
        f"{'s' if several else ''} {listed} {'are' if several else 'is'} not supported in "
        f"tracing; {hint or f'call np.{function} with its operands alone'}"
    )


def _is_one_half(value: Any) -> bool:
    """Whether `value` is a scalar exponent of 0.5 (a Python number or a real numpy scalar)."""
    if isinstance(value, np.generic):
        return not isinstance(value, np.complexfloating) and bool(value == 0.5)
    return isinstance(value, int | float) and value == 0.5


_MASKS_ONLY = (
    "a comparison's result is a boolean mask: pick values with it (np.where(mask, a, b), "
    "xfuse.where), combine masks with &, |, ^ and ~, or make it numbers with "
    "mask.astype(dtype) (1 and 0) to compute with it"
)
"""What a traced comparison's result is for (numpy's booleans; xfuse's masks are 1 and 0)."""


def _power_of_ten(n: int) -> float:
    """10**n as numpy's `round` makes it: exact up to 1e9, then multiplied by 10 one step at a
    time, inexact from 1e25 on (the correctly rounded 10.0**n gave other bits of `np.round(x,
    25)` and beyond in float64); inf past the largest float (its result is then NaN)."""
    if n <= 9:
        return 10.0**n
    power = 1e9
    for _ in range(n - 9):
        power *= 10.0
        if power == math.inf:
            break
    return power


def _byte_swapped(dtype: Any) -> np.dtype[Any] | None:
    """The native dtype of `dtype` where it spells a byte-swapped one that xfuse computes in
    natively (`">f8"` on x86), else None."""
    try:
        given = np.dtype(dtype)
        native = given.newbyteorder("=")
        element_type_for(native)
    except (TypeError, ValueError):
        return None
    return None if given.isnative else native


def _is_bool(dtype: Any) -> bool:
    """Whether `dtype` spells numpy's bool (`bool`, `np.bool_`, `"?"`, a mask's `.dtype`)."""
    try:
        return np.dtype(dtype) == np.bool_
    except TypeError:
        return False


class LeakedTraceError(TypeError):
    """A traced array of one trace used in another (JAX's UnexpectedTracerError): it was kept
    between calls, in a closure's list, a global or an attribute. It failed in xDSL's verifier
    ("value defined out of its IsolatedFromAbove parent"), naming no cause."""

    def __init__(self) -> None:
        super().__init__(
            "a traced array of an earlier trace is used in this one: a jit function is traced "
            "again for each new signature of its arguments, and a traced array it kept (in a "
            "list, a global or an attribute) belongs to the trace that made it; compute it "
            "from this call's arguments"
        )

    def __reduce__(self) -> tuple[type[LeakedTraceError], tuple[()]]:
        return LeakedTraceError, ()  # (its __init__ takes no message: a pool's worker sends it)


class Traced:
    """A value of the function being traced; arithmetic on it records `ew` ops.

    A comparison's result is a `mask`: numpy's boolean array, held as 1 and 0 of the compared
    dtype (`ew.CompareOp`). It goes where numpy's booleans go unchanged (np.where, &, |, ^, ~,
    comparisons of masks, `.astype`), and nowhere else: numpy's arithmetic on booleans (`m + m`
    is a logical or, `m * 2.0` float64) is not the arithmetic of 1 and 0.
    """

    __array_priority__ = 1000  # numpy scalars on the left defer to our reflected operators

    def __init__(
        self, builder: FunctionBuilder, value: SSAValue, mask: bool = False, argument: bool = False
    ):
        self.builder = builder
        self.value = value
        self.mask = mask
        self.argument = argument
        """The function's argument itself (the caller's array, which `x += 1` would write), not
        a copy of it (`+x`, `x.astype(x.dtype)`), though both are its block argument."""
        self.zero_d_array = False
        """A 0-d value numpy holds as an array, which `+=` updates (`np.where`'s and
        `xfuse.where`'s, their `.astype` and copies): a ufunc gives 0-d operands a numpy scalar,
        which `+=` rebinds."""

    def __repr__(self) -> str:  # (`print(x)` in a jit function showed an object's address)
        dims = ", ".join("?" if size < 0 else str(size) for size in self._type_shape)
        return f"<traced {self.dtype} array [{dims}]: its values exist at the call>"

    def _lift(self, other: Any) -> Value:
        if isinstance(other, Traced):
            if other.builder is not self.builder:
                raise LeakedTraceError()
            return other.value
        if isinstance(other, np.ndarray) and other.ndim == 0:  # (as `__array_ufunc__` takes it)
            other = other[()]
        if isinstance(other, np.generic):
            return self._numpy_scalar(other)
        if isinstance(other, int | float):  # bool is an int; NEP 50's weak Python scalars
            return self.builder.literal(float(other))
        raise _not_combinable(other)

    def _numpy_scalar(self, scalar: np.generic) -> SSAValue:
        """A numpy scalar is typed (NEP 50), unlike a Python number: a constant of the dtype
        numpy gives it with this array. `np.sqrt(2 / np.pi) * x` is float64 for a float32 `x`,
        as in numpy, and `x + np.float16(1e5)` is inf (float16 has no 1e5)."""
        array_dtype = self.element_dtype
        try:
            element = element_type_for(np.result_type(array_dtype, scalar))
        except (TypeError, ValueError):  # (numpy's DTypePromotionError is a TypeError)
            raise TypeError(
                f"cannot combine a traced {array_dtype} array with a {scalar.dtype} scalar: "
                "xfuse computes in float16, bfloat16, float32 and float64"
            ) from None
        return self.builder.convert(self.builder.literal(_exact_float(scalar)), element)

    def apply(self, op_type: ew.ElementwiseOpType, *operands: Any) -> Traced:
        """`op_type` on `operands` (this array among them), numpy's way: a comparison gives a
        mask; `ew.select` is `where`; a mask is an operand of comparisons of masks only."""
        if op_type is ew.SelectOp:
            return self.where(*operands)
        comparison = issubclass(op_type, ew.CompareOp)
        arrays = [o for o in operands if isinstance(o, Traced)]
        masks = [a.mask for a in arrays]
        if any(masks) and not (comparison and all(masks)):
            raise TypeError(f"{op_type.name}: {_MASKS_ONLY}")
        if any(masks) and any(
            isinstance(o, int | float) and _rounded_in(o, a.element_dtype)
            for o in operands
            for a in arrays
        ):  # numpy compares a bool with a Python number as it is: `m < 1e-8` of float16 was 0
            operands = tuple(o.astype(np.float64) if isinstance(o, Traced) else o for o in operands)
        return self._record(op_type, *operands, mask=comparison)

    def _record(self, op_type: ew.ElementwiseOpType, *operands: Any, mask: bool = False) -> Traced:
        values = [self._lift(operand) for operand in operands]
        try:
            result = self.builder.apply(op_type, *values)
            assert isinstance(result, SSAValue)  # a Traced operand is never weak
            return Traced(self.builder, result, mask)
        except ValueError as error:
            raise ValueError(f"{op_type.name}: {error}") from None

    def where(self, condition: Any, on_true: Any, on_false: Any) -> Traced:
        """`np.where(condition, on_true, on_false)`: of the arms' dtype (numpy's promotion of the
        two, `FunctionBuilder.apply`'s; float64 for two Python numbers), the condition a mask
        or an array that is true where nonzero (a NaN too)."""
        if not isinstance(condition, Traced):
            raise TypeError(
                "where(condition, ...): the condition must be a traced array (a comparison of "
                f"one, `x > 0`), not {type(condition).__name__}; a constant condition picks "
                "one arm, which needs no where"
            )
        arms = [a for a in (on_true, on_false) if isinstance(a, Traced)]
        if any(a.mask for a in arms):
            raise TypeError(f"where: its arms are values: {_MASKS_ONLY}")
        if not arms:  # two scalars: numpy's dtype of them (float64 for two Python floats)
            scalars = [
                a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a
                for a in (on_true, on_false)
            ]
            for scalar in scalars:  # (an array arm was numpy's "only 0-dimensional arrays ...")
                if not isinstance(scalar, int | float | np.generic):
                    raise _not_combinable(scalar)
            try:
                element = element_type_for(np.result_type(*scalars))
            except (TypeError, ValueError):
                raise TypeError(
                    f"where: the arms {on_true!r} and {on_false!r} make an array that is not of "
                    "floats in numpy (np.where(c, 1, 0) is of integers); xfuse computes floats: "
                    "write them as floats (1.0, 0.0) or numpy float scalars"
                ) from None
            arms = [
                Traced(self.builder, self.builder.convert(self.builder.literal(float(s)), element))
                for s in scalars
            ]
            on_true, on_false = arms
        # numpy scalars take their dtype beside an arm's (NEP 50), not beside the condition's
        return arms[0]._record(ew.SelectOp, condition, on_true, on_false)

    def _mask_op(self, op_type: ew.ElementwiseOpType, symbol: str, other: Any = None) -> Traced:
        """numpy's `symbol` on booleans as `op_type` on masks (1 and 0 in, 1 and 0 out): with
        `other` (a mask, or a Python or numpy bool), this mask and it; without, `op_type` of
        this mask and 0 (`~m` is `m == 0`)."""
        operand: Any = None  # (a float, `m & 2.0`, was taken for a bool)
        if isinstance(other, np.ndarray) and other.ndim == 0:  # (as `_lift` takes one)
            other = other[()]
        if isinstance(other, bool | np.bool_):
            operand = float(other)
        elif other is None:
            operand = 0.0
        elif isinstance(other, Traced) and other.mask:
            operand = other
        if not self.mask or operand is None:
            raise TypeError(
                f"`{symbol}` on traced arrays takes masks (comparisons' results, `x > 0`) and "
                "bools; numpy's bitwise operators on other arrays are on integers, which xfuse "
                "does not compute"
            )
        return self._record(op_type, self, operand, mask=True)

    def __and__(self, other: Any) -> Traced:
        return self._mask_op(ew.MulOp, "&", other)

    def __or__(self, other: Any) -> Traced:
        return self._mask_op(ew.MaxOp, "|", other)

    def __xor__(self, other: Any) -> Traced:
        return self._mask_op(ew.NeOp, "^", other)

    def __invert__(self) -> Traced:
        return self._mask_op(ew.EqOp, "~")

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __lt__(self, other: Any) -> Traced:
        return self.apply(ew.LtOp, self, other)

    def __le__(self, other: Any) -> Traced:
        return self.apply(ew.LeOp, self, other)

    def __gt__(self, other: Any) -> Traced:
        return self.apply(ew.GtOp, self, other)

    def __ge__(self, other: Any) -> Traced:
        return self.apply(ew.GeOp, self, other)

    def __eq__(self, other: Any) -> Traced:  # type: ignore[override]
        return self.apply(ew.EqOp, self, other)

    def __ne__(self, other: Any) -> Traced:  # type: ignore[override]
        return self.apply(ew.NeOp, self, other)

    __hash__ = object.__hash__  # defining `__eq__` unsets it

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

    @property
    def _is_numpy_scalar(self) -> bool:
        """Whether numpy holds this value as a numpy scalar: a 0-d result of its ufuncs (an
        argument may be a scalar or a 0-d array: one kernel serves both, traced as an array,
        and so are its `astype`s)."""
        return self._type_shape == () and not self.zero_d_array and not self.argument

    def __pow__(self, other: Any) -> Traced:
        if self._is_numpy_scalar and self.element_dtype.kind == "f" and _scalar_exponent(other):
            # a numpy scalar's `**` of a scalar is C's pow, without the arrays' sqrt paths:
            # pow(-inf, 0.5) is +inf and pow(-0, 0.5) +0 (an exponent that is a 0-d array takes
            # the ufunc's; ml_dtypes' bfloat16 scalar calls numpy's power, as an array does)
            return self.apply(ew.PowOp, self, other)
        if type(other) is float and other == 0.5 and self.element_dtype.kind == "f":
            # `x ** 0.5` is numpy's `np.sqrt(x)` for a float16, float32 or float64 array (its
            # operator's `fast_scalar_power`, for a Python float), whatever `np.power` does
            return self.apply(ew.SqrtOp, self)
        return self.power(other)

    def power(self, exponent: Any) -> Traced:
        """`np.power(self, exponent)` as numpy computes it: `np.sqrt` of the promoted array where
        the exponent is a scalar 0.5 and the result float32 or float64 (numpy's power loop
        takes that path), else `ew.pow` (C's pow). A traced 0-d exponent is one value to the
        loop too: `np.sqrt` where it is 0.5 at the call, as numpy's."""
        if isinstance(exponent, np.ndarray) and exponent.ndim == 0:  # (`x ** np.array(0.5)`)
            exponent = exponent[()]
        if isinstance(exponent, Traced) and exponent._type_shape == () and not self.mask:
            powered = self.apply(ew.PowOp, self, exponent)
            dtype = powered.element_dtype
            if dtype not in _SQRT_POWER_DTYPES:
                return powered
            element = element_type_for(dtype)
            promoted = Traced(self.builder, self.builder.convert(self.value, element))
            return powered.where(exponent == 0.5, promoted.apply(ew.SqrtOp, promoted), powered)
        if _is_one_half(exponent) and not self.mask:  # (a mask's: `apply` refuses it)
            if isinstance(exponent, np.generic):
                try:
                    dtype = np.result_type(self.element_dtype, exponent)
                except TypeError:  # no common dtype: `apply` says so
                    return self.apply(ew.PowOp, self, exponent)
            else:
                dtype = self.element_dtype
            if dtype in _SQRT_POWER_DTYPES:
                element = element_type_for(dtype)
                promoted = Traced(self.builder, self.builder.convert(self.value, element))
                return promoted.apply(ew.SqrtOp, promoted)
        return self.apply(ew.PowOp, self, exponent)

    def __rpow__(self, other: Any) -> Traced:
        return self.apply(ew.PowOp, other, self)

    def _in_place(self, result: Traced, operator: str) -> Traced:
        """`self <operator>= other` as numpy computes it: the result cast back to self's dtype
        (`h += y64` keeps a float32 `h` float32), and this very array updated, so that every name
        bound to it sees it (`b = a; b += 1` updates `a`, as does `t += 1` in a helper given `t`;
        a new proxy was `b` alone); but a 0-d value, a numpy scalar, is rebound. On an argument
        numpy would write the caller's array, which a kernel does not: that is an error saying
        what to write."""
        if self.argument:
            name = self.value.name_hint or "x"
            # (a 0-d one may be a numpy scalar, which numpy rebinds and no out= takes: traced
            # alike, the two are one kernel)
            zero_d = self._type_shape == ()
            where = "0-d array in numpy (a numpy scalar it rebinds)" if zero_d else "array"
            store = (
                "" if zero_d else f" (and pass out={name} to the call to store the result there)"
            )
            raise TypeError(
                f"`{operator}=` on the argument {name!r} (or a name bound to it) would update the "
                f"caller's {where}, and @xfuse.jit does not write its arguments: write "
                f"`{name} = {name} {operator} ...`{store}"
            )
        if self._is_numpy_scalar:
            # numpy's ufuncs give a numpy scalar for 0-d operands, which `+=` rebinds: the
            # result as it is, promoted, broadcast, and no other name sees it (`a = s * 0;
            # a += x` was refused as a larger array, and `g = h; g += 1` changed `h`)
            return result
        if result._type_shape != self._type_shape:
            raise ValueError(
                f"`{operator}=`: the operands broadcast to a larger array than the one updated "
                "in place (numpy: non-broadcastable output operand); write `y = y "
                f"{operator} ...`"
            )
        mask = result.mask  # (a mask's 1 and 0 convert exactly: `m &= y > 0` of f64 y stays one)
        if result.element_dtype != self.element_dtype:
            result = result.astype(self.element_dtype)
        self.value, self.mask = result.value, mask
        return self

    def __iadd__(self, other: Any) -> Traced:
        return self._in_place(self + other, "+")

    def __isub__(self, other: Any) -> Traced:
        return self._in_place(self - other, "-")

    def __imul__(self, other: Any) -> Traced:
        return self._in_place(self * other, "*")

    def __itruediv__(self, other: Any) -> Traced:
        return self._in_place(self / other, "/")

    def __ipow__(self, other: Any) -> Traced:
        return self._in_place(self**other, "**")

    # (without them, Python ran `k = k & m`: a new mask, which other names of `k` did not see)
    def __iand__(self, other: Any) -> Traced:
        return self._in_place(self & other, "&")

    def __ior__(self, other: Any) -> Traced:
        return self._in_place(self | other, "|")

    def __ixor__(self, other: Any) -> Traced:
        return self._in_place(self ^ other, "^")

    def __neg__(self) -> Traced:
        return self.apply(ew.NegOp, self)

    def __pos__(self) -> Traced:
        if self.mask:  # (as np.positive of one: numpy has no positive of booleans)
            raise TypeError(f"+ (np.positive): {_MASKS_ONLY}")
        return Traced(self.builder, self.value)  # numpy's +x is a copy (of 0-d, a scalar)

    def copied(self) -> Traced:
        """A copy, as numpy's `x.copy()` (of a mask too, of a 0-d array an array)."""
        copy = Traced(self.builder, self.value, self.mask)
        copy.zero_d_array = self.zero_d_array
        return copy

    def __copy__(self) -> Traced:  # `copy.copy(x)`; `copy.deepcopy` copied the builder's IR
        return self.copied()

    def __deepcopy__(self, memo: dict[int, Any]) -> Traced:
        return self.copied()

    def __abs__(self) -> Traced:
        return self.apply(ew.AbsOp, self)

    @property
    def _type_shape(self) -> tuple[int, ...]:
        """The shape of the traced array's type (-1 for a dynamic dim; not `.shape`, which the
        array's dims at a call would be)."""
        return tuple(cast(TensorType[Attribute], self.value.type).get_shape())

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the traced array (`x.astype(y.dtype)`): bool for a mask, as
        numpy's comparisons give (`element_dtype` is what the kernel computes it in)."""
        return np.dtype(np.bool_) if self.mask else self.element_dtype

    @property
    def element_dtype(self) -> np.dtype[Any]:
        """The numpy dtype the kernel computes the traced array in (a mask's 1 and 0 too)."""
        return numpy_dtype(dtype_of(ew.element_type(self.value.type)))

    def astype(self, dtype: Any, *positional: Any, copy: bool = True, **keywords: Any) -> Traced:
        """The traced array converted to `dtype` as numpy converts (round to nearest even):
        an `ew.convert`, the `.ew` language's `bf16(...)`; the same array where the dtype is its
        own f32 or f64 (an f16 or bf16 one rounds what a kernel holds in f32, as numpy's value
        is rounded). `(y + r).astype(ml_dtypes.bfloat16)` stores an f32 result in bf16.
        `copy=False` to its own dtype is the array itself, as numpy's is (so `+=` on it updates
        both names, and on an argument is refused: it would write the caller's array), but of an
        f16 or bf16 value a kernel holds in f32: a copy, rounded as `copy=True` rounds it (in
        numpy it is rounded already; `+=` on it then reaches the one name only).
        numpy's other keywords (`order=`, `casting=`, `subok=`) do not trace but at their
        defaults (they were Python's "unexpected keyword argument"). `astype(bool)` is a mask,
        `x != 0` (a mask's `m.dtype` is bool)."""
        if positional:  # (numpy's second is `order`: `astype(np.float32, False)` was copy)
            raise TypeError(
                f"astype({dtype!r}, ...): numpy's arguments after the dtype (order, casting, "
                "subok, copy) do not trace by position; pass copy= by keyword"
            )
        keywords = _without_defaults(keywords, _ASTYPE_DEFAULTS)
        if keywords:
            raise _keywords_not_traced("astype", list(keywords))
        if _is_bool(dtype):  # numpy's: true where nonzero (NaN too), a mask as it is
            if self.mask and not copy:
                return self  # (numpy's mask itself: `&=` on either name updates both)
            tested = self.copied() if self.mask else self != 0
            tested.zero_d_array = self.zero_d_array  # (an array's astype is an array)
            return tested
        try:
            element = element_type_for(dtype)
        except ValueError:
            swapped = _byte_swapped(dtype)
            if swapped is not None:
                raise TypeError(
                    f"astype({dtype!r}): a kernel computes in the machine's byte order; convert "
                    f"to {swapped.name} (astype(np.{swapped.name})) and byte-swap the result "
                    "after the call"
                ) from None
            raise TypeError(
                f"astype({dtype!r}): xfuse computes in float16, bfloat16, float32 and float64"
            ) from None
        own = element == ew.element_type(self.value.type)
        if not copy and own and (self.argument or ew.compute_type(element) == element):
            return self  # (numpy's array itself: `+=` on either name updates both)
        converted = Traced(self.builder, self.builder.convert(self.value, element, explicit=True))
        # (an array's astype is an array; an argument is traced as one)
        converted.zero_d_array = self.zero_d_array or self.argument
        return converted

    def clip(self, min: Any = None, max: Any = None, out: None = None, **keywords: Any) -> Traced:
        """`np.clip(x, min, max)` (numpy calls this method; `x.clip(min=0.0)` too, numpy's
        array method's names): minimum(maximum(x, min), max), as numpy defines it; either
        bound may be None. ReLU6 is `np.clip(x, 0, 6)`. A ufunc's keywords trace at their
        defaults alone, as `np.clip`'s."""
        refused = ["out"] * (out is not None) + list(_without_defaults(keywords, _UFUNC_DEFAULTS))
        if refused:
            raise _keywords_not_traced("clip", refused)
        # numpy's clip promotes the three at once: a Python bound is not rounded to x's dtype
        # beside a wider one (`np.clip(x32, 0.1, hi64)` is 0.1, not float32's 0.1 widened)
        bounds = [
            b.dtype if isinstance(b, Traced) else b
            for b in (min, max)
            if isinstance(b, Traced | np.generic | np.ndarray | int | float)
        ]
        try:
            dtype = np.result_type(self.dtype, *bounds)
        except TypeError:  # (numpy's DTypePromotionError: a timedelta64 bound)
            kinds = [
                type(b).__name__ if isinstance(b, int | float) else str(np.result_type(b))
                for b in bounds
            ]
            raise TypeError(
                f"clip: cannot combine a traced {self.dtype} array with bounds of "
                f"{', '.join(kinds)}: xfuse computes in float16, bfloat16, float32 and float64"
            ) from None
        base = self if self.mask or dtype == self.element_dtype else self.astype(dtype)
        clipped = +base if min is None else base.apply(ew.MaxOp, base, min)  # (a copy)
        return clipped if max is None else clipped.apply(ew.MinOp, clipped, max)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        # A numpy scalar's operator (`np.float32(0) < x`) hands numpy's ufunc a 0-d array of it
        inputs = tuple(i[()] if isinstance(i, np.ndarray) and i.ndim == 0 else i for i in inputs)
        kwargs = _without_defaults(kwargs, _UFUNC_DEFAULTS)
        op_type = _OPS_BY_UFUNC.get(ufunc)
        composite = _UFUNCS_OF_OPS.get(ufunc)
        if method == "__call__" and not kwargs and composite is not None:
            masks = any(isinstance(i, Traced) and i.mask for i in inputs)
            if masks and ufunc not in _UFUNCS_OF_MASKS:
                raise TypeError(f"np.{ufunc.__name__}: {_MASKS_ONLY}")
            result = composite(*inputs)
            if isinstance(result, Traced) and result.zero_d_array:  # (a where of its own:
                # numpy's ufunc gives a scalar)
                result = Traced(self.builder, result.value, result.mask)
            return result
        if method == "__call__" and not kwargs and ufunc is np.power and inputs[0] is self:
            return self.power(inputs[1])
        if method != "__call__":  # np.add.reduce, np.maximum.accumulate, np.add.outer, ...
            raise TypeError(f"np.{ufunc.__name__}.{method} cannot be traced: {_ELEMENTWISE_ONLY}")
        if op_type is None and composite is None:
            traceable = [*_OPS_BY_UFUNC, *_UFUNCS_OF_OPS]
            supported = ", ".join(sorted(f"np.{u.__name__}" for u in traceable))
            raise TypeError(
                f"np.{ufunc.__name__} cannot be traced: inside @xfuse.jit use "
                f"{supported}, or xfuse's functions (xfuse.erf, xfuse.sigmoid, ...)"
            )
        if kwargs:
            raise _keywords_not_traced(ufunc.__name__, list(kwargs))
        assert op_type is not None  # a composite without keywords returned above
        return self.apply(op_type, *inputs)

    def __array_function__(
        self, func: Callable[..., Any], types: Any, args: Any, kwargs: Any
    ) -> Any:
        """numpy's functions that are not ufuncs: np.clip traces (as `clip`), np.where of three
        arguments (as `where`), np.astype (as `astype`), np.nan_to_num, np.round and np.fix;
        any other (np.sum, np.dot, np.concatenate, ...) raises, as without this numpy took a
        traced array for a 0-d object array, and `np.dot(x, x)` traced as `x * x`."""
        if func is np.nan_to_num:  # (a scalar of 0-d, as numpy's: not its wheres' array)
            replaced = _nan_to_num(*args, **kwargs)
            return Traced(replaced.builder, replaced.value, replaced.mask)
        if func is np.astype:  # (numpy 2's function spelling of the method)
            bound = inspect.signature(func).bind(*args, **kwargs).arguments
            if bound.get("device") not in (None, "cpu"):
                raise _keywords_not_traced("astype", ["device"])
            return bound["x"].astype(bound["dtype"], copy=bound.get("copy", True))
        if func is np.result_type:  # dtypes only: a traced array's `.dtype` (bool for a mask)
            return np.result_type(*(a.dtype if isinstance(a, Traced) else a for a in args))
        if func is np.where:
            if len(args) != 3 or kwargs:
                raise TypeError(
                    "np.where cannot be traced but as np.where(condition, x, y): np.where("
                    "condition) gives the indices where it holds, not an elementwise result"
                )
            chosen = self.where(*args)
            chosen.zero_d_array = chosen._type_shape == ()  # (numpy's is an array, even 0-d)
            return chosen
        if func is np.clip:
            # numpy's clip takes a ufunc's keywords too, and retries a TypeError of `clip`'s
            # on an object array (numpy's own error, or one about comparisons): check here.
            kwargs = _without_defaults(kwargs, _UFUNC_DEFAULTS)
            out = kwargs.get("out", args[3] if len(args) > 3 else None)
            keywords = [k for k in kwargs if k not in _CLIP_PARAMETERS]
            if out is not None or keywords:
                raise _keywords_not_traced("clip", ["out"] * (out is not None) + keywords)
            bound = inspect.signature(func).bind(*args, **kwargs).arguments
            given = tuple(name for name in ("a_min", "a_max", "min", "max") if name in bound)
            if isinstance(bound["a"], Traced) and given in _CLIP_BOUNDS:
                # its own error, where numpy's retry of a TypeError on an object array hid it
                low = bound.get("a_min", bound.get("min"))
                return bound["a"].clip(low, bound.get("a_max", bound.get("max")))
            return cast(Any, func)._implementation(*args, **kwargs)
        if func in _ROUNDING_FUNCTIONS or func is np.fix:
            parameters = inspect.signature(func).bind(*args, **kwargs).arguments
            if parameters.get("out") is not None:
                raise _keywords_not_traced(func.__name__, ["out"])
            if func is np.fix:
                return self.apply(ew.TruncOp, parameters["x"])
            return parameters["a"].round(parameters.get("decimals", 0))
        module = "np" if func.__module__ == "numpy" else func.__module__
        raise TypeError(f"{module}.{func.__name__} cannot be traced: {_ELEMENTWISE_ONLY}")

    def __getitem__(self, _: Any) -> Any:
        raise TypeError(
            "indexing and slicing cannot be traced: @xfuse.jit compiles elementwise programs "
            "on whole arrays; slice the arrays before the call and pass the slices"
        )

    def __setitem__(self, _: Any, __: Any) -> None:
        raise TypeError(
            "assigning to elements (`y[0] = v`, `y[m] = v`) cannot be traced: @xfuse.jit "
            "compiles elementwise programs on whole arrays; pick values elementwise instead: "
            "y = np.where(m, v, y)"
        )

    def __bool__(self) -> bool:
        raise TypeError(
            "traced arrays have no truth value: @xfuse.jit traces one path through the "
            "function, so data-dependent control flow (`if x > 0:`, `and`, `or`) cannot be "
            "compiled; pick values elementwise instead: np.where(x > 0, x, 0.01 * x), masks "
            "combined with & | ~, xfuse.maximum(x, y)"
        )

    def _no_floor_division(self, *_: Any) -> Any:
        raise TypeError(
            "floor division and remainder (`//`, `%`, divmod) cannot be traced: numpy computes "
            "them from an exact remainder (fmod), which xfuse has not (np.floor(x / y) rounds "
            "x / y first, so it may be 1 more); compute them outside the @xfuse.jit function "
            "with numpy (np.floor_divide, np.remainder)"
        )

    __floordiv__ = __rfloordiv__ = __ifloordiv__ = _no_floor_division
    __mod__ = __rmod__ = __imod__ = __divmod__ = __rdivmod__ = _no_floor_division

    def _not_a_number(self, *_: Any) -> Any:
        raise TypeError(
            "a traced array is not a Python number: inside @xfuse.jit use numpy's or xfuse's "
            "functions on it (np.exp(x), xfuse.sqrt(x)), not the math module's or float()"
        )

    __float__ = __int__ = __index__ = __complex__ = _not_a_number

    def __array__(self, *_: Any, **__: Any) -> NoReturn:
        # numpy's constructors (`np.float32(x)`, `np.asarray(x)`) ask for the array's data:
        # without this they took a traced array for a sequence ("setting an array element
        # with a sequence").
        raise TypeError(
            "a traced array has no data to make a numpy array or scalar of: inside @xfuse.jit "
            "convert it with x.astype(dtype) (np.float32(x) in numpy), and compute with it "
            "through numpy's elementwise functions"
        )

    def round(self, decimals: int = 0, out: None = None) -> Traced:
        """`np.round(x, decimals)` (`x.round()`, Python's `round(x)`) as numpy computes it: the
        nearest integer, a tie to the even one (`ew.rint`), of `x * 10**decimals` divided back
        (for negative `decimals`, `x / 10**-decimals` multiplied back)."""
        if out is not None:
            raise _keywords_not_traced("round", ["out"])
        if not isinstance(decimals, int | np.integer):
            raise TypeError(f"round(x, decimals): decimals must be an integer, not {decimals!r}")
        if decimals == 0:
            return self.apply(ew.RintOp, self)
        scale = _power_of_ten(abs(int(decimals)))
        if decimals > 0:
            return self.apply(ew.RintOp, self * scale) / scale
        return self.apply(ew.RintOp, self / scale) * scale

    def _python_rounding(self, *_: Any) -> Any:
        raise TypeError(
            "round(x) and math.floor/ceil/trunc(x) round one Python number (a numpy array has "
            "no __round__); on a traced array use np.round(x), np.floor(x), np.ceil(x) or "
            "np.trunc(x)"
        )

    # Python's own rounding looks these up on the type: without them round(x) said "type Traced
    # doesn't define __round__ method", naming no way to round.
    __round__ = __floor__ = __ceil__ = __trunc__ = _python_rounding

    def _not_elementwise(self, *_: Any) -> Any:
        raise TypeError(
            "a traced array has no length, no elements to iterate and no matrix product: "
            "@xfuse.jit compiles elementwise programs; compute len(), loops over elements, `@` "
            "and reductions outside the @xfuse.jit function"
        )

    # Not `__getitem__`: numpy would take a proxy for a sequence (`np.where(x, ...)` said
    # "setting an array element with a sequence" instead of `__bool__`'s message).
    __len__ = __iter__ = __contains__ = _not_elementwise
    __matmul__ = __rmatmul__ = __imatmul__ = _not_elementwise

    def __getattr__(self, name: str) -> NoReturn:
        """Only for what the class lacks: numpy's array attributes (`.shape`, `.sum`), which
        said "'Traced' object has no attribute 'shape'"; AttributeError still (`hasattr`)."""
        if name.startswith("__"):  # protocols numpy and copy look up: the plain error
            raise AttributeError(name)
        raise AttributeError(
            f"a traced array has no attribute {name!r}: inside @xfuse.jit an array is known by "
            "its dtype (`.dtype`), not its dims, and only elementwise operations trace (numpy's "
            "operators and ufuncs, xfuse's functions, .astype, .clip)"
        )


_NAN_LAYOUT_OF_DTYPE = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def _exact_float(scalar: np.generic) -> float:
    """A numpy float scalar as the Python float of its value, a NaN's sign, payload and
    signalling bit kept: `float()` of a float16 or float32 NaN goes through C's conversion,
    which quiets a signalling one (`np.where(x > 0, x, s)` of a float32 0x7F800001 stored
    0x7FC00001, where numpy passes its bits on)."""
    layout = _NAN_LAYOUT_OF_DTYPE.get(scalar.dtype.name)
    if layout is None or not np.isnan(scalar):
        return float(scalar)
    return cast(float, NAN_LAYOUTS[layout].value(int(scalar.view(f"u{scalar.dtype.itemsize}"))))


def _number_array(given: Any) -> np.ndarray:
    """`given` as an array; a Python int beyond int64 and uint64 (of which numpy makes an
    array of objects) as the float it is, as numpy's ufuncs take it (`2**64`; past float64's
    range, Python's OverflowError, as theirs)."""
    array = np.asarray(given)
    if array.dtype == object and isinstance(given, int):
        return np.asarray(float(given))
    return array


def _elementwise(op_type: ew.ElementwiseOpType, name: str) -> Callable[..., Any]:
    """The function `xfuse.<name>`: records the op on traced values, else computes with numpy.
    It takes the op's operands, no more and no fewer (numpy's path took an extra one as its
    ufunc's `out` and dropped it; inside jit it was an internal error), and no complex number
    (numpy's path dropped the imaginary part with a warning), nor anything else numpy does not
    compute with (`None` was NaN, a string a number)."""
    count = ew.arity(op_type)
    operands = ("condition", "x", "y") if op_type is ew.SelectOp else ("x", "y")[:count]

    def function(*args: Any) -> Any:
        if len(args) != count:
            raise TypeError(
                f"xfuse.{name}() takes {count} argument{'s' * (count > 1)} "
                f"({', '.join(operands)}), {len(args)} given"
            )
        traced = next((a for a in args if isinstance(a, Traced)), None)
        if traced is not None:
            result = traced.apply(op_type, *args)
            # (xfuse.where's 0-d result is an array, as its eager one and np.where's are)
            result.zero_d_array = op_type is ew.SelectOp and result._type_shape == ()
            return result
        dask_array = sys.modules.get("dask.array")  # (not imported: no dask array here)
        is_dask = [dask_array is not None and isinstance(a, dask_array.Array) for a in args]
        for given, lazy in zip(args, is_dask, strict=True):
            # (numpy's masked ufuncs keep the mask; a masked dask array's blocks are masked)
            problem = array_kind_problem(given._meta if lazy else given)
            if problem is not None:
                raise TypeError(f"xfuse.{name}(): {problem}")
        if any(is_dask):
            # lazy, as np.tanh's and a kernel's of dask arrays (it computed the graph, twice);
            # the dtype of one element each, which raises this function's own errors (dask's
            # `elemwise` returns NotImplemented where its own inference fails)
            from dask.array.core import elemwise  # (what dask's own ufuncs broadcast with)

            samples = [
                np.ones((1,) * a.ndim, a.dtype) if lazy else a
                for a, lazy in zip(args, is_dask, strict=True)
            ]
            return elemwise(function, *args, dtype=np.asarray(function(*samples)).dtype)
        arrays = [_number_array(a) for a in args]
        # (None was NaN, "3" was 3.0, a complex number lost its imaginary part: numpy refuses)
        kinds = [a.dtype.kind if a.dtype != numpy_dtype("bfloat16") else "f" for a in arrays]
        for given, kind in zip(args, kinds, strict=True):
            if kind not in "biuf":
                what = (
                    f"an array of {given.dtype}" if isinstance(given, np.ndarray) else repr(given)
                )
                raise TypeError(f"xfuse.{name}(): xfuse computes with real numbers, not {what}")
        # NEP 50: a Python number takes the array's dtype (`xfuse.maximum(x, 0.0)` keeps x's);
        # where's result has its arms' dtype. Of dtypes, not arrays: ml_dtypes promotes a Python
        # float before a bfloat16 array to float32 (`np.result_type(0.1, a)`), after it not.
        first = 1 if op_type is ew.SelectOp else 0  # (where's condition is no value)
        if first:  # tested here, in its own dtype (a longdouble 1e-4000 was 0 as a float64)
            arrays[0] = arrays[0] != 0
        dtype = np.result_type(
            *(
                given if isinstance(given, int | float) else array.dtype
                for given, array in zip(args[first:], arrays[first:], strict=True)
            )
        )
        floating = np.issubdtype(dtype, np.floating) or dtype == numpy_dtype("bfloat16")
        if not floating:  # (computed in float64, `maximum` of int64s lost 2**53 + 1's last bit)
            raise TypeError(
                f"xfuse.{name}(): its operands are of {dtype} in numpy, not floats; xfuse "
                "computes floats, as a kernel and `@xfuse.jit` do: convert integer and boolean "
                "arrays with .astype(np.float64) and write numbers as floats (1.0)"
            )
        passes_bits = op_type.SIGNS_NAN
        if dtype.name not in DTYPE_NAMES:  # (longdouble: dtype_name's ValueError)
            raise TypeError(
                f"xfuse.{name}(): xfuse computes in {', '.join(DTYPE_NAMES)}, not {dtype} "
                "(convert with .astype(np.float64))"
            )
        # A Python number in the arrays' dtype, as numpy's loop and a kernel take it (as a
        # kernel's constant: bf16 via f32, as numpy's bf16 loops take a number too, 1 + 2**-8 +
        # 2**-40 is 1, not 1.0078125; 1e5 is inf in float16).
        element = element_type_for(dtype)
        # (a NaN as it is into a sign op or select, which passes its bits on, as numpy's)
        arrays[first:] = [
            np.asarray(
                given if passes_bits and math.isnan(given) else ew.round_to_element(given, element),
                dtype,
            )
            if isinstance(given, int | float)
            else array
            for given, array in zip(args[first:], arrays[first:], strict=True)
        ]
        # In float64, but a sign-bit op or select (`SIGNS_NAN`) in its own dtype: numpy's pass a
        # NaN's bits on, where a round trip through float64 quieted a signalling one and
        # ml_dtypes' narrowing made a bfloat16 one canonical (as a kernel does not either).
        wide = dtype if passes_bits else np.dtype(np.float64)
        with np.errstate(all="ignore"):
            result = op_type.reference(*(a.astype(wide) for a in arrays))
        if result.ndim == 0 and op_type is not ew.SelectOp:  # numpy's scalar, as np.maximum's
            result = result[()]  # (np.where's result stays an array, as numpy's)
        if issubclass(op_type, ew.CompareOp):
            return result != 0  # numpy's booleans, as np.less gives them
        return result.astype(dtype)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Elementwise `{op_type.name}` on traced values or numpy arrays."
    parameters = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY) for p in operands]
    function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
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
