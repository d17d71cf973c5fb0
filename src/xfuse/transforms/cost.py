"""`ew-cost`: report what the module's `ew.kernel`s would cost on a GPU; the IR is unchanged.

The report goes to stderr, so `xfuse-opt`'s stdout stays the (parseable) module:

    xfuse-opt gelu.ew -p 'ew-optimize,ew-fuse,ew-cost{device=h100 shape=4096x14336}' > out.mlir

With `annotate=true` each kernel also gets its figures as attributes (`cost.read_bytes`,
`cost.write_bytes`, `cost.flops`, `cost.intensity`, `cost.time_us`, `cost.bound`). The model is
`xfuse.analysis.cost`.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, StringAttr, f64, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from xfuse.analysis.cost import (
    CostModelError,
    CostOptions,
    FunctionCost,
    analyse_module,
    check_given_shape,
    epilogue_what_if,
    fitted_problem_shape,
    parse_shape,
)
from xfuse.analysis.cost_report import print_function, summary_line, us
from xfuse.analysis.hardware import DEVICE_NAMES, device
from xfuse.dialects import ew
from xfuse.dialects.dtypes import DTYPE_NAMES, SHORT_DTYPE_NAMES, is_dtype_word
from xfuse.dialects.failure import OpFailure
from xfuse.transforms.options import check_option
from xfuse.transforms.workspace import workspace_size_functions


def _parses(parse: Callable[[Any], object], value: object) -> bool:
    """Whether `parse` takes `value` (raises no ValueError)."""
    try:
        parse(value)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class EwCostPass(ModulePass):
    """Print each function's kernels, bytes, FLOPs and roofline time to stderr."""

    name = "ew-cost"

    device: str = "h100"
    """GPU: h100-sxm (or h100), h100-pcie, h200 (or h200-sxm), a100-80gb (or a100) or b200, in
    any case (`xfuse.analysis.hardware.DEVICE_CHOICES`)."""

    shape: str | int = ""
    """Iteration space of the largest tensors, binding their `?` dims (e.g. 4096x14336); empty
    (the default): 4096x14336 fitted to each function as `xfuse cost` fits it
    (`fitted_problem_shape`: 1x4096x14336 for a rank-3 one, each dim it fixes at its size)."""

    dtype: str = "bf16"
    """Storage dtype of every tensor (f16, bf16, f32, f64), or `ir` for the IR's own types."""

    launch_us: float | int = 4
    """Launch overhead per kernel, in microseconds."""

    l2: bool = False
    """Serve re-reads of tensors still resident in L2 at L2 bandwidth (report shows both)."""

    annotate: bool = False
    """Also attach each kernel's figures to it as `cost.*` attributes."""

    epilogue: str = ""
    """Input produced by a matmul: report the epilogue-fusion what-if for functions taking it."""

    def __post_init__(self) -> None:
        check_option(
            self, "device", _parses(device, self.device), f"one of {', '.join(DEVICE_NAMES)}"
        )
        check_option(
            self,
            "shape",
            self.shape == "" or _parses(parse_shape, self.shape),
            "sizes >= 0 joined by 'x' (like 4096x14336), fewer than 2**63 elements in all",
        )
        dtypes = ", ".join([*DTYPE_NAMES, *SHORT_DTYPE_NAMES.values()])
        dtype_ok = self.dtype == "ir" or is_dtype_word(self.dtype)  # (not numpy's `float`)
        check_option(self, "dtype", dtype_ok, f"one of {dtypes} or ir")
        try:
            launch_us = float(self.launch_us)
        except OverflowError:  # (an int past the floats: `launch-us=999...9`)
            launch_us = math.inf
        check_option(self, "launch_us", 0 <= launch_us < math.inf, "a finite number >= 0")

    def options(self, function: func.FuncOp, l2: bool) -> CostOptions:
        """The cost model's options for `function`, its problem shape fitted to it unless the
        `shape` option gives one."""
        default = CostOptions()
        shape = parse_shape(self.shape) if self.shape != "" else default.shape
        if self.shape != "":
            check_given_shape(function, shape)
        return CostOptions(
            device=self.device,
            shape=fitted_problem_shape(function, shape) if self.shape == "" else shape,
            dtype=None if self.dtype == "ir" else self.dtype,
            launch_us=float(self.launch_us),
            l2=l2,
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            # (`ew-workspace`'s size functions launch nothing: no table of nothing for them)
            sizing = workspace_size_functions(op)
            costs = analyse_module(op, functools.partial(self.options, l2=self.l2), sizing)
            hbm_only = (
                analyse_module(op, functools.partial(self.options, l2=False), sizing)
                if self.l2
                else []
            )
            epilogues = [
                epilogue_what_if(c, self.epilogue) for c in costs if self.epilogue in c.inputs
            ]
            if self.epilogue and not epilogues:
                raise ValueError(f"no function has an input named {self.epilogue!r}")
        except (CostModelError, ValueError) as error:
            if isinstance(error, CostModelError) and error.op is not None:
                raise OpFailure(f"ew-cost: {error}", error.op) from None
            raise PassFailedException(f"ew-cost: {error}") from None
        console = Console(file=sys.stderr, width=160, color_system=None, highlight=False)
        for index, cost in enumerate(costs):
            print_function(console, cost)
            if hbm_only:
                console.print(f"ew-cost HBM only {summary_line(hbm_only[index])}")
        for e in epilogues:
            console.print(
                f"ew-cost epilogue {e.input}: {e.separate_bytes:,} -> {e.epilogue_bytes:,} bytes, "
                f"{us(e.separate_time_s)} -> {us(e.epilogue_time_s)}"
            )
        if self.annotate:
            _annotate(op, costs)


I64_MAX = (1 << 63) - 1


def _annotate(module: ModuleOp, costs: list[FunctionCost]) -> None:
    kernels = [k for k in module.walk() if isinstance(k, ew.KernelOp)]
    figures = [(c.function, k) for c in costs for k in c.kernels]
    for kernel, (function, cost) in zip(kernels, figures, strict=True):
        counts = {
            "read_bytes": cost.read_bytes,
            "write_bytes": cost.write_bytes,
            "flops": cost.flops,
        }
        for name, count in counts.items():
            if count > I64_MAX:
                raise OpFailure(
                    f"ew-cost: kernel {cost.index} of @{function}: cost.{name} {count:,} does "
                    f"not fit an i64 attribute; annotate a smaller shape",
                    kernel,
                )
        kernel.attributes.update(
            {
                "cost.read_bytes": IntegerAttr(cost.read_bytes, i64),
                "cost.write_bytes": IntegerAttr(cost.write_bytes, i64),
                "cost.flops": IntegerAttr(cost.flops, i64),
                "cost.intensity": FloatAttr(round(cost.intensity, 4), f64),
                "cost.time_us": FloatAttr(round(cost.time_s * 1e6, 3), f64),
                "cost.bound": StringAttr(cost.bound),
            }
        )
