"""Builds the `func.func` of `ew` ops that both frontends (source text and Python tracing) emit.

Dtypes follow numpy's promotion: where operands of different element types meet, the narrower
one gets an `ew.convert` to the promoted type (`xfuse.dialects.dtypes.promote`: f16 or bf16 with
f32 -> f32, anything with f64 -> f64, f16 with bf16 -> f32). A literal is weakly typed, as a Python
float is in numpy: it takes the type of the array it meets (`0.5 * x` stays bf16 for a bf16 `x`).
So is an expression of literals alone (`-(2)`, `2 * 3`: a `Weak` value): it becomes one
`ew.constant` where it meets an array, computed in that array's type as a kernel would compute it
(each literal and each result rounded to the type; `ew.fold_literals`), and in the default type
where it is an output. An explicit conversion (`f16(100000)`) makes it a constant of that type,
typed as strongly as an array (numpy's `np.float16(100000)`). So each result has the promoted
dtype of the inputs and conversions it is computed from.

A named dynamic dimension of an input ("t" in `("t", "d")`) is `?` in the type; the names are kept
as the argument attribute `ew.dims` (`["t", "d"]`; other dims spelled as in the type), so the
runtime can check that dims sharing a name have the same size. An input whose name its name hint
cannot keep (`w_1`, which xDSL shortens to `w`) has it as `ew.name` (`input_name` reads either).

Each op and argument gets the builder's `location` as it is made: the `.ew` frontend sets it to
the token that makes it (`loc("gelu.ew":3:11)` under `xfuse-opt --print-debuginfo`); tracing
leaves `loc(unknown)`.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BFloat16Type,
    DictionaryAttr,
    Float16Type,
    Float64Type,
    LocationAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnknownLoc,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue

from xfuse.dialects import ew
from xfuse.dialects.dtypes import element_type_for, promote

ShapeSpec = Sequence[int | str | None]
"""A shape: ints are static dims; a name is a dynamic (`?`) dim shared by all dims of that name;
None is a dynamic dim of its own."""

DtypeSpec = Any
"""A dtype name or numpy dtype for every input, or a mapping from input names to them."""

MAX_DIM = 2**63 - 1
"""The largest static dimension: a tensor type's dims are i64."""


@dataclass(frozen=True, eq=False)
class Weak:
    """A weakly typed value: a literal, or an op on weak values (no dtype until it meets one).

    Compared by identity; where it meets an array it becomes the `ew.constant` of its value in
    that element type, one per value and element type in the function.
    """

    literal: float = 0.0
    op_type: ew.ElementwiseOpType | None = None
    operands: tuple[Weak, ...] = ()
    values: dict[type[Attribute], float] = field(default_factory=dict, init=False)
    """`value_in`'s results by element type."""

    def value_in(self, element: Attribute) -> float:
        """The value as kernels of `element` compute it (a bare literal keeps its f64 text):
        each literal rounded to `element`, as a kernel's constants are, each op computed in
        `ew.compute_type(element)` (f32 for f16 and bf16: `300 * 300 / 1000` is 90 there, where
        rounding each step to f16 overflowed), the result rounded to `element` once.

        Each node of the expression is computed once per element type, without recursion: a
        name rebound to itself (`a = a * a;`) thousands of times is a deep, shared graph.
        """
        key = type(element)
        compute = ew.compute_type(element)
        pending = [self]
        while pending:
            node = pending[-1]
            missing = [o for o in node.operands if key not in o.values]
            if missing:
                pending.extend(missing)
                continue
            pending.pop()
            if node.op_type is None:
                node.values[key] = node.literal
            elif key not in node.values:
                operands = [
                    o.values[key] if o.op_type else ew.round_to_element(o.literal, element)
                    for o in node.operands
                ]
                node.values[key] = ew.fold_literals(node.op_type, operands, compute)
        value = self.values[key]
        if self.op_type is None or math.isnan(value):  # (a NaN's sign is the fold's to say)
            return value
        return ew.round_to_element(value, element)


