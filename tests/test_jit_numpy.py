"""`@xfuse.jit` against the same function run by numpy: where a review found them apart."""

from __future__ import annotations

import copy
import functools
import gc
import inspect
import math
import pickle
import re
import warnings
from collections.abc import Callable
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest

import xfuse
from xfuse.codegen.native import host_cpu
from xfuse.runtime import jit as jit_module
from xfuse.runtime.call_plans import PLAN_CACHE_SIZE
from xfuse.runtime.jit import JitFunction

SPECIAL = [-0.0, 0.0, -np.inf, np.inf, np.nan, -1.0, 0.25, 2.0, 1e-40, 6e4]


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype, shape and bits (any NaN for a NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = f"u{want.dtype.itemsize}"
    nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
    np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
@pytest.mark.parametrize(
    "program",
    [
        lambda x: x**0.5,
        lambda x: np.power(x, 0.5),
        lambda x: pow(x, 0.5),
        lambda x: x ** (1 / 2),
        lambda x: x ** np.float64(0.5),
        lambda x: np.power(x, np.float32(0.5)),
        lambda x: x ** np.array(0.5, np.float32),  # (`**` kept the 0-d array: C's pow)
        lambda x: x ** np.array(0.5),
    ],
    ids=["pow-op", "np.power", "builtin-pow", "1/2", "np.float64", "np.float32", "0-d", "0-d-f64"],
)
def test_the_power_one_half_is_what_numpy_computes(dtype: type, program) -> None:
    """numpy computes `x ** 0.5` (a Python float) as `np.sqrt(x)` for float16/32/64 arrays, and
    `np.power` with a scalar 0.5 so in its float32 and float64 loops: sqrt(-0) is -0 and
    sqrt(-inf) NaN, where C's pow (`ew.pow`) gives +0 and +inf. Traced as `ew.pow`, every such
    program gave +0 and +inf there."""
    x = np.array(SPECIAL, dtype)
    try:
        with np.errstate(all="ignore"):
            want = program(x)
    except TypeError:  # bfloat16 with a float16 scalar: no common dtype in numpy either
        with pytest.raises(TypeError):
            xfuse.jit(program)(x)
        return
    assert_same(xfuse.jit(program)(x), want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
@pytest.mark.parametrize(
    "exponent",
    [np.float32(0.5), np.float16(0.5), np.array(0.5), np.float32(2.0), np.float64(-1.0)],
    ids=["f32", "f16", "0-d-f64", "two", "minus-one"],
)
@pytest.mark.parametrize(
    "program", [lambda x, p: x**p, lambda x, p: np.power(x, p)], ids=["pow-op", "np.power"]
)
def test_a_power_whose_exponent_is_an_argument_is_what_numpy_computes(
    dtype: type, exponent: Any, program
) -> None:
    """An exponent passed as a 0-d argument (as docs/calling-kernels.md says to pass a value
    that changes) is one value to numpy's float32 and float64 power loops, which take 0.5 as
    `np.sqrt` at the call: sqrt(-0) = -0 and sqrt(-inf) NaN. Traced as `ew.pow` alone, the
    kernel gave C's +0 and +inf there."""
    x = np.array(SPECIAL, dtype)
    try:
        with np.errstate(all="ignore"):
            want = program(x, exponent)
    except TypeError:  # bfloat16 with a float16 scalar: no common dtype in numpy either
        return
    got = xfuse.jit(program)(x, exponent)
    assert got.dtype == want.dtype
    wide, expected = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(
        np.signbit(wide) | np.isnan(wide), np.signbit(expected) | np.isnan(expected)
    )
    np.testing.assert_allclose(wide, expected, rtol=2e-7 if dtype == np.float64 else 1e-6)


def test_a_comparison_is_a_mask_that_no_branch_and_no_arithmetic_takes() -> None:
    """`==` and `!=` compared the proxies' identities: `if x == y:` took a branch silently and
    `(x == y) * 1.0 + x` was `x`, where numpy compares elements. A comparison is now numpy's
    boolean mask: a branch on it has no truth value, and arithmetic on it (numpy's on booleans:
    `m * 1.0` is float64) asks for `.astype`, which gives 1 and 0."""
    x, y = np.float32([1, 2]), np.float32([1, 3])
    for branch in (lambda a, b: a if a == b else b, lambda a, b: a if a != b else b):
        with pytest.raises(TypeError, match="no truth value"):
            xfuse.jit(branch)(x, y)
    arithmetic = [
        lambda a, b: (a == b) * 1.0 + a,
        lambda a, b: -(a < b),
        lambda a, b: np.exp(a < b),
        lambda a, b: np.where(a < b, a < b, a),
    ]
    for program in arithmetic:
        with pytest.raises(TypeError, match=r"boolean mask: .* mask\.astype\(dtype\)"):
            xfuse.jit(program)(x, y)
    counted = xfuse.jit(lambda a, b: (a == b).astype(a.dtype) + (a != b).astype(a.dtype) * 2 + a)
    assert_same(counted(x, y), np.float32([2, 4]))


def test_a_sequence_of_one_result_is_returned_as_a_sequence() -> None:
    """`return (y,)` returned the bare array: `(y,) = f(x)` unpacked its elements."""
    x = np.float32([1, 2, 3])
    one = xfuse.jit(lambda a: (a * 2,))
    (result,) = one(x)
    np.testing.assert_array_equal(result, x * 2)
    buffer = np.empty_like(x)
    (stored,) = one(x, out=buffer)
    assert stored is buffer
    assert isinstance(xfuse.jit(lambda a: a + 1)(x), np.ndarray)


class _SumAndDifference(NamedTuple):
    total: np.ndarray
    difference: np.ndarray


class _Doubled(NamedTuple):
    doubled: np.ndarray


class _Pair(tuple):
    """A tuple subclass that is no namedtuple: nothing says how one is made from results."""


@pytest.mark.parametrize(
    ("function", "sequence", "outputs"),
    [
        (lambda a, b: (a + b, a - b), tuple, 2),
        (lambda a, b: (a + b,), tuple, 1),
        (lambda a, b: [a + b, a - b, a * b], list, 3),
        (lambda a, b: [a * b], list, 1),
        (lambda a, b: _SumAndDifference(a + b, a - b), _SumAndDifference, 2),
        (lambda a, b: _SumAndDifference(difference=a - b, total=a + b), _SumAndDifference, 2),
        (lambda a, b: _Doubled(a * 2), _Doubled, 1),
        (lambda a, b: _Pair((a + b, a - b)), tuple, 2),
        (lambda a, b: (a > b, a + b), tuple, 2),
        (lambda a, b: [a > b], list, 1),
    ],
)
def test_results_come_back_in_the_sequence_the_function_returned(
    function: Callable[..., Any], sequence: type, outputs: int
) -> None:
    """A list and a namedtuple came back as tuples (`jax.jit` and numba return them as they
    were: `f(x).total` was an AttributeError); another tuple subclass stays a tuple. The first
    call, a repeated one (the plain calls' lookup), one by keyword and one with `out=` buffers
    return the same kind, with the values of numpy's own call (`test_pickling` unpickles one).
    """
    x = np.float32([1, -2, 3, 0])
    y = np.float32([2, -2, 1, 5])
    f = xfuse.jit(function)
    expected = function(x, y)
    buffers = [np.empty(4, np.bool_ if e.dtype == np.bool_ else np.float32) for e in expected]
    for call in (
        lambda: f(x, y),
        lambda: f(x, y),
        lambda: f(a=x, b=y),
        lambda: f(x, y, out=tuple(buffers)),
    ):
        results = call()
        assert type(results) is sequence and len(results) == outputs
        for got, want in zip(results, expected, strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    assert all(s is b for s, b in zip(f(x, y, out=tuple(buffers)), buffers, strict=True))


def test_a_repeated_call_finds_its_kernel_by_names_dtypes_and_shapes() -> None:
    """A call of numpy arrays for every parameter finds its kernel by the names given and the
    arrays' dtypes and shapes without binding its arguments again (~8 us of a 10 us call);
    other dtypes, shapes, names or values get their own kernel or error as a first call does."""
    f = xfuse.jit(lambda a, b: a * b + 1)
    x = np.float32([1, 2, 3])
    column = x.reshape(3, 1)
    two = np.float32(2)  # a numpy scalar: a 0-d array of its dtype
    for a, b in [(x, x), (x, x), (x.astype(np.float64),) * 2, (x.astype(np.float64),) * 2]:
        assert_same(f(a, b), a * b + 1)
        assert_same(f(a, two), a * two + 1)
    for _ in range(2):
        assert_same(f(column, x), column * x + 1)
        assert_same(f(b=x, a=x + 1), (x + 1) * x + 1)
        assert_same(f(x + 1, b=x), (x + 1) * x + 1)
        with pytest.raises(TypeError, match=r"^<lambda>\(\): got an unexpected keyword .*'c'$"):
            f(x, c=x)
        with pytest.raises(TypeError, match=r"^<lambda>\(\): got multiple values for .*'a'$"):
            f(x, a=x)
    assert len(f.kernels) == 5
    with pytest.raises(TypeError, match="argument 'b': expected a numpy array.*np.asarray"):
        f(x, [1.0, 2.0, 3.0])
    buffer = np.empty_like(x)
    assert f(x, x, out=buffer) is buffer
    assert_same(buffer, x * x + 1)


def test_arrays_of_one_shape_are_traced_as_one_flat_loop() -> None:
    """Arrays all of one shape of 2 or more dims are traced `[?]`: one flat loop that runs any
    layout as a 1-d call does (a nest ran LLVM's vector epilogue at every row and streamed only
    rows of whole 64-byte lines). A broadcast keeps the arrays' ranks."""
    f = xfuse.jit(lambda a, b: np.tanh(a) * b)
    rng = np.random.default_rng(0)
    wide = rng.standard_normal((37, 130)).astype(np.float32)
    a, b = wide[:, :100], rng.standard_normal((37, 100)).astype(np.float32)

    def want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.tanh(a.astype(np.float64)) * b

    for x, y in [(a, b), (b, a), (a.T, b.T), (b[:1], a[:1]), (b[None], a[None])]:
        got = f(x, y)
        assert got.shape == x.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want(x, y), rtol=1e-6, atol=1e-37)
    out = np.empty((37, 130), np.float32)[:, 30:]
    assert f(a, b, out=out) is out
    np.testing.assert_allclose(out, want(a, b), rtol=1e-6, atol=1e-37)
    frontend_irs = [kernel.ir("frontend") for kernel in f.kernels.values()]
    assert all("tensor<?xf32>" in ir and "x?xf32>" not in ir for ir in frontend_irs)
    assert len(f.kernels) == 4  # by shape, as the calls' checks; the IR is one

    f(a, b[0])  # a [37, 100] array and a [100] bias
    (broadcast,) = [k for key, k in f.kernels.items() if key[1][2] == (100,)]
    assert "tensor<?x?xf32>" in broadcast.ir("frontend")


def test_a_kernel_of_arrays_too_small_to_stream_has_no_streaming_twin() -> None:
    """A kernel traced for arrays whose call moves fewer bytes than the host streams from
    (`HostCpu.streaming_bytes`: never a call that streams) is compiled without the streaming
    twin of its loop; one for larger arrays has it. The same bits either way."""
    f = xfuse.jit(lambda a, b: np.tanh(a) * b)
    elements = host_cpu().streaming_bytes // 12  # a, b and the result: 12 bytes an element
    kernels = []
    for n, streams in [(elements - 64, False), (elements + 64, True)]:
        x = np.linspace(-3, 3, n, dtype=np.float32)
        f(x, x)
        kernel = f.kernels[(("a", "float32", (n,)), ("b", "float32", (n,)))]
        assert kernel.options.streaming is streams
        assert (kernel.function.streaming_entry is not None) is streams
        kernels.append(kernel)
    x = np.linspace(-3, 3, elements - 64, dtype=np.float32)
    assert_same(kernels[0](x, x), kernels[1](x, x))


def test_calls_of_many_lengths_keep_a_bounded_lookup() -> None:
    """Each length's key stayed in three dicts (5,000 lengths held 2.8 MiB, pickled with the
    function); they keep `PLAN_CACHE_SIZE` shapes, their one kernel kept where it was traced."""
    f = xfuse.jit(lambda a: a * 2 + 1)
    x = np.arange(3 * PLAN_CACHE_SIZE, dtype=np.float32)
    for n in range(1, x.size + 1):
        np.testing.assert_array_equal(f(x[:n]), x[:n] * 2 + 1)
        np.testing.assert_array_equal(f(a=x[:n]), x[:n] * 2 + 1)
    assert len(f.kernels) <= PLAN_CACHE_SIZE and len(f._plain_calls) <= PLAN_CACHE_SIZE
    assert len(f.forms) == len(f.kernels)
    assert " 2 compiled," in repr(f)  # (a length of 1 is a trace of its own: a 1 broadcasts)


def test_a_jit_function_called_while_tracing_is_traced_in_place() -> None:
    """A jit function called from another (or itself, recursively) was an ArgumentTypeError
    ("expected a numpy array, got Traced")."""
    inner = xfuse.jit(lambda a: np.tanh(a) * 2)
    pair = xfuse.jit(lambda a, b: (a + b, a * b))
    outer = xfuse.jit(lambda a, b: inner(a) + pair(a, b)[1])
    x, y = np.float32([0.5, -1.0, 2.0]), np.float32([3.0, 0.25, -2.0])
    np.testing.assert_allclose(outer(x, y), np.tanh(x) * 2 + x * y, rtol=2e-6)
    assert not inner.kernels and not pair.kernels  # recorded in outer's one kernel

    @xfuse.jit
    def doubled(a, n=3):
        return a if n == 0 else doubled(a * 2, n=n - 1)

    np.testing.assert_array_equal(doubled(x), x * 8)
    with pytest.raises(TypeError, match=r"out=\) inside @xfuse.jit.*drop out="):
        xfuse.jit(lambda a: inner(a, out=np.empty(3, np.float32)))(x)


def test_positional_only_and_variadic_parameters() -> None:
    """A positional-only parameter raised Python's own "got some positional-only arguments
    passed as keyword arguments" from inside the tracer; arrays in `*args` said "expected a
    numpy array, got tuple"."""

    def subtract(a, b, /):
        return a - b

    x, y = np.float32([1, 2]), np.float32([0.5, 4])
    np.testing.assert_array_equal(xfuse.jit(subtract)(x, y), x - y)
    with pytest.raises(TypeError, match=r"through \*arrays cannot be traced.*name each array"):
        xfuse.jit(lambda *arrays: arrays[0] + arrays[1])(x, y)
    with pytest.raises(TypeError, match=r"through \*\*named cannot be traced"):
        xfuse.jit(lambda a, **named: a + named["b"])(x, b=y)
    np.testing.assert_array_equal(xfuse.jit(lambda a, **named: a * 2)(x), x * 2)


def test_in_place_operators_are_numpys() -> None:
    """`h += y` rebound `h` to the promoted sum: a float32 `h` became float64 where numpy casts
    back to float32; on an argument numpy updates the caller's array, which a kernel did
    silently not; a larger broadcast result replaced `h` where numpy raises."""
    x = np.float32([1.5, -2.0, 3.0e-8])
    y = np.float64([0.1, 1e-9, 7.0])

    def accumulate(a, b):
        h = a * 2
        h += b
        h *= np.float64(0.3)
        h **= 2
        return h

    want = accumulate(x, y)
    assert want.dtype == np.float32
    assert_same(xfuse.jit(accumulate)(x, y), want)

    def update_argument(a, b):
        a += b
        return a

    with pytest.raises(TypeError, match=r"`\+=` on the argument 'a' \(or a .*write `a = a \+"):
        xfuse.jit(update_argument)(x, y)

    def widen(a, b):
        h = a * 1
        h += b
        return h

    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        xfuse.jit(widen)(np.ones(4, np.float32), np.ones((3, 4), np.float32))


def _aliased_scalar(x: Any, s: Any) -> Any:
    h = s * 2
    g = h
    g += 1  # (numpy rebinds g: h is as it was)
    return x * h


def _accumulated_from_a_scalar(x: Any, s: Any) -> Any:
    total = s * 0
    for i in (1, 2):
        total += x * i
    return total


def _scalar_widened(x: Any, s: Any) -> Any:
    h = s * 2
    h += np.float64(0.1)
    return h


def _mask_from_a_scalar(x: Any, s: Any) -> Any:
    m = s > 0
    m |= x > 2
    return np.where(m, x, 0)


def _aliased_where(x: Any, s: Any) -> Any:
    g = np.where(s > 0, s, s * 2)  # (numpy's is a 0-d array: updated in place)
    h = g
    g += np.float64(1.1)  # (cast back to float32)
    return x * h


def _aliased_where_astype(x: Any, s: Any) -> Any:
    g = np.where(s > 0, s, s * 2).astype(np.float64)
    h = g
    g += 1
    return x * h


def _aliased_nan_to_num(x: Any, s: Any) -> Any:
    g = np.nan_to_num(np.where(s > 0, s, s))  # (a scalar: numpy's nan_to_num of 0-d)
    h = g
    g += 1
    return x * h


def _aliased_xfuse_where(x: Any, s: Any) -> Any:
    g = xfuse.where(s > 0, s, s * 2)  # (a 0-d array, as its eager result)
    h = g
    g += 1
    return x * h


def _aliased_mask_of_where(x: Any, s: Any) -> Any:
    m = np.where(s > 0, s, s).astype(bool)
    k = m
    m &= s > 5
    return np.where(k, x, 0)


def _aliased_copy(x: Any, s: Any) -> Any:
    h = copy.copy(np.where(s > 0, s, s))
    h += 1
    k = h
    h += 1
    return x * k


def _aliased_uncopied(x: Any, s: Any) -> Any:
    g = x * 2 + s
    h = g.astype(g.dtype, copy=False)  # (g itself)
    g += 1
    return h


def _aliased_uncopied_mask(x: Any, s: Any) -> Any:
    m = x > s
    g = m.astype(bool, copy=False)  # (m itself)
    g &= x > 2
    return np.where(m, x, 0)


def _positive_of_a_where(x: Any, s: Any) -> Any:
    v = +np.where(s > 0, s, s)  # (np.positive: a scalar)
    v += x
    return v


def _aliased_sign(x: Any, s: Any) -> Any:
    g = np.sign(s)  # (a ufunc: a scalar, though traced as a where)
    h = g
    g += 1
    return x * h


@pytest.mark.parametrize(
    "function",
    [
        _aliased_scalar,
        _accumulated_from_a_scalar,
        _scalar_widened,
        _mask_from_a_scalar,
        _aliased_where,
        _aliased_where_astype,
        _aliased_sign,
        _aliased_nan_to_num,
        _aliased_xfuse_where,
        _aliased_mask_of_where,
        _aliased_copy,
        _aliased_uncopied,
        _aliased_uncopied_mask,
        _positive_of_a_where,
    ],
)
@pytest.mark.parametrize("scalar", [np.float32(-1.5), np.array(-1.5, np.float32)], ids=type)
def test_an_update_in_place_of_a_0d_value_rebinds_it(
    function: Callable[..., Any], scalar: Any
) -> None:
    """numpy's ufuncs give 0-d operands a numpy scalar, which `+=` rebinds: traced as an array
    updated in place, `g = h; g += 1` changed `h` (silently wrong), `a = s * 0; a += x` was
    refused as a larger array, and `h += f64` kept float32."""
    x = np.float32([1.0, 2.0, 3.0])
    want = function(x, scalar)
    assert_same(np.asarray(xfuse.jit(function)(x, scalar)), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16])
@pytest.mark.parametrize("value", [-np.inf, -0.0, 4.0])
def test_a_numpy_scalars_power_of_a_scalar_is_c_pow(dtype: type, value: float) -> None:
    """A ufunc's 0-d result is a numpy scalar, whose `**` of a scalar is C's pow: pow(-inf,
    0.5) is +inf and pow(-0, 0.5) +0, where an array's `** 0.5` is sqrt's (NaN, -0), as it
    was traced. An exponent that is a 0-d array takes the ufunc's sqrt path (a first fix got
    that wrong), as do np.power, ml_dtypes' bfloat16 scalar, np.where's and xfuse.where's 0-d
    arrays and an argument's astype (an argument is traced as a 0-d array)."""
    scalar, array = dtype(value), np.array(value, dtype)
    for program, givens in (
        (lambda a: (a * 1) ** 0.5, (scalar, array)),
        (lambda a: np.maximum(a, a) ** np.float64(0.5), (scalar, array)),
        (lambda a: (a * 1) ** np.where(a < 1, np.float32(0.5), np.float32(0.5)), (scalar, array)),
        (lambda a: np.power(a * 1, 0.5), (scalar, array)),
        (lambda a: np.where(a > 0, a, a) ** 0.5, (scalar, array)),
        (lambda a: xfuse.where(a > 0, a, a) ** 0.5, (scalar, array)),
        (lambda a: a.astype(np.float64) ** 0.5, (array,)),  # (a scalar's: another kernel)
    ):
        for given in givens:
            with np.errstate(invalid="ignore"):
                want = np.asarray(program(given))
            got = xfuse.jit(program)(given)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (program, given)


def aliased_sum(x: np.ndarray) -> np.ndarray:
    a = x * 2
    b = a
    b += 1
    return a


def updated_list(x: np.ndarray) -> tuple[np.ndarray, ...]:
    outs = [x * 1, x * 2]
    for o in outs:
        o += 1
    return tuple(outs)


def bump(t: np.ndarray) -> None:
    t += 1


def updated_by_a_helper(x: np.ndarray) -> np.ndarray:
    t = x * 2
    bump(t)
    return t


def aliased_mask(x: np.ndarray) -> np.ndarray:
    k = x > 0
    k2 = k
    k2 &= x < 2
    return k


def mask_updated_by_a_wider_mask(x: np.ndarray) -> np.ndarray:
    k = x > 0
    k &= x.astype(np.float64) < 2  # (a float64 comparison: its mask was cast back to numbers)
    k |= x > 2.5
    return k


def clipped_then_updated(x: np.ndarray) -> np.ndarray:
    t = np.clip(x, None, None)
    t += 1
    return t


@pytest.mark.parametrize(
    "function",
    [
        aliased_sum,
        updated_list,
        updated_by_a_helper,
        aliased_mask,
        mask_updated_by_a_wider_mask,
        clipped_then_updated,
    ],
)
def test_an_update_in_place_reaches_every_name_of_the_array(function: Callable[..., Any]) -> None:
    """`b = a; b += 1` left `a` as it was (the update made a new proxy, bound to `b` alone), and
    so did `o += 1` over a list and a helper's `t += 1`; `k2 &= m` had no in-place operator at
    all. `np.clip(x, None, None)` is a copy, as numpy's: `+=` on it was refused as on `x`. A
    mask updated with a mask of a wider dtype was cast back to numbers, returned as 1.0 and 0.0
    (and `k |= ...` then refused)."""
    x = np.float32([1.5, -2.25, 3.0])
    got, want = xfuse.jit(function)(x), function(x.copy())
    for g, w in zip(*((got, want) if isinstance(want, tuple) else ((got,), (want,))), strict=True):
        assert_same(g, w)


def test_dtype_functions_trace_and_a_mask_takes_no_arithmetic_through_power() -> None:
    """`np.result_type` reads dtypes only, a traced array's `.dtype` (bool for a mask): it was
    refused ("compute it outside the jit function"). `np.power(m, 0.5)` of a mask (its sqrt
    path dropped the mask) and `np.heaviside(0.0, m)` gave numbers; they are the mask error,
    as `m ** 2` is."""
    x = np.float32([1.0, -2.0])
    for function in (
        lambda a: a.astype(np.result_type(a, 1.0)),
        lambda a: a.astype(np.result_type(a > 0, a)),
        lambda a: a.astype(np.result_type(a, np.float64)),
    ):
        assert_same(xfuse.jit(function)(x), function(x))
    for function in (
        lambda a: np.power(a > 0, 0.5),
        lambda a: (a > 0) ** np.float64(0.5),
        lambda a: np.heaviside(0.0, a > 0),
    ):
        with pytest.raises(TypeError, match="a comparison's result is a boolean mask"):
            xfuse.jit(function)(x)


def test_a_traced_array_kept_from_an_earlier_trace_is_a_clear_error() -> None:
    """Kept in a list between calls, it belongs to the trace that made it: used in the next
    (a new dtype, traced again) it failed in xDSL's verifier ("value defined out of its
    IsolatedFromAbove parent"), as an operand or returned, naming no cause."""
    kept: list[Any] = []

    def combined(x: np.ndarray) -> np.ndarray:
        kept.append(x * 2)
        return kept[0] + x

    def returned(x: np.ndarray) -> np.ndarray:
        kept.append(x * 2)
        return -kept[0]

    for function in (combined, returned):
        kept.clear()
        jitted = xfuse.jit(function)
        jitted(np.ones(3, np.float32))
        with pytest.raises(
            TypeError, match="a traced array of an earlier trace is used in this"
        ) as info:
            jitted(np.ones(3, np.float64))
        # as a process pool's worker sends it (its __init__ takes no message: it did not load)
        assert str(pickle.loads(pickle.dumps(info.value))) == str(info.value)


def test_copies_and_membership_of_a_traced_array() -> None:
    """`copy.deepcopy(x)` copied the builder's IR (xDSL: "value defined out of its
    IsolatedFromAbove parent"); `copy.copy(x)` is a copy, not the argument; `1.0 in x` said
    only "argument of type 'Traced' is not iterable"."""
    x = np.float32([1.5, -2.25, 3.0])
    assert_same(xfuse.jit(lambda a: copy.deepcopy(a) + 1)(x), x + 1)

    def copied_then_updated(a: np.ndarray) -> np.ndarray:
        c = copy.copy(a)
        c += 1
        return c

    assert_same(xfuse.jit(copied_then_updated)(x), x + 1)
    with pytest.raises(TypeError, match="no elements to iterate"):
        xfuse.jit(lambda a: a + (1.0 in a))(x)


def test_astype_takes_numpys_spellings_of_a_dtype() -> None:
    """`x.astype("f4")` said "xfuse computes in float16, bfloat16, float32 and float64"."""
    x = np.float32([1.5, -2.25, 3.0])
    for spelling in ("f4", "<f8", "e", "d", "=f8", "float", "half", "double", "single"):
        assert_same(xfuse.jit(lambda a, s=spelling: a.astype(s) * 2)(x), x.astype(spelling) * 2)
    # A byte-swapped one is refused saying so (it said "xfuse computes in ... float32"), but one
    # of a dtype xfuse lacks
    swapped = r"a kernel computes in the machine's byte order; convert to float32"
    with pytest.raises(TypeError, match=rf"astype\('>f4'\): {swapped}"):
        xfuse.jit(lambda a: a.astype(">f4"))(x)
    # so is its dtype object (taken for the native one: a float32 result, numpy's >f4)
    with pytest.raises(TypeError, match=rf"astype\(dtype\('>f4'\)\): {swapped}"):
        xfuse.jit(lambda a: a.astype(np.dtype(">f4")))(x)
    with pytest.raises(TypeError, match=r"astype\('>i4'\): xfuse computes in float16"):
        xfuse.jit(lambda a: a.astype(">i4"))(x)
    with pytest.raises(ValueError, match=r"unsupported dtype dtype\('>f4'\)"):
        xfuse.compile("input x; out = x * 2;", dtype=np.dtype(">f4"))
    # numpy's other keywords: Python's "unexpected keyword argument 'order'" before
    # (but at numpy's defaults: `casting="unsafe"` changes nothing)
    with pytest.raises(TypeError, match=r"np\.astype\(\.\.\., order=, casting=\) cannot be traced"):
        xfuse.jit(lambda a: a.astype("f4", order="C", casting="same_kind"))(x)


class Scaler:
    @xfuse.jit
    def scaled(self, x: np.ndarray) -> np.ndarray:
        return x * 2


def test_jit_of_a_method_a_jit_function_or_a_ufunc() -> None:
    """A method's jit function was not bound (`missing a required argument: 'x'`, the one
    given); jit of a jit function, or of `np.exp`, said "cannot have a parameter named 'out'"."""
    x = np.float32([1.5, -2.25, 3.0])
    with pytest.raises(TypeError, match="argument 'self': expected a numpy array"):
        Scaler().scaled(x)
    assert isinstance(Scaler.scaled, JitFunction)
    base = xfuse.jit(lambda a: np.tanh(a))
    again = xfuse.jit(math="libm")(base)
    assert (again.function, again.options.math) == (base.function, "libm")
    assert_same(again(x), xfuse.compile("y = tanh(x);", math="libm")(x))
    # the function it suggests takes the ufunc's operands (one operand for np.maximum failed)
    for ufunc, names in ((np.exp, "x"), (np.maximum, "x, y")):
        with pytest.raises(TypeError, match=r"^xfuse.jit\(np.\w+\): a numpy ufunc is not a") as e:
            xfuse.jit(ufunc)
        suggested = str(e.value).split("`")[1]
        assert suggested == f"lambda {names}: np.{ufunc.__name__}({names})"
        x = np.float32([1, -2])
        np.testing.assert_allclose(
            xfuse.jit(eval(suggested))(*[x] * ufunc.nin), ufunc(*[x] * ufunc.nin), rtol=1e-6
        )
    # (under @staticmethod, an instance's call passed the instance as its first array; under
    # @classmethod, above it or not, the class is the first argument, no array)
    with pytest.raises(TypeError, match=r"of a staticmethod: put @staticmethod above @xfuse"):
        xfuse.jit(staticmethod(lambda a: a * 2))
    with pytest.raises(TypeError, match=r"of a classmethod: .* first is the class; make it a @st"):
        xfuse.jit(classmethod(lambda cls, a: a * 2))
    # (Python's "'property' object is not a callable object")
    for descriptor in (
        property(lambda self: self),
        functools.cached_property(lambda self: self),
        functools.partialmethod(lambda self, a: a * 2),
    ):
        kind = type(descriptor).__name__
        with pytest.raises(TypeError, match=rf"^xfuse.jit of a {kind}: .* first is the instance"):
            xfuse.jit(descriptor)


def test_only_numpys_weak_python_numbers_are_weak() -> None:
    """A `Fraction` (a `numbers.Real`) was traced as a float; numpy makes an object array."""
    x = np.float32([1, 2])
    with pytest.raises(TypeError, match="with Fraction.*float\\(value\\)"):
        xfuse.jit(lambda a: a + Fraction(1, 3))(x)
    np.testing.assert_array_equal(xfuse.jit(lambda a: a * True + 1)(x), x * True + 1)


def test_np_positive_traces() -> None:
    x = np.float32([-0.0, 1.0, np.nan])
    assert_same(xfuse.jit(lambda a: np.positive(a) * 2)(x), np.positive(x) * 2)


def test_a_numpy_scalars_nan_keeps_its_bits_where_the_kernel_computes_in_its_dtype() -> None:
    """`float()` of a float32 NaN goes through C's conversion, which quieted a signalling one:
    `np.where(x > 0, x, s)` stored 0x7FC00001 for 0x7F800001, where numpy passes its bits on.
    (f16 and bf16 compute in f32 in the kernel, whose conversions quiet it, as documented.)"""
    for bits in (0x7F800001, 0xFFC12345, 0x7FC00000):
        scalar = np.array([bits], np.uint32).view(np.float32)[0]
        x = np.float32([-1.0, 2.0, np.nan])
        got = xfuse.jit(lambda a, s=scalar: np.where(a > 0, a, s))(x)
        np.testing.assert_array_equal(
            got.view(np.uint32), np.where(x > 0, x, scalar).view(np.uint32)
        )


def test_xfuse_functions_on_numpy_arrays_keep_numpys_dtype() -> None:
    """Outside tracing `xfuse.maximum(x, 0.0)` was float64 for a float16 `x` (the Python number
    made a float64 array) and `xfuse.tanh` of a bfloat16 array float64."""
    half = np.float16([1.0, -2.0])
    assert xfuse.maximum(half, 0.0).dtype == np.maximum(half, 0.0).dtype == np.float16
    brain = half.astype(ml_dtypes.bfloat16)
    assert xfuse.tanh(brain).dtype == np.tanh(brain).dtype == ml_dtypes.bfloat16


def test_xfuse_functions_on_numpy_arrays_refuse_what_numpy_makes_integers() -> None:
    """On integer or boolean operands, where numpy's result is of integers or booleans, the
    functions computed in float64 and returned float64: `xfuse.maximum` of int64 rounded 2**53 +
    1, `xfuse.where(m, 1, 0)` was 1.0 and 0.0 (np.where's int64), as jit refuses to trace it."""
    big = np.array([2**53 + 1, -3], np.int64)
    mask = big > 0
    for call in (
        lambda: xfuse.maximum(big, 0),
        lambda: xfuse.abs(big),
        lambda: xfuse.where(mask, 1, 0),
        lambda: xfuse.where(mask, big, 0),
        lambda: xfuse.minimum(mask, True),
        lambda: xfuse.equal(big, 2**53),
        lambda: xfuse.tanh(np.int8([1, 2])),
    ):
        with pytest.raises(TypeError, match=r"of (int64|bool|int8) in numpy, not floats; xfuse"):
            call()
    # an integer array beside a float one is float64, in numpy too, and so is taken
    half = np.float16([1.5, -2.0])
    assert_same(xfuse.maximum(half, big), np.maximum(half, big))
    assert_same(xfuse.where(mask, 1.0, 0.0), np.where(mask, 1.0, 0.0))


def test_xfuse_functions_refuse_masked_arrays_and_matrices_as_a_kernel_does() -> None:
    """`xfuse.exp` of a masked array returned a plain array: its masked elements computed and
    shown (np.exp keeps the mask); np.matrix is 2-d whatever it holds."""
    masked = np.ma.masked_array(np.float32([1.0, 2.0]), mask=[False, True])
    with pytest.raises(TypeError, match=r"^xfuse\.exp\(\): a masked array's mask would be"):
        xfuse.exp(masked)
    with pytest.raises(TypeError, match=r"^xfuse\.maximum\(\): a masked array's mask"):
        xfuse.maximum(0.0, masked)
    with pytest.raises(TypeError, match=r"^xfuse\.exp\(\): np\.matrix is not taken"):
        xfuse.exp(np.matrix([[1.0]]))
    assert_same(xfuse.exp(masked.data), np.exp(masked.data.astype(np.float64)).astype(np.float32))


def test_xfuse_functions_on_numpy_arrays_take_a_python_number_in_their_dtype() -> None:
    """NEP 50 gave the result's dtype only: the number met the array in float64 (0.1 is no
    float16 0.1, so `xfuse.equal(x16, 0.1)` was all False; `atan2(x16, 1e5)` not 0, 1e5 being
    float16's inf), unlike numpy and the same call traced."""
    x16 = np.float16([0.1, 0.5, 1.0])
    traced = xfuse.jit(lambda x: (xfuse.equal(x, 0.1), xfuse.atan2(x, 1e5)))(x16)
    for eager, numpys, jitted in zip(
        (xfuse.equal(x16, 0.1), xfuse.atan2(x16, 1e5)),
        (np.equal(x16, 0.1), np.arctan2(x16, np.float16(np.inf))),
        traced,
        strict=True,
    ):
        assert eager.dtype == numpys.dtype == jitted.dtype
        np.testing.assert_array_equal(eager, numpys)
        np.testing.assert_array_equal(eager, jitted)
    assert xfuse.equal(np.float32(0.1), 0.1) and not xfuse.equal(np.float64(0.1), np.float32(0.1))
    # where's condition stays a condition: the arms take the number
    mask = np.array([True, False, True])
    assert_same(xfuse.where(mask, x16, 0.1), np.where(mask, x16, np.float16(0.1)))
    # a number first, before a bfloat16 array (ml_dtypes promotes arrays so to float32)
    brain = np.array([0.1, 2.0], ml_dtypes.bfloat16)
    for eager, numpys in (
        (xfuse.equal(0.1, brain), np.equal(0.1, brain)),
        (xfuse.maximum(0.1, brain), np.maximum(0.1, brain)),
    ):
        assert eager.dtype == numpys.dtype
        np.testing.assert_array_equal(eager, numpys)
    assert xfuse.maximum(0.1, brain).dtype == ml_dtypes.bfloat16
    # and rounded to bfloat16 through float32, as numpy's loops and the kernels round it
    tie = 1 + 2**-8 + 2**-40  # (1 in float32, then a tie of bfloat16: 1; once from f64 up)
    signed = np.array([1.0, -1.0, 0.3], ml_dtypes.bfloat16)
    for eager, numpys, jitted in (
        (xfuse.maximum(signed, tie), np.maximum(signed, tie), np.maximum),
        (xfuse.power(signed, tie), np.power(signed, tie), np.power),
    ):
        np.testing.assert_array_equal(eager, numpys)
        np.testing.assert_array_equal(eager, xfuse.jit(lambda v, f=jitted: f(v, tie))(signed))


def test_xfuse_power_on_numpy_arrays_is_the_kernels_pow() -> None:
    """`xfuse.power(x, 0.5)` on arrays was numpy's power, which takes a scalar 0.5 for sqrt
    (-0 and NaN at -0 and -inf) where the kernel it traces to is C's pow (+0 and +inf)."""
    x = np.float32([-0.0, -np.inf, 4.0, -4.0, 0.0])
    eager = xfuse.power(x, 0.5)
    assert eager.dtype == np.float32
    assert_same(eager, xfuse.jit(lambda a: xfuse.power(a, 0.5))(x))
    assert_same(eager, np.float32([0.0, np.inf, 2.0, np.nan, 0.0]))


def test_a_new_length_takes_the_kernel_traced_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each new length traced the function again (~1 ms) and kept a kernel of its own (~8 KB):
    a service called with varying lengths. A kernel is shared by the calls of the same dtypes
    and traced shapes (a 1 broadcasts, so length 1 is its own) that stream alike; one that
    streams where the first did not compiles its program again, without tracing it again (a
    value the function reads besides its arguments stays the one of its trace)."""
    small_cache = SimpleNamespace(streaming_bytes=4096)
    monkeypatch.setattr(jit_module, "host_cpu", lambda: small_cache)
    traces = []
    offset = 1.0

    @xfuse.jit
    def scaled(x: np.ndarray) -> np.ndarray:
        traces.append(x)
        return x * 2 + offset

    for n in [*range(1, 40), 1000, 2000, 40]:  # 1000 and 2000 float32 in and out: they stream
        x = np.arange(n, dtype=np.float32)
        assert_same(scaled(x), x * 2 + 1)
        if n == 2:  # read when traced: by the calls of length 1 and 2, not again
            offset = 5.0
    assert len(traces) == 2 and len(scaled.kernels) == 42
    kernels = {id(k): k for k in scaled.kernels.values()}.values()
    assert sorted(k.options.streaming for k in kernels) == [False, False, True]
    assert "3 compiled" in repr(scaled)
    grid = xfuse.jit(lambda x, y: x - y)  # arrays of one 2-d shape run flat: any such pair
    for shape in [(3, 4), (5, 7), (2, 2)]:
        x = np.ones(shape, np.float32)
        assert_same(grid(x, x), x - x)
    assert len({id(k) for k in grid.kernels.values()}) == 1


def test_a_list_passed_for_an_array_says_how_to_pass_it() -> None:
    with pytest.raises(TypeError, match=r"argument 'y': .*got list \(pass np\.asarray\(value\)"):
        xfuse.jit(lambda x, y: x + y)(np.float32([1, 2]), [1.0, 2.0])


def test_arguments_that_do_not_broadcast_are_named() -> None:
    """Arrays of shapes that do not broadcast together raised numpy's "shape mismatch: objects
    cannot be broadcast to a single shape" from the jit's sizing of its first call, before the
    kernel's own check (as numpy does, `x + y` of (3,) and (4,) is an error; so is a function
    whose results are of each shape alone, or that does not read one: a kernel has one
    iteration space). The kernel's check said "or be declared 1", which a jit user cannot."""
    x, y = np.ones(3, np.float32), np.ones(4, np.float32)
    message = (
        r"^<lambda>\(\): arguments of shapes 'x' \(3,\), 'y' \(4,\) do not broadcast together: "
        r"a jit function's arrays are one loop's"
    )
    for function in (lambda x, y: x * 2 + y, lambda x, y: (x * 2, y * 3), lambda x, y: x + 1):
        with pytest.raises(xfuse.ArgumentError, match=message):
            xfuse.jit(function)(x, y)


