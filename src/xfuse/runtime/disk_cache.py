"""The on-disk compile cache: a new process loads a program's code instead of compiling it.

An entry is one file per program, `<digest>.xfuse`, where the digest hashes what decides the code:
the frontend IR (or the `.ew` source with its dtypes and shapes), the output names, every `Options`
field (for a GPU program these include the target and the arch) and, for the CPU, the host CPU's
name and features (`xfuse.codegen.native.host_cpu`). The entry records the toolchain that made it
(xfuse's version, plus a fingerprint of its source files when run from a checkout; xDSL's,
llvmlite's, Python's, numpy's and ml_dtypes' versions) and holds the program's `Options` and
what running it needs: on the CPU the object code MCJIT linked, the optimized LLVM IR and what
binding the call needs (the function's name, its parameters, whether it takes a workspace,
whether it may run in place); on a GPU its PTX, NVVM IR and launch sequence
(`xfuse.runtime.cuda.CudaFunction`). A CPU hit links the object code
(`xfuse.codegen.native.load_object_code`) and a GPU hit takes the PTX: no xDSL pass and no LLVM
optimization or code generation runs, and xDSL is not imported. The IR of the stages is
recomputed from the frontend IR only if asked for.

Where: `XFUSE_CACHE_DIR`, else the platform's user cache dir (`platformdirs`, e.g.
`~/.cache/xfuse`); `XFUSE_CACHE=0` turns the cache off. Both are read at every compile.

Safe to share between processes and to lose: an entry is written to a temporary file in the same
directory and renamed over the old one (readers see the old entry or the new one, never half of
one), and carries a SHA-256 of its contents. A missing, truncated, corrupt or foreign-toolchain
entry is a miss: the program is compiled and the entry replaced. An entry from another toolchain
has the same file name, so an upgrade replaces entries instead of piling them up. Two processes
compiling the same program at once both compile it and both write it; the last rename wins.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pickle
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llvmlite
import numpy as np

import xfuse
from xfuse.codegen.native import host_cpu, load_object_code
from xfuse.runtime.arrays import Parameter
from xfuse.runtime.kernel import NativeFunction, Program

ENTRY_SUFFIX = ".xfuse"
ENTRY_MODE = 0o644
MAGIC = b"XFUSE-CACHE-2\n"
"""The first bytes of every entry (the `1` is the layout's version)."""
_TEMPORARY_PREFIX = ".xfuse-tmp-"


def cache_dir() -> Path | None:
    """The cache directory, or None when `XFUSE_CACHE=0` turns the cache off."""
    if os.environ.get("XFUSE_CACHE", "1").strip() == "0":
        return None
    configured = os.environ.get("XFUSE_CACHE_DIR")
    if configured:
        return Path(configured)
    if sys.platform.startswith("linux"):  # platformdirs' rule, without its ~6 ms import on a hit
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):
            base = os.path.expanduser("~/.cache")
        return Path(base, "xfuse")
    import platformdirs

    return Path(platformdirs.user_cache_dir("xfuse"))


@functools.cache
def _source_fingerprint() -> str:
    """For a source checkout, a hash of every xfuse source file's path in the package, size and
    modification time: an editable install keeps its version number while its code changes, and
    stale code must not be reused. Empty for an installed package, which its version names (so
    machines that install the same version share entries)."""
    package = os.path.dirname(os.path.abspath(xfuse.__file__))
    if os.path.basename(os.path.dirname(package)) in ("site-packages", "dist-packages"):
        return ""
    digest = hashlib.sha256()
    pending = [package]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir():
                    pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    stat = entry.stat()
                    path = entry.path[len(package) :]
                    digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


@functools.cache
def _installed_version(distribution: str) -> str:
    """An installed distribution's version, without importing it: the name of the `.dist-info`
    directory that installers put next to the package (`xdsl-0.75.0.dist-info`, the wheel
    format's `{name}-{version}`; an upgrade replaces it). `importlib.metadata` searches every
    `sys.path` entry and took half of a cached compile in a new process; it remains the fallback
    for a package installed otherwise (editable, egg)."""
    spec = importlib.util.find_spec(distribution)  # locates the package, imports nothing
    if spec is not None and spec.submodule_search_locations:
        directory = os.path.dirname(next(iter(spec.submodule_search_locations)))
        prefix, suffix = f"{distribution}-", ".dist-info"
        versions = [
            name[len(prefix) : -len(suffix)]
            for name in os.listdir(directory)
            if name.startswith(prefix) and name.endswith(suffix)
        ]
        if len(versions) == 1:
            return versions[0]
    from importlib.metadata import version

    return version(distribution)


