"""The compiler at scale: no per-op recursion, fusion that stays linear, huge and odd programs.

None of these tests times anything (machines are noisy): they count what grows with the
program, and run programs that used to recurse too deep, hang LLVM, or exceed ctypes' limits.
`benchmarks/compile_scaling.py` measures the times.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import itertools
import math
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import llvmlite.binding as llvm_binding
import ml_dtypes
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.dialects.math import TanhOp
from xdsl.ir import Block, SSAValue

import xfuse
from xfuse.codegen import native
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.runtime import compiler
from xfuse.runtime.compiler import Options
from xfuse.transforms import kernel_to_loops
from xfuse.transforms.expand_math import EwExpandMathPass
from xfuse.transforms.fuse import (
    DEFAULT_MAX_OPS,
    EwFusePass,
    _Partition,
    fuse_function,
    scalar_size,
)
from xfuse.transforms.pipeline import only_function, parse_passes, pipeline_context
from xfuse.transforms.to_llvm import NO_INLINE

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
    # 400 ops with room for 250 frames: frontend, every pass, printing.
    source = chain(200)
    options = Options(fuse=fuse)
    with stack_headroom(250):
        module = parse_program(source)
        context = pipeline_context()
        for pass_ in options.passes():
            pass_.apply(context, module)
        assert "llvm.func" in str(module)


def test_a_50000_op_chain_goes_through_every_pass() -> None:
    """Split into kernels of `max_ops` ops, with room for no more frames than 400 ops need (how
    the time grows with the ops is counted in test_cycle_checks_visit_linearly_many_groups).
    ~11 s, in every run: marked slow (35 s then), it broke unnoticed when alike kernels came to
    share functions."""
    with stack_headroom(250):
        module = parse_program(chain(25_000))
        context = pipeline_context()
        for name, pass_ in [*Options().tensor_passes(), *Options().buffer_passes()]:
            pass_.apply(context, module)
            if name == "ew-bufferize":
                function = only_function(module)
                kernels = [op for op in function.body.block.ops if isinstance(op, ew.KernelOp)]
        printed = str(module)  # the printer too, in that headroom
    assert printed.count("llvm.func ") == len(list(module.ops))
    assert len(kernels) == math.ceil(50_000 / EwFusePass().max_ops)
    # Alike kernels share one function (`ew-kernel-to-loops`): each op is lowered once per call.
    functions = {op.sym_name.data: op for op in module.ops if isinstance(op, llvm.FuncOp)}
    calls = Counter(
        op.callee.string_value()
        for op in functions["main"].walk()
        if isinstance(op, llvm.CallOp) and op.callee is not None
    )
    for lowered in (llvm.FMulOp, llvm.FAddOp):
        ops = {
            name: sum(isinstance(op, lowered) for op in function.walk())
            for name, function in functions.items()
        }
        assert sum(ops[name] * count for name, count in calls.items()) == 25_000


def test_the_widening_analysis_walks_a_doubling_dag_in_loops() -> None:
    """`y = max(y, y)` 300 times on a bf16 input, in one kernel: 2^300 paths from the widening
    to the store, 300 values, and no room for a frame per op. `ew-to-llvm` finds that the
    multiply after them quiets a signaling NaN (`_QuietingUsers`): the widening sets no quiet
    bit (0x400000)."""
    module = parse_program("input bf16 x[n]; y = x;" + "y = max(y, y);" * 300 + "out = y * 3;")
    context = pipeline_context()
    with stack_headroom(250):
        for name, pass_ in [*Options().tensor_passes(), *Options().buffer_passes()]:
            if name == "ew-fuse":
                pass_ = dataclasses.replace(pass_, max_ops=10**9)
            pass_.apply(context, module)
            if name == "ew-bufferize":
                function = only_function(module)
                kernels = [op for op in function.body.block.ops if isinstance(op, ew.KernelOp)]
    assert len(kernels) == 1
    lowered = [op for op in module.walk() if isinstance(op, llvm.ConstantOp)]
    assert not any(op.value == IntegerAttr(0x400000, 32) for op in lowered)


def test_a_literal_repeated_in_every_statement_is_one_constant() -> None:
    # One `ew.constant` per occurrence doubled the ops that every pass up to ew-optimize's CSE
    # handled. Equal means the same bits: -0.0 and 0.0 stay apart.
    module = parse_program(chain(1000) + "b = a * 0.0 + a * -0.0;")
    values = [op.value.value.data for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert sorted(map(str, values)) == ["-0.0", "0.0", "0.001", "0.999"]


def test_tracing_and_cost_analysis_do_not_recurse_per_op() -> None:
    from xfuse.analysis.cost import CostOptions
    from xfuse.runtime.cost_driver import cost_program
    from xfuse.runtime.jit import JitFunction

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


def _values_hashed_pricing(statements: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times pricing `chain(statements)` over 4,096 elements hashes an SSA value."""
    from xfuse.analysis.cost import CostOptions
    from xfuse.runtime.cost_driver import cost_program

    hashed = [0]
    hash_value = SSAValue.__hash__

    def counting(value: SSAValue) -> int:
        hashed[0] += 1
        return hash_value(value)

    monkeypatch.setattr(SSAValue, "__hash__", counting)
    cost = cost_program(chain(statements), CostOptions(shape=(4096,), dtype="f32", l2=True))
    monkeypatch.undo()
    assert len(cost.unfused.kernels) == 2 * statements
    assert cost.unfused.kernels[-1].reads[0].from_l2  # (the L2 modelled: the input is resident)
    return hashed[0]


