"""The `ew` dialect: elementwise operations on ranked tensors, and the kernels fusion makes of them.

Tensor-level ops (`ew.add`, `ew.tanh`, ...) take ranked tensors of f16, bf16, f32 or f64. Shapes may
be static or dynamic and follow numpy's broadcasting rules, decided by the types alone: a dimension
broadcasts only where its type says 1 (or where it is missing); two dynamic (`?`) dimensions must be
equal at run time. Scalars are rank-0 tensors, which is what `ew.constant` produces:

    %c = ew.constant 0.5 : tensor<f32>
    %h = ew.add %x, %b : tensor<?xf32>
    %m = ew.mul %c, %h : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
    %t = ew.tanh %m : tensor<?xf32>

`ew.kernel` holds a fused computation: one region over scalars (`arith`/`math` ops) that runs once
per element of the iteration space. On tensors it returns results; after bufferization it reads and
writes memrefs (destination-passing style).

An elementwise op's facts are declared once, on its class (a subclass of `UnaryOp` or
`BinaryOp`, or `SelectOp`, listed in `ELEMENTWISE_OPS`): its `name` (the mnemonic, also the
`.ew` function name), its arity (its base class: `arity`), its float64 `reference` (folding,
baselines, tests), the numpy ufunc `@xfuse.jit` traces to it (`numpy_ufunc`), its Python-level
function (`python_name`, `xfuse.tanh`) or operator (`python_operator`), its definition in other
ops where numpy has no ufunc for it (`definition`) and the error its kernels may have
(`ACCURACY`); the comparisons (`CompareOp`) give 1 and 0 of their operands' dtype. Everything
else is derived from these. How it lowers lives in `xfuse.transforms` (`SCALAR_LOWERINGS`, and
`MATH_FUNCTIONS` for a new `math` op); `tests/test_op_facts.py` names any fact an op lacks
(docs/adding-an-op.md).
"""

from __future__ import annotations

import math
import re
from abc import ABC
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import ClassVar, cast

import numpy as np
from xdsl.dialect_interfaces.constant_materialization import ConstantMaterializationInterface
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    LocationAttr,
    MemRefType,
    NoneAttr,
    ShapedType,
    StringAttr,
    TensorType,
    UnregisteredOp,
)
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    OpResult,
    Region,
    SSAValue,
)
from xdsl.irdl import (
    AnyOf,
    AttrSizedOperandSegments,
    BaseAttr,
    IRDLOperation,
    MessageConstraint,
    VarConstraint,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.pattern_rewriter import RewritePattern
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    EffectInstance,
    HasCanonicalizationPatternsTrait,
    HasFolder,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    Pure,
    RecursivelySpeculatable,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
)
from xdsl.utils.bitwise_casts import convert_f64_to_u64, convert_u64_to_f64
from xdsl.utils.exceptions import VerifyException

from xfuse.dialects import xdsl_patches
from xfuse.dialects.dtypes import numpy_dtype
from xfuse.dialects.failure import OpFailure

xdsl_patches.apply()  # whatever parses IR with xfuse's dialect: the lexer's fix

FLOAT_ELEMENT_TYPES: tuple[type[Attribute], ...] = (
    Float16Type,
    BFloat16Type,
    Float32Type,
    Float64Type,
)
_FLOAT_ELEMENT = AnyOf(tuple(BaseAttr(type_) for type_ in FLOAT_ELEMENT_TYPES))
FLOAT_NAMES = "f16, bf16, f32 or f64"
FLOAT_TENSOR = MessageConstraint(
    TensorType.constr(_FLOAT_ELEMENT), f"expected a tensor of {FLOAT_NAMES}"
)
"""The IRDL constraint of a tensor-level `ew` operand or result: a ranked tensor of floats."""


DIMS_ATTRIBUTE = "ew.dims"
"""The argument attribute naming an input's dims (`["t", "d"]`), set when any dim has a name."""

NAME_ATTRIBUTE = "ew.name"
"""The argument attribute naming an input whose name its name hint cannot keep: xDSL drops a
`_<digits>` suffix from hints (its printer adds them to tell repeated names apart), so an input
`w_1` would be called `w`, and `w` and `w_1` both `w`. Read with `input_name`."""


def argument_attribute(argument: BlockArgument, key: str) -> Attribute | None:
    """A function argument's attribute `key` (`DIMS_ATTRIBUTE`, `NAME_ATTRIBUTE`), or None."""
    function = argument.block.parent_op()
    if not isinstance(function, func.FuncOp) or function.arg_attrs is None:
        return None
    return function.arg_attrs.data[argument.index].data.get(key)


def attribute_text(attribute: Attribute | None) -> str | None:
    """The text of a string attribute, else None. (A non-ASCII one parses back as a
    `StringAttr` with `xdsl_patches`: xDSL made it a `BytesAttr`, and the names of a kernel's
    IR, which a pickled kernel is, were lost in another process.)"""
    return attribute.data if isinstance(attribute, StringAttr) else None


def declared_dims(argument: BlockArgument) -> tuple[str, ...] | None:
    """The `ew.dims` of a function argument, if the frontend gave it one: a name per dim of its
    type (a static dim's is its size). Hand-written IR with another is a VerifyException naming
    the argument (a short one was "zip() argument 2 is longer than argument 1" from ew-cost)."""
    dims = argument_attribute(argument, DIMS_ATTRIBUTE)
    if dims is None:
        return None
    shape = (
        tuple(argument.type.get_shape())
        if isinstance(argument.type, TensorType | MemRefType)
        else None
    )
    texts = [attribute_text(d) for d in dims.data] if isinstance(dims, ArrayAttr) else []
    names = tuple(text for text in texts if text is not None)
    if (
        shape is None
        or not isinstance(dims, ArrayAttr)
        or len(names) != len(dims.data)
        or len(names) != len(shape)
        or any(n.isdecimal() and int(n) != size for n, size in zip(names, shape, strict=True))
    ):
        function = cast(func.FuncOp, argument.block.parent_op())
        raise VerifyException(
            f"'func.func' @{function.sym_name.data} argument #{argument.index} "
            f"(%{input_name(argument)}): '{DIMS_ATTRIBUTE}' must be an array of one name per dim "
            f"of its type {argument.type} (a static dim's its size), got {dims}"
        )
    return names


def op_name(op: Operation) -> str:
    """`op`'s name as written, for diagnostics: an unregistered op's own (`foo.bar`), where
    xDSL's `name` is `builtin.unregistered` for every one."""
    return op.op_name.data if isinstance(op, UnregisteredOp) else op.name


def input_name(argument: BlockArgument) -> str | None:
    """The name of a function argument in the source: its `ew.name`, else its name hint."""
    name = attribute_text(argument_attribute(argument, NAME_ATTRIBUTE))
    return name if name is not None else argument.name_hint


def check_tensor_signature(function: func.FuncOp, pass_name: str) -> None:
    """The passes on tensors (`ew-fuse`, `ew-bufferize`) take functions whose arguments and
    results are all ranked tensors of floats with no encoding: an argument they would only pass
    through (an unranked tensor, a scalar, an integer tensor) fails here, naming it, not deep
    inside them, and so does an encoding, which `ew-bufferize`'s memrefs would silently drop."""
    signature = function.function_type
    returned = function.get_return_op()
    hints = (
        [arg.name_hint for arg in function.body.block.args] if function.body.blocks else [],
        [value.name_hint for value in returned.arguments] if returned else [],
    )
    for kind, types, names in zip(
        ("argument", "result"), (signature.inputs, signature.outputs), hints, strict=True
    ):
        for index, type_ in enumerate(types):
            if not (
                isinstance(type_, TensorType)
                and isinstance(type_.element_type, FLOAT_ELEMENT_TYPES)
                and isinstance(type_.encoding, NoneAttr)
            ):
                name = names[index] if index < len(names) else None
                described = f"{kind} #{index}" + (f" (%{name})" if name else "")
                raise OpFailure(
                    f"{pass_name}: 'func.func' @{function.sym_name.data} {described} has "
                    f"type {type_}: {pass_name} takes functions whose arguments and results "
                    f"are ranked tensors of {FLOAT_NAMES} with no encoding",
                    function,
                )


def _float_tensor_of(element: VarConstraint[Attribute]) -> MessageConstraint[Attribute]:
    """A tensor of floats whose element type is the constraint variable `element`."""
    return MessageConstraint(
        TensorType.constr(element),
        f"expected a tensor of {FLOAT_NAMES}, of one element type for the operands and the result",
    )


