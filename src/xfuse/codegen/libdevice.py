"""NVIDIA's libdevice: the bitcode of the GPU's math library (`__nv_exp`, `__nv_tanh`, ...).

The GPU has no libm: CUDA's math functions are LLVM bitcode that a compiler links into the
kernel's module before optimizing it (clang's `-mlink-builtin-bitcode`, Numba's NVVM), and
`xfuse.codegen.ptx` does the same for the f64 transcendentals `ew-expand-math{library=libdevice}`
leaves as calls. It ships with the CUDA toolkit (`nvvm/libdevice/libdevice.10.bc`) and in
NVIDIA's pip wheels; `find_libdevice` looks for it once per process (`_directories`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

FILENAME = "libdevice.10.bc"
FUNCTION_PREFIX = "__nv_"
"""What libdevice's function names start with (`__nv_exp`); they exist only on the GPU."""
_TOOLKIT_DIRECTORY = Path("nvvm", "libdevice")
_WHEEL_DIRECTORIES = (
    # The layouts NVIDIA's cuda-pathfinder knows: CUDA 13's wheels, then CUDA 12's.
    Path("nvidia", "cu13", "nvvm", "libdevice"),
    Path("nvidia", "cuda_nvvm", "nvvm", "libdevice"),
    Path("nvidia", "cuda_nvcc", "nvvm", "libdevice"),
)
_WHEELS = "nvidia/{cu13,cuda_nvvm,cuda_nvcc}/nvvm/libdevice under each sys.path entry"
_INSTALLED_TOOLKITS = ("/usr/local/cuda", "/opt/cuda")


@dataclass(frozen=True)
class Libdevice:
    path: Path
    bitcode: bytes
    digest: str
    """The SHA-256 of `bitcode`: what the disk cache checks a PTX that links it against."""


class LibdeviceNotFoundError(RuntimeError):
    """A GPU kernel needs libdevice (an f64 transcendental) and none was found, or the file
    found is not libdevice (not bitcode, or lacking the functions called)."""


def _named_toolkits() -> list[Path]:
    """The libdevice directories of the toolkits the environment names, in order: `$CUDA_HOME`,
    `$CUDA_PATH`, the toolkit of the `nvcc` on the PATH, `$CONDA_PREFIX` (conda's cuda-nvcc)."""
    roots = [os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:  # <toolkit>/bin/nvcc, often reached through a link
        directories = Path(nvcc).resolve().parents
        if len(directories) > 1:  # not /nvcc, whose parents[1] was an IndexError
            roots.append(str(directories[1]))
    roots.append(os.environ.get("CONDA_PREFIX"))
    return [Path(root, _TOOLKIT_DIRECTORY) for root in roots if root]


def _installed_toolkits() -> list[Path]:
    return [Path(root, _TOOLKIT_DIRECTORY) for root in _INSTALLED_TOOLKITS]


def _directories() -> list[Path]:
    """Where `find_libdevice` looks, in order: the toolkits the environment names, NVIDIA's pip
    wheels (`nvidia-cuda-nvcc`), then a toolkit's usual installation directories."""
    wheels = [Path(entry or ".", wheel) for entry in sys.path for wheel in _WHEEL_DIRECTORIES]
    return [*_named_toolkits(), *wheels, *_installed_toolkits()]


@functools.cache
def find_libdevice() -> Libdevice | None:
    """The first `libdevice.10.bc` of `_directories`, read once per process (None if none)."""
    for directory in _directories():
        path = directory / FILENAME
        bitcode = _read_file(path)
        if bitcode is not None:
            return Libdevice(path, bitcode, hashlib.sha256(bitcode).hexdigest())
    return None


def _read_file(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file (through links) that can be read, else None.
    Opened without blocking and checked before reading: a FIFO's read would wait forever."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None  # a directory, FIFO, device, ...
            return file.read()
    except OSError:  # absent, unreadable, a link loop
        return None


def require_libdevice(functions: list[str]) -> Libdevice:
    """libdevice, for a kernel that calls `functions`; `LibdeviceNotFoundError` if none."""
    found = find_libdevice()
    if found is None:
        places = [*map(str, _named_toolkits()), _WHEELS, *map(str, _installed_toolkits())]
        raise LibdeviceNotFoundError(
            f"the GPU kernel calls {', '.join(functions)} (f64 math, or an f32 function xfuse "
            f"has no approximation of), which NVIDIA's libdevice "
            f"({FILENAME}, part of the CUDA toolkit and of NVIDIA's nvcc pip wheels) "
            f"defines, and it was not found (set CUDA_HOME to a CUDA toolkit); looked in: "
            f"{', '.join(places)}"
        )
    return found
