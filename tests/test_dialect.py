"""The `ew` dialect: custom and generic round-trips, verifiers, broadcasting, the Python API."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, test
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Builtin,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from xfuse.dialects import ew
from xfuse.dialects.dtypes import element_type_for, numpy_dtype
from xfuse.frontend.language import parse_program

DIALECT_TESTS = Path(__file__).resolve().parents[1] / "filecheck" / "dialect"
DYN = DYNAMIC_INDEX
DTYPES = ("float16", "bfloat16", "float32", "float64")


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, func.Func, arith.Arith, math_dialect.Math, memref.MemRef, ew.Ew):
        ctx.load_dialect(dialect)
    return ctx


def parse(text: str) -> ModuleOp:
    return Parser(context(), text).parse_module()


def print_ir(module: ModuleOp, generic: bool = False) -> str:
    stream = StringIO()
    Printer(stream=stream, print_generic_format=generic).print_op(module)
    return stream.getvalue()


def tensor(element: Attribute, *shape: int) -> TensorType[Attribute]:
    return TensorType(element, shape)


def function_module(
    arg_types: list[Attribute], build: Callable[[Block], list[Operation]]
) -> ModuleOp:
    """`func.func @f(args)` running the ops `build(block)` makes and returning the last one's."""
    block = Block(arg_types=arg_types)
    ops = build(block)
    block.add_ops(ops)
    result = ops[-1].results[0]
    block.add_op(func.ReturnOp(result))
    return ModuleOp([func.FuncOp("f", (arg_types, [result.type]), Region(block))])


def assert_round_trips(module: ModuleOp) -> None:
    """custom -> parse -> custom, generic -> parse -> generic/custom, all equal and verifying."""
    module.verify()
    custom = print_ir(module)
    generic = print_ir(module, generic=True)
    from_custom = parse(custom)
    from_generic = parse(generic)
    from_custom.verify()
    from_generic.verify()
    assert print_ir(from_custom) == custom
    assert print_ir(from_generic) == custom
    assert print_ir(from_generic, generic=True) == generic
    assert from_custom.is_structurally_equivalent(module)
    assert from_generic.is_structurally_equivalent(module)


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["roundtrip.mlir", "generic.mlir"])
def test_filecheck_inputs_round_trip(name: str) -> None:
    assert_round_trips(parse((DIALECT_TESTS / name).read_text()))


