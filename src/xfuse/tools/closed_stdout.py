"""What the CLIs do when the reader of their output goes away (`xfuse cost ... | head -1`).

Python ignores SIGPIPE, so a write to a pipe whose reader has closed raises BrokenPipeError
where `cat` or `seq` would die of the signal; unhandled, it printed a traceback, or where the
output sat in stdout's buffer until the interpreter flushed it at exit, `Exception ignored ...
BrokenPipeError` and status 120. This module follows the Python documentation's pattern (the
`signal` module's "Note on SIGPIPE"): catch it, point stdout at /dev/null so that the flush at
exit has somewhere to go, and exit quietly.

The status is 141, the one a shell gives a tool that SIGPIPE ended (128 + 13: `yes | head -1`
under `set -o pipefail`), not 0: the output was cut short, which a script that checks statuses
can then tell apart from a complete run (0) and from an error (1), as it does for `cat` and
`seq`; where a short read is intended, `head` already says so by its own status.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import functools
import io
import os
import signal
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

SIGPIPE_STATUS = 128 + signal.SIGPIPE
"""141: the status a shell reports for a command that SIGPIPE ended."""


def stdout_closed() -> int:
    """Point stdout at /dev/null (what is still buffered, and any later write, goes nowhere,
    with no error at exit) and return `SIGPIPE_STATUS`, the exit status to give."""
    _stdout_to_devnull()
    return SIGPIPE_STATUS


def _stdout_to_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _unflushed_stdout() -> OSError | None:
    """Flush stdout; where that fails but by a closed pipe (a full disk: `> /dev/full`), point
    stdout at /dev/null, where what stayed buffered then goes (Python's flush at exit failed
    on it again: `Exception ignored ...` and status 120), and return the error."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        _stdout_to_devnull()
        sys.stdout.flush()
        return error
    return None


class StdoutGoneError(OSError):
    """A write to the stdout of a command started without one (`_NoStdout`)."""


class _NoStdout(io.TextIOBase):
    """stdout for a command started without one (`>&-`, where Python's is None): a write fails
    with a message, as `cat`'s does, where it was an AttributeError's traceback; a command that
    writes only files (`xfuse-opt -o FILE`) runs as usual."""

    def write(self, text: str) -> int:
        raise StdoutGoneError(errno.EBADF, "no standard output to write to (it was closed)")


class WritingParser(argparse.ArgumentParser):
    """argparse's parser, whose help and version fail as any output does where stdout is
    gone (argparse drops the OSError: `xfuse --help | true` exited 0 having written nothing,
    and so did `xfuse --version >&-`)."""

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        if message:
            (file or sys.stderr).write(message)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check, with the choice a misspelt one is closest to (`xfuse lectur`:
        "did you mean 'lecture'?", as Python 3.14's `suggest_on_error` says)."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as error:
            choices = [str(choice) for choice in action.choices or ()]
            close = difflib.get_close_matches(str(value).lower(), choices, 1)  # (INFO: info)
            if not close or "did you mean" in error.message:
                raise
            raise argparse.ArgumentError(
                action, f"{error.message} (did you mean {close[0]!r}?)"
            ) from None


INTERRUPTED_STATUS = 128 + signal.SIGINT
"""130: the status a shell reports for a command that Ctrl-C (SIGINT) ended."""


def exit_status(run: Callable[[], int | None], program: str) -> int:
    """`run()`'s exit status (0 where it returns None, as a script's `main()` does), stdout
    flushed here (also before an exception or a `SystemExit`,
    `--help`'s), where a closed pipe is caught: at exit it was not. `SIGPIPE_STATUS`, with no
    message, where the reader of stdout went away; `INTERRUPTED_STATUS`, with no traceback,
    where Ctrl-C stopped it (as `mlir-opt` and `cat`). Without a stderr (`2>&-`) messages go
    nowhere: Python's `print(..., file=None)` wrote them into stdout, the command's output.
    Where the last flush fails otherwise (a full disk) and the command reported no error (the
    output sat in the buffer: `xfuse --version > /dev/full`), the error is reported here, as
    `{program}: error: ...`, with status 1; where stdout is buffered (no `PYTHONUNBUFFERED`),
    this ended in a traceback and status 120."""
    if sys.stdout is None:
        sys.stdout = _NoStdout()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    unwritten: OSError | None = None
    try:
        try:
            status = run() or 0
        finally:
            unwritten = _unflushed_stdout()
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        return INTERRUPTED_STATUS
    except SystemExit as stop:  # argparse's `--help` and `--version`, its usage errors
        if unwritten is None or stop.code not in (0, None):
            raise
        status = 0
    if unwritten is not None and status == 0:
        print(f"{program}: error: {unwritten.strerror or unwritten}", file=sys.stderr)
        return 1
    return status


@functools.cache
def _stdout_console_class() -> type[Console]:
    """rich's Console, with a closed stdout left to `exit_status` (rich's own handler exits with
    status 1: `xfuse cost FILE | head -1` exited 1 where `--json` exits 141). Made on first use:
    xfuse-opt, which imports this module, runs without rich."""
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to render
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return StdoutConsole


PIPED_COLUMNS = 120
"""The width of the tables where stdout is no terminal (rich assumes 80 columns then)."""


def stdout_console() -> Console:
    """A rich Console on stdout for a command's tables: wide enough for them when piped, and
    leaving a closed stdout to `exit_status`; on a terminal as wide as `COLUMNS` says, or the
    terminal is where it names no size (rich took `COLUMNS=0` for no room at all, printing
    nothing with status 0, and failed on `COLUMNS=²`, which `str.isdigit` takes)."""
    width = None if sys.stdout.isatty() else PIPED_COLUMNS
    return _stdout_console_class()(width=width, _environ=sized_environment())


def sized_environment() -> dict[str, str]:
    """The environment, without a `COLUMNS` or `LINES` that names no size (for rich)."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in ("COLUMNS", "LINES") or _a_size(value)
    }


def _a_size(value: str) -> bool:
    """Whether `value` is a terminal's size: 1 to 10,000 (rich drew its rules that wide, and a
    value of more than 4,300 digits was int()'s ValueError)."""
    return value.isascii() and value.isdecimal() and len(value) <= 6 and 0 < int(value) <= 10_000
