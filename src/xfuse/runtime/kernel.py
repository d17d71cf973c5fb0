"""A compiled program callable on numpy arrays.

This module is the call's checks and its choices (`Kernel`, `PreparedCall`); the rest of a call
lives below it, a module each: `xfuse.runtime.quick_calls` (a repeated call's checks, written
out), `xfuse.runtime.call_plans` (a native function's parameters and how one call of it runs:
slices, streaming, rows, workspace), `xfuse.runtime.split_calls` (the threads of split calls and
whether a call splits) and `xfuse.runtime.bound_calls` (the native glue: builtins that call the
entry, the hand-over of slices).

The native function follows the lowering's calling convention (`xfuse.transforms.to_llvm`): for each
input, then each output, a pointer to its first element and one i64 per `?` dimension. It is called
through its packed entry, with one pointer to an array of those argument words, so a program may
have any number of arrays (ctypes passes at most 1024 arguments to a call). ctypes releases the GIL
during the call (but for a call of one slice over at most `GIL_HELD_ELEMENTS`, a few us, which keeps
it: releasing it costs ~70 ns), so `threads=N` runs N slices of the outermost dimension concurrently
(each slice is a call on offset pointers with a smaller outer size, its bounds on whole cache lines
of every array split): the calling thread runs the first slice, N - 1 of the threads that the
process keeps for every kernel's split calls (`xfuse.runtime.split_calls.SliceWorkers`,
`SHARED_SLICE_WORKERS`: started as split calls first need them) the others, handed over and awaited
in native code (`SliceWorker`, `NativeFunction.run`). A split costs the hand-off and the other
cores' cache misses on their slices' data, so whether it pays depends on the kernel, the size and
the host's load: such calls time themselves, and per size class the faster way, one thread (the
calling thread runs the call as one slice) or split, runs, the other one tried again now and then
(`SplitChoice`). A prepared call of one slice and no workspace calls the entry from a Python builtin
of its own (`bound_native_call`), keeping or releasing the GIL the same way, without ctypes' ~160 ns
a call; one of several slices is a builtin that, where its size class stays on one thread untimed
(`SplitTimes.one_thread_until`), counts the call and runs its one-thread call in native code
(`counted_native_call`), else decides in Python. A checked call of several slices does the same
(`CallPlan.counted_words`): where its size class stays on one thread untimed, it runs no more Python
than a one-thread kernel's checked call.

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
faster by `xfuse.runtime.split_calls.SPLIT_MARGIN`. Both functions compute the same bits (but a
NaN's sign where two NaNs meet: docs/calling-kernels.md). A call that streams makes its new outputs
start on a 64-byte boundary, half a page from numpy's
(`xfuse.runtime.call_plans.STREAMING_OUTPUT_PAGE_OFFSET`).

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

import contextlib
import ctypes
import dataclasses
import functools
import math
import numbers
import operator
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from xfuse.codegen.native import (
    STREAMING_ALIGNMENT,
)
from xfuse.runtime import dask_arrays
from xfuse.runtime.arrays import (
    DYNAMIC_INDEX,
    ArgumentError,
    CallSignature,
    Parameter,
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
    row_axes,
    same_elements,
    share_elements,
)
from xfuse.runtime.bound_calls import bound_call_methods, bound_native_call, counted_native_call
from xfuse.runtime.call_plans import (
    GIL_HELD_ELEMENTS,
    MIN_ELEMENTS_PER_THREAD,
    PLAN_CACHE_SIZE,
    CallPlan,
    CheckedCall,
    NativeCall,
    NativeFunction,
    RowRun,
    ShiftedRows,
    WorkspacePool,
    common_head,
    make_plan,
    rows_of,
    streaming_sizes,
)
from xfuse.runtime.quick_calls import (
    QuickCall,
    RowCall,
    RowCallKey,
    RowKey,
    quick_call,
    quick_row_call,
)
from xfuse.runtime.split_calls import SHARED_SLICE_WORKERS, SliceWorker, SplitChoice, SplitTimes

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

_ALL_KERNELS: weakref.WeakSet[Kernel] = weakref.WeakSet()
"""Every kernel, for a forked child to give their locks new ones."""


def _new_locks_after_fork() -> None:
    """In a forked child, where only the forking thread survives: new locks wherever another
    thread may have held one at the fork (held forever, it would hang the child's next call
    that takes it). The slice workers' pools and the bound calls' compile start afresh there
    too (`xfuse.runtime.split_calls`, `xfuse.runtime.bound_calls`)."""
    for kernel in list(_ALL_KERNELS):
        kernel._new_locks()
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


os.register_at_fork(after_in_child=_new_locks_after_fork)


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
                bound_call_methods()[0].address("run_grid"),
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
        by `xfuse.runtime.split_calls.SPLIT_MARGIN` (as a split must) to be kept, probed in rounds
        after. On the Intel Xeon of 2026-12-04 non-temporal stores took 1.03-1.15x the time of
        normal ones from 5 to 42 MiB moved and 0.73-0.93x from 84 MiB (docs/benchmarks.md). None
        streams every such call."""
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
