"""The on-disk compile cache's files: where they live, what toolchain made them, how an entry is
sealed (a magic, a SHA-256 of the rest, then a pickled dict of builtins and xfuse's dataclasses),
written (atomically) and evicted (the least recently used, past `XFUSE_CACHE_MAX_BYTES`). Below
both of the cache's users: `xfuse.runtime.disk_cache`, which keeps programs, and
`xfuse.runtime.bound_calls`, which keeps `BOUND_CALL_IR`'s object code (the native glue every
call runs through) in an entry of the same form.

Layout: `<cache dir>/toolchain-<16 hex>/<SHA-256 in hex>.xfuse`, one subdirectory per toolchain
(a hash of `toolchain()`), so that two versions of xfuse, xDSL, llvmlite, Python, numpy or
ml_dtypes sharing a directory keep their entries apart instead of replacing each other's.
Entries written directly in the cache dir (before 2026-12-03) are still the cache's to count,
evict and clear, never read."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import importlib.util
import os
import pickle
import stat
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import llvmlite
import numpy as np

import xfuse

ENTRY_SUFFIX = ".xfuse"
ENTRY_MODE = 0o644
MAGIC = b"XFUSE-CACHE-3\n"
"""The first bytes of every entry (the `3` is the layout's version, raised where its fields
change within a version of xfuse: an installed package's toolchain is its version alone, and
a 0.2.27 entry of layout 2 lacked `repeated_axes`, a KeyError on loading it)."""
TEMPORARY_PREFIX = ".xfuse-tmp-"
TOOLCHAIN_PREFIX = "toolchain-"
"""A toolchain's subdirectory is this and 16 hex digits of a SHA-256 of `toolchain()`."""
SIZE_CHECK_MARKER = ".xfuse-size-checked"
"""A file in the cache dir whose modification time is the last size check's (`size_check_due`)."""


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
        )
    return False


_PACKAGE_PREFIX = os.path.join(os.path.dirname(xfuse.__file__), "")


@functools.cache
def warn_once(message: str) -> None:
    """A `RuntimeWarning` of `message`, once per message (the cache's problems: the caller goes
    on without it), at the user's line: the first frame outside the xfuse package, wherever in
    xfuse the cache was reached from (Python 3.12's `skip_file_prefixes`; 3.11 is supported)."""
    stacklevel, frame = 1, sys._getframe()
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_PREFIX):
        stacklevel, frame = stacklevel + 1, frame.f_back
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)


DEFAULT_MAX_BYTES = 2**30
"""The cache's size limit where `XFUSE_CACHE_MAX_BYTES` sets none: 1 GiB, some 20,000 to
80,000 entries (13-50 KB each); ccache's is 5 GB of object files."""
SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
SIZE_UNITS |= {f"{unit}i": 1024 ** (power + 1) for power, unit in enumerate("kmgt")}
"""The suffixes of a size (ccache's), here in any case and with or without a `b` after them."""


def parse_size(text: str) -> int | None:
    """The bytes that `text` names (`1048576`, `500M`, `1.5GiB`, `2 gb`), or None if it names
    none. Whole bytes, computed exactly (no float rounding of `1.1T`), rounded down; a size
    that is not zero but under one byte (`0.5`, `0.0001k`) is None, not 0, which is no limit."""
    word = text.strip().lower().removesuffix("b")
    number = word.rstrip("kmgti")
    unit = SIZE_UNITS.get(word[len(number) :])
    number = number.rstrip()
    whole, _, fraction = number.partition(".")
    if unit is None or not number.isascii() or not (whole + fraction).isdigit():
        return None
    # (zeros that change nothing dropped before `int()`, which takes at most 4,300 digits: a
    # value of more was a ValueError at every compile; one that still has more is no size)
    whole, fraction = whole.lstrip("0"), fraction.rstrip("0")
    if max(len(whole), len(fraction.lstrip("0"))) > sys.get_int_max_str_digits():
        return None
    numerator = int(fraction.lstrip("0") or "0")
    size = int(whole or "0") * unit + numerator * unit // 10 ** len(fraction)
    return None if size == 0 and (whole + fraction) else size


def size_setting(variable: str, default: int, examples: str, zero: str, owner: str) -> int:
    """The size the environment `variable` names (`parse_size`: `examples` show it; 0 does
    what `zero` says), else `default`; a value that is no size warns once, saying that
    `owner` keeps its default limit, and gives `default`."""
    value = os.environ.get(variable, "")
    if not value.strip():
        return default
    size = parse_size(value)
    if size is None:
        warn_once(
            f"xfuse: {variable}={value!r} is no size (a number of bytes, with k, M, G, T or "
            f"Ki, Mi, Gi, Ti after it if wanted: {examples}; 0 {zero}); {owner} keeps its "
            f"default limit, {default:,} bytes",
        )
        return default
    return size


