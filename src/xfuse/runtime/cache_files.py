"""The on-disk compile cache's files: where they live, what toolchain made them, how an entry is
sealed (a magic, a SHA-256 of the rest, then a pickled dict of builtins and xfuse's dataclasses)
and written (atomically). Below both of the cache's users: `xfuse.runtime.disk_cache`, which
keeps programs, and `xfuse.runtime.kernel`, which keeps `BOUND_CALL_IR`'s object code (the native
glue every call runs through) in an entry of the same form.

Layout: `<cache dir>/toolchain-<16 hex>/<SHA-256 in hex>.xfuse`, one subdirectory per toolchain
(a hash of `toolchain()`), so that two versions of xfuse, xDSL, llvmlite, Python, numpy or
ml_dtypes sharing a directory keep their entries apart instead of replacing each other's.
Entries written directly in the cache dir (before 2026-12-03) are still the cache's to count
and clear, never read."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pickle
import stat
import sys
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import llvmlite
import numpy as np

import xfuse

ENTRY_SUFFIX = ".xfuse"
ENTRY_MODE = 0o644
MAGIC = b"XFUSE-CACHE-2\n"
"""The first bytes of every entry (the `2` is the layout's version)."""
TEMPORARY_PREFIX = ".xfuse-tmp-"
TOOLCHAIN_PREFIX = "toolchain-"
"""A toolchain's subdirectory is this and 16 hex digits of a SHA-256 of `toolchain()`."""


def cache_dir() -> Path | None:
    """The cache directory, or None when `XFUSE_CACHE` turns the cache off or there is no home
    directory for it (`~` in `XFUSE_CACHE_DIR`, or the default one, names none: a warning,
    once)."""
    if cache_turned_off():
        return None
    configured = os.environ.get("XFUSE_CACHE_DIR")
    if configured:
        absolute = _absolute(configured)
        if absolute is None:
            warn_once(
                f"xfuse: XFUSE_CACHE_DIR={configured!r} names a home directory that there is "
                "none of; set it to a writable directory or XFUSE_CACHE=0",
                stacklevel=3,  # past cache_dir and the cache user (disk_cache.load)
            )
            return None
        return Path(absolute)
    if sys.platform.startswith("linux"):  # platformdirs' rule, without its ~6 ms import on a hit
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):
            base = os.path.expanduser("~/.cache")
        if not os.path.isabs(base):
            # HOME unset (and this user not in the password database) or relative: a relative
            # directory would put the cache wherever the process happens to run.
            warn_once(
                f"xfuse: no home directory for the compile cache (HOME gives '{base}'); set "
                "XFUSE_CACHE_DIR to a writable directory or XFUSE_CACHE=0",
                stacklevel=3,  # past cache_dir and the cache user (disk_cache.load)
            )
            return None
        return Path(base, "xfuse")
    import platformdirs

    return Path(platformdirs.user_cache_dir("xfuse"))


@functools.cache
def _absolute(configured: str) -> str | None:
    """`XFUSE_CACHE_DIR`'s value with `~` expanded and made absolute, once per value and
    process: against the working directory of its first read, so that a later `os.chdir` does
    not move the cache. None where `~` (or `~user`) names no home directory."""
    expanded = os.path.expanduser(configured)
    return None if expanded.startswith("~") else os.path.abspath(expanded)


CACHE_OFF = ("0", "false", "off", "no")
"""The values of `XFUSE_CACHE` that turn the cache off (in any case, spaces around ignored)."""
CACHE_ON = ("1", "true", "on", "yes", "")
"""Those that keep it on, as unset does."""


def cache_turned_off() -> bool:
    """Whether `XFUSE_CACHE` turns the cache off (`CACHE_OFF`); a value in neither `CACHE_OFF`
    nor `CACHE_ON` keeps it on and warns once: `false` once kept it on without a word."""
    value = os.environ.get("XFUSE_CACHE", "")
    word = value.strip().lower()
    if word in CACHE_OFF:
        return True
    if word not in CACHE_ON:
        warn_once(
            f"xfuse: XFUSE_CACHE={value!r} is neither off ({', '.join(CACHE_OFF)}) nor on "
            f"({', '.join(CACHE_ON[:-1])} or empty); the compile cache stays on",
            stacklevel=4,  # past cache_turned_off, cache_dir and the cache user (disk_cache.load)
        )
    return False


@functools.cache
def warn_once(message: str, stacklevel: int) -> None:
    """A `RuntimeWarning` of `message`, once per message (the cache's problems: the caller goes
    on without it); `stacklevel` as the caller would give `warnings.warn`."""
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)


@functools.cache
def _toolchain_directory_name(toolchain: str) -> str:
    return TOOLCHAIN_PREFIX + hashlib.sha256(toolchain.encode()).hexdigest()[:16]


def toolchain_directory(directory: Path, toolchain: str) -> Path:
    """`toolchain`'s subdirectory of the cache directory `directory`."""
    return directory / _toolchain_directory_name(toolchain)


def entry_path(directory: Path, toolchain: str, digest: str) -> Path:
    """The file of `toolchain`'s entry named by `digest` (a SHA-256 of its key) in
    `directory`: in the toolchain's subdirectory."""
    return toolchain_directory(directory, toolchain) / f"{digest}{ENTRY_SUFFIX}"


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


def seal(fields: dict[str, Any]) -> bytes:
    """An entry's bytes: the magic, a SHA-256 of the rest, then `fields` pickled. `fields` names
    the `toolchain` and the `digest` (the entry's file name) that `unseal` checks."""
    body = pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)
    return MAGIC + hashlib.sha256(body).digest() + body


