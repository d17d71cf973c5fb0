"""What a program of `ew.kernel`s would cost on a GPU: bytes moved, FLOPs, launches, roofline time.

The model, per kernel (tensor form or buffer form alike):
- traffic: every distinct tensor the kernel reads is read once in full and every tensor it writes
  is written once in full (an elementwise kernel streams; nothing is re-read from HBM). A tensor's
  bytes are its own elements times the storage dtype's size, so a broadcast operand (a `[d]` bias
  over `[t, d]`) costs its real bytes. Constants are folded into the code: no traffic. A buffer
  read and written in place counts once as a read and once as a write. A kernel over an empty
  iteration space (a 0 dim) moves nothing, not even a broadcast operand of its own size.
- work: FLOPs per element from `FLOPS_PER_SCALAR_OP` over the kernel's region, times the elements
  of its iteration space.
- time = max(bytes / bandwidth, FLOPs / peak) + launch overhead; the larger term names the bound
  ("memory" or "compute"; "launch" when the overhead exceeds both). The peak is the CUDA-core one
  (`Device.elementwise_peak`, see `hardware`): FP64 for an op on f64 operands, FP32 for any
  other; where `CostOptions.dtype` prices every tensor in one dtype, every op computes in it.

Cache-aware option (`l2=True`): kernels run in program order against an LRU model of L2 holding
`Device.l2_bytes`. A read of a tensor that an earlier kernel wrote or read, and that, with every
tensor touched after it, still fits in the L2 (least recently used first out, whole tensors), is
served from L2; anything else comes from HBM (the function's inputs start cold). Writes always
cost HBM bytes: L2 is write-back, but the GPU does not know a temporary is dead, so its dirty lines
reach HBM eventually. All traffic passes through L2, so memory time = max(HBM bytes / HBM
bandwidth, all bytes / L2 bandwidth). A tensor larger than the L2 never stays resident (at the
lecture's shape every tensor is 117 MB, so `l2=True` changes nothing there; it matters for small,
decode-sized tensors).

Shapes: `CostOptions.shape` is the iteration space of the program's largest tensors; it binds the
dynamic (`?`) dims of each tensor type, aligned from the right as numpy broadcasting aligns them,
and static dims stay as typed. When the program's tensors have lower rank than the shape (the
frontend's default flat `[?]` tensors), the shape's leading dims fold into one: 4096x14336 over a
`tensor<?xf32>` is 58,720,256 elements.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Float64Type,
    MemRefType,
    ModuleOp,
    ShapedType,
    TensorType,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from xfuse.analysis.hardware import DEFAULT_LAUNCH_US, Device, device
from xfuse.dialects import ew
from xfuse.dialects.dtypes import dtype_name, dtype_of, itemsize

FLOPS_PER_SCALAR_OP: dict[str, int] = {
    # One FLOP each: a single FP32 instruction on the CUDA cores (divide counted as one, as the
    # lecture does; fast-math lowers it to a reciprocal and a multiply).
    "arith.addf": 1,
    "arith.subf": 1,
    "arith.mulf": 1,
    "arith.divf": 1,
    "arith.negf": 1,
    "arith.maximumf": 1,
    "arith.minimumf": 1,
    "arith.maxnumf": 1,
    "arith.minnumf": 1,
    "arith.cmpf": 1,
    "math.absf": 1,
    "math.floor": 1,  # FRND (cvt.rmi) and its siblings
    "math.ceil": 1,
    "math.trunc": 1,
    "math.roundeven": 1,
    "math.fma": 2,
    # Transcendentals: instructions on the GPU's fast path (MUFU = special-function unit).
    "math.tanh": 1,  # MUFU.TANH (tanh.approx.f32, sm_75 and later)
    "math.sqrt": 1,  # MUFU.SQRT
    "math.rsqrt": 1,  # MUFU.RSQ
    "math.exp2": 1,  # MUFU.EX2
    "math.log2": 1,  # MUFU.LG2
    "math.exp": 2,  # a multiply by log2(e), then MUFU.EX2
    "math.log": 2,  # MUFU.LG2, then a multiply by ln(2)
    "math.log1p": 3,  # an add, MUFU.LG2, then a multiply by ln(2)
    "math.powf": 3,  # x**y = exp2(y * log2(x))
    "math.erf": 10,  # no hardware erf: CUDA's erff is a polynomial of about ten FMAs (estimate)
    # libdevice's functions (no hardware instruction), estimates: a reduction of the argument
    # and a polynomial, or the exp and log they are built on.
    "math.sin": 15,
    "math.cos": 15,
    "math.tan": 20,
    "math.asin": 15,
    "math.acos": 15,
    "math.atan": 15,
    "math.atan2": 20,
    "math.sinh": 8,  # (e^x - e^-x) / 2 and a polynomial near 0
    "math.cosh": 6,
    "math.asinh": 10,  # log(x + sqrt(x^2 + 1)) and a polynomial near 0
    "math.acosh": 8,
    "math.atanh": 10,
    "math.expm1": 10,  # a polynomial near 0, exp beyond
    "math.log10": 2,  # MUFU.LG2, then a multiply by log10(2)
    "math.cbrt": 10,
}
"""FLOPs per element for each scalar op a kernel region may hold (the lecture: each op = 1)."""

FREE_SCALAR_OPS = frozenset(
    {"arith.constant", "arith.extf", "arith.truncf", "arith.select", "math.copysign", "ew.yield"}
)
"""Region ops that cost no FLOPs: constants, the f16/bf16 <-> f32 conversions, moves (a
select, a sign bit copied)."""


class CostModelError(Exception):
    """IR the cost model cannot price, with the op at fault (printed by the caller)."""

    def __init__(self, message: str, op: Operation | None = None):
        self.op = op
        super().__init__(message)

    def __reduce__(self) -> tuple[type[CostModelError], tuple[str]]:
        # (without its op, a node of a module that does not travel with it)
        return type(self), (str(self),)


class EpilogueError(ValueError):
    """The epilogue what-if's input is not an input of the function read by exactly one kernel
    (`epilogue_what_if`)."""


class ShapeMismatchError(CostModelError):
    """An input's static shape does not broadcast to the problem shape, or its rank exceeds the
    shape's; names the input."""

    def __init__(self, message: str, input_name: str, op: Operation | None = None):
        self.input_name = input_name
        super().__init__(message, op)

    def __reduce__(self) -> tuple[type[ShapeMismatchError], tuple[str, str]]:
        return ShapeMismatchError, (str(self), self.input_name)


