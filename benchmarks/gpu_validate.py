"""The H100/H200 cost model (`ew-cost`) against a real GPU: GELU with bias and residual.

    python benchmarks/gpu_validate.py [--device h200] [--arch sm_90] [--shape 4096x14336]
                                      [--repeat 20] [--json gpu.json] [--plot gpu.png] [--dry-run]

For bf16 and f32 at the lecture's shape, fused (1 kernel) and unfused (11 kernels): compiles the
program with `xfuse.compile(..., target="cuda")`, runs it on the GPU with CUDA events (warm-up,
then the median of `--repeat` runs, each kernel timed alone and the whole program), checks the
result against a float64 reference, and prints beside `ew-cost{device=...}`'s prediction, per
kernel and in total, the measured time, their ratio, and the achieved bandwidth as a fraction of
the device's measured copy bandwidth (a device-to-device copy, read + write). The ceilings also
give a calibrated prediction: the model's bytes over the measured copy bandwidth plus the
measured launch time of an empty kernel (back to back). PyTorch eager and `torch.compile` on the
same GELU are timed where PyTorch is installed with CUDA.

It then checks f64 exp, tanh and erf (NVIDIA's libdevice, linked into the PTX) on 2^16 inputs
against numpy, within the maximum errors NVIDIA documents for them (`F64_MATH`), and their
special values (+-0, +-inf, NaN) against numpy's; `--dry-run` compiles those kernels only.

`--dry-run` needs no GPU: it compiles every variant to PTX, checks that each has as many entries
as the model has kernels, and reports the predictions only (this is what the tests run). Without
it, where there is no GPU or no cuda-python, the script says which and exits with status 2; a
driver call that fails later, or PTX this GPU or driver cannot load, is one line naming it, and
status 1, as is a run whose results any check failed (each checked line says ok or FAILED).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

import xfuse
from xfuse.analysis.cost import CostOptions, FunctionCost, parse_shape
from xfuse.analysis.hardware import DEVICE_NAMES, device
from xfuse.benchmarking.timing import host_summary
from xfuse.codegen.libdevice import LibdeviceNotFoundError
from xfuse.codegen.ptx import ARCHES
from xfuse.runtime.arrays import numpy_dtype
from xfuse.runtime.cost_driver import cost_program
from xfuse.tools.cli import json_file, option_type, plot_file, positive_int
from xfuse.tools.scripts import run_script, script_parser

SOURCE = (Path(__file__).parents[1] / "examples" / "gelu.ew").read_text()
DTYPES = ("bfloat16", "float32")
EMPTY_KERNEL = """.version 8.0
.target {arch}
.address_size 64
.visible .entry empty()
{{
  ret;
}}
"""


@dataclass
class KernelRow:
    name: str
    bytes: int
    predicted_s: float
    calibrated_s: float | None = None
    measured_s: float | None = None


@dataclass
class VariantResult:
    dtype: str
    fused: bool
    arch: str
    kernels: list[KernelRow]
    predicted_s: float
    calibrated_s: float | None = None
    measured_s: float | None = None
    max_error: float | None = None
    tolerance: float | None = None

    @property
    def ok(self) -> bool | None:
        """Whether the result is within the tolerance of the float64 reference (a NaN error is
        not); None where it was not checked (a dry run)."""
        if self.max_error is None or self.tolerance is None:
            return None
        return self.max_error <= self.tolerance


@dataclass(frozen=True)
class MathCheck:
    function: str
    reference: Callable[[np.ndarray], np.ndarray]
    """numpy's function, in long double where numpy has it (x86: 64-bit significands)."""
    inputs: tuple[float, float]
    bound_ulps: float
    """libdevice's documented maximum error, plus the reference's own where it is f64."""


