"""A compiled program callable on numpy arrays.

The native function follows the lowering's calling convention (`xfuse.transforms.to_llvm`): for each
input, then each output, a pointer to its first element and one i64 per `?` dimension. It is called
through its packed entry, with one pointer to an array of those argument words, so a program may
have any number of arrays (ctypes passes at most 1024 arguments to a call). ctypes releases the GIL
during the call (but for a call of one slice over at most `GIL_HELD_ELEMENTS`, a few us, which keeps
it: releasing it costs ~70 ns), so `threads=N` runs N slices of the outermost dimension concurrently
(each slice is a call on offset pointers with a smaller outer size, its bounds on whole cache lines
of every array split): the calling thread runs the first slice, N - 1 of the threads that the
process keeps for every kernel's split calls (`SliceWorkers`, `SHARED_SLICE_WORKERS`: started as
split calls first need them) the others, handed over and awaited in native code (`SliceWorker`,
`NativeFunction.run`). A split costs the hand-off and the other cores' cache misses on their slices'
data, so whether it pays depends on the kernel, the size and the host's load: such calls time
themselves, and per size class the faster way, one thread (the calling thread runs the call as one
slice) or split, runs, the other one tried again now and then (`SplitChoice`). A prepared call of
one slice and no workspace calls the entry from a Python builtin of its own (`bound_native_call`),
keeping or releasing the GIL the same way, without ctypes' ~160 ns a call; one of several slices is
a builtin that, where its size class stays on one thread untimed (`SplitTimes.one_thread_until`),
counts the call and runs its one-thread call in native code (`counted_native_call`), else decides in
Python. A checked call of several slices does the same (`CallPlan.counted_words`): where its size
class stays on one thread untimed, it runs no more Python than a one-thread kernel's checked call.

A program with temporaries (the unfused pipeline) takes one more argument, the workspace they
live in (`xfuse.transforms.workspace`): a byte buffer the kernel owns and reuses across calls, sized
per shape by the companion native function. Each slice of a split call gets its own part of one
workspace; concurrent calls from several Python threads each borrow a workspace of their own.

A call of one flat loop (a single-kernel program on 1-d arrays, or flattened ones) that moves at
least the host's `HostCpu.streaming_bytes` streams its outputs: it runs the elements before the
outputs' first 64-byte boundary with the function itself and the rest with its streaming twin, whose
vector stores are non-temporal (`xfuse.codegen.native.add_streaming_twins`); a split call splits
that rest, at 64-byte boundaries of the outputs. A loop nest ([t, d] arrays, a [d] bias) streams all
of it where its output rows are whole 64-byte lines starting on one (`streaming_sizes`; each row has
no head to run apart); where the outputs start elsewhere (an `out=` from `np.empty`), the rows
shifted onto the lines, the bias rotated to match (`ShiftedRows`), else none. Whether such a call
streams is timed per size class (`Kernel.stream_choice`): normal stores are kept where they run
faster by `SPLIT_MARGIN`. Both functions compute the same bits (but a NaN's sign where two NaNs
meet: docs/calling-kernels.md). A call that streams makes its new outputs start on a 64-byte
boundary, half a page from numpy's (`STREAMING_OUTPUT_PAGE_OFFSET`).

A call on a strided input whose rows are C-contiguous (`x[:, :d]` of a wider array:
`xfuse.runtime.arrays.row_axes`) runs one native call per row on the array where it is, the
rows one after another on this thread, or a group of them on each thread where the call splits
(`Kernel._row_plan`, `CallPlan.row_grid`, `CallPlan.row_groups`), streaming each where the
call would stream (as `stream_choice` says) and every output row starts on a line; one of short
rows (`ROW_CALL_MIN_ELEMENTS`) copies the input instead. An `out=` buffer whose rows are
C-contiguous (`buf[:, :d]`: `xfuse.runtime.arrays.rows_writable`) is written so, where it is. A
repeated call on arrays of the same shapes and strides skips the full checks
(`quick_row_call`).
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import itertools
import math
import numbers
import operator
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import llvmlite.binding as llvm_binding
import numpy as np

from xfuse.codegen.native import (
    STREAMING_ALIGNMENT,
    NativeModule,
    UnresolvedSymbolsError,
    compile_llvm_ir,
    declared_symbols,
    host_cpu,
    load_object_code,
    streaming_name,
)
from xfuse.codegen.optimized_ir import has_streaming_stores
from xfuse.runtime import cache_files, dask_arrays
from xfuse.runtime.arrays import (
    DATA_FIELD_OFFSET,
    DYNAMIC_INDEX,
    ArgumentError,
    CallSignature,
    NewArray,
    Parameter,
    aligned_empty,
    bind_outputs,
    bind_shapes,
    c_strides,
    check_aliasing,
    check_input,
    contiguous_input,
    data_pointer,
    extent,
    given_outputs,
    numpy_dtype,
    output_shape,
    read_data_field,
    row_axes,
    same_elements,
    share_elements,
)
from xfuse.runtime.output_pool import output_maker
from xfuse.transforms import packed_entry_name, workspace_size_function

MIN_ELEMENTS_PER_THREAD = 1 << 15
"""Below this many elements per thread, on average, a call is never split (nor timed for
`SplitChoice`; its slices are whole rows of a loop nest, so one may hold fewer): at the
cheapest kernels' ~0.3 ns per element that is ~10 us, less than handing a slice over."""

SPLIT_WARMUP_CALLS = 2
"""A size class's first calls run each way in a block, first on one thread, then split: this
many untimed, then `SPLIT_WINDOW` timed, whose medians make `SplitChoice`'s first decision.
Each way's first calls are cold and untimed: a one-thread call's first pays the new outputs'
page faults, a split's first starts the worker thread and finds the other core's half of the
data in this core's cache (quick-GELU at 2^18 on a 2-core VM: split 1.10, 0.81, 0.75 ns per
element, then 0.45; one thread 3.76, 0.78, 0.72, then 0.57-0.70: deciding on the first three of
each chose one thread, the split came after ~75 calls). Each way runs in a block, not
alternately: alternate calls find half their data in the wrong core's cache, which hides a
split's gain where the arrays fit in the two cores' caches (Mish at 2^20: 0.92x chosen against
1.67x split)."""

SPLIT_WINDOW = 5
"""`SplitChoice` compares the chosen way's median time of its last this-many timed calls of a
size class with the median of the probe's calls of the other way (the first decision: each
way's this-many timed calls after its `SPLIT_WARMUP_CALLS`): one outlier (a call that waited
for a core) changes nothing, nor, in the first decision, two (a way still warming up). Not the
fastest time: on a loaded host a split's times vary more (it needs two cores at once), and its
fastest would pick a way whose usual time is worse."""

SPLIT_FIRST_BLOCK = SPLIT_WARMUP_CALLS + SPLIT_WINDOW
"""The calls of each way's block before the first decision (`SPLIT_WARMUP_CALLS`)."""

SPLIT_PROBE_INTERVAL = 32
"""Once a size class has chosen, its calls go in rounds: the chosen way untimed, then
`SPLIT_WINDOW` calls of it timed (this many calls of the chosen way in all, or more where the
last probe lost by much: `SPLIT_PROBE_SHARE`), then `SPLIT_PROBE_CALLS` of the other way (a
probe), which decide the next round's way, so that a change of the host's load shows within a
round. An untimed call of the chosen way costs what a one-thread kernel's does and deciding:
where it runs on one thread, a native count and comparison (`SplitTimes.counts`), checked or
prepared; a split, its Python work, timed with it (`SplitChoice`): ~1.5 us alone, but 9-16 us
in a loop of hardswish's ~60 us calls at 2^18 elements on a 2-core VM, whose data evicts the
interpreter's)."""

SPLIT_PROBE_CALLS = 3
"""How many calls in a row a probe runs the other way: the first finds its data in the other
way's caches, the median of the probe's (last) calls is the way's usual time."""

SPLIT_PROBE_LONGEST = 8
"""The most calls of a probe that still gets faster: while its last call took over
`SPLIT_MARGIN` less than the one before, it runs on, and decides by its last
`SPLIT_PROBE_CALLS`. A split after a stretch on one thread can take several calls to reach
its usual time: `log(1 + exp(x))` at 2^18 on a 2-vCPU KVM guest, 133 us a call on one thread
and 95-100 split, took 245, 113, 94; 358, 209, 164, 109, 100; 195, 105, 97 us split after
32 one-thread calls (the sleeping worker's vCPU waking and warming up), so a probe that
decided on its first three kept one thread where the split was 1.4x faster."""

SPLIT_PROBE_SHARE = 0.01
"""The share of a size class's time that its losing probes may cost: after a probe that cost
`extra` calls of the chosen way more than as many calls of it (`probe_cost`), the next round runs
the chosen way at least `extra / SPLIT_PROBE_SHARE` calls (`SPLIT_PROBE_INTERVAL` for a probe
of calls each up to 11% slower, 300 where a split takes twice as long), at most
`SPLIT_LONGEST_ROUND`. Probes every 32 calls that lose by 37% (a split of hardswish at 2^18 on a
loaded host) cost 3.2% of the time. A probe costs more than its calls' usual loss: its first call
finds the data in the chosen way's caches, and the chosen way's first calls after it find the
data in the probe's (hardswish at 2^18 on an idle 2-core VM, 62 us a call on one thread, a split
about as fast: the probe's calls took 137, 67 and 84 us, the next one-thread calls ~170 us more
than usual; counting its median's loss alone made rounds of 37 to 61 calls: replayed on those
wall times, 14.5% more time than one thread alone; with the switches, rounds of ~300 calls and
3.2%, over 1% as the timed calls' Python, outside their clock, and the way back cost more than
the probe's first call measures)."""

SPLIT_LONGEST_ROUND = 4096
"""The most calls of the chosen way between two probes, however much the last one lost: a
way that wins again (the host's load dropped) is found within this many calls."""

SPLIT_MARGIN = 0.05
"""A split is chosen only where it is this much faster than one thread: a tie keeps the other
core for other work (and "never slower than one thread" against timing noise)."""

SETTLING_CALLS = 2 * SPLIT_FIRST_BLOCK + SPLIT_PROBE_INTERVAL + SPLIT_PROBE_CALLS
"""Calls of a size class after which its split and stream choices (`SplitChoice`) have
settled: the first decision's blocks of each way, then a round of the chosen way and the other
way's probe. A benchmark runs them untimed first (`xfuse bench`: a call of 2^22 float32 GELU
timed in its first block, streaming, took 1.12-1.22x the ceiling's time; docs/benchmarks.md)."""

STREAMING_OUTPUT_PAGE_OFFSET = 2048
"""Where in its 4 KiB page a streaming call's new output starts: half a page from where numpy's
large arrays start (16 bytes in), so that no store is a little ahead of a later load in the low
12 bits of their addresses, which holds the load up (4K aliasing). On Zen 4 at 2^24, hardswish
with its output a line boundary, 48 bytes, ahead of its input took 0.68 ns/el, half a page away
0.20 (docs/benchmarks.md)."""

GIL_HELD_ELEMENTS = 1 << 14
"""A call of one native call over at most this many elements keeps the GIL: releasing and
taking it back cost ~70 ns of a prepared call's ~2 us at 2^12 elements in cache (where the
call, a builtin, costs ~0.1 us beside the loop; docs/benchmarks.md), and it blocks other Python
threads for no more than such a call: ~10 us for the activations, ~0.3 ms for three of libm's
scalar calls an element, but as long as the program's work takes (30 nested rounds of those,
13.9 ms: the rule counts elements, not work; docs/calling-kernels.md)."""

HELD_WORKSPACE_BYTES = 1 << 18
"""The largest workspace a plan keeps of its own (`CallPlan.held_workspace`): a kernel keeps up
to `PLAN_CACHE_SIZE` plans, one a shape, and each held one as large as its calls' temporaries
(64 lengths of a 4 MiB call kept 260 MiB, now 16). A larger call borrows from the kernel's
pool, which costs most there: `x + sin(b)` at `[2, 65536]` float32, 256 KiB of temporaries,
44.2-44.8 us checked in its own, 57.5-58.8 borrowing (Intel Xeon, 2026-12-06)."""

GIL_SERIALIZES = getattr(sys, "_is_gil_enabled", lambda: True)()
"""Whether a native call that keeps the GIL runs alone among this process's Python threads (not
in a free-threaded interpreter)."""

REPEATED_ROWS_TO_COPY = 8
"""A checked call on a strided input copies it where its rows would run a libm kernel again
this many times or more (`Kernel._repeats`): a row's `sin(cos(...))` beside x `[t, 4096]` of
`[t, 4112]` took 17.1 us by rows, 22.9 copying at t = 2; 23.1 and 24.2 at 4; 35.8 and 28.2 at
8; 241.9 and 144.5 at 64 (Intel Xeon, 2026-12-06)."""

ROW_CALL_MIN_ELEMENTS = 32
"""A call whose strided inputs have rows (`row_axes`) of at least this many elements runs one
native call per row on the arrays as they are (`Kernel._row_plan`); one of shorter rows copies
them (`np.ascontiguousarray`), one call (a strided `out=` of shorter rows is an error).
`x * sigmoid(x) * y` on the halves of a `[t, 2d]` float32 array, rows against copies (Intel
Xeon, 2026-12-04): at 2^18 elements 1.05-1.08x the time for d = 16, 0.75-0.76x at 32,
0.58-0.61x at 64, 0.53-0.76x from 128 to 4096; at 2^22 0.52-0.59x for d = 16 to 64 (but one run
of d = 32, 1.54x, in a slow spell of the host), 0.19-0.36x from 128."""

SHIFTED_ROWS_MIN_BYTES = 64 << 20
"""A loop nest's call into outputs off a line runs as `ShiftedRows` from this many bytes read
and written (below it, with normal stores). On the Intel Xeon of 2026-12-04 (504 MiB of L3
reported) non-temporal stores lost to normal ones on `[t, 14336]` nests up to 42-63 MiB even on
lines (SwiGLU of `x + b`, float32: 1.10-1.15x the time from 5 to 42 MiB), and shifted rows, with
their three calls and the bias's copy, took 1.32x at 5 MiB, 1.08x at 42 and 63, 0.91-0.92x from
84 to 168 MiB; the LLM bf16 GELU 1.04x at 21 MiB, 0.95-1.00x from 32 to 84 MiB
(docs/benchmarks.md)."""

PLAN_CACHE_SIZE = 64
"""How many argument shapes a kernel remembers the call plan of."""

QUICK_OUTPUT_PAIRS = 4096
"""The most pairs of outputs a quick call tests for overlap, written out (`quick_call`,
`quick_row_call`): a call of a kernel of more (92 outputs and more), given `out=`, takes the
full checks. Their count grows with the square of the outputs: a `.ew` program of 1,000 outputs
took 8.3 s and 2.8 GiB compiling its quick call's one expression at its first call, one of 2,000
a MemoryError. Below the bound the quick call is the faster: `out=` calls of `y<i> = x * <i>`
on 4 elements took 39 us written out at 33 outputs, 77 with the full checks; 110 and 166 at 64;
240 and 269 at 90; 414 at 128 with the full checks, whose first call took 4.2 ms, not the
quick call's ~50 at 90 (Intel Xeon, 2026-12-06). (The tests of each output against each input
grow with the program.)"""

WORKSPACE_ALIGNMENT = 64
"""Byte alignment of a workspace and of each thread's part of it (a cache line)."""

SLICE_SPIN_NS = 100_000
"""How long a `SliceWorker` spins for its next slice after its last one (and a split call for
its workers' slices) before it sleeps in the kernel (a futex): a spin costs a core for as long,
a sleeper's wake-up the split call ~10 us. Between two split calls of a prepared call in a loop
the worker waits for the caller's Python (its end of one call and its start of the next):
12-20 us at 2^18 elements, 20-45 at 2^20 (data that evicted the interpreter's from the caches),
on an idle 2-vCPU Emerald Rapids VM. There the native part of the call (post, own slice, wait)
took 66-77 us for silu at 2^18 where the worker slept after each slice (no spin) against 58-61
with this spin, and for hardswish 46-53 against 35-36 (with a 10 us spin, that often ran out,
40-42); a worker idle longer gives its core back within 0.1 ms."""

SLOT_IDLE, SLOT_ASLEEP, SLOT_SIGNALLED, SLOT_STOP = 0, 1, 2, 3
"""The values of a `SliceWorker`'s slot's two words (`BOUND_CALL_IR`'s `serve_slices`): nothing
posted (or the slice not done), the waiting thread asleep in a futex, a slice posted (or
done), and the worker to end."""

SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129
"""Linux x86-64's futex system call and its operations on a word of one process."""


def native_argument_count(parameter: Parameter) -> int:
    return 1 + len(parameter.dynamic_axes)


def _packed(arguments: Sequence[int]) -> array.array[int]:
    """Native arguments (pointers and sizes) as the array of words a packed entry reads (its
    address is `words.buffer_info()[0]`; an `array` is made 4x faster than a ctypes array).
    Signed: `run_grid`'s plan moves pointers back along a negative stride."""
    return array.array("q", arguments)


def splittable(parameters: Sequence[Parameter]) -> bool:
    """Whether a call over these parameters may be split along its first axis (into threads'
    slices, or a head and a streaming rest): every array of the full rank has a `?` or 1
    there (a static length would make each part run all of it)."""
    rank = max((len(p.shape) for p in parameters), default=0)
    return bool(parameters) and all(
        not p.shape  # a scalar (a constant output): nothing to split
        or len(p.shape) < rank
        or p.shape[0] in (DYNAMIC_INDEX, 1)
        for p in parameters
    )


