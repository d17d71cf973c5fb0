"""Random elementwise programs: differential testing against numpy, and the verified pipeline.

A hypothesis strategy builds random programs (DAGs of up to 40 ops over every op of the dialect,
shared subexpressions, constants from 0 to huge and denormal, several outputs) and random float32
inputs with special values (±0, ±inf, NaN, denormals, huge). Each program is compiled fused and
unfused, with `math="libm"` and `math="approx"`, and run at lengths 0, 1, 15, 17 and, for one
program in five, 2^12 + 3 (one compiled kernel per variant, reused across lengths).

The oracle: float32 semantics, one op at a time
-----------------------------------------------
The reference evaluates the program op by op in float64 on float32 data and rounds every result to
float32 (constants too, as kernels do), so overflow to inf, underflow and NaN appear where a float32
program has them. Each value is a *ball*: a center (that reference) and a radius bounding how far
xfuse's value may legitimately be from it. A result's radius is the spread of the op over its
operands' balls (evaluated at the 3 (unary) or 9 (binary) combinations of center and center ±
radius, all ops here being monotonic or piecewise so between those points), plus the op's own
error: its `ACCURACY` in the `ew` dialect (1 float32 ulp for arithmetic, the documented bounds of
docs/math.md with headroom for the transcendentals). Cancellation, error amplification by exp or
pow, division by small numbers: all grow the radius exactly where the computation is
ill-conditioned.

Where IEEE decides a value bit for bit the radius is 0 and the check is exact, sign of zero
included: inputs and constants; + - * / sqrt (correctly rounded) and neg, abs, max, min, relu
(exact; max and min order -0 below +0, as LLVM's maximum/minimum) of exact operands; ±0 times a
finite value of known sign; the special cases of the other functions on exact ±0, ±inf or NaN that
give ±0 or ±inf (tanh(-0) = -0, exp(-inf) = +0, rsqrt(-0) = -inf, pow(-0, 3) = -0, ...). A sum
of a product is exact too: the program's own arithmetic is never contracted into an FMA (the
default `fastmath="none"`).

Where xfuse and float64 numpy may legitimately disagree the value is *undecided* (radius inf), and
everything computed from it is not checked:
- the ball spans a change of class (finite / +inf / -inf / NaN): log or sqrt of a value that may be
  negative, a pow of a negative base whose exponent may or may not be an integer (an integer
  anywhere in the exponent's ball, not only at a corner), a pow of a NaN exponent whose base may
  be exactly 1, a result within the error of float32 overflow, `==` or `!=` of operands whose
  balls overlap (they may be equal at one point no corner hits: `(x < 0) + tanh(x) == -0`);
- the operand is a zero of unknown sign (a ball that holds 0 and is not exact) where its sign
  decides the result: division by it, pow of it with a negative exponent, rsqrt of it;
- copysign's sign operand is a NaN: IEEE leaves a NaN's sign open but for the sign ops
  themselves, and numpy's log(-1) or a NaN through softplus may carry the other sign than
  xfuse's (copysign(0, log(-1)) was -0 in numpy, +0 in xfuse).
Everything else is checked: a NaN center demands NaN, an inf center the same inf, a finite center
a finite value within the radius (the same value, and the same sign of zero, where it is exact).
`test_the_oracle_*` show the check does fail on a wrong op, a wrong NaN, a wrong inf and a wrong
sign of zero, and checks every element of well-conditioned programs.

`pytest` runs 150 examples, each program in one variant (hypothesis profile `ci`, conftest.py);
`pytest -m slow --hypothesis-profile=fuzz` runs the long fuzz (every program in all four variants).

The verified pipeline
---------------------
The same programs, and the lecture's, go through the default pipeline and the unfused one pass by
pass: the module verifies after every pass, and its printed IR (custom and generic form) parses
back to a structurally equal module that prints the same text.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

import xfuse
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime.compiler import Options
from xfuse.transforms.pipeline import pipeline_context

FLOAT32_MAX = float(np.finfo(np.float32).max)
TINY = 2.0**-149
"""The smallest float32 denormal: the absolute rounding error of any op near zero."""
ULP = ew.FLOAT32_ULP
LENGTHS = (0, 1, 15, 17)
LONG = 2**12 + 3
"""Inputs of one program in five: many vector iterations, an odd remainder (a longer one only
makes the float64 oracle slower)."""


ARITHMETIC = ew.CORRECTLY_ROUNDED.libm
"""One float32 ulp: the error a correctly rounded op may add."""


# ---------------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One value of a program: an input, a constant, or an op applied to earlier nodes."""

    kind: str  # "input", "constant" or "op"
    op: ew.ElementwiseOpType | None = None
    operands: tuple[int, ...] = ()
    value: float = 0.0


