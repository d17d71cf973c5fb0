"""ew-fuse: kernel counts, regions, legality (shapes, cycles) and the scalar mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import ml_dtypes
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import (
    FileLineColLoc,
    Float16Type,
    Float32Type,
    IntAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Block

import xfuse
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.transforms.fuse import (
    DEFAULT_MAX_OPS,
    EwFusePass,
    fuse_function,
    hoisted,
    scalar_size,
)
from xfuse.transforms.optimize import EwOptimizePass
from xfuse.transforms.scalar import SCALAR_LOWERINGS

if TYPE_CHECKING:
    from conftest import Gelu


def fused(
    module: ModuleOp, mode: str = "greedy", max_ops: int = DEFAULT_MAX_OPS
) -> list[ew.KernelOp]:
    EwFusePass(mode=mode, max_ops=max_ops).apply(Context(), module)
    module.verify()
    function = cast(func.FuncOp, module.body.block.first_op)
    assert all(isinstance(op, ew.KernelOp | func.ReturnOp) for op in function.body.block.ops)
    return [op for op in function.body.block.ops if isinstance(op, ew.KernelOp)]


@pytest.mark.parametrize(("mode", "kernels"), [("greedy", 1), ("none", 11)])
def test_gelu_kernel_count(mode: str, kernels: int, gelu: Gelu) -> None:
    module = parse_program(gelu.source)
    EwOptimizePass().apply(Context(), module)
    assert len(fused(module, mode)) == kernels


@pytest.mark.parametrize(
    ("source", "kernels"),
    [
        ("input x[t, d], b[d];\nout = x + sin(cos(b));", 2),  # libm calls, t times an element
        ("input x[t, d], v[t, 1];\nout = x * sin(v);", 1),  # once a row, out of d's loop
        ("input x[2, 4096], b[4096];\nout = x + sin(b);", 2),  # 4,096 calls more
        ("input x[8, 8], b[8];\nout = x + sin(b);", 2),  # 56 calls more: 2.15x faster split
        ("input x[d], s[];\nout = x * sin(s);", 1),  # once, before the loop
        ("input x[t, e, d], b[t, 1, d];\nout = x + sin(b);", 2),  # again for each e
        ("input x[t, d], b[d];\nout = x + exp(b);", 1),  # arithmetic (28 instructions)
        ("input x[t, d], b[d];\nout = x + (b * 2 + 1);", 1),
        ("input x[1, d], b[d];\nout = x + sin(b);", 1),  # each element computed once
        ("input x[t, d], v[t, 1];\nout = x * rsqrt(v + 1e-6);", 1),
        # f16/bf16 values: its own kernel would store them rounded (fused: kept in f32)
        ("input f16 x[t, d];\ninput f16 b[d];\nout = x + sin(b);", 1),
        ("input bf16 x[t, d];\ninput b[d];\nout = x + sin(b);", 2),  # (an f32 row's sin)
        ("input f64 x[t, d], b[d];\nout = x + tanh(b);", 2),  # f64: libm's tanh
    ],
)
def test_a_broadcast_group_is_recomputed_only_where_it_is_cheap(source: str, kernels: int) -> None:
    """A `[d]` row's `sin(cos(...))` fused into a `[t, d]` kernel ran t times per element: 6.88x
    the time of its own small kernel and the `[t, d]` one (1024 x 4096 f32, AVX-512; 12.4x with
    AVX2; benchmarks/broadcast_recompute.py), 1.07-5.74x at a few static rows and columns.
    Arithmetic stays: its kernel of its own cost more than it saved at few rows (`[2, 2^22]`:
    1.37x)."""
    assert len(fused(parse_program(source))) == kernels


@pytest.mark.parametrize(
    "source",
    [
        "input x[t, d], b[d];\nout = x + sin(b);",
        "input x[t, d], b[d];\nout = x * sin(cos(b));",
        "input bf16 x[t, d];\ninput b[d];\nout = x + sin(b) * b;",
        "input f64 x[t, d], b[d];\nout = x - tan(b);",
    ],
)
def test_a_row_in_a_kernel_of_its_own_computes_the_same_bits(source: str) -> None:
    """Its temporary is of its own dtype (f32, f64: no rounding the fused kernel does not do):
    `ew-fuse{recompute=all}` and the default agree bit for bit, specials too."""
    from xfuse.dialects.dtypes import numpy_dtype
    from xfuse.runtime.compiler import compile_bufferized
    from xfuse.transforms.default_pipeline import default_pipeline, split_after
    from xfuse.transforms.pipeline import apply_pipeline, only_function

    frontend = parse_program(source)
    names = [str(ew.input_name(argument)) for argument in only_function(frontend).args]
    tensor_passes, _ = split_after(default_pipeline(), "ew-bufferize")
    kernels = []
    for recompute in ("all", "cheap"):
        passes = [
            EwFusePass(recompute=recompute) if p.name == "ew-fuse" else p for p in tensor_passes
        ]
        kernels.append(compile_bufferized(apply_pipeline(frontend, passes), names))
    assert [k.ir("ew-bufferize").count("ew.kernel") for k in kernels] == [1, 2]
    specials = [0.0, -0.0, 1.5, -2.5, 88.5, -104.0, np.inf, -np.inf, np.nan, 1e-40]
    row = np.array(specials * 3, np.float64)
    arrays = {}
    for parameter in kernels[0].function.inputs:
        shape = (3, row.size) if parameter.name == "x" else row.size
        arrays[parameter.name] = np.resize(row, shape).astype(numpy_dtype(parameter.dtype))
    every, cheap = (kernel(**arrays) for kernel in kernels)
    assert np.array_equal(every.view(f"u{every.itemsize}"), cheap.view(f"u{cheap.itemsize}"))


def test_a_row_under_math_libm_calls_and_gets_a_kernel_of_its_own() -> None:
    """The rule read calls from the f32 approx lowering only: a row's tanh under math="libm"
    was called for every row (40 ms against 1.2 ms split, 1024 x 4096 f32)."""
    source = "input x[t, d], b[d];\nout = x + tanh(b);"
    counts = [
        xfuse.compile(source, math=math).ir("ew-bufferize").count("ew.kernel ins")
        for math in ("approx", "libm")
    ]
    assert counts == [1, 2]


def test_hoisted_is_a_group_invariant_in_the_loops_it_repeats_along() -> None:
    assert hoisted((4, 1), (4, 8)) and hoisted((), (4, 8)) and hoisted((4, 1, 1), (4, 5, 8))
    assert hoisted((4, 8), (4, 8)) and hoisted((8,), (1, 8))
    assert not hoisted((8,), (4, 8)) and not hoisted((4, 1, 8), (4, 5, 8))


def test_gelu_region_computes_h_once_with_immediate_constants(gelu: Gelu) -> None:
    (kernel,) = fused(parse_program(gelu.source))
    assert len(kernel.inputs) == 3
    ops = list(kernel.block.ops)
    assert sum(isinstance(op, arith.ConstantOp) for op in ops) == 4
    assert sum(isinstance(op, math.TanhOp) for op in ops) == 1
    assert sum(isinstance(op, arith.AddfOp | arith.MulfOp) for op in ops) == 10
    (h,) = [op for op in ops if isinstance(op, arith.AddfOp)][:1]
    assert h.result.uses.get_length() == 5


def test_a_whole_power_counts_as_the_multiplies_it_becomes() -> None:
    """PyTorch's tanh-GELU writes its cube as pow(x, 3): ~100 ops as exp(3 log|x|), which made
    the GELU two kernels; `ew-expand-math` multiplies instead, and fusion counts it so."""
    source = "y = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * pow(x, {}))));"
    max_ops = scalar_size(ew.PowOp) + 10  # room for the power and a little: not for the tanh
    (kernel,) = fused(parse_program(source.format(3)), max_ops=max_ops)
    assert sum(isinstance(op, math.PowFOp) for op in kernel.block.ops) == 1
    assert len(fused(parse_program(source.format(2.5)), max_ops=max_ops)) == 2
    assert scalar_size(ew.PowOp, 3) < 5 < scalar_size(ew.PowOp)


def test_every_elementwise_op_has_a_scalar_lowering() -> None:
    assert set(SCALAR_LOWERINGS) == set(ew.ELEMENTWISE_OPS)
    source = "; ".join(
        f"v{i} = {ew.mnemonic(op)}({', '.join(['x', 'y', 'x'][: ew.arity(op)])})"
        for i, op in enumerate(ew.ELEMENTWISE_OPS)
    )
    outputs = [f"v{i}" for i in range(len(ew.ELEMENTWISE_OPS))]
    every_op = sum(scalar_size(op) for op in ew.ELEMENTWISE_OPS)
    (kernel,) = fused(parse_program(source + ";", outputs=outputs), max_ops=every_op)
    assert len(kernel.res) == len(ew.ELEMENTWISE_OPS)


def test_f16_computes_in_f32() -> None:
    (kernel,) = fused(parse_program("y = tanh(x) * 3;", dtype="float16"))
    ops = list(kernel.block.ops)
    assert isinstance(ops[0], arith.ExtFOp) and isinstance(ops[-2], arith.TruncFOp)
    assert all(r.type == Float32Type() for op in ops[1:-2] for r in op.results), (
        "the region computes in f32"
    )
    assert kernel.yield_op.values[0].type == Float16Type()


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("fuse", [True, False])
def test_ops_after_a_narrow_output_read_it_as_stored(dtype: type, fuse: bool) -> None:
    """`q = p / y` read the f32 product where the kernel stored p rounded: with p = inf in f16,
    q was 60000 beside it; fused or not, q is what numpy computes from the stored p."""
    x = np.array([60000.0, 3.1, -2.015625, 33.25, 1e-3], dtype)
    y = np.array([2.0, 1.1, 1.5, 1.5, 3.0], dtype)
    kernel = xfuse.compile(
        "p = x * y; q = p / y; r = f32(p);",
        outputs=["p", "q", "r"],
        dtype=np.dtype(dtype).name,
        fuse=fuse,
    )
    with np.errstate(all="ignore"):
        p, q, r = kernel(x=x, y=y)
        want_p = x * y
        want_q = want_p / y
    for got, want in ((p, want_p), (q, want_q), (r, want_p.astype(np.float32))):
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("fuse", [True, False])
def test_an_explicit_conversion_to_its_own_narrow_type_rounds(dtype: type, fuse: bool) -> None:
    """`f16(x * x)` of an f16 `x` was dropped (the types are equal), so the fused kernel divided
    the f32 square: 300 * 300 / 300 was 300 where the f16 square is inf (numpy: inf), and bf16
    (1.421875 * 1.421875) / 1.421875 was 1.421875, numpy 1.4140625. The same in `@xfuse.jit`
    with `.astype`."""
    x = np.array([300.0, 3e38, 1.421875, -1.4609375], dtype)  # squares inf, or inexact in bf16
    name = {np.float16: "f16", ml_dtypes.bfloat16: "bf16"}[dtype]
    dtype_name = np.dtype(dtype).name
    kernel = xfuse.compile(f"t = {name}(x * x); out = t / x;", dtype=dtype_name, fuse=fuse)
    traced = xfuse.jit(lambda x: (x * x).astype(dtype) / x, fuse=fuse)
    with np.errstate(all="ignore"):
        want = (x * x) / x
        for got in (kernel(x=x), traced(x)):
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_a_returned_input_is_written_by_the_kernel_that_reads_it() -> None:
    """`y = exp(x); output x, y;` was two kernels, the exp and a copy of x, reading x twice: the
    exp kernel writes x's copy too (its block argument yielded unchanged). Unfused, and where
    no kernel reads x over x's own shape (a [d] bias read by a [t, d] kernel), the copy stays a
    kernel of its own."""
    (kernel,) = fused(parse_program("y = exp(x); output x, y;"))
    (x,) = kernel.inputs
    assert kernel.yield_op.values[1] is kernel.block.args[0]
    function = kernel.parent_op()
    assert isinstance(function, func.FuncOp)
    assert list(function.get_return_op().arguments) == [kernel.res[1], kernel.res[0]]
    assert len(fused(parse_program("y = exp(x); output x, y;"), "none")) == 2
    bias = parse_program("y = x + b; output b, y;", shapes={"x": ("t", "d"), "b": ("d",)})
    assert [len(k.res) for k in fused(bias)] == [1, 1]


@pytest.mark.parametrize("mode", ["greedy", "none"])
def test_a_copy_is_named_after_the_input_it_copies(mode: str) -> None:
    """A returned input's copy had no name (`%0`, `t0` in the cost tables): it is `%x_1`."""
    kernels = fused(parse_program("y = exp(x); output x, y;"), mode)
    assert [r.name_hint for k in kernels for r in k.res] == ["y", "x"]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_returned_inputs_copied_by_a_kernel_run(dtype: type) -> None:
    """Two returned inputs (one twice) copied by the kernel that reads them, in their own dtypes:
    the results are the inputs bit for bit, the product numpy's."""
    kernel = xfuse.compile(
        "input f32 w; y = x * w; out = x;",
        outputs=["w", "x", "y", "out"],
        dtype=np.dtype(dtype).name,
    )
    assert len(kernel.program.stages["ew-fuse"].split("ew.kernel")) == 2  # one kernel
    x = np.array([1.5, -0.0, np.inf, np.nan, 3e38], dtype)
    w = np.array([2.0, 3.0, -1.0, 1.0, 10.0], np.float32)
    got_w, got_x, y, out = kernel(x=x, w=w)
    np.testing.assert_array_equal(got_w.view(np.uint32), w.view(np.uint32))
    for copy in (got_x, out):
        assert copy.dtype == x.dtype
        np.testing.assert_array_equal(copy.view(np.uint8), x.view(np.uint8))
    np.testing.assert_array_equal(y, x.astype(np.float32) * w)