FLOAT_MEMREF = MessageConstraint(
    MemRefType.constr(_FLOAT_ELEMENT), f"expected a memref of {FLOAT_NAMES}"
)
FLOAT_SHAPED = MessageConstraint(
    TensorType.constr(_FLOAT_ELEMENT) | MemRefType.constr(_FLOAT_ELEMENT),
    f"expected a tensor or memref of {FLOAT_NAMES}",
)


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The numpy broadcast of static shapes, with `DYNAMIC_INDEX` for `?` dimensions.

    A dimension of 1 stretches to the others; `?` is compatible with `?` and with a static size
    (which it must equal at run time). Raises ValueError for incompatible shapes.
    """
    rank = max((len(s) for s in shapes), default=0)
    result: list[int] = []
    for axis in range(rank):
        dims = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0}
        dims.discard(1)
        static = dims - {DYNAMIC_INDEX}
        if len(static) > 1:
            listed = " and ".join(format_shape(s) for s in shapes)
            raise ValueError(f"shapes {listed} do not broadcast")
        result.append(static.pop() if static else (DYNAMIC_INDEX if dims else 1))
    return tuple(result)


def format_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join("?" if d == DYNAMIC_INDEX else str(d) for d in shape) + "]"


CANONICAL_NAN: float = convert_u64_to_f64(0x7FF8000000000000)
"""The NaN folding produces and `nan` denotes: positive, quiet, no payload (numpy's NaN sign
depends on the SIMD path the host runs, so folding keeps a NaN's bits only where IEEE fixes
them: an op that `SIGNS_NAN`)."""


def format_float(value: float) -> str:
    """A float as MLIR text that parses back bit for bit (`parse_float` reads it).

    Finite values print as Python's shortest round-trip decimal, always with a '.'; infinities as
    `inf`/`-inf`; the canonical quiet NaN as `nan`; any other NaN (negative, signaling, with a
    payload) as its f64 bits in MLIR's hex form, `0xFFF8000000000000`.
    """
    if math.isnan(value):
        bits = convert_f64_to_u64(value)
        return "nan" if bits == convert_f64_to_u64(CANONICAL_NAN) else f"0x{bits:016X}"
    text = repr(value)
    if math.isfinite(value) and "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
    return text


def parse_float(parser: Parser) -> float:
    """What `format_float` prints: a decimal, `inf`, `-inf`, `nan`, or hex f64 bits (MLIR's form).

    A hex literal is the bit pattern of the f64 (as for MLIR's `0x7FF8000000000000 : f64`), so
    every NaN keeps its sign and payload. It must spell all 16 hex digits: MLIR reads
    `0x7FC00000 : f32` as f32 bits (a NaN), which as f64 bits would be a denormal.
    """
    start = parser.pos
    if parser.parse_optional_keyword("nan") is not None:
        return CANONICAL_NAN
    negative = parser.parse_optional_punctuation("-") is not None
    if parser.parse_optional_keyword("inf") is not None:
        return -math.inf if negative else math.inf
    number_start = parser.pos
    if negative and parser.lexer.input.content.startswith("-", number_start):
        parser.raise_error("expected a number after '-'")  # (`--1.0` was read as 1.0)
    value = parser.parse_number()
    hexadecimal = parser.lexer.input.content[number_start : number_start + 2] in ("0x", "0X")
    if not hexadecimal:
        try:
            magnitude = float(value)
        except OverflowError:  # an integer past f64's range: inf, as the decimal `1e400` is
            magnitude = math.inf
        return -magnitude if negative else magnitude
    assert isinstance(value, int)
    digits = _HEX_DIGITS.match(parser.lexer.input.content, number_start + 2)
    assert digits is not None  # (it matches the empty string)
    count = len(digits[0])
    problem = "a sign" if negative else f"{count} digit{'' if count == 1 else 's'}"
    if negative or count != 16:
        parser.raise_error(
            "hexadecimal float must be the 64 bits of an f64, 16 hex digits with no sign "
            f"whatever the element type (0x7FF8000000000000 is the quiet NaN), not {problem}",
            start,
            digits.end(),
        )
    return convert_u64_to_f64(value)


_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")


def element_type(type_: Attribute) -> Attribute:
    assert isinstance(type_, TensorType | MemRefType), type_
    return cast(Attribute, type_.get_element_type())


def shape_of(typed: Attribute | SSAValue) -> tuple[int, ...]:
    """The shape of a tensor or memref type (or of a value of one), `DYNAMIC_INDEX` for `?`."""
    type_ = typed.type if isinstance(typed, SSAValue) else typed
    assert isinstance(type_, TensorType | MemRefType), type_
    return tuple(type_.get_shape())


def location_of(value: SSAValue) -> LocationAttr:
    """Where `value` comes from in the source: its op's location, or an argument's own."""
    return (
        value.owner.location if isinstance(value, OpResult) else cast(BlockArgument, value).location
    )


def bind_shape(typed: Attribute | SSAValue, sizes: Sequence[int]) -> tuple[int, ...]:
    """The run-time sizes of a type in a problem of shape `sizes`: `?` dims bound right-aligned.
    ValueError where `sizes` has fewer dims than the type (see `fold_shape`)."""
    dims = shape_of(typed)
    offset = len(sizes) - len(dims)
    if offset < 0:  # a negative index would wrap around: a rank-2 [?, ?] of (n,) would be n x n
        raise ValueError(f"a rank-{len(dims)} type in a problem of {len(sizes)} dims")
    return tuple(sizes[offset + i] if d == DYNAMIC_INDEX else d for i, d in enumerate(dims))


def fold_shape(sizes: Sequence[int], rank: int) -> tuple[int, ...]:
    """`sizes` with its leading dims multiplied into one, down to `rank` dims: the problem shape
    4096x14336 over rank-1 tensors is 58,720,256 elements. ValueError where it has fewer dims."""
    if len(sizes) < rank:
        raise ValueError(f"a problem of {len(sizes)} dims for rank-{rank} tensors")
    if rank == 0:
        return ()
    return (math.prod(sizes[: len(sizes) - rank + 1]), *sizes[len(sizes) - rank + 1 :])


def fixed_dims(shapes: Sequence[Sequence[int]]) -> dict[int, int]:
    """The sizes `shapes` fix, right-aligned in a problem of as many dims as the longest: axis
    -> size for every dim neither `?` nor 1 (a 1 broadcasts), as `input x[t, 8];` fixes 8,
    and 1 for an axis of static 1s only (`x[4, 1, 8] + y[8]`'s middle one: a default problem
    shape took it at 4096)."""
    rank = max(map(len, shapes), default=0)
    sizes: dict[int, int] = {}
    dynamic: set[int] = set()
    for shape in shapes:
        for axis, size in enumerate(shape, rank - len(shape)):
            if size == DYNAMIC_INDEX:
                dynamic.add(axis)
            elif size != 1:
                sizes[axis] = size
    return {
        axis: sizes.get(axis, 1) for axis in range(rank) if axis in sizes or axis not in dynamic
    }


def tied_axis_groups(arguments: Sequence[BlockArgument], rank: int) -> list[list[int]]:
    """The axes of a problem of `rank` dims (right-aligned over `arguments`) that dim names tie
    to one size, in groups of two or more: a name on two axes ties them, and so does a chain of
    names (`x[5, b, b], y[a, 1, a]`: all three)."""
    parent = list(range(rank))

    def root(axis: int) -> int:
        while parent[axis] != axis:
            parent[axis] = parent[parent[axis]]
            axis = parent[axis]
        return axis

    first_axis: dict[str, int] = {}
    for argument in arguments:
        names = declared_dims(argument) or ()
        for index, name in enumerate(names):
            axis = rank - len(names) + index
            if name == "?" or name.isdecimal() or axis < 0:  # (a static size is no name)
                continue
            parent[root(axis)] = root(first_axis.setdefault(name, axis))
    groups: dict[int, list[int]] = {}
    for axis in range(rank):
        groups.setdefault(root(axis), []).append(axis)
    return [axes for axes in groups.values() if len(axes) > 1]


def tie_named_dims(
    arguments: Sequence[BlockArgument], dims: Sequence[int], fixed: Mapping[int, int]
) -> tuple[int, ...]:
    """`dims`, a problem shape sized axis by axis (right-aligned over `arguments`), with the
    axes that dim names tie (`tied_axis_groups`) at one size: the size `fixed` gives one of
    them, else the smallest above 1 (a 1 there pads the problem's rank). A name on two axes
    (`x[t, t]`, `x[d] + y[d, 1]`) was given two sizes, which the call then refused: "dim 'd'
    is 14336 in input 'x' but 4096 in input 'y'"."""
    tied = list(dims)
    for axes in tied_axis_groups(arguments, len(dims)):
        given = [fixed[axis] for axis in axes if axis in fixed]
        size = given[0] if given else min((dims[a] for a in axes if dims[a] > 1), default=1)
        for axis in axes:
            tied[axis] = size
    return tuple(tied)


@lru_cache(maxsize=1024)
def _tensor_type_text(type_: TensorType[Attribute]) -> str:
    return str(type_)


def print_type(printer: Printer, type_: Attribute) -> None:
    """`printer.print_attribute(type_)`, with a plain tensor type's text printed once per type:
    the ew ops print 1-3 types each, and re-printing them was most of the cost of printing ew IR
    (the compile caches' key). Its text is what `print_attribute` writes: one line that no printer
    state (SSA names, indentation, resources) affects."""
    if isinstance(type_, TensorType) and isinstance(type_.encoding, NoneAttr):
        printer.print_string(_tensor_type_text(type_))
    else:
        printer.print_attribute(type_)


def _verify_broadcasts_to(
    op: Operation, operand_types: Sequence[Attribute], result: Attribute
) -> None:
    """The operands' shapes broadcast to the result's."""
    result_shape = tuple(cast(TensorType[Attribute], result).get_shape())
    shapes = [tuple(cast(TensorType[Attribute], t).get_shape()) for t in operand_types]
    try:
        combined = broadcast_shapes(*shapes, result_shape)
    except ValueError:
        combined = None
    if (
        combined is None
        or len(combined) != len(result_shape)
        or any(r != c and r != DYNAMIC_INDEX for r, c in zip(result_shape, combined, strict=True))
    ):
        raise VerifyException(
            f"'{op.name}' operand shapes {', '.join(format_shape(s) for s in shapes)} "
            f"do not broadcast to the result shape {format_shape(result_shape)}"
        )
    _verify_dynamic_dims_bound(op, shapes, result_shape)


def _verify_dynamic_dims_bound(
    op: Operation, operand_shapes: Sequence[Sequence[int]], result_shape: Sequence[int]
) -> None:
    """Each `?` of the result is a `?` of some operand (right-aligned): the run time binds a
    result's `?` from the operands' `?`s, and had nothing to bind one beyond their ranks (a
    kernel filling `tensor<?xf32>` from no inputs failed on an IndexError; `tensor<3xf32>,
    tensor<3xf32> -> tensor<?x3xf32>` made a 3x3 result), nor one their static sizes give
    (`tensor<3xf32>, tensor<1xf32> -> tensor<?xf32>` was bound from the arguments: 1 element;
    `tensor<3x1xf32>, tensor<?xf32> -> tensor<?x?xf32>` of an x of 7 read 7 rows of 3)."""
    rank = len(result_shape)
    for axis, size in enumerate(result_shape):
        sizes = [s[axis - rank] for s in operand_shapes if len(s) >= rank - axis]
        if size == DYNAMIC_INDEX and DYNAMIC_INDEX not in sizes:
            listed = ", ".join(format_shape(s) for s in operand_shapes) or "none"
            where = (
                "no operand has that dimension"
                if not sizes
                else f"its operands have {max(sizes)} there (the result's size)"
            )
            raise VerifyException(
                f"'{op.name}' result dimension {axis} is ? but {where}, so nothing gives its "
                f"size (operand shapes {listed}, result shape {format_shape(result_shape)})"
            )


# ---------------------------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------------------------

FLOAT32_ULP = 2.0**-23
"""One float32 ulp relative to the value: a correctly rounded op plus the reference's rounding."""


@dataclass(frozen=True)
class ErrorBound:
    """How far a float32 kernel's result may be from the op's float64 `reference` on the same
    (float32) operands: `relative * |value| + absolute`."""

    relative: float
    absolute: float = 2.0**-149
    """The smallest float32 denormal: the rounding error of any op near zero."""


@dataclass(frozen=True)
class Accuracy:
    """An op's `ErrorBound` in float32 under each `math` mode of `ew-expand-math`: `approx` (the
    vectorizable approximations) and `libm` (the C library). docs/math.md measures them;
    tests/test_math.py and the fuzz of tests/test_random_programs.py hold kernels to them."""

    approx: ErrorBound
    libm: ErrorBound

    def bound(self, math: str) -> ErrorBound:
        """The bound under `math` ("approx" or "libm")."""
        return {"approx": self.approx, "libm": self.libm}[math]


CORRECTLY_ROUNDED = Accuracy(ErrorBound(FLOAT32_ULP), ErrorBound(FLOAT32_ULP))
"""IEEE arithmetic (+ - * / sqrt, and the exact ops): one ulp in both modes."""


# ---------------------------------------------------------------------------------------------
# Folding and canonicalization hooks (the patterns live in xfuse.dialects.canonicalize)
# ---------------------------------------------------------------------------------------------


def constant_value(value: SSAValue) -> float | None:
    """The float `value` holds if an `ew.constant` defines it: the literal rounded to its element
    type, as a kernel holds it (`x * 1.1` multiplies a bf16 `x` by 1.1015625, as numpy does), a
    NaN as written. The only constant of `ew` values; asked once per operand by several passes,
    so no trait lookup."""
    owner = value.owner
    if not isinstance(owner, ConstantOp):
        return None
    literal = owner.literal
    if math.isnan(literal) or isinstance(element_type(owner.result.type), Float64Type):
        return literal
    return round_to_element(literal, owner.result.type)


_F32 = Float32Type()
"""Built once: asked for per kernel value, a new `Float32Type()` costs a verified attribute."""
_F64 = Float64Type()


def compute_type(element: Attribute) -> Attribute:
    """The type a kernel computes `element` in: f32 for the f16/bf16 storage types, else the
    element type (a value the program never stores keeps f32's precision and range)."""
    return _F32 if isinstance(element, Float16Type | BFloat16Type) else element


def round_to_element(value: float, type_: Attribute) -> float:
    """`value` rounded to a float element type (or a tensor's or memref's); any NaN becomes
    `CANONICAL_NAN`.

    Folding decides NaN bits here, so a folded NaN is the same on every host whichever numpy
    kernel computed it (and CSE shares `0/0` with `log(-1)`). IEEE leaves the sign and payload of
    a NaN result unspecified; only a kernel's run-time NaN keeps what the hardware gives.
    """
    if math.isnan(value):
        return CANONICAL_NAN
    element = type_ if isinstance(type_, FLOAT_ELEMENT_TYPES) else element_type(type_)
    if isinstance(element, Float64Type):
        return value
    with np.errstate(all="ignore"):
        if isinstance(element, Float16Type):
            return float(np.float16(value))
        if isinstance(element, BFloat16Type):  # via f32, as kernels compute bf16 ops
            return float(numpy_dtype("bfloat16").type(np.float32(value)))
        return float(np.float32(value))


def round_once(value: float, type_: Attribute, source: Attribute = _F64) -> float:
    """`value` of float element type `source` (f64 unless said) converted to a float element
    type (or a tensor's) as `ew.convert` and numpy's `astype` convert it: rounded once, f64 to
    bf16 too (`round_to_element` rounds bf16 via f32, as a kernel rounds an op's f32 result:
    1 + 2**-8 + 2**-40 became 1, not 1.0078125); a NaN as `converted_nan` converts it."""
    element = type_ if isinstance(type_, FLOAT_ELEMENT_TYPES) else element_type(type_)
    if math.isnan(value):
        return converted_nan(value, source, element)
    if not isinstance(element, BFloat16Type):
        return round_to_element(value, element)
    with np.errstate(all="ignore"):
        return float(numpy_dtype("bfloat16").type(value))


_MANTISSA_BITS = {Float16Type: 10, BFloat16Type: 7, Float32Type: 23, Float64Type: 52}
_QUIET_BIT = 1 << 51


def converted_nan(value: float, source: Attribute, target: Attribute) -> float:
    """A NaN (as f64 bits) of element type `source` converted to `target` as the kernels'
    `extf`/`truncf` (x86's conversions) convert it: its sign kept, its payload's leading bits as
    far as both types hold them, quiet (IEEE 754 asks a conversion to keep a payload)."""
    dropped = 52 - min(_MANTISSA_BITS[type(source)], _MANTISSA_BITS[type(target)])
    return convert_u64_to_f64(convert_f64_to_u64(value) >> dropped << dropped | _QUIET_BIT)


class ElementwiseFolder(HasFolder):
    """Folds an elementwise op whose operands are all constants (computed in float64, rounded).

    Operands are first rounded to their element type, as a kernel rounds its constants: in f32,
    `1e39 * 0.0` is inf * 0 = NaN and `log(1e-50)` is log(0) = -inf, folded or not. A NaN result
    folds to `CANONICAL_NAN` (positive, quiet, no payload), never to the host-dependent NaN numpy
    computed (see `round_to_element`), but of an op that `SIGNS_NAN`, which passes its operand's
    NaN on with the sign IEEE gives it, payload and signalling bit kept, as the kernels do.
    """

    @classmethod
    def fold(cls, op: Operation) -> Sequence[SSAValue | Attribute] | None:
        assert isinstance(op, ElementwiseOp)
        values = [constant_value(operand) for operand in op.operands]
        if any(v is None for v in values) or tuple(op.result.type.get_shape()) != ():
            return None
        folded = fold_literals(type(op), cast(list[float], values), element_type(op.result.type))
        return (FloatAttr(folded, Float64Type()),)


def fold_literals(op_type: ElementwiseOpType, values: Sequence[float], element: Attribute) -> float:
    """`op_type` on literals, as a kernel of `element` computes it: operands and result rounded
    to `element` (the reference runs in float64), a NaN canonical (but through an op that
    `SIGNS_NAN`, whose float64 reference only moves or flips sign bits: its NaN as it is).

    Each operand is a one-element array, not a numpy scalar: numpy's `power` with a scalar
    exponent of 0.5 (stride 0) is its square root, -0 at -0 and NaN at -inf, where C's pow
    and the kernels give +0 and +inf."""
    signs_nan = op_type.SIGNS_NAN

    def rounded(value: float) -> float:
        if signs_nan and math.isnan(value):  # (its payload, as `-x` of an input NaN keeps it)
            return value
        return round_to_element(value, element)

    operands = [np.array([rounded(v)], np.float64) for v in values]
    with np.errstate(all="ignore"):
        return rounded(float(op_type.reference(*operands)[0]))


class ElementwiseCanonicalization(HasCanonicalizationPatternsTrait):
    """The IEEE-exact identities of `xfuse.dialects.canonicalize` (`x * 1 -> x`, ...)."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from xfuse.dialects.canonicalize import SAFE_IDENTITIES

        return (SAFE_IDENTITIES,)


# ---------------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------------


class ConstantFolder(HasFolder):
    """An `ew.constant` folds to its own value (what `ConstantLike.get_constant_value` reads)."""

    @classmethod
    def fold(cls, op: Operation) -> Sequence[SSAValue | Attribute] | None:
        assert isinstance(op, ConstantOp)
        return (op.value,)


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A scalar splatted over a statically shaped tensor (usually rank 0, broadcast by its users).

    The value is kept as f64 so the program's literal survives; kernels round it to their dtype.

        %c = ew.constant 0.7978845608 : tensor<f32>
    """

    name = "ew.constant"
    value = prop_def(FloatAttr)
    result = result_def(FLOAT_TENSOR)
    traits = traits_def(Pure(), ConstantLike(), ConstantFolder())

    def __init__(self, value: float, type_: TensorType[Attribute]):
        super().__init__(
            properties={"value": FloatAttr(value, Float64Type())}, result_types=[type_]
        )

    @property
    def literal(self) -> float:
        return self.value.value.data

    def verify_(self) -> None:
        if not isinstance(self.value.type, Float64Type):
            raise VerifyException("'ew.constant' value must be an f64 attribute")
        if DYNAMIC_INDEX in tuple(self.result.type.get_shape()):
            raise VerifyException("'ew.constant' result must have a static shape")

    # The assembly format `$value attr-dict : type($result)`.
    def print(self, printer: Printer) -> None:
        printer.print_string(f" {format_float(self.literal)}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        print_type(printer, self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = parse_float(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_start = parser.pos
        type_ = parser.parse_type()
        if not isinstance(type_, TensorType):
            parser.raise_error(
                f"'ew.constant' expected a tensor type, got {type_}", type_start, parser.pos
            )
        op = cls(value, cast(TensorType[Attribute], type_))
        op.attributes.update(attributes)
        return op


NO_REFERENCE = (
    "this op declares no float64 `reference`, which folding, the baselines and the tests "
    "compute it with: add `reference = staticmethod(np.<ufunc>)` (or a function) to its class "
    "in src/xfuse/dialects/ew.py"
)
"""The error of an op without its own `reference` (tests/test_op_facts.py names it too)."""


class UnaryOp(IRDLOperation, ABC):
    """Base of the unary elementwise ops: one operand, a result of the same type."""

    T: ClassVar = VarConstraint("T", FLOAT_TENSOR)
    operand = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure(), ElementwiseFolder(), ElementwiseCanonicalization())

    def __init__(self, operand: SSAValue | Operation):
        value = SSAValue.get(operand)
        # Not IRDL's generic builder, which checks the operand and result counts that this
        # signature fixes, at 4x the cost of the op (a program of 10^4 ops builds 10^4 of them).
        Operation.__init__(self, operands=[value], result_types=[value.type])

    # The assembly format `$operand attr-dict : type($result)`, printed with `print_type`.
    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        print_type(printer, self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> UnaryOp:
        operand = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(parser.resolve_operand(operand, parser.parse_type()))
        op.attributes.update(attributes)
        return op

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        """The op on float64 numpy data: folding, baselines and tests use it. Where numpy has
        the op as a ufunc, the reference is that ufunc (`staticmethod(np.tanh)`), and
        `np.tanh` on a traced value inside `@xfuse.jit` records the op; an op whose reference
        differs from numpy's ufunc in some corner names the ufunc as `NUMPY_UFUNC` (see
        `numpy_ufunc`)."""
        raise NotImplementedError(NO_REFERENCE)

    ACCURACY: ClassVar[Accuracy]
    """The error its float32 kernels may have under each `math` mode (`CORRECTLY_ROUNDED` for
    IEEE arithmetic); every op declares it."""

    PYTHON_NAME: ClassVar[str | None]
    """Its Python-level function (`xfuse.<name>`, `@xfuse.jit`) when not its mnemonic; None for
    an op Python spells as an operator (see `python_name`)."""

    PYTHON_OPERATOR: ClassVar[str]
    """How Python code writes it with an operator, where it has one: `{0} + {1}`, `-{0}` (see
    `python_operator`; the peers of `xfuse bench` write programs with it)."""

    DEFINITION: ClassVar[str | None]
    """For an op that is neither a numpy ufunc nor a Python operator: the op written with other
    ops, as an `.ew` expression of `x` (and `y`), `1 / (1 + exp(-x))`; None for a primitive
    (`erf`). A peer of `xfuse bench` without the function computes this instead."""

    SIGNS_NAN: ClassVar[bool] = False
    """Whether IEEE 754 fixes the bits of a NaN it gives (negate, abs, copySign: sign-bit
    operations that keep the payload and do not quiet a signalling NaN; select passes an
    operand through): folding keeps them, where it folds any other NaN to the positive
    `CANONICAL_NAN` (`fold_literals`)."""


class BinaryOp(IRDLOperation, ABC):
    """Base of the binary elementwise ops, broadcasting their operands to the result's shape.

    The type list is short when all three types agree, and full otherwise:
        %s = ew.add %a, %b : tensor<?xf32>
        %s = ew.add %c, %b : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
    """

    E: ClassVar = VarConstraint("E", _FLOAT_ELEMENT)
    """The element type the operands and the result share."""
    lhs = operand_def(_float_tensor_of(E))
    rhs = operand_def(_float_tensor_of(E))
    result = result_def(_float_tensor_of(E))
    traits = traits_def(Pure(), ElementwiseFolder(), ElementwiseCanonicalization())

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        result_type: Attribute | None = None,
    ):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        if result_type is None:
            result_type = broadcast_type(lhs.type, rhs.type)
        Operation.__init__(self, operands=[lhs, rhs], result_types=[result_type])  # see UnaryOp

    @staticmethod
    def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The op on float64 numpy data, a numpy ufunc where numpy has one (see `UnaryOp`)."""
        raise NotImplementedError(NO_REFERENCE)

    ACCURACY: ClassVar[Accuracy]  # see UnaryOp
    PYTHON_NAME: ClassVar[str | None]  # see UnaryOp
    PYTHON_OPERATOR: ClassVar[str]  # see UnaryOp
    DEFINITION: ClassVar[str | None]  # see UnaryOp
    SIGNS_NAN: ClassVar[bool] = False  # see UnaryOp

    def verify_(self) -> None:
        _verify_broadcasts_to(self, [self.lhs.type, self.rhs.type], self.result.type)

    def print(self, printer: Printer) -> None:
        # `_print_broadcasting` for two operands, by hand: the operands and types read once
        # each (an IRDL accessor costs a lookup per call), and no loop or `print_list`, whose
        # cost made printing a program of 10^4 binary ops (the compile caches' key) 8-16% slower.
        lhs, rhs = self.operands
        types = (lhs.type, rhs.type, self.results[0].type)
        printer.print_string(" ")
        printer.print_operand(lhs)
        printer.print_string(", ")
        printer.print_operand(rhs)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if types[0] == types[1] == types[2]:
            print_type(printer, types[2])
            return
        print_type(printer, types[0])
        printer.print_string(", ")
        print_type(printer, types[1])
        printer.print_string(" -> ")
        print_type(printer, types[2])

    @classmethod
    def parse(cls, parser: Parser) -> BinaryOp:
        (lhs, rhs), attributes, result_type = _parse_broadcasting(parser, 2)
        op = cls(lhs, rhs, result_type)
        op.attributes.update(attributes)
        return op


def broadcast_type(*operands: Attribute) -> Attribute:
    """The result type of a broadcasting op on operands of these tensor types: their broadcast, of
    the first one's element type (ValueError if the shapes do not broadcast)."""
    types = [cast(TensorType[Attribute], t) for t in operands]
    shape = broadcast_shapes(*(t.get_shape() for t in types))
    # An operand's own type where it fits: no new attribute to build and verify.
    fits = [t for t in types if tuple(t.get_shape()) == shape and isinstance(t.encoding, NoneAttr)]
    return fits[0] if fits else TensorType(types[0].element_type, shape)


def _print_broadcasting(op: Operation, printer: Printer) -> None:
    """The assembly format of the broadcasting ops: the operands, then one type where the
    operands' and the result's all agree, else the operands' `->` the result's (`SelectOp`'s;
    `BinaryOp.print` writes it for two operands by hand)."""
    operands = op.operands
    types = [operand.type for operand in operands]
    result_type = op.results[0].type
    printer.print_string(" ")
    printer.print_list(operands, printer.print_operand)
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    if all(type_ == result_type for type_ in types):
        print_type(printer, result_type)
        return
    printer.print_list(types, partial(print_type, printer))
    printer.print_string(" -> ")
    print_type(printer, result_type)


def _parse_broadcasting(
    parser: Parser, count: int
) -> tuple[list[SSAValue], dict[str, Attribute], Attribute]:
    """`count` operands, the attribute dictionary and the result type, as `_print_broadcasting`
    writes them."""
    names = parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    if len(names) != count:
        parser.raise_error(f"expected {count} operands, got {len(names)}")
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    types_start = parser.pos
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    if len(types) == 1:
        result_type = types[0]
        types *= count
    elif len(types) == count:
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
    else:
        parser.raise_error(
            f"expected one type, or {count} types `->` the result's, got {len(types)} types",
            types_start,
            parser.pos,
        )
    operands = [parser.resolve_operand(n, t) for n, t in zip(names, types, strict=True)]
    return operands, attributes, result_type


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


@irdl_op_definition
class AddOp(BinaryOp):
    """Elementwise sum: `%s = ew.add %a, %b : tensor<?xf32>`."""

    name = "ew.add"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = None
    PYTHON_OPERATOR: ClassVar[str] = "{0} + {1}"

    reference = staticmethod(np.add)


@irdl_op_definition
class SubOp(BinaryOp):
    """Elementwise difference: `%d = ew.sub %a, %b : tensor<?xf32>`."""

    name = "ew.sub"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = None
    PYTHON_OPERATOR: ClassVar[str] = "{0} - {1}"

    reference = staticmethod(np.subtract)


@irdl_op_definition
class MulOp(BinaryOp):
    """Elementwise product: `%p = ew.mul %a, %b : tensor<?xf32>`."""

    name = "ew.mul"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = None
    PYTHON_OPERATOR: ClassVar[str] = "{0} * {1}"

    reference = staticmethod(np.multiply)


@irdl_op_definition
class DivOp(BinaryOp):
    """Elementwise quotient (IEEE: x/0 is +-inf or NaN): `%q = ew.div %a, %b : tensor<?xf32>`."""

    name = "ew.div"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = None
    PYTHON_OPERATOR: ClassVar[str] = "{0} / {1}"

    reference = staticmethod(np.divide)


def _maximum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 maximum (LLVM's `maximum`): NaN if either is NaN, and -0.0 < +0.0.

    numpy's maximum returns either zero of a tie of signed zeros.
    """
    return np.where(x == y, np.where(np.signbit(x), y, x), np.maximum(x, y))


def _minimum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 minimum (LLVM's `minimum`): NaN if either is NaN, and -0.0 < +0.0."""
    return np.where(x == y, np.where(np.signbit(x), x, y), np.minimum(x, y))


@irdl_op_definition
class MaxOp(BinaryOp):
    """Elementwise maximum, NaN if either is NaN, -0 < +0: `%m = ew.max %a, %b : tensor<?xf32>`."""

    name = "ew.max"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = "maximum"  # numpy's name

    NUMPY_UFUNC: ClassVar[np.ufunc] = np.maximum  # differs only on a tie of -0, +0

    @staticmethod
    def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _maximum(x, y)


@irdl_op_definition
class MinOp(BinaryOp):
    """Elementwise minimum, NaN if either is NaN, -0 < +0: `%m = ew.min %a, %b : tensor<?xf32>`."""

    name = "ew.min"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = "minimum"

    NUMPY_UFUNC: ClassVar[np.ufunc] = np.minimum  # differs only on a tie of -0, +0

    @staticmethod
    def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _minimum(x, y)


@irdl_op_definition
class PowOp(BinaryOp):
    """Elementwise power x**y (C's powf semantics): `%p = ew.pow %a, %b : tensor<?xf32>`."""

    name = "ew.pow"

    # approx: exp(y log|x|) in f64, rounded once to f32 (measured: half an ulp and a hair)
    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(FLOAT32_ULP), libm=ErrorBound(2 * FLOAT32_ULP)
    )
    PYTHON_NAME: ClassVar[str | None] = "power"  # numpy's name
    PYTHON_OPERATOR: ClassVar[str] = "{0} ** {1}"

    NUMPY_UFUNC: ClassVar[np.ufunc] = np.power
    # C's pow: np.power takes a scalar exponent 0.5 for sqrt (pow(-0, 0.5) -0, pow(-inf, 0.5)
    # NaN; C's +0 and +inf), and `xfuse.power(x, 0.5)` on arrays gave those
    reference = staticmethod(np.float_power)


@irdl_op_definition
class NegOp(UnaryOp):
    """Elementwise negation: `%n = ew.neg %a : tensor<?xf32>`."""

    name = "ew.neg"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    PYTHON_NAME: ClassVar[str | None] = None
    PYTHON_OPERATOR: ClassVar[str] = "-{0}"
    SIGNS_NAN: ClassVar[bool] = True

    reference = staticmethod(np.negative)


@irdl_op_definition
class AbsOp(UnaryOp):
    """Elementwise absolute value: `%m = ew.abs %a : tensor<?xf32>`."""

    name = "ew.abs"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    SIGNS_NAN: ClassVar[bool] = True

    reference = staticmethod(np.abs)


@irdl_op_definition
class CopysignOp(BinaryOp):
    """Elementwise `a`'s magnitude with `b`'s sign bit (-0's and a NaN's too: IEEE 754's
    copySign, numpy's `copysign`; a NaN `a` stays NaN): `%c = ew.copysign %a, %b :
    tensor<?xf32>`."""

    name = "ew.copysign"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    SIGNS_NAN: ClassVar[bool] = True

    reference = staticmethod(np.copysign)


@irdl_op_definition
class ExpOp(UnaryOp):
    """Elementwise e**x: `%e = ew.exp %a : tensor<?xf32>`."""

    name = "ew.exp"

    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(2e-7), libm=ErrorBound(2 * FLOAT32_ULP)
    )

    reference = staticmethod(np.exp)


@irdl_op_definition
class LogOp(UnaryOp):
    """Elementwise natural logarithm (NaN below 0, -inf at 0): `%l = ew.log %a : tensor<?xf32>`."""

    name = "ew.log"

    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(2e-7), libm=ErrorBound(2 * FLOAT32_ULP)
    )

    reference = staticmethod(np.log)


@irdl_op_definition
class Log1pOp(UnaryOp):
    """Elementwise log(1 + x), accurate for tiny x: `%l = ew.log1p %a : tensor<?xf32>`."""

    name = "ew.log1p"

    reference = staticmethod(np.log1p)
    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(4e-7), libm=ErrorBound(3 * FLOAT32_ULP)
    )


