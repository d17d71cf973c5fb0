"""The numpy arrays whose elements mean more than their memory holds, refused wherever xfuse
takes an array (a kernel's call, a jit function's, an eager `xfuse.<fn>`): in a module of its
own, as the runtime checks calls without importing the parser or xDSL."""

from __future__ import annotations

import numpy as np


def array_kind_problem(value: object, output: bool = False) -> str | None:
    """Why `value` (an input, or an `output` written in place) cannot be passed as an array: a
    masked array (its masked elements would be computed or written too, the mask ignored) and
    `np.matrix` (always 2-d: flattening it gives a row, a shape no argument was passed with);
    None for anything else."""
    if isinstance(value, np.ma.MaskedArray):
        remedy = (
            "pass .data (its elements, written in place; the mask unchanged)"
            if output
            else "pass .filled(value) (masked elements set to value) or .data (as stored)"
        )
        return f"a masked array's mask would be ignored; {remedy}"
    if isinstance(value, np.matrix):
        return "np.matrix is not taken; pass np.asarray(...)"
    return None
