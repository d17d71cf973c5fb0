"""The GPU cost model (xfuse.analysis.cost), its devices, the ew-cost pass and `xfuse cost`."""

from __future__ import annotations

import ast
import io
import json
import math
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.dialects.memref import MemRef
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from xfuse.analysis import hardware
from xfuse.analysis.cost import (
    CostModelError,
    CostOptions,
    FunctionCost,
    ShapeMismatchError,
    analyse_module,
    compare,
    epilogue_what_if,
    parse_shape,
)
from xfuse.analysis.cost_report import less, nbytes, print_program, summary_line
from xfuse.analysis.cost_report import us as shown_us
from xfuse.dialects.ew import Ew
from xfuse.frontend.language import parse_program
from xfuse.runtime.cost_driver import cost_program
from xfuse.tools import cli, opt
from xfuse.tools.pass_help import pass_options
from xfuse.transforms.bufferize import EwBufferizePass
from xfuse.transforms.cost import EwCostPass
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.options import PassOptionError
from xfuse.transforms.pipeline import apply_pipeline

ROOT = Path(__file__).resolve().parents[1]
INPUTS = Path(__file__).parent / "inputs"
GELU = ROOT / "examples" / "gelu.ew"

# The lecture's bill: 4096 x 14336 BF16 (Llama-3-8B FFN) on an H100 SXM.
ELEMENTS = 4096 * 14336
TENSOR_BYTES = 117_440_512


def parse(text: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Math, MemRef, Ew):
        ctx.load_dialect(dialect)
    return Parser(ctx, text).parse_module()


def analyse(text: str, **options: object) -> FunctionCost:
    (cost,) = analyse_module(parse(text), CostOptions(**options))  # type: ignore[arg-type]
    return cost


def us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


@pytest.fixture(scope="module")
def unfused() -> FunctionCost:
    """What `ew-optimize,ew-fuse{mode=none}` makes of examples/gelu.ew: 11 one-op kernels."""
    return analyse((INPUTS / "gelu-unfused.mlir").read_text())


@pytest.fixture(scope="module")
def fused() -> FunctionCost:
    """What `ew-optimize,ew-fuse` makes of examples/gelu.ew: one kernel."""
    return analyse((INPUTS / "gelu-fused.mlir").read_text())


# ---------------------------------------------------------------------------------------------
# The lecture's figures, exactly
# ---------------------------------------------------------------------------------------------


def test_lecture_unfused_bill(unfused: FunctionCost) -> None:
    t = unfused.totals
    assert (t.kernels, t.tensor_accesses) == (11, 28)
    assert t.bytes == 28 * TENSOR_BYTES == 3_288_334_336
    assert all(k.elements == ELEMENTS for k in unfused.kernels)
    assert us(t.memory_time_s) == 981.6
    assert us(t.launch_time_s) == 44.0
    assert us(t.time_s) == 1025.6
    assert {k.bound for k in unfused.kernels} == {"memory"}


def test_kernels_name_their_inputs_as_the_program_does() -> None:
    """An input `w_1` (whose name hint xDSL keeps as `w`, its `ew.name` as `w_1`) was called
    `w` beside the input `w`: "w, w -> out"."""
    program = cost_program("input w_1, w; out = w_1 * 2 + w;", CostOptions(shape=(1024,)))
    (kernel,) = program.fused.kernels
    assert [a.name for a in kernel.reads] == ["w_1", "w"]


def test_lecture_fused_bill(fused: FunctionCost) -> None:
    t = fused.totals
    (kernel,) = fused.kernels
    assert (t.kernels, t.tensor_accesses) == (1, 4)
    assert [a.name for a in kernel.reads] == ["x", "b", "r"]
    assert [a.name for a in kernel.writes] == ["out"]
    assert t.bytes == 4 * TENSOR_BYTES == 469_762_048
    assert (us(t.memory_time_s), us(t.launch_time_s), us(t.time_s)) == (140.2, 4.0, 144.2)
    # 11 ops per element over 8 bytes (bf16: 3 reads + 1 write), far below the ridge point.
    assert kernel.flops_per_element == 11 and len(kernel.ops) == 11
    assert kernel.intensity == 11 / 8
    assert round(hardware.H100_SXM.tensor_core_ridge_point) == 295
    assert kernel.intensity < hardware.H100_SXM.ridge_point("bfloat16") < 295
    assert kernel.bound == "memory"


def test_lecture_comparison(fused: FunctionCost, unfused: FunctionCost) -> None:
    c = compare(fused, unfused)
    assert c.traffic_ratio == 7.0
    assert c.kernels_saved == 10
    assert c.bytes_saved == 24 * TENSOR_BYTES
    assert round(c.time_ratio, 2) == round(1025.592 / 144.227, 2)


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------


def test_every_source_a_device_cites_is_described() -> None:
    module_doc = hardware.__doc__ or ""
    for device in hardware.DEVICES.values():
        tags = re.findall(r"\[[A-Z0-9-]+\]", device.sources)
        assert tags, f"{device.name} cites no source"
        for tag in tags:
            assert tag in module_doc, f"{device.name}: source {tag} is not described"


def test_every_device_figure_cites_one_of_its_sources() -> None:
    """B200's description said 180 GB (NVIDIA's later HGX/DGX tables) beside the 8 TB/s and
    80/40 TFLOP/s of its launch brief, uncited: each figure, the description's too, names a
    source its device lists."""
    source = Path(hardware.__file__).read_text()
    lines = source.splitlines()
    entries = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", None) == "Device"
    ]
    assert len(entries) == len(hardware.DEVICES)
    for call in entries:
        fields = {k.arg: k for k in call.keywords}
        cited = set(re.findall(r"\[[A-Z0-9-]+\]", ast.literal_eval(fields["sources"].value)))
        for name, keyword in fields.items():
            if name in ("name", "sources"):
                continue
            comment = lines[keyword.value.end_lineno - 1].partition("#")[2]
            tags = set(re.findall(r"\[[A-Z0-9-]+\]", comment))
            assert tags & cited, (
                f"{ast.literal_eval(fields['name'].value)}.{name} cites none of {cited}"
            )
    assert "192 GB" in hardware.B200.description


def test_devices_by_name_and_alias() -> None:
    assert hardware.device("h100") is hardware.device("H100-SXM") is hardware.H100_SXM
    assert hardware.device("a100") is hardware.DEVICES["a100-80gb"]
    with pytest.raises(ValueError, match="unknown device 'tpu': expected one of h100-sxm"):
        hardware.device("tpu")