def test_round_trip_file_covers_every_op() -> None:
    """Adding an op to the dialect without a round-trip test fails here."""
    text = (DIALECT_TESTS / "roundtrip.mlir").read_text()
    for op_type in ew.Ew.operations:
        assert re.search(rf"\b{re.escape(op_type.name)}\b", text), (
            f"{op_type.name} is not in filecheck/dialect/roundtrip.mlir: add a line using it"
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op_type", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_each_elementwise_op_round_trips(op_type: ew.ElementwiseOpType, dtype: str) -> None:
    element = element_type_for(dtype)
    x_type = tensor(element, 4, DYN)

    def build(block: Block) -> list[Operation]:
        x = block.args[0]
        if issubclass(op_type, ew.UnaryOp):
            return [op_type(x)]
        scale = ew.ConstantOp(0.5, tensor(element))
        operands = [scale.result, x, x][: ew.arity(op_type)]
        return [scale, op_type(*operands)]  # rank 0 broadcast against 4x?

    module = function_module([x_type], build)
    op = next(o for o in module.walk() if isinstance(o, op_type))
    assert op.result.type == x_type
    assert_round_trips(module)


def test_ew_ops_print_a_tensor_type_once_not_at_each_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """A binary op prints 1-3 types: re-printing each was most of the cost of printing a 10^4-op
    program (the compile caches' key), so the ew ops print a plain tensor type's text once."""
    printed: list[TensorType[Attribute]] = []
    print_builtin = TensorType.print_builtin

    def counting(self: TensorType[Attribute], printer: Printer) -> None:
        printed.append(self)
        print_builtin(self, printer)

    monkeypatch.setattr(TensorType, "print_builtin", counting)
    f32 = Float32Type()

    def build(block: Block) -> list[Operation]:
        ops: list[Operation] = [ew.ConstantOp(0.5, tensor(f32))]
        for _ in range(100):
            ops += [ew.MulOp(ops[-1].results[0], block.args[0]), ew.NegOp(block.args[0])]
        return ops

    module = function_module([tensor(f32, 4, DYN)], build)
    assert print_ir(module).count("tensor<4x?xf32>") > 200
    assert len(printed) <= 4  # once per distinct type, and the function's signature


def test_tensor_type_with_an_encoding_prints_as_xdsl_prints_it() -> None:
    module = parse(
        'func.func @f(%x: tensor<4xf32, "enc">) -> tensor<4xf32, "enc"> {\n'
        '  %c = ew.constant 0.5 : tensor<f32, "enc">\n'
        '  %y = ew.mul %x, %c : tensor<4xf32, "enc">, tensor<f32, "enc"> -> tensor<4xf32, "enc">\n'
        '  %z = ew.neg %y : tensor<4xf32, "enc">\n'
        '  func.return %z : tensor<4xf32, "enc">\n'
        "}"
    )
    assert_round_trips(module)
    assert 'ew.mul %x, %c : tensor<4xf32, "enc">, tensor<f32, "enc"> -> tensor' in print_ir(module)


@pytest.mark.parametrize("op_type", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_each_op_is_pure_documented_and_named(op_type: ew.ElementwiseOpType) -> None:
    assert op_type.has_trait(Pure())
    assert op_type.__doc__ is not None and op_type.name in op_type.__doc__
    assert ew.OPS_BY_MNEMONIC[ew.mnemonic(op_type)] is op_type
    assert op_type in ew.Ew.operations


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _from_bits(bits: int) -> float:
    return struct.unpack("<d", bits.to_bytes(8, "little"))[0]


FLOAT_CLASSES = {
    "+0": 0.0,
    "-0": -0.0,
    "+inf": math.inf,
    "-inf": -math.inf,
    "canonical nan": math.nan,
    "negative quiet nan": _from_bits(0xFFF8000000000000),
    "nan with payload": _from_bits(0x7FF8DEADBEEF0001),
    "negative nan with payload": _from_bits(0xFFFC000000000042),
    "signaling nan": _from_bits(0x7FF0000000000001),
    "negative signaling nan": _from_bits(0xFFF4000000000000),
    "f32 nan widened": _from_bits(0x7FFFFFFFE0000000),
    "f64 smallest denormal": 5e-324,
    "f64 largest denormal": _from_bits(0x000FFFFFFFFFFFFF),
    "f64 smallest normal": 2.2250738585072014e-308,
    "f64 max": 1.7976931348623157e308,
    "-f64 max": -1.7976931348623157e308,
    "f32 smallest denormal": 2.0**-149,
    "f32 smallest normal": 2.0**-126,
    "f32 max": 3.4028234663852886e38,
    "bf16 smallest denormal": 2.0**-133,
    "bf16 max": 3.3895313892515355e38,
    "f16 smallest denormal": 2.0**-24,
    "f16 smallest normal": 2.0**-14,
    "f16 max": 65504.0,
    "-f16 max": -65504.0,
    "-1e-300": -1e-300,
    "0.1": 0.1,
    "0.7978845608": 0.7978845608,
    "f32 0.1": float(np.float32(0.1)),
    "-2.5": -2.5,
    "123456789": 123456789.0,
    "1e22": 1e22,
    "3.4e38": 3.4e38,
}


@pytest.mark.parametrize("value", FLOAT_CLASSES.values(), ids=FLOAT_CLASSES.keys())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_constant_keeps_its_exact_f64_bits(value: float, dtype: str, generic: bool) -> None:
    """print -> parse -> print keeps every bit: signed zeros, infinities, every NaN, extremes."""
    constant = ew.ConstantOp(value, tensor(element_type_for(dtype)))
    module = function_module([], lambda block: [constant])
    text = print_ir(module, generic=generic)
    (parsed,) = [op for op in parse(text).walk() if isinstance(op, ew.ConstantOp)]
    assert _bits(parsed.literal) == _bits(value), text
    assert parsed.result.type == constant.result.type
    assert_round_trips(module)


@pytest.mark.parametrize(
    "value,text",
    [
        (math.nan, "nan"),
        (_from_bits(0xFFF8000000000000), "0xFFF8000000000000"),
        (_from_bits(0x7FF0000000000001), "0x7FF0000000000001"),
        (-0.0, "-0.0"),
        (-math.inf, "-inf"),
        (5e-324, "5.0e-324"),
    ],
)
def test_format_float_spells_nans_in_mlir_hex(value: float, text: str) -> None:
    assert ew.format_float(value) == text


def test_hex_constants_parse_as_f64_bits() -> None:
    module = parse("%c = ew.constant 0x0000000000000001 : tensor<f32>")
    (constant,) = [op for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert constant.literal == 5e-324
    for bad, problem in [
        ("-0x0000000000000001", "a sign"),
        ("0x10000000000000000", "17 digits"),
        # MLIR's f32 NaN, which as f64 bits was taken for the denormal 1.06e-314
        ("0x7FC00000", "8 digits"),
        ("0x1", "1 digit"),
    ]:
        with pytest.raises(
            ParseError, match=f"hexadecimal float must be the 64 bits of an f64, .*not {problem}$"
        ):
            parse(f"%c = ew.constant {bad} : tensor<f32>")


@pytest.mark.parametrize(
    ("literal", "dtype", "bits"),
    [
        ("dense<0x7F800000> : tensor<f32>", "<u4", [0x7F800000]),
        (
            "dense<[0xFF800000, 0x7FC00001, 1.0]> : tensor<3xf32>",
            "<u4",
            [0xFF800000, 0x7FC00001, 0x3F800000],
        ),
        ("dense<[0xFC00, -0.0]> : tensor<2xf16>", "<u2", [0xFC00, 0x8000]),
        ("dense<0x7FF8000000000000> : vector<2xf64>", "<u8", [0x7FF8000000000000] * 2),
    ],
)
def test_a_dense_literals_hex_elements_are_bits(literal: str, dtype: str, bits: list[int]) -> None:
    """As in a scalar `arith.constant 0x7F800000 : f32` and in MLIR: xDSL read them as integers
    made floats (`dense<0xff800000>`, `ew-to-linalg`'s -inf, read back as 4.28e9)."""
    module = parse(f"%c = arith.constant {literal}")
    (constant,) = [op for op in module.walk() if isinstance(op, arith.ConstantOp)]
    data = constant.value.data.data  # type: ignore[union-attr]
    assert np.frombuffer(data, dtype).tolist() == bits
    assert print_ir(parse(print_ir(module))) == print_ir(module)
    for bad, problem in [("-0x7F800000", "leading minus"), ("0x1FF800000", "out of range")]:
        with pytest.raises(ParseError, match=problem):
            parse(f"%c = arith.constant dense<[{bad}, 1.0]> : tensor<2xf32>")


@pytest.mark.parametrize(
    ("literal", "bits"),
    [
        ("0x7E01 : f16", [0x7E01]),
        ("dense<[0x7E01, 0xFD03, 0x7C01, 1.0]> : tensor<4xf16>", [0x7E01, 0xFD03, 0x7C01, 0x3C00]),
        ("dense<[0x7F81, 0xFFC3, 0x7FC1]> : tensor<3xbf16>", [0x7F81, 0xFFC3, 0x7FC1]),
        ("0x7F800001 : f32", [0x7F800001]),
        (
            "dense<[0x7FA00001, 0xFF800001, 0x7FC12345]> : tensor<3xf32>",
            [0x7FA00001, 0xFF800001, 0x7FC12345],
        ),
    ],
)
def test_a_nans_sign_and_payload_round_trip(literal: str, bits: list[int]) -> None:
    """As mlir-opt keeps them: `struct`'s f16 made every NaN 0x7e00, and bf16's encoder and
    f32's `f` format (through a C double) quieted a signalling NaN (0x7F81 printed as 0x7fc1,
    0x7F800001 as 0x7fc00001)."""
    module = parse(f"%c = arith.constant {literal}")
    again = parse(print_ir(module))
    assert print_ir(again) == print_ir(module)
    (constant,) = [op for op in again.walk() if isinstance(op, arith.ConstantOp)]
    value = constant.value
    scalar = isinstance(value, FloatAttr)
    raw = value.type.pack((value.value.data,)) if scalar else value.data.data  # type: ignore[union-attr]
    element = value.type if scalar else value.type.element_type  # type: ignore[union-attr]
    assert np.frombuffer(raw, f"<u{element.compile_time_size}").tolist() == bits


@pytest.mark.parametrize(
    "literal",
    [
        "1.0 : f80",
        "0x7FFF8000000000000001 : f80",
        "1.0e-4940 : f128",
        "dense<[1.0, 2.0]> : tensor<2xf80>",
        "dense<0x7FFF8000000000000001> : tensor<2xf128>",
    ],
)
def test_an_f80_or_f128_value_is_a_located_error(literal: str) -> None:
    """xDSL packs and prints f80 and f128 numbers by a `format` they lack: a hexadecimal or
    dense literal was an internal NotImplementedError, a decimal one failed in the printer."""
    with pytest.raises(ParseError, match=r"1:2[16][\s\S]*an f80 or f128 value: xDSL reads"):
        parse(f"%c = arith.constant {literal}")
    assert "f80" in print_ir(parse("func.func @f(%a: f80) -> f80 {\n  func.return %a : f80\n}"))


def test_a_dense_literal_past_its_types_range_rounds_to_inf() -> None:
    """As mlir-opt's and a scalar's: `struct` raised OverflowError (an internal error)."""
    module = parse(
        "%a = arith.constant dense<[65520.0, -1.0e5, 65519.0]> : tensor<3xf16>\n"
        "%b = arith.constant dense<1.0e39> : tensor<2xf32>"
    )
    half, single = [op.value.data.data for op in module.walk() if isinstance(op, arith.ConstantOp)]
    assert np.frombuffer(half, "<u2").tolist() == [0x7C00, 0xFC00, 0x7BFF]
    assert np.frombuffer(single, "<u4").tolist() == [0x7F800000] * 2


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("dense<100000> : tensor<2xf16>", "unexpected decimal integer literal for a floating"),
        ("dense<[1, 2.0]> : tensor<2xf32>", "unexpected decimal integer literal for a floating"),
        ("dense<[true, false]> : tensor<2xf32>", "expected floating point literal"),
        ("dense<1.0> : tensor<2xcomplex<f32>>", r"expected a complex literal \(real, imaginary\)"),
        ("3 : f32", "unexpected decimal integer literal for a floating"),  # (scalars too)
        ("-3 : bf16", "unexpected decimal integer literal for a floating"),
        ("-0x40400000 : f32", "hexadecimal float literal should not have a leading minus"),
    ],
)
def test_a_dense_literal_mlir_refuses_is_a_parse_error(literal: str, message: str) -> None:
    """As mlir-opt's: a decimal integer was read as a float (f16's 100000 as inf, a scalar `3 :
    f32` as 3.0), a scalar's negative hexadecimal bits as an integer (-1.08e9), and a real
    element of a complex type failed an assertion (an internal error)."""
    with pytest.raises(ParseError, match=message):
        parse(f"%c = arith.constant {literal}")


@pytest.mark.parametrize("text", ["--1.0", "- -0.0", "- -inf"])
def test_a_constant_has_one_sign(text: str) -> None:
    """`--1.0` was read as 1.0 (a sign, then a number with its own), where mlir-opt rejects it."""
    with pytest.raises(ParseError, match="expected a number after '-'"):
        parse(f"%c = ew.constant {text} : tensor<f32>")


def test_constant_keeps_its_discardable_attributes() -> None:
    """The custom form dropped them (and its parser rejected an attr-dict)."""
    generic = '"ew.constant"() <{value = 1.0 : f64}> {foo = 1 : i64} : () -> tensor<f32>'
    custom = "ew.constant 1.0 {foo = 1 : i64} : tensor<f32>"
    for text in (generic, custom):
        module = parse(text)
        (constant,) = [op for op in module.walk() if isinstance(op, ew.ConstantOp)]
        assert constant.attributes["foo"] == IntegerAttr(1, 64)
        assert f"%0 = {custom}" in print_ir(module)
        assert_round_trips(module)


@pytest.mark.parametrize("sign", ["", "-"])
def test_integer_constants_past_f64_are_infinite(sign: str) -> None:
    """As the decimal `1.0e400` and the frontend's `1e400`: inf (was `internal error:
    OverflowError: int too large to convert to float`)."""
    module = parse(f"%c = ew.constant {sign}1{'0' * 400} : tensor<f32>")
    (constant,) = [op for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert constant.literal == float(f"{sign}inf")
    (from_source,) = [
        op for op in parse_program(f"y = x + {sign}1e400;").walk() if isinstance(op, ew.ConstantOp)
    ]
    assert from_source.literal == constant.literal


def test_kernel_api_on_both_forms() -> None:
    module = parse((DIALECT_TESTS / "roundtrip.mlir").read_text())
    kernels = {
        op.parent_op().sym_name.data: op for op in module.walk() if isinstance(op, ew.KernelOp)
    }
    on_tensors, on_buffers = kernels["kernel_tensors"], kernels["kernel_buffers"]
    assert not on_tensors.is_bufferized and on_buffers.is_bufferized
    assert list(on_tensors.destinations()) == list(on_tensors.res)
    assert list(on_buffers.destinations()) == list(on_buffers.outputs)
    assert len(on_tensors.block.args) == 2 and len(on_tensors.yield_op.values) == 2
    assert on_buffers.outputs[0] is on_buffers.inputs[1]  # in place
    assert kernels["kernel_no_inputs"].attributes["note"].data == "fill"


# ---------------------------------------------------------------------------------------------
# Verifiers: every case of invalid.mlir fails with the message its CHECK line names
# ---------------------------------------------------------------------------------------------


def _invalid_cases() -> list[tuple[str, str]]:
    cases = []
    for chunk in (DIALECT_TESTS / "invalid.mlir").read_text().split("// -----"):
        # xfuse-opt names the op before xDSL's IRDL messages (`'ew.add' operand 'lhs' ...`).
        check = r"^// CHECK: (?:.*error: )?(?:'[\w.]+' (?=\w+ '|expected ))?(.*)$"
        messages = re.findall(check, chunk, re.M)
        cases.append((chunk, messages[-1]))
    return cases


@pytest.mark.parametrize("chunk,message", _invalid_cases())
def test_invalid_ir_is_rejected(chunk: str, message: str) -> None:
    with pytest.raises((DiagnosticException, ParseError)) as info:
        parse(chunk).verify()
    error = info.value
    assert message in (error.msg if isinstance(error, ParseError) else str(error))


@pytest.mark.parametrize(
    ("cast", "source", "target", "valid"),
    [
        ("extf", "f16", "f32", True),
        ("extf", "bf16", "f64", True),
        ("truncf", "f64", "f16", True),
        ("truncf", "f32", "bf16", True),
        ("extf", "f16", "bf16", False),
        ("extf", "f32", "f32", False),
        ("extf", "f64", "f32", False),
        ("truncf", "bf16", "f16", False),
        ("truncf", "f32", "f64", False),
    ],
)
def test_float_casts_widen_or_narrow_as_mlir_verifies_them(
    cast: str, source: str, target: str, valid: bool
) -> None:
    """xDSL checked no widths: `arith.extf %a : f16 to bf16` failed in ew-to-llvm as an internal
    KeyError, `truncf f32 to f64` as "negative shift count" (mlir-opt: "cast incompatible")."""
    from xfuse.runtime.compiler import compile_module

    text = (
        f"func.func @main(%x: tensor<?x{source}>) -> tensor<?x{target}> {{\n"
        f"  %y = ew.kernel ins(%x : tensor<?x{source}>) -> tensor<?x{target}> {{\n"
        f"  ^bb0(%a: {source}):\n    %b = arith.{cast} %a : {source} to {target}\n"
        f"    ew.yield %b : {target}\n  }}\n  func.return %y : tensor<?x{target}>\n}}\n"
    )
    if valid:
        names = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
        x = np.float32([1.5, -2.25]).astype(numpy_dtype(names[source]))
        result = compile_module(parse(text))(x)
        assert result.dtype == numpy_dtype(names[target])
        np.testing.assert_array_equal(result.astype(np.float64), [1.5, -2.25])
        return
    message = f"operand type '{source}' and result type '{target}' are cast incompatible"
    with pytest.raises(VerifyException, match=re.escape(message)):
        parse(text).verify()


@pytest.mark.parametrize(
    "types",
    ["vector<4xf16> to f32", "vector<4xf16> to vector<8xf32>", "tensor<4xf16> to vector<4xf32>"],
)
def test_float_casts_keep_their_shape(types: str) -> None:
    """As mlir-opt's `SameOperandsAndResultShape`: these passed, and failed in ew-to-llvm."""
    source = types.split(" to ")[0]
    text = f"func.func @f(%a: {source}) {{\n  %r = arith.extf %a : {types}\n  func.return\n}}\n"
    with pytest.raises(VerifyException, match="requires the same shape for all operands and"):
        parse(text).verify()


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ('"arith.extf"(%a) : (i32) -> i64', "operand 'input' at position 0 does not verify"),
        ('"arith.cmpi"(%a, %a) <{predicate = -1 : i64}> : (i32, i32) -> i1', "predicate -1 is"),
        ('"arith.cmpi"(%a, %a) <{predicate = 10 : i64}> : (i32, i32) -> i1', "none of the op's 10"),
        ('"llvm.icmp"(%a, %a) <{predicate = 10 : i64}> : (i32, i32) -> i1', "none of the op's 10"),
        ('"arith.cmpf"(%f, %f) <{predicate = 16 : i64}> : (f32, f32) -> i1', "none of the op's 16"),
        ('"llvm.fcmp"(%f, %f) <{predicate = 99 : i64}> : (f32, f32) -> i1', "predicate 99 is"),
        ('"memref.load"(%m, %i) : (memref<?x?xf32>, index) -> f32', "an index for each dim"),
        # no predicate, or no integer: the IRDL constraints' error (it became a KeyError)
        ('"arith.cmpf"(%f, %f) : (f32, f32) -> i1', "property 'predicate' expected"),
        ('"llvm.icmp"(%a, %a) <{predicate = "x"}> : (i32, i32) -> i1', "should be of base"),
    ],
)
def test_ops_xdsl_verifies_too_little_are_verify_errors(op: str, message: str) -> None:
    """A predicate out of range was an IndexError (or, -1, the last predicate), a load with
    too few indices a bare Exception: internal errors of xfuse-opt and compile_module. The
    extf patch keeps the op's IRDL constraints (replacing `verify_` dropped them)."""
    text = (
        "func.func @f(%a: i32, %f: f32, %m: memref<?x?xf32>, %i: index) {\n"
        f"  %r = {op}\n  func.return\n}}\n"
    )
    from xfuse.runtime.compiler import parse_ir

    with pytest.raises(VerifyException, match=re.escape(message)):
        parse_ir(text).verify()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("%r = math.fma %a, %a, %a : bf16", "'math.fma' on bf16 has no lowering"),
        ("%r = arith.constant 1.5 : bf16", "'arith.constant' on bf16 has no lowering (bf16 is"),
        ("%c = arith.constant 3 : index\n  %r = memref.dim %m, %c : memref<?xf32>", "index 3 of"),
        ("%c = arith.constant -1 : index\n  %r = memref.dim %m, %c : memref<?xf32>", "index -1 of"),
    ],
)
def test_ew_to_llvm_names_what_it_cannot_lower(body: str, message: str) -> None:
    """bf16 fma made an i16 llvm.intr.fma; memref.dim past the rank was an IndexError, and -1
    the last dim's size."""
    from xfuse.dialects.failure import OpFailure
    from xfuse.transforms.pipeline import parse_passes, pipeline_context

    result = "bf16" if "bf16" in body else "index"
    text = (
        f"func.func @f(%a: bf16, %m: memref<?xf32>) -> {result} {{\n  {body}\n"
        f"  func.return %r : {result}\n}}\n"
    )
    (lowering,) = parse_passes("ew-to-llvm")
    with pytest.raises(OpFailure, match=re.escape(message)):
        lowering.apply(pipeline_context(), parse(text))


