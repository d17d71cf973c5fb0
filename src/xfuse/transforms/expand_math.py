"""`ew-expand-math{math=approx|libm}`: replace transcendental `math` ops before going to LLVM.

- `math=approx`: f32 `math.exp/log/log1p/tanh/erf/powf` become the plain-arithmetic
  approximations of `xfuse.transforms.approx` (vectorizable; errors in docs/math.md); a `tanh`
  of softplus's form becomes one of the pair (Mish's `tanh(softplus(x))`), a `log` of
  `1 + exp(x)` softplus's form with the composition's +0, +inf and NaN, and the softplus (or
  `1 + exp(x)`) ops left unused are erased; GELU's `(0.5 x) (1 + f)` (`gelu_form`) of an erf f is
  `x (0.5 + f / 2)` with the half in f's coefficients, the same bits, and of f = tanh(u) the
  same function as `x / (1 + 2^t)`, t = -2 u log2(e) (`approx.gelu_of_tanh`: one short exp2 and
  a division for tanh's rational, more accurate). f64 has no
  approximation here and calls libm as in `math=libm`, as do f32's other functions of the C
  library (`math.sin`, `math.atan2`, ...: `MathFunction`s without an approximation);
  `xfuse.compile` then lets the loop vectorizer call glibc's vector variants of those calls
  (`xfuse.codegen.native.call_libmvec`).
  A `powf` by a constant in `SIMPLE_POWERS` (1, 2, 3, 4, -1, 1/2, -1/2; f32 and f64) becomes
  `math.fpowi` or a square root instead (`PowBySimpleConstant`): faster and more accurate.
- `math=libm`: they become calls to the C library (`tanhf`, `expf`, `log1pf`, ... for f32;
  `tanh`, ... for f64), declared as private `func.func`s. These calls keep a loop scalar.

`library=libdevice` (the GPU pipeline's) names the calls after NVIDIA's libdevice instead
(`__nv_tanh`, `__nv_tanhf`, ...), which `xfuse.codegen.ptx` links into the PTX; its pow takes a
negative base itself (C's pow), so f64 pow calls it directly.

Before either, `fastmath`'s flags go on the program's float arithmetic, not on the ops marked
`ew.expansion` (`EXPANSION_ATTRIBUTE`: those `ew-fuse` wrote for sigmoid, log1p and softplus),
whose marks are dropped; and `-softplus(-x)` (log-sigmoid) in fusion's form loses its two
negations (`FoldNegatedSoftplus`).

`math.rsqrt` on f32 becomes `approx.rsqrt` with `math=approx` (the host's estimate and Newton
steps: the divider is the bottleneck of `1 / sqrt` in a vector loop) and `1 / math.sqrt` with
`math=libm` and on f64 (sqrt is an exact, vectorizable LLVM intrinsic); `math.sqrt`, `math.absf`,
`math.copysign` and `math.floor` stay for `ew-to-llvm`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from xfuse.dialects.failure import OpFailure
from xfuse.transforms import approx
from xfuse.transforms.options import CpuMath, MathLibrary, check_choice
from xfuse.transforms.pipeline import check_no_nested_module, declared_already
from xfuse.transforms.rewriting import located_walker
from xfuse.transforms.scalar import unmark_expansion
from xfuse.transforms.to_llvm import parse_fastmath


@dataclass(frozen=True)
class MathFunction:
    """How `ew-expand-math` lowers one `math` op (of f32 or f64 operands and result)."""

    libm: str
    """The C library function for f64 (`tanh`); f32 calls it with an `f` suffix (`tanhf`)."""
    approximation: Callable[..., SSAValue] | None = None
    """The f32 approximation of `math=approx`: a function of the operands that creates `arith`
    ops (`approx.expand` inserts them before the op) and returns the result. None: f32 calls the
    C library under `approx` too, as f64 does (libmvec's vector variants, `call_libmvec`)."""
    scales_result: bool = False
    """`approximation` takes `result_scale`, a power of two it multiplies its result by exactly
    (its numerator's coefficients): GELU's (0.5 x) (1 + f) is x (0.5 + f / 2) (`gelu_form`)."""
    gelu: Callable[[SSAValue, SSAValue], SSAValue] | None = None
    """GELU's (0.5 x) (1 + f(u)) (`gelu_form`) as a function of x and u, where that is cheaper
    than f's approximation: tanh's is x / (1 + 2^t) (`approx.gelu_of_tanh`)."""


MATH_FUNCTIONS: dict[type[Operation], MathFunction] = {
    math.ExpOp: MathFunction("exp", approx.exp),
    math.LogOp: MathFunction("log", approx.log),
    math.Log1pOp: MathFunction("log1p", approx.log1p),
    math.TanhOp: MathFunction("tanh", approx.tanh, gelu=approx.gelu_of_tanh),
    math.ErfOp: MathFunction("erf", approx.erf, scales_result=True),
    math.PowFOp: MathFunction("pow", approx.pow),
    math.SinOp: MathFunction("sin"),
    math.CosOp: MathFunction("cos"),
    math.TanOp: MathFunction("tan"),
    math.AsinOp: MathFunction("asin"),
    math.AcosOp: MathFunction("acos"),
    math.AtanOp: MathFunction("atan"),
    math.SinhOp: MathFunction("sinh"),
    math.CoshOp: MathFunction("cosh"),
    math.AsinhOp: MathFunction("asinh"),
    math.AcoshOp: MathFunction("acosh"),
    math.AtanhOp: MathFunction("atanh"),
    math.Exp2Op: MathFunction("exp2"),
    math.ExpM1Op: MathFunction("expm1"),
    math.Log2Op: MathFunction("log2"),
    math.Log10Op: MathFunction("log10"),
    math.CbrtOp: MathFunction("cbrt"),
    math.Atan2Op: MathFunction("atan2"),
}
"""The one table of the `math` ops this pass replaces: a scalar lowering (`SCALAR_LOWERINGS`)
that emits another transcendental `math` op needs an entry here (tests/test_op_facts.py says so)."""


def libm_name(op: Operation, type_: Attribute, library: MathLibrary = "libm") -> str:
    """The C library function for a math op on f32 (`tanhf`) or f64 (`tanh`); libdevice's
    (`__nv_tanhf`, `__nv_tanh`) with `library="libdevice"`."""
    base = MATH_FUNCTIONS[type(op)].libm
    if library == "libdevice":
        base = "__nv_" + base
    if isinstance(type_, Float32Type):
        return base + "f"
    if isinstance(type_, Float64Type):
        return base
    raise OpFailure(f"ew-expand-math: '{op.name}' on {type_}: only f32 and f64 have a lowering", op)


def libm_functions() -> set[str]:
    """Every C library function the expansion may call."""
    return {f.libm + suffix for f in MATH_FUNCTIONS.values() for suffix in ("", "f")}


def _erase_unused(values: Sequence[SSAValue], rewriter: PatternRewriter) -> None:
    """Erase the side-effect-free ops computing `values` that nothing uses any more, and theirs
    in turn: an approximation that reads its operand's operands (tanh of softplus reads softplus's
    argument) leaves the operand's ops behind."""
    for value in values:
        owner = value.owner
        if isinstance(owner, Operation) and is_trivially_dead(owner):
            operands = list(owner.operands)
            rewriter.erase(owner)
            _erase_unused(operands, rewriter)


def gelu_form(op: Operation) -> tuple[arith.MulfOp, SSAValue] | None:
    """The product and x where `op`'s value f is GELU's (0.5 x) (1 + f) (either order of each
    product and sum), f's and 1 + f's only use the next, x defined before `op`; else None. The
    product is x (0.5 + f / 2) bit for bit: 0.5 x and f / 2 are exact, 0.5 + f / 2 is
    (1 + f) / 2 rounded as 1 + f is, and both products are 0.5 x (1 + f) rounded once (or fused
    alike with an addition after). Only where 0.5 x is a denormal (|x| < 2^-125) can they
    differ, the new one rounding once. With f / 2 from f's approximation, the multiply by 0.5
    is gone (`MathFunction.scales_result`); a function with its own GELU (`MathFunction.gelu`)
    computes the product from x and f's operand instead."""
    sum_op = op.results[0].get_user_of_unique_use()
    if not isinstance(sum_op, arith.AddfOp) or approx.beside_constant(sum_op, 1) != op.results[0]:
        return None
    product = sum_op.result.get_user_of_unique_use()
    if not isinstance(product, arith.MulfOp):
        return None
    halving = (product.rhs if product.lhs == sum_op.result else product.lhs).owner
    x = approx.beside_constant(halving, 0.5) if isinstance(halving, arith.MulfOp) else None
    return (product, x) if x is not None and _defined_before(x, op) else None


def _defined_before(value: SSAValue, op: Operation) -> bool:
    """`value` can be used right before `op`: a block argument of an enclosing block, or the
    result of an op before it in its block."""
    owner = value.owner
    if isinstance(owner, Operation):
        return owner.parent_block() is op.parent_block() and owner.is_before_in_block(op)
    return owner.is_ancestor(op)


def _gelu_approximation(function: MathFunction, x: SSAValue) -> Callable[..., SSAValue]:
    """GELU's (0.5 x) (1 + f) as a function of f's operands: `function.gelu`'s, or else
    x (0.5 + f / 2) with f / 2 from f's approximation (`scales_result`)."""
    whole = function.gelu
    if whole is not None:
        return lambda u: whole(x, u)
    return lambda *arguments: approx.times_half_plus(
        x, function.approximation(*arguments, result_scale=0.5)
    )


@dataclass
class ExpandMath(RewritePattern):
    approximate: bool
    constants: approx.SharedConstants
    ldexp: bool = False
    """exp's 2**n by `llvm.ldexp` (`EwExpandMathPass.ldexp`)."""
    library: MathLibrary = "libm"
    libm_calls: dict[str, FunctionType] = field(default_factory=dict[str, FunctionType])
    """The libm functions called so far, with their type (to declare them afterwards)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        function = MATH_FUNCTIONS.get(type(op))
        if function is None:
            return
        type_ = op.results[0].type
        if (
            self.approximate
            and isinstance(type_, Float32Type)
            and function.approximation is not None
        ):
            gelu = gelu_form(op) if function.scales_result or function.gelu else None
            approximation, replaced = function.approximation, op
            if gelu is not None:
                replaced, x = gelu
                approximation = _gelu_approximation(function, x)
            unused = list(replaced.operands)
            expanded = approx.expand(approximation, op, self.constants, ldexp=self.ldexp)
            rewriter.replace(replaced, [], [expanded])
            _erase_unused(unused, rewriter)
            return
        name = libm_name(op, type_, self.library)
        self.libm_calls[name] = FunctionType.from_lists(op.operand_types, [type_])
        if self.approximate and self.library == "libm" and isinstance(op, math.PowFOp):
            # libmvec's pow of a negative base is its scalar fallback: pow of |x|, signed here.
            def of_magnitude(x: SSAValue, y: SSAValue) -> SSAValue:
                magnitude = func.CallOp(name, [math.AbsFOp(x).result, y], [type_]).res[0]
                return approx.signed_power(x, y, magnitude)

            rewriter.replace(op, [], [approx.expand(of_magnitude, op, self.constants)])
            return
        rewriter.replace(op, func.CallOp(name, list(op.operands), [type_]))


@dataclass(frozen=True)
class FoldNegatedSoftplus(RewritePattern):
    """-softplus(-x) (log-sigmoid) in fusion's form, -((-x > 0 ? -x : 0) + log1p(exp(-|-x|))),
    becomes (x < 0 ? x : -0) - log1p(exp(-|-x|)): no negation left (`vminps` and a subtraction
    on x86; LLVM folds |-x| to |x|). Exact: the first term is minus the old one in every case,
    and -(a + l) = -a - l in round-to-nearest except for a = -l = -0, which cannot happen with
    l = log1p(exp(...)) never -0; but for a NaN x's sign, which the subtraction passes on where
    the negation turned it (as LLVM's own fold of `a + -l` to `a - l` does: README, "What LLVM
    may do to a NaN")."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.NegfOp, rewriter: PatternRewriter) -> None:
        softplus = op.operand
        negated = approx.softplus_argument(softplus)
        if negated is None or not isinstance(negated.owner, arith.NegfOp):
            return
        assert isinstance(softplus.owner, arith.AddfOp)  # softplus_argument's form
        x, log1p = negated.owner.operand, softplus.owner.rhs
        # x < -0 is x < 0; comparing with the value selected makes it one `vminps`.
        minus_zero = arith.ConstantOp(FloatAttr(-0.0, x.type))
        negative = arith.CmpfOp(x, minus_zero, "olt")
        minimum = arith.SelectOp(negative, x, minus_zero)
        rewriter.replace(op, [minus_zero, negative, minimum, arith.SubfOp(minimum, log1p)])
        _erase_unused([softplus], rewriter)


SIMPLE_POWERS = (1.0, 2.0, 3.0, 4.0, -1.0, 0.5, -0.5)
"""The constant exponents y of pow(x, y) that `math=approx` computes without exp(y log|x|)
(`PowBySimpleConstant`)."""


def simple_power(exponent: float | None) -> float | None:
    """`exponent` where it is one of `SIMPLE_POWERS`, else None."""
    return exponent if exponent in SIMPLE_POWERS else None


def simple_power_of(op: math.PowFOp) -> float | None:
    """The exponent of `op` where it is a constant in `SIMPLE_POWERS` (so that
    `PowBySimpleConstant` computes the pow without exp(y log|x|)), else None."""
    exponent = op.rhs.owner
    if not isinstance(exponent, arith.ConstantOp) or not isinstance(exponent.value, FloatAttr):
        return None
    return simple_power(exponent.value.value.data)


@dataclass(frozen=True)
class PowBySimpleConstant(RewritePattern):
    """`math=approx`: pow(x, y) for a constant y in `SIMPLE_POWERS`, f32 or f64, without
    exp(y log|x|) (f32: 103 ops, in f64, within an ulp; f64: a libm or libmvec call):

    - y = 1, 2, 3, 4, -1: `math.fpowi`, which `ew-to-llvm` lowers to `llvm.powi` and LLVM to x,
      x * x, (x * x) * x, (x * x) * (x * x), 1 / x (exp(log|x|) was not always x: +inf at the
      largest float32). Each multiply rounds once: x, the square and 1 / x are pow's correctly
      rounded values, the cube and fourth power within 2 and 3 roundings
      (relative error below 2^-23 and 3 * 2^-24 in f32). An intermediate overflows only where
      x^n does (|x| > 1) and reaches the denormals only where x^n is 0 (|x| < 1). The multiplies
      carry no fast-math flags (an intrinsic's call cannot), so contraction never fuses the
      last one with the next op, which would hide an overflow: pow(x, 2) - 3e38 stays +inf at
      x = 2e19.
    - y = 1/2: |sqrt(x)| (correctly rounded), with x = -inf selected (+inf; sqrt gives NaN);
      the absolute value makes pow(-0, 1/2) +0, as C's pow. A negative x stays NaN.
    - y = -1/2: `math.rsqrt` (`ExpandRsqrt`: the host's estimate and a Newton step in f32,
      within ~0.5 ulp; 1 / sqrt(x) in f64), with +-0 selected (+inf; rsqrt(-0) is -inf) and
      -inf (+0; rsqrt gives NaN). A negative x stays NaN.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.PowFOp, rewriter: PatternRewriter) -> None:
        power = simple_power_of(op)
        if power is None:
            return
        if power.is_integer():
            whole = arith.ConstantOp(IntegerAttr(int(power), i32))
            rewriter.replace(op, [whole, math.FPowIOp(op.lhs, whole)])
            return
        type_ = op.result.type
        infinity = arith.ConstantOp(FloatAttr(float("inf"), type_))
        minus_infinity = arith.ConstantOp(FloatAttr(float("-inf"), type_))
        is_minus_infinity = arith.CmpfOp(op.lhs, minus_infinity, "oeq")
        ops: list[Operation] = [infinity, minus_infinity, is_minus_infinity]
        if power > 0:
            root = math.SqrtOp(op.lhs)
            magnitude = math.AbsFOp(root)
            ops += [root, magnitude, arith.SelectOp(is_minus_infinity, infinity, magnitude)]
        else:
            zero = arith.ConstantOp(FloatAttr(0.0, type_))
            estimate = math.RsqrtOp(op.lhs)
            is_zero = arith.CmpfOp(op.lhs, zero, "oeq")
            at_zero = arith.SelectOp(is_zero, infinity, estimate)
            ops += [zero, estimate, is_zero, at_zero]
            ops.append(arith.SelectOp(is_minus_infinity, zero, at_zero))
        rewriter.replace(op, ops)


@dataclass(frozen=True)
class ExpandRsqrt(RewritePattern):
    approximate: bool
    constants: approx.SharedConstants

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.RsqrtOp, rewriter: PatternRewriter) -> None:
        if self.approximate and isinstance(op.result.type, Float32Type):
            rewriter.replace(op, [], [approx.expand(approx.rsqrt, op, self.constants)])
            return
        one = arith.ConstantOp(FloatAttr(1.0, op.result.type))
        root = math.SqrtOp(op.operand)
        rewriter.replace(op, [one, root, arith.DivfOp(one, root)])


@dataclass(frozen=True)
class EwExpandMathPass(ModulePass):
    """Expand `math` transcendentals into approximations (`math=approx`) or libm calls."""

    name = "ew-expand-math"

    math: CpuMath = "approx"
    """`approx`: vectorizable f32 approximations; `libm`: calls to the C library."""

    ldexp: bool = False
    """With `math=approx`, exp applies its 2**n with one `llvm.ldexp` (AVX-512's `vscalefps`),
    the same bits as the integer ops that build 2**n otherwise: for hosts with AVX-512 only
    (elsewhere LLVM calls `ldexpf` for each element, and the loop stays scalar)."""

    fastmath: str = "none"
    """Fast-math flags joined to the program's float `addf`/`subf`/`mulf`/`divf`/`negf` before
    anything is expanded (`xfuse.compile`'s `fastmath`, spelled as `ew-to-llvm`'s): the
    approximations' own ops keep only theirs (`contract`), and the ops `ew-fuse` wrote for
    sigmoid, log1p and softplus (marked `ew.expansion`, which this pass drops) none, so `afn`
    leaves their divisions IEEE on the GPU too (NVPTX makes an f32 `fdiv afn` a
    `div.approx.f32`), where `ew-to-llvm`'s option would give the flags to every op, the
    approximations' included."""

    library: MathLibrary = "libm"
    """Whose functions the calls are: the C library's (`libm`), or NVIDIA's libdevice's
    (`libdevice`: `__nv_exp`, ...; the GPU pipeline's, linked into the PTX)."""

    def __post_init__(self) -> None:
        check_choice(self, "math", CpuMath)
        check_choice(self, "library", MathLibrary)
        parse_fastmath(self.fastmath, self.name)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        flags = {arith.FastMathFlag(f.value) for f in parse_fastmath(self.fastmath, self.name).data}
        # One look at every op gives the program's arithmetic its flags (not the ops of a
        # scalar form, which `ew-fuse` marked) and finds which rewrites can apply, and each of
        # the others skips its walk of the whole program (none makes an op another one matches).
        present: set[type[Operation]] = set()
        for nested in op.walk():
            present.add(type(nested))
            if not unmark_expansion(nested) and flags:
                approx.add_fastmath(nested, flags)
        approximate = self.math == "approx"
        if arith.NegfOp in present:
            located_walker(FoldNegatedSoftplus(), apply_recursively=False).rewrite_module(op)
        if approximate and math.PowFOp in present:
            located_walker(PowBySimpleConstant(), apply_recursively=False).rewrite_module(op)
            present.add(math.RsqrtOp)  # pow(x, -1/2) may have made one
        constants = approx.SharedConstants()
        expand = ExpandMath(approximate, constants, ldexp=self.ldexp, library=self.library)
        if not present.isdisjoint(MATH_FUNCTIONS):
            # Last op first: an approximation may look at the math op that computes its operand
            # (log1p of exp(-|y|) knows its range), so that op must not be expanded yet.
            located_walker(expand, apply_recursively=False, walk_reverse=True).rewrite_module(op)
        if math.RsqrtOp in present:
            located_walker(
                ExpandRsqrt(approximate, constants), apply_recursively=False
            ).rewrite_module(op)
        if expand.libm_calls:
            check_no_nested_module(op, self.name)
        for name, type_ in sorted(expand.libm_calls.items()):
            declaration = func.FuncOp.external(name, type_.inputs.data, type_.outputs.data)
            if not declared_already(op, declaration, self.name):
                op.body.block.add_op(declaration)
