"""New outputs of `POOL_MIN_BYTES` and more come from blocks that outputs the program let go
(`xfuse.runtime.output_pool`): never one an array or a view still uses, up to the limit."""

from __future__ import annotations

import ctypes
import gc
import runpy
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xfuse
from xfuse.runtime import cache_files
from xfuse.runtime.arrays import data_pointer
from xfuse.runtime.call_plans import STREAMING_OUTPUT_PAGE_OFFSET
from xfuse.runtime.output_pool import (
    BLOCK_STEP,
    DEFAULT_POOL_BYTES,
    OUTPUT_POOL,
    POOL_MIN_BYTES,
    OutputPool,
    new_output,
    pool_limit,
    release_output_memory,
)

SIGMOID_GATE = "out = x * sigmoid(x) * r;"


def holder_of(array: np.ndarray) -> object:
    """The object that owns an array's memory: the array of its bases that owns it, or the
    first base that is no numpy array."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array if array.base is None else array.base


@pytest.fixture
def pooled() -> Iterator[np.ndarray]:
    """An input as large as the smallest pooled output; the pool empty before and after."""
    release_output_memory()
    yield np.linspace(-8, 8, POOL_MIN_BYTES // 4, dtype=np.float32)
    gc.collect()
    release_output_memory()


def test_a_large_new_output_reuses_the_memory_of_one_let_go(pooled: np.ndarray) -> None:
    """A call's new output of `POOL_MIN_BYTES` is a pooled block's view, writable, on its
    streaming page offset; once it is gone the next call's output is written in its memory
    (no page the system clears), with the bits of a call into an `out=` buffer."""
    kernel = xfuse.compile(SIGMOID_GATE)
    want = np.empty_like(pooled)
    kernel(pooled, pooled, out=want)
    first = kernel(pooled, pooled)
    assert isinstance(holder_of(first), ctypes.Array) and first.flags.writeable
    assert first.flags.c_contiguous and first.dtype == np.float32 and first.shape == pooled.shape
    assert data_pointer(first) % 4096 == STREAMING_OUTPUT_PAGE_OFFSET
    np.testing.assert_array_equal(first.view(np.uint32), want.view(np.uint32))
    address = data_pointer(first)
    del first
    assert OUTPUT_POOL.free_bytes >= POOL_MIN_BYTES
    second = kernel(pooled, pooled)
    assert data_pointer(second) == address and OUTPUT_POOL.free_bytes == 0
    np.testing.assert_array_equal(second.view(np.uint32), want.view(np.uint32))


def test_a_view_keeps_its_memory_out_of_the_pool(pooled: np.ndarray) -> None:
    """The output's block returns only when every array over it is gone: a view (of a view)
    that outlives the output keeps its values through later calls."""
    kernel = xfuse.compile(SIGMOID_GATE)
    first = kernel(pooled, pooled)
    view = first[::2][1:]
    kept = view.copy()
    del first
    gc.collect()
    assert OUTPUT_POOL.free_bytes == 0
    for _ in range(2):
        kernel(pooled * 2, pooled)
    np.testing.assert_array_equal(view, kept)
    del view
    assert OUTPUT_POOL.free_bytes >= POOL_MIN_BYTES


def test_xfuse_gives_the_free_blocks_back(pooled: np.ndarray) -> None:
    """`xfuse.release_output_memory()` gives every free block back to the system at once."""
    xfuse.compile(SIGMOID_GATE)(pooled, pooled)
    assert OUTPUT_POOL.free_bytes >= POOL_MIN_BYTES
    xfuse.release_output_memory()
    assert OUTPUT_POOL.free_bytes == 0


def test_small_outputs_and_a_pool_turned_off_are_numpys(
    pooled: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `POOL_MIN_BYTES`, or with `XFUSE_OUTPUT_POOL_BYTES=0`, an output is `np.empty`'s
    (`aligned_empty`'s where the call streams), which owns its memory."""
    kernel = xfuse.compile(SIGMOID_GATE)
    small = pooled[: POOL_MIN_BYTES // 4 - 16]
    assert holder_of(kernel(small, small)).flags.owndata  # streaming: aligned_empty's view
    assert xfuse.compile(SIGMOID_GATE, streaming=False)(small, small).flags.owndata
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", "0")
    assert pool_limit() == 0
    assert holder_of(kernel(pooled, pooled)).flags.owndata
    assert OUTPUT_POOL.free_bytes == 0


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)])
@pytest.mark.parametrize(("alignment", "offset"), [(0, 0), (64, 0), (4096, 2048)])
def test_new_output_starts_where_asked(dtype: np.dtype, alignment: int, offset: int) -> None:
    release_output_memory()
    shape = (64, POOL_MIN_BYTES // 64 // dtype.itemsize + 3)
    array = new_output(shape, dtype, alignment, offset)
    assert array.shape == shape and array.dtype == dtype and array.flags.c_contiguous
    assert data_pointer(array) % max(alignment, 64) == offset
    array[-1, -1] = 1  # the block holds its last byte
    del array
    release_output_memory()


def test_the_pool_keeps_free_blocks_up_to_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Free blocks are kept while they fit under `pool_limit()`; the others, and every block
    after a fork (`start_afresh`: a parent's output in the child), go back to the system."""
    pool = OutputPool()
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", str(3 * BLOCK_STEP))
    holders = [pool.empty(BLOCK_STEP - 64, 64, 0)[0] for _ in range(4)]
    assert pool.free_bytes == 0
    del holders[:]
    assert pool.free_bytes == 3 * BLOCK_STEP
    again = pool.empty(BLOCK_STEP - 64, 64, 0)[0]
    assert pool.free_bytes == 2 * BLOCK_STEP
    pool.start_afresh()
    assert pool.free_bytes == 0
    del again
    assert pool.free_bytes == 0
    pool.empty(BLOCK_STEP - 64, 64, 0)
    assert pool.free_bytes == BLOCK_STEP
    pool.release()
    assert pool.free_bytes == 0


def test_an_output_of_whole_blocks_takes_no_block_more() -> None:
    """A block starts on a page: an output of 2 MiB took two (56 MiB outputs 58 each, and the
    default pool kept eight of an LLM layer's, not nine); one starting half a page in needs
    the room (a streaming call's)."""
    pool = OutputPool()
    for alignment, offset, blocks in ((64, 0, 1), (4096, 0, 1), (4096, 2048, 2)):
        holder, start = pool.empty(BLOCK_STEP, alignment, offset)
        assert len(holder) == blocks * BLOCK_STEP and start + BLOCK_STEP <= len(holder)
        assert (ctypes.addressof(holder) + start) % alignment == offset
        del holder
    pool.release()


def test_a_limit_lowered_while_running_gives_back_what_it_no_longer_holds(
    monkeypatch: pytest.MonkeyPatch, pooled: np.ndarray
) -> None:
    """`XFUSE_OUTPUT_POOL_BYTES=0` set while running, or a lower limit, kept the blocks already
    free (never used again under 0) until `release_output_memory()`."""
    pool = OutputPool()
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", str(4 * BLOCK_STEP))
    held = [pool.empty(BLOCK_STEP - 64, 64, 0)[0] for _ in range(4)]
    del held[:3]
    assert pool.free_bytes == 3 * BLOCK_STEP
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", str(BLOCK_STEP))
    del held[:]  # (kept: the oldest two go back to the system)
    assert pool.free_bytes == BLOCK_STEP
    kernel = xfuse.compile(SIGMOID_GATE)
    monkeypatch.delenv("XFUSE_OUTPUT_POOL_BYTES")
    kernel(pooled, pooled)  # (a pooled output, let go)
    gc.collect()
    assert OUTPUT_POOL.free_bytes > 0
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", "0")
    assert holder_of(kernel(pooled, pooled)).flags.owndata
    assert OUTPUT_POOL.free_bytes == 0


def test_a_full_pool_gives_back_the_sizes_given_back_longest_ago(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block of a new size takes the place of the oldest free ones: a pool full of blocks of
    sizes no call asks for any more kept every new size out (a 40 MiB output 1.9x as slow as
    pooled, until `release_output_memory()`)."""
    pool = OutputPool()
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", str(4 * BLOCK_STEP))
    large = [pool.empty(2 * BLOCK_STEP - 64, 64, 0)[0] for _ in range(2)]
    del large[:]
    assert pool.free_bytes == 4 * BLOCK_STEP
    small, _ = pool.empty(BLOCK_STEP - 64, 64, 0)
    address = ctypes.addressof(small)
    del small
    assert pool.free_bytes == 3 * BLOCK_STEP  # one large block gave way
    again, _ = pool.empty(BLOCK_STEP - 64, 64, 0)
    assert ctypes.addressof(again) == address  # the small size pooled
    assert pool.free_bytes == 2 * BLOCK_STEP
    too_large = pool.empty(5 * BLOCK_STEP - 64, 64, 0)[0]
    del too_large  # past the limit alone: to the system, the pool as it was
    assert pool.free_bytes == 2 * BLOCK_STEP


def test_a_limit_that_is_no_size_warns_and_keeps_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", "lots")
    cache_files.warn_once.cache_clear()
    with pytest.warns(
        RuntimeWarning,
        match=r"^xfuse: XFUSE_OUTPUT_POOL_BYTES='lots' is no size \(.*: 256M, 1GiB; 0 turns it "
        r"off\); the output pool keeps its default limit, 536,870,912 bytes$",
    ):
        assert pool_limit() == DEFAULT_POOL_BYTES
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", "1GiB")
    assert pool_limit() == 1 << 30


def test_an_output_the_system_cannot_give_is_a_memory_error() -> None:
    """As numpy's `np.empty`: a `MemoryError` that says how much, not the system call's
    `OSError` (256 TiB: more than a 47-bit address space, whatever the overcommit policy)."""
    with pytest.raises(MemoryError, match=r"Unable to allocate 262144.00 GiB for a new output"):
        new_output((1 << 46,), np.dtype(np.float32))


def test_the_benchmarks_pool_off_run_gives_a_users_setting_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """benchmarks/outputs.py turns the pool off for its `np.empty` rows and back on after: to
    the user's own limit (it deleted the variable, and the rows after ran at the default)."""
    script = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "outputs.py"))
    monkeypatch.setenv("XFUSE_OUTPUT_POOL_BYTES", "64MiB")
    seen = script["pool_off"](pool_limit)()
    assert (seen, pool_limit()) == (0, 64 << 20)
