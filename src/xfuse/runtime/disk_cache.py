"""The on-disk compile cache: a new process loads a program's code instead of compiling it.

An entry is one file per program, `<digest>.xfuse`, where the digest hashes what decides the code:
the frontend IR (or the `.ew` source with its dtypes and shapes), the output names, every `Options`
field (for a GPU program these include the target and the arch) and, for the CPU, the host CPU's
name and features (`xfuse.codegen.native.host_cpu`) and its C library (`host_parts`, which the
entry records too, for `info`). The entry records the toolchain that made it (xfuse's version,
plus a fingerprint of its source files when run from a checkout; xDSL's, llvmlite's, Python's,
numpy's and ml_dtypes' versions) and holds the program's `Options` and
what running it needs: on the CPU the object code MCJIT linked, the optimized LLVM IR and what
binding the call needs (the function's name, its parameters, whether it takes a workspace,
whether it may run in place); on a GPU its PTX, NVVM IR and launch sequence
(`xfuse.runtime.cuda.CudaFunction`), and, for PTX with NVIDIA's libdevice linked in (f64 math),
that file's SHA-256: an entry whose libdevice is not the one this process finds is a miss
(`xfuse.codegen.libdevice`). A CPU hit links the object code
(`xfuse.codegen.native.load_object_code`) and a GPU hit takes the PTX: no xDSL pass and no LLVM
optimization or code generation runs, and xDSL is not imported. The IR of the stages is
recomputed from the frontend IR only if asked for. The files themselves (the directory, the
toolchain, the sealed form, the atomic write) are `xfuse.runtime.cache_files`'s, shared with the
entry of `xfuse.runtime.bound_calls.BOUND_CALL_IR`'s object code, which `info` and `clear` count
and remove like a program's.

Where: `XFUSE_CACHE_DIR` (`~` expanded; a relative one is made absolute against the working
directory where the process first reads it, so that a later `os.chdir` does not move the cache),
else the platform's user cache dir (`platformdirs`, e.g. `~/.cache/xfuse`; none without a home
directory: the cache is then off, with a warning); `XFUSE_CACHE=0` (or `false`, `off`, `no`, in
any case) turns the cache off; `1`, `true`, `on`, `yes` or empty keep it on, and any other value
does too, with a warning. Both are read at every compile. Each toolchain's entries are in a
subdirectory of their own (`xfuse.runtime.cache_files`), so that versions sharing a directory do
not replace each other's.

Size: past `XFUSE_CACHE_MAX_BYTES` (default 1 GiB; `0`: no limit) a write evicts the least
recently used entries, of any toolchain, down to 90% of it (`cache_files.evict`); a hit marks
its entry used (its modification time, at most once a minute). Hits scan nothing.

Safe to share between processes and to lose: an entry is written to a temporary file in the same
directory and renamed over the old one (readers see the old entry or the new one, never half of
one), and carries a SHA-256 of its contents. A missing, truncated, corrupt or foreign-toolchain
entry, or one that is no regular file, is a miss: the program is compiled and the entry replaced.
Two processes compiling the same program at once both compile it and both write it; the last
rename wins. An entry evicted while another process reads it is read whole (the reader has it
open) or, not opened yet, missed and compiled again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xfuse.codegen.libdevice import find_libdevice
from xfuse.codegen.native import UnresolvedSymbolsError, host_cpu, load_object_code
from xfuse.runtime.arrays import Parameter
from xfuse.runtime.bound_calls import bound_call_digest
from xfuse.runtime.cache_files import (
    ENTRY_SUFFIX,
    MAX_ENTRY_BYTES,
    SIZE_CHECK_MARKER,
    cache_dir,
    entry_path,
    max_bytes,
    opened_regular_file,
    own_files,
    read_entry,
    remove,
    remove_empty_directories,
    seal,
    sealed_fields,
    toolchain,
    toolchain_directory,
    unseal,
    write_entry,
)
from xfuse.runtime.call_plans import NativeFunction
from xfuse.runtime.kernel import Program


@functools.cache
def c_library() -> str:
    """The C library and its version ("glibc 2.36"; "" where it does not say): which of
    libmvec's functions code compiled here may call (`xfuse.codegen.native.call_libmvec`)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # not a POSIX host, or not glibc
        return ""