def test_pricing_grows_linearly_with_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    # The L2 model summed its resident tensors' sizes at every kernel: with small tensors
    # thousands stay resident, and `xfuse bench` of a 10^4-term sum spent 35 of 63 s there.
    small, large = (_values_hashed_pricing(n, monkeypatch) for n in (150, 600))
    assert large < 5 * small  # 4x the kernels; summing anew at each one made it over 10x


def _searched(source: str, max_ops: int) -> tuple[int, int]:
    """(ops, groups the cycle checks visited) when fusing `source`."""
    module = parse_program(source)
    ops = sum(1 for op in module.walk() if isinstance(op, ew.ElementwiseOp))
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


def test_fusion_weighs_a_pair_too_big_for_one_kernel_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sweep that confirmed that nothing merges any more weighed again every pair of groups
    # that max-ops had kept apart (groups only grow: they stay apart), a third of ew-fuse's time.
    fits = _Partition.fits
    weighed: list[tuple[int, int]] = []

    def spy(partition: _Partition, a: int, b: int) -> bool:
        weighed.append((a, b))
        return fits(partition, a, b)

    monkeypatch.setattr(_Partition, "fits", spy)
    module = parse_program(chain(500))
    fuse_function(only_function(module), max_ops=16)
    assert len(weighed) == 999  # each use once: each of the 1000 ops reads the one before
    kernels = [op for op in only_function(module).body.block.ops if isinstance(op, ew.KernelOp)]
    assert len(kernels) == 1000 // 16 + 1


def test_max_ops_splits_a_chain_into_kernels_of_that_size() -> None:
    module = parse_program(chain(50))
    EwFusePass(max_ops=16).apply(Context(), module)
    kernels = [op for op in only_function(module).body.block.ops if isinstance(op, ew.KernelOp)]
    sizes = [
        sum(1 for op in k.block.ops if op.name in ("arith.addf", "arith.mulf")) for k in kernels
    ]
    assert sizes == [16] * 6 + [4]


@pytest.mark.parametrize(("readers", "kernels"), [(128, 1), (129, 2), (200, 2), (300, 3)])
def test_readers_of_one_value_past_max_ops_fill_kernels_of_their_own(
    readers: int, kernels: int
) -> None:
    """`o_i = x * c_i`: the readers of x the first one's kernel cannot take (it is full at
    max-ops, 128) fuse with each other, ceil(readers / 128) kernels in all; each was a kernel
    of its own (300 readers: 173 kernels, each reading x again), and their results are right."""
    source = "".join(f"o{i} = x * {i + 2};\n" for i in range(readers))
    kernel = xfuse.compile(source, outputs=[f"o{i}" for i in range(readers)])
    assert kernel.stages["ew-fuse"].count("ew.kernel") == kernels
    x = np.linspace(-3, 3, 257, dtype=np.float32)
    for i, result in enumerate(kernel(x=x)):
        np.testing.assert_array_equal(result, x * np.float32(i + 2))


