"""The compiler at scale: no per-op recursion, fusion that stays linear, huge and odd programs.

None of these tests times anything (machines are noisy): they count what grows with the
program, and run programs that used to recurse too deep, hang LLVM, or exceed ctypes' limits.
`benchmarks/compile_scaling.py` measures the times.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import xfuse
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.passes.fuse import EwFusePass, fuse_function
from xfuse.passes.pipeline import only_function, pipeline_context
from xfuse.runtime.compiler import Options

CHAIN_STATEMENT = "a = a * 0.999 + 0.001;\n"


def chain(statements: int) -> str:
    """A chain of `2 * statements` ops, each using the one before."""
    return CHAIN_STATEMENT * statements


def wide_dag(ops: int) -> str:
    """A DAG of about `ops` ops over [t, d], [d] and [t, 1] inputs: each op reads the one before
    and a value far back (values shared by many ops), some through a broadcast."""
    lines = ["input x[t, d], y[t, d]; input b[d]; input c[t, 1];", "v0 = x * y;"]
    for i in range(1, ops // 2):
        side = ("b", "c", "x")[i % 3]
        lines.append(f"v{i} = v{i - 1} * v{i // 2} + {side};")
    return "\n".join(lines)


@contextmanager
def stack_headroom(frames: int) -> Iterator[None]:
    """Allow only `frames` more frames than are in use now: a pass that recursed once per op
    would raise RecursionError on any program of more ops than that."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("fuse", [True, False])
def test_no_pass_recurses_per_op(fuse: bool) -> None:
    # 600 ops with room for 250 frames: frontend, every pass, printing.
    source = chain(300)
    options = Options(fuse=fuse)
    with stack_headroom(250):
        module = parse_program(source)
        context = pipeline_context()
        for _, pass_ in [*options.tensor_passes(), *options.buffer_passes()]:
            pass_.apply(context, module)
        assert "llvm.func" in str(module)


def test_a_10000_op_chain_goes_through_the_tensor_passes() -> None:
    """Split into kernels of `max_ops` ops, with room for no more frames than 600 ops need (how
    the time grows with the ops is counted in test_cycle_checks_visit_linearly_many_groups)."""
    with stack_headroom(250):
        module = parse_program(chain(5_000))
        context = pipeline_context()
        for _, pass_ in Options().tensor_passes():
            pass_.apply(context, module)
        printed = str(module)
    kernels = [op for op in only_function(module).body.block.ops if isinstance(op, ew.KernelOp)]
    assert len(kernels) == math.ceil(10_000 / EwFusePass().max_ops)
    assert printed.count("arith.mulf") == printed.count("arith.addf") == 5_000


def test_tracing_and_cost_analysis_do_not_recurse_per_op() -> None:
    from xfuse.analysis.cost import CostOptions, cost_program
    from xfuse.runtime.tracing import JitFunction

    def long_chain(a: np.ndarray) -> np.ndarray:
        for _ in range(300):
            a = a * 0.999 + 0.001
        return a

    with stack_headroom(250):
        traced = JitFunction(long_chain, Options(), threads=1).compile(
            {"a": np.zeros(4, np.float32)}
        )
        # In f32: bf16 rounds 0.999 to 1, and `a * 1` is no op at all.
        cost = cost_program(chain(300), CostOptions(dtype="f32"))
    assert traced.ir("frontend").count("ew.mul") == 300
    assert len(cost.unfused.kernels) == 600


def _searched(source: str, max_ops: int) -> tuple[int, int]:
    """(ops, groups the cycle checks visited) when fusing `source`."""
    module = parse_program(source)
    ops = sum(1 for op in module.walk() if isinstance(op, ew.UnaryOp | ew.BinaryOp))
    return ops, fuse_function(only_function(module), max_ops=max_ops).groups_searched


@pytest.mark.parametrize("max_ops", [16, 10**9])
@pytest.mark.parametrize("program", [chain, wide_dag])
def test_cycle_checks_visit_linearly_many_groups(program, max_ops: int) -> None:
    # Before: each check walked everything downstream of the pair, so the visits grew with the
    # square of the program (over a million at 2,000 ops); now each visit is a group ranked
    # between the two being merged.
    for size in (250, 1000):
        ops, searched = _searched(program(size), max_ops)
        assert searched <= ops


def test_max_ops_splits_a_chain_into_kernels_of_that_size() -> None:
    module = parse_program(chain(50))
    EwFusePass(max_ops=16).apply(Context(), module)
    kernels = [op for op in only_function(module).body.block.ops if isinstance(op, ew.KernelOp)]
    sizes = [
        sum(1 for op in k.block.ops if op.name in ("arith.addf", "arith.mulf")) for k in kernels
    ]
    assert sizes == [16] * 6 + [4]


def test_max_ops_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max-ops must be at least 1, got 0"):
        EwFusePass(max_ops=0).apply(Context(), ModuleOp([]))


def test_split_chain_computes_the_same_numbers() -> None:
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    source = "a = tanh(a) * 1.5 + 0.25;\n" * 100
    want = x.astype(np.float64)
    for _ in range(100):
        want = np.tanh(want) * 1.5 + 0.25
    got = xfuse.compile(source)(a=x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_invariant_pow_chain_compiles() -> None:
    # It took LLVM's loop vectorizer 173 s when the pow chain, which depends on no loop index,
    # stayed in the vectorized loop; it is now computed once before the loops.
    source = "input x[t, 1]; input b[1]; input s[]; out = pow(s, pow(b, b)) + x;"
    kernel = xfuse.compile(source)
    x = np.arange(-3, 4, dtype=np.float32).reshape(7, 1)
    b, s = np.array([1.5], np.float32), np.array(2.0, np.float32)
    want = np.power(2.0, np.power(1.5, 1.5)) + x.astype(np.float64)
    np.testing.assert_allclose(kernel(x=x, b=b, s=s), want, rtol=2e-6)
    loops = kernel.ir("ew-kernel-to-loops")
    assert loops.index("math.powf") < loops.index("scf.for")


def test_600_inputs() -> None:
    # More native arguments than ctypes passes to one call (1024): the packed entry takes them.
    count = 600
    kernel = xfuse.compile("out = " + " + ".join(f"x{i}" for i in range(count)) + ";")
    arrays = {f"x{i}": np.full(5, i, np.float32) for i in range(count)}
    np.testing.assert_array_equal(kernel(**arrays), np.full(5, sum(range(count)), np.float32))
