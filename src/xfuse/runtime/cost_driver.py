"""The cost driver: parse a `.ew` program, fuse it and leave it unfused, and price both with
`xfuse.analysis.cost`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType

from xfuse.analysis.cost import (
    CostOptions,
    ProgramCost,
    ShapeMismatchError,
    analyse_function,
    compare,
    epilogue_what_if,
)
from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_of
from xfuse.dialects.ew import input_name
from xfuse.frontend.builder import FunctionBuilder
from xfuse.frontend.language import ParsedProgram, parse_program
from xfuse.transforms.default_pipeline import default_pipeline, split_after
from xfuse.transforms.pipeline import apply_pipeline, only_function, with_static_inputs


def own_dtypes(function: func.FuncOp, dtype: str) -> set[str]:
    """The dtypes of `function`'s tensors where one is not `dtype`, the one its program was
    parsed in (declared dtypes, conversions): then each tensor is priced in its own, not in
    `CostOptions.dtype`; empty where every tensor is of `dtype`."""
    values = [*function.args, *(r for op in function.walk() for r in op.results)]
    dtypes = {dtype_of(ew.element_type(v.type)) for v in values if isinstance(v.type, TensorType)}
    return dtypes if dtypes - {dtype} else set()


class UnreadInputError(ValueError):
    """`input_shapes` names an input the program does not read."""


def cost_program(
    source: str,
    options: CostOptions | None = None,
    *,
    filename: str = "<source>",
    input_shapes: Mapping[str, Sequence[int | str | None]] | None = None,
    epilogue: str | None = None,
) -> ProgramCost:
    """Price a `.ew` program after `xfuse.compile`'s pipeline up to `ew-fuse`, fused and unfused.

    Inputs are `[?, ..., ?]` tensors of `options.shape`'s rank unless the program declares their
    shapes (`input b[d];`) or `input_shapes` says otherwise (`{"b": (14336,)}`: a real bias). The
    program is parsed in `options.dtype` (float32 if None); if it declares other dtypes for its
    inputs or converts (`f32(x)`), every tensor is priced in its own IR dtype (`CostOptions.dtype`
    None).
    `epilogue` names an input produced by a matmul for the epilogue what-if (on the fused kernel).
    Raises EwSyntaxError for a bad program, ValueError for bad options.
    """
    options = options or CostOptions()
    dtype = options.dtype or "float32"
    if input_shapes:  # a shape for an input the program lacks: said before parsing with them
        names = [
            input_name(a)
            for a in only_function(parse_program(source, dtype=dtype, filename=filename)).args
        ]
        unknown = set(input_shapes) - set(names)
        if unknown:
            raise UnreadInputError(
                f"input shape given for {', '.join(sorted(unknown))}, which the program does not "
                f"read (inputs: {', '.join(str(n) for n in names)})"
            )
    full = (None,) * len(options.shape)
    builder = FunctionBuilder(dtype, input_shapes, default_shape=full)
    parsed = ParsedProgram(source, None, builder, filename)

    def price(module: ModuleOp, options: CostOptions) -> ProgramCost:
        if own_dtypes(only_function(module), dtype):
            options = replace(options, dtype=None)  # declared dtypes or conversions: each its own

        # The passes before ew-fuse are the same fused and unfused: run once, on the whole program.
        fused_passes, _ = split_after(default_pipeline(fuse=True), "ew-fuse")
        unfused_passes, _ = split_after(default_pipeline(fuse=False), "ew-fuse")
        shared = next(
            i
            for i, pair in enumerate(zip(fused_passes, unfused_passes, strict=True))
            if pair[0] != pair[1]
        )
        module = apply_pipeline(module, fused_passes[:shared])
        fused_function = only_function(apply_pipeline(module, fused_passes[shared:]))
        unfused_function = only_function(apply_pipeline(module, unfused_passes[shared:]))
        # The results by the program's names: `out = x;` returns a copy of `%x` as `out`.
        outputs = parsed.output_names
        fused = analyse_function(fused_function, options, outputs)
        unfused = analyse_function(unfused_function, options, outputs)
        hbm_only = None
        if options.l2:
            plain = replace(options, l2=False)
            hbm_only = (
                analyse_function(fused_function, plain, outputs),
                analyse_function(unfused_function, plain, outputs),
            )
        return ProgramCost(
            fused=fused,
            unfused=unfused,
            comparison=compare(fused, unfused),
            hbm_only=hbm_only,
            epilogue=epilogue_what_if(fused, epilogue) if epilogue is not None else None,
        )

    # As `xfuse.compile` does, a `?` that a static input binds takes its size (`exp(x) + y` of a
    # `y[3]`), so the kernels fuse as the compiled program's do; an error of the shapes is said
    # of the program as written (`b[7]`, not the `x[?, 7]` it bound)
    try:
        return price(with_static_inputs(parsed.module), options)
    except ShapeMismatchError:
        return price(parsed.module, options)