@irdl_op_definition
class TanhOp(UnaryOp):
    """Elementwise hyperbolic tangent: `%t = ew.tanh %a : tensor<?xf32>`."""

    name = "ew.tanh"

    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(6e-7, 1e-7), libm=ErrorBound(3 * FLOAT32_ULP, 1e-7)
    )

    reference = staticmethod(np.tanh)


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """Elementwise logistic 1 / (1 + e**-x): `%s = ew.sigmoid %a : tensor<?xf32>`."""

    name = "ew.sigmoid"

    # Relatively large only for results below 1e-38 (e**-x overflows and the result flushes
    # to 0 while the true value is a denormal): the absolute term covers them.
    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(3e-7, 2e-38), libm=ErrorBound(3 * FLOAT32_ULP, 2e-38)
    )
    DEFINITION: ClassVar[str | None] = "1 / (1 + exp(-x))"

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        # e**-|x| never overflows: for x < 0, e / (1 + e) keeps the denormal tail below
        # x = -709.78 that 1 / (1 + e**-x) flushed to 0 (a folded f64 sigmoid was 0 there)
        tail = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + tail), tail / (1.0 + tail))


@irdl_op_definition
class ErfOp(UnaryOp):
    """Elementwise error function: `%e = ew.erf %a : tensor<?xf32>`."""

    name = "ew.erf"

    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(1e-6, 7e-7), libm=ErrorBound(3 * FLOAT32_ULP, 1e-7)
    )
    DEFINITION: ClassVar[str | None] = None  # a primitive, not in numpy

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        return _erf(x)