def test_readers_of_one_value_through_a_tanh_each_share_kernels_as_they_fit() -> None:
    """Twenty `o_i = tanh(x * c_i)`: a tanh weighs `scalar_size(ew.TanhOp)`, so the first
    reader's kernel takes 8 of them; the other 12 made 12 kernels, now 2."""
    per_kernel = DEFAULT_MAX_OPS // (scalar_size(ew.TanhOp) + 1)
    source = "".join(f"o{i} = tanh(x * {i + 2});\n" for i in range(20))
    kernel = xfuse.compile(source, outputs=[f"o{i}" for i in range(20)])
    assert kernel.stages["ew-fuse"].count("ew.kernel") == math.ceil(20 / per_kernel)
    x = np.linspace(-3, 3, 257, dtype=np.float32)
    for i, result in enumerate(kernel(x=x)):
        np.testing.assert_allclose(result, np.tanh(x.astype(np.float64) * (i + 2)), atol=3e-7)


def test_max_ops_counts_each_op_as_its_expansion() -> None:
    # A tanh counted as one op put 64 of them (~1,600 scalar ops) in a kernel, and LLVM's loop
    # vectorizer took ~1 s per kernel (a 1,000-statement tanh chain: minutes). Counted as the
    # ops ew-expand-math makes of it, a kernel holds what fits in max-ops scalar ops.
    tanh = scalar_size(ew.TanhOp)
    assert scalar_size(ew.AddOp) == 1 and 10 <= tanh <= 40
    module = parse_program("a = tanh(a);\n" * 100)
    EwFusePass().apply(Context(), module)
    kernels = [op for op in only_function(module).body.block.ops if isinstance(op, ew.KernelOp)]
    per_kernel = EwFusePass().max_ops // tanh
    assert [sum(isinstance(op, TanhOp) for op in k.block.ops) for k in kernels] == [per_kernel] * (
        100 // per_kernel
    ) + ([100 % per_kernel] if 100 % per_kernel else [])
    EwExpandMathPass().apply(Context(), module)
    for kernel in kernels:
        ops = [op for op in kernel.block.ops if not isinstance(op, arith.ConstantOp | ew.YieldOp)]
        assert len(ops) <= EwFusePass().max_ops


def test_expanded_approximations_share_their_constants() -> None:
    # Each approximation made its own constant ops: 16,607 of the 43,219 ops that ew-to-llvm
    # lowered in the 1,000-statement tanh chain. Now each value (same bits, same type) is one op
    # per block, at its start, whichever expansion asked first.
    module = parse_program("a = tanh(a);\nb = exp(a);\nout = tanh(b) * log(b) + pow(a, b);")
    EwFusePass().apply(Context(), module)
    EwExpandMathPass().apply(Context(), module)
    kernels = [op for op in only_function(module).walk() if isinstance(op, ew.KernelOp)]
    assert kernels
    for kernel in kernels:
        ops = list(kernel.block.ops)
        constants = [op for op in ops if isinstance(op, arith.ConstantOp)]
        values = [(c.value, c.result.type) for c in constants]
        assert len(values) == len(set(values)) > 10
        assert ops[: len(constants)] == constants
        assert not any(isinstance(op, TanhOp) for op in ops)


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


def _roundings_nested(value: SSAValue, memo: dict[SSAValue, int]) -> int:
    """How many `arith.andi` (the alignment's rounding) lie on the longest chain `value` is
    computed along."""
    if value not in memo:
        owner = value.owner
        if not isinstance(owner, arith.AndIOp | arith.AddiOp | arith.MuliOp):
            memo[value] = 0
        else:
            nested = max(_roundings_nested(operand, memo) for operand in owner.operands)
            memo[value] = nested + isinstance(owner, arith.AndIOp)
    return memo[value]