@dataclass(frozen=True)
class Program:
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]

    def name(self, index: int) -> str:
        return f"x{index}" if self.nodes[index].kind == "input" else f"t{index}"

    @property
    def output_names(self) -> list[str]:
        return [self.name(index) for index in self.outputs]

    def source(self) -> str:
        lines = []
        for index, node in enumerate(self.nodes):
            if node.kind == "constant":
                lines.append(f"t{index} = {node.value!r};")
            elif node.kind == "op":
                lines.append(f"t{index} = {self._expression(node)};")
        return "\n".join(lines) + "\n"

    def _expression(self, node: Node) -> str:
        assert node.op is not None
        args = [self.name(i) for i in node.operands]
        infix = {ew.AddOp: "+", ew.SubOp: "-", ew.MulOp: "*", ew.DivOp: "/"}.get(node.op)
        if infix is not None:
            return f"{args[0]} {infix} {args[1]}"
        if node.op is ew.NegOp and node.operands[0] % 2:  # both spellings of negation
            return f"-{args[0]}"
        return f"{ew.mnemonic(node.op)}({', '.join(args)})"


CONSTANTS = (
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    3.0,
    -2.5,
    1e-30,
    -1e-40,
    1e-50,
    1e30,
    -3e38,
    1e39,
    88.0,
)
"""Zero, integers (pow's special cases), tiny, denormal, underflowing, huge, overflowing."""


@st.composite
def programs(draw: st.DrawFn, max_ops: int = 40) -> Program:
    nodes = [Node("input") for _ in range(draw(st.integers(1, 4)))]
    for _ in range(draw(st.integers(1, max_ops))):
        if draw(st.integers(0, 9)) == 0:
            value = draw(
                st.sampled_from(CONSTANTS)
                | st.floats(-1e6, 1e6, allow_subnormal=False).map(lambda v: float(np.float32(v)))
            )
            nodes.append(Node("constant", value=value))
            continue
        op = draw(st.sampled_from(ew.ELEMENTWISE_OPS))
        arity = ew.arity(op)
        # Recent values (deep chains), any earlier one (shared subexpressions), or a constant
        # (constant subexpressions are folded at compile time, and must agree with run time).
        last = len(nodes) - 1
        choices = st.integers(max(0, last - 3), last) | st.integers(0, last)
        constants = [i for i, node in enumerate(nodes) if node.kind == "constant"]
        if constants:
            choices |= st.sampled_from(constants)
        operands = tuple(draw(choices) for _ in range(arity))
        nodes.append(Node("op", op, operands))
    computed = [i for i, node in enumerate(nodes) if node.kind != "input"]
    # Outputs may be inputs (a copy kernel), but only those the program reads: others don't exist.
    read = sorted({i for node in nodes for i in node.operands if nodes[i].kind == "input"})
    outputs = draw(st.lists(st.sampled_from(computed + read), max_size=2))
    # The last node is always an output; outputs are distinct.
    return Program(tuple(nodes), tuple(dict.fromkeys([len(nodes) - 1, *outputs])))


SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -1e-40, FLOAT32_MAX, -1.0, 1.0, 2.0],
    dtype=np.float32,
)
INPUT_KINDS = ("normal", "wide", "positive", "integers")


def make_input(rng: np.random.Generator, kind: str, special_rate: float, n: int) -> np.ndarray:
    """Float32 data of one kind, with a fraction of special values at random positions."""
    if kind == "normal":
        data = rng.standard_normal(n) * 3
    elif kind == "wide":  # every magnitude from denormals to near overflow, both signs
        data = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-44, 38, n)
    elif kind == "positive":
        data = rng.uniform(0.0, 10.0, n)
    else:
        data = rng.integers(-4, 5, n).astype(np.float64)
    special = rng.random(n) < special_rate
    data[special] = rng.choice(SPECIALS, int(special.sum()))
    return data.astype(np.float32)


