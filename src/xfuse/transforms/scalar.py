"""The one place that maps each `ew` elementwise op to scalar `arith`/`math` ops.

Fusion builds kernel regions from it; to give a new elementwise op its scalar form, add one entry
to `SCALAR_LOWERINGS`. f16 and bf16 are storage types: a region computes in f32
(`ew.compute_type`), widening its block arguments with `arith.extf` and rounding its yields back
with `arith.truncf` (`widen` / `narrow`). `ew.convert` becomes `emit_convert`: a value held in
its compute type is rounded to the target element type and held in the target's compute type.

An op whose scalar form is one op of its operands (`ew.div` is `arith.divf`) is the program's own
arithmetic; the float arithmetic of a longer form (sigmoid, log1p, softplus) is the form's and
carries `EXPANSION_ATTRIBUTE`, so that `ew-expand-math{fastmath}` gives the user's fast-math flags
to the program's ops only and the forms keep their accuracy under any flags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue

from xfuse.dialects import ew
from xfuse.transforms.approx import FLOAT_ARITHMETIC

EXPANSION_ATTRIBUTE = "ew.expansion"
"""Marks the float arithmetic of a scalar form of more than one op (`emit_scalar`): not the
program's, so `ew-expand-math{fastmath}` gives it none of the user's flags (and drops the mark)."""

ScalarEmitter = Callable[[Builder, Sequence[SSAValue], Attribute], SSAValue]
"""Emits the scalar computation of one op on `args` (already in the compute type)."""


def _op(op_type: type[Operation]) -> ScalarEmitter:
    """An emitter for an op that maps to a single arith/math op taking the same operands, of
    the operands' type (built with `create`: IRDL's generic builder costs 4x the op)."""

    def emit(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
        return builder.insert(op_type.create(operands=args, result_types=[args[0].type])).results[0]

    return emit


def emit_constant(builder: Builder, value: float, compute_type: Attribute) -> SSAValue:
    """`arith.constant value : compute_type` (the literal rounded to the compute type)."""
    return builder.insert(arith.ConstantOp(FloatAttr(value, compute_type))).result


def _exp_of_minus_abs(builder: Builder, x: SSAValue) -> SSAValue:
    """exp(-|x|), in (0, 1]: it cannot overflow, and `ew-expand-math` sees that from the IR."""
    minus_abs = builder.insert(arith.NegfOp(builder.insert(math.AbsFOp(x)).result)).result
    return builder.insert(math.ExpOp(minus_abs)).result


def _sigmoid(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """e / (1 + e) for x < 0, else 1 / (1 + e), with e = exp(-|x|) (no math.sigmoid op exists).

    Never exp of a large argument: the negative tail is e (1 - e + ...), right down to the
    denormals, where 1 / (1 + exp(-x)) flushed to 0 once exp(-x) overflowed. The numerator is
    max(e, copysign(1, x)): e where x is negative (e > -1), else 1 (e <= 1; -0 gives e = 1), a
    bitwise sign and one `vmaxps` where a compare and a blend took the multiply pipes.
    """
    (x,) = args
    one = emit_constant(builder, 1.0, compute_type)
    e = _exp_of_minus_abs(builder, x)
    sign = builder.insert(math.CopySignOp(one, x)).result
    larger = builder.insert(arith.CmpfOp(e, sign, "ogt")).result
    numerator = builder.insert(arith.SelectOp(larger, e, sign)).result
    denominator = builder.insert(arith.AddfOp(one, e)).result
    return builder.insert(arith.DivfOp(numerator, denominator)).result


def _relu(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """maximumf(x, 0.0): NaN stays NaN, like the numpy reference."""
    (x,) = args
    zero = emit_constant(builder, 0.0, compute_type)
    return builder.insert(arith.MaximumfOp(x, zero)).result


def _log1p_parts(
    builder: Builder, x: SSAValue, compute_type: Attribute
) -> tuple[SSAValue, SSAValue]:
    """log(1 + x) for |x| < 2^24 (beyond, x * log(u) may overflow), and log(u) of u = 1 + x.

    Goldberg's `u = 1 + x; u == 1 ? x : log(u) * x / (u - 1)` is log1p to a few ulps for tiny x
    (where `log(1 + x)` rounds 1 + x to 1 and returns 0) using only `math.log`, which
    `ew-expand-math` lowers both ways (libm calls or vectorizable approximations).
    """
    one = emit_constant(builder, 1.0, compute_type)
    u = builder.insert(arith.AddfOp(one, x)).result
    log_u = builder.insert(math.LogOp(u)).result
    scaled = builder.insert(arith.MulfOp(log_u, x)).result
    quotient = builder.insert(arith.DivfOp(scaled, builder.insert(arith.SubfOp(u, one)).result))
    rounds_to_one = builder.insert(arith.CmpfOp(u, one, "oeq")).result
    return builder.insert(arith.SelectOp(rounds_to_one, x, quotient.result)).result, log_u


def _softplus(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """max(x, 0) + log1p(exp(-|x|)): log(1 + exp(x)) without overflow for large x.

    log1p keeps softplus's relative accuracy far into the negative range (where it is about
    exp(x)). `ew-expand-math` lowers `math.exp` and `math.log1p` both ways (libm calls or
    vectorizable approximations; the approximation of log1p knows its argument is in [0, 1]).
    max(x, 0) is `x > 0 ? x : 0`, which need not propagate NaN (the log1p term does): one
    `vmaxps` on x86, where NaN-propagating `maximumf` takes three instructions.
    """
    (x,) = args
    zero = emit_constant(builder, 0.0, compute_type)
    positive = builder.insert(arith.CmpfOp(x, zero, "ogt")).result
    relu = builder.insert(arith.SelectOp(positive, x, zero)).result
    log1p = builder.insert(math.Log1pOp(_exp_of_minus_abs(builder, x))).result
    return builder.insert(arith.AddfOp(relu, log1p)).result


def _log1p(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """log(1 + x): Goldberg's form (`_log1p_parts`), and log(u) from x = 2^24 on, where u = 1 + x
    is within half an ulp of the true sum (x = inf gives inf), and for a NaN x. Of an exp in the
    same region it is `math.log1p`, which `ew-expand-math` computes as one function
    (log1p(exp(y)) is softplus) under `math=approx` and calls under `math=libm`."""
    (x,) = args
    if isinstance(x.owner, math.ExpOp):
        return builder.insert(math.Log1pOp(x)).result
    log1p, log_u = _log1p_parts(builder, x, compute_type)
    threshold = emit_constant(builder, 2.0**24, compute_type)
    # A NaN x too: log's NaN, where x log(u) would keep whichever of two NaNs the multiply's
    # operand order says (bf16's came out by the element's place in AVX2 code).
    large_or_nan = builder.insert(arith.CmpfOp(x, threshold, "uge")).result
    return builder.insert(arith.SelectOp(large_or_nan, log_u, log1p)).result


def _compare(predicate: str) -> ScalarEmitter:
    """An emitter for a comparison: `arith.cmpf predicate` made 1 or 0 by an `arith.select`
    (which `_select` of the mask turns back into the compare, and LLVM folds to it)."""

    def emit(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
        holds = builder.insert(arith.CmpfOp(args[0], args[1], predicate)).result
        one = emit_constant(builder, 1.0, compute_type)
        zero = emit_constant(builder, 0.0, compute_type)
        return builder.insert(arith.SelectOp(holds, one, zero)).result

    return emit


def _select(builder: Builder, args: Sequence[SSAValue], compute_type: Attribute) -> SSAValue:
    """`c != 0 ? a : b` (`une`: a NaN condition is nonzero). Of a comparison's mask (a select of
    1 and 0 on a compare) it selects on that compare directly."""
    condition, on_true, on_false = args
    owner = condition.owner
    if isinstance(owner, arith.SelectOp) and _is_mask(owner):
        holds = owner.cond
    else:
        zero = emit_constant(builder, 0.0, compute_type)
        holds = builder.insert(arith.CmpfOp(condition, zero, "une")).result
    return builder.insert(arith.SelectOp(holds, on_true, on_false)).result


def _is_mask(select: arith.SelectOp) -> bool:
    """`select` chooses between the constants 1 and 0: a comparison's mask (`_compare`)."""
    values = [
        owner.value.value.data if isinstance(owner := v.owner, arith.ConstantOp) else None
        for v in (select.lhs, select.rhs)
    ]
    return values == [1.0, 0.0]


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
    ew.CopysignOp: _op(math.CopySignOp),
    ew.ExpOp: _op(math.ExpOp),
    ew.LogOp: _op(math.LogOp),
    ew.Log1pOp: _log1p,
    ew.TanhOp: _op(math.TanhOp),
    ew.SigmoidOp: _sigmoid,
    ew.ErfOp: _op(math.ErfOp),
    ew.SqrtOp: _op(math.SqrtOp),
    ew.RsqrtOp: _op(math.RsqrtOp),
    ew.ReluOp: _relu,
    ew.SoftplusOp: _softplus,
    ew.FloorOp: _op(math.FloorOp),
    ew.CeilOp: _op(math.CeilOp),
    ew.TruncOp: _op(math.TruncOp),
    ew.RintOp: _op(math.RoundEvenOp),
    ew.SinOp: _op(math.SinOp),
    ew.CosOp: _op(math.CosOp),
    ew.TanOp: _op(math.TanOp),
    ew.AsinOp: _op(math.AsinOp),
    ew.AcosOp: _op(math.AcosOp),
    ew.AtanOp: _op(math.AtanOp),
    ew.SinhOp: _op(math.SinhOp),
    ew.CoshOp: _op(math.CoshOp),
    ew.AsinhOp: _op(math.AsinhOp),
    ew.AcoshOp: _op(math.AcoshOp),
    ew.AtanhOp: _op(math.AtanhOp),
    ew.Exp2Op: _op(math.Exp2Op),
    ew.Expm1Op: _op(math.ExpM1Op),
    ew.Log2Op: _op(math.Log2Op),
    ew.Log10Op: _op(math.Log10Op),
    ew.CbrtOp: _op(math.CbrtOp),
    ew.Atan2Op: _op(math.Atan2Op),
    ew.LtOp: _compare("olt"),
    ew.LeOp: _compare("ole"),
    ew.GtOp: _compare("ogt"),
    ew.GeOp: _compare("oge"),
    ew.EqOp: _compare("oeq"),
    ew.NeOp: _compare("une"),
    ew.SelectOp: _select,
}


