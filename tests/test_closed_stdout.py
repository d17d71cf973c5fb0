"""The CLIs where the reader of their output goes away (`xfuse cost FILE --json | head -1`):
status 141, as the shell reports for `cat` ended by SIGPIPE, and nothing on stderr (it was
status 1 with no word, or a BrokenPipeError diagnostic from xfuse-opt, or Python's `Exception
ignored ... BrokenPipeError` and status 120 where the output waited in stdout's buffer)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from xfuse.tools.closed_stdout import INTERRUPTED_STATUS, SIGPIPE_STATUS, exit_status

ROOT = Path(__file__).parents[1]
GELU = str(ROOT / "examples" / "gelu.ew")
XFUSE = [sys.executable, "-m", "xfuse.tools.cli"]
XFUSE_OPT = [sys.executable, "-m", "xfuse.tools.opt"]
BENCH = ["bench", "--expr", "tanh(x) * y", "--sizes", "2^10", "--repeat", "1"]


def run_into_closed_pipe(
    command: list[str], buffered: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `command` with its stdout a pipe whose reader has closed already: every write to it
    fails, whenever the command makes it. `buffered`: stdout block-buffered, as it is for a
    user (unless PYTHONUNBUFFERED is set), so the write may come only with the flush at exit."""
    environment = dict(os.environ)
    environment.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        environment["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            command,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
            cwd=ROOT,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)


CLOSED_STDOUT_CASES = {
    "cost-json": [*XFUSE, "cost", GELU, "--json"],
    "cost": [*XFUSE, "cost", GELU],  # rich's tables: rich's own handler exited 1
    "bench-json": [*XFUSE, *BENCH, "--json"],
    "bench": [*XFUSE, *BENCH],
    "version": [*XFUSE, "--version"],
    "opt": [*XFUSE_OPT, GELU],
    "opt-split": [*XFUSE_OPT, GELU, "-p", "ew-optimize", "--split-input-file"],
    "opt-list-passes": [*XFUSE_OPT, "--list-passes"],
    "help": [*XFUSE, "--help"],
    "cost-help": [*XFUSE, "cost", "--help"],
    "opt-help": [*XFUSE_OPT, "--help"],
    "opt-version": [*XFUSE_OPT, "--version"],
}
ARGPARSES_OWN = ("version", "help", "cost-help", "opt-help", "opt-version")
"""Cases that argparse writes: it dropped a failed write of its own messages (unbuffered, or
without a stdout, `--help` exited 0 having written nothing)."""


@pytest.mark.parametrize(
    ("name", "buffered"),
    [(name, True) for name in CLOSED_STDOUT_CASES]
    # Unbuffered, each write fails as it is made
    + [(name, False) for name in ("cost-json", "cost", "opt", "opt-list-passes", *ARGPARSES_OWN)],
)
def test_a_closed_stdout_ends_the_command_quietly_with_status_141(
    name: str, buffered: bool
) -> None:
    done = run_into_closed_pipe(CLOSED_STDOUT_CASES[name], buffered)
    assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, "")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([*XFUSE, "cost", "missing.ew"], "xfuse cost: error: No such file or directory"),
        ([*XFUSE_OPT, "missing.ew"], "xfuse-opt: error: No such file or directory: missing.ew"),
    ],
    ids=["xfuse", "xfuse-opt"],
)
def test_an_error_with_stdout_closed_is_still_reported(command: list[str], message: str) -> None:
    """An error that writes nothing to stdout keeps its status and its message on stderr."""
    done = run_into_closed_pipe(command)
    assert done.returncode == 1
    assert done.stderr.startswith(message), done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([*XFUSE, "cost", GELU], "xfuse cost: error: No space left on device"),
        ([*XFUSE, "cost", GELU, "--json"], "xfuse cost: error: No space left on device"),
        ([*XFUSE, "--version"], "xfuse: error: No space left on device"),
        ([*XFUSE, "--help"], "xfuse: error: No space left on device"),
        ([*XFUSE_OPT, GELU], "xfuse-opt: error: No space left on device"),
    ],
    ids=["cost", "cost-json", "version", "help", "opt"],
)
def test_a_full_device_on_stdout_is_one_error_line(
    command: list[str], message: str, buffered: bool
) -> None:
    """An error writing stdout has no file name (the message ended in `: None`); where stdout
    is buffered (no PYTHONUNBUFFERED, as for a user) the flush at exit failed again: a
    traceback, `Exception ignored ...` and status 120 (`--version`'s output, all in the buffer,
    failed only there)."""
    environment = dict(os.environ)
    environment.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        environment["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            command, stdout=full, stderr=subprocess.PIPE, text=True, env=environment, timeout=300
        )
    assert (done.returncode, done.stderr) == (1, f"{message}\n")


