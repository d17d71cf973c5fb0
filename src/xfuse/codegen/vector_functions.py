"""Vector functions of xfuse's own that a vectorized loop calls where it calls the C library
(LLVM IR, built with llvmlite; `xfuse.codegen.native.call_libmvec` puts them in a kernel's module):

- `own_sine`: f32 sin and cos on hosts with FMA, inlined into the loop after vectorization
  (`alwaysinline`, `xfuse.codegen.native.run_llvm_pipeline`): a reduction by pi/2 in float32
  and a sine and a cosine polynomial, with a branch, taken only where a lane's |x| exceeds
  `OWN_REDUCTION_LIMIT` (or is NaN), to the function for large arguments;
- `trigonometric_of_large_arguments`: sin, cos and tan of |x| beyond glibc's fast path, reduced
  in f64, around libmvec's variant;
- `within_one`: libmvec's sin and cos clamped to [-1, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import llvmlite.ir as llvm_ir


class FunctionAttributes(llvm_ir.values.FunctionAttributes):
    """Function attributes as LLVM IR spells them, any of them: llvmlite takes only those it
    lists, which lack LLVM's `willreturn`, `memory(...)` and string attributes."""

    def add(self, name: str) -> None:
        set.add(self, name)


def _pure_function(
    module: llvm_ir.Module, like: llvm_ir.Function, suffix: str, *attributes: str
) -> llvm_ir.Function:
    """An internal function of `module` of `like`'s type, named after it with `suffix`, that
    neither touches memory nor unwinds, with LLVM's `attributes` too."""
    function = llvm_ir.Function(module, like.ftype, f"{like.name}{suffix}")
    function.linkage = "internal"
    function.attributes = FunctionAttributes(
        [*attributes, "nounwind", "willreturn", "memory(none)"]
    )
    return function


@dataclass(frozen=True)
class LargeArguments:
    """How `call_libmvec` computes an f32 trigonometric function of large arguments itself
    (`trigonometric_of_large_arguments`): glibc's variants take the scalar function, or a slow
    path, beyond |x| = `libmvec_limit` (`sinf`: 12-13 ns per element against 0.3;
    docs/benchmarks.md)."""

    libmvec_limit: float
    """Where the variant's fast path ends (glibc 2.36, its AVX-512 and AVX2 variants alike)."""
    quarter_turns: int = 0
    """sin(x + this pi/2) is the function: cos is sin a quarter turn on."""
    tangent: bool = False
    """The function is sin / cos (then `quarter_turns` is 0)."""


LARGE_ARGUMENTS = {
    "sinf": LargeArguments(10000.0),
    "cosf": LargeArguments(10000.0, quarter_turns=1),
    "tanf": LargeArguments(8192.0, tangent=True),
}
"""The f32 functions whose large arguments `call_libmvec` reduces itself."""

WITHIN_ONE = frozenset({"sin", "cos", "sinf", "cosf"})
"""The functions of values in [-1, 1], which glibc's variants leave by an ulp (f32 `sin` of
1.570681 was 1.0000001, f64 `cos` of 2302.7874150871507 -1.0000000000000002: `asin(sin(x))`
NaN): `call_libmvec` clamps them (`within_one`)."""

REDUCED_BELOW = 2.0**40
"""Below this |x| the f64 reduction x - n pi/2, pi/2 in two parts by FMAs (`_HALF_PI`), is
within 2^-69 of exact: x - n times the first part is exact (it fits 53 bits while n times the
second is below 1), its sum with n times the second rounds once, and the rest of pi/2, 1.5e-33,
times n < 2^40 is 1.6e-21, where the float32 nearest to a multiple of pi/2 in this range leaves
|r| = 2.0e-9 (21999384576: found by continued fractions, 2026-12-05). Beyond it, libmvec's own
path."""
_TWO_OVER_PI = 0.6366197723675814
_HALF_PI = (1.5707963267948966, 6.123233995736766e-17)
"""pi/2 as the sum of two f64s (the second the rest, rounded; the next part is -1.5e-33)."""
_SIN_TAYLOR = (-1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800)
"""sin(r) = r + r^3 (c0 + r^2 (c1 + ...)): through r^11, within 1e-11 relative on |r| <= pi/4."""
_COS_TAYLOR = (-1 / 2, 1 / 24, -1 / 720, 1 / 40320, -1 / 3628800, 1 / 479001600)
"""cos(r) = 1 + r^2 (c0 + r^2 (c1 + ...)): through r^12, within 4e-13 on |r| <= pi/4."""
_ROUNDING_MAGIC = 1.5 * 2.0**52
"""t + this - this is t rounded to an integer (|t| < 2^51), whose low bits are its sum's."""


