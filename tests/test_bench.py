"""`xfuse bench` and `xfuse.benchmarking.bench`: tiny sizes, numbers checked, no times asserted."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xfuse
from xfuse.benchmarking import bench, peers, timing
from xfuse.benchmarking.assembly import MASKED_STORE, hot_loop, hot_loop_mnemonics
from xfuse.benchmarking.timing import (
    interleaved_medians,
    median_seconds,
    milliseconds,
    separable,
)
from xfuse.codegen.native import LONG_BODY_INTERLEAVE, host_cpu, libmvec_loaded
from xfuse.dialects import ew
from xfuse.frontend.language import LINE_BREAK, EwSyntaxError, parse_program
from xfuse.runtime.split_calls import SETTLING_CALLS
from xfuse.tools import bench_cmd
from xfuse.tools.bench_cmd import bandwidth_figure, parse_sizes, program_title
from xfuse.tools.cli import main
from xfuse.tools.lecture_cmd import parse_size

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import Gelu


EVERY_OP = """\
s = sigmoid(x) + relu(y) * abs(x) - max(x, y) / 3;
t = min(exp(neg(y)), sqrt(abs(x)) + rsqrt(abs(y) + 1)) + pow(abs(x), 1.5) + log(abs(y) + 1);
u = select(x < y, x, y) * (x <= 0.5) + select(x > y, 1, x) * (x >= y) + select(x == y, y, 2);
v = floor(x * 3) + ceil(y * 3) - trunc(x * 5) + rint(y * 5);
w = sin(x) + cos(y) + tan(x / 4) + asin(x / (1 + abs(x))) + acos(y / (1 + abs(y))) + atan(x);
w = w + sinh(y) + cosh(x) + asinh(y) + acosh(1 + abs(x)) + atanh(y / (2 + abs(y)));
w = w + exp2(x) + expm1(y) + log2(abs(x) + 1) + log10(abs(y) + 1) + cbrt(x) + atan2(x, y);
w = w + copysign(x, y);
out = tanh(s) * t + erf(x) + softplus(y) - log1p(abs(x)) + select(x != y, u, 0) + v + w;
"""


def test_sizes() -> None:
    assert parse_size("2^20") == parse_size("1<<20") == parse_size("1048576") == 1 << 20
    assert parse_sizes("2^12..2^18") == [1 << 12, 1 << 14, 1 << 16, 1 << 18]
    assert parse_sizes("4096,2^10") == [4096, 1024]
    with pytest.raises(ValueError):
        parse_size("0")


def test_program_source() -> None:
    assert bench.program_source("tanh(x) * y") == "out = tanh(x) * y;"
    assert bench.program_source("z = x + 1;") == "z = x + 1;"
    # a missing last `;` goes after the last code, never into a comment
    assert bench.program_source("z = x + 1 # one") == "z = x + 1; # one"
    assert bench.program_source("z = x + 1\n# end\n") == "z = x + 1;\n# end"
    # no code: left for the parser to call empty (it was `out =;`, "expected an expression")
    assert bench.program_source("# only a comment\n") == "# only a comment\n"
    assert bench.program_source("# x = y\nx + 1") == "# x = y\nout = x + 1;"
    # lines and columns kept: `out = ` goes before the first code, after its indentation
    assert bench.program_source("\n\n  tanh(x)\n") == "\n\n  out = tanh(x);"
    assert bench.program_source("\n  y = x * 2\n") == "\n  y = x * 2;"
    # a comparison's `=` is no assignment (`x >= y` was taken for a program); a declaration is
    # a program without one (`out = input x;` was an error pointing at text not in the file)
    for comparison in ("x >= y", "x <= 1", "x == y", "x != 1", "relu(x) * (x >= 0)"):
        assert bench.program_source(comparison) == f"out = {comparison};"
    assert bench.program_source("input x; output x;") == "input x; output x;"
    assert bench.program_source("input_gain * x") == "out = input_gain * x;"
    # an input named `input` or `output` (the keyword only where a name follows it)
    for expression in ("input * 2", "output - input", "input\n* 2"):
        assert bench.program_source(expression) == f"out = {expression};"
    assert bench.program_source("input\nx;") == "input\nx;"


@pytest.mark.parametrize(
    ("program", "line", "column"),
    [
        ("tanh(x) +* y\n", 1, 10),
        ("tanh(x\n", 1, 7),
        ("\n\n  # c\n  tanh(x)\n  * $ y\n", 5, 5),
        # after a byte order mark, columns count from the text, as compile's (1:25 was the '+')
        ("\ufeffinput x; out = exp(x) +* 2;", 1, 24),
        ("\ufefftanh(x) +* y\n", 1, 10),
    ],
)
def test_errors_of_an_expression_are_located_in_it(program: str, line: int, column: int) -> None:
    """The error quoted the completed program (`out = tanh(x) +* y;`, not the file's line) at
    its columns (1:16 for the '*' at column 10; the added ';' for a missing ')')."""
    with pytest.raises(EwSyntaxError) as error:
        bench.bench(program, sizes=[16], repeat=1, filename="e.ew")
    assert (error.value.filename, error.value.line, error.value.column) == ("e.ew", line, column)
    assert error.value.source_line == LINE_BREAK.split(program.removeprefix("\ufeff"))[line - 1]


@pytest.mark.parametrize(
    ("program", "found"),
    [("(x + ", "end of input"), ("(x + # more\n", "end of input"), ("(x + ;", "';'")],
)
def test_an_error_at_the_completions_semicolon_says_end_of_input(program: str, found: str) -> None:
    """`(x + ` said "found ';'", a `;` the user never wrote (`xfuse cost` of the same: "found
    end of input"); one the user wrote is named."""
    with pytest.raises(EwSyntaxError) as error:
        bench.bench(program, sizes=[16], repeat=1)
    assert error.value.message == f"expected an expression, found {found}"


@pytest.mark.parametrize(
    ("program", "line", "column"),
    [("\n\n# c\ninput h[?];\nout = hh * h\n", 5, 7), ("    input h[?]; out = hh * h;", 1, 23)],
)
def test_name_warnings_of_a_program_are_located_in_it(program: str, line: int, column: int) -> None:
    """The completion stripped the text: the warning named line 3 (a comment) for the `hh` of
    line 5, column 19 for 23 (where `xfuse.compile` of the same text says)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench.bench(program, sizes=[16], repeat=1, filename=f"w{line}.ew")
    shown = {(w.filename, w.lineno, str(w.message).partition(":")[0]) for w in caught}
    assert shown == {(f"w{line}.ew", line, f"column {column}")}


def test_a_sweep_reports_the_elements_it_measured_and_no_share_of_another_traffic() -> None:
    """A `[t, d]` program measures whole rows of 14336 (it reported the size asked for, of which
    bytes and GB/s disagreed); a size asked twice, or two that make one workload, is measured
    once; a ceiling that moves other bytes than the program (here the unused z) is no bound: no
    share of it (155% of it was quoted)."""
    rows = bench.bench(
        "input x[t, d]; input b[d]; y = x * 2 + b;", sizes=[20000, 20000, 28000], repeat=1
    ).rows
    assert {row.n for row in rows} == {bench.ROW_LENGTH}
    assert len(rows) == 3  # numpy, the ceiling, xfuse
    assert all(row.of_ceiling is not None for row in rows)
    unused = bench.bench("input x, z; y = x * 2;", sizes=[4096], repeat=1)
    assert [row.of_ceiling for row in unused.rows] == [None, None, None]
    assert "| 2^12 | xfuse fused approx |" in unused.table() and "| - |" in unused.table()


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_program_source_splits_lines_as_the_parser_does(newline: str) -> None:
    r"""Lines were split at '\n' only: in an old Mac file (lone '\r') a comment on the first line
    took the rest of the file, and the last `;` went nowhere ("expected ';'" from the parser)."""
    lines = ["y = x * 2;  # double", "z = y + 1", "# end"]
    source = bench.program_source(newline.join(lines))
    assert source == newline.join(["y = x * 2;  # double", "z = y + 1;", "# end"])
    assert xfuse.compile(source)(np.float32([1, 2])).tolist() == [3, 5]
    assert bench.program_source(f"# x = y{newline}x + 1") == f"# x = y{newline}out = x + 1;"


def test_workload_traffic_and_reference(gelu: Gelu) -> None:
    workload = bench.prepare_workload(gelu.source, 1000)
    assert workload.input_names == ("x", "b", "r") and workload.output_names == ("out",)
    assert (workload.unfused_bytes, workload.fused_bytes) == (28 * 4000, 4 * 4000)
    want = gelu.reference(*(workload.arrays[k] for k in "xbr"))
    np.testing.assert_allclose(workload.reference[0], want, rtol=1e-12, atol=1e-12)
    assert bench.ceiling_source(workload.input_names, workload.output_names) == "out = x + b + r;\n"


def test_an_undeclared_input_beside_a_declared_one_is_priced_as_its_array() -> None:
    """`y` beside `input x[t, d];` is a [d] array (the kernel takes it as `[?]`, a row): it was
    priced as a [t, d] one, so GB/s were a third too high and the lecture said the ceiling
    moved other bytes than the program."""
    workload = bench.prepare_workload("input x[t, d];\nout = x * 2 + y;\n", 1 << 16)
    rows, d = workload.arrays["x"].shape
    assert workload.arrays["y"].shape == (d,)
    assert workload.fused_bytes == 4 * (2 * rows * d + d)  # x and out, and y once
    assert workload.unfused_bytes == 4 * (2 * rows * d) + 4 * (2 * rows * d + d)  # x * 2, + y
    ceiling = bench.prepare_workload(
        bench.ceiling_source(workload.input_names, workload.output_names).replace(
            "out", "input x[t, d];\nout", 1
        ),
        1 << 16,
    )
    assert ceiling.fused_bytes == workload.fused_bytes
    narrow = bench.prepare_workload("input x[t, 8]; out = x * y;", 1 << 16)
    assert narrow.fused_bytes == 4 * (2 * (1 << 16) + 8)


def test_ceiling_writes_the_programs_output_dtype() -> None:
    # bf16 x, r and an f32 bias sum to f32; the program stores bf16, so must its ceiling
    source = "input bf16 x[t, d], r[t, d];\ninput f32 b[d];\nout = bf16(x * b + r);"
    workload = bench.prepare_workload(source, 2 * bench.ROW_LENGTH)
    assert bench.ceiling_conversions(workload) == {"out": "bf16"}
    out = bench.bandwidth_ceiling(workload).run()
    assert isinstance(out, np.ndarray) and out.dtype == workload.arrays["x"].dtype
    assert bench.ceiling_conversions(bench.prepare_workload("out = x + b;", 64)) == {}


def test_the_ceiling_of_a_program_that_outputs_an_input() -> None:
    """`output x` beside `y = x + 1`: the ceiling renames that output (`x = x * 2` was an error,
    so `xfuse bench` and `xfuse lecture --source` failed on such a program)."""
    workload = bench.prepare_workload("input x, x_out; y = x + x_out; output x, y;", 64)
    assert bench.ceiling_outputs(workload.input_names, workload.output_names) == ["x_out_", "y"]
    source = bench.ceiling_source(workload.input_names, workload.output_names)
    assert source == "x_out_ = x + x_out;\ny = x + x_out;\n"
    copy, y = bench.bandwidth_ceiling(workload).run()
    np.testing.assert_array_equal(copy, y)
    result = xfuse.bench("y = x + 1; output x, y;", sizes=[64], repeat=1)
    assert result.rows[0].n == 64


def test_positive_inputs_where_normal_ones_fail() -> None:
    workload = bench.prepare_workload("y = log(x) + sqrt(x);", 512)
    assert workload.arrays["x"].min() >= 0.5
    assert np.isfinite(workload.reference[0]).all()


def test_bench_sweep() -> None:
    result = bench.bench("tanh(x) * y", [256, 4096], repeat=1)
    assert result.sizes == (256, 4096)
    assert result.variants == ("numpy per-op", "bandwidth ceiling", "xfuse fused approx")
    for n in result.sizes:
        numpy_row = result.row(n, "numpy per-op")
        fused = result.row(n, "xfuse fused approx")
        ceiling = result.row(n, "bandwidth ceiling")
        assert ceiling.max_error is None
        assert fused.max_error is not None and fused.max_error < 1e-5
        # every variant is priced by the fused traffic (x, y in, out: 3 float32 tensors) and
        # compared with the per-op numpy and the ceiling rows of its own size
        for row in (numpy_row, fused, ceiling):
            assert row.bandwidth == pytest.approx(3 * 4 * n / row.time_s)
            assert row.speedup == pytest.approx(numpy_row.time_s / row.time_s)
            assert row.of_ceiling == pytest.approx(ceiling.time_s / row.time_s)
    assert "| 2^12 | xfuse fused approx |" in result.table()


def test_the_table_names_a_size_that_is_no_power_of_two_as_the_cli_does() -> None:
    """It printed `2^1000` for 1000 elements (`2^` before either spelling), and `2^57344` for
    the 57,344 of a [t, 14336] program's rows."""
    result = xfuse.bench("x * 2", sizes=[1000], repeat=1)
    assert "| 1,000 | xfuse fused approx |" in result.table()
    # a short time in three digits and its unit (it was `0.000` ms)
    time = result.table().split("\n")[2].split(" | ")[2]
    assert re.fullmatch(r"\d+(\.\d+)? (s|ms|us)", time) and float(time.split()[0]) > 0
    assert [bench.size_text(n) for n in (1, 4096, 57344, 0)] == ["2^0", "2^12", "57,344", "0"]


@pytest.mark.parametrize(
    ("repeat", "error"), [(True, TypeError), (2.5, TypeError), ("3", TypeError), (0, ValueError)]
)
def test_bench_checks_repeat_first(repeat: object, error: type[Exception]) -> None:
    """As it checks `threads`: `True` was taken (JSON `"repeat": true`), 2.5 and "3" failed
    deep inside, and 0 once every variant had run."""
    with pytest.raises(
        error, match=f"^repeat must be an integer >= 1, got {re.escape(repr(repeat))}"
    ):
        xfuse.bench("x * 2", sizes=[64], repeat=repeat)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"peers": 1}, r"^peers must be True, False, a peer's name or a list of them, got 1$"),
        ({"peers": ["numba", 2]}, r"^peers must be .*, got \['numba', 2\]$"),
        ({"progress": 1}, r"^progress must be a function of a text, or None, got 1$"),
    ],
)
def test_bench_checks_peers_and_progress_first(option: dict[str, object], message: str) -> None:
    """`peers=1` was "'int' object is not iterable"; `progress=1` "'int' object is not
    callable" once the program had compiled."""
    with pytest.raises(TypeError, match=message):
        xfuse.bench("x * 2", sizes=[64], **option)  # type: ignore[arg-type]