def test_every_device_name_is_in_the_help_and_the_pass_docs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`h200-sxm` was taken but listed in neither `xfuse cost --help` nor ew-cost's `device`."""
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at hyphens too: one line
    with pytest.raises(SystemExit):
        cli.main(["cost", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    (device_doc,) = [o.doc for o in pass_options(EwCostPass) if o.name == "device"]
    for name in hardware.DEVICE_NAMES:
        hardware.device(name)  # a name it takes
        listed = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        assert re.search(listed, help_text), name
        assert re.search(listed, device_doc), name


def test_elementwise_work_uses_the_cuda_core_peak() -> None:
    h100 = hardware.H100_SXM
    for dtype in ("float16", "bfloat16", "float32"):
        assert h100.elementwise_peak(dtype) == h100.fp32_cuda_core_peak
    assert h100.elementwise_peak("float64") == h100.fp64_cuda_core_peak


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

BIAS_ROW = """
func.func @bias_row(%x: tensor<?x?xbf16>, %b: tensor<14336xbf16>, %r: tensor<?x?xbf16>)
    -> tensor<?x?xbf16> {
  %out = ew.kernel ins(%x, %b, %r : tensor<?x?xbf16>, tensor<14336xbf16>, tensor<?x?xbf16>)
      -> tensor<?x?xbf16> {
  ^bb0(%xs: bf16, %bs: bf16, %rs: bf16):
    %xw = arith.extf %xs : bf16 to f32
    %bw = arith.extf %bs : bf16 to f32
    %rw = arith.extf %rs : bf16 to f32
    %h = arith.addf %xw, %bw : f32
    %s = arith.addf %h, %rw : f32
    %o = arith.truncf %s : f32 to bf16
    ew.yield %o : bf16
  }
  func.return %out : tensor<?x?xbf16>
}
"""


def test_broadcast_bias_counts_its_real_bytes() -> None:
    cost = analyse(BIAS_ROW)
    (kernel,) = cost.kernels
    bias = kernel.reads[1]
    assert (bias.name, bias.shape, bias.bytes) == ("b", (14336,), 28_672)
    assert kernel.bytes == 3 * TENSOR_BYTES + 28_672
    assert kernel.elements == ELEMENTS
    assert kernel.flops_per_element == 2  # casts are free


def test_storage_dtype_sets_the_bytes() -> None:
    assert analyse(BIAS_ROW, dtype=None).totals.bytes == 3 * TENSOR_BYTES + 28_672
    assert analyse(BIAS_ROW, dtype="float32").totals.bytes == 2 * (3 * TENSOR_BYTES + 28_672)
    f64 = analyse(BIAS_ROW, dtype="f64", shape=(2, 14336))
    assert f64.kernels[0].reads[1].bytes == 14336 * 8
    assert f64.kernels[0].compute_time_s == 2 * 2 * 14336 / hardware.H100_SXM.fp64_cuda_core_peak


BUFFERS = """
func.func @buffers(%x: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  ew.kernel ins(%x, %b : memref<?xf32>, memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%xs: f32, %bs: f32):
    %s = arith.addf %xs, %bs : f32
    ew.yield %s : f32
  }
  ew.kernel ins(%t, %t : memref<?xf32>, memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%a: f32, %c: f32):
    %p = arith.mulf %a, %c : f32
    ew.yield %p : f32
  }
  ew.kernel ins(%t : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  memref.dealloc %t : memref<?xf32>
  func.return
}
"""


def test_buffer_form_counts_unique_buffers_and_in_place_writes() -> None:
    cost = analyse(BUFFERS, shape=(1000,), dtype="float32")
    first, square, copy = cost.kernels
    assert [len(k.reads) for k in cost.kernels] == [2, 1, 1]  # %t read once, not twice
    assert square.read_bytes == square.write_bytes == 4000  # in place: read and written
    assert copy.flops == 0 and copy.ops == () and copy.bytes == 8000
    assert cost.totals.tensor_accesses == 7
    assert cost.inputs == ("x", "b")  # (`out` is the output buffer)


def test_constant_inputs_cost_no_traffic() -> None:
    cost = analyse(
        """
        func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
          %c = ew.constant 2.0 : tensor<f32>
          %y = ew.kernel ins(%x, %c : tensor<?xf32>, tensor<f32>) -> tensor<?xf32> {
          ^bb0(%a: f32, %k: f32):
            %p = arith.mulf %a, %k : f32
            ew.yield %p : f32
          }
          func.return %y : tensor<?xf32>
        }
        """,
        shape=(10,),
        dtype=None,
    )
    assert [a.name for a in cost.kernels[0].reads] == ["x"]
    assert cost.totals.bytes == 80


def test_shape_folds_over_flat_tensors_and_binds_from_the_right(fused: FunctionCost) -> None:
    assert fused.kernels[0].reads[0].shape == (ELEMENTS,)  # tensor<?xf32> under 4096x14336
    three_d = analyse(BIAS_ROW, shape=(2, 4096, 14336))
    assert three_d.kernels[0].reads[0].shape == (8192, 14336)
    assert parse_shape("4096x14336") == (4096, 14336) and parse_shape(7) == (7,)
    for bad in ("4096xd", "²"):  # "²".isdigit() is true, int("²") an error
        with pytest.raises(ValueError, match="bad shape"):
            parse_shape(bad)
    with pytest.raises(ValueError, match="more elements than a 64-bit index can count"):
        parse_shape("4294967296x4294967296")
    with pytest.raises(
        CostModelError, match="shape 4096 has 1 dims but the function has rank-2"
    ) as info:
        analyse(BIAS_ROW, shape=(4096,))
    # a process pool's worker sends its errors pickled (its __init__ takes more than a message)
    copied = pickle.loads(pickle.dumps(info.value))
    assert (type(copied), str(copied)) == (type(info.value), str(info.value))
    assert isinstance(copied, ShapeMismatchError) and copied.input_name == "x"


def test_l2_model_serves_re_reads_of_small_tensors(unfused: FunctionCost) -> None:
    small = analyse((INPUTS / "gelu-unfused.mlir").read_text(), shape=(256, 1024), l2=True)
    tensor = 256 * 1024 * 2
    # Cold reads of x, b, r and the 11 writes reach HBM; the 14 re-reads of temporaries hit L2.
    assert small.totals.hbm_bytes == (3 + 11) * tensor
    assert small.totals.bytes == 28 * tensor
    assert sum(a.from_l2 for k in small.kernels for a in k.reads) == 14
    first = small.kernels[0]
    hw = hardware.H100_SXM
    assert first.memory_time_s == max(3 * tensor / hw.hbm_bandwidth, 3 * tensor / hw.l2_bandwidth)
    # At the lecture's shape every tensor (117 MB) is bigger than the 50 MB L2: nothing changes.
    big = analyse((INPUTS / "gelu-unfused.mlir").read_text(), l2=True)
    assert big.totals.hbm_bytes == big.totals.bytes == unfused.totals.bytes
    assert big.totals.time_s == unfused.totals.time_s


def test_epilogue_what_if(fused: FunctionCost, unfused: FunctionCost) -> None:
    e = epilogue_what_if(fused, "x")
    assert (e.kernel, e.input_bytes, e.launches_saved) == (0, TENSOR_BYTES, 1)
    assert e.separate_bytes == 5 * TENSOR_BYTES  # the matmul writes x, the kernel moves 4
    assert e.epilogue_bytes == 3 * TENSOR_BYTES  # read b, r; write out
    assert us(e.epilogue_time_s) == us(3 * TENSOR_BYTES / 3.35e12)
    assert epilogue_what_if(unfused, "x").epilogue_bytes == 27 * TENSOR_BYTES
    with pytest.raises(ValueError, match="'h' is not an input of @main"):
        epilogue_what_if(fused, "h")
    buffers = analyse(BUFFERS, shape=(8,))
    with pytest.raises(ValueError, match="'out' is not an input of @buffers"):
        epilogue_what_if(buffers, "out")  # (the output buffer: it was "read by 0 kernels")


def test_unpriceable_ir_is_a_located_error() -> None:
    with pytest.raises(CostModelError, match="'ew.add' is not inside an ew.kernel") as error:
        analyse(
            """
            func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
              %y = ew.add %x, %x : tensor<?xf32>
              func.return %y : tensor<?xf32>
            }
            """
        )
    assert error.value.op is not None and error.value.op.name == "ew.add"
    with pytest.raises(CostModelError, match="no FLOP count for 'math.round'"):
        analyse(
            """
            func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
              %y = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
              ^bb0(%a: f32):
                %c = math.round %a : f32
                ew.yield %c : f32
              }
              func.return %y : tensor<?xf32>
            }
            """
        )
    with pytest.raises(ValueError, match="unknown device"):
        CostOptions(device="tpu")
    with pytest.raises(ValueError, match="unsupported dtype"):
        CostOptions(dtype="int8")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shape": (4.5, 8)}, r"shape dims must be ints, got \(4.5, 8\)"),
        ({"shape": (True, 8)}, "shape dims must be ints"),
        ({"shape": "4096"}, "shape must be a sequence of ints, got '4096'"),
        ({"l2": "no"}, "l2 must be True or False, got 'no'"),
        ({"launch_us": "3"}, "launch_us must be a number, got '3'"),
        # (None and a shape in its place were "object has no attribute 'lower'")
        ({"device": None}, "device must be a device's name, got None: one of h100-sxm"),
        ({"device": (4096, 1)}, r"device must be a device's name, got \(4096, 1\)"),
    ],
)
def test_cost_options_check_their_types(options: dict[str, object], message: str) -> None:
    """As the CLI and the ew-cost pass check theirs: a fractional dim was priced as a fraction
    of a tensor, and `l2="no"` turned the L2 model on."""
    with pytest.raises(TypeError, match=message):
        CostOptions(**options)  # type: ignore[arg-type]


def test_cost_options_normalise_numpy_and_list_values() -> None:
    options = CostOptions(shape=[np.int64(4), 8], l2=np.True_, launch_us=np.float32(2))
    assert (options.shape, options.l2, options.launch_us) == ((4, 8), True, 2.0)
    assert type(options.shape[0]) is int and type(options.launch_us) is float
    # a -0.0 launch is no launch ("launch -0 us")
    assert math.copysign(1.0, CostOptions(launch_us=-0.0).launch_us) == 1.0


# ---------------------------------------------------------------------------------------------
# The ew-cost pass
# ---------------------------------------------------------------------------------------------


def run_opt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = opt.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_pass_reports_the_api_figures_and_leaves_ir_unchanged(
    capsys: pytest.CaptureFixture[str], unfused: FunctionCost
) -> None:
    path = str(INPUTS / "gelu-unfused.mlir")
    status, out, err = run_opt(capsys, path, "-p", "ew-cost")
    assert status == 0
    assert f"ew-cost {summary_line(unfused)}" in err
    assert "3,288,334,336 bytes" in err and "= 1,025.6 us" in err
    assert str(parse(out)) == str(parse((INPUTS / "gelu-unfused.mlir").read_text()))


def test_pass_annotates_kernels(capsys: pytest.CaptureFixture[str], fused: FunctionCost) -> None:
    path = str(INPUTS / "gelu-fused.mlir")
    status, out, _ = run_opt(capsys, path, "-p", "ew-cost{annotate=true}")
    assert status == 0
    (kernel,) = [op for op in parse(out).walk() if op.name == "ew.kernel"]
    k = fused.kernels[0]
    assert kernel.attributes["cost.read_bytes"].value.data == k.read_bytes  # type: ignore[attr-defined]
    assert kernel.attributes["cost.flops"].value.data == k.flops  # type: ignore[attr-defined]
    assert kernel.attributes["cost.bound"].data == "memory"  # type: ignore[attr-defined]