def emit_scalar(
    op_type: type[Operation],
    builder: Builder,
    args: Sequence[SSAValue],
    compute_type: Attribute,
) -> SSAValue:
    """Emit the scalar form of the elementwise `op_type` on `args` at the builder. Unless the form
    is one op of `args`, its float arithmetic is marked the form's (`EXPANSION_ATTRIBUTE`)."""
    emitter = SCALAR_LOWERINGS.get(op_type)
    if emitter is None:
        raise NotImplementedError(
            f"no scalar lowering for '{op_type.name}': add it to SCALAR_LOWERINGS in "
            "src/xfuse/transforms/scalar.py"
        )
    result = emitter(builder, args, compute_type)
    owner = result.owner
    if not isinstance(owner, Operation) or list(owner.operands) != list(args):
        _mark_expansion(result, args)
    return result


def unmark_expansion(op: Operation) -> bool:
    """Drop `op`'s `EXPANSION_ATTRIBUTE` (for the passes that consume it); whether it had one."""
    return op.attributes.pop(EXPANSION_ATTRIBUTE, None) is not None


def _mark_expansion(result: SSAValue, args: Sequence[SSAValue]) -> None:
    """Mark the float arithmetic that computes `result` from `args` with `EXPANSION_ATTRIBUTE`."""
    seen = set(args)
    # `_select` of a comparison's mask selects on the mask's compare, the program's own (the
    # walk went on through it and marked the program's arithmetic before it the form's)
    seen.update(
        arg.owner.cond
        for arg in args
        if isinstance(arg.owner, arith.SelectOp) and _is_mask(arg.owner)
    )
    pending = [result]
    while pending:
        value = pending.pop()
        owner = value.owner
        if value in seen or not isinstance(owner, Operation):
            continue
        seen.add(value)
        if isinstance(owner, FLOAT_ARITHMETIC):
            owner.attributes[EXPANSION_ATTRIBUTE] = UnitAttr()
        pending.extend(owner.operands)


