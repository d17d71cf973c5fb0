"""`xfuse bench FILE.ew|--expr EXPR`: a size sweep of a compiled kernel vs numpy and peers."""

from __future__ import annotations

import argparse
import json
import sys
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfuse.benchmarking.timing import format_duration
from xfuse.tools.cli import (
    option_type,
    plot_file,
    positive_int,
    program_file,
    program_name,
    read_program,
)
from xfuse.tools.lecture_cmd import parse_size
from xfuse.transforms.options import CpuMath

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time a program compiled by xfuse against numpy, peers and the bandwidth ceiling",
        description=(
            "Compile FILE.ew (or --expr) with xfuse and time it, one size after another, against "
            "numpy one op at a time and the bandwidth ceiling (a streaming kernel with the same "
            "inputs and outputs); --peers adds numexpr, numba, jax.jit, torch (eager), "
            "torch.compile and upstream MLIR, "
            "whichever are installed. Effective GB/s counts the fused program's traffic "
            "(each of its kernels reads its inputs once and writes its outputs once)."
        ),
    )
    program = parser.add_mutually_exclusive_group(required=True)  # (a usage error: exit 2)
    program.add_argument(
        "file", type=program_file, nargs="?", metavar="FILE.ew", help="the program ('-': stdin)"
    )
    program.add_argument("--expr", help='an expression or program instead of a file: "tanh(x) * y"')
    parser.add_argument(
        "--sizes",
        type=option_type(parse_sizes),
        default=None,
        metavar="SIZES",
        help="element counts: 2^12..2^24 (every 4x from the first, up to the last), or a list "
        "4096,2^20 (default 2^12..2^24)",
    )
    parser.add_argument(
        "--threads", type=positive_int, default=1, help="threads for the kernels (default 1)"
    )
    parser.add_argument(
        "--math",
        choices=typing.get_args(CpuMath),
        default="approx",
        help="xfuse's vectorizable approximations or the C library (default approx)",
    )
    parser.add_argument("--peers", action="store_true", help="also time the installed peers")
    parser.add_argument(
        "--repeat", type=positive_int, default=3, help="timed runs per point (median; default 3)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--plot",
        type=plot_file,
        metavar="PNG",
        help="write GB/s against size (FILE.png if no suffix)",
    )
    parser.set_defaults(run=run)


