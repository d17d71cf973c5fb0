"""What the benchmarks measure: a `Workload` (a program with inputs and its float64 reference)
and a `Variant` (one way to compute it), shared by `bench` and the peer compilers in `peers`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

Outputs = np.ndarray | tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Workload:
    source: str
    outputs: tuple[str, ...] | None
    """The program's outputs as given (None: its last assignment)."""
    module: ModuleOp
    """The float32 program after `ew-optimize` (tensor-level ops)."""
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    arrays: dict[str, np.ndarray]
    """Random float32 inputs of `n` elements, by name."""
    reference: tuple[np.ndarray, ...]
    """The unoptimized program evaluated in float64, one array per output."""
    n: int
    fused_bytes: int
    unfused_bytes: int
    fused_kernels: int = 1
    """The kernels `ew-fuse` makes of it: more than one (past `ew-fuse`'s `max-ops`, or apart
    where shapes differ) may write intermediates and read them back, which `fused_bytes`
    counts."""
    fused_intermediates: int = 0
    """Tensors one fused kernel writes and another reads (none of two independent kernels)."""
    filename: str = "<source>"
    """What names the program in its errors and warnings (its compiles' too)."""


@dataclass(frozen=True)
class Variant:
    name: str
    run: Callable[[], Outputs]
    traffic: str
    """The traffic model it moves: "unfused" or "fused"."""
    checked: bool = True
    """Compared against the reference (False for the ceiling, which computes something else)."""
    settling_calls: int = 0
    """Untimed calls after the first, before any is timed: an xfuse kernel's timed choices
    (`xfuse.runtime.split_calls.SETTLING_CALLS`), so that what is timed is what it then runs."""