@st.composite
def input_sets(draw: st.DrawFn, count: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return [
        make_input(
            rng,
            draw(st.sampled_from(INPUT_KINDS)),
            draw(st.sampled_from([0.0, 0.03, 0.3])),
            n,
        )
        for _ in range(count)
    ]


# ---------------------------------------------------------------------------------------------
# The reference: float32 semantics with error balls
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ball:
    """Reference values (float32 numbers held in float64) and how far xfuse may be from each.

    radius is 0 where the value is exact: IEEE decides it bit for bit (sign of zero included), as
    for a decided NaN or ±inf; it is inf where the result is undecided.
    """

    center: np.ndarray
    radius: np.ndarray

    @property
    def undecided(self) -> np.ndarray:
        return np.isinf(self.radius)

    @property
    def exact(self) -> np.ndarray:
        return self.radius == 0


def round32(values: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(values, np.float64).astype(np.float32).astype(np.float64)


def _classify(values: np.ndarray) -> np.ndarray:
    """0 finite, 1 +inf, 2 -inf, 3 NaN."""
    return np.select([np.isnan(values), values == np.inf, values == -np.inf], [3, 1, 2], 0)


def _reference(op: ew.ElementwiseOpType, *args: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if op is ew.ErfOp:  # math.erf is a Python loop: evaluate each distinct value once
            bits = np.array(args[0], np.float64).view(np.uint64)  # keeps -0 and +0 apart
            distinct, positions = np.unique(bits, return_inverse=True)
            return op.reference(distinct.view(np.float64))[positions.reshape(bits.shape)]
        return op.reference(*args)


def _zero_of_unknown_sign(ball: Ball) -> np.ndarray:
    """The ball holds 0 but the value is not exact: +0, -0 and tiny values of either sign."""
    return (np.abs(ball.center) <= ball.radius) & ~ball.exact


def _sign_of_zero_matters(op: ew.ElementwiseOpType, args: Sequence[Ball]) -> np.ndarray:
    """Results that divide by a zero of unknown sign (an exact zero's sign is IEEE's)."""
    if op is ew.DivOp:
        return _zero_of_unknown_sign(args[1]) & ~np.isnan(args[0].center)
    if op is ew.PowOp:
        with np.errstate(invalid="ignore"):
            return _zero_of_unknown_sign(args[0]) & ~(args[1].center - args[1].radius >= 0)
    if op is ew.RsqrtOp:
        return _zero_of_unknown_sign(args[0])
    return np.zeros((), bool)


CORRECTLY_ROUNDED: frozenset[ew.ElementwiseOpType] = frozenset(
    {ew.AddOp, ew.SubOp, ew.MulOp, ew.DivOp, ew.SqrtOp}
    | {ew.NegOp, ew.AbsOp, ew.MaxOp, ew.MinOp, ew.ReluOp}  # exact
    | {ew.LtOp, ew.LeOp, ew.GtOp, ew.GeOp, ew.EqOp, ew.NeOp, ew.SelectOp}  # exact
    | {ew.FloorOp, ew.CeilOp, ew.TruncOp, ew.RintOp}  # exact
)
"""Ops whose float32 result IEEE decides bit for bit from their operands (float64 then rounded
to float32 is innocuous double rounding for + - * / sqrt)."""


def _is_special(values: np.ndarray) -> np.ndarray:
    return (values == 0) | ~np.isfinite(values)


def _exact(op: ew.ElementwiseOpType, args: Sequence[Ball], center: np.ndarray) -> np.ndarray:
    """Where the result is exact: see `Ball`."""
    operands_exact = functools.reduce(np.logical_and, [a.exact for a in args])
    if op in CORRECTLY_ROUNDED:
        exact = operands_exact
        if op is ew.MulOp:  # ±0 times a nonzero finite value of known sign: a zero of known sign
            for zero, other in (args, args[::-1]):
                known_sign = np.isfinite(other.center) & (np.abs(other.center) > other.radius)
                exact = exact | (zero.exact & (zero.center == 0) & known_sign)
        return exact
    # The IEEE special cases of the other functions on ±0, ±inf and NaN: tanh(-0) = -0,
    # exp(-inf) = +0, log(0) = -inf, rsqrt(-0) = -inf, pow(-0, 3) = -0, pow(0.5, inf) = +0, ...
    special_operand = functools.reduce(
        np.logical_or, [a.exact & _is_special(a.center) for a in args]
    )
    return operands_exact & special_operand & _is_special(center)


def _class_may_flip_between_corners(op: ew.ElementwiseOpType, args: Sequence[Ball]) -> np.ndarray:
    """pow of a negative or NaN base is finite only at integer exponents, NaN between them; pow
    of a NaN exponent is NaN except at a base of exactly 1 (pow(1, NaN) = 1); `==` and `!=` of
    balls that overlap hold at their one common value (`(x < 0) + tanh(x) == -0` at x = -9.5:
    1 + tanh(x) is 6e-8 in numpy, 0 within approx tanh's error, the fuzz found); `select` of a
    condition whose ball holds 0 (`select(log(tanh(8.5)), 1, 2)`: approx tanh is 1 there); sin,
    cos and tan of a ball holding an extremum or a pole (`cos(exp(17.0002))`: exp within its
    error moves the angle by radians), which no corner need see.

    The corners miss an integer strictly inside the exponent's ball: pow(-1, 3e-45 ± 7e-7) is NaN
    at all three, but erf(2.8e-45) within its error may be 0, and pow(-1, 0) is 1. Likewise
    pow(0.99999994 ± 1e-7, NaN) is NaN at all three, but the base may be 1.
    """
    if op in (ew.EqOp, ew.NeOp):  # equal at one point inside the balls, which no corner hits
        lhs, rhs = args
        with np.errstate(invalid="ignore"):
            inexact = (lhs.radius > 0) | (rhs.radius > 0)
            return inexact & (np.abs(lhs.center - rhs.center) <= lhs.radius + rhs.radius)
    if op is ew.SelectOp:  # a condition that may be 0 at one point inside its ball
        condition = args[0]
        with np.errstate(invalid="ignore"):
            return (condition.radius > 0) & (np.abs(condition.center) <= condition.radius)
    if op in (ew.SinOp, ew.CosOp, ew.TanOp):  # not monotonic: an extremum or a pole inside
        (angle,) = args
        with np.errstate(invalid="ignore"):
            low, high = angle.center - angle.radius, angle.center + angle.radius
            return (angle.radius > 0) & (
                np.floor(low / (np.pi / 2)) != np.floor(high / (np.pi / 2))
            )
    if op is not ew.PowOp:
        return np.zeros((), bool)
    base, exponent = args
    with np.errstate(invalid="ignore"):
        low, high = exponent.center - exponent.radius, exponent.center + exponent.radius
        holds_integer = (exponent.radius > 0) & (np.floor(high) >= low)
        base_may_be_one = (base.radius > 0) & (np.abs(base.center - 1) <= base.radius)
        return holds_integer & ~(base.center - base.radius >= 0) | (
            np.isnan(exponent.center) & base_may_be_one
        )


def apply(op: ew.ElementwiseOpType, args: Sequence[Ball], tolerance: ew.ErrorBound) -> Ball:
    """The ball of `op` over its operands' balls (see the module docstring)."""
    with np.errstate(all="ignore"):
        corners = [(a.center, a.center - a.radius, a.center + a.radius) for a in args]
        exact = [_reference(op, *combination) for combination in itertools.product(*corners)]
    center_exact = exact[0]  # the combination of all centers
    samples = [round32(value) for value in exact]
    center = samples[0]
    classes = _classify(center)
    consistent = np.logical_and.reduce([_classify(s) == classes for s in samples])
    finite = classes == 0
    with np.errstate(all="ignore"):
        spread = np.maximum.reduce([np.where(finite, np.abs(s - center), 0.0) for s in samples])
        magnitude = np.maximum.reduce([np.where(finite, np.abs(s), 0.0) for s in samples])
        exact = _exact(op, args, center)
        radius = np.where(exact, 0.0, spread + tolerance.relative * magnitude + tolerance.absolute)
        # Overflow to inf must be certain, beyond the op's own error.
        threshold = FLOAT32_MAX * (1 + ULP / 2)
        near_overflow = finite & (magnitude + radius >= FLOAT32_MAX) & ~exact
        overflowed = np.isinf(center) & np.isfinite(center_exact)
        uncertain_overflow = overflowed & (
            (np.abs(center_exact) * (1 - tolerance.relative) <= threshold) & ~exact
        )
    undecided = (
        ~consistent
        | near_overflow
        | uncertain_overflow
        | _sign_of_zero_matters(op, args)
        | ((op is ew.CopysignOp) & np.isnan(args[-1].center))
        | _class_may_flip_between_corners(op, args)
        | functools.reduce(np.logical_or, [a.undecided for a in args])
    )
    radius = np.where(finite, radius, 0.0)
    return Ball(center, np.where(undecided, np.inf, radius))


def literal_values(program: Program) -> list[float | None]:
    """Each node's value in float64 where it reads no input (a literal, or ops of literals), as
    the `.ew` frontend computes a weakly typed value for a float64 context; None elsewhere."""
    values: list[float | None] = []
    for node in program.nodes:
        if node.kind == "constant":
            values.append(node.value)
        elif node.kind == "input" or any(values[i] is None for i in node.operands):
            values.append(None)
        else:
            assert node.op is not None
            operands = [np.array([values[i]], np.float64) for i in node.operands]
            with np.errstate(all="ignore"):
                values.append(float(_reference(node.op, *operands)[0]))
    return values


def evaluate(program: Program, inputs: Sequence[np.ndarray], math_mode: str) -> list[Ball]:
    """Balls of the program's outputs, given one float32 array per input node. A `select`
    whose condition reads no input picks its arm by that condition in float64, as `.ew` tests
    a literal condition (numpy's test of a Python number: `select(1e-50, x, y)` is x)."""
    balls: list[Ball] = []
    given = iter(inputs)
    literals = literal_values(program)
    for node in program.nodes:
        if node.kind == "input":
            data = np.asarray(next(given), np.float64)
            balls.append(Ball(data, np.zeros_like(data)))
        elif node.kind == "constant":
            balls.append(Ball(round32(np.array(node.value)), np.zeros(())))
        elif node.op is ew.SelectOp and (condition := literals[node.operands[0]]) is not None:
            true_arm, false_arm = node.operands[1:]
            picked = balls[true_arm if condition != 0 else false_arm]  # (NaN: true)
            shape = np.broadcast_shapes(*(balls[i].center.shape for i in node.operands))
            balls.append(
                Ball(np.broadcast_to(picked.center, shape), np.broadcast_to(picked.radius, shape))
            )
        else:
            assert node.op is not None
            tolerance = node.op.ACCURACY.bound(math_mode)
            balls.append(apply(node.op, [balls[i] for i in node.operands], tolerance))
    return [balls[i] for i in program.outputs]


def check(name: str, got: np.ndarray, want: Ball, context: str) -> int:
    """Asserts `got` lies in the ball where decided; returns how many elements were checked."""
    assert got.dtype == np.float32, f"{context}: {name} has dtype {got.dtype}"
    assert got.shape == want.center.shape, f"{context}: {name} has shape {got.shape}"
    value = got.astype(np.float64)
    center, radius = want.center, want.radius
    decided = ~np.isinf(radius)
    with np.errstate(all="ignore"):
        wrong = decided & np.where(
            np.isfinite(center),
            ~(np.abs(value - center) <= radius),  # also catches a NaN or inf result
            ~((value == center) | (np.isnan(value) & np.isnan(center))),
        )
        wrong |= (radius == 0) & (center == 0) & (np.signbit(value) != np.signbit(center))
    if wrong.any():
        first = np.flatnonzero(wrong)[:5]
        details = ", ".join(
            f"[{i}] got {value.flat[i]!r}, want {center.flat[i]!r} ± {radius.flat[i]:.3g}"
            for i in first
        )
        raise AssertionError(f"{context}: {name}: {int(wrong.sum())} wrong elements: {details}")
    return int(decided.sum())


def run_and_check(
    program: Program, inputs: Sequence[np.ndarray], fuse: bool, math_mode: str
) -> tuple[int, int]:
    """Compiles the program once and checks it at every length of the inputs' prefixes."""
    source = program.source()
    context = f"fuse={fuse} math={math_mode}\n{source}outputs={program.output_names}"
    kernel = xfuse.compile(source, outputs=program.output_names, fuse=fuse, math=math_mode)
    # Inputs are named in order of first use; unused ones are not parameters.
    by_name = {f"x{i}": array for i, array in enumerate(inputs)}
    full = evaluate(program, inputs, math_mode)
    longest = len(inputs[0])
    checked = total = 0
    for n in sorted({min(n, longest) for n in (*LENGTHS, longest)}):
        results = kernel(**{name: by_name[name][:n] for name in kernel.input_names})
        results = results if isinstance(results, tuple) else (results,)
        for name, got, ball in zip(program.output_names, results, full, strict=True):
            want = Ball(ball.center[:n], ball.radius[:n]) if ball.center.ndim else ball
            checked += check(name, got, want, f"{context}\nn={n}")
            total += want.center.size
    return checked, total


def _record(checked: int, total: int) -> None:
    event(f"checked fraction: {'all' if checked == total else f'>= {10 * checked // total}0%'}")


VARIANTS = [(fuse, math_mode) for fuse in (True, False) for math_mode in ("approx", "libm")]
EXAMPLES = settings.default.max_examples * 3 // 2
"""The `ci` profile's 100 give 150 programs, each in one variant (compiling dominates the cost);
the `fuzz` profile's 2000 give 3000."""


@st.composite
def cases(draw: st.DrawFn) -> tuple[Program, list[np.ndarray]]:
    program = draw(programs())
    count = sum(node.kind == "input" for node in program.nodes)
    n = LONG if draw(st.integers(0, 4)) == 0 else max(LENGTHS)
    return program, draw(input_sets(count, n))


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), variant=st.sampled_from(VARIANTS))
def test_random_programs_match_numpy(
    case: tuple[Program, list[np.ndarray]], variant: tuple[bool, str]
) -> None:
    program, inputs = case
    _record(*run_and_check(program, inputs, *variant))


@pytest.mark.slow
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_random_programs_match_numpy_in_every_variant(
    case: tuple[Program, list[np.ndarray]],
) -> None:
    program, inputs = case
    for fuse, math_mode in VARIANTS:
        _record(*run_and_check(program, inputs, fuse, math_mode))


@pytest.mark.parametrize(("condition", "value"), [(1e-50, 1e-50), (0.0, 0.0)])
def test_a_select_of_a_literal_condition_picks_as_numpy_tests_a_python_number(
    condition: float, value: float
) -> None:
    """`select(1e-50, x0, 0)` is x0 (`.ew` tests a literal condition in float64): the oracle
    tested it in float32, 0, and wanted the other arm (the fuzz profile's failure); a literal
    product of 1e-30s is 1e-60 there, not 0."""
    nodes = (
        Node("input"),
        Node("constant", value=0.0),
        Node("constant", value=condition),
        Node("op", ew.SelectOp, (2, 0, 1)),
        Node("op", ew.NegOp, (3,)),
        Node("constant", value=1e-30),
        Node("op", ew.MulOp, (5, 5)),
        Node("op", ew.SelectOp, (6, 0, 1)),
    )
    program = Program(nodes, (4, 7))
    x = np.float32([0.37719065, -2.0, 3.5])
    assert literal_values(program)[2] == value and literal_values(program)[6] == 1e-30 * 1e-30
    for fuse, math_mode in VARIANTS:
        checked, total = run_and_check(program, [x], fuse, math_mode)
        assert checked == total
    negated, product = evaluate(program, [x], "approx")
    np.testing.assert_array_equal(negated.center, -x if condition else np.zeros(3))
    np.testing.assert_array_equal(product.center, x)


# ---------------------------------------------------------------------------------------------
# The oracle can fail
# ---------------------------------------------------------------------------------------------


def _gelu() -> Program:
    """The lecture's program as nodes: h = x + b; y = 0.5 h (1 + tanh(c (h + 0.044715 h^3)))."""
    n = [Node("input"), Node("input"), Node("input")]

    def add(node: Node) -> int:
        n.append(node)
        return len(n) - 1

    h = add(Node("op", ew.AddOp, (0, 1)))
    h2 = add(Node("op", ew.MulOp, (h, h)))
    h3 = add(Node("op", ew.MulOp, (h2, h)))
    cubic = add(Node("op", ew.MulOp, (add(Node("constant", value=0.044715)), h3)))
    inner = add(Node("op", ew.AddOp, (h, cubic)))
    scaled = add(Node("op", ew.MulOp, (add(Node("constant", value=0.7978845608)), inner)))
    tanh = add(Node("op", ew.TanhOp, (scaled,)))
    one_plus = add(Node("op", ew.AddOp, (add(Node("constant", value=1.0)), tanh)))
    half_h = add(Node("op", ew.MulOp, (add(Node("constant", value=0.5)), h)))
    y = add(Node("op", ew.MulOp, (half_h, one_plus)))
    add(Node("op", ew.AddOp, (y, 2)))
    return Program(tuple(n), (len(n) - 1,))


def _normal_inputs(count: int, n: int = 257) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [make_input(rng, "normal", 0.0, n) for _ in range(count)]


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_the_oracle_checks_every_element_of_a_well_conditioned_program(math_mode: str) -> None:
    checked, total = run_and_check(_gelu(), _normal_inputs(3), True, math_mode)
    assert checked == total > 0


@pytest.mark.parametrize("op", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_the_oracle_rejects_a_wrong_op(op: ew.ElementwiseOpType) -> None:
    """Each op's program, checked against the reference of a different op of the same arity."""
    arity = ew.arity(op)
    siblings = [o for o in ew.ELEMENTWISE_OPS if ew.arity(o) == arity]
    impostor = siblings[(siblings.index(op) + 1) % len(siblings)]
    nodes = (Node("input"), Node("input"), Node("input"), Node("op", op, (0, 1, 2)[:arity]))
    kernel = xfuse.compile(Program(nodes, (3,)).source(), math="libm")
    x, y, z = (np.abs(a) + 0.5 for a in _normal_inputs(3))
    y[::5] = x[::5]  # ties, where x < y and x <= y differ
    arrays = {"x0": x, "x1": y, "x2": z}
    got = kernel(**{name: arrays[name] for name in kernel.input_names})
    inputs = [Ball(a.astype(np.float64), np.zeros(a.shape)) for a in (x, y, z)]
    if impostor is op:  # the only op of its arity (select): checked with its arms swapped
        inputs[1:3] = inputs[2:0:-1]
    want = apply(impostor, inputs[:arity], impostor.ACCURACY.libm)
    with pytest.raises(AssertionError, match="wrong elements"):
        check("t2", got, want, f"{op.name} checked as {impostor.name}")


def test_the_oracle_demands_nan_and_inf_where_the_reference_has_them() -> None:
    want = Ball(np.array([np.nan, np.inf, 1.0]), np.zeros(3))
    check("ok", np.array([np.nan, np.inf, 1.0], np.float32), want, "exact")
    for wrong in ([0.0, np.inf, 1.0], [np.nan, FLOAT32_MAX, 1.0], [np.nan, np.inf, np.nan]):
        with pytest.raises(AssertionError, match="1 wrong elements"):
            check("bad", np.array(wrong, np.float32), want, str(wrong))


def test_the_oracle_leaves_undecided_values_unchecked() -> None:
    # log of (x - 1) with x = 1 ± ulp-sized error: NaN, -inf or a finite value are all right.
    one = Ball(np.array([1.0]), np.array([ULP]))
    shifted = apply(ew.SubOp, [one, Ball(np.array(1.0), np.zeros(()))], ARITHMETIC)
    assert apply(ew.LogOp, [shifted], ARITHMETIC).undecided.all()
    # 1 / (x - x) at x = 1 ± ulp: the sign of the (maybe) zero decides between +inf and -inf.
    zero = apply(ew.SubOp, [one, one], ARITHMETIC)
    assert apply(ew.DivOp, [Ball(np.array(1.0), np.zeros(())), zero], ARITHMETIC).undecided.all()
    # ... but log(±0) is -inf for either sign: checked.
    assert math.isinf(apply(ew.LogOp, [zero], ARITHMETIC).center[0])
    # pow(-1, y) with y = 2.8e-45 ± erf's error: NaN, but 1 at y = 0 inside the ball ...
    minus_one = Ball(np.array(-1.0), np.zeros(()))
    near_zero = Ball(np.array([2.8e-45]), np.array([7e-7]))
    assert apply(ew.PowOp, [minus_one, near_zero], ARITHMETIC).undecided.all()
    # ... while with no integer in the exponent's ball the NaN is checked.
    near_half = apply(ew.PowOp, [minus_one, Ball(np.array([0.5]), np.array([0.1]))], ARITHMETIC)
    assert np.isnan(near_half.center).all() and not near_half.undecided.any()
    # pow(b, NaN) is NaN, but 1 at b = 1: undecided where the base's ball holds 1, else checked.
    nan = Ball(np.array(np.nan), np.zeros(()))
    bases = Ball(np.array([1 - ULP, 0.5]), np.array([2 * ULP, 2 * ULP]))
    assert apply(ew.PowOp, [bases, nan], ARITHMETIC).undecided.tolist() == [True, False]
    # copysign(x, NaN): the NaN's sign is open (IEEE's only for neg, abs and copysign), x's not
    signs = Ball(np.array([np.nan, -2.0]), np.zeros(2))
    assert apply(ew.CopysignOp, [one, signs], ARITHMETIC).undecided.tolist() == [True, False]
    # x == -0 for an x within its error of 0 (no corner of its ball is 0), or exactly not 0
    near = Ball(np.array([6e-8, 6e-8, 1.0]), np.array([3.5e-7, 0.0, 3.5e-7]))
    minus_zero = Ball(np.array(-0.0), np.zeros(()))
    for comparison in (ew.EqOp, ew.NeOp):
        undecided = apply(comparison, [near, minus_zero], ARITHMETIC).undecided.tolist()
        assert undecided == [True, False, False]
    # select of a condition that may be 0 inside its ball (approx tanh(8.5) is 1: log is 0)
    conditions = Ball(np.array([-6e-8, -6e-8]), np.array([1.2e-7, 0.0]))
    picks = [conditions, Ball(np.array(1.0), np.zeros(())), Ball(np.array(2.0), np.zeros(()))]
    assert apply(ew.SelectOp, picks, ARITHMETIC).undecided.tolist() == [True, False]
    # cos of an angle whose ball holds an extremum (exp(17) within exp's error moves it by
    # radians), not of one between two
    angles = Ball(np.array([2.4159792e7, 0.7]), np.array([2.0, 0.1]))
    assert apply(ew.CosOp, [angles], ARITHMETIC).undecided.tolist() == [True, False]


SPECIAL_OPERANDS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, TINY],
    np.float32,
)