def _intrinsic(module: llvm_ir.Module, name: str, ftype: llvm_ir.FunctionType) -> llvm_ir.Function:
    """The module's declaration of the intrinsic `name`, declared if it has none (llvmlite's
    `Module.declare_intrinsic` names no vector type)."""
    found = module.globals.get(name)
    return found if found is not None else llvm_ir.Function(module, ftype, name)


def _any_lane(builder: llvm_ir.IRBuilder, lanes_mask: llvm_ir.Value, name: str) -> llvm_ir.Value:
    """Whether a lane of `lanes_mask` is set, as a condition a branch may take (`_frozen`)."""
    bits = builder.bitcast(lanes_mask, llvm_ir.IntType(lanes_mask.type.count), name=f"{name}.bits")
    return _frozen(builder, builder.icmp_unsigned("!=", bits, bits.type(0)), name)


def _frozen(builder: llvm_ir.IRBuilder, condition: llvm_ir.Value, name: str) -> llvm_ir.Value:
    """`condition` through LLVM's `freeze`, for a branch: in a masked remainder loop the
    argument's masked-off lanes are a masked load's poison, and a branch on poison is undefined
    behaviour, where a frozen one goes either way, both right for the lanes that are stored
    (llvmlite's builder has no `freeze`; the generic instruction prints as one)."""
    frozen = llvm_ir.Instruction(builder.block, condition.type, "freeze", [condition], name)
    builder._insert(frozen)  # (no public way to insert at the builder's position)
    return frozen


