"""What the benchmark scripts (`benchmarks/*.py`) share with the CLIs: an argument parser whose
help fails as any output does where stdout is gone (`WritingParser`), and their end: status 141
where the reader of stdout went away, 130 at Ctrl-C, and a one-line error where the script was
started without a stdout (`>&-`), each without a traceback (`exit_status`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from xfuse.tools.closed_stdout import StdoutGoneError, WritingParser, exit_status


def script_parser(description: str) -> argparse.ArgumentParser:
    """A benchmark script's argument parser: its docstring `description` as its help, as
    written, and no abbreviated options (a typo is an error, not another option)."""
    return WritingParser(
        allow_abbrev=False,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Run a script's `main()` and exit with its status (0 where it returns None) as the CLIs
    end (a BrokenPipeError traceback where its reader went away, an OSError's without a
    stdout)."""

    program = Path(sys.argv[0]).name

    def run() -> int | None:
        try:
            return main()
        except StdoutGoneError as error:
            print(f"{program}: error: {error.strerror}", file=sys.stderr)
            return 1

    sys.exit(exit_status(run, program))