def test_pass_errors_are_diagnostics(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(INPUTS / "gelu-fused.mlir")
    status, _, err = run_opt(capsys, path, "-p", "ew-cost{device=tpu}")
    assert status == 1 and "Traceback" not in err
    assert err.startswith("xfuse-opt: error: ew-cost: bad value 'tpu' for option 'device'")
    status, _, err = run_opt(capsys, path, "-p", "ew-cost{epilogue=q}")
    assert status == 1 and "no function has an input named 'q'" in err
    # 2^62 elements: 2^64 bytes a tensor, past an i64 attribute (it failed in xDSL, unlocated)
    huge = "ew-cost{annotate=true shape=4611686018427387904 dtype=f32}"
    status, _, err = run_opt(capsys, path, "-p", huge)
    assert (
        status == 1
        and (
            "ew-cost: kernel 0 of @main: cost.read_bytes 55,340,232,221,128,654,848 does not fit "
            "an i64 attribute; annotate a smaller shape"
        )
        in err
    )


def test_pass_fits_its_default_shape_to_each_function(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without `shape`, each function is priced at 4096x14336 fitted to it, as `xfuse cost`
    prices a program: a static one at its own size, a rank-3 one at 1x4096x14336. Both were
    errors (the shape "does not broadcast", "has 2 dims"); an explicit shape still is one."""
    kernel = """ew.kernel ins(%x : {t}) -> {t} {{
      ^bb0(%0: f32):
        %1 = math.exp %0 : f32
        ew.yield %1 : f32
      }}"""
    path = tmp_path / "two.mlir"
    path.write_text(
        f"""func.func @fixed(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
          %out = {kernel.format(t="tensor<4x8xf32>")}
          func.return %out : tensor<4x8xf32>
        }}
        func.func @rope(%x: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {{
          %out = {kernel.format(t="tensor<?x?x?xf32>")}
          func.return %out : tensor<?x?x?xf32>
        }}"""
    )
    status, _, err = run_opt(capsys, str(path), "-p", "ew-cost")
    assert status == 0, err
    assert "@fixed on h100-sxm, 4x8 bfloat16," in err
    assert "@rope on h100-sxm, 1x4096x14336 bfloat16," in err
    assert f"{2 * 4 * 8 * 2} bytes" in err and f"{2 * 4096 * 14336 * 2:,} bytes" in err
    status, _, err = run_opt(capsys, str(path), "-p", "ew-cost{shape=4096x14336}")
    assert status == 1 and "does not broadcast to the problem shape 4096x14336" in err


# ---------------------------------------------------------------------------------------------
# `xfuse cost` and the Python API, through the real pipeline
# ---------------------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(4e-6, "4.0 us"), (12345.6789e-6, "12,345.7 us"), (999.99e0, "999,990,000.0 us")]
    + [(1e3, "1e+09 us"), (1234.5678, "1.23e+09 us"), (1e302, "1e+308 us")]
    + [(1.4e303, "1.4e+309 us"), (math.inf, "inf us")],  # (1.4e303 s: past the floats in us)
)
def test_times_past_a_billion_microseconds_are_shown_in_exponent_form(
    seconds: float, shown: str
) -> None:
    assert shown_us(seconds) == shown


def test_a_huge_launch_overhead_keeps_the_tables_narrow(capsys: pytest.CaptureFixture[str]) -> None:
    # `--launch-us 1e308` printed all 309 digits of each time, wrapped over two lines a row,
    # and the unfused total of 11 launches, finite in seconds, as `inf us`.
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--launch-us", "1e308")
    assert status == 0 and "1e+308 us" in out and "1.1e+309 us" in out and "inf" not in out
    assert max(map(len, out.splitlines())) <= 120


def test_pipeline_reproduces_the_lecture(fused: FunctionCost, unfused: FunctionCost) -> None:
    program = cost_program(GELU.read_text())
    assert program.fused.totals == fused.totals
    assert program.unfused.totals == unfused.totals
    assert program.comparison.traffic_ratio == 7.0


def test_cli_text_json_and_pass_agree(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, text, _ = run_cli(capsys, "cost", str(GELU), "--epilogue", "x")
    assert status == 0
    for figure in ("3,288,334,336 B", "469,762,048 B", "981.6 us", "1,025.6 us", "144.2 us"):
        assert figure in text
    assert "7.0x less traffic" in text and "ridge 295.2" in text

    status, out, _ = run_cli(capsys, "cost", str(GELU), "--json", "--epilogue", "x")
    data = json.loads(out)
    program = cost_program(GELU.read_text(), epilogue="x")
    for side in ("fused", "unfused"):
        totals = getattr(program, side).totals
        assert data[side]["totals"]["bytes"] == totals.bytes
        assert data[side]["totals"]["time_s"] == totals.time_s
        assert data[side]["totals"]["kernels"] == totals.kernels
    assert data["epilogue"]["epilogue_bytes"] == 3 * TENSOR_BYTES
    assert data["device"]["hbm_bandwidth"] == 3.35e12

    # The pass on the same pipeline's IR prints the same totals.
    for pipeline, cost in (("ew-fuse", program.fused), ("ew-fuse{mode=none}", program.unfused)):
        compiled = tmp_path / "compiled.mlir"
        status, ir, _ = run_opt(capsys, str(GELU), "-p", f"ew-optimize,{pipeline}")
        compiled.write_text(ir)
        status, _, err = run_opt(capsys, str(compiled), "-p", "ew-cost{dtype=bf16}")
        assert status == 0 and f"ew-cost {summary_line(cost)}" in err


def test_a_converted_tensor_is_priced_in_its_own_dtype() -> None:
    """`f32(x)` of the default bf16 `x` was priced at bf16's 2 bytes an element, as were the
    unfused program's f32 temporaries."""
    program = cost_program("out = f32(x) + 1;", CostOptions(shape=(1024,)))
    (kernel,) = program.fused.kernels
    assert [(a.dtype, a.bytes) for a in kernel.reads] == [("bfloat16", 2048)]
    assert [(a.dtype, a.bytes) for a in kernel.writes] == [("float32", 4096)]
    unfused_writes = [a for k in program.unfused.kernels for a in k.writes]
    assert {(a.dtype, a.bytes) for a in unfused_writes} == {("float32", 4096)}


def test_a_kernel_with_f64_work_is_priced_at_the_f64_peak() -> None:
    """The peak followed the first output's dtype: `f32(x * x * x * x)` of an f64 `x` was
    priced at the f32 peak, twice the f64 one, for the same f64 multiplies."""
    options = CostOptions(shape=(1 << 20,))
    h100 = options.hardware
    for source in ("input f64 x; out = f32(x * x * x * x);", "input f64 x; out = x * x * x * x;"):
        (kernel,) = cost_program(source, options).fused.kernels
        assert kernel.compute_time_s == pytest.approx(kernel.flops / h100.fp64_cuda_core_peak)


def test_each_op_is_priced_at_the_peak_of_the_precision_it_computes_in() -> None:
    """The peak followed the tensors a kernel touched, not its ops: `f32(f64(x) * f64(x))` of an
    f32 `x` multiplies in f64 but was priced fused at the f32 peak (unfused, at the f64 one);
    `f32(a) + 1` of an f64 `a` adds in f32 but was priced fused at the f64 peak."""
    options = CostOptions(shape=(1 << 20,))
    h100 = options.hardware
    for source, peak in (
        ("input f32 x; out = f32(f64(x) * f64(x));", h100.fp64_cuda_core_peak),
        ("input f64 a; out = f32(a) + 1;", h100.fp32_cuda_core_peak),
    ):
        program = cost_program(source, options)
        for cost in (program.fused, program.unfused):
            assert cost.totals.flops == 1 << 20
            assert cost.totals.compute_time_s == pytest.approx((1 << 20) / peak)
    square = """
        func.func @f(%x: tensor<?xf64>) -> tensor<?xf64> {
          %y = ew.kernel ins(%x : tensor<?xf64>) -> tensor<?xf64> {
          ^bb0(%a: f64):
            %p = arith.mulf %a, %a : f64
            ew.yield %p : f64
          }
          func.return %y : tensor<?xf64>
        }
        """
    for dtype, peak in ((None, h100.fp64_cuda_core_peak), ("float32", h100.fp32_cuda_core_peak)):
        (kernel,) = analyse(square, shape=(1 << 20,), dtype=dtype).kernels
        assert kernel.compute_time_s == pytest.approx((1 << 20) / peak)  # f32 throughout: f32
    mixed = cost_program("input f64 a; out = f32(a * a) + 1;", options).fused.kernels[0]
    assert (mixed.flops, mixed.f64_flops) == (2 << 20, 1 << 20)
    assert mixed.compute_time_s == pytest.approx(
        (1 << 20) / h100.fp64_cuda_core_peak + (1 << 20) / h100.fp32_cuda_core_peak
    )


def test_a_returned_input_is_copied_by_the_kernel_that_reads_it() -> None:
    """`y = exp(x); output x, y;` fused to two kernels, reading x twice (x's copy a kernel of
    its own): one kernel reads x once and writes y and the copy."""
    program = cost_program("y = exp(x); output x, y;", CostOptions(shape=(1024,)))
    (kernel,) = program.fused.kernels
    assert [(a.name, a.bytes) for a in kernel.reads] == [("x", 2048)]
    assert [a.bytes for a in kernel.writes] == [2048, 2048]
    assert program.fused.totals.bytes == 3 * 2048
    assert (program.unfused.totals.kernels, program.unfused.totals.bytes) == (2, 4 * 2048)
    assert program.comparison.kernels_saved == 1


@pytest.mark.parametrize(
    ("source", "unfused_copy", "fused_writes"),
    [
        ("y = exp(x); output x, y;", "x", ["y", "x"]),
        ("z = x; y = exp(x); output z, y;", "z", ["y", "z"]),  # the program's name, not %x's
        ("input w; y = exp(x); output w, y;", "w", None),  # read by no kernel: a copy kernel
    ],
)
def test_a_copied_output_goes_by_its_name(
    source: str, unfused_copy: str, fused_writes: list[str] | None
) -> None:
    """A returned input's copy was shown as `t0` (`x -> t0`): it is the output the program
    names."""
    program = cost_program(source, CostOptions(shape=(1024,)))
    copy = next(k for k in program.unfused.kernels if not k.ops)
    assert [a.name for a in copy.writes] == [unfused_copy]
    if fused_writes is not None:
        (kernel,) = program.fused.kernels
        assert [a.name for a in kernel.writes] == fused_writes
    else:
        assert [a.name for k in program.fused.kernels for a in k.writes] == ["y", "w"]


@pytest.mark.parametrize(
    ("source", "second"),
    [("a = x * 2; b = x * 2; output a, b;", "b"), ("a = x * 2; output a, a2; a2 = a;", "a2")],
)
def test_one_value_returned_as_two_outputs_is_written_twice(source: str, second: str) -> None:
    """Each output is an array of its own (the bufferized kernel yields the value to both): it
    was counted once, 2 accesses and 2 tensors' bytes where 3 move."""
    program = cost_program(source, CostOptions(shape=(1024,)))
    for cost in (program.fused, program.unfused):
        (kernel,) = cost.kernels
        assert [(a.name, a.bytes) for a in kernel.writes] == [("a", 2048), (second, 2048)]
        assert (cost.totals.tensor_accesses, cost.totals.bytes) == (3, 3 * 2048)


def test_cli_shows_a_copied_output_by_its_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = tmp_path / "copy.ew"
    program.write_text("y = exp(x); output x, y;\n")
    status, out, _ = run_cli(capsys, "cost", str(program), "--shape", "1024")
    assert status == 0 and "x -> x " in out and "x -> y, x " in out and "t0" not in out


def test_summary_adds_up_where_compute_and_memory_bound_kernels_mix() -> None:
    """The summary quoted max(sum of memory times, sum of compute times) + launches = total: with
    a compute-bound kernel (100 f64 multiplies of an f16 input) beside a memory-bound copy (of an
    input it does not read, else the copy is one of its results) the two sides differed (172.7 us
    + 8.0 us launch = 250.8 us)."""
    source = "input f16 x, w; z = f64(x); y = f16(z" + " * z" * 100 + "); output y, w;"
    cost = cost_program(source, CostOptions()).fused
    compute, copy = cost.kernels
    assert (compute.bound, copy.bound) == ("compute", "memory")
    totals = cost.totals
    assert totals.roofline_time_s == compute.compute_time_s + copy.memory_time_s
    assert totals.roofline_time_s + totals.launch_time_s == pytest.approx(totals.time_s)
    figures = re.search(r"([\d,.]+) us \+ ([\d,.]+) us launch = ([\d,.]+) us", summary_line(cost))
    assert figures is not None
    roofline, launch, total = (float(f.replace(",", "")) for f in figures.groups())
    assert roofline + launch == pytest.approx(total, abs=0.11)


def test_static_shapes_must_broadcast_to_the_problem_shape() -> None:
    declared = "input x[t, d], b[14336]; out = x + b;"
    assert cost_program(declared, CostOptions(shape=(8, 14336))).fused.kernels
    with pytest.raises(CostModelError, match="input 'b' of shape \\[14336\\] does not broadc"):
        cost_program(declared, CostOptions(shape=(8, 100)))
    with pytest.raises(ValueError, match="finite"):
        CostOptions(launch_us=float("nan"))
    with pytest.raises(ValueError, match=">= 0"):
        CostOptions(shape=(-1, 5))


def test_an_empty_shape_costs_no_bytes_and_no_time_but_its_launches() -> None:
    """A 0 dim was refused (`--shape 0x14336`), where compiled kernels take empty arrays: no
    bytes, no FLOPs, no roofline time; each kernel still launches (the GPU runtime launches one
    block for an empty array). Without launch overhead both sides take no time: 1x, not inf."""
    program = cost_program(GELU.read_text(), CostOptions(shape=(0, 14336)))
    for side in (program.fused, program.unfused):
        t = side.totals
        assert (t.bytes, t.flops, t.intensity, t.roofline_time_s) == (0, 0, 0.0, 0.0)
        assert t.time_s == t.launch_time_s == pytest.approx(t.kernels * 4e-6)
    assert program.comparison.traffic_ratio == 1.0
    assert program.comparison.time_ratio == pytest.approx(11.0)
    free = cost_program(GELU.read_text(), CostOptions(shape=(0, 14336), launch_us=0), epilogue="x")
    assert (free.comparison.traffic_ratio, free.comparison.time_ratio) == (1.0, 1.0)
    assert free.epilogue is not None and free.epilogue.epilogue_time_s == 0.0


def test_a_bufferized_functions_output_buffer_is_no_input() -> None:
    """`epilogue=out0` priced an output buffer, which the program computes, as a matmul's
    input: the what-if takes the function's inputs, which listed every argument."""
    module = apply_pipeline(
        parse_program("input x, y;\na = exp(x) * y;\nb = a * 2;\noutput a, b;"),
        "ew-optimize,ew-fuse{mode=none},ew-bufferize",
    )
    (cost,) = analyse_module(module, CostOptions(shape=(64,)))
    assert cost.inputs == ("x", "y")
    with pytest.raises(ValueError, match=r"'out0' is not an input of @main \(inputs: x, y\)"):
        epilogue_what_if(cost, "out0")
    # but one it reads before it writes it, in place, is (it was refused so too)
    in_place = analyse(
        """func.func @f(%x: memref<64xf32>, %y: memref<64xf32>) {
          ew.kernel ins(%x, %y : memref<64xf32>, memref<64xf32>) outs(%y : memref<64xf32>) {
          ^bb0(%a: f32, %b: f32):
            %s = arith.addf %a, %b : f32
            ew.yield %s : f32
          }
          func.return
        }""",
        shape=(64,),
    )
    assert in_place.inputs == ("x", "y") and epilogue_what_if(in_place, "y").kernel == 0
    written_only = analyse(
        """func.func @g(%o: memref<64xf32>) {
          ew.kernel ins() outs(%o : memref<64xf32>) {
          ^bb0():
            %one = arith.constant 1.0 : f32
            ew.yield %one : f32
          }
          func.return
        }""",
        shape=(64,),
    )
    with pytest.raises(ValueError, match=r"'o' is not an input of @g \(it has none\)$"):
        epilogue_what_if(written_only, "o")


def test_a_kernel_over_no_element_reads_nothing_into_l2() -> None:
    """Under `l2`, the empty `[0, 8]` kernel of `y = x + b` made `b` resident: the `[8]`
    kernel's first read of it was priced as an L2 hit (32 B from HBM of 64)."""
    source = "input x[t, d], b[d];\ny = x + b;\nz = b * 2;\noutput y, z;"
    program = cost_program(source, CostOptions(shape=(0, 8), dtype="float32", l2=True))
    for side in (program.fused, program.unfused):
        assert not any(read.from_l2 for kernel in side.kernels for read in kernel.reads)
        assert side.totals.hbm_bytes == side.totals.bytes == 64
    # nor an empty kernel after it an L2 read of 0 bytes
    swapped = source.replace("y = x + b;\nz = b * 2;", "z = b * 2;\ny = x + b;")
    program = cost_program(swapped, CostOptions(shape=(0, 8), dtype="float32", l2=True))
    assert not any(read.from_l2 for kernel in program.fused.kernels for read in kernel.reads)


def test_a_temporarys_name_is_no_inputs() -> None:
    """Temporaries are `t0`, `t1`, ... in order: an input named `t0` shared its name with one
    (`x, t0 -> t0, t1`), which the lecture then counted as a second read of the input."""
    chain = "tanh(" * 6 + "{}" + ")" * 6
    source = (
        f"input x, t0;\nt = {chain.format('x + t0')};\ny = {chain.format('t * x')};\n"
        f"z = {chain.format('t - x')};\noutput y, z;"
    )
    first, *later = cost_program(source).fused.kernels
    assert ([a.name for a in first.reads], [a.name for a in first.writes]) == (
        ["x", "t0"],
        ["t1", "t2"],
    )
    assert [a.name for kernel in later for a in kernel.reads] == ["t1", "t2"]
    # nor an output's given name, nor a value's named later (`t3 -> t3`)
    source = (
        f"input x;\nt = {chain.format('x * 2')};\ny = {chain.format('t * x')};\n"
        f"t0 = {chain.format('t - x')};\noutput y, t0;"
    )
    for side in (cost_program(source).fused, cost_program(source).unfused):
        written = [a.name for kernel in side.kernels for a in kernel.writes]
        assert len(written) == len(set(written)), written
    unfused = cost_program("input x;\nt3 = tanh(tanh(x * 2));\ny = t3 * x;").unfused
    written = [a.name for kernel in unfused.kernels for a in kernel.writes]
    assert written.count("t3") == 1 and len(written) == len(set(written)), written
    # nor a hint xDSL cut to an input's (`x_1` hinted `x`) or a reassigned value's: the
    # epilogue what-if took `x_1`'s reader for a second reader of the input `x`
    for source in (
        "input x, b;\nx_1 = tanh(tanh(x + b));\ny = tanh(x_1 * 2);",
        "input x;\nt = tanh(tanh(x));\nu = tanh(t * x);\nt = u * x;\noutput t;",
    ):
        unfused = cost_program(source, CostOptions(shape=(1024,)), epilogue="x").unfused
        written = [a.name for kernel in unfused.kernels for a in kernel.writes]
        assert "x" not in written and len(written) == len(set(written)), written
    # nor two arguments of an .mlir's (`%x`, `%x_1`: both hinted `x`; `%arg1` and an unhinted
    # second one, `arg1`): "too many values to unpack" from the epilogue what-if
    for arguments, names in (
        ("%x: T, %x_1: T", ["x", "x_1"]),
        ("%arg1: T, %0: T", ["arg1", "arg1_1"]),
    ):
        text = f"""func.func @main({arguments}) -> T {{
          %k = ew.kernel ins({arguments.replace(": T", "")} : T, T) -> T {{
          ^bb0(%a: f32, %b: f32):
            %s = arith.addf %a, %b : f32
            ew.yield %s : f32
          }}
          func.return %k : T
        }}""".replace("T", "tensor<8xf32>")
        cost = analyse(text, shape=(8,))
        assert [read.name for read in cost.kernels[0].reads] == names
        assert epilogue_what_if(cost, names[0]).input_bytes == 8 * 2  # (bf16)


def test_cli_takes_an_empty_shape(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("cost", str(GELU), "--shape", "0x14336", "--input-shape", "b=14336")
    status, out, _ = run_cli(capsys, *args, "--launch-us", "0", "--json")
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    assert status == 0 and data["fused"]["totals"]["bytes"] == 0
    assert data["comparison"]["time_ratio"] == 1.0
    status, out, _ = run_cli(capsys, *args)
    assert status == 0 and "bytes moved         │     0 B │    0 B │" in out


@pytest.mark.parametrize(
    ("source", "options", "shape"),
    [
        ("input x[4, 8];\ny = x * 2;\n", [], [4, 8]),
        ((ROOT / "examples" / "rope.ew").read_text(), [], [1, 4096, 14336]),
        ("input x[t, 8];\ny = x * 2;\n", [], [4096, 8]),
        ("input x[4, 1, 8]; input y[8];\nout = x * 2 + y;\n", [], [4, 1, 8]),
        ("out = x * 2 + y;\n", ["--input-shape", "x=a,b,c"], [1, 4096, 14336]),
        ("out = x * 2 + y;\n", ["--input-shape", "x=4,8"], [4, 8]),
        ("input x[t, t];\ny = x * 2;\n", [], [4096, 4096]),
        ("input x[d], y[d, 1];\nz = x + y;\n", [], [4096, 4096]),
        ("input x[d, 8], y[d];\nz = x + y;\n", [], [8, 8]),
        # names chained over axes tie them all, to the size one of them fixes; a 1 padding a
        # rank-3 problem is no size (x[t, t, t] was priced at 1x1x1)
        ("input x[5, b, b], y[a, 1, a];\nz = x + y;\n", [], [5, 5, 5]),
        ("input x[t, t, t];\nz = x * 2;\n", [], [4096, 4096, 4096]),
    ],
)
def test_cli_default_shape_fits_the_program(
    source: str,
    options: list[str],
    shape: list[int],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Without --shape, 4096x14336 as the lecture takes it: a program of fixed dims, or of three
    dims (RoPE), failed ("does not broadcast", "has 2 dims but the function has rank-3"), as did
    the same shapes given by --input-shape; an axis of static 1s only was taken at 4096 (the
    report's header said 4x4096x3 of a program of 4x1x3)."""
    path = tmp_path / "program.ew"
    path.write_text(source)
    status, out, err = run_cli(capsys, "cost", str(path), "--json", *options)
    assert status == 0, err
    assert json.loads(out)["fused"]["options"]["shape"] == shape


def test_a_static_input_binding_a_dynamic_one_is_priced_as_compiled() -> None:
    """`xfuse.compile` gives x b's static 14336 before fusing (one kernel); the cost model
    priced the program as written, two kernels and 2.3x the bytes."""
    body = "y = tanh(x) * r; out = bf16(y + b);"
    static = cost_program(f"input bf16 x[t, d], r[t, d]; input f32 b[14336]; {body}")
    named = cost_program(f"input bf16 x[t, d], r[t, d]; input f32 b[d]; {body}")
    assert static.fused.totals.kernels == named.fused.totals.kernels == 1
    assert static.fused.totals.bytes == named.fused.totals.bytes


def test_scalar_arguments_and_functions_without_kernels_cost_nothing() -> None:
    """The workspace-size function of the unfused pipeline, a scalar function: no kernels."""
    module = parse("func.func @f(%x: f32) -> f32 {\n  func.return %x : f32\n}\n")
    (cost,) = analyse_module(module, CostOptions())
    assert cost.kernels == () and cost.totals.bytes == 0


def test_cli_real_bias_shape(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--json", "--input-shape", "b=14336")
    assert status == 0
    fused = json.loads(out)["fused"]
    (kernel,) = fused["kernels"]
    assert [r["bytes"] for r in kernel["reads"]] == [TENSOR_BYTES, 28_672, TENSOR_BYTES]
    assert fused["totals"]["bytes"] == 3 * TENSOR_BYTES + 28_672


def test_cli_l2_shows_both_models(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--l2", "--shape", "256x1024", "--json")
    data = json.loads(out)
    assert status == 0 and data["fused"]["options"]["l2"] is True
    hbm_fused, hbm_unfused = data["hbm_only"]
    assert hbm_unfused["totals"]["hbm_bytes"] == 28 * 256 * 1024 * 2
    assert data["unfused"]["totals"]["hbm_bytes"] == 14 * 256 * 1024 * 2
    # The text names both ratios: of the bytes moved (28 against 4 tensors) and from HBM (14)
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--l2", "--shape", "256x1024")
    assert status == 0 and "fusion: 7.0x less traffic (3.5x from HBM), " in out
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--shape", "256x1024")
    assert status == 0 and "fusion: 7.0x less traffic, " in out


def test_cost_program_parses_and_optimizes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fused and unfused (and --l2's HBM-only figures) share one parse and one ew-optimize,
    where each analysis re-ran the pipeline: 2 parses and 4 ew-optimize runs with `l2`, about
    half of `xfuse cost`'s time on a long program."""
    from xfuse.runtime import cost_driver
    from xfuse.transforms.optimize import EwOptimizePass

    calls: list[str] = []
    parse, parsed, optimize = (
        cost_driver.parse_program,
        cost_driver.ParsedProgram,
        EwOptimizePass.apply,
    )

    def counted_parse(*args: object, **kwargs: object) -> ModuleOp:
        calls.append("parse")
        return parse(*args, **kwargs)  # type: ignore[arg-type]

    def counted_parsed(*args: object, **kwargs: object) -> object:
        calls.append("parse")
        return parsed(*args, **kwargs)  # type: ignore[arg-type]

    def counted_optimize(self: EwOptimizePass, ctx: Context, op: ModuleOp) -> None:
        calls.append("optimize")
        optimize(self, ctx, op)

    monkeypatch.setattr(cost_driver, "parse_program", counted_parse)
    monkeypatch.setattr(cost_driver, "ParsedProgram", counted_parsed)
    monkeypatch.setattr(EwOptimizePass, "apply", counted_optimize)
    program = cost_program(GELU.read_text(), CostOptions(shape=(256, 1024), l2=True))
    assert calls == ["parse", "optimize"]
    assert (program.fused.totals.kernels, program.unfused.totals.kernels) == (1, 11)
    assert program.hbm_only is not None
    assert program.hbm_only[1].totals.hbm_bytes == 28 * 256 * 1024 * 2


@pytest.mark.parametrize(
    ("dtype", "peak"),
    [("bf16", "67 TFLOP/s (CUDA cores, f32"), ("f64", "34 TFLOP/s (CUDA cores, f64")],
)
def test_cli_names_the_precision_of_the_peak_it_quotes(
    capsys: pytest.CaptureFixture[str], dtype: str, peak: str
) -> None:
    """An f64 program's line quoted the FP64 peak as "f32 compute"."""
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--dtype", dtype)
    assert status == 0 and f"elementwise peak {peak} compute) -> ridge" in out.replace("\n", " ")


def test_cli_roofline_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "roofline.png"
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--shape", "64x256", "--plot", str(png))
    assert status == 0 and f"roofline plot: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_cli_plot_names_the_file_it_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """matplotlib adds `.png` to a name without a suffix: the path printed is that file (it was
    the name given); a directory is an error (it wrote `<directory>.png` and exited 0)."""
    pytest.importorskip("matplotlib")
    status, out, _ = run_cli(capsys, "cost", str(GELU), "--plot", str(tmp_path / "bp"))
    assert status == 0 and f"roofline plot: {tmp_path / 'bp.png'}\n" in out
    assert (tmp_path / "bp.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["cost", str(GELU), "--plot", str(tmp_path)])
    assert exit_.value.code == 2
    assert (
        f"argument --plot: {tmp_path} is a directory: give the plot's file name "
        f"({tmp_path / 'plot.png'})" in capsys.readouterr().err
    )
    assert not tmp_path.with_suffix(".png").exists()
    # an empty name is none (it said "argument --plot:  is a directory", Path("") being ".")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["cost", str(GELU), "--plot", ""])
    err = capsys.readouterr().err
    assert "argument --plot: an empty file name: give the plot's file name (plot.png)" in err


def test_roofline_merges_identical_kernels_and_labels_every_roof() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.text import Annotation

    from xfuse.tools.cli import import_pyplot
    from xfuse.tools.roofline import roofline_figure

    program = cost_program(
        GELU.read_text(), CostOptions("h100", (4096, 14336), "bfloat16", l2=True)
    )
    figure = roofline_figure(program)
    (axes,) = figure.axes
    labels = {text.get_text(): text for text in axes.texts}
    # the 11 unfused one-op kernels land on two spots: one point and one label each
    points = ["6 kernels: addf x3, mulf x3", "5 kernels: mulf x3, tanh, addf", "11 ops"]
    assert set(points) <= set(labels)
    unfused, fused = (line for line in axes.get_lines() if line.get_label() in ("unfused", "fused"))
    assert len(unfused.get_xdata()) == 2 and len(fused.get_xdata()) == 1
    for name in points:  # offset from the marker, in a box, tied to it by a line
        label = labels[name]
        assert isinstance(label, Annotation) and label.arrow_patch is not None
        assert min(abs(d) for d in label.xyann) >= 10 and label.get_bbox_patch() is not None
    # every roof says what it is
    for roof in ("HBM 3.35 TB/s", "L2 10.1 TB/s", "CUDA cores, f32 compute: 67 TFLOP/s"):
        assert roof in labels
    assert "BF16 tensor cores: 989 TFLOP/s" in labels
    import_pyplot().close(figure)


@pytest.mark.parametrize(
    ("source", "note"),
    [
        # the unfused copy of x (fused, the exp kernel writes it)
        ("y = exp(x); output x, y;", "(1 kernel without FLOPs not shown)"),
        ("out = 2 * 3;", "(2 kernels without FLOPs not shown)"),  # a constant: no point at all
        ("out = x + 1;", "less traffic fused"),
    ],
)
def test_roofline_leaves_out_kernels_without_flops(source: str, note: str) -> None:
    """A kernel of no FLOPs (a copy, a constant) sits at 0 FLOP/B, where a log axis has no place:
    the plot failed ("Geometric sequence cannot include zero")."""
    pytest.importorskip("matplotlib")
    from xfuse.tools.cli import import_pyplot
    from xfuse.tools.roofline import roofline_figure

    figure = roofline_figure(cost_program(source, CostOptions(shape=(1024,))))
    (axes,) = figure.axes
    assert axes.get_title().endswith(note)
    for line in axes.get_lines():
        if line.get_label() in ("unfused", "fused"):
            assert all(x > 0 for x in line.get_xdata()) and all(y > 0 for y in line.get_ydata())
    import_pyplot().close(figure)


def test_plot_without_matplotlib_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A usage error, before the work (`xfuse bench` measured for minutes, then failed)."""
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["cost", str(GELU), "--plot", str(tmp_path / "r.png")])
    assert exit_.value.code == 2
    assert "error: argument --plot: needs matplotlib: pip install" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "tpu"], "argument --device: unknown device 'tpu'"),
        (["--shape", "4096xd"], "argument --shape: bad shape '4096xd'"),
        (["--shape", "4x-5"], "argument --shape: bad shape '4x-5': expected sizes >= 0"),
        (["--dtype", "int8"], "argument --dtype: unsupported dtype 'int8': expected f16, bf16"),
        # numpy's codes are no names the help gives (`float` was float64, `e` float16)
        (["--dtype", "float"], "argument --dtype: unsupported dtype 'float'"),
        (["--dtype", "e"], "argument --dtype: unsupported dtype 'e'"),
        (["--input-shape", "b"], "argument --input-shape: expected NAME=DIMS, like b=14336"),
        (["--input-shape", "b=-5"], "argument --input-shape: each dim of 'b=-5' is a size >= 0"),
        (["--input-shape", "b=²"], "argument --input-shape: each dim of 'b=²' is a size >= 0"),
        # (as --shape's: 2**64 elements were priced, a dim past int64 failed with status 1)
        (
            ["--input-shape", "x=4294967296,4294967296"],
            "argument --input-shape: 'x=4294967296,4294967296': more elements than a 64-bit",
        ),
        (  # (a 0 made the product fit: the dim failed once the program was read, status 1)
            ["--input-shape", "x=0,99999999999999999999"],
            "argument --input-shape: 'x=0,99999999999999999999': more elements than a 64-bit",
        ),
        (
            ["--shape", "0x99999999999999999999"],
            "argument --shape: bad shape '0x99999999999999999999': more elements than a 64-bit",
        ),
        (
            ["--input-shape", "b=1", "--input-shape", "b=2"],
            "argument --input-shape: 'b' given twice",
        ),
        (["--launch-us", "nan"], "argument --launch-us: expected a finite number >= 0"),
        (["--launch-us", "inf"], "argument --launch-us: expected a finite number >= 0"),
        (["--launch-us", "-1"], "argument --launch-us: expected a finite number >= 0, got '-1'"),
        (["--launch-us", "abc"], "argument --launch-us: expected a finite number >= 0"),
    ],
)
def test_cli_option_errors_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """A bad option value is a usage error, status 2, as `xfuse bench`'s and `xfuse lecture`'s
    (`xfuse cost`'s own checks gave 1, argparse's 2: `--launch-us -1` vs `--launch-us abc`)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["cost", str(GELU), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"xfuse cost: error: {message}" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cost", "missing.ew"], "xfuse cost: error: No such file or directory: missing.ew"),
        # the file `./-` as diagnostics name it (it said `-`, which is stdin)
        (["cost", "./-"], "xfuse cost: error: No such file or directory: ./-\n"),
        (
            ["cost", str(GELU), "--input-shape", "b=7", "--shape", "4096x14336"],
            "--input-shape: input 'b' of shape [7] does not broadcast to the problem shape "
            "4096x14336: its dim 0 is 7, the problem's 14336",
        ),
        (
            ["cost", str(GELU), "--input-shape", "x=t,d,e", "--shape", "4096x14336"],
            "--input-shape: shape 4096x14336 has 2 dims but the function has rank-3 tensors "
            "(input 'x')",
        ),
        (
            ["cost", str(INPUTS / "rank3.ew"), "--shape", "4096"],
            "--shape: shape 4096 has 1 dims but the function has rank-3 tensors (input 'x')",
        ),
        (
            ["cost", str(GELU), "--input-shape", "b=0", "--shape", "4096x14336"],
            "--input-shape: input 'b' of shape [0] does not broadcast to the problem shape",
        ),
        (  # (these two named no option)
            ["cost", str(GELU), "--input-shape", "zz=4"],
            "xfuse cost: error: --input-shape: input shape given for zz, which the program does "
            "not read (inputs: x, b, r)",
        ),
        (
            ["cost", str(GELU), "--epilogue", "y"],
            "xfuse cost: error: --epilogue: epilogue input 'y' is not an input of @main "
            "(inputs: x, b, r)",
        ),
    ],
)
def test_cli_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status, _, err = run_cli(capsys, *args)
    assert status == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args", [["cost", ""], ["bench", ""], ["lecture", "--source", ""]], ids=lambda a: a[0]
)
def test_an_empty_file_name_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """`Path("")` is `.`: it was "error: Is a directory: .", status 1."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.endswith(": an empty file name\n"), err


def test_a_refusal_names_the_shape_given_where_the_model_folded_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A 1-d program under `--shape 4x8` runs over 32 elements: the refusal says where the 32
    came from (it named only `32`, which no option had said)."""
    program = tmp_path / "row.ew"
    program.write_text("input x[n], b[5];\nout = x + b;\n")
    status, _, err = run_cli(capsys, "cost", str(program), "--shape", "4x8")
    assert status == 1, err
    assert (
        "--shape: input 'b' of shape [5] does not broadcast to the problem shape 32 (4x8 folded "
        "to the function's rank 1): its dim 0 is 5, the problem's 32"
    ) in err


def test_cli_reports_program_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.ew"
    bad.write_text("out = x +;\n")
    status, _, err = run_cli(capsys, "cost", str(bad))
    assert status == 1 and f"{bad}:1:" in err and "Traceback" not in err
    status, _, err = run_cli(capsys, "cost", str(GELU), "--input-shape", "q=4")
    assert status == 1 and "input shape given for q" in err


XFUSE = [sys.executable, "-m", "xfuse.tools.cli"]
DOUBLE_PLUS_ONE = "input x;\nout = x * 2 + 1;\n"


def test_cli_reads_the_program_from_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`xfuse cost -` reads stdin, as `xfuse-opt -` does (it was `xfuse cost: error: No such
    file or directory: -`)."""
    child = subprocess.run(
        [*XFUSE, "cost", "-", "--shape", "1024"],
        input=DOUBLE_PLUS_ONE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (child.returncode, child.stderr) == (0, "")
    assert re.search(r"│ kernels +│ +2 │ +1 │", child.stdout)  # mul and add, fused into one
    program = tmp_path / "double.ew"
    program.write_text(DOUBLE_PLUS_ONE)
    assert run_cli(capsys, "cost", str(program), "--shape", "1024") == (0, child.stdout, "")


def test_cli_without_stdin_is_a_one_line_error() -> None:
    """Started with stdin closed (`<&-`), Python has no `sys.stdin` to read `-` from."""
    child = subprocess.run(
        [*XFUSE, "cost", "-"],
        preexec_fn=lambda: os.close(0),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (child.returncode, child.stdout) == (1, "")
    assert child.stderr == "xfuse cost: error: no standard input to read the program from (-)\n"


@pytest.mark.parametrize(
    "command", [["cost"], ["bench"], ["lecture", "--quick", "--source"]], ids=lambda c: c[0]
)
def test_cli_locates_errors_in_stdin_as_xfuse_opt_does(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program read from `-` is named `stdin` in diagnostics, as by `xfuse-opt -f ew -`."""
    bad = "input x;\nout = x +* 2;\n"
    child = subprocess.run(
        [*XFUSE, *command, "-"], input=bad, capture_output=True, text=True, timeout=120, check=False
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bad.encode())))
    assert opt.main(["-f", "ew", "-"]) == 1
    from_opt = capsys.readouterr().err
    assert from_opt.startswith("stdin:2:10: error: expected an expression, found '*'\n")
    assert (child.returncode, child.stdout, child.stderr) == (1, "", from_opt)


def test_cli_names_a_file_called_dash_by_its_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`./-` is a file, not stdin; its diagnostics said `-:2:10`, as if `-` were a name for it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("input x;\nout = x +* 2;\n")
    assert cli.main(["cost", "./-"]) == 1
    assert capsys.readouterr().err.startswith("./-:2:10: error: expected an expression")


def test_cli_without_command_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "cost" in capsys.readouterr().err
    # (the cache's action was named by its dest, which its usage does not show: "action")
    with pytest.raises(SystemExit) as exited:
        cli.main(["cache"])
    assert exited.value.code == 2
    assert "the following arguments are required: {info,clear}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["lecture", "--quik"], "--quik (did you mean --quick?)"),
        (["cost", str(GELU), "--devcie", "h100"], "--devcie (did you mean --device?) h100"),
        (["bench", "--expr", "x", "--paers"], "--paers (did you mean --peers?)"),
        (["cache", "info", "--jsn"], "--jsn (did you mean --json?)"),
        (["cost", str(GELU), str(GELU)], str(GELU)),
        # abbreviations are not options (argparse's default took `--peer` for `--peers`)
        (["bench", "--expr", "x", "--peer"], "--peer (did you mean --peers?)"),
        (["lecture", "--rep", "1"], "--rep (did you mean --repeat?) 1"),
        (["cost", str(GELU), "--dev", "h100"], "--dev (did you mean --device?) h100"),
        # after `--` an option is a positional: no hint (it said "--json (did you mean --json?)")
        (["cost", str(GELU), "--", "--json"], "--json"),
        # `-` is stdin, no misspelt option (it said "- (did you mean -h?)")
        (["lecture", "-"], "-"),
        # `--` alone is the end of options, no misspelt one (it said "-- (did you mean --n?)")
        (["lecture", "--"], "--"),
        (["cost", str(GELU), "-"], "-"),
    ],
)
def test_unknown_arguments_are_the_subcommands_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    """Reported with the subcommand's usage (its options) and the option a typo is close to,
    not with `xfuse [-h] [--version] COMMAND ...`, which names none."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: xfuse {args[0]} ")
    assert f"xfuse {args[0]}: error: unrecognized arguments: {error}\n" in err


def test_unknown_arguments_before_the_subcommand_are_xfuses_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--bogus", "lecture", "--quik"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: xfuse [-h]")
    assert "xfuse: error: unrecognized arguments: --bogus --quik\n" in err
    # and with the hint of xfuse's own option a typo is close to (it had none)
    with pytest.raises(SystemExit):
        cli.main(["--versio"])
    assert "xfuse: error: unrecognized arguments: --versio (did you mean --version?)\n" in (
        capsys.readouterr().err
    )


def test_an_abbreviation_of_xfuses_own_option_is_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`xfuse --vers` printed the version: argparse took an abbreviation for `--version`."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--vers"])
    assert exit_.value.code == 2
    assert "xfuse: error: unrecognized arguments: --vers (did you mean --version?)\n" in (
        capsys.readouterr().err
    )


def test_an_f64_program_quotes_the_f64_peak_and_ridge(capsys: pytest.CaptureFixture[str]) -> None:
    """Its kernels are priced at f64's peak; the header and the roofline quoted f32's (they took
    the precision from the output's dtype, here f32)."""
    pytest.importorskip("matplotlib")
    from rich.console import Console

    from xfuse.tools.cli import import_pyplot
    from xfuse.tools.roofline import roofline_figure

    source = "input f64 x;\nout = f32(sin(sin(sin(x))));\n"
    program = cost_program(source, CostOptions(shape=(1 << 20,)))
    assert program.fused.compute_dtype == "float64"
    hw = program.fused.options.hardware
    print_program(Console(width=400), program)
    header = capsys.readouterr().out
    assert f"{hw.elementwise_peak('float64') / 1e12:.3g} TFLOP/s (CUDA cores, f64 compute)" in (
        header
    )
    assert f"ridge {hw.ridge_point('float64'):.1f} FLOP/B" in header
    figure = roofline_figure(program)
    labels = {text.get_text() for text in figure.axes[0].texts}
    assert f"CUDA cores, f64 compute: {hw.elementwise_peak('float64') / 1e12:.3g} TFLOP/s" in labels
    import_pyplot().close(figure)
    assert cost_program("y = x * 2;", CostOptions(shape=(8,))).fused.compute_dtype == "float32"
    # Mostly f64 FLOPs (nine sines, then one f32 add) is f64's peak and ridge, as the kernel is
    # priced (it quoted f32's, and the lecture called the compute-bound program memory-bound);
    # f64 tensors without FLOPs too.
    mixed = "input f64 x; out = f32(sin(sin(sin(sin(sin(sin(sin(sin(sin(x)))))))))) + 1;"
    for source in (mixed, "input f64 x; out = copysign(x, -1);"):
        assert cost_program(source, CostOptions(shape=(8,))).fused.compute_dtype == "float64"
    for device, label in (
        ("a100", "CUDA cores, f32 compute: 19.5 TFLOP/s"),
        ("b200", "BF16 tensor cores: 2250 TFLOP/s"),  # (it said 2.25e+03)
    ):
        figure = roofline_figure(cost_program(GELU.read_text(), CostOptions(device=device)))
        assert label in {t.get_text() for t in figure.axes[0].texts}
        import_pyplot().close(figure)


@pytest.mark.parametrize(
    ("source", "shape", "message"),
    [
        ("input x[t, d], b[t];\ny = x * b;\n", (4096, 14336), "dim 't' is 4096 in input 'x' but "),
        ("input x[n, n];\ny = x * 2;\n", (4, 8), "dim 'n' is 4 in input 'x' but 8 in input 'x'"),
    ],
)
def test_a_named_dim_is_one_size(source: str, shape: tuple[int, ...], message: str) -> None:
    """Dims of one name must be one size at a call (docs/shapes-and-dtypes.md); the model
    priced `t` as 4096 in `x` and 14336 in `b`, a call the kernel refuses."""
    with pytest.raises(CostModelError, match=re.escape(message)):
        cost_program(source, CostOptions(shape=shape))
    square = shape[:1] * 2
    assert cost_program(source, CostOptions(shape=square)).fused.totals.bytes > 0


def test_fusion_that_leaves_no_traffic_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An empty fused kernel beside an unfused `b * 2` printed "infx less traffic"."""
    assert less(7.04, "traffic") == "7.0x less traffic"
    program = tmp_path / "inf.ew"
    program.write_text("input x[t, d], b[d];\nout = x + b * 2;\n")
    status, out, _ = run_cli(capsys, "cost", str(program), "--shape", "0x8", "--launch-us", "0")
    assert status == 0 and "fusion: no traffic left, no time left, 1 fewer launch" in out


def test_an_empty_epilogue_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`--epilogue ''` was dropped without a word (exit 0, no what-if)."""
    status, _, err = run_cli(capsys, "cost", str(GELU), "--epilogue", "")
    assert status == 1 and "epilogue input '' is not an input of @main (inputs: x, b, r)" in err


def test_fusion_that_costs_time_says_more_and_units_follow_the_rounding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A fused kernel that took longer said "0.5x less time" under a table saying the opposite:
    one recomputing a bf16 `[d]` row's chain per element (kept in the kernel: its own would
    store the row rounded to bf16); an f32 row's is a kernel of its own. 999,995 B was
    "1000.00 kB"."""
    assert less(0.52, "time") == "1.9x more time" and less(0.96, "time") == "1.0x less time"
    program = tmp_path / "row.ew"
    chain = "b" + ")" * 10
    program.write_text(f"input x[t, d], b[d];\nout = x + {'sin(cos(' * 5}{chain};\n")
    status, out, _ = run_cli(capsys, "cost", str(program), "--launch-us", "0")  # (bf16)
    assert status == 0 and re.search(r"fusion: [\d.]+x less traffic, [\d.]+x more time", out)
    status, out, _ = run_cli(capsys, "cost", str(program), "--launch-us", "0", "--dtype", "f32")
    assert status == 0 and re.search(r"[\d.]+x less traffic, [\d.]+x less time, 9 fewer", out)
    assert nbytes(999_995) == "999,995 B (1.00 MB)" and nbytes(999_994) == "999,994 B (999.99 kB)"
    assert nbytes(999_995_000) == "999,995,000 B (1.00 GB)" and nbytes(995) == "995 B"


def test_a_shape_past_int64_is_refused_however_it_is_made() -> None:
    """Two inputs of static shapes that broadcast to 2**64 elements were priced (each dim, and
    each shape option alone, fits)."""
    with pytest.raises(ValueError, match=r"more elements than a 64-bit index can count"):
        CostOptions(shape=(4, 2**62))
    source = "input x[4, 1];\ninput b[1, 4611686018427387904];\nout = x + b;\n"
    module = parse_program(source)
    EwFusePass().apply(Context(), module)
    with pytest.raises(PassFailedException, match=r"more elements than a 64-bit index"):
        EwCostPass().apply(Context(), module)


def test_xfuse_cost_of_static_dims_past_int64_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The fitted shape's error was swallowed with the fitting's: the default shape was kept
    and blamed ("--shape: input 'x' ... does not broadcast to ... 4096x14336")."""
    program = tmp_path / "big.ew"
    program.write_text("input x[4294967296], y[4294967296, 1];\nout = x * y;\n")
    status, _, err = run_cli(capsys, "cost", str(program))
    assert status == 1 and "more elements than a 64-bit index can count" in err
    assert "--shape" not in err


def test_a_call_of_another_function_is_an_error_at_the_call() -> None:
    """Its kernels run, and were priced as nothing: `@main` calling a kernel twice was '0
    kernels, 0 bytes, 0.0 us'."""
    module = parse(
        "func.func @helper(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %0 = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {\n"
        "  ^bb0(%1: f32):\n"
        "    %2 = math.exp %1 : f32\n"
        "    ew.yield %2 : f32\n"
        "  }\n"
        "  func.return %0 : tensor<?xf32>\n"
        "}\n"
        "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %0 = func.call @helper(%x) : (tensor<?xf32>) -> tensor<?xf32>\n"
        "  func.return %0 : tensor<?xf32>\n"
        "}"
    )
    with pytest.raises(CostModelError, match="'func.call' of @helper: the cost model") as caught:
        analyse_module(module, CostOptions(shape=(8,)))
    assert caught.value.op is not None and caught.value.op.name == "func.call"


_COPY_IN_A_SCOPE = (
    "func.func @main(%x: memref<16xf32>, %out: memref<16xf32>) {\n"
    "  %t = memref.alloc() : memref<16xf32>\n"
    '  "memref.alloca_scope"() ({\n'
    '    "memref.copy"(%x, %t) : (memref<16xf32>, memref<16xf32>) -> ()\n'
    '    "memref.alloca_scope.return"() : () -> ()\n'
    "  }) : () -> ()\n"
    "  ew.kernel ins(%t : memref<16xf32>) outs(%out : memref<16xf32>) {\n"
    "  ^bb0(%0: f32):\n"
    "    %1 = math.exp %0 : f32\n"
    "    ew.yield %1 : f32\n"
    "  }\n"
    "  func.return\n"
    "}"
)
_COPY_AT_THE_TOP = _COPY_IN_A_SCOPE.replace('  "memref.alloca_scope"() ({\n', "").replace(
    '    "memref.alloca_scope.return"() : () -> ()\n  }) : () -> ()\n', ""
)
_ARITH_ON_TENSORS = (
    "func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {\n"
    "  %y = arith.addf %x, %x : tensor<16xf32>\n"
    "  func.return %y : tensor<16xf32>\n"
    "}"
)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        # its bytes were priced as none ('1 kernels, 128 bytes'); nested, only the function's
        # own ops were checked
        (_COPY_AT_THE_TOP, "'memref.copy' moves data"),
        (_COPY_IN_A_SCOPE, "'memref.copy' moves data"),
        (_ARITH_ON_TENSORS, "'arith.addf' is not an ew.kernel: .* run it before"),  # ("0
        # kernels, 0 bytes"), of integers too
        (_ARITH_ON_TENSORS.replace("xf32", "xi32").replace("addf", "addi"), "'arith.addi' is"),
    ],
)
def test_ops_the_model_cannot_price_are_refused_wherever_they_are(text: str, refused: str) -> None:
    with pytest.raises(CostModelError, match=refused) as caught:
        analyse_module(parse(text), CostOptions(shape=(16,)))
    assert caught.value.op is not None and caught.value.op.name == refused.split("'")[1]