@irdl_op_definition
class SqrtOp(UnaryOp):
    """Elementwise square root (NaN below 0): `%s = ew.sqrt %a : tensor<?xf32>`."""

    name = "ew.sqrt"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED

    reference = staticmethod(np.sqrt)


@irdl_op_definition
class RsqrtOp(UnaryOp):
    """Elementwise reciprocal square root 1/sqrt(x): `%r = ew.rsqrt %a : tensor<?xf32>`."""

    name = "ew.rsqrt"

    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(FLOAT32_ULP), libm=ErrorBound(2 * FLOAT32_ULP)
    )
    """approx: the host's estimate and Newton steps, within half an ulp (5.95e-8 measured);
    libm: 1 / sqrt(x), two roundings (8.94e-8 measured)."""
    DEFINITION: ClassVar[str | None] = "1 / sqrt(x)"

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 1.0 / np.sqrt(x)


@irdl_op_definition
class ReluOp(UnaryOp):
    """Elementwise max(x, +0), NaN stays NaN, relu(-0) = +0: `%r = ew.relu %a : tensor<?xf32>`."""

    name = "ew.relu"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED
    DEFINITION: ClassVar[str | None] = "max(x, 0)"

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        return _maximum(x, np.zeros_like(x))


@irdl_op_definition
class SoftplusOp(UnaryOp):
    """Elementwise log(1 + e**x), a smooth relu: `%s = ew.softplus %a : tensor<?xf32>`."""

    name = "ew.softplus"

    # An exp and a log (tests/test_softplus.py measures <= 2e-7 relative).
    ACCURACY: ClassVar[Accuracy] = Accuracy(
        approx=ErrorBound(1e-6), libm=ErrorBound(8 * FLOAT32_ULP)
    )
    DEFINITION: ClassVar[str | None] = "max(x, 0) + log1p(exp(-abs(x)))"

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        return np.logaddexp(x, 0.0)  # log(e**x + e**0) without overflow for large x