def test_bench_takes_a_numpy_bool_for_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    """As compile's bool options: `peers=np.True_` was "'numpy.bool' object is not iterable"."""
    asked: list[bool] = []
    monkeypatch.setattr(bench.peer_compilers, "available_peers", lambda: asked.append(True) or [])
    assert xfuse.bench("x * 2", [64], peers=np.True_, repeat=1).rows and asked == [True]


def test_an_xfuse_variant_settles_its_timed_choices_before_it_is_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel times its first calls of a size both ways (streaming or not, split or not) before
    it chooses: `xfuse bench` timed 2^22 float32 GELU in its first block (streaming), 82-89% of
    the ceiling, where the settled kernel ran at 127-130%. Its variants now run
    `SETTLING_CALLS` untimed first (for at most `SETTLING_SECONDS`); numpy's and a one-thread
    ceiling's none."""
    workload = bench.prepare_workload("out = x * 2;", 256)
    fused = bench.xfuse_fused(workload)
    assert fused.settling_calls == SETTLING_CALLS
    assert bench.numpy_per_op(workload).settling_calls == 0
    assert bench.bandwidth_ceiling(workload).settling_calls == 0
    assert bench.bandwidth_ceiling(workload, threads=2).settling_calls == SETTLING_CALLS
    # The ceiling of `--threads 2` splits (its static sizes kept it on one thread, so 2 threads
    # of GELU at 2^24 ran at "190%" of it).
    large = bench.prepare_workload("out = x * sigmoid(x) * y;", 1 << 17)
    split = bench.bandwidth_ceiling(large, threads=2).run
    assert len(split.argument_lists) == 2  # type: ignore[attr-defined]
    calls = []
    counted = dataclasses.replace(fused, run=lambda: calls.append(1) or fused.run())
    bench.measure(workload, counted, repeat=3)
    assert len(calls) >= 1 + SETTLING_CALLS + 3
    calls.clear()
    monkeypatch.setattr(bench, "SETTLING_SECONDS", 0.0)  # (a slow kernel: libm's at 2^24)
    bench.settle(counted)
    assert len(calls) == 1


def test_3d_workloads_have_room_in_the_middle_axes() -> None:
    """A 3-d program's arrays were `[rows, 1, 14336]`: RoPE's tables, declared `[?, 1, ?]`,
    then broadcast over nothing. Now 8 in each middle axis where n has room, rows of 14336."""
    rope = (Path(__file__).resolve().parents[1] / "examples" / "rope.ew").read_text()
    shapes = {name: a.shape for name, a in bench.prepare_workload(rope, 1 << 22).arrays.items()}
    assert shapes == {
        "x1": (36, 8, 14336),
        "x2": (36, 8, 14336),
        "cos": (36, 1, 14336),
        "sin": (36, 1, 14336),
    }
    small = bench.prepare_workload(rope, 100).arrays
    assert small["x1"].shape == (1, 1, 100)
    assert bench.prepare_workload("out = x * 2;", 1 << 20).arrays["x"].shape == (1 << 20,)