def test_workspace_offsets_are_a_flat_sum_of_rounded_sizes() -> None:
    # Each offset rounded the previous offset plus a size: the k-th buffer's offset was k
    # roundings deep, and LLVM's Loop Strength Reduction took time growing with the square of
    # the program on those expressions (a wide DAG of 10^4 ops: minutes). Now each offset is the
    # previous one plus a rounded size, which LLVM folds to a sum of a few terms.
    module = parse_program(wide_dag(1000))
    context = pipeline_context()
    for name, pass_ in [*Options().tensor_passes(), *Options().buffer_passes()]:
        pass_.apply(context, module)
        if name == "ew-workspace":
            break
    memo: dict[SSAValue, int] = {}
    views = [op for op in module.walk() if isinstance(op, memref.ViewOp)]
    assert len(views) > 100
    assert max(_roundings_nested(view.byte_shift, memo) for view in views) == 1


def _lowered_functions(source: str) -> dict[str, llvm.FuncOp]:
    """The `llvm.func`s with a body that `xfuse.compile` hands LLVM for `source`, by name."""
    module = parse_program(source)
    context = pipeline_context()
    for _, pass_ in [*Options().tensor_passes(), *Options().buffer_passes()]:
        pass_.apply(context, module)
    return {f.sym_name.data: f for f in module.ops if isinstance(f, llvm.FuncOp) and f.body.blocks}


def test_lowering_to_llvm_renumbers_no_block_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each memref argument became its pointer and sizes by an `insert_arg` a piece and an
    # `erase_arg`, each renumbering every argument after it (xDSL): time growing with the square
    # of the arrays, 4.4 of 25 s compiling a sum of 3,000 inputs.
    count = 200
    module = parse_program("out = " + " + ".join(f"x{i}" for i in range(count)) + ";")
    context = pipeline_context()
    *before, (name, to_llvm) = [*Options().tensor_passes(), *Options().buffer_passes()]
    assert name == "ew-to-llvm"
    for _, pass_ in before:
        pass_.apply(context, module)
    (function,) = [
        f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"
    ]
    memrefs = sum(isinstance(t, MemRefType) for t in function.function_type.inputs)
    assert memrefs > count  # (its inputs, its output, the workspace of its two kernels)
    renumbering: list[str] = []
    for method in ("insert_arg", "erase_arg"):
        spied = getattr(Block, method)
        monkeypatch.setattr(
            Block,
            method,
            lambda *args, method=method, spied=spied: renumbering.append(method) or spied(*args),
        )
    to_llvm.apply(context, module)
    assert renumbering == []
    (main,) = [f for f in module.ops if isinstance(f, llvm.FuncOp) and f.sym_name.data == "main"]
    pointers = [t for t in main.function_type.inputs if isinstance(t, llvm.LLVMPointerType)]
    assert len(pointers) == memrefs


def _loops(function: llvm.FuncOp) -> int:
    return sum(isinstance(op, llvm.CondBrOp) for op in function.walk())


def _callees(function: llvm.FuncOp) -> list[str]:
    return [op.callee.string_value() for op in function.walk() if isinstance(op, llvm.CallOp)]


def test_llvm_gets_one_function_per_kernel_whatever_the_program_size() -> None:
    # Before, every kernel's loops were in the one function of the program, and LLVM's register
    # allocator and Loop Strength Reduction took time growing faster than that function (a wide
    # DAG of 10^4 ops: minutes). Now each kernel is a function LLVM must not inline, so the
    # largest function it optimizes is one kernel's, at any program size.
    largest = []
    for statements in (250, 1000):
        functions = _lowered_functions(wide_dag(2 * statements))
        kernels = {name: f for name, f in functions.items() if ".kernel" in name}
        called = _callees(functions["main"])
        assert len(called) == math.ceil(2 * statements / EwFusePass().max_ops)
        assert set(called) == set(kernels)
        assert all(NO_INLINE in f.attributes for f in kernels.values())
        assert all(_loops(f) == 0 for name, f in functions.items() if name not in kernels)
        largest.append(max(sum(1 for _ in f.walk()) for f in kernels.values()))
    assert largest[1] <= largest[0] * 1.1


