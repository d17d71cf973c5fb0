"""`xfuse.compile`, `@xfuse.jit` and the numpy baselines: results, checks, threads, cache."""

from __future__ import annotations

import enum
import functools
import gc
import inspect
import json
import math
import re
import subprocess
import sys
import types
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, VerifyException

import xfuse
from xfuse.codegen.native import HostCpu, host_cpu, streaming_name
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime import call_plans, quick_calls
from xfuse.runtime.arrays import (
    CallSignature,
    aligned_empty,
    data_pointer,
    keyword_mistake,
    overlapping_spans,
)
from xfuse.runtime.bound_calls import fast_data_pointer
from xfuse.runtime.call_plans import (
    GIL_HELD_ELEMENTS,
    HELD_WORKSPACE_BYTES,
    STREAMING_OUTPUT_PAGE_OFFSET,
    CallPlan,
    NativeCall,
    RowRun,
)
from xfuse.runtime.compiler import LRU_SIZE, Options, clear_cache, compile_module, parse_ir
from xfuse.runtime.kernel import ROW_CALL_MIN_ELEMENTS
from xfuse.runtime.split_calls import (
    SPLIT_FIRST_BLOCK,
    SPLIT_LONGEST_ROUND,
    SPLIT_PROBE_CALLS,
    SPLIT_PROBE_INTERVAL,
    SPLIT_PROBE_LONGEST,
    SPLIT_PROBE_SHARE,
    SPLIT_WARMUP_CALLS,
    SPLIT_WINDOW,
    SizeClass,
    SliceWorker,
    SplitChoice,
)
from xfuse.transforms import ALL_PASSES, packed_entry_name
from xfuse.transforms.optimize import EwOptimizePass
from xfuse.transforms.pipeline import apply_pipeline, pipeline_context

if TYPE_CHECKING:
    from conftest import Gelu

LENGTHS = [0, 1, 17, 2**20 + 3]


def program_for(op: ew.ElementwiseOpType) -> str:
    """A small program around one op, so unfused runs have temporaries and several kernels."""
    name = ew.mnemonic(op)
    call = f"{name}({', '.join(['h', 'y', 'x'][: ew.arity(op)])})"
    return f"h = x * 0.75 + y; out = {call} - x;"