def _bits(type_: Attribute) -> int:
    return cast(AnyFloat, type_).bitwidth


def _cast(builder: Builder, value: SSAValue, type_: Attribute) -> SSAValue:
    """`value` as `type_`: `arith.extf` to a wider float, `arith.truncf` (RNE) to a narrower one."""
    if value.type == type_:
        return value
    if isinstance(value.owner, arith.ExtFOp) and value.owner.input.type == type_:
        return value.owner.input  # narrowing a widened value gives back the original exactly
    # `create`, not the IRDL builder (which costs several times the op): one per kernel input.
    cast_type = arith.ExtFOp if _bits(type_) > _bits(value.type) else arith.TruncFOp
    return builder.insert(cast_type.create(operands=[value], result_types=[type_])).results[0]


def emit_convert(builder: Builder, value: SSAValue, target: Attribute) -> SSAValue:
    """`ew.convert` to the element type `target` of `value` (held in its source's compute type).

    The result is held in `ew.compute_type(target)`. Narrowing rounds once to nearest even with
    `arith.truncf` (f32 -> bf16 -> f32 for a bf16 target; f64 -> f16 and f64 -> bf16 directly,
    never through f32, which would round twice).
    """
    if _bits(target) < _bits(value.type):
        value = _cast(builder, value, target)
    return _cast(builder, value, ew.compute_type(target))


def widen(builder: Builder, value: SSAValue, compute: Attribute) -> SSAValue:
    """`value` in the compute type (`arith.extf` from f16/bf16, else unchanged)."""
    return _cast(builder, value, compute)


def narrow(builder: Builder, value: SSAValue, element: Attribute) -> SSAValue:
    """`value` rounded to the storage element type (`arith.truncf`, round to nearest even)."""
    return _cast(builder, value, element)
