"""The one place that maps each `ew` elementwise op to scalar `arith`/`math` ops.

Fusion builds kernel regions from it; to give a new elementwise op its scalar form, add one entry
to `SCALAR_LOWERINGS`. f16 and bf16 are storage types: a region computes in f32
(`compute_type`), widening its block arguments with `arith.extf` and rounding its yields back
with `arith.truncf` (`widen` / `narrow`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, FloatAttr
from xdsl.ir import Attribute, Operation, SSAValue

from xfuse.dialects import ew

ScalarEmitter = Callable[[Builder, Sequence[SSAValue], Attribute], SSAValue]
"""Emits the scalar computation of one op on `args` (already in the compute type)."""


def _op(op_type: Callable[..., Operation]) -> ScalarEmitter:
    """An emitter for an op that maps to a single arith/math op taking the same operands."""

    def emit(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
        return builder.insert(op_type(*args)).results[0]

    return emit


def emit_constant(builder: Builder, value: float, compute_type: Attribute) -> SSAValue:
    """`arith.constant value : compute_type` (the literal rounded to the compute type)."""
    return builder.insert(arith.ConstantOp(FloatAttr(value, compute_type))).result


def _sigmoid(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """1 / (1 + exp(-x)), in arith and math.exp (no math.sigmoid op exists)."""
    (x,) = args
    one = emit_constant(builder, 1.0, compute_type)
    exp = builder.insert(math.ExpOp(builder.insert(arith.NegfOp(x)).result)).result
    denominator = builder.insert(arith.AddfOp(one, exp)).result
    return builder.insert(arith.DivfOp(one, denominator)).result


def _relu(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """maximumf(x, 0.0): NaN stays NaN, like the numpy reference."""
    (x,) = args
    zero = emit_constant(builder, 0.0, compute_type)
    return builder.insert(arith.MaximumfOp(x, zero)).result


def _softplus(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """max(x, 0) + log1p(exp(-|x|)): log(1 + exp(x)) without overflow for large x.

    log1p(e) is Goldberg's `u = 1 + e; u == 1 ? e : log(u) * e / (u - 1)`, exact to a few ulps
    for tiny e, so softplus keeps its relative accuracy far into the negative range (where it is
    about exp(x)). Only `math.exp` and `math.log` remain, which `ew-expand-math` lowers both ways
    (libm calls or vectorizable approximations): softplus needs no math lowering of its own.
    """
    (x,) = args
    zero = emit_constant(builder, 0.0, compute_type)
    one = emit_constant(builder, 1.0, compute_type)
    positive = builder.insert(arith.MaximumfOp(x, zero)).result
    minus_abs = builder.insert(arith.NegfOp(builder.insert(math.AbsFOp(x)).result)).result
    e = builder.insert(math.ExpOp(minus_abs)).result
    u = builder.insert(arith.AddfOp(one, e)).result
    log_u = builder.insert(math.LogOp(u)).result
    scaled = builder.insert(arith.MulfOp(log_u, e)).result
    quotient = builder.insert(arith.DivfOp(scaled, builder.insert(arith.SubfOp(u, one)).result))
    rounds_to_one = builder.insert(arith.CmpfOp(u, one, "oeq")).result
    log1p = builder.insert(arith.SelectOp(rounds_to_one, e, quotient.result)).result
    return builder.insert(arith.AddfOp(positive, log1p)).result


SCALAR_LOWERINGS: dict[type[Operation], ScalarEmitter] = {
    ew.AddOp: _op(arith.AddfOp),
    ew.SubOp: _op(arith.SubfOp),
    ew.MulOp: _op(arith.MulfOp),
    ew.DivOp: _op(arith.DivfOp),
    ew.MaxOp: _op(arith.MaximumfOp),
    ew.MinOp: _op(arith.MinimumfOp),
    ew.PowOp: _op(math.PowFOp),
    ew.NegOp: _op(arith.NegfOp),
    ew.AbsOp: _op(math.AbsFOp),
    ew.ExpOp: _op(math.ExpOp),
    ew.LogOp: _op(math.LogOp),
    ew.TanhOp: _op(math.TanhOp),
    ew.SigmoidOp: _sigmoid,
    ew.ErfOp: _op(math.ErfOp),
    ew.SqrtOp: _op(math.SqrtOp),
    ew.RsqrtOp: _op(math.RsqrtOp),
    ew.ReluOp: _relu,
    ew.SoftplusOp: _softplus,
}


def emit_scalar(
    op_type: type[Operation],
    builder: Builder,
    args: Sequence[SSAValue],
    compute_type: Attribute,
) -> SSAValue:
    """Emit the scalar form of the elementwise `op_type` on `args` at the builder."""
    emitter = SCALAR_LOWERINGS.get(op_type)
    if emitter is None:
        raise NotImplementedError(f"no scalar lowering for '{op_type.name}'")
    return emitter(builder, args, compute_type)


def compute_type(element: Attribute) -> Attribute:
    """The type a region computes in: f32 for the f16/bf16 storage types, else the element type."""
    return Float32Type() if isinstance(element, Float16Type | BFloat16Type) else element


def widen(builder: Builder, value: SSAValue, compute: Attribute) -> SSAValue:
    """`value` in the compute type (`arith.extf` from f16/bf16, else unchanged)."""
    if value.type == compute:
        return value
    return builder.insert(arith.ExtFOp(value, compute)).result


def narrow(builder: Builder, value: SSAValue, element: Attribute) -> SSAValue:
    """`value` rounded to the storage element type (`arith.truncf`, round to nearest even)."""
    if value.type == element:
        return value
    return builder.insert(arith.TruncFOp(value, element)).result