def parse_sizes(text: str) -> list[int]:
    """`2^12..2^20` -> 2^12, 2^14, ..., 2^20 (each 4x the last); `4096,2^20` -> those.
    ValueError for an empty range or list."""
    if ".." in text:
        low, _, high = text.partition("..")
        sizes, size = [], parse_size(low)
        while size <= parse_size(high):
            sizes.append(size)
            size *= 4
        if not sizes:
            raise ValueError(f"empty range {text}: the first size is larger than the last")
        return sizes
    sizes = [parse_size(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise ValueError(f"no sizes in {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from xfuse.benchmarking.bench import DEFAULT_SIZES, bench
    from xfuse.tools.cli import CliError
    from xfuse.tools.closed_stdout import stdout_console

    if args.expr is not None and args.expr.strip().endswith(".ew"):  # never an expression
        raise CliError(f"--expr takes an expression, not a file: xfuse bench {args.expr.strip()}")
    program = args.expr if args.expr is not None else read_program(args.file)
    status = Console(stderr=True)
    status_context = status.status("", spinner="dots")
    with status_context:
        result = bench(
            program,
            DEFAULT_SIZES if args.sizes is None else args.sizes,
            threads=args.threads,
            math=args.math,
            peers=args.peers,
            repeat=args.repeat,
            progress=lambda what: _Update(status_context, what),
            filename="<expr>" if args.file is None else program_name(args.file),
        )
    name = program_title(result.source, args.file if isinstance(args.file, Path) else None)
    # The results first: a plot that cannot be written (a full disk) loses none of them; and
    # the plot however the results fare (`| head -1` lost the file after the whole sweep).
    try:
        if args.json:
            from xfuse.analysis.cost_report import to_plain

            json.dump(to_plain(result), sys.stdout, indent=2)
            print()
        else:
            print_result(stdout_console(), result, name)
    finally:
        if args.plot is not None:
            plot_bandwidth(result, args.plot, name)
    if args.plot is not None and not args.json:
        print(f"bandwidth plot: {args.plot}")
    return 0


class _Update:
    """A context that shows `what` on the running status line."""

    def __init__(self, status: Any, what: str):
        self.status, self.what = status, what

    def __enter__(self) -> None:
        self.status.update(f"[dim]measuring {self.what}[/dim]")

    def __exit__(self, *exc: object) -> None:
        return None


def program_title(program: str, path: Path | None = None) -> str:
    """A short name for a program: its file's name, else its first statement that is not a
    declaration, without comments (cut to 60 characters)."""
    if path is not None:
        return path.name
    code = "\n".join(line.partition("#")[0] for line in program.splitlines())
    statements = [" ".join(s.split()) for s in code.split(";")]
    first = next(
        (s for s in statements if s and s.split()[0] not in ("input", "output")),
        " ".join(program.split()),
    )
    return first if len(first) <= 60 else first[:57] + "..."


def _settings(result: Any) -> str:
    threads = f"{result.threads} thread{'s' if result.threads > 1 else ''}"
    return f"{result.storage}, {threads}, math={result.math}"


def print_result(console: Any, result: Any, name: str) -> None:
    from rich.table import Table
    from rich.text import Text

    from xfuse.benchmarking.bench import share

    # The settings on a line of their own (a program's last line may be a comment), the program
    # as plain text (not rich markup: `x[n]` is a declaration, not a style).
    console.print(Text.assemble((name, "bold"), f"  {_settings(result)}"))
    if result.source.strip() != f"{name};":
        console.print(Text("  " + result.source.strip().replace("\n", "\n  ")))
    for n in result.sizes:
        table = Table(title=f"n = {n:,}", title_justify="left")
        for header in ("variant", "time", "GB/s", "of ceiling", "vs numpy per-op", "max error"):
            table.add_column(header, justify="left" if header == "variant" else "right")
        for row in (r for r in result.rows if r.n == n):
            table.add_row(
                row.variant,
                format_duration(row.time_s),  # (`0.000 ms` at 2^12: three digits)
                f"{row.bandwidth / 1e9:.1f}",
                share(row.of_ceiling),
                f"{row.speedup:.1f}x",
                "-" if row.max_error is None else f"{row.max_error:.1e}",
            )
        console.print(table)
    if result.versions:
        console.print(f"peers: {', '.join(result.versions)}")
    for line in result.skipped:
        console.print(f"skipped {line}")
    console.print(Text(f"host: {result.host}"), soft_wrap=True)  # one line, as the scripts print


def bandwidth_figure(result: Any, name: str) -> Figure:
    """Effective GB/s against size, one line per variant (log-2 size axis), titled `name`."""
    from xfuse.tools.cli import import_pyplot

    plt = import_pyplot()
    figure, axes = plt.subplots(figsize=(8, 5))
    for variant in result.variants:
        rows = [r for r in result.rows if r.variant == variant]
        style = "k--" if variant == "bandwidth ceiling" else "o-"
        axes.plot([r.n for r in rows], [r.bandwidth / 1e9 for r in rows], style, label=variant)
    axes.set_xscale("log", base=2)
    axes.set_xlabel(f"elements ({result.storage})")
    axes.set_ylabel("effective GB/s (fused traffic / time)")
    axes.set_title(f"{name}\n{_settings(result)}", fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    return figure


def plot_bandwidth(result: Any, path: Path, name: str) -> None:
    """Write `bandwidth_figure` to `path`."""
    from xfuse.tools.cli import save_figure

    save_figure(bandwidth_figure(result, name), path)