@dataclass(frozen=True)
class CostOptions:
    """What to price the IR for: which GPU, which problem shape, which storage dtype."""

    device: str = "h100"
    shape: tuple[int, ...] = (4096, 14336)
    dtype: str | None = "bfloat16"
    """Storage dtype of every tensor (numpy name); None keeps each tensor's IR element type."""
    launch_us: float = DEFAULT_LAUNCH_US
    l2: bool = False

    def __post_init__(self) -> None:
        # Checked as the CLI and the ew-cost pass check theirs: a fractional dim priced a
        # fraction of a tensor, a string `l2` turned the L2 model on.
        device(self.device)  # validates the name
        if isinstance(self.shape, str | bytes) or not isinstance(self.shape, Sequence):
            raise TypeError(f"shape must be a sequence of ints, got {self.shape!r}")
        if not all(_is_integer(d) for d in self.shape):
            raise TypeError(f"shape dims must be ints, got {self.shape!r}")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if any(d < 0 for d in self.shape):  # 0 is an empty iteration space, as arrays allow
            raise ValueError(f"shape dims must be >= 0, got {self.shape}")
        if exceeds_int64(self.shape):  # (two --input-shapes broadcast to 2**64 were priced)
            raise ValueError(
                f"shape {format_shape(self.shape)}: more elements than a 64-bit index can count"
            )
        if self.dtype is not None:
            object.__setattr__(self, "dtype", dtype_name(self.dtype))
        if isinstance(self.launch_us, bool) or not isinstance(self.launch_us, numbers.Real):
            raise TypeError(f"launch_us must be a number, got {self.launch_us!r}")
        if not (math.isfinite(self.launch_us) and self.launch_us >= 0):
            raise ValueError(
                f"launch overhead must be a finite number of us >= 0, got {self.launch_us}"
            )
        # (+ 0.0: a -0.0 launch was "launch -0 us")
        object.__setattr__(self, "launch_us", float(self.launch_us) + 0.0)
        if not isinstance(self.l2, bool | np.bool_):
            raise TypeError(f"l2 must be True or False, got {self.l2!r}")
        object.__setattr__(self, "l2", bool(self.l2))

    @property
    def hardware(self) -> Device:
        return device(self.device)


def _is_integer(value: object) -> bool:
    """An int or numpy integer; no bool (True is no dim), nor 3.0."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


KERNEL_LOWERINGS = "ew-kernel-to-loops, ew-to-linalg, ew-to-nvvm"
"""The passes that lower ew.kernel ops, after which the cost model has nothing to price (its
errors named ew-kernel-to-loops alone, after ew-to-linalg too)."""


def exceeds_int64(shape: Sequence[int]) -> bool:
    """Whether `shape` has more elements, or a dim, than a 64-bit index counts (a 0 beside a
    dim too large makes the product fit)."""
    largest = np.iinfo(np.int64).max
    return math.prod(shape) > largest or any(d > largest for d in shape)


def parse_shape(text: str | int) -> tuple[int, ...]:
    """`"4096x14336"` (or `4096`) -> `(4096, 14336)`; raises ValueError naming the bad text."""
    parts = str(text).lower().replace(",", "x").split("x")
    if not all(p.strip().isdecimal() for p in parts):  # not "²": int() refuses it
        raise ValueError(f"bad shape {text!r}: expected sizes >= 0 joined by 'x', like 4096x14336")
    shape = tuple(int(p) for p in parts)
    if exceeds_int64(shape):
        raise ValueError(f"bad shape {text!r}: more elements than a 64-bit index can count")
    return shape


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorAccess:
    """One tensor a kernel reads or writes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    from_l2: bool = False
    """A read served by L2 under the cache-aware model (writes and `l2=False` reads: False)."""