def test_no_cycle_through_another_kernel() -> None:
    # [?] a -> [?,?] p -> [?] ... : a's group cannot absorb the [t, d] consumer, and merging
    # two groups around a kernel that sits between them would make a cycle.
    module = parse_program(
        "a = exp(b); p = x + a; s = neg(a); q = p * s; m = abs(b);",
        outputs=["q", "a", "m"],
        shapes={"x": ("t", "d"), "b": ("d",)},
    )
    kernels = fused(module)
    assert len(kernels) == 2
    shapes = sorted(len(k.res[0].type.get_shape()) for k in kernels)
    assert shapes == [1, 2]


def test_none_mode_makes_one_kernel_per_op_and_drops_dead_ops() -> None:
    module = parse_program("d = exp(x); y = x + 1;", outputs=["y"])
    function = cast(func.FuncOp, module.body.block.first_op)
    stats = fuse_function(function, greedy=False)
    assert (stats.elementwise_ops, stats.kernels, stats.fused_ops) == (2, 1, 0)


@pytest.mark.parametrize("fuse", [True, False])
def test_a_narrow_output_is_widened_again_only_for_its_own_kernel(
    monkeypatch: pytest.MonkeyPatch, fuse: bool
) -> None:
    """The `arith.extf` after a bf16 output's `arith.truncf` is built only where an op of the
    same kernel reads it: one for each output, left to `_drop_unused`, was a third of the ops
    ew-fuse built for a long chain."""
    from xfuse.transforms import fuse as fuse_module

    erased: list[int] = []

    def recording_drop_unused(block: Block) -> None:
        before = len(block.ops)
        drop_unused(block)
        erased.append(before - len(block.ops))

    drop_unused = fuse_module._drop_unused
    monkeypatch.setattr(fuse_module, "_drop_unused", recording_drop_unused)
    source = "h = x * y; z = exp(h) + h; out = z * x;"
    module = parse_program(source, dtype="bfloat16", outputs=["h", "out"])
    kernels = fused(module, "greedy" if fuse else "none")
    assert erased and not any(erased)
    # Each kernel yields what it stores; a widening remains only where a later op reads it.
    for kernel in kernels:
        ops = [op.name for op in kernel.body.block.ops]
        assert ops.count("arith.truncf") == len(kernel.res)
    assert len(kernels) == (1 if fuse else 4)


def test_greedy_kernel_body_drops_dead_chains() -> None:
    """Without ew-optimize first, a dead chain fuses into the live op's kernel; its scalars go."""
    module = parse_program("d = exp(x); e = tanh(d); f = e * d; y = x + 1;", outputs=["y"])
    function = cast(func.FuncOp, module.body.block.first_op)
    fuse_function(function)
    (kernel,) = [op for op in function.walk() if isinstance(op, ew.KernelOp)]
    body = [op.name for op in kernel.body.block.ops]
    assert body == ["arith.constant", "arith.addf", "ew.yield"]


def test_a_kernels_widenings_are_at_their_inputs() -> None:
    """The f32 widening of a bf16 input was `loc(unknown)` (every other scalar op is at its ew
    op's token): it is at the input's."""
    module = parse_program("input bf16 x; out = x * 2;", filename="w.ew")
    EwFusePass().apply(Context(), module)
    (widening,) = [op for op in module.walk() if isinstance(op, arith.ExtFOp)]
    assert widening.location == FileLineColLoc(StringAttr("w.ew"), IntAttr(1), IntAttr(12))
