"""A kernel's hot loop in its host assembly (`Kernel.asm`): what `benchmarks/activations.py`
hands `llvm-mca` for a loop's bound and what the tests read for the instructions a loop runs."""

from __future__ import annotations

import re

MASKED_STORE = re.compile(r"maskmov|^\s*vmov\w*\s+%[xyz]mm\d+, [^%]*\(.*\{%k\d\}")
"""A masked vector store: AVX2's `vmaskmovps`, AVX-512's `vmovups %zmm0, (%rax) {%k1}`."""

_LABEL = re.compile(r"\.LBB\w+:")
_CONDITIONAL_BRANCH = re.compile(r"\s+j(?!mp)\w+\s+(\.LBB\w+)")


def hot_loop(asm: str) -> list[str]:
    """The instructions of the first function's longest innermost loop (label to conditional
    backward branch, containing no other) that masks no store, or of its longest where every
    loop masks one: the unstreamed kernel's main vector loop (the masked remainder loop may be
    longer, with `interleave=1`). A cold block placed after its loop (f32 sin's large
    arguments) jumps back into it by `jmp`: that closes no loop of its own."""
    lines = asm.split("\n.Lfunc_end", 1)[0].splitlines()
    labels = {line[:-1]: i for i, line in enumerate(lines) if _LABEL.fullmatch(line)}
    loops = [
        (labels[branch[1]], i)
        for i, line in enumerate(lines)
        if (branch := _CONDITIONAL_BRANCH.match(line)) and labels.get(branch[1], i) < i
    ]
    innermost = [
        (start, end)
        for start, end in loops
        if not any(start <= s < e <= end and (s, e) != (start, end) for s, e in loops)
    ]
    bodies = [
        [
            line
            for line in lines[start + 1 : end + 1]
            if line.strip() and line.lstrip()[0] not in "#."
        ]
        for start, end in innermost
    ]
    unmasked = [body for body in bodies if not any(MASKED_STORE.search(line) for line in body)]
    return max(unmasked or bodies, key=len)


def hot_loop_mnemonics(asm: str) -> list[str]:
    """`hot_loop`'s instructions by mnemonic."""
    return [line.split()[0] for line in hot_loop(asm)]