@dataclass(frozen=True)
class KernelCost:
    index: int
    ops: tuple[str, ...]
    """The region's ops that do arithmetic, by name (`addf`, `tanh`, ...), in order."""
    elements: int
    reads: tuple[TensorAccess, ...]
    writes: tuple[TensorAccess, ...]
    flops_per_element: int
    flops: int
    f64_flops: int
    """Of `flops`, those computed in f64 (at the FP64 peak)."""
    read_bytes: int
    write_bytes: int
    bytes: int
    hbm_bytes: int
    intensity: float
    """FLOPs per byte moved (all bytes, whichever level serves them)."""
    memory_time_s: float
    compute_time_s: float
    launch_time_s: float
    time_s: float
    bound: str

    @property
    def tensor_accesses(self) -> int:
        return len(self.reads) + len(self.writes)


@dataclass(frozen=True)
class CostTotals:
    kernels: int
    tensor_accesses: int
    """Whole-tensor reads plus writes over all kernels (the lecture's "28 tensors")."""
    read_bytes: int
    write_bytes: int
    bytes: int
    hbm_bytes: int
    flops: int
    intensity: float
    memory_time_s: float
    compute_time_s: float
    roofline_time_s: float
    """Each kernel's max(memory, compute), summed: `time_s` less the launches (not the max of
    the two sums above, where some kernels are compute-bound and others memory-bound)."""
    launch_time_s: float
    time_s: float


@dataclass(frozen=True)
class FunctionCost:
    function: str
    options: CostOptions
    inputs: tuple[str, ...]
    """The function's inputs by name (a bufferized function's output buffers are none)."""
    kernels: tuple[KernelCost, ...]
    totals: CostTotals

    @property
    def compute_dtype(self) -> str:
        """The precision of the peak its kernels are mostly priced at: "float64" where most
        FLOPs are on f64 operands (or, with none, every tensor is f64), else "float32" (f16,
        bf16 and f32 compute in f32). The output's dtype named it (an f64 program with an f32
        result quoted f32's peak and ridge for kernels priced at f64's), then f64 only where
        every FLOP was (nine f64 `sin`s and one f32 add: f32's ridge, "memory-bound", for a
        program priced compute-bound)."""
        flops = sum(kernel.flops for kernel in self.kernels)
        if flops:
            f64_flops = sum(kernel.f64_flops for kernel in self.kernels)
            return "float64" if 2 * f64_flops > flops else "float32"
        accesses = [a for kernel in self.kernels for a in (*kernel.reads, *kernel.writes)]
        every_f64 = accesses and all(access.dtype == "float64" for access in accesses)
        return "float64" if every_f64 else "float32"


@dataclass(frozen=True)
class Comparison:
    """Unfused against fused: how much less traffic, time and launches fusion gives."""

    traffic_ratio: float
    time_ratio: float
    bytes_saved: int
    time_saved_s: float
    kernels_saved: int


@dataclass(frozen=True)
class EpilogueWhatIf:
    """An input produced by a matmul, with the kernel that reads it fused into its epilogue.

    Separately, the matmul writes the input to HBM and the kernel reads it back; in the epilogue
    the value stays in registers: both transfers and the kernel's launch disappear.
    """

    input: str
    kernel: int
    input_bytes: int
    separate_bytes: int
    """The matmul's write of the input plus all of the function's elementwise traffic."""
    epilogue_bytes: int
    """The elementwise traffic left: everything but the input's read."""
    separate_time_s: float
    epilogue_time_s: float
    launches_saved: int


@dataclass(frozen=True)
class ProgramCost:
    """A `.ew` program priced fused (`ew-fuse`) and unfused (`ew-fuse{mode=none}`)."""

    fused: FunctionCost
    unfused: FunctionCost
    comparison: Comparison
    hbm_only: tuple[FunctionCost, FunctionCost] | None = None
    """With `l2=True`: (fused, unfused) under the plain HBM model, for side-by-side reports."""
    epilogue: EpilogueWhatIf | None = None


# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------


