"""`xfuse.compile(..., target="cuda")`: the GPU pipeline and a kernel that launches its PTX.

    frontend -> ew-optimize -> ew-fuse -> ew-bufferize -> ew-to-nvvm -> ew-expand-math
             -> ew-to-llvm -> convert_module + NVPTX O3 -> PTX (`xfuse.codegen.ptx`)

Compiling needs no GPU, and is cached like the CPU's: in memory, and on disk (the PTX, NVVM IR
and launch sequence, keyed by the program and options with the arch: `xfuse.runtime.disk_cache`),
so a new process does not run the GPU lowering again. Calling a `CudaKernel` loads the PTX and
launches it through NVIDIA's `cuda-python` (`cuda.bindings.driver`; `pip install 'xfuse[cuda]'`),
imported on the first call: without it, or without a GPU, the call raises `CudaUnavailableError`
saying which; a driver call that fails on a working GPU (out of memory, a kernel fault) raises
`CudaError` naming the call (PTX the GPU or driver cannot load is `CudaUnavailableError`).

Arguments are numpy arrays (copied to the device, results copied back into numpy arrays) or
device arrays with `__cuda_array_interface__` (CuPy, PyTorch, Numba; JAX through DLPack into one
of those), used in place; with a device-array input, pass the outputs as device arrays in `out=`.
They are checked like the CPU kernel's (names, dtype, shape, broadcasting, aliasing); device
arrays must be C-contiguous. The launches run in order on the default stream and the call waits
for them. The grid covers the elements with 256-thread blocks, at most one wave of them: as many
per multiprocessor as the driver says fit at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`,
asked once per entry), and the grid-stride loop takes the rest. Registers decide it: a
multiprocessor of sm_80 or sm_90 has 65536, so an entry of up to 32 registers a thread fits 8
blocks (2048 threads, the most), of 33-40 (the fused GELU's, by `ptxas -v`) 6, of 41-48 5.
"""

from __future__ import annotations

import ctypes
import functools
import math
import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from xfuse.codegen.ptx import PtxModule, compile_ptx
from xfuse.runtime.arrays import (
    ArgumentError,
    ArgumentTypeError,
    Parameter,
    bind_shapes,
    check_aliasing,
    check_input,
    check_output,
    data_pointer,
    given_outputs,
    numpy_dtype,
    output_shape,
)
from xfuse.runtime.kernel import CompiledProgram, Program
from xfuse.transforms.launches import LaunchSequence

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.passes import ModulePass

BLOCK_SIZE = 256


class CudaUnavailableError(RuntimeError):
    """A CUDA kernel was called where it cannot run: no `cuda-python`, no driver or no GPU."""


class CudaError(RuntimeError):
    """A CUDA driver call failed on a GPU that runs the kernel's PTX: out of memory, a kernel
    fault (not `CudaUnavailableError`, which a caller may answer by using the CPU)."""


# ---------------------------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaFunction:
    """A compiled GPU program: its PTX and the launches one call makes."""

    ptx: PtxModule
    sequence: LaunchSequence
    inputs: tuple[Parameter, ...]
    outputs: tuple[Parameter, ...]


def gpu_program(
    bufferized: ModuleOp,
    buffer_passes: Sequence[tuple[str, ModulePass]],
    inputs: Sequence[Parameter],
    outputs: Sequence[Parameter],
    opt_level: int,
    arch: str,
) -> CudaFunction:
    """Lower a bufferized module (changed in place) to PTX; its launch sequence is read first."""
    # Here, not at the top: they import xDSL, which a disk-cache hit must not.
    from xfuse.transforms.pipeline import pipeline_context
    from xfuse.transforms.to_nvvm import launch_sequence

    sequence = launch_sequence(bufferized)
    ctx = pipeline_context()
    for _, pass_ in buffer_passes:
        pass_.apply(ctx, bufferized)
    ptx = compile_ptx(bufferized, arch, opt_level)
    return CudaFunction(ptx, sequence, tuple(inputs), tuple(outputs))


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------


