"""How one call of a native function runs on given arrays.

A `NativeFunction` is a function of a compiled module with its parameters; it follows the
lowering's calling convention (`xfuse.transforms.to_llvm`: for each input, then each output, a
pointer to its first element and one i64 per `?` dimension) and is called through its packed
entry, one pointer to an array of those words. A `CallPlan` (made per argument shapes by
`make_plan`) says how a call of it runs: its slices for threads (`splittable`), whether it streams
its outputs (a head run by the function, the rest by its streaming twin: `streaming_sizes`; rows
shifted onto cache lines: `ShiftedRows`), the rows of a call on strided arrays (`RowGrid`,
`RowRun`, `rows_of`), and the workspace of a program with temporaries (`WorkspacePool`).
A `NativeCall` is a plan applied to one call's arrays, a `CheckedCall` one whose arguments passed
every check.
"""

from __future__ import annotations

import array
import ctypes
import dataclasses
import functools
import itertools
import math
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xfuse.codegen.native import (
    STREAMING_ALIGNMENT,
    NativeModule,
    host_cpu,
    streaming_name,
)
from xfuse.codegen.optimized_ir import has_streaming_stores
from xfuse.runtime.arrays import (
    DYNAMIC_INDEX,
    ArgumentError,
    NewArray,
    Parameter,
    aligned_empty,
    bind_shapes,
    data_pointer,
    numpy_dtype,
    output_shape,
)
from xfuse.runtime.bound_calls import bound_call_methods, entry_on_pointers, packed, slice_function
from xfuse.runtime.output_pool import output_maker
from xfuse.runtime.split_calls import SizeClass, SliceWorker
from xfuse.transforms import packed_entry_name, workspace_size_function

MIN_ELEMENTS_PER_THREAD = 1 << 15
"""Below this many elements per thread, on average, a call is never split (nor timed for
`xfuse.runtime.split_calls.SplitChoice`; its slices are whole rows of a loop nest, so one may hold
fewer): at the cheapest kernels' ~0.3 ns per element that is ~10 us, less than handing a slice
over."""

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

WORKSPACE_ALIGNMENT = 64
"""Byte alignment of a workspace and of each thread's part of it (a cache line)."""


def native_argument_count(parameter: Parameter) -> int:
    return 1 + len(parameter.dynamic_axes)


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
        """The packed entry: takes the address of one call's argument words (`packed`); the
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
        words = packed(arguments)
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
        returns once the workers' have run: all of it is one native call
        (`xfuse.runtime.bound_calls.BOUND_CALL_IR`'s `run_slices`), which nothing interrupts (a
        KeyboardInterrupt is raised after it), so the slices' memory outlives them.

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
            run_grid = bound_call_methods()[0].address("run_grid")
            header = [len(groups), 1, len(handed), len(groups[0]), run_grid, run_grid]
            plan = packed([*header, *(worker.address for worker in handed)])
            for group in groups:
                plan.extend(group)
            slice_function("run_slices")(plan.buffer_info()[0])
            return
        if workspace:
            argument_lists = [[*a[:-2], workspace + a[-2], a[-1]] for a in argument_lists]
        own = 1 + streaming
        handed = workers[: len(argument_lists) - own]
        plan = packed(
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
        slice_function("run_slices")(plan.buffer_info()[0])

    @staticmethod
    def run_rows(plan: array.array[int]) -> None:
        """Run `run_grid`'s `plan` (`RowRun.plan`) on this thread."""
        slice_function("run_grid")(plan.buffer_info()[0])

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
    class's `xfuse.runtime.split_calls.SplitTimes.counts` in the kernel's `split_choice`
    (`Kernel.split_choice` makes new plans when it is replaced), kept alive with the plan."""
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
        (`xfuse.runtime.quick_calls.quick_call`); None for any other call."""
        if len(self.templates) > 1 or self.streams or self.rows:
            return None
        if self.workspace_bytes:
            return self.held_words if self.keeps_gil else None
        return packed([self.elements <= GIL_HELD_ELEMENTS, *self.templates[0]]).tobytes()

    @functools.cached_property
    def held_words(self) -> bytes | None:
        """For a call of one slice (no streaming, no rows) of a program with temporaries:
        `one_call_words` with its workspace in `held_workspace`, which a call that releases the
        GIL uses holding `workspace_lock` (`Kernel._run_held`); None for any other call."""
        if not self.holds_workspace:
            return None
        arguments = self.on_held_workspace(self.templates[0])
        return packed([self.elements <= GIL_HELD_ELEMENTS, *arguments]).tobytes()

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
        `one_call_words`, what `NativeFunction.counted_pointer_call` takes
        (`xfuse.runtime.quick_calls.quick_call`), which counts and runs the call where its size
        class stays on one thread untimed (`xfuse.runtime.split_calls.SplitTimes.one_thread_until`);
        else None. (It counts with the GIL held; a count of
        `xfuse.runtime.split_calls.SplitChoice.next_call`, in Python, may lose one made between its
        read and its write by another Python thread's call: a round is then one call longer.)"""
        if self.split_counts is None:
            return None
        assert self.one_thread is not None and self.one_thread.one_call_words is not None
        address = packed([self.split_counts.buffer_info()[0]]).tobytes()
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
        return packed([*header, *self.counts, *index, *self.positions, *self.carries, *words])


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
