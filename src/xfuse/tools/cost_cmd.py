"""`xfuse cost FILE.ew`: the program's GPU cost fused and unfused, side by side (or as JSON)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import warnings
from dataclasses import replace
from typing import Any

from xfuse.analysis.hardware import DEFAULT_LAUNCH_US, DEVICE_CHOICES, device
from xfuse.tools.cli import plot_file, program_file


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cost",
        help="predict GPU time, traffic and launches, fused vs unfused",
        description=(
            "Compile FILE.ew with ew-optimize,ew-fuse and with ew-fuse{mode=none}, and price both "
            "on a GPU: bytes moved, FLOPs, launches, roofline time (see xfuse.analysis.cost)."
        ),
    )
    parser.add_argument(
        "file", type=program_file, metavar="FILE.ew", help="the program ('-': stdin)"
    )
    parser.add_argument(
        "--device",
        default="h100",
        help=f"GPU: {DEVICE_CHOICES}, in any case (default h100)",
    )
    parser.add_argument(
        "--shape",
        help="iteration space, sizes joined by x (default 4096x14336, with each dim the program "
        "fixes at its size: input x[4, 8] is priced at 4x8)",
    )
    parser.add_argument(
        "--dtype",
        default="bf16",
        help="storage dtype of inputs the program does not declare: f16, bf16, f32 or f64 "
        "(default bf16)",
    )
    parser.add_argument(
        "--launch-us",
        type=float,
        default=DEFAULT_LAUNCH_US,
        help=f"launch overhead per kernel, us (default {DEFAULT_LAUNCH_US:g})",
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=DIMS",
        help="an input's own shape, dims joined by ',': ints are static, names dynamic "
        "(e.g. b=14336 for a real bias); other inputs have --shape's rank",
    )
    parser.add_argument("--l2", action="store_true", help="also apply the cache-aware L2 model")
    parser.add_argument(
        "--epilogue", metavar="INPUT", help="what-if: INPUT comes from a matmul's epilogue"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--plot",
        type=plot_file,
        metavar="PNG",
        help="write a roofline plot (FILE.png if no suffix)",
    )
    parser.set_defaults(run=run)


def parse_input_shape(text: str) -> tuple[str, tuple[int | str, ...]]:
    """`b=14336` -> ("b", (14336,)); `x=t,d` -> ("x", ("t", "d")) (names are dynamic dims)."""
    from xfuse.tools.cli import CliError

    name, sep, dims = text.partition("=")
    if not sep or not name.strip() or not dims.strip():
        raise CliError(f"bad --input-shape {text!r}: expected NAME=DIMS, like b=14336")
    parsed: list[int | str] = []
    for dim in (d.strip() for d in dims.split(",")):
        if dim.isdecimal():  # isdigit() is true of '²', which int() refuses
            parsed.append(int(dim))
        elif dim.isidentifier():
            parsed.append(dim)
        else:
            raise CliError(
                f"bad --input-shape {text!r}: each dim is a size >= 0 or a name, got {dim!r}"
            )
    return name.strip(), tuple(parsed)


def run(args: argparse.Namespace) -> int:
    from xfuse.analysis.cost import (
        CostOptions,
        ShapeMismatchError,
        fitted_problem_shape,
        parse_shape,
    )
    from xfuse.analysis.cost_report import print_program, program_json
    from xfuse.dialects.dtypes import dtype_name
    from xfuse.frontend.language import parse_program
    from xfuse.runtime.cost_driver import cost_program
    from xfuse.tools.cli import CliError, program_name, read_program
    from xfuse.tools.closed_stdout import stdout_console
    from xfuse.transforms.pipeline import only_function

    try:
        shape = CostOptions().shape if args.shape is None else parse_shape(args.shape)
    except ValueError as error:
        raise CliError(f"--shape: {error}") from None
    if not (math.isfinite(args.launch_us) and args.launch_us >= 0):
        raise CliError(f"--launch-us: expected a finite number >= 0, got {args.launch_us}")
    for option, check, value in (
        ("--device", device, args.device),
        ("--dtype", dtype_name, args.dtype),
    ):
        try:
            check(value)
        except ValueError as error:
            raise CliError(f"{option}: {error}") from None
    options = CostOptions(
        device=args.device, shape=shape, dtype=args.dtype, launch_us=args.launch_us, l2=args.l2
    )
    input_shapes: dict[str, tuple[int | str, ...]] = {}
    for text in args.input_shape:
        name, dims = parse_input_shape(text)
        if name in input_shapes:
            raise CliError(f"--input-shape: '{name}' given twice")
        input_shapes[name] = dims
    source = read_program(args.file)
    if args.shape is None:  # (a program of fixed dims failed the default's 4096x14336)
        # Fitted to the function `cost_program` prices: the shapes the program declares, those
        # --input-shape gives, the others of the shape's rank; a shape for an input it lacks is
        # `cost_program`'s to say.
        with warnings.catch_warnings(), contextlib.suppress(ValueError):
            warnings.simplefilter("ignore")  # (`cost_program` parses it again, warning once)
            module = parse_program(
                source,
                shapes=input_shapes or None,
                filename=program_name(args.file),
                default_shape=(None,) * len(shape),
            )
            options = replace(options, shape=fitted_problem_shape(only_function(module), shape))
    try:
        program = cost_program(
            source,
            options,
            filename=program_name(args.file),
            input_shapes=input_shapes,
            epilogue=args.epilogue,
        )
    except ShapeMismatchError as error:
        option = "--input-shape" if error.input_name in input_shapes else "--shape"
        raise CliError(f"{option}: {error}") from None
    if args.json:
        json.dump(program_json(program), sys.stdout, indent=2)
        print()
    else:
        print_program(stdout_console(), program)
    if args.plot is not None:
        from xfuse.tools.roofline import plot_roofline

        plot_roofline(program, args.plot)
        if not args.json:
            print(f"roofline plot: {args.plot}")
    return 0