def test_kernel_functions_stay_functions_through_llvm() -> None:
    kernel = xfuse.compile(chain(300))
    module = llvm_binding.parse_assembly(kernel.llvm_ir)
    outlined = [f for f in module.functions if f.name.startswith("main.kernel")]
    # 5 kernels: the first (input to workspace), three alike in place, a shorter last one
    assert len(outlined) == 3
    for function in outlined:
        assert not function.is_declaration
        assert any(b"noinline" in attributes.split() for attributes in function.attributes)
        assert all(b"optnone" not in attributes.split() for attributes in function.attributes)
        assert "vector.body" in str(function)  # vectorized: O3 ran on it
    # O3 on the program's function, which only computes workspace addresses and calls the
    # kernels' functions, took a third of LLVM's optimizer time on the wide DAG of 10^4 ops.
    # It is `optnone` now: O3 leaves it as it is, each of its calls included.
    main = module.get_function("main")
    assert {b"optnone", b"noinline"} <= {a for group in main.attributes for a in group.split()}
    calls = [i for b in main.blocks for i in b.instructions if "@main.kernel" in str(i)]
    assert len(calls) == 5
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    want = x
    for _ in range(300):  # float32, each op rounded as numpy does: no FMA unless asked
        want = want * np.float32(0.999) + np.float32(0.001)
    np.testing.assert_array_equal(kernel(a=x), want)


@pytest.mark.usefixtures("cache")  # compiled, not loaded
def test_optnone_on_the_calling_function_leaves_the_kernels_code_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kernels' optimized IR is what O3 made of them when it also optimized `@main`.
    given_to_o3: list[str] = []
    optimize = native.optimize_llvm_ir

    def spy(llvm_ir: str, *args: Any) -> llvm_binding.ModuleRef:
        given_to_o3.append(llvm_ir)
        return optimize(llvm_ir, *args)

    monkeypatch.setattr(native, "optimize_llvm_ir", spy)
    xfuse.compile(wide_dag(600))
    (llvm_ir,) = [text for text in given_to_o3 if '@"main.kernel' in text]  # not the runtime's
    assert re.search(r'^define internal void @"main"\(.*\) noinline optnone$', llvm_ir, re.M)
    machine = native.host_target_machine()
    optimized = [
        native.optimize_llvm_ir(text, machine, 3)
        for text in (llvm_ir, llvm_ir.replace(" noinline optnone\n", "\n", 1))
    ]

    def kernels(module: llvm_binding.ModuleRef) -> dict[str, str]:
        # attribute groups are numbered per module
        return {
            f.name: re.sub(r"#\d+", "#", str(f))
            for f in module.functions
            if f.name.startswith("main.kernel")
        }

    assert "main" not in {f.name for f in optimized[1].functions}  # O3 inlined it there
    assert len(kernels(optimized[0])) == 5
    assert kernels(optimized[0]) == kernels(optimized[1])


def test_alike_kernels_are_compiled_once_and_each_still_runs() -> None:
    # Each kernel of a program was lowered and handed to LLVM as a function of its own, though
    # nearly all kernels of a long chain are alike: the chain of 10^4 ops had ew-to-llvm, LLVM's
    # O3 and code generation work through 79 functions where 3 differ. Now kernels alike in
    # everything LLVM sees share one function, which each of them calls.
    statements = EwFusePass().max_ops // 2  # a kernel's worth
    kernels = 10
    source = chain(statements * kernels)
    functions = _lowered_functions(source)
    assert sorted(name for name in functions if ".kernel" in name) == [
        "main.kernel0",
        "main.kernel1",
    ]
    # the first and last read one array and write another; those between work in place
    assert _callees(functions["main"]) == ["main.kernel0", *["main.kernel1"] * (kernels - 2)] + [
        "main.kernel0"
    ]
    x = np.linspace(-1, 1, 1001, dtype=np.float32)
    got = xfuse.compile(source)(a=x)
    one_kernel = xfuse.compile(chain(statements))
    want = x
    for _ in range(kernels):
        want = one_kernel(a=want)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    reference = x.astype(np.float64)
    for _ in range(statements * kernels):
        reference = reference * np.float32(0.999) + np.float32(0.001)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-5)


