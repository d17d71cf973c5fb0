"""Measuring a program: xfuse's kernels against numpy (and peers) on this CPU.

    result = xfuse.bench("out = tanh(x) * y;", sizes=[1 << 16, 1 << 20])
    print(result.table())

A `Workload` is a program with random float32 inputs of n elements and its float64 reference; a
`Variant` is one way to compute it (numpy one op at a time, numpy with planned `out=` buffers,
xfuse's fused kernel, the bandwidth ceiling, a peer compiler); `measure` times a variant (median of
a few runs after a warm-up) and checks it against the reference; `measure_interleaved` times several
in rounds (`measure_workloads_interleaved`: of several workloads), each round running every variant
in turn, and keeps each round's median (the best round is the time; `timing.separable` tells whether
two variants differ beyond noise).

Traffic models, from xfuse's cost analysis at the measured size: "unfused" moves every op's
operands and result through memory, "fused" reads each input and writes each output once. The
bandwidth ceiling is a streaming kernel with the fused program's traffic and no work to speak of
(`x + b + r` for three inputs and one output), compiled by xfuse.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import numbers
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from xfuse.benchmarking import peers as peer_compilers
from xfuse.benchmarking.timing import format_duration, host_description, interleaved_medians
from xfuse.benchmarking.workload import Outputs, Variant, Workload
from xfuse.dialects import ew
from xfuse.dialects.dtypes import SHORT_DTYPE_NAMES, dtype_of, element_type_for, promote
from xfuse.dialects.ew import input_name
from xfuse.frontend.language import LINE_BREAK, EwSyntaxError
from xfuse.runtime.arrays import numpy_dtype
from xfuse.transforms.options import CpuMath
from xfuse.transforms.pipeline import apply_pipeline, only_function

_STATEMENT = re.compile(r"(?<![<>=!])=(?!=)|^\s*(?:input|output)\s+[A-Za-z_]", re.MULTILINE)
"""What only a program's statements hold: an assignment's `=` (not a comparison's: `x >= y` is an
expression), or a declaration (`input` followed by a name: `input * 2` reads an input so named,
as the language takes the keyword)."""


def program_source(expression: str) -> str:
    """`tanh(x) * y` -> `out = tanh(x) * y;` (a full program passes unchanged but for a missing
    last `;`, which goes after its last code, before any comment; one without code unchanged).
    Its text keeps its lines and columns (the parser's warnings, which are not relocated as
    errors are, pointed 2 lines up in a program after 2 blank lines)."""
    text = expression.rstrip()
    lines = LINE_BREAK.split(text)  # the parser's lines: a lone '\r' ends one too
    code = [line.partition("#")[0] for line in lines]
    if not any(line.strip() for line in code):
        return expression  # nothing to complete: the parser reports an empty program
    if not _STATEMENT.search("\n".join(code)):  # (a declaration may span lines)
        first = next(i for i, line in enumerate(code) if line.strip())
        indent = len(lines[first]) - len(lines[first].lstrip())
        lines[first] = f"{lines[first][:indent]}out = {lines[first][indent:]}"
    last = max(i for i, line in enumerate(lines) if line.partition("#")[0].strip())
    code, hash_, comment = lines[last].partition("#")
    if not code.rstrip().endswith(";"):
        lines[last] = f"{code.rstrip()};" + (f" {hash_}{comment}" if hash_ else "")
    breaks = [*LINE_BREAK.findall(text), ""]  # each line's own, kept
    return "".join(line + end for line, end in zip(lines, breaks, strict=True))


def _line_starts(text: str) -> list[int]:
    """Where each of `text`'s lines starts (the parser's lines: `LINE_BREAK`), and its end."""
    return [0, *(match.end() for match in LINE_BREAK.finditer(text)), len(text)]


def _program_offset(program: str, source: str, offset: int) -> int:
    """The offset in `program` of `offset` in `source`, its completion: where text was added,
    where it went in (`len(program)` past the end)."""
    matcher = difflib.SequenceMatcher(None, program, source, autojunk=False)
    for tag, start, _, source_start, source_end in matcher.get_opcodes():
        if source_start <= offset < source_end:
            return start + (offset - source_start) if tag == "equal" else start
    return len(program)


def located_in_program(error: EwSyntaxError, program: str, source: str) -> EwSyntaxError:
    """`error`, of `source` (`program_source(program)`), located in `program` itself: an error
    at text the completion added (`out = `, the last `;`) is where it went in. Lines are
    matched first, then characters within the lines that differ (the completion changes two:
    characters alone took quadratic time: 23.5 s for 2,000 lines, 58 KB; 2.4 ms so)."""
    program_starts, source_starts = _line_starts(program), _line_starts(source)
    offset = source_starts[error.line - 1] + error.column - 1

    def lines(text: str, starts: list[int]) -> list[str]:
        return [text[start:end] for start, end in itertools.pairwise(starts)]

    matcher = difflib.SequenceMatcher(
        None, lines(program, program_starts), lines(source, source_starts), autojunk=False
    )
    for _, first, last, source_first, source_last in matcher.get_opcodes():
        low, high = source_starts[source_first], source_starts[source_last]
        if low <= offset < high or offset == high == len(source):
            start = program_starts[first]
            part = program[start : program_starts[last]]
            program_offset = start + _program_offset(part, source[low:high], offset - low)
            break
    else:
        program_offset = len(program)
    message = error.message
    rest = LINE_BREAK.split(program[program_offset:])
    if message.endswith("found ';'") and not any(line.partition("#")[0].strip() for line in rest):
        # the `;` found is the completion's, after all the program's code: its end, to the user
        message = message.removesuffix("';'") + "end of input"
    return EwSyntaxError(message, program, program_offset, error.filename)


def _float64_reference(parsed: ModuleOp, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Every op's float64 `reference` on the inputs as stored, whatever dtypes the program
    (`parsed`, as the frontend made it) declares (a conversion is exact in float64)."""
    from xfuse.dialects import ew

    function = only_function(parsed)
    values: dict[SSAValue, np.ndarray] = {
        arg: arrays[str(input_name(arg))].astype(np.float64) for arg in function.args
    }
    for op in function.body.block.ops:
        if isinstance(op, func.ReturnOp):
            return tuple(values[v] for v in op.arguments)
        if isinstance(op, ew.ConstantOp):
            values[op.result] = np.float64(op.literal)
        else:
            kind = cast(type[ew.ElementwiseOp | ew.ConvertOp], type(op))
            values[op.results[0]] = kind.reference(*(values[v] for v in op.operands))
    raise AssertionError("no func.return")