def test_arrays_of_more_dims_than_numpys_broadcast_takes_are_called() -> None:
    """numpy 2 arrays have up to 64 dims, its `broadcast_shapes` 32: the jit's sizing of a
    33-d call raised numpy's RuntimeError, naming no argument."""
    f = xfuse.jit(lambda x, y: x * 2 + y)
    for rank in (33, 64):
        x = np.full((1,) * (rank - 1) + (2,), 0.5, np.float32)
        np.testing.assert_array_equal(f(x, x), x * 3)
        np.testing.assert_array_equal(f(x, np.float32([1, 2])), x * 2 + [1, 2])


@pytest.mark.parametrize("array", [np.array([True, False]), np.arange(3)])
def test_an_array_of_bools_or_ints_says_how_to_convert_it(array: np.ndarray) -> None:
    """(A kernel's call said to convert it with .astype; the jit's trace did not.)"""
    match = (
        r"^argument 'x': unsupported dtype .* \(convert with \.astype: x\.astype\(np\.float32\)\)$"
    )
    with pytest.raises(xfuse.ArgumentTypeError, match=match):
        xfuse.jit(lambda x: x * 2)(array)


def test_the_attributes_of_a_jitted_callable_are_not_the_jit_functions_state() -> None:
    """`functools.update_wrapper` merged the callable's `__dict__` into the jit function's: an
    object's `function` attribute replaced the traced callable (tanh(x) for 2 * tanh(x), no
    error), a `threads` or `signature` attribute broke every call. Other attributes are kept."""

    class Doubled:
        def __init__(self, function: Callable[[Any], Any]) -> None:
            self.function, self.threads, self.signature = function, None, "(x) -> y"
            self.tag = "mine"

        def __call__(self, x: Any) -> Any:
            return self.function(x) * 2

    x = np.float32([0.5, 1, 2])
    jitted = xfuse.jit(Doubled(np.tanh))
    np.testing.assert_allclose(jitted(x), 2 * np.tanh(x), rtol=1e-6)
    assert jitted.threads == 1 and jitted.tag == "mine"


