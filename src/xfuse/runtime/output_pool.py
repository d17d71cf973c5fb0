"""New outputs of large calls in memory that earlier outputs let go (`new_output`).

numpy's `np.empty` of 32 MiB and more (`POOL_MIN_BYTES`) is memory the C library maps afresh for
each array and unmaps when it is freed (glibc maps every allocation from its largest threshold,
32 MiB on 64-bit hosts): the operating system clears its pages when the call first writes them,
which took as long as the call itself. SwiGLU with a 64 MiB float32 output took 17.8 ms so,
8.9 ms into an `out=` buffer, 9.1 ms now (Intel Xeon, 2026-12-04, `benchmarks/outputs.py`;
numpy's `x * r` 1.45x its own time into `out=`).

So a new output from that size is a view of a block this module maps itself, and when the
program lets go of it (the output and every view of it gone) the block waits in a pool for the
next new output of the same size, in steps of `BLOCK_STEP`; up to `pool_limit()` bytes of free
blocks (`XFUSE_OUTPUT_POOL_BYTES`, default `DEFAULT_POOL_BYTES`; 0 turns the pool off), past
which the blocks of the sizes given back longest ago go back to the system as numpy's would.
`release_output_memory()` gives back every free block now. Like numpy's, the blocks ask the
system for transparent huge pages (`MADV_HUGEPAGE`).
"""

from __future__ import annotations

import ctypes
import functools
import math
import mmap
import os
import threading
import weakref

import numpy as np

from xfuse.runtime.arrays import NewArray, aligned_empty
from xfuse.runtime.cache_files import size_setting

POOL_MIN_BYTES = 32 << 20
"""From this size on, a new output is a pooled block's (below it, `np.empty`'s memory is the C
library's heap, which it reuses itself: no cleared pages a call, measured up to 24 MiB)."""

BLOCK_STEP = 2 << 20
"""Blocks are whole multiples of a transparent huge page, so outputs of sizes a little apart
share them."""

DEFAULT_POOL_BYTES = 512 << 20
"""Free blocks kept where `XFUSE_OUTPUT_POOL_BYTES` sets no limit: nine outputs of an LLM
layer's `[1024, 14336]` float32 (56 MiB each), eight of a call that streams them (each starts
half a page into its block: 58 MiB)."""


def pool_limit() -> int:
    """The bytes of free blocks the pool keeps: `XFUSE_OUTPUT_POOL_BYTES` (a size as
    `XFUSE_CACHE_MAX_BYTES` takes it: 256M, 1GiB; 0 turns the pool off), else
    `DEFAULT_POOL_BYTES`; a value that is no size warns once and leaves the default."""
    return size_setting(
        "XFUSE_OUTPUT_POOL_BYTES",
        DEFAULT_POOL_BYTES,
        "256M, 1GiB",
        "turns it off",
        "the output pool",
    )