@pytest.mark.parametrize(
    ("declared", "n", "shape"),
    [
        ("x[t, 8]", 1 << 12, (512, 8)),
        ("x[t, 32, 128]", 1 << 20, (256, 32, 128)),
        ("x[4, d]", 1 << 20, (4, 1 << 18)),
        ("x[4, 8, d]", 1 << 20, (4, 8, 1 << 15)),
        ("x[2, 3]", 1 << 20, (2, 3)),
        ("x[t, d], b[1, 1024]", 1 << 20, (1024, 1024)),
    ],
)
def test_workloads_size_the_free_dims_around_the_fixed_ones(
    declared: str, n: int, shape: tuple[int, ...]
) -> None:
    """`x[t, 8]` measured 8 elements at n = 2^12 (the rows sized for rows of 14336, then the
    8 put back), `x[t, 32, 128]` 36,864 at 2^20: the free dims now take what n leaves."""
    workload = bench.prepare_workload(f"input {declared};\ny = x * 2;\n", n)
    assert workload.arrays["x"].shape == shape


def test_bench_of_inputs_named_as_functions() -> None:
    """RoPE's tables are `cos` and `sin`: the bandwidth ceiling's program (each output the sum
    of the inputs) read them undeclared, as the calls they would be ("'cos' is a function")."""
    rope = (
        "input x1[?, ?, ?], x2[?, ?, ?], cos[?, 1, ?], sin[?, 1, ?];\n"
        "out1 = x1 * cos - x2 * sin;\nout2 = x2 * cos + x1 * sin;\noutput out1, out2;"
    )
    result = bench.bench(rope, [1 << 12], repeat=1)
    assert result.row(1 << 12, "bandwidth ceiling").time_s > 0
    assert result.row(1 << 12, "xfuse fused approx").max_error < 1e-5


def test_bench_of_an_input_named_out() -> None:
    """The benchmark's own calls passed the arrays by name: an input named `out` (the kernel
    spells it `out_`) was taken for the output buffers, "missing a required argument: 'out_'"
    in every row, the lecture's and the upstream peer's too."""
    result = bench.bench("input out;\nres = out * 2;", [1 << 12], repeat=1)
    assert result.row(1 << 12, "bandwidth ceiling").time_s > 0
    assert result.row(1 << 12, "xfuse fused approx").max_error == 0


def test_bench_libm_threads_and_errors(gelu: Gelu) -> None:
    result = bench.bench(gelu.source, [1 << 16], math="libm", threads=2, repeat=1)
    assert result.row(1 << 16, "xfuse fused libm, 2 threads").max_error < 1e-5
    with pytest.raises(ValueError, match="math"):
        bench.bench(gelu.source, [16], math="fast")
    with pytest.raises(ValueError, match="unknown peer"):
        bench.bench(gelu.source, [16], peers=["cuda"])
    with pytest.raises(ValueError, match="sizes must be a non-empty list of element counts"):
        bench.bench(gelu.source, [])
    with pytest.raises(ValueError, match="sizes must be a non-empty list"):
        bench.bench(gelu.source, [2.5])
    with pytest.raises(ValueError, match="sizes must be a non-empty list of element counts >= 1"):
        bench.bench(gelu.source, [0])
    with pytest.raises(TypeError, match="outputs must be a list of output names, got 1"):
        bench.bench(gelu.source, [16], outputs=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        bench.bench(gelu.source, [16], threads=0)


@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        ("input x[t, 1]; out = x * 2;", {"x": (4096, 1)}),  # (was 1 x 1: columns of a 1)
        ("input x[t, t]; out = x * 2;", {"x": (64, 64)}),  # (was 1 x 4096, which it refused)
        ("input x[t, t, t]; out = x * 2;", {"x": (16, 16, 16)}),
        ("input x[t, d], y[d, 1]; out = x * y;", {"x": (64, 64), "y": (64, 1)}),
        ("input x[5, b, b], y[a, 1, a]; out = x + y;", {"x": (5, 5, 5), "y": (5, 1, 5)}),
    ],
)
def test_bench_sizes_tied_and_static_1_axes_for_about_n_elements(
    source: str, shapes: dict[str, tuple[int, ...]]
) -> None:
    """The axes dim names tie share n's root, an axis of static 1s is 1: such programs ran at
    1 element for `--sizes 4096` (or were refused, the names' axes sized apart)."""
    assert bench.input_shapes(parse_program(source), 4096) == shapes


def test_bench_takes_numpy_sizes_a_plain_progress_callback_and_one_peer_name() -> None:
    """numpy's integers as sizes (`2 ** np.arange(...)` was "truth value ... ambiguous"), a
    callback returning None as `progress` (its annotation's; "does not support the context
    manager protocol"), one peer's name ("unknown peer(s) a, b, m, n, u" of "numba"), and a
    missing row is a KeyError naming the rows there are (an unpacking error)."""
    said: list[str] = []
    result = bench.bench("x * 2", 2 ** np.arange(10, 12), repeat=1, progress=said.append)
    assert result.sizes == (1024, 2048) and said[0] == "n = 1,024: numpy per-op"
    assert bench.bench("x * 2", [np.int64(1024)], repeat=1).sizes == (1024,)
    with pytest.raises(
        KeyError,
        match=r"no row of n = 1024 and variant 'xfuse': sizes \[1024, 2048\], variants \['numpy",
    ):
        result.row(1024, "xfuse")
    named = bench.bench("x * 2", [1024], repeat=1, peers="numexpr")
    assert named.variants[-1] == "numexpr" or named.skipped[0].startswith("numexpr: ")


def test_bench_mistakes_of_a_newcomer_say_what_to_pass() -> None:
    """`sizes=4096` raised "'int' object is not iterable"; a file name was parsed as the
    expression `out = examples/gelu.ew;` ("unexpected character '.'")."""
    with pytest.raises(ValueError, match=r"sizes must be a list of element counts, got 16: \[16\]"):
        bench.bench("tanh(x)", 16)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'examples/gelu\.ew' is a file name, not a program"):
        bench.bench("examples/gelu.ew", [16])


def test_peer_code_computes_the_program() -> None:
    """The code peers get, written with numpy itself: every op of the dialect spelled right
    (erf by its name, sigmoid, rsqrt, relu and softplus by their `DEFINITION`, a comparison
    as the peer's boolean: a condition of `where`, or a factor of a float)."""
    workload = bench.prepare_workload(EVERY_OP, 777)
    erf = np.vectorize(math.erf, otypes=[np.float32])  # numpy has no erf
    program = peers.python_program(
        workload, peers.namespaces(np, SimpleNamespace(erf=erf)), "numpy"
    )
    got = program(*(workload.arrays[n] for n in workload.input_names))
    assert bench.max_error(got, workload.reference) < 1e-5
    used = {type(op) for op in workload.module.walk() if isinstance(op, ew.ElementwiseOp)}
    missing = sorted(op.__name__ for op in set(ew.ELEMENTWISE_OPS) - used)
    assert not missing, f"EVERY_OP (tests/test_bench.py) uses no {missing}: add them to it"
    assert used == set(ew.ELEMENTWISE_OPS)


def test_peer_without_an_op_is_skipped() -> None:
    workload = bench.prepare_workload("y = erf(x);", 64)
    with pytest.raises(peers.PeerUnsupported, match="numexpr has no 'erf'"):
        peers.numexpr_expressions(workload)


def test_numexpr_reads_inputs_by_position() -> None:
    """An input named as a numexpr function (`sin`, as RoPE's table is) was a variable of that
    name in the expression, which numexpr took for its function ("unsupported object type")."""
    workload = bench.prepare_workload("input sin[?], x[?];\ny = sin(x) * sin + cos(sin);", 64)
    expressions, _ = peers.numexpr_expressions(workload)
    assert expressions == ["((sin(in1) * in0) + cos(in0))"]


@pytest.mark.skipif(importlib.util.find_spec("numexpr") is None, reason="numexpr not installed")
def test_numexpr_peer(gelu: Gelu) -> None:
    """Flat, and RoPE's 3-d workload of two outputs (its buffers were flat: "operands could
    not be broadcast together")."""
    rope = (Path(__file__).resolve().parents[1] / "examples" / "rope.ew").read_text()
    for source in (gelu.source, rope):
        workload = bench.prepare_workload(source, 1 << 12)
        measurement = bench.measure(workload, peers.numexpr_variant(workload), repeat=1)
        assert measurement.max_error < 1e-5


