"""Builds the `func.func` of `ew` ops that both frontends (source text and Python tracing) emit.

Dtypes follow numpy's promotion: where operands of different element types meet, the narrower
one gets an `ew.convert` to the promoted type (`xfuse.dtypes.promote`: f16 or bf16 with f32 ->
f32, anything with f64 -> f64, f16 with bf16 -> f32). A literal is weakly typed, as a Python
float is in numpy: it takes the type of the array it meets (`0.5 * x` stays bf16 for a bf16 `x`).
So each result has the promoted dtype of the inputs it is computed from.

A named dynamic dimension of an input ("t" in `("t", "d")`) is `?` in the type; the names are kept
as the argument attribute `ew.dims` (`["t", "d"]`; other dims spelled as in the type), so the
runtime can check that dims sharing a name have the same size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xfuse.dialects import ew
from xfuse.dtypes import element_type_for, promote

ShapeSpec = Sequence[int | str | None]
"""A shape: ints are static dims; a name is a dynamic (`?`) dim shared by all dims of that name;
None is a dynamic dim of its own."""

DtypeSpec = Any
"""A dtype name or numpy dtype for every input, or a mapping from input names to them."""

DIMS_ATTRIBUTE = "ew.dims"
"""The argument attribute naming an input's dims (`["t", "d"]`), set when any dim has a name."""


def tensor_type(element: Attribute, shape: ShapeSpec) -> TensorType[Attribute]:
    dims = [d if isinstance(d, int) else DYNAMIC_INDEX for d in shape]
    return TensorType(element, dims)


def dim_names(shape: ShapeSpec) -> tuple[str, ...] | None:
    """The `ew.dims` entries of a shape with named dims (None if it has none)."""
    if not any(isinstance(d, str) for d in shape):
        return None
    return tuple(d if isinstance(d, str) else ("?" if d is None else str(d)) for d in shape)


def declared_dims(argument: BlockArgument) -> tuple[str, ...] | None:
    """The `ew.dims` of a function argument, if the frontend gave it one."""
    function = argument.block.parent_op()
    if not isinstance(function, func.FuncOp) or function.arg_attrs is None:
        return None
    dims = function.arg_attrs.data[argument.index].data.get(DIMS_ATTRIBUTE)
    if not isinstance(dims, ArrayAttr):
        return None
    return tuple(cast(StringAttr, d).data for d in dims.data)


class FunctionBuilder:
    """Appends `ew` ops to a function body in call order; `finish` returns the module.

    Inputs become block arguments as they are first asked for. Their element type comes from
    `dtype` (one for all, or a mapping by name; unlisted inputs and literals get float32), their
    shape from `shapes` (default `default_shape`, `[?]`).
    """

    def __init__(
        self,
        dtype: DtypeSpec = "float32",
        shapes: Mapping[str, ShapeSpec] | None = None,
        function_name: str = "main",
        *,
        default_shape: ShapeSpec = (None,),
    ):
        self.input_elements: dict[str, Attribute] = {}
        if isinstance(dtype, Mapping):
            dtypes = cast(Mapping[str, Any], dtype)
            self.element = element_type_for("float32")
            self.input_elements = {name: element_type_for(d) for name, d in dtypes.items()}
        else:
            self.element = element_type_for(dtype)
        self.shapes = dict(shapes or {})
        self.default_shape = tuple(default_shape)
        self.function_name = function_name
        self.block = Block()
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.inputs: dict[str, SSAValue] = {}
        self.input_dims: dict[str, tuple[str, ...]] = {}
        self.conversions: dict[tuple[SSAValue, Attribute], SSAValue] = {}

    def input_element(self, name: str) -> Attribute:
        """The element type an input gets unless declared otherwise."""
        return self.input_elements.get(name, self.element)

    def input_shape(self, name: str) -> ShapeSpec:
        """The shape an input gets unless declared otherwise."""
        return tuple(self.shapes.get(name, self.default_shape))

    def input(
        self, name: str, element: Attribute | None = None, shape: ShapeSpec | None = None
    ) -> SSAValue:
        """The argument `name`, added on first use (with `element`/`shape` if given)."""
        if name not in self.inputs:
            shape = self.input_shape(name) if shape is None else tuple(shape)
            type_ = tensor_type(element or self.input_element(name), shape)
            argument = self.block.insert_arg(type_, len(self.block.args))
            argument.name_hint = name
            self.inputs[name] = argument
            if (names := dim_names(shape)) is not None:
                self.input_dims[name] = names
        return self.inputs[name]

    def constant(self, value: float, element: Attribute | None = None) -> SSAValue:
        constant = ew.ConstantOp(value, TensorType(element or self.element, []))
        return self.builder.insert(constant).result

    def convert(self, value: SSAValue, element: Attribute) -> SSAValue:
        """`value` as `element` (an `ew.convert`, made once per value; a literal is retyped)."""
        if ew.element_type(value.type) == element:
            return value
        literal = ew.constant_value(value)
        if literal is not None:
            if not value.uses:  # a fresh literal: retype it rather than leave it dead
                assert isinstance(value.owner, ew.ConstantOp)
                value.owner.detach()
                value.owner.erase()
            return self.constant(literal, element)
        key = (value, element)
        if key not in self.conversions:
            self.conversions[key] = self.builder.insert(ew.ConvertOp(value, element)).result
        return self.conversions[key]

    def apply(self, op_type: type[ew.UnaryOp | ew.BinaryOp], *args: SSAValue) -> SSAValue:
        """Emit `op_type` on `args`, promoted to one dtype; raises ValueError when the shapes
        do not broadcast."""
        arrays = [a for a in args if ew.constant_value(a) is None] or list(args)
        element = ew.element_type(arrays[0].type)
        for array in arrays[1:]:
            element = promote(element, ew.element_type(array.type))
        return self.builder.insert(op_type(*(self.convert(a, element) for a in args))).result

    def finish(self, outputs: Sequence[tuple[str, SSAValue]]) -> ModuleOp:
        self.builder.insert(func.ReturnOp(*(value for _, value in outputs)))
        arg_attrs = None
        if self.input_dims:
            arg_attrs = ArrayAttr(
                DictionaryAttr(
                    {DIMS_ATTRIBUTE: ArrayAttr(StringAttr(d) for d in self.input_dims[name])}
                    if (name := str(arg.name_hint)) in self.input_dims
                    else {}
                )
                for arg in self.block.args
            )
        function = func.FuncOp(
            self.function_name,
            ([arg.type for arg in self.block.args], [value.type for _, value in outputs]),
            Region(self.block),
            arg_attrs=arg_attrs,
        )
        return ModuleOp([function])
