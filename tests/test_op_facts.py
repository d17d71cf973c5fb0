"""Every elementwise op has every fact it needs, and a missing one names the file to edit.

An op's own facts are declared once on its class in src/xfuse/dialects/ew.py (docs/adding-an-op.md);
how it lowers lives in one table per stage. Each check below fails with the table and file to
complete, so adding an op is: write the class, follow the failures, write its tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pytest
from xdsl.builder import Builder
from xdsl.dialects import math
from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.irdl import irdl_op_definition
from xdsl.rewriter import InsertPoint

if TYPE_CHECKING:
    from conftest import Evaluate

import xfuse
from xfuse.analysis.cost import FLOPS_PER_SCALAR_OP, FREE_SCALAR_OPS
from xfuse.dialects import ew
from xfuse.frontend import tracing
from xfuse.frontend.language import parse_program
from xfuse.transforms.expand_math import MATH_FUNCTIONS
from xfuse.transforms.scalar import SCALAR_LOWERINGS, emit_scalar
from xfuse.transforms.to_llvm import _MATH_INTRINSICS

DIALECT = "src/xfuse/dialects/ew.py"
OpType = ew.ElementwiseOpType

MATH_LEFT_FOR_LLVM = {*_MATH_INTRINSICS, math.FmaOp, math.RsqrtOp}
"""`math` ops that no `MATH_FUNCTIONS` entry expands (`math.rsqrt` has a pattern of its own)."""


def _subclasses(base: type) -> list[type]:
    direct = base.__subclasses__()
    return [*direct, *(sub for cls in direct for sub in _subclasses(cls))]


def missing_facts(op: OpType) -> list[str]:
    """What `op` lacks, each with the place to declare it (empty when it has everything)."""
    name = op.__name__
    base = next((b for b in (ew.UnaryOp, ew.BinaryOp) if issubclass(op, b)), None)
    missing = []
    if op not in ew.ELEMENTWISE_OPS:
        missing.append(f"{name} is not listed in ELEMENTWISE_OPS ({DIALECT})")
    if base is not None and op.reference is base.reference:
        missing.append(f"{name} has no float64 `reference` ({DIALECT})")
    if "ACCURACY" not in vars(op):
        missing.append(
            f"{name} declares no `ACCURACY: ClassVar[Accuracy]` (its float32 error under "
            f"math=approx and math=libm; CORRECTLY_ROUNDED for IEEE arithmetic) ({DIALECT})"
        )
    if ew.python_name(op) is None and ew.python_operator(op) is None:
        missing.append(
            f"{name} has no Python-level function (PYTHON_NAME is None) and no "
            f"`PYTHON_OPERATOR` ({DIALECT})"
        )
    if not op.__doc__ or op.name not in op.__doc__:
        missing.append(f"{name} has no docstring with an IR example of '{op.name}' ({DIALECT})")
    others = [other for other in ew.ELEMENTWISE_OPS if other is not op]
    python_name = ew.python_name(op)
    if python_name is not None and python_name in {ew.python_name(o) for o in others}:
        # (the Python functions are a dict by name: the last op took the other's silently)
        missing.append(f"{name}: PYTHON_NAME '{python_name}' is another op's ({DIALECT})")
    ufunc = ew.numpy_ufunc(op)
    if ufunc is not None and ufunc in {ew.numpy_ufunc(o) for o in others}:
        missing.append(
            f"{name}: np.{ufunc.__name__} traces to another op already: set its NUMPY_UFUNC "
            f"({DIALECT})"
        )
    if ufunc is not None and ufunc in tracing._UFUNCS_OF_OPS:
        missing.append(
            f"{name}: np.{ufunc.__name__} is traced as other ops in _UFUNCS_OF_OPS "
            "(src/xfuse/frontend/tracing.py): remove its entry, now that it is an op"
        )
    spelled = ufunc is not None or ew.python_operator(op) is not None
    if not spelled and "DEFINITION" not in vars(op):
        missing.append(
            f"{name} is neither a numpy ufunc nor a Python operator: declare `DEFINITION: "
            f"ClassVar[str | None]` (the op in other ops, an `.ew` expression of x and y, for "
            f"the bench peers without its function; None for a primitive) ({DIALECT})"
        )
    if op not in SCALAR_LOWERINGS:
        missing.append(f"{name} has no entry in SCALAR_LOWERINGS (src/xfuse/transforms/scalar.py)")
        return missing
    for scalar in scalar_ops(op):
        if scalar.name not in FLOPS_PER_SCALAR_OP and scalar.name not in FREE_SCALAR_OPS:
            missing.append(
                f"{name} lowers to '{scalar.name}', which has no FLOP count in "
                "FLOPS_PER_SCALAR_OP (src/xfuse/analysis/cost.py)"
            )
        if scalar.name.startswith("math.") and type(scalar) not in (
            MATH_FUNCTIONS.keys() | MATH_LEFT_FOR_LLVM
        ):
            missing.append(
                f"{name} lowers to '{scalar.name}', which has no libm name and approximation "
                "in MATH_FUNCTIONS (src/xfuse/transforms/expand_math.py)"
            )
    return missing


def scalar_ops(op: OpType) -> list[Operation]:
    """The scalar ops `op` lowers to in a kernel region, in f32 and in f64."""
    emitted: list[Operation] = []
    for compute_type in (Float32Type(), Float64Type()):
        block = Block(arg_types=[compute_type] * ew.arity(op))
        emit_scalar(op, Builder(InsertPoint.at_end(block)), block.args, compute_type)
        emitted.extend(block.ops)
    return emitted


def test_every_op_subclass_is_an_elementwise_op() -> None:
    defined = [
        op
        for op in [*_subclasses(ew.UnaryOp), *_subclasses(ew.BinaryOp), ew.SelectOp]
        if op.__module__ == ew.__name__ and "name" in vars(op)  # not an abstract base
    ]
    assert set(defined) == set(ew.ELEMENTWISE_OPS), f"list each op in ELEMENTWISE_OPS ({DIALECT})"


@pytest.mark.parametrize("op", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_op_has_every_fact(op: OpType) -> None:
    assert not missing_facts(op), "\n".join(missing_facts(op))


@irdl_op_definition
class _RoundOp(ew.UnaryOp):
    """An op declared with only a name, as a newcomer starts: `ew.round` (C's `roundf`)."""

    name = "ew.round"


def _round(builder: Builder, args: list[SSAValue], compute_type: Attribute) -> SSAValue:
    return builder.insert(math.RoundOp(*args)).result


def test_folding_an_op_without_a_reference_says_what_to_declare() -> None:
    """It raised a bare NotImplementedError: `xfuse-opt -p ew-optimize` printed
    `internal error: NotImplementedError: ` and nothing after it."""
    with pytest.raises(NotImplementedError, match=r"no float64 `reference`.*dialects/ew\.py"):
        ew.fold_literals(_RoundOp, [0.5], Float32Type())


def test_a_missing_fact_is_named_with_its_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The messages a newcomer meets for an op with only a name, then with a lowering to a
    `math` op no stage knows."""
    messages = missing_facts(_RoundOp)
    assert messages[:4] == [
        f"_RoundOp is not listed in ELEMENTWISE_OPS ({DIALECT})",
        f"_RoundOp has no float64 `reference` ({DIALECT})",
        f"_RoundOp declares no `ACCURACY: ClassVar[Accuracy]` (its float32 error under "
        f"math=approx and math=libm; CORRECTLY_ROUNDED for IEEE arithmetic) ({DIALECT})",
        f"_RoundOp is neither a numpy ufunc nor a Python operator: declare `DEFINITION: "
        f"ClassVar[str | None]` (the op in other ops, an `.ew` expression of x and y, for "
        f"the bench peers without its function; None for a primitive) ({DIALECT})",
    ]
    assert messages[4] == (
        "_RoundOp has no entry in SCALAR_LOWERINGS (src/xfuse/transforms/scalar.py)"
    )
    monkeypatch.setitem(SCALAR_LOWERINGS, _RoundOp, _round)
    assert missing_facts(_RoundOp)[4:] == 2 * [
        "_RoundOp lowers to 'math.round', which has no FLOP count in FLOPS_PER_SCALAR_OP "
        "(src/xfuse/analysis/cost.py)",
        "_RoundOp lowers to 'math.round', which has no libm name and approximation in "
        "MATH_FUNCTIONS (src/xfuse/transforms/expand_math.py)",
    ]


@irdl_op_definition
class _HypotOp(ew.BinaryOp):
    name = "ew.hypot"
    PYTHON_NAME: ClassVar[str | None] = "maximum"
    reference = staticmethod(np.maximum)  # (as a newcomer's slip: max's ufunc)


def test_an_op_taking_anothers_name_or_ufunc_and_one_without_docstring_are_named() -> None:
    """Each took the other op's `xfuse.maximum` (a dict by name: the last op wins), or its
    numpy ufunc, silently; no docstring failed a test naming no file."""
    messages = missing_facts(_HypotOp)
    assert f"_HypotOp has no docstring with an IR example of 'ew.hypot' ({DIALECT})" in messages
    assert f"_HypotOp: PYTHON_NAME 'maximum' is another op's ({DIALECT})" in messages
    assert (
        f"_HypotOp: np.maximum traces to another op already: set its NUMPY_UFUNC ({DIALECT})"
        in messages
    )


@pytest.mark.parametrize("op", ew.ELEMENTWISE_OPS, ids=ew.mnemonic)
def test_python_function_is_derived_from_the_op(op: OpType) -> None:
    name = ew.python_name(op)
    if name is None:
        return
    assert name in xfuse.__all__ and name in dir(xfuse)
    function = getattr(xfuse, name)
    x = np.array([0.25, 0.5, 2.0], np.float32)
    with np.errstate(all="ignore"):
        want = op.reference(*[x.astype(np.float64)] * ew.arity(op))
    np.testing.assert_allclose(function(*[x] * ew.arity(op)), want, rtol=1e-6)


SAMPLE = np.array(
    [-np.inf, -30.0, -2.5, -1.0, -0.0, 0.0, 1e-30, 0.25, 1.0, 3.0, 30.0, np.inf, np.nan]
)


@pytest.mark.parametrize(
    "op", [op for op in ew.ELEMENTWISE_OPS if ew.python_operator(op)], ids=ew.mnemonic
)
def test_python_operator_computes_the_op(op: OpType) -> None:
    """`PYTHON_OPERATOR` (how the bench peers write the op) is the op's reference, bit for bit."""
    operands = [SAMPLE, SAMPLE[::-1]][: ew.arity(op)]
    code = ew.python_operator(op).format(*(f"operands[{i}]" for i in range(ew.arity(op))))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(eval(code), op.reference(*operands))


@pytest.mark.parametrize(
    "op", [op for op in ew.ELEMENTWISE_OPS if ew.definition(op)], ids=ew.mnemonic
)
def test_definition_computes_the_op(op: OpType, evaluate_float64: Evaluate) -> None:
    """`DEFINITION` (what a bench peer without the op's function computes) is the op: its
    other ops, evaluated by their references in float64, give the op's reference."""
    program = parse_program(f"out = {ew.definition(op)};")
    (got,) = evaluate_float64(program, x=SAMPLE, y=SAMPLE[::-1])
    with np.errstate(all="ignore"):
        want = op.reference(*[SAMPLE, SAMPLE[::-1]][: ew.arity(op)])
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
    zeros = want == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))