def test_cmpf_of_a_constant_predicate_lowers() -> None:
    """`arith.cmpf true` (and `false`) was a ValueError in ew-to-llvm: xDSL names them `_true`."""
    from xfuse.runtime.compiler import compile_module

    text = (
        "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %y = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {\n"
        "  ^bb0(%a: f32):\n    %t = arith.cmpf true, %a, %a : f32\n"
        "    %f = arith.cmpf false, %a, %a : f32\n    %one = arith.constant 1.0 : f32\n"
        "    %b = arith.select %t, %a, %one : f32\n    %c = arith.select %f, %one, %b : f32\n"
        "    ew.yield %c : f32\n  }\n  func.return %y : tensor<?xf32>\n}\n"
    )
    x = np.float32([np.nan, 2.0, -0.0])
    np.testing.assert_array_equal(compile_module(parse(text))(x), x)


def test_ew_to_llvm_names_a_vector_cast_it_does_not_lower() -> None:
    """It was an internal KeyError (`FORMATS[VectorType]`)."""
    from xfuse.dialects.failure import OpFailure
    from xfuse.transforms.pipeline import parse_passes, pipeline_context

    text = (
        "func.func @f(%a: vector<4xf16>) -> vector<4xf32> {\n"
        "  %r = arith.extf %a : vector<4xf16> to vector<4xf32>\n"
        "  func.return %r : vector<4xf32>\n}\n"
    )
    (lowering,) = parse_passes("ew-to-llvm")
    with pytest.raises(OpFailure, match=r"^ew-to-llvm: 'arith.extf' of vector<4xf16>: only scalar"):
        lowering.apply(pipeline_context(), parse(text))