@irdl_op_definition
class FloorOp(UnaryOp):
    """Elementwise largest integer <= x (floor(-0.5) = -1, floor(-0) = -0, inf and NaN stay):
    `%f = ew.floor %a : tensor<?xf32>`."""

    name = "ew.floor"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED  # exact

    reference = staticmethod(np.floor)


@irdl_op_definition
class CeilOp(UnaryOp):
    """Elementwise smallest integer >= x (ceil(-0.5) = -0): `%c = ew.ceil %a : tensor<?xf32>`."""

    name = "ew.ceil"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED  # exact

    reference = staticmethod(np.ceil)


@irdl_op_definition
class TruncOp(UnaryOp):
    """Elementwise x rounded toward zero (trunc(-0.5) = -0): `%t = ew.trunc %a : tensor<?xf32>`."""

    name = "ew.trunc"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED  # exact

    reference = staticmethod(np.trunc)


@irdl_op_definition
class RintOp(UnaryOp):
    """Elementwise x rounded to the nearest integer, a tie to the even one (numpy's `rint` and
    `round`: rint(2.5) = 2, rint(-0.5) = -0): `%r = ew.rint %a : tensor<?xf32>`."""

    name = "ew.rint"

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED  # exact

    reference = staticmethod(np.rint)