def host_parts(target: str) -> list[str]:
    """What of the host decides a `target` entry's code: for the CPU, the host CPU and its C
    library (a cache shared by hosts of several glibc versions: f64 code calls libmvec
    functions that older ones lack); nothing for PTX, which depends only on the options' arch.
    Part of the entry's name, and recorded in it for `info`."""
    if target != "cpu":
        return []
    cpu = host_cpu()
    return [cpu.name, cpu.features, c_library()]


def entry_digest(key: Sequence[str], target: str) -> str:
    """An entry's name: a hash of its key's parts (the program and options), its target and
    `host_parts`."""
    parts = [*key, target, *host_parts(target)]
    return hashlib.sha256(repr(parts).encode()).hexdigest()  # (parts of any characters)


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


def encode(
    digest: str, function_name: str, program: Program, source_warnings: Sequence[Any] = ()
) -> bytes:
    """An entry's bytes: the magic, a SHA-256 of the rest, then the rest (builtins, plus the
    `Options` and, for a GPU program, its `CudaFunction`: plain dataclasses of xfuse's).
    `source_warnings`: what parsing the source warned, as tuples of builtins (`NameWarning`)."""
    assert program.frontend_ir is not None, "only programs from a frontend are cached"
    target = program.options.target
    return seal(
        {
            "toolchain": toolchain(),
            "digest": digest,
            "target": target,
            "frontend_ir": program.frontend_ir,
            "options": program.options,
            "in_place_allowed": program.in_place_allowed,
            "repeated_axes": program.repeated_axes,
            "host": host_parts(target),
            "source_warnings": [tuple(warning) for warning in source_warnings],
            **(
                {"cuda_function": program.function}
                if target == "cuda"
                else _native_fields(function_name, program.function)
            ),
        }
    )


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
            fields["repeated_axes"],
            options,
            frontend_ir,
        )


def decode(data: bytes, digest: str) -> Entry | None:
    """The entry in `data` if it is whole, uncorrupted and made by this toolchain for `digest`
    on this host (`host_parts`; the glue's, of its own digest: `bound_call_digest`), and links
    no libdevice or the one found: what `load` would hit."""
    fields = unseal(data, digest, toolchain())
    if fields is None or not _links_the_libdevice_found(fields):
        return None
    if fields["target"] == "bound calls":
        return Entry(fields) if digest == bound_call_digest() else None
    return Entry(fields) if fields.get("host") == host_parts(fields["target"]) else None


def load(
    key: Sequence[str], target: str, stages: Callable[[str, Any], Mapping[str, str]]
) -> Program | None:
    """The program of `key`'s entry for `target` ("cpu" or "cuda"), if the cache is on and has a
    good one for this toolchain. `stages(frontend_ir, options)` makes the stages' IR, on first
    access only."""
    loaded = load_with_warnings(key, target, stages)
    return None if loaded is None else loaded[0]


def load_with_warnings(
    key: Sequence[str], target: str, stages: Callable[[str, Any], Mapping[str, str]]
) -> tuple[Program, list[tuple[Any, ...]]] | None:
    """`load`'s program and what parsing its source warned (`store`'s `source_warnings`)."""
    directory = cache_dir()
    if directory is None:
        return None
    digest, current = entry_digest(key, target), toolchain()
    fields = read_entry(entry_path(directory, current, digest), digest, current)
    if fields is None or not _links_the_libdevice_found(fields):
        return None
    try:
        return Entry(fields).program(stages), fields["source_warnings"]
    except UnresolvedSymbolsError:
        return None  # code linked against a name this process lacks: compiled anew


def _links_the_libdevice_found(fields: dict[str, Any]) -> bool:
    """Whether an entry's PTX links no libdevice, or the one this process would link."""
    if fields["target"] != "cuda" or fields["cuda_function"].ptx.libdevice is None:
        return True
    found = find_libdevice()
    return found is not None and found.digest == fields["cuda_function"].ptx.libdevice


def store(
    key: Sequence[str], program: Program, function_name: str, source_warnings: Sequence[Any] = ()
) -> None:
    """Write `program` as `key`'s entry (replacing any), with what parsing its source warned,
    evicting the least recently used entries past the size limit; warns once if the cache is
    unwritable."""
    directory = cache_dir()
    if directory is None:
        return
    digest = entry_digest(key, program.options.target)
    path = entry_path(directory, toolchain(), digest)
    write_entry(directory, path, encode(digest, function_name, program, source_warnings))