class _Names:
    """Readable names for SSA values, each its own: a function argument's input name
    (`ew.input_name`: `w_1`, whose hint xDSL keeps as `w`), else its name hint, made distinct
    (xDSL drops a hint's `_<n>`: `x_1` and a reassigned `t` were hinted `x` and `t`, an input's
    name and the other `t`'s) as `<hint>_<k>`, else `arg<i>`, else `t<n>` in order of use, past
    every other name (`taken`: an input `t0` read as one with a temporary `t0`)."""

    def __init__(self, function: func.FuncOp) -> None:
        self.names: dict[SSAValue, str] = {}
        self.unnamed = 0
        self.used: set[str] = set()
        """The names given so far, the inputs' from the start."""
        for argument in function.args:  # (`%x`, `%x_1` of an .mlir's: both hinted `x`)
            self.names[argument] = self._distinct(ew.input_name(argument) or f"arg{argument.index}")
        self.taken = self.used | {
            r.name_hint for op in function.walk() for r in op.results if r.name_hint
        }
        """Names given or to be given: also the hints of values named later (`t3 -> t3` of a
        program's `t3`), which a `t<n>` skips."""

    def given(self, value: SSAValue, name: str) -> None:
        """Name `value` `name` unless it has a name (a value returned twice: its first)."""
        if value not in self.names:
            self.names[value] = name
            self.used.add(name)
            self.taken.add(name)

    def _distinct(self, base: str) -> str:
        """`base`, or `base_<k>` past the names given, now given."""
        name, count = base, 0
        while name in self.used:
            count += 1
            name = f"{base}_{count}"
        self.used.add(name)
        return name

    def __call__(self, value: SSAValue) -> str:
        if value not in self.names:
            if isinstance(value, BlockArgument):  # (another block's: a kernel region's)
                name = self._distinct(ew.input_name(value) or f"arg{value.index}")
            elif value.name_hint:
                name = self._distinct(value.name_hint)
            else:
                while f"t{self.unnamed}" in self.taken:
                    self.unnamed += 1
                name = f"t{self.unnamed}"
                self.unnamed += 1
            self.names[value] = name
            self.used.add(name)
            self.taken.add(name)
        return self.names[value]


_UNPRICED_MEMREF_OPS = frozenset(
    ("memref.copy", "memref.load", "memref.store", "memref.dma_start", "memref.atomic_rmw")
)
"""memref ops that read or write elements (a `memref.copy`'s bytes were priced as none)."""


def _ops_outside_kernels(op: Operation) -> Iterator[Operation]:
    """The ops nested in `op` (a function), deeper ones too, but for those inside an
    `ew.kernel`'s body."""
    for region in op.regions:
        for block in region.blocks:
            for nested in block.ops:
                yield nested
                if not isinstance(nested, ew.KernelOp):
                    yield from _ops_outside_kernels(nested)


def _is_array(type_: Attribute) -> bool:
    """Whether a value of `type_` is one of the program's arrays: a float tensor or memref, not
    `ew-workspace`'s bytes (`memref<?xi8>`, which made a [t, 1] program's header 4096x14336)."""
    return isinstance(type_, TensorType | MemRefType) and isinstance(
        type_.element_type, ew.FLOAT_ELEMENT_TYPES
    )


def _array_shapes(function: func.FuncOp) -> list[tuple[int, ...]]:
    """The shapes of the function's arrays (`_is_array`): its arguments and every result."""
    values = [*function.args, *(r for op in function.walk() for r in op.results)]
    return [v.type.get_shape() for v in values if _is_array(v.type)]


