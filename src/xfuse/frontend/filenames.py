"""The `filename=` a program's diagnostics name it by, checked in a module of its own: the
runtime checks it before a compile cache hit, which imports neither the parser nor xDSL."""

from __future__ import annotations

import os


def check_filename(filename: object) -> str:
    """A `filename` option (of `parse_program`, `compile`, `bench`): a string, or a path
    (`pathlib.Path`) as its string; a TypeError naming anything else."""
    if isinstance(filename, os.PathLike):
        filename = os.fspath(filename)
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a string or a path, got {type(filename).__name__}")
    return filename