def reference_for(op: ew.ElementwiseOpType, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    # h rounded as the kernel's float32 ops round it: tan near its pole, acosh near 1 and
    # atanh near 1 magnify a difference in their operand many times.
    h = (x * np.float32(0.75) + y).astype(np.float64)
    args = (h, y64, x64)[: ew.arity(op)]
    with np.errstate(all="ignore"):
        return op.reference(*args) - x64


@pytest.fixture(scope="module")
def positive_inputs() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    return {
        n: tuple(rng.uniform(0.1, 2.0, n).astype(np.float32) for _ in range(2)) for n in LENGTHS
    }


@pytest.fixture(scope="module")
def references(
    positive_inputs: dict[int, tuple[np.ndarray, np.ndarray]],
) -> Callable[[ew.ElementwiseOpType, int], np.ndarray]:
    """`reference_for` an op on `positive_inputs[n]`, computed once for its four variants (on
    2^20 elements it took a third of their time: `erf`'s reference is a Python loop)."""

    @functools.cache
    def reference(op: ew.ElementwiseOpType, n: int) -> np.ndarray:
        return reference_for(op, *positive_inputs[n])

    return reference


@pytest.mark.parametrize("op", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("math", ["approx", "libm"])
def test_every_op(
    op: ew.ElementwiseOpType,
    fuse: bool,
    math: str,
    positive_inputs: dict[int, tuple[np.ndarray, np.ndarray]],
    references: Callable[[ew.ElementwiseOpType, int], np.ndarray],
) -> None:
    kernel = xfuse.compile(program_for(op), fuse=fuse, math=math)
    for n, (x, y) in positive_inputs.items():
        out = kernel(x=x, y=y)
        assert out.shape == (n,)
        np.testing.assert_allclose(out, references(op, n), rtol=2e-5, atol=2e-6, err_msg=f"n={n}")


@pytest.mark.parametrize("math", ["approx", "libm"])
@pytest.mark.parametrize("n", LENGTHS)
def test_gelu(math: str, n: int, gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source, math=math)
    rng = np.random.default_rng(n)
    x, b, r = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    bound = 2e-6 if math == "approx" else 1e-6
    np.testing.assert_allclose(kernel(x=x, b=b, r=r), gelu.reference(x, b, r), rtol=0, atol=bound)


def test_fusion_changes_the_kernel_count(gelu: Gelu) -> None:
    fused = xfuse.compile(gelu.source)
    unfused = xfuse.compile(gelu.source, fuse=False)
    assert fused.ir("ew-bufferize").count("ew.kernel") == 1
    assert unfused.ir("ew-bufferize").count("ew.kernel") == 11  # one per op of the program
    assert "memref.alloc" in unfused.ir("ew-bufferize")


def test_every_stage_is_visible(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source)
    assert list(kernel.stages) == [
        "frontend",
        "ew-optimize",
        "ew-fuse",
        "ew-bufferize",
        "ew-workspace",
        "ew-kernel-to-loops",
        "ew-expand-math",
        "ew-to-llvm",
    ]
    assert "ew.tanh" in kernel.ir("frontend")
    assert "scf.for" in kernel.ir("ew-kernel-to-loops")
    assert "math.tanh" not in kernel.ir("ew-expand-math")
    assert "llvm.func @main" in kernel.ir("ew-to-llvm")
    # O3 inlines @main into its packed entry and drops it (internal), and so its streaming twin
    # (a single-kernel program): two functions are left, and the assembly is their code
    defined = re.findall(r'^define .*@"?([\w.]+)"?\(', kernel.llvm_ir, re.MULTILINE)
    assert defined == [packed_entry_name("main"), packed_entry_name(streaming_name("main"))]
    assert re.findall(r"^\t\.globl\t(\S+)$", kernel.asm, re.MULTILINE) == defined
    assert re.search(r"^\tretq?$", kernel.asm, re.MULTILINE)
    with pytest.raises(KeyError, match="stages are"):
        kernel.ir("nope")


def test_a_pass_run_twice_keeps_both_stages() -> None:
    """`extra_passes="ew-optimize{...}"` named its stage as the pipeline's own `ew-optimize`,
    whose IR could no longer be seen (and `len(stages)` counted a key twice)."""
    kernel = xfuse.compile("out = x + 0.0;", extra_passes="ew-optimize{unsafe-math=true}")
    assert list(kernel.stages)[:3] == ["frontend", "ew-optimize", "ew-optimize#2"]
    assert len(kernel.stages) == len(dict(kernel.stages))
    assert "ew.add" in kernel.ir("ew-optimize") and "ew.add" not in kernel.ir("ew-optimize#2")


def test_a_compile_copies_no_module_for_its_stages(
    gelu: Gelu, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stages' texts are made on first access from the frontend IR that the caches' keys
    printed anyway: a compile copies no module (the copy took 4% of a 10^4-op compile)."""
    copied: list[Operation] = []
    clone = Operation.clone

    def counting(self: Operation, *args: Any, **kwargs: Any) -> Operation:
        if isinstance(self, ModuleOp):
            copied.append(self)
        return clone(self, *args, **kwargs)

    monkeypatch.setattr(Operation, "clone", counting)
    kernel = xfuse.compile(gelu.source)
    assert copied == []
    module = parse_program(gelu.source)
    assert kernel.ir("frontend") == str(module)
    EwOptimizePass().apply(pipeline_context(), module)
    assert kernel.ir("ew-optimize") == str(module)


def test_out_buffer_is_written_in_place(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source)
    x, b, r = (np.full(33, v, np.float32) for v in (1.0, 0.5, -1.0))
    buffer = np.empty(33, np.float32)
    assert kernel(x=x, b=b, r=r, out=buffer) is buffer
    np.testing.assert_allclose(buffer, gelu.reference(x, b, r), atol=2e-6)
    assert kernel(x, b, r, out={"out": buffer}) is buffer  # positional inputs, out by name


def test_in_place_update_of_an_input(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source)
    rng = np.random.default_rng(3)
    x, b, r = (rng.standard_normal(1000, dtype=np.float32) for _ in range(3))
    want = gelu.reference(x, b, r)
    kernel(x=x, b=b, r=r, out=x)
    np.testing.assert_allclose(x, want, atol=2e-6)


def test_several_outputs() -> None:
    kernel = xfuse.compile("h = x + b; y = tanh(h);", outputs=["y", "h"])
    x, b = np.linspace(-2, 2, 50, dtype=np.float32), np.full(50, 0.5, np.float32)
    y, h = kernel(x=x, b=b)
    np.testing.assert_allclose(h, x + b)
    np.testing.assert_allclose(y, np.tanh(x.astype(np.float64) + b), atol=2e-6)
    assert kernel.output_names == ("y", "h")


def test_threads_split_the_outer_range_on_whole_cache_lines(gelu: Gelu) -> None:
    """Slices start on cache lines of every split array (2^15 rows of 3 float32 elements,
    16 rows to a line of 64 bytes); the slices give the same bits run concurrently or not."""
    source = "input x[t, 3], b[3], r[t, 3];" + gelu.source
    rng = np.random.default_rng(5)
    x, r = (rng.standard_normal((1 << 15, 3), dtype=np.float32) for _ in range(2))
    b = rng.standard_normal(3, dtype=np.float32)
    want = xfuse.compile(source)(x=x, b=b, r=r)
    kernel = xfuse.compile(source, threads=3)
    starts = [arguments[0] - x.ctypes.data for arguments in kernel.prepare(x, b, r).argument_lists]
    assert starts == [0, 10928 * 12, 21840 * 12]  # rows 1/3 and 2/3 of the way, rounded to 16
    sequential = kernel(x=x, b=b, r=r)
    (times,) = kernel.split_choice.classes.values()
    assert times.calls == 1 and not times.one_thread  # a first call: one thread, untimed
    kernel.split_choice = SplitChoice.always()  # a test cannot rely on timing
    concurrent = kernel(x=x, b=b, r=r)
    for result in (sequential, concurrent):
        np.testing.assert_array_equal(result.view(np.uint32), want.view(np.uint32))


def test_a_split_starts_each_slice_on_a_line_of_a_column_output_too() -> None:
    """A `[t, 1]` array's row is one element: priced as a row of the iteration's 64, the second
    thread's slice of `e` started at byte 2184 (34 lines and 8 bytes), a line two threads wrote."""
    kernel = xfuse.compile(
        "input x[t, d], c[t, 1]; e = tanh(c); out = x * e; output out, e;", threads=2
    )
    x = np.ones((1093, 64), np.float32)
    c = np.linspace(-1, 1, 1093, dtype=np.float32).reshape(1093, 1)
    out, e = (np.empty_like(a) for a in (x, c))
    prepared = kernel.prepare(x, c, out=(out, e))
    base = e.ctypes.data
    starts = [  # (each slice's argument words: e's pointer among them)
        next(word - base for word in words if base <= word < base + e.nbytes)
        for words in prepared.argument_lists
    ]
    assert len(starts) == 2 and all(start % 64 == 0 for start in starts)
    kernel.split_choice = SplitChoice.always()
    got_out, got_e = kernel(x, c)
    want = xfuse.compile("input x[t, d], c[t, 1]; e = tanh(c); out = x * e; output out, e;")(x, c)
    for got, expected in zip((got_out, got_e), want, strict=True):
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


SIZE_CLASS: SizeClass = (18, False)


def choose(choice: SplitChoice, calls: int, seconds: Callable[[int, bool], float]) -> list[bool]:
    """Whether each of `calls` calls of `SIZE_CLASS` split, each taking `seconds(call, split)`
    (asked of every call, timed or not)."""
    ways = []
    for call in range(calls):
        split, timed = choice.next_call(SIZE_CLASS)
        took = seconds(call, split)
        if timed:
            choice.record(SIZE_CLASS, split, took)
        ways.append(split)
    return ways


FIRST = 2 * SPLIT_FIRST_BLOCK
"""The calls of a size class that run on one thread, then split, before `SplitChoice` chooses."""

ROUND = SPLIT_PROBE_INTERVAL + SPLIT_PROBE_CALLS
"""A round of calls once a size class has chosen: the chosen way, then a probe of the other
(where the probes before lost by at most ~10%: `SPLIT_PROBE_SHARE`)."""


def probes(ways: list[bool], way: bool) -> int:
    """How many calls after the first ones ran `way`, where the other way was chosen."""
    assert ways[:FIRST] == [False] * SPLIT_FIRST_BLOCK + [True] * SPLIT_FIRST_BLOCK  # blocks
    return ways[FIRST:].count(way)


def test_a_split_that_loses_is_abandoned_and_one_that_wins_is_kept() -> None:
    """The faster way runs, the other only as a probe of `SPLIT_PROBE_CALLS` calls after each
    round of the chosen way; an outlier call (that waited for a core) changes nothing: medians
    count. A probe that loses by little comes every `SPLIT_PROBE_INTERVAL` calls, one that loses
    by more later (`SPLIT_PROBE_SHARE`): a split 1.3x as slow after 90 calls, a one-thread call
    2x as slow as a split after 300."""
    calls = 20 * ROUND

    def close(call: int, split: bool) -> float:
        return 1.05e-9 if split else (9e-9 if call % 7 == 0 else 1e-9)

    def losing(call: int, split: bool) -> float:
        return 1.3e-9 if split else (9e-9 if call % 7 == 0 else 1e-9)

    def winning(call: int, split: bool) -> float:
        return (9e-9 if call % 7 == 0 else 0.5e-9) if split else 1e-9

    for seconds, chosen, round_calls in (
        (close, False, 32),
        (losing, False, 90),
        (winning, True, 300),
    ):
        ways = choose(SplitChoice(), calls, seconds)
        rounds = (calls - FIRST) // (round_calls + SPLIT_PROBE_CALLS)
        assert probes(ways, not chosen) == rounds * SPLIT_PROBE_CALLS
        assert ways[FIRST : FIRST + round_calls] == [chosen] * round_calls
        assert ways[-1] == chosen


def test_a_probe_that_still_speeds_up_runs_on_and_decides_by_its_last_calls() -> None:
    """A split after a stretch on one thread can take several calls to reach its usual time
    (as `log(1 + exp(x))`'s at 2^18 on a 2-vCPU KVM guest: 358, 209, 164, 109, 100, then 96 us
    against 133 on one thread). Its probe runs on while its calls get faster and decides by its
    last `SPLIT_PROBE_CALLS`; one deciding by its first three kept one thread. A probe that
    never settles ends after `SPLIT_PROBE_LONGEST` calls."""
    for warming, probe_calls, splits in (
        ([358, 209, 164, 109, 100], 6, True),
        ([400 * 0.8**k for k in range(20)], SPLIT_PROBE_LONGEST, True),  # 400 ... 105, 84
        ([300, 290, 285], SPLIT_PROBE_CALLS, False),  # slower, and settled by its third call
    ):
        state: dict[str, int | bool] = {"busy": True, "run": 0, "split": False}

        def seconds(
            call: int,
            split: bool,
            warming: list[float] = warming,
            state: dict[str, int | bool] = state,
        ) -> float:
            state["run"] = state["run"] + 1 if split == state["split"] else 1
            state["split"] = split
            if not split:
                return 133e-9
            if state["busy"]:  # another process has the other core: the first decision
                return 300e-9
            return (warming[state["run"] - 1] if state["run"] <= len(warming) else 96) * 1e-9

        choice = SplitChoice()
        choose(choice, FIRST, seconds)
        times = choice.classes[SIZE_CLASS]
        assert not times.splitting
        state["busy"] = False
        round_calls = times.chosen_calls
        ways = choose(choice, round_calls + SPLIT_PROBE_LONGEST + 4, seconds)
        assert ways[:round_calls] == [False] * round_calls
        assert ways[round_calls : round_calls + probe_calls] == [True] * probe_calls
        assert times.splitting == splits
        assert ways[round_calls + probe_calls :] == [splits] * (
            len(ways) - round_calls - probe_calls
        )


def test_losing_probes_cost_at_most_their_share() -> None:
    """However much slower the other way is (up to where `SPLIT_LONGEST_ROUND` bounds the
    rounds), the probes make the calls after the first ones take at most `SPLIT_PROBE_SHARE`
    longer than the faster way alone; beyond, a probe comes every `SPLIT_LONGEST_ROUND` calls."""
    calls = 3 * SPLIT_LONGEST_ROUND
    for slower in (1.1, 1.2, 1.37, 2.0, 5.0, 12.0, 100.0):
        for split_slower in (True, False):

            def seconds(
                call: int, split: bool, slower: float = slower, split_slower: bool = split_slower
            ) -> float:
                return slower if split == split_slower else 1.0

            ways = choose(SplitChoice(), calls, seconds)
            took = sum(seconds(call, split) for call, split in enumerate(ways[FIRST:], FIRST))
            share = took / (calls - FIRST) - 1
            if slower < 14:
                assert 0 < share <= SPLIT_PROBE_SHARE
            else:
                rounds = (calls - FIRST) // (SPLIT_LONGEST_ROUND + SPLIT_PROBE_CALLS)
                assert probes(ways, split_slower) == rounds * SPLIT_PROBE_CALLS


def test_probes_cost_at_most_their_share_with_their_switches() -> None:
    """A probe's first call finds the data in the chosen way's caches, and the chosen way's first
    call after it in the probe's: each such switch costs 2 calls more (about as hardswish's at
    2^18 on a 2-core VM, where a split is about as fast as one thread). The rounds are long
    enough that the probes, switches included, cost at most `SPLIT_PROBE_SHARE` (with the
    probe's median loss alone, rounds of 32 calls: 12%)."""
    took: list[float] = []
    last_way = [False]

    def seconds(call: int, split: bool) -> float:
        switched, last_way[0] = last_way[0] != split, split
        took.append((1.1 if split else 1.0) + (2.0 if switched else 0.0))
        return took[-1]

    ways = choose(SplitChoice(), 6000, seconds)
    after_first_probe = ways.index(False, ways.index(True, FIRST))
    settled = took[after_first_probe:]
    assert probes(ways, True) >= 2 * SPLIT_PROBE_CALLS
    assert 0 < sum(settled) / len(settled) - 1 <= SPLIT_PROBE_SHARE


def test_a_timed_split_counts_the_python_work_of_every_split() -> None:
    """A split call's Python work (its slices' arguments, taking and giving back the workers)
    is part of every split call, timed or not, and of its time: one thread's untimed calls run
    from native code without it (on a 2-core VM at 2^18 elements the split's clock missed 9-16
    us of hardswish's ~60 us calls, and chose splits slower than one thread). Here taking the
    workers takes a second of a fake clock."""
    n = 1 << 17
    now = [0.0]
    recorded: list[float] = []

    @dataclass
    class TimedSplits(SplitChoice):
        def next_call(self, size_class: SizeClass) -> tuple[bool, bool]:
            return True, True

        def record(self, size_class: SizeClass, split: bool, seconds_per_element: float) -> None:
            recorded.append(seconds_per_element * n)

    kernel = xfuse.compile("out = x * 2;", threads=2)
    kernel.split_choice = TimedSplits(clock=lambda: now[0])
    take = kernel.workers.take

    def slow_take(count: int) -> list[SliceWorker]:
        now[0] += 1.0
        return take(count)

    kernel.workers.take = slow_take  # type: ignore[method-assign]
    x = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x=x), 2 * x)
    assert recorded == [1.0]


@pytest.mark.parametrize("splitting", [True, False])
def test_a_call_that_ends_after_a_probe_began_on_another_python_thread_keeps_the_choice(
    splitting: bool,
) -> None:
    """Python threads calling one kernel interleave `next_call` and `record`: a timed call of
    the chosen way that began before a probe (whose first call empties the probed way's times)
    and records after the probe's calls began, but before any of them recorded, decided on no
    time of the probed way: an IndexError raised from the kernel call (4 Python threads calling
    a `threads=2` kernel). It keeps the choice for the next round, and the probe still decides."""
    choice = SplitChoice()

    def seconds(call: int, split: bool) -> float:
        return (1e-9 if split else 2e-9) if splitting else (2e-9 if split else 1e-9)

    choose(choice, FIRST, seconds)
    times = choice.classes[SIZE_CLASS]
    assert times.splitting == splitting
    choose(choice, times.chosen_calls - 1, seconds)
    chosen = choice.next_call(SIZE_CLASS)  # the round's last timed call, on Python thread B
    assert chosen == (splitting, True)
    probe = [choice.next_call(SIZE_CLASS) for _ in range(SPLIT_PROBE_CALLS)]  # threads A, C, D
    assert probe == [(not splitting, True)] * SPLIT_PROBE_CALLS
    choice.record(SIZE_CLASS, splitting, seconds(0, splitting))  # B's call ends first
    assert times.splitting == splitting and times.calls == 0  # a new round, the same choice
    for split, _ in probe:  # the probe's calls end and record: they lost, nothing changes
        choice.record(SIZE_CLASS, split, seconds(0, split))
    assert times.splitting == splitting


def test_a_split_must_win_by_the_margin() -> None:
    """A split 3% faster than one thread (within `SPLIT_MARGIN`) is not chosen."""
    ways = choose(SplitChoice(), 100, lambda call, split: 0.97e-9 if split else 1e-9)
    assert probes(ways, True) == (100 - FIRST) // ROUND * SPLIT_PROBE_CALLS


def test_the_first_decision_sees_each_way_warm() -> None:
    """Each way's first calls are cold (new outputs' page faults, a new worker thread, data in
    the other core's cache): the first decision counts neither. Times (ns per element) as a
    `threads=2` quick-GELU at 2^18 took on a 2-core VM: its split's first three calls were
    slower than one thread's second and third, warm it is 1.4x as fast."""
    cold = {False: [3.76, 0.78, 0.72], True: [1.10, 0.81, 0.75]}
    warm = {False: 0.65, True: 0.45}
    calls = {False: 0, True: 0}

    def seconds(call: int, split: bool) -> float:
        calls[split] += 1
        way = cold[split]
        return 1e-9 * (way[calls[split] - 1] if calls[split] <= len(way) else warm[split])

    ways = choose(SplitChoice(), FIRST + SPLIT_PROBE_INTERVAL, seconds)
    assert ways[FIRST:] == [True] * SPLIT_PROBE_INTERVAL


def test_a_split_choice_follows_a_change_of_the_host() -> None:
    """A split that becomes slower than one thread is abandoned at the end of its round (the
    probe decides on the round's last timed calls); once it is faster again, at the end of the
    next probe, which only the probe's own calls decide (not the probe's before: a split that
    took 3x as long, its probes every 600 calls). Size classes choose apart."""
    choice = SplitChoice()
    split_seconds = [0.5e-9]

    def seconds(call: int, split: bool) -> float:
        return split_seconds[0] if split else 1e-9

    winning_round = 300 + SPLIT_PROBE_CALLS  # a one-thread probe 2x as slow as the split
    ways = choose(choice, FIRST + 2 * winning_round, seconds)  # the last one a probe's
    assert probes(ways, False) == 2 * SPLIT_PROBE_CALLS and not ways[-1]
    split_seconds[0] = 3e-9  # another process took the other core
    losing_round = 600 + SPLIT_PROBE_CALLS  # a split probe 3x as slow as one thread
    ways = choose(choice, winning_round + 2 * losing_round, seconds)
    assert ways[:winning_round] == [True] * 300 + [False] * SPLIT_PROBE_CALLS
    assert ways[winning_round:].count(True) == 2 * SPLIT_PROBE_CALLS  # probes
    other: SizeClass = (20, False)
    assert choice.next_call(other) == (False, False)  # its first call: one thread, untimed
    split_seconds[0] = 0.5e-9  # the other core is free again
    ways = choose(choice, losing_round + 2 * winning_round, seconds)
    assert ways[:losing_round] == [False] * 600 + [True] * SPLIT_PROBE_CALLS
    assert ways[losing_round:].count(False) == 2 * SPLIT_PROBE_CALLS  # probes


class FakeClock:
    """A clock that stands still but for what a test advances it by."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def on_a_fake_clock(
    kernel: xfuse.Kernel, cost: dict[bool, float], monkeypatch: pytest.MonkeyPatch
) -> list[bool]:
    """Time `kernel`'s calls for its `SplitChoice` on a fake clock that each run that
    `Kernel.run_plan` makes advances by `cost[split]`; the returned list gets whether each such
    run split (`_run_slices` is called only to split here)."""
    clock = FakeClock()
    kernel.split_choice = SplitChoice(clock=clock)
    runs: list[bool] = []
    run_one_thread, run_slices = kernel._run_one_thread, kernel._run_slices

    def timed_one_thread(call: NativeCall) -> None:
        run_one_thread(call)
        runs.append(False)
        clock.now += cost[False]

    def timed_slices(lists: Any, workspace: int, workers: Any, streaming: bool) -> None:
        run_slices(lists, workspace, workers, streaming)
        runs.append(True)
        clock.now += cost[True]

    monkeypatch.setattr(kernel, "_run_one_thread", timed_one_thread)
    monkeypatch.setattr(kernel, "_run_slices", timed_slices)
    return runs


def test_a_kernel_splits_where_splitting_was_faster_with_the_same_bits(
    gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked and prepared calls time themselves for `SplitChoice` (here on a fake clock that
    each timed run advances by what its way takes): a losing split is abandoned, a winning one
    kept, and every call gives the bits of one thread."""
    kernel = xfuse.compile(gelu.source, threads=2)
    cost = {False: 100e-6, True: 110e-6}
    runs = on_a_fake_clock(kernel, cost, monkeypatch)
    rng = np.random.default_rng(3)
    x, b, r = (rng.standard_normal(1 << 17, dtype=np.float32) for _ in range(3))
    want = xfuse.compile(gelu.source)(x=x, b=b, r=r).view(np.uint32)
    out = np.empty_like(x)
    prepared = kernel.prepare(x=x, b=b, r=r, out=out)
    calls = 3 * ROUND
    ways = []
    for way_cost in (110e-6, 50e-6):  # (a probe that loses by 10%: rounds of 32 calls)
        cost[True] = way_cost
        for call in range(calls):
            out[:] = 0
            runs.clear()
            result = prepared() if call % 2 else kernel(x=x, b=b, r=r)
            ways.append(runs == [True])
            np.testing.assert_array_equal(result.view(np.uint32), want)
    losing, winning = ways[FIRST:calls], ways[calls + ROUND :]
    assert losing.count(True) <= (len(losing) // ROUND + 1) * SPLIT_PROBE_CALLS
    assert winning.count(False) <= (len(winning) // ROUND + 1) * SPLIT_PROBE_CALLS


def profiled(call: Callable[[], np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """What `call()` returns, and the names of the Python functions it ran."""
    frames: list[str] = []

    def profile(frame: Any, event: str, argument: object) -> None:
        if event == "call":
            frames.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        return call(), frames
    finally:
        sys.setprofile(None)


def losing_split(
    gelu: Gelu, monkeypatch: pytest.MonkeyPatch, seed: int
) -> tuple[xfuse.Kernel, list[bool], dict[str, np.ndarray], np.ndarray, list[str]]:
    """A `threads=2` GELU kernel on a fake clock where a split loses by 10% (`on_a_fake_clock`:
    rounds of `SPLIT_PROBE_INTERVAL`), inputs of 2^17 elements, the one-thread kernel's bits on
    them, and the Python functions that its checked call (`out=` a new buffer) runs."""
    kernel = xfuse.compile(gelu.source, threads=2)
    runs = on_a_fake_clock(kernel, {False: 100e-6, True: 110e-6}, monkeypatch)
    rng = np.random.default_rng(seed)
    inputs = {name: rng.standard_normal(1 << 17, dtype=np.float32) for name in "xbr"}
    one_thread_kernel, out = xfuse.compile(gelu.source), np.empty(1 << 17, np.float32)
    want = one_thread_kernel(**inputs).view(np.uint32)
    one_thread_kernel(**inputs, out=out)  # (the first quick call makes the plan's words)
    _, checked_frames = profiled(lambda: one_thread_kernel(**inputs, out=out))
    return kernel, runs, inputs, want, checked_frames


def test_a_call_that_stays_on_one_thread_runs_no_python_decision(
    gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a `threads=2` kernel's split lost, a prepared call and a checked one in the untimed
    stretch of each round count themselves and run the one-thread call in native code, no
    Python function (not `Kernel.run_plan`, ~1.5 us of CPU a call, nor a check in Python: 4-6%
    of hardswish's CPU time at 2^18), with the one-thread kernel's bits; every call of the size
    class, checked ones and prepared ones, still counts towards the round, so the timed calls
    and the probes come when they do for checked calls alone."""
    kernel, runs, inputs, want, checked_frames = losing_split(gelu, monkeypatch, 6)
    out = np.empty(1 << 17, np.float32)
    prepared = kernel.prepare(**inputs, out=out)
    run_plan = kernel.run_plan
    planned = []
    monkeypatch.setattr(kernel, "run_plan", lambda *args: planned.append(run_plan(*args)))
    ways = []  # per call: "native" where it ran the Python of a one-thread kernel's call, else
    for call in range(FIRST + 4 * ROUND):  # whether a timed run split
        out[:] = 0
        runs.clear()
        planned.clear()
        if call % 3:
            result, ran = profiled(prepared)
            one_thread = not ran
        else:
            result, ran = profiled(lambda: kernel(**inputs, out=out))
            one_thread = ran == checked_frames
        ways.append(runs[0] if runs else "untimed" if planned else one_thread and "native")
        np.testing.assert_array_equal(result.view(np.uint32), want)
    one_thread = ["untimed"] * SPLIT_WARMUP_CALLS + [False] * SPLIT_WINDOW  # (the warm-up cold)
    assert ways[:FIRST] == one_thread + [True] * SPLIT_FIRST_BLOCK
    untimed = SPLIT_PROBE_INTERVAL - SPLIT_WINDOW  # (a split that loses by 10%: rounds of 32)
    for start in range(FIRST, len(ways), ROUND):
        stretch, timed, probe = (
            ways[start : start + untimed],
            ways[start + untimed : start + SPLIT_PROBE_INTERVAL],
            ways[start + SPLIT_PROBE_INTERVAL : start + ROUND],
        )
        assert stretch == ["native"] * untimed
        assert timed == [False] * SPLIT_WINDOW
        assert probe == [True] * SPLIT_PROBE_CALLS


def test_a_replaced_split_choice_decides_the_next_checked_call(
    gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checked call that counts itself in native code counts in the kernel's `split_choice` of
    now: once it is replaced, the next checked call splits as the new one says (a call in the
    old one's stretch ran the Python of a one-thread kernel's call alone), and a new measured
    choice starts its own first block (one thread, untimed), giving the same bits each way."""
    kernel, runs, inputs, want, checked_frames = losing_split(gelu, monkeypatch, 8)
    out = np.empty(1 << 17, np.float32)
    for _ in range(FIRST):  # the first decision: the split lost
        kernel(**inputs, out=out)
    result, frames = profiled(lambda: kernel(**inputs, out=out))
    assert frames == checked_frames
    np.testing.assert_array_equal(result.view(np.uint32), want)
    kernel.split_choice = SplitChoice.always()
    runs.clear()
    np.testing.assert_array_equal(kernel(**inputs).view(np.uint32), want)
    assert runs == [True]
    kernel.split_choice = choice = SplitChoice()
    np.testing.assert_array_equal(kernel(**inputs).view(np.uint32), want)
    assert choice.classes[SIZE_CLASS].calls == 1


def test_a_call_that_does_not_split_makes_no_slice_arguments(
    gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checked call of a `threads=2` kernel that runs on one thread, untimed (most calls where
    the split loses), fills the one-thread call's argument words alone, as a one-thread kernel's
    call does: making every slice's arguments, and the one-thread call's as lists, took ~10 us
    a call (a sixth of a call over 2^18 elements). It gives the one-thread kernel's bits."""
    kernel = xfuse.compile(gelu.source, threads=2)
    monkeypatch.setattr(kernel.split_choice, "next_call", lambda size_class: (False, False))
    argument_lists = CallPlan.argument_lists
    made = []

    def counted(plan: CallPlan, pointers: Any) -> list[list[int]]:
        made.append(plan)
        return argument_lists(plan, pointers)

    monkeypatch.setattr(CallPlan, "argument_lists", counted)
    rng = np.random.default_rng(4)
    x, b, r = (rng.standard_normal(1 << 17, dtype=np.float32) for _ in range(3))
    want = xfuse.compile(gelu.source)(x=x, b=b, r=r).view(np.uint32)
    kernel(x=x, b=b, r=r)  # the first call of these shapes plans them
    made.clear()
    for _ in range(3):
        np.testing.assert_array_equal(kernel(x=x, b=b, r=r).view(np.uint32), want)
    assert not made


def test_a_short_prepared_call_keeps_the_gil_and_a_long_one_releases_it(gelu: Gelu) -> None:
    # Releasing and taking back the GIL costs ~70 ns, a noticeable share of a call in cache;
    # a long call releases it, so that other Python threads run meanwhile.
    kernel = xfuse.compile(gelu.source)
    x = np.linspace(-4, 4, GIL_HELD_ELEMENTS + 64, dtype=np.float32)
    short = x[:GIL_HELD_ELEMENTS]
    prepared = kernel.prepare(x=short, b=short, r=short)
    assert prepared._run.__name__ == "keeping_gil"
    long_call = kernel.prepare(x=x, b=x, r=x)
    assert long_call._run.__name__ == "releasing_gil"
    want = gelu.reference(x, x, x).astype(np.float32)
    np.testing.assert_allclose(long_call(), want, atol=2e-6)
    for result in (prepared(), kernel(x=short, b=short, r=short)):
        np.testing.assert_array_equal(
            result.view(np.uint32), long_call()[: short.size].view(np.uint32)
        )


def test_a_prepared_call_owns_what_its_native_call_reads(gelu: Gelu) -> None:
    # A one-slice prepared call runs as a builtin over the packed entry (`bound_native_call`:
    # a ctypes call costs ~5x as much): it returns the outputs, keeps its kernel and arrays
    # alive once the PreparedCall is gone, and takes no reference per call.
    x = np.linspace(-4, 4, 1000, dtype=np.float32)
    out = np.empty_like(x)
    run = xfuse.compile(gelu.source).prepare(x=x.copy(), b=x.copy(), r=x.copy(), out=out)._run
    gc.collect()
    reused = [np.full_like(x, 7.0) for _ in range(3)]  # where freed inputs would be
    before = sys.getrefcount(out)
    for _ in range(100):
        assert run() is out
    assert sys.getrefcount(out) == before
    np.testing.assert_allclose(out, gelu.reference(x, x, x), atol=2e-6)
    assert all((array == 7.0).all() for array in reused)


@pytest.mark.parametrize(
    ("options", "slices", "workspace"),
    [({}, 2, False), ({"threads": 2}, 3, False), ({"fuse": False}, 1, True)],
    ids=["streaming", "split", "workspace"],
)
def test_a_prepared_call_of_several_slices_owns_its_inputs(
    options: dict[str, Any], slices: int, workspace: bool
) -> None:
    # A prepared call that is not one slice without a workspace runs from Python
    # (`Kernel.run_plan`): its `__call__`, kept without the PreparedCall, must still keep the
    # inputs alive (it read freed, unmapped memory: a segfault).
    n = host_cpu().streaming_bytes // 12 + 4096  # x, y and out: past the streaming threshold
    kernel = xfuse.compile("out = x * 2 + y;", **options)
    prepared = kernel.prepare(np.arange(n, dtype=np.float32), np.full(n, 3.0, np.float32))
    assert len(prepared.argument_lists) == slices
    assert bool(prepared.workspace_bytes) == workspace
    run = prepared.__call__
    del prepared
    gc.collect()
    reused = [np.full(n, 7.0, np.float32) for _ in range(2)]  # where freed inputs would be
    result = run()
    np.testing.assert_array_equal(result, np.arange(n, dtype=np.float32) * 2 + 3)
    assert all((array == 7.0).all() for array in reused)


def test_a_prepared_call_runs_no_python_function(gelu: Gelu) -> None:
    # A Python frame per call (a `__call__` method) costs ~0.1 us, as much as the rest of the
    # call's overhead: a one-slice prepared call goes from the call to the native code in C.
    x = np.linspace(-4, 4, 1000, dtype=np.float32)
    prepared = xfuse.compile(gelu.source).prepare(x=x, b=x, r=x)
    result, frames = profiled(prepared)
    assert result is prepared.outputs[0]
    assert not frames, frames  # (builtins alone)
    np.testing.assert_allclose(result, gelu.reference(x, x, x), atol=2e-6)


def test_a_call_of_one_slice_with_temporaries_runs_in_its_plans_workspace(gelu: Gelu) -> None:
    # Borrowing a workspace from the pool took ~4-5 us of Python a call; a call that keeps the
    # GIL runs alone, so its plan keeps one workspace for all such calls (a prepared call is one
    # builtin), and a longer one uses it where no other call holds it, else borrows one: the
    # same bits every way.
    kernel = xfuse.compile(gelu.source, fuse=False)
    x = np.linspace(-4, 4, GIL_HELD_ELEMENTS + 64, dtype=np.float32)
    short = x[:GIL_HELD_ELEMENTS]
    prepared = kernel.prepare(x=short, b=short, r=short)
    assert prepared.workspace_bytes and prepared._run.__name__ == "keeping_gil"
    result, frames = profiled(prepared)
    assert not frames, frames  # (builtins alone)
    long_result = kernel(x=x, b=x, r=x)
    assert not kernel._workspaces._idle  # (none borrowed)
    (plan,) = (p for p in kernel._plans.values() if p.elements == x.size)
    with plan.workspace_lock:  # another call's: this one borrows
        np.testing.assert_array_equal(kernel(x=x, b=x, r=x), long_result)
    assert len(kernel._workspaces._idle) == 1
    want = long_result[: short.size].view(np.uint32)
    np.testing.assert_array_equal(result.view(np.uint32), want)
    np.testing.assert_array_equal(kernel(x=short, b=short, r=short).view(np.uint32), want)
    assert len(kernel._workspaces._idle) == 1
    np.testing.assert_allclose(result, gelu.reference(short, short, short), atol=2e-6)


def test_a_plan_holds_no_workspace_larger_than_the_bound(gelu: Gelu) -> None:
    """A kernel keeps a plan per shape (`PLAN_CACHE_SIZE`): each held a workspace as large as
    its temporaries, 64 lengths of a 4 MiB call 260 MiB. Past `HELD_WORKSPACE_BYTES` a call
    borrows from the kernel's pool (one workspace for all of them); below, it holds its own."""
    kernel = xfuse.compile(gelu.source, fuse=False)
    x = np.linspace(-4, 4, 1 << 18, dtype=np.float32)
    for n in range(x.size - 8, x.size):
        part = x[:n]
        np.testing.assert_allclose(
            kernel(x=part, b=part, r=part), gelu.reference(part, part, part), atol=2e-6
        )
    plans = [p for p in kernel._plans.values() if p.elements >= x.size - 8]
    assert len(plans) == 8 and all(p.workspace_bytes > HELD_WORKSPACE_BYTES for p in plans)
    assert not any(p.holds_workspace or hasattr(p, "_held_workspace") for p in plans)
    assert len(kernel._workspaces._idle) == 1  # one borrowed, by each call in turn
    small = x[:1024]
    kernel.prepare(x=small, b=small, r=small)()
    (plan,) = (p for p in kernel._plans.values() if p.elements == small.size)
    assert plan.holds_workspace and plan.held_workspace.nbytes == plan.workspace_bytes


def test_a_prepared_call_keeps_its_plans_workspace_alive() -> None:
    # Its words point into the plan's `held_workspace`, and the kernel drops its plans after
    # PLAN_CACHE_SIZE shapes: the workspace was freed with the plan (a segfault, or a new
    # array there overwritten by each run).
    kernel = xfuse.compile("input x[n]; out = sin(x) * cos(x) + exp(x);", fuse=False)
    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    want = kernel(x=x)
    run = kernel.prepare(x=x)
    for n in range(1, call_plans.PLAN_CACHE_SIZE + 2):
        kernel(x=np.ones(n, np.float32))
    gc.collect()
    reused = [np.full(4096 * 3, 7.0, np.float32) for _ in range(8)]  # where it was freed
    np.testing.assert_array_equal(run(), want)
    assert all((array == 7.0).all() for array in reused)


def test_a_plans_workspace_and_lock_are_the_first_made() -> None:
    # Python 3.12's cached_property has no lock: two threads' first calls each made one and
    # the second stored replaced the first, a lock another call held or a workspace whose
    # address a call had taken.
    holder = types.SimpleNamespace()

    def made_while_another_thread_stored_one() -> str:
        holder.__dict__["value"] = "first"
        return "second"

    assert call_plans._first_made(holder, "value", made_while_another_thread_stored_one) == (
        "first"
    )
    assert call_plans._first_made(holder, "value", lambda: "third") == "first"


def test_the_pointer_call_is_a_builtin_that_checks_its_arguments(gelu: Gelu) -> None:
    # A checked call runs the entry through a builtin (~30 ns, ctypes' ~160) that writes the
    # data pointers into a copy of its plan's words: it runs the call they make, and refuses
    # what is not such a call with an exception rather than calling the native code on it.
    kernel = xfuse.compile(gelu.source)
    x = np.linspace(-4, 4, 100, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x=x, b=x, r=x, out=out)  # plans the shapes
    (plan,) = kernel._plans.values()
    words = plan.one_call_words
    assert words is not None
    call = kernel.function.pointer_call
    pointers = [x.ctypes.data] * 3 + [out.ctypes.data]
    out[:] = 0
    assert call(words, *pointers) is words
    np.testing.assert_allclose(out, gelu.reference(x, x, x), atol=2e-6)
    with pytest.raises(TypeError):
        call(list(words), *pointers)  # not the plan's words
    with pytest.raises(TypeError):
        call(words, *pointers[:3], "out")
    for wrong in (pointers[:3], [*pointers, 0], [*pointers[:3], 0]):  # count, a null pointer
        with pytest.raises(SystemError):
            call(words, *wrong)
    with pytest.raises(SystemError):
        call()  # no words to read


def test_the_call_builtins_are_compiled_once_however_many_threads_ask_first() -> None:
    # Every builtin points at the method table and the code of one compile: a second compile
    # racing the first and replacing it in the cache would free what the first's builtins use.
    code = """if True:
        import threading
        from xfuse.runtime import bound_calls
        barrier = threading.Barrier(4)
        found = []
        def ask():
            barrier.wait()
            found.append(bound_calls.bound_call_methods())
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({id(methods) for methods in found}) == 1, len(found)
    """
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_compile_cache_returns_the_same_program(gelu: Gelu) -> None:
    first = xfuse.compile(gelu.source, math="libm")
    again = xfuse.compile(gelu.source, math="libm")
    assert again.program is first.program
    assert xfuse.compile(gelu.source, math="approx").program is not first.program


def test_compile_cache_keeps_the_documented_number_of_programs() -> None:
    """The LRU holds `LRU_SIZE` programs, however many cache keys lead to each one."""
    clear_cache()
    first = weakref.ref(xfuse.compile("out = x * 2;").program)

    def compile_others(count: int) -> None:
        for index in range(count):
            xfuse.compile(f"out = x + {index + 1};")  # the kernel is dropped at once

    compile_others(LRU_SIZE - 1)
    gc.collect()
    assert xfuse.compile("out = x * 2;").program is first()
    compile_others(LRU_SIZE)
    gc.collect()
    assert first() is None  # dropped from the LRU: the next compile builds it again


def read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


ArgumentError, ArgumentTypeError = xfuse.ArgumentError, xfuse.ArgumentTypeError


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda k, x: k(x=x, b=x), ArgumentTypeError, "missing a required argument: 'r'"),
        (lambda k, x: k(x=x, b=x, r=x, q=x), ArgumentTypeError, "unexpected keyword argument 'q'"),
        (
            lambda k, x: k(x=x, b=x.astype(np.float64), r=x),
            ArgumentTypeError,
            "argument 'b': expected dtype float32, got float64",
        ),
        (lambda k, x: k(x=x, b=x[:5], r=x), ArgumentError, "argument 'b': dimension 0 has size 5"),
        (
            lambda k, x: k(x=x, b=[1.0], r=x),
            ArgumentTypeError,
            r"argument 'b': expected a numpy .*got list \(pass np\.asarray\(value, 'float32'\)\)",
        ),
        (
            lambda k, x: k(x=x.reshape(2, 5), b=x, r=x),
            ArgumentError,
            r"inputs of different shapes \('x' \(2, 5\), 'b' \(10,\)",
        ),
        (
            lambda k, x: k(x=x, b=x, r=x, out=np.empty(3, np.float32)),
            ArgumentError,
            "out 'out': expected shape \\(10,\\), got \\(3,\\)",
        ),
        (
            lambda k, x: k(x=x, b=x, r=x, out=np.empty(10)),
            ArgumentTypeError,
            "out 'out': expected dtype float32, got float64",
        ),
        (
            lambda k, x: k(x=x, b=x, r=x, out=np.empty(20, np.float32)[::2]),
            ArgumentError,
            r"out 'out': must be C-contiguous.*assign the result instead: view\[\.\.\.\] = k",
        ),
        (
            lambda k, x: k(x=x, b=x, r=x, out=read_only(np.empty(10, np.float32))),
            ArgumentError,
            "out 'out': the array is read-only",
        ),
    ],
)
@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "after-a-good-call"])
def test_bad_calls_name_the_argument(call, error, message, warm: bool, gelu: Gelu) -> None:
    """Every bad call raises an `ArgumentError` (a ValueError); the kinds Python reports as a
    TypeError raise its subclass `ArgumentTypeError`, which is both. After a good call the
    kernel has the call plan of its shapes (the quick path): the same checks apply."""
    kernel = xfuse.compile(gelu.source)
    x = np.ones(10, np.float32)
    if warm:
        kernel(x=x, b=x, r=x, out=np.empty(10, np.float32))
    with pytest.raises(error, match=message) as caught:
        call(kernel, x)
    assert type(caught.value) is error
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError) == (error is ArgumentTypeError)


SCALAR_KERNEL = "input x[?]; input s[]; y = x * s;"
"""A kernel with a declared 0-d input."""


@pytest.mark.parametrize(
    ("dtype", "scalar"),
    [("float32", np.float32(2.5)), ("float64", np.float64(2.5)), ("bf16", ml_dtypes.bfloat16(2.5))],
    ids=["float32", "float64", "bfloat16"],
)
def test_a_numpy_scalar_is_a_0d_array(
    dtype: str, scalar: np.generic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy's ufuncs take a numpy scalar as a 0-d array of its dtype, and so does a kernel:
    declared 0-d, in a kernel compiled without shapes, in the checked call before and after the
    call plan is made (the quick path, which took a numpy scalar through the full checks at
    every call: 16.5 us a call of a jit function `x * sigmoid(x) * y * s` on 6400 float32,
    5.2 with the quick path), and in `prepare`."""
    x = np.arange(4).astype(scalar.dtype)
    declared = xfuse.compile(SCALAR_KERNEL, outputs=["y"], dtype=dtype)
    unshaped = xfuse.compile("y = x * s;", outputs=["y"], dtype=dtype)
    zero_d = np.asarray(scalar)
    full_checks = count_full_checks(declared, monkeypatch)
    for _ in range(2):  # the second call finds the plan of its shapes
        np.testing.assert_array_equal(declared(x, scalar), x * scalar)
        np.testing.assert_array_equal(declared(x=x, s=scalar), x * scalar)
        result = unshaped(scalar, scalar)
        assert result.shape == () and result.dtype == scalar.dtype
        assert result == unshaped(zero_d, zero_d) == scalar * scalar
    assert len(full_checks) == 1
    np.testing.assert_array_equal(declared.prepare(x, scalar)(), x * scalar)
    out = np.empty((), scalar.dtype)
    assert unshaped.prepare(scalar, scalar, out=out)() is out
    assert out == scalar * scalar

    @xfuse.jit
    def scaled(x: Any, s: Any) -> Any:
        return x * s

    np.testing.assert_array_equal(scaled(x, scalar), x * scalar)


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "after-a-good-call"])
def test_a_numpy_scalar_of_another_dtype_a_python_number_or_a_scalar_out_is_refused(
    warm: bool,
) -> None:
    kernel = xfuse.compile(SCALAR_KERNEL, outputs=["y"], dtype="float32")
    x, s = np.ones(3, np.float32), np.float32(2)
    if warm:
        kernel(x, s)
    for call in (kernel, kernel.prepare):
        with pytest.raises(ArgumentTypeError, match="argument 's': expected dtype float32, got"):
            call(x, np.float64(2))
        with pytest.raises(ArgumentTypeError, match="argument 's': .*got float .*has no dtype"):
            call(x, 2.0)
        for out in (np.float32(0), [np.float32(0)], {"y": np.float32(0)}):
            with pytest.raises(ArgumentTypeError, match="out.*a numpy scalar is immutable"):
                call(x, s, out=out)


class _CountedSpans(list[tuple[int, int]]):
    reads = 0

    def __getitem__(self, position: Any) -> Any:
        self.reads += 1
        return super().__getitem__(position)


def test_overlapping_spans_are_found_by_a_sweep() -> None:
    """Each `out=` buffer was compared with every other one: a call with 1,000 took 22.5 ms
    (now 2.1). The sweep finds the same pairs, reading N apart ~4N times."""
    rng = np.random.default_rng(5)
    for _ in range(400):
        starts = rng.integers(0, 64, rng.integers(0, 12))
        spans = [(int(s), int(s + rng.integers(0, 9))) for s in starts]
        checked = int(rng.integers(0, len(spans) + 1))  # pairs with one at `checked` or after
        near = overlapping_spans(spans, checked)
        for i, (a, b) in enumerate(spans):
            meet = [
                j
                for j, (c, d) in enumerate(spans)
                if j != i and a < d and c < b and max(i, j) >= checked
            ]
            assert sorted(near[i]) == meet, (spans, checked, i)
    apart = _CountedSpans((64 * i, 64 * i + 64) for i in reversed(range(2000)))
    assert overlapping_spans(apart) == [[]] * 2000
    assert apart.reads <= 4 * 2000
    # 2,000 inputs of one buffer and one output: no pair of inputs is compared (they were)
    one = _CountedSpans([(0, 64)] * 2000 + [(64, 128)])
    assert overlapping_spans(one, 2000) == [[]] * 2001
    assert one.reads <= 4 * 2001


def test_many_out_buffers_name_the_pair_that_overlaps() -> None:
    """The checks of a call with 300 `out=` buffers (past the quick call's pair tests) name the
    first output that overlaps, then the later output or the input it overlaps, as before."""
    names = [f"o{i}" for i in range(300)]
    kernel = xfuse.compile(
        f"output {', '.join(names)};\n" + "".join(f"o{i} = x + {i};\n" for i in range(300))
    )
    x = np.arange(8, dtype=np.float32)
    buffers = [np.full(8, np.nan, np.float32) for _ in names]
    results = kernel(x, out=buffers)
    assert all(
        r is b and (b == x + i).all() for i, (r, b) in enumerate(zip(results, buffers, strict=True))
    )
    shared = list(buffers)
    shared[250] = shared[5]  # and o7 over the input
    shared[7] = x
    with pytest.raises(ArgumentError, match=r"^out 'o5' overlaps out 'o250'$"):
        kernel(x, out=shared)
    shared[250] = buffers[250]
    with pytest.raises(ArgumentError, match=r"^out 'o7' overlaps input 'x': "):
        kernel(x, out=shared)


def test_a_call_with_a_buffer_per_output_skips_the_full_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel of two outputs called with `out=(y, z)` (or a list) takes the quick path from
    its shapes' second call on, as one with one output and `out=y` does (RoPE's rotated halves
    into contiguous buffers took ~27 us a call on `[64, 4, 64]` float32, all full checks), and
    returns the caller's buffers; any call with buffers that overlap an input or each other,
    one of another dtype or shape, strided or read-only, takes the full checks: an in-place
    update of the input, or the error."""
    kernel = xfuse.compile("y = x * 2; z = x + 1;", outputs=["y", "z"])
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    y, z = np.empty_like(x), np.empty_like(x)
    full_checks = count_full_checks(kernel, monkeypatch)
    for out in ((y, z), [y, z], (y, z)):
        y[:], z[:] = np.nan, np.nan
        results = kernel(x, out=out)
        assert type(results) is tuple and results[0] is y and results[1] is z
        np.testing.assert_array_equal(y, x * 2)
        np.testing.assert_array_equal(z, x + 1)
    assert len(full_checks) == 1
    with pytest.raises(ArgumentError, match="out 'y' overlaps out 'z'"):
        kernel(x, out=(y, y))
    both = np.empty(128, np.float32)
    with pytest.raises(ArgumentError, match="overlaps out"):
        kernel(x, out=(both[:64], both[32:96]))
    with pytest.raises(ArgumentTypeError, match="dtype"):
        kernel(x, out=(y, z.astype(np.float64)))
    read_only = z.copy()
    read_only.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        kernel(x, out=(y, read_only))
    assert len(full_checks) == 5
    updated = x.copy()
    assert kernel(updated, out=(updated, z))[0] is updated  # in place: the full checks allow it
    np.testing.assert_array_equal(updated, x * 2)
    np.testing.assert_array_equal(z, x + 1)
    assert len(full_checks) == 6


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "after-a-good-call"])
def test_an_out_of_numbers_says_out_takes_arrays(warm: bool) -> None:
    """`out=[0.0] * 8` said "out: expected 1 buffer(s), got 8", as if 8 buffers were given."""
    kernel = xfuse.compile("y = x * 2; z = x + 1;", outputs=["y", "z"])
    x = np.ones(8, np.float32)
    if warm:
        kernel(x)
    expected = r"^out: expected a numpy array \(or a list/tuple of arrays, one per output: "
    expected += r"'y', 'z'\)"
    for call in (kernel, kernel.prepare):
        numbers = [([0.0] * 8, "list holding float"), ((1, 2, 3), "tuple holding int")]
        numbers.append((list(np.zeros(3, np.float32)), "list holding float32"))  # was 'got 3'
        for out, got in numbers:
            with pytest.raises(ArgumentTypeError, match=f"{expected}, got a {got}; pass an array"):
                call(x, out=out)
        with pytest.raises(ArgumentError, match=r"^out: expected 2 buffer\(s\), got 3"):
            call(x, out=[x, x, x])  # arrays: the count is the mistake


def python_function(x, b, r, *, out=None) -> None:
    """A Python function with the GELU kernel's signature."""


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # a misspelled keyword (r missing), one with too many inputs by position:
        (lambda f, x: f(x, bb=x), "got an unexpected keyword argument 'bb'"),
        (lambda f, x: f(x, x, x, x, q=x), "got an unexpected keyword argument 'q'"),
        (lambda f, x: f(x, q=x, x=x), "got an unexpected keyword argument 'q'"),
        (lambda f, x: f(x, x=x, q=x), "got multiple values for argument 'x'"),
        (lambda f, x: f(x, x, x, x, x=x), "got multiple values for argument 'x'"),
    ],
)
@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "after-a-good-call"])
def test_a_call_with_several_mistakes_names_the_one_python_names(
    call, message: str, warm: bool, gelu: Gelu
) -> None:
    """Python reports the keywords' mistakes (in the order given) before too many or missing
    inputs: a misspelled keyword is named, not the input it leaves missing."""
    kernel = xfuse.compile(gelu.source)
    x = np.ones(10, np.float32)
    if warm:
        kernel(x, x, x)
    with pytest.raises(TypeError, match=message):
        call(python_function, x)
    with pytest.raises(ArgumentTypeError, match=f"^{message} \\(inputs: x, b, r\\)$"):
        call(kernel, x)