class NativeFunction:
    """A function of the native module with its parameters (inputs, then outputs).

    With `workspace`, the native function takes a trailing workspace (pointer and byte size) and
    the module has its companion that computes the bytes needed (see `workspace_bytes`).
    """

    def __init__(
        self,
        native: NativeModule,
        name: str,
        inputs: Sequence[Parameter],
        outputs: Sequence[Parameter],
        workspace: bool = False,
    ):
        self.native = native  # keeps the engine (and the code) alive
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.workspace = workspace
        parameters = (*self.inputs, *self.outputs)
        entry = native.address(packed_entry_name(name))
        self.entry = entry
        """The packed entry's address."""
        self.native_entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(entry)
        """The packed entry: takes the address of one call's argument words (`_packed`); the
        GIL is released while it runs."""
        words = map(native_argument_count, parameters)
        positions = list(itertools.accumulate(words, initial=0))[: len(parameters)]
        self.pointer_call = entry_on_pointers(entry, positions)
        """The same entry as a builtin (cheaper to call than ctypes) that writes a call's data
        pointers (each array's, inputs then outputs) into a copy of its plan's words
        (`CallPlan.one_call_words`, which also says whether the call keeps the GIL:
        `GIL_HELD_ELEMENTS`) and runs them; the native code never calls back into Python."""
        self.counted_pointer_call = entry_on_pointers(entry, positions, counted=True)
        """`pointer_call` that first counts the call in its size class where it stays on one
        thread untimed, else runs nothing and returns None (`CallPlan.counted_words`)."""
        streaming = native.find(packed_entry_name(streaming_name(name)))
        # (a twin whose loop has no vector store to mark, a scalar libm call's, would be timed
        # against its own copy)
        self.streaming_entry = streaming if has_streaming_stores(native.optimized_ir) else None
        """The address of the streaming twin's packed entry
        (`xfuse.codegen.native.add_streaming_twins`): stores that bypass the cache, for outputs
        aligned to `STREAMING_ALIGNMENT`; or None, also where it has none."""
        self._workspace_bytes = (
            ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(
                native.address(packed_entry_name(workspace_size_function(name)))
            )
            if workspace
            else None
        )
        self.splittable = splittable(parameters)

    def workspace_bytes(self, arguments: Sequence[int]) -> int:
        """The workspace bytes a call with these native arguments (minus the workspace) needs;
        only their sizes matter, so the data pointers may be 0."""
        if self._workspace_bytes is None:
            return 0
        words = _packed(arguments)
        return self._workspace_bytes(words.buffer_info()[0])

    def run(
        self,
        argument_lists: Sequence[Sequence[int]] | Sequence[RowRun],
        workspace: int = 0,
        workers: Sequence[SliceWorker] = (),
        streaming: bool = False,
    ) -> None:
        """Call the native function once per argument list: the first on this thread, the next
        ones concurrently on `workers` (one each), any left after them on this thread too. It
        returns once the workers' have run: all of it is one native call (`BOUND_CALL_IR`'s
        `run_slices`), which nothing interrupts (a KeyboardInterrupt is raised after it), so
        the slices' memory outlives them.

        With a workspace, each list ends with its part's offset and size: `workspace` is the
        address the offsets count from. `streaming`: the first list is a head that runs with
        normal stores and the others (outputs from a `STREAMING_ALIGNMENT` boundary) run with
        the streaming twin; this thread runs the head and the first of them.

        The lists may be a row plan's rows (`RowRun`s: `CallPlan.row_grid`), which have no
        head (with `streaming`, every row streams), one per thread (`CallPlan.row_groups`):
        this thread runs the first, `workers` the others, each one's rows one after another
        (`run_slices` runs `run_grid` on each one's plan).
        """
        if argument_lists and isinstance(argument_lists[0], RowRun):
            entry = self.entry_of(streaming)
            groups = [rows.plan(entry, workspace) for rows in argument_lists]
            if len(groups) == 1:
                self.run_rows(groups[0])
                return
            handed = workers[: len(groups) - 1]
            run_grid = _bound_call_methods()[0].address("run_grid")
            header = [len(groups), 1, len(handed), len(groups[0]), run_grid, run_grid]
            plan = _packed([*header, *(worker.address for worker in handed)])
            for group in groups:
                plan.extend(group)
            _slice_function("run_slices")(plan.buffer_info()[0])
            return
        if workspace:
            argument_lists = [[*a[:-2], workspace + a[-2], a[-1]] for a in argument_lists]
        own = 1 + streaming
        handed = workers[: len(argument_lists) - own]
        plan = _packed(
            [
                len(argument_lists),
                own,
                len(handed),
                len(argument_lists[0]),
                self.entry,
                self.entry_of(streaming),
                *(worker.address for worker in handed),
                *itertools.chain.from_iterable(argument_lists),
            ]
        )
        _slice_function("run_slices")(plan.buffer_info()[0])

    @staticmethod
    def run_rows(plan: array.array[int]) -> None:
        """Run `run_grid`'s `plan` (`RowRun.plan`) on this thread."""
        _slice_function("run_grid")(plan.buffer_info()[0])

    def entry_of(self, streaming: bool) -> int:
        """The packed entry's address, or its streaming twin's."""
        entry = self.streaming_entry if streaming else self.entry
        assert entry is not None
        return entry

    def chunks(self, iteration: tuple[int, ...], threads: int) -> list[tuple[int, int]]:
        """Row ranges of axis 0 to run on separate threads (one range: no split), as equal as
        whole cache lines of every split array allow (no line written by two threads). A slice
        may end past its vector loop's last full iteration: its remainder costs 0.03-0.13 us
        (docs/benchmarks.md), nothing beside a slice of at least `MIN_ELEMENTS_PER_THREAD`."""
        if threads <= 1 or not iteration or not self.splittable:
            return [(0, iteration[0] if iteration else 1)]
        total = int(np.prod(iteration))
        rows = iteration[0]
        count = max(1, min(threads, rows, total // MIN_ELEMENTS_PER_THREAD))
        step = self.aligned_rows(iteration)
        if count * step > rows:
            step = 1
        bounds = [round(rows * i / count / step) * step for i in range(count)] + [rows]
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    def aligned_rows(self, iteration: tuple[int, ...]) -> int:
        """The fewest rows of axis 0 that are whole cache lines (`WORKSPACE_ALIGNMENT` bytes)
        of every array that a split divides (those of the iteration's full rank), each row of
        its own size (a `[t, 1]` array's is one element: it was priced as a row of the
        iteration's, and two threads wrote one line of it)."""
        step = 1
        for parameter in (*self.inputs, *self.outputs):
            if len(parameter.shape) == len(iteration) and parameter.shape[0] != 1:
                inner = math.prod(
                    size
                    for size, dim in zip(iteration[1:], parameter.shape[1:], strict=True)
                    if dim != 1
                )
                row_bytes = numpy_dtype(parameter.dtype).itemsize * inner
                step = math.lcm(
                    step, WORKSPACE_ALIGNMENT // math.gcd(WORKSPACE_ALIGNMENT, row_bytes)
                )
        return step


@dataclass(frozen=True)
class CallPlan:
    """What a call needs besides the data pointers; it depends only on the arguments' shapes."""

    output_shapes: tuple[tuple[int, ...], ...]
    templates: tuple[tuple[int, ...], ...]
    """Per thread: the native argument list, with 0 where a data pointer goes (and, with a
    workspace, the offset and size of the thread's part where the workspace goes)."""
    pointer_slots: tuple[tuple[tuple[int, int, int], ...], ...]
    """Per thread: (position in the list, array index, byte offset) of each data pointer."""
    workspace_bytes: int
    """The workspace a call needs, every thread's part together (0: the program has none)."""
    input_shapes: tuple[tuple[int, ...], ...] = ()
    elements: int = 0
    """The elements of the iteration (what a call's time per element is over)."""
    streams: bool = False
    """A call large enough to stream its outputs (`HostCpu.streaming_bytes`), of one loop or
    loop nest whose outputs all have its shape (`streaming_sizes`), and the function has a
    streaming twin."""
    streaming: bool = False
    """A streaming call: the unaligned head's argument list, then one per slice of the aligned
    rest (`NativeFunction.run`)."""
    loop_nest: bool = False
    """The iteration has 2 or more axes: a call streams only where every row of its outputs
    starts on a line (`streaming_sizes`), with no head. A flat loop's plan remembered for
    N-d arrays (`Kernel._remember_flat_run`) is not one, whatever its `output_shapes`."""
    heads: dict[int, CallPlan] = field(default_factory=dict, compare=False, hash=False)
    """The streaming plans of this call's shapes, by the head's length."""
    one_thread: CallPlan | None = field(default=None, compare=False)
    """Where this plan has several slices: the same call planned for one thread (one slice, or a
    streaming call's head and one rest), what runs where the call does not split."""
    new_array: NewArray = field(default=np.empty, compare=False)
    """Makes the call's new outputs (large ones in reused memory: `output_maker`): for a call
    that streams, on `STREAMING_ALIGNMENT` boundaries (where a loop nest's outputs must start
    to stream, and a flat loop then has no head)."""
    row_grid: RowGrid | None = field(default=None, compare=False, hash=False)
    """A row plan (`Kernel._row_plan`): one native call per row of the arrays, the one slice
    of `templates` (each data pointer's word holding its array's offset in row 0) moved along
    this grid; run on this thread, one row after another, every row with the streaming twin
    where `streaming` (each row of outputs starts on a line)."""
    row_groups: tuple[int, ...] = ()
    """A row plan split over threads: the bounds of each thread's rows (0, ..., rows); its
    `one_thread` runs them all on one."""
    split_counts: array.array[int] | None = field(default=None, compare=False)
    """Where this plan has several slices and runs on one thread as one native call: its size
    class's `SplitTimes.counts` in the kernel's `split_choice` (`Kernel.split_choice` makes new
    plans when it is replaced), kept alive with the plan."""
    shifts: dict[int, ShiftedRows | None] = field(default_factory=dict, compare=False, hash=False)
    """A loop nest's `ShiftedRows` by the outputs' elements before their first line (None: the
    call cannot run so)."""
    row_heads: CallPlan | None = field(default=None, compare=False)
    """A row plan of a flat loop whose every output row starts the same number of elements
    before a line (strided rows into an `out=` from `np.empty`): the rows' heads, run first
    with normal stores; this plan runs the rows' rests, which start on lines, and streams
    (`Kernel._new_row_plan`)."""
    last_rows_run: dict[str, tuple[tuple[int, ...], array.array[int]]] = field(
        default_factory=dict, init=False, compare=False, hash=False, repr=False
    )
    """A row plan's last `rows_run`, by its pointers (read and replaced whole: calls from
    several threads each get one of their own pointers)."""

    def for_pointers(self, function: NativeFunction, pointers: Sequence[int]) -> CallPlan:
        """This plan, or for a call that streams its outputs, the streaming plan for where the
        outputs (the last pointers) start: a head up to the outputs' first `STREAMING_ALIGNMENT`
        boundary, which must be the same element for every output (else no streaming), then the
        rest in as many slices as this plan has, each starting on such a boundary."""
        if not self.streams:
            return self
        if self.loop_nest:
            return self._for_aligned_rows(function, pointers)
        head = common_head(function, pointers[len(function.inputs) :])
        if head < 0:
            return self
        plan = self.heads.get(head)
        if plan is None:
            length = self.elements
            if head >= length:
                return self
            line_elements = math.lcm(
                *(STREAMING_ALIGNMENT // numpy_dtype(p.dtype).itemsize for p in function.outputs)
            )
            lines, parts = (length - head) // line_elements, len(self.templates)
            bounds = [head + round(lines * i / parts) * line_elements for i in range(parts)]
            split = list(zip([0, *bounds], [*bounds, length], strict=True))
            plan = self._streaming_plan(function, pointers, split)
            self.heads[head] = plan
        return plan

    def _for_aligned_rows(self, function: NativeFunction, pointers: Sequence[int]) -> CallPlan:
        """`for_pointers` of a loop nest, whose every row of outputs starts on a line
        (`streaming_sizes`) where the outputs do: then an empty head and this plan's slices
        streaming, else this plan."""
        if any(pointer % STREAMING_ALIGNMENT for pointer in pointers[len(function.inputs) :]):
            return self
        plan = self.heads.get(0)
        if plan is None:
            rows = function.chunks(self.output_shapes[0], len(self.templates))
            plan = self._streaming_plan(function, pointers, [(0, 0), *rows])
            self.heads[0] = plan
        return plan

    def shifted_rows(self, function: NativeFunction, pointers: Sequence[int]) -> ShiftedRows | None:
        """For a loop nest that streams but whose outputs start off a line (`for_pointers`
        returned it as it is): the same call as `ShiftedRows`, whose middle part streams, where
        every output starts the same number of elements before a line and the nest can run
        so; else None."""
        head = common_head(function, pointers[len(function.inputs) :])
        if head < 0:
            return None
        if head not in self.shifts:
            self.shifts[head] = ShiftedRows.plan(function, self, head)
        return self.shifts[head]

    def _streaming_plan(
        self, function: NativeFunction, pointers: Sequence[int], split: list[tuple[int, int]]
    ) -> CallPlan:
        """The streaming plan of this call in these parts (the head first), and of its
        `one_thread` twin for the same pointers."""
        plan = make_plan(function, self.input_shapes, 1, split)
        if self.one_thread is None:
            return plan
        return dataclasses.replace(
            plan, one_thread=self.one_thread.for_pointers(function, pointers)
        )

    @property
    def can_stream(self) -> bool:
        """A call large enough to stream (`streams`), or a row plan whose rows stream: one that
        streams or not as `Kernel.stream_choice` says."""
        return self.streams or (self.streaming and self.rows)

    @functools.cached_property
    def normal_stores(self) -> CallPlan:
        """This call, large enough to stream, with normal stores (`Kernel.stream_choice`)."""
        one_thread = self.one_thread
        return dataclasses.replace(
            self,
            streams=False,
            streaming=False if self.rows else self.streaming,
            heads={},
            shifts={},
            one_thread=None if one_thread is None else one_thread.normal_stores,
        )

    @functools.cached_property
    def one_call_words(self) -> bytes | None:
        """For a call that is one native call on this thread whatever its data pointers (one
        slice, no streaming, and no workspace or the `held_workspace`): a word that says
        whether it keeps the GIL (1: it runs over at most `GIL_HELD_ELEMENTS`), then its
        argument words with 0 for the data pointers, what `NativeFunction.pointer_call` takes
        (`quick_call`); None for any other call."""
        if len(self.templates) > 1 or self.streams or self.rows:
            return None
        if self.workspace_bytes:
            return self.held_words if self.keeps_gil else None
        return _packed([self.elements <= GIL_HELD_ELEMENTS, *self.templates[0]]).tobytes()

    @functools.cached_property
    def held_words(self) -> bytes | None:
        """For a call of one slice (no streaming, no rows) of a program with temporaries:
        `one_call_words` with its workspace in `held_workspace`, which a call that releases the
        GIL uses holding `workspace_lock` (`Kernel._run_held`); None for any other call."""
        if not self.holds_workspace:
            return None
        arguments = self.on_held_workspace(self.templates[0])
        return _packed([self.elements <= GIL_HELD_ELEMENTS, *arguments]).tobytes()

    @property
    def holds_workspace(self) -> bool:
        """Whether this plan's calls run in a `held_workspace` of its own: one slice (no
        streaming, no rows) of a program with temporaries of at most `HELD_WORKSPACE_BYTES`."""
        return (
            len(self.templates) == 1
            and not (self.streams or self.rows)
            and 0 < self.workspace_bytes <= HELD_WORKSPACE_BYTES
        )

    @property
    def workspace_lock(self) -> threading.Lock:
        """Held by the call that uses `held_workspace` releasing the GIL; a call that finds it
        taken borrows a workspace (`Kernel._run_held`). One per plan (`_first_made`)."""
        return _first_made(self, "_workspace_lock", threading.Lock)

    @property
    def keeps_gil(self) -> bool:
        """A call of one slice over at most `GIL_HELD_ELEMENTS` keeps the GIL while it runs: no
        other Python thread runs meanwhile (where the interpreter has a GIL)."""
        return self.elements <= GIL_HELD_ELEMENTS and len(self.templates) == 1 and GIL_SERIALIZES

    @property
    def held_workspace(self) -> np.ndarray:
        """The workspace of this plan's calls that keep the GIL (`keeps_gil`): no two run at
        once, so they share one and borrow none (`WorkspacePool.borrow`, whose Python took
        most of a short call: a prepared `x + sin(cos(b))` on `[4, 64]` float32 ran in 5.5-5.7
        us, 0.12 us with it; Intel Xeon, 2026-12-06). One per plan (`_first_made`): what
        `held_words` points into, which a prepared call keeps alive with it (the plan may be
        dropped from the kernel's cache first)."""
        return _first_made(
            self,
            "_held_workspace",
            lambda: aligned_empty((self.workspace_bytes,), np.dtype(np.uint8), WORKSPACE_ALIGNMENT),
        )

    def on_held_workspace(self, arguments: Sequence[int]) -> list[int]:
        """`arguments` (one slice's words, ending with its workspace part's offset and size)
        with the offset made an address in `held_workspace`."""
        *words, offset, size = arguments
        return [*words, data_pointer(self.held_workspace) + offset, size]

    @functools.cached_property
    def counted_words(self) -> bytes | None:
        """Where this plan has `split_counts`: their address, then the one-thread call's
        `one_call_words`, what `NativeFunction.counted_pointer_call` takes (`quick_call`), which
        counts and runs the call where its size class stays on one thread untimed
        (`SplitTimes.one_thread_until`); else None. (It counts with the GIL held; a count of
        `SplitChoice.next_call`, in Python, may lose one made between its read and its write
        by another Python thread's call: a round is then one call longer.)"""
        if self.split_counts is None:
            return None
        assert self.one_thread is not None and self.one_thread.one_call_words is not None
        address = _packed([self.split_counts.buffer_info()[0]]).tobytes()
        return address + self.one_thread.one_call_words

    def native_call(self, pointers: Sequence[int]) -> NativeCall:
        """This plan's call on arrays at `pointers` (inputs, then outputs)."""
        return NativeCall(self, pointers)

    @functools.cached_property
    def size_class(self) -> SizeClass:
        return (self.elements.bit_length(), self.streaming)

    @property
    def rows(self) -> bool:
        return self.row_grid is not None

    @property
    def slices(self) -> int:
        """The slices a split call runs concurrently (`Kernel.run_plan`)."""
        if self.rows:
            return max(1, len(self.row_groups) - 1)
        return len(self.templates) - self.streaming

    def rows_run(self, function: NativeFunction, pointers: Sequence[int]) -> array.array[int]:
        """`run_grid`'s plan of this row plan's rows (one thread, no workspace) at `pointers`.
        The last one is kept: a repeated call's arrays are mostly the same, a prepared call's
        always (a prepared SwiGLU on the float32 halves of `[8, 2048]` took 6.9 us building
        them at each run, 3.9 keeping them; docs/benchmarks.md)."""
        key = tuple(pointers)
        last = self.last_rows_run.get("last")
        if last is not None and last[0] == key:
            return last[1]
        (rows,) = self.argument_lists(pointers)
        assert isinstance(rows, RowRun)
        run = rows.plan(function.entry_of(self.streaming), 0)
        self.last_rows_run["last"] = (key, run)
        return run

    def argument_lists(self, pointers: Sequence[int]) -> list[list[int]] | list[RowRun]:
        """Each slice's native argument words, or a row plan's `RowRun` per thread."""
        grid = self.row_grid
        if grid is not None:
            (template,), (slots,) = self.templates, self.pointer_slots
            first = list(template)
            for position, index, _ in slots:
                first[position] += pointers[index]
            if not self.row_groups:
                return [RowRun(grid, tuple(first), 0, grid.rows)]
            runs = []
            part = self.workspace_bytes // (len(self.row_groups) - 1)
            for group, (low, high) in enumerate(itertools.pairwise(self.row_groups)):
                if part:  # (each thread's rows in a workspace part of their own)
                    first[-2] = template[-2] + group * part
                runs.append(RowRun(grid, tuple(first), low, high))
            return runs
        lists = []
        for template, slots in zip(self.templates, self.pointer_slots, strict=True):
            arguments = list(template)
            for position, index, offset in slots:
                arguments[position] = pointers[index] + offset
            lists.append(arguments)
        return lists


def _first_made(instance: object, name: str, make: Callable[[], Any]) -> Any:
    """`instance`'s value `name`, made by `make` the first time: the first one stored wins where
    threads make it at once (`dict.setdefault` under the GIL), where `cached_property` (without
    a lock from Python 3.12) would keep the last, another thread's lock or a workspace whose
    address a call already took."""
    value = instance.__dict__.get(name)
    return value if value is not None else instance.__dict__.setdefault(name, make())


def common_head(function: NativeFunction, output_pointers: Sequence[int]) -> int:
    """How many elements every output of `function` at `output_pointers` has before its first
    `STREAMING_ALIGNMENT` boundary (0: all start on one); -1 where that is not one number of
    whole elements for all."""
    heads = set()
    for parameter, pointer in zip(function.outputs, output_pointers, strict=True):
        itemsize = numpy_dtype(parameter.dtype).itemsize
        gap = -pointer % STREAMING_ALIGNMENT
        heads.add(gap // itemsize if gap % itemsize == 0 else -1)
    return heads.pop() if len(heads) == 1 else -1


@dataclass(frozen=True)
class ShiftedRows:
    """A loop nest's call (`[t, d]` arrays, a `[d]` bias) whose outputs start `head` elements
    before a line, as three calls, so that the largest streams: the first row's `head`
    elements (normal stores), then every row shifted by `head` (`middle`: rows of `d` that
    start on a line, each the end of one row and the start of the next, whose `[d]` inputs are
    copies rotated by `head`), then the last row's end (normal stores). It streams where a
    call into outputs from `np.empty`, 16 bytes past a line, did not: SwiGLU of `x + b` on
    `[1024, 14336]` float32 took 1.10x the time of a call into outputs on lines so, 0.95x
    now (Intel Xeon, 2026-12-04; docs/benchmarks.md)."""

    head: int
    parts: tuple[CallPlan, CallPlan, CallPlan]
    """The first row's head, the shifted rows, the last row's end."""
    offsets: tuple[tuple[int, int, int], ...]
    """Per array (inputs, then outputs): its byte offset in each part, -1 for a `[d]` input
    in the middle part (its rotated copy)."""
    rotated: tuple[tuple[int, int, int], ...]
    """The `[d]` inputs the middle part reads rotated: (input index, bytes of a row, bytes of
    the head that move to the copy's end)."""

    @staticmethod
    def plan(function: NativeFunction, plan: CallPlan, head: int) -> ShiftedRows | None:
        """Where the call moves `SHIFTED_ROWS_MIN_BYTES` or more, every input has the call's
        shape (C-contiguous), or its last axis alone (a bias; any leading dims 1), or one
        element, the sizes of each part are ones the
        signature takes and the middle part streams (`streaming_sizes`: of a 3-d nest, only
        where its rows less one are whole lines): the parts' plans; else None."""
        iteration = plan.output_shapes[0]
        width, rows = iteration[-1], math.prod(iteration[:-1])
        if not 0 < head < width or rows < 2:
            return None
        parameters = (*function.inputs, *function.outputs)
        shapes = (*plan.input_shapes, *plan.output_shapes)
        traffic = sum(
            numpy_dtype(p.dtype).itemsize * math.prod(shape)
            for p, shape in zip(parameters, shapes, strict=True)
        )
        if traffic < SHIFTED_ROWS_MIN_BYTES:
            return None
        part_shapes: list[tuple[tuple[int, ...], ...]] = []
        offsets, rotated = [], []
        for index, (parameter, shape) in enumerate(zip(parameters, shapes, strict=True)):
            itemsize = numpy_dtype(parameter.dtype).itemsize
            if shape == iteration:
                leading = (1,) * (len(shape) - 2)
                part_shapes.append(
                    (leading + (1, head), leading + (rows - 1, width), leading + (1, width - head))
                )
                offsets.append((0, head * itemsize, (head + (rows - 1) * width) * itemsize))
            elif math.prod(shape) == 1:
                part_shapes.append((shape, shape, shape))
                offsets.append((0, 0, 0))
            elif shape[-1] == width == math.prod(shape):
                part_shapes.append(
                    tuple((*shape[:-1], size) for size in (head, width, width - head))
                )
                offsets.append((0, -1, head * itemsize))
                rotated.append((index, width * itemsize, head * itemsize))
            else:
                return None
        first, middle, last = (
            [sizes[part] for sizes in part_shapes[: len(function.inputs)]] for part in range(3)
        )
        try:
            parts = (
                make_plan(function, first, 1),
                make_plan(function, middle, len(plan.templates)),
                make_plan(function, last, 1),
            )
        except ArgumentError:
            return None  # (static sizes)
        if not parts[1].streams:
            return None  # (3-d and up: the rows after the first are not whole lines)
        return ShiftedRows(head, parts, tuple(offsets), tuple(rotated))

    def part_pointers(self, pointers: Sequence[int], rotated: Sequence[int]) -> list[list[int]]:
        """Each part's data pointers, from the call's and the rotated copies'."""
        copies = dict(zip((index for index, _, _ in self.rotated), rotated, strict=True))
        return [
            [
                copies[index] if offset[part] < 0 else pointer + offset[part]
                for index, (pointer, offset) in enumerate(zip(pointers, self.offsets, strict=True))
            ]
            for part in range(3)
        ]


@dataclass(frozen=True)
class RowGrid:
    """The rows of a row plan (`Kernel._row_plan`): the index grid of the call's leading axes,
    `counts` (C order: the last axis fastest), and per axis how many bytes each data pointer
    of one row's call moves from one row to the next along it (its array's stride there, 0
    where it broadcasts). `run_grid` makes each row's argument words from the last one's as it
    goes, so a plan takes a few words per axis, not a list per row: RoPE on the halves of `q`
    `[4096, 32, 128]` (131,072 rows of 64 float32 elements) made 16 MiB of row words at each
    call, ~21 ms of its 31 (docs/benchmarks.md)."""

    counts: tuple[int, ...]
    positions: tuple[int, ...]
    """The argument words that move (data pointers), by their position in a row's words."""
    steps: tuple[tuple[int, ...], ...]
    """Per axis, the bytes each of `positions` moves along it."""

    @property
    def rows(self) -> int:
        return math.prod(self.counts)

    @functools.cached_property
    def carries(self) -> tuple[int, ...]:
        """Per axis (one after another), what the moving words gain where that axis's index
        goes up by one and every axis after it goes back to 0 (`run_grid`'s odometer)."""
        carries: list[int] = []
        back = [0] * len(self.positions)  # (the span of the axes after this one)
        for count, steps in reversed(list(zip(self.counts, self.steps, strict=True))):
            carries[:0] = [step - span for step, span in zip(steps, back, strict=True)]
            back = [span + (count - 1) * step for step, span in zip(steps, back, strict=True)]
        return tuple(carries)

    def plan(self, entry: int, first: Sequence[int], low: int, high: int) -> array.array[int]:
        """`run_grid`'s plan of rows `low` to `high` with the function at `entry`, row 0's
        argument words being `first`: the counts of rows, words per row, axes and moving
        words, the entry, each axis's count, row `low`'s index, the moving words' positions,
        the carries, row `low`'s words."""
        index = []
        rest = low
        for count in reversed(self.counts):
            rest, at = divmod(rest, count)
            index[:0] = [at]
        words = list(first)
        for at, steps in zip(index, self.steps, strict=True):
            for position, step in zip(self.positions, steps, strict=True):
                words[position] += at * step
        header = [high - low, len(first), len(self.counts), len(self.positions), entry]
        return _packed([*header, *self.counts, *index, *self.positions, *self.carries, *words])


@dataclass(frozen=True)
class RowRun:
    """Rows `low` to `high` of a row plan's `grid` at row 0's argument words `first` (the data
    pointers written in; with a workspace, its part's offset from the workspace's start): what
    one thread runs of a call by rows (`CallPlan.argument_lists`, `NativeFunction.run`)."""

    grid: RowGrid
    first: tuple[int, ...]
    low: int
    high: int

    def plan(self, entry: int, workspace: int) -> array.array[int]:
        """`run_grid`'s plan of these rows, the function at `entry`, the workspace (if the
        function has one) at `workspace`."""
        first = self.first
        if workspace:
            first = (*first[:-2], first[-2] + workspace, first[-1])
        return self.grid.plan(entry, first, self.low, self.high)


def rows_of(
    plan: CallPlan,
    one_row: CallPlan,
    counts: tuple[int, ...],
    strides: Sequence[np.ndarray],
    starts: Sequence[int],
    streaming: bool,
) -> CallPlan:
    """`plan`'s call as a row plan (`Kernel._row_plan`): `one_row`'s call (the plan of one
    row) on each row of the grid of `counts`, each array (inputs, then outputs) `starts` bytes
    past its data pointer in row 0 and its `strides` bytes apart along each axis of the grid,
    with the streaming twin or not."""
    (template,), (slots,) = one_row.templates, one_row.pointer_slots
    origin = list(template)  # (the data pointers' words are 0)
    for position, index, _ in slots:
        origin[position] = starts[index]
    moving = [(position, index) for position, index, _ in slots if any(strides[index])]
    steps = tuple(
        tuple(int(strides[index][axis]) for _, index in moving) for axis in range(len(counts))
    )
    return dataclasses.replace(
        plan,
        templates=(tuple(origin),),
        pointer_slots=one_row.pointer_slots,
        workspace_bytes=one_row.workspace_bytes,
        streams=False,
        streaming=streaming,
        heads={},
        one_thread=None,
        row_grid=RowGrid(counts, tuple(position for position, _ in moving), steps),
        split_counts=None,
    )


def make_plan(
    function: NativeFunction,
    input_shapes: Sequence[tuple[int, ...]],
    threads: int,
    streaming_split: list[tuple[int, int]] | None = None,
) -> CallPlan:
    """Check the input shapes against the signature (raises naming the argument) and plan; with
    `streaming_split` (head and rest of one loop), the streaming plan (`CallPlan.for_pointers`).
    """
    iteration = bind_shapes(function.inputs, input_shapes, function.outputs)
    output_shapes = tuple(output_shape(p, iteration) for p in function.outputs)
    parameters = (*function.inputs, *function.outputs)
    shapes = (*input_shapes, *output_shapes)
    rank = len(iteration)
    chunks = streaming_split or function.chunks(iteration, threads)
    templates, pointer_slots = [], []
    workspace_bytes = 0
    for low, high in chunks:
        arguments: list[int] = []
        slots = []
        for index, (parameter, shape) in enumerate(zip(parameters, shapes, strict=True)):
            sizes = list(shape)
            offset = 0
            if len(chunks) > 1 and len(shape) == rank and rank and parameter.shape[0] != 1:
                row_bytes = numpy_dtype(parameter.dtype).itemsize * int(np.prod(shape[1:]))
                offset = low * row_bytes
                sizes[0] = high - low
            slots.append((len(arguments), index, offset))
            arguments.append(0)
            arguments += [sizes[axis] for axis in parameter.dynamic_axes]
        if function.workspace:
            part = function.workspace_bytes(arguments)
            arguments += [workspace_bytes, part]
            workspace_bytes += -(-part // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT
        templates.append(tuple(arguments))
        pointer_slots.append(tuple(slots))
    traffic = sum(
        numpy_dtype(p.dtype).itemsize * int(np.prod(shape))
        for p, shape in zip(parameters, shapes, strict=True)
    )
    streams = (
        function.streaming_entry is not None
        and function.splittable
        and streaming_split is None
        and not workspace_bytes
        and all(shape == iteration for shape in output_shapes)
        and streaming_sizes(function, output_shapes)
        and traffic >= host_cpu().streaming_bytes
    )
    return CallPlan(
        output_shapes,
        tuple(templates),
        tuple(pointer_slots),
        workspace_bytes,
        tuple(input_shapes),
        int(np.prod(iteration)),
        streams,
        streaming_split is not None,
        rank > 1,
        one_thread=make_plan(function, input_shapes, 1)
        if len(chunks) > 1 and streaming_split is None
        else None,
        new_array=output_maker(
            max(
                numpy_dtype(p.dtype).itemsize * math.prod(shape)
                for p, shape in zip(function.outputs, output_shapes, strict=True)
            ),
            alignment=4096 if streams else 0,
            offset=STREAMING_OUTPUT_PAGE_OFFSET if streams else 0,
        ),
    )


def streaming_sizes(function: NativeFunction, output_shapes: Sequence[tuple[int, ...]]) -> bool:
    """Whether outputs of these shapes can stream: those of a loop nest (rank 2 and up) only
    where each row of the innermost axis is whole `STREAMING_ALIGNMENT` lines (so every row
    starts on one where the output does), and every `?` size of an output after its first is
    a multiple of a line's elements, as the streaming twin's entry promises LLVM
    (`xfuse.codegen.native.mark_streaming_stores`)."""
    for parameter, shape in zip(function.outputs, output_shapes, strict=True):
        itemsize = numpy_dtype(parameter.dtype).itemsize
        line = STREAMING_ALIGNMENT // math.gcd(STREAMING_ALIGNMENT, itemsize)
        sizes = [shape[axis] for axis in parameter.dynamic_axes[1:]]
        if any(size % line for size in [*sizes, *shape[1:][-1:]]):
            return False
    return True


RowKey = tuple[
    tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], int
]
"""What a row plan depends on (`Kernel._row_plan`): the inputs' shapes and strides, the
outputs' strides, and in a call that can stream, the elements before the outputs' first
`STREAMING_ALIGNMENT` line (`common_head`; 0 in any other)."""

RowCallKey = tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]
"""The inputs' shapes and strides: what a `RowCall` is found by (`RowKey` without the outputs'
strides and head)."""


@dataclass(frozen=True)
class RowCall:
    """What a repeated call on strided inputs of one `RowCallKey` needs besides its row plan
    (`quick_row_call`): its results' shapes, how it makes new outputs, and the bytes
    each input spans from its data pointer (`extent`), for the overlap check."""

    result_shapes: tuple[tuple[int, ...], ...]
    result_strides: tuple[tuple[int, ...], ...]
    """The strides of new (C-contiguous) outputs of those shapes."""
    streams: bool
    """The call can stream (`CallPlan.streams`): its row plan depends on where the outputs
    start (`RowKey`)."""
    new_array: NewArray
    extents: tuple[tuple[int, int], ...]


QuickCall = Callable[["Kernel", Sequence[Any], Any], Any]
"""`quick_call`'s function: (kernel, inputs, out) -> the results, or None."""


def _listed(items: Iterable[str]) -> str:
    """A tuple display of the items, "()" for none."""
    return "(" + "".join(f"{item}, " for item in items) + ")"


def _call_names(function: NativeFunction) -> tuple[list[str], ...]:
    """The names a quick call's code gives `function`'s inputs (`a0`, ...), their data pointers
    (`p0`, ...), its results (`r0`, ...) and theirs (`q0`, ...)."""
    inputs, outputs = range(len(function.inputs)), range(len(function.outputs))
    return (
        [f"a{index}" for index in inputs],
        [f"p{index}" for index in inputs],
        [f"r{index}" for index in outputs],
        [f"q{index}" for index in outputs],
    )


def _writes_out_overlaps(results: Sequence[str]) -> bool:
    """Whether a quick call writes out the tests of its outputs' overlaps: at most
    `QUICK_OUTPUT_PAIRS` pairs of them."""
    return len(results) * (len(results) - 1) // 2 <= QUICK_OUTPUT_PAIRS


def quick_call(
    function: NativeFunction, plans: Mapping[tuple[tuple[int, ...], ...], CallPlan]
) -> QuickCall:
    """The common call of `function`, as one Python function written for its signature (as
    `dataclasses` writes an `__init__`): a line per array, no loop. The checked call took 1.4x
    as long with the same checks in a loop over the arrays (`docs/benchmarks.md` has the call's
    times).

    It takes the inputs in the signature's order (`CallSignature.ordered`), each a C-contiguous
    aligned numpy array with its dtype (numpy's own object for it; for a 0-d input, a numpy
    scalar of its dtype too, as the full checks take it) and of shapes `plans` has,
    and `out` None or (for one output) one such writable array that overlaps no input (for
    several, a tuple or list of as many, which overlap neither an input nor each other); runs
    the call and returns its results. For any other call it returns None, running nothing: the
    full checks take it (a read-only input, an equal but other dtype object, an in-place call,
    every error). A call of several slices that stays on one thread untimed (most calls of a
    size class where the split loses) is counted and run in native code, as a one-thread
    kernel's call is run (`CallPlan.counted_words`): the Python decision in `Kernel.run_plan`
    (~1.5 us of CPU) took 5-6% of hardswish's CPU time at 2^18, running the interpreter's code
    and objects that the call's 2 MiB evicted from the cache. It takes the kernel as an argument
    (`Kernel.run_plan` for any other call that is not one native call) rather than holding it,
    so the kernel is in no reference cycle.
    """
    inputs, input_pointers, results, output_pointers = _call_names(function)
    accepted = [
        f"type({a}) is ndarray and {a}.dtype is d{index} and {a}.flags.carray"
        for index, a in enumerate(inputs)
    ]
    new_outputs = [
        f"plan.new_array(plan.output_shapes[{index}], e{index})" for index in range(len(results))
    ]
    overlap = [
        f"q0 < {p} + {a}.nbytes and {p} < end" for a, p in zip(inputs, input_pointers, strict=True)
    ]
    pointers = ", ".join([*input_pointers, *output_pointers])
    # A numpy scalar for a 0-d input is a 0-d array of its dtype (`check_input`'s rule).
    scalars = [
        f"    if isinstance({a}, generic):\n        {a} = asarray({a})"
        for a, parameter in zip(inputs, function.inputs, strict=True)
        if parameter.shape == ()
    ]
    lines = [
        "def quick_call(kernel, inputs, out):",
        f"    {_listed(inputs)} = inputs",
        *scalars,
        f"    if not ({' and '.join(accepted) or 'True'}):",
        "        return None",
        f"    plan = plans.get({_listed(f'{a}.shape' for a in inputs)})",
        "    if plan is None:",
        "        return None",
        f"    {_listed(input_pointers)} = {_listed(f'pointer({a})' for a in inputs)}",
        "    if out is None:",
        f"        {_listed(results)} = outputs = {_listed(new_outputs)}",
        f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
    ]
    if len(results) == 1:
        lines += [
            "    elif (type(out) is ndarray and out.dtype is e0",
            "          and out.shape == plan.output_shapes[0] and out.flags.carray):",
            "        q0 = pointer(out)",
            *(
                [
                    "        end = q0 + out.nbytes",
                    f"        if {' or '.join(overlap)}:",
                    "            return None  # an in-place call, or an error to report",
                ]
                if overlap
                else []
            ),
            "        outputs = (out,)",
        ]
    elif _writes_out_overlaps(results):
        given = [
            f"type({r}) is ndarray and {r}.dtype is e{index} and "
            f"{r}.shape == plan.output_shapes[{index}] and {r}.flags.carray"
            for index, r in enumerate(results)
        ]
        ends = [f"{q} + {r}.nbytes" for q, r in zip(output_pointers, results, strict=True)]
        overlaps = [
            f"{q} < {p} + {a}.nbytes and {p} < {end}"
            for q, end in zip(output_pointers, ends, strict=True)
            for a, p in zip(inputs, input_pointers, strict=True)
        ] + [
            f"{output_pointers[i]} < {ends[k]} and {output_pointers[k]} < {ends[i]}"
            for i, k in itertools.combinations(range(len(results)), 2)
        ]
        lines += [
            f"    elif (type(out) is tuple or type(out) is list) and len(out) == {len(results)}:",
            f"        {_listed(results)} = outputs = tuple(out)",
            f"        if not ({' and '.join(given)}):",
            "            return None",
            f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
            f"        if {' or '.join(overlaps)}:",
            "            return None  # an in-place call, or an error to report",
        ]
    lines += [
        "    else:",
        "        return None",
        "    words = plan.one_call_words",
        "    if words is not None:",
        f"        pointer_call(words, {pointers})",
        "    elif (words := plan.counted_words) is None or (",
        f"        counted_call(words, {pointers}) is None",
        "    ):",
        f"        kernel.run_plan(plan, [{pointers}])",
        f"    return {'outputs[0]' if len(results) == 1 else 'outputs'}",
    ]
    namespace = {
        "generic": np.generic,
        "asarray": np.asarray,
        "pointer_call": function.pointer_call,
        "counted_call": function.counted_pointer_call,
        "plans": plans,
    }
    return _compiled_call(function, lines, namespace)


def _compiled_call(
    function: NativeFunction, lines: Sequence[str], namespace: dict[str, Any]
) -> QuickCall:
    """The function `lines` define (named by their first), compiled with `namespace` and the
    names every quick call uses: `ndarray`, `pointer` (`fast_data_pointer`), the dtypes of
    `function`'s inputs (`d0`, ...) and outputs (`e0`, ...)."""
    namespace = {
        **namespace,
        "ndarray": np.ndarray,
        "pointer": fast_data_pointer(),
        **{f"d{index}": numpy_dtype(p.dtype) for index, p in enumerate(function.inputs)},
        **{f"e{index}": numpy_dtype(p.dtype) for index, p in enumerate(function.outputs)},
    }
    exec("\n".join(lines), namespace)  # noqa: S102 - the source is ours, built by the caller
    name = lines[0].split("(")[0].removeprefix("def ")
    call: QuickCall = namespace[name]
    return call


def quick_row_call(
    function: NativeFunction,
    row_calls: Mapping[RowCallKey, RowCall],
    row_plans: Mapping[RowKey, tuple[CallPlan | None]],
) -> QuickCall:
    """A call on strided inputs (run by rows: `Kernel._row_plan`) of shapes and strides that a
    checked call has run before, with the checks that depend on the arrays themselves, as one
    Python function written for the signature (as `quick_call` is): numpy arrays of their
    dtypes (numpy's own objects), aligned; `out` None or aligned writable arrays of the
    results' shapes and dtypes (one, or a tuple or list of one per output), with strides a
    checked call wrote by rows (or C-contiguous), whose spans overlap no input's and no other
    output's, or that `Kernel._rows_apart` finds share no element but as an update in place
    (whether two outputs whose spans overlap share an element, RoPE's rotated halves
    `out=(r[..., :h], r[..., h:])`, is remembered by their layouts: `share`). Runs it and
    returns its results; for any other call (or where the row plan is no longer remembered)
    None, running nothing: the full checks take it. With the full checks a call on the
    float32 halves of `[8, 28672]` took 79-83 us, 48-53 with these checks' loops (contiguous
    arrays 37-39; docs/calling-kernels.md); RoPE on the halves of `q` `[1, 32, 128]` into the
    halves of another 13.9 us with those loops, 6.3-6.8 written for the signature
    (docs/benchmarks.md)."""
    inputs, input_pointers, results, output_pointers = _call_names(function)
    accepted = [
        f"type({a}) is ndarray and {a}.dtype is d{index} and {a}.flags.aligned"
        for index, a in enumerate(inputs)
    ]
    given = [
        f"type({r}) is ndarray and {r}.dtype is e{index}"
        f" and {r}.shape == call.result_shapes[{index}]"
        f" and (f{index} := {r}.flags).aligned and f{index}.writeable"
        for index, r in enumerate(results)
    ]
    new_outputs = [
        f"call.new_array(call.result_shapes[{index}], e{index})" for index in range(len(results))
    ]
    pointers = ", ".join([*input_pointers, *output_pointers])
    several = len(results) > 1
    if _writes_out_overlaps(results):
        overlaps = [
            f"s{j} < {p} + h{i} and {p} + l{i} < t{j}"
            for j in range(len(results))
            for i, p in enumerate(input_pointers)
        ] + [
            f"s{j} < t{k} and s{k} < t{j} and share(r{j}, q{j}, r{k}, q{k})"
            for j, k in itertools.combinations(range(len(results)), 2)
        ]
        given_out = [
            "    else:",
            *(
                [
                    "        if not ((type(out) is tuple or type(out) is list)"
                    f" and len(out) == {len(results)}):",
                    "            return None",
                ]
                if several
                else []
            ),
            f"        {_listed(results)} = outputs = {'tuple(out)' if several else '(out,)'}",
            f"        if not ({' and '.join(given)}):",
            "            return None",
            f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
            *(f"        s{j}, t{j} = reach({r}, q{j})" for j, r in enumerate(results)),
            *(
                [f"        {_listed(f'(l{i}, h{i})' for i in range(len(inputs)))} = call.extents"]
                if inputs
                else []
            ),
            f"        if ({' or '.join(overlaps) or 'False'}) and not kernel._rows_apart(",
            f"            inputs, [{', '.join(input_pointers)}], call.extents, outputs,",
            f"            [{', '.join(output_pointers)}]",
            "        ):",
            "            return None  # the full checks: inputs copied first, or the error",
            f"        output_strides = {_listed(f'{r}.strides' for r in results)}",
        ]
    else:
        given_out = ["    else:", "        return None"]  # (out= to the full checks)
    lines = [
        "def quick_row_call(kernel, inputs, out):",
        f"    {_listed(inputs)} = inputs",
        f"    if not ({' and '.join(accepted) or 'True'}):",
        "        return None",
        f"    shapes = {_listed(f'{a}.shape' for a in inputs)}",
        f"    strides = {_listed(f'{a}.strides' for a in inputs)}",
        "    call = row_calls.get((shapes, strides))",
        "    if call is None:",
        "        return None",
        f"    {_listed(input_pointers)} = {_listed(f'pointer({a})' for a in inputs)}",
        "    if out is None:",
        f"        {_listed(results)} = outputs = {_listed(new_outputs)}",
        "        output_strides = call.result_strides",
        f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
        *given_out,
        f"    head = common_head(function, {_listed(output_pointers)}) if call.streams else 0",
        "    remembered = row_plans.get((shapes, strides, output_strides, head))",
        "    if remembered is None or remembered[0] is None:",
        "        return None",
        f"    kernel.run_plan(remembered[0], [{pointers}])",
        f"    return {'outputs' if several else 'outputs[0]'}",
    ]
    known: dict[tuple[Any, ...], bool] = {}
    spans: dict[tuple[Any, ...], tuple[int, int]] = {}

    def share(a: np.ndarray, at: int, b: np.ndarray, bt: int) -> bool:
        """`share_elements(a, b)` of arrays at `at` and `bt`: by their layouts (shape,
        strides, element size) and distance, remembered."""
        key = (a.shape, a.strides, a.itemsize, b.shape, b.strides, b.itemsize, bt - at)
        found = known.get(key)
        if found is None:
            if len(known) >= PLAN_CACHE_SIZE:
                known.clear()
            found = known[key] = share_elements(a, b)
        return found

    def reach(array: np.ndarray, at: int) -> tuple[int, int]:
        """`extent(array, at)`, its offsets remembered by the array's layout (shape, strides,
        element size)."""
        key = (array.shape, array.strides, array.itemsize)
        found = spans.get(key)
        if found is None:
            if len(spans) >= PLAN_CACHE_SIZE:
                spans.clear()
            found = spans[key] = extent(array, 0)
        return at + found[0], at + found[1]

    namespace = {
        "row_calls": row_calls,
        "row_plans": row_plans,
        "share": share,
        "reach": reach,
        "common_head": common_head,
        "function": function,
    }
    return _compiled_call(function, lines, namespace)


class SliceWorker:
    """A thread that runs one native call at a time for a split call (`NativeFunction.run`),
    all of it native: the thread sits in `BOUND_CALL_IR`'s `serve_slices` (the GIL released)
    on its `slot`: two 4-byte words, the signal to run (or end) and the signal that the call
    has run, then two 8-byte ones, the call's entry and argument address. It spins for a
    posted call up to `SLICE_SPIN_NS`, then sleeps in a futex; the caller waits the same way. No
    Python runs and no Python lock changes hands between posting a call and its end (the two
    locks this replaced cost a split call ~25 us at 2^18: docs/benchmarks.md). Linux x86-64
    only (`pause` and the futex system call)."""

    def __init__(self) -> None:
        self.slot = array.array("i", [SLOT_IDLE] * 6)
        self.address = self.slot.buffer_info()[0]
        self.thread = threading.Thread(target=self._serve, name="xfuse-slice", daemon=True)
        self.thread.start()

    def _serve(self) -> None:  # (keeps the slot alive while the thread reads it)
        _slice_function("serve_slices")(self.address)

    def stop(self) -> None:
        """End the thread (once idle: after its call has run)."""
        _slice_function("stop_serving")(self.address)


class SliceWorkers:
    """Up to `size` worker threads, started as split calls first need them. A split call takes
    the idle ones (a call from another Python thread may have the others: then it runs more of
    its slices itself, never waiting on another call) and gives them back when its slices have
    run. A process forked from one with workers has none of their threads
    (only the forking thread survives a fork): there every pool starts afresh
    (`_forget_threads`), else a split call would post to a thread that is not there and wait
    for it forever."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._closed = False
        self._forget_threads()
        _ALL_SLICE_WORKERS.add(self)

    def _forget_threads(self) -> None:
        self._idle: list[SliceWorker] = []
        self._started = 0
        self._lock = threading.Lock()  # (a new one: another thread may have held it at the fork)

    def take(self, count: int) -> list[SliceWorker]:
        """Up to `count` workers: idle ones, then new ones up to `size` in all. A thread that
        cannot start (the process's limit) leaves its place to a later call: this call gets
        fewer workers and runs more of its slices itself."""
        with self._lock:
            taken = self._idle[-count:] if count else []
            del self._idle[len(self._idle) - len(taken) :]
            new = min(count - len(taken), self.size - self._started)
            self._started += new
        started: list[SliceWorker] = []
        try:
            started += (SliceWorker() for _ in range(new))
        except RuntimeError:  # "can't start new thread"
            pass
        except BaseException:  # (a KeyboardInterrupt) no worker lost
            self.give_back(taken + started)
            raise
        finally:
            with self._lock:
                self._started -= new - len(started)
        return taken + started

    def give_back(self, workers: Sequence[SliceWorker]) -> None:
        with self._lock:
            if not self._closed:
                self._idle.extend(workers)
                return
        for worker in workers:
            worker.stop()

    def close(self) -> None:
        """Stop the idle threads, and the others as they are given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    def grow(self, size: int) -> SliceWorkers:
        """This pool, now of at least `size` threads."""
        with self._lock:
            self.size = max(self.size, size)
        return self


_ALL_SLICE_WORKERS: weakref.WeakSet[SliceWorkers] = weakref.WeakSet()
"""Every pool, for a forked child to forget their threads."""

SHARED_SLICE_WORKERS = SliceWorkers(0)
"""The workers of every kernel's split calls, as many as the largest `threads` less one: a worker
that has just run one kernel's slice still spins (`SLICE_SPIN_NS`) when the next kernel's split
call posts to it. With a pool per kernel, a program of several kernels each woke its own sleeping
worker (~55 us on a KVM guest's idle CPU), which then waited for the core that the worker of the
kernel before spun on: on Zen 4 a split call of silu at 2^18 after another kernel's took 157 us,
after its own 59 us, a one-thread call 85 us (docs/benchmarks.md)."""


_ALL_KERNELS: weakref.WeakSet[Kernel] = weakref.WeakSet()
"""Every kernel, for a forked child to give their locks new ones."""


def _start_afresh_after_fork() -> None:
    """In a forked child, where only the forking thread survives: no worker threads, and new
    locks wherever another thread may have held one at the fork (held forever, it would hang
    the child's next call that takes it)."""
    global _BOUND_CALL_COMPILE
    for workers in list(_ALL_SLICE_WORKERS):
        workers._forget_threads()
    for kernel in list(_ALL_KERNELS):
        kernel._new_locks()
    _BOUND_CALL_COMPILE = threading.Lock()
    _new_cached_property_locks()


def _new_cached_property_locks() -> None:
    """Python 3.11's `functools.cached_property` holds one lock per property, of all instances,
    while it computes a value (3.12 has none): one held at the fork by another thread hung the
    child's first call of any new kernel (`Kernel._quick_call`), or its first `.stages` of one
    loaded from the disk cache. Each of xfuse's gets a new one."""
    modules = [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "xfuse"]
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == module.__name__:
                for attribute in vars(value).values():
                    if isinstance(attribute, functools.cached_property) and hasattr(
                        attribute, "lock"
                    ):
                        attribute.lock = threading.RLock()


os.register_at_fork(after_in_child=_start_afresh_after_fork)


SizeClass = tuple[int, bool]
"""What `SplitChoice` chooses for: the bit length of a call's element count (2^18 to 2^19 - 1
are one class) and whether it streams its outputs."""


@dataclass
class SplitTimes:
    """What `SplitChoice` measured of one size class: each way's last `SPLIT_WINDOW` times per
    element, the probed way's only from its probe (tuples, replaced whole: calls from several
    Python threads may record at once)."""

    one_thread: tuple[float, ...] = ()
    split: tuple[float, ...] = ()
    splitting: bool = False
    """Whether the split is the faster way, as the last decision measured it."""
    chosen: bool = False
    """Each way has run its first block (`SPLIT_WARMUP_CALLS`), and the first decision is made."""
    chosen_calls: int = SPLIT_PROBE_INTERVAL
    """Calls of the chosen way in this round, before its probe (`SPLIT_PROBE_SHARE`)."""
    counts: array.array[int] = field(default_factory=lambda: array.array("q", [0, 0]))
    """`calls` and `one_thread_until` as two words that a prepared call's builtin
    (`counted_native_call`) and a checked call's (`CallPlan.counted_words`) read and count in;
    never resized (the builtins keep their address)."""

    @property
    def calls(self) -> int:
        """Calls of this round."""
        return self.counts[0]

    @calls.setter
    def calls(self, calls: int) -> None:
        self.counts[0] = calls

    @property
    def one_thread_until(self) -> int:
        """While `calls` is below this, a call is untimed on one thread (the chosen way's
        untimed stretch, where one thread won the last decision; else 0): what a prepared or a
        checked call compares, in native code, before it runs as a one-thread kernel's does
        (`PreparedCall`, `quick_call`)."""
        return self.counts[1]

    @one_thread_until.setter
    def one_thread_until(self, calls: int) -> None:
        self.counts[1] = calls


@dataclass
class SplitChoice:
    """Whether a call of a kernel that can split over its threads does, chosen per size class by
    feedback: calls time themselves (wall time, `clock`), and the faster way per element runs
    next. A split's time counts the Python work that every split call does (its slices'
    arguments, taking and giving back the workers); a one-thread call's, the native call alone
    (untimed, it runs from native code: `counted_native_call`, `quick_call`). The first
    `SPLIT_FIRST_BLOCK` calls of a class run on one thread, the next as many split, each
    block's first `SPLIT_WARMUP_CALLS` untimed (cold), its last `SPLIT_WINDOW` timed, and the
    median of each way's timed calls decides; after, each round of
    `SPLIT_PROBE_INTERVAL` calls (or more, `SPLIT_PROBE_SHARE`) of the chosen way times its last
    `SPLIT_WINDOW`, then `SPLIT_PROBE_CALLS` run the other way, timed (more while they still
    get faster, up to `SPLIT_PROBE_LONGEST`), and the last of them decides by the median of the
    probe's last `SPLIT_PROBE_CALLS` against the chosen way's, so that a split that loses is
    abandoned and one that wins is kept as the host's load changes. A split must win by
    `SPLIT_MARGIN`. Splitting changes no result bit.

    `forced` (`always`, tests and benchmarks) splits every call that can, whatever it measured.
    `Kernel.stream_choice` times streaming the same way, its "split" being normal stores."""

    clock: Callable[[], float] = time.perf_counter
    forced: bool = False
    classes: dict[SizeClass, SplitTimes] = field(default_factory=dict)

    @classmethod
    def always(cls) -> SplitChoice:
        """Split every call that can be (tests, benchmarks: `kernel.split_choice`)."""
        return cls(forced=True)

    def next_call(self, size_class: SizeClass) -> tuple[bool, bool]:
        """Whether the next call of this class splits, and whether it is timed (`record`)."""
        if self.forced:
            return True, False
        times = self.classes.get(size_class)
        if times is None:  # (another thread's call may make it too: one is kept)
            times = self.classes.setdefault(size_class, SplitTimes())
        counts = times.counts  # `calls` as its word: its property costs a Python call a read
        counts[0] += 1
        calls = counts[0]
        if not times.chosen:  # one thread's block first, then the split's, each warmed up
            if calls > 2 * SPLIT_FIRST_BLOCK:  # (splits that found another Python thread's
                return True, True  # call had the workers ran on one thread: time more)
            split = calls > SPLIT_FIRST_BLOCK
            in_block = calls - SPLIT_FIRST_BLOCK if split else calls
            return split, in_block > SPLIT_WARMUP_CALLS
        chosen_calls = times.chosen_calls
        if calls <= chosen_calls - SPLIT_WINDOW:
            return times.splitting, False
        if calls <= chosen_calls:
            return times.splitting, True
        if calls == chosen_calls + 1:  # the probe's first call: only its calls count
            if times.splitting:
                times.one_thread = ()
            else:
                times.split = ()
        if calls == chosen_calls + SPLIT_PROBE_LONGEST:
            counts[0] = 0  # the longest probe's last call, which decides (`record`)
        return not times.splitting, True  # a probe

    def record(self, size_class: SizeClass, split: bool, seconds_per_element: float) -> None:
        """A timed call of this class ran split (or on one thread) in this time per element; the
        last of the first calls, and each probe, decide which way runs next, and how long the
        next round is (`SPLIT_PROBE_SHARE`)."""
        times = self.classes[size_class]
        if split:
            times.split = (*times.split[1 - SPLIT_WINDOW :], seconds_per_element)
        else:
            times.one_thread = (*times.one_thread[1 - SPLIT_WINDOW :], seconds_per_element)
        split_times, one_thread_times = times.split, times.one_thread
        if not times.chosen:
            if min(len(split_times), len(one_thread_times)) < SPLIT_WINDOW:
                return
            times.chosen, times.calls = True, 0
        else:
            if times.calls:  # (0: the longest probe's last call, which `next_call` ended)
                probed = times.calls - times.chosen_calls
                probe = one_thread_times if times.splitting else split_times
                if probed < SPLIT_PROBE_CALLS or (
                    probed < SPLIT_PROBE_LONGEST
                    and len(probe) > 1
                    and probe[-1] < (1 - SPLIT_MARGIN) * probe[-2]
                ):
                    return  # a timed call of the chosen way, or of a probe that goes on
                times.calls = 0  # the probe's last call, which decides
            # A probe decides by its last calls: a long one's first were still warming up.
            if times.splitting:
                one_thread_times = one_thread_times[-SPLIT_PROBE_CALLS:]
            else:
                split_times = split_times[-SPLIT_PROBE_CALLS:]
            if not (split_times and one_thread_times):
                # Calls from several Python threads: this call of the chosen way began before
                # a probe whose first call emptied the probed way's times, and ended first
                # (none of the probe's calls recorded yet). The new round keeps the choice.
                return
        split_time, one_thread_time = median_high(split_times), median_high(one_thread_times)
        times.splitting = split_time * (1 + SPLIT_MARGIN) < one_thread_time
        chosen = split_time if times.splitting else one_thread_time
        extra = probe_cost(times.one_thread if times.splitting else times.split, chosen)
        times.chosen_calls = min(
            SPLIT_LONGEST_ROUND,
            max(SPLIT_PROBE_INTERVAL, math.ceil(extra / SPLIT_PROBE_SHARE)),
        )
        times.one_thread_until = 0 if times.splitting else times.chosen_calls - SPLIT_WINDOW


def probe_cost(probe: Sequence[float], chosen: float) -> float:
    """How many calls of the chosen way (`chosen` seconds per element) a probe of the other way
    (its calls' times per element, in order) costs more than as many calls of the chosen way
    (`SPLIT_PROBE_SHARE`): `SPLIT_PROBE_CALLS` times what its usual (median) call loses, and
    twice what its first call took more than its usual one: that call moved the data into the
    other way's caches, and the chosen way's first calls after the probe (untimed) move it back
    (a first call that waited for a core makes one round longer, at most `SPLIT_LONGEST_ROUND`)."""
    if chosen <= 0 or not probe:
        return 0.0
    usual = median_high(probe)
    switch = max(0.0, probe[0] - usual)
    return (SPLIT_PROBE_CALLS * max(0.0, usual - chosen) + 2 * switch) / chosen


def median_high(times: Sequence[float]) -> float:
    """`statistics.median_high`, without the 10 ms that importing `statistics` takes."""
    return sorted(times)[len(times) // 2]


class WorkspacePool:
    """A kernel's workspaces, reused across calls. Each call in flight borrows one of its own, so
    calls from several Python threads never share one; there are as many as calls ever ran at
    once, each as large as the largest call that used it (memory kept for the kernel's life)."""

    def __init__(self) -> None:
        self._idle: list[np.ndarray] = []
        self.new_lock()

    def new_lock(self) -> None:
        """A new lock (in a forked child: another thread may have held the old one)."""
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self, nbytes: int) -> Iterator[int]:
        """The address of a `WORKSPACE_ALIGNMENT`-aligned workspace of at least `nbytes`."""
        with self._lock:
            buffer = self._idle.pop() if self._idle else None
        if buffer is None or buffer.nbytes < nbytes:
            buffer = aligned_empty((nbytes,), np.dtype(np.uint8), WORKSPACE_ALIGNMENT)
        try:
            yield data_pointer(buffer)
        finally:
            with self._lock:
                self._idle.append(buffer)


@dataclass(frozen=True)
class NativeCall:
    """A call of `plan` on arrays at `pointers` (inputs, then outputs), what `Kernel.run_plan`
    runs (`CallPlan.for_pointers` applied). Each slice's native arguments are made where the
    call runs them: a call that runs on one thread as one native call needs none of them
    (making every slice's, and the one-thread call's, took ~10 us of a checked call of two
    slices)."""

    plan: CallPlan
    pointers: Sequence[int]

    @functools.cached_property
    def argument_lists(self) -> list[list[int]] | list[RowRun]:
        return self.plan.argument_lists(self.pointers)

    @functools.cached_property
    def one_thread_lists(self) -> list[list[int]] | list[RowRun] | None:
        """Where `argument_lists` are several slices: the call as one slice (or a streaming
        head and one rest), what runs where it does not split (`CallPlan.one_thread`)."""
        one_thread = self.plan.one_thread
        return None if one_thread is None else one_thread.argument_lists(self.pointers)

    @property
    def workspace_bytes(self) -> int:
        """The workspace either way needs, split or on one thread."""
        one_thread = self.plan.one_thread
        return max(self.plan.workspace_bytes, one_thread.workspace_bytes if one_thread else 0)

    @property
    def streaming(self) -> bool:
        """The head with normal stores, then the slices of the rest streaming (`CallPlan`)."""
        return self.plan.streaming


def _fortran_only(value: Any) -> bool:
    """`value` is a numpy array of 2 or more dims that is Fortran- but not C-contiguous."""
    return (
        isinstance(value, np.ndarray)
        and value.ndim >= 2
        and value.flags.f_contiguous
        and not value.flags.c_contiguous
    )


def out_buffers(out: Any) -> list[Any]:
    """The buffers of a call's `out`: None, one buffer, a sequence or a mapping of them (a None
    in a sequence or a mapping, an output left to the call to make, is none)."""
    if out is None:
        return []
    buffers = out.values() if isinstance(out, Mapping) else out
    if isinstance(out, Mapping | list | tuple):
        return [buffer for buffer in buffers if buffer is not None]
    return [out]


def _transposed(buffer: Any) -> Any:
    """An `out` buffer's transpose (what is no array, None for an output left to the call
    among them, kept for the checks to name)."""
    return buffer.T if isinstance(buffer, np.ndarray) else buffer


def fortran_ordered(inputs: Sequence[Any], out: Any, rank: int) -> bool:
    """The inputs are Fortran-ordered arrays of one shape, of `rank` dims (0: any), and so is
    every `out` buffer (if any): the kernel can run on their transposes without copying."""
    arrays = [*inputs, *out_buffers(out)]
    return (
        bool(inputs)
        and all(_fortran_only(array) and rank in (0, array.ndim) for array in arrays)
        and len({array.shape for array in arrays}) == 1
    )


@dataclass(frozen=True)
class CheckedCall:
    """A call whose arguments passed every check: the arrays the native code sees (inputs, then
    outputs), its native arguments, and the outputs as the caller gets them."""

    arrays: list[np.ndarray]
    native: NativeCall
    results: list[np.ndarray]
    plan: CallPlan
    """The call's plan before `CallPlan.for_pointers`: what `Kernel.run_plan` runs (one that
    can stream streams or not as `Kernel.stream_choice` says)."""


# Hand-written LLVM IR, as C source would be, not built with llvmlite.ir: a new process keys
# its cached object code by this text (`bound_call_digest`) and reads its declarations
# (`declared_symbols`) without building or parsing a module.
BOUND_CALL_IR = f"""
declare ptr @PyTuple_GetItem(ptr, i64)
declare ptr @PyBytes_AsString(ptr)
declare i64 @PyBytes_Size(ptr)
declare ptr @PyLong_AsVoidPtr(ptr)
declare ptr @PyLong_FromVoidPtr(ptr)
declare ptr @PyObject_CallNoArgs(ptr)
declare void @Py_IncRef(ptr)
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)
declare void @llvm.x86.sse2.pause()
@_Py_NoneStruct = external global i8

define ptr @keeping_gil(ptr %self, ptr %unused) {{
  %state = call ptr @PyTuple_GetItem(ptr %self, i64 1)
  %entry_at = call ptr @PyBytes_AsString(ptr %state)
  %entry = load ptr, ptr %entry_at, align 8
  %words = getelementptr i8, ptr %entry_at, i64 8
  call void %entry(ptr %words)
  %result = call ptr @PyTuple_GetItem(ptr %self, i64 0)
  call void @Py_IncRef(ptr %result)
  ret ptr %result
}}

define ptr @releasing_gil(ptr %self, ptr %unused) {{
  %state = call ptr @PyTuple_GetItem(ptr %self, i64 1)
  %entry_at = call ptr @PyBytes_AsString(ptr %state)
  %entry = load ptr, ptr %entry_at, align 8
  %words = getelementptr i8, ptr %entry_at, i64 8
  %thread = call ptr @PyEval_SaveThread()
  call void %entry(ptr %words)
  call void @PyEval_RestoreThread(ptr %thread)
  %result = call ptr @PyTuple_GetItem(ptr %self, i64 0)
  call void @Py_IncRef(ptr %result)
  ret ptr %result
}}

define internal i1 @counted(ptr %counts) {{
start:
  %calls = load i64, ptr %counts, align 8
  %until_at = getelementptr i64, ptr %counts, i64 1
  %until = load i64, ptr %until_at, align 8
  %below = icmp slt i64 %calls, %until
  br i1 %below, label %count, label %done
count:
  %next = add i64 %calls, 1
  store i64 %next, ptr %counts, align 8
  br label %done
done:
  ret i1 %below
}}

define ptr @counted_releasing_gil(ptr %self, ptr %unused) {{
start:
  %where = call ptr @PyTuple_GetItem(ptr %self, i64 3)
  %counts_at = call ptr @PyBytes_AsString(ptr %where)
  %counts = load ptr, ptr %counts_at, align 8
  %counted = call i1 @counted(ptr %counts)
  br i1 %counted, label %run, label %otherwise
run:
  %result = call ptr @releasing_gil(ptr %self, ptr %unused)
  ret ptr %result
otherwise:
  %call = call ptr @PyTuple_GetItem(ptr %self, i64 2)
  %returned = call ptr @PyObject_CallNoArgs(ptr %call)
  ret ptr %returned
}}

define internal ptr @run_on_pointers(ptr %self, ptr %arguments, i64 %count, i1 %counting) {{
start:
  %has_words = icmp sgt i64 %count, 0
  br i1 %has_words, label %first, label %error
first:
  %plan_words = load ptr, ptr %arguments, align 8
  %header = call ptr @PyBytes_AsString(ptr %plan_words)
  %not_bytes = icmp eq ptr %header, null
  br i1 %not_bytes, label %error, label %bytes
bytes:
  br i1 %counting, label %check, label %counted
check:
  %counts = load ptr, ptr %header, align 8
  %below = call i1 @counted(ptr %counts)
  br i1 %below, label %counted, label %otherwise
counted:
  %skip = select i1 %counting, i64 8, i64 0
  %state = call ptr @PyBytes_AsString(ptr %self)
  %state_bytes = call i64 @PyBytes_Size(ptr %self)
  %state_words = sdiv i64 %state_bytes, 8
  %right_count = icmp eq i64 %count, %state_words
  br i1 %right_count, label %copy, label %error
copy:
  %template = getelementptr i8, ptr %header, i64 %skip
  %header_bytes = call i64 @PyBytes_Size(ptr %plan_words)
  %template_bytes = sub i64 %header_bytes, %skip
  %size = sub i64 %template_bytes, 8
  %words = alloca i8, i64 %size, align 8
  %template_words = getelementptr i8, ptr %template, i64 8
  call void @llvm.memcpy.p0.p0.i64(ptr %words, ptr %template_words, i64 %size, i1 false)
  br label %loop
loop:
  %index = phi i64 [1, %copy], [%next, %store]
  %more = icmp slt i64 %index, %count
  br i1 %more, label %convert, label %call
convert:
  %argument_at = getelementptr ptr, ptr %arguments, i64 %index
  %argument = load ptr, ptr %argument_at, align 8
  %pointer = call ptr @PyLong_AsVoidPtr(ptr %argument)
  %null = icmp eq ptr %pointer, null
  br i1 %null, label %error, label %store
store:
  %position_at = getelementptr i64, ptr %state, i64 %index
  %position = load i64, ptr %position_at, align 8
  %slot = getelementptr i64, ptr %words, i64 %position
  store ptr %pointer, ptr %slot, align 8
  %next = add i64 %index, 1
  br label %loop
call:
  %entry = load ptr, ptr %state, align 8
  %keep = load i64, ptr %template, align 8
  %keeps = icmp ne i64 %keep, 0
  br i1 %keeps, label %keeping, label %releasing
keeping:
  call void %entry(ptr %words)
  br label %done
releasing:
  %thread = call ptr @PyEval_SaveThread()
  call void %entry(ptr %words)
  call void @PyEval_RestoreThread(ptr %thread)
  br label %done
done:
  call void @Py_IncRef(ptr %plan_words)
  ret ptr %plan_words
otherwise:
  call void @Py_IncRef(ptr @_Py_NoneStruct)
  ret ptr @_Py_NoneStruct
error:
  ret ptr null
}}

define ptr @on_pointers(ptr %self, ptr %arguments, i64 %count) {{
  %result = call ptr @run_on_pointers(ptr %self, ptr %arguments, i64 %count, i1 false)
  ret ptr %result
}}

define ptr @counted_on_pointers(ptr %self, ptr %arguments, i64 %count) {{
  %result = call ptr @run_on_pointers(ptr %self, ptr %arguments, i64 %count, i1 true)
  ret ptr %result
}}

define internal i64 @monotonic_ns() {{
  %time = alloca [2 x i64], align 8
  %failed = call i32 @clock_gettime(i32 1, ptr %time)
  %seconds = load i64, ptr %time, align 8
  %nanoseconds_at = getelementptr i64, ptr %time, i64 1
  %nanoseconds = load i64, ptr %nanoseconds_at, align 8
  %whole = mul i64 %seconds, 1000000000
  %now = add i64 %whole, %nanoseconds
  ret i64 %now
}}

define internal void @futex(ptr %word, i64 %operation, i64 %value) {{
  %result = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %word, i64 %operation, i64 %value,
                                         ptr null, ptr null, i64 0)
  ret void
}}

define internal i32 @await_signal(ptr %word) {{
start:
  %since = call i64 @monotonic_ns()
  br label %spin
spin:
  %seen = load atomic i32, ptr %word acquire, align 4
  %idle = icmp eq i32 %seen, {SLOT_IDLE}
  br i1 %idle, label %pause, label %signalled
pause:
  call void @llvm.x86.sse2.pause()
  %now = call i64 @monotonic_ns()
  %spun = sub i64 %now, %since
  %long = icmp sgt i64 %spun, {SLICE_SPIN_NS}
  br i1 %long, label %mark, label %spin
mark:
  %marking = cmpxchg ptr %word, i32 {SLOT_IDLE}, i32 {SLOT_ASLEEP} acquire acquire
  %marked = extractvalue {{ i32, i1 }} %marking, 1
  br i1 %marked, label %sleep, label %spin
sleep:
  call void @futex(ptr %word, i64 {FUTEX_WAIT_PRIVATE}, i64 {SLOT_ASLEEP})
  %now_seen = load atomic i32, ptr %word acquire, align 4
  %still = icmp eq i32 %now_seen, {SLOT_ASLEEP}
  br i1 %still, label %sleep, label %signalled
signalled:
  %signal = phi i32 [%seen, %spin], [%now_seen, %sleep]
  ret i32 %signal
}}

define internal void @signal(ptr %word, i32 %signal) {{
start:
  %before = atomicrmw xchg ptr %word, i32 %signal release, align 4
  %asleep = icmp eq i32 %before, {SLOT_ASLEEP}
  br i1 %asleep, label %wake, label %done
wake:
  call void @futex(ptr %word, i64 {FUTEX_WAKE_PRIVATE}, i64 1)
  br label %done
done:
  ret void
}}

define void @serve_slices(ptr %slot) {{
start:
  %done_at = getelementptr i32, ptr %slot, i64 1
  %entry_at = getelementptr i64, ptr %slot, i64 1
  %argument_at = getelementptr i64, ptr %slot, i64 2
  br label %wait
wait:
  %signal = call i32 @await_signal(ptr %slot)
  %stop = icmp eq i32 %signal, {SLOT_STOP}
  br i1 %stop, label %stopped, label %run
run:
  store atomic i32 {SLOT_IDLE}, ptr %slot monotonic, align 4
  %entry = load ptr, ptr %entry_at, align 8
  %argument = load ptr, ptr %argument_at, align 8
  call void %entry(ptr %argument)
  call void @signal(ptr %done_at, i32 {SLOT_SIGNALLED})
  br label %wait
stopped:
  ret void
}}

define void @stop_serving(ptr %slot) {{
  call void @signal(ptr %slot, i32 {SLOT_STOP})
  ret void
}}

define internal ptr @slice_entry(ptr %plan, i64 %index) {{
  %rest = icmp ne i64 %index, 0
  %at = select i1 %rest, i64 5, i64 4
  %entry_at = getelementptr i64, ptr %plan, i64 %at
  %entry = load ptr, ptr %entry_at, align 8
  ret ptr %entry
}}

define internal ptr @slice_words(ptr %plan, i64 %index) {{
  %workers_at = getelementptr i64, ptr %plan, i64 2
  %workers = load i64, ptr %workers_at, align 8
  %stride_at = getelementptr i64, ptr %plan, i64 3
  %stride = load i64, ptr %stride_at, align 8
  %before = mul i64 %index, %stride
  %header = add i64 %workers, 6
  %at = add i64 %header, %before
  %words = getelementptr i64, ptr %plan, i64 %at
  ret ptr %words
}}

define internal void @run_calls(ptr %plan, i64 %from, i64 %to) {{
start:
  br label %loop
loop:
  %index = phi i64 [%from, %start], [%next, %call]
  %more = icmp slt i64 %index, %to
  br i1 %more, label %call, label %done
call:
  %entry = call ptr @slice_entry(ptr %plan, i64 %index)
  %words = call ptr @slice_words(ptr %plan, i64 %index)
  call void %entry(ptr %words)
  %next = add i64 %index, 1
  br label %loop
done:
  ret void
}}

define void @run_slices(ptr %plan) {{
start:
  %count = load i64, ptr %plan, align 8
  %own_at = getelementptr i64, ptr %plan, i64 1
  %own = load i64, ptr %own_at, align 8
  %workers_at = getelementptr i64, ptr %plan, i64 2
  %workers = load i64, ptr %workers_at, align 8
  %slots = getelementptr i64, ptr %plan, i64 6
  br label %post
post:
  %posted = phi i64 [0, %start], [%next_post, %posting]
  %more_posts = icmp slt i64 %posted, %workers
  br i1 %more_posts, label %posting, label %own_calls
posting:
  %slot_at = getelementptr ptr, ptr %slots, i64 %posted
  %slot = load ptr, ptr %slot_at, align 8
  %handed = add i64 %own, %posted
  %entry = call ptr @slice_entry(ptr %plan, i64 %handed)
  %words = call ptr @slice_words(ptr %plan, i64 %handed)
  %slot_entry = getelementptr i64, ptr %slot, i64 1
  store ptr %entry, ptr %slot_entry, align 8
  %slot_words = getelementptr i64, ptr %slot, i64 2
  store ptr %words, ptr %slot_words, align 8
  %slot_done = getelementptr i32, ptr %slot, i64 1
  store atomic i32 {SLOT_IDLE}, ptr %slot_done monotonic, align 4
  call void @signal(ptr %slot, i32 {SLOT_SIGNALLED})
  %next_post = add i64 %posted, 1
  br label %post
own_calls:
  call void @run_calls(ptr %plan, i64 0, i64 %own)
  %rest = add i64 %own, %workers
  call void @run_calls(ptr %plan, i64 %rest, i64 %count)
  br label %wait
wait:
  %waited = phi i64 [0, %own_calls], [%next_wait, %waiting]
  %more_waits = icmp slt i64 %waited, %workers
  br i1 %more_waits, label %waiting, label %done
waiting:
  %wait_slot_at = getelementptr ptr, ptr %slots, i64 %waited
  %wait_slot = load ptr, ptr %wait_slot_at, align 8
  %wait_done = getelementptr i32, ptr %wait_slot, i64 1
  %signal = call i32 @await_signal(ptr %wait_done)
  %next_wait = add i64 %waited, 1
  br label %wait
done:
  ret void
}}

define void @run_grid(ptr %plan) {{
start:
  %rows = load i64, ptr %plan, align 8
  %words_at = getelementptr i64, ptr %plan, i64 1
  %words = load i64, ptr %words_at, align 8
  %axes_at = getelementptr i64, ptr %plan, i64 2
  %axes = load i64, ptr %axes_at, align 8
  %moving_at = getelementptr i64, ptr %plan, i64 3
  %moving = load i64, ptr %moving_at, align 8
  %entry_at = getelementptr i64, ptr %plan, i64 4
  %entry = load ptr, ptr %entry_at, align 8
  %counts = getelementptr i64, ptr %plan, i64 5
  %first_index = getelementptr i64, ptr %counts, i64 %axes
  %positions = getelementptr i64, ptr %first_index, i64 %axes
  %carries = getelementptr i64, ptr %positions, i64 %moving
  %carry_words = mul i64 %axes, %moving
  %first_words = getelementptr i64, ptr %carries, i64 %carry_words
  %index = alloca i64, i64 %axes, align 8
  %current = alloca i64, i64 %words, align 8
  %index_bytes = shl i64 %axes, 3
  call void @llvm.memcpy.p0.p0.i64(ptr %index, ptr %first_index, i64 %index_bytes, i1 false)
  %word_bytes = shl i64 %words, 3
  call void @llvm.memcpy.p0.p0.i64(ptr %current, ptr %first_words, i64 %word_bytes, i1 false)
  %last_axis = sub i64 %axes, 1
  br label %row
row:
  %done = phi i64 [0, %start], [%next_done, %move]
  %more = icmp slt i64 %done, %rows
  br i1 %more, label %call, label %end
call:
  call void %entry(ptr %current)
  %next_done = add i64 %done, 1
  br label %axis
axis:
  %axis_index = phi i64 [%last_axis, %call], [%outer, %wrap]
  %at = getelementptr i64, ptr %index, i64 %axis_index
  %was = load i64, ptr %at, align 8
  %now = add i64 %was, 1
  %count_at = getelementptr i64, ptr %counts, i64 %axis_index
  %count = load i64, ptr %count_at, align 8
  %past = icmp sge i64 %now, %count
  %inner = icmp sgt i64 %axis_index, 0
  %wraps = and i1 %past, %inner
  br i1 %wraps, label %wrap, label %step
wrap:
  store i64 0, ptr %at, align 8
  %outer = sub i64 %axis_index, 1
  br label %axis
step:
  store i64 %now, ptr %at, align 8
  %carry_at = mul i64 %axis_index, %moving
  %carry = getelementptr i64, ptr %carries, i64 %carry_at
  br label %move
move:
  %moved = phi i64 [0, %step], [%next_moved, %moving_word]
  %more_moves = icmp slt i64 %moved, %moving
  br i1 %more_moves, label %moving_word, label %row
moving_word:
  %position_at = getelementptr i64, ptr %positions, i64 %moved
  %position = load i64, ptr %position_at, align 8
  %word_at = getelementptr i64, ptr %current, i64 %position
  %value = load i64, ptr %word_at, align 8
  %by_at = getelementptr i64, ptr %carry, i64 %moved
  %by = load i64, ptr %by_at, align 8
  %sum = add i64 %value, %by
  store i64 %sum, ptr %word_at, align 8
  %next_moved = add i64 %moved, 1
  br label %move
end:
  ret void
}}

define ptr @data_pointer(ptr %self, ptr %array) {{
  %field = getelementptr i8, ptr %array, i64 {DATA_FIELD_OFFSET}
  %data = load ptr, ptr %field, align 8
  %pointer = call ptr @PyLong_FromVoidPtr(ptr %data)
  ret ptr %pointer
}}
"""
"""Native calls as CPython builtins (`bound_native_call`, `counted_native_call`,
`entry_on_pointers`), which cost ~30 ns a call where ctypes' call of a function pointer costs
~160 (libffi and converting the argument), a tenth of a call over 2^12 elements in cache
(docs/benchmarks.md). `keeping_gil` and `releasing_gil` take no argument: their `self` is
`(result, state, *owners)`, `state` a bytes object of the packed entry's address then its
argument words; they run the entry on the words and return `result`. `counted_releasing_gil`
(no argument) has a `self` `(result, state, otherwise, where, *owners)`, `where` a bytes object
of one word, the address of two words (a count and a bound): while the count is below the bound
it adds one to it and runs as `releasing_gil`, else it returns `otherwise()`. `on_pointers`
(`METH_FASTCALL`) has a bytes `self`, the packed entry's address then the word position of each data
pointer in a call's words; its arguments are a bytes object (a word, nonzero to keep the GIL during
the call, then the call's words) and the data pointers, one per position (the wrong count, a
non-bytes first argument, a pointer 0 or not an int: an error); it runs the entry on a copy of the
words on the stack with the pointers written in, and returns its first argument.
`counted_on_pointers` is `on_pointers` with one more word first in its first argument, the address
of two words (a count and a bound, as `counted_releasing_gil`'s): while the count is below the
bound it adds one to it and runs as `on_pointers`, else it returns None. `data_pointer` (one
argument, a numpy array: it reads any object's memory as one) returns the array's data pointer
(`fast_data_pointer`).

Split calls, plain C functions of one address each, called through ctypes (the GIL released):
`serve_slices` is a `SliceWorker`'s thread, on its slot (an i32 signal to run or stop, an i32
signal that the call has run, the call's entry and its words' address): it waits for a signal, runs
the posted call and signals that it has run, until told to stop (`stop_serving`). `run_slices`
is a split call (`NativeFunction.run`) on a plan of words: the count of calls, how many the
caller runs first (`own`), the workers' count, the words per call, the first call's entry and
the other calls' entry, the workers' slot addresses, then each call's argument words. It posts
the calls after the first `own` to the workers (one each), runs its own and any left after the
workers', and returns once the workers' have run. A waiting side (`await_signal`) spins with
`pause` for `SLICE_SPIN_NS`, then marks its word asleep and sleeps in a futex until the
signalling side (`signal`, an exchange with release ordering) wakes it; the signal is read with
acquire ordering, so the slot's call (and what the caller wrote before posting it) is seen by
the worker, and what the worker's call wrote is seen by the caller once it has run. `run_grid`
runs a call by rows on one thread (`RowGrid.plan`'s words: the rows' count, the words a row's
call takes, the grid's axes, the moving words' count, the entry, each axis's count, the first
row's index, the moving words' positions, each axis's carries, the first row's words): it calls
the entry on a copy of the first row's words, then for each next row adds the carries of the
innermost axis whose index does not wrap to the moving words."""

_BOUND_CALL_FLAGS = {
    "keeping_gil": 0x0004,
    "releasing_gil": 0x0004,
    "counted_releasing_gil": 0x0004,
    "on_pointers": 0x0080,
    "counted_on_pointers": 0x0080,
    "data_pointer": 0x0008,
}
"""`BOUND_CALL_IR`'s functions and their CPython calling conventions (`METH_NOARGS`, `METH_O`,
`METH_FASTCALL`)."""


class _MethodDef(ctypes.Structure):
    """CPython's `PyMethodDef`."""

    _fields_ = (
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    )


_BOUND_CALL_COMPILE = threading.Lock()
"""Held while `_bound_call_methods` runs: `functools.cache` lets threads that ask first compile
at once and keeps the last result, freeing what builtins made from the others point at."""


def _bound_call_methods() -> tuple[NativeModule, dict[str, _MethodDef]]:
    """`BOUND_CALL_IR` compiled for this process (the C API's addresses are this process's),
    and its method definitions by name (kept alive: CPython keeps a pointer to them in every
    function made from them); compiled once, whichever threads ask first."""
    with _BOUND_CALL_COMPILE:
        return _compile_bound_calls()


@functools.cache
def _compile_bound_calls() -> tuple[NativeModule, dict[str, _MethodDef]]:
    for name in declared_symbols(BOUND_CALL_IR):
        # The symbol's address, function or variable alike (a ctypes function object for each
        # function, cast to its address, took 2.5x as long).
        llvm_binding.add_symbol(
            name, ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, name))
        )
    native = _bound_call_module()
    methods = {
        name: _MethodDef(name.encode(), native.address(name), flags, None)
        for name, flags in _BOUND_CALL_FLAGS.items()
    }
    return native, methods


BOUND_CALL_OPT_LEVEL = 0
"""Glue code (argument words, CPython calls, a spin-then-futex wait): O3 makes it no faster (a
prepared call 114-132 ns, a checked call 2.8-3.8 us, a split call the same, either way) and took
~100 ms more of every new process (a disk-cache hit's first kernel waits for it)."""

BOUND_CALL_CODEGEN_LEVEL = 2
"""The code generator's level for `BOUND_CALL_IR` (its optimizer's is `BOUND_CALL_OPT_LEVEL`):
at 0 every value that crosses a block lives on the stack, and `run_grid`, which runs between
every two rows of a call by rows, took 68.5-76.4 us for a prepared SwiGLU on the float32
halves of `[4096, 64]` (4096 rows of 32) against 61.1-66.9 for the list of rows' words before
it, and 58.7-63.6 at this level (the list's 61.7-65.3 in the same runs); the compile took 7 ms,
now 23 (Intel Xeon, 2026-12-05; once per toolchain where the disk cache is on)."""


def bound_call_digest() -> str:
    """The name of `BOUND_CALL_IR`'s entry in the on-disk cache: a hash of what decides its code
    (the IR, which holds numpy's and the futex's constants; the opt levels; the host CPU, as for
    a kernel's entry; CPython's ABI, whose structs and functions the code uses). The entry
    records the toolchain, which names Python's version, as a kernel's entry does."""
    cpu = host_cpu()
    parts = [
        "bound calls",
        BOUND_CALL_IR,
        str(BOUND_CALL_OPT_LEVEL),
        str(BOUND_CALL_CODEGEN_LEVEL),
        cpu.name,
        cpu.features,
        sys.implementation.cache_tag or "",
        getattr(sys, "abiflags", ""),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _bound_call_module() -> NativeModule:
    """`BOUND_CALL_IR`'s code: linked from its object code in the on-disk cache
    (`xfuse.runtime.cache_files`) where that holds it for this toolchain, else compiled (~20 ms,
    most of a kernel's disk-cache hit in a new process) and the entry written; a missing,
    damaged or stale entry is a miss and is replaced, an unwritable cache warns as for a kernel.
    The C API's symbols are added first: MCJIT resolves the code's references to them when it
    links, loaded or compiled."""
    directory = cache_files.cache_dir()
    if directory is None:
        return compile_llvm_ir(BOUND_CALL_IR, BOUND_CALL_OPT_LEVEL, BOUND_CALL_CODEGEN_LEVEL)
    digest, toolchain = bound_call_digest(), cache_files.toolchain()
    path = cache_files.entry_path(directory, toolchain, digest)
    fields = cache_files.read_entry(path, digest, toolchain)
    if fields is not None and fields.get("target") == "bound calls":
        with contextlib.suppress(UnresolvedSymbolsError):  # then compiled anew
            return load_object_code(
                fields["object_code"], fields["optimized_ir"], fields["opt_level"]
            )
    native = compile_llvm_ir(BOUND_CALL_IR, BOUND_CALL_OPT_LEVEL, BOUND_CALL_CODEGEN_LEVEL)
    entry = {
        "toolchain": toolchain,
        "digest": digest,
        "target": "bound calls",
        "opt_level": native.opt_level,
        "optimized_ir": native.optimized_ir,
        "object_code": native.object_code,
    }
    cache_files.write_entry(directory, path, cache_files.seal(entry))
    return native


@functools.cache
def _slice_function(name: str) -> Callable[[int], object]:
    """`BOUND_CALL_IR`'s `serve_slices`, `stop_serving`, `run_slices` or `run_grid` as a
    ctypes function of one address (which releases the GIL during the call)."""
    native, _ = _bound_call_methods()
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(native.address(name))


_new_function = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.py_object, ctypes.py_object
)(("PyCFunction_NewEx", ctypes.pythonapi))
"""CPython's `PyCFunction_NewEx(method, self, module)` (a prototype of its own: setting the
types of `ctypes.pythonapi`'s would change them for every user of it)."""


def _builtin(name: str, self: object) -> Any:
    """A builtin of `BOUND_CALL_IR`'s function `name` on `self`."""
    _, methods = _bound_call_methods()
    return _new_function(ctypes.addressof(methods[name]), self, None)


def bound_native_call(
    entry: int, arguments: Sequence[int], result: Any, keep_gil: bool, owners: tuple[Any, ...]
) -> Callable[[], Any]:
    """A Python builtin that calls the packed entry at `entry` on `arguments` (its words) and
    returns `result`: keeping the GIL or releasing it during the call, and keeping `owners`
    (what the native code and its pointers need alive) for as long as it lives."""
    state = _packed([entry, *arguments]).tobytes()
    name = "keeping_gil" if keep_gil else "releasing_gil"
    return _builtin(name, (result, state, *owners))  # type: ignore[no-any-return]


def counted_native_call(
    entry: int,
    arguments: Sequence[int],
    result: Any,
    counts: array.array[int],
    otherwise: Callable[[], Any],
    owners: tuple[Any, ...],
) -> Callable[[], Any]:
    """A Python builtin that, while `counts[0] < counts[1]`, adds one to `counts[0]` and calls
    the packed entry at `entry` on `arguments` (its words) releasing the GIL, returning `result`,
    and else returns `otherwise()`; it keeps `counts` (never to be resized), `otherwise` and
    `owners` alive for as long as it lives. The count and the comparison are native: no Python
    object but the builtin's own is read before the entry runs (`PreparedCall`)."""
    state = _packed([entry, *arguments]).tobytes()
    where = _packed([counts.buffer_info()[0]]).tobytes()
    self = (result, state, otherwise, where, counts, *owners)
    return _builtin("counted_releasing_gil", self)  # type: ignore[no-any-return]


def entry_on_pointers(
    entry: int, positions: Sequence[int], counted: bool = False
) -> Callable[..., object]:
    """A Python builtin that calls the packed entry at `entry` as `BOUND_CALL_IR`'s
    `on_pointers` (or with `counted`, `counted_on_pointers`) says: `(words, *pointers)`, each
    data pointer written at its word position of `positions` (the caller keeps the entry's code
    alive, and with `counted`, the counts whose address `words` starts with)."""
    name = "counted_on_pointers" if counted else "on_pointers"
    return _builtin(name, _packed([entry, *positions]).tobytes())  # type: ignore[no-any-return]


@functools.cache
def fast_data_pointer() -> Callable[[np.ndarray], int]:
    """`data_pointer` as a builtin that reads the array's data field (~45 ns a call against
    ~280 for `read_data_field`'s ctypes indexing, four times in a checked call of three inputs),
    where `data_pointer` reads that field (this interpreter's layout checked); else
    `data_pointer`. Only for objects known to be numpy arrays."""
    if data_pointer is not read_data_field:
        return data_pointer
    return _builtin("data_pointer", None)  # type: ignore[no-any-return]


def _run_native(kernel: Kernel, call: CheckedCall, result: Any) -> Any:
    """Run `call` and return `result` (a prepared call of several slices or with a workspace;
    not a method of it, so that the call is in no reference cycle). It takes the whole checked
    call, which holds the arrays its pointers point into: a prepared call's `__call__` kept
    without the `PreparedCall` must keep its inputs alive."""
    kernel.run_plan(call.plan, call.native.pointers)
    return result


def in_call_shape(
    flat_shapes: Sequence[tuple[int, ...]], shape: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    """The outputs' shapes in a call on inputs of `shape` that a flat kernel runs flat: each
    flat one's `shape`, a 0-d one's ()."""
    return tuple(() if flat == () else shape for flat in flat_shapes)


class PreparedCall:
    """A checked call of a kernel: calling it runs the native code and returns the outputs.

    A call that can split counts its calls in its size class of the kernel's `split_choice` as
    it was when the call was prepared (`SplitTimes.counts`): prepare after setting one."""

    def __init__(self, kernel: Kernel, call: CheckedCall):
        self.kernel = kernel  # keeps the native code alive
        self.arrays = call.arrays  # keeps the buffers alive
        self.outputs = call.results
        self.argument_lists = call.native.argument_lists
        self.workspace_bytes = call.native.workspace_bytes
        self._result = self.outputs[0] if len(self.outputs) == 1 else tuple(self.outputs)
        self._run: Callable[[], Any] = functools.partial(_run_native, kernel, call, self._result)
        plan = call.native.plan
        shifted = (  # outputs off a line (`for_pointers` kept the plan): `ShiftedRows`
            plan.streams
            and plan.loop_nest
            and plan.shifted_rows(kernel.function, call.native.pointers) is not None
        )
        self.streams = plan.streaming or shifted
        """Whether it can write its outputs with non-temporal stores (`HostCpu.streaming_bytes`;
        each run does where `Kernel.stream_choice` says so)."""
        self.native_call: tuple[int, list[int]] | None = None
        """Where the call is one native call (one slice, no workspace): the packed entry's
        address and its argument words, which benchmarks may call without Python."""
        if shifted:
            return  # (through `run_plan`, which rotates the bias into a copy at each run)
        one_thread = plan.one_thread
        if len(self.argument_lists) == 1 and not (plan.rows or self.workspace_bytes):
            # One slice, no workspace: the native call itself, its argument words packed once.
            self.native_call = (self.kernel.function.entry, self.argument_lists[0])
            self._run = self._bound_call(call.native.plan, self.argument_lists[0])
        elif plan.holds_workspace and plan.keeps_gil:
            # The same in the plan's `held_workspace`, kept alive with it (no `native_call`: a
            # call without the GIL could share it with another).
            arguments = plan.on_held_workspace(self.argument_lists[0])
            self._run = self._bound_call(call.native.plan, arguments, plan.held_workspace)
        elif plan.rows and not (plan.can_stream or plan.row_groups or self.workspace_bytes):
            # Rows one after another on this thread with normal stores, as `run_plan` runs
            # them: `run_grid` on the rows' plan, packed once (strided [8, 2048] halves'
            # SwiGLU: 3.6-3.8 -> 2.5 us a run; docs/benchmarks.md).
            rows = plan.rows_run(kernel.function, call.native.pointers)
            self._run = bound_native_call(
                _bound_call_methods()[0].address("run_grid"),
                rows,
                self._result,
                plan.elements <= GIL_HELD_ELEMENTS,
                (self.kernel, *self.arrays),
            )
        elif one_thread is not None and one_thread.one_call_words is not None:
            # Split or not as `kernel.split_choice` says: a call in its size class's untimed
            # one-thread stretch is counted and run in native code, as a one-thread kernel's
            # bound call; any other decides in `run_plan`. The same check in Python (~0.2 us
            # alone) took 4-6% of hardswish's CPU time at 2^18 (1.5% at 2^16): it runs the
            # interpreter's code and objects that the call's 2 MiB evicted from the cache.
            # (It releases the GIL: a call splits from 2 * MIN_ELEMENTS_PER_THREAD elements.)
            times = kernel.split_choice.classes.setdefault(
                call.native.plan.size_class, SplitTimes()
            )
            self._run = counted_native_call(
                self.kernel.function.entry,
                one_thread.argument_lists(call.native.pointers)[0],
                self._result,
                times.counts,
                self._run,
                (self.kernel, *self.arrays),
            )

    def __repr__(self) -> str:
        outputs = ", ".join(
            f"{parameter.name}: {array.dtype}{list(array.shape)}"
            for parameter, array in zip(self.kernel.function.outputs, self.outputs, strict=True)
        )
        return f"<xfuse.PreparedCall of {self.kernel.signature} writing ({outputs})>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Refuses: its native calls take its arrays' addresses, which are another array's
        memory, or none, where the copy runs (it wrote the original's outputs, or crashed in
        another process)."""
        raise TypeError(
            "cannot pickle a prepared call (it runs on its arrays' addresses): pickle the "
            "kernel, and prepare the call where it runs"
        )

    def _bound_call(self, plan: CallPlan, arguments: list[int], *also: object) -> Callable[[], Any]:
        """The builtin that runs one native call of `plan` on `arguments` (its argument words,
        packed once) and returns the outputs, keeping the kernel, the arrays and `also` (what
        else the words point into) alive."""
        short = plan.elements <= GIL_HELD_ELEMENTS
        owners = (self.kernel, *self.arrays, *also)
        return bound_native_call(self.kernel.function.entry, arguments, self._result, short, owners)

    __call__ = property(operator.attrgetter("_run"))
    """`prepared()` calls `_run` with no Python frame before it: a `__call__` method costs
    ~0.1 us a call (CPython's call slot of a class), as much as the rest of a short call."""


@dataclass(eq=False)
class Program:
    """The cacheable result of compiling: native code, its signature and every stage's IR."""

    function: NativeFunction
    stages: Mapping[str, str]
    in_place_allowed: bool
    """True when the program reads all its inputs and only its last kernel writes outputs, so
    an output may overwrite a same-shaped input."""
    repeated_axes: tuple[int, ...]
    """The axes (but the last) that a kernel of more than one element making libm calls lacks
    while another spans them (a broadcast row's own kernel, `x + sin(b)`: axis 0): a call by
    rows over one of them runs that kernel again for each row (`Kernel._repeats`)."""
    options: Any
    frontend_ir: str | None = None
    """The frontend module's IR, what a pickled kernel carries (None: not from a frontend)."""


class CompiledProgram:
    """What a compiled program shows, whatever it runs on: its arguments, its options and the IR
    after each stage (`Kernel` on the CPU, `xfuse.runtime.cuda.CudaKernel` on a GPU)."""

    def __init__(self, program: Program):
        self.program = program  # shared with the compile cache; keeps the native code alive
        self.function = program.function
        self.stages = program.stages
        self.options = program.options
        self._input_names = tuple(p.name for p in self.function.inputs)
        self.call_signature = CallSignature(self._input_names)
        self.__signature__ = self.call_signature.signature
        """`inspect.signature(kernel)`: `(x, b, r, *, out=None)` (see `CallSignature`)."""

    @property
    def input_names(self) -> tuple[str, ...]:
        return self._input_names

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.function.outputs)

    def _each_out(
        self, out: Any, shaped: Callable[[Any], Any], zero_d: Callable[[Any], Any]
    ) -> Any:
        """`out` (as `out_buffers` takes it) in its form, each shaped output's buffer through
        `shaped` and each 0-d output's through `zero_d` (a name no output has, or a list of
        another length, as shaped: the checks then say what is wrong)."""
        scalar = [not p.shape for p in self.function.outputs]
        if isinstance(out, Mapping):
            names = {p.name for p in self.function.outputs if not p.shape}
            return {n: (zero_d if n in names else shaped)(b) for n, b in out.items()}
        if isinstance(out, list | tuple) and len(out) == len(scalar):
            return [(zero_d if z else shaped)(b) for b, z in zip(out, scalar, strict=True)]
        return None if out is None else (zero_d if scalar == [True] else shaped)(out)

    @property
    def signature(self) -> str:
        """`(x: float32[?], b: float32[?]) -> (out: float32[?])`: names, dtypes, type shapes."""

        def listed(parameters: Sequence[Parameter]) -> str:
            return ", ".join(f"{p.name}: {p.describe()}" for p in parameters)

        return f"({listed(self.function.inputs)}) -> ({listed(self.function.outputs)})"

    def ir(self, stage: str | None = None) -> str:
        """The IR after `stage` (see `.stages` for the names, in pipeline order); without one,
        the last stage's (as `mlir-opt` prints what its pipeline made)."""
        if stage is None:
            stage = list(self.stages)[-1]
        if not isinstance(stage, str):  # (0 was "no stage '0'", a list unhashable)
            raise TypeError(
                f"stage must be a stage's name, got {stage!r}: stages are {', '.join(self.stages)}"
            )
        if stage not in self.stages:
            raise KeyError(f"no stage '{stage}': stages are {', '.join(self.stages)}")
        return self.stages[stage]

    @functools.cached_property
    def _flattens(self) -> bool:
        """Whether every array is `[?]` or 0-d, and one input is `[?]`."""
        flat = (DYNAMIC_INDEX,)
        parameters = (*self.function.inputs, *self.function.outputs)
        return any(p.shape == flat for p in self.function.inputs) and all(
            p.shape in (flat, ()) and p.dims is None for p in parameters
        )

    def flat_input_shapes(self, elements: int) -> tuple[tuple[int, ...], ...]:
        """The inputs' shapes in a flat run of `elements` (a kernel that `_flattens`): those of
        `[?]` inputs `(elements,)`, those of 0-d ones `()`."""
        return tuple(() if p.shape == () else (elements,) for p in self.function.inputs)

    def flat_shape(self, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
        """The one shape of inputs of these `shapes` that are not 1-d, where the kernel runs them
        flat (a kernel whose arrays are all `[?]`, e.g. `xfuse.compile` without shapes, but
        0-d ones); None where the usual checks apply."""
        if not self._flattens:
            return None
        parameters = self.function.inputs
        distinct = {shape for p, shape in zip(parameters, shapes, strict=True) if p.shape != ()}
        if all(len(shape) == 1 for shape in distinct):
            return None  # 1-d inputs: the usual checks apply
        for p, shape in zip(parameters, shapes, strict=True):
            if p.shape == () and shape != ():
                raise ArgumentError(
                    f"argument '{p.name}': expected 0 dimensions ({p.describe()}), got shape "
                    f"{shape}"
                )
        if len(distinct) != 1:
            listed = ", ".join(
                f"'{p.name}' {shape}"
                for p, shape in zip(parameters, shapes, strict=True)
                if p.shape != ()
            )
            raise ArgumentError(
                f"inputs of different shapes ({listed}): a kernel compiled without shapes= takes "
                "inputs of any one shape; declare the shapes to broadcast"
            )
        (shape,) = distinct
        return shape


def _sizes(name: str, shape: object) -> tuple[int, ...]:
    """A shape given for argument `name` (`Kernel.streams`): ints >= 0, or one int for a 1-d
    shape as numpy takes it (a float or bool size hashed as an int's, so its plan, remembered
    under a call's key, broke every later call of that shape with a raw TypeError; an int was
    one too, "not iterable")."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    elif isinstance(shape, np.ndarray) and shape.ndim == 1:  # (as numpy's shape arguments)
        shape = tuple(shape.tolist())
    if (
        not isinstance(shape, Sequence)
        or isinstance(shape, str)
        or any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0 for d in shape)
    ):
        raise ArgumentError(f"argument '{name}': a shape is sizes >= 0, got {shape!r}")
    return tuple(int(cast(numbers.Integral, d)) for d in shape)


class Kernel(CompiledProgram):
    """A compiled elementwise program: `k(x=..., b=...)` -> array (or a tuple for several outputs).

    `out=` takes the output buffer (or a sequence / name->array mapping for several outputs) to
    write in place. Inputs are checked first (dtype, shape, broadcasting, aliasing); a strided
    input whose rows are contiguous runs one native call per row where it is (`_row_plan`), any
    other strided or misaligned input is copied to a contiguous array. `k.ir(stage)` shows the
    IR after any stage, `k.llvm_ir` the optimized LLVM IR, `k.asm` the host assembly. A kernel
    with temporaries (`fuse=False`) keeps their workspace between calls (`WorkspacePool`): no
    allocation per call.
    With dask arrays among the inputs a call returns lazy dask arrays (`xfuse.runtime.dask_arrays`);
    a kernel pickles as its frontend IR and options (`xfuse.runtime.pickling`).
    """

    def __init__(self, program: Program, threads: int = 1):
        super().__init__(program)
        self.in_place_allowed = program.in_place_allowed
        self.repeated_axes = program.repeated_axes
        self.threads = threads
        self._names = (*self._input_names, *(p.name for p in self.function.outputs))
        self._plans: dict[tuple[tuple[int, ...], ...], CallPlan] = {}
        """Call plans by input shapes: a repeated call skips binding the shapes."""
        self._row_plans: dict[RowKey, tuple[CallPlan | None]] = {}
        """Row plans (`_row_plan`; None: the inputs are copied) by `RowKey`."""
        self._row_calls: dict[RowCallKey, RowCall] = {}
        """The calls by rows that skip the full checks once made (`quick_row_call`)."""
        self._input_dtypes = tuple(numpy_dtype(p.dtype) for p in self.function.inputs)
        self._output_dtypes = tuple(numpy_dtype(p.dtype) for p in self.function.outputs)
        self._workspaces = WorkspacePool()
        self._new_locks()
        self.workers = SHARED_SLICE_WORKERS.grow(threads - 1)
        self.split_choice = SplitChoice()
        self.stream_choice: SplitChoice | None = SplitChoice()
        """Whether a call large enough to stream (`CallPlan.streams`) does, chosen per size
        class by timing both ways as `split_choice` times a split, its "split" being normal
        stores: a block of streaming calls first, then one of normal stores, which must win
        by `SPLIT_MARGIN` (as a split must) to be kept, probed in rounds after. On the Intel
        Xeon of 2026-12-04 non-temporal stores took 1.03-1.15x the time of normal ones from
        5 to 42 MiB moved and 0.73-0.93x from 84 MiB (docs/benchmarks.md). None streams every
        such call."""
        _ALL_KERNELS.add(self)

    def _new_locks(self) -> None:
        """New locks (in a forked child: another thread may have held the old ones)."""
        self._planning = threading.Lock()
        """Held while a plan is remembered, or `split_choice` replaced."""
        self._workspaces.new_lock()

    @property
    def split_choice(self) -> SplitChoice:
        """Whether a call of several slices splits (`SplitChoice`). Replacing it takes effect
        from the next checked call (a prepared call keeps the one it was prepared with)."""
        return self._split_choice

    @split_choice.setter
    def split_choice(self, choice: SplitChoice) -> None:
        with self._planning:
            self._split_choice = choice
            self._plans.clear()  # their `split_counts` are the replaced choice's

    def __repr__(self) -> str:
        return f"<xfuse.Kernel {self.signature} {self.options}, threads={self.threads}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as its frontend IR and options; unpickling compiles through the caches."""
        from xfuse.runtime.pickling import kernel_reduction

        return kernel_reduction(self)

    @property
    def llvm_ir(self) -> str:
        return self.function.native.optimized_ir

    @property
    def asm(self) -> str:
        return self.function.native.asm

    def __call__(self, /, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        inputs = self.call_signature.ordered(args, kwargs)
        if inputs is not None:
            results = self._quick_call(self, inputs, out)
            if results is None and self._row_calls:
                results = self._quick_rows(self, inputs, out)
            if results is not None:
                return results
        if dask_arrays.has_dask_arrays(args, kwargs):
            return dask_arrays.call(self, args, kwargs, out)
        call = self._check(args, kwargs, out)
        self.run_plan(call.plan, call.native.pointers)
        return call.results[0] if len(call.results) == 1 else tuple(call.results)

    def prepare(self, /, *args: Any, out: Any = None, **kwargs: Any) -> PreparedCall:
        """Check the arguments once; the returned call runs the native code with no checks.

        For loops and benchmarks: `run = k.prepare(x=x, out=y)` then `run()` as often as needed
        (the arrays' contents may change between runs, not the arrays themselves; without
        `out=`, the outputs are made here, and each run writes and returns them). An input
        that a call would copy (strided or misaligned, but for one whose rows it runs where
        they are: `_row_plan`) is an ArgumentError here: the runs would read the copy, not the
        array.
        """
        return PreparedCall(self, self._check(args, kwargs, out, prepared=True))

    def run_plan(self, plan: CallPlan, pointers: Sequence[int]) -> None:
        """Run a checked call of `plan` on arrays at `pointers` (inputs, then outputs): one
        large enough to stream with non-temporal stores or normal ones as `stream_choice`
        says, timed where it says so (`_run_plan`)."""
        choice = self.stream_choice
        if choice is None or not plan.can_stream:
            self._run_plan(plan, pointers)
            return
        size_class = (plan.elements.bit_length(), True)
        normal, timed = choice.next_call(size_class)
        chosen = plan.normal_stores if normal else plan
        if not timed:
            self._run_plan(chosen, pointers)
            return
        start = choice.clock()
        self._run_plan(chosen, pointers)
        choice.record(size_class, normal, (choice.clock() - start) / plan.elements)

    def _run_plan(self, plan: CallPlan, pointers: Sequence[int]) -> None:
        """Run a checked call of `plan` on arrays at `pointers` (inputs, then outputs), in a
        borrowed workspace if the program needs one. A call of several slices runs them
        concurrently where `split_choice` says so, else as one slice (`CallPlan.one_thread`) on
        this thread, timed where `split_choice` says so; untimed, a one-thread call that is one
        native call runs as a one-thread kernel's checked call does (`quick_call`, which runs
        such a call in its size class's untimed one-thread stretch without this method)."""
        plan = plan.for_pointers(self.function, pointers)
        if plan.row_heads is not None:
            self._run_plan(plan.row_heads, pointers)
        if plan.streams and plan.loop_nest:  # (outputs off a line: `for_pointers` kept it)
            shifted = plan.shifted_rows(self.function, pointers)
            if shifted is not None:
                self._run_shifted(shifted, pointers)
                return
        one_thread = plan.one_thread
        if one_thread is None:
            words = plan.one_call_words
            if words is not None:  # (one native call: a call `stream_choice` kept off streaming)
                self.function.pointer_call(words, *pointers)
                return
            if self._run_held(plan, pointers):
                return
            if plan.rows and not plan.row_groups and not plan.workspace_bytes:
                self._run_rows(plan, pointers)
                return
            self._run_slices(
                plan.argument_lists(pointers), plan.workspace_bytes, [], plan.streaming
            )
            return
        choice = self._split_choice
        split, timed = choice.next_call(plan.size_class)
        if not (split or timed) and one_thread.one_call_words is not None:  # the common call
            self.function.pointer_call(one_thread.one_call_words, *pointers)
            return
        start = choice.clock()  # a split counts the Python work that every split call does
        call = plan.native_call(pointers)
        slices = plan.slices
        workers = self.workers.take(slices - 1) if split else []
        try:
            if workers:
                self._run_slices(call.argument_lists, call.workspace_bytes, workers, call.streaming)
            else:  # (chosen, or another Python thread's call has the workers)
                start = choice.clock()  # the call alone: untimed, it runs from native code
                self._run_one_thread(call)
        finally:
            if workers:  # each has run its slice (`NativeFunction.run`), even after an exception
                self.workers.give_back(workers)
        seconds = choice.clock() - start
        if timed and len(workers) in (0, slices - 1):  # (not where another call had some)
            choice.record(plan.size_class, bool(workers), seconds / plan.elements)

    def _run_rows(self, plan: CallPlan, pointers: Sequence[int]) -> None:
        """Run a row plan's rows on this thread (no workspace): `CallPlan.rows_run`."""
        self.function.run_rows(plan.rows_run(self.function, pointers))

    def _run_shifted(self, shifted: ShiftedRows, pointers: Sequence[int]) -> None:
        """Run a call as `ShiftedRows`: its `[d]` inputs rotated into copies first (a call's
        arrays may change between calls), then the three parts."""
        copies = []
        for index, nbytes, cut in shifted.rotated:
            copy = np.empty(nbytes, np.uint8)
            ctypes.memmove(data_pointer(copy), pointers[index] + cut, nbytes - cut)
            ctypes.memmove(data_pointer(copy) + nbytes - cut, pointers[index], cut)
            copies.append(copy)
        parts = shifted.part_pointers(pointers, [data_pointer(copy) for copy in copies])
        for part, part_pointers in zip(shifted.parts, parts, strict=True):
            self._run_plan(part, part_pointers)  # (`stream_choice` chose to stream)

    def _run_held(self, plan: CallPlan, pointers: Sequence[int]) -> bool:
        """Run a call of one slice that releases the GIL in the plan's `held_workspace`, if it
        has one that no other call holds (`workspace_lock`): borrowing one took ~4 us of
        Python, more than a `[2, 16384]` float32 `x + sin(b)` saves by computing the row's
        `sin` once (13.3 us in one kernel, 14.8 split; Intel Xeon, 2026-12-06). False: not run."""
        words = plan.held_words
        if words is None or not plan.workspace_lock.acquire(blocking=False):
            return False
        try:
            self.function.pointer_call(words, *pointers)
        finally:
            plan.workspace_lock.release()
        return True

    def _run_one_thread(self, call: NativeCall) -> None:
        one_thread = call.plan.one_thread
        assert one_thread is not None
        words = one_thread.one_call_words
        if words is not None:
            self.function.pointer_call(words, *call.pointers)
        elif not self._run_held(one_thread, call.pointers):
            assert call.one_thread_lists is not None
            self._run_slices(call.one_thread_lists, call.workspace_bytes, [], call.streaming)

    def _run_slices(
        self,
        argument_lists: Sequence[Sequence[int]] | Sequence[RowRun],
        workspace_bytes: int,
        workers: Sequence[SliceWorker],
        streaming: bool,
    ) -> None:
        if not workspace_bytes:
            self.function.run(argument_lists, workers=workers, streaming=streaming)
        else:
            with self._workspaces.borrow(workspace_bytes) as workspace:
                self.function.run(argument_lists, workspace, workers, streaming)

    @functools.cached_property
    def _quick_call(self) -> QuickCall:
        """The common call with the fewest Python operations (`quick_call`)."""
        return quick_call(self.function, self._plans)

    @functools.cached_property
    def _quick_rows(self) -> QuickCall:
        """A repeated call by rows with the fewest Python operations (`quick_row_call`)."""
        return quick_row_call(self.function, self._row_calls, self._row_plans)

    def _check(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any, prepared: bool = False
    ) -> CheckedCall:
        """All checks of a call, before any native code runs (for a `prepared` call, which
        copies no input: `check_input`).

        A kernel whose every array is `[?]` (no shapes given at compile time) also takes inputs of
        any one shape, 0-d to N-d: being elementwise, it runs on them as one flat loop, and its
        outputs (and `out` buffers) have that shape. Where such a kernel's inputs, or those of
        one whose arrays all have one rank and only `?` dims (`@xfuse.jit`'s), are all
        Fortran-ordered (a transposed C array), and so is every `out` buffer, it runs on their
        transposes, C-ordered views of the same memory, and the outputs are transposed back
        (Fortran-ordered, as numpy's ufuncs make them): no input is copied.
        """
        inputs = self.call_signature.bind(args, kwargs)
        values = [inputs[p.name] for p in self.function.inputs]
        rank = self._transposable_rank
        shaped = [value for p, value in zip(self.function.inputs, values, strict=True) if p.shape]
        # (a 0-d output's buffer has no order, as a 0-d input has none: one kept the call from
        # running on the transposes, "must be C-contiguous ... or Fortran-ordered")
        transposed = rank is not None and fortran_ordered(
            shaped, self._each_out(out, lambda buffer: buffer, lambda _: None), rank
        )
        given = out  # the caller's buffers: a call returns them, as numpy's ufuncs do
        if transposed:  # (a 0-d input's value is checked below, whatever it is: not transposed)
            values = [
                value.T if p.shape and isinstance(value, np.ndarray) else value
                for p, value in zip(self.function.inputs, values, strict=True)
            ]
            # (nor a 0-d output's buffer, nor what is no array: one was reported transposed, a
            # float as a float64 array)
            out = self._each_out(out, _transposed, lambda buffer: buffer)
        arrays = [
            check_input(p, v, copy_allowed=not prepared, rows_allowed=True)
            for p, v in zip(self.function.inputs, values, strict=True)
        ]
        shape = self.flat_shape([array.shape for array in arrays])
        if shape is None:
            input_shapes = tuple(array.shape for array in arrays)
        else:
            input_shapes = self.flat_input_shapes(math.prod(shape))
        plan = self._plan(input_shapes)
        contiguous = all(array.flags.c_contiguous for array in arrays)
        if shape is not None and not transposed and contiguous:
            self._remember_flat_run(shape, input_shapes, plan)
        outputs = bind_outputs(  # (of a flat kernel in the call's shape, as the caller sees them)
            self.function.outputs,
            out,
            plan.output_shapes if shape is None else in_call_shape(plan.output_shapes, shape),
            plan.new_array,
            rows_allowed=True,
            fortran_allowed=rank is not None,
        )
        by_rows = not all(output.flags.c_contiguous for output in outputs)
        if not contiguous or by_rows:
            row_plan = self._row_plan(plan, arrays, outputs, shape)
            if row_plan is not None and self._repeats(row_plan) and not (by_rows or prepared):
                # Copies, where each row would run a row's own kernel again (a strided `out=`
                # is written by rows, and a prepared call reads its inputs where they are).
                row_plan = None
            if row_plan is None:
                arrays = [
                    contiguous_input(p, array, copy_allowed=not prepared)
                    for p, array in zip(self.function.inputs, arrays, strict=True)
                ]
                if by_rows:  # (the inputs' copies: `_row_plan` returned None for them)
                    row_plan = self._row_plan(plan, arrays, outputs, shape)
                    if row_plan is None:
                        raise self._rows_refused(outputs)
            if row_plan is not None:
                plan = row_plan
        results = outputs
        if shape is not None:  # (an array run row by row stays as it is: `_row_plan`)
            arrays = [a.reshape(-1) if a.flags.c_contiguous else a for a in arrays]
            outputs = [o.reshape(-1) if o.flags.c_contiguous else o for o in outputs]
        arrays += outputs
        pointers = [data_pointer(array) for array in arrays]
        check_aliasing(
            self._names, arrays, pointers, len(self.function.inputs), self.in_place_allowed
        )
        if transposed:  # (the caller's buffers themselves, not transposes of their transposes)
            results = [result.T for result in results]
            if given is not None:
                callers = given_outputs(self.function.outputs, given)
                results = [r if c is None else c for c, r in zip(callers, results, strict=True)]
        native = plan.for_pointers(self.function, pointers).native_call(pointers)
        return CheckedCall(arrays, native, results, plan)

    def _row_plan(
        self,
        plan: CallPlan,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        flat_shape: tuple[int, ...] | None,
    ) -> CallPlan | None:
        """`plan`'s call as one native call per row of its leading axes, reading its strided
        inputs where they are (each one's rows C-contiguous: `row_axes`) instead of copying
        them: the halves `x[:, :d]` and `x[:, d:]` of one `[t, 2d]` array, `x[::-1]`, a
        broadcast view. The rows run one after another, sharing one workspace part, each with
        the streaming twin where `plan` streams and every row of every output starts on a
        line; in a kernel of several threads a call large enough to split
        (`MIN_ELEMENTS_PER_THREAD` a thread) has its rows in a group per thread
        (`CallPlan.row_groups`), run split or on this thread as `split_choice` says. Outputs
        are written so too where they are strided (`rows_writable`: `out=buf[:, :d]`). None
        where an output shares an element with a strided input (which a copy reads before the
        call writes) but as an update in place (`same_elements`, where the kernel allows
        one), or where `_new_row_plan` says so: copy them instead. Remembered by the arrays'
        shapes and strides (`RowKey`)."""
        output_pointers = [data_pointer(o) for o in outputs]
        for given in inputs:
            if not given.flags.c_contiguous:
                pointer = data_pointer(given)
                low, high = extent(given, pointer)
                for output, output_pointer in zip(outputs, output_pointers, strict=True):
                    start, end = extent(output, output_pointer)
                    if (
                        low < end
                        and start < high
                        and share_elements(given, output)
                        and not (
                            self.in_place_allowed
                            and same_elements(output, output_pointer, given, pointer)
                        )
                    ):
                        return None
        # (Where the call cannot stream, where the outputs start changes nothing.)
        head = common_head(self.function, output_pointers) if plan.streams else 0
        key = (
            tuple(given.shape for given in inputs),
            tuple(given.strides for given in inputs),
            tuple(output.strides for output in outputs),
            head,
        )
        remembered = self._row_plans.get(key)  # (not `in` then `[]`: another thread may clear)
        if remembered is not None:
            return remembered[0]
        row_plan = self._new_row_plan(plan, inputs, outputs, flat_shape, head)
        row_call = None  # (a plan whose rows repeat a kernel runs only where it must)
        if row_plan is not None and not self._repeats(row_plan):
            row_call = self._row_call(plan, inputs, flat_shape)
        with self._planning:
            if len(self._row_plans) >= PLAN_CACHE_SIZE:
                self._row_plans.clear()
                self._row_calls.clear()
            self._row_plans[key] = (row_plan,)
            if row_call is not None:
                self._row_calls[key[:2]] = row_call
        return row_plan

    def _rows_refused(self, outputs: Sequence[np.ndarray]) -> ArgumentError:
        """The error for a call into a strided `out` buffer that `_row_plan` cannot write by
        rows (`_new_row_plan`: rows too short, static sizes)."""
        name, output = next(
            (parameter.name, output)
            for parameter, output in zip(self.function.outputs, outputs, strict=True)
            if not output.flags.c_contiguous
        )
        axes = row_axes(output)
        row = output.size if axes is None else math.prod(output.shape[axes:])
        reason = (
            f"rows of {row} elements, under {ROW_CALL_MIN_ELEMENTS} "
            "(`xfuse.runtime.kernel.ROW_CALL_MIN_ELEMENTS`)"
            if row < ROW_CALL_MIN_ELEMENTS
            else f"rows of {row} elements, which the kernel's sizes do not take one at a time"
        )
        return ArgumentError(
            f"out '{name}': a strided buffer is written one native call a row, and this one has "
            f"{reason}; pass a C-contiguous buffer, or assign the result instead: "
            "view[...] = k(...)"
        )

    def _row_call(
        self, plan: CallPlan, inputs: Sequence[np.ndarray], flat_shape: tuple[int, ...] | None
    ) -> RowCall:
        """What a repeated call on inputs of these shapes and strides needs besides its row
        plan (`quick_row_call`); `plan` is the call's plan before rows (on the flat shape
        where `flat_shape`)."""
        result_shapes = (
            plan.output_shapes
            if flat_shape is None
            else in_call_shape(plan.output_shapes, flat_shape)
        )
        result_strides = tuple(
            c_strides(shape, dtype.itemsize)
            for shape, dtype in zip(result_shapes, self._output_dtypes, strict=True)
        )
        extents = tuple(extent(given, 0) for given in inputs)
        return RowCall(result_shapes, result_strides, plan.streams, plan.new_array, extents)

    def _rows_apart(
        self,
        inputs: Sequence[np.ndarray],
        input_pointers: Sequence[int],
        extents: Sequence[tuple[int, int]],
        outputs: Sequence[np.ndarray],
        output_pointers: Sequence[int],
    ) -> bool:
        """Whether `quick_row_call` may write `outputs` (a caller's buffers, aligned and
        writable, whose spans overlap an input's or each other's) without the full checks: no
        output shares an element with an input but as an update in place (`_row_plan`'s rule:
        `gate` of `k(gate, up, out=gate)` shares none with `up`, though their extents overlap),
        nor with another output. `extents`: each input's bytes from its data pointer."""
        spans = list(map(extent, outputs, output_pointers))
        for index, (output, pointer, (start, end)) in enumerate(
            zip(outputs, output_pointers, spans, strict=True)
        ):
            for given, at, (low, high) in zip(inputs, input_pointers, extents, strict=True):
                if (
                    at + low < end
                    and start < at + high
                    and share_elements(given, output)
                    and not (self.in_place_allowed and same_elements(output, pointer, given, at))
                ):
                    return False  # inputs copied first, or an error to report
            for other, (low, high) in zip(outputs[index + 1 :], spans[index + 1 :], strict=True):
                if low < end and start < high and share_elements(output, other):
                    return False  # the error to report
        return True

    def _repeats(self, row_plan: CallPlan) -> bool:
        """Whether `row_plan`'s rows run a libm kernel again for `REPEATED_ROWS_TO_COPY` rows or
        more: its grid's rows along the program's `repeated_axes` (a row's `sin(cos(...))` beside
        a strided `[256, 4096]` x: 1068-1098 us by rows, 664-669 copying, 295-298 contiguous;
        Intel Xeon, 2026-12-06). A `[t, 1, d]` one's beside `x[:, :8, :]` (rows over t alone)
        repeats nothing, nor a `[1, h, d]` one's at a t of 1 (x `[1, 64, 4096]` strided: 265
        us by rows, 358-360 copying, 290 contiguous)."""
        grid = row_plan.row_grid
        if grid is None:
            return False
        counts = grid.counts
        repeats = math.prod(counts[axis] for axis in self.repeated_axes if axis < len(counts))
        return repeats >= REPEATED_ROWS_TO_COPY

    def _new_row_plan(
        self,
        plan: CallPlan,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        flat_shape: tuple[int, ...] | None,
        head: int,
    ) -> CallPlan | None:
        """`_row_plan`'s plan (`head`: the outputs' `common_head`), or None where rows cannot
        run: rows shorter than `ROW_CALL_MIN_ELEMENTS`, a strided input of lower rank than the
        call, a call one row of which the signature does not take (static sizes). A lower-rank
        array is of size 1 on its missing leading axes, as broadcasting reads it. Where the
        call streams and every output row starts on a line, each row streams; where they all
        start `head` elements before one, in a flat loop (an `out=` from `np.empty`), the
        rows' heads run first (`CallPlan.row_heads`) and their rests stream."""
        strided = [given for given in (*inputs, *outputs) if not given.flags.c_contiguous]
        iteration = flat_shape or bind_shapes(
            self.function.inputs, [given.shape for given in inputs], self.function.outputs
        )
        rank = len(iteration)
        if any(given.ndim != rank for given in strided):
            return None  # its rows are not the iteration's
        axes = max(row_axes(given) or rank for given in strided)
        row_elements = math.prod(iteration[axes:])
        if row_elements < ROW_CALL_MIN_ELEMENTS or math.prod(iteration[:axes]) < 2:
            return None
        counts = tuple(iteration[:axes])
        row_shapes, strides = [], []
        for given in (*inputs, *outputs):  # (a flat kernel's outputs in the call's shape)
            missing = rank - given.ndim  # (a lower-rank array: size 1 there, as broadcast)
            if missing >= axes:
                row_shapes.append(given.shape)
                strides.append(np.zeros(axes, np.int64))
                continue
            row_shapes.append((1,) * (axes - missing) + given.shape[axes - missing :])
            sizes = (1,) * missing + given.shape[: axes - missing]
            steps = zip(sizes, (0,) * missing + given.strides[: axes - missing], strict=True)
            strides.append(np.array([0 if n == 1 else step for n, step in steps], np.int64))
        if flat_shape:
            row_shapes = list(self.flat_input_shapes(row_elements))
        try:
            one_row = make_plan(self.function, row_shapes[: len(inputs)], 1)
        except ArgumentError:
            return None
        lines_apart = (
            plan.streams
            and streaming_sizes(self.function, one_row.output_shapes)
            and not any(np.any(step % STREAMING_ALIGNMENT) for step in strides[len(inputs) :])
        )
        starts = [0] * len(strides)
        row_plan = rows_of(
            plan, one_row, counts, strides, starts, streaming=lines_apart and head == 0
        )
        if lines_apart and flat_shape and 0 < head < row_elements:
            with contextlib.suppress(ArgumentError):  # (static sizes: no head, no rest)
                heads = make_plan(self.function, self.flat_input_shapes(head), 1)
                rest = make_plan(self.function, self.flat_input_shapes(row_elements - head), 1)
                parameters = (*self.function.inputs, *self.function.outputs)
                rests = [  # (a 0-d input is read where it is)
                    head * numpy_dtype(p.dtype).itemsize if p.shape else 0 for p in parameters
                ]
                row_plan = dataclasses.replace(
                    rows_of(plan, rest, counts, strides, rests, streaming=True),
                    row_heads=rows_of(plan, heads, counts, strides, starts, streaming=False),
                )
        rows = math.prod(counts)
        threads = min(self.threads, rows, plan.elements // MIN_ELEMENTS_PER_THREAD)
        if threads < 2:
            return row_plan
        return dataclasses.replace(
            row_plan,
            workspace_bytes=threads * one_row.workspace_bytes,
            one_thread=row_plan,
            row_groups=tuple(round(rows * part / threads) for part in range(threads + 1)),
        )

    def streams(self, /, *shapes: tuple[int, ...], **named_shapes: tuple[int, ...]) -> bool:
        """Whether a call on C-ordered inputs of these shapes (in the signature's order, or by
        name) can write its new outputs with non-temporal stores (`PreparedCall.streams` of
        such a call without `out=`; each call does where `stream_choice` says so), from the
        call's plan: no array is made. A shape the kernel does not take raises `ArgumentError`
        naming the argument, as a call does."""
        bound = self.call_signature.bind(shapes, named_shapes)
        input_shapes = tuple(_sizes(p.name, bound[p.name]) for p in self.function.inputs)
        flat = self.flat_shape(input_shapes)
        if flat is not None:
            input_shapes = self.flat_input_shapes(math.prod(flat))
        return self._plan(input_shapes).streams

    def _plan(self, input_shapes: tuple[tuple[int, ...], ...]) -> CallPlan:
        """The plan of a call on inputs of these shapes: the remembered one, else a new one."""
        plan = self._plans.get(input_shapes)
        return self._new_plan(input_shapes) if plan is None else plan

    def _new_plan(self, input_shapes: tuple[tuple[int, ...], ...]) -> CallPlan:
        """Plan a call on inputs of these shapes (`make_plan`: raises naming a wrong argument)
        and remember it, with `split_counts` where it has them: under `_planning`, so that no
        plan counting in a replaced `split_choice` is remembered after it (`split_choice`)."""
        plan = make_plan(self.function, input_shapes, self.threads)
        one_thread = plan.one_thread
        with self._planning:
            if one_thread is not None and one_thread.one_call_words is not None:
                times = self._split_choice.classes.setdefault(plan.size_class, SplitTimes())
                plan = dataclasses.replace(plan, split_counts=times.counts)
            if len(self._plans) >= PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[input_shapes] = plan
        return plan

    def _remember_flat_run(
        self, shape: tuple[int, ...], flat_shapes: tuple[tuple[int, ...], ...], plan: CallPlan
    ) -> None:
        """Remember `plan` (for the flat `flat_shapes`) for inputs of the one shape `shape`,
        with outputs of that shape, where the common call (`quick_call`, which finds plans by
        its inputs' shapes) can run it: C-contiguous arrays of `shape` are the flat arrays'
        memory. Without it every call on 2-d inputs took the full checks: 30-40 us where a
        1-d one took 2.5 (and a streaming call 284.8 us where a 1-d one took 241.4: SwiGLU on
        [64, 8192] float32). A streaming plan streams as the flat one does (`loop_nest`)."""
        key = tuple(() if flat == () else shape for flat in flat_shapes)
        if self._plans.get(key) is not None:
            return  # (a call the quick one declined: an in-place call, a read-only input)
        with self._planning:
            if self._plans.get(flat_shapes) is not plan:
                return  # a replaced `split_choice` dropped it
            if len(self._plans) >= PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = dataclasses.replace(
                plan, output_shapes=in_call_shape(plan.output_shapes, shape)
            )

    @functools.cached_property
    def _transposable_rank(self) -> int | None:
        """The rank of inputs the kernel may run transposed (reversing every array's dims is
        the same elementwise program): 0 (any) where it flattens, the arrays' one rank where
        all their dims are `?` and each dim name is on one axis; None where neither. (`x[t, t,
        d]` transposed checked its names against the reversed shape: a Fortran-ordered x of
        (2, 5, 5) ran, one of (2, 2, 5) was refused as "(5, 2, 2)".)"""
        if self._flattens:
            return 0
        parameters = (*self.function.inputs, *self.function.outputs)
        ranks = {len(p.shape) for p in parameters}
        dynamic = all(size == DYNAMIC_INDEX for p in parameters for size in p.shape)
        axes_of: dict[str, set[int]] = {}
        for parameter in parameters:
            for axis, name in parameter.named_axes:
                axes_of.setdefault(name, set()).add(axis)
        one_axis_each = all(len(axes) == 1 for axes in axes_of.values())
        return ranks.pop() if len(ranks) == 1 and dynamic and one_axis_each else None
