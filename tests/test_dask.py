"""Kernels and `@xfuse.jit` functions on dask arrays: lazy, one task per chunk, same numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

import xfuse
from xfuse.runtime.arrays import ArgumentError, ArgumentTypeError, numpy_dtype

if TYPE_CHECKING:
    from conftest import Gelu

da = pytest.importorskip(
    "dask.array", reason="dask is an optional extra: pip install 'xfuse[dask]'"
)


def gelu_inputs(rows: int = 203, columns: int = 96) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(2)
    return (
        rng.standard_normal((rows, columns), dtype=np.float32),
        rng.standard_normal(columns, dtype=np.float32),
        rng.standard_normal((rows, columns), dtype=np.float32),
    )


def tasks_named(array, prefix: str) -> int:
    return sum(str(key[0]).startswith(prefix) for key in dict(array.__dask_graph__()))


def boundaries(chunks: tuple[int, ...]) -> set[int]:
    return set(np.cumsum(chunks).tolist())


def test_gelu_with_bias_over_chunks_is_one_task_per_chunk(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.shaped_source)
    x, b, r = gelu_inputs()
    lazy = kernel(x=da.from_array(x, chunks=(50, 48)), b=da.from_array(b), r=da.from_array(r))
    assert isinstance(lazy, da.Array)
    assert lazy.dtype == np.float32 and lazy.shape == x.shape
    assert lazy.chunks == ((50, 50, 50, 50, 3), (48, 48))  # r and b follow x's chunks
    assert tasks_named(lazy, "xfuse-") == lazy.npartitions == 10
    # The same loop on each block; a block's tail may take the scalar loop instead of vectors.
    np.testing.assert_allclose(lazy.compute(), kernel(x=x, b=b, r=r), rtol=1e-6, atol=1e-6)


def test_chunks_of_different_inputs_are_unified(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.shaped_source)
    x, b, r = gelu_inputs()
    lazy = kernel(
        x=da.from_array(x, chunks=(64, 96)),
        b=da.from_array(b, chunks=32),
        r=da.from_array(r, chunks=(100, 40)),
    )
    # Each axis is cut wherever any input's chunks are cut (d: b's and r's cuts).
    assert boundaries(lazy.chunks[0]) == boundaries((64,) * 3 + (11,)) | boundaries((100, 100, 3))
    assert boundaries(lazy.chunks[1]) == boundaries((32,) * 3) | boundaries((40, 40, 16))
    np.testing.assert_allclose(lazy.compute(), kernel(x=x, b=b, r=r), rtol=1e-6, atol=1e-6)


def test_a_dim_declared_1_broadcasts_and_numpy_inputs_mix_in() -> None:
    kernel = xfuse.compile("out = x * s + 1;", shapes={"x": ["t", "d"], "s": [1, "d"]})
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    s = np.linspace(1, 2, 5, dtype=np.float32).reshape(1, 5)
    lazy = kernel(x=da.from_array(x, chunks=(4, 5)), s=s)
    np.testing.assert_array_equal(lazy.compute(), x * s + 1)


def test_a_static_dim_is_one_chunk() -> None:
    kernel = xfuse.compile("out = x * w;", shapes={"x": [None, 6], "w": [6]})
    x = np.arange(48, dtype=np.float32).reshape(8, 6)
    w = np.arange(6, dtype=np.float32)
    lazy = kernel(x=da.from_array(x, chunks=(3, 2)), w=da.from_array(w, chunks=2))
    assert lazy.chunks == ((3, 3, 2), (6,))
    np.testing.assert_array_equal(lazy.compute(), x * w)


def test_a_dim_name_on_two_axes_keeps_the_sizes_the_call_checked() -> None:
    """`x[t, t]` over blocks of 2 x 4: each block had a `t` of 2 on one axis and 4 on the other,
    an ArgumentError inside the task, at `.compute()`; such axes are one chunk each now."""
    kernel = xfuse.compile("input x[t, t]; out = x + 1;")
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    lazy = kernel(da.from_array(x, chunks=(2, 4)))
    np.testing.assert_array_equal(lazy.compute(), x + 1)


def test_an_output_with_a_1_where_the_iteration_space_is_larger_is_refused() -> None:
    """`y * 2` of a `y[t, 1]` beside `x[t, d]` is a `(t, 1)` output: dask's blocks wrote one
    column each, and the result claimed `(4, 3)` and computed `(4, 2)`, without an error."""
    kernel = xfuse.compile("input x[t, d], y[t, 1]; out = y * 2;")
    x, y = np.ones((4, 3), np.float32), np.arange(4, dtype=np.float32).reshape(4, 1)
    with pytest.raises(TypeError, match=r"output 'out' has shape \(4, 1\), not the iteration"):
        kernel(da.from_array(x, chunks=(2, 2)), da.from_array(y, chunks=(2, 1)))


def test_an_input_of_fewer_dims_than_its_static_ones_is_named() -> None:
    """The rechunking of a static dim indexed the array's chunks by the declared axes: an
    IndexError, where a numpy call names the argument."""
    kernel = xfuse.compile("y = x + b;", shapes={"x": ["t", 5], "b": [5]})
    one = da.ones(5, dtype=np.float32, chunks=2)
    with pytest.raises(ArgumentError, match=r"argument 'x': expected 2 dimensions"):
        kernel(one, one)


def test_bufferized_kernels_on_one_array_are_two_tasks() -> None:
    """A kernel of `compile_bufferized` has no frontend IR: two of them on one dask array had
    one task name, and dask computed one of them for both."""
    from xfuse.runtime.compiler import compile_bufferized, parse_ir

    double, shifted = (
        compile_bufferized(parse_ir(xfuse.compile(source).ir("ew-bufferize")), ["x"])
        for source in ("y = x * 2;", "y = x + 100;")
    )
    x = da.arange(8, dtype=np.float32, chunks=4)
    lazy_double, lazy_shifted = double(x), shifted(x)
    assert lazy_double.name != lazy_shifted.name
    np.testing.assert_array_equal((lazy_double + lazy_shifted).compute(), np.arange(8) * 3 + 100)


def test_several_outputs_are_several_arrays_with_the_kernel_dtypes() -> None:
    kernel = xfuse.compile(
        "h = x + b; y = tanh(h);", outputs=["y", "h"], dtype={"x": "bfloat16", "b": "float32"}
    )
    x = np.linspace(-2, 2, 1000, dtype=np.float32).astype(numpy_dtype("bfloat16"))
    b = np.full(1000, 0.25, np.float32)
    y, h = kernel(x=da.from_array(x, chunks=300), b=da.from_array(b, chunks=300))
    assert (y.dtype, h.dtype) == (np.float32, np.float32)
    expected_y, expected_h = kernel(x=x, b=b)
    np.testing.assert_array_equal(h.compute(), expected_h)
    np.testing.assert_allclose(y.compute(), expected_y, rtol=1e-6, atol=1e-6)
    assert tasks_named(y, "xfuse-") == 4 + 4  # the kernel's 4 tasks and y's 4 getitems


def test_jit_accepts_dask_arrays() -> None:
    @xfuse.jit
    def gelu(x, b, r):
        h = x + b
        return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

    x, b, r = gelu_inputs()
    lazy = gelu(da.from_array(x, chunks=(64, 32)), b, da.from_array(r, chunks=(64, 32)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), gelu(x, b, r), rtol=1e-6, atol=1e-6)


def test_out_with_dask_inputs_is_a_clear_error(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source)
    x = da.ones(10, dtype=np.float32)
    with pytest.raises(TypeError, match=r"out= cannot be used with dask.*dask\.array\.store"):
        kernel(x=x, b=x, r=x, out=np.empty(10, np.float32))
    # a jit function of masks as the kernel, for an `out` of no buffer too (it took one)
    masks = xfuse.jit(lambda a: (a > 0, a * 2))
    for out in ({}, [None, None]):
        with pytest.raises(TypeError, match=r"out= cannot be used with dask"):
            masks(x, out=out)
        assert all(isinstance(r, np.ndarray) for r in masks(np.ones(3, np.float32), out=out))


def test_bad_dask_arguments_are_named_before_anything_runs(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.shaped_source)
    x = da.ones((4, 6), dtype=np.float32)
    with pytest.raises(TypeError, match="argument 'b': expected dtype float32, got float64"):
        kernel(x=x, b=da.ones(6), r=x)
    with pytest.raises(ArgumentError, match=r"argument 'r': dimension 1 \(d\) has size 5"):
        kernel(x=x, b=x[0], r=da.ones((4, 5), dtype=np.float32))
    with pytest.raises(TypeError, match="missing a required argument: 'r'"):
        kernel(x=x, b=x[0])


def test_masked_arrays_and_matrices_beside_dask_arrays_are_refused_at_the_call(
    gelu: Gelu,
) -> None:
    """As a numpy call refuses them: they were accepted, and refused in a task at compute."""
    kernel = xfuse.compile("input x; input y; out = x + y;")
    values = np.arange(6, dtype=np.float32)
    x = da.from_array(values, chunks=2)
    masked = np.ma.masked_array(values, mask=values > 2)
    lazily_masked = da.ma.masked_array(x, mask=x > 2)
    add = xfuse.jit(lambda a, b: a + b)
    calls = [
        (lambda: kernel(x=x, y=masked), "argument 'y': a masked array's mask would be ignored"),
        (lambda: kernel(x=lazily_masked, y=x), "argument 'x': a masked array's mask"),
        (lambda: kernel(x=x, y=np.matrix(values)), "argument 'y': np.matrix is not taken"),
        (lambda: add(lazily_masked, x), "argument 'a': a masked array's mask"),
        (lambda: add(x, masked), "argument 'b': a masked array's mask"),
    ]
    for call, message in calls:
        with pytest.raises(ArgumentTypeError, match=message):
            call()


def test_a_kernel_without_shapes_takes_dask_arrays_of_any_one_shape() -> None:
    # As on numpy arrays: `xfuse.compile` without shapes= runs each block flat (it was "expected
    # 1 dimensions"), with chunks unified, Fortran-ordered blocks and several outputs.
    kernel = xfuse.compile("a = x * y + 1; b = x - y;", ["a", "b"])
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal((100, 37), dtype=np.float32) for _ in range(2))
    lazy_x = da.from_array(np.asfortranarray(x), chunks=(33, 10))
    a, b = kernel(x=lazy_x, y=da.from_array(y, chunks=(50, 37)))
    assert a.shape == b.shape == (100, 37) and a.chunks == ((33, 17, 16, 33, 1), (10, 10, 10, 7))
    np.testing.assert_array_equal(a.compute(), x * y + 1)
    np.testing.assert_array_equal(b.compute(), x - y)
    with pytest.raises(ArgumentError, match=r"inputs of different shapes \('x' \(100, 37\)"):
        kernel(x=lazy_x, y=da.from_array(y[:, :5]))
    zero_d = kernel(x=da.from_array(np.float32(3)), y=da.from_array(np.float32(2)))
    assert [value.compute()[()] for value in zero_d] == [7, 1]  # 0-d: a shape of its own


def test_unknown_chunk_sizes_are_a_clear_error() -> None:
    kernel = xfuse.compile("out = x * 2;")
    x = da.arange(10, dtype=np.float32, chunks=3)
    unknown = r"argument 'x': its chunk sizes are unknown.*compute_chunk_sizes"
    with pytest.raises(ArgumentError, match=unknown):
        kernel(x=x[x > 4])
    with pytest.raises(ArgumentError, match=unknown):  # (the jit's was numpy's TypeError)
        xfuse.jit(lambda x, y: x * y)(x[x > 4], x[x > 4])
    np.testing.assert_array_equal(
        kernel(x=x[x > 4].compute_chunk_sizes()).compute(), np.arange(5, 10) * 2
    )


def test_a_python_number_beside_dask_arrays_says_what_to_pass() -> None:
    """As a numpy call says it (the dask call said `expected dtype float32, got float64`, the
    dtype dask gave the number)."""
    kernel = xfuse.compile("input s[]; y = x * s;")
    x = da.ones(8, chunks=4, dtype=np.float32)
    with pytest.raises(ArgumentTypeError, match=r"a Python number has no dtype: pass np.asarray"):
        kernel(x=x, s=2.0)
    np.testing.assert_array_equal(kernel(x=x, s=np.float32(2)).compute(), np.full(8, 2.0))


def test_xfuse_functions_of_dask_arrays_are_lazy() -> None:
    """As np.tanh's of a dask array, and a kernel's: `xfuse.tanh(x)` computed the whole graph
    in the caller (twice: once more for its dtype) and returned a numpy array."""
    from dask.callbacks import Callback

    computed: list[int] = []

    class Counting(Callback):  # type: ignore[misc]
        def _start(self, graph: object) -> None:
            computed.append(1)

    x = da.from_array(np.linspace(-3, 3, 4000, dtype=np.float32).reshape(40, 100), chunks=10)
    with Counting():
        results = [xfuse.tanh(x), xfuse.maximum(x, 0.5), xfuse.where(x > 0, x, 0.0)]
    assert not computed and all(isinstance(r, da.Array) for r in results)
    values = x.compute()
    wanted = [np.tanh(values), np.maximum(values, 0.5), np.where(values > 0, values, 0.0)]
    for got, want in zip(results, wanted, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.compute(), want.astype(np.float32), rtol=1e-6)
    # and their errors are xfuse's own (dask's inference returned NotImplemented, silently)
    with pytest.raises(TypeError, match=r"^xfuse.maximum\(\): xfuse computes with real numbers"):
        xfuse.maximum(x, None)
    with pytest.raises(TypeError, match=r"^xfuse.tanh\(\): a masked array's mask would be"):
        xfuse.tanh(da.ma.masked_array(x, mask=x > 0))  # (it dropped the mask, block by block)