def _library_function(
    base: type[UnaryOp] | type[BinaryOp],
    mnemonic: str,
    ufunc: np.ufunc,
    what: str,
    ulps: tuple[int, int],
) -> type[UnaryOp] | type[BinaryOp]:
    """The op `ew.<mnemonic>` of a C library function (`sinf`, `atan2f`) that xfuse has no
    approximation of: `ew-expand-math` calls the C library's function (NVIDIA's libdevice's on
    the GPU) under both `math` modes, and under `math=approx` the loop vectorizer calls glibc's
    vector variant (or, for f32 sin and cos on a host with FMA, xfuse's own vector code:
    `xfuse.codegen.vector_functions.own_sine`; docs/math.md). `what` describes it; numpy's
    `ufunc` is its reference; `ulps` is its float32 error bound under `approx` and `libm`, in
    `FLOAT32_ULP`s: about twice the worst error measured on AVX-512's and AVX2's variants and on
    libm (docs/math.md)."""
    operands = "%a" if base is UnaryOp else "%a, %b"
    approx, libm = (ErrorBound(n * FLOAT32_ULP) for n in ulps)
    op_type = type(
        f"{mnemonic.capitalize()}Op",
        (base,),
        {
            "__doc__": f"Elementwise {what}: `%r = ew.{mnemonic} {operands} : tensor<?xf32>`.",
            "__module__": __name__,
            "__annotations__": {"ACCURACY": ClassVar[Accuracy]},  # a constant (`_comparison`)
            "name": f"ew.{mnemonic}",
            "ACCURACY": Accuracy(approx, libm),
            "reference": staticmethod(ufunc),
        },
    )
    return irdl_op_definition(op_type)


SinOp = _library_function(UnaryOp, "sin", np.sin, "sine (of radians)", (2, 1))
CosOp = _library_function(UnaryOp, "cos", np.cos, "cosine (of radians)", (2, 1))
TanOp = _library_function(UnaryOp, "tan", np.tan, "tangent (of radians)", (3, 2))
AsinOp = _library_function(
    UnaryOp, "asin", np.arcsin, "arcsine (numpy's `arcsin`; NaN beyond +-1)", (4, 2)
)
AcosOp = _library_function(
    UnaryOp, "acos", np.arccos, "arccosine (numpy's `arccos`; NaN beyond +-1)", (3, 2)
)
AtanOp = _library_function(UnaryOp, "atan", np.arctan, "arctangent (`arctan`)", (3, 2))
SinhOp = _library_function(UnaryOp, "sinh", np.sinh, "hyperbolic sine", (2, 2))
CoshOp = _library_function(UnaryOp, "cosh", np.cosh, "hyperbolic cosine", (3, 2))
AsinhOp = _library_function(
    UnaryOp, "asinh", np.arcsinh, "inverse hyperbolic sine (`arcsinh`)", (3, 2)
)
AcoshOp = _library_function(
    UnaryOp, "acosh", np.arccosh, "inverse hyperbolic cosine (`arccosh`; NaN below 1)", (3, 2)
)
AtanhOp = _library_function(
    UnaryOp, "atanh", np.arctanh, "inverse hyperbolic tangent (`arctanh`; +-inf at +-1)", (3, 2)
)
Exp2Op = _library_function(UnaryOp, "exp2", np.exp2, "2**x", (2, 1))
Expm1Op = _library_function(UnaryOp, "expm1", np.expm1, "e**x - 1, exact for tiny x", (3, 2))
Log2Op = _library_function(UnaryOp, "log2", np.log2, "base-2 logarithm", (3, 1))
Log10Op = _library_function(UnaryOp, "log10", np.log10, "base-10 logarithm", (3, 2))
CbrtOp = _library_function(UnaryOp, "cbrt", np.cbrt, "cube root (cbrt(-8) = -2)", (4, 2))
Atan2Op = _library_function(
    BinaryOp, "atan2", np.arctan2, "angle of the point (b, a), atan2(a, b) (`arctan2`)", (4, 2)
)


class CompareOp(BinaryOp, ABC):
    """Base of the comparisons: 1 where the comparison holds, else 0, in the operands' element
    type (a mask that arithmetic and `ew.select` take). As in IEEE and numpy, a NaN compares
    unequal to everything, itself included (`ne` holds, the others do not), and -0 equals +0.
    Each comparison is a numpy ufunc (`NUMPY_UFUNC`) whose boolean result this is as 0 and 1."""

    NUMPY_UFUNC: ClassVar[np.ufunc]


def _comparison(mnemonic: str, ufunc: np.ufunc, operator: str) -> type[CompareOp]:
    """The comparison op `ew.<mnemonic>`: numpy's `ufunc` (its Python name), Python's `operator`
    (`<`), its reference the ufunc's booleans as float64 0 and 1."""

    def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return ufunc(x, y).astype(np.float64)

    op_type = type(
        f"{mnemonic.capitalize()}Op",
        (CompareOp,),
        {
            "__doc__": f"1 where a {operator} b, else 0: `%m = ew.{mnemonic} %a, %b : "
            "tensor<?xf32>`.",
            "__module__": __name__,
            "__annotations__": {  # IRDL takes upper-case fields declared ClassVar as constants
                "ACCURACY": ClassVar[Accuracy],
                "PYTHON_NAME": ClassVar[str | None],
                "PYTHON_OPERATOR": ClassVar[str],
                "NUMPY_UFUNC": ClassVar[np.ufunc],
            },
            "name": f"ew.{mnemonic}",
            "ACCURACY": CORRECTLY_ROUNDED,  # exact: 1 or 0
            "PYTHON_NAME": ufunc.__name__,
            "PYTHON_OPERATOR": f"{{0}} {operator} {{1}}",
            "NUMPY_UFUNC": ufunc,
            "reference": staticmethod(reference),
        },
    )
    return irdl_op_definition(op_type)