@pytest.mark.parametrize(
    "dims", ['["t"]', '["t", "t", "t"]', "[1, 2]", '"t"', '["5", "n"]', '["\u0663", "n"]']
)
def test_an_argument_dims_attribute_not_of_its_type_is_a_verify_error(dims: str) -> None:
    """Hand-written IR: a short `ew.dims` was "zip() argument 2 is longer than argument 1" from
    ew-cost and compile_module, integers an AttributeError, `["5", "n"]` on a dim of 4 a kernel
    signature `float32[5=4, n]`, a string ignored."""
    from xfuse.runtime.compiler import compile_module
    from xfuse.transforms.pipeline import only_function

    text = (
        f"func.func @main(%x: tensor<4x?xf32> {{ew.dims = {dims}}}) -> tensor<4x?xf32> {{\n"
        "  %e = ew.neg %x : tensor<4x?xf32>\n  func.return %e : tensor<4x?xf32>\n}\n"
    )
    message = (
        "'func.func' @main argument #0 (%x): 'ew.dims' must be an array of one name per dim of "
        "its type tensor<4x?xf32> (a static dim's its size), got "
    )
    with pytest.raises(VerifyException, match=re.escape(message)):
        compile_module(parse(text))
    with pytest.raises(VerifyException, match=re.escape(message)):
        ew.declared_dims(only_function(parse(text)).args[0])
    kernel = compile_module(parse(text.replace(dims, '["4", "n"]')))
    assert str(kernel.signature).startswith("(x: float32[4, n])"), kernel.signature
    # a digit that is no decimal is a name, not a size (int() refused it: a raw ValueError)
    kernel = compile_module(parse(text.replace(dims, '["4", "\u00b2"]')))
    assert str(kernel.signature).startswith("(x: float32[4, \u00b2])"), kernel.signature


