"""Reading the loop vectorizer's loops out of a kernel's optimized LLVM IR text, for the tests
that assert what a loop holds (test_lowering, test_math)."""

from __future__ import annotations

import re

VECTOR_BLOCK = re.compile(r"^(vector\.body\d*):.*?(?=^\S)", re.MULTILINE | re.DOTALL)


def vector_loops(llvm_ir: str) -> list[str]:
    """The bodies of the loops the loop vectorizer made, in order: each a `vector.body` block
    that it or a block after it in its function branches back to (a head's one masked
    iteration, `ew-kernel-to-loops`' `store-alignment`, is one with no branch back: LLVM
    proves it runs once)."""
    loops = []
    for found in VECTOR_BLOCK.finditer(llvm_ir):
        function_end = llvm_ir.find("\n}", found.start())
        if re.search(rf"label %{re.escape(found[1])}\b", llvm_ir[found.start() : function_end]):
            loops.append(found.group())
    return loops


def vector_body(llvm_ir: str) -> str:
    """The first vector loop's body."""
    loops = vector_loops(llvm_ir)
    assert loops, "no vector loop"
    return loops[0]
