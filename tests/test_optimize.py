"""`ew-optimize`: the lecture's numbers on GELU, folding of every op in every dtype, options."""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Builtin, ModuleOp, TensorType
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.transforms.dead_code_elimination import region_dce

import xfuse
from xfuse.dialects import ew
from xfuse.dialects.dtypes import element_type_for
from xfuse.frontend.language import parse_program
from xfuse.transforms import optimize as optimize_module
from xfuse.transforms.optimize import EwOptimizePass
from xfuse.transforms.pipeline import pipeline_context

if TYPE_CHECKING:
    from conftest import Gelu


def optimize(module: ModuleOp, unsafe_math: bool = False) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, func.Func, ew.Ew):
        ctx.load_dialect(dialect)
    EwOptimizePass(unsafe_math=unsafe_math).apply(ctx, module)
    module.verify()
    return module


def compute_ops(module: ModuleOp) -> list[ew.ElementwiseOp]:
    return [op for op in module.walk() if isinstance(op, ew.ElementwiseOp)]


def test_gelu_has_11_compute_ops_and_h_has_5_users(gelu: Gelu) -> None:
    module = optimize(parse_program(gelu.source))
    ops = compute_ops(module)
    assert len(ops) == 11
    (h,) = [op for op in ops if op.result.name_hint == "h"]
    assert isinstance(h, ew.AddOp)
    assert len(list(h.result.uses)) == 5


def test_gelu_with_redundancy_optimizes_to_the_same_11_ops(gelu: Gelu) -> None:
    source = gelu.source.replace("out = y + r;", "out = (y * 1 + -0.0) + --r - 0 * 1 - (0 + -0.0);")
    assert len(compute_ops(optimize(parse_program(source)))) == 11


def _fold(op_type: ew.ElementwiseOpType, dtype: str, *values: float) -> float:
    """The literal `ew-optimize` folds `op_type(*values)` to, in `dtype`."""
    scalar = TensorType(element_type_for(dtype), [])
    block = Block()
    constants = [ew.ConstantOp(v, scalar) for v in values]
    block.add_ops([*constants, op := op_type(*(c.result for c in constants))])
    block.add_op(func.ReturnOp(op.result))
    module = ModuleOp([func.FuncOp("f", ([], [scalar]), Region(block))])
    optimize(module)
    assert not compute_ops(module), "not folded"
    (constant,) = [o for o in module.walk() if isinstance(o, ew.ConstantOp)]
    return constant.literal