def input_shapes(module: ModuleOp, n: int) -> dict[str, tuple[int, ...]]:
    """Each input's array shape for an iteration space of about `n` elements: flat `[?]` inputs
    get n; declared N-D ones rows x `ROW_LENGTH` (the lecture's d_ff, at most n), with
    `MIDDLE_SIZE` in each axis between (3-d and up, where n has room for rows of 64), static
    dims as declared (a `1` broadcasts: RoPE's tables `[t, 1, d]` over the heads) and the free
    ones sized for n with them (`x[t, 8]` at 2^12 is 512 x 8; `x[4, d]` 4 x 1024; `x[t, 1]` n x
    1), the axes dim names tie at one size, n's root among them (`x[t, t]` at 2^12: 64 x 64)."""

    args = only_function(module).args
    shapes = [ew.shape_of(a) for a in args]
    rank = max(map(len, shapes), default=0)
    fixed = ew.fixed_dims(shapes)  # (a static-1 axis too: `x[t, 1]` was rows of "columns")
    if rank <= 1:  # (a static `y[3]` fixes the `?` of `x` too: `exp(x) + y` at 3)
        return {str(input_name(a)): ew.bind_shape(a.type, (fixed.get(0, n),)) for a in args}
    middle_size = MIDDLE_SIZE if n >= 64 * MIDDLE_SIZE ** (rank - 2) else 1
    dims = [fixed.get(axis, middle_size) for axis in range(rank)]
    free_rows = 0 not in fixed
    if rank - 1 not in fixed:  # rows of d_ff where the rows are free, else all that n leaves
        columns = n // math.prod(dims[1:-1] if free_rows else dims[:-1])
        dims[-1] = max(1, min(columns, ROW_LENGTH) if free_rows else columns)
    if free_rows:
        dims[0] = max(1, n // math.prod(dims[1:]))
    for axes in ew.tied_axis_groups(args, rank):  # (`x[t, t]` at 4096: 64 x 64, not 1 x 1)
        given = [fixed[axis] for axis in axes if axis in fixed]
        rest = math.prod(size for axis, size in enumerate(dims) if axis not in axes)
        size = given[0] if given else max(1, round((n / max(rest, 1)) ** (1 / len(axes))))
        for axis in axes:
            dims[axis] = size
    return {str(input_name(a)): ew.bind_shape(a.type, tuple(dims)) for a in args}


ROW_LENGTH = 14336
"""The row length of N-D workloads: the lecture's d_ff."""

MIDDLE_SIZE = 8
"""The size of each axis between the first and the last of a 3-d or wider workload."""


def random_inputs(
    parsed: ModuleOp,
    shapes: dict[str, tuple[int, ...]],
    dtypes: dict[str, np.dtype[Any]],
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Standard normal inputs of the given shapes and dtypes; positive ones (0.5 to 2) where
    those give non-finite results (a `log` or `sqrt` of a negative number), judged on a probe."""
    rng = np.random.default_rng(seed)
    probe = {
        name: rng.standard_normal([min(d, 4096) for d in shape[-1:]])
        for name, shape in shapes.items()
    }
    with np.errstate(all="ignore"):
        results = _float64_reference(parsed, probe)
    normal = all(np.isfinite(r).all() for r in results)
    rng = np.random.default_rng(seed)
    return {
        name: (
            rng.standard_normal(shape, dtype=np.float32)
            if normal
            else rng.uniform(0.5, 2.0, shape).astype(np.float32)
        ).astype(dtypes[name])
        for name, shape in shapes.items()
    }


def prepare_workload(
    source: str,
    n: int,
    outputs: Sequence[str] | None = None,
    *,
    seed: int = 0,
    filename: str = "<source>",
) -> Workload:
    """Parse `source` (float32 flat inputs unless declared), make inputs of about `n` elements
    (`input_shapes`) and the float64 reference."""
    from xfuse.analysis.cost import CostOptions
    from xfuse.frontend.builder import FunctionBuilder
    from xfuse.frontend.language import ParsedProgram
    from xfuse.runtime.compiler import signature
    from xfuse.runtime.cost_driver import cost_program

    if n < 1:
        raise ValueError(f"size must be >= 1, got {n}")
    program = ParsedProgram(source, outputs, FunctionBuilder(), filename)
    parsed = program.module
    module = apply_pipeline(parsed, "ew-optimize")
    function = only_function(module)
    input_names = tuple(str(input_name(a)) for a in function.args)
    output_names = tuple(program.output_names)
    shapes = input_shapes(parsed, n)
    dtypes = {str(p.name): numpy_dtype(p.dtype) for p in signature(parsed, outputs)[0]}
    arrays = random_inputs(parsed, shapes, dtypes, seed)
    problem = np.broadcast_shapes(*shapes.values()) if shapes else (n,)
    n = math.prod(problem)
    # priced on these arrays: an undeclared input beside a declared [t, d] one is [d] here, as
    # the kernel takes it, not of the problem's rank (GB/s and the ceiling's traffic were off)
    undeclared = set(input_names) - set(program.declared_inputs)
    cost = cost_program(
        source,
        CostOptions(shape=problem, dtype="float32"),
        filename=filename,
        input_shapes={name: arrays[name].shape for name in sorted(undeclared)},
    )
    return Workload(
        source=source,
        outputs=tuple(outputs) if outputs is not None else None,
        module=module,
        input_names=input_names,
        output_names=output_names,
        arrays=arrays,
        reference=_float64_reference(parsed, arrays),
        n=n,
        fused_bytes=cost.fused.totals.bytes,
        unfused_bytes=cost.unfused.totals.bytes,
        fused_kernels=cost.fused.totals.kernels,
        # (an input is none, though a kernel writes its copy: `output y, x;`)
        fused_intermediates=len(
            ({a.name for k in cost.fused.kernels for a in k.writes} - set(input_names))
            & {a.name for k in cost.fused.kernels for a in k.reads}
        ),
        filename=filename,
    )


def ceiling_source(
    input_names: Sequence[str],
    output_names: Sequence[str],
    conversions: Mapping[str, str] | None = None,
) -> str:
    """A streaming program with the fused traffic: each output the sum of all inputs, converted
    where `conversions` names an output's dtype (`{"out": "bf16"}`: the sum of bf16 inputs and
    an f32 bias is f32, the program's output bf16)."""
    if not input_names:
        raise ValueError("the program reads no inputs: there is no bandwidth ceiling to measure")
    total = " + ".join(input_names) if len(input_names) > 1 else f"{input_names[0]} * 2"
    converted = conversions or {}
    return "".join(
        f"{named} = {converted[name]}({total});\n" if name in converted else f"{named} = {total};\n"
        for name, named in zip(
            output_names, ceiling_outputs(input_names, output_names), strict=True
        )
    )


def ceiling_outputs(input_names: Sequence[str], output_names: Sequence[str]) -> list[str]:
    """The ceiling's output names: the program's, but where an output is an input (`output x`),
    which the ceiling cannot assign, that name with `_out` (and `_` more until unused)."""
    taken = {*input_names, *output_names}
    names = []
    for name in output_names:
        if name in input_names:
            renamed = f"{name}_out"
            while renamed in taken:
                renamed += "_"
            taken.add(renamed)
            name = renamed
        names.append(name)
    return names


def output_dtypes(workload: Workload) -> dict[str, np.dtype[Any]]:
    """Each output's numpy dtype as the program stores it."""
    result_types = only_function(workload.module).function_type.outputs.data
    return {
        name: numpy_dtype(dtype_of(ew.element_type(type_)))
        for name, type_ in zip(workload.output_names, result_types, strict=True)
    }


def ceiling_bytes(workload: Workload) -> int:
    """Bytes the ceiling kernel moves: every input read once and every output written at the
    inputs' broadcast shape in its dtype. The fused program's traffic where each of its outputs
    has that shape and reads every input; otherwise not (a `[d]` output, an unused input)."""
    arrays = workload.arrays.values()
    elements = math.prod(np.broadcast_shapes(*(a.shape for a in arrays)))
    written = sum(dtype.itemsize for dtype in output_dtypes(workload).values())
    return sum(a.nbytes for a in arrays) + elements * written


def ceiling_conversions(workload: Workload) -> dict[str, str]:
    """The outputs whose dtype differs from what the sum of the inputs promotes to, each with
    the conversion (`bf16`) that stores it as the program does (the same bytes written); none
    for a program without inputs (nothing to sum: `ceiling_source` says it has no ceiling)."""
    if not workload.arrays:
        return {}
    summed = functools.reduce(
        promote, (element_type_for(a.dtype) for a in workload.arrays.values())
    )
    return {
        name: SHORT_DTYPE_NAMES[dtype.name]
        for name, dtype in output_dtypes(workload).items()
        if element_type_for(dtype) != summed
    }


@dataclass(frozen=True)
class Measurement:
    variant: str
    n: int
    round_times_s: tuple[float, ...]
    """The median time of each round (one round for `measure`)."""
    traffic: str
    """Its traffic model: "unfused" or "fused"."""
    bytes: int
    """Bytes its traffic model moves."""
    max_error: float | None
    """Largest absolute difference from the float64 reference; None when not checked."""

    @property
    def time_s(self) -> float:
        """The best round's median: the time the variant takes when the machine lets it."""
        return min(self.round_times_s)

    @property
    def bandwidth(self) -> float:
        """Effective bytes per second under its traffic model."""
        return self.bytes / self.time_s if self.time_s else math.inf


def _as_tuple(outputs: Outputs) -> tuple[np.ndarray, ...]:
    return outputs if isinstance(outputs, tuple) else (outputs,)


def max_error(got: Outputs, want: Sequence[np.ndarray]) -> float:
    """Largest |got - want| over all outputs, where the reference is finite (NaN if got is NaN)."""
    worst = 0.0
    for array, reference in zip(_as_tuple(got), want, strict=True):
        finite = np.isfinite(reference)
        with np.errstate(invalid="ignore"):  # (inf - inf where the reference is not finite)
            difference = np.abs(array.astype(np.float64) - reference)
        error = float(np.max(difference, where=finite, initial=0.0))
        if math.isnan(error):  # (Python's max(0.0, nan) is 0.0: a NaN result read as exact)
            return math.nan
        worst = max(worst, error)
    return worst


SETTLING_SECONDS = 1.0
"""The most a variant's untimed settling calls take (`Variant.settling_calls`): a kernel slower
than ~20 ms a call is timed before its choices settle, where they change its time little
(libm's scalar GELU at 2^24, 250 ms a call, compute-bound; `xfuse lecture` took 32 s settling it
49 times, 14 s before)."""


def settle(variant: Variant) -> None:
    """Run `variant`'s settling calls, untimed, for at most `SETTLING_SECONDS`."""
    start = time.perf_counter()
    for _ in range(variant.settling_calls):
        variant.run()
        if time.perf_counter() - start > SETTLING_SECONDS:
            return


def measure(workload: Workload, variant: Variant, repeat: int = 3) -> Measurement:
    """Check the first (warm-up) run against the reference, then time `repeat` more (median)."""
    (measurement,) = measure_interleaved(workload, [variant], rounds=1, repeat=repeat)
    return measurement


def measure_interleaved(
    workload: Workload, variants: Sequence[Variant], rounds: int, repeat: int
) -> list[Measurement]:
    """Check each variant's first (warm-up) run against the reference, then time them all in
    `rounds` rounds of `repeat` runs each, every round running each variant in turn."""
    (measurements,) = measure_workloads_interleaved([(workload, variants)], rounds, repeat)
    return measurements


def measure_workloads_interleaved(
    cells: Sequence[tuple[Workload, Sequence[Variant]]],
    rounds: int,
    repeat: int,
    warmup: int = 0,
) -> list[list[Measurement]]:
    """`measure_interleaved` of several workloads at once, each round running every variant of
    every workload in turn (after `warmup` untimed runs each): a slow spell of the host then
    lands on one round of many variants, not on every round of one workload."""
    errors = [
        [
            max_error(first, workload.reference) if variant.checked else None
            for variant, first in ((v, v.run()) for v in variants)
        ]
        for workload, variants in cells
    ]
    for _, variants in cells:
        for variant in variants:
            settle(variant)
    runs = [variant.run for _, variants in cells for variant in variants]
    times = iter(interleaved_medians(runs, rounds, repeat, warmup=warmup))
    return [
        [
            Measurement(
                variant.name,
                workload.n,
                next(times),
                variant.traffic,
                workload.fused_bytes if variant.traffic == "fused" else workload.unfused_bytes,
                error,
            )
            for variant, error in zip(variants, cell_errors, strict=True)
        ]
        for (workload, variants), cell_errors in zip(cells, errors, strict=True)
    ]


# ---------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------


def numpy_per_op(workload: Workload) -> Variant:
    from xfuse.benchmarking.baselines import compile_numpy

    program = compile_numpy(workload.module)
    arrays = [workload.arrays[name] for name in workload.input_names]
    return Variant("numpy per-op", lambda: program(*arrays), "unfused")


def numpy_planned(workload: Workload) -> Variant:
    from xfuse.benchmarking.baselines import compile_numpy_planned

    program = compile_numpy_planned(workload.module)
    arrays = [workload.arrays[name] for name in workload.input_names]
    return Variant("numpy planned", lambda: program(*arrays), "unfused")


def _prepared(kernel: Any, workload: Workload) -> Callable[[], Outputs]:
    """The kernel's checked-once call writing into outputs it allocates once (its arrays by
    position: an input named `out` given as `out=` is the keyword of the output buffers)."""
    return kernel.prepare(*(workload.arrays[p.name] for p in kernel.function.inputs))


def xfuse_fused(workload: Workload, math: CpuMath = "approx", threads: int = 1) -> Variant:
    from xfuse.runtime.compiler import compile
    from xfuse.runtime.split_calls import SETTLING_CALLS

    kernel = compile(
        workload.source, workload.outputs, math=math, threads=threads, filename=workload.filename
    )
    suffix = f", {threads} threads" if threads > 1 else ""
    run = _prepared(kernel, workload)
    return Variant(f"xfuse fused {math}{suffix}", run, "fused", settling_calls=SETTLING_CALLS)


def bandwidth_ceiling(workload: Workload, threads: int = 1) -> Variant:
    """The streaming kernel of `ceiling_source`, compiled by xfuse with normal stores: the
    fastest the fused program's bytes move through the caches on this machine (inputs and
    outputs as the program's). A program whose large calls use non-temporal stores
    (`Options.streaming`) can beat it."""
    from xfuse.runtime.compiler import compile
    from xfuse.runtime.split_calls import SETTLING_CALLS

    # (declared: an input may have a function's name, RoPE's `cos` and `sin`)
    source = f"input {', '.join(workload.input_names)};\n" + ceiling_source(
        workload.input_names, workload.output_names, ceiling_conversions(workload)
    )
    arrays = workload.arrays
    kernel = compile(
        source,
        ceiling_outputs(workload.input_names, workload.output_names),
        threads=threads,
        dtype={name: a.dtype for name, a in arrays.items()},
        # (dynamic sizes but the broadcast 1s: a static length would not split over threads)
        shapes={name: tuple(1 if d == 1 else None for d in a.shape) for name, a in arrays.items()},
        streaming=False,
    )
    settling = SETTLING_CALLS if threads > 1 else 0  # (its stores are normal: no other choice)
    run = _prepared(kernel, workload)
    return Variant("bandwidth ceiling", run, "fused", checked=False, settling_calls=settling)


# ---------------------------------------------------------------------------------------------
# A size sweep: `xfuse.bench`
# ---------------------------------------------------------------------------------------------

DEFAULT_SIZES: tuple[int, ...] = tuple(1 << k for k in range(12, 25, 2))
"""2^12, 2^14, ..., 2^24 elements."""


@dataclass(frozen=True)
class BenchRow:
    n: int
    """The elements measured: the size asked for, or the workload's shape's for a program of
    `[t, d]` or static dims (`prepare_workload`)."""
    variant: str
    time_s: float
    bandwidth: float
    """Effective bytes per second: the fused program's traffic (the least any variant must
    move) over the time."""
    of_ceiling: float | None
    """The bandwidth ceiling's time over this time; None where the ceiling moves other bytes
    than the program (an unused input, a `[d]` or 0-d output: `ceiling_bytes`)."""
    speedup: float
    """numpy per-op's time over this time."""
    max_error: float | None


@dataclass(frozen=True)
class BenchResult:
    source: str
    storage: str
    """The dtypes of the inputs and outputs as stored: `float32`, or `x, r bfloat16; b float32 ->
    out bfloat16` when they differ."""
    math: str
    threads: int
    repeat: int
    rows: tuple[BenchRow, ...]
    skipped: tuple[str, ...]
    """Peers that could not run, with the reason."""
    versions: tuple[str, ...] = ()
    """Each peer asked for with its installed version: `numba 0.68.1`."""
    host: str = ""
    """The host it ran on (`host_description`: CPU, vector width, load average)."""

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(row.n for row in self.rows))

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(row.variant for row in self.rows))

    def row(self, n: int, variant: str) -> BenchRow:
        """The row of size `n` (an element count of `sizes`) and `variant`; KeyError naming
        both lists where there is none (it was an unpacking error)."""
        found = [r for r in self.rows if r.n == n and r.variant == variant]
        if not found:
            raise KeyError(
                f"no row of n = {n!r} and variant {variant!r}: sizes {list(self.sizes)}, "
                f"variants {list(self.variants)}"
            )
        return found[0]

    def table(self) -> str:
        """The sweep as a Markdown table."""
        lines = [
            "| n | variant | time | GB/s | of ceiling | vs numpy per-op | max error |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for r in self.rows:
            error = "-" if r.max_error is None else f"{r.max_error:.1e}"
            lines.append(
                f"| {size_text(r.n)} | {r.variant} | "
                f"{format_duration(r.time_s)} | {r.bandwidth / 1e9:.1f} | {share(r.of_ceiling)} | "
                f"{r.speedup:.1f}x | {error} |"
            )
        return "\n".join(lines)


def size_text(n: int) -> str:
    """An element count as the tables give it: `2^20` for a power of two, else `57,344`."""
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else f"{n:,}"


def share(of_ceiling: float | None) -> str:
    """A row's share of the ceiling as a percentage, `-` where it has none (`BenchRow`)."""
    return "-" if of_ceiling is None else f"{of_ceiling:.0%}"


def describe_storage(workload: Workload) -> str:
    """The storage dtypes of a workload's inputs and outputs, grouped by dtype."""

    def grouped(named: Mapping[str, np.dtype[Any]]) -> str:
        names: dict[str, list[str]] = {}
        for name, dtype in named.items():
            names.setdefault(np.dtype(dtype).name, []).append(name)
        return "; ".join(f"{', '.join(group)} {dtype}" for dtype, group in names.items())

    inputs = {name: a.dtype for name, a in workload.arrays.items()}
    outputs = output_dtypes(workload)
    dtypes = {*inputs.values(), *outputs.values()}
    if len(dtypes) == 1:
        return np.dtype(dtypes.pop()).name
    return f"{grouped(inputs)} -> {grouped(outputs)}"


def _element_counts(sizes: object) -> list[int]:
    """`bench`'s `sizes` as ints: a sequence (a numpy array too) of integers >= 1, numpy's
    among them (`2 ** np.arange(12, 14)` was "truth value ... ambiguous", `[np.int64(4096)]`
    refused); ValueError naming what is wrong otherwise."""
    if isinstance(sizes, numbers.Integral):  # iterating it raised "'int' object is not iterable"
        raise ValueError(f"sizes must be a list of element counts, got {sizes!r}: [{sizes!r}]")
    counts = list(sizes) if isinstance(sizes, Iterable) and not isinstance(sizes, str) else None
    if not counts or not all(
        isinstance(n, numbers.Integral) and not isinstance(n, bool | np.bool_) and n >= 1
        for n in counts
    ):
        raise ValueError(f"sizes must be a non-empty list of element counts >= 1, got {sizes!r}")
    return [int(cast(numbers.Integral, n)) for n in counts]


def _progress_context(progress: Callable[[str], Any] | None, text: str) -> Any:
    """`progress(text)`'s context manager where it returns one (the CLI's spinner), else a
    null one: a plain callback (`progress=print`) returned None, "does not support the context
    manager protocol"."""
    from contextlib import AbstractContextManager, nullcontext

    given = progress(text) if progress is not None else None
    return given if isinstance(given, AbstractContextManager) else nullcontext()


def bench(
    program: str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    outputs: Sequence[str] | None = None,
    threads: int = 1,
    math: CpuMath = "approx",
    peers: bool | Sequence[str] = False,
    repeat: int = 3,
    progress: Callable[[str], Any] | None = None,
    filename: str | os.PathLike[str] = "<source>",
) -> BenchResult:
    """Time `program` (an `.ew` program or one expression) compiled by xfuse against numpy op
    by op and the bandwidth ceiling at each size; `peers=True` adds every installed peer
    (numexpr, numba, jax, torch, torch.compile, upstream MLIR), or name them (one name, or a
    list). `progress(text)` is called before each measurement (a context manager it returns
    lasts while it runs: the CLI's spinner); `filename` names the program in its errors.
    Returns the table of times, GB/s, ratios and errors, the peers' versions and the host."""
    from xfuse.frontend.filenames import check_filename
    from xfuse.runtime.compiler import (
        MATH_CHOICES,
        check_integer,
        check_outputs,
        check_source,
        check_threads,
    )

    check_source(program, "xfuse.bench")
    filename = check_filename(filename)
    if math not in MATH_CHOICES:
        raise ValueError(f"math must be {' or '.join(map(repr, MATH_CHOICES))}, got {math!r}")
    threads = check_threads(threads)
    # (True was 1 and written `"repeat": true`; 0 failed once every variant had run)
    repeat = check_integer("repeat", repeat, "an integer >= 1", lambda value: value >= 1)
    sizes = _element_counts(sizes)
    outputs = check_outputs(outputs)
    # the parser drops a leading byte order mark and counts columns without it: so do errors
    # located in `program` (they were one column off on its first line)
    program = program.removeprefix("\ufeff")
    source = program_source(program)
    host = host_description()  # (the load average before the run's own)
    if isinstance(peers, str):  # one name (it was taken for a list of one-letter peers)
        peers = [peers]
    if isinstance(peers, np.bool_):  # (as compile's bool options take one)
        peers = bool(peers)
    if not isinstance(peers, bool | None):  # names (1 was "'int' object is not iterable")
        names = list(peers) if isinstance(peers, Iterable) else [peers]
        if not all(isinstance(name, str) for name in names):
            raise TypeError(
                f"peers must be True, False, a peer's name or a list of them, got {peers!r}"
            )
        peers = names
    if progress is not None and not callable(progress):  # (it failed at the first measurement)
        raise TypeError(f"progress must be a function of a text, or None, got {progress!r}")
    peer_names = peer_compilers.available_peers() if peers is True else list(peers or [])
    unknown = set(peer_names) - set(peer_compilers.PEERS)
    if unknown:
        raise ValueError(
            f"unknown peer(s) {', '.join(sorted(unknown))}: peers are "
            f"{', '.join(peer_compilers.PEERS)}"
        )
    builders: list[tuple[str, Callable[[Workload], Variant]]] = [
        ("numpy per-op", numpy_per_op),
        ("bandwidth ceiling", functools.partial(bandwidth_ceiling, threads=threads)),
        (f"xfuse {math}", functools.partial(xfuse_fused, math=math, threads=threads)),
    ]
    builders += [
        (name, functools.partial(peer_compilers.BUILDERS[name], threads=threads))
        for name in peer_names
    ]
    rows: list[BenchRow] = []
    skipped: dict[str, str] = {}
    storage = ""
    for n in sizes:
        try:
            workload = prepare_workload(source, n, outputs, filename=filename)
        except EwSyntaxError as error:  # (located in the completed source)
            raise located_in_program(error, program, source) from None
        if any(row.n == workload.n for row in rows):
            continue  # a size asked for twice, or two that make the same workload
        storage = storage or describe_storage(workload)
        measured: list[Measurement] = []
        for label, build in builders:
            if label in skipped:
                continue
            with _progress_context(progress, f"n = {n:,}: {label}"):
                try:
                    measured.append(measure(workload, build(workload), repeat))
                except peer_compilers.PeerUnsupported as reason:
                    skipped[label] = str(reason)
                except Exception as error:  # a peer's own failure skips that peer, with why
                    if label not in peer_names:
                        raise
                    skipped[label] = f"failed: {type(error).__name__}: {error}".split("\n")[0]
        numpy_time, ceiling_time = measured[0].time_s, measured[1].time_s
        same_traffic = ceiling_bytes(workload) == workload.fused_bytes
        rows += [
            BenchRow(
                workload.n,
                m.variant,
                m.time_s,
                workload.fused_bytes / m.time_s,
                ceiling_time / m.time_s if same_traffic else None,
                numpy_time / m.time_s,
                m.max_error,
            )
            for m in measured
        ]
    return BenchResult(
        source,
        storage,
        math,
        threads,
        repeat,
        tuple(rows),
        tuple(f"{name}: {why}" for name, why in skipped.items()),
        tuple(f"{name} {peer_compilers.peer_version(name)}" for name in peer_names),
        host,
    )
