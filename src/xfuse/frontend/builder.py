"""Builds the `func.func` of `ew` ops that both frontends (source text and Python tracing) emit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xfuse.dialects import ew
from xfuse.dtypes import element_type_for

ShapeSpec = Sequence[int | str | None]
"""A shape: ints are static dims; a name or None is a dynamic (`?`) dim."""


def tensor_type(element: Attribute, shape: ShapeSpec) -> TensorType[Attribute]:
    dims = [d if isinstance(d, int) else DYNAMIC_INDEX for d in shape]
    return TensorType(element, dims)


class FunctionBuilder:
    """Appends `ew` ops to a function body in call order; `finish` returns the module.

    Inputs become block arguments as they are first asked for; shapes default to `[?]`.
    """

    def __init__(
        self,
        dtype: Any = "float32",
        shapes: Mapping[str, ShapeSpec] | None = None,
        function_name: str = "main",
    ):
        self.element = element_type_for(dtype)
        self.shapes = dict(shapes or {})
        self.function_name = function_name
        self.block = Block()
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.inputs: dict[str, SSAValue] = {}

    def input(self, name: str) -> SSAValue:
        if name not in self.inputs:
            type_ = tensor_type(self.element, self.shapes.get(name, (None,)))
            argument = self.block.insert_arg(type_, len(self.block.args))
            argument.name_hint = name
            self.inputs[name] = argument
        return self.inputs[name]

    def constant(self, value: float) -> SSAValue:
        return self.builder.insert(ew.ConstantOp(value, TensorType(self.element, []))).result

    def apply(self, op_type: type[ew.UnaryOp | ew.BinaryOp], *args: SSAValue) -> SSAValue:
        """Emit `op_type` on `args`; raises ValueError when the shapes do not broadcast."""
        return self.builder.insert(op_type(*args)).result

    def finish(self, outputs: Sequence[tuple[str, SSAValue]]) -> ModuleOp:
        self.builder.insert(func.ReturnOp(*(value for _, value in outputs)))
        function = func.FuncOp(
            self.function_name,
            ([arg.type for arg in self.block.args], [value.type for _, value in outputs]),
            Region(self.block),
        )
        return ModuleOp([function])
