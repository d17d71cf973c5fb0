"""Issue 8: N-D shapes, broadcasting, declarations and mixed dtypes through every entry point.

GELU with x, r of shape [t, d] and a bias b of shape [d] (small t, d here) through
`xfuse.compile`, `@xfuse.jit` and `xfuse cost`; `ew.convert` from the frontend's promotion to the
kernels, the numpy baselines and `ew-to-linalg`; clear errors for shapes that do not fit.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType
from xdsl.ir import Attribute

import xfuse
from xfuse.analysis.cost import CostOptions
from xfuse.benchmarking.baselines import compile_numpy, compile_numpy_planned
from xfuse.dialects import ew
from xfuse.dialects.dtypes import DTYPE_NAMES, element_type_for, promote
from xfuse.dialects.ew import declared_dims
from xfuse.frontend.language import EwSyntaxError, parse_program
from xfuse.runtime.arrays import ArgumentError, numpy_dtype
from xfuse.runtime.cost_driver import cost_program
from xfuse.tools.cli import main as xfuse_main
from xfuse.transforms.kernel_to_loops import MAX_LOOP_DEPTH

if TYPE_CHECKING:
    from conftest import Gelu

GELU_BODY = """
h = x + b;
y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));
out = y + r;
"""
GELU_2D = "input x[t, d], r[t, d], b[d];\n" + GELU_BODY
GELU_BF16 = "input bf16 x[t, d], r[t, d], b[d];\n" + GELU_BODY
GELU_MIXED = "input bf16 x[t, d], r[t, d];\ninput f32 b[d];\n" + GELU_BODY.replace(
    "y + r", "bf16(y + r)"
)
T, D = 5, 37
EPSILON = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
"""The distance from 1 to the next float: a result within an epsilon of the reference is within
its dtype's rounding (half an epsilon) plus the f32 computation and the approximations."""


def function_of(module: ModuleOp) -> func.FuncOp:
    (function,) = module.ops
    assert isinstance(function, func.FuncOp)
    return function


def shape_of(type_: Attribute) -> tuple[int, ...]:
    assert isinstance(type_, TensorType)
    return tuple(type_.get_shape())


def gelu_inputs(dtypes: dict[str, str], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"x": (T, D), "b": (D,), "r": (T, D)}
    return {
        name: (2 * rng.standard_normal(shape)).astype(numpy_dtype(dtypes[name]))
        for name, shape in shapes.items()
    }


def assert_within_rounding(out: np.ndarray, want: np.ndarray, dtype: str) -> None:
    tolerance = max(EPSILON[dtype], 1e-5)  # f32/f64 results carry the approximations' ~1e-6
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tolerance, atol=tolerance)


# ---------------------------------------------------------------------------------------------
# Frontend: declarations and promotion
# ---------------------------------------------------------------------------------------------


def test_declaration_gives_n_d_types_named_dims_and_argument_order() -> None:
    module = parse_program("input r[t, d], x[t, d];\ninput b[14336];\n" + GELU_BODY, dtype="bf16")
    module.verify()
    args = function_of(module).args
    assert [a.name_hint for a in args] == ["r", "x", "b"]  # declaration order, not first use
    assert [shape_of(a.type) for a in args] == [
        (DYNAMIC_INDEX, DYNAMIC_INDEX),
        (DYNAMIC_INDEX, DYNAMIC_INDEX),
        (14336,),
    ]
    assert all(ew.element_type(a.type) == element_type_for("bf16") for a in args)
    assert [declared_dims(a) for a in args] == [("t", "d"), ("t", "d"), None]
    assert "ew.dims" in str(module)
    (result,) = function_of(module).function_type.outputs.data
    assert shape_of(result) == (DYNAMIC_INDEX, 14336)