def run_without_stdio(command: list[str], fd: int) -> subprocess.CompletedProcess[str]:
    """Run `command` started with its stdin (`fd` 0, `<&-`) or stdout (1, `>&-`) closed: Python
    has no `sys.stdin` or `sys.stdout` then."""
    return subprocess.run(
        command,
        preexec_fn=lambda: os.close(fd),
        stdin=subprocess.DEVNULL if fd else None,
        stdout=None if fd else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([*XFUSE, "cost", GELU], "xfuse cost: error: no standard output to write to"),
        ([*XFUSE_OPT, GELU], "xfuse-opt: error: no standard output to write to"),
        *(
            (CLOSED_STDOUT_CASES[name], f"{tool}: error: no standard output to write to")
            for name in ARGPARSES_OWN
            for tool in ["xfuse-opt" if name.startswith("opt") else "xfuse"]
        ),
    ],
    ids=["xfuse", "xfuse-opt", *ARGPARSES_OWN],
)
def test_a_command_started_without_stdout_says_so(command: list[str], message: str) -> None:
    """`xfuse cost FILE >&-` ended in an AttributeError's traceback (`sys.stdout` is None): now
    one line and status 1, as `cat`'s "write error: Bad file descriptor"."""
    done = run_without_stdio(command, 1)
    assert done.returncode == 1
    assert done.stderr == f"{message} (it was closed)\n"


@pytest.mark.parametrize(
    "command",
    [[*XFUSE, "cost", "missing.ew", "--json"], [*XFUSE_OPT, "missing.ew"]],
    ids=["xfuse", "xfuse-opt"],
)
def test_a_command_started_without_stderr_keeps_its_errors_out_of_stdout(
    command: list[str],
) -> None:
    """With no `sys.stderr` (`2>&-`), `print(..., file=sys.stderr)` wrote the error into stdout:
    the JSON or IR file a script redirected stdout to held it. Now it goes nowhere, as `cat`'s
    does, and the status still says so."""
    done = subprocess.run(
        command,
        preexec_fn=lambda: os.close(2),
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")


def test_ctrl_c_ends_a_command_with_status_130_and_no_traceback() -> None:
    """A KeyboardInterrupt in Python code (the lecture's numpy rows, a pass) printed a traceback;
    `mlir-opt` and `cat` end quietly, with the status a shell gives a command SIGINT ended."""

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert exit_status(interrupted, "xfuse") == INTERRUPTED_STATUS == 130


def test_a_file_output_needs_no_stdout(tmp_path: Path) -> None:
    """`xfuse-opt FILE -o OUT >&-` wrote OUT, then failed (a traceback) flushing no stdout."""
    output = tmp_path / "gelu.mlir"
    done = run_without_stdio([*XFUSE_OPT, GELU, "-o", str(output)], 1)
    assert (done.returncode, done.stderr) == (0, "")
    assert output.read_text().startswith("builtin.module {")


@pytest.mark.parametrize(
    "command",
    [
        ["lecture", "--quick", "--n", "4096", "--repeat", "1", "--json", "{file}.json"],
        ["cost", GELU, "--plot", "{file}.png"],
        ["bench", *BENCH[1:], "--plot", "{file}.png"],
    ],
    ids=lambda command: command[0],
)
def test_a_file_named_is_written_where_stdout_went_away(tmp_path: Path, command: list[str]) -> None:
    """The tables came first and failed: the JSON or plot file named was never written (after
    a whole lecture's measurements)."""
    arguments = [a.replace("{file}", str(tmp_path / "figures")) for a in command]
    done = run_into_closed_pipe([*XFUSE, *arguments])
    assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, "")
    (written,) = tmp_path.iterdir()
    assert written.stat().st_size > 0