F64_MATH = (
    MathCheck("exp", lambda x: np.exp(x.astype(np.longdouble)), (-745.0, 709.0), 1),
    MathCheck("tanh", lambda x: np.tanh(x.astype(np.longdouble)), (-20.0, 20.0), 1),
    MathCheck("erf", np.vectorize(math.erf, otypes=[np.float64]), (-6.0, 6.0), 2 + 1),
)
"""The f64 functions checked, with the maximum ulp errors of the CUDA C++ Programming Guide
("Mathematical Functions", the double-precision table: exp 1, tanh 1, erf 2; from extensive,
not exhaustive, tests) and, for erf, 1 ulp more for the C library's erf it is compared with."""
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])


@dataclass
class MathResult:
    function: str
    bound_ulps: float
    max_ulps: float | None = None
    specials_match: bool | None = None
    error: str | None = None
    """Why it was not checked (no libdevice)."""

    @property
    def ok(self) -> bool | None:
        """Within libdevice's bound and special values as numpy's; None where not measured."""
        if self.max_ulps is None:
            return None
        return self.max_ulps <= self.bound_ulps and bool(self.specials_match)


@dataclass
class Report:
    device: str
    shape: tuple[int, ...]
    gpu: str | None = None
    copy_bandwidth: float | None = None
    launch_s: float | None = None
    variants: list[VariantResult] = field(default_factory=list)
    torch: dict[str, float] = field(default_factory=dict)
    math: list[MathResult] = field(default_factory=list)

    def failed(self) -> bool:
        """Whether a checked result was wrong: a variant past its tolerance, an f64 function
        past its bound (what the exit status says)."""
        return any(check.ok is False for check in (*self.variants, *self.math))