def test_a_number_passed_for_an_array_says_how_to_pass_it() -> None:
    def scaled(a, scale=2.0):
        return a * scale

    x = np.float32([1, 2])
    # (it said to give the number "with functools.partial", which a jit function refused)
    hint = (
        r"got float; .* constant of its trace: pass a 0-d array of your arrays' dtype "
        r"\(np\.float32\(3\.0\)\), or trace with it fixed: "
        r"xfuse\.jit\(functools\.partial\(fn, scale=3\.0\)\)"
    )
    with pytest.raises(TypeError, match=hint):
        xfuse.jit(scaled)(x, 3.0)
    np.testing.assert_array_equal(xfuse.jit(scaled)(x, np.float32(3.0)), x * 3)

    # The code it gives runs: a positional partial of a first parameter (a keyword fails on a
    # positional-only one: `partial(fn, s=3.0)` was a ValueError), a lambda where a keyword
    # partial would make a later parameter keyword-only, its defaults the function's own (an
    # array default was printed `array(...)`), the function named apart from the parameters.
    def positional(s, a, /):
        return a * s

    ones = np.ones(2, np.float32)

    def middle(a, s, b, c=ones):
        return a * s + b * c

    def named_fn(fn, s, b):
        return fn * s + b

    for function, call, fixed in (
        (positional, (3.0, x), r"functools\.partial\(fn, 3\.0\)"),
        (middle, (x, 3.0, x), r"lambda a, b, c=inspect\.signature\(fn\)\.parameters\['c'\]\."),
        (named_fn, (x, 3.0, x), r"lambda fn, b: fn_\(fn, 3\.0, b\)"),
    ):
        with pytest.raises(TypeError, match=fixed) as e:
            xfuse.jit(function)(*call)
        found = re.search(r"xfuse\.jit\((.*)\), (fn_?) the undecorated", str(e.value))
        assert found is not None
        code, called = found.groups()
        fixed_function = eval(code, {called: function, "functools": functools, "inspect": inspect})
        arrays = [a for a in call if isinstance(a, np.ndarray)]
        np.testing.assert_array_equal(xfuse.jit(fixed_function)(*arrays), function(*call))
    partial = xfuse.jit(functools.partial(scaled, scale=3.0))
    np.testing.assert_array_equal(partial(x), x * 3)
    # a partial of the jit function itself, as its hint reads: its `out=` was taken for a
    # parameter of the function's ("cannot have a parameter named 'out'")
    of_jit = xfuse.jit(functools.partial(xfuse.jit(scaled), scale=5.0), math="libm")
    np.testing.assert_array_equal(of_jit(x), x * 5)
    assert of_jit.options.math == "libm"
    # Its errors and repr name the partial's function (they raised AttributeError: a partial,
    # as a callable object, has no __name__), a callable object its type.
    with pytest.raises(xfuse.ArgumentTypeError, match=r"^scaled\(\): missing a required argument"):
        partial()
    assert repr(partial).startswith("<xfuse.jit scaled(a, *, scale=3.0): ")

    class Scaled:
        def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return a * b

    with pytest.raises(xfuse.ArgumentError, match=r"^Scaled\(\): arguments of shapes 'a' \(2,\)"):
        xfuse.jit(Scaled())(x, np.ones(3, np.float32))


