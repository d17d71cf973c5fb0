"""`xfuse`: the user-facing command line, one subcommand per module.

A subcommand module has `register(subparsers)`, which adds its parser and sets `run` (a function of
the parsed arguments returning the exit status) as a default. To add one, write the module and
list it in `SUBCOMMANDS`. User errors (`CliError`, a bad program, bad options, unreadable files,
sizes too large for memory) print one line on stderr and exit with status 1; argparse's usage
errors (an option's value out of range) exit with 2; where the reader of the output goes away
(`xfuse cost ... | head -1`), the command stops quietly with status 141, as `cat` would
(`closed_stdout`).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from xdsl.utils.exceptions import DiagnosticException, VerifyException

from xfuse.tools.cli_warnings import command_line_warnings, escalated_warning
from xfuse.tools.closed_stdout import WritingParser, exit_status, stdout_closed

SUBCOMMANDS: tuple[str, ...] = (
    "xfuse.tools.cost_cmd",
    "xfuse.tools.lecture_cmd",
    "xfuse.tools.bench_cmd",
    "xfuse.tools.cache_cmd",
)


class CliError(Exception):
    """A user error a subcommand reports: printed as `xfuse <command>: error: <message>`."""


ProgramFile = Path | Literal["-"]
"""A program's file as a command names it: `-` is standard input, as for `xfuse-opt` (and
mlir-opt); `./-` is a file named `-`."""

STDIN_NAME = "stdin"
"""The file name diagnostics give standard input, as xDSL's, and so `xfuse-opt`'s, do."""


def program_file(text: str) -> ProgramFile:
    """A program file argument (argparse `type=`): `-`, or a path (not an empty one, which
    `Path` reads as `.`: "Is a directory: .")."""
    if not text:
        raise argparse.ArgumentTypeError("an empty file name")
    return "-" if text == "-" else Path(text)


def program_name(file: ProgramFile) -> str:
    """The file name a program's diagnostics give: `stdin` for `-`, `./-` for the file `./-`
    (which `Path` spells `-`)."""
    if not isinstance(file, Path):
        return STDIN_NAME
    return f".{os.sep}-" if str(file) == "-" else str(file)


def read_program(file: ProgramFile) -> str:
    """An `.ew` file's text, or standard input's for `-`. Bytes that are not UTF-8 become
    U+FFFD, which the parser reports with the file's name, line and column (as `xfuse-opt`
    does); a leading byte order mark is dropped, as Python drops it from a source file."""
    if isinstance(file, Path):
        try:
            data = file.read_bytes()
        except OSError as error:  # named as the diagnostics name it (`./-` was "-", stdin's)
            error.filename = program_name(file)
            raise
    elif sys.stdin is None:  # started with stdin closed (`<&-`)
        raise CliError("no standard input to read the program from (-)")
    else:
        data = sys.stdin.buffer.read()
    return data.decode("utf-8-sig", errors="replace")


T = TypeVar("T")


def option_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """`parse` as an argparse `type=` that reports its ValueError's message (argparse's own is
    "invalid parse value"): `xfuse bench: error: argument --sizes: empty range 2^10..2^4 ...`."""

    @functools.wraps(parse)
    def parse_option(text: str) -> T:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse_option


def output_file(text: str, what: str, example: str) -> Path:
    """A file a command writes when it is done, checked before it starts (a lecture runs for
    half a minute before it writes `--json`): not a directory, in one that exists."""
    if not text:  # (`Path("")` is ".", a directory: "argument --json:  is a directory")
        raise ValueError(f"an empty file name: give the {what} file name ({example})")
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"{text} is a directory: give the {what} file name ({path / example})")
    if not path.parent.is_dir():
        raise ValueError(f"{text}: no directory {path.parent} to write it in")
    return path


@option_type
def plot_file(text: str) -> Path:
    """`--plot`'s file: the format its suffix names (`.png`, `.svg`, `.pdf`), a name without one
    gaining `.png` (as matplotlib writes it, so the path printed is the one written). A
    directory is an error: a plot is one file, named by whoever asks for it; so are a format
    matplotlib does not write and matplotlib missing, before the work, not after it."""
    path = output_file(text, "plot's", "plot.png")
    path = path if path.suffix else path.with_name(f"{path.name}.png")
    try:
        import_pyplot()
    except CliError as error:  # "argument --plot: needs matplotlib: ..."
        raise ValueError(str(error).removeprefix("--plot ")) from None
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise ValueError(
            f"{text}: matplotlib writes no '{path.suffix}' files: end the name in .png, .svg or "
            f".pdf (or {', '.join(f'.{name}' for name in sorted(formats))})"
        )
    return path


@contextmanager
def naming_file(path: Path) -> Iterator[None]:
    """An OSError raised inside names `path` where it names no file (a write's, as a full
    disk's: `xfuse lecture: error: No space left on device` named no file)."""
    try:
        yield
    except OSError as error:
        error.filename = error.filename or str(path)
        raise


def os_error_message(error: OSError) -> str:
    """An OSError as the CLIs report it: its reason, then its file where it names one (stdout's
    names none: it ended in `: None`)."""
    where = "" if error.filename is None else f": {error.filename}"
    return f"{error.strerror or error}{where}"


def save_figure(figure: Any, path: Path) -> None:
    """Write a matplotlib figure to `path`, in the format its suffix names, and close it."""
    try:
        with naming_file(path):
            figure.savefig(path, dpi=120)
    finally:
        import_pyplot().close(figure)


@option_type
def json_file(text: str) -> Path | str:
    """`--json`'s file, or `-` (stdout)."""
    return text if text == "-" else output_file(text, "JSON", "figures.json")


def _integer_at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:  # (Python's "invalid literal for int() with base 10: '2^1'")
        raise ValueError(f"expected an integer >= {least}, got {text!r}") from None
    if value < least:
        raise ValueError(f"expected an integer >= {least}, got {value}")
    return value


@option_type
def positive_int(text: str) -> int:
    """An integer >= 1 (`--repeat`, `--threads`)."""
    return _integer_at_least(text, 1)


@option_type
def non_negative_int(text: str) -> int:
    """An integer >= 0 (a benchmark's `--llvm-kernels`: 0 for none)."""
    return _integer_at_least(text, 0)


MAX_LOG2_SIZE = 30
"""The largest `log2_size`: 2^30 elements, 4 GiB an f32 array."""


@option_type
def log2_size(text: str) -> int:
    """A size given as its log2, 0 to `MAX_LOG2_SIZE` (the benchmarks' `--n`, `--sizes`)."""
    value = int(text)
    if not 0 <= value <= MAX_LOG2_SIZE:
        raise ValueError(
            f"expected the log2 of a size, 0 to {MAX_LOG2_SIZE}, got {value} (2^{value} elements)"
        )
    return value


def import_pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend; CliError if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError(
            "--plot needs matplotlib: pip install 'xfuse[plot]' (or pip install matplotlib)"
        ) from None
    return plt


def build_parser() -> argparse.ArgumentParser:
    import xfuse

    # No abbreviations (`--peer` for `--peers`), here or in a subcommand: a later option would
    # silently change what an old abbreviation means.
    parser = WritingParser(  # (and its subcommands': `add_subparsers` takes its class)
        prog="xfuse",
        description="A compiler for elementwise tensor expressions.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=xfuse.versions())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        importlib.import_module(module).register(subparsers)
    for subparser in subparsers.choices.values():
        subparser.allow_abbrev = False
        subparser.set_defaults(command_parser=subparser)
    return parser


def reject_unknown(subparser: argparse.ArgumentParser, unknown: Sequence[str]) -> None:
    """A usage error for the arguments the subcommand does not take, with its own usage and
    the option a misspelt one is closest to (argparse reports them at `xfuse`'s level, with
    `xfuse`'s usage, which names no option of the subcommand)."""
    subparser.error(unrecognized_arguments(subparser, unknown))


def unrecognized_arguments(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" message, with the option of `parser` each misspelt
    one is closest to."""
    options = [o for action in parser._actions for o in action.option_strings]
    hints = [  # (an option itself is unrecognized after `--`, a positional there: no hint)
        f"{word} (did you mean {close[0]}?)"
        if _option_name(word) not in options  # (an option's own: after `--`)
        and word not in ("-", "--")  # (stdin, a file argument: "did you mean -h?"; the end
        # of options: "did you mean --n?")
        # (an option's name without its value: `--pass-pipeline=a,b`, mlir-opt's `-p`)
        and (close := difflib.get_close_matches(_option_name(word), options, 1))
        else word
        for word in unknown
    ]
    return f"unrecognized arguments: {' '.join(hints)}"


def _option_name(word: str) -> str:
    """`word`'s option name: before its `=` where it is a long option with a value."""
    return word.split("=", 1)[0] if word.startswith("--") else word


def main(argv: Sequence[str] | None = None) -> int:
    """Run `xfuse`; its exit status (141 where the reader of stdout went away: `closed_stdout`)."""
    with command_line_warnings():
        return exit_status(lambda: _run(argv), "xfuse")


def _run(argv: Sequence[str] | None) -> int:
    from xfuse.analysis.cost import CostModelError
    from xfuse.frontend.language import EwSyntaxError

    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
    except BrokenPipeError:  # (`--help | true`)
        return stdout_closed()
    except OSError as error:  # (`--version >&-`)
        print(f"xfuse: error: {os_error_message(error)}", file=sys.stderr)
        return 1
    if unknown:
        words = list(sys.argv[1:] if argv is None else argv)
        before_command = words[: words.index(args.command)] if args.command else words
        if any(word in before_command for word in unknown):  # `xfuse --bogus lecture`
            parser.error(unrecognized_arguments(parser, unknown))
        reject_unknown(args.command_parser, unknown)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except BrokenPipeError:  # the reader (`| head -1`) went away; not an OSError to report
        return stdout_closed()
    except EwSyntaxError as error:
        print(error, file=sys.stderr)
    except (CliError, CostModelError, DiagnosticException, VerifyException, ValueError) as error:
        print(f"xfuse {args.command}: error: {error}", file=sys.stderr)
    except OSError as error:
        print(f"xfuse {args.command}: error: {os_error_message(error)}", file=sys.stderr)
    except MemoryError as error:
        reason = f": {error}" if str(error) else ""  # (numpy says what; a bare one nothing)
        print(f"xfuse {args.command}: error: out of memory{reason}", file=sys.stderr)
    except Warning as warning:
        print(escalated_warning(warning, f"xfuse {args.command}"), file=sys.stderr)
    return 1


if __name__ == "__main__":
    # `python -m xfuse.tools.cli` runs this file as `__main__`, a second copy of the module whose
    # CliError is not the one the subcommands raise: run the imported module's main instead.
    from xfuse.tools import cli

    sys.exit(cli.main())