def test_xfuse_opt_without_stdin_is_a_one_line_error() -> None:
    """`xfuse-opt <&-` (reading stdin) was an "internal error" with status 2."""
    done = run_without_stdio(XFUSE_OPT, 0)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "xfuse-opt: error: no standard input to read the input from (-)\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([*XFUSE_OPT, GELU, "-o", "/dev/full"], "xfuse-opt: error: "),
        (
            [*XFUSE, "lecture", "--quick", "--repeat", "1", "--json", "/dev/full"],
            "xfuse lecture: error: ",
        ),
    ],
    ids=["xfuse-opt", "xfuse"],
)
def test_a_full_device_as_the_output_file_is_named(command: list[str], message: str) -> None:
    """A write's OSError has no file name: `xfuse lecture --json /dev/full` said only "No space
    left on device", xfuse-opt `[Errno 28] No space left on device`."""
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1
    assert done.stderr.endswith(f"{message}No space left on device: /dev/full\n"), done.stderr


def test_a_reader_gone_partway_through_a_large_module_is_status_141(tmp_path: Path) -> None:
    """xDSL writes the module in one call: where the reader went away partway through it, the
    rest was dropped without a `BrokenPipeError`, and xfuse-opt's status was 0 (a cut-short
    output reported as complete under `set -o pipefail`)."""
    program = tmp_path / "large.ew"
    names = [f"a{i}" for i in range(3000)]
    program.write_text(
        "".join(f"{n} = x * {i};\n" for i, n in enumerate(names))
        + "output "
        + ", ".join(names)
        + ";\n"
    )
    read_end, write_end = os.pipe()
    child = subprocess.Popen(
        [*XFUSE_OPT, str(program)], stdout=write_end, stderr=subprocess.PIPE, text=True
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.read(16) == b"builtin.module {"
    _, stderr = child.communicate(timeout=300)
    assert (child.returncode, stderr) == (SIGPIPE_STATUS, "")


SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_every_benchmark_script_parses_and_ends_as_the_clis(script: Path) -> None:
    """Each makes its parser with `script_parser` (argparse's own dropped a failed write of the
    help: `--help | true` exited 0) and ends through `run_script` (Python's `Exception ignored
    ... BrokenPipeError` and status 120, or a traceback, where it did not); the next test runs
    one of them so."""
    source = script.read_text()
    assert "ArgumentParser(" not in source and "script_parser(" in source, script.name
    assert re.search(r'\nif __name__ == "__main__":\n    run_script\(', source), script.name


@pytest.mark.parametrize("mode", ["closed-pipe", "closed-pipe-unbuffered", "no-stdout"])
def test_a_benchmark_script_ends_as_the_clis_where_stdout_is_gone(mode: str) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "gelu_shapes.py"), "--help"]
    if mode == "no-stdout":  # (an OSError's traceback)
        done = run_without_stdio(command, 1)
        message = "gelu_shapes.py: error: no standard output to write to (it was closed)\n"
        assert (done.returncode, done.stderr) == (1, message)
    else:
        done = run_into_closed_pipe(command, buffered=mode == "closed-pipe")
        assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, "")


@pytest.mark.parametrize("columns", ["0", "-3", "abc", "²", "57", "100000000", "1" * 5000])
@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_columns_that_name_no_size_are_the_terminals(
    monkeypatch: pytest.MonkeyPatch, columns: str, terminal: bool
) -> None:
    """`COLUMNS=0` on a terminal: rich took it as no room, and the commands printed nothing,
    status 0; `COLUMNS=²` (or `LINES=²`) failed every table, piped too ("invalid literal for
    int()")."""
    from xfuse.tools import closed_stdout

    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("LINES", columns)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    console = closed_stdout.stdout_console()
    sized = columns == "57"  # (rich drew rules 10**8 wide; 5,000 digits failed in int())
    if terminal:
        assert console.width == (57 if sized else 80)  # (80: no terminal under pytest)
    else:
        assert console.width == 120
    console.print("x")  # (rich reads its size here)