@pytest.mark.parametrize(("fuse", "math_mode"), VARIANTS)
@pytest.mark.parametrize("op", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_every_op_on_special_values_matches_ieee_bit_for_bit(
    op: ew.ElementwiseOpType, fuse: bool, math_mode: str
) -> None:
    """±0, ±inf, NaN and small integers, every pair for binary ops: the IEEE special cases
    (tanh(-0) = -0, pow(-0, 3) = -0, 1 / -0 = -inf, max(-0, +0) = +0, ...) hold exactly."""
    arity = ew.arity(op)
    columns = np.meshgrid(*[SPECIAL_OPERANDS] * arity, indexing="ij")
    inputs = [column.ravel() for column in columns]
    nodes = (*[Node("input")] * arity, Node("op", op, tuple(range(arity))))
    checked, _ = run_and_check(Program(nodes, (arity,)), inputs, fuse, math_mode)
    assert checked > 0


def test_the_oracle_checks_the_sign_of_an_exact_zero() -> None:
    zero, minus_zero = (Ball(np.array([v]), np.zeros(1)) for v in (0.0, -0.0))
    one = Ball(np.array(1.0), np.zeros(()))
    # 1 / -0 is -inf, and x + (+0) at x = -0 is +0: decided, exact, checked.
    assert apply(ew.DivOp, [one, minus_zero], ARITHMETIC).center[0] == -np.inf
    total = apply(ew.AddOp, [minus_zero, zero], ARITHMETIC)
    with pytest.raises(AssertionError, match="1 wrong elements"):
        check("sum", np.array([-0.0], np.float32), total, "-0 + 0")
    check("sum", np.array([0.0], np.float32), total, "-0 + 0")
    # A product is never contracted into an FMA: a sum of it is exact, and checked so.
    product = apply(ew.MulOp, [minus_zero, one], ARITHMETIC)
    assert product.exact.all() and apply(ew.AddOp, [product, zero], ARITHMETIC).exact.all()


# ---------------------------------------------------------------------------------------------
# Bugs the fuzzer found, kept as plain regression tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Folding used the f64 literal where kernels use its f32 rounding (1e39 -> inf, 1e-50 -> 0).
        ("a = 1e39; t = a * 0.0; o = x + t;", np.nan),
        ("a = 1e-50; b = 1e50; o = x * (a * b);", np.nan),
        ("o = x + log(1e-50);", -np.inf),
        ("o = x * 1e39 * 0.0;", np.nan),
    ],
)
def test_folding_rounds_literals_like_kernels(source: str, expected: float, fuse: bool) -> None:
    out = xfuse.compile(source, fuse=fuse)(x=np.ones(3, np.float32))
    np.testing.assert_array_equal(out, np.full(3, expected, np.float32))


