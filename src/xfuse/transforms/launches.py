"""A GPU program's launch sequence: what `ew-to-nvvm`'s `launch_sequence` reads from the host
function of a bufferized module, and the runtime (`xfuse.runtime.cuda`) runs.

No xDSL here: a disk-cache hit unpickles these with the PTX and must not import it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xfuse.dialects.dtypes import itemsize


@dataclass(frozen=True)
class Temporary:
    """A buffer the host function allocates: dtype and, per axis, a static size or the
    (argument position, axis) whose size it takes."""

    dtype: str
    shape: tuple[int | tuple[int, int], ...]

    def shape_for(self, argument_shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        """Its shape in a call with these argument shapes."""
        return tuple(
            size if isinstance(size, int) else argument_shapes[size[0]][size[1]]
            for size in self.shape
        )

    def nbytes(self, argument_shapes: Sequence[tuple[int, ...]]) -> int:
        return math.prod(self.shape_for(argument_shapes)) * itemsize(self.dtype)


@dataclass(frozen=True)
class Launch:
    """One kernel launch: its entry and its operands (inputs, then outputs), each an index into
    the host function's arguments followed by its temporaries."""

    entry: str
    operands: tuple[int, ...]
    input_count: int
    dynamic_axes: tuple[int, ...]
    """The `?` axes of the iteration space (the first output's type): one i64 argument each."""


@dataclass(frozen=True)
class LaunchSequence:
    temporaries: tuple[Temporary, ...]
    launches: tuple[Launch, ...]
