"""The `.ew` parser's name warnings, in a module of their own: a compile cache hit issues again
what the parse it skips would have issued, without importing the parser (and xDSL)."""

from __future__ import annotations

import hashlib
import warnings
from typing import Any, NamedTuple


class EwNameWarning(UserWarning):
    """A name that is neither declared nor assigned in a program that declares its inputs, close
    to one that is (a typo?): it is an input, as any undeclared name is."""

    filename = ""
    line = 0
    """Its `.ew` file and line, which the exception `-W error` makes of it carries too."""


class NameWarning(NamedTuple):
    """An `EwNameWarning` as the parse issued it: its message, file and line, and which program
    (`program_digest` of its source)."""

    message: str
    filename: str
    line: int
    program: str = ""


def program_digest(source: str) -> str:
    """A short digest that tells programs apart (in `_ISSUED`'s keys)."""
    return hashlib.sha256(source.encode(errors="surrogatepass")).hexdigest()[:16]


_ISSUED: dict[tuple[str, str], dict[Any, Any]] = {}
"""A warnings registry per `.ew` program and file, as each module has its
`__warningregistry__`: under Python's default filter each message at each line of a program
shows once (`xfuse lecture` parses its program some 9 times, and said so 9 times), and a
different program of the same name (`<source>`, as every `xfuse.compile` without a
`filename`) shows its own."""


def warn_name(warning: NameWarning) -> None:
    """Issue `warning`, at its `.ew` line (Python's format shows that line where the file
    exists): by the parse, and again where a compile cache hit skips the parse."""
    issued = EwNameWarning(warning.message)
    issued.filename, issued.line = warning.filename, warning.line
    registry = _ISSUED.setdefault((warning.filename, warning.program), {})
    warnings.warn_explicit(issued, EwNameWarning, warning.filename, warning.line, registry=registry)