def test_kernels_differing_in_a_zero_sign_keep_their_own_functions() -> None:
    # Unfused, `x * 0.0` and `y * -0.0` are two kernels alike but for their constant's sign
    # bit: they must not share a function (x = 1 gives -0.0, not +0.0).
    kernel = xfuse.compile("input x; y = x * 0.0; out = y * -0.0;", fuse=False)
    loops = kernel.ir("ew-kernel-to-loops")
    assert loops.count("func.func private @main.kernel") == 2
    x = np.array([1.0, -1.0, 0.0, -0.0, np.inf, 3e38], np.float32)
    with np.errstate(invalid="ignore"):  # inf * 0
        want = x * np.float32(0.0) * np.float32(-0.0)
    np.testing.assert_array_equal(kernel(x=x).view(np.uint32), want.view(np.uint32))


def test_alike_kernels_are_what_xdsls_structural_comparison_says_with_result_types() -> None:
    # ew-kernel-to-loops compares kernels in one loop of its own (the generic comparison took
    # 0.1 CPU s of a 10^4-op compile): it must agree with xDSL's, which also asks for equal
    # result types, on every pair it is asked about.
    module = parse_program(
        "input x; input y; a = x * 0.0; b = y * -0.0; d = x - 2.0; e = 2.0 - x; f = y - 2.0;"
        "g = x * y; h = y * x; i = g * g; j = g * h; k = f32(f16(x)); l = f32(bf16(y));"
        "out = a + b + d + e + f + i + j + k + l;"
    )
    context = pipeline_context()
    for name, pass_ in [*Options(fuse=False).tensor_passes(), *Options().buffer_passes()]:
        if name == "ew-kernel-to-loops":
            break
        pass_.apply(context, module)
    # The pairs xDSL can compare: the same ops, reading and writing memrefs in the same pattern.
    comparable: dict[object, list[ew.KernelOp]] = {}
    for kernel in module.walk():
        if isinstance(kernel, ew.KernelOp):
            memrefs: dict[SSAValue, int] = {}
            pattern = tuple(memrefs.setdefault(m, len(memrefs)) for m in kernel.operands)
            comparable.setdefault((pattern, *(op.name for op in kernel.walk())), []).append(kernel)
    verdicts = []
    for kernels in comparable.values():
        for kernel, other in itertools.combinations(kernels, 2):
            reads = dict(zip(kernel.operands, other.operands, strict=True))
            context_ = {kernel.parent_block(): other.parent_block(), **reads}
            verdict = kernel.is_structurally_equivalent(other, context_) and all(
                op.result_types == other_op.result_types
                for op, other_op in zip(kernel.walk(), other.walk(), strict=True)
            )
            alike = kernel_to_loops._kernel_key(kernel) == kernel_to_loops._kernel_key(other)
            assert alike == verdict
            verdicts.append(verdict)
    assert set(verdicts) == {True, False}  # (0.0 and -0.0, x - 2 and 2 - x differ)


def test_kernels_differing_in_a_constant_are_told_apart_by_one_key_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kernels alike but for a constant shared a bucket and each was compared with every kept
    # one of it: k^2 / 2 comparisons (11.6 s for 1000 such kernels). Now each kernel's key is
    # computed once and looked up; kernels share a function as before.
    constants = ["2.0", "3.0", "-0.0"]
    source = "t0 = x;\n" + "".join(
        f"t{i} = t{i - 1} * {constants[i % 3]};\n" for i in range(1, 301)
    )
    module = parse_program(source)
    context = pipeline_context()
    for pass_ in parse_passes("ew-optimize,ew-fuse{mode=none},ew-bufferize,ew-workspace"):
        pass_.apply(context, module)
    key = kernel_to_loops._kernel_key
    keyed: list[ew.KernelOp] = []
    monkeypatch.setattr(kernel_to_loops, "_kernel_key", lambda k: keyed.append(k) or key(k))
    kernel_to_loops.EwKernelToLoopsPass().apply(context, module)
    assert len(keyed) == 300
    callees = Counter(
        call.callee.string_value() for call in module.walk() if isinstance(call, func.CallOp)
    )
    # the first reads x, the last writes the output; between them one function per constant
    assert sorted(callees.values()) == [1, 1, 99, 99, 100]