def toolchain() -> str:
    """What made an entry, besides its key: an entry from another toolchain is not used. It
    names numpy and ml_dtypes too: constant folding computes with them (their rounding may
    change between versions), and the code holds what it folded."""
    fingerprint = _source_fingerprint()
    return (
        f"xfuse {xfuse.__version__}{'+' + fingerprint if fingerprint else ''} "
        f"xdsl {_installed_version('xdsl')} llvmlite {llvmlite.__version__} "
        f"python {sys.version_info[0]}.{sys.version_info[1]} "
        f"numpy {np.__version__} ml_dtypes {_installed_version('ml_dtypes')}"
    )


@functools.cache
def c_library() -> str:
    """The C library and its version ("glibc 2.36"; "" where it does not say): which of
    libmvec's functions code compiled here may call (`xfuse.codegen.native.call_libmvec`)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # not a POSIX host, or not glibc
        return ""


def entry_digest(key: Sequence[str], target: str) -> str:
    """An entry's name: a hash of its key's parts (the program and options) and, for the CPU
    target, the host CPU and its C library (a cache shared by hosts of several glibc versions:
    f64 code calls libmvec functions that older ones lack); PTX depends only on the options'
    arch."""
    parts = [*key, target]
    if target == "cpu":
        cpu = host_cpu()
        parts += [cpu.name, cpu.features, c_library()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class LazyStages(Mapping[str, str]):
    """The stages' IR of a program loaded from the cache: made by `make` on first access."""

    def __init__(self, make: Callable[[], Mapping[str, str]]):
        self._make = make

    @functools.cached_property
    def _stages(self) -> Mapping[str, str]:
        return self._make()

    def __getitem__(self, stage: str) -> str:
        return self._stages[stage]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stages)

    def __len__(self) -> int:
        return len(self._stages)


def _parameters(parameters: Sequence[Parameter]) -> list[tuple[Any, ...]]:
    return [(p.name, p.dtype, p.shape, p.dims) for p in parameters]


def _native_fields(function_name: str, function: NativeFunction) -> dict[str, Any]:
    native = function.native
    return {
        "function_name": function_name,
        "inputs": _parameters(function.inputs),
        "outputs": _parameters(function.outputs),
        "workspace": function.workspace,
        "opt_level": native.opt_level,
        "optimized_ir": native.optimized_ir,
        "object_code": native.object_code,
    }


def encode(digest: str, function_name: str, program: Program) -> bytes:
    """An entry's bytes: the magic, a SHA-256 of the rest, then the rest (builtins, plus the
    `Options` and, for a GPU program, its `CudaFunction`: plain dataclasses of xfuse's)."""
    assert program.frontend_ir is not None, "only programs from a frontend are cached"
    target = program.options.target
    body = pickle.dumps(
        {
            "toolchain": toolchain(),
            "digest": digest,
            "target": target,
            "frontend_ir": program.frontend_ir,
            "options": program.options,
            "in_place_allowed": program.in_place_allowed,
            **(
                {"cuda_function": program.function}
                if target == "cuda"
                else _native_fields(function_name, program.function)
            ),
        },
        protocol=pickle.HIGHEST_PROTOCOL,
    )
    return MAGIC + hashlib.sha256(body).digest() + body


@dataclass(frozen=True)
class Entry:
    """A decoded entry that belongs to this toolchain and this key."""

    fields: dict[str, Any]

    def _native_function(self) -> NativeFunction:
        fields = self.fields
        native = load_object_code(
            fields["object_code"], fields["optimized_ir"], fields["opt_level"]
        )
        return NativeFunction(
            native,
            fields["function_name"],
            [Parameter(*p) for p in fields["inputs"]],
            [Parameter(*p) for p in fields["outputs"]],
            fields["workspace"],
        )

    def program(self, stages: Callable[[str, Any], Mapping[str, str]]) -> Program:
        fields = self.fields
        function = (
            fields["cuda_function"] if fields["target"] == "cuda" else self._native_function()
        )
        frontend_ir, options = fields["frontend_ir"], fields["options"]
        return Program(
            function,
            LazyStages(lambda: stages(frontend_ir, options)),
            fields["in_place_allowed"],
            options,
            frontend_ir,
        )