def test_the_workspace_argument_is_no_array_of_the_program() -> None:
    """After ew-workspace, its `memref<?xi8>` argument spanned every axis and was an input: a
    [t, 1] program priced 4096 elements under a header of 4096x14336."""
    source = "input x[t, 1];\nout = exp(x) * 2;\n"
    passes = "ew-optimize,ew-fuse{mode=none},ew-bufferize"
    bufferized = apply_pipeline(parse_program(source), passes)
    workspace = apply_pipeline(parse_program(source), passes + ",ew-workspace")
    assert "%workspace: memref<?xi8>" in str(workspace)
    for module in (bufferized, workspace):
        with pytest.raises(ShapeMismatchError, match="no tensor of the function spans its dim 1"):
            analyse_module(module, CostOptions(shape=(4096, 14336)))
    (before,) = analyse_module(bufferized, CostOptions(shape=(4096, 1)))
    (after,) = [f for f in analyse_module(workspace, CostOptions(shape=(4096, 1))) if f.kernels]
    assert after.totals == before.totals and after.inputs == before.inputs == ("x",)


def test_a_shape_that_no_tensor_spans_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A program of static 1s or 0-d tensors was priced as one element under the header of the
    shape given (`--shape 0` moved 4 bytes). A default shape fits such a program (1x1, scalar);
    the Python API prices a 0-d program as one element whatever the shape, as before."""
    ones, scalar = tmp_path / "ones.ew", tmp_path / "scalar.ew"
    ones.write_text("input x[1, 1];\nout = x * 2;\n")
    scalar.write_text("input s[];\nout = s * 2;\n")
    for program, shape, message in [
        (ones, "4096x14336", "no tensor of the function spans its dim 0"),
        (ones, "1x8", "no tensor of the function spans its dim 1"),
        (scalar, "0", "shape 0 has 0 elements, but the function's tensors are 0-d"),
        (scalar, "4x4", "shape 4x4 has 16 elements, but the function's tensors are 0-d"),
    ]:
        status, _, err = run_cli(capsys, "cost", str(program), "--shape", shape)
        assert (
            status == 1 and err.startswith("xfuse cost: error: --shape: shape ") and message in err
        )
    for program, header in [(ones, "1x1 bfloat16"), (scalar, "scalar bfloat16")]:
        status, out, _ = run_cli(capsys, "cost", str(program))
        assert status == 0 and header in out
    with pytest.raises(ShapeMismatchError, match="spans its dim 0"):
        cost_program(ones.read_text(), CostOptions(shape=(4, 1)))
    assert cost_program(scalar.read_text(), CostOptions(shape=(4, 4))).fused.totals.bytes == 4
    with pytest.raises(PassFailedException, match="the function's tensors are 0-d"):
        module = parse_program(scalar.read_text())
        EwFusePass().apply(Context(), module)
        EwCostPass(shape="4x4").apply(Context(), module)


def test_an_input_shape_with_no_dims_is_0d(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--input-shape s=` could not spell a 0-d input ("expected NAME=DIMS")."""
    program = tmp_path / "scaled.ew"
    program.write_text("out = x * s;\n")
    status, out, _ = run_cli(capsys, "cost", str(program), "--json", "--input-shape", "s=")
    fused = json.loads(out)["fused"]["totals"]
    assert status == 0 and fused["bytes"] == 2 * (4096 * 14336 * 2) + 2  # x, out, and s once