class Device(Protocol):
    """What a call needs of a GPU (the CUDA driver; tests use an emulation on the CPU)."""

    multiprocessors: int

    def load(self, ptx: PtxModule) -> Any: ...
    def allocate(self, nbytes: int) -> int: ...
    def free(self, pointer: int) -> None: ...
    def copy_to_device(self, pointer: int, array: np.ndarray) -> None: ...
    def copy_to_host(self, array: np.ndarray, pointer: int) -> None: ...
    def resident_blocks(self, module: Any, entry: str, block: int) -> int:
        """How many blocks of `block` threads of `entry` one multiprocessor runs at once."""
        ...

    def launch(
        self, module: Any, entry: str, grid: int, block: int, arguments: Sequence[Any]
    ) -> None: ...
    def synchronize(self) -> None: ...


class CudaDriver:
    """The first GPU, through `cuda.bindings.driver` (its primary context)."""

    def __init__(self) -> None:
        try:
            from cuda.bindings import driver
        except ImportError as error:
            raise CudaUnavailableError(
                "running a target='cuda' kernel needs NVIDIA's cuda-python "
                f"(pip install 'xfuse[cuda]'): {error}"
            ) from None
        self._driver = driver
        self._functions: dict[tuple[int, str], Any] = {}
        self._resident_blocks: dict[tuple[int, str, int], int] = {}
        self._context: Any = None
        self._thread = threading.local()
        """Whether the context is current on a thread: a thread starts with none (a call from
        any but the first thread failed with CUDA_ERROR_INVALID_CONTEXT)."""
        try:
            self.call("cuInit", 0)
            count = self.call("cuDeviceGetCount")
        # cuda-bindings raises its own errors when libcuda itself is missing.
        except Exception as error:
            raise CudaUnavailableError(f"no usable CUDA driver: {error}") from None
        if count == 0:
            raise CudaUnavailableError("no NVIDIA GPU found (cuDeviceGetCount is 0)")
        try:
            device = self.call("cuDeviceGet", 0)
            self._context = self.call("cuDevicePrimaryCtxRetain", device)
            attribute = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
            self.multiprocessors = int(self.call("cuDeviceGetAttribute", attribute, device))
        except CudaError as error:
            raise CudaUnavailableError(f"cannot use the first GPU: {error}") from None

    def call(self, name: str, *arguments: Any) -> Any:
        """The driver function `name`'s result (CudaError naming it and the error if it fails);
        public for the calls beyond `Device`'s (benchmarks/gpu_validate.py's CUDA events). The
        context is made current on the calling thread first, once a thread."""
        if self._context is not None and not getattr(self._thread, "current", False):
            self._thread.current = True  # (set first: the call below comes through here)
            try:
                self.call("cuCtxSetCurrent", self._context)
            except BaseException:  # (the next call tries again)
                self._thread.current = False
                raise
        error, *values = getattr(self._driver, name)(*arguments)
        if error != self._driver.CUresult.CUDA_SUCCESS:
            _, error_name = self._driver.cuGetErrorName(error)
            raise CudaError(f"{name}: CUDA driver error {error_name.decode()}")
        return values[0] if len(values) == 1 else tuple(values)

    def load(self, ptx: PtxModule) -> Any:
        try:
            return self.call("cuModuleLoadData", ptx.ptx.encode() + b"\0")
        except CudaError as error:
            # A GPU older than the arch, or a driver older than the PTX ISA: not this machine's.
            raise CudaUnavailableError(
                f"this GPU or driver cannot run PTX for {ptx.arch} (PTX ISA 8.0: CUDA 12.0 "
                f"drivers and newer; an A100 needs arch='sm_80'): {error}"
            ) from None

    def allocate(self, nbytes: int) -> int:
        return int(self.call("cuMemAlloc", max(nbytes, 1)))

    def free(self, pointer: int) -> None:
        self.call("cuMemFree", pointer)

    def copy_to_device(self, pointer: int, array: np.ndarray) -> None:
        self.call("cuMemcpyHtoD", pointer, data_pointer(array), array.nbytes)

    def copy_to_host(self, array: np.ndarray, pointer: int) -> None:
        self.call("cuMemcpyDtoH", data_pointer(array), pointer, array.nbytes)

    def _function(self, module: Any, entry: str) -> Any:
        """The CUfunction of `entry` in a loaded module (looked up once)."""
        key = (int(module), entry)
        function = self._functions.get(key)
        if function is None:
            function = self.call("cuModuleGetFunction", module, entry.encode())
            self._functions[key] = function
        return function

    def resident_blocks(self, module: Any, entry: str, block: int) -> int:
        key = (int(module), entry, block)
        blocks = self._resident_blocks.get(key)
        if blocks is None:
            function = self._function(module, entry)
            blocks = int(
                self.call("cuOccupancyMaxActiveBlocksPerMultiprocessor", function, block, 0)
            )
            self._resident_blocks[key] = blocks
        return blocks

    def launch(
        self, module: Any, entry: str, grid: int, block: int, arguments: Sequence[Any]
    ) -> None:
        function = self._function(module, entry)
        pointers = (ctypes.c_void_p * len(arguments))(
            *(ctypes.addressof(argument) for argument in arguments)
        )
        self.call(
            "cuLaunchKernel", function, grid, 1, 1, block, 1, 1, 0, 0, ctypes.addressof(pointers), 0
        )

    def synchronize(self) -> None:
        self.call("cuCtxSynchronize")


