"""Fixes of xDSL 0.75 bugs that xfuse's inputs meet, applied when the `ew` dialect is imported.

- The MLIR lexer's string literal, `"(?:[^"\\\n\v\f]+|\\(?:...))*"`, nests a `+` in a `*`: on a
  literal left open (`func.func @"aaaa...` without its closing quote) the regex engine tries
  every way to split the run of characters, a time exponential in its length (`xfuse-opt` on
  a 200-character one ran past `tests/test_opt.py`'s 60 s; `xdsl-opt` hangs too). One character
  per repetition matches the same strings in linear time (0.25 s for the whole `xfuse-opt`).
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
"""A double-quoted string literal, its escapes `\\n`, `\\t`, `\\\\`, `\\"` and two hex digits."""


def apply() -> None:
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL
