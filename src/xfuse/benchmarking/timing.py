"""Wall-clock timing for benchmarks: medians of a few runs after a warm-up run, and rounds of them
interleaved across variants for comparisons that survive a noisy machine."""

from __future__ import annotations

import array
import ctypes
import functools
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from xfuse.codegen.native import NativeModule
    from xfuse.runtime.kernel import PreparedCall


def median_seconds(
    run: Callable[[], object], repeat: int = 3, warmup: int = 1, calls: int = 1
) -> float:
    """Median wall time of one call of `run` over `repeat` samples, after `warmup` untimed calls.

    Each sample times `calls` calls in a row and divides: the timer's own cost (reading the clock
    twice, ~0.1 us) is then not counted as a short call's (a few us in cache).
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in itertools.repeat(None, calls):
            run()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def processor_name(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> str | None:
    """The processor's own name (its first "model name"), None where there is none to read."""
    try:
        with cpuinfo_path.open() as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return None


def host_description() -> str:
    """The host as benchmarks describe it: the target CPU (LLVM's name, which LLVM guesses from
    the features where it does not know the CPUID model, as in some VMs, then the processor's
    own), its CPUs (and how many this process may run on, where fewer: `taskset`), its widest
    float vectors, how it rounds to bf16 (the LLM rows depend on it), load average."""
    from xfuse.codegen.native import host_cpu

    cpu = host_cpu()
    name = processor_name()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    cpus, usable = os.cpu_count(), len(os.sched_getaffinity(0))
    return (
        f"{cpu.name}{f' ({name})' if name else ''}, {cpus} CPUs"
        f"{f' ({usable} usable by this process)' if usable != cpus else ''}, "
        f"widest float vectors {cpu.float_lanes * 32} bits (<{cpu.float_lanes} x float>), "
        f"bf16 rounding in {'hardware' if cpu.rounds_bf16 else 'software'}, load average {load}"
    )


def host_summary() -> str:
    """The host line benchmarks print first (`host_description`)."""
    return f"host: {host_description()}"


def three_digits(value: float) -> str:
    """`168`, `10.3`, `0.962`, `0.00123`, `1235`: three significant digits (all of a number's
    integer digits), never an exponent. The decimals are those of the value rounded to three
    digits: 99.96 is `100` (it was `100.0`), 0.99996 `1.00`."""
    rounded = float(f"{value:.3g}")
    decimals = max(0, 2 - math.floor(math.log10(rounded))) if rounded > 0 else 0
    return f"{value:.{decimals}f}"


def format_duration(seconds: float) -> str:
    """Three significant digits: `168 ms`, `10.3 ms`, `0.962 ms`, `26.1 us`; the unit is the
    rounded time's (99.96 us is `0.100 ms`, 0.99996 s `1.00 s`)."""
    rounded = float(f"{seconds:.3g}")
    if rounded >= 1:
        return f"{three_digits(seconds)} s"
    if rounded >= 1e-4:
        return f"{three_digits(seconds * 1e3)} ms"
    return f"{three_digits(seconds * 1e6)} us"


def milliseconds(seconds: float) -> str:
    """`seconds` in milliseconds to three significant digits, no exponent (a fixed number of
    decimals printed a short time as 0.00 beside its non-zero ratios)."""
    return three_digits(seconds * 1e3)


def interleaved_medians(
    runs: Sequence[Callable[[], object]],
    rounds: int,
    repeat: int,
    calls: int = 1,
    warmup: int = 0,
) -> list[tuple[float, ...]]:
    """Per run, the median wall time of a call over `repeat` samples (of `calls` calls each,
    after `warmup` untimed calls: `median_seconds`) in each of `rounds` rounds.

    Every round times each run in turn, so a slow spell of the machine (another process, a
    frequency change) lands on all of them rather than on whichever ran then, each round from
    the next run on: the run after another paid for the state that one leaves (the lecture's
    libm kernel of RoPE, always timed after numpy's, came out slower than its identical approx
    twin at 2^12, by a gap its rank test separated).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    medians: list[list[float]] = [[] for _ in runs]
    for round_ in range(rounds):
        start = round_ % len(runs) if runs else 0
        for index in [*range(start, len(runs)), *range(start)]:
            medians[index].append(median_seconds(runs[index], repeat, warmup=warmup, calls=calls))
    return [tuple(times) for times in medians]


SEPARATION_LEVEL = 0.05
"""How likely `separable` may call two timings of the same code different."""


def separable(a: Sequence[float], b: Sequence[float], level: float = SEPARATION_LEVEL) -> bool:
    """Whether two timings (each a few round medians) differ beyond noise: an exact two-sided
    Mann-Whitney U test at `level`.

    U counts the pairs of rounds (one of each) where `a`'s is slower (a tie counts half). If the
    two were the same code their rounds would be exchangeable, every split of the pooled rounds
    into groups of len(a) and len(b) as likely as the one measured; the timings are separable
    when at most a share `level` of those splits gives a U as far from its mean. Ranks, not
    times: a round slowed by another process counts by how many of the other's rounds it
    passes, not by how much. With 5 rounds each, U <= 2 or >= 23 of 25 separates; fewer than 4
    rounds each can never reach 5% (with 3, the most extreme split is 1 in 10).
    """
    pairs = len(a) * len(b)
    if not pairs:
        return False
    # U of a split is the rank sum of its `a` rounds less len(a) * (len(a) + 1) / 2, with tied
    # rounds at the mean of their ranks (a tie then counts half): one sum per split instead of
    # len(a) * len(b) comparisons (the lecture's tests spent seconds in the pairwise count).
    pooled = np.asarray([*a, *b], dtype=np.float64)
    below = (pooled[None, :] < pooled[:, None]).sum(axis=1)
    tied = (pooled[None, :] == pooled[:, None]).sum(axis=1)
    ranks = below + (tied + 1) / 2
    splits = np.array(list(itertools.combinations(range(len(pooled)), len(a))))
    distances = np.abs(ranks[splits].sum(axis=1) - len(a) * (len(a) + 1) / 2 - pairs / 2)
    observed = distances[0]  # the first split is the measured one: `a`'s rounds first
    as_far = np.count_nonzero(distances >= observed - 1e-9)
    return bool(as_far / len(splits) <= level)


NATIVE_LOOP = """
define void @drive(ptr %entry, ptr %words, i64 %calls) {
start:
  br label %loop
loop:
  %i = phi i64 [0, %start], [%next, %loop]
  call void %entry(ptr %words)
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %calls
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""
"""Calls a packed entry on its argument words `calls` times in a row, with no Python between."""


@functools.cache
def native_loop() -> tuple[NativeModule, Callable[[int, int, int], None]]:
    """`NATIVE_LOOP` compiled (the module, to keep it alive) and callable (GIL released)."""
    from xfuse.codegen.native import compile_llvm_ir  # (LLVM: not for every benchmark)

    native = compile_llvm_ir(NATIVE_LOOP)
    drive = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
    return native, drive(native.address("drive"))


def native_calls(prepared: PreparedCall, calls: int) -> Callable[[], None]:
    """`calls` calls of the kernel alone, its packed entry on `prepared`'s arguments, from
    `NATIVE_LOOP` (no Python between: what a kernel's loop costs, in cache a fraction of the
    prepared call's ~1 us)."""
    assert prepared.native_call is not None, "the call is one native call"
    entry, arguments = prepared.native_call
    words = array.array("Q", arguments)
    _, drive = native_loop()

    def run(owner: object = prepared) -> None:
        """`owner`: the prepared call, which keeps the arrays that `words` point into alive."""
        drive(entry, words.buffer_info()[0], calls)

    return run