def test_declaration_forms() -> None:
    module = parse_program(
        "input f64 s[], v[?], m[2, n];\ninput w;\ninput = s * v + m + w + q;", shapes={"q": [1]}
    )
    module.verify()
    args = function_of(module).args
    assert [a.name_hint for a in args] == ["s", "v", "m", "w", "q"]
    assert [shape_of(a.type) for a in args] == [
        (),
        (DYNAMIC_INDEX,),
        (2, DYNAMIC_INDEX),
        (DYNAMIC_INDEX,),
        (1,),
    ]
    assert [str(ew.element_type(a.type)) for a in args] == ["f64"] * 3 + ["f32"] * 2
    assert declared_dims(args[2]) == ("2", "n")
    assert declared_dims(args[1]) is None  # `?` alone names nothing
    unused = parse_program("input x[4], unused[4];\ny = 2 * x;")
    assert [a.name_hint for a in function_of(unused).args] == ["x", "unused"]


def test_call_level_entries_must_agree_with_declarations() -> None:
    source = "input bf16 x[t, d];\ny = x * 2;"
    agreeing = parse_program(source, dtype={"x": "bfloat16"}, shapes={"x": ("t", "d")})
    assert shape_of(function_of(agreeing).args[0].type) == (DYNAMIC_INDEX, DYNAMIC_INDEX)
    with pytest.raises(
        EwSyntaxError, match=r"declared \[t, d\] but the caller's shapes give \[4\]"
    ):
        parse_program(source, shapes={"x": (4,)})
    with pytest.raises(EwSyntaxError, match="declared bf16 but the caller's dtype gives f16") as e:
        parse_program(source, dtype={"x": "float16"})
    assert (e.value.line, e.value.column) == (1, 12)
    with pytest.raises(ValueError, match="dtype given for 'z', which the program does not read"):
        parse_program(source, dtype={"z": "float16"})
    # (one it assigns was said "not read": it is no input)
    with pytest.raises(ValueError, match=r"dtype given for 'h', which the program assigns: no in"):
        xfuse.compile("h = x + 1; out = h * 2;", dtype={"h": "f16"})
    with pytest.raises(ValueError, match="shapes given for 'z'"):
        parse_program(source, shapes={"z": (4,)})


@pytest.mark.parametrize("a", list(DTYPE_NAMES))
@pytest.mark.parametrize("b", list(DTYPE_NAMES))
def test_promotion_follows_numpy(a: str, b: str) -> None:
    promoted = promote(element_type_for(a), element_type_for(b))
    if {a, b} == {"float16", "bfloat16"}:
        assert str(promoted) == "f32"  # numpy has no common type; JAX's choice
    else:
        want = np.promote_types(numpy_dtype(a), numpy_dtype(b))
        assert promoted == element_type_for(want.name)


def test_mixed_dtypes_insert_conversions_and_literals_are_weak() -> None:
    module = parse_program(
        "input bf16 x[t, d];\ninput f32 b[d];\ninput f16 c[d];\n"
        "h = x + b;\ns = 0.5 * x;\nk = x * c;\nout = bf16(h);",
        ["h", "s", "k", "out"],
    )
    module.verify()
    converts = [op for op in module.walk() if isinstance(op, ew.ConvertOp)]
    assert [
        (str(ew.element_type(c.operand.type)), str(ew.element_type(c.result.type)))
        for c in converts
    ] == [("bf16", "f32"), ("f16", "f32"), ("f32", "bf16")]  # x once, c, out
    returned = function_of(module).get_return_op()
    assert returned is not None
    assert [str(ew.element_type(v.type)) for v in returned.arguments] == [
        "f32",
        "bf16",
        "f32",
        "bf16",
    ]
    (half,) = [op for op in module.walk() if isinstance(op, ew.ConstantOp)]
    assert str(ew.element_type(half.result.type)) == "bf16"  # 0.5 took x's dtype