def reference(x: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    h = x.astype(np.float64) + b.astype(np.float64)
    y = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    return y + r.astype(np.float64)


class Gpu:
    """The GPU through xfuse's driver wrapper, plus CUDA events (a failing call is
    `xfuse.CudaError`, naming it)."""

    def __init__(self) -> None:
        from xfuse.runtime.cuda import cuda_device

        self.device = cuda_device()  # CudaUnavailableError says what is missing
        call = self.device.call
        self.name = call("cuDeviceGetName", 256, call("cuDeviceGet", 0))
        self.name = self.name.split(b"\0")[0].decode()

    @contextmanager
    def _event(self) -> Iterator[Any]:
        """A CUDA event, destroyed on leaving (each `time` makes two: they would pile up)."""
        event = self.device.call("cuEventCreate", 0)
        try:
            yield event
        except BaseException:
            # After a sticky fault the destroy fails too: the error to report is the first one.
            with suppress(xfuse.CudaError):
                self.device.call("cuEventDestroy", event)
            raise
        self.device.call("cuEventDestroy", event)

    def time(self, work: Callable[[], None], repeat: int, warmup: int = 3) -> float:
        """Median seconds of `work` (launches on the default stream) between two events."""
        call = self.device.call
        with self._event() as start, self._event() as stop:
            for _ in range(warmup):
                work()
            times = []
            for _ in range(repeat):
                call("cuEventRecord", start, 0)
                work()
                call("cuEventRecord", stop, 0)
                call("cuEventSynchronize", stop)
                times.append(call("cuEventElapsedTime", start, stop) * 1e-3)
        return statistics.median(times)

    def copy_bandwidth(self, nbytes: int, repeat: int) -> float:
        """Bytes per second of a device-to-device copy, counting the read and the write."""
        source, target = self.device.allocate(nbytes), self.device.allocate(nbytes)
        seconds = self.time(
            lambda: self.device.call("cuMemcpyDtoD", target, source, nbytes), repeat
        )
        self.device.free(source)
        self.device.free(target)
        return 2 * nbytes / seconds

    def launch_time(self, arch: str, count: int = 1000) -> float:
        """Seconds per launch of an empty kernel, `count` back to back."""
        from xfuse.codegen.ptx import PtxModule

        ptx = PtxModule("", EMPTY_KERNEL.format(arch=arch), ("empty",), arch)
        module = self.device.load(ptx)

        def launches() -> None:
            for _ in range(count):
                self.device.launch(module, "empty", 1, 32, [])

        return self.time(launches, 5) / count


def predict(dtype: str, args: argparse.Namespace) -> tuple[FunctionCost, FunctionCost]:
    cost = cost_program(SOURCE, CostOptions(device=args.device, shape=args.shape, dtype=dtype))
    return cost.fused, cost.unfused


def run_variant(
    gpu: Gpu | None, report: Report, dtype: str, fused: bool, cost: FunctionCost, args: Any
) -> VariantResult:
    shapes = dict.fromkeys(("x", "b", "r"), ("t", "d"))
    kernel = xfuse.compile(
        SOURCE,
        outputs=["out"],
        fuse=fused,
        dtype=dtype,
        shapes=shapes,
        target="cuda",
        arch=args.arch,
    )
    entries = kernel.function.ptx.entries
    if len(entries) != len(cost.kernels):
        raise AssertionError(f"{len(entries)} PTX entries but the model has {len(cost.kernels)}")
    rows = [
        KernelRow(entry, k.hbm_bytes, k.time_s)
        for entry, k in zip(entries, cost.kernels, strict=True)
    ]
    result = VariantResult(dtype, fused, kernel.function.ptx.arch, rows, cost.totals.time_s)
    if report.copy_bandwidth and report.launch_s is not None:
        for row in rows:
            row.calibrated_s = row.bytes / report.copy_bandwidth + report.launch_s
        result.calibrated_s = sum(row.calibrated_s or 0 for row in rows)
    if gpu is not None:
        measure(gpu, kernel, result, args)
    return result


def measure(gpu: Gpu, kernel: Any, result: VariantResult, args: Any) -> None:
    from xfuse.runtime.cuda import plan_launches

    rng = np.random.default_rng(0)
    dtype = numpy_dtype(result.dtype)
    host = [rng.standard_normal(args.shape, np.float32).astype(dtype) for _ in range(3)]
    out = np.empty(args.shape, dtype)
    function = kernel.function
    device = gpu.device
    shapes = [args.shape] * 4
    pointers = [device.allocate(a.nbytes) for a in (*host, out)]
    for pointer, array in zip(pointers, host, strict=False):
        device.copy_to_device(pointer, array)
    pointers += [device.allocate(t.nbytes(shapes)) for t in function.sequence.temporaries]
    module = device.load(function.ptx)
    launches = plan_launches(function, shapes, pointers, device, module)

    def run_all() -> None:
        for launch in launches:
            device.launch(module, *launch)

    result.measured_s = gpu.time(run_all, args.repeat)
    # The result of the whole program, before the kernels run alone: an unfused kernel that
    # updates a temporary in place, run again and again, leaves the next one wrong inputs.
    device.synchronize()
    device.copy_to_host(out, pointers[3])
    for row, launch in zip(result.kernels, launches, strict=True):
        row.measured_s = gpu.time(lambda launch=launch: device.launch(module, *launch), args.repeat)
    want = reference(*host)
    result.max_error = float(np.max(np.abs(out.astype(np.float64) - want)))
    # f32: the approximation's 1e-6 relative; bf16: half an ulp of the stored result.
    result.tolerance = float(np.max(np.abs(want))) * (2.0**-8 if dtype.itemsize == 2 else 1e-5)
    for pointer in pointers:
        device.free(pointer)


def check_math(gpu: Gpu | None, check: MathCheck, arch: str) -> MathResult:
    """One f64 function on the GPU against numpy (compiled only, without a GPU)."""
    result = MathResult(check.function, check.bound_ulps)
    try:
        kernel = xfuse.compile(
            f"out = {check.function}(x);", dtype="float64", target="cuda", arch=arch
        )
    except LibdeviceNotFoundError as error:  # says where it looked
        result.error = str(error)
        return result
    if gpu is None:
        return result
    x = np.random.default_rng(0).uniform(*check.inputs, 1 << 16)
    want = check.reference(x)
    nearest = want.astype(np.float64)
    ulps = np.abs(kernel(x=x).astype(np.longdouble) - want) / np.spacing(np.abs(nearest))
    result.max_ulps = float(np.max(ulps))
    got, expected = kernel(x=SPECIALS), check.reference(SPECIALS).astype(np.float64)
    same = (got.view(np.int64) == expected.view(np.int64)) | (np.isnan(got) & np.isnan(expected))
    result.specials_match = bool(np.all(same))  # the sign of zero included; any NaN is NaN
    return result


def time_torch(gpu: Gpu, report: Report, args: Any) -> None:
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():  # a CPU-only wheel (it raised at its first CUDA tensor)
        return

    def gelu(x: Any, b: Any, r: Any) -> Any:
        h = x + b
        return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

    for dtype in DTYPES:
        torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
        x, b, r = (torch.randn(args.shape, device="cuda", dtype=torch_dtype) for _ in range(3))
        for name, function in (("eager", gelu), ("compile", torch.compile(gelu))):
            function(x, b, r)  # compiles
            torch.cuda.synchronize()
            seconds = gpu.time(lambda f=function, a=(x, b, r): f(*a), args.repeat)
            report.torch[f"{dtype} {name}"] = seconds


def print_report(report: Report, file: TextIO = sys.stdout) -> None:
    def us(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds * 1e6:,.1f}"

    write = functools.partial(print, file=file)
    write(host_summary())
    write(f"device: {report.gpu or '(dry run, no GPU)'}; model: {report.device}, {report.shape}")
    if report.copy_bandwidth:
        write(
            f"copy bandwidth {report.copy_bandwidth / 1e12:.2f} TB/s, empty launch "
            f"{us(report.launch_s)} us"
        )
    for variant in report.variants:
        label = f"{variant.dtype} {'fused' if variant.fused else 'unfused'}"
        write(
            f"\n{label}: predicted {us(variant.predicted_s)} us, calibrated "
            f"{us(variant.calibrated_s)} us, measured {us(variant.measured_s)} us"
            + (
                f", max error {variant.max_error:.3g} (tolerance {variant.tolerance:.3g}): "
                f"{'ok' if variant.ok else 'FAILED'}"
                if variant.max_error is not None and variant.tolerance is not None
                else ""
            )
        )
        write(
            f"  {'kernel':<16} {'MB':>9} {'model us':>10} {'calib. us':>10} {'meas. us':>10}"
            f" {'ratio':>6} {'of copy BW':>10}"
        )
        for row in variant.kernels:
            ratio = row.measured_s / row.predicted_s if row.measured_s else None
            achieved = (
                row.bytes / row.measured_s / report.copy_bandwidth
                if row.measured_s and report.copy_bandwidth
                else None
            )
            write(
                f"  {row.name:<16} {row.bytes / 1e6:>9.1f} {us(row.predicted_s):>10} "
                f"{us(row.calibrated_s):>10} {us(row.measured_s):>10} "
                f"{'-' if ratio is None else f'{ratio:.2f}':>6} "
                f"{'-' if achieved is None else f'{achieved:.0%}':>10}"
            )
    for name, seconds in report.torch.items():
        write(f"torch {name}: {us(seconds)} us")
    for check in report.math:
        if check.error is not None:
            write(f"f64 {check.function}: not checked: {check.error}")
        elif check.max_ulps is None:
            write(f"f64 {check.function}: compiled (bound {check.bound_ulps:g} ulps)")
        else:
            specials = "as" if check.specials_match else "NOT as"
            write(
                f"f64 {check.function}: max {check.max_ulps:.3f} ulps (bound "
                f"{check.bound_ulps:g}), special values {specials} numpy's: "
                f"{'ok' if check.ok else 'FAILED'}"
            )


def plot(report: Report, path: Path) -> None:
    from xfuse.tools.cli import import_pyplot

    plt = import_pyplot()
    labels = [f"{v.dtype}\n{'fused' if v.fused else 'unfused'}" for v in report.variants]
    positions = np.arange(len(labels))
    figure, axes = plt.subplots(figsize=(8, 4))
    for offset, (name, values) in enumerate(
        (
            ("model", [v.predicted_s for v in report.variants]),
            ("calibrated", [v.calibrated_s or 0 for v in report.variants]),
            ("measured", [v.measured_s or 0 for v in report.variants]),
        )
    ):
        axes.bar(positions + (offset - 1) * 0.27, np.array(values) * 1e6, 0.27, label=name)
    axes.set_xticks(positions, labels)
    axes.set_ylabel("time (us)")
    axes.set_title(f"GELU + bias + residual, {report.shape}, {report.gpu or 'dry run'}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)


def measure_all(gpu: Gpu | None, report: Report, args: argparse.Namespace) -> None:
    """Fill `report`: the ceilings, each variant, PyTorch and the f64 math (predictions and
    compiles only without a GPU)."""
    if gpu is not None:
        report.gpu = gpu.name
        report.copy_bandwidth = gpu.copy_bandwidth(1 << 30, args.repeat)
        report.launch_s = gpu.launch_time(args.arch)
    for dtype in DTYPES:
        fused, unfused = predict(dtype, args)
        for cost in (fused, unfused):
            report.variants.append(run_variant(gpu, report, dtype, cost is fused, cost, args))
    if gpu is not None:
        time_torch(gpu, report, args)
    report.math = [check_math(gpu, check, args.arch) for check in F64_MATH]


@option_type
def device_name(text: str) -> str:
    """`--device`: a GPU of the cost model (`xfuse.analysis.hardware.device`), by name."""
    device(text)
    return text


def layer_shape(text: str) -> tuple[int, ...]:
    """`--shape`: two dims, the program's [t, d] (it compiles x, b and r as `[t, d]`: a 1-d
    shape failed in the launch plan, a 3-d one covered 2 of its dims)."""
    shape = parse_shape(text)
    if len(shape) != 2:
        raise ValueError(f"expected two dims, tokens x width (4096x14336), got {text!r}")
    if 0 in shape:  # (the check's max over no elements was numpy's ValueError)
        raise ValueError(f"expected sizes of at least 1, got {text!r}")
    return shape


def main(argv: list[str] | None = None) -> Report:
    parser = script_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        type=device_name,
        default="h200",
        help=f"the cost model's device: {', '.join(DEVICE_NAMES)}",
    )
    parser.add_argument(
        "--shape",
        type=option_type(layer_shape),
        default=(4096, 14336),
        help="tokens x width, the [t, d] of x, b and r: 4096x14336",
    )
    parser.add_argument("--repeat", type=positive_int, default=20)
    parser.add_argument(
        "--arch", default="sm_90", choices=ARCHES, help="sm_90 (H100, H200) or sm_80 (A100)"
    )
    parser.add_argument(
        "--json",
        type=json_file,
        help="write the results as JSON ('-': stdout, the report to stderr)",
    )
    parser.add_argument("--plot", type=plot_file, help="write a bar chart (FILE.png if no suffix)")
    parser.add_argument("--dry-run", action="store_true", help="compile and predict only")
    args = parser.parse_args(argv)
    report = Report(args.device, args.shape)
    try:
        gpu = None if args.dry_run else Gpu()
    except xfuse.CudaUnavailableError as error:
        parser.exit(2, f"gpu_validate: {error}\n(--dry-run compiles and predicts without a GPU)\n")
    try:
        measure_all(gpu, report, args)
    # A failing driver call, or PTX this GPU or driver cannot load: a line, not a traceback.
    except (xfuse.CudaError, xfuse.CudaUnavailableError) as error:
        parser.exit(1, f"gpu_validate: {error}\n")
    # With `--json -` the JSON alone goes to stdout, the report to stderr.
    print_report(report, sys.stderr if str(args.json) == "-" else sys.stdout)
    if args.json is not None:
        text = json.dumps(report, default=lambda o: o.__dict__, indent=1)
        if str(args.json) == "-":
            sys.stdout.write(text + "\n")
        else:
            args.json.write_text(text)
    if args.plot is not None:
        plot(report, args.plot)
    return report


if __name__ == "__main__":
    run_script(lambda: 1 if main().failed() else 0)  # (a wrong result fails the run)