def test_a_function_of_no_arrays_takes_any_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """An empty function beside a priced one refused the whole module under `shape=`: "the
    function's tensors are 0-d"."""
    module = parse(
        "func.func @a(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %y = ew.exp %x : tensor<?xf32>\n"
        "  func.return %y : tensor<?xf32>\n"
        "}\n"
        "func.func @b() {\n"
        "  func.return\n"
        "}"
    )
    EwFusePass().apply(Context(), module)
    EwCostPass(shape="1024").apply(Context(), module)
    out = capsys.readouterr().err
    assert "ew-cost @a: 1 kernel, 2 tensor reads+writes, 4,096 bytes" in out
    assert "ew-cost @b: 0 kernels, 0 tensor reads+writes, 0 bytes" in out


def test_a_launch_time_past_the_floats_is_an_option_error() -> None:
    """An int of 400 digits raised OverflowError (an internal error in xfuse-opt)."""
    with pytest.raises(PassOptionError, match="'launch-us': expected a finite number >= 0"):
        EwCostPass(launch_us=10**400)


def test_a_bufferized_output_that_does_not_fit_the_shape_is_called_an_output() -> None:
    """It was "input 'a' of shape [4] does not broadcast": after ew-bufferize the function's
    arguments are its output buffers too."""
    module = parse(
        "func.func @main() -> tensor<4xf32> {\n"
        "  %a = ew.kernel ins() -> tensor<4xf32> {\n"
        "    %0 = arith.constant 1.5 : f32\n"
        "    ew.yield %0 : f32\n"
        "  }\n"
        "  func.return %a : tensor<4xf32>\n"
        "}"
    )
    EwBufferizePass().apply(Context(), module)
    with pytest.raises(ShapeMismatchError, match=r"^output 'a' of shape \[4\] does not broadcast"):
        analyse_module(module, CostOptions(shape=(5,)))