class OutputPool:
    """Free blocks by size, and the blocks' hand-out and return (`new_output`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: dict[int, list[mmap.mmap]] = {}
        self._free_bytes = 0
        self._generation = 0
        """Counts the forks this process is a child of: a block an array of the parent's had
        is not pooled in the child (its pages are the parent's until written)."""

    @property
    def free_bytes(self) -> int:
        """The bytes of the free blocks kept now."""
        return self._free_bytes

    def empty(self, nbytes: int, alignment: int, offset: int) -> tuple[ctypes.Array, int]:
        """A holder of at least `nbytes` after `offset` bytes past an `alignment` boundary (a
        ctypes array over a block: the block returns to the pool when the holder is
        collected, after every numpy array over it), and where in it those bytes start."""
        # A block starts on a page: an alignment that divides one needs no room of its own (a
        # 56 MiB output took a 58 MiB block, and the default pool kept eight, not nine).
        padding = offset % alignment if mmap.PAGESIZE % alignment == 0 else offset + alignment
        size = -(-(nbytes + padding) // BLOCK_STEP) * BLOCK_STEP
        with self._lock:
            free = self._free.get(size)
            block = free.pop() if free else None  # (the most recently given back: warm pages)
            if block is not None:
                self._free_bytes -= size
                if not free:
                    del self._free[size]
        if block is None:
            block = self._new_block(size)
        holder = (ctypes.c_char * size).from_buffer(block)
        finalizer = weakref.finalize(holder, self._give_back, block, self._generation)
        finalizer.atexit = False
        return holder, (offset - ctypes.addressof(holder)) % alignment

    def _new_block(self, size: int) -> mmap.mmap:
        """A new block of `size` bytes from the system; where it has none, after giving back
        the free blocks, a `MemoryError` as numpy's (not the system call's `OSError`)."""
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        try:
            block = mmap.mmap(-1, size, flags=flags)
        except OSError:
            self.release()
            try:
                block = mmap.mmap(-1, size, flags=flags)
            except OSError as error:
                raise MemoryError(
                    f"Unable to allocate {size / 2**30:.2f} GiB for a new output of a call"
                ) from error
        if hasattr(mmap, "MADV_HUGEPAGE"):
            block.madvise(mmap.MADV_HUGEPAGE)
        return block

    def _give_back(self, block: mmap.mmap, generation: int) -> None:
        """Pool a block whose holder was collected, the blocks of the sizes given back longest
        ago going back to the system where it would pass `pool_limit()` (a pool full of sizes
        no call asked for any more kept every new size out: pooling was off for good, a 40 MiB
        output 1.9x as slow until `release_output_memory()`, Intel Xeon, 2026-12-05). A block
        larger than the limit, or one given back where the lock is held (a collection that ran
        inside `empty` or `release`, or another thread's call), goes back to the system once
        this returns."""
        if not self._lock.acquire(blocking=False):
            return
        evicted: list[mmap.mmap] = []  # (unmapped once this returns, outside the lock)
        try:
            size = len(block)
            limit = pool_limit()
            kept = generation == self._generation and size <= limit
            # (a limit lowered since, to 0 too, evicts what it no longer holds either way)
            while self._free and self._free_bytes + size * kept > limit:
                oldest = next(iter(self._free))  # (sizes in the order last given back)
                blocks = self._free[oldest]
                evicted.append(blocks.pop(0))
                self._free_bytes -= oldest
                if not blocks:
                    del self._free[oldest]
            if kept:
                self._free[size] = [*self._free.pop(size, []), block]
                self._free_bytes += size
        finally:
            self._lock.release()

    def release(self) -> None:
        """Give every free block back to the system."""
        with self._lock:
            self._free.clear()
            self._free_bytes = 0

    def start_afresh(self) -> None:
        """In a forked child: a new lock (another thread may have held the old one at the fork)
        and no free blocks (writing the parent's pages would copy them)."""
        self._lock = threading.Lock()
        self._free = {}
        self._free_bytes = 0
        self._generation += 1


OUTPUT_POOL = OutputPool()
os.register_at_fork(after_in_child=OUTPUT_POOL.start_afresh)


def new_output(
    shape: tuple[int, ...], dtype: np.dtype, alignment: int = 0, offset: int = 0
) -> np.ndarray:
    """A new C-contiguous array for a call's output: `np.empty`'s (`alignment` 0) or one
    starting `offset` bytes past an `alignment`-byte boundary (`aligned_empty`); from
    `POOL_MIN_BYTES` on a view of a pooled block (`OUTPUT_POOL`, 64-byte aligned at least)."""
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    limit = pool_limit()
    if not limit and OUTPUT_POOL.free_bytes:  # (turned off since: its blocks go back now)
        OUTPUT_POOL.release()
    if nbytes < POOL_MIN_BYTES or not limit:
        if not alignment:
            return np.empty(shape, dtype)
        return aligned_empty(shape, dtype, alignment, offset)
    holder, start = OUTPUT_POOL.empty(nbytes, max(alignment, 64), offset)
    return np.frombuffer(holder, dtype, count, start).reshape(shape)


def output_maker(largest_bytes: int, alignment: int = 0, offset: int = 0) -> NewArray:
    """What makes a call's new outputs, the largest of them `largest_bytes`, where `alignment`
    and `offset` say (`new_output`): numpy's own `np.empty` where none is large enough to pool,
    which a call without `out=` reaches with no Python function between (1.11 against 0.97 us
    a call at n = 16 through `new_output`)."""
    if largest_bytes >= POOL_MIN_BYTES:
        return functools.partial(new_output, alignment=alignment, offset=offset)
    if alignment:
        return functools.partial(aligned_empty, alignment=alignment, offset=offset)
    return np.empty


def release_output_memory() -> None:
    """Give the memory of every output the program has let go, kept for the next new outputs
    (`OUTPUT_POOL`), back to the system now."""
    OUTPUT_POOL.release()