@functools.cache
def cuda_device() -> CudaDriver:
    """The process's GPU, opened on first use (CudaUnavailableError where there is none)."""
    return CudaDriver()


# ---------------------------------------------------------------------------------------------
# Calling
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceArray:
    """A C-contiguous array in GPU memory (from `__cuda_array_interface__`)."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def size(self) -> int:
        """Its element count, as an ndarray's (the aliasing checks read it)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


def device_array(
    label: str, parameter: Parameter, value: Any, written: bool = False
) -> DeviceArray:
    """Check a `__cuda_array_interface__` argument's dtype and layout, and that it is writable
    where the kernel writes it (raises naming it). The interface's `data` is (pointer,
    read-only), as numpy's read-only flag; a `mask` of valid elements is refused, as numba
    refuses it (the kernel would compute on invalid ones and return no mask)."""
    interface = value.__cuda_array_interface__
    try:  # (a malformed one was numpy's TypeError, a bare KeyError, naming no argument)
        masked = interface.get("mask") is not None
        pointer, read_only = interface["data"]
        pointer = operator.index(pointer)  # (None, "16" and 1.5 were taken or failed bare)
        shape = tuple(operator.index(size) for size in interface["shape"])
        typestr = interface["typestr"]
        if not isinstance(typestr, str):  # (np.dtype(None) is float64)
            raise TypeError(f"typestr {typestr!r} is no string")
        dtype = np.dtype(typestr)
        strides = interface.get("strides")
        strides = None if strides is None else tuple(operator.index(step) for step in strides)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise ArgumentError(
            f"{label}: not a device array: its __cuda_array_interface__ is malformed ({error!r})"
        ) from None
    if masked:
        raise ArgumentError(f"{label}: a masked device array (the interface's mask) is not taken")
    if any(size < 0 for size in shape):
        raise ArgumentError(f"{label}: a device array's shape has no negative size, got {shape}")
    if written and read_only:
        raise ArgumentError(f"{label}: the array is read-only")
    if dtype != numpy_dtype(parameter.dtype):  # (a TypeError, as on the CPU)
        raise ArgumentTypeError(f"{label}: expected dtype {parameter.dtype}, got {dtype}")
    if strides is not None and strides != _contiguous_strides(shape, dtype.itemsize):
        raise ArgumentError(f"{label}: a device array must be C-contiguous, got strides {strides}")
    return DeviceArray(pointer, shape, dtype)


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.insert(0, step)
        step *= size
    return tuple(strides)