def test_verifier_messages_from_the_python_api() -> None:
    f32, f64 = Float32Type(), Float64Type()
    x = Block(arg_types=[tensor(f32, DYN), tensor(f64, DYN), tensor(f32, 3)]).args
    with pytest.raises(VerifyException, match="static shape"):
        ew.ConstantOp(1.0, tensor(f32, DYN)).verify()
    with pytest.raises(VerifyException, match="f32 expected from variable 'E', but got f64"):
        ew.AddOp(x[0], x[1], tensor(f32, DYN)).verify()
    with pytest.raises(VerifyException, match=r"do not broadcast to the result shape \[4\]"):
        ew.MulOp(x[2], x[2], tensor(f32, 4)).verify()
    with pytest.raises(ValueError, match="do not broadcast"):
        ew.SubOp(x[2], Block(arg_types=[tensor(f32, 4)]).args[0])  # result type inferred


@pytest.mark.parametrize("kind", ["no result", "two results", "a region"])
def test_a_kernel_region_op_takes_and_gives_scalars(kind: str) -> None:
    """Each op of a kernel's region computes one scalar from scalars (`ew-kernel-to-loops`
    places it by its one result: an op of none was an IndexError there); a memref's op is in
    invalid.mlir."""
    f32 = Float32Type()
    block = Block(arg_types=[f32])
    results = {"no result": [], "two results": [f32, f32], "a region": [f32]}[kind]
    regions = [Region()] if kind == "a region" else []
    odd = test.TestOp(operands=[block.args[0]], result_types=results, regions=regions)
    block.add_ops([odd, ew.YieldOp(block.args[0])])
    kernel = ew.KernelOp(
        Block(arg_types=[tensor(f32, DYN)]).args, [], [tensor(f32, DYN)], Region(block)
    )
    with pytest.raises(VerifyException, match="region op 'test.op' must take and give scalars"):
        kernel.verify()