Value = SSAValue | Weak
"""What the frontends compute with: an SSA value of the function, or a weak constant."""


def name_value(value: SSAValue, name: str) -> None:
    """Give `value` the name hint `name` without its `_<digits>` suffixes (`w_1_2` as `w`); none
    where that leaves nothing (`_1`: an empty hint, which xDSL's own `replace_all_uses_with`
    then rejects) or where MLIR's names cannot spell it (a traced function's `λ`: its
    argument's `ew.name` keeps it, as it keeps `w_1`).

    xDSL keeps a hint without one such suffix and prints the second value of hint `a` as `%a_1`,
    and one of hint `a_1` (from `a_1_1`) as `%a_1` too: two programs printed as one text, which
    is the compile cache's key (the second ran the first's kernel). Hints without suffixes
    print as distinct names."""
    hint = re.sub(r"(_\d+)+$", "", name)
    if hint and SSAValue.is_valid_name(name):
        value.name_hint = hint


def tensor_type(element: Attribute, shape: ShapeSpec) -> TensorType[Attribute]:
    dims = [d if isinstance(d, int) else DYNAMIC_INDEX for d in shape]
    return TensorType(element, dims)


def dim_names(shape: ShapeSpec) -> tuple[str, ...] | None:
    """The `ew.dims` entries of a shape with named dims (None if it has none)."""
    if not any(isinstance(d, str) for d in shape):
        return None
    return tuple(d if isinstance(d, str) else ("?" if d is None else str(d)) for d in shape)


def _repeated_printed_names(function: func.FuncOp) -> list[SSAValue]:
    """The values of `function` that xDSL's printer names as an earlier one: it prints the
    second value of hint `a` as `%a_1`, and one of hint `a_1` (parsed from `%a_1_1`) as `%a_1`
    too (its order: the arguments, then each op's results)."""
    uses: dict[str, int] = {}
    printed: set[str] = set()
    repeated = []
    for value in [*function.args, *(r for op in function.walk() for r in op.results)]:
        hint = value.name_hint
        if hint is None:
            continue
        index = uses.get(hint, 0)
        name = f"{hint}_{index}" if index else hint
        if name in printed:
            repeated.append(value)  # printed by number once its hint is gone
            continue
        uses[hint] = index + 1
        printed.add(name)
    return repeated


def with_distinct_printed_names(module: ModuleOp) -> ModuleOp:
    """`module`, or a copy whose values xDSL prints with distinct names (`_repeated_printed_names`
    lose their hints; the arguments keep their input names, in `ew.name` where the copy's hints
    lost them): two values printed as one name made text that does not parse back, and two
    programs one text, the compile cache's key (the second ran the first's kernel)."""
    if not any(map(_repeated_printed_names, _functions(module))):
        return module
    names = [[ew.input_name(arg) for arg in function.args] for function in _functions(module)]
    module = module.clone()  # (whose hints lose one more `_<digits>`: xDSL's setter)
    for function, inputs in zip(_functions(module), names, strict=True):
        for value in _repeated_printed_names(function):
            value.name_hint = None
        given = function.arg_attrs.data if function.arg_attrs is not None else ()
        attributes = [dict(d.data) for d in given] or [{} for _ in function.args]
        for arg, name in zip(function.args, inputs, strict=True):
            if name is not None and ew.input_name(arg) != name:
                attributes[arg.index][ew.NAME_ATTRIBUTE] = StringAttr(name)
        function.arg_attrs = ArrayAttr(map(DictionaryAttr, attributes))
    return module


def _functions(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.walk() if isinstance(op, func.FuncOp)]


def _promoted(arrays: Sequence[Value]) -> Attribute:
    """The element type `arrays` (SSA values) promote to (numpy's promotion: `promote`)."""
    element = ew.element_type(cast(SSAValue, arrays[0]).type)
    for array in arrays[1:]:
        element = promote(element, ew.element_type(cast(SSAValue, array).type))
    return element