@pytest.mark.parametrize(
    ("program", "name"),
    [
        (lambda a: np.dot(a, a), "np.dot"),  # traced as `a * a` (0-d object arrays' product)
        (lambda a: np.inner(a, a), "np.inner"),  # the same
        (lambda a: np.sum(a), "np.sum"),  # "np.add.reduce cannot be traced with keyword ..."
        (lambda a: np.add.reduce(a), "np.add.reduce"),
        (lambda a: np.mean(a), "np.mean"),  # "a traced array is not a Python number"
        (lambda a: np.concatenate([a, a]), "np.concatenate"),  # "zero-dimensional arrays ..."
        (lambda a: np.cumsum(a), "np.cumsum"),  # "must return traced arrays ..."
    ],
)
def test_numpy_functions_that_are_not_ew_ops_say_they_cannot_be_traced(
    program: Callable[[Any], Any], name: str
) -> None:
    """Each raised another error that did not say why, or (np.dot, np.inner) traced silently
    as something else."""
    with pytest.raises(TypeError, match=rf"^{re.escape(name)} cannot be traced: .*outside the jit"):
        xfuse.jit(program)(np.float32([1, 2, 3]))


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (lambda a: np.tanh(a, out=a), r"np\.tanh\(\.\.\., out=\) .* out= is not supported"),
        (lambda a: np.square(a, out=a), r"np\.square\(\.\.\., out=\) .* returns its results"),
        (lambda a: np.add(a, 1, dtype=np.float64), r"np\.add\(\.\.\., dtype=\) .*\.astype"),
        (lambda a: np.hypot(a, a, out=a), r"np\.hypot cannot be traced: inside @xfuse\.jit"),
        # np.clip takes a ufunc's keywords: they said numpy's "Cannot cast ufunc 'clip' input
        # 0 from dtype('O')" or "traced arrays have no truth value and no comparisons"
        (lambda a: np.clip(a, 0, 1, dtype=np.float64), r"^np\.clip\(\.\.\., dtype=\) .*astype"),
        (lambda a: np.clip(a, 0, 1, casting="unsafe"), r"^np\.clip\(\.\.\., casting=\) "),
        (lambda a: np.clip(a, 0, 1, where=a > 0), r"^np\.clip\(\.\.\., where=\) "),
        (lambda a: a.clip(0, 1, where=a > 0), r"^np\.clip\(\.\.\., where=\) "),
        # numpy takes a numpy bool for `where` alone ("'subok' must be a boolean")
        (lambda a: np.add(a, 1, subok=np.True_), r"^np\.add\(\.\.\., subok=\) "),
        (lambda a: np.clip(a, 0, 1, out=np.empty(3, np.float32)), r"^np\.clip\(\.\.\., out=\) "),
        (lambda a: np.clip(a, 0, 1, np.empty(3, np.float32)), r"^np\.clip\(\.\.\., out=\) "),
        (lambda a: a.clip(0, 1, out=np.empty(3, np.float32)), r"^np\.clip\(\.\.\., out=\) "),
    ],
)
def test_a_ufunc_keyword_that_does_not_trace_is_named(
    program: Callable[[Any], Any], message: str
) -> None:
    """They said "np.tanh cannot be traced with keyword arguments: inside @xfuse.jit use ...,
    np.tanh, ...", naming neither the keyword nor what to do."""
    with pytest.raises(TypeError, match=message):
        xfuse.jit(program)(np.float32([1, 2, 3]))


