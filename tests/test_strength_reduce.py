"""The example pass of docs/writing-a-pass.md."""

from xdsl.context import Context
from xdsl.dialects.func import FuncOp

from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.passes.strength_reduce import EwStrengthReducePass


def ops_of(source: str, max_exponent: int = 2) -> list[str]:
    module = parse_program(source)
    EwStrengthReducePass(max_exponent=max_exponent).apply(Context(), module)
    module.verify()
    function = next(op for op in module.ops if isinstance(op, FuncOp))
    return [op.name for op in function.body.ops if not isinstance(op, ew.ConstantOp)]


def test_square_becomes_one_multiply():
    assert ops_of("y = pow(x, 2);") == ["ew.mul", "func.return"]


def test_cube_expands_only_when_allowed():
    assert ops_of("y = pow(x, 3);") == ["ew.pow", "func.return"]
    assert ops_of("y = pow(x, 3);", max_exponent=3) == ["ew.mul", "ew.mul", "func.return"]


def test_fractional_and_variable_exponents_stay():
    assert ops_of("y = pow(x, 2.5);") == ["ew.pow", "func.return"]
    assert ops_of("y = pow(x, e);") == ["ew.pow", "func.return"]