def max_bytes() -> int | None:
    """The cache's size limit: `XFUSE_CACHE_MAX_BYTES` (None where it is 0: no limit), else
    `DEFAULT_MAX_BYTES`; a value that is no size warns once and leaves the default."""
    size = size_setting(
        "XFUSE_CACHE_MAX_BYTES",
        DEFAULT_MAX_BYTES,
        "500M, 2GiB",
        "for no limit",
        "the compile cache",
    )
    return size or None


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
    if fields is None or fields.get("toolchain") != toolchain or fields.get("digest") != digest:
        return None
    return fields


def _make_shared_directory(directory: Path) -> None:
    """`directory` (a toolchain's, in the cache directory) made where it is not, shared as the
    cache directory is: its permission bits, the sticky bit included. With the process's umask
    the first user owned it (0755: others' writes refused, with 077 their reads too), where the
    cache directory (1777) was every user's."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir()
    except FileExistsError:
        return
    with contextlib.suppress(OSError):  # (another's cache directory: its bits as they are)
        directory.chmod(stat.S_IMODE(directory.parent.stat().st_mode))


def write_atomically(path: Path, data: bytes) -> bool:
    """Write `data` to a temporary file next to `path`, then rename it over `path`; False where
    a concurrent `clear` removed the temporary file or its directory first."""
    _make_shared_directory(path.parent)
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


USE_RESOLUTION_NS = 60 * 10**9
"""How stale an entry's modification time may be before a hit sets it to now (its last use,
which eviction goes by): at most one metadata write per entry and minute, not one per hit."""


@contextlib.contextmanager
def opened_regular_file(path: str | Path) -> Iterator[tuple[BinaryIO, os.stat_result] | None]:
    """`path` opened to read, with its status, where it is a regular file; None where it is not
    (reading a FIFO there waited forever, a link to /dev/zero never ended). OSError where it
    cannot be opened."""
    # Opening a FIFO without O_NONBLOCK waits for a writer; a regular file ignores it.
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
        status = os.fstat(file.fileno())
        yield (file, status) if stat.S_ISREG(status.st_mode) else None


MAX_ENTRY_BYTES = 1 << 28
"""The largest entry read or written, 256 MiB (entries are 13-50 KB; a chain of 10,000 ops made
one of 0.9 MB, 2026-12-06): a larger file at an entry's name is a miss, never read whole (one of
64 GiB raised MemoryError from `xfuse.compile` and `xfuse cache info`)."""


def read_entry(path: Path, digest: str, toolchain: str) -> dict[str, Any] | None:
    """The fields sealed in the entry at `path` (`unseal`); None where it cannot be read or is
    not a regular file (`opened_regular_file`). A good entry's modification time becomes now,
    where it is a minute old or more and this process may set it: eviction takes the least
    recently used first."""
    try:
        # (in the `try`: pathlib raises what is not ENOENT or ENOTDIR, as a name too long or a
        # directory this user may not search, where xfuse.compile failed on it)
        if path.parent.is_symlink():
            return None  # see `write_entry`
        with opened_regular_file(path) as opened:
            if opened is None:
                return None
            file, status = opened
            if status.st_size > MAX_ENTRY_BYTES:
                return None
            fields = unseal(file.read(), digest, toolchain)
            if fields is not None and time.time_ns() - status.st_mtime_ns >= USE_RESOLUTION_NS:
                # Another user's entry in a shared cache may not be ours to touch: it then
                # ages (and may be evicted first), no error.
                with contextlib.suppress(OSError):
                    os.utime(file.fileno())
            return fields
    except OSError:
        return None


SIZE_CHECK_INTERVAL_NS = 60 * 10**9
"""How often a write checks the cache's size, at most, whichever process writes: the check lists
and stats every entry, 13 ms for 1,000 entries and 240 ms for 20,000 on the 2-CPU host of
2026-12-03 (loaded), more than a compile of the GELU; between checks the cache may pass its
limit by what is written in a minute."""


def size_check_due(directory: Path) -> bool:
    """Whether the last size check of `directory`'s cache (by any process) is a minute old or
    more, or in the future (a clock set back); if so, this one is now (the marker touched).
    Where the marker cannot be kept (something not a regular file at its name, a link too, or
    another user's file), every write checks: the limit holds, at the cost of the listing."""
    marker = directory / SIZE_CHECK_MARKER
    try:
        status = os.lstat(marker)
    except FileNotFoundError:
        status = None
    if status is not None and not stat.S_ISREG(status.st_mode):
        return True  # not the marker: never followed nor replaced (it may be someone's)
    now = time.time_ns()
    if status is not None and abs(now - status.st_mtime_ns) < SIZE_CHECK_INTERVAL_NS:
        return False
    with contextlib.suppress(OSError):  # not ours to write: no marker, the check is made
        descriptor = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, ENTRY_MODE)
        try:
            os.utime(descriptor, ns=(now, now))
        finally:
            os.close(descriptor)
    return True