@pytest.mark.parametrize(
    "bad",
    [
        np.ones(10, np.float64),
        np.ones(20, np.float32)[::2].reshape(2, 5),
        np.ones(5, np.float32),
        [1.0] * 10,
        np.ones(10, np.dtype(">f4")),
    ],
    ids=["dtype", "shape", "length", "list", "byte order"],
)
def test_a_mixed_call_reports_what_a_keyword_call_does(bad, gelu: Gelu) -> None:
    """Inputs first by position, then by name, take the quick path when good and the same
    checks and errors as a call by name when not, before and after a good call."""
    kernel = xfuse.compile(gelu.source)
    x, out = np.ones(10, np.float32), np.empty(10, np.float32)
    for _ in range(2):
        with pytest.raises(ArgumentError) as by_name:
            kernel(x=x, b=bad, r=x, out=out)
        with pytest.raises(type(by_name.value), match=re.escape(str(by_name.value))):
            kernel(x, b=bad, r=x, out=out)
        with pytest.raises(type(by_name.value), match=re.escape(str(by_name.value))):
            kernel(x, r=x, b=bad)
        assert kernel(x, b=x, r=x, out=out) is out


def positional_only(a, b, /, c, *rest, d) -> None:
    """A signature with every kind of parameter but **kwargs."""


def any_keyword(a, b, **options) -> None:
    """A signature taking any keyword."""


@pytest.mark.parametrize(
    ("function", "args", "kwargs"),
    [
        (positional_only, (1,), {"a": 2, "b": 3}),
        (positional_only, (1,), {"a": 2, "q": 1}),  # 'b' missing too
        (positional_only, (1, 2, 3), {"d": 1, "c": 2}),
        (positional_only, (1, 2), {"rest": 1}),  # 'c' missing too
        (positional_only, (1, 2), {"d": 1, "q": 2}),
        (any_keyword, (1,), {"q": 2, "a": 2}),  # 'b' missing too
    ],
)
def test_keyword_mistakes_are_named_as_python_names_them(function, args, kwargs) -> None:
    with pytest.raises(TypeError) as python:
        function(*args, **kwargs)
    expected = str(python.value).removeprefix(f"{function.__name__}() ")
    assert keyword_mistake(inspect.signature(function), len(args), kwargs) == expected


def test_a_jit_function_names_a_misspelled_keyword() -> None:
    @xfuse.jit
    def scaled(x, scale):
        return x * scale

    x = np.ones(3, np.float32)
    with pytest.raises(
        ArgumentTypeError, match="^scaled\\(\\): got an unexpected keyword argument 'sacle'$"
    ):
        scaled(x, sacle=x)


def test_a_mixed_call_binds_without_signature_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs given once each, the first by position and the others by name, bind in the
    signature's order without `inspect.Signature.bind` (the quick binding); the others bind
    through it, with its errors."""
    signature = CallSignature(["x", "b", "r"])
    bind = inspect.Signature.bind
    slow_bindings = []
    monkeypatch.setattr(
        inspect.Signature,
        "bind",
        lambda self, *args, **kwargs: slow_bindings.append(args) or bind(self, *args, **kwargs),
    )
    expected = {"x": 1, "b": 2, "r": 3}
    assert signature.bind((1,), {"r": 3, "b": 2}) == expected
    assert signature.bind((1, 2), {"r": 3}) == expected
    assert signature.bind((), {"r": 3, "x": 1, "b": 2}) == expected
    assert list(signature.bind((1,), {"r": 3, "b": 2})) == ["x", "b", "r"]
    assert CallSignature(["x"]).bind((), {"x": 1}) == {"x": 1}
    assert not slow_bindings
    with pytest.raises(ArgumentTypeError, match="missing a required argument: 'r'"):
        signature.bind((1,), {"b": 2})
    with pytest.raises(ArgumentTypeError, match="too many positional arguments"):
        signature.bind((1, 2, 3, 4), {})
    assert len(slow_bindings) == 2


EARLIER_OUTPUT = "out1 = x * 2; out2 = out1 + x;"
"""Unfused, its first kernel writes `out1`, which its second reads beside `x`: `out1` may not
be `x` (the second kernel would read `x * 2` as `x`)."""


def test_aliasing_out_is_an_argument_error() -> None:
    """A non-contiguous input is copied (no error); an `out` overlapping an input it may not
    update in place is an `ArgumentError` naming both."""
    unfused = xfuse.compile(EARLIER_OUTPUT, outputs=["out1", "out2"], fuse=False)
    x = np.ones(10, np.float32)
    strided = np.ones(20, np.float32)[::2]
    for got, want in zip(unfused(x=strided), unfused(x=x), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ArgumentError, match="out 'out1' overlaps input 'x'") as caught:
        unfused(x=x, out=(x, np.empty_like(x)))
    assert type(caught.value) is ArgumentError


@pytest.mark.parametrize(
    ("source", "options"),
    [
        ("input x[t, d], b[d];\nout = x + sin(cos(b)) * b;", {}),  # the row's own kernel first
        ("input x[t, d], b[d];\nout = x + sin(cos(b)) * b;", {"threads": 2}),
        ("input x[t, d], b[d];\nout = 0.5 * x * (1 + tanh(x + b));", {"fuse": False}),
    ],
    ids=["row-kernel", "row-kernel-split", "unfused"],
)
def test_in_place_where_only_the_last_kernel_writes_outputs(
    source: str, options: dict[str, Any]
) -> None:
    # The kernels before the last write temporaries, having read their inputs: `out=x` gives
    # the bits of a new output, contiguous, split over threads, and by rows of a strided `x`
    # (each row's kernels run one after another). It was refused for any program of several
    # kernels, as a broadcast row's libm calls became one (0.2.26).
    kernel = xfuse.compile(source, **options)
    kernel.split_choice = SplitChoice.always()  # split every call it can
    assert kernel.ir("ew-bufferize").count("ew.kernel ins") >= 2
    rng = np.random.default_rng(5)
    wide = rng.uniform(-3, 3, (64, 4096 + 256)).astype(np.float32)
    b = rng.uniform(-3, 3, 4096).astype(np.float32)
    for x in (np.ascontiguousarray(wide[:, :4096]), wide[:, :4096]):
        want = kernel(x=x.copy(), b=b)
        assert kernel(x=x, b=b, out=x) is x
        np.testing.assert_array_equal(x.view(np.uint32), want.view(np.uint32))


def test_partial_overlap_and_unsafe_in_place_are_rejected(gelu: Gelu) -> None:
    fused = xfuse.compile(gelu.source)
    storage = np.ones(11, np.float32)
    x, shifted = storage[:10], storage[1:]
    with pytest.raises(ValueError, match="out 'out' overlaps input 'x'"):
        fused(x=x, b=x.copy(), r=x.copy(), out=shifted)
    unfused = xfuse.compile(EARLIER_OUTPUT, outputs=["out1", "out2"], fuse=False)
    refusal = "safe only in a program that reads all its inputs and writes its outputs in its last"
    with pytest.raises(ValueError, match=refusal):
        unfused(x=x, out=(x, np.empty_like(x)))
    # One kernel beside an input it does not read, larger: the call ran the kernel over each of
    # its rows (a strided y) or slices (threads=2), each over what the one before had written
    # (`out=c` gave c * 2**8, and `g` was tanh(abs(x))).
    rows = np.zeros((8, 256), np.float32)[:, :128]
    for threads, y in ((1, rows), (2, np.zeros((64, 4096), np.float32))):
        unread = xfuse.compile("input c[], y[t, d]; h = c * 2;", threads=threads)
        c = np.array(1.5, np.float32)
        with pytest.raises(ValueError, match=refusal):
            unread(c=c, y=y, out=c)
        assert c == 1.5 and unread(c=c, y=y) == 3.0
    # (streaming stays as it was: a call whose outputs are its whole space streams)
    n = 1 << 24
    plain = xfuse.compile("input x[n]; out = x * 2;").streams((n,))
    assert xfuse.compile("input x[n], y[n]; out = x * 2;").streams((n,), (n,)) == plain
    pair = xfuse.compile("input x[1, d], y[t, d]; h = abs(x); g = tanh(x); output h, g;")
    a = np.linspace(-3, 3, 128, dtype=np.float32).reshape(1, -1)
    with pytest.raises(ValueError, match=refusal):
        pair(x=a, y=rows, out=(a, None))
    two = xfuse.compile("h = x + b; y = tanh(h);", outputs=["y", "h"])
    buffer = np.empty(10, np.float32)
    with pytest.raises(ValueError, match="overlaps out"):
        two(x=x, b=x, out=(buffer, buffer))
    # An empty `out` shares no element with an input, wherever its address lies (one inside the
    # bias was refused as overlapping it; numpy's ufuncs take it).
    bias = xfuse.compile("input x[t, d]; input b[d]; out = x + b;")
    b = np.ones(64, np.float32)
    empty = np.lib.stride_tricks.as_strided(b[10:], shape=(0, 64), strides=(256, 4))
    assert bias(np.ones((0, 64), np.float32), b, out=empty) is empty


def test_a_repeated_call_takes_the_quick_path(monkeypatch: pytest.MonkeyPatch, gelu: Gelu) -> None:
    """Once a kernel has planned a call's shapes, a call of the common form (each input once:
    the first ones by position, the others by name, contiguous arrays of their dtypes, one `out`
    or none) skips the full checks; any other goes through them."""
    kernel = xfuse.compile(gelu.source)
    rng = np.random.default_rng(2)
    x, b, r = (rng.standard_normal(100, dtype=np.float32) for _ in range(3))
    out = np.empty(100, np.float32)
    kernel(x=x, b=b, r=r, out=out)
    full_checks = []
    check = kernel._check
    monkeypatch.setattr(kernel, "_check", lambda *args: full_checks.append(args) or check(*args))
    out[:] = 0
    kernel(x=x, b=b, r=r, out=out)
    kernel(x=x, b=b, r=r)
    np.testing.assert_allclose(kernel(x, b, r), gelu.reference(x, b, r), atol=2e-6)
    np.testing.assert_allclose(kernel(x, b, r=r), gelu.reference(x, b, r), atol=2e-6)
    np.testing.assert_allclose(kernel(x, r=r, b=b), gelu.reference(x, b, r), atol=2e-6)
    np.testing.assert_allclose(out, gelu.reference(x, b, r), atol=2e-6)
    assert not full_checks
    kernel(x=x, b=b, r=r, out=x)  # in place: the full checks allow it
    kernel(x=b, b=b, r=read_only(r.copy()))  # a read-only input: allowed too
    kernel(x, b=b, r=r.astype(np.dtype("f4", metadata={"unit": "m"})))  # an equal dtype
    kernel(x[:50], b[:50], r[:50])  # other shapes: a new plan, then the quick path again
    kernel(x[:50], b[:50], r[:50])
    assert len(full_checks) == 4


def test_a_kernel_of_many_outputs_takes_their_out_through_the_full_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The quick call tested each output against the inputs and every other output in one
    expression written out: 1,000 outputs took 9 s and 2.8 GiB to compile it at the first call,
    2,000 a MemoryError. Past `QUICK_OUTPUT_PAIRS` pairs, `out=` goes through the full checks
    (which still refuse two outputs sharing memory); a call without it stays quick."""
    count = 100  # 4,950 pairs
    assert count * (count - 1) // 2 > quick_calls.QUICK_OUTPUT_PAIRS
    outputs = [f"y{i}" for i in range(count)]
    source = "".join(f"y{i} = x * {i};" for i in range(count)) + f"output {', '.join(outputs)};"
    kernel = xfuse.compile(source)
    x = np.arange(4, dtype=np.float32)
    kernel(x=x)
    full_checks = []
    check = kernel._check
    monkeypatch.setattr(kernel, "_check", lambda *args: full_checks.append(args) or check(*args))
    assert [list(y) for y in kernel(x=x)] == [list(x * i) for i in range(count)]
    assert not full_checks
    buffers = tuple(np.empty(4, np.float32) for _ in range(count))
    assert all(a is b for a, b in zip(kernel(x=x, out=buffers), buffers, strict=True))
    assert [list(y) for y in buffers] == [list(x * i) for i in range(count)]
    assert len(full_checks) == 1
    with pytest.raises(ValueError, match="overlaps out"):
        kernel(x=x, out=(buffers[0], *buffers[:-1]))