# ---------------------------------------------------------------------------------------------
# Broadcasting
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes,expected",
    [
        (((4, DYN), (DYN,)), (4, DYN)),
        (((), (3,)), (3,)),
        (((), ()), ()),
        (((1, 3), (4, 1)), (4, 3)),
        (((DYN,), (1,)), (DYN,)),
        (((DYN,), (4,)), (4,)),
        (((2, 1, 3), (5, 1)), (2, 5, 3)),
        (((1,), (1, 1)), (1, 1)),
        ((), ()),
    ],
)
def test_broadcast_shapes(shapes: tuple[tuple[int, ...], ...], expected: tuple[int, ...]) -> None:
    assert ew.broadcast_shapes(*shapes) == expected


@pytest.mark.parametrize("shapes", [((3,), (4,)), ((2, 3), (3, 2)), ((4, DYN), (5, 1))])
def test_incompatible_shapes_do_not_broadcast(shapes: tuple[tuple[int, ...], ...]) -> None:
    with pytest.raises(ValueError, match="do not broadcast"):
        ew.broadcast_shapes(*shapes)


@pytest.mark.parametrize(
    "lhs,rhs,result",
    [
        ((4, DYN), (DYN,), (4, DYN)),
        ((), (), ()),
        ((), (2, 3), (2, 3)),
        ((1, 3), (4, 1), (4, 3)),
        ((DYN,), (4,), (4,)),
    ],
)
def test_binary_builder_infers_the_broadcast_type(
    lhs: tuple[int, ...], rhs: tuple[int, ...], result: tuple[int, ...]
) -> None:
    f16 = Float16Type()
    a, b = Block(arg_types=[tensor(f16, *lhs), tensor(f16, *rhs)]).args
    op = ew.AddOp(a, b)
    assert op.result.type == tensor(f16, *result)
    op.verify()


