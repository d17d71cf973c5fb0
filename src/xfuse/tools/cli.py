"""`xfuse`: the user-facing command line, one subcommand per module.

A subcommand module has `register(subparsers)`, which adds its parser and sets `run` (a function of
the parsed arguments returning the exit status) as a default. To add one, write the module and
list it in `SUBCOMMANDS`. User errors (`CliError`, a bad program, bad options, unreadable files)
print one line on stderr and exit with status 1; argparse's usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from xdsl.utils.exceptions import DiagnosticException, VerifyException

SUBCOMMANDS: tuple[str, ...] = (
    "xfuse.tools.cost_cmd",
    "xfuse.tools.lecture_cmd",
    "xfuse.tools.bench_cmd",
    "xfuse.tools.cache_cmd",
)


class CliError(Exception):
    """A user error a subcommand reports: printed as `xfuse <command>: error: <message>`."""


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

    parser = argparse.ArgumentParser(
        prog="xfuse", description="A compiler for elementwise tensor expressions."
    )
    parser.add_argument("--version", action="version", version=xfuse.versions())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from xfuse.analysis.cost import CostModelError
    from xfuse.frontend.language import EwSyntaxError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except BrokenPipeError:  # the reader (`| head`) went away: drop the rest quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except EwSyntaxError as error:
        print(error, file=sys.stderr)
    except (CliError, CostModelError, DiagnosticException, VerifyException, ValueError) as error:
        print(f"xfuse {args.command}: error: {error}", file=sys.stderr)
    except OSError as error:
        print(f"xfuse {args.command}: error: {error.strerror}: {error.filename}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
