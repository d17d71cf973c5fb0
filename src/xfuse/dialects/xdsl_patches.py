"""Fixes of xDSL 0.75 bugs that xfuse's inputs meet, applied when the `ew` dialect is imported.

- The MLIR lexer's string literal, `"(?:[^"\\\n\v\f]+|\\(?:...))*"`, nests a `+` in a `*`: on a
  literal left open (`func.func @"aaaa...` without its closing quote) the regex engine tries
  every way to split the run of characters, and each 2 characters more tripled the time
  (`xfuse-opt` on a 29-character line ran for minutes; `xdsl-opt` too). One character per
  repetition matches the same strings in linear time.
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
"""A double-quoted string literal, its escapes `\\n`, `\\t`, `\\\\`, `\\"` and two hex digits."""


def apply() -> None:
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL
