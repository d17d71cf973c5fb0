"""Fixes of xDSL 0.75 bugs that xfuse's inputs meet, applied when the `ew` dialect is imported.

- The MLIR lexer's string literal, `"(?:[^"\\\n\v\f]+|\\(?:...))*"`, nests a `+` in a `*`: on a
  literal left open (`func.func @"aaaa...` without its closing quote) the regex engine tries
  every way to split the run of characters, a time exponential in its length (`xfuse-opt` on
  a 200-character one ran past `tests/test_opt.py`'s 60 s; `xdsl-opt` hangs too). One character
  per repetition matches the same strings in linear time (0.25 s for the whole `xfuse-opt`).
- The `llvm` target (`xfuse-opt -t llvm`, `sort_llvm_flags`) lists an op's fast-math flags in
  the order of a frozenset of strings, which the process's string hash decides.
"""

from __future__ import annotations

import re
from typing import Any

from xdsl.utils.mlir_lexer import MLIRLexer

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
"""A double-quoted string literal, its escapes `\\n`, `\\t`, `\\\\`, `\\"` and two hex digits."""


def apply() -> None:
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL


def sort_llvm_flags() -> None:
    """Make the `llvm` target print each instruction's flags in LLVM's order (`reassoc nnan ninf
    nsz arcp contract afn`, as `mlir-translate` prints them): `xfuse-opt -t llvm` printed `fmul
    afn contract` in one process and `fmul contract afn` in another. Loads xDSL's LLVM backend
    (and llvmlite), so only the command that prints with it applies it."""
    from xdsl.backend.llvm import convert
    from xdsl.dialects import llvm

    converted = convert.convert_module
    if getattr(converted, "sorts_flags", False):
        return
    order = {flag.value: index for index, flag in enumerate(llvm.FastMathFlag)}

    def convert_module(*args: Any, **kwargs: Any) -> Any:
        module = converted(*args, **kwargs)
        for function in module.functions:
            for block in function.blocks:
                for instruction in block.instructions:
                    instruction.flags.sort(key=lambda flag: order.get(flag, len(order)))
        return module

    convert_module.sorts_flags = True  # type: ignore[attr-defined]
    convert.convert_module = convert_module