def fitted_problem_shape(function: func.FuncOp, shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` (a default problem, the lecture's [t, d]) as `function`'s: as it is for a
    function of at most its dims (the cost model folds it over flat tensors), after 1s for one
    of more (RoPE's [t, h, d]: 1 x 4096 x 14336, the same elements), with each dim the program
    fixes (`input x[4, 8];`) at its size (1 where every dim there is a static 1), the axes of
    one dim name at one size (`ew.tie_named_dims`), and () for a 0-d program (both were
    errors: the shape has 2 dims, or does not broadcast to the program's)."""
    shapes = _array_shapes(function)
    rank = max(map(len, shapes), default=0)
    if rank == 0:  # one element, as the cost model prices 0-d tensors (it was called 58.7M)
        return ()
    fixed = ew.fixed_dims(shapes)
    if rank <= len(shape) and not fixed:
        return ew.tie_named_dims(function.args, shape, fixed)
    dims = (1,) * (rank - len(shape)) + shape if rank > len(shape) else ew.fold_shape(shape, rank)
    sized = tuple(fixed.get(axis, size) for axis, size in enumerate(dims))
    return ew.tie_named_dims(function.args, sized, fixed)


def _problem_shape(
    shape: tuple[int, ...], rank: int, function: func.FuncOp, names: _Names
) -> tuple[int, ...]:
    """The shape folded (leading dims multiplied) to the function's largest tensor rank."""
    if len(shape) < rank:
        message = (
            f"shape {format_shape(shape)} has {len(shape)} dims but the function has "
            f"rank-{rank} tensors"
        )
        widest = [
            names(a)
            for a in function.args
            if _is_array(a.type) and len(ew.shape_of(a.type)) == rank
        ]
        if widest:  # named, so that a caller can tell which option gave it that rank
            raise ShapeMismatchError(f"{message} (input '{widest[0]}')", widest[0], function)
        raise CostModelError(message, function)
    return ew.fold_shape(shape, rank)


def _is_constant(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and owner.name in ("ew.constant", "arith.constant")


def _flops_per_element(kernel: ew.KernelOp, dtype: str | None) -> tuple[tuple[str, ...], int, int]:
    """The region's arithmetic ops by name, its FLOPs per element and how many of them are f64.
    With every tensor priced in `dtype` (`CostOptions.dtype`) the program is taken to compute in
    it: all ops are f64 or none. Without, those on f64 operands are (`f32(f64(x) * f64(x))` of
    an f32 `x` multiplies in f64, `f32(a) + 1` of an f64 `a` adds in f32)."""
    ops: list[str] = []
    total = f64 = 0
    for op in kernel.block.ops:
        if op.name in FREE_SCALAR_OPS:
            continue
        if op.name not in FLOPS_PER_SCALAR_OP:
            raise CostModelError(f"no FLOP count for '{ew.op_name(op)}' in an ew.kernel region", op)
        ops.append(op.name.split(".", 1)[1])
        total += FLOPS_PER_SCALAR_OP[op.name]
        in_f64 = dtype == "float64" if dtype else isinstance(op.operands[0].type, Float64Type)
        f64 += FLOPS_PER_SCALAR_OP[op.name] if in_f64 else 0
    return tuple(ops), total, f64


def _each_output(write: TensorAccess, outputs: Sequence[str | None]) -> tuple[TensorAccess, ...]:
    """`write` once for each of the outputs it is (a value returned as two outputs is written to
    two arrays, each under its output's name where known), else once as it is."""
    if len(outputs) < 2:
        return (write,)
    return tuple(replace(write, name=name or write.name) for name in outputs)


def _unique(values: Iterable[SSAValue]) -> list[SSAValue]:
    return list(dict.fromkeys(values))


class _L2:
    """LRU residency of tensors (keyed by SSA value) in an L2 of `capacity` bytes."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.resident: OrderedDict[SSAValue, int] = OrderedDict()
        self.resident_bytes = 0
        """The sizes in `resident` summed, kept as they change: summed anew at every kernel,
        pricing a program of thousands of small kernels took time growing with its square (a
        sum of 10^4 terms over 4,096 elements: 35 of `xfuse bench`'s 63 s in a profile)."""

    def touch(self, values: Sequence[tuple[SSAValue, int]]) -> None:
        for value, size in values:
            self.resident_bytes += size - self.resident.pop(value, 0)
            self.resident[value] = size
        while self.resident_bytes > self.capacity:
            self.resident_bytes -= self.resident.popitem(last=False)[1]


def _memory_time(read_bytes: int, l2_bytes: int, write_bytes: int, options: CostOptions) -> float:
    """Seconds one kernel's traffic takes."""
    hw = options.hardware
    moved = read_bytes + write_bytes
    memory = (moved - l2_bytes) / hw.hbm_bandwidth
    if options.l2:
        memory = max(memory, moved / hw.l2_bandwidth)
    return memory


def _compute_time(flops: int, f64_flops: int, hw: Device) -> float:
    """Seconds one kernel's FLOPs take: the f64 ones at the FP64 peak, the others at the FP32 one
    (f16/bf16/f32 all compute in f32, `Device.elementwise_peak`)."""
    return (flops - f64_flops) / hw.elementwise_peak("float32") + f64_flops / hw.elementwise_peak(
        "float64"
    )


def _bound(memory: float, compute: float, launch: float) -> str:
    if launch > max(memory, compute):
        return "launch"
    return "compute" if compute > memory else "memory"


def _problem_text(problem: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """The problem shape as a message names it: with the shape given where that was folded
    (`problem shape 32` alone, for `--shape 4x8` over a 1-d program, read as a mistake)."""
    if problem == shape:
        return format_shape(problem)
    return (
        f"{format_shape(problem)} ({format_shape(shape)} folded to the function's rank "
        f"{len(problem)})"
    )


def _check_broadcasts(
    name: str,
    argument: SSAValue,
    problem: tuple[int, ...],
    shape: tuple[int, ...],
    function: Operation,
    role: str,
) -> None:
    """A static dim of an argument (an input, or a bufferized function's output: `role`) must
    be 1 or the problem's size on its (right-aligned) axis (`problem`, `shape` folded)."""
    dims = ew.shape_of(argument.type)
    offset = len(problem) - len(dims)
    for axis, size in enumerate(dims):
        if size not in (DYNAMIC_INDEX, 1, problem[offset + axis]):
            raise ShapeMismatchError(
                f"{role} '{name}' of shape {ew.format_shape(dims)} does not broadcast to the "
                f"problem shape {_problem_text(problem, shape)}: its dim {axis} is {size}, the "
                f"problem's {problem[offset + axis]}",
                name,
                function,
            )


def _check_spanned(
    function: func.FuncOp,
    kernels: Sequence[ew.KernelOp],
    problem: tuple[int, ...],
    shape: tuple[int, ...],
) -> None:
    """Each axis of the problem that is not 1 is an axis of some tensor of the function (a `?`
    or its size there): else the kernels iterate over fewer elements than `shape` says (`input
    x[1, 1]` or `s[]` was priced as one element under a header of 4096x14336)."""
    values = [*function.args, *(v for k in kernels for v in (*k.inputs, *k.destinations()))]
    shapes = [ew.shape_of(v.type) for v in values if _is_array(v.type)]
    for axis, size in enumerate(problem):
        spanned = any(
            len(dims) >= len(problem) - axis and dims[axis - len(problem)] != 1 for dims in shapes
        )
        if size != 1 and not spanned:
            raise ShapeMismatchError(
                f"shape {format_shape(shape)} has {math.prod(shape):,} elements, but no tensor "
                f"of the function spans its dim {axis} (of the function's rank "
                f"{len(problem)}): every one is 1 there or lacks it",
                "",
                function,
            )


def check_given_shape(function: func.FuncOp, shape: tuple[int, ...]) -> None:
    """A shape given for `function` (`--shape`, `ew-cost{shape=...}`) of other than one element
    where its tensors are 0-d is a ShapeMismatchError: the model prices them as one element
    (`fitted_problem_shape`, what a default shape becomes) under the shape given. A function of
    no arrays at all (nothing to price, as a module's other functions may be) takes any."""
    if not _array_shapes(function):
        return  # (it refused the whole module: "the function's tensors are 0-d")
    if fitted_problem_shape(function, shape) == () and math.prod(shape) != 1:
        raise ShapeMismatchError(
            f"shape {format_shape(shape)} has {math.prod(shape):,} elements, but the function's "
            "tensors are 0-d (one element)",
            "",
            function,
        )


def _check_named_dims(
    function: func.FuncOp, problem: tuple[int, ...], shape: tuple[int, ...], names: _Names
) -> None:
    """Every dim of one name (`input x[t, d], b[t];`: `t`) is one size at the problem shape, as
    a call requires (the model priced a `t` of 4096 in `x` and 14336 in `b`, which the kernel
    refuses)."""
    sizes: dict[str, tuple[int, str]] = {}
    for argument in function.args:
        dims = ew.declared_dims(argument)
        if dims is None or not _is_array(argument.type):
            continue
        for dim, size in zip(dims, ew.bind_shape(argument.type, problem), strict=True):
            if dim == "?" or dim.isdecimal():
                continue
            first_size, first_input = sizes.setdefault(dim, (size, names(argument)))
            if size != first_size:
                raise ShapeMismatchError(
                    f"dim '{dim}' is {first_size} in input '{first_input}' but {size} in input "
                    f"'{names(argument)}' at the problem shape {_problem_text(problem, shape)}",
                    names(argument),
                    function,
                )


def _output_buffers(kernels: Sequence[ew.KernelOp]) -> set[SSAValue]:
    """The buffers a kernel writes before any kernel reads them: a bufferized function's
    outputs (and temporaries), not an input it updates in place (`ins(%y) outs(%y)`: an
    input of its caller's values, whose epilogue what-if was refused)."""
    buffers: set[SSAValue] = set()
    seen: set[SSAValue] = set()
    for kernel in kernels:
        reads = set(kernel.inputs)
        buffers |= {v for v in kernel.destinations() if v not in seen and v not in reads}
        seen |= reads | set(kernel.destinations())
    return buffers


def analyse_function(
    function: func.FuncOp, options: CostOptions, output_names: Sequence[str] | None = None
) -> FunctionCost:
    """The cost of every `ew.kernel` in `function`, in program order, and their totals.

    `output_names` names the values `function` returns (a program's outputs, where a copy of an
    input has no name of its own in the IR); without them values go by their name hints."""
    kernels = [op for op in function.walk() if isinstance(op, ew.KernelOp)]
    for op in function.walk():
        if isinstance(op, ew.ElementwiseOp | ew.ConvertOp):
            raise CostModelError(
                f"'{op.name}' is not inside an ew.kernel: run ew-fuse before the cost model", op
            )
    for op in _ops_outside_kernels(function):  # (nested ones too: a copy in an alloca_scope)
        if isinstance(op, func.CallOp):  # (its kernels ran, and were priced as 0)
            raise CostModelError(
                f"'func.call' of @{op.callee.root_reference.data}: the cost model prices the "
                "ew.kernel ops of a function, not those of the functions it calls",
                op,
            )
        if op.name in _UNPRICED_MEMREF_OPS:
            raise CostModelError(
                f"'{op.name}' moves data the cost model does not price: it prices the "
                "ew.kernel ops of a bufferized function (its buffers made by memref.alloc "
                "and memref.view)",
                op,
            )
        # (arith on tensors or vectors, of any element type, was priced as nothing)
        shaped = any(isinstance(v.type, ShapedType) for v in (*op.operands, *op.results))
        if op.dialect_name() not in ("ew", "func", "memref", "arith") or (
            op.dialect_name() == "arith" and shaped
        ):
            raise CostModelError(
                f"'{op.name}' is not an ew.kernel: the cost model prices ew.kernel ops, "
                f"run it before they are lowered ({KERNEL_LOWERINGS})",
                op,
            )
    ranks = [
        len(ew.shape_of(v.type))
        for v in (*function.args, *(v for k in kernels for v in (*k.inputs, *k.destinations())))
        if _is_array(v.type)
    ]
    names = _Names(function)
    returned = function.get_return_op()
    if output_names is not None and returned is not None:
        for value, name in zip(returned.arguments, output_names, strict=True):
            names.given(value, name)
    returned_as: dict[SSAValue, list[str | None]] = {}
    """Each returned value's outputs by name (None: unnamed): each is an array of its own,
    written in full (on tensors the kernel has one result for a value returned twice)."""
    if returned is not None:
        spelled = output_names or [None] * len(returned.arguments)
        for value, name in zip(returned.arguments, spelled, strict=True):
            returned_as.setdefault(value, []).append(name)
    problem = _problem_shape(options.shape, max(ranks, default=0), function, names)
    buffers = _output_buffers(kernels)
    for argument in function.args:
        name = names(argument)
        if _is_array(argument.type):
            role = "output" if argument in buffers else "input"  # (a bufferized one's buffer)
            _check_broadcasts(name, argument, problem, options.shape, function, role)
    _check_spanned(function, kernels, problem, options.shape)
    _check_named_dims(function, problem, options.shape, names)
    l2 = _L2(options.hardware.l2_bytes)

    def access(value: SSAValue, elements: int, from_l2: bool = False) -> TensorAccess:
        """`value` moved by a kernel of `elements` iterations: none if empty (a [d] bias is not
        read for 0 rows)."""
        shape = ew.bind_shape(value.type, problem)
        dtype = options.dtype or dtype_of(ew.element_type(value.type))
        size = math.prod(shape) * itemsize(dtype) if elements else 0
        return TensorAccess(names(value), shape, dtype, size, from_l2)

    costs: list[KernelCost] = []
    for index, kernel in enumerate(kernels):
        elements = math.prod(ew.bind_shape(kernel.destinations()[0].type, problem))
        read_values = [v for v in _unique(kernel.inputs) if not _is_constant(v)]
        write_values = _unique(kernel.destinations())
        resident = l2.resident if elements else {}  # (an empty kernel reads nothing at all)
        reads = tuple(access(v, elements, options.l2 and v in resident) for v in read_values)
        writes = tuple(access(v, elements) for v in write_values)
        accessed = zip((*read_values, *write_values), (*reads, *writes), strict=True)
        if elements:  # (a kernel over no element reads nothing into L2: it had made the next
            # kernel's first read of an operand an L2 hit)
            l2.touch([(v, a.bytes) for v, a in accessed])
        writes = tuple(
            each
            for value, write in zip(write_values, writes, strict=True)
            for each in _each_output(write, returned_as.get(value, ()))
        )
        ops, flops_per_element, f64_per_element = _flops_per_element(kernel, options.dtype)
        read_bytes = sum(a.bytes for a in reads)
        write_bytes = sum(a.bytes for a in writes)
        l2_bytes = sum(a.bytes for a in reads if a.from_l2)
        flops = flops_per_element * elements
        f64_flops = f64_per_element * elements
        memory = _memory_time(read_bytes, l2_bytes, write_bytes, options)
        compute = _compute_time(flops, f64_flops, options.hardware)
        launch = options.launch_us * 1e-6
        moved = read_bytes + write_bytes
        costs.append(
            KernelCost(
                index=index,
                ops=ops,
                elements=elements,
                reads=reads,
                writes=writes,
                flops_per_element=flops_per_element,
                flops=flops,
                f64_flops=f64_flops,
                read_bytes=read_bytes,
                write_bytes=write_bytes,
                bytes=moved,
                hbm_bytes=moved - l2_bytes,
                intensity=flops / moved if moved else 0.0,
                memory_time_s=memory,
                compute_time_s=compute,
                launch_time_s=launch,
                time_s=max(memory, compute) + launch,
                bound=_bound(memory, compute, launch),
            )
        )
    return FunctionCost(
        function=function.sym_name.data,
        options=options,
        inputs=tuple(names(a) for a in function.args if a not in buffers and _is_array(a.type)),
        kernels=tuple(costs),
        totals=_totals(costs),
    )


def _totals(kernels: Sequence[KernelCost]) -> CostTotals:
    moved = sum(k.bytes for k in kernels)
    flops = sum(k.flops for k in kernels)
    return CostTotals(
        kernels=len(kernels),
        tensor_accesses=sum(k.tensor_accesses for k in kernels),
        read_bytes=sum(k.read_bytes for k in kernels),
        write_bytes=sum(k.write_bytes for k in kernels),
        bytes=moved,
        hbm_bytes=sum(k.hbm_bytes for k in kernels),
        flops=flops,
        intensity=flops / moved if moved else 0.0,
        memory_time_s=sum(k.memory_time_s for k in kernels),
        compute_time_s=sum(k.compute_time_s for k in kernels),
        roofline_time_s=sum(max(k.memory_time_s, k.compute_time_s) for k in kernels),
        launch_time_s=sum(k.launch_time_s for k in kernels),
        time_s=sum(k.time_s for k in kernels),
    )


def analyse_module(
    module: ModuleOp,
    options: CostOptions | Callable[[func.FuncOp], CostOptions],
    exclude: Collection[func.FuncOp] = (),
) -> list[FunctionCost]:
    """`analyse_function` for every `func.func` with a body in `module` but those in `exclude`
    (functions that launch nothing, like `ew-workspace`'s size functions), with `options` or
    those `options` gives for the function (`ew-cost`'s fitted shapes). A function lowered to
    the `llvm` dialect is an error (it was skipped: no report, as if the module were empty)."""
    for op in module.walk():
        if isinstance(op, llvm.FuncOp) and op.body.blocks:
            raise CostModelError(
                f"'{op.name}' @{op.sym_name.data} is lowered to LLVM: the cost model prices "
                f"ew.kernel ops, run it before they are lowered ({KERNEL_LOWERINGS})",
                op,
            )
    return [
        analyse_function(op, options if isinstance(options, CostOptions) else options(op))
        for op in module.walk()
        if isinstance(op, func.FuncOp) and not op.is_declaration and op not in exclude
    ]


def _ratio(unfused: float, fused: float) -> float:
    """unfused / fused: inf where fusion leaves nothing of something, 1 where neither has any (an
    empty shape moves no bytes; with no launch overhead it takes no time)."""
    if fused:
        return unfused / fused
    return math.inf if unfused else 1.0


def compare(fused: FunctionCost, unfused: FunctionCost) -> Comparison:
    f, u = fused.totals, unfused.totals
    return Comparison(
        traffic_ratio=_ratio(u.bytes, f.bytes),
        time_ratio=_ratio(u.time_s, f.time_s),
        bytes_saved=u.bytes - f.bytes,
        time_saved_s=u.time_s - f.time_s,
        kernels_saved=u.kernels - f.kernels,
    )


def epilogue_what_if(cost: FunctionCost, input_name: str) -> EpilogueWhatIf:
    """What is left if `input_name` comes from a matmul whose epilogue runs its reading kernel."""
    if input_name not in cost.inputs:
        inputs = f"inputs: {', '.join(cost.inputs)}" if cost.inputs else "it has none"
        raise EpilogueError(
            f"epilogue input {input_name!r} is not an input of @{cost.function} ({inputs})"
        )
    readers = [k for k in cost.kernels if any(a.name == input_name for a in k.reads)]
    if len(readers) != 1:
        raise EpilogueError(
            f"epilogue input {input_name!r} is read by {len(readers)} kernels; exactly one "
            f"kernel can run in the matmul's epilogue"
        )
    (kernel,) = readers
    (read,) = [a for a in kernel.reads if a.name == input_name]
    left = [a for a in kernel.reads if a.name != input_name]
    memory = _memory_time(
        sum(a.bytes for a in left),
        sum(a.bytes for a in left if a.from_l2),
        kernel.write_bytes,
        cost.options,
    )
    totals = cost.totals
    return EpilogueWhatIf(
        input=input_name,
        kernel=kernel.index,
        input_bytes=read.bytes,
        separate_bytes=totals.bytes + read.bytes,
        epilogue_bytes=totals.bytes - read.bytes,
        separate_time_s=totals.time_s + read.bytes / cost.options.hardware.hbm_bandwidth,
        epilogue_time_s=totals.time_s - kernel.time_s + max(memory, kernel.compute_time_s),
        launches_saved=1,
    )