def test_kernels_rounding_to_f16_and_to_bf16_keep_their_own_functions() -> None:
    # Alike for xDSL's `is_structurally_equivalent` (the same ops, attributes and operands; it
    # does not compare result types), the two kernels shared one function, which rounded both
    # through f16: `b` was 3.0029297 where bf16 gives 3.
    kernel = xfuse.compile(
        "input x; input y; a = f32(f16(x)) * 3; b = f32(bf16(y)) * 3;", outputs=["a", "b"]
    )
    assert kernel.ir("ew-kernel-to-loops").count("func.func private @main.kernel") == 2
    x = np.array([1.001, 3.14159, -0.0, 60001.0, np.inf], np.float32)
    a, b = kernel(x=x, y=x)
    three = np.float32(3)
    want_a = x.astype(np.float16).astype(np.float32) * three
    want_b = x.astype(ml_dtypes.bfloat16).astype(np.float32) * three
    np.testing.assert_array_equal(a.view(np.uint32), want_a.view(np.uint32))
    np.testing.assert_array_equal(b.view(np.uint32), want_b.view(np.uint32))


def test_compiling_pauses_the_cyclic_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its full collections walk the whole live IR again and again: a third of the passes' CPU
    # time on a 10^4-op program.
    seen: list[bool] = []
    lower = compiler._lower

    def spy(*args: Any) -> compiler.Program:
        seen.append(gc.isenabled())
        return lower(*args)

    monkeypatch.setattr(compiler, "_lower", spy)
    assert gc.isenabled()
    xfuse.compile("out = x * 1.25 + 0.375;  # test_compiling_pauses_the_cyclic_collector")
    assert seen == [False]
    assert gc.isenabled()


def test_collector_pause_nests_across_threads_and_errors() -> None:
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with compiler.collector_paused():
            inside.set()
            leave.wait()

    other = threading.Thread(target=hold)
    other.start()
    assert inside.wait(timeout=60)
    with pytest.raises(ZeroDivisionError), compiler.collector_paused():
        assert not gc.isenabled()
        _ = 1 / 0
    assert not gc.isenabled()  # the other thread still compiles
    leave.set()
    other.join()
    assert gc.isenabled()
    gc.disable()
    try:
        with compiler.collector_paused():
            pass
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()


def test_a_kernel_computes_one_address_per_element_however_many_arrays_it_has() -> None:
    # Each array with its own `?` sizes gave LLVM one address computation (row * its row
    # length + column) per array: dozens in a wide DAG's kernels, a fifth of LLVM's time there.
    functions = _lowered_functions(wide_dag(500))
    kernels = [f for name, f in functions.items() if ".kernel" in name]
    for kernel in kernels:
        arrays = sum(isinstance(t, llvm.LLVMPointerType) for t in kernel.function_type.inputs)
        assert arrays > 30
        loops = list(kernel.body.blocks)[1:]
        multiplies = [op for block in loops for op in block.ops if isinstance(op, llvm.MulOp)]
        assert len(multiplies) == 2  # the row's start, and the [t, 1] input's row


@pytest.mark.parametrize("recompile", [False, True])
def test_a_compile_leaves_no_cyclic_garbage_behind(recompile: bool) -> None:
    # Its IR is cyclic garbage once compiled: still referenced when the collector came back, the
    # collection that followed found it alive, and it waited for a later, older-generation one.
    gc.collect()
    for scale in (1.5, 2.5):
        source = f"input x[t, d]; input b[d]; out = tanh(x * b + {scale});"
        kernel = xfuse.compile(source + "  # test_a_compile_leaves_no_cyclic_garbage_behind")
        if recompile:  # as unpickling does: from the frontend IR
            frontend_ir = kernel.ir("frontend")
            gc.collect()
            compiler.program_of_ir(frontend_ir, ("out",), Options(fuse=False))
        assert gc.collect() == 0
