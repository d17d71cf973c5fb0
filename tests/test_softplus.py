"""`softplus` end to end: dialect, frontend, fusion,
folding, both math lowerings, every dtype, the numpy baseline and the cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects import arith

import xfuse
from xfuse.analysis.cost import CostOptions
from xfuse.benchmarking.baselines import compile_numpy
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime.arrays import numpy_dtype
from xfuse.runtime.cost_driver import cost_program
from xfuse.transforms.pipeline import apply_pipeline


def ops(module: object) -> list[str]:
    return [op.name for op in module.walk()]  # type: ignore[attr-defined]


def test_dialect_and_frontend() -> None:
    assert ew.OPS_BY_MNEMONIC["softplus"] is ew.SoftplusOp
    module = parse_program("y = softplus(x);")
    assert "ew.softplus" in ops(module)
    assert "%y = ew.softplus %x : tensor<?xf32>" in str(module)
    x = np.array([-1000.0, -30.0, 0.0, 2.0, 1000.0])
    np.testing.assert_allclose(
        ew.SoftplusOp.reference(x),
        [0.0, math.exp(-30.0), math.log(2.0), math.log1p(math.e**2), 1000.0],
    )


def test_constant_folds() -> None:
    module = apply_pipeline(parse_program("y = softplus(0) * x;"), "ew-optimize")
    assert "ew.softplus" not in ops(module)
    constants = [op.literal for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert constants == [pytest.approx(math.log(2.0), rel=1e-7)]


def test_fused_region_uses_exp_and_log1p_only() -> None:
    module = apply_pipeline(parse_program("y = softplus(x) * z;"), "ew-optimize,ew-fuse")
    (kernel,) = [op for op in module.walk() if isinstance(op, ew.KernelOp)]
    region = [op.name for op in kernel.block.ops]
    assert "ew.softplus" not in region
    assert region.count("math.exp") == 1 and region.count("math.log1p") == 1


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
@pytest.mark.parametrize(
    ("dtype", "rtol"),
    [("float32", 2e-6), ("float64", 1e-12), ("float16", 2e-3), ("bfloat16", 1e-2)],
)
def test_compiled_matches_float64(math_mode: str, dtype: str, rtol: float) -> None:
    if dtype == "float64" and math_mode == "approx":
        rtol = 2e-6  # the approximations are float32-accurate
    x = np.linspace(-80, 80, 4001)
    if dtype in ("float16", "bfloat16"):
        x = np.linspace(-10, 10, 4001)
    stored = x.astype(numpy_dtype(dtype))
    want = np.logaddexp(stored.astype(np.float64), 0.0)
    kernel = xfuse.compile("y = softplus(x);", math=math_mode, dtype=dtype)
    got = kernel(x=stored).astype(np.float64)
    tiny = float(np.finfo(numpy_dtype(dtype) if dtype != "bfloat16" else np.float32).tiny)
    normal = want > tiny * 1e6  # away from the subnormal range, where relative error is moot
    np.testing.assert_allclose(got[normal], want[normal], rtol=rtol)
    assert np.all(got >= 0)


def test_large_inputs_do_not_overflow() -> None:
    x = np.array([88.0, 100.0, 1e30, -1e30, np.inf, -np.inf], np.float32)
    got = xfuse.compile("y = softplus(x);")(x=x)
    np.testing.assert_array_equal(got, np.array([88.0, 100.0, 1e30, 0.0, np.inf, 0.0], np.float32))


def test_numpy_baseline() -> None:
    module = apply_pipeline(parse_program("y = softplus(x);"), "ew-optimize")
    x = np.linspace(-20, 20, 101, dtype=np.float32)
    (got,) = compile_numpy(module)(x)
    np.testing.assert_allclose(got, np.logaddexp(x.astype(np.float64), 0), rtol=1e-6)


def test_cost() -> None:
    program = cost_program("y = softplus(x);", CostOptions(shape=(1024,)))
    (kernel,) = program.fused.kernels
    # maximumf absf negf addf (4) + exp (2) + log1p (3)
    assert kernel.flops_per_element == 9
    assert kernel.bytes == 2 * 2 * 1024  # bf16: read x, write y


def test_traced() -> None:
    @xfuse.jit
    def smooth(x: np.ndarray) -> np.ndarray:
        return xfuse.softplus(x) * 2

    x = np.linspace(-5, 5, 64, dtype=np.float32)
    np.testing.assert_allclose(smooth(x), 2 * np.logaddexp(x.astype(np.float64), 0), rtol=2e-6)


def test_log_one_plus_exp_is_softplus_only_with_unsafe_math() -> None:
    # log(1 + exp(x)) overflows to inf above 88.7 and is 0 below -17: softplus is neither.
    x = np.array([100.0, 1e30, -30.0, 0.0, np.inf, -np.inf, np.nan], np.float32)
    source = "y = log(1 + exp(x));"
    as_written = xfuse.compile(source)(x=x)
    rewritten = xfuse.compile(source, extra_passes="ew-optimize{unsafe-math=true}")(x=x)
    log2 = math.log(2.0)
    inf, nan = np.inf, np.nan
    np.testing.assert_allclose(as_written, [inf, inf, 0.0, log2, inf, 0.0, nan], rtol=1e-6)
    want = [100.0, 1e30, math.exp(-30.0), log2, inf, 0.0, nan]
    np.testing.assert_allclose(rewritten, want, rtol=1e-6)


LOG_ONE_PLUS_EXP_IS_ZERO_TO = -16.63553237915039
"""The largest float32 x where 1 + exp(x) rounds to 1 in float32 (exp(x) <= 2**-24)."""


def test_log_one_plus_exp_expands_without_a_log() -> None:
    # math=approx computes it in softplus's form: one exp (one 2**n shift), no log's exponent
    # and mantissa (shrsi, sitofp), where the composition expanded a full exp and log.
    passes = "ew-optimize,ew-fuse,ew-bufferize,ew-workspace,ew-kernel-to-loops,ew-expand-math"
    names = ops(apply_pipeline(parse_program("y = log(1 + exp(x));"), passes))
    assert names.count("arith.shli") == 1
    assert "arith.shrsi" not in names and "arith.sitofp" not in names


def test_log_one_plus_exp_keeps_the_composition_special_values() -> None:
    # Bit for bit what log of 1 + exp(x) gives where IEEE decides it: +0 where 1 + exp(x)
    # rounds to 1, +inf where exp(x) overflows, log's NaN (0x7FC00000) whatever NaN comes in.
    zero_to = np.float32(LOG_ONE_PLUS_EXP_IS_ZERO_TO)
    finite_to = np.float32(88.72283172607421875)
    x = np.array(
        [-np.inf, -3.4e38, -104.0, -20.0, zero_to, np.nextafter(zero_to, np.float32(0))]
        + [np.nextafter(finite_to, np.float32(np.inf)), 1e30, np.inf]
        + [finite_to, -0.0, 0.0],
        np.float32,
    )
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)
    got = xfuse.compile("y = log(1 + exp(x));")(x=np.concatenate([x, nans]))
    bits = got.view(np.uint32)
    np.testing.assert_array_equal(bits[:5], 0)
    assert 0 < got[5] < 1.2e-7
    np.testing.assert_array_equal(got[6:9], np.inf)
    assert got[9] == pytest.approx(88.72283, rel=1e-6)
    np.testing.assert_array_equal(got[10:12], np.float32(math.log(2.0)))
    np.testing.assert_array_equal(bits[12:], 0x7FC00000)


def test_log_one_plus_exp_is_as_accurate_as_softplus() -> None:
    # Between the two, softplus's accuracy: the composition rounded 1 + exp(x) first (up to 6e-8
    # absolute, relative error up to 1 just above ln 2**-24 = -16.6).
    bits = np.arange(0, 0x7F800000, 4099, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    x = x[(x > LOG_ONE_PLUS_EXP_IS_ZERO_TO) & (x <= 88.72283172607421875)]
    x = np.concatenate([x, np.linspace(-16.6355, 5, 100001, dtype=np.float32)])
    got = xfuse.compile("y = log(1 + exp(x));")(x=x).astype(np.float64)
    want = np.logaddexp(x.astype(np.float64), 0.0)
    bound = ew.SoftplusOp.ACCURACY.approx
    assert np.all(np.abs(got - want) <= bound.relative * want + bound.absolute)


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_log1p_of_exp_is_one_function_with_the_compositions_special_values(math_mode: str) -> None:
    # log1p of an exp in the same kernel is `math.log1p`: softplus's form under approx (one exp,
    # no log, no division), log1p's call under libm. Its values where IEEE decides them are the
    # composition's: 0 where exp underflows to 0, e^x's digits below (not 0, as log(1 + exp(x))
    # gives), +inf where exp overflows, NaN. (Goldberg's form, log(u) x / (u - 1), had its
    # log(u) taken for softplus once: off by up to half its value at x = -15.5.)
    source = "y = log1p(exp(x));"
    if math_mode == "approx":
        passes = "ew-optimize,ew-fuse,ew-bufferize,ew-workspace,ew-kernel-to-loops,ew-expand-math"
        names = ops(apply_pipeline(parse_program(source), passes))
        assert names.count("arith.shli") == 1 and "arith.divf" not in names
        assert "arith.shrsi" not in names
    kernel = xfuse.compile(source, math=math_mode)
    x = np.linspace(-30, 30, 600_001, dtype=np.float32)
    got = kernel(x=x).astype(np.float64)
    np.testing.assert_allclose(got, np.logaddexp(x.astype(np.float64), 0.0), rtol=3e-7, atol=0)
    special = np.array([-np.inf, -104.0, -90.0, 88.8, 1e30, np.inf, np.nan], np.float32)
    got = kernel(x=special)
    np.testing.assert_array_equal(got[:2].view(np.uint32), 0)
    assert got[2] == np.float32(np.exp(-90.0))  # a denormal, rounded once
    np.testing.assert_array_equal(got[3:6], np.inf)
    assert np.isnan(got[6])


def test_tanh_of_log_one_plus_exp_is_the_pair_with_the_composition_special_values() -> None:
    # A hand-written Mish factor: tanh(log(1 + exp(x))) as tanh of softplus's pair, one exp and
    # one division, with the composition's values where IEEE decides them: +0 where 1 + exp(x)
    # rounds to 1, 1 from x ~ 9.01 (and where exp(x) overflows), log's NaN for any NaN.
    source = "y = tanh(log(1 + exp(x)));"
    passes = "ew-optimize,ew-fuse,ew-bufferize,ew-workspace,ew-kernel-to-loops,ew-expand-math"
    names = ops(apply_pipeline(parse_program(source), passes))
    pair = ops(apply_pipeline(parse_program("y = tanh(softplus(x));"), passes))
    # The pair and two selects (their compares and three constants); the composition was 135.
    assert names.count("arith.divf") == 1 and len(names) == len(pair) + 7
    zero_to = np.float32(LOG_ONE_PLUS_EXP_IS_ZERO_TO)
    x = np.array(
        [-np.inf, -3.4e38, -20.0, zero_to, np.nextafter(zero_to, np.float32(0))]
        + [9.2, 88.8, 1e30, np.inf],
        np.float32,
    )
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)
    kernel = xfuse.compile(source)
    got = kernel(x=np.concatenate([x, nans]))
    np.testing.assert_array_equal(got[:4].view(np.uint32), 0)
    assert 0 < got[4] < 1.2e-7
    np.testing.assert_array_equal(got[5:9], 1.0)
    np.testing.assert_array_equal(got[9:].view(np.uint32), 0x7FC00000)
    between = np.linspace(zero_to, np.float32(10), 200_001, dtype=np.float32)[1:]
    want = np.tanh(np.logaddexp(between.astype(np.float64), 0.0))
    np.testing.assert_allclose(kernel(x=between), want, rtol=4e-7, atol=0)


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_log_sigmoid_is_exact_at_special_values_and_accurate(math_mode: str) -> None:
    # -softplus(-x) folds to (x < 0 ? x : -0) - log1p(exp(-|x|)) (ew-expand-math): the same
    # bits as the two negations, signs of zero included (NaN's sign is IEEE's to leave open).
    special = [0.0, -0.0, np.inf, -np.inf, 1e30, -1e30, 200.0, -200.0, np.nan]
    x = np.concatenate([special, np.linspace(-100, 100, 20001)]).astype(np.float32)
    got = xfuse.compile("y = -softplus(-x);", math=math_mode)(x=x)
    with np.errstate(invalid="ignore"):
        want = -np.logaddexp(-x.astype(np.float64), 0.0)
    np.testing.assert_array_equal(np.signbit(got[:8]), np.signbit(want[:8]))
    np.testing.assert_array_equal(got[:9], want[:9].astype(np.float32))
    bound = getattr(ew.SoftplusOp.ACCURACY, math_mode)
    error = np.abs(got[9:] - want[9:])
    assert np.all(error <= bound.relative * np.abs(want[9:]) + bound.absolute)


@pytest.mark.parametrize("math_mode", ["approx", "libm"])
def test_log_sigmoid_folds_in_float64_with_the_same_bits(math_mode: str) -> None:
    # The fold is dtype-generic (negations, the select and -(a + l) = -a - l are exact in any
    # IEEE format): the f64 kernel loses the relu's compare and matches -logaddexp(0, -x).
    source = "y = -softplus(-x);"
    passes = "ew-optimize,ew-fuse,ew-bufferize,ew-workspace,ew-kernel-to-loops"
    passes += f",ew-expand-math{{math={math_mode}}}"
    module = apply_pipeline(parse_program(source, dtype="float64"), passes)
    predicates = [
        arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        for op in module.walk()
        if isinstance(op, arith.CmpfOp)
    ]
    assert predicates == ["olt"]
    special = [0.0, -0.0, np.inf, -np.inf, 1e300, -1e300, 800.0, -800.0, np.nan]
    x = np.concatenate([special, np.linspace(-700, 700, 20001)])
    got = xfuse.compile(source, math=math_mode, dtype="float64")(x=x)
    with np.errstate(invalid="ignore"):
        want = -np.logaddexp(0.0, -x)
    np.testing.assert_array_equal(np.signbit(got[:8]), np.signbit(want[:8]))
    np.testing.assert_array_equal(got[:9], want[:9])
    np.testing.assert_allclose(got[9:], want[9:], rtol=1e-12, atol=0)