def test_convert_folds_constants_to_the_new_rounding() -> None:
    from xdsl.parser import Parser

    from xfuse.transforms.pipeline import apply_pipeline, pipeline_context

    text = """
    func.func @main(%x: tensor<?xbf16>) -> tensor<?xbf16> {
      %c = ew.constant 0.1 : tensor<f32>
      %d = ew.convert %c : tensor<f32> to tensor<bf16>
      %y = ew.mul %d, %x : tensor<bf16>, tensor<?xbf16> -> tensor<?xbf16>
      func.return %y : tensor<?xbf16>
    }
    """
    folded = apply_pipeline(Parser(pipeline_context(), text).parse_module(), "ew-optimize")
    assert not [op for op in folded.walk() if isinstance(op, ew.ConvertOp)]
    (constant,) = [op for op in folded.walk() if isinstance(op, ew.ConstantOp)]
    assert constant.literal == float(np.float32(0.1).astype(ml_dtypes.bfloat16))
    # In the frontend a conversion of a literal just retypes it (kernels round literals).
    module = parse_program("y = bf16(0.1) * x;", dtype="bfloat16")
    assert not [op for op in module.walk() if isinstance(op, ew.ConvertOp)]


# ---------------------------------------------------------------------------------------------
# xfuse.compile and @xfuse.jit
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_gelu_2d_declared_shapes_every_dtype(dtype: str, gelu: Gelu) -> None:
    kernel = xfuse.compile(GELU_2D, dtype=dtype)
    inputs = gelu_inputs(dict.fromkeys("xbr", dtype))
    out = kernel(**inputs)
    assert out.shape == (T, D) and out.dtype == numpy_dtype(dtype)
    assert_within_rounding(out, gelu.reference(**inputs), dtype)
    assert kernel.ir("ew-fuse").count("ew.kernel") == 1


def test_gelu_2d_shapes_from_the_call(gelu: Gelu) -> None:
    shapes = {"x": ("t", "d"), "b": ("d",), "r": ("t", "d")}
    kernel = xfuse.compile(GELU_BODY, dtype=np.dtype(ml_dtypes.bfloat16), shapes=shapes)
    inputs = gelu_inputs(dict.fromkeys("xbr", "bfloat16"))
    assert_within_rounding(kernel(**inputs), gelu.reference(**inputs), "bfloat16")
    with pytest.raises(ArgumentError, match=r"argument 'b': dimension 0 \(d\) has size 36"):
        kernel(x=inputs["x"], b=inputs["b"][:-1], r=inputs["r"])


def test_per_input_dtypes_and_output_conversion(gelu: Gelu) -> None:
    dtypes = {"x": "bfloat16", "b": "float32", "r": "bfloat16"}
    inputs = gelu_inputs(dtypes)
    promoted = xfuse.compile(GELU_2D, dtype={"x": "bfloat16", "b": np.float32, "r": "bf16"})
    out = promoted(**inputs)
    assert out.dtype == np.float32  # bf16 + f32 -> f32, as numpy
    assert_within_rounding(out, gelu.reference(**inputs), "float32")
    declared = xfuse.compile(GELU_MIXED)
    assert [p.dtype for p in declared.function.inputs] == ["bfloat16", "bfloat16", "float32"]
    out = declared(**inputs)
    assert out.dtype == ml_dtypes.bfloat16
    assert_within_rounding(out, gelu.reference(**inputs), "bfloat16")
    fused = declared.ir("ew-fuse")
    assert fused.count("ew.kernel") == 1 and "ew.convert" not in fused
    assert "arith.truncf" in fused and "arith.extf" in fused


def test_f16_with_bf16_computes_and_returns_f32() -> None:
    kernel = xfuse.compile("y = x * w + 1;", dtype={"x": "float16", "w": "bfloat16"})
    x = np.linspace(-3, 3, 101).astype(np.float16)
    w = np.linspace(2, -2, 101).astype(ml_dtypes.bfloat16)
    out = kernel(x=x, w=w)
    assert out.dtype == np.float32
    want = x.astype(np.float64) * w.astype(np.float64) + 1
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_mixed_dtype_kernel_still_vectorizes() -> None:
    llvm_ir = xfuse.compile(GELU_MIXED).llvm_ir
    lanes = max(int(n) for n in re.findall(r"<(\d+) x float>", llvm_ir) or ["1"])
    assert lanes >= 4, "the mixed bf16/f32 GELU loop stayed scalar"