SELECTS = (
    "y = select(x > 0, x, exp(x) - 1) + select(max(x, 0), 1, x) * (x <= 0.5)"
    " + floor(x * 3) + ceil(x * 3) + trunc(x * 5) + rint(x * 5);"
)
"""ELU, a select on a float (true where nonzero, here half the time) and the roundings: each
peer's `where` and roundings (rint's ties to even)."""


@pytest.mark.parametrize("peer", ["numexpr", "numba", "torch", "jax"])
def test_peers_compute_comparisons_select_and_roundings(peer: str) -> None:
    if importlib.util.find_spec(peer) is None:
        pytest.skip(f"{peer} not installed")
    workload = bench.prepare_workload(SELECTS, 1000)
    measurement = bench.measure(workload, peers.BUILDERS[peer](workload, 1), repeat=1)
    assert measurement.max_error < 1e-5  # float32's rounding of values up to ~20; a wrong one: 1


TIES = np.float32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.3, -0.3, -0.7, -0.0, np.inf, np.nan])


@pytest.mark.parametrize("peer", ["numexpr", "numba", "torch", "jax"])
@pytest.mark.parametrize("rounding", ["floor", "ceil", "trunc", "rint"])
def test_peers_round_as_numpy_ties_signed_zeros_and_all(peer: str, rounding: str) -> None:
    """Each peer's spelling of a rounding is numpy's on ties, -0, inf and NaN (Python's
    math.floor in numba's scalar code gave integers; `round` in numexpr is rint)."""
    if importlib.util.find_spec(peer) is None:
        pytest.skip(f"{peer} not installed")
    workload = bench.prepare_workload(f"y = {rounding}(x);", len(TIES))
    workload = dataclasses.replace(workload, arrays={"x": TIES.copy()})
    result = peers.BUILDERS[peer](workload, 1).run()
    (got,) = result if isinstance(result, tuple) else (result,)  # numba's ufunc: the array
    want = getattr(np, rounding)(TIES)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_numba_peer(gelu: Gelu) -> None:
    """numba.vectorize gets a function with named parameters (it cannot compile `*args`)."""
    workload = bench.prepare_workload(gelu.source, 1000)
    measurement = bench.measure(workload, peers.numba_variant(workload), repeat=1)
    assert measurement.max_error < 1e-5


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.parametrize("peer", ["torch", "torch.compile"])
def test_torch_peers_take_constants_in_max_and_min(peer: str) -> None:
    """torch.maximum takes no Python float: hardswish and relu's flipped form still run."""
    workload = bench.prepare_workload("out = x * min(max(x + 3, 0), 6) / 6 + max(0, y);", 1000)
    measurement = bench.measure(workload, peers.BUILDERS[peer](workload, 1), repeat=1)
    assert measurement.max_error < 1e-6


def test_peer_versions() -> None:
    versions = peers.peer_versions()
    assert list(versions) == peers.available_peers()
    for name, version in versions.items():
        assert re.match(r"\d+\.\d+", version), (name, version)


def test_a_failing_peer_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(workload: bench.Workload, threads: int = 1) -> bench.Variant:
        raise RuntimeError("the peer broke\nsecond line")

    monkeypatch.setitem(peers.BUILDERS, "numexpr", broken)
    result = bench.bench("out = x * 2;", [256, 1024], peers=["numexpr"], repeat=1)
    assert result.skipped == ("numexpr: failed: RuntimeError: the peer broke",)
    assert result.versions == (f"numexpr {peers.peer_version('numexpr')}",)
    assert "numexpr" not in result.variants and len(result.rows) == 6


def test_header_shows_the_storage_dtypes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--expr", "input bf16 x; out = x * 2;", "--sizes", "256"]) == 0
    assert "out = x * 2  bfloat16, 1 thread, math=approx\n" in capsys.readouterr().out
    mixed = bench.bench("input bf16 x, r; input f32 b; out = bf16(x * b + r);", [256], repeat=1)
    assert mixed.storage == "x, r bfloat16; b float32 -> out bfloat16"


@pytest.mark.skipif("mlir" not in peers.available_peers(), reason="mlir-opt not found")
def test_mlir_peer(gelu: Gelu) -> None:
    workload = bench.prepare_workload(gelu.source, 1000)
    measurement = bench.measure(workload, peers.mlir_variant(workload), repeat=1)
    assert measurement.max_error < 1e-5
    named_out = bench.prepare_workload("input out, y;\nres = out * 2 - y;", 1000)
    assert bench.measure(named_out, peers.mlir_variant(named_out), repeat=1).max_error < 1e-6