def trigonometric_of_large_arguments(
    module: llvm_ir.Module, variant: llvm_ir.Function, large: LargeArguments
) -> llvm_ir.Function:
    """A vector function like libmvec's `variant` (of `sinf`, `cosf` or `tanf`, `large` says
    which) that computes the lanes of |x| beyond its limit and below `REDUCED_BELOW` in f64
    itself, behind a branch taken only if a lane is there, and the others with `variant` (to
    which those lanes pass 0, so that it never takes its slow path for them): x = n pi/2 + r
    with r within 2^-69 (`REDUCED_BELOW`), sin r and cos r by their Taylor series, the
    function of them n mod 4 asks for (with its sign; tan's one division), rounded once to f32
    (within half an ulp and ~1e-11). An element's result depends on its value alone, whatever
    lanes share its vector."""
    vector = variant.ftype.return_type
    lanes = vector.count
    doubles = llvm_ir.VectorType(llvm_ir.DoubleType(), lanes)
    longs = llvm_ir.VectorType(llvm_ir.IntType(64), lanes)
    function = _pure_function(module, variant, ".xfuse")
    (x,) = function.args
    x.name = "x"
    entry = function.append_basic_block("entry")
    plain = function.append_basic_block("plain")
    beyond_limit = function.append_basic_block("beyond_limit")
    reduce = function.append_basic_block("reduce")
    mixed = function.append_basic_block("mixed")
    builder = llvm_ir.IRBuilder(entry)

    def doubles_of(value: float) -> llvm_ir.Constant:
        return doubles([value] * lanes)

    fabs = _intrinsic(module, f"llvm.fabs.v{lanes}f32", llvm_ir.FunctionType(vector, [vector]))
    fma = _intrinsic(module, f"llvm.fma.v{lanes}f64", llvm_ir.FunctionType(doubles, [doubles] * 3))
    # The common case costs a compare and a branch: no lane beyond the limit.
    magnitude = builder.call(fabs, [x], name="magnitude")
    beyond = builder.fcmp_ordered(">", magnitude, vector([large.libmvec_limit] * lanes))
    builder.cbranch(_any_lane(builder, beyond, "beyond"), beyond_limit, plain)
    builder.position_at_end(plain)
    builder.ret(builder.call(variant, [x], name="library"))

    builder.position_at_end(beyond_limit)
    below = builder.fcmp_ordered("<", magnitude, vector([REDUCED_BELOW] * lanes))
    reduced = builder.and_(beyond, below, name="reduced")
    builder.cbranch(_any_lane(builder, reduced, "reduced"), reduce, plain)

    builder.position_at_end(reduce)
    wide = builder.fpext(x, doubles, name="wide")
    shifted = builder.fadd(
        builder.fmul(wide, doubles_of(_TWO_OVER_PI)), doubles_of(_ROUNDING_MAGIC), name="shifted"
    )
    n = builder.fsub(shifted, doubles_of(_ROUNDING_MAGIC), name="n")
    minus_n = builder.fneg(n, name="minus_n")
    r = builder.call(fma, [minus_n, doubles_of(_HALF_PI[0]), wide], name="r1")
    r = builder.call(fma, [minus_n, doubles_of(_HALF_PI[1]), r], name="r")
    r2 = builder.fmul(r, r, name="r2")

    def series(coefficients: Sequence[float]) -> llvm_ir.Instruction:
        value = doubles_of(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            value = builder.call(fma, [value, r2, doubles_of(coefficient)])
        return value

    sine = builder.call(fma, [builder.fmul(r, r2), series(_SIN_TAYLOR), r], name="sine")
    cosine = builder.call(fma, [r2, series(_COS_TAYLOR), doubles_of(1.0)], name="cosine")
    quadrant = builder.add(
        builder.bitcast(shifted, longs), longs([large.quarter_turns] * lanes), name="quadrant"
    )

    def bit_set(bit: int) -> llvm_ir.Value:
        masked = builder.and_(quadrant, longs([bit] * lanes))
        return builder.icmp_unsigned("!=", masked, longs([0] * lanes))

    odd = bit_set(1)
    if large.tangent:  # tan(r + n pi/2) = tan r, or -1 / tan r for odd n
        numerator = builder.select(odd, cosine, sine, name="numerator")
        denominator = builder.select(odd, sine, cosine, name="denominator")
        value = builder.fdiv(numerator, denominator, name="value")
        value = builder.select(odd, builder.fneg(value), value, name="signed")
    else:
        value = builder.select(odd, cosine, sine, name="value")
        value = builder.select(bit_set(2), builder.fneg(value), value, name="signed")
    narrow = builder.fptrunc(value, vector, name="narrow")
    reduced_bits = builder.bitcast(reduced, llvm_ir.IntType(lanes))
    all_reduced = builder.icmp_unsigned("==", reduced_bits, reduced_bits.type(-1))
    with builder.if_then(_frozen(builder, all_reduced, "all_reduced")):
        builder.ret(narrow)
    builder.branch(mixed)

    builder.position_at_end(mixed)
    # The other lanes through `variant`: those lanes alone (0 in these, never its scalar path).
    zeros = vector([0.0] * lanes)
    library = builder.call(variant, [builder.select(reduced, zeros, x)], name="others.library")
    builder.ret(builder.select(reduced, narrow, library, name="merged"))
    return function


def within_one(module: llvm_ir.Module, variant: llvm_ir.Function) -> llvm_ir.Function:
    """A vector function like `variant` whose results beyond ±1 are ±1 (NaN kept: an ordered
    compare), for a function of `WITHIN_ONE`."""
    vector = variant.ftype.return_type
    lanes = vector.count
    suffix = f"v{lanes}{'f32' if isinstance(vector.element, llvm_ir.FloatType) else 'f64'}"
    function = _pure_function(module, variant, ".within_one")
    builder = llvm_ir.IRBuilder(function.append_basic_block("entry"))
    result = builder.call(variant, list(function.args), name="library")
    fabs = _intrinsic(module, f"llvm.fabs.{suffix}", llvm_ir.FunctionType(vector, [vector]))
    copysign = _intrinsic(
        module, f"llvm.copysign.{suffix}", llvm_ir.FunctionType(vector, [vector, vector])
    )
    ones = vector([1.0] * lanes)
    beyond = builder.fcmp_ordered(">", builder.call(fabs, [result]), ones, name="beyond")
    one = builder.call(copysign, [ones, result], name="one")
    builder.ret(builder.select(beyond, one, result, name="within"))
    return function


OWN_REDUCTION_LIMIT = 10000.0
"""The largest |x| that `own_sine` reduces in float32 (the fast path of glibc's variants ends
there too); beyond it the lanes go to `trigonometric_of_large_arguments`."""

_TWO_OVER_PI_F32 = 0.6366197466850281
"""The float32 nearest to 2 / pi."""

_HALF_PI_PARTS = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15)
"""pi/2 as three float32s, each the one nearest to what the parts before it leave (the rest
after them, 1.1e-23, times n <= 6367 is 7e-20). With FMAs |x| - n times the first is exact (for
|x| >= 1 a multiple of 2^-23 below 1; below 1 n is 0 or 1 and the difference fits 24 bits),
and each further step rounds once."""