def _is_device_array(value: Any) -> bool:
    return hasattr(value, "__cuda_array_interface__")


def _shape(value: Any) -> tuple[int, ...]:
    """A call's argument's shape (a device array's, or numpy's of anything else)."""
    if _is_device_array(value):
        return tuple(int(size) for size in value.__cuda_array_interface__["shape"])
    return np.shape(value)


@dataclass(frozen=True)
class _FlatDeviceArray:
    """A C-contiguous N-d or 0-d device array as one dim, its data where it is: a flat call's
    argument (2-d torch or CuPy tensors were refused where numpy arrays of that shape ran)."""

    array: Any

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        interface = dict(self.array.__cuda_array_interface__)
        interface["shape"] = (math.prod(int(size) for size in interface["shape"]),)
        interface["strides"] = None
        return interface


def _flat_device_array(value: Any) -> Any:
    """A device array as one dim where it is C-contiguous (as it is otherwise: the checks that
    follow say what is wrong with it)."""
    interface = value.__cuda_array_interface__
    shape = tuple(int(size) for size in interface["shape"])
    strides = interface.get("strides")
    itemsize = np.dtype(interface["typestr"]).itemsize
    if (
        len(shape) == 1
        or strides is not None
        and tuple(strides) != _contiguous_strides(shape, itemsize)
    ):
        return value
    return _FlatDeviceArray(value)


def _flattened(value: Any) -> Any:
    """A `[?]` input of a flat call as one dim: a numpy array or scalar, a C-contiguous device
    array (anything else as it is: the checks that follow say what is wrong with it)."""
    if _is_device_array(value):
        return _flat_device_array(value)
    if not isinstance(value, np.ndarray | np.generic):
        return value
    return np.reshape(value, -1)


def _given_outputs(parameters: Sequence[Parameter], out: Any) -> list[Any]:
    """The caller's `out` as one entry per output, None where it gives none: as the CPU's call
    takes it (`given_outputs`), and a device array for a one-output program."""
    if out is None:
        return [None] * len(parameters)
    return given_outputs(parameters, [out] if _is_device_array(out) else out)


def _flat_outputs(
    buffers: Sequence[Any], parameters: Sequence[Parameter], shape: tuple[int, ...]
) -> list[Any]:
    """The `out=` buffers of a flat call of `shape`: each numpy buffer of a `[?]` output, of that
    shape, as a one-dim view of it, which the call writes (a buffer of another shape, or not
    C-contiguous, which has no such view: an error; any other buffer as it is, for the checks
    that follow)."""
    flat = []
    for p, buffer in zip(parameters, buffers, strict=True):
        arrays = _is_device_array(buffer) or isinstance(buffer, np.ndarray)
        if p.shape and arrays and _shape(buffer) != shape:  # (flat, any same-size one passed)
            raise ArgumentError(f"out '{p.name}': expected shape {shape}, got {_shape(buffer)}")
        if _is_device_array(buffer) and p.shape:
            buffer = _flat_device_array(buffer)
        elif isinstance(buffer, np.ndarray) and p.shape and buffer.ndim != 1:
            if not buffer.flags.c_contiguous:
                raise ArgumentError(
                    f"out '{p.name}': a GPU call writes an N-d output through a C-contiguous "
                    "buffer (np.ascontiguousarray), got a strided one"
                )
            buffer = buffer.reshape(-1)
        flat.append(buffer)
    return flat