def test_cli_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, gelu: Gelu) -> None:
    program = tmp_path / "gelu.ew"
    program.write_text(gelu.source)
    assert main(["bench", str(program), "--sizes", "2^8,2^10", "--repeat", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [row["n"] for row in result["rows"]] == [256] * 3 + [1024] * 3
    unloaded, _ = timing.host_description().split(", load average")  # (the load changes)
    assert result["host"].startswith(f"{unloaded}, load average ")
    assert all(row["max_error"] is None or row["max_error"] < 1e-4 for row in result["rows"])


def test_an_error_check_reads_nan_and_inf_results(capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN result where the reference is finite is a NaN error (Python's `max(0.0, nan)` made
    it 0.0: exact), an overflowed one inf; JSON names them ("nan", "inf": they were null, as an
    unchecked row's), and the check itself warns of nothing (inf - inf was "invalid value")."""
    reference = [np.array([0.0, 1.0, np.inf])]
    assert math.isnan(bench.max_error(np.float32([np.nan, 1, np.inf]), reference))
    assert bench.max_error(np.float32([np.inf, 1, np.inf]), reference) == math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bench.max_error(np.float32([0, 1, np.inf]), reference) == 0.0
    nan_program = "out = x * 1e30 * 1e30 - x * 1e30 * 1e30;"
    assert main(["bench", "--expr", nan_program, "--sizes", "64", "--repeat", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {row["variant"]: row["max_error"] for row in rows} == {
        "numpy per-op": "nan",
        "xfuse fused approx": "nan",
        "bandwidth ceiling": None,
    }


def test_cli_tables_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    plot = tmp_path / "bw.png"
    arguments = ["bench", "--expr", "x * y + 1", "--sizes", "2^8", "--repeat", "1"]
    assert main([*arguments, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("out = x * y + 1  float32, 1 thread, math=approx\n")
    assert "bandwidth ceiling" in out
    assert out.splitlines()[-2].startswith(f"host: {host_cpu().name}")  # as the scripts print
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_cli_plot_names_the_file_it_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    arguments = ["bench", "--expr", "x * 2", "--sizes", "2^8", "--repeat", "1", "--plot"]
    assert main([*arguments, str(tmp_path / "bw")]) == 0
    assert f"bandwidth plot: {tmp_path / 'bw.png'}\n" in capsys.readouterr().out
    assert (tmp_path / "bw.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit) as exit_:
        main([*arguments, str(tmp_path)])
    assert exit_.value.code == 2
    assert f"argument --plot: {tmp_path} is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["bw.xyz", "results-v1.2"])
def test_cli_plot_format_is_checked_before_the_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A format matplotlib does not write failed only once the whole benchmark had run."""
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(bench, "bench", lambda *args, **kwargs: pytest.fail("measured"))
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--expr", "x * 2", "--plot", name])
    assert exit_.value.code == 2
    suffix = name.rpartition(".")[2]
    assert f"argument --plot: {name}: matplotlib writes no '.{suffix}' files" in (
        capsys.readouterr().err
    )


def test_cli_writes_the_table_before_the_plot(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plot that cannot be written (a full disk) lost the measured table with it."""
    pytest.importorskip("matplotlib")

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench_cmd, "plot_bandwidth", full_disk)
    arguments = ["bench", "--expr", "x * 2", "--sizes", "2^8", "--repeat", "1"]
    assert main([*arguments, "--plot", str(tmp_path / "bw.png")]) == 1
    out, err = capsys.readouterr()
    assert "bandwidth ceiling" in out
    assert err == "xfuse bench: error: No space left on device\n"


def test_cli_settings_stay_out_of_the_programs_comment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = tmp_path / "double.ew"
    program.write_text("input f32 x[n];\ny = x * 2  # twice, no semicolon\n")
    assert main(["bench", str(program), "--sizes", "2^8", "--repeat", "1"]) == 0
    header, first, second, *_ = capsys.readouterr().out.splitlines()
    assert header == "double.ew  float32, 1 thread, math=approx"
    # the program as written (markup-free: `[n]` stays), its missing `;` before the comment
    assert (first, second) == ("  input f32 x[n];", "  y = x * 2; # twice, no semicolon")


def test_cli_reads_the_program_from_stdin() -> None:
    """`xfuse bench -` reads stdin, as `xfuse cost -` and `xfuse-opt -` do, and is titled by its
    first statement, as `--expr` is (it was `No such file or directory: -`)."""
    child = subprocess.run(
        [sys.executable, "-m", "xfuse.tools.cli", "bench", "-", "--sizes", "2^8", "--repeat", "1"],
        input="input f32 x;\nout = x * 2 + 1;\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    header, first, second, *rest = child.stdout.splitlines()
    assert header == "out = x * 2 + 1  float32, 1 thread, math=approx"
    assert (first, second) == ("  input f32 x;", "  out = x * 2 + 1;")
    assert any(line.startswith("│ xfuse fused approx ") for line in rest)


@pytest.mark.parametrize(
    ("program", "path", "title"),
    [
        ("input f32 x[n]; # doubled\ny = x * 2;", None, "y = x * 2"),
        (
            "out = " + " + ".join(f"x{i}" for i in range(30)) + ";",
            None,
            "out = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x...",
        ),
    ],
)
def test_program_title(program: str, path: Path | None, title: str) -> None:
    assert program_title(program, path) == title


def test_program_title_is_the_file_name_or_the_first_statement(gelu: Gelu) -> None:
    assert program_title(gelu.source, Path("examples/gelu.ew")) == "gelu.ew"
    assert program_title(gelu.source, None) == "h = x + b"


def test_bandwidth_plot_is_titled_by_name(gelu: Gelu) -> None:
    pytest.importorskip("matplotlib")
    from xfuse.tools.cli import import_pyplot

    rows = tuple(
        bench.BenchRow(n, variant, 1e-3, 2e9, 0.5, 1.0, None)
        for n in (256, 1024)
        for variant in ("numpy per-op", "bandwidth ceiling")
    )
    result = bench.BenchResult(gelu.source, "float32", "approx", 2, 1, rows, ())
    figure = bandwidth_figure(result, "gelu.ew")
    (axes,) = figure.axes
    assert axes.get_title() == "gelu.ew\nfloat32, 2 threads, math=approx"
    assert [t.get_text() for t in axes.get_legend().get_texts()] == [
        "numpy per-op",
        "bandwidth ceiling",
    ]
    import_pyplot().close(figure)


@pytest.mark.parametrize(
    "expression",
    [
        "input c[]; out = sigmoid(c);",  # numpy's 0-d ufunc result is a scalar: no out= next
        "input c[]; out = rsqrt(c);",
        "input y[3]; out = exp(x) + y;",  # y's 3 fixes x's ? (it was measured at the size)
        # a dim name on two axes: one size (each axis was sized alone, and the call refused
        # "dim 'd' is 4096 in input 'x' but 1 in input 'y'")
        "input x[t, t]; out = x * 2;",
        "input x[d], y[d, 1]; out = x + y;",
    ],
)
def test_programs_of_0_d_or_fixed_1_d_inputs_are_measured(expression: str) -> None:
    result = bench.bench(expression, sizes=[4096], repeat=1)
    numpy_rows = [row for row in result.rows if "numpy" in row.variant]
    assert numpy_rows and all(row.time_s > 0 for row in numpy_rows)
    checked = [row.max_error for row in result.rows if row.max_error is not None]
    assert checked and max(checked) < 1e-6


def test_cli_errors(capsys: pytest.CaptureFixture[str], gelu: Gelu) -> None:
    assert main(["bench", "--expr", "x +"]) == 1
    assert capsys.readouterr().err.startswith("<expr>:1:4: error: expected an expression")
    assert main(["bench", "--expr", str(gelu.path)]) == 1  # was "xfuse.bench takes the ..."
    assert capsys.readouterr().err == (
        f"xfuse bench: error: --expr takes an expression, not a file: xfuse bench {gelu.path}\n"
    )


def test_program_without_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    """No bandwidth ceiling to compare with (was a raw `reduce() of empty iterable`)."""
    assert main(["bench", "--expr", "y = 1 + 2;", "--sizes", "16", "--repeat", "1"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "xfuse bench: error: the program reads no inputs: "
        "there is no bandwidth ceiling to measure\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"# c\n\ny = x +;\n", ":3:8: error: expected an expression, found ';'"),
        (b"# only a comment\n", ":1:17: error: empty program"),
        (b"y = x * \xff;\n", ":1:9: error: unexpected character"),
    ],
)
def test_cli_program_errors_name_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: bytes, message: str
) -> None:
    """`xfuse bench`, `cost` and `lecture --source` report a program's error at its file, line
    and column (bench said `<source>`, and `out =;` of a file without code; an undecodable
    byte was "'utf-8' codec can't decode" without the file)."""
    program = tmp_path / "prog.ew"
    program.write_bytes(text)
    for command in (["bench", str(program), "--sizes", "64"], ["cost", str(program)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"{program}{message}") and "Traceback" not in err


def test_a_byte_order_mark_starts_a_program_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`xfuse bench`, `cost` and `lecture --source` read a file as Python reads a source file
    (each said `1:1: error: unexpected character '\\ufeff'`)."""
    program = tmp_path / "bom.ew"
    program.write_bytes(b"\xef\xbb\xbfy = x * 2;\n")
    assert main(["cost", str(program), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fused"]["kernels"]
    assert main(["bench", str(program), "--sizes", "64", "--repeat", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["bench", "--expr", "x", "--sizes", "2^10..2^4"],
            "argument --sizes: empty range 2^10..2^4: the first size is larger than the last",
        ),
        (["bench", "--expr", "x", "--sizes", ","], "argument --sizes: no sizes in ','"),
        (["bench", "--expr", "x", "--sizes", "0"], "argument --sizes: size must be between 1 and"),
        (["bench", "--expr", "x", "--sizes", "2^70"], "size must be between 1 and 2^62, got 2^70"),
        (["bench", "--expr", "x", "--sizes", "1.5"], "argument --sizes: bad size '1.5': expected"),
        (["bench", "--expr", "x", "--repeat", "0"], "argument --repeat: expected an integer >= 1"),
        (["bench", "--expr", "x", "--threads", "0"], "argument --threads: expected an integer"),
        # (Python's "invalid literal for int() with base 10: '2^1'")
        (
            ["bench", "--expr", "x", "--threads", "2^1"],
            "--threads: expected an integer >= 1, got '2",
        ),
        (["lecture", "--repeat", "0"], "argument --repeat: expected an integer >= 1, got 0"),
        (["lecture", "--n", "0"], "argument --n: size must be between 1 and 2^62, got 0"),
        # checked before the work, not after it (a whole lecture ran, then failed to write)
        (
            ["lecture", "--n", "2^10", "--repeat", "1", "--json", "/no-such-dir/figures.json"],
            "argument --json: /no-such-dir/figures.json: no directory /no-such-dir to write it in",
        ),
        (
            ["bench", "--expr", "x", "--sizes", "2^10", "--plot", "/no-such-dir/bw.png"],
            "argument --plot: /no-such-dir/bw.png: no directory /no-such-dir to write it in",
        ),
        (["lecture", "--n", "2^99999999"], "argument --n: size must be between 1 and 2^62"),
        # a negative base (it was (-2)^4, 16 elements)
        (["lecture", "--n=-2^4"], "argument --n: size must be between 1 and 2^62, got -2^4"),
        (["bench", "--expr", "x", "--sizes=-2^4"], "size must be between 1 and 2^62, got -2^4"),
        # a misspelt choice names the one it is closest to (it was argparse's list alone)
        (
            ["lectur"],
            "invalid choice: 'lectur' (choose from 'cost', 'lecture', 'bench', 'cache')"
            " (did you mean 'lecture'?)",
        ),
        (["cache", "inof"], "invalid choice: 'inof' (choose from 'info', 'clear') (did you mean"),
        (["cache", "INFO"], "invalid choice: 'INFO' (choose from 'info', 'clear') (did you mean"),
        (["bench", "--expr", "x", "--math", "aprox"], "(did you mean 'approx'?)"),
    ],
)
def test_options_out_of_range_are_usage_errors(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    """Never silently replaced by a default (`--repeat 0` ran the default repeat count and an
    empty `--sizes` range the whole default sweep)."""
    with pytest.raises(SystemExit) as exit_:
        main(arguments)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_sizes_too_large_for_memory_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--expr", "x", "--sizes", "2^50", "--repeat", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("xfuse bench: error: out of memory: ") and "Traceback" not in err


def test_a_memory_error_without_a_reason_is_no_empty_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare MemoryError (Python's own) printed "out of memory: " and nothing."""

    def exhausted(*_: object, **__: object) -> NoReturn:
        raise MemoryError

    monkeypatch.setattr(bench, "bench", exhausted)
    assert main(["bench", "--expr", "x", "--sizes", "16", "--repeat", "1"]) == 1
    assert capsys.readouterr().err == "xfuse bench: error: out of memory\n"


def test_cli_as_a_module_reports_errors_in_one_line() -> None:
    """`python -m xfuse.tools.cli` runs the same CliError handling as the `xfuse` script."""
    child = subprocess.run(
        [sys.executable, "-m", "xfuse.tools.cli", "bench", "--expr", "gelu.ew"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 1
    assert child.stderr == (
        "xfuse bench: error: --expr takes an expression, not a file: xfuse bench gelu.ew\n"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "one of the arguments FILE.ew --expr is required"),
        (["x.ew", "--expr", "x"], "argument --expr: not allowed with argument FILE.ew"),
    ],
)
def test_no_program_or_two_is_a_usage_error(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """(No program said "give a program: FILE.ew or --expr, not both", exit 1, no usage.)"""
    with pytest.raises(SystemExit) as exit_:
        main(["bench", *arguments])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("usage: xfuse bench") and message in err


def test_public_name() -> None:
    import xfuse

    assert xfuse.bench is bench.bench


@pytest.mark.parametrize(
    ("seconds", "printed"),
    [
        (0.0, "0"),
        (1.23456e-7, "0.000123"),
        (0.0123456, "12.3"),
        (1.23456, "1235"),
        (1e-3, "1.00"),
        (0.09999996e-3, "0.100"),  # (the rounded value's decimals: it was 0.1000)
    ],
)
def test_milliseconds_keep_three_significant_digits(seconds: float, printed: str) -> None:
    """The benchmark scripts' times: a short one printed with fixed decimals read 0.00."""
    assert milliseconds(seconds) == printed


def test_interleaved_rounds_take_turns_each_from_the_next_run() -> None:
    """Each round starts one run further: a run always timed right after another paid for the
    state that one left (the lecture's libm twin of its approx kernel, always after numpy's)."""
    calls: list[str] = []
    medians = interleaved_medians(
        [lambda: calls.append("a"), lambda: calls.append("b"), lambda: calls.append("c")],
        rounds=4,
        repeat=2,
    )
    rounds = ["aabbcc", "bbccaa", "ccaabb", "aabbcc"]
    assert "".join(calls) == "".join(rounds)
    assert [len(m) for m in medians] == [4, 4, 4]


def test_a_sample_of_several_calls_is_timed_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that only each call advances, by 1 s: 4 samples of 5 calls take 1 s per call.
    clock = [0.0]

    def call() -> None:
        clock[0] += 1.0

    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    (median,) = interleaved_medians([call], rounds=1, repeat=4, calls=5)[0]
    assert clock[0] == 20 and median == 1.0
    with pytest.raises(ValueError, match="calls must be >= 1, got 0"):
        interleaved_medians([call], rounds=1, repeat=1, calls=0)


def test_the_host_line_names_the_cpu_both_ways_and_its_bf16_rounding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LLVM's name is a guess where it does not know the CPUID model (a VM's Xeon with
    # AVX512-BF16 read `rocketlake`): the line adds the processor's own name, and how the host
    # rounds to bf16, which the LLM rows depend on.
    cpu = host_cpu()
    monkeypatch.setattr(timing, "processor_name", lambda: "Some Processor")
    line = timing.host_summary()
    rounding = "hardware" if cpu.rounds_bf16 else "software"
    assert line.startswith(f"host: {cpu.name} (Some Processor), ")
    assert f"(<{cpu.float_lanes} x float>), bf16 rounding in {rounding}, load average" in line
    monkeypatch.setattr(timing, "processor_name", lambda: None)
    assert timing.host_summary().startswith(f"host: {cpu.name}, ")


def test_the_host_line_says_how_many_cpus_the_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pinned (`taskset -c 0`), a process may use fewer CPUs than the host has, which the
    `threads=2` rows depend on: the line said the host's count alone."""
    monkeypatch.setattr(timing.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(timing.os, "sched_getaffinity", lambda pid: {0})
    assert ", 2 CPUs (1 usable by this process), widest" in timing.host_summary()
    monkeypatch.setattr(timing.os, "sched_getaffinity", lambda pid: {0, 1})
    assert ", 2 CPUs, widest" in timing.host_summary()


def test_the_processor_name_is_read_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n")
    assert timing.processor_name(cpuinfo) == "AMD EPYC 9R14 96-Core Processor"
    assert timing.processor_name(tmp_path / "absent") is None
    cpuinfo.write_text("processor\t: 0\n")
    assert timing.processor_name(cpuinfo) is None


def test_measure_interleaved_checks_and_times_every_variant() -> None:
    workload = bench.prepare_workload("y = x * 2 + z;", 256)
    variants = [bench.numpy_per_op(workload), bench.bandwidth_ceiling(workload)]
    per_op, ceiling = bench.measure_interleaved(workload, variants, rounds=4, repeat=1)
    assert per_op.max_error < 1e-6 and ceiling.max_error is None
    assert len(per_op.round_times_s) == len(ceiling.round_times_s) == 4
    assert per_op.time_s == min(per_op.round_times_s)
    assert (per_op.bytes, ceiling.bytes) == (5 * 4 * 256, 3 * 4 * 256)


def test_rounds_of_several_workloads_take_every_variant_in_turn() -> None:
    # One first (checked) run of each variant, then each round one untimed and one timed run
    # of every variant of every workload before the next round, each round from the next one.
    calls: list[str] = []
    cells = []
    for name in ("p", "q"):
        workload = bench.prepare_workload("y = x * 2;", 64)

        def run(label: str = name, workload: bench.Workload = workload) -> np.ndarray:
            calls.append(label)
            return (workload.arrays["x"] * 2).astype(np.float32)

        cells.append((workload, [bench.Variant(name, run, "fused")]))
    (p,), (q,) = bench.measure_workloads_interleaved(cells, rounds=3, repeat=1, warmup=1)
    assert calls == ["p", "q"] + ["p", "p", "q", "q", "q", "q", "p", "p", "p", "p", "q", "q"]
    assert len(p.round_times_s) == len(q.round_times_s) == 3
    assert p.max_error == q.max_error == 0.0


@pytest.mark.parametrize(
    ("a", "b", "apart"),
    [
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], True),
        # a round of the faster variant slowed past two of the other's: still apart
        ([1, 2, 3, 4, 7.5], [6, 7, 8, 9, 10], True),
        ([6, 7, 8, 9, 10], [1, 2, 3, 4, 7.5], True),
        # past three of them: within noise, however fast the other four
        ([1, 2, 3, 4, 8.5], [6, 7, 8, 9, 10], False),
        # interleaved rounds, equal rounds: within noise
        ([1, 3, 5, 7, 9], [2, 4, 6, 8, 10], False),
        ([2.0] * 5, [2.0] * 5, False),
        # 3 rounds each can never reach the 5% level (the most extreme split is 1 in 10)
        ([1, 2, 3], [4, 5, 6], False),
        ([1, 2, 3, 4], [5, 6, 7, 8], True),
    ],
)
def test_separable_is_a_rank_test(a: list[float], b: list[float], apart: bool) -> None:
    assert separable(a, b) == separable(b, a) == apart


def pairwise_separable(a: list[float], b: list[float]) -> bool:
    """`separable` by its definition: U counted pair by pair for every split of the rounds."""
    pooled = [*a, *b]

    def distance(group: tuple[int, ...]) -> float:
        others = [j for j in range(len(pooled)) if j not in group]
        u = sum(
            (pooled[i] > pooled[j]) + 0.5 * (pooled[i] == pooled[j]) for i in group for j in others
        )
        return abs(u - len(a) * len(b) / 2)

    splits = list(itertools.combinations(range(len(pooled)), len(a)))
    observed = distance(tuple(range(len(a))))
    return sum(distance(group) >= observed - 1e-9 for group in splits) / len(splits) <= 0.05


@given(
    a=st.lists(st.integers(0, 9), min_size=1, max_size=7),
    b=st.lists(st.integers(0, 9), min_size=1, max_size=7),
)
def test_separable_counts_u_as_its_definition_does(a: list[int], b: list[int]) -> None:
    """Rank sums with ties at their mean rank give the pairwise U (small integers: many ties)."""
    assert separable(a, b) == pairwise_separable(a, b)


def _benchmark_script(file_name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks/`file_name` as a module (the folder is no package)."""
    path = Path(__file__).parent.parent / "benchmarks" / file_name
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its dataclasses look it up there
    spec.loader.exec_module(script)
    return script


def test_the_hot_loop_is_the_main_vector_loop() -> None:
    """`hot_loop` (the loop benchmarks/activations.py hands llvm-mca, the tests' loop): the
    longest innermost loop that masks no store, closed by a conditional backward branch."""
    from xfuse.runtime.compiler import compile

    assert MASKED_STORE.search("\tvmovups\t%zmm19, (%rcx,%rdi,4) {%k1}")
    assert MASKED_STORE.search("\tvmaskmovps\t%ymm1, %ymm2, (%rcx)")
    assert not MASKED_STORE.search("\tvmovaps\t%zmm1, %zmm2 {%k1}")  # a blend
    # With interleave 1 the masked remainder loop is longer than the main loop: not taken.
    for interleave in (None, 1):
        silu = compile("out = x * sigmoid(x);", interleave=interleave, masked_remainder=True)
        body = hot_loop(silu.asm)
        assert body[-1].split()[0].startswith("j") and not any(":" in line for line in body)
        assert not any(MASKED_STORE.search(line) for line in body)
        assert hot_loop_mnemonics(silu.asm).count("vdivps") == (interleave or LONG_BODY_INTERLEAVE)
    # A cold block after the loop (f32 sin's large arguments) that jumps back into it by `jmp`
    # closes no loop of its own, however long it is.
    cold = "\n".join(["\tvmulps\t%zmm3, %zmm0, %zmm0"] * 8)
    looped = (
        "main:\n.LBB0_1:\n\tvmovups\t(%rdi,%rax,4), %zmm0\n\tkortestw\t%k0, %k0\n\tjne\t.LBB0_3\n"
        ".LBB0_2:\n\tvmovups\t%zmm0, (%rsi,%rax,4)\n\taddq\t$16, %rax\n\tcmpq\t%rax, %rcx\n"
        f"\tjne\t.LBB0_1\n\tretq\n.LBB0_3:\n{cold}\n\tjmp\t.LBB0_2\n.Lfunc_end0:\n"
    )
    assert hot_loop_mnemonics(looped) == [
        *("vmovups", "kortestw", "jne", "vmovups", "addq", "cmpq", "jne")
    ]


def test_activations_benchmark_finds_the_hot_loop_and_its_stores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """benchmarks/activations.py divides llvm-mca's cycles by the elements the loop stores."""
    from xfuse.codegen.native import host_cpu
    from xfuse.runtime.compiler import compile

    script = _benchmark_script("activations.py", monkeypatch)
    assert script.stored_bytes("\tvmovups\t%zmm1, 64(%rdx,%r14,4)") == 64
    assert script.stored_bytes("\tvpmovdw\t%zmm16, -96(%r13,%r14,2)") == 32  # dwords to words
    assert script.stored_bytes("\tvmovups\t%ymm0, 128(%rsp)") == 0  # a spill
    assert script.stored_bytes("\tvmovups\t(%rdx), %zmm0") == 0  # a load
    for interleave in (None, 1):
        silu = compile("out = x * sigmoid(x);", interleave=interleave, masked_remainder=True)
        stored = sum(map(script.stored_bytes, hot_loop(silu.asm)))
        assert stored > 0 and stored % (4 * host_cpu().float_lanes) == 0
    # The divider's instructions, whose throughput the benchmark measures (not an estimate's).
    divider = [
        (line.split()[0], found.group(2))
        for line in hot_loop(compile("out = x * min(max(x + 3, 0), 6) / 6;").asm)
        if (found := script.DIVIDER.search(line))
    ]
    register = {16: "z", 8: "y"}.get(host_cpu().float_lanes, "x")
    assert divider and all(op == ("vdivps", register) for op in divider)
    for line, op in [
        ("\tvdivps\t%zmm2, %zmm3, %zmm3", ("vdivps", "z")),
        ("\tvsqrtps\t%ymm1, %ymm3", ("vsqrtps", "y")),
        ("\tvdivss\t%xmm1, %xmm2, %xmm3", ("vdivss", "x")),
    ]:
        found = script.DIVIDER.search(line)
        assert found and (line.split()[0], found.group(2)) == op
    assert not script.DIVIDER.search("\tvrsqrtps\t%ymm1, %ymm3")  # an estimate, not the divider
    assert not script.DIVIDER.search("\tvrsqrt14ps\t%zmm1, %zmm3")
    # The libmvec variants the main loop calls, one per call an iteration makes (as many as its
    # assembly calls), whose throughput the benchmark measures (llvm-mca sees one instruction).
    assert script.library_calls(compile("out = x * 2;").llvm_ir) == ()
    if libmvec_loaded():  # (with its remainder in a vector loop too, of one call an iteration)
        # (f32 sin and cos are xfuse's own where the host has FMA: no call in the loop)
        arctangents = compile("out = x + atan(x) * atan(x);", masked_remainder=True)
        calls = script.library_calls(arctangents.llvm_ir)
        assert calls and set(calls) == {calls[0]} and calls[0].endswith("v_atanf")
        assert sum("call" in line for line in hot_loop(arctangents.asm)) == len(calls)
        loop = script.library_loop(calls[0])
        assert loop is script.library_loop(calls[0])  # compiled once, timed every round
        assert 0 < median_seconds(loop, repeat=1) < float("inf")
        if script.llvm_mca() is not None:  # the bound takes each call at its measured cycles
            bound = script.mca_bound(arctangents, 4, 1e9, {calls[0]: 7.0})
            assert bound.library_cycles == 7.0 * len(calls) and bound.library_calls == calls
            assert bound.busiest_cycles >= 1 and bound.busiest_unit  # a unit of the loop's


MCA_REPORT_OF_A_DIVISION_AND_SIX_FMAS = """\
Block RThroughput: 6.0

Resources:
[7]   - Zn4BRU1
[8]   - Zn4FP0
[9]   - Zn4FP1
[12.0] - Zn4FP45
[12.1] - Zn4FP45


Resource pressure per iteration:
[7]    [8]    [9]    [12.0] [12.1]
 -     9.00   9.25    -     0.50

Resource pressure by instruction:
[7]    [8]    [9]    [12.0] [12.1] Instructions:
 -      -     6.00    -      -     vdivps	%zmm1, %zmm2, %zmm3
"""
"""llvm-mca 22's report (`-mcpu=znver4`, trimmed; FP1 and FP45 made uneven) of `vdivps` and six
independent `vfmadd231ps` on zmm registers: Block RThroughput max(6 / 1, 12 / 2) where FP0 and
FP1 are busy 9 cycles each (this core: 8)."""


def test_activations_benchmark_reads_llvm_mcas_busiest_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Part 1's second llvm-mca bound is the unit its simulation keeps busiest, per iteration:
    where a unit serves an instruction of its own and a group's (a division on FP1, FMAs on FP0
    and FP1) the Block RThroughput counts each alone."""
    script = _benchmark_script("activations.py", monkeypatch)
    # (the by-instruction view below it, 6.00 on FP1, is not the per-iteration one)
    assert script.busiest_unit(MCA_REPORT_OF_A_DIVISION_AND_SIX_FMAS) == ("Zn4FP1", 9.25)
    assert script.busiest_unit("Block RThroughput: 6.0\n") is None  # (the bound falls back)


def test_activations_benchmark_names_its_llvm_mca_and_warns_of_an_older_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An llvm-mca older than LLVM 22 (Debian 12's default is 14) has other CPU models: the
    header says which one gave the bounds, and how to get LLVM 22's."""
    script = _benchmark_script("activations.py", monkeypatch)
    for version, warned in [("14.0.6", True), ("22.1.8", False)]:
        fake = tmp_path / f"llvm-mca-{version}"
        fake.write_text(f"#!/bin/sh\necho '  Debian LLVM version {version}'\n")
        fake.chmod(0o755)
        monkeypatch.setattr(script, "llvm_mca", lambda fake=fake: str(fake))
        summary = script.llvm_mca_summary()
        assert f"{fake} (LLVM version {version}" in summary
        assert ("not 22: apt install llvm-22" in summary) == warned
    monkeypatch.setattr(script, "llvm_mca", lambda: None)
    assert script.llvm_mca_summary() == "llvm-mca: not found (Debian: apt install llvm-22)"


def test_activations_benchmark_tallies_each_target_of_issue_16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After its parts benchmarks/activations.py says, per target, how many cells met it and
    which missed; part 2's verdict counts the issue's exception for other activations as met."""
    script = _benchmark_script("activations.py", monkeypatch)
    unchecked = script.tally("threads")
    in_cache = script.tally("in cache")
    in_cache.record(True, "silu 2^12")
    in_cache.record(False, "leaky ReLU 2^12 (1.41x)")
    assert [unchecked, in_cache] == script.TALLIES
    assert str(in_cache) == "in cache: 1 of 2 met; missed: leaky ReLU 2^12 (1.41x)"
    assert str(unchecked) == "threads: no cell to check in this run"
    silu, mish = script.PROGRAMS["silu"], script.PROGRAMS["Mish"]
    # ceiling 0.45 ns/el: silu's target 90% allows 0.5, Mish's 70% 0.643
    assert script.verdict(silu, 0.95, 0.3, 0.45, ["sigmoid"])[1]
    assert not script.verdict(silu, 0.85, 0.49, 0.45, ["sigmoid"])[1]  # MISSED: not compute-bound
    assert not script.verdict(silu, 0.85, 0.6, 0.45, ["sigmoid"])[1]  # compute-bound, no exception
    said, met = script.verdict(mish, 0.6, 0.7, 0.45, ["tanh", "softplus"])
    assert met and said.endswith("the issue's exception")
    assert not script.verdict(mish, 0.6, 0.7, 0.45, [])[1]  # by ops the issue does not cover
    assert script.verdict(script.PROGRAMS["tanh-GELU"], 0.1, 9.0, 0.45, ["tanh"]) == ("-", True)


def test_activations_benchmark_times_threads_row_by_row_of_every_program(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Part 3 times every program and size in each round, then prints a row per program: one
    cell per size, the largest's normal stores and the smallest's checked calls after them,
    and records each settled cell from 2^18 on in its tally (the same bits from every kernel
    of a cell, checked after each round, though the cells share their outputs)."""
    script = _benchmark_script("activations.py", monkeypatch)
    monkeypatch.setattr(script, "SETTLING_CALLS", 2)
    monkeypatch.setattr(script, "THREADS_NEVER_SLOWER_LOG2", 11)
    monkeypatch.setattr(script, "TALLIES", [])
    script.SELECTED.update({"silu", "leaky ReLU"})
    timed: list[object] = []

    def timing(run: Callable[[], object], repeat: int, calls: int) -> float:
        timed.append(run)
        run()
        return 1e-3

    monkeypatch.setattr(script, "median_seconds", timing)
    script.thread_rows(2, [1 << 10, 1 << 11], compute_bound={"silu"})
    # 2 programs, 2 sizes: 4 cells of 4 prepared runs, the 2^10 ones 2 checked calls more and the
    # 2^11 ones 2 normal stores' runs: each run once a round, every one in the first round first
    runs = len(timed) // 2
    assert runs == 4 * 4 + 2 * 2 * 2 and len(set(map(id, timed[:runs]))) == runs
    assert set(map(id, timed[runs:])) == set(map(id, timed[:runs]))
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows] == ["| program", "| silu", "| leaky ReLU"]
    assert rows[0].endswith("| 2^10 | 2^11 | 2^11, both normal stores | 2^10, checked calls |")
    assert all(
        re.fullmatch(r"\| [^|]+( \| \d+\.\d\dx( / \S+ \(\S+\))?){4} \|", r) for r in rows[1:]
    )
    never_slower, faster = script.TALLIES
    assert never_slower.checked == 2 and faster.checked == 1  # 2^11 of each; silu's at 2^11


def test_activations_benchmark_assembles_each_vector_op_of_this_host(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Part 6 (`vector_op_rows`) assembles each of its groups for the host's widest vectors (a
    512-bit `vpand`, which has no encoding, stopped it) and prints a row per op the host has,
    then the division beside FMAs; here untimed (each group's spin compiled, not run)."""
    from xfuse.codegen.native import host_cpu

    cpu = host_cpu()
    if cpu.float_lanes < 8:
        pytest.skip("part 6's ops are AVX's and AVX-512's")
    script = _benchmark_script("activations.py", monkeypatch)
    compiled: list[object] = []

    def untimed(spin: object, iterations: int, runs: int) -> float:
        compiled.append(spin)
        return 1e-3

    monkeypatch.setattr(script, "fastest_spin", untimed)
    script.vector_op_rows(1e9)
    out = capsys.readouterr().out
    rows = [line.split(" | ")[0].removeprefix("| ") for line in out.splitlines()[2:-2]]
    expected = list(script.VECTOR_OPS)
    if cpu.float_lanes == 16:
        expected += [
            name
            for name in script.AVX512_OPS
            if cpu.has(script.ZMM_OP_FEATURES.get(name, "avx512f"))
        ]
    assert rows == expected and ("vscalefps" in rows) == (cpu.float_lanes == 16)
    assert out.splitlines()[-1].startswith("one vdivps beside k FMAs, the cycles it adds")
    assert len(compiled) == 2 + 3 * len(expected) + 5  # FMAs, adds, 3 a row, 5 divisions


def test_activations_benchmark_prints_a_missed_value_as_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cell printed its value rounded, checked unrounded: a share of 69.96% missing >= 70%
    read "70%", a ratio of 0.996x missing >= 1 "1.00x", beside "missed"."""
    script = _benchmark_script("activations.py", monkeypatch)
    assert script.shown(0.6996, ".0%", False) == "69%"
    assert script.shown(0.6996, ".0%", True) == "70%"
    assert script.shown(0.996, ".2f", False) == "0.99"
    assert script.shown(1.3004, ".2f", False, upper=True) == "1.31"  # past an upper bound
    assert script.shown(2.004, ".2f", False, upper=True) == "2.01"


def test_gelu_benchmark_times_the_disk_cache_in_a_directory_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """benchmarks/gelu.py's compile times leave the caller's cache settings as they were (it
    dropped `XFUSE_CACHE=0`, and wrote its entry to the user's cache directory)."""
    script = _benchmark_script("gelu.py", monkeypatch)
    monkeypatch.setenv("XFUSE_CACHE", "0")
    monkeypatch.setenv("XFUSE_CACHE_DIR", str(tmp_path))
    warm, disk, cached = script.compile_times()
    assert warm > 0 and disk > 0 and cached > 0
    assert os.environ["XFUSE_CACHE"] == "0"
    assert os.environ["XFUSE_CACHE_DIR"] == str(tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "script", sorted(p.name for p in (Path(__file__).parent.parent / "benchmarks").glob("*.py"))
)
def test_benchmark_scripts_take_no_abbreviated_options(script: str) -> None:
    """Each script's options are spelled out, as xfuse's own commands' are: with argparse's
    default, `activations.py --part 5` ran `--parts 5` and `--round 3` `--rounds 3`."""
    path = Path(__file__).parent.parent / "benchmarks" / script
    run = subprocess.run(
        [sys.executable, str(path), "--h"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stdout[-400:]
    assert "unrecognized arguments: --h" in run.stderr, run.stderr[-400:]


@pytest.mark.parametrize(
    ("script", "arguments", "error"),
    [
        ("gelu.py", ["--sizes", "4096"], "argument --sizes: expected the log2 of a size, 0 to 30"),
        ("activations.py", ["--rounds", "0"], "argument --rounds: expected an integer >= 1, got 0"),
        ("gpu_validate.py", ["--device", "h999", "--dry-run"], "argument --device: unknown device"),
        ("gpu_validate.py", ["--shape", "2x3x4", "--dry-run"], "argument --shape: expected two"),
        ("gpu_validate.py", ["--shape", "0x5", "--dry-run"], "argument --shape: expected sizes"),
        # an odd RoPE head failed after the first tables; another tree timed this checkout
        ("strided_rows.py", ["--head-dim", "3"], "argument --head-dim: expected an even integer"),
        # halves or rows a call copies or refuses: tracebacks after the other tables
        ("strided_rows.py", ["--head-dim", "16"], "argument --head-dim: expected an even integer"),
        ("strided_rows.py", ["--d", "16"], "argument --d: expected an integer >= 32"),
        ("compile_cache.py", ["--against", "/nonexistent"], "no xfuse package under /nonexist"),
    ],
)
def test_benchmark_scripts_reject_bad_values_by_option(
    script: str, arguments: list[str], error: str
) -> None:
    """A size where its log2 is asked for, a count of 0, an unknown device: argparse's usage
    error naming the option (they were tracebacks from numpy, statistics or the cost model)."""
    path = Path(__file__).parent.parent / "benchmarks" / script
    run = subprocess.run(
        [sys.executable, str(path), *arguments], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stdout[-400:]
    assert error in run.stderr and "Traceback" not in run.stderr, run.stderr[-400:]


def test_benchmark_scripts_check_every_number_option() -> None:
    """No benchmark option is a bare `type=int` or `type=float`, which take 0, -1 or a size for
    its log2: each goes through a checked type of `xfuse.tools.cli` (`positive_int`,
    `non_negative_int`, `log2_size`)."""
    bare = [
        f"{path.name}: {line.strip()}"
        for path in sorted((Path(__file__).parent.parent / "benchmarks").glob("*.py"))
        for line in path.read_text().splitlines()
        if re.search(r"\btype=(int|float)\b", line)
    ]
    assert bare == []