_SINE_POLYNOMIAL = (-0.16666655242443085, 0.008332161232829094, -0.0001951516605913639)
"""sin r = r + r^3 (c0 + r^2 (c1 + r^2 c2)) on |r| <= pi/4 + 0.001 (the reduction's r): a
minimax fit of the relative error, rounded to float32, within 0.067 float32 ulps of the bound
(2^-23 relative) in exact arithmetic."""

_COSINE_POLYNOMIAL = (0.04166664555668831, -0.0013887322274968028, 2.4433615180896595e-05)
"""cos r = 1 - r^2 / 2 + r^4 (c0 + r^2 (c1 + r^2 c2)) on |r| <= pi/4 + 0.001, fitted so:
within 0.002 float32 ulps of the bound in exact arithmetic."""

_ROUNDING_MAGIC_F32 = 1.5 * 2.0**23
"""v + this - this is v rounded to an integer (|v| < 2^22), whose low bits are its sum's."""


def own_sine(
    module: llvm_ir.Module, beyond_limit: llvm_ir.Function, quarter_turns: int
) -> llvm_ir.Function:
    """xfuse's own vector f32 sin (`quarter_turns` 0) or cos (1) of `beyond_limit`'s type, for
    hosts with FMA; `beyond_limit` (the function for large arguments, around libmvec's variant)
    computes the lanes of |x| beyond `OWN_REDUCTION_LIMIT` (and infinities and NaNs, whose
    bits the C library's variant keeps), behind a branch taken only where a vector has one,
    through a function of LLVM's `preserve_allcc` (GCC's and clang's
    `__attribute__((preserve_all))`): the loop keeps its registers, and nothing is spilled in
    it for the call that never comes (with AVX-512, whose zmm registers `preserve_allcc` does
    not cover, the branch's cold block saves them).

    |x| = n pi/2 + r with n = round(|x| 2/pi), |r| <= pi/4 (r by FMAs with pi/2 in three parts,
    `_HALF_PI_PARTS`), and sin |x| or cos |x| is sin r or cos r (`_SINE_POLYNOMIAL`,
    `_COSINE_POLYNOMIAL`) as quadrant q = n + `quarter_turns` says: the cosine where q is odd,
    negated where q's second bit is set (and, sin being odd, where x is negative), by integer
    ops on the bits. Where sin or cos is 1 it is the cosine polynomial of r near 0: cos(+-0)
    is exactly 1, as sin of the float32 nearest pi/2 (one polynomial on |r| <= pi/2 gave
    0.99999994); +-0 keeps its sign in sin.
    Over every float32 up to the limit, both signs, sin was within 1.012 float32 ulps of the
    bound (2^-23 relative) and cos within 1.017, where glibc's variants were at their largest
    too (the reduction's rounding of r and the result's, each up to half an ulp relative), and
    never beyond +-1 (docs/math.md)."""
    vector = beyond_limit.ftype.return_type
    lanes = vector.count
    words = llvm_ir.VectorType(llvm_ir.IntType(32), lanes)
    function = _pure_function(module, beyond_limit, ".own", "alwaysinline")
    (x,) = function.args
    x.name = "x"
    entry = function.append_basic_block("entry")
    large = function.append_basic_block("large")
    done = function.append_basic_block("done")
    builder = llvm_ir.IRBuilder(entry)

    def splat(value: float) -> llvm_ir.Constant:
        return vector([value] * lanes)

    def integers(value: int) -> llvm_ir.Constant:
        return words([value] * lanes)

    def polynomial(variable: llvm_ir.Value, coefficients: Sequence[float]) -> llvm_ir.Value:
        value: llvm_ir.Value = splat(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            value = builder.call(fma, [value, variable, splat(coefficient)])
        return value

    fabs = _intrinsic(module, f"llvm.fabs.v{lanes}f32", llvm_ir.FunctionType(vector, [vector]))
    fma = _intrinsic(module, f"llvm.fma.v{lanes}f32", llvm_ir.FunctionType(vector, [vector] * 3))
    magnitude = builder.call(fabs, [x], name="magnitude")
    shifted = builder.call(
        fma, [magnitude, splat(_TWO_OVER_PI_F32), splat(_ROUNDING_MAGIC_F32)], name="shifted"
    )
    minus_n = builder.fsub(splat(_ROUNDING_MAGIC_F32), shifted, name="minus_n")
    r = magnitude
    for part in _HALF_PI_PARTS:
        r = builder.call(fma, [minus_n, splat(part), r])
    r2 = builder.fmul(r, r, name="r2")
    sine = builder.call(fma, [builder.fmul(r, r2), polynomial(r2, _SINE_POLYNOMIAL), r])
    cosine = builder.call(
        fma,
        [r2, builder.call(fma, [r2, polynomial(r2, _COSINE_POLYNOMIAL), splat(-0.5)]), splat(1)],
    )
    quadrant = builder.add(builder.bitcast(shifted, words), integers(quarter_turns), "quadrant")
    odd = builder.icmp_unsigned("!=", builder.and_(quadrant, integers(1)), integers(0))
    value = builder.select(odd, cosine, sine, name="value")
    sign = builder.and_(builder.shl(quadrant, integers(30)), integers(-(2**31)), name="sign")
    if not quarter_turns:
        sign = builder.xor(sign, builder.and_(builder.bitcast(x, words), integers(-(2**31))))
    own = builder.bitcast(builder.xor(builder.bitcast(value, words), sign), vector, name="own")
    # Unordered: a NaN takes the branch too, and comes back with its sign and payload.
    beyond = builder.fcmp_unordered(">", magnitude, splat(OWN_REDUCTION_LIMIT), name="beyond")
    branch = builder.cbranch(_any_lane(builder, beyond, "beyond"), large, done)
    branch.set_weights([1, 1 << 20])  # cold: laid out away from the loop
    builder.position_at_end(done)
    builder.ret(own)
    builder.position_at_end(large)
    cold = _pure_function(module, beyond_limit, ".cold", "noinline", "cold")
    cold.calling_convention = "preserve_allcc"
    cold_builder = llvm_ir.IRBuilder(cold.append_basic_block("entry"))
    cold_builder.ret(cold_builder.call(beyond_limit, list(cold.args)))
    library = builder.call(cold, [x], name="large", cconv="preserve_allcc")
    builder.ret(builder.select(beyond, library, own, name="merged"))
    return function
