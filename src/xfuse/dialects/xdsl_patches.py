"""Fixes of xDSL 0.75 bugs that xfuse's inputs meet, applied when the `ew` dialect is imported.

- The MLIR lexer's string literal, `"(?:[^"\\\n\v\f]+|\\(?:...))*"`, nests a `+` in a `*`: on a
  literal left open (`func.func @"aaaa...` without its closing quote) the regex engine tries
  every way to split the run of characters, a time exponential in its length (`xfuse-opt` on
  a 200-character one ran past `tests/test_opt.py`'s 60 s; `xdsl-opt` hangs too). One character
  per repetition matches the same strings in linear time (0.25 s for the whole `xfuse-opt`).
- The lexer makes a string literal with an escaped non-ASCII character (`"d\\C3\\A9"`, as xDSL
  prints `dé`) a `BYTES_LIT`, where its docstring says UTF-8 is a `STRING_LIT`: a location
  (`loc("d\\C3\\A9/a.ew":1:7)`, what `--print-debuginfo` printed) did not parse back, and
  a string attribute parsed back as a `BytesAttr`.
- Verifiers (`_verify_also`) that check too little or raise the wrong error: a comparison's
  predicate out of range (an IndexError printing it), `memref.load`/`store` with the wrong
  number of indices and `scf.while`'s block arguments (bare `Exception`s: internal errors), and
  `arith.extf` and `arith.truncf`, which verify no widths: `arith.extf %a : f16 to bf16` (or
  `f32 to f32`, `truncf f32 to f64`) passed the verifier and failed in `ew-to-llvm` as an
  internal KeyError, a negative shift count or an out-of-range constant; mlir-opt refuses them
  as "cast incompatible" (`arith::ExtFOp::areCastCompatible`: an extension widens, a truncation
  narrows).
- A float `dense<...>` literal's hexadecimal elements (`dense<0x7F800000> : tensor<f32>`, as
  `ew-to-linalg` and mlir-opt print infinities and NaNs) were read as integers converted to
  floats (4.28e9), not as the element's bits as a scalar `arith.constant 0x7F800000 : f32` is
  and MLIR reads them (`_float_of_hex_bits`): a round trip changed the values silently.
- `f16` values go through `struct`'s `e` format, which drops a NaN's payload both ways
  (`arith.constant 0x7E01 : f16` printed back as `0x7e00`), and bf16's encoder and f32's `f`
  format (through a C double) quiet a signalling NaN (`0x7F81` as `0x7fc1`, `0x7F800001 : f32`
  as `0x7fc00001`): a NaN's sign and payload bits are kept (`_keep_nan_payloads`), as mlir-opt
  keeps them.
- A float `dense<...>` literal's decimal integers (`dense<100000> : tensor<2xf16>`) and
  booleans were read as floats, where MLIR refuses them, and a complex type's real element
  failed an assertion.
- xDSL reads and prints no f80 or f128 value: a scalar or `dense<...>` literal of those types
  was an internal NotImplementedError (hexadecimal, dense) or a printer failure named as the
  target's ("cannot print this IR ()"); it is a located error (`WIDE_FLOATS_UNREAD`).
- A scalar float attribute written as a decimal integer (`arith.constant 3 : f32`) was read
  as 3.0, and one in hexadecimal with a minus (`-0x40400000 : f32`) as the integer negated,
  -1.08e9, where mlir-opt refuses both, as it refuses the dense literal's
  (`_refuse_decimal_float_scalars`).
- `struct` refuses an f16 or f32 value past the type's range, which a dense literal's elements
  met (`dense<1.0e39> : tensor<2xf32>`: an internal OverflowError; a scalar's rounds to inf):
  they round to inf (`_rounding_past_range`), as mlir-opt's and IEEE's nearest rounding do.
- The `llvm` target (`xfuse-opt -t llvm`, `prepare_llvm_target`) lists an op's fast-math flags
  in the order of a frozenset of strings, which the process's string hash decides, and prints
  f16 and f32 constants through llvmlite, which rounds them through `struct`: every f16 NaN
  constant became `half 0x7FF8000000000000` (`0x7E00`) and a signalling f32 one quiet; their
  sign and payload are kept, as mlir-translate keeps them.
- A fused location's metadata (`loc(fused<"tag">[...])`, as mlir-opt prints it and xDSL prints
  it back) did not parse ("'[' expected"), and a location's range (`loc("f":9:9 to :12)`, which
  xDSL has no attribute for) was "')' expected" (`_read_fused_locations_metadata`).
- The lexer's error for a `#`, `%`, `^` or `!` that no name follows printed its placeholder,
  "Expected suffix identifier after {first_char}" (a `#` comment, or an `.ew` file read as MLIR:
  `xfuse-opt gelu.ew -f mlir`); it names the character (`_name_the_prefix_character`).
- `linalg.generic` reads its results with `parse_attribute`, which takes `(` for a function
  type: several results as xDSL itself prints them and MLIR writes them, `-> (t1, t2)` (an
  `ew-to-linalg` kernel of two outputs), did not parse back ("Expected '->'")
  (`_read_generic_results`).
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from xdsl.dialects import arith, llvm, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    ComplexType,
    FileLineColLoc,
    Float16Type,
    Float32Type,
    Float80Type,
    Float128Type,
    FloatAttr,
    FusedLoc,
    IntegerAttr,
    NoneAttr,
    ShapedType,
)
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Attribute, Operation, Region
from xdsl.parser import Parser
from xdsl.parser.attribute_parser import AttrParser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Position, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, StringLiteral
from xdsl.utils.type import get_element_type_or_self

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
"""A double-quoted string literal, its escapes `\\n`, `\\t`, `\\\\`, `\\"` and two hex digits."""


def _verify_float_cast(op: arith.ExtFOp | arith.TruncFOp) -> None:
    """`arith.extf` widens its operand's floats, `arith.truncf` narrows them, of one shape
    (mlir-opt's `SameOperandsAndResultShape`: `vector<4xf16> to f32` passed)."""
    source_type, result_type = op.input.type, op.result.type
    shaped = [isinstance(type_, ShapedType) for type_ in (source_type, result_type)]
    if any(shaped) and (
        type(source_type) is not type(result_type)
        or cast(ShapedType, source_type).get_shape() != cast(ShapedType, result_type).get_shape()
    ):
        raise VerifyException("requires the same shape for all operands and results")
    source, target = (
        cast(AnyFloat, get_element_type_or_self(value.type)) for value in (op.input, op.result)
    )
    widens = target.bitwidth > source.bitwidth
    if widens != isinstance(op, arith.ExtFOp) or target.bitwidth == source.bitwidth:
        raise VerifyException(
            f"operand type '{op.input.type}' and result type '{op.result.type}' are cast "
            "incompatible"
        )


def _verify_predicate(op: Operation, count: int) -> None:
    """A comparison's predicate is one of its `count` (xDSL indexed its table with it: 10 was
    an IndexError, -1 the last predicate)."""
    attribute = op.properties.get("predicate")
    if not isinstance(attribute, IntegerAttr):
        return  # (none, or no integer: the op's IRDL constraints say so, after this)
    predicate = attribute.value.data
    if not 0 <= predicate < count:
        raise VerifyException(
            f"predicate {predicate} is none of the op's {count} comparisons (0 to {count - 1})"
        )


def _verify_also(
    op_type: type[Operation],
    before: Callable[[Any], None] | None = None,
    after: Callable[[Any], None] | None = None,
) -> None:
    """`op_type`'s verifier (its IRDL constraints and own checks), with `before` and `after`
    checks, and its bare `Exception`s raised as the `VerifyException`s they are (xDSL's
    `memref.load` with too few indices, `scf.while`'s block arguments: internal errors)."""
    verify = op_type.verify_
    if getattr(verify, "patched", False):
        return

    def verify_(op: Operation) -> None:
        if before is not None:
            before(op)
        try:
            verify(op)
        except Exception as error:  # noqa: BLE001 (xDSL's verifiers raise these as their own)
            if type(error) is not Exception:  # (a VerifyException, or another error's own)
                raise
            raise VerifyException(str(error)) from None
        if after is not None:
            after(op)

    verify_.patched = True  # type: ignore[attr-defined]
    op_type.verify_ = verify_  # type: ignore[method-assign]


def _float_of_hex_bits(
    element: AttrParser._TensorLiteralElement, parser: AttrParser, element_type: AnyFloat
) -> float | None:
    """A dense literal's element written in hexadecimal, read as the bits of `element_type`
    (MLIR's rule, and xDSL's for a scalar attribute); None for any other element."""
    text = element.span.text
    if not text.lstrip("-").lower().startswith("0x") or not isinstance(element.value, int):
        return None
    if element.is_negative:
        parser.raise_error(
            "hexadecimal float literal should not have a leading minus", at_position=element.span
        )
    if element.value.bit_length() > element_type.bitwidth:
        parser.raise_error(
            "hexadecimal float constant out of range for type", at_position=element.span
        )
    raw = element.value.to_bytes(element_type.compile_time_size, "little")
    return cast(float, next(element_type.iter_unpack(raw)))


@dataclass(frozen=True)
class NanLayout:
    """Where a float type's NaN keeps its bits, and where an f64's holds the same payload."""

    width: int
    """Bytes."""
    exponent: int
    """The exponent field's bits (all ones in a NaN)."""
    shift: int
    """How far the type's fraction sits below an f64's."""

    def value(self, bits: int) -> float | None:
        """The pattern `bits` as a Python float with its NaN's sign and payload bits where it is
        a NaN (signalling too: 0x7F800001 as f32 is the f64 0x7FF0000020000000), else None."""
        sign = 1 << (8 * self.width - 1)
        fraction = bits & (sign - 1) & ~self.exponent
        if bits & self.exponent != self.exponent or not fraction:
            return None
        double = (bits & sign) << (64 - 8 * self.width) | 0x7FF << 52 | fraction << self.shift
        return cast(float, struct.unpack("<d", double.to_bytes(8, "little"))[0])

    def bits(self, value: float) -> int:
        """The pattern of the NaN `value`: its sign and its payload's top bits (1 if they are
        all 0, so that it stays a NaN)."""
        double = int.from_bytes(struct.pack("<d", value), "little")
        fraction = (double & ((1 << 52) - 1)) >> self.shift
        return (double >> 63) << (8 * self.width - 1) | self.exponent | (fraction or 1)


NAN_LAYOUTS = {
    "f16": NanLayout(2, 0x7C00, 42),
    "bf16": NanLayout(2, 0x7F80, 45),
    "f32": NanLayout(4, 0x7F800000, 29),
}


def _keep_nan_payloads() -> None:
    """`Float16Type`'s, `BFloat16Type`'s and `Float32Type`'s packing and unpacking with a NaN's
    sign and payload bits kept (`struct`'s `e` format made every f16 NaN `0x7e00`, bf16's
    encoder and the `f` format through a C double quieted a signalling one), other values as
    before."""
    for float_type in (Float16Type, BFloat16Type, Float32Type):
        if not getattr(float_type.pack, "keeps_payloads", False):
            _keep_payloads(float_type, NAN_LAYOUTS[float_type.name])


def _keep_payloads(
    float_type: type[Float16Type | BFloat16Type | Float32Type], layout: NanLayout
) -> None:
    pack, unpack = float_type.pack, float_type.unpack
    width = layout.width

    def pack_keeping_payloads(self: Any, values: Sequence[float]) -> bytes:
        if not any(math.isnan(value) for value in values):
            return pack(self, values)
        return b"".join(
            layout.bits(value).to_bytes(width, "little")
            if math.isnan(value)
            else pack(self, (value,))
            for value in values
        )

    def unpack_keeping_payloads(
        self: Any, buffer: ReadableBuffer, num: int, /
    ) -> tuple[float, ...]:
        values = unpack(self, buffer, num)
        if not any(math.isnan(value) for value in values):
            return values
        raw = bytes(memoryview(buffer))
        patterns = [
            int.from_bytes(raw[i : i + width], "little") for i in range(0, width * num, width)
        ]
        return tuple(
            value if not math.isnan(value) else cast(float, layout.value(bits))
            for value, bits in zip(values, patterns, strict=True)
        )

    def iter_unpack_keeping_payloads(self: Any, buffer: ReadableBuffer, /) -> Iterator[float]:
        return iter(unpack_keeping_payloads(self, buffer, memoryview(buffer).nbytes // width))

    def pack_into_keeping_payloads(
        self: Any, buffer: WriteableBuffer, offset: int, value: float
    ) -> None:
        memoryview(buffer)[offset : offset + width] = pack_keeping_payloads(self, (value,))

    pack_keeping_payloads.keeps_payloads = True  # type: ignore[attr-defined]
    float_type.pack = pack_keeping_payloads  # type: ignore[method-assign]
    float_type.unpack = unpack_keeping_payloads  # type: ignore[method-assign]
    float_type.iter_unpack = iter_unpack_keeping_payloads  # type: ignore[method-assign]
    float_type.pack_into = pack_into_keeping_payloads  # type: ignore[method-assign]


def _rounding_past_range(float_type: type[Float16Type | Float32Type]) -> None:
    """`float_type`'s `pack` and `pack_into` rounding a value past its range to inf (`struct`
    raises OverflowError exactly where the nearest rounding is inf)."""
    pack, pack_into = float_type.pack, float_type.pack_into
    if getattr(pack, "rounds_past_range", False):
        return

    def inf_past_range(value: float) -> float:
        try:
            pack_into(float_type(), bytearray(8), 0, value)
        except OverflowError:
            return math.copysign(math.inf, value)
        return value

    def pack_rounding(self: Any, values: Sequence[float]) -> bytes:
        try:
            return pack(self, values)
        except OverflowError:
            return pack(self, [inf_past_range(value) for value in values])

    def pack_into_rounding(self: Any, buffer: WriteableBuffer, offset: int, value: float) -> None:
        pack_into(self, buffer, offset, inf_past_range(value))

    pack_rounding.rounds_past_range = True  # type: ignore[attr-defined]
    float_type.pack = pack_rounding  # type: ignore[method-assign]
    float_type.pack_into = pack_into_rounding  # type: ignore[method-assign]


DECIMAL_INTEGER = re.compile(r"-?\s*[0-9]+(?![0-9.xX])")
"""An MLIR integer literal in decimal (a float literal has a `.`, a hexadecimal one `0x`)."""

NEGATIVE_HEXADECIMAL = re.compile(r"-\s*0[xX]")
"""A minus before a hexadecimal literal, which MLIR refuses for a float's bits."""


WIDE_FLOATS_UNREAD = (
    "an f80 or f128 value: xDSL reads and prints none (xfuse computes in f16, bf16, f32 and f64)"
)


def _refuse_decimal_float_scalars() -> None:
    parse = AttrParser.parse_optional_builtin_int_or_float_attr
    if getattr(parse, "refuses_decimal_floats", False):
        return

    def parse_refusing_decimal_floats(self: AttrParser) -> Any:
        span = self._current_token.span
        try:
            attribute = parse(self)
        except NotImplementedError:  # (a hexadecimal f80 or f128 literal: they have no format)
            self.raise_error(WIDE_FLOATS_UNREAD, at_position=span)
        if not isinstance(attribute, FloatAttr):
            return attribute
        if isinstance(attribute.type, Float80Type | Float128Type):  # (its printer would fail)
            self.raise_error(WIDE_FLOATS_UNREAD, at_position=span)
        if DECIMAL_INTEGER.match(span.input.content, span.start):
            self.raise_error(
                "unexpected decimal integer literal for a floating point value (add a trailing "
                "dot to make the literal a float)",
                at_position=span,
            )
        if NEGATIVE_HEXADECIMAL.match(span.input.content, span.start):  # (read as an integer)
            self.raise_error(
                "hexadecimal float literal should not have a leading minus", at_position=span
            )
        return attribute

    parse_refusing_decimal_floats.refuses_decimal_floats = True  # type: ignore[attr-defined]
    AttrParser.parse_optional_builtin_int_or_float_attr = (  # type: ignore[method-assign]
        parse_refusing_decimal_floats
    )


def _refuse_wide_float_dense_literals() -> None:
    """A `dense<...>` literal of f80 or f128 elements refused where it is (xDSL packs them by a
    `format` they do not have: a NotImplementedError, an internal error of `xfuse-opt`), as a
    scalar of those types is (`WIDE_FLOATS_UNREAD`)."""
    parse = AttrParser.parse_dense_int_or_fp_elements_attr
    if getattr(parse, "refuses_wide_floats", False):
        return

    def parse_refusing_wide_floats(self: AttrParser, *args: Any) -> Any:
        span = self._current_token.span
        try:
            return parse(self, *args)
        except NotImplementedError:
            self.raise_error(WIDE_FLOATS_UNREAD, at_position=span)

    parse_refusing_wide_floats.refuses_wide_floats = True  # type: ignore[attr-defined]
    AttrParser.parse_dense_int_or_fp_elements_attr = (  # type: ignore[method-assign]
        parse_refusing_wide_floats
    )


def _read_fused_locations_metadata() -> None:
    """A fused location's metadata read (`loc(fused<"tag">["a":1:2, "b":3:4])`, as mlir-opt
    prints it and xDSL's `FusedLoc` prints it back: "'[' expected"), and a file location's range
    (`loc("f":9:9 to :12)`, which xDSL has no attribute for: "')' expected") refused by name."""
    parse_location = AttrParser._parse_location
    if getattr(parse_location, "reads_fused_metadata", False):
        return

    def parse_location_reading_metadata(self: AttrParser) -> Any:
        if self.parse_optional_keyword("fused") is not None:
            metadata: Attribute = NoneAttr()
            if self.parse_optional_punctuation("<") is not None:
                metadata = self.parse_attribute()
                self.parse_punctuation(">")
            locations = self.parse_comma_separated_list(
                self.Delimiter.SQUARE, lambda: parse_location_reading_metadata(self)
            )
            return FusedLoc(tuple(locations), metadata)
        location = parse_location(self)
        if isinstance(location, FileLineColLoc) and self._current_token.text == "to":
            self.raise_error(
                "a location's range (`to ...`): xDSL has no range location, give its start "
                f'(loc("{location.filename.data}":{location.line.data}:{location.column.data}))'
            )
        return location

    parse_location_reading_metadata.reads_fused_metadata = True  # type: ignore[attr-defined]
    AttrParser._parse_location = parse_location_reading_metadata  # type: ignore[method-assign]


def _read_generic_results() -> None:
    """Make `linalg.generic` read its results, `-> t` or `-> (t1, t2)`, itself, right after
    its body (in `parse_region`, replaced for this op's own body alone: a nested op's regions
    are read as they were), so that xDSL's parse finds no `->` after it; the op is then made
    again with those result types."""
    parse = GenericOp.parse.__func__
    if getattr(parse, "reads_parenthesized_results", False):
        return

    def parse_reading_results(cls: type[GenericOp], parser: Parser) -> GenericOp:
        results: list[Attribute] = []

        def put_back() -> None:  # the class's `parse_region` again
            vars(parser).pop("parse_region", None)

        def body_then_results(*arguments: Any, **options: Any) -> Region:
            put_back()  # (before the body, whose ops may be generics too)
            body = Parser.parse_region(parser, *arguments, **options)
            if parser.parse_optional_punctuation("->"):  # (as xDSL reads a function's results)
                types = parser.parse_optional_comma_separated_list(
                    Parser.Delimiter.PAREN, parser.parse_type
                )
                if types is None:  # `-> t`, or xDSL's own `-> t1, t2`
                    types = parser.parse_comma_separated_list(
                        Parser.Delimiter.NONE, parser.parse_type
                    )
                results.extend(types)
            return body

        parser.parse_region = body_then_results  # type: ignore[method-assign]
        try:
            generic = parse(cls, parser)
        finally:
            put_back()
        if not results:
            return generic
        remade = cls.create(
            operands=list(generic.operands),
            result_types=results,
            properties=dict(generic.properties),
            attributes=dict(generic.attributes),
            regions=[generic.detach_region(generic.body)],
        )
        generic.erase()
        return remade

    parse_reading_results.reads_parenthesized_results = True  # type: ignore[attr-defined]
    GenericOp.parse = classmethod(parse_reading_results)  # type: ignore[method-assign,assignment]


def _name_the_prefix_character() -> None:
    lex_prefixed_ident = MLIRLexer._lex_prefixed_ident
    if getattr(lex_prefixed_ident, "names_the_prefix", False):
        return

    def lex_naming_the_prefix(self: MLIRLexer, start_pos: Position) -> MLIRToken:
        try:
            return lex_prefixed_ident(self, start_pos)
        except ParseError as error:
            if "{first_char}" not in error.msg:
                raise
            prefix = self.input.at(start_pos)
            raise ParseError(error.span, f"Expected suffix identifier after '{prefix}'") from None

    lex_naming_the_prefix.names_the_prefix = True  # type: ignore[attr-defined]
    MLIRLexer._lex_prefixed_ident = lex_naming_the_prefix  # type: ignore[method-assign]


def apply() -> None:
    _refuse_decimal_float_scalars()
    _refuse_wide_float_dense_literals()
    _read_fused_locations_metadata()
    _read_generic_results()
    _name_the_prefix_character()
    for float_type in (Float16Type, Float32Type):
        _rounding_past_range(float_type)
    _keep_nan_payloads()
    for cast_op in (arith.ExtFOp, arith.TruncFOp):
        _verify_also(cast_op, after=_verify_float_cast)
    for comparison, count in (
        (arith.CmpiOp, len(arith.CMPI_COMPARISON_OPERATIONS)),
        (arith.CmpfOp, len(arith.CMPF_COMPARISON_OPERATIONS)),
        (llvm.ICmpOp, len(llvm.ALL_ICMP_FLAGS)),
        (llvm.FCmpOp, len(llvm.ALL_FCMP_FLAGS)),
    ):
        _verify_also(comparison, before=functools.partial(_verify_predicate, count=count))
    for op_type in (memref.LoadOp, memref.StoreOp, scf.WhileOp):
        _verify_also(op_type)  # (their bare Exceptions as VerifyExceptions)
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL
    element = AttrParser._TensorLiteralElement
    to_type = element.to_type
    if not getattr(to_type, "reads_hex_bits", False):

        def to_type_reading_hex_bits(
            self: AttrParser._TensorLiteralElement, parser: AttrParser, element_type: Any
        ) -> Any:
            if isinstance(element_type, AnyFloat):
                bits = _float_of_hex_bits(self, parser, element_type)
                if bits is not None:
                    return bits
                if type(self.value) is int:  # (MLIR's rule: 100000 was read as f16's inf)
                    parser.raise_error(
                        "unexpected decimal integer literal for a floating point value (add a "
                        "trailing dot to make the literal a float)",
                        at_position=self.span,
                    )
                if isinstance(self.value, bool):  # (`dense<true>`, read as 1.0)
                    parser.raise_error("expected floating point literal", at_position=self.span)
            if isinstance(element_type, ComplexType) and not isinstance(self.value, tuple):
                parser.raise_error(  # (an internal AssertionError)
                    f"expected a complex literal (real, imaginary) for {element_type}",
                    at_position=self.span,
                )
            return to_type(self, parser, element_type)

        to_type_reading_hex_bits.reads_hex_bits = True  # type: ignore[attr-defined]
        element.to_type = to_type_reading_hex_bits  # type: ignore[method-assign]
    lex_string_literal = MLIRLexer._lex_string_literal
    if getattr(lex_string_literal, "reads_utf8", False):
        return

    def lex_utf8_string_literal(self: MLIRLexer, start_pos: Position) -> MLIRToken:
        token = lex_string_literal(self, start_pos)
        if token.kind is MLIRTokenKind.BYTES_LIT:
            try:
                StringLiteral.from_span(token.span).bytes_contents.decode()
            except UnicodeDecodeError:
                return token
            return Token(MLIRTokenKind.STRING_LIT, token.span)
        return token

    lex_utf8_string_literal.reads_utf8 = True  # type: ignore[attr-defined]
    MLIRLexer._lex_string_literal = lex_utf8_string_literal  # type: ignore[method-assign]


def prepare_llvm_target() -> None:
    """The `llvm` target's fixes (`_sort_llvm_flags`, `keep_llvm_nan_payloads`). They load
    xDSL's LLVM backend and llvmlite, so only the command that prints with it applies them."""
    _sort_llvm_flags()
    keep_llvm_nan_payloads()


def keep_llvm_nan_payloads() -> None:
    """llvmlite's f16 and f32 constants with a NaN's sign and payload bits: LLVM IR writes them
    as the double of the same value, where the payload sits higher (`NAN_LAYOUTS`), and LLVM
    reads a NaN's payload back from it, a signalling one too; llvmlite rounded the value through
    `struct` first, which made every f16 NaN 0x7E00 and quieted a signalling f32 one."""
    from llvmlite.ir import types

    for llvm_type, name in ((types.HalfType, "f16"), (types.FloatType, "f32")):
        if not getattr(llvm_type.format_constant, "keeps_payloads", False):
            _format_keeping_payloads(llvm_type, NAN_LAYOUTS[name])


def _format_keeping_payloads(llvm_type: Any, layout: NanLayout) -> None:
    from llvmlite.ir import types

    format_constant = llvm_type.format_constant

    def format_keeping_payloads(self: Any, value: object) -> str:
        if not isinstance(value, float) or not math.isnan(value):
            return cast(str, format_constant(self, value))
        return cast(str, types._format_double(layout.value(layout.bits(value))))

    format_keeping_payloads.keeps_payloads = True  # type: ignore[attr-defined]
    llvm_type.format_constant = format_keeping_payloads


def _sort_llvm_flags() -> None:
    """Make the `llvm` target print each instruction's flags in LLVM's order (`reassoc nnan ninf
    nsz arcp contract afn`, as `mlir-translate` prints them): `xfuse-opt -t llvm` printed `fmul
    afn contract` in one process and `fmul contract afn` in another."""
    from xdsl.backend.llvm import convert
    from xdsl.dialects import llvm

    converted = convert.convert_module
    if getattr(converted, "sorts_flags", False):
        return
    order = {flag.value: index for index, flag in enumerate(llvm.FastMathFlag)}

    def convert_module(*args: Any, **kwargs: Any) -> Any:
        module = converted(*args, **kwargs)
        for function in module.functions:
            for block in function.blocks:
                for instruction in block.instructions:
                    instruction.flags.sort(key=lambda flag: order.get(flag, len(order)))
        return module

    convert_module.sorts_flags = True  # type: ignore[attr-defined]
    convert.convert_module = convert_module