LtOp = _comparison("lt", np.less, "<")
LeOp = _comparison("le", np.less_equal, "<=")
GtOp = _comparison("gt", np.greater, ">")
GeOp = _comparison("ge", np.greater_equal, ">=")
EqOp = _comparison("eq", np.equal, "==")
NeOp = _comparison("ne", np.not_equal, "!=")


def _where(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(condition != 0, x, y)


@irdl_op_definition
class SelectOp(IRDLOperation):
    """Elementwise choice, numpy's `where(c, a, b)`: `a` where `c` is nonzero (a NaN is nonzero,
    as in C and numpy's `bool`), else `b`. The three operands broadcast to the result's shape and
    share its element type; the type list is short when all four types agree:

        %m = ew.gt %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
        %r = ew.select %m, %x, %y : tensor<?xf32>
        %s = ew.select %m, %x, %zero : tensor<?xf32>, tensor<?xf32>, tensor<f32> -> tensor<?xf32>

    It passes the chosen operand through bit for bit (NaN payloads, signed zeros), so
    `where(x > 0, x, 0)` is 0 at NaN where `max(x, 0)` is NaN.
    """

    name = "ew.select"

    E: ClassVar = VarConstraint("E", _FLOAT_ELEMENT)
    """The element type the operands and the result share."""
    condition = operand_def(_float_tensor_of(E))
    on_true = operand_def(_float_tensor_of(E))
    on_false = operand_def(_float_tensor_of(E))
    result = result_def(_float_tensor_of(E))
    traits = traits_def(Pure(), ElementwiseFolder(), ElementwiseCanonicalization())

    ACCURACY: ClassVar[Accuracy] = CORRECTLY_ROUNDED  # exact: one of its operands
    PYTHON_NAME: ClassVar[str | None] = "where"  # numpy's name
    DEFINITION: ClassVar[str | None] = None  # a primitive, not a ufunc
    SIGNS_NAN: ClassVar[bool] = True  # (see UnaryOp)

    reference = staticmethod(_where)

    def __init__(
        self,
        condition: SSAValue | Operation,
        on_true: SSAValue | Operation,
        on_false: SSAValue | Operation,
        result_type: Attribute | None = None,
    ):
        operands = [SSAValue.get(v) for v in (condition, on_true, on_false)]
        if result_type is None:
            result_type = broadcast_type(*(v.type for v in operands))
        Operation.__init__(self, operands=operands, result_types=[result_type])  # see UnaryOp

    def verify_(self) -> None:
        _verify_broadcasts_to(self, [v.type for v in self.operands], self.result.type)

    def print(self, printer: Printer) -> None:
        _print_broadcasting(self, printer)

    @classmethod
    def parse(cls, parser: Parser) -> SelectOp:
        (condition, on_true, on_false), attributes, result_type = _parse_broadcasting(parser, 3)
        op = cls(condition, on_true, on_false, result_type)
        op.attributes.update(attributes)
        return op


ElementwiseOp = UnaryOp | BinaryOp | SelectOp
"""An elementwise op (`isinstance(op, ElementwiseOp)`); `ELEMENTWISE_OPS` lists their classes."""
ElementwiseOpType = type[ElementwiseOp]


def arity(op_type: ElementwiseOpType) -> int:
    """How many operands the elementwise `op_type` takes."""
    return 1 if issubclass(op_type, UnaryOp) else 2 if issubclass(op_type, BinaryOp) else 3


ELEMENTWISE_OPS: tuple[ElementwiseOpType, ...] = (
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    MaxOp,
    MinOp,
    PowOp,
    NegOp,
    AbsOp,
    CopysignOp,
    ExpOp,
    LogOp,
    Log1pOp,
    TanhOp,
    SigmoidOp,
    ErfOp,
    SqrtOp,
    RsqrtOp,
    ReluOp,
    SoftplusOp,
    FloorOp,
    CeilOp,
    TruncOp,
    RintOp,
    SinOp,
    CosOp,
    TanOp,
    AsinOp,
    AcosOp,
    AtanOp,
    SinhOp,
    CoshOp,
    AsinhOp,
    AcoshOp,
    AtanhOp,
    Exp2Op,
    Expm1Op,
    Log2Op,
    Log10Op,
    CbrtOp,
    Atan2Op,
    LtOp,
    LeOp,
    GtOp,
    GeOp,
    EqOp,
    NeOp,
    SelectOp,
)


class ConvertCanonicalization(HasCanonicalizationPatternsTrait):
    """An f16/bf16 conversion to its own type of a value rounded already is the value."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from xfuse.dialects.canonicalize import RoundingOfARoundedValue

        return (RoundingOfARoundedValue(),)


class ConvertFolder(HasFolder):
    """Folds the conversion of a constant: the literal rounded to its own element type (as a
    kernel holds it), then to the new one: `f16 100000.0` converts to `f32 inf`; a NaN keeps its
    sign and its payload's leading bits, quiet (`converted_nan`), as a kernel's conversion."""

    @classmethod
    def fold(cls, op: Operation) -> Sequence[SSAValue | Attribute] | None:
        assert isinstance(op, ConvertOp)
        value = constant_value(op.operand)
        if value is None:
            return None
        source = element_type(op.operand.type)
        if not math.isnan(value):  # (a NaN's sign and payload, as a kernel converts them)
            value = round_to_element(value, source)  # the literal as the operand holds it
        return (FloatAttr(round_once(value, op.result.type, source), Float64Type()),)


@irdl_op_definition
class ConvertOp(IRDLOperation):
    """Elementwise conversion to another float element type; the shape stays the same.

        %w = ew.convert %x : tensor<?x?xbf16> to tensor<?x?xf32>

    Widening is exact; narrowing rounds to nearest even (f32 -> bf16 too). The frontend inserts
    it where operands of different dtypes meet (numpy's promotion) and for `f32(x)`-style calls.
    Kernels compute it with `arith.extf`/`arith.truncf` (`xfuse.transforms.scalar.emit_convert`).
    An f16 or bf16 value may convert to its own type: a kernel holds such a value in f32 until
    it stores it, and this rounds it where it stands (`f16(x * x)` of an f16 `x`).

        %r = ew.convert %p : tensor<?xf16> to tensor<?xf16>
    """

    name = "ew.convert"
    operand = operand_def(FLOAT_TENSOR)
    result = result_def(FLOAT_TENSOR)
    traits = traits_def(Pure(), ConvertFolder(), ConvertCanonicalization())
    assembly_format = "$operand attr-dict `:` type($operand) `to` type($result)"

    def __init__(self, operand: SSAValue | Operation, element: Attribute):
        source = cast(TensorType[Attribute], SSAValue.get(operand).type)
        super().__init__(operands=[operand], result_types=[TensorType(element, source.get_shape())])

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        """The float64 reference computes everything in float64: there a conversion is exact."""
        return x

    def verify_(self) -> None:
        source, target = element_type(self.operand.type), element_type(self.result.type)
        if source == target and not isinstance(source, Float16Type | BFloat16Type):
            raise VerifyException(
                f"'ew.convert' from {source} to itself: only f16 and bf16 convert to themselves "
                "(a rounding of what a kernel holds in f32)"
            )
        operand_shape = tuple(cast(TensorType[Attribute], self.operand.type).get_shape())
        result_shape = tuple(self.result.type.get_shape())
        if operand_shape != result_shape:
            raise VerifyException(
                f"'ew.convert' keeps the shape: operand {format_shape(operand_shape)} but result "
                f"{format_shape(result_shape)}"
            )


def mnemonic(op_type: type[Operation]) -> str:
    """`ew.tanh` -> `tanh`: the name the frontend calls the function by."""
    return op_type.name.removeprefix("ew.")


OPS_BY_MNEMONIC: dict[str, ElementwiseOpType] = {mnemonic(op): op for op in ELEMENTWISE_OPS}


def python_name(op_type: ElementwiseOpType) -> str | None:
    """The name of the op's Python-level function (`xfuse.tanh`, `xfuse.maximum`): its
    `PYTHON_NAME`, else its mnemonic; None for an op Python spells as an operator (`x + y`)."""
    return getattr(op_type, "PYTHON_NAME", mnemonic(op_type))


def python_operator(op_type: ElementwiseOpType) -> str | None:
    """How Python writes the op with an operator (`{0} + {1}`): its `PYTHON_OPERATOR`, or None."""
    return getattr(op_type, "PYTHON_OPERATOR", None)


def definition(op_type: ElementwiseOpType) -> str | None:
    """The op written with other ops (`.ew` over `x`, `y`): its `DEFINITION`, or None."""
    return getattr(op_type, "DEFINITION", None)


def numpy_ufunc(op_type: ElementwiseOpType) -> np.ufunc | None:
    """numpy's ufunc that `@xfuse.jit` traces to this op: its `NUMPY_UFUNC`, else its reference if
    that is a ufunc (`reference = staticmethod(np.tanh)`), else None."""
    declared = getattr(op_type, "NUMPY_UFUNC", None)
    if declared is not None:
        return declared
    return op_type.reference if isinstance(op_type.reference, np.ufunc) else None


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


class KernelMemoryEffect(MemoryEffect):
    """On tensors a kernel has its body's effects (none: scalar arithmetic), so `cse` merges
    equal kernels and `dce` drops unused ones; on buffers it reads its `ins` and writes its `outs`.
    """

    @classmethod
    def get_effects(cls, op: Operation) -> AbstractSet[EffectInstance] | None:
        assert isinstance(op, KernelOp)
        if not op.is_bufferized:
            return RecursiveMemoryEffect.get_effects(op)
        reads = {EffectInstance(MemoryEffectKind.READ, value) for value in op.inputs}
        return reads | {EffectInstance(MemoryEffectKind.WRITE, value) for value in op.outputs}


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A fused elementwise kernel: its region runs once per element of the iteration space.

    The region's block takes one scalar per input (its element type) and yields one scalar per
    result; each op of it takes scalars and gives one (no memrefs, no regions). Inputs broadcast
    to the iteration space, the shape shared by all results. Before bufferization a kernel reads
    tensors and returns tensors:

        %y = ew.kernel ins(%x, %b : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
        ^bb0(%xs: f32, %bs: f32):
          %s = arith.addf %xs, %bs : f32
          ew.yield %s : f32
        }

    after it reads and writes memrefs and returns nothing (an output may alias an input of the same
    shape: an in-place write, legal because element i is read before element i is written):

        ew.kernel ins(%x, %b : memref<?xf32>, memref<?xf32>) outs(%y : memref<?xf32>) { ... }
    """

    name = "ew.kernel"
    inputs = var_operand_def(FLOAT_SHAPED)
    outputs = var_operand_def(FLOAT_MEMREF)
    res = var_result_def(FLOAT_TENSOR)
    body = region_def("single_block")
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = lazy_traits_def(
        lambda: (
            IsolatedFromAbove(),
            SingleBlockImplicitTerminator(YieldOp),
            KernelMemoryEffect(),
            RecursivelySpeculatable(),
        )
    )

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
    ):
        super().__init__(
            operands=[list(inputs), list(outputs)],
            result_types=[list(result_types)],
            regions=[body],
        )

    @property
    def is_bufferized(self) -> bool:
        return not self.res and bool(self.outputs)

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        terminator = self.block.last_op
        assert isinstance(terminator, YieldOp)
        return terminator

    def destinations(self) -> Sequence[SSAValue]:
        """What the kernel writes: its results on tensors, its `outs` on buffers."""
        return self.outputs if self.is_bufferized else self.res

    def verify_(self) -> None:
        tensor_form = all(isinstance(v.type, TensorType) for v in self.inputs)
        buffer_form = all(isinstance(v.type, MemRefType) for v in (*self.inputs, *self.outputs))
        if self.outputs and (self.res or not buffer_form):
            raise VerifyException("'ew.kernel' with outs must have memref operands and no results")
        if not self.outputs and not (tensor_form and self.res):
            raise VerifyException("'ew.kernel' on tensors must take tensors and return tensors")
        if len(self.block.args) != len(self.inputs):
            raise VerifyException(
                f"'ew.kernel' has {len(self.inputs)} inputs but its block takes "
                f"{len(self.block.args)} arguments"
            )
        for index, (arg, operand) in enumerate(zip(self.block.args, self.inputs, strict=True)):
            if arg.type != element_type(operand.type):
                raise VerifyException(
                    f"'ew.kernel' block argument {index} has type {arg.type}, expected the "
                    f"element type {element_type(operand.type)} of input {index}"
                )
        for op in list(self.block.ops)[:-1]:
            # The region computes one element from scalars: `ew-kernel-to-loops` places each op
            # by its one result's operands (a `memref.store` there was a raw IndexError).
            shaped = any(isinstance(v.type, ShapedType) for v in (*op.operands, *op.results))
            if len(op.results) != 1 or op.regions or shaped:
                raise VerifyException(
                    f"'ew.kernel' region op '{op.name}' must take and give scalars: one result, "
                    "scalar operands, no regions (the region computes one element)"
                )
        destinations = self.destinations()
        yielded = self.yield_op.values
        if len(yielded) != len(destinations):
            raise VerifyException(
                f"'ew.kernel' yields {len(yielded)} values for {len(destinations)} results"
            )
        for index, (value, dest) in enumerate(zip(yielded, destinations, strict=True)):
            if value.type != element_type(dest.type):
                raise VerifyException(
                    f"'ew.kernel' yield {index} has type {value.type}, expected "
                    f"{element_type(dest.type)}"
                )
        shapes = {tuple(cast(TensorType[Attribute], d.type).get_shape()) for d in destinations}
        if len(shapes) != 1:
            raise VerifyException("'ew.kernel' results must all have the same shape")
        (iteration_shape,) = shapes
        if not self.outputs:  # (a buffer's `?` is its own size, which its memref carries)
            _verify_dynamic_dims_bound(
                self, [shape_of(operand) for operand in self.inputs], iteration_shape
            )
        for index, operand in enumerate(self.inputs):
            shape = tuple(cast(TensorType[Attribute], operand.type).get_shape())
            try:
                combined = broadcast_shapes(shape, iteration_shape)
            except ValueError:
                combined = ()
            if combined != iteration_shape and len(combined) == len(iteration_shape):
                # A `?` may be a static size, not a 1: it never broadcasts (as for the binary
                # ops), and a kernel of 1 element read one past the end of an empty input.
                combined = tuple(
                    i if (c == DYNAMIC_INDEX and i != 1) or i == DYNAMIC_INDEX else c
                    for i, c in zip(iteration_shape, combined, strict=True)
                )
            if combined != iteration_shape:
                raise VerifyException(
                    f"'ew.kernel' input {index} of shape {format_shape(shape)} does not "
                    f"broadcast to the iteration shape {format_shape(iteration_shape)}"
                )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ins(")
        printer.print_list(self.inputs, printer.print_operand)
        if self.inputs:
            printer.print_string(" : ")
            printer.print_list((v.type for v in self.inputs), partial(print_type, printer))
        printer.print_string(")")
        if self.outputs:
            printer.print_string(" outs(")
            printer.print_list(self.outputs, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list((v.type for v in self.outputs), partial(print_type, printer))
            printer.print_string(")")
        if self.res:
            printer.print_string(" -> ")
            printer.print_list(self.res.types, partial(print_type, printer))
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        inputs = _parse_operand_group(parser, "ins")
        outputs = _parse_operand_group(parser, "outs", optional=True)
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
        attributes = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        op = cls(inputs, outputs, result_types, body)
        if attributes is not None:
            op.attributes.update(attributes.data)
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a kernel's region with the scalar values of its results, in order.

    ew.yield %y, %h : f32, f32
    """

    name = "ew.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(KernelOp), Pure())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


def _parse_operand_group(parser: Parser, keyword: str, optional: bool = False) -> list[SSAValue]:
    """`keyword(%a, %b : type_a, type_b)`, resolved; `keyword()` for none."""
    if parser.parse_optional_keyword(keyword) is None:
        if not optional:
            parser.raise_error(f"expected '{keyword}('")
        return []
    parser.parse_punctuation("(")
    if parser.parse_optional_punctuation(")") is not None:
        return []
    names: list[UnresolvedOperand] = parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    if len(names) != len(types):
        parser.raise_error(f"'{keyword}' lists {len(names)} operands but {len(types)} types")
    return [parser.resolve_operand(n, t) for n, t in zip(names, types, strict=True)]


class EwConstantMaterialization(ConstantMaterializationInterface):
    """A folded float on a tensor type becomes an `ew.constant` (as an MLIR dialect's
    `materializeConstant`); anything else is not the `ew` dialect's to build."""

    def materialize_constant(self, value: Attribute, type: Attribute) -> Operation | None:
        if not isinstance(value, FloatAttr) or not isinstance(type, TensorType):
            return None
        return ConstantOp(value.value.data, cast(TensorType[Attribute], type))


Ew = Dialect(
    "ew",
    [ConstantOp, *ELEMENTWISE_OPS, ConvertOp, KernelOp, YieldOp],
    [],
    [EwConstantMaterialization()],
)