def test_named_dims_are_checked_across_axes() -> None:
    # [n] against [n, 1] broadcasts to [n, n]: numpy would also accept sizes 3 and 4.
    kernel = xfuse.compile("input u[n], v[n, 1];\ny = u + v;")
    u, v = np.arange(3, dtype=np.float32), np.arange(3, dtype=np.float32).reshape(3, 1)
    np.testing.assert_array_equal(kernel(u=u, v=v), u + v)
    with pytest.raises(ArgumentError, match=r"argument 'v': dimension 0 \(n\) has size 4 but 'u'"):
        kernel(u=u, v=np.zeros((4, 1), np.float32))


def test_call_time_shape_errors_name_the_argument() -> None:
    kernel = xfuse.compile(GELU_2D)
    good = gelu_inputs(dict.fromkeys("xbr", "float32"))
    with pytest.raises(
        ArgumentError, match=r"argument 'x': expected 2 dimensions \(float32\[t, d\]"
    ):
        kernel(**{**good, "x": good["x"].ravel()})
    with pytest.raises(ArgumentError, match=r"argument 'r': dimension 0 \(t\) has size 4"):
        kernel(**{**good, "r": good["r"][:4]})
    with pytest.raises(TypeError, match="argument 'b': expected dtype float32, got bfloat16"):
        kernel(**{**good, "b": good["b"].astype(ml_dtypes.bfloat16)})


def test_compile_time_shape_errors_are_located() -> None:
    with pytest.raises(EwSyntaxError) as info:
        xfuse.compile(GELU_BODY, shapes={"x": (4, 8), "b": (5,), "r": (4, 8)})
    assert "shapes [4, 8] and [5] do not broadcast" in info.value.message
    assert (info.value.line, info.value.column) == (2, 7)


def test_jit_traces_mixed_dtypes_and_2d_broadcasting(gelu: Gelu) -> None:
    @xfuse.jit
    def traced(x, b, r):  # noqa: ANN001, ANN202 (traced arrays)
        h = x + b
        return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

    for dtypes in (
        {"x": "bfloat16", "b": "float32", "r": "bfloat16"},
        {"x": "float16", "b": "float16", "r": "float16"},
    ):
        inputs = gelu_inputs(dtypes)
        out = traced(**inputs)
        want = np.result_type(*(numpy_dtype(d) for d in set(dtypes.values())))
        assert out.dtype == want and out.shape == (T, D)
        assert_within_rounding(out, gelu.reference(**inputs), want.name)
    assert len(traced.kernels) == 2


def loop_levels(kernel: xfuse.Kernel) -> int:
    """How deep `kernel`'s loop nest is: its `scf.for`s less the innermost loop's copies (a head,
    a remainder: `ew.loop`)."""
    loops = kernel.ir("ew-kernel-to-loops")
    return loops.count("scf.for") - loops.count("ew.loop =")


def test_a_row_under_many_dims_runs_as_two_loops() -> None:
    """Dims along which every input is read alike are one loop: a nest of a loop per dim
    compiled in time growing with the rank (x of 16 dims: 5.4 s; 0.09 s as two loops)."""
    traced = xfuse.jit(lambda x, y: x * y)
    x = np.arange(2**11 * 16, dtype=np.float32).reshape((2,) * 11 + (16,))
    y = np.linspace(-2, 2, 16, dtype=np.float32)
    np.testing.assert_array_equal(traced(x, y), x * y)
    (kernel,) = traced.kernels.values()
    assert loop_levels(kernel) == 2


def test_an_input_read_along_every_other_dim_is_a_nest_of_at_most_max_loop_depth() -> None:
    """No two neighbouring dims of y are read alike, so each is a run: the outer ones beyond
    `MAX_LOOP_DEPTH` are one loop, each run's index its quotient's remainder (a nest of a loop
    per run of 16 dims compiled in 4.4 s: docs/benchmarks.md)."""
    shape = (2, 3) * 6 + (5,)
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    y_shape = tuple(size if axis % 2 else 1 for axis, size in enumerate(shape))
    y = np.linspace(-3, 3, math.prod(y_shape), dtype=np.float32).reshape(y_shape)
    traced = xfuse.jit(lambda x, y: x * y)
    np.testing.assert_array_equal(traced(x, y), x * y)
    (kernel,) = traced.kernels.values()
    assert loop_levels(kernel) == MAX_LOOP_DEPTH