OPERANDS = {1: (0.7,), 2: (1.3, 0.7), 3: (0.0, 1.3, 0.7)}
DOMAIN_OPERANDS = {ew.AcoshOp: (1.7,)}
"""An op whose value at `OPERANDS` is NaN (acosh below 1), a NaN not comparing equal."""


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("op_type", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_every_op_folds_to_its_reference_rounded(op_type: ew.ElementwiseOpType, dtype: str) -> None:
    operands = DOMAIN_OPERANDS.get(op_type, OPERANDS[ew.arity(op_type)])
    element = TensorType(element_type_for(dtype), [])
    # As a kernel would: the literals are rounded to the dtype, then the result once more.
    rounded = (np.float64(ew.round_to_element(v, element)) for v in operands)
    expected = float(op_type.reference(*rounded))
    folded = _fold(op_type, dtype, *operands)
    assert folded == ew.round_to_element(expected, element)
    if dtype != "float64":
        assert np.dtype({"bfloat16": "float32"}.get(dtype, dtype)).type(folded) == folded


@pytest.mark.parametrize(
    "op_type,values,expected",
    [
        (ew.DivOp, (1.0, 0.0), math.inf),
        (ew.DivOp, (-1.0, 0.0), -math.inf),
        (ew.LogOp, (0.0,), -math.inf),
        (ew.ExpOp, (1000.0,), math.inf),
        (ew.SigmoidOp, (-1000.0,), 0.0),
        (ew.PowOp, (0.0, 0.0), 1.0),
        (ew.MaxOp, (math.nan, 1.0), math.nan),
        (ew.SqrtOp, (-1.0,), math.nan),
        (ew.RsqrtOp, (0.0,), math.inf),
    ],
)
def test_folding_follows_ieee(
    op_type: ew.ElementwiseOpType, values: tuple[float, ...], expected: float
) -> None:
    folded = _fold(op_type, "float32", *values)
    assert folded == expected or (math.isnan(expected) and math.isnan(folded))


@pytest.mark.parametrize(
    "op_type,values,expected",
    [
        (ew.MaxOp, (-0.0, 0.0), 0.0),
        (ew.MaxOp, (0.0, -0.0), 0.0),
        (ew.MinOp, (0.0, -0.0), -0.0),
        (ew.MinOp, (-0.0, 0.0), -0.0),
        (ew.ReluOp, (-0.0,), 0.0),
        (ew.NegOp, (0.0,), -0.0),
        (ew.AddOp, (-0.0, 0.0), 0.0),
        (ew.AddOp, (-0.0, -0.0), -0.0),
        (ew.MulOp, (-0.0, 3.0), -0.0),
        (ew.DivOp, (1.0, -math.inf), -0.0),
        (ew.TanhOp, (-0.0,), -0.0),
        (ew.SqrtOp, (-0.0,), -0.0),
        (ew.PowOp, (-0.0, 3.0), -0.0),
    ],
)
def test_folding_keeps_the_sign_of_zero(
    op_type: ew.ElementwiseOpType, values: tuple[float, ...], expected: float
) -> None:
    """As the kernels compute it (LLVM's maximum/minimum order -0 below +0, unlike numpy's)."""
    assert math.copysign(1, _fold(op_type, "float32", *values)) == math.copysign(1, expected)


NEGATIVE_SIGNALING_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF4000000000001))[0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize(
    "op_type,values",
    [
        (ew.DivOp, (0.0, 0.0)),
        (ew.LogOp, (-1.0,)),
        (ew.SqrtOp, (-1.0,)),
        (ew.SubOp, (math.inf, math.inf)),
        (ew.MulOp, (math.inf, 0.0)),
        (ew.AddOp, (NEGATIVE_SIGNALING_NAN, 1.0)),
        (ew.MaxOp, (NEGATIVE_SIGNALING_NAN, 1.0)),
        (ew.ExpOp, (NEGATIVE_SIGNALING_NAN,)),
    ],
)
def test_every_folded_nan_is_the_canonical_quiet_nan(
    op_type: ew.ElementwiseOpType, values: tuple[float, ...], dtype: str
) -> None:
    """numpy's NaN sign depends on the host's SIMD path: folding must not inherit it."""
    folded = _fold(op_type, dtype, *values)
    assert struct.pack("<d", folded) == struct.pack("<Q", 0x7FF8000000000000)


PAYLOAD_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize(
    "op_type,values,bits",
    [
        (ew.NegOp, (math.nan,), 0xFFF8000000000000),
        (ew.NegOp, (PAYLOAD_NAN,), 0xFFF8000000000001),
        (ew.AbsOp, (NEGATIVE_SIGNALING_NAN,), 0x7FF4000000000001),
        (ew.CopysignOp, (1.0, -math.nan), None),  # not a NaN at all: -1
        (ew.CopysignOp, (PAYLOAD_NAN, NEGATIVE_SIGNALING_NAN), 0xFFF8000000000001),
        (ew.CopysignOp, (NEGATIVE_SIGNALING_NAN, 1.0), 0x7FF4000000000001),
        (ew.SelectOp, (1.0, NEGATIVE_SIGNALING_NAN, 1.0), 0xFFF4000000000001),
        (ew.SelectOp, (0.0, 1.0, -math.nan), 0xFFF8000000000000),
        (ew.SelectOp, (1.0, PAYLOAD_NAN, -1.0), 0x7FF8000000000001),
    ],
)
def test_folding_keeps_the_bits_ieee_gives_a_nan(
    op_type: ew.ElementwiseOpType, values: tuple[float, ...], bits: int | None, dtype: str
) -> None:
    """Negate, abs and copySign are sign-bit operations in IEEE 754 (the payload kept, a
    signalling NaN not quieted) and select passes its operand through, as the kernels and
    numpy do: folding gave the positive canonical NaN whatever the sign (`copysign(1, -NaN)`
    folded to +1 where a kernel gives -1), then the canonical payload, so a constant NaN of a
    payload came out of `-p` or a select without it, where an input's kept it."""
    folded = _fold(op_type, dtype, *values)
    if bits is None:
        assert folded == -1.0
    else:
        assert struct.pack("<d", folded) == struct.pack("<Q", bits)


def test_zero_over_zero_and_log_of_minus_one_share_one_nan() -> None:
    scalar = TensorType(element_type_for("float32"), [])
    zero, minus_one = ew.ConstantOp(0.0, scalar), ew.ConstantOp(-1.0, scalar)
    quotient, log = ew.DivOp(zero.result, zero.result), ew.LogOp(minus_one.result)
    block = Block()
    block.add_ops([zero, minus_one, quotient, log, func.ReturnOp(quotient.result, log.result)])
    module = ModuleOp([func.FuncOp("f", ([], [scalar, scalar]), Region(block))])
    optimize(module)
    (constant,) = [op for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert struct.pack("<d", constant.literal) == struct.pack("<Q", 0x7FF8000000000000)


@pytest.mark.parametrize("source", ["y = x + 0;", "y = 0 + x;", "y = x - -0.0;"])
def test_adding_plus_zero_is_kept_unless_unsafe(source: str) -> None:
    """At x = -0.0, x + 0 is +0.0: x + 0 -> x would keep the -0.0. Only nsz (unsafe) allows it."""
    shapes = {"x": [8]}
    assert [op.name for op in compute_ops(optimize(parse_program(source, shapes=shapes)))] == [
        "ew.sub" if "-" in source else "ew.add"
    ]
    assert not compute_ops(optimize(parse_program(source, shapes=shapes), unsafe_math=True))


@pytest.mark.parametrize(
    ("source", "kept"),
    [
        ("input bf16 x; y = x * 1.003;", False),  # 1 in bf16
        ("input bf16 x; y = x * 1.005;", True),  # 1.0078125 in bf16
        ("input f32 x; y = x * 1.003;", True),
        ("input f16 x; y = x + -1e-30;", False),  # -0.0 in f16
        ("input f16 x; y = x + 1e-30;", True),  # +0.0 in f16: x + 0 is not exact
        ("input f32 x; y = x + -1e-30;", True),
        ("input f16 x; y = x + -2.9802322387695312e-08;", False),  # -2^-25: a tie, to -0.0
        ("input f16 x; y = x + -5.960464477539063e-08;", True),  # -2^-24: f16's least subnormal
        ("input bf16 x; y = x * 1.00390625;", False),  # 1 + 2^-8: a tie, to 1 (even)
        ("input bf16 x; y = x * 1.0039063;", False),  # 1 + 2^-8 in f32 first, then a tie
        ("input bf16 x; y = x * 1.0039064;", True),  # above the tie in f32: 1.0078125
        ("input bf16 x; y = x * 0.998046875;", False),  # 1 - 2^-9: a tie, to 1 (even)
    ],
)
def test_identities_see_constants_rounded_to_the_element_type(source: str, kept: bool) -> None:
    """A literal that the dtype rounds to 1 or -0.0 is that identity, as the kernel computes it."""
    assert len(compute_ops(optimize(parse_program(source)))) == int(kept)


@pytest.mark.parametrize("fuse", [True, False])
def test_one_over_x_plus_zero_at_minus_zero_is_plus_inf(fuse: bool) -> None:
    kernel = xfuse.compile(
        "out = 1 / (x + 0); minus = 1 / (x + -0.0);", ["out", "minus"], fuse=fuse
    )
    out, minus = kernel(x=np.array([-0.0, 0.0], np.float32))
    np.testing.assert_array_equal(out, [math.inf, math.inf])
    np.testing.assert_array_equal(minus, [-math.inf, math.inf])


@pytest.mark.parametrize(
    ("literal", "source", "want"),
    [(100000.0, "f16", math.inf), (0.1, "bf16", 0.10009765625), (1e-50, "f32", 0.0)],
)
def test_a_folded_conversion_rounds_to_the_source_type_first(
    literal: float, source: str, want: float
) -> None:
    """A constant holds its literal in f64; the kernel holds it in its own type."""
    constant = ew.ConstantOp(literal, TensorType(element_type_for(source), []))
    convert = ew.ConvertOp(constant.result, element_type_for("f64"))
    block = Block()
    block.add_ops([constant, convert, func.ReturnOp(convert.result)])
    module = ModuleOp([func.FuncOp("f", ([], [convert.result.type]), Region(block))])
    optimize(module)
    (folded,) = [o for o in module.walk() if isinstance(o, ew.ConstantOp)]
    assert folded.literal == want


@pytest.mark.parametrize(
    ("source", "target", "bits", "want"),
    [
        ("f16", "f32", 0xFFF8000000000000, 0xFFF8000000000000),  # -NaN: its sign
        ("f32", "f64", 0x7FF0000020000000, 0x7FF8000020000000),  # signalling: quiet, payload
        ("f64", "f32", 0xFFF5555555555555, 0xFFFD555540000000),  # f32's 23 bits of it
        ("f64", "f16", 0xFFF5555555555555, 0xFFFD540000000000),  # f16's 10
        ("bf16", "f64", 0x7FF8000000000000, 0x7FF8000000000000),
        ("f32", "bf16", 0xFFFA000000000000, 0xFFFA000000000000),
    ],
)
def test_a_folded_conversion_of_a_nan_keeps_what_a_kernel_keeps(
    source: str, target: str, bits: int, want: int
) -> None:
    """A conversion keeps a NaN's sign and its payload's leading bits, quieted (`extf` and
    `truncf`, as x86's conversions): folded, it was the canonical NaN (`copysign(x, -f16(0/0))`
    was x, and -x with the NaN an input)."""
    (nan,) = struct.unpack("<d", struct.pack("<Q", bits))
    constant = ew.ConstantOp(nan, TensorType(element_type_for(source), []))
    convert = ew.ConvertOp(constant.result, element_type_for(target))
    block = Block()
    block.add_ops([constant, convert, func.ReturnOp(convert.result)])
    module = ModuleOp([func.FuncOp("f", ([], [convert.result.type]), Region(block))])
    optimize(module)
    (folded,) = [o for o in module.walk() if isinstance(o, ew.ConstantOp)]
    assert struct.pack("<d", folded.literal) == struct.pack("<Q", want)


@pytest.mark.parametrize("fuse", [True, False])
def test_a_negative_nan_converted_keeps_its_sign(fuse: bool) -> None:
    """`.ew` reaches a negative NaN constant through a conversion (explicit, or numpy's
    promotion): its sign came out positive, where an input's stayed (and numpy's)."""
    x = np.array([1.0, -2.0], np.float32)
    kernel = xfuse.compile(
        "a = copysign(x, -f16(0/0)); b = x * copysign(1, f32(-(0/0)));", ["a", "b"], fuse=fuse
    )
    a, b = kernel(x=x)
    np.testing.assert_array_equal(a, [-1.0, -2.0])
    np.testing.assert_array_equal(b, [-1.0, 2.0])


def test_unsafe_math_only_on_request() -> None:
    source = "y = x * 0 + (x - x) + x / 4;"
    shapes = {"x": [8]}
    safe = optimize(parse_program(source, shapes=shapes))
    assert [op.name for op in compute_ops(safe)] == [
        "ew.mul",
        "ew.sub",
        "ew.add",
        "ew.div",
        "ew.add",
    ]
    unsafe = optimize(parse_program(source, shapes=shapes), unsafe_math=True)
    # x*0 + (x-x) folds to 0 + 0 = 0 and disappears as x + 0 does; x / 4 becomes x * 0.25.
    (op,) = compute_ops(unsafe)
    assert isinstance(op, ew.MulOp)
    assert ew.constant_value(op.rhs) == 0.25


@pytest.mark.parametrize(
    ("dtype", "divisor"),
    [("float32", "1e-40"), ("float32", "1e38"), ("float16", "0.00001"), ("float16", "60000")],
)
def test_unsafe_math_divides_where_the_reciprocal_is_not_normal(dtype: str, divisor: str) -> None:
    """`x / 1e-40` became `x * inf` (1e-10 / 1e-40 is 1e30), `x / 1e38` a multiply by a
    denormal, which loses bits: as LLVM's `arcp`, only a normal 1/c replaces the division."""
    module = optimize(parse_program(f"y = x / {divisor};", dtype=dtype), unsafe_math=True)
    assert [op.name for op in compute_ops(module)] == ["ew.div"]


def test_dead_ops_go_in_one_sweep_where_each_region_has_one_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`y * y` with `y` used only there: the walker's own dce erases the product, but not `y`
    (it revisits an operand's op only when the erased op was its one use); the sweep after it
    does, without xDSL's `region_dce` (a fixed point of liveness walks, 2.5% of a 10^4-op
    compile), which stays for regions of several blocks."""
    fixed_points: list[Region] = []

    def counting(region: Region, listener: object = None) -> bool:
        fixed_points.append(region)
        return region_dce(region, listener)  # type: ignore[arg-type]

    monkeypatch.setattr(optimize_module, "region_dce", counting)
    module = Parser(
        pipeline_context(),
        """func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
          %y = ew.mul %x, %x : tensor<?xf32>
          %z = ew.mul %y, %y : tensor<?xf32>
          func.return %x : tensor<?xf32>
        }""",
    ).parse_module()
    optimize(module)
    assert compute_ops(module) == []
    assert fixed_points == []
    with_blocks = Parser(
        pipeline_context(),
        """func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
          func.return %x : tensor<?xf32>
        ^unreachable:
          %y = ew.mul %x, %x : tensor<?xf32>
          func.return %y : tensor<?xf32>
        }""",
    ).parse_module()
    optimize(with_blocks)
    assert len(fixed_points) == 1
    assert compute_ops(with_blocks) == []


def test_folding_works_in_a_bare_context() -> None:
    """Folding makes `ew.constant`s through the dialect: with `Context()`, where the `ew`
    dialect was not loaded, the first fold raised "Dialect ew is not registered"."""
    module = parse_program("out = x * bf16(0.1);")
    EwOptimizePass().apply(Context(), module)
    constants = [op for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert [c.literal for c in constants] == [0.10009765625]
