"""float64 kernels at their edges: calls of libmvec's functions (`math="approx"`) that LLVM's
interprocedural passes must leave callable, and the special values C and IEEE decide."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import xfuse
from xfuse.codegen.native import libmvec_loaded

CONSTANT_OPERAND_PROGRAMS = [
    "out = pow(x, 1.5);",
    "out = pow(2.5, x);",
    "out = pow(x, -2.5) + pow(x, 1e300);",
    "out = exp(x) + pow(x, 7);",
]


@pytest.mark.skipif(not libmvec_loaded(), reason="no glibc libmvec on this host")
@pytest.mark.parametrize("source", CONSTANT_OPERAND_PROGRAMS)
def test_f64_libmvec_call_with_a_constant_operand_compiles(source: str) -> None:
    # Each f64 libm call goes through an internal wrapper that carries the libmvec variant
    # ("vector-function-abi-variant"). With a constant operand LLVM's IPSCCP and dead argument
    # elimination dropped that parameter from the wrapper, whose variant then no longer matched
    # its type: "invalid name for a VFABI variant" and LLVM ERROR, the Python process aborted
    # (pow(x, 1.5), x ** 2.5 in @xfuse.jit: every f64 pow by a constant other than 1, 2, 3, 4,
    # -1, 1/2, -1/2). Run in a child process, which such an abort ends.
    script = f"""
import numpy as np, xfuse
x = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.7, np.inf, -np.inf, np.nan] * 3)
approx = xfuse.compile({source!r}, dtype="float64")
libm = xfuse.compile({source!r}, dtype="float64", math="libm")
got, want = approx(x=x), libm(x=x)
np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
finite = np.isfinite(want) & (want != 0)
np.testing.assert_array_equal(got[~finite], want[~finite])
np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))
assert np.all(np.abs(got[finite] - want[finite]) <= 4 * np.spacing(np.abs(want[finite])))
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_f64_pow_by_a_constant_in_jit() -> None:
    script = """
import numpy as np, xfuse
@xfuse.jit
def f(x):
    return x ** 2.5
x = np.array([4.0, 9.0, 0.0, np.inf])
np.testing.assert_allclose(f(x), np.power(x, 2.5), rtol=1e-15)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("base", "exponent", "want"),
    [
        ("-0.0", "0.5", 0.0),  # C: pow(-0, y) = +0 for y > 0 not an odd integer
        ("-1e400", "0.5", math.inf),  # C: pow(-inf, y) = +inf for y > 0 not an odd integer
        ("-0.0", "-0.5", math.inf),
        ("-1e400", "-0.5", 0.0),
        ("-0.0", "3", -0.0),
    ],
)
def test_folded_pow_has_the_kernels_special_values(
    base: str, exponent: str, want: float, dtype: str
) -> None:
    # A pow of constants folds with numpy's power on float64 scalars, whose exponent of 0.5
    # (a stride-0 operand) takes its square root: pow(-0, 0.5) folded to -0 and pow(-inf, 0.5)
    # to NaN, where C's pow and the kernel of the same program with arrays give +0 and +inf.
    folded = xfuse.compile(f"out = pow({base}, {exponent}) - x;", dtype=dtype)
    kernel = xfuse.compile("out = pow(b, e) - x;", dtype=dtype)
    zero = np.zeros(1, dtype)
    got = folded(x=zero)[0]
    computed = kernel(
        b=np.array([float(base)], dtype), e=np.array([float(exponent)], dtype), x=zero
    )
    for value in (got, computed[0]):
        assert value == want and math.copysign(1.0, value) == math.copysign(1.0, want), value
    # a weak constant (a name bound to literals) folds in the frontend the same way
    weak = xfuse.compile(f"c = pow({base}, {exponent}); out = c - x;", dtype=dtype)
    again = weak(x=zero)[0]
    assert again == want and math.copysign(1.0, again) == math.copysign(1.0, want), again


@pytest.mark.parametrize("x", [-709.7827128933841, -730.0, -40.0, -0.0, 3.0, 800.0])
def test_folded_sigmoid_keeps_the_denormal_tail(x: float) -> None:
    """A folded sigmoid of a literal is the kernel's value, denormal tail included: the float64
    reference 1 / (1 + e**-x) flushed it to 0 below x = -709.78 (e**-x overflowed)."""
    folded = xfuse.compile(f"out = sigmoid({x!r}) + y;", dtype="float64", math="libm")
    computed = xfuse.compile("out = sigmoid(x) + y;", dtype="float64", math="libm")
    zero = np.zeros(1)
    want = computed(x=np.array([x]), y=zero)
    np.testing.assert_allclose(folded(y=zero), want, rtol=1e-15)
    assert (want[0] > 0) == (x > -745)