@pytest.mark.parametrize(
    "program",
    [
        lambda a: np.add(a, 1, where=True, casting="same_kind", order="K", dtype=None),
        lambda a: np.add(a, 1, where=np.True_, subok=True),
        lambda a: np.clip(a, 0.5, 4, where=True, casting="same_kind") + 1,
        lambda a: (a + 1).astype(np.float32, order="K", casting="unsafe", subok=True),
        lambda a: a.clip(0.5, 4, where=True, casting="same_kind"),  # (Python's TypeError)
    ],
)
def test_ufunc_keywords_at_numpys_defaults_trace(program: Callable[[Any], Any]) -> None:
    """They change nothing, as in numpy: they were "where= is not supported in tracing"."""
    a = np.float32([1, 2, 3])
    np.testing.assert_array_equal(xfuse.jit(program)(a), program(a))


@pytest.mark.parametrize(
    "program",
    [
        lambda a: np.round(a),
        lambda a: np.around(a, 2),
        lambda a: np.round(a, -1),
        lambda a: np.round(a, -2),  # x / 100, not x * 0.01: they differ at x = -16777051
        lambda a: np.round(a, 400),  # 10**400 is inf: NaN, as numpy's
        lambda a: np.rint(a),
        lambda a: np.floor(a),
        lambda a: np.ceil(a),
        lambda a: np.trunc(a),
        lambda a: np.fix(a),
        lambda a: a.round(),
        lambda a: a.round(1),
    ],
)
def test_rounding_traces_as_numpy_rounds(program: Callable[[Any], Any]) -> None:
    """They said "rounding is not an `ew` op"; np.round(x, decimals) is numpy's own
    rint(x * 10**decimals) / 10**decimals, ties to even, signed zeros kept."""
    specials = np.float32([1.5, 2.5, -0.5, -2.345, 0.125, 1e30, -0.0, np.inf, np.nan, 7.45])
    dense = np.random.default_rng(3).uniform(-1000, 1000, 4096).astype(np.float32)
    # where x / 100 and x * 0.01 round to integers apart (np.round(x, -2) divides)
    apart = np.arange(-(2**24), -(2**24) + 4096 * 50, 50, dtype=np.float32)
    x = np.concatenate([specials, dense, np.float32(0.001) * dense, apart])
    with np.errstate(invalid="ignore"):
        assert_same(xfuse.jit(program)(x), program(x))