class FunctionBuilder:
    """Appends `ew` ops to a function body in call order; `finish` returns the module.

    Inputs become block arguments as they are first asked for. Their element type comes from
    `dtype` (one for all, or a mapping by name; unlisted inputs and weak outputs get float32), their
    shape from `shapes` (default `default_shape`, `[?]`). A weak value becomes an `ew.constant`
    just before the first use of its value in each element type (equal values share it).
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
        self.inputs: dict[str, BlockArgument] = {}
        self.input_dims: dict[str, tuple[str, ...]] = {}
        self.conversions: dict[tuple[SSAValue, Attribute], SSAValue] = {}
        self.constants: dict[tuple[bytes, Attribute], SSAValue] = {}
        """`ew.constant`s by the bits of their value and their element type: a literal repeated
        in every statement of a long program is one constant, not one per statement."""
        self.result_types: dict[tuple[int, int], tuple[Attribute, Attribute, Attribute]] = {}
        """`ew.broadcast_type` of a binary op by the identity of the operand types (held in the
        entry), computed once per pair: most ops of a program share a few type objects."""
        self.location: LocationAttr = UnknownLoc()
        """Where the ops and arguments made next come from in the source."""

    def append(self, op: Operation) -> SSAValue:
        """Append `op` to the body, at `location`; its (only) result."""
        op.location = self.location
        self.block.add_op(op)
        return op.results[0]

    def input_element(self, name: str) -> Attribute:
        """The element type an input gets unless declared otherwise."""
        return self.input_elements.get(name, self.element)

    def input_shape(self, name: str) -> ShapeSpec:
        """The shape an input gets unless declared otherwise."""
        return tuple(self.shapes.get(name, self.default_shape))

    def input(
        self,
        name: str,
        element: Attribute | None = None,
        shape: ShapeSpec | None = None,
        position: int | None = None,
    ) -> SSAValue:
        """The argument `name`, added on first use (with `element`/`shape` if given), last or
        at `position` (a declared input, before the undeclared ones read so far)."""
        if name not in self.inputs:
            shape = self.input_shape(name) if shape is None else tuple(shape)
            for dim in shape:
                if isinstance(dim, int) and not 0 <= dim <= MAX_DIM:
                    raise ValueError(
                        f"input '{name}': dimension {dim} is out of range (0 to {MAX_DIM})"
                    )
            type_ = tensor_type(element or self.input_element(name), shape)
            last = len(self.block.args)
            argument = self.block.insert_arg(type_, last if position is None else position)
            argument.location = self.location
            name_value(argument, name)
            self.inputs[name] = argument
            if position is not None and position < last:  # (`finish` takes them in this order)
                self.inputs = dict(sorted(self.inputs.items(), key=lambda item: item[1].index))
            if (names := dim_names(shape)) is not None:
                self.input_dims[name] = names
        return self.inputs[name]

    def literal(self, value: float) -> Weak:
        """A number of the source: weakly typed until it meets an array."""
        return Weak(value)

    def materialize(self, value: Value, element: Attribute | None = None) -> SSAValue:
        """`value` as an SSA value; a weak one as an `ew.constant` of `element` (default type)."""
        if isinstance(value, SSAValue):
            return value
        element = element or self.element
        number = value.value_in(element)
        key = (struct.pack("<d", number), element)
        if key not in self.constants:
            constant = ew.ConstantOp(number, TensorType(element, []))
            self.constants[key] = self.append(constant)
        return self.constants[key]

    def convert(self, value: Value, element: Attribute, explicit: bool = False) -> SSAValue:
        """`value` as `element`: an `ew.convert` (made once per value), or a weak value made a
        constant of `element` (strongly typed from then on: an explicit conversion). An
        `explicit` conversion (`f16(...)`, `.astype`) of an f16 or bf16 value to its own type
        is one too: it rounds what a kernel holds in f32 (`ew.ConvertOp`). An explicit one of a
        weak value rounds its float64 value once, as numpy's `np.float16(...)` does."""
        if isinstance(value, Weak):
            if explicit:
                value = self.literal(ew.round_once(value.value_in(Float64Type()), element))
            return self.materialize(value, element)
        if ew.element_type(value.type) == element and not (
            explicit and isinstance(element, Float16Type | BFloat16Type)
        ):
            return value
        key = (value, element)
        if key not in self.conversions:
            self.conversions[key] = self.append(ew.ConvertOp(value, element))
        return self.conversions[key]

    def apply(self, op_type: ew.ElementwiseOpType, *args: Value) -> Value:
        """Emit `op_type` on `args`, promoted to one dtype (weak values take it); on weak values
        alone a weak value. Raises ValueError when the shapes do not broadcast.

        `ew.select` has its arms' dtype, as numpy's `where` (its condition's where both are
        weak): a condition of another dtype is tested against 0 in its own first (a float64
        1e-300 is true, and 0 in float32), unless it is a comparison's 1 or 0; a weak one (a
        literal) in float64, as numpy tests a Python number."""
        if op_type is ew.SelectOp and isinstance(args[0], Weak):
            # numpy tests a Python number as a float64 (`np.where(1e-50, x, y)` is x; in f32,
            # the arms' dtype, 1e-50 was 0), a NaN as true
            nonzero = args[0].value_in(Float64Type()) != 0
            args = (self.literal(1.0 if nonzero else 0.0), *args[1:])
        arrays = [a for a in args if not isinstance(a, Weak)]
        if not arrays:
            return Weak(op_type=op_type, operands=cast(tuple[Weak, ...], args))
        if op_type is ew.SelectOp:
            return self._select(*args)
        element = _promoted(arrays)
        operands = [self.convert(a, element) for a in args]
        if issubclass(op_type, ew.UnaryOp):
            return self.append(op_type(*operands))
        lhs, rhs = operands
        return self.append(op_type(lhs, rhs, self.binary_result_type(lhs.type, rhs.type)))

    def _select(self, condition: Value, *arms: Value) -> SSAValue:
        """`ew.select` of the arms' promoted dtype (the condition's where both are weak)."""
        typed = [a for a in arms if not isinstance(a, Weak)]
        if typed:
            element = _promoted(typed)
            if (
                not isinstance(condition, Weak)
                and ew.element_type(condition.type) != element
                and not isinstance(condition.owner, ew.CompareOp)
            ):
                condition = self.apply(ew.NeOp, condition, self.literal(0.0))
        else:
            element = ew.element_type(cast(SSAValue, condition).type)
        return self.append(ew.SelectOp(*(self.convert(a, element) for a in (condition, *arms))))

    def binary_result_type(self, lhs: Attribute, rhs: Attribute) -> Attribute:
        """`ew.broadcast_type(lhs, rhs)`, computed once per pair of type objects."""
        key = (id(lhs), id(rhs))
        if key not in self.result_types:
            self.result_types[key] = (lhs, rhs, ew.broadcast_type(lhs, rhs))
        return self.result_types[key][2]

    def _argument_attributes(self, name: str, argument: SSAValue) -> dict[str, Attribute]:
        """Input `name`'s argument attributes: its dims' names, its name where the hint lost it."""
        attributes: dict[str, Attribute] = {}
        if name in self.input_dims:
            attributes[ew.DIMS_ATTRIBUTE] = ArrayAttr(StringAttr(d) for d in self.input_dims[name])
        if argument.name_hint != name:
            attributes[ew.NAME_ATTRIBUTE] = StringAttr(name)
        return attributes

    def finish(self, outputs: Sequence[tuple[str, Value]]) -> ModuleOp:
        """The module: one function returning `outputs` (a weak one in the default type)."""
        returned = [self.materialize(value) for _, value in outputs]
        returning = func.ReturnOp(*returned)
        returning.location = self.location
        self.block.add_op(returning)
        attributes = [self._argument_attributes(name, arg) for name, arg in self.inputs.items()]
        arg_attrs = ArrayAttr(map(DictionaryAttr, attributes)) if any(attributes) else None
        function = func.FuncOp(
            self.function_name,
            ([arg.type for arg in self.block.args], [value.type for value in returned]),
            Region(self.block),
            arg_attrs=arg_attrs,
        )
        return ModuleOp([function])