@pytest.mark.parametrize("seed", range(10))
def test_broadcasting_over_many_dims_matches_numpy(seed: int) -> None:
    """Inputs broadcast along random dims (size 1 or absent) of 3 to 14 dims: the dims each
    input reads alike run as one loop, each array seen with them merged, and the outer runs
    beyond `MAX_LOOP_DEPTH` as one loop, each run's index from its index (seeds 2, 4 and 5
    have 9 or 10 runs). `x * y + z * w` is numpy's float32 bit for bit (no FMA joins them)."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(3, 15))
    sizes = [1, 2, 3] if rank <= 8 else [1, 2, 2, 2, 2]  # (at most 2^13 rows)
    shape = (*(int(size) for size in rng.choice(sizes, rank - 1)), int(rng.integers(5, 40)))

    def broadcast_input() -> np.ndarray:
        kept = [size if rng.random() < 0.5 else 1 for size in shape]
        dropped = int(rng.integers(0, rank // 2 + 1))
        return rng.standard_normal(kept[dropped:]).astype(np.float32)

    x = rng.standard_normal(shape).astype(np.float32)
    y, z, w = broadcast_input(), broadcast_input(), broadcast_input()
    traced = xfuse.jit(lambda x, y, z, w: x * y + z * w)
    np.testing.assert_array_equal(traced(x, y, z, w), x * y + z * w)
    # One loop per run of dims (but those of size 1) along which each input reads alike.
    reads = [
        tuple(axis >= rank - a.ndim and a.shape[axis - rank + a.ndim] != 1 for a in (y, z, w))
        for axis, size in enumerate(shape)
        if size != 1
    ]
    runs = 1 + sum(before != after for before, after in itertools.pairwise(reads))
    (kernel,) = traced.kernels.values()
    assert loop_levels(kernel) == min(runs, MAX_LOOP_DEPTH)  # the outer runs beyond: one loop


def test_numpy_baselines_follow_each_value_dtype(gelu: Gelu) -> None:
    module = parse_program(GELU_MIXED)
    inputs = gelu_inputs({"x": "bfloat16", "b": "float32", "r": "bfloat16"})
    for compiled in (compile_numpy(module), compile_numpy_planned(module)):
        (out,) = compiled(inputs["x"], inputs["r"], inputs["b"])
        assert out.dtype == ml_dtypes.bfloat16
        assert_within_rounding(out, gelu.reference(**inputs), "bfloat16")


def test_mixed_dtype_kernels_export_to_linalg() -> None:
    from xfuse.transforms.pipeline import apply_pipeline

    exported = str(apply_pipeline(parse_program(GELU_MIXED), "ew-optimize,ew-fuse,ew-to-linalg"))
    assert "linalg.generic" in exported and "ew." not in exported.replace("ew.dims", "")
    assert "arith.truncf" in exported and "arith.extf" in exported
    mlir_opt = Path("/usr/lib/llvm-22/bin/mlir-opt")
    if mlir_opt.exists():
        checked = subprocess.run([mlir_opt], input=exported, text=True, capture_output=True)
        assert checked.returncode == 0, checked.stderr


# ---------------------------------------------------------------------------------------------
# The cost model: 4096 x 14336 bf16 with a [14336] bias
# ---------------------------------------------------------------------------------------------

FULL = 4096 * 14336


def test_cost_of_declared_bias_is_three_full_tensors_plus_the_bias(tmp_path: Path) -> None:
    path = tmp_path / "gelu.ew"
    path.write_text(GELU_2D)
    fused = cost_program(GELU_2D, CostOptions(shape=(4096, 14336))).fused
    (kernel,) = fused.kernels
    assert kernel.bytes == 3 * FULL * 2 + 14336 * 2 == 352_350_208
    assert {a.name: a.bytes for a in kernel.reads} == {"x": FULL * 2, "b": 28_672, "r": FULL * 2}

    def cli(*args: str) -> str:
        import contextlib
        import io

        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            assert xfuse_main(["cost", str(path), *args]) == 0
        return stdout.getvalue()

    report = json.loads(cli("--json"))
    (json_kernel,) = report["fused"]["kernels"]
    assert json_kernel["bytes"] == 352_350_208
    assert sorted(r["bytes"] for r in json_kernel["reads"]) == [28_672, FULL * 2, FULL * 2]
    text = cli()
    assert "352,350,208 B" in text and "x, b, r -> out" in text


def test_cost_prices_declared_dtypes_and_conversions_are_free() -> None:
    cost = cost_program(GELU_MIXED, CostOptions(shape=(4096, 14336)))
    (kernel,) = cost.fused.kernels
    assert kernel.bytes == 3 * FULL * 2 + 14336 * 4  # bf16 x, r, out; an f32 bias
    plain = cost_program(GELU_BF16, CostOptions(shape=(4096, 14336)))
    assert kernel.flops_per_element == plain.fused.kernels[0].flops_per_element  # extf: free
    # Unfused, each conversion (x, r to f32; the result to bf16) is a kernel that materializes.
    assert cost.unfused.totals.kernels == plain.unfused.totals.kernels + 3


def test_lecture_runs_a_declared_2d_program(tmp_path: Path) -> None:
    import contextlib
    import io

    path = tmp_path / "gelu-2d.ew"
    path.write_text(GELU_2D)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        args = ["lecture", "--quick", "--n", "32768", "--repeat", "1", "--source", str(path)]
        assert xfuse_main([*args, "--json", "-"]) == 0
    report = json.loads(stdout.getvalue())
    fused = report["traffic"]["rows"][1]
    assert fused["bytes"] == 352_350_208  # 4096 x 14336 bf16: x, r, out and the [d] bias
    measured = report["measurement"]
    assert measured["setup"]["n"] == 2 * 14336  # rows of the lecture's d_ff
    assert all(r["max_error"] is None or r["max_error"] < 1e-5 for r in measured["rows"])


def test_a_fortran_ordered_input_is_checked_against_its_own_shape() -> None:
    """`x[t, t, d]` ran Fortran-ordered inputs transposed and checked `t` against the reversed
    shape: (2, 5, 5) ran, (2, 2, 5) was refused as "got shape (5, 2, 2)"."""
    kernel = xfuse.compile("input x[t, t, d];\nout = x * 2;\n")
    wrong, right = np.ones((2, 5, 5), np.float32), np.arange(20, dtype=np.float32).reshape(2, 2, 5)
    for layout in (np.ascontiguousarray, np.asfortranarray):
        with pytest.raises(ArgumentError, match=r"dimension 1 \(t\) has size 5 .*\(2, 5, 5\)"):
            kernel(layout(wrong))
        np.testing.assert_array_equal(kernel(layout(right)), right * 2)


def test_shapes_take_sizes_of_any_integer_type_and_string_names_only() -> None:
    """A numpy int became a `?` dim: its size unchecked, and a 1 no longer broadcast; input names
    of other types than str failed in the cache key's sort."""
    kernel = xfuse.compile("out = x + b;", shapes={"x": (np.int64(4), "d"), "b": ("d",)})
    with pytest.raises(ArgumentError, match=r"argument 'x': dimension 0 must be 4"):
        kernel(np.ones((5, 3), np.float32), np.ones(3, np.float32))
    scale = xfuse.compile("input x[t, d];\nout = x * s;\n", shapes={"s": (np.int64(1), "d")})
    x, s = np.ones((3, 4), np.float32), np.full((1, 4), 2, np.float32)
    np.testing.assert_array_equal(scale(x, s), x * s)
    for option in ({"shapes": {1: (), "x": ()}}, {"dtype": {1: "f32", "x": "f32"}}):
        with pytest.raises(TypeError, match=r"input names must be strings, got 1"):
            xfuse.compile("out = x + s;", **option)  # type: ignore[arg-type]