CPU_KERNEL_ONLY = {
    "prepare": "a call checked once (prepare)",
    "streams": "whether a call streams (streams)",
    "asm": "the x86 assembly (asm)",
    "split_choice": "the thread split's timing (split_choice)",
    "stream_choice": "the streaming stores' timing (stream_choice)",
    "run_plan": "running a checked call's plan (run_plan)",
    "threads": "the threads a call splits over (threads)",
    "workers": "the threads' workers (workers)",
    "in_place_allowed": "whether out= may be an input (in_place_allowed)",
    "repeated_axes": "the axes a strided call copies along (repeated_axes)",
}
"""What a CPU kernel has and a `CudaKernel` has not (public names of either's instances), by
what it is."""


class CudaKernel(CompiledProgram):
    """A program compiled for an NVIDIA GPU: `k.ptx`, `k.ir(stage)`, and `k(x=..., ...)` where
    a GPU and `cuda-python` are present (see the module docstring)."""

    function: CudaFunction

    def __init__(self, program: Program, device: Device | None = None):
        super().__init__(program)
        self._device = device
        self._module: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Refuses, saying so (it failed on a lambda of its stages: an AttributeError)."""
        raise TypeError(
            "a GPU kernel (target='cuda') cannot be pickled: compile it where it runs "
            "(xfuse.compile(..., target='cuda') there; a CPU kernel pickles)"
        )

    @property
    def ptx(self) -> str:
        return self.function.ptx.ptx

    @property
    def llvm_ir(self) -> str:
        """The optimized NVVM IR the PTX is made from."""
        return self.function.ptx.optimized_ir

    def __repr__(self) -> str:
        return f"<xfuse.CudaKernel {self.signature} {self.options}>"

    def __getattr__(self, name: str) -> Any:
        """A CPU kernel's attribute names the target it needs (a bare AttributeError said only
        that it was missing)."""
        if name in CPU_KERNEL_ONLY:
            raise AttributeError(
                f"'CudaKernel' object has no attribute {name!r}: {CPU_KERNEL_ONLY[name]} is a "
                "CPU kernel's (target='cpu'); a GPU kernel has `ptx`, `llvm_ir`, `ir(stage)` "
                "and its call"
            )
        raise AttributeError(f"'CudaKernel' object has no attribute {name!r}")

    def __call__(self, /, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        bound = self.call_signature.bind(args, kwargs)
        given = buffers = _given_outputs(self.function.outputs, out)
        # A kernel of `[?]` arrays takes numpy arrays of any one shape flat, as the CPU's does.
        flat = self.flat_shape([_shape(bound[name]) for name in self._input_names])
        if flat is not None:
            bound = {
                p.name: _flattened(bound[p.name]) if p.shape else bound[p.name]
                for p in self.function.inputs
            }
            buffers = _flat_outputs(given, self.function.outputs, flat)
        inputs = self._check_inputs(bound)
        input_shapes = [array.shape for array in inputs]
        iteration = bind_shapes(self.function.inputs, input_shapes, self.function.outputs)
        shapes = [output_shape(p, iteration) for p in self.function.outputs]
        on_device = any(isinstance(array, DeviceArray) for array in inputs)
        outputs = self._check_outputs(buffers, shapes, on_device, out is None)
        arrays = [*inputs, *outputs]
        names = [*self._input_names, *self.output_names]
        pointers = [a.pointer if isinstance(a, DeviceArray) else data_pointer(a) for a in arrays]
        check_aliasing(names, arrays, pointers, len(inputs), self.program.in_place_allowed)  # type: ignore[arg-type]
        device = self._device or cuda_device()
        if self._module is None:
            self._module = device.load(self.function.ptx)
        self._run(device, arrays)
        # The caller's buffers themselves, as numpy's ufuncs return them; new arrays in the
        # call's shape (views of the flat ones).
        results = [
            caller
            if caller is not None
            else new.reshape(flat)
            if flat is not None and new.shape
            else new
            for caller, new in zip(given, outputs, strict=True)
        ]
        return results[0] if len(results) == 1 else tuple(results)

    def _check_inputs(self, bound: Mapping[str, Any]) -> list[np.ndarray | DeviceArray]:
        return [
            device_array(f"argument '{p.name}'", p, bound[p.name])
            if _is_device_array(bound[p.name])
            else check_input(p, bound[p.name])
            for p in self.function.inputs
        ]

    def _check_outputs(
        self,
        buffers: Sequence[Any],
        shapes: Sequence[tuple[int, ...]],
        on_device: bool,
        none_given: bool,
    ) -> list[np.ndarray | DeviceArray]:
        """The output arrays: each buffer checked, or a new numpy array where None (which a
        call of device-array inputs refuses: its outputs stay on the device)."""
        checked: list[np.ndarray | DeviceArray] = []
        for p, buffer, shape in zip(self.function.outputs, buffers, shapes, strict=True):
            if buffer is None and on_device:
                where = "out" if none_given else f"out '{p.name}'"
                raise ArgumentError(
                    f"{where}: with device-array inputs, pass the outputs as device arrays in out="
                )
            if buffer is None:
                checked.append(np.empty(shape, numpy_dtype(p.dtype)))
            elif not _is_device_array(buffer):
                checked.append(check_output(p, buffer, shape))
            else:
                array = device_array(f"out '{p.name}'", p, buffer, written=True)
                if array.shape != shape:
                    raise ArgumentError(
                        f"out '{p.name}': expected shape {shape}, got {array.shape}"
                    )
                checked.append(array)
        return checked

    def _run(self, device: Device, arrays: Sequence[np.ndarray | DeviceArray]) -> None:
        """Copy numpy arrays in, allocate temporaries, launch in order, copy numpy outputs out."""
        input_count = len(self.function.inputs)
        shapes = [tuple(array.shape) for array in arrays]
        owned: list[int] = []
        try:
            pointers = []
            for index, array in enumerate(arrays):
                if isinstance(array, DeviceArray):
                    pointers.append(array.pointer)
                    continue
                owned.append(device.allocate(array.nbytes))
                pointers.append(owned[-1])
                if index < input_count:
                    device.copy_to_device(owned[-1], array)
            for temporary in self.function.sequence.temporaries:
                owned.append(device.allocate(temporary.nbytes(shapes)))
                pointers.append(owned[-1])
            for launch in plan_launches(self.function, shapes, pointers, device, self._module):
                device.launch(self._module, *launch)
            device.synchronize()
            for index in range(input_count, len(arrays)):
                array = arrays[index]
                if isinstance(array, np.ndarray):
                    device.copy_to_host(array, pointers[index])
        finally:
            for pointer in owned:
                device.free(pointer)


def plan_launches(
    function: CudaFunction,
    shapes: Sequence[tuple[int, ...]],
    pointers: Sequence[int],
    device: Device,
    module: Any,
) -> list[tuple[str, int, int, list[Any]]]:
    """(entry, grid, block, kernel arguments) of each launch of a call, in order.

    `shapes` are the arguments' (inputs, then outputs), `pointers` their device addresses
    followed by the temporaries'; `module` is the program's PTX loaded on `device`. A grid is
    at most one wave of the entry's blocks on `device` (more would only queue behind it).
    """
    all_shapes = [*shapes, *(t.shape_for(shapes) for t in function.sequence.temporaries)]
    launches = []
    for launch in function.sequence.launches:
        iteration = all_shapes[launch.operands[launch.input_count]]
        arguments: list[Any] = [ctypes.c_void_p(pointers[i]) for i in launch.operands]
        arguments += [ctypes.c_int64(iteration[axis]) for axis in launch.dynamic_axes]
        blocks = -(-math.prod(iteration) // BLOCK_SIZE)
        # The fallback for an answer of 0 (the entry cannot run BLOCK_SIZE threads, which
        # cuLaunchKernel then says by name) is a block a multiprocessor, not one for all.
        resident = max(1, device.resident_blocks(module, launch.entry, BLOCK_SIZE))
        grid = max(1, min(blocks, device.multiprocessors * resident))
        launches.append((launch.entry, grid, BLOCK_SIZE, arguments))
    return launches
