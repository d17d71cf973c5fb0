"""A kernel compiled without shapes (every array `[?]`, but 0-d inputs) runs on inputs of any one
shape, 0-d to 4-d, as one flat loop: results, `out=`, `prepare` and the errors keep the caller's
shape."""

from __future__ import annotations

import numpy as np
import pytest

import xfuse
from xfuse.codegen.native import host_cpu
from xfuse.runtime.arrays import aligned_empty

SHAPES = [(), (5,), (2, 3), (2, 3, 4), (2, 1, 3, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fuse", [True, False])
def test_any_rank_runs_flat(shape: tuple[int, ...], fuse: bool) -> None:
    kernel = xfuse.compile("h = x * y; out = tanh(h) + y;", ["out"], fuse=fuse)
    rng = np.random.default_rng(len(shape))
    x, y = (np.asarray(rng.standard_normal(shape), dtype=np.float32) for _ in range(2))
    want = np.tanh(x.astype(np.float64) * y) + y
    got = kernel(x=x, y=y)
    assert got.shape == shape
    np.testing.assert_allclose(got, want, atol=2e-6)
    out = np.full(shape, np.nan, np.float32)
    assert kernel(x=x, y=y, out=out) is out  # the caller's buffer, as numpy's ufuncs return it
    np.testing.assert_allclose(out, want, atol=2e-6)
    assert kernel.prepare(x=x, y=y)().shape == shape


@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) != 1], ids=str)
def test_calls_after_the_first_of_a_shape_skip_the_full_checks(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common call finds its plan by the inputs' shapes: an N-d call of a flat kernel took
    the full checks every time (30-40 us where a 1-d call took 2.5); now only its first."""
    kernel = xfuse.compile("out = x * y + 1;")
    x, y = (np.asarray(np.arange(np.prod(shape)).reshape(shape) + i, np.float32) for i in (1, 2))
    full_checks = []
    check = kernel._check
    monkeypatch.setattr(
        kernel, "_check", lambda *args, **kwargs: full_checks.append(1) or check(*args, **kwargs)
    )
    out = np.empty(shape, np.float32)
    for _ in range(3):  # the first call, with `out`, takes the full checks: it returns `out` too
        assert kernel(x=x, y=y, out=out) is out
        np.testing.assert_array_equal(out, x * y + 1)
        got = kernel(x=x, y=y)
        assert got.shape == shape
        np.testing.assert_array_equal(got, x * y + 1)
    assert len(full_checks) == 1
    with pytest.raises(xfuse.ArgumentError, match=r"expected shape"):
        kernel(x=x, y=y, out=np.empty(x.size, np.float32))  # as many elements, flat


def test_a_streaming_call_on_n_d_inputs_skips_the_full_checks_and_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call large enough to stream (`HostCpu.streaming_bytes`) on N-d inputs of a flat kernel
    finds its plan by their shapes too, and streams as a 1-d call does: the head before the
    output's first line with normal stores, the rest with the streaming twin. It took the full
    checks every time (SwiGLU on [64, 8192] float32: 284.8 us a call, 241.4 flat)."""
    kernel = xfuse.compile("out = x * sigmoid(x) * y;")
    kernel.stream_choice = None  # (not timed: every call streams)
    rows = 4
    shape = (rows, (host_cpu().streaming_bytes // 12 // rows + 16) // 16 * 16)
    x, y = (np.random.default_rng(i).standard_normal(shape, dtype=np.float32) for i in (1, 2))
    want = xfuse.compile("out = x * sigmoid(x) * y;", streaming=False)(x=x, y=y)
    full_checks, streaming = [], []
    check, run_slices = kernel._check, kernel._run_slices
    monkeypatch.setattr(
        kernel, "_check", lambda *args, **kwargs: full_checks.append(1) or check(*args, **kwargs)
    )
    monkeypatch.setattr(
        kernel, "_run_slices", lambda *args: streaming.append(args[-1]) or run_slices(*args)
    )
    storage = aligned_empty((x.size + 16,), np.dtype(np.float32))
    for head in (0, 3, 0):  # elements before the output's first line
        out = storage[head : head + x.size].reshape(shape)
        assert kernel(x, y, out=out) is out
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
        got = kernel(x, y)
        assert got.shape == shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert len(full_checks) == 1
    assert streaming == [True] * 6


def test_several_outputs_keep_the_shape() -> None:
    kernel = xfuse.compile("a = x + 1; b = x * 2;", ["a", "b"])
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    a, b = kernel(x=x)
    np.testing.assert_array_equal(a, x + 1)
    np.testing.assert_array_equal(b, x * 2)


def test_a_strided_input_is_copied_and_a_strided_out_rejected() -> None:
    kernel = xfuse.compile("out = x * 2;")
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(kernel(x=base[:, ::2]), base[:, ::2] * 2)
    with pytest.raises(xfuse.ArgumentError, match="out 'out': must be C-contiguous .*or Fortran"):
        kernel(x=base[:, :3].copy(), out=np.empty((3, 4), np.float32).T)
    two = xfuse.compile("a = x * 2; b = x + 1;", ["a", "b"])
    c_order, f_order = np.empty((3, 4), np.float32), np.empty((4, 3), np.float32).T
    with pytest.raises(xfuse.ArgumentError, match="out 'b': must be C-contiguous"):
        two(x=base[:, :4].copy()[:3], out=(c_order, f_order))
    with pytest.raises(xfuse.ArgumentError, match="out 'b': must be C-contiguous"):
        two(x=base[:, :4].copy()[:3], out={"b": f_order, "a": c_order})


def test_different_shapes_name_the_inputs() -> None:
    kernel = xfuse.compile("out = x * y;")
    with pytest.raises(xfuse.ArgumentError, match=r"'x' \(2, 3\), 'y' \(3, 2\)"):
        kernel(x=np.ones((2, 3), np.float32), y=np.ones((3, 2), np.float32))


def test_declared_shapes_keep_broadcasting() -> None:
    kernel = xfuse.compile("input x[t, d]; input b[d]; out = x + b;", ["out"])
    x = np.ones((2, 3), np.float32)
    b = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x=x, b=b), x + b)


SCALED = "input x, y; input s[]; out = x * s + y;"


@pytest.mark.parametrize("scalar", [np.float32(1.5), np.array(1.5, np.float32)], ids=type)
def test_0d_inputs_beside_arrays_of_one_shape(
    scalar: np.ndarray | np.generic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 0-d input (`input s[];`) beside `[?]` ones: N-d inputs of one shape run flat with it,
    as without it (`x` of `[4, 3]` was "expected 1 dimensions"): C-ordered (repeated calls
    take the quick checked call), Fortran-ordered (a Fortran-ordered result, no copy),
    strided rows, `out=`, `prepare`; the 0-d input of another shape and inputs of two shapes
    are errors that name them."""
    kernel = xfuse.compile(SCALED)
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((40, 70)).astype(np.float32)
    x, y = wide[:, :33], rng.standard_normal((40, 33)).astype(np.float32)

    def want(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x * np.float32(1.5) + y).astype(np.float32)

    full_checks: list[int] = []
    check = kernel._check
    monkeypatch.setattr(
        kernel, "_check", lambda *args, **kwargs: full_checks.append(1) or check(*args, **kwargs)
    )
    contiguous = x.copy()
    for _ in range(3):
        np.testing.assert_array_equal(kernel(contiguous, y, scalar), want(contiguous, y))
    assert len(full_checks) == 1
    transposed = kernel(x.T.copy().T, y.T.copy().T, scalar)  # Fortran-ordered [40, 33]
    assert transposed.flags.f_contiguous
    np.testing.assert_array_equal(transposed, want(x, y))
    np.testing.assert_array_equal(kernel(x, y, scalar), want(x, y))  # x: strided rows
    out = np.empty_like(y)
    assert kernel(x, y, scalar, out=out) is out
    np.testing.assert_array_equal(out, want(x, y))
    np.testing.assert_array_equal(kernel.prepare(contiguous, y, scalar)(), want(x, y))
    with pytest.raises(xfuse.ArgumentError, match=r"argument 's': expected 0 dimensions .*\(1,\)"):
        kernel(contiguous, y, np.ones(1, np.float32))
    with pytest.raises(xfuse.ArgumentError, match=r"'x' \(40, 33\), 'y' \(33, 40\)\)"):
        kernel(contiguous, y.T.copy(), scalar)


def test_a_0d_input_beside_strided_rows_into_an_out_off_a_line() -> None:
    """Strided rows into an `out=` off a line, streaming: each row's head, then its rest from
    the line (`CallPlan.row_heads`). The rests' offsets moved the 0-d input too, by the head:
    every element past the heads read the memory after the scalar (found by a layouts fuzz)."""
    kernel = xfuse.compile(SCALED)
    kernel.stream_choice = None  # (not timed: every call that can stream streams)
    rows = 4
    d = (host_cpu().streaming_bytes // 12 // rows + 16) // 16 * 16
    rng = np.random.default_rng(5)
    wide = rng.standard_normal((rows, d + 16)).astype(np.float32)
    x, y = wide[:, :d], rng.standard_normal((rows, d)).astype(np.float32)
    storage = aligned_empty((x.size + 16,), np.dtype(np.float32))
    out = storage[3 : 3 + x.size].reshape(x.shape)  # 3 elements before each row's line
    assert kernel(x, y, np.float32(-2), out=out) is out
    np.testing.assert_array_equal(out, (x * np.float32(-2) + y).astype(np.float32))


def test_a_jit_function_of_one_shape_and_a_scalar_runs_flat() -> None:
    """`@xfuse.jit` traces arrays of one N-d shape beside 0-d ones (a numpy scalar) as `[?]`
    and `[]`: one flat loop, which streams as a 1-d call does (`x * sigmoid(x) * y * s` on
    [16384, 1000] float32 took 0.69 ns per element as a `[?, ?]` kernel, 0.48 flat)."""
    scaled = xfuse.jit(lambda x, s: x * s + 1)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(scaled(x, np.float32(2)), x * 2 + 1)
    (kernel,) = scaled.kernels.values()
    assert kernel.signature == "(x: float32[?], s: float32[]) -> (out: float32[?])"


@pytest.mark.parametrize("shape", ["1, 1", "1, 1, 1"])
def test_a_kernel_updating_an_all_ones_temporary_in_place_runs(shape: str) -> None:
    """Unfused, `exp` writes its temporary in place: a `[1, 1]` output read once (as an input
    may be) was taken to walk flat, then stored with one index into two dims (a ValueError
    from ew-to-llvm, which a chain of 20 tanh under `@xfuse.jit` met fused too)."""
    kernel = xfuse.compile(f"input x[{shape}];\nout = exp(exp(x * 2));", fuse=False)
    x = np.full([1] * (shape.count(",") + 1), 0.5, np.float32)
    np.testing.assert_allclose(kernel(x=x), np.exp(np.exp(x.astype(np.float64) * 2)), rtol=1e-6)

    @xfuse.jit
    def chain(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        for _ in range(20):
            x = np.tanh(x)
        return x + y

    want = np.full((1, 1), 0.5)
    for _ in range(20):
        want = np.tanh(want)
    y = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(chain(x.reshape(1, 1), y), want + y, rtol=1e-6)
