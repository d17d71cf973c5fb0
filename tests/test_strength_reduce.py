"""The example pass of docs/writing-a-pass.md."""

import pytest
from xdsl.context import Context
from xdsl.dialects.func import FuncOp

from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.transforms.strength_reduce import EwStrengthReducePass


def ops_of(source: str, max_exponent: int = 2) -> list[str]:
    module = parse_program(source)
    EwStrengthReducePass(max_exponent=max_exponent).apply(Context(), module)
    module.verify()
    function = next(op for op in module.ops if isinstance(op, FuncOp))
    return [op.name for op in function.body.ops if not isinstance(op, ew.ConstantOp)]


def test_square_becomes_one_multiply() -> None:
    assert ops_of("y = pow(x, 2);") == ["ew.mul", "func.return"]


def test_cube_expands_only_when_allowed() -> None:
    assert ops_of("y = pow(x, 3);") == ["ew.pow", "func.return"]
    assert ops_of("y = pow(x, 3);", max_exponent=3) == ["ew.mul", "ew.mul", "func.return"]


def test_the_largest_exponent_expands_left_to_right() -> None:
    module = parse_program("y = pow(x, 16);")
    EwStrengthReducePass(max_exponent=16).apply(Context(), module)
    multiplies = [op for op in module.walk() if isinstance(op, ew.MulOp)]
    assert len(multiplies) == 15
    assert all(m.lhs == p.result for p, m in zip(multiplies, multiplies[1:], strict=False))


@pytest.mark.parametrize("max_exponent", [-1, 0, 1, 17, 1_000_000_000])
def test_max_exponent_out_of_range_is_an_error(max_exponent: int) -> None:
    """Was accepted: 10^9 built pow(x, 1000000) as 999999 multiplies (minutes, gigabytes)."""
    module = parse_program("y = pow(x, 1000000);")
    with pytest.raises(
        ValueError,
        match=f"^ew-strength-reduce: bad value '{max_exponent}' for option 'max-exponent': "
        "expected an integer from 2 to 16$",
    ):
        EwStrengthReducePass(max_exponent=max_exponent).apply(Context(), module)


def test_fractional_and_variable_exponents_stay() -> None:
    assert ops_of("y = pow(x, 2.5);") == ["ew.pow", "func.return"]
    assert ops_of("y = pow(x, e);") == ["ew.pow", "func.return"]


def test_compiled_with_and_without_the_pass_agree_with_float64() -> None:
    """docs/writing-a-pass.md section 6: the pass changes the code, not the numbers."""
    import numpy as np

    import xfuse

    source = "y = pow(x, 2) + pow(x, 3) * s;"
    rng = np.random.default_rng(0)
    x, s = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    x64, s64 = x.astype(np.float64), s.astype(np.float64)
    want = x64**2 + x64**3 * s64
    plain = xfuse.compile(source)
    reduced = xfuse.compile(source, extra_passes="ew-strength-reduce{max-exponent=3}")
    assert "math.powf" in plain.ir("ew-fuse")
    assert "ew.pow" not in reduced.ir("ew-strength-reduce")
    assert "math.powf" not in reduced.ir("ew-fuse")
    for kernel in (plain, reduced):
        np.testing.assert_allclose(kernel(x=x, s=s), want, rtol=1e-5, atol=1e-5)
