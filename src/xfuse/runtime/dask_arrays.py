"""Kernels on dask arrays: `k(x=dask_x, b=dask_b)` returns a lazy `dask.array`, one task per chunk.

The call is one `dask.array.blockwise` over the iteration space: dims are right-aligned as in
numpy (a `[d]` bias meets the `d` axis of a `[t, d]` input), the inputs' chunks are unified by
blockwise, an input dim declared 1 broadcasts, and a static dim of the signature (`x[t, 4096]`) is
rechunked to one chunk so every block has the declared size. Each task calls the kernel on its
blocks (numpy in, numpy out); a program with several outputs has one task per chunk for the
kernel plus one cheap `getitem` per output and chunk. Results have the kernel's output dtypes.

What travels to the workers is the pickled kernel (`xfuse.runtime.pickling`: its frontend IR and
options); a worker compiles it once per process, through its on-disk cache.

dask is an optional dependency (`pip install 'xfuse[dask]'`): nothing here imports it until a call
has dask arrays, and that can only happen once the caller has imported `dask.array`.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from xfuse.runtime.arrays import (
    DYNAMIC_INDEX,
    ArgumentError,
    bind_shapes,
    check_array_kind,
    check_input,
    numpy_dtype,
    output_shape,
)

if TYPE_CHECKING:
    from xfuse.runtime.kernel import Kernel


def is_dask_array(value: Any) -> bool:
    dask_array = sys.modules.get("dask.array")
    return dask_array is not None and isinstance(value, dask_array.Array)


def has_dask_arrays(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """True when a call's arguments include a dask array (cheap when dask is not imported)."""
    if "dask.array" not in sys.modules:
        return False
    return any(is_dask_array(value) for value in (*args, *kwargs.values()))


class BlockCall:
    """The task function: the kernel on one block of each input (picklable with the kernel)."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel

    def __call__(self, *blocks: np.ndarray) -> Any:
        return self.kernel(*blocks)


def check_known_chunks(name: str, array: Any) -> None:
    """ArgumentError for a dask array whose chunk sizes are unknown (`x[x > 0]`'s)."""
    if any(np.isnan(size) for size in array.shape):
        raise ArgumentError(
            f"argument '{name}': its chunk sizes are unknown (shape {array.shape}); call "
            ".compute_chunk_sizes() on it first"
        )


def call(kernel: Kernel, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any) -> Any:
    """`kernel(...)` with dask arrays among the inputs: lazy dask arrays, one per output."""
    import dask.array as da
    from dask.base import tokenize

    if out is not None:
        raise TypeError(
            "out= cannot be used with dask array inputs: the result is a lazy dask array; "
            "write it into an array with dask.array.store(result, target), or call .compute()"
        )
    function = kernel.function
    bound = kernel.call_signature.bind(args, kwargs)
    arrays = []
    for parameter in function.inputs:
        value = bound[parameter.name]
        if not (is_dask_array(value) or isinstance(value, np.ndarray | np.generic)):
            check_input(parameter, value)  # what it is not: "a Python number has no dtype"
        array = da.asarray(value)
        # a masked array or np.matrix, numpy's or a dask array's blocks: refused now, not in a task
        kind = value if isinstance(value, np.ndarray) else array._meta
        check_array_kind(f"argument '{parameter.name}'", kind)
        check_input(parameter, np.empty((0,) * array.ndim, array.dtype))  # the dtype, named
        check_known_chunks(parameter.name, array)
        # a static dim in one chunk; of another rank, `bind_shapes` below names the argument
        static = {
            axis: -1
            for axis, size in enumerate(parameter.shape)
            if size not in (DYNAMIC_INDEX, 1)
            and array.ndim == len(parameter.shape)
            and len(array.chunks[axis]) > 1
        }
        arrays.append(array.rechunk(static) if static else array)
    # All-`?` kernels take any one shape, block by block.
    flat = kernel.flat_shape([a.shape for a in arrays])
    iteration = (
        flat if flat is not None else bind_shapes(function.inputs, [a.shape for a in arrays])
    )
    rank = len(iteration)
    if flat is None:
        # a dim name on two axes (`x[t, t]`, `x[t, d]` with `z[d, t]`): blockwise cuts each axis
        # on its own, so a block had a `t` of 2 on one and 4 on the other, an ArgumentError in
        # the task; such axes are one chunk each, so every block keeps the sizes the call checked
        axes_of: dict[str, set[int]] = {}
        for parameter, array in zip(function.inputs, arrays, strict=True):
            for axis, dim in parameter.named_axes:
                axes_of.setdefault(dim, set()).add(rank - array.ndim + axis)
        whole = {axis for axes in axes_of.values() if len(axes) > 1 for axis in axes}
        if whole:
            arrays = [
                array.rechunk(
                    {axis - (rank - array.ndim): -1 for axis in whole if axis >= rank - array.ndim}
                )
                for array in arrays
            ]
    for parameter in function.outputs:
        if len(parameter.shape) != rank and (flat is None or parameter.shape == ()):
            raise TypeError(
                f"output '{parameter.name}' has {len(parameter.shape)} dimensions, not the "
                f"{rank} of the iteration space: such programs cannot run on dask arrays"
            )
        if flat is None and output_shape(parameter, iteration) != tuple(iteration):
            raise TypeError(
                f"output '{parameter.name}' has shape {output_shape(parameter, iteration)}, not "
                f"the iteration space's {tuple(iteration)}: such programs cannot run on dask arrays"
            )
    axes = tuple(range(rank))
    blockwise_arguments: list[Any] = []
    for array in arrays:
        blockwise_arguments += [array, axes[rank - array.ndim :]]
    dtypes = [numpy_dtype(p.dtype) for p in function.outputs]
    # the program's identity: a bufferized kernel's (`compile_bufferized`) has no frontend IR,
    # and two of them on one array shared a name, so dask computed one twice
    program = kernel.program.frontend_ir or kernel.llvm_ir
    name = "xfuse-" + tokenize(program, kernel.output_names, repr(kernel.options), *arrays)
    blocks = da.blockwise(
        BlockCall(kernel),
        axes,
        *blockwise_arguments,
        name=name,
        dtype=dtypes[0],
        meta=np.empty((0,) * rank, dtypes[0]),
    )
    if len(dtypes) == 1:
        return blocks
    return tuple(
        blocks.map_blocks(
            operator.getitem,
            index,
            name=f"{name}-{kernel.output_names[index]}",
            dtype=dtype,
            meta=np.empty((0,) * rank, dtype),
        )
        for index, dtype in enumerate(dtypes)
    )