def test_a_constant_output_is_a_scalar() -> None:
    # Building the kernel failed (IndexError) when every parameter was a scalar.
    kernel = xfuse.compile("t = 0.5; u = x * t;", outputs=["t", "u"], threads=2)
    t, u = kernel(x=np.ones(4, np.float32))
    assert t.shape == () and t == 0.5
    np.testing.assert_array_equal(u, np.full(4, 0.5, np.float32))
    only = xfuse.compile("t = exp(0.0);", outputs=["t"])()
    assert only.shape == () and only == 1.0


# ---------------------------------------------------------------------------------------------
# The verified pipeline
# ---------------------------------------------------------------------------------------------

LECTURE = Path(__file__).parents[1].joinpath("examples", "gelu.ew").read_text()
PIPELINES = {"default": Options(), "unfused": Options(fuse=False), "libm": Options(math="libm")}


def _printed(module: ModuleOp, generic: bool) -> str:
    stream = io.StringIO()
    Printer(stream=stream, print_generic_format=generic).print_op(module)
    return stream.getvalue()


def assert_round_trips(module: ModuleOp, ctx: Context, stage: str) -> None:
    for generic in (False, True):
        text = _printed(module, generic)
        parsed = Parser(ctx, text).parse_module()
        parsed.verify()
        form = "generic" if generic else "custom"
        assert parsed.is_structurally_equivalent(module), f"{stage} ({form}) parses differently"
        assert _printed(parsed, generic) == text, f"{stage} ({form}) prints differently"


def run_verified_pipeline(module: ModuleOp, options: Options) -> list[str]:
    """Every pass of `xfuse.compile`'s pipeline, verifying and round-tripping after each."""
    ctx = pipeline_context()
    module.verify()
    assert_round_trips(module, ctx, "frontend")
    stages = ["frontend"]
    for pass_ in options.passes():
        pass_.apply(ctx, module)
        module.verify()
        assert_round_trips(module, ctx, pass_.name)
        stages.append(pass_.name)
    return stages


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_lecture_program_verifies_and_round_trips_after_every_pass(pipeline: str) -> None:
    stages = run_verified_pipeline(parse_program(LECTURE), PIPELINES[pipeline])
    # The pass list is the one `xfuse.compile` runs: its stages, in order.
    assert stages == list(xfuse.compile(LECTURE).stages)


@settings(
    max_examples=max(1, settings.default.max_examples * 3 // 20),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(program=programs(max_ops=16), pipeline=st.sampled_from(sorted(PIPELINES)))
def test_random_programs_verify_and_round_trip_after_every_pass(
    program: Program, pipeline: str
) -> None:
    module = parse_program(program.source(), program.output_names)
    run_verified_pipeline(module, PIPELINES[pipeline])