def test_a_result_is_dynamic_where_an_operand_is_and_static_as_broadcast() -> None:
    """A `?` of static operands (4 and 1 -> ?) was taken, and bound at run time from the
    arguments: the result's type says its size."""
    f32 = Float32Type()
    a, b = Block(arg_types=[tensor(f32, 4), tensor(f32, 1)]).args
    ew.AddOp(a, b, tensor(f32, 4)).verify()
    for wrong in (tensor(f32, DYN), tensor(f32, 1), tensor(f32)):
        with pytest.raises(VerifyException):
            ew.AddOp(a, b, wrong).verify()
    (x,) = Block(arg_types=[tensor(f32, DYN)]).args
    ew.AddOp(x, b, tensor(f32, DYN)).verify()


# ---------------------------------------------------------------------------------------------
# References and rounding
# ---------------------------------------------------------------------------------------------


def test_references_on_known_values() -> None:
    ops = ew.OPS_BY_MNEMONIC
    values = np.array([-1.0, 0.0, 4.0, np.nan])
    np.testing.assert_array_equal(ops["relu"].reference(values), [0.0, 0.0, 4.0, np.nan])
    np.testing.assert_allclose(ops["sigmoid"].reference(np.array([0.0, -1000.0])), [0.5, 0.0])
    np.testing.assert_allclose(ops["rsqrt"].reference(np.array([4.0, 0.0])), [0.5, np.inf])
    np.testing.assert_allclose(ops["erf"].reference(np.array([0.0, 10.0])), [0.0, 1.0])
    np.testing.assert_array_equal(ops["max"].reference(values, np.zeros(4)), [0, 0, 4, np.nan])
    assert ops["pow"].reference(np.float64(2.0), np.float64(10.0)) == 1024.0