def test_the_data_pointer_is_numpys() -> None:
    """Both ways a call reads it: `data_pointer`, and the builtin that the checked call uses."""
    base = np.arange(24.0)
    for array in (
        base,
        base[3:],
        base[::-2],
        base.reshape(4, 6)[1:, 2:],
        np.empty(0, np.float32),
        np.array(1.0, np.float32),
        np.ma.masked_array(base),
        np.ones(5, ml_dtypes.bfloat16)[1:],
    ):
        assert data_pointer(array) == fast_data_pointer()(array) == array.ctypes.data


SPECIAL_VALUES = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32
)


@pytest.mark.parametrize("head", range(0, 17, 3))
def test_large_calls_stream_their_outputs_with_the_same_bits(head: int, gelu: Gelu) -> None:
    """From the host's `HostCpu.streaming_bytes`, a call runs the outputs' unaligned head with
    normal stores and the rest through the streaming twin (non-temporal stores): the same bits
    as without, special values included, wherever the buffers start."""
    n = host_cpu().streaming_bytes // 16 + 37
    rng = np.random.default_rng(head)
    storage = [rng.standard_normal(n + 32, dtype=np.float32) for _ in range(4)]
    for array in storage[:3]:
        array[rng.integers(0, n, 1000)] = rng.choice(SPECIAL_VALUES, 1000)
    x, b, r, out = (array[head : head + n] for array in storage)
    streaming = xfuse.compile(gelu.source)
    run = streaming.prepare(x=x, b=b, r=r, out=out)
    gap = -out.ctypes.data % 64 // 4
    assert [arguments[-1] for arguments in run.argument_lists] == [gap, n - gap]
    want = xfuse.compile(gelu.source, streaming=False)(x=x, b=b, r=r)
    for result in (run(), streaming(x=x, b=b, r=r, out=out), streaming(x=x, b=b, r=r)):
        np.testing.assert_array_equal(result.view(np.uint32), want.view(np.uint32))
    streaming(x=x, b=b, r=r, out=x)  # in place
    np.testing.assert_array_equal(x.view(np.uint32), want.view(np.uint32))


def test_small_split_and_misaligned_calls_keep_normal_stores(gelu: Gelu) -> None:
    kernel = xfuse.compile("h = x + b; y = tanh(h);", outputs=["y", "h"])
    n = host_cpu().streaming_bytes // 16
    x = np.ones(n, np.float32)
    assert len(kernel.prepare(x=x[:1024], b=x[:1024]).argument_lists) == 1  # in the cache
    y, h = np.empty(n + 16, np.float32), np.empty(n + 16, np.float32)
    aligned = (-y.ctypes.data % 64) // 4
    misaligned = aligned + 1 if (-h.ctypes.data % 64) // 4 == aligned else aligned
    # The outputs start at different distances from a cache line: no common head.
    run = kernel.prepare(x=x, b=x, out=(y[misaligned : misaligned + n], h[aligned : aligned + n]))
    assert len(run.argument_lists) == 1
    two_threads = xfuse.compile(gelu.source, threads=2)
    assert len(two_threads.prepare(x=x[:-16], b=x[:-16], r=x[:-16]).argument_lists) == 2


