"""`xfuse lecture`: the lecture's four demos through the real pipeline, as tables (or JSON)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from xfuse.tools.cli import (
    json_file,
    naming_file,
    option_type,
    positive_int,
    program_file,
    program_name,
    read_program,
)

DEFAULT_LOG_N = 24
QUICK_LOG_N = 20


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lecture",
        help="the lecture's four demos: dataflow, GPU traffic, memory plan, CPU measurement",
        description=(
            "Reproduce the dataflow-and-fusion lecture on GELU with bias and residual (or any "
            ".ew program): 1. the dataflow of the optimized IR, 2. the memory-traffic bill on an "
            "H100, unfused vs fused, 3. the memory plan of the unfused program, 4. numpy vs the "
            "fused kernels measured on this CPU, one thread. Every number comes from xfuse; "
            "every observation is computed from the numbers."
        ),
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"measure on 2^{QUICK_LOG_N} elements, fewer repeats"
    )
    parser.add_argument(
        "--source",
        type=program_file,
        metavar="FILE.ew",
        help="a program instead of GELU ('-': stdin)",
    )
    parser.add_argument(
        "--n",
        type=option_type(parse_size),
        metavar="N",
        help=f"elements measured in demo 4 (e.g. 1000000 or 2^20; default 2^{DEFAULT_LOG_N})",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        metavar="R",
        help="timed runs per variant in each of demo 4's rounds (median; default 3, 2 quick)",
    )
    parser.add_argument(
        "--json",
        type=json_file,
        metavar="FILE",
        help="write every figure as JSON to FILE ('-': stdout, no tables)",
    )
    parser.set_defaults(run=run)


MAX_SIZE_LOG2 = 62
"""The largest size a command accepts is 2^62 elements (numpy's sizes are int64)."""


def parse_size(text: str) -> int:
    """`1048576`, `2^20` or `1<<20` -> 1048576; argparse reports a ValueError as a usage error."""
    text = text.strip()
    separator = next((s for s in ("^", "<<") if s in text), None)
    try:
        parts = [int(part) for part in text.split(separator)] if separator else [int(text)]
        if len(parts) > 2:
            raise ValueError(text)
    except ValueError:
        raise ValueError(
            f"bad size {text!r}: expected an integer like 1048576, 2^20 or 1<<20"
        ) from None
    value = parts[0]
    if separator is not None:
        base, exponent = parts
        # never compute 2^99999999, nor (-2)^4 of `-2^4` (16: a negative size taken)
        in_range = 0 <= exponent <= MAX_SIZE_LOG2 and base >= 0
        value = (base**exponent if separator == "^" else base << exponent) if in_range else 0
    if not 1 <= value <= 1 << MAX_SIZE_LOG2:
        raise ValueError(f"size must be between 1 and 2^{MAX_SIZE_LOG2}, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from xfuse.tools import lecture
    from xfuse.tools.closed_stdout import stdout_console
    from xfuse.tools.lecture_report import lecture_json, print_lecture

    started = time.perf_counter()
    if args.source is not None:
        program = lecture.load_program(read_program(args.source), program_name(args.source))
    else:
        program = lecture.load_program()
    n = args.n or 1 << (QUICK_LOG_N if args.quick else DEFAULT_LOG_N)
    repeat = args.repeat if args.repeat is not None else 2 if args.quick else 3
    status = Console(stderr=True)
    figures = lecture.run_lecture(program, n, repeat, progress=lecture_progress(status))
    to_stdout = args.json == "-"
    try:
        if not to_stdout:
            print_lecture(stdout_console(), figures)
    finally:  # (the file named, however stdout fares: `| head -1` lost it after the run)
        if args.json is not None:
            text = json.dumps(lecture_json(figures), indent=2)
            if to_stdout:
                print(text)
            else:
                with naming_file(args.json):
                    args.json.write_text(text + "\n")
    if not to_stdout:
        status.print(f"[dim]xfuse lecture: {time.perf_counter() - started:.1f} s[/dim]")
    return 0


def lecture_progress(console: Any) -> Any:
    """A context manager factory showing `what` on stderr while a measurement runs."""
    from contextlib import contextmanager

    @contextmanager
    def progress(what: str) -> Any:
        with console.status(f"[dim]{what}[/dim]", spinner="dots"):
            yield

    return progress