def sealed_fields(data: bytes) -> dict[str, Any] | None:
    """The fields sealed in `data` if it is whole and uncorrupted, whoever made it; else None
    (never an error)."""
    checksum_end = len(MAGIC) + hashlib.sha256().digest_size
    if not data.startswith(MAGIC) or len(data) <= checksum_end:
        return None
    body = data[checksum_end:]
    if hashlib.sha256(body).digest() != data[len(MAGIC) : checksum_end]:
        return None
    try:
        # The checksum matched, so these bytes are what some `seal` wrote.
        fields = pickle.loads(body)
    except Exception:  # a layout or class this xfuse cannot read: a miss, never a crash
        return None
    return fields if isinstance(fields, dict) else None


def unseal(data: bytes, digest: str, toolchain: str) -> dict[str, Any] | None:
    """The fields sealed in `data` if it is whole, uncorrupted and made by `toolchain` for
    `digest`; else None (never an error)."""
    fields = sealed_fields(data)
    return fields if fields is not None and belongs(fields, digest, toolchain) else None


def belongs(fields: dict[str, Any], digest: str, toolchain: str) -> bool:
    """Whether sealed `fields` are `toolchain`'s entry for `digest` (its file name)."""
    return fields.get("toolchain") == toolchain and fields.get("digest") == digest


def write_atomically(path: Path, data: bytes) -> bool:
    """Write `data` to a temporary file next to `path`, then rename it over `path`; False where
    a concurrent `clear` removed the temporary file or its directory first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=TEMPORARY_PREFIX)
    except FileNotFoundError:  # the toolchain's directory, emptied, was removed meanwhile
        return False
    try:
        # mkstemp makes the file private; entries are for everyone who shares the directory.
        os.fchmod(descriptor, ENTRY_MODE)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except FileNotFoundError:
        # The temporary file is gone: another process's `clear` emptied the cache meanwhile,
        # and this entry goes with the others (not a directory to warn about).
        Path(temporary).unlink(missing_ok=True)
        return False
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def read_entry(path: Path, digest: str, toolchain: str) -> dict[str, Any] | None:
    """The fields sealed in the entry at `path` (`unseal`); None where it cannot be read or is
    not a regular file (reading a FIFO there waited forever, a link to /dev/zero never ended)."""
    try:
        # Opening a FIFO without O_NONBLOCK waits for a writer; a regular file ignores it.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None
            data = file.read()
    except OSError:
        return None
    return unseal(data, digest, toolchain)


def write_entry(directory: Path, path: Path, data: bytes) -> None:
    """`write_atomically`, warning once per directory and reason where `directory` is
    unwritable: the caller goes on without the cache."""
    try:
        write_atomically(path, data)
    except OSError as error:
        reason = error.strerror or str(error)
        warn_once(
            f"xfuse: cannot write the compile cache in {directory} ({reason}); set "
            "XFUSE_CACHE_DIR to a writable directory or XFUSE_CACHE=0",
            stacklevel=4,  # past write_entry and the cache user (disk_cache.store)
        )


class OwnFiles(NamedTuple):
    """The cache's files in a cache directory (`own_files`)."""

    entries: list[os.DirEntry[str]]
    """Regular files named `<SHA-256 in hex>.xfuse`, as `entry_path` names them, in the
    toolchains' subdirectories and (written before those) in the directory itself."""
    temporaries: list[os.DirEntry[str]]
    """Regular files named `TEMPORARY_PREFIX...`, where `entries` may be."""
    directories: list[str]
    """The toolchains' subdirectories (real directories, not links to one)."""


def own_files(directory: Path) -> OwnFiles:
    """The cache's files in `directory`: never a link, a directory, or another program's file
    whose name merely ends in `.xfuse` (a cache directory may be shared with other files,
    `XFUSE_CACHE_DIR=~/project`); none where `directory` is missing."""
    found = _scan(directory)
    directories = [
        file.path
        for file in found
        if _is_toolchain_directory_name(file.name) and file.is_dir(follow_symlinks=False)
    ]
    files = [file for file in found if file.is_file(follow_symlinks=False)]
    for subdirectory in directories:
        files += [file for file in _scan(subdirectory) if file.is_file(follow_symlinks=False)]
    files.sort(key=lambda file: file.path)
    return OwnFiles(
        [file for file in files if _is_entry_name(file.name)],
        [file for file in files if file.name.startswith(TEMPORARY_PREFIX)],
        sorted(directories),
    )


def _scan(directory: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as found:
            return list(found)
    except (FileNotFoundError, NotADirectoryError):  # none yet, or removed meanwhile
        return []


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(character in "0123456789abcdef" for character in text)


def _is_entry_name(name: str) -> bool:
    digest = name.removesuffix(ENTRY_SUFFIX)
    return digest != name and _is_hex(digest, 2 * hashlib.sha256().digest_size)


def _is_toolchain_directory_name(name: str) -> bool:
    return name.startswith(TOOLCHAIN_PREFIX) and _is_hex(name[len(TOOLCHAIN_PREFIX) :], 16)


def remove(files: Iterable[os.DirEntry[str]]) -> tuple[int, int]:
    """Remove `files`, skipping those that another process removed first: (files, bytes)
    removed."""
    removed = freed = 0
    for file in files:
        try:
            size = file.stat(follow_symlinks=False).st_size
            os.unlink(file.path)
        except FileNotFoundError:
            continue
        removed += 1
        freed += size
    return removed, freed


def remove_empty_directories(directories: Iterable[str]) -> None:
    """Remove those of the toolchains' `directories` that are empty (a writer that made one
    again meanwhile drops its entry, as when `clear` takes its temporary file)."""
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError:  # not empty, or gone
            continue