@pytest.mark.parametrize(("cpu", "mib"), [("sapphirerapids", 4), ("znver4", 16), ("znver3", 16)])
def test_calls_stream_from_the_hosts_threshold(
    cpu: str, mib: int, use_cpu: Callable[[str, str], HostCpu], host_features: str
) -> None:
    """A call streams its outputs from `HostCpu.streaming_bytes` moved: 4 MiB on Intel's
    cores, 16 MiB on AMD's Zen (whose large L3 keeps smaller calls' outputs faster)."""
    assert use_cpu(cpu, host_features).streaming_bytes == mib << 20
    kernel = xfuse.compile("out = x * sigmoid(x);")
    x = np.ones((mib << 20) // 8, np.float32)  # 4 bytes read, 4 written an element
    assert [len(kernel.prepare(x=x[:n]).argument_lists) for n in (x.size - 16, x.size)] == [1, 2]


def test_a_kernel_says_whether_a_call_of_these_shapes_streams(
    use_cpu: Callable[[str, str], HostCpu], host_features: str
) -> None:
    """`Kernel.streams`: what `prepare(...).streams` says of a call with new outputs, from the
    inputs' shapes alone (by position or by name): a flat loop from the threshold, a kernel
    compiled without shapes on any one shape run flat, a loop nest where its rows are whole
    64-byte lines. A shape the kernel does not take is the call's `ArgumentError`."""
    n = (use_cpu("sapphirerapids", host_features).streaming_bytes) // 8
    flat = xfuse.compile("out = x * sigmoid(x);")
    nest = xfuse.compile("out = x * sigmoid(x);", shapes={"x": ("m", "n")})
    cases = [(flat, (n - 16,), False), (flat, (n,), True), (flat, (2, n // 2), True)]
    cases += [(nest, (n // 16, 16), True), (nest, (n // 17 + 1, 17), False), (nest, (4, 16), False)]
    for kernel, shape, streams in cases:
        prepared = kernel.prepare(x=np.ones(shape, np.float32))
        assert kernel.streams(shape) == kernel.streams(x=shape) == prepared.streams == streams
    with pytest.raises(ArgumentError, match="argument 'x'"):
        nest.streams((n,))
    # a float or bool size hashed as an int's: its plan, remembered under the call's key,
    # broke every later call of that shape with a raw TypeError
    for bad in [(4, 16.0), (True, 16), (-1, 16), None, "16", True]:
        with pytest.raises(ArgumentError, match=r"argument 'x': a shape is sizes >= 0"):
            nest.streams(bad)
    # one int is a 1-d shape, as numpy takes it (was a raw "'int' object is not iterable")
    assert flat.streams(n) == flat.streams(np.int64(n)) == flat.streams((n,))
    assert flat.streams(np.array([n])) == flat.streams((n,))  # (an array, as numpy takes it)
    assert nest(np.ones((4, 16), np.float32)).shape == (4, 16)
    # an input named `self`, as a call takes it by name (TypeError: multiple values for 'self')
    named_self = xfuse.compile("y = self * sigmoid(self);")
    assert named_self.streams(self=(n,)) == named_self.streams((n,)) == flat.streams((n,))


@pytest.mark.parametrize(
    "options",
    [{"shapes": {"x": (1024, 4096)}}, {"math": "libm"}, {"opt_level": 1}],
    ids=["static-first-axis", "scalar-libm-loop", "not-vectorized"],
)
def test_a_kernel_that_cannot_stream_has_no_streaming_twin(options: dict[str, Any]) -> None:
    """A twin no call used: a static first axis splits no call (a head and a streaming rest),
    and a loop that does not vectorize (a scalar libm call, `opt_level` below 2) has no vector
    store to make non-temporal; each was compiled (up to ~60% more time), and the latter two
    timed against their own copy and placed new outputs as streaming ones."""
    kernel = xfuse.compile("out = x * tanh(x);", **options)
    assert kernel.function.streaming_entry is None and "!nontemporal" not in kernel.llvm_ir
    shape = (1024, 4096) if "shapes" in options else (host_cpu().streaming_bytes,)
    assert not kernel.streams(shape)
    x = np.linspace(-3, 3, math.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_allclose(kernel(x), x * np.tanh(x), rtol=1e-6, atol=1e-7)


def test_a_streaming_calls_new_outputs_start_half_a_page_from_numpys_arrays() -> None:
    """The new output of a call that streams starts `STREAMING_OUTPUT_PAGE_OFFSET` bytes into a
    4 KiB page, on a cache line and away from where numpy starts large arrays (4K aliasing
    between the stores and the inputs' loads), whichever way the call is made; it streams from
    its first element (no head). A call too small to stream keeps numpy's own arrays."""
    assert STREAMING_OUTPUT_PAGE_OFFSET % 64 == 0
    n = host_cpu().streaming_bytes // 8
    # Where numpy starts a large array (16 bytes into a page; the allocator may reuse a freed
    # block that starts elsewhere, so the test places it there itself).
    x = aligned_empty((n,), np.dtype(np.float32), alignment=4096, offset=16)
    x[:] = np.linspace(-4, 4, n, dtype=np.float32)
    assert data_pointer(x) % 4096 != STREAMING_OUTPUT_PAGE_OFFSET
    kernel = xfuse.compile("out = x * sigmoid(x);")
    prepared = kernel.prepare(x=x)
    assert [arguments[-1] for arguments in prepared.argument_lists] == [0, n]
    two_threads = xfuse.compile("out = x * sigmoid(x);", threads=2)
    for out in (kernel(x=x), prepared(), two_threads(x=x)):
        assert data_pointer(out) % 4096 == STREAMING_OUTPUT_PAGE_OFFSET
        np.testing.assert_allclose(out, x / (1 + np.exp(-x)), rtol=1e-6, atol=1e-7)
    small = kernel.prepare(x=x[:1024])
    assert len(small.argument_lists) == 1 and small.outputs[0].base is None


@pytest.mark.parametrize("head", [0, 5])
def test_large_split_calls_stream_each_slice_from_a_cache_line(head: int, gelu: Gelu) -> None:
    """A split call that streams runs the outputs' head with normal stores and splits the rest
    at cache lines of the output: the same bits, run concurrently or one after the other."""
    n = host_cpu().streaming_bytes // 16 + 37
    rng = np.random.default_rng(head)
    storage = [rng.standard_normal(n + 32, dtype=np.float32) for _ in range(4)]
    x, b, r, out = (array[head : head + n] for array in storage)
    want = xfuse.compile(gelu.source, streaming=False)(x=x, b=b, r=r)
    kernel = xfuse.compile(gelu.source, threads=2)
    run = kernel.prepare(x=x, b=b, r=r, out=out)
    gap = -out.ctypes.data % 64 // 4
    head, first, second = (arguments[-1] for arguments in run.argument_lists)
    assert head == gap and head + first + second == n
    assert first % 16 == 0 and abs(first - second) < 32  # whole lines, as equal as they allow
    assert [arguments[-2] % 64 for arguments in run.argument_lists[1:]] == [0, 0]
    sequential = run().copy()
    kernel.split_choice = SplitChoice.always()
    for result in (sequential, run(), kernel(x=x, b=b, r=r, out=out)):
        np.testing.assert_array_equal(result.view(np.uint32), want.view(np.uint32))


def test_a_static_length_never_streams_and_writes_only_its_output() -> None:
    """A kernel compiled for one static length runs all of it whatever size it is passed: it
    cannot be split into a head and a streaming rest (that wrote past the output's end)."""
    n = host_cpu().streaming_bytes // 8 + 37
    kernel = xfuse.compile("out = x + 0.5;", shapes={"x": (n,)})
    storage = np.zeros(n + 64, np.float32)
    head = 1 + (-storage.ctypes.data % 64) // 4  # the output starts just past a cache line
    out = storage[head : head + n]
    run = kernel.prepare(x=np.ones(n, np.float32), out=out)
    assert len(run.argument_lists) == 1
    run()
    kernel(x=np.ones(n, np.float32), out=out)
    np.testing.assert_array_equal(out, np.float32(1.5))
    assert not storage[:head].any() and not storage[head + n :].any()


def llm_gelu(gelu: Gelu, dtype: str, **options: object) -> xfuse.Kernel:
    """The lecture's GELU on [t, d] activations with a [d] bias, all of `dtype`."""
    shapes = {"x": ("t", "d"), "b": ("d",), "r": ("t", "d")}
    return xfuse.compile(gelu.source, dtype=dtype, shapes=shapes, **options)  # type: ignore[arg-type]


def llm_arrays(dtype: str, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x and r [t, d], special values in x, and b [d], of `dtype`: t rows for the host's
    `HostCpu.streaming_bytes`."""
    rng = np.random.default_rng(d)
    rows = host_cpu().streaming_bytes // (3 * d * np.dtype(dtype).itemsize) + 3
    x, r = (rng.standard_normal((rows, d)).astype(dtype) for _ in range(2))
    with np.errstate(over="ignore"):  # 3.4e38 is inf in float16
        x.flat[rng.integers(0, x.size, 1000)] = rng.choice(SPECIAL_VALUES, 1000).astype(dtype)
    return x, rng.standard_normal(d).astype(dtype), r


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    bits = f"u{want.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(bits), want.view(bits))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_large_2d_calls_stream_whole_rows_with_the_same_bits(
    dtype: str, threads: int, gelu: Gelu
) -> None:
    """A loop nest ([t, d] with a [d] bias) whose output rows are whole cache lines streams
    where its output starts on one: no head, the rows split between slices; new outputs start
    on one. The same bits as normal stores, special values included."""
    x, b, r = llm_arrays(dtype, 1024)
    want = llm_gelu(gelu, dtype, streaming=False)(x=x, b=b, r=r)
    kernel = llm_gelu(gelu, dtype, threads=threads)
    out = aligned_empty(x.shape, x.dtype)
    run = kernel.prepare(x=x, b=b, r=r, out=out)
    assert len(run.argument_lists) == 1 + threads
    head, *rows = (arguments[-2] for arguments in run.argument_lists)  # the output's t
    assert head == 0 and sum(rows) == len(x)
    assert [arguments[-3] % 64 for arguments in run.argument_lists] == [0] * (1 + threads)
    new = kernel.prepare(x=x, b=b, r=r)
    assert len(new.argument_lists) == 1 + threads
    assert data_pointer(new.outputs[0]) % 4096 == STREAMING_OUTPUT_PAGE_OFFSET
    kernel.split_choice = SplitChoice.always()
    for result in (run(), new(), kernel(x=x, b=b, r=r, out=out), kernel(x=x, b=b, r=r)):
        same_bits(result, want)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_2d_calls_off_whole_lines_keep_normal_stores(dtype: str, gelu: Gelu) -> None:
    """Output rows that do not all start on a cache line (rows of part of a line) run with
    normal stores: one call, the same bits (an output that starts some elements before a
    line runs `ShiftedRows`, below)."""
    kernel = llm_gelu(gelu, dtype)
    normal = llm_gelu(gelu, dtype, streaming=False)
    line = 64 // np.dtype(dtype).itemsize
    x, b, r = llm_arrays(dtype, 1024 + line // 2)
    for out in (aligned_empty(x.shape, x.dtype), None):
        run = kernel.prepare(x=x, b=b, r=r, out=out)
        assert len(run.argument_lists) == 1 and not run.streams
        same_bits(run(), normal(x=x, b=b, r=r))
    assert len(kernel.prepare(x=x[:8], b=b, r=r[:8]).argument_lists) == 1  # in the cache


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "rows"])
@pytest.mark.parametrize("slower", [True, False], ids=["streaming-slower", "normal-slower"])
def test_a_call_streams_where_timed_streaming_wins(
    slower: bool, strided: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call large enough to stream runs with non-temporal stores or normal ones as its size
    class's timed calls say (`Kernel.stream_choice`): a block of each (streaming first), then
    the faster, here on a clock that makes one way ten times as slow; strided rows
    (`Kernel._row_plan`) too. The same bits either way."""
    kernel = xfuse.compile(SWIGLU)
    d = 1 << 14
    both = swiglu_halves(-(-host_cpu().streaming_bytes // (12 * d)), d)
    x, y = (both[:, :d], both[:, d:]) if strided else (both.reshape(-1), both.reshape(-1))
    want = xfuse.compile(SWIGLU, streaming=False)(np.ascontiguousarray(x), y.copy())
    now = [0.0]
    kernel.stream_choice = SplitChoice(clock=lambda: now[0])
    ways = []
    run_slices = kernel._run_slices

    def timed_slices(*args: Any) -> None:
        ways.append(args[-1])
        now[0] += 10.0 if args[-1] == slower else 1.0
        run_slices(*args)

    def timed_call(*args: Any) -> None:  # (one native call: normal stores)
        ways.append(False)
        now[0] += 1.0 if slower else 10.0
        pointer_call(*args)

    run_rows = kernel._run_rows

    def timed_rows(plan: CallPlan, pointers: Sequence[int]) -> None:  # (a row plan's rows)
        ways.append(plan.streaming)
        now[0] += 10.0 if plan.streaming == slower else 1.0
        run_rows(plan, pointers)

    monkeypatch.setattr(kernel, "_run_slices", timed_slices)
    monkeypatch.setattr(kernel, "_run_rows", timed_rows)
    pointer_call = kernel.function.pointer_call
    monkeypatch.setattr(kernel.function, "pointer_call", timed_call)
    out = aligned_empty(x.shape, x.dtype)
    for _ in range(2 * SPLIT_FIRST_BLOCK + SPLIT_PROBE_INTERVAL - SPLIT_WINDOW):
        same_bits(kernel(x, y, out=out), want)
    first = ways[: 2 * SPLIT_FIRST_BLOCK]
    assert first == [True] * SPLIT_FIRST_BLOCK + [False] * SPLIT_FIRST_BLOCK
    assert ways[2 * SPLIT_FIRST_BLOCK :] == [not slower] * (len(ways) - 2 * SPLIT_FIRST_BLOCK)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_loop_nest_into_outputs_off_a_line_streams_shifted_rows(
    dtype: str, threads: int, gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop nest's call whose outputs start some elements before a line (an `out=` from
    `np.empty`) runs as `ShiftedRows` from `SHIFTED_ROWS_MIN_BYTES`: the first row's head, then
    rows shifted onto the lines (streaming) with the `[d]` bias rotated, then the last row's
    end. The same bits as normal stores, in place too, and the bias read as it is at each
    call."""
    monkeypatch.setattr(call_plans, "SHIFTED_ROWS_MIN_BYTES", 0)  # (arrays of a few MiB)
    kernel = llm_gelu(gelu, dtype, threads=threads)
    kernel.stream_choice = None  # (not timed: every call streams)
    normal = llm_gelu(gelu, dtype, streaming=False)
    x, b, r = llm_arrays(dtype, 1024)
    streaming = []
    run_slices = kernel._run_slices
    monkeypatch.setattr(
        kernel, "_run_slices", lambda *args: streaming.append(args[-1]) or run_slices(*args)
    )
    line = 64 // x.dtype.itemsize
    storage = aligned_empty((x.size + line,), x.dtype)
    for head in (line - 1, 1, line // 2):
        out = storage[line - head : line - head + x.size].reshape(x.shape)
        streaming.clear()
        assert kernel(x=x, b=b, r=r, out=out) is out
        same_bits(out, normal(x=x, b=b, r=r))
        assert streaming == [True], head  # the middle (the head and the end: a native call)
        b[::7] = -b[::7]  # the next call, and a prepared one's next run, read the bias anew
        run = kernel.prepare(x=x, b=b, r=r, out=out)
        b[::5] = -b[::5]
        assert run.streams and run() is out
        same_bits(out, normal(x=x, b=b, r=r))
    in_place = storage[1 : 1 + x.size].reshape(x.shape)
    in_place[:] = x
    kernel(x=in_place, b=b, r=r, out=in_place)
    same_bits(in_place, normal(x=x, b=b, r=r))
    # Under `SHIFTED_ROWS_MIN_BYTES`: one call with normal stores (a head not seen before).
    monkeypatch.setattr(call_plans, "SHIFTED_ROWS_MIN_BYTES", 3 * x.nbytes + b.nbytes + 1)
    out = storage[line - 2 : line - 2 + x.size].reshape(x.shape)
    streaming.clear()
    kernel(x=x, b=b, r=r, out=out)
    same_bits(out, normal(x=x, b=b, r=r))
    assert streaming in ([], [False])


@pytest.mark.parametrize(
    ("source", "shifts"),
    [
        ("input x[t, d], b[1, d], r[t, d];", True),  # a bias with a leading 1
        ("input x[t, d], b[t, 1], r[t, d];", False),  # a column: not rotated rows
        ("input x[a, t, d], b[d], r[a, t, d];", False),  # 3-d: rows less one off the lines
    ],
    ids=["leading-one", "column", "3-d"],
)
def test_shifted_rows_of_other_nests(
    source: str, shifts: bool, gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other nests off a line: shifted rows where the inputs are rows, a bias, one element
    and the middle part's rows are whole lines; else normal stores. The same bits either way."""
    monkeypatch.setattr(call_plans, "SHIFTED_ROWS_MIN_BYTES", 0)  # (arrays of a few MiB)
    kernel = xfuse.compile(source + gelu.source)
    kernel.stream_choice = None  # (not timed: every call streams)
    normal = xfuse.compile(source + gelu.source, streaming=False)
    x, bias, r = llm_arrays("float32", 1024)
    x, r = np.vstack([x, x[:32]]), np.vstack([r, r[:32]])
    x, r = x[: len(x) // 32 * 32], r[: len(x) // 32 * 32]  # 3-d: rows of whole lines
    b = x[:, :1].copy() if "b[t, 1]" in source else bias[None, :] if "b[1" in source else bias
    if "a, t" in source:
        x, r = (array.reshape(2, -1, 1024) for array in (x, r))
    storage = aligned_empty((x.size + 16,), x.dtype)
    out = storage[3 : 3 + x.size].reshape(x.shape)
    kernel(x=x, b=b, r=r, out=out)
    same_bits(out, normal(x=x, b=b, r=r))
    ((head, shifted),) = next(iter(kernel._plans.values())).shifts.items()
    assert head == 16 - 3 and (shifted is not None) == shifts


def test_strided_input_is_copied() -> None:
    kernel = xfuse.compile("out = x * 2;")
    x = np.arange(20, dtype=np.float32)[::2]
    np.testing.assert_array_equal(kernel(x=x), x * 2)


SWIGLU = "out = x * sigmoid(x) * y;"


def swiglu_halves(rows: int, d: int, seed: int = 0) -> np.ndarray:
    """A `[rows, 2d]` float32 array with special values, whose halves are a SwiGLU's inputs."""
    both = np.random.default_rng(seed).standard_normal((rows, 2 * d)).astype(np.float32) * 30
    both[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]
    both[-1, -3:] = [np.nan, -np.inf, -0.0]
    return both


@pytest.mark.parametrize(
    "source", [SWIGLU, "input x[t, d], y[t, d];" + SWIGLU], ids=["flat", "shaped"]
)
def test_strided_rows_are_read_where_they_are(source: str) -> None:
    """The halves of one `[t, 2d]` array (a fused projection's gate and up) run one native call
    per row on the array itself, not on copies: a prepared call sees the array's later
    contents, with the bits of the call on contiguous copies."""
    kernel = xfuse.compile(source)
    both = swiglu_halves(5, ROW_CALL_MIN_ELEMENTS)
    x, y = np.hsplit(both, 2)
    want = kernel(np.ascontiguousarray(x), np.ascontiguousarray(y))
    same_bits(kernel(x, y), want)
    out = np.empty_like(want)
    assert kernel(x, y, out=out) is out
    same_bits(out, want)
    run = kernel.prepare(x, y)
    (rows,) = run.argument_lists
    assert rows.grid.counts == (5,)
    same_bits(run(), want)
    both[:] = swiglu_halves(5, ROW_CALL_MIN_ELEMENTS, seed=1)
    same_bits(run(), kernel(np.ascontiguousarray(x), np.ascontiguousarray(y)))
    # Arrays of the same shapes whose rows are further apart: a plan of their own.
    wider = swiglu_halves(5, ROW_CALL_MIN_ELEMENTS * 3 // 2)
    x, y = wider[:, :ROW_CALL_MIN_ELEMENTS], wider[:, 2 * ROW_CALL_MIN_ELEMENTS :]
    same_bits(kernel.prepare(x, y)(), kernel(np.ascontiguousarray(x), np.ascontiguousarray(y)))


ROW_KERNELS = pytest.mark.parametrize(
    ("source", "threads"),
    [(SWIGLU, 1), ("input x[t, d], y[t, d];" + SWIGLU, 1), (SWIGLU, 2)],
    ids=["flat", "shaped", "two-threads"],
)
"""SwiGLU flat, on `[t, d]` arrays, and flat in a kernel of two threads."""


def count_full_checks(kernel: xfuse.Kernel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an entry at each of `kernel`'s calls that takes the full checks."""
    full_checks: list[int] = []
    check = kernel._check
    monkeypatch.setattr(
        kernel, "_check", lambda *args, **kwargs: full_checks.append(1) or check(*args, **kwargs)
    )
    return full_checks


def test_a_misaligned_input_is_copied_aligned_and_of_its_shape() -> None:
    """`np.ascontiguousarray` made a misaligned 0-d input 1-d (a `(1,)` result, or "expected 0
    dimensions ... got shape (1,)"), and returned a misaligned C-contiguous one as it was."""
    raw = np.zeros(4 * 100 + 1, np.uint8)[1:].view(np.float32)
    raw[:] = np.arange(100)
    scalar = raw[3:4].reshape(())
    assert not (raw.flags.aligned or scalar.flags.aligned)
    kernel = xfuse.compile("out = x * 2 + y;")
    for got, want in [
        (kernel(scalar, scalar), np.array(9, np.float32)),
        (kernel(scalar, np.float32(1)), np.array(7, np.float32)),
        (xfuse.compile("input s[]; out = x * s;")(scalar, raw[:4]), raw[:4] * 3),
        (kernel(raw, raw), raw * 3),
    ]:
        assert got.shape == want.shape
        same_bits(got, want)
    checked = kernel._check((raw, raw), {}, None)
    assert all(array.flags.aligned for array in checked.arrays)


@ROW_KERNELS
def test_a_repeated_call_on_strided_rows_skips_the_full_checks(
    source: str, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call on strided inputs of shapes and strides a checked call has run by rows finds its
    row plan by them (`quick_row_call`): only the first call takes the full checks,
    however small the call, with its outputs on lines or off them (a call too small to stream
    runs the same plan wherever they start). Calls it cannot
    take that way take them: a misaligned input (copied), an `out` that overlaps an input
    (the input copied first), a wrong `out` (its error). The bits of contiguous inputs."""
    kernel = xfuse.compile(source, threads=threads)
    d = ROW_CALL_MIN_ELEMENTS * 2
    both = swiglu_halves(64, d)
    x, y = both[:, :d], both[:, d:]
    want = kernel(np.ascontiguousarray(x), np.ascontiguousarray(y))
    full_checks = count_full_checks(kernel, monkeypatch)
    storage = aligned_empty((x.size + 16,), np.dtype(np.float32))
    on_lines, off_lines = (storage[at : at + x.size].reshape(x.shape) for at in (0, 1))
    for out in (on_lines, off_lines, None):
        for _ in range(3):
            result = kernel(x, y, out=out)
            assert out is None or result is out
            same_bits(result, want)
    assert len(full_checks) == 1
    raw = np.zeros(both.nbytes + 4, np.uint8)[1:-3].view(np.float32).reshape(both.shape)
    raw[:] = both
    misaligned = raw[:, :d]
    assert misaligned.strides == x.strides and not misaligned.flags.aligned
    same_bits(kernel(misaligned, y, out=on_lines), want)
    # The out buffer's rows are the first rows of `both`: y's halves among them.
    overlapping = both.reshape(-1)[: x.size].reshape(x.shape)
    kernel(x, y, out=overlapping)
    same_bits(overlapping, want)
    assert len(full_checks) == 3
    with pytest.raises(xfuse.ArgumentError, match="out 'out': expected dtype float32"):
        kernel(x, y, out=on_lines.astype(np.float64))


def test_a_repeated_call_on_strided_rows_reuses_its_row_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row plan keeps the argument words of its last rows, by the arrays' data pointers
    (`CallPlan.rows_run`): a repeated call on the same arrays, and every run of a prepared
    call (one builtin), builds none (a prepared call took 6.9 us building them, 3.9 not, on the
    halves of `[8, 2048]`); a call on other arrays of the same layout builds its own, and so
    does the next on the first ones. The bits of contiguous inputs every time."""
    kernel = xfuse.compile(SWIGLU)
    d = 1024
    argument_lists = CallPlan.argument_lists
    built = []

    def counted(plan: CallPlan, pointers: Any) -> Any:
        built.append(tuple(pointers))
        return argument_lists(plan, pointers)

    monkeypatch.setattr(CallPlan, "argument_lists", counted)
    first, second = swiglu_halves(8, d, seed=1), swiglu_halves(8, d, seed=2)
    wants = [kernel(both[:, :d].copy(), both[:, d:].copy()) for both in (first, second)]
    out = np.empty((8, d), np.float32)
    for calls, both, want in [(3, first, wants[0]), (2, second, wants[1]), (2, first, wants[0])]:
        built.clear()
        for _ in range(calls):
            same_bits(kernel(both[:, :d], both[:, d:], out=out), want)
        assert len(built) == 1
    run = kernel.prepare(first[:, :d], first[:, d:], out=out)
    built.clear()
    # Its runs are one builtin each (`run_grid` on the rows' plan), no Python in between.
    monkeypatch.setattr(kernel, "run_plan", lambda *args: pytest.fail("a run took run_plan"))
    for _ in range(3):
        first[:] = second
        same_bits(run(), wants[1])
        first[:] = swiglu_halves(8, d, seed=1)
        same_bits(run(), wants[0])
    assert not built


def gelu_by_rank(gelu: Gelu, threads: int = 1) -> dict[int, xfuse.Kernel]:
    """GELU with bias and residual on `[t, d]` arrays (2) and on `[a, t, d]` ones (3)."""
    return {
        2: xfuse.compile(gelu.shaped_source, threads=threads),
        3: xfuse.compile("input x[a, t, d], b[d], r[a, t, d];" + gelu.source, threads=threads),
    }


@pytest.mark.parametrize("threads", [1, 2])
def test_rows_of_any_stride_and_a_broadcast_bias(threads: int, gelu: Gelu) -> None:
    """Rows in reverse (a negative stride), a broadcast view (stride 0), the rows of 3-d
    arrays strided in two axes, beside a `[d]` bias; a kernel of two threads runs them on
    this one. The bits of the same call on C-contiguous copies."""
    d = ROW_CALL_MIN_ELEMENTS
    kernels = gelu_by_rank(gelu, threads)
    both = swiglu_halves(8, d)
    b = np.linspace(-1, 1, d, dtype=np.float32)
    for x, r in (
        (both[::-1, :d], both[:, d:]),
        (np.broadcast_to(both[3, :d], (8, d)), both[:, :d]),
        (both.reshape(2, 4, 2 * d)[:, ::-1, d:], both.reshape(2, 4, 2 * d)[..., :d]),
    ):
        kernel = kernels[x.ndim]
        want = kernel(x=np.ascontiguousarray(x), b=b, r=np.ascontiguousarray(r))
        run = kernel.prepare(x=x, b=b, r=r)
        (rows,) = run.argument_lists
        assert rows.grid.rows == 8
        same_bits(run(), want)
        same_bits(kernel(x=x, b=b, r=r), want)


def test_short_rows_and_rows_an_output_overlaps_are_copied() -> None:
    """Rows shorter than `ROW_CALL_MIN_ELEMENTS` (one native call each would cost more than a
    copy), and a strided input that an `out` buffer overlaps (the copy is read before the
    call writes), are copied as before: a prepared call refuses them."""
    kernel = xfuse.compile(SWIGLU)
    for d in (ROW_CALL_MIN_ELEMENTS - 1, ROW_CALL_MIN_ELEMENTS):
        both = swiglu_halves(4, d)
        x, y = both[:, :d], both[:, d:]
        want = kernel(np.ascontiguousarray(x), np.ascontiguousarray(y))
        # The out buffer's rows are the first rows of `both`: y's halves among them.
        out = both.reshape(-1)[: x.size].reshape(x.shape)
        contiguous_x = np.ascontiguousarray(x)
        with pytest.raises(xfuse.ArgumentError, match="argument 'y': a prepared call takes no"):
            kernel.prepare(contiguous_x, y, out=out)
        kernel(contiguous_x, y, out=out)
        same_bits(out, want)
    short = swiglu_halves(4, ROW_CALL_MIN_ELEMENTS - 1)
    with pytest.raises(xfuse.ArgumentError, match="argument 'x': a prepared call takes no"):
        kernel.prepare(short[:, : ROW_CALL_MIN_ELEMENTS - 1], short[:, 1:ROW_CALL_MIN_ELEMENTS])


def random_view(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 view of `shape` cut from a larger array in a random way: each axis a random
    start and step (negative too) of a wider one, or (the leading axes) a broadcast."""
    steps = [int(rng.choice([1, 2, -1, -3])) for _ in shape]
    steps[-1] = int(rng.choice([1, 1, 1, 2]))  # mostly rows contiguous
    pads = [int(rng.integers(0, 3)) for _ in shape]
    base_shape = tuple(n * abs(step) + pad for n, step, pad in zip(shape, steps, pads, strict=True))
    base = (rng.standard_normal(base_shape) * 10).astype(np.float32)
    view = base[
        tuple(
            slice(pad, pad + n * step, step) if step > 0 else slice(-1 - pad, None, step)
            for n, step, pad in zip(shape, steps, pads, strict=True)
        )
    ][tuple(slice(0, n) for n in shape)]
    if rng.random() < 0.2:
        view = np.broadcast_to(view[:1], shape)
    assert view.shape == shape
    return view


def random_inputs(
    rng: np.random.Generator, case: int, shortest: int
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """Case `case`'s shape (2-d, 3-d in turn, rows of `shortest` to 69 elements) and two
    random views of it (`random_view`)."""
    rank = 2 + case % 2
    shape = (int(rng.integers(2, 6)),) * (rank - 1) + (int(rng.integers(shortest, 70)),)
    return shape, random_view(rng, shape), random_view(rng, shape)


def test_random_views_give_the_bits_of_contiguous_copies(gelu: Gelu) -> None:
    """Differential: 60 random cuts of 2-d and 3-d inputs (steps, reversals, broadcasts),
    through a flat kernel, a shaped one with a `[d]` bias and an unfused one, called twice (the
    second skips the full checks where the first ran rows) and prepared (rows read in place
    where it can): the bits of the same call on C-contiguous copies."""
    rng = np.random.default_rng(16)
    flat = xfuse.compile(SWIGLU)
    unfused = xfuse.compile(SWIGLU, fuse=False)
    shaped = gelu_by_rank(gelu)
    ways = {"rows": 0, "copies": 0}
    for case in range(60):
        shape, x, y = random_inputs(rng, case, 30)
        rank = len(shape)
        copies = np.ascontiguousarray(x), np.ascontiguousarray(y)
        b = random_view(rng, (1, shape[-1]))[0]
        swiglu, swiglu_copies = {"x": x, "y": y}, {"x": copies[0], "y": copies[1]}
        calls = [
            (flat, swiglu, swiglu_copies),
            (unfused, swiglu, swiglu_copies),
            (shaped[rank], {"x": x, "b": b, "r": y}, {"x": copies[0], "b": b, "r": copies[1]}),
        ]
        for kernel, arguments, copied in calls:
            want = kernel(**copied)
            for _ in range(2):
                same_bits(kernel(**arguments), want)
            try:
                run = kernel.prepare(**arguments)  # (a prepared one runs rows where it can)
            except xfuse.ArgumentError:  # one it cannot: a call copies such inputs
                ways["copies"] += kernel is flat
                continue
            ways["rows"] += kernel is flat
            assert isinstance(run.argument_lists[0], RowRun) or kernel is not flat
            same_bits(run(), want)
    assert min(ways.values()) >= 10, ways


def test_many_short_rows_run_from_a_grid() -> None:
    """40,000 rows of `ROW_CALL_MIN_ELEMENTS`: a plan of a few words however many rows
    (`RowGrid`), remembered, with the bits of contiguous inputs."""
    kernel = xfuse.compile(SWIGLU)
    both = swiglu_halves(40_000, ROW_CALL_MIN_ELEMENTS)
    x, y = np.hsplit(both, 2)
    want = kernel(np.ascontiguousarray(x), np.ascontiguousarray(y))
    for _ in range(2):
        same_bits(kernel(x, y), want)
    run = kernel.prepare(x, y)
    (rows,) = run.argument_lists
    assert (rows.low, rows.high, rows.grid.counts) == (0, 40_000, (40_000,))
    assert len(rows.plan(0, 0)) < 20
    same_bits(run(), want)


@pytest.mark.parametrize("shape", [(3, 11, 2048), (3, 3, 5, 2048)])
def test_row_groups_start_inside_the_grid(shape: tuple[int, ...]) -> None:
    """A split call on rows of 3-d and 4-d views (each axis strided, a table broadcast along
    one axis, as RoPE's `[t, 1, d]` cos beside `[t, h, d]` halves): the threads' groups start
    mid-axis (rows 0-16 and 16-33 of 3 x 11; 0-22 and 22-45 of 3 x 3 x 5), each thread's
    `run_grid` from its first row's index. The bits of one thread's call on contiguous copies."""
    source = "input x1[?, ?, ?], x2[?, ?, ?], c[?, 1, ?]; out = x1 * c - x2 * c;"
    if len(shape) == 4:
        source = "input x1[?, ?, ?, ?], x2[?, ?, ?, ?], c[?, ?, 1, ?]; out = x1 * c - x2 * c;"
    kernel = xfuse.compile(source, threads=2)
    rng = np.random.default_rng(7)
    both = rng.standard_normal((*shape[:-1], 2 * shape[-1] + 16)).astype(np.float32)
    x1, x2 = both[..., : shape[-1]], both[..., 16 : 16 + shape[-1]][::-1]
    table_shape = (*shape[:-2], 1, shape[-1])
    c = rng.standard_normal(table_shape).astype(np.float32)
    want = xfuse.compile(source)(*(np.ascontiguousarray(a) for a in (x1, x2, c)))
    run = kernel.prepare(x1, x2, c)
    rows = math.prod(shape[:-1])
    assert [(group.low, group.high) for group in run.argument_lists] == [
        (0, rows // 2),
        (rows // 2, rows),
    ]
    kernel.split_choice = SplitChoice.always()
    same_bits(kernel(x1, x2, c), want)
    same_bits(run(), want)


@pytest.mark.parametrize("fuse", [True, False])
def test_strided_rows_split_over_threads(fuse: bool) -> None:
    """A `threads=2` kernel's call on strided rows large enough to split has a group of rows
    per thread (each with its own workspace part, unfused), split or on one thread as its
    `split_choice` says: the bits of a one-thread kernel on contiguous copies either way."""
    kernel = xfuse.compile(SWIGLU, threads=2, fuse=fuse)
    both = swiglu_halves(64, 2048)
    x, y = np.hsplit(both, 2)
    want = xfuse.compile(SWIGLU, fuse=fuse)(np.ascontiguousarray(x), np.ascontiguousarray(y))
    prepared = kernel.prepare(x, y)
    groups = prepared.argument_lists
    assert [(group.low, group.high) for group in groups] == [(0, 32), (32, 64)]
    if not fuse:  # each thread's temporaries in a part of its own (the offset's word)
        part = prepared.workspace_bytes // 2
        assert part and [group.first[-2] for group in groups] == [0, part]
    # One thread's block, the split's, then a round of the chosen way and the other's probe.
    for _ in range(2 * SPLIT_FIRST_BLOCK + SPLIT_PROBE_INTERVAL + SPLIT_PROBE_CALLS):
        same_bits(kernel(x, y), want)
    kernel.split_choice = SplitChoice.always()
    same_bits(kernel(x, y), want)
    same_bits(kernel.prepare(x, y)(), want)


ROPE = (Path(__file__).resolve().parents[1] / "examples" / "rope.ew").read_text()
"""examples/rope.ew: RoPE of the halves of q, two outputs."""


def test_rope_into_the_halves_of_one_buffer_skips_the_full_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RoPE on the halves of `q` `[t, h, 64]` into the halves of one buffer (two outputs whose
    extents overlap but which share no element): only the first call takes the full checks
    (`quick_row_call`: at `[1, 32, 128]` 13.9 us a call with the loops' checks, 6.3-6.8 with
    its own); outputs that share elements take them and get their error; into the halves of
    `q` itself (an update in place, `same_elements`) it takes the quick path too
    (`Kernel._rows_apart`), with the bits of copies."""
    kernel = xfuse.compile(ROPE)
    rng = np.random.default_rng(3)
    q = rng.standard_normal((6, 4, 64)).astype(np.float32)
    cos, sin = (rng.standard_normal((6, 1, 32)).astype(np.float32) for _ in range(2))
    x1, x2 = q[..., :32], q[..., 32:]
    want = kernel(np.ascontiguousarray(x1), np.ascontiguousarray(x2), cos, sin)
    rotated = np.empty_like(q)
    halves = rotated[..., :32], rotated[..., 32:]
    full_checks = count_full_checks(kernel, monkeypatch)
    for _ in range(3):
        rotated[:] = np.nan
        results = kernel(x1, x2, cos, sin, out=halves)
        assert results[0] is halves[0] and results[1] is halves[1]
        for result, expected in zip(results, want, strict=True):
            same_bits(result, expected)
    assert len(full_checks) == 1
    with pytest.raises(ArgumentError, match="out 'out1' overlaps out 'out2'"):
        kernel(x1, x2, cos, sin, out=(halves[0], rotated[..., 16:48]))
    assert len(full_checks) == 2
    for _ in range(2):
        updated = q.copy()
        kernel(
            updated[..., :32],
            updated[..., 32:],
            cos,
            sin,
            out=(updated[..., :32], updated[..., 32:]),
        )
        for result, expected in zip(np.split(updated, 2, axis=-1), want, strict=True):
            same_bits(result, expected)
    assert len(full_checks) == 2


def test_strided_rows_of_a_program_with_a_workspace() -> None:
    """An unfused program's temporaries: the rows, one after another, share one part (its
    offset, the second last word, does not move from row to row)."""
    kernel = xfuse.compile(SWIGLU, fuse=False)
    both = swiglu_halves(6, ROW_CALL_MIN_ELEMENTS)
    x, y = both[:, :ROW_CALL_MIN_ELEMENTS], both[:, ROW_CALL_MIN_ELEMENTS:]
    want = kernel(np.ascontiguousarray(x), np.ascontiguousarray(y))
    run = kernel.prepare(x, y)
    (rows,) = run.argument_lists
    assert run.workspace_bytes and rows.grid.counts == (6,)
    assert len(rows.first) - 2 not in rows.grid.positions
    same_bits(run(), want)


def test_strided_rows_stream_where_every_output_row_starts_on_a_line() -> None:
    """A call large enough to stream (`HostCpu.streaming_bytes`) whose output rows all start
    on a cache line streams every row; in a flat loop one whose rows all start the same
    number of elements before a line (an `out=` from `np.empty`) runs the rows' heads, then
    streams their rests (`CallPlan.row_heads`); one whose rows are not whole lines apart, or
    a loop nest's off the lines, keeps normal stores. The bits of normal stores, and the
    buffer's elements outside an `out=` view untouched."""
    kernel = xfuse.compile(SWIGLU)
    d = 1 << 14
    rows = -(-host_cpu().streaming_bytes // (12 * d))
    both = swiglu_halves(rows, d)
    x, y = both[:, :d], both[:, d:]
    want = xfuse.compile(SWIGLU, streaming=False)(np.ascontiguousarray(x), y.copy())
    new = kernel.prepare(x, y)
    assert new.streams and new.argument_lists[0].grid.counts == (rows,)
    same_bits(new(), want)
    storage = aligned_empty((x.size + d + 64,), np.dtype(np.float32))
    for start in (1, 15):
        out = storage[start : start + x.size].reshape(x.shape)
        off_lines = kernel.prepare(x, y, out=out)
        plan = off_lines._run.args[1].plan
        assert off_lines.streams and plan.row_heads is not None
        assert plan.row_heads.templates[0][1] == 16 - start  # (each row's head: its length)
        storage[:] = np.nan
        same_bits(off_lines(), want)
        assert np.isnan(storage[:start]).all() and np.isnan(storage[start + x.size :]).all()
    apart = storage[: rows * (d + 1)].reshape(rows, d + 1)[:, 1:]
    assert not kernel.prepare(x, y, out=apart).streams
    same_bits(kernel(x, y, out=apart), want)
    shaped = xfuse.compile("input x[t, d], y[t, d];" + SWIGLU)
    assert not shaped.prepare(x, y, out=storage[1 : 1 + x.size].reshape(x.shape)).streams


def elements_of(view: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """A mask over C-contiguous `buffer` of the elements its view `view` holds."""
    index = np.arange(buffer.size, dtype=np.int64)
    start = (data_pointer(view) - data_pointer(buffer)) // buffer.itemsize
    steps = tuple(stride // buffer.itemsize * index.itemsize for stride in view.strides)
    held = np.lib.stride_tricks.as_strided(index[start:], view.shape, steps)
    mask = np.zeros(buffer.size, bool)
    mask[held.reshape(-1)] = True
    return mask.reshape(buffer.shape)


@ROW_KERNELS
def test_an_out_of_strided_rows_is_written_where_it_is(
    source: str, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`out=` a slice of whole rows of a wider buffer (`buf[:, :d]`, rows in reverse) is
    written row by row where it is, from contiguous or strided inputs, and returned: the bits
    of contiguous inputs and outputs, the buffer's other elements untouched; a repeated call
    skips the full checks; a prepared one writes the same view."""
    kernel = xfuse.compile(source, threads=threads)
    d = ROW_CALL_MIN_ELEMENTS * 2
    both = swiglu_halves(64, d)
    x, y = both[:, :d], both[:, d:]
    copies = np.ascontiguousarray(x), np.ascontiguousarray(y)
    want = kernel(*copies)
    full_checks = count_full_checks(kernel, monkeypatch)
    buffer = aligned_empty((64, 3 * d), np.dtype(np.float32))
    views = (buffer[:, d : 2 * d], buffer[:, 1 : d + 1], buffer[::-1, :d])
    for inputs in ((x, y), copies):
        for out in views:
            for call in range(3):
                checked = len(full_checks)
                buffer[:] = -7.0
                assert kernel(*inputs, out=out) is out
                same_bits(out, want)
                assert (buffer[~elements_of(out, buffer)] == -7.0).all()
                assert call == 0 or len(full_checks) == checked  # (a layout's first call)
    assert 0 < len(full_checks) <= 6
    buffer[:] = -7.0
    run = kernel.prepare(x, y, out=views[0])
    both[:] = swiglu_halves(64, d, seed=1)
    assert run() is views[0]
    same_bits(views[0], kernel(np.ascontiguousarray(x), np.ascontiguousarray(y)))


def test_an_out_of_strided_rows_in_place_overlapping_or_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An out view that is a strided input itself updates it in place, row by row (repeated,
    without the full checks); one that shares other elements with an input gets the result
    of the inputs as they were (they are copied first, at every call), as numpy's ufuncs give
    it. A view whose rows are too short, strided in its last axis or overlapping each other
    is an ArgumentError naming `out`, the buffer untouched."""
    kernel = xfuse.compile(SWIGLU)
    full_checks = count_full_checks(kernel, monkeypatch)
    d = ROW_CALL_MIN_ELEMENTS
    values = [swiglu_halves(6, d, seed=seed) for seed in range(3)]
    wants = [kernel(np.ascontiguousarray(v[:, :d]), np.ascontiguousarray(v[:, d:])) for v in values]
    both = np.empty_like(values[0])
    gate, up = both[:, :d], both[:, d:]
    for into, calls in ((gate, 1), (both[:, 1 : d + 1], 3)):
        full_checks.clear()
        for value, want in zip(values, wants, strict=True):
            both[:] = value
            assert kernel(gate, up, out=into) is into
            same_bits(into, want)
        assert len(full_checks) == calls
    short = swiglu_halves(6, d - 1)
    rows_overlapping = np.lib.stride_tricks.as_strided(both, (6, d), (d * 2, 4))
    for out, message in (
        (short[:, : d - 1], rf"out 'out': .* rows of {d - 1} elements, under {d} "),
        (both[:, ::2], r"out 'out': must be C-contiguous and aligned, or an aligned view of "),
        (rows_overlapping, r"out 'out': must be C-contiguous and aligned, or an aligned view"),
    ):
        x = np.ascontiguousarray(np.ones(out.shape, np.float32))
        before = both.copy(), short.copy()
        with pytest.raises(xfuse.ArgumentError, match=message):
            kernel(x, x, out=out)
        same_bits(both, before[0])
        same_bits(short, before[1])


@pytest.mark.parametrize("threads", [1, 2])
def test_an_out_of_strided_rows_beside_lower_rank_inputs_spanning_its_row_axes(
    threads: int,
) -> None:
    """`x[s, t, d] * y[t, d] + b[d]` into `buf[..., 16:]`: y has no `s` axis, and its rows
    repeat along it (stride 0), as broadcasting reads them. Such a call was refused ("rows of
    160 elements, which the kernel's sizes do not take one at a time") where a `y[1, t, d]`
    ran; a prepared call writes the same view."""
    kernel = xfuse.compile(
        "input x[s, t, d]; input y[t, d]; input b[d]; out = x * y + b;", threads=threads
    )
    rng = np.random.default_rng(7)
    x, y, b = (rng.standard_normal(shape, np.float32) for shape in ((64, 8, 160), (8, 160), (160,)))
    buffer = np.full((64, 8, 176), -7.0, np.float32)
    out = buffer[..., 16:]
    assert kernel(x, y, b, out=out) is out
    same_bits(out, kernel(x, y, b))
    np.testing.assert_allclose(out, x.astype(np.float64) * y + b, rtol=1e-6, atol=1e-6)
    assert (buffer[..., :16] == -7.0).all()
    buffer[:] = -7.0
    assert kernel.prepare(x, y, b, out=out)() is out
    same_bits(out, kernel(x, y, b))
    assert (buffer[..., :16] == -7.0).all()


def test_an_out_of_rows_whose_outer_axis_is_shorter_is_written_where_it_is() -> None:
    """The halves of a `[8, 32, 128]` buffer (RoPE's rotated q of 8 tokens): the outer axis
    of 8 has the larger stride. Its rows were refused as overlapping: the check took the
    leading axes from the shortest, not the smallest stride, so the 32 heads' stride was held
    against the span of the 8 tokens. A view whose rows do overlap is still refused."""
    kernel = xfuse.compile("input x[?, ?, ?]; out = x * 2;")
    x = np.random.default_rng(5).standard_normal((8, 32, 64)).astype(np.float32)
    buffer = np.full((8, 32, 128), np.nan, np.float32)
    assert kernel(x, out=buffer[..., 64:]) is not None
    same_bits(buffer[..., 64:], x * 2)
    assert np.isnan(buffer[..., :64]).all()
    overlapping = np.lib.stride_tricks.as_strided(buffer, (8, 32, 64), (256, 128 * 4, 4))
    with pytest.raises(xfuse.ArgumentError, match="out 'out': must be C-contiguous and aligned"):
        kernel(x, out=overlapping)


def test_random_out_views_get_the_bits_of_contiguous_outputs(gelu: Gelu) -> None:
    """Differential: 40 random cuts of 2-d and 3-d out buffers (steps, reversals) with random
    views as inputs, through a flat kernel and a shaped one: those with C-contiguous rows get
    the bits of a call into a new output, the others an ArgumentError naming `out`."""
    rng = np.random.default_rng(30)
    flat = xfuse.compile(SWIGLU)
    shaped = gelu_by_rank(gelu)
    ways = {"rows": 0, "refused": 0}
    for case in range(40):
        shape, x, y = random_inputs(rng, case, ROW_CALL_MIN_ELEMENTS)
        rank = len(shape)
        b = np.linspace(-2, 2, shape[-1], dtype=np.float32)
        for kernel, arguments in (
            (flat, {"x": x, "y": y}),
            (shaped[rank], {"x": x, "b": b, "r": y}),
        ):
            want = kernel(**arguments)
            out = random_view(rng, shape)
            if not out.flags.writeable:  # (a broadcast)
                continue
            if out.strides[-1] != 4:
                with pytest.raises(xfuse.ArgumentError, match="out 'out': must be C-contiguous"):
                    kernel(**arguments, out=out)
                ways["refused"] += 1
                continue
            for _ in range(2):
                out[...] = np.nan
                assert kernel(**arguments, out=out) is out
                same_bits(out, want)
            ways["rows"] += 1
    assert min(ways.values()) >= 5, ways


def test_a_program_whose_rows_repeat_a_kernel_copies_strided_inputs() -> None:
    # A broadcast row's libm calls are a kernel of their own: by rows, each row of a strided x
    # ran it again (1068-1098 us against 664-669 copying at [256, 4096]). A checked call copies;
    # a prepared one and a strided `out=` still go by rows (they must); the bits are the same.
    kernel = xfuse.compile("input x[t, d], b[d];\nout = x + sin(cos(b));")
    assert kernel.repeated_axes == (0,)
    assert xfuse.compile("input x[t, d], b[d];\nout = x + b;").repeated_axes == ()
    assert xfuse.compile("out = sin(x) * 2;", fuse=False).repeated_axes == ()  # (one dim)
    scalar = xfuse.compile("input x[t, d], s[];\nout = x + sin(cos(s));", fuse=False)
    assert scalar.repeated_axes == ()  # (a 0-d value's kernel: one element again a row)
    # arithmetic again a row costs less than a copy (unfused x * (b * 2 + 1): 1.6-1.8x)
    assert (
        xfuse.compile("input x[t, d], b[d];\nout = x * (b * 2 + 1);", fuse=False).repeated_axes
        == ()
    )
    few = np.zeros((4, 300), np.float32)[:, :256]  # (4 rows: by rows, as fast)
    kernel(x=few, b=np.zeros(256, np.float32))
    assert kernel._row_calls
    kernel._row_calls.clear()
    rng = np.random.default_rng(6)
    wide = rng.uniform(-3, 3, (64, 300)).astype(np.float32)
    x, b = wide[:, :256], rng.uniform(-3, 3, 256).astype(np.float32)
    want = kernel(x=np.ascontiguousarray(x), b=b)
    np.testing.assert_array_equal(kernel(x=x, b=b), want)
    assert not kernel._row_calls  # (copied: no quick call by rows)
    prepared = kernel.prepare(x=x, b=b)
    wide[:, :256] += 1  # read where it is, at each run
    np.testing.assert_array_equal(prepared(), kernel(x=np.ascontiguousarray(x), b=b))
    buffer = np.zeros((64, 300), np.float32)
    kernel(x=x, b=b, out=buffer[:, :256])
    np.testing.assert_array_equal(buffer[:, :256], prepared())


def test_rows_over_axes_every_kernel_spans_run_where_they_are() -> None:
    # A `[t, 1, d]` input's own kernel beside `x[:, :8, :]`: the rows run over t alone, each
    # computing its part of that kernel once, so the call goes by rows (it copied: 1.9x slower).
    kernel = xfuse.compile("input x[t, h, d], c[t, 1, d];\nout = x + sin(cos(c));")
    assert kernel.repeated_axes == (1,)
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, (16, 16, 64)).astype(np.float32)[:, :8, :]
    c = rng.uniform(-3, 3, (16, 1, 64)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x, c), kernel(np.ascontiguousarray(x), c))
    np.testing.assert_array_equal(kernel(x, c), kernel(np.ascontiguousarray(x), c))
    assert kernel._row_calls  # (by rows, its quick call made)
    # a `[1, h, d]` input's own kernel at a t of 1: one row along axis 0 (it copied)
    kernel = xfuse.compile("input x[t, h, d], p[1, h, d];\nout = x + sin(cos(p));")
    assert kernel.repeated_axes == (0,)
    x = rng.uniform(-3, 3, (1, 16, 80)).astype(np.float32)[:, :, :64]
    p = rng.uniform(-3, 3, (1, 16, 64)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x, p), kernel(np.ascontiguousarray(x), p))
    np.testing.assert_array_equal(kernel(x, p), kernel(np.ascontiguousarray(x), p))
    assert kernel._row_calls


def test_a_prepared_call_takes_no_input_it_would_copy() -> None:
    # A prepared call on a copy of a strided input ran on the copy made when it was prepared,
    # never seeing the array's later contents (which may change between runs): refused, with
    # what to pass. Fortran-ordered inputs, run transposed without a copy, stay accepted.
    kernel = xfuse.compile("out = x * 2 + y;")
    storage, y = np.arange(12, dtype=np.float32), np.ones(6, np.float32)
    with pytest.raises(xfuse.ArgumentError, match=r"argument 'x': .*np\.ascontiguousarray"):
        kernel.prepare(x=storage[::2], y=y)
    x = np.ascontiguousarray(storage[::2])
    run = kernel.prepare(x=x, y=y)
    x[:] = 100
    np.testing.assert_array_equal(run(), np.full(6, 201, np.float32))
    np.testing.assert_array_equal(kernel(x=storage[::2], y=y), storage[::2] * 2 + 1)  # copied
    grid = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    run = kernel.prepare(grid, grid)
    grid[:] = 5
    result = run()
    assert result.flags.f_contiguous
    np.testing.assert_array_equal(result, np.full((2, 3), 15, np.float32))


def test_a_0d_input_beside_fortran_ordered_arrays_is_checked_as_any_other() -> None:
    """A value that is no array for a 0-d input of a kernel that runs Fortran-ordered arrays
    transposed was transposed before its check: a raw AttributeError ('float' object has no
    attribute 'T') naming no argument."""
    kernel = xfuse.compile("input s[]; out = x * s;", dtype="float64")
    x = np.asfortranarray(np.ones((4, 40)))
    for value, got in ((2.0, "float"), (None, "NoneType"), ([2.0], "list")):
        message = rf"argument 's': expected a numpy array of float64\[\], got {got}"
        with pytest.raises(ArgumentTypeError, match=message):
            kernel(x=x, s=value)
        with pytest.raises(ArgumentTypeError, match=message):
            kernel.prepare(x=x, s=value)
    np.testing.assert_array_equal(kernel(x=x, s=np.float64(3)), x * 3)


def test_0d_arrays_beside_fortran_ordered_ones_are_neither_transposed_nor_refused() -> None:
    """A 0-d output's buffer kept a Fortran-ordered call from running ("must be C-contiguous
    ... or Fortran-ordered, where every input and out buffer is"), and a wrong 0-d input was
    reported with the transpose of the shape it was called with."""
    kernel = xfuse.compile("input s[]; a = x * s; b = s * 2.0; output a, b;")
    x = np.asfortranarray(np.ones((4, 40), np.float32))
    a, b = np.asfortranarray(np.empty((4, 40), np.float32)), np.empty((), np.float32)
    for out in ((a, b), {"a": a, "b": b}):
        got = kernel(np.float32(3), x, out=out)
        assert got[0] is a and got[1] is b and float(b) == 6.0
        np.testing.assert_array_equal(a, x * 3)
    wrong = xfuse.compile("input s[]; out = x * s + y;")
    with pytest.raises(ArgumentError, match=r"argument 's': .* got shape \(4, 40\)"):
        wrong(x, x, x)
    # and a wrong buffer of a 0-d output as given (it was transposed, a float made an array)
    with pytest.raises(ArgumentError, match=r"out 'b': expected shape \(\), got \(4, 40\)"):
        kernel(np.float32(3), x, out=(a, np.asfortranarray(np.empty((4, 40), np.float32))))
    with pytest.raises(ArgumentTypeError, match=r"out 'b': expected a numpy array, got float"):
        kernel(np.float32(3), x, out=(a, 3.0))


def test_fortran_ordered_inputs_run_as_they_are_and_give_fortran_ordered_results() -> None:
    """A kernel compiled without shapes runs Fortran-ordered inputs (a transposed C array) over
    their memory in order, as numpy's ufuncs do: no copy, and Fortran-ordered results; an `out`
    buffer of that order is written in place. Any other mix of orders is copied to C order."""
    kernel = xfuse.compile("out = x + s; twice = x * 2;", outputs=["out", "twice"])
    rng = np.random.default_rng(3)
    x, s = (np.asfortranarray(rng.standard_normal((64, 48), np.float32)) for _ in range(2))
    total, twice = kernel(x=x, s=s)
    for result, want in ((total, x + s), (twice, x * 2)):
        assert result.flags.f_contiguous and not result.flags.c_contiguous
        np.testing.assert_array_equal(result, want)
    c_array = rng.standard_normal((48, 64), np.float32)
    np.testing.assert_array_equal(kernel(x=c_array.T, s=x)[0], c_array.T + x)
    buffers = {name: np.zeros((64, 48), np.float32, order="F") for name in ("out", "twice")}
    results = kernel.prepare(x=x, s=s, out=buffers)()
    # The caller's buffers themselves, as numpy's ufuncs return them (were transposed views).
    assert all(r is b for r, b in zip(results, buffers.values(), strict=True))
    np.testing.assert_array_equal(buffers["out"], x + s)
    jit_out = np.zeros((64, 48), np.float32, order="F")
    assert xfuse.jit(lambda x, s: x - s)(x, s, out=jit_out) is jit_out
    np.testing.assert_array_equal(jit_out, x - s)
    # A None in a sequence or a mapping leaves that output to the call, as a mapping that
    # names it not (was: "must be C-contiguous", a None taken for a buffer of no order).
    for partial in ([buffers["out"], None], {"out": buffers["out"], "twice": None}):
        buffers["out"][...] = 0
        given, made = kernel(x=x, s=s, out=partial)
        assert given is buffers["out"] and made.flags.f_contiguous
        np.testing.assert_array_equal(given, x + s)
        np.testing.assert_array_equal(made, x * 2)
    c_order = {name: np.zeros((64, 48), np.float32) for name in ("out", "twice")}
    kernel(x=x, s=s, out=c_order)  # C-ordered buffers: the inputs are copied
    np.testing.assert_array_equal(c_order["twice"], x * 2)
    mixed = kernel(x=x, s=np.ascontiguousarray(s))[0]
    assert mixed.flags.c_contiguous
    np.testing.assert_array_equal(mixed, x + s)
    # Arrays of one rank with only `?` dims (named or not: @xfuse.jit's) run transposed too;
    # a broadcast [d] bias keeps the copy.
    shaped = xfuse.compile("out = x + s;", shapes={"x": ("t", "d"), "s": ("t", "d")})
    jitted = xfuse.jit(lambda x, s: x + s)
    for result in (shaped(x=x, s=s), jitted(x, s)):
        assert result.flags.f_contiguous
        np.testing.assert_array_equal(result, x + s)
    bias = np.asfortranarray(rng.standard_normal((1, 48), np.float32))
    biased = xfuse.compile("out = x + b;", shapes={"x": ("t", "d"), "b": ("d",)})
    biased_result = biased(x=x, b=bias[0])
    assert biased_result.flags.c_contiguous
    np.testing.assert_array_equal(biased_result, x + bias)


def test_broadcast_2d_bfloat16(gelu: Gelu) -> None:
    kernel = xfuse.compile(
        gelu.source, dtype="bfloat16", shapes={"x": ("t", "d"), "b": ("d",), "r": ("t", "d")}
    )
    rng = np.random.default_rng(11)
    x, r = (rng.standard_normal((6, 40)).astype(ml_dtypes.bfloat16) for _ in range(2))
    b = rng.standard_normal(40).astype(ml_dtypes.bfloat16)
    out = kernel(x=x, b=b, r=r)
    assert out.dtype == np.dtype(ml_dtypes.bfloat16) and out.shape == (6, 40)
    want = gelu.reference(x.astype(np.float64), b.astype(np.float64), r.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match="argument 'b'"):
        kernel(x=x, b=b[:7], r=r)


def test_jit_traces_once_per_signature(gelu: Gelu) -> None:
    calls = []

    @xfuse.jit(math="approx")
    def traced(x, b, r):
        calls.append(1)
        h = x + b
        return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

    rng = np.random.default_rng(2)
    x, b, r = (rng.standard_normal(100, dtype=np.float32) for _ in range(3))
    np.testing.assert_allclose(traced(x, b, r), gelu.reference(x, b, r), atol=2e-6)
    traced(x, b, r)
    assert len(calls) == 1
    x64, b64, r64 = (a.astype(np.float64) for a in (x, b, r))
    np.testing.assert_allclose(traced(x64, b64, r64), gelu.reference(x, b, r), atol=1e-12)
    assert len(calls) == 2


def test_jit_broadcast_and_several_outputs() -> None:
    @xfuse.jit(math="libm")
    def scaled(x, bias, scale):
        h = (x + bias) * scale
        return xfuse.sigmoid(h), -h

    x = np.ones((4, 3), np.float32)
    bias = np.arange(3, dtype=np.float32)
    scale = np.full((4, 1), 2.0, np.float32)
    s, n = scaled(x, bias, scale)
    h = (x + bias) * scale
    np.testing.assert_allclose(n, -h)
    np.testing.assert_allclose(s, 1 / (1 + np.exp(-h.astype(np.float64))), atol=1e-6)


def test_jit_errors() -> None:
    @xfuse.jit
    def bad(x):
        return x if x else x

    with pytest.raises(TypeError, match="no truth value"):
        bad(np.ones(3, np.float32))
    with pytest.raises(xfuse.ArgumentTypeError, match="argument 'x': expected a numpy array"):
        bad([1.0])
    with pytest.raises(xfuse.ArgumentTypeError, match="bad\\(\\): missing a required argument"):
        bad()


def test_kernels_and_jit_functions_have_python_signatures() -> None:
    kernel = xfuse.compile("out = x * b + r;")
    assert str(inspect.signature(kernel)) == "(x, b, r, *, out=None)"

    @xfuse.jit
    def scaled(x, *rest, scale=2.0, **options):
        return x * scale

    assert str(inspect.signature(scaled)) == "(x, *rest, scale=2.0, out=None, **options)"
    with pytest.raises(TypeError, match="cannot have a parameter named 'out'"):
        xfuse.jit(lambda x, out: x)


def test_inputs_named_like_python_keywords_or_out() -> None:
    """`lambda` and `out` cannot be parameters of a Python call (`out=` is the output buffers):
    the signature spells them `lambda_` and `out_`, and a call passes them by position, by that
    name, or through `**` by their own."""
    kernel = xfuse.compile("input lambda, out, x; y = lambda * out + x;")
    assert str(inspect.signature(kernel)) == "(lambda_, out_, x, *, out=None)"
    lam, out, x = (np.full(3, value, np.float32) for value in (2.0, 3.0, 1.0))
    buffer = np.empty(3, np.float32)
    for result in (
        kernel(lam, out, x),
        kernel(lambda_=lam, out_=out, x=x),
        kernel(**{"lambda": lam}, out_=out, x=x),
        kernel(lam, out, x=x, out=buffer),
        kernel(lam, x=x, **{"out_": out}),
    ):
        np.testing.assert_array_equal(result, np.full(3, 7.0, np.float32))
    with pytest.raises(ArgumentTypeError, match="multiple values for argument 'lambda_'"):
        kernel(lam, out, x, **{"lambda": lam})
    with pytest.raises(ArgumentTypeError, match="input 'lambda' given twice \\(also as 'lambda_'"):
        kernel(out_=out, x=x, **{"lambda": lam, "lambda_": lam})
    with pytest.raises(ArgumentTypeError, match="missing a required argument: 'out_'"):
        kernel(lam, x=x, out=buffer)
    # A spelling that is another input's name is not taken.
    kernel = xfuse.compile("input lambda, lambda_; y = lambda - lambda_;")
    assert str(inspect.signature(kernel)) == "(lambda__, lambda_, *, out=None)"
    np.testing.assert_array_equal(kernel(lambda__=lam, lambda_=x), lam - x)
    # IR names that are no identifiers (an MLIR name may hold `.`, `$` or `-`).
    source = """func.func @main(%x.1: tensor<?xf32>) -> tensor<?xf32> {
      %out = ew.mul %x.1, %x.1 : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
      func.return %out : tensor<?xf32>
    }"""
    kernel = compile_module(Parser(pipeline_context(), source).parse_module())
    assert str(inspect.signature(kernel)) == "(x_1_, *, out=None)"
    np.testing.assert_array_equal(kernel(x_1_=lam), kernel(**{"x.1": lam}))
    # Two that spell one keyword: the second spelled on (`duplicate parameter name: 'a_b_'`).
    source = """func.func @main(%a.b: tensor<?xf32>, %a-b: tensor<?xf32>) -> tensor<?xf32> {
      %out = ew.sub %a.b, %a-b : tensor<?xf32>
      func.return %out : tensor<?xf32>
    }"""
    kernel = compile_module(Parser(pipeline_context(), source).parse_module())
    assert str(inspect.signature(kernel)) == "(a_b_, a_b__, *, out=None)"
    np.testing.assert_array_equal(kernel(lam, a_b__=x), lam - x)


def test_an_input_or_parameter_named_self() -> None:
    """A kernel's or jit function's `self` is passed by position or by name, as any input: the
    methods' own `self` took the keyword (`multiple values for argument 'self'`), and a traced
    `f(self, x)` failed by position too."""
    kernel = xfuse.compile("y = self * 2;")
    assert str(inspect.signature(kernel)) == "(self, *, out=None)"
    x = np.arange(4, dtype=np.float32)
    for result in (kernel(x), kernel(self=x), kernel.prepare(self=x)(), kernel(self=x, out=x * 0)):
        np.testing.assert_array_equal(result, x * 2)

    @xfuse.jit
    def product(self: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self * x

    np.testing.assert_array_equal(product(x, x), x * x)
    np.testing.assert_array_equal(product(self=x + 1, x=x), (x + 1) * x)


def test_elementwise_functions_work_on_numpy() -> None:
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    assert xfuse.tanh(x).dtype == np.float32
    np.testing.assert_allclose(xfuse.tanh(x), np.tanh(x), rtol=1e-6)


@pytest.mark.parametrize("planned", [False, True])
def test_numpy_baselines_compute_comparisons_as_one_and_zero(planned: bool) -> None:
    """numpy's booleans would make `(x <= y) + (x >= y)` a logical or (1, not 2, where x == y),
    and `- (x == y)` of it an error."""
    source = "out = (x <= y) + (x >= y) - (x == y) * 2 + select(x, y, 3);"
    module = parse_program(source)
    EwOptimizePass().apply(pipeline_context(), module)
    baseline = (xfuse.compile_numpy_planned if planned else xfuse.compile_numpy)(module)
    x, y = np.float32([1, 2, 3, 0, np.nan]), np.float32([2, 2, 1, 5, 1])
    (out,) = baseline(x, y)
    np.testing.assert_array_equal(out, xfuse.compile(source)(x=x, y=y))
    np.testing.assert_array_equal(out, [3, 2, 2, 4, 1])


@pytest.mark.parametrize("planned", [False, True])
def test_numpy_baselines_match(planned: bool, gelu: Gelu) -> None:
    module = parse_program(gelu.source)
    EwOptimizePass().apply(pipeline_context(), module)
    baseline = (xfuse.compile_numpy_planned if planned else xfuse.compile_numpy)(module)
    rng = np.random.default_rng(4)
    x, b, r = (rng.standard_normal(1000, dtype=np.float32) for _ in range(3))
    (out,) = baseline(x, b, r)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, gelu.reference(x, b, r), atol=2e-6)
    if planned:
        (again,) = baseline(x, b, r)
        assert again is out  # the planned buffers are reused


STATIC_THREE = {
    "output": """func.func @main(%x: tensor<?xf32>) -> tensor<3xf32> {
      %c = ew.constant 1.0 : tensor<3xf32>
      %y = ew.add %x, %c : tensor<?xf32>, tensor<3xf32> -> tensor<3xf32>
      func.return %y : tensor<3xf32>
    }""",
    "temporary": """func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
      %c = ew.constant 1.0 : tensor<3xf32>
      %t = ew.add %x, %c : tensor<?xf32>, tensor<3xf32> -> tensor<3xf32>
      %y = ew.add %t, %x : tensor<3xf32>, tensor<?xf32> -> tensor<?xf32>
      func.return %y : tensor<?xf32>
    }""",
}


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("program", sorted(STATIC_THREE))
@pytest.mark.parametrize("size", [0, 2, 5])
def test_a_static_dimension_binds_the_dynamic_input_on_its_axis(
    size: int, program: str, fuse: bool
) -> None:
    """x's `?` must be 3, the constant's (and the output's or a temporary's) size: a call with 2
    read past the end of x (with 5 it computed the first 3 of them, or read past the end of
    the temporary `t`)."""
    module = Parser(pipeline_context(), STATIC_THREE[program]).parse_module()
    kernel = compile_module(module, options=Options(fuse=fuse))
    assert kernel.function.inputs[0].shape == (3,)
    with pytest.raises(
        ArgumentError,
        match=rf"^argument 'x': dimension 0 must be 3 \(float32\[3\]\), got shape \({size},\)$",
    ):
        kernel(x=np.zeros(size, np.float32))
    expected = [1.0, 2.0, 3.0] if program == "output" else [1.0, 3.0, 5.0]
    np.testing.assert_array_equal(kernel(x=np.arange(3, dtype=np.float32)), expected)


BOUND_BY_A_STATIC_INPUT = {
    "declared": ("input y[3]; out = exp(x) + y;", None, (3,)),
    "by shapes=": ("out = exp(x) + y;", {"y": (3,)}, (3,)),
    "named dims": ("input x[t, d], y[3]; out = exp(x) * x + y;", None, (2, 3)),
}


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("case", sorted(BOUND_BY_A_STATIC_INPUT))
def test_values_computed_from_a_bound_input_take_its_static_size(case: str, fuse: bool) -> None:
    """x's `?` bound to y's 3 left `exp(x)` a `?` result: a kernel of a static input and a
    dynamic output, which `ew-bufferize` could not size (a PassFailedException)."""
    source, shapes, shape = BOUND_BY_A_STATIC_INPUT[case]
    kernel = xfuse.compile(source, shapes=shapes, fuse=fuse)
    x = np.linspace(-2, 2, math.prod(shape), dtype=np.float32).reshape(shape)
    y = np.float32([1, 2, 3])
    wide = x.astype(np.float64)
    expected = np.exp(wide) * (wide if "* x" in source else 1) + y
    np.testing.assert_allclose(kernel(x=x, y=y), expected, rtol=1e-6)
    if case == "named dims":
        assert str(kernel).startswith("<xfuse.Kernel (x: float32[t, d=3], y: float32[3])")


@pytest.mark.parametrize("fuse", [True, False])
def test_kernels_of_an_input_a_static_one_binds_take_its_size(fuse: bool) -> None:
    """`xfuse-opt -p 'ew-fuse{mode=none}'`'s output of `input x[?], y[3]; a = exp(x); out = a
    + y;`: x took y's 3, its kernel's `?` result stayed (ew-bufferize: "no operand gives a
    dynamic size"; the verifier now refuses such a kernel)."""
    parsed = parse_program("input x[?], y[3];\na = exp(x);\nout = a + y;\n")
    fused = str(apply_pipeline(parsed, "ew-fuse{mode=none}"))
    kernel = compile_module(parse_ir(fused), options=Options(fuse=fuse))
    x, y = np.float32([0.0, 1.0, 2.0]), np.float32([1.0, 2.0, 3.0])
    np.testing.assert_allclose(kernel(x, y), np.exp(x.astype(np.float64)) + y, rtol=1e-6)
    parse_ir(kernel.stages["frontend"]).verify()  # (the stage as stored verifies)


def test_a_conversion_of_an_input_a_static_one_binds_takes_its_size() -> None:
    """The LLM GELU with a static bias: `x + b` converts x to f32, whose result stayed `?`
    where x took b's 14336 (ew-bufferize: "no operand gives a dynamic size")."""
    body = "h = x + b; out = bf16(0.5 * h * (1 + tanh(0.79788456 * h)) + r);"
    static = xfuse.compile(f"input bf16 x[t, d], r[t, d]; input f32 b[14336]; {body}")
    named = xfuse.compile(f"input bf16 x[t, d], r[t, d]; input f32 b[d]; {body}")
    rng = np.random.default_rng(3)
    x, r = (rng.standard_normal((2, 14336)).astype(ml_dtypes.bfloat16) for _ in range(2))
    b = rng.standard_normal(14336).astype(np.float32)
    got, want = static(x, r, b), named(x, r, b)
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint16), want.view(np.uint16))
    assert len(static.ir("ew-fuse").split("ew.kernel")) == 2  # one kernel, as with b[d]
    kernel = xfuse.compile("input f64 a[3]; out = a + x;")
    np.testing.assert_array_equal(
        kernel(a=np.float64([1, 2, 3]), x=np.float32([1, 1, 1])), [2, 3, 4]
    )


SIZED_BY_STATIC_OPERANDS = {
    "a 3 beside x[1]": """func.func @main(%x: tensor<1xf32>) -> tensor<?xf32> {
          %c = ew.constant 2.0 : tensor<3xf32>
          %b = ew.add %c, %x : tensor<3xf32>, tensor<1xf32> -> tensor<?xf32>
          func.return %b : tensor<?xf32>
        }""",
    "3 x 1 beside x[?]": """func.func @main(%x: tensor<?xf32>) -> tensor<?x?xf32> {
          %c = ew.constant 1.0 : tensor<3x1xf32>
          %t = ew.add %c, %c : tensor<3x1xf32>
          %o = ew.add %t, %x : tensor<3x1xf32>, tensor<?xf32> -> tensor<?x?xf32>
          func.return %o : tensor<?x?xf32>
        }""",
    "a kernel of a 3 x 1": """func.func @main(%x: tensor<?xf32>) -> tensor<?x?xf32> {
          %f = ew.kernel ins() -> tensor<3x1xf32> {
            %c = arith.constant 2.0 : f32
            ew.yield %c : f32
          }
          %r = ew.kernel ins(%f, %x : tensor<3x1xf32>, tensor<?xf32>) -> tensor<?x?xf32> {
          ^bb0(%a: f32, %b: f32):
            %s = arith.addf %a, %b : f32
            ew.yield %s : f32
          }
          func.return %r : tensor<?x?xf32>
        }""",
    "1 x 1 beside x[?]": """func.func @main(%x: tensor<?xf32>) -> tensor<?x?xf32> {
          %c = ew.constant 1.0 : tensor<1x1xf32>
          %b = ew.mul %c, %x : tensor<1x1xf32>, tensor<?xf32> -> tensor<?x?xf32>
          func.return %b : tensor<?x?xf32>
        }""",
}


@pytest.mark.parametrize("case", sorted(SIZED_BY_STATIC_OPERANDS))
def test_a_dynamic_result_that_static_operands_size_is_refused(case: str) -> None:
    """Its `?` was bound from the arguments: `3 + x[1]` gave 1 element, `3 x 1 + x[7]` 7 x 7
    (rows past the constant's end read from the heap, also as a tensor kernel), `[1, 1] *
    x[3]` 3 x 3. The op's verifier names it: its static size is what the type should say."""
    module = Parser(pipeline_context(), SIZED_BY_STATIC_OPERANDS[case]).parse_module()
    with pytest.raises(VerifyException, match=r"result dimension 0 is \? but its operands have"):
        module.verify()


def test_static_sizes_that_disagree_on_an_axis_are_an_error() -> None:
    """`x + c3` and `x + c4` each loop over their constant's size: an x of 3 was read past its
    end by the second."""
    source = """func.func @main(%x: tensor<?xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
      %c = ew.constant 1.0 : tensor<3xf32>
      %d = ew.constant 1.0 : tensor<4xf32>
      %t = ew.add %x, %c : tensor<?xf32>, tensor<3xf32> -> tensor<3xf32>
      %u = ew.add %x, %d : tensor<?xf32>, tensor<4xf32> -> tensor<4xf32>
      func.return %t, %u : tensor<3xf32>, tensor<4xf32>
    }"""
    with pytest.raises(DiagnosticException, match="<4xf32> has 4 where a tensor<3xf32> has 3"):
        compile_module(Parser(pipeline_context(), source).parse_module())


@pytest.mark.parametrize(
    ("source", "signature"),
    [
        ("input x; h = 2;", "(x: float32[?]) -> (h: float32[])"),
        ("input s[]; input x; h = s * 2;", "(s: float32[], x: float32[?]) -> (h: float32[])"),
        ("input x[?, ?]; input y[7]; h = y * 2;", "(x: float32[?, 7], y: float32[7])"),
        ("input x[?, ?, ?]; input y[5, 7]; h = y * 2;", "(x: float32[?, 5, 7], y: float32[5, 7])"),
    ],
)
def test_an_unused_input_of_higher_rank_lines_up_on_the_right(source: str, signature: str) -> None:
    """An input no op reads, of more axes than every value that is read, aligns on the right
    as a read one does: the static sizes took its axes' positions from the values read alone
    (an `IndexError` of a 0-d result; `x[?, ?]` beside `y[7]` became `x[7, 7]`)."""
    kernel = xfuse.compile(source)
    assert str(kernel.signature).startswith(signature)
    inputs = {
        p.name: np.ones((2, 5, 7)[3 - len(p.shape) :], np.float32) for p in kernel.function.inputs
    }
    assert np.all(kernel(**inputs) == 2.0)


def test_a_traced_function_may_leave_an_array_argument_unused() -> None:
    """`s * 2` of a scalar `s` beside an unused array `x`: an `IndexError` before."""

    @xfuse.jit
    def doubled(x: np.ndarray, s: np.float32) -> np.ndarray:
        return s * 2

    assert doubled(np.ones(5, np.float32), np.float32(3)) == 6


@pytest.mark.parametrize(
    ("arguments", "type_"),
    [
        ("%s: f32, ", "f32"),
        ("%s: memref<?xf32>, ", "memref<\\?xf32>"),
        ("%s: tensor<4xi32>, ", "tensor<4xi32>"),
    ],
)
def test_compile_module_takes_tensors_only(arguments: str, type_: str) -> None:
    """An argument of another type is an error naming it, by position and SSA name (a scalar
    was a raw AttributeError)."""
    source = f"""func.func @main({arguments}%x: tensor<?xf32>) -> tensor<?xf32> {{
      %y = ew.add %x, %x : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
      func.return %y : tensor<?xf32>
    }}"""
    with pytest.raises(
        DiagnosticException,
        match=f"compile_module: 'func.func' @main argument #0 \\(%s\\) has type {type_}",
    ):
        compile_module(Parser(pipeline_context(), source).parse_module())


RETURNED_TWICE = """func.func @main(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %y = ew.mul %x, %x : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  func.return %y, %y : tensor<?xf32>, tensor<?xf32>
}"""


def test_a_value_returned_twice_is_two_named_outputs() -> None:
    """Two outputs, as `y = x * x; z = y; output y, z;` compiles to: both were named 'y', and
    `out={"y": buffer}` failed with "out 'y' overlaps out 'y'". Now named as `ew-bufferize`
    names their buffers."""
    kernel = compile_module(Parser(pipeline_context(), RETURNED_TWICE).parse_module())
    assert kernel.output_names == ("out0", "out1")
    x = np.array([2.0, 3.0], np.float32)
    second = np.zeros(2, np.float32)
    first, returned = kernel(x=x, out={"out1": second})
    assert returned is second and first is not second
    np.testing.assert_array_equal(first, [4.0, 9.0])
    np.testing.assert_array_equal(second, [4.0, 9.0])


def test_the_results_of_one_kernel_are_two_named_outputs() -> None:
    """`%k#0` and `%k#1` share the kernel's SSA name: both were named 'k', refused ("two
    outputs are named 'k'") where no output_names were given."""
    source = """func.func @main(%x: tensor<3x1xf32>, %y: tensor<4xf32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %k:2 = ew.kernel ins(%x, %y : tensor<3x1xf32>, tensor<4xf32>)
          -> tensor<3x4xf32>, tensor<3x4xf32> {
      ^bb0(%xs: f32, %ys: f32):
        %s = arith.subf %xs, %ys : f32
        ew.yield %s, %xs : f32, f32
      }
      func.return %k#0, %k#1 : tensor<3x4xf32>, tensor<3x4xf32>
    }"""
    kernel = compile_module(Parser(pipeline_context(), source).parse_module())
    assert kernel.output_names == ("out0", "out1")
    x, y = np.float32([[1], [2], [3]]), np.float32([0, 1, 2, 3])
    difference, broadcast = kernel(x, y)
    np.testing.assert_array_equal(difference, x - y)
    np.testing.assert_array_equal(broadcast, np.broadcast_to(x, (3, 4)))


@pytest.mark.parametrize(
    ("source", "names", "error"),
    [
        (RETURNED_TWICE, ["y", "y"], "output_names: 'y' is given twice, got ['y', 'y']"),
        (RETURNED_TWICE, ["y"], "output_names: 1 name for a function of 2 results"),
        # (one name, as `xfuse.compile`'s outputs: "yz" was the names 'y' and 'z')
        (RETURNED_TWICE, "yz", "output_names: 1 name for a function of 2 results"),
        (RETURNED_TWICE, ["y", ""], "output_names: an output name is empty, got ['y', '']"),
        (  # the second output's default name, `out1`, is the first's SSA name
            """func.func @main(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
              %out1 = ew.mul %x, %x : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
              func.return %out1, %x, %x : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
            }""",
            None,
            "two outputs are named 'out1' (['out1', 'out1', 'out2']): pass distinct output_names",
        ),
    ],
)
def test_output_names_that_do_not_fit_are_an_error(
    source: str, names: list[str] | None, error: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        compile_module(Parser(pipeline_context(), source).parse_module(), names)


def test_compile_module_checks_its_arguments_as_compile_does() -> None:
    """An output name of another type was taken (`[1]` named an output `1`), an options dict
    was a raw "unhashable type", and a CUDA kernel's threads were dropped."""
    text = xfuse.compile("out = exp(x);").ir("frontend")
    with pytest.raises(TypeError, match=r"output_names must be a list of output names, got \[1"):
        compile_module(parse_ir(text), [1])  # type: ignore[list-item]
    # (any ordered iterable of names, as before the check: dict keys, a generator; no set)
    assert compile_module(parse_ir(text), {"y": 0}.keys()).output_names == ("y",)
    with pytest.raises(TypeError, match=r"got \{'y'\} \(a set has no order\)"):
        compile_module(parse_ir(text), {"y"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"output_names must be a list of output names, got \{'y"):
        compile_module(parse_ir(text), {"y": 0})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="compile_module: options must be an xfuse.runtime.compil"):
        compile_module(parse_ir(text), options={"fuse": False})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"threads applies to target='cpu' only"):
        compile_module(parse_ir(text), options=Options(target="cuda"), threads=4)
    assert compile_module(parse_ir(text), "out").output_names == ("out",)


def test_compile_module_of_a_built_function() -> None:
    module = parse_program("out = sqrt(x);")
    kernel = compile_module(module)
    np.testing.assert_allclose(kernel(x=np.array([4.0, 9.0], np.float32)), [2.0, 3.0])


# Hostile calls, run in a child process so that a crash (a segfault in native code) fails the
# test instead of killing pytest. Each case: (label, call, exception type, message). The call sees
# `k` (fused GELU), `u` (unfused GELU), `two` (two outputs), `m` (2-D with a broadcast row), the
# float32 arrays `x` (10) and `y` (10), `grid` (4x3), `row` (3), and `sentinel`: a valid out
# buffer filled with 7.0, which must be untouched after every rejected call.
HOSTILE_SETUP = """
import json, sys, traceback
import numpy as np
import xfuse
GELU = {gelu!r}
k = xfuse.compile(GELU)
u = xfuse.compile("out1 = x * 2; out2 = out1 + x;", ["out1", "out2"], fuse=False)
two = xfuse.compile("h = x + b; y = tanh(h);", outputs=["y", "h"])
m = xfuse.compile("out = g * w + 1;", shapes={{"g": ("t", 3), "w": (3,)}})
x, y = np.ones(10, np.float32), np.full(10, 2.0, np.float32)
grid, row = np.ones((4, 3), np.float32), np.ones(3, np.float32)
def read_only(a):
    a.flags.writeable = False
    return a
def misaligned(n, value=0.0):
    array = np.frombuffer(np.zeros(4 * n + 1, np.uint8)[1:].data, np.float32)
    array[:] = value
    assert not array.flags.aligned
    return array
"""

HOSTILE_CALLS = [
    ("extra positional", "k(x, x, x, x, out=sentinel)", "ArgumentTypeError", "too many positional"),
    (
        "given twice",
        "k(x, b=x, r=x, x=x, out=sentinel)",
        "ArgumentTypeError",
        "multiple values for argument 'x'",
    ),
    (
        "None input",
        "k(x=x, b=None, r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'b'.*NoneType",
    ),
    (
        "Python float",
        "k(x=x, b=1.0, r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'b'.*float",
    ),
    (
        "numpy scalar",  # a 0-d array, as numpy's ufuncs take it: not of the others' shape
        "k(x=np.float32(1), b=x, r=x, out=sentinel)",
        "ArgumentError",
        r"inputs of different shapes \('x' \(\)",
    ),
    (
        "numpy scalar of another dtype",
        "k(x=x, b=np.float64(1), r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'b': expected dtype float32, got float64",
    ),
    ("numpy scalar out", "k(x=x, b=x, r=x, out=np.float32(7))", "ArgumentTypeError", "immutable"),
    (
        "0-d array",
        "k(x=x, b=np.array(1, np.float32), r=x, out=sentinel)",
        "ArgumentError",
        r"inputs of different shapes \(.*'b' \(\)",
    ),
    (
        "int32",
        "k(x=x, b=x.astype(np.int32), r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'b': expected dtype float32, got int32",
    ),
    (
        "big-endian",
        "k(x=x, b=x, r=x.astype('>f4'), out=sentinel)",
        "ArgumentTypeError",
        "argument 'r'",
    ),
    (
        "object dtype",
        "k(x=x.astype(object), b=x, r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'x'",
    ),
    (
        "length",
        "k(x=x, b=x, r=np.ones(11, np.float32), out=sentinel)",
        "ArgumentError",
        "argument 'r': dimension 0 has size 11",
    ),
    ("empty vs 10", "k(x=x[:0], b=x, r=x, out=sentinel)", "ArgumentError", "argument 'b'"),
    (
        "static dim",
        "m(g=np.ones((4, 2), np.float32), w=row)",
        "ArgumentError",
        "argument 'g': dimension 1 must be 3",
    ),
    ("out int", "k(x=x, b=x, r=x, out=5)", "ArgumentTypeError", "out: expected a numpy array"),
    ("out str", "k(x=x, b=x, r=x, out='abc')", "ArgumentTypeError", "out: expected a numpy array"),
    (
        "out list of float",
        "k(x=x, b=x, r=x, out=[1.0])",
        "ArgumentTypeError",
        "out 'out': expected a numpy array",
    ),
    ("out count", "two(x=x, b=x, out=(sentinel,))", "ArgumentError", "expected 2 buffer"),
    (
        "out unknown name",
        "two(x=x, b=x, out={'z': sentinel})",
        "ArgumentTypeError",
        "unknown output",
    ),
    ("out reversed", "k(x=x, b=x, r=x, out=sentinel[::-1])", "ArgumentError", "C-contiguous"),
    ("out misaligned", "k(x=x, b=x, r=x, out=misaligned(10))", "ArgumentError", "aligned"),
    (
        "flat out of another shape",
        "k(x=x.reshape(2, 5), b=x.reshape(2, 5), r=x.reshape(2, 5), out=sentinel)",
        "ArgumentError",
        r"out 'out': expected shape \(2, 5\), got \(10,\)",
    ),
    (
        "prepare flat out of another shape",
        "k.prepare(x.reshape(2, 5), x.reshape(2, 5), x.reshape(2, 5), out=sentinel)",
        "ArgumentError",
        r"out 'out': expected shape \(2, 5\), got \(10,\)",
    ),
    (
        "out broadcast view",
        "k(x=x, b=x, r=x, out=np.broadcast_to(np.float32(0), (10,)))",
        "ArgumentError",
        "out 'out'",
    ),
    (
        "out Fortran",
        "m(g=grid, w=row, out=np.asfortranarray(np.ones((4, 3), np.float32))[:, :2])",
        "ArgumentError",
        "out 'out'",
    ),
    (
        "out read-only",
        "k(x=x, b=x, r=x, out=read_only(sentinel.copy()))",
        "ArgumentError",
        "read-only",
    ),
    (
        "out aliases an input a later kernel reads",
        "u(x=sentinel, out=(sentinel, y.copy()))",
        "ArgumentError",
        "out 'out1' overlaps input 'x'",
    ),
    (
        "out overlaps out",
        "two(x=x, b=x, out=(sentinel, sentinel[:10]))",
        "ArgumentError",
        "overlaps out",
    ),
    (
        "prepare strided",
        "k.prepare(x=x, b=np.ones(20, np.float32)[::2], r=x, out=sentinel)",
        "ArgumentError",
        "argument 'b': a prepared call takes no strided or misaligned input",
    ),
    (
        "prepare misaligned",
        "k.prepare(x=x, b=x, r=misaligned(10), out=sentinel)",
        "ArgumentError",
        "argument 'r': a prepared call takes no strided or misaligned input",
    ),
    (
        "masked input",
        "k(x=np.ma.masked_array(x, mask=x > 0), b=x, r=x, out=sentinel)",
        "ArgumentTypeError",
        r"argument 'x': a masked array's mask would be ignored; pass \.filled\(value\)",
    ),
    (
        "masked out",
        "k(x=x, b=x, r=x, out=np.ma.masked_array(sentinel, mask=x > 0))",
        "ArgumentTypeError",
        r"out 'out': a masked array's mask would be ignored; pass \.data",
    ),
    (
        "prepare masked input",
        "k.prepare(x=x, b=np.ma.masked_array(x), r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'b': a masked array",
    ),
    (
        "matrix input",
        "k(x=np.matrix(x.reshape(2, 5)), b=x.reshape(2, 5), r=x.reshape(2, 5))",
        "ArgumentTypeError",
        r"argument 'x': np\.matrix is not taken; pass np\.asarray",
    ),
    (
        "matrix out",
        "k(x=x.reshape(2, 5), b=x.reshape(2, 5), r=x.reshape(2, 5), "
        "out=np.matrix(sentinel.reshape(2, 5)))",
        "ArgumentTypeError",
        r"out 'out': np\.matrix is not taken",
    ),
    (
        "prepare checks too",
        "k.prepare(x=x, b=None, r=x, out=sentinel)",
        "ArgumentTypeError",
        "argument 'b'",
    ),
]

HOSTILE_RUN = """
results = []
for label, call, error, message in CASES:
    sentinel = np.full(10, 7.0, np.float32)
    try:
        eval(call)
        outcome = "no error"
    except Exception as caught:
        outcome = f"{type(caught).__name__}: {caught}"
    results.append((label, outcome, bool((sentinel == 7.0).all())))
print(json.dumps(results))
"""


def run_isolated(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )


def test_hostile_calls_fail_politely_in_a_child_process(gelu: Gelu) -> None:
    script = HOSTILE_SETUP.format(gelu=gelu.source) + f"CASES = {HOSTILE_CALLS!r}\n" + HOSTILE_RUN
    child = run_isolated(script)
    assert child.returncode == 0, f"the child crashed ({child.returncode}):\n{child.stderr}"
    results = json.loads(child.stdout.splitlines()[-1])
    for (label, _, error, message), (_, outcome, untouched) in zip(
        HOSTILE_CALLS, results, strict=True
    ):
        assert outcome.startswith(f"{error}: "), f"{label}: {outcome}"
        assert re.search(message, outcome), f"{label}: {outcome}"
        assert untouched, f"{label}: the out buffer was written"


def test_unusual_but_valid_calls_work_in_a_child_process(gelu: Gelu) -> None:
    """Read-only, strided, misaligned and memory-mapped inputs are read (copied where needed)."""
    script = HOSTILE_SETUP.format(gelu=gelu.source) + (
        "import tempfile\n"
        "tmp = tempfile.TemporaryFile()\n"
        "want = k(x=x, b=y, r=x)\n"
        "for label, args in [\n"
        "    ('read-only', dict(x=read_only(x.copy()), b=y, r=x)),\n"
        "    ('strided', dict(x=np.ones(20, np.float32)[::2], b=y, r=x)),\n"
        "    ('reversed', dict(x=x[::-1], b=y[::-1], r=x)),\n"
        "    ('misaligned', dict(x=misaligned(10, 1.0), b=y, r=x)),\n"
        "    ('in place', dict(x=x.copy(), b=y, r=x)),\n"
        "    ('memmap', dict(x=np.memmap(tmp, np.float32, 'w+', shape=(10,)), b=y, r=x)),\n"
        "]:\n"
        "    if label == 'memmap':\n"
        "        args['x'][:] = x\n"
        "    out = args['x'] if label in ('in place', 'memmap') else None\n"
        "    assert np.array_equal(k(**args, out=out), want), label\n"
        "print('ok')\n"
    )
    child = run_isolated(script)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"opt_level": 9}, ValueError, "opt_level must be 0, 1, 2 or 3, got 9"),
        # wrong types (3.0 reached llvmlite: a ctypes.ArgumentError)
        ({"opt_level": 3.0}, TypeError, "opt_level must be 0, 1, 2 or 3, got 3.0"),
        ({"threads": "2"}, TypeError, "threads must be an integer >= 1, got '2'"),
        ({"interleave": "4"}, TypeError, "interleave must be None, 0 or a power of two up to 16"),
        ({"interleave": 6}, ValueError, "interleave must be None, 0 or a power of two up to 16"),
        ({"math": 1}, TypeError, "math must be a string, got 1"),
        ({"target": ["cpu"]}, TypeError, r"target must be a string, got \['cpu'\]"),
        ({"arch": 3, "target": "cuda"}, TypeError, "arch must be a string, one of sm_80"),
        ({"dtype": 3}, TypeError, "dtype must be a numpy dtype or its name, got 3"),
        # numpy's np.dtype(None) is float64: None compiled float64, not the default float32
        ({"dtype": None}, TypeError, "dtype must be a numpy dtype or its name, got None"),
        ({"dtype": "int64"}, ValueError, "unsupported dtype 'int64': expected one of float16"),
        ({"fastmath": "bogus"}, ValueError, "^fastmath must be none, fast or .*, got 'bogus'$"),
        ({"math": "exact"}, ValueError, "math must be 'approx' or 'libm' for cpu, got 'exact'"),
        ({"threads": 0}, ValueError, "threads must be an integer >= 1, got 0"),
        ({"fuse": "yes"}, TypeError, "fuse must be True or False, got 'yes'"),
        ({"aligned_stores": 0}, TypeError, "aligned_stores must be True or False, got 0"),
        (
            {"extra_passes": "ew-fuse,ew-bufferize"},
            ValueError,
            "extra_passes: 'ew-fuse' cannot run there: .* \\(allowed: ew-optimize, ew-strength",
        ),
        (
            {"extra_passes": "ew-strength-reduce{max-exponent=x}"},
            ValueError,
            "extra_passes: ew-strength-reduce: bad value 'x' for option 'max-exponent': "
            "expected an integer",
        ),
        ({"extra_passes": "ew-strength"}, ValueError, "unknown pass 'ew-strength' \\(did you"),
        ({"outputs": [1]}, TypeError, "outputs must be a list of output names"),
        ({"outputs": 5}, TypeError, "outputs must be a list of output names, got 5"),
        (
            {"outputs": ["out", "h", "out"]},
            ValueError,
            r"outputs: 'out' is given twice, got \['out', 'h', 'out'\]",
        ),
        ({"shapes": {"x": 5}}, TypeError, "shapes\\['x'\\] must be a sequence of dims"),
        ({"shapes": {"x": (-1,)}}, ValueError, "shapes\\['x'\\]: bad dim -1: expected a size"),
        ({"shapes": {"x": ("1a",)}}, ValueError, "shapes\\['x'\\]: bad dim '1a'"),
    ],
)
def test_bad_compile_options_name_the_option(options, error, message) -> None:
    with pytest.raises(error, match=message):
        xfuse.compile("h = x * 2; out = h + 1;", **options)


def test_numpy_baselines_and_stages_name_a_wrong_argument() -> None:
    """A source string was "'str' object has no attribute 'ops'", one array too few zip's
    ValueError, a stage that is no string "no stage '0'" (a list: unhashable)."""
    with pytest.raises(TypeError, match=r"^compile_numpy takes a builtin\.module .*, not str"):
        xfuse.compile_numpy("out = x * 2;")  # type: ignore[arg-type]
    baseline = xfuse.compile_numpy_planned(parse_program("out = x + y;"))
    with pytest.raises(TypeError, match=r"takes 2 array\(s\), positionally \(inputs: x, y\), 1"):
        baseline(np.ones(3, np.float32))
    kernel = xfuse.compile("out = x * 2;")
    for stage in (0, []):
        with pytest.raises(TypeError, match=r"^stage must be a stage's name, got .*: stages are"):
            kernel.ir(stage)  # type: ignore[arg-type]
    # no stage: the last one's, as mlir-opt prints what its pipeline made
    assert list(kernel.stages)[-1] == "ew-to-llvm"
    assert kernel.ir() == kernel.ir(None) == kernel.ir("ew-to-llvm") != kernel.ir("ew-fuse")


def test_numpy_bools_and_ints_are_options_as_python_ones_are() -> None:
    """`threads=np.int64(2)` was taken, `aligned_stores=np.True_` refused; taken as `bool`,
    the options (a cache key) are those of Python's."""
    kernel = xfuse.compile("out = x * 2;", fuse=np.False_, aligned_stores=np.True_)
    assert repr(kernel.options) == repr(Options(fuse=False, aligned_stores=True))
    # numpy ints too (opt_level and interleave kept them: in the repr, the disk cache's key)
    kernel = xfuse.compile("out = x * 3;", opt_level=np.int64(2), interleave=np.uint8(4))
    assert repr(kernel.options) == repr(Options(opt_level=2, interleave=4))
    # and numpy strs (kept: a later compile with Python's strs showed `np.str_('libm')`)
    text = {"math": "libm", "fastmath": "contract", "extra_passes": "ew-optimize"}
    kernel = xfuse.compile("out = exp(x);", **{k: np.str_(v) for k, v in text.items()})
    assert repr(kernel.options) == repr(Options(**text))  # type: ignore[arg-type]

    class Choice(str, enum.Enum):  # noqa: UP042 (str() of one is 'Choice.LIBM': refused so)
        LIBM = "libm"

    options = Options(math=Choice.LIBM)  # type: ignore[arg-type]
    assert type(options.math) is str and options.math == "libm"
    # One spelling of a set of fastmath flags (each spelling was options of its own: a cache
    # entry of its own for the same code)
    spellings = {
        " fast": "fast",
        "contract, afn": "contract,afn",
        "afn,contract": "contract,afn",
        "contract,contract": "contract",
        "none,nnan": "nnan",
        "reassoc,nnan,ninf,nsz,arcp,contract,afn": "fast",
    }
    for given, spelled in spellings.items():
        assert Options(fastmath=given) == Options(fastmath=spelled)
        assert Options(fastmath=given).fastmath == spelled


@pytest.mark.parametrize("name", list(ALL_PASSES))
def test_every_pass_as_an_extra_pass_runs_or_is_refused_by_name(name: str) -> None:
    """A pass that cannot run on tensors right after ew-optimize is refused up front, naming it;
    any other runs and leaves the numbers right (a new pass lands in one of the two)."""
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    try:
        kernel = xfuse.compile("h = x * 2; out = tanh(h) + 1;", extra_passes=name)
    except ValueError as error:
        assert str(error).startswith(f"extra_passes: '{name}' cannot run there"), error
        return
    want = np.tanh(x.astype(np.float64) * 2) + 1
    np.testing.assert_allclose(kernel(x=x), want, rtol=1e-6, atol=1e-6)


def test_source_must_be_text() -> None:
    with pytest.raises(TypeError, match="source must be the program's text \\(a str\\), got bytes"):
        xfuse.compile(b"out = x;")


def test_a_file_for_the_source_says_how_to_pass_its_text(gelu: Gelu) -> None:
    """A path was read as a program ("unexpected character '.'") or refused as a non-str."""
    with pytest.raises(
        ValueError,
        match=r"'examples/gelu\.ew' is a file name, not a program: .*"
        r"xfuse\.compile\(open\('examples/gelu\.ew'\)\.read\(\)\)",
    ):
        xfuse.compile("examples/gelu.ew")
    with gelu.path.open() as file:
        for source in (gelu.path, file):
            with pytest.raises(TypeError, match=r"got a \w+: pass the file's text, .*read_text"):
                xfuse.compile(source)  # type: ignore[arg-type]


def test_jit_checks_its_options_when_decorating() -> None:
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        xfuse.jit(threads=0)
    with pytest.raises(ValueError, match="fastmath must be .*, got 'quick'"):
        xfuse.jit(fastmath="quick")


def test_fast_fastmath_and_a_single_output_name_compile() -> None:
    """`fastmath="fast"` (LLVM's name for every flag) is accepted, as the docs show; a single
    string for `outputs` is one name, not one name per character."""
    kernel = xfuse.compile("h = x * 2; out = h + 1;", fastmath="fast", outputs="h")
    assert kernel.output_names == ("h",)
    assert "fast" in kernel.llvm_ir
    np.testing.assert_array_equal(kernel(x=np.arange(4, dtype=np.float32)), [0, 2, 4, 6])


def test_import_xfuse_loads_no_xdsl_numpy_or_dask() -> None:
    """`import xfuse` is cheap: the public names load on first use."""
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, xfuse; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'xdsl', 'numpy', 'dask'}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert imported == "[]"


def test_the_runtimes_dynamic_dim_is_xdsls() -> None:
    from xdsl.dialects.builtin import DYNAMIC_INDEX

    from xfuse.runtime import arrays

    assert arrays.DYNAMIC_INDEX == DYNAMIC_INDEX
