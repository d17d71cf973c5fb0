"""`xfuse lecture`: the lecture's four demos through the real pipeline, as tables (or JSON)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

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
    parser.add_argument("--source", type=Path, metavar="FILE.ew", help="a program instead of GELU")
    parser.add_argument(
        "--n",
        type=parse_size,
        metavar="N",
        help=f"elements measured in demo 4 (e.g. 1000000 or 2^20; default 2^{DEFAULT_LOG_N})",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="R",
        help="timed runs per variant in each of demo 4's rounds (median; default 3, 2 quick)",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="write every figure as JSON to FILE ('-': stdout, no tables)"
    )
    parser.set_defaults(run=run)


def parse_size(text: str) -> int:
    """`1048576`, `2^20` or `1<<20` -> 1048576; argparse reports a ValueError as a usage error."""
    text = text.strip()
    for separator in ("^", "<<"):
        if separator in text:
            base, _, exponent = text.partition(separator)
            value = (int(base) ** int(exponent)) if separator == "^" else int(base) << int(exponent)
            break
    else:
        value = int(text)
    if value < 1:
        raise ValueError(f"size must be >= 1, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from xfuse.tools import lecture
    from xfuse.tools.lecture_report import lecture_json, print_lecture

    started = time.perf_counter()
    if args.source is not None:
        program = lecture.load_program(args.source.read_text(), str(args.source))
    else:
        program = lecture.load_program()
    n = args.n or 1 << (QUICK_LOG_N if args.quick else DEFAULT_LOG_N)
    repeat = args.repeat or (2 if args.quick else 3)
    if repeat < 1:
        raise ValueError(f"--repeat must be >= 1, got {repeat}")
    status = Console(stderr=True)
    figures = lecture.run_lecture(program, n, repeat, progress=lecture_progress(status))
    to_stdout = args.json == "-"
    if not to_stdout:
        width = None if sys.stdout.isatty() else 120
        print_lecture(Console(width=width), figures)
    if args.json is not None:
        text = json.dumps(lecture_json(figures), indent=2)
        if to_stdout:
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
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