def decode(data: bytes, digest: str) -> Entry | None:
    """The entry in `data` if it is whole, uncorrupted and made by this toolchain for `digest`."""
    checksum_end = len(MAGIC) + hashlib.sha256().digest_size
    if not data.startswith(MAGIC) or len(data) <= checksum_end:
        return None
    body = data[checksum_end:]
    if hashlib.sha256(body).digest() != data[len(MAGIC) : checksum_end]:
        return None
    try:
        # The checksum matched, so these bytes are what some `encode` wrote.
        fields = pickle.loads(body)
    except Exception:  # a layout or class this xfuse cannot read: a miss, never a crash
        return None
    if (
        not isinstance(fields, dict)
        or fields.get("toolchain") != toolchain()
        or fields.get("digest") != digest
    ):
        return None
    return Entry(fields)


@functools.cache
def _warn_unwritable(directory: Path, reason: str) -> None:
    warnings.warn(
        f"xfuse: cannot write the compile cache in {directory} ({reason}); set XFUSE_CACHE_DIR "
        "to a writable directory or XFUSE_CACHE=0",
        RuntimeWarning,
        stacklevel=4,
    )


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file next to `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=_TEMPORARY_PREFIX)
    try:
        # mkstemp makes the file private; entries are for everyone who shares the directory.
        os.fchmod(descriptor, ENTRY_MODE)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _path(directory: Path, key: Sequence[str], target: str) -> tuple[Path, str]:
    digest = entry_digest(key, target)
    return directory / f"{digest}{ENTRY_SUFFIX}", digest


def load(
    key: Sequence[str], target: str, stages: Callable[[str, Any], Mapping[str, str]]
) -> Program | None:
    """The program of `key`'s entry for `target` ("cpu" or "cuda"), if the cache is on and has a
    good one for this toolchain. `stages(frontend_ir, options)` makes the stages' IR, on first
    access only."""
    directory = cache_dir()
    if directory is None:
        return None
    path, digest = _path(directory, key, target)
    try:
        entry = decode(path.read_bytes(), digest)
    except OSError:
        return None
    return None if entry is None else entry.program(stages)


def store(key: Sequence[str], program: Program, function_name: str) -> None:
    """Write `program` as `key`'s entry (replacing any); warns once if the cache is unwritable."""
    directory = cache_dir()
    if directory is None:
        return
    path, digest = _path(directory, key, program.options.target)
    try:
        write_atomically(path, encode(digest, function_name, program))
    except OSError as error:
        _warn_unwritable(directory, error.strerror or str(error))


@dataclass(frozen=True)
class CacheInfo:
    """What `xfuse cache info` shows."""

    directory: Path | None
    entries: int
    total_bytes: int
    current: int
    """Entries this toolchain can use (the others are from another version or are damaged)."""


def _entry_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(directory.glob(f"*{ENTRY_SUFFIX}"))


def info() -> CacheInfo:
    directory = cache_dir()
    if directory is None:
        return CacheInfo(None, 0, 0, 0)
    entries = total_bytes = current = 0
    for path in _entry_files(directory):
        try:
            data = path.read_bytes()
        except OSError:
            continue  # removed meanwhile
        entries += 1
        total_bytes += len(data)
        current += decode(data, path.name.removesuffix(ENTRY_SUFFIX)) is not None
    return CacheInfo(directory, entries, total_bytes, current)


def clear() -> tuple[int, int]:
    """Remove every entry and leftover temporary file (nothing else): (files, bytes) removed."""
    directory = cache_dir()
    if directory is None or not directory.is_dir():
        return 0, 0
    files = [*_entry_files(directory), *directory.glob(f"{_TEMPORARY_PREFIX}*")]
    removed = freed = 0
    for path in files:
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue  # another process removed or replaced it first
        removed += 1
        freed += size
    return removed, freed
