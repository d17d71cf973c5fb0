"""The native glue that every call of a compiled kernel runs through, `BOUND_CALL_IR`: compiled
once a process (or linked from the on-disk cache), it gives Python builtins that call a kernel's
packed entry on its argument words, keeping the GIL or releasing it (`bound_native_call`,
`counted_native_call`, `entry_on_pointers`: no ctypes call's ~160 ns), the data pointer of a numpy
array (`fast_data_pointer`), and the split call's hand-over: a worker's loop, the posting and
awaiting of slices, spinning and then sleeping in a futex, and a call by rows
(`serve_slices`, `run_slices`, `run_grid`, through `slice_function`). Linux x86-64 and CPython's
C API.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import functools
import hashlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.binding as llvm_binding
import numpy as np

from xfuse.codegen.native import (
    NativeModule,
    UnresolvedSymbolsError,
    compile_llvm_ir,
    declared_symbols,
    host_cpu,
    load_object_code,
)
from xfuse.runtime import cache_files
from xfuse.runtime.arrays import (
    DATA_FIELD_OFFSET,
    data_pointer,
    read_data_field,
)

SLICE_SPIN_NS = 100_000
"""How long a `xfuse.runtime.split_calls.SliceWorker` spins for its next slice after its last one
(and a split call for its workers' slices) before it sleeps in the kernel (a futex): a spin costs a
core for as long, a sleeper's wake-up the split call ~10 us. Between two split calls of a prepared
call in a loop the worker waits for the caller's Python (its end of one call and its start of the
next): 12-20 us at 2^18 elements, 20-45 at 2^20 (data that evicted the interpreter's from the
caches), on an idle 2-vCPU Emerald Rapids VM. There the native part of the call (post, own slice,
wait) took 66-77 us for silu at 2^18 where the worker slept after each slice (no spin) against 58-61
with this spin, and for hardswish 46-53 against 35-36 (with a 10 us spin, that often ran out,
40-42); a worker idle longer gives its core back within 0.1 ms."""

SLOT_IDLE, SLOT_ASLEEP, SLOT_SIGNALLED, SLOT_STOP = 0, 1, 2, 3
"""The values of a `xfuse.runtime.split_calls.SliceWorker`'s slot's two words (`BOUND_CALL_IR`'s
`serve_slices`): nothing posted (or the slice not done), the waiting thread asleep in a futex, a
slice posted (or done), and the worker to end."""

SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129
"""Linux x86-64's futex system call and its operations on a word of one process."""


def packed(arguments: Sequence[int]) -> array.array[int]:
    """Native arguments (pointers and sizes) as the array of words a packed entry reads (its
    address is `words.buffer_info()[0]`; an `array` is made 4x faster than a ctypes array).
    Signed: `run_grid`'s plan moves pointers back along a negative stride."""
    return array.array("q", arguments)


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
`serve_slices` is a `xfuse.runtime.split_calls.SliceWorker`'s thread, on its slot (an i32 signal to
run or stop, an i32 signal that the call has run, the call's entry and its words' address): it waits
for a signal, runs the posted call and signals that it has run, until told to stop (`stop_serving`).
`run_slices` is a split call (`xfuse.runtime.call_plans.NativeFunction.run`) on a plan of words: the
count of calls, how many the caller runs first (`own`), the workers' count, the words per call, the
first call's entry and the other calls' entry, the workers' slot addresses, then each call's
argument words. It posts the calls after the first `own` to the workers (one each), runs its own and
any left after the workers', and returns once the workers' have run. A waiting side (`await_signal`)
spins with `pause` for `SLICE_SPIN_NS`, then marks its word asleep and sleeps in a futex until the
signalling side (`signal`, an exchange with release ordering) wakes it; the signal is read with
acquire ordering, so the slot's call (and what the caller wrote before posting it) is seen by
the worker, and what the worker's call wrote is seen by the caller once it has run. `run_grid`
runs a call by rows on one thread (`xfuse.runtime.call_plans.RowGrid.plan`'s words: the rows' count,
the words a row's call takes, the grid's axes, the moving words' count, the entry, each axis's
count, the first row's index, the moving words' positions, each axis's carries, the first row's
words): it calls the entry on a copy of the first row's words, then for each next row adds the
carries of the innermost axis whose index does not wrap to the moving words."""

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
"""Held while `bound_call_methods` runs: `functools.cache` lets threads that ask first compile
at once and keeps the last result, freeing what builtins made from the others point at."""


def _new_compile_lock_after_fork() -> None:
    """In a forked child, where only the forking thread survives: a new lock (another thread may
    have held the parent's at the fork, and would never release it here)."""
    global _BOUND_CALL_COMPILE
    _BOUND_CALL_COMPILE = threading.Lock()


os.register_at_fork(after_in_child=_new_compile_lock_after_fork)


def bound_call_methods() -> tuple[NativeModule, dict[str, _MethodDef]]:
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
def slice_function(name: str) -> Callable[[int], object]:
    """`BOUND_CALL_IR`'s `serve_slices`, `stop_serving`, `run_slices` or `run_grid` as a
    ctypes function of one address (which releases the GIL during the call)."""
    native, _ = bound_call_methods()
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(native.address(name))


_new_function = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.py_object, ctypes.py_object
)(("PyCFunction_NewEx", ctypes.pythonapi))
"""CPython's `PyCFunction_NewEx(method, self, module)` (a prototype of its own: setting the
types of `ctypes.pythonapi`'s would change them for every user of it)."""


def _builtin(name: str, self: object) -> Any:
    """A builtin of `BOUND_CALL_IR`'s function `name` on `self`."""
    _, methods = bound_call_methods()
    return _new_function(ctypes.addressof(methods[name]), self, None)


def bound_native_call(
    entry: int, arguments: Sequence[int], result: Any, keep_gil: bool, owners: tuple[Any, ...]
) -> Callable[[], Any]:
    """A Python builtin that calls the packed entry at `entry` on `arguments` (its words) and
    returns `result`: keeping the GIL or releasing it during the call, and keeping `owners`
    (what the native code and its pointers need alive) for as long as it lives."""
    state = packed([entry, *arguments]).tobytes()
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
    object but the builtin's own is read before the entry runs
    (`xfuse.runtime.kernel.PreparedCall`)."""
    state = packed([entry, *arguments]).tobytes()
    where = packed([counts.buffer_info()[0]]).tobytes()
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
    return _builtin(name, packed([entry, *positions]).tobytes())  # type: ignore[no-any-return]


@functools.cache
def fast_data_pointer() -> Callable[[np.ndarray], int]:
    """`data_pointer` as a builtin that reads the array's data field (~45 ns a call against
    ~280 for `read_data_field`'s ctypes indexing, four times in a checked call of three inputs),
    where `data_pointer` reads that field (this interpreter's layout checked); else
    `data_pointer`. Only for objects known to be numpy arrays."""
    if data_pointer is not read_data_field:
        return data_pointer
    return _builtin("data_pointer", None)  # type: ignore[no-any-return]