@pytest.mark.parametrize(
    "dtype,value,expected",
    [
        ("float64", 0.1, 0.1),
        ("float32", 0.1, float(np.float32(0.1))),
        ("float16", 0.1, float(np.float16(0.1))),
        ("bfloat16", 0.1, 0.10009765625),
        ("bfloat16", 1.00390625, 1.0),  # a tie rounds to even
        ("bfloat16", 1.01171875, 1.015625),  # a tie rounds to even (up)
        ("float16", 70000.0, math.inf),
        ("float32", 1e-50, 0.0),
        ("bfloat16", 3.4e38, math.inf),  # above the largest bf16 + half an ulp
        ("bfloat16", 3.3895313892515355e38, 3.3895313892515355e38),  # the largest bf16
    ],
)
def test_round_to_element(dtype: str, value: float, expected: float) -> None:
    assert ew.round_to_element(value, tensor(element_type_for(dtype))) == expected


@pytest.mark.parametrize("nan", [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001])
def test_round_to_element_makes_every_nan_canonical(nan: int) -> None:
    for dtype in DTYPES:
        rounded = ew.round_to_element(_from_bits(nan), tensor(element_type_for(dtype)))
        assert _bits(rounded) == _bits(ew.CANONICAL_NAN) == _bits(_from_bits(0x7FF8000000000000))
