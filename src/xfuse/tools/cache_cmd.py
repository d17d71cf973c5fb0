"""`xfuse cache info|clear`: the on-disk compile cache (`xfuse.runtime.disk_cache`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

from xfuse.tools.cli import CliError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="show or empty the on-disk compile cache",
        description=(
            "The compile cache keeps each program's object code so that a new process loads it "
            "instead of compiling, in a subdirectory per toolchain (xfuse, xDSL, llvmlite, "
            "Python, numpy, ml_dtypes versions). Its directory is XFUSE_CACHE_DIR (~ expanded, "
            "a relative one taken from the working directory where it is first read), else the "
            "user cache dir; XFUSE_CACHE=0 (or false, off, no) turns it off. Past "
            "XFUSE_CACHE_MAX_BYTES (default 1GiB; 500M, 2G, 0 for no limit) a write evicts the "
            "least recently used entries."
        ),
    )
    parser.add_argument(
        "action",
        choices=("info", "clear"),
        metavar="{info,clear}",  # (argparse's errors named the dest: "required: action")
        help="info: directory, entries, sizes (each toolchain's too) and limit; "
        "clear: remove every entry",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print as JSON: info's fields; clear's directory, files removed and bytes freed",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from xfuse.runtime import cache_files, disk_cache

    off = (
        f"XFUSE_CACHE={os.environ['XFUSE_CACHE']}"
        if cache_files.cache_turned_off()
        else "no home directory for it"
    )
    directory = disk_cache.cache_dir()
    # The directory, or the nearest of its parents that exists, is a file: it said "entries: 0"
    # and "removed 0 file(s)", as of an empty cache (a compile warns that it cannot write).
    # A dangling link too (it was passed over for its parent: "entries: 0").
    existing = directory and next(
        p for p in [directory, *directory.parents] if p.exists() or p.is_symlink()
    )
    if existing and not existing.is_dir():
        dangling = not existing.exists()
        link = f"a link to {os.readlink(existing)}, which resolves to nothing" if dangling else ""
        if existing == directory:
            problem = link or "not a directory"
        else:
            problem = f"not a directory (in {existing}, {link or 'which is not one either'})"
        raise CliError(
            f"the cache directory {directory} is {problem}: set XFUSE_CACHE_DIR to a writable "
            "directory or XFUSE_CACHE=0"
        )

    if args.action == "clear":
        cleared = disk_cache.clear()
        if args.json:
            fields = {"directory": directory and str(directory), "removed": cleared.files}
            print(json.dumps({**fields, "bytes": cleared.bytes, "kept": len(cleared.kept)}))
        else:
            where = directory or f"(the cache is off: {off})"
            print(f"removed {cleared.files} file(s), {cleared.bytes:,} bytes, from {where}")
        if cleared.kept:
            first = cleared.kept[0]
            raise CliError(
                f"kept {len(cleared.kept)} file(s) it could not remove, the first "
                f"{first.filename}: {first.strerror}"
            )
        return 0
    info = disk_cache.info()
    if args.json:
        fields = dataclasses.asdict(info)
        print(json.dumps({**fields, "directory": info.directory and str(info.directory)}))
        return 0
    if info.directory is None:
        print(f"the compile cache is off ({off})")
        return 0
    limit = "none" if info.max_bytes is None else f"{info.max_bytes:,} bytes"
    current_toolchain = disk_cache.toolchain()
    print(f"directory: {info.directory}")
    print(f"entries:   {info.entries} ({info.total_bytes:,} bytes)")
    print(
        f"current:   {info.current} ({info.current_bytes:,} bytes; made by this toolchain for "
        "this host; the others are stale, damaged, for another CPU or C library, or GPU code "
        "linking another libdevice)"
    )
    print(f"limit:     {limit} (XFUSE_CACHE_MAX_BYTES; a write evicts the least recently used)")
    print(f"toolchain: {current_toolchain}")
    for files in info.toolchains:
        made_by = "this toolchain" if files.toolchain == current_toolchain else files.toolchain
        made_by = made_by or "unreadable"
        if not files.readable:
            made_by = "not readable by this user (another user's?): its entries not counted"
        if files.directory == os.curdir:  # not "this toolchain" even if it made them
            made_by = f"the layout before subdirectories, never read: {made_by}"
        print(f"  {files.directory}: {files.entries} entries, {files.bytes:,} bytes ({made_by})")
    return 0