def write_entry(directory: Path, path: Path, data: bytes) -> None:
    """`write_atomically`, then `evict` past the size limit where a check is due
    (`size_check_due`); warns once per directory and reason where `directory` is unwritable:
    the caller goes on without the cache. A toolchain's subdirectory that is a link is
    unwritable (and `read_entry` reads nothing through it): `info`, eviction and `clear` never
    follow a link (`own_files`), so what was written through it grew without limit."""
    if len(data) > MAX_ENTRY_BYTES:
        return  # (never read)
    try:
        if path.parent.is_symlink():
            raise OSError(errno.ELOOP, f"{path.parent.name} is a link, which it does not follow")
        if write_atomically(path, data):
            limit = max_bytes()
            if limit is not None and size_check_due(directory):
                evict(directory, limit, keep=path)
    except OSError as error:
        warn_once(
            f"xfuse: cannot write the compile cache in {directory} ({_reason(error)}); set "
            "XFUSE_CACHE_DIR to a writable directory or XFUSE_CACHE=0",
        )


def _reason(error: OSError) -> str:
    """Why the cache could not be written, for its warning: mkdir's "File exists" said nothing
    of a link to a missing directory, a link to itself, or a file where a directory goes."""
    path = Path(error.filename) if isinstance(error, FileExistsError) and error.filename else None
    with contextlib.suppress(OSError):  # (a path this user may not look at: the error's words)
        if path is not None and not path.is_dir():
            if path.is_symlink() and not path.exists():
                return f"{path.name} is a link to nothing: its target is missing or a loop of links"
            return f"{path.name} is not a directory"
    return error.strerror or str(error)


class OwnFiles(NamedTuple):
    """The cache's files in a cache directory (`own_files`)."""

    entries: list[os.DirEntry[str]]
    """Regular files named `<SHA-256 in hex>.xfuse`, as `entry_path` names them, in the
    toolchains' subdirectories and (written before those) in the directory itself."""
    temporaries: list[os.DirEntry[str]]
    """Regular files named `TEMPORARY_PREFIX...`, where `entries` may be."""
    directories: list[str]
    """The toolchains' subdirectories (real directories, not links to one)."""
    unreadable: list[OSError]
    """Of `directories`, those this user may not list (another user's, 0700 in a shared
    cache; their entries are not in `entries`), as the errors of listing them."""


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
    unreadable: list[OSError] = []
    for subdirectory in sorted(directories):
        try:
            listed = _scan(subdirectory)
        except PermissionError as error:  # (it stopped eviction, `info` and `clear` alike)
            unreadable.append(error)
            continue
        files += [file for file in listed if file.is_file(follow_symlinks=False)]
    files.sort(key=lambda file: file.path)
    return OwnFiles(
        [file for file in files if _is_entry_name(file.name)],
        [file for file in files if file.name.startswith(TEMPORARY_PREFIX)],
        sorted(directories),
        unreadable,
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


def remove(
    files: Iterable[os.DirEntry[str]],
    tolerated: type[OSError] = FileNotFoundError,
    kept: list[OSError] | None = None,
) -> tuple[int, int]:
    """Remove `files`, skipping those that raise `tolerated` (by default: another process
    removed one first), each error but a vanished file's appended to `kept`: (files, bytes)
    removed."""
    removed = freed = 0
    for file in files:
        try:
            size = file.stat(follow_symlinks=False).st_size
            os.unlink(file.path)
        except FileNotFoundError:
            continue
        except tolerated as error:
            if kept is not None:
                kept.append(error)
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


EVICT_TO = 0.9
"""Eviction goes down to this share of the limit: the next few writes then fit without evicting
again."""


def evict(directory: Path, limit: int | None, keep: Path) -> None:
    """Where the entries in `directory` (all toolchains') take more than `limit` bytes, remove
    the least recently used (by modification time, which a hit renews) down to `EVICT_TO` of
    it, never `keep` (the entry just written). Run after a write, at most once a minute
    (`size_check_due`), never on hits: it stats every entry. Safe with concurrent readers (one
    that opened an entry reads all of it; one that finds it gone compiles it) and writers (an
    entry removed twice or replaced meanwhile is skipped); an entry it cannot remove (another
    user's) stays."""
    if limit is None:
        return
    used: list[tuple[int, int, os.DirEntry[str]]] = []
    for file in own_files(directory).entries:
        try:
            status = file.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        used.append((status.st_mtime_ns, status.st_size, file))
    total = sum(size for _, size, _ in used)
    if total <= limit:
        return
    victims = []
    for _, size, file in sorted(used, key=lambda use: use[0]):
        if total <= limit * EVICT_TO:
            break
        if file.path != os.fspath(keep):
            victims.append(file)
            total -= size
    remove(victims, tolerated=OSError)
    remove_empty_directories({os.path.dirname(file.path) for file in victims} - {str(directory)})