@pytest.mark.parametrize("decimals", [24, 25, 38, 300, -25])
def test_rounding_to_many_decimals_scales_by_numpys_power_of_ten(decimals: int) -> None:
    """numpy multiplies 1e9 by 10 one step at a time, inexact from 1e25 on: the correctly
    rounded 10.0**decimals gave other bits in float64 (113 of 2,000 at 38 decimals)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2000) * 10 ** rng.uniform(-5, 8, 2000)
    with np.errstate(all="ignore"):
        assert_same(xfuse.jit(lambda a: np.round(a, decimals))(x), np.round(x, decimals))


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (lambda a: math.floor(a), r"round one Python number .* use np\.round\(x\), np\.floor"),
        (lambda a: math.trunc(a), r"round one Python number .* use np\.round\(x\), np\.floor"),
        (lambda a: round(a), r"round one Python number \(a numpy array has no __round__\)"),
        (lambda a: np.round(a, 1.5), r"decimals must be an integer"),
        (lambda a: np.round(a, out=a), r"np.round\(..., out=\) cannot be traced"),
    ],
)
def test_rounding_as_numpy_cannot_says_what_to_write(
    program: Callable[[Any], Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        xfuse.jit(program)(np.float32([1.5, 2.5]))


def test_indexing_says_it_cannot_be_traced() -> None:
    with pytest.raises(
        TypeError, match="indexing and slicing cannot be traced: .* pass the slices"
    ):
        xfuse.jit(lambda a: a[1:])(np.float32([1, 2, 3]))

    def assigned(a: np.ndarray) -> np.ndarray:
        y = a * 2
        y[a > 1] = 0  # (Python's "'Traced' object does not support item assignment")
        return y

    with pytest.raises(TypeError, match=r"assigning to elements .* y = np\.where\(m, v, y\)"):
        xfuse.jit(assigned)(np.float32([1, 2, 3]))


def test_floor_division_and_remainder_say_they_cannot_be_traced() -> None:
    """They raised Python's "unsupported operand type(s) for //: 'Traced' and 'int'"."""
    x = np.float32([7.5, -2.0])
    for program in (lambda a: a // 2, lambda a: 2 % a, lambda a: divmod(a, 2)):
        with pytest.raises(TypeError, match=r"`//`, `%`, divmod\) cannot be traced.*np\.remainder"):
            xfuse.jit(program)(x)


def test_what_a_traced_function_returns_instead_of_arrays_is_named() -> None:
    """It was "must return traced arrays computed from its arguments" whatever came back: a
    missing `return`, a generator function and a nested tuple alike."""

    def forgot(a):
        a * 2

    def generator(a):
        yield a * 2

    async def coroutine(a):
        return a * 2

    x = np.float32([1, 2])
    for function, got in [
        (forgot, r"returned None \(is a return statement missing\?\)"),
        (generator, r"returned a generator \(a generator or async function cannot be traced\)"),
        # (closed: Python warned besides that it "was never awaited")
        (coroutine, r"returned a coroutine \(a generator or async function cannot be traced\)"),
        (lambda a: ((a, a * 2), a), "returned a tuple holding a tuple: it must return an array"),
        (lambda a: [], "returned an empty list"),
        (lambda a: {"y": a}, r"returned a dict \(return a namedtuple to name the results"),
    ]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(TypeError, match=got):
                xfuse.jit(function)(x)
            gc.collect()  # (where a coroutine never awaited warns)
        assert caught == []


def test_an_array_default_is_an_argument() -> None:
    """`def f(a, b=np.float32([...]))` said "cannot combine a traced array with ndarray: use the
    function's array arguments" for `b`, which is one: numpy's `f(x)` adds the default."""
    bias, half = np.float32([10, 20]), np.float64(0.5)

    def shifted(a, b=bias, scale=2.0, *, c=half):
        return a * scale + b + c

    jitted = xfuse.jit(shifted)
    x, y = np.float32([1, 2]), np.float32([-1, -2])
    assert_same(jitted(x), shifted(x))
    assert_same(jitted(x, y), shifted(x, y))
    assert len(jitted.kernels) == 1  # b given or its default: the same signature
    (kernel,) = jitted.kernels.values()
    assert kernel.input_names == ("a", "b")  # c's numpy scalar default is a constant
    assert_same(jitted(x, c=np.float32(1)), shifted(x, c=np.float32(1)))
    assert_same(jitted(c=np.float32(1), b=y, a=x), shifted(x, y, c=np.float32(1)))
    assert len(jitted.kernels) == 2  # c's dtype is part of the signature, not the call's order


def test_array_attributes_len_iteration_and_matmul_say_what_traces() -> None:
    """They said "'Traced' object has no attribute 'shape'", "object of type 'Traced' has no
    len()", "'Traced' object is not iterable", "unsupported operand type(s) for @"."""
    x = np.float32([1, 2])
    attribute = r"traced array has no attribute '{}': .* known by its dtype .*not its dims"
    for program, error, message in [
        (lambda a: a / a.shape[-1], AttributeError, attribute.format("shape")),
        (lambda a: a.sum(), AttributeError, attribute.format("sum")),
        (lambda a: a * len(a), TypeError, "no length, no elements to iterate"),
        (lambda a: sum(a), TypeError, "no length, no elements to iterate"),
        (lambda a: a @ a, TypeError, "no matrix product: .* outside the @xfuse.jit function"),
    ]:
        with pytest.raises(error, match=message):
            xfuse.jit(program)(x)
    # hasattr and numpy's own look-ups still see a plain AttributeError
    assert_same(xfuse.jit(lambda a: a * 2 if not hasattr(a, "shape") else a)(x), x * 2)
    # not a sequence to numpy: `np.where` sees an array, nonzero where it is true
    assert_same(xfuse.jit(lambda a: np.where(a - 1, a, -1.0))(x), np.where(x - 1, x, -1.0))


COMPOSITES: list[tuple[str, Callable[[Any, Any], Any], bool]] = [
    ("isnan", lambda x, y: np.isnan(x).astype(x.dtype), False),
    ("isinf", lambda x, y: np.isinf(x).astype(x.dtype), False),
    ("isfinite", lambda x, y: np.isfinite(x).astype(x.dtype), False),
    ("sign", lambda x, y: np.sign(x), False),
    ("heaviside", lambda x, y: np.heaviside(x, y), False),
    ("fmax", lambda x, y: np.fmax(x, y), True),
    ("fmin", lambda x, y: np.fmin(x, y), True),
    ("fmax of a number", lambda x, y: np.fmax(x, 1.0), True),
    ("fmin of NaN", lambda x, y: np.fmin(np.nan, y), True),
    ("nan_to_num", lambda x, y: np.nan_to_num(x), False),
    ("nan_to_num given", lambda x, y: np.nan_to_num(x * 2, nan=1.5, posinf=7, neginf=-7), False),
    ("where of a NaN test", lambda x, y: np.where(np.isnan(x) | (y > 1), 0.0, x), False),
    ("fabs", lambda x, y: np.fabs(x), False),
    ("copysign", lambda x, y: np.copysign(x, y), False),
    ("copysign of a number", lambda x, y: np.copysign(2.5, y), False),
    ("signbit", lambda x, y: np.signbit(x).astype(x.dtype), False),
    (
        "a NaN's sign by copysign",
        lambda x, y: np.signbit(np.copysign(x, -y)).astype(x.dtype),
        False,
    ),
    ("deg2rad", lambda x, y: np.deg2rad(x * 1000), False),
    ("radians", lambda x, y: np.radians(y), False),
    ("rad2deg", lambda x, y: np.rad2deg(x + 0.1), False),
    ("degrees", lambda x, y: np.degrees(y), False),
]
"""numpy's functions written with comparisons, np.where and other ops, and whether a tie of -0
and +0 may give either zero (numpy's fmax and fmin loops differ by dtype; xfuse's give +0 the
larger)."""


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize(
    ("name", "program", "either_zero"), COMPOSITES, ids=[name for name, _, _ in COMPOSITES]
)
def test_numpy_functions_written_with_where_are_numpys(
    name: str, program: Callable[[Any, Any], Any], either_zero: bool, dtype: type
) -> None:
    x = np.array([-0.0, 0.0, np.nan, -np.nan, 2, -3, np.inf, -np.inf, 0.5, 1e-8], dtype)
    y = np.array([0.0, -0.0, 1, np.nan, np.nan, -3, 2, np.inf, -1, 2], dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        want = program(x, y)
    got = xfuse.jit(program)(x, y)
    if either_zero:
        zeros = want == 0
        assert np.array_equal(got[zeros], want[zeros])  # equal as numbers: either sign
        got, want = got[~zeros], want[~zeros]
    assert_same(got, want)


@pytest.mark.parametrize("h0", [0.5, np.float32(0.5), np.float64(0.5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_heaviside_of_nan_is_numpys_nan(dtype: type, h0: Any) -> None:
    """numpy's loops give their own NaN (positive, quiet) where x is NaN, ml_dtypes' bfloat16
    loop x itself: xfuse passed x on in every dtype (-NaN, a payload, a signalling NaN)."""
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001, 0xFFA00000], np.uint32)
    with np.errstate(invalid="ignore"):
        x = np.concatenate([nans.view(np.float32).astype(dtype), np.array([-1, 0, 2], dtype)])
        want = np.heaviside(x, h0)
        scalar = np.heaviside(x[1], np.ones(2, dtype))
    got = xfuse.jit(lambda a: np.heaviside(a, h0))(x)
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()  # NaN's bits too
    got = xfuse.jit(lambda h: np.heaviside(x[1], h))(np.ones(2, dtype))
    assert got.dtype == scalar.dtype and got.tobytes() == scalar.tobytes()
    # h0 comes through at ±0 as it is, its NaN's bits too
    zeros, h = np.array([0.0, -0.0, np.nan], dtype), -np.full(3, np.nan, dtype)
    with np.errstate(invalid="ignore"):
        want = np.heaviside(zeros, h)
    got = xfuse.jit(lambda a, b: np.heaviside(a, b))(zeros, h)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("ufunc", [np.deg2rad, np.rad2deg, np.fabs, np.signbit, np.copysign])
def test_every_half_precision_number_as_numpy_converts_angles_and_signs(
    ufunc: np.ufunc, dtype: type
) -> None:
    """float16 and bfloat16's deg2rad and rad2deg compute in float32 and round once, as numpy's
    and ml_dtypes' loops do (not times a constant rounded to 16 bits): all 65,536 numbers, the
    bits of numpy's (copysign against the reversed numbers, every sign pair)."""
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        if ufunc.nin == 2:
            y = x[::-1].copy()
            want, got = ufunc(x, y), xfuse.jit(lambda a, b: ufunc(a, b))(x, y)
        else:
            want, got = ufunc(x), xfuse.jit(lambda a: ufunc(a))(x)
    assert_same(got, want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
@pytest.mark.parametrize(
    "program",
    [
        lambda x: (x > 0) < 1e-8,  # (float16's 1e-8 is 0: all false)
        lambda x: (x > 0) == 1.0001,  # (float16's is 1)
        lambda x: (x > 0) == 1 + 1e-9,
        lambda x: (x > 0) > 0.999,
        lambda x: (x > 0) >= 1e-50,
        lambda x: (x > 0) == 1,
        lambda x: np.clip(x, 0.1, np.float64(2)),  # (0.1 rounded to x's dtype, then widened)
        lambda x: x.clip(1e-7, np.float64(2)),
        lambda x: np.clip(x, 0.1, np.array(2.0)),  # (a 0-d array bound is strong too)
        lambda x: np.heaviside(1e-60, x),  # (1e-60 is 0 in float32's loop: x itself)
        lambda x: np.heaviside(-1e-50, x),
    ],
)
def test_python_numbers_meet_arrays_and_masks_as_in_numpy(program, dtype: type) -> None:
    """A Python number takes the dtype numpy gives it with each operand (NEP 50): a mask (a
    bool) compares with the number as it is, not rounded to the dtype its 1s and 0s are held
    in; clip promotes x and both bounds at once; heaviside's number is rounded to the array's
    dtype first, as numpy's loop gets it."""
    x = np.array([-1.0, -0.0, 0.0, 0.05, 0.5, 1.0, 3.0, np.inf, np.nan], dtype)
    with np.errstate(all="ignore"):
        want = program(x)
    assert_same(xfuse.jit(program)(x), want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_a_python_number_in_a_narrow_logaddexp_is_rounded_to_the_arrays_dtype(dtype) -> None:
    """It met float32 unrounded in the float32 that float16 and bfloat16 compute in: 2,101 of
    the 65,536 float16 numbers 1 ulp off numpy's `np.logaddexp(x, 0.1)`, 129 bfloat16 ones."""
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    for program in (lambda a: np.logaddexp(a, 0.1), lambda a: np.logaddexp2(0.3, a)):
        with np.errstate(all="ignore"):
            want = program(x)
            unrounded = program(x.astype(np.float32)).astype(dtype)  # (0.1 met as float32's)
        got = xfuse.jit(program, math="libm")(x)
        assert got.dtype == want.dtype
        numbers = ~np.isnan(want.astype(np.float64))
        assert np.sum((got != want) & numbers) <= 4 < 100 < np.sum((unrounded != want) & numbers)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
@pytest.mark.parametrize("ufunc", [np.logaddexp, np.logaddexp2])
def test_logaddexp_is_numpys_to_its_exp_and_log1p(ufunc: np.ufunc, dtype: type) -> None:
    """log(b^x + b^y) as numpy defines it (the larger plus log1p(b^-|x - y|), x + log_b 2 where
    x == y): its infinities, NaNs and equal operands exactly, and within a few ulps of the
    float64 reference elsewhere (exp's and log1p's accuracy; float16 and bfloat16 computed in
    float32 and rounded once, as numpy's and ml_dtypes' loops do)."""
    special = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 3.0, -1e30], np.float64)
    x = np.concatenate([np.repeat(special, len(special)), np.linspace(-60, 60, 4001)])
    y = np.concatenate([np.tile(special, len(special)), np.linspace(30, -50, 4001) ** 3 / 900])
    x, y = x.astype(dtype), y.astype(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        want = ufunc(x, y)
        reference = ufunc(x.astype(np.float64), y.astype(np.float64))
    got = xfuse.jit(lambda a, b: ufunc(a, b))(x, y)
    assert got.dtype == want.dtype
    exact = ~np.isfinite(reference) | (x == y)
    assert_same(got[exact], want[exact])
    tolerance = 4 * float(ml_dtypes.finfo(dtype).eps)
    error = np.abs(got[~exact].astype(np.float64) - reference[~exact])
    assert np.all(error <= tolerance * np.maximum(np.abs(reference[~exact]), 1.0))


def test_nan_to_num_replaces_in_bfloat16_and_never_writes_its_argument() -> None:
    """numpy's nan_to_num returns a bfloat16 array as it is (it does not know it for a float);
    xfuse's replaces as in every other dtype."""
    x = np.array([np.nan, np.inf, -np.inf, 1.5], ml_dtypes.bfloat16)
    largest = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    got = xfuse.jit(lambda a: np.nan_to_num(a, nan=-2.0))(x)
    assert_same(got, np.array([-2.0, largest, -largest, 1.5], ml_dtypes.bfloat16))
    with pytest.raises(TypeError, match=r"copy=False\) writes x in numpy"):
        xfuse.jit(lambda a: np.nan_to_num(a, copy=False))(x)