@dataclass
class ToolchainFiles:
    """The entries of one toolchain's subdirectory, as `xfuse cache info` shows them."""

    directory: str
    """Relative to the cache directory: `toolchain-<16 hex>`, or `.` for entries written
    before the cache had subdirectories."""
    toolchain: str | None = None
    """As its first readable entry records it (None where none is readable)."""
    entries: int = 0
    bytes: int = 0
    readable: bool = True
    """False for a subdirectory this user may not list (another user's): nothing counted."""


@dataclass(frozen=True)
class CacheInfo:
    """What `xfuse cache info` shows."""

    directory: Path | None
    entries: int
    total_bytes: int
    current: int
    """Entries this toolchain can use (the others are from another version, are damaged, or
    are GPU code linking another libdevice than this process finds)."""
    current_bytes: int
    max_bytes: int | None
    """The size limit (`XFUSE_CACHE_MAX_BYTES`); None for none."""
    toolchains: list[ToolchainFiles]


def info() -> CacheInfo:
    directory = cache_dir()
    if directory is None:
        return CacheInfo(None, 0, 0, 0, 0, max_bytes(), [])
    current_directory = os.fspath(toolchain_directory(directory, toolchain()))
    current = current_bytes = 0
    toolchains: dict[str, ToolchainFiles] = {}
    found = own_files(directory)
    for error in found.unreadable:
        subdirectory = os.path.relpath(os.fspath(error.filename), directory)
        toolchains[subdirectory] = ToolchainFiles(subdirectory, readable=False)
    for file in found.entries:
        try:
            # A regular file as own_files found it, but maybe not by now: no FIFO read.
            with opened_regular_file(file.path) as opened:
                if opened is None:
                    continue
                size = opened[1].st_size
                # (one too large to be an entry is counted, not read: `MAX_ENTRY_BYTES`)
                data = opened[0].read() if size <= MAX_ENTRY_BYTES else b""
        except OSError:
            continue  # removed meanwhile
        subdirectory = os.path.relpath(os.path.dirname(file.path), directory)
        files = toolchains.setdefault(subdirectory, ToolchainFiles(subdirectory))
        files.entries += 1
        files.bytes += size
        if files.toolchain is None:  # none of its entries read yet, or all damaged
            fields = sealed_fields(data)
            made_by = fields and fields.get("toolchain")
            files.toolchain = made_by if isinstance(made_by, str) else None
        digest = file.name.removesuffix(ENTRY_SUFFIX)
        if os.path.dirname(file.path) == current_directory and decode(data, digest) is not None:
            current += 1
            current_bytes += size
    return CacheInfo(
        directory,
        sum(files.entries for files in toolchains.values()),
        sum(files.bytes for files in toolchains.values()),
        current,
        current_bytes,
        max_bytes(),
        sorted(toolchains.values(), key=lambda files: files.directory),
    )


@dataclass(frozen=True)
class Cleared:
    """What `clear` did: files and bytes removed, and the errors of the files it kept."""

    files: int
    bytes: int
    kept: tuple[OSError, ...] = ()


def clear() -> Cleared:
    """Remove every entry, leftover temporary file and the size check's marker (nothing else)
    and the toolchains' subdirectories they leave empty, the marker not counted. A file it may
    not remove (another user's, in a shared cache) is kept and the rest removed, as `rm -f`
    does: its first such error stopped it, the user's own entries left."""
    directory = cache_dir()
    if directory is None:
        return Cleared(0, 0)
    files = own_files(directory)
    kept: list[OSError] = [*files.unreadable]  # (not listed: none of their files removed)
    removed, freed = remove([*files.entries, *files.temporaries], OSError, kept)
    remove_empty_directories(files.directories)
    # The marker is no entry: not one kept where it cannot go (a directory of that name, which
    # xfuse makes none; another user's; a read-only cache dir, EROFS even where there is none).
    with contextlib.suppress(OSError):
        (directory / SIZE_CHECK_MARKER).unlink()
    return Cleared(removed, freed, tuple(kept))
