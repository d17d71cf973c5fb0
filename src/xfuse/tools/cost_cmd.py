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
from xfuse.tools.cli import option_type, plot_file, program_file


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
        type=device_name,
        default="h100",
        help=f"GPU: {DEVICE_CHOICES}, in any case (default h100)",
    )
    parser.add_argument(
        "--shape",
        type=problem_shape,
        help="iteration space, sizes joined by x (default 4096x14336, with each dim the program "
        "fixes at its size: input x[4, 8] is priced at 4x8)",
    )
    parser.add_argument(
        "--dtype",
        type=storage_dtype,
        default="bf16",
        help="storage dtype of inputs the program does not declare: f16, bf16, f32 or f64 "
        "(default bf16)",
    )
    parser.add_argument(
        "--launch-us",
        type=launch_us,
        default=DEFAULT_LAUNCH_US,
        help=f"launch overhead per kernel, us (default {DEFAULT_LAUNCH_US:g})",
    )
    parser.add_argument(
        "--input-shape",
        type=parse_input_shape,
        action="append",
        default=[],
        metavar="NAME=DIMS",
        help="an input's own shape, dims joined by ',': ints are static, names dynamic "
        "(e.g. b=14336 for a real bias; s= for a 0-d s); other inputs have --shape's rank",
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


# The options' values are checked as argparse parses them: a bad one is a usage error (status
# 2, as `xfuse bench`'s and `xfuse lecture`'s), before the program is read.


@option_type
def device_name(text: str) -> str:
    """`--device`: a name `xfuse.analysis.hardware.device` knows, as given."""
    device(text)
    return text


@option_type
def problem_shape(text: str) -> tuple[int, ...]:
    """`--shape`: `4096x14336` -> (4096, 14336)."""
    from xfuse.analysis.cost import parse_shape

    return parse_shape(text)


@option_type
def storage_dtype(text: str) -> str:
    """`--dtype`: a float dtype by the names the help gives (numpy's codes, like `e`, or
    `float`, which numpy takes for float64, are not the CLI's)."""
    from xfuse.dialects.dtypes import DTYPE_NAMES, SHORT_DTYPE_NAMES, is_dtype_word

    if not is_dtype_word(text):
        raise ValueError(
            f"unsupported dtype {text!r}: expected {', '.join(SHORT_DTYPE_NAMES.values())} "
            f"(or {', '.join(DTYPE_NAMES)})"
        )
    return text


@option_type
def launch_us(text: str) -> float:
    """`--launch-us`: a finite number of microseconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"expected a finite number >= 0, got {text!r}")
    return value


@option_type
def parse_input_shape(text: str) -> tuple[str, tuple[int | str, ...]]:
    """`b=14336` -> ("b", (14336,)); `x=t,d` -> ("x", ("t", "d")) (names are dynamic dims);
    `s=` -> ("s", ()), a 0-d input (as `input s[];` declares one)."""
    name, sep, dims = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"expected NAME=DIMS, like b=14336 (s= for a 0-d s), got {text!r}")
    parsed: list[int | str] = []
    for dim in (d.strip() for d in dims.split(",")) if dims.strip() else ():
        if dim.isdecimal():  # isdigit() is true of '²', which int() refuses
            parsed.append(int(dim))
        elif dim.isidentifier():
            parsed.append(dim)
        else:
            raise ValueError(f"each dim of {text!r} is a size >= 0 or a name, got {dim!r}")
    # (as --shape: 2**64 elements were priced, and a dim past int64 failed once the program
    # was read, status 1)
    from xfuse.analysis.cost import exceeds_int64

    if exceeds_int64([d for d in parsed if isinstance(d, int)]):
        raise ValueError(f"{text!r}: more elements than a 64-bit index can count")
    return name.strip(), tuple(parsed)


def run(args: argparse.Namespace) -> int:
    from xfuse.analysis.cost import (
        CostOptions,
        EpilogueError,
        ShapeMismatchError,
        check_given_shape,
        fitted_problem_shape,
    )
    from xfuse.analysis.cost_report import print_program, program_json
    from xfuse.frontend.language import parse_program
    from xfuse.runtime.cost_driver import UnreadInputError, cost_program
    from xfuse.tools.cli import CliError, program_name, read_program
    from xfuse.tools.closed_stdout import stdout_console
    from xfuse.transforms.pipeline import only_function

    shape = CostOptions().shape if args.shape is None else args.shape
    options = CostOptions(
        device=args.device, shape=shape, dtype=args.dtype, launch_us=args.launch_us, l2=args.l2
    )
    input_shapes: dict[str, tuple[int | str, ...]] = {}
    for name, dims in args.input_shape:
        if name in input_shapes:
            args.command_parser.error(f"argument --input-shape: '{name}' given twice")
        input_shapes[name] = dims
    source = read_program(args.file)
    # The function `cost_program` prices: the shapes the program declares, those --input-shape
    # gives, the others of the shape's rank; a shape for an input it lacks is `cost_program`'s
    # to say.
    function = None
    with warnings.catch_warnings(), contextlib.suppress(ValueError):
        warnings.simplefilter("ignore")  # (`cost_program` parses it again, warning once)
        module = parse_program(
            source,
            shapes=input_shapes or None,
            filename=program_name(args.file),
            default_shape=(None,) * len(shape),
        )
        function = only_function(module)
    if function is not None and args.shape is not None:
        try:
            check_given_shape(function, shape)
        except ShapeMismatchError as error:
            raise CliError(f"--shape: {error}") from None
    elif function is not None:  # (a program of fixed dims failed the default's 4096x14336)
        try:
            options = replace(options, shape=fitted_problem_shape(function, shape))
        except ValueError as error:  # (past int64: it was suppressed with the above, and
            raise CliError(str(error)) from None  # the default kept, blamed on --shape)
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
    except UnreadInputError as error:
        raise CliError(f"--input-shape: {error}") from None
    except EpilogueError as error:
        raise CliError(f"--epilogue: {error}") from None
    try:
        if args.json:
            json.dump(program_json(program), sys.stdout, indent=2)
            print()
        else:
            print_program(stdout_console(), program)
    finally:  # (the file named, however stdout fares)
        if args.plot is not None:
            from xfuse.tools.roofline import plot_roofline

            plot_roofline(program, args.plot)
    if args.plot is not None and not args.json:
        print(f"roofline plot: {args.plot}")
    return 0
