"""Rewrites of LLVM's optimized IR, after O3 and before code generation (`xfuse.codegen.native`
runs them): things LLVM's passes do not do or undo, done on the IR's text (llvmlite.binding
cannot edit a parsed module's instructions, nor can llvmlite.ir parse one).

- `streaming_stores`: the stores of a streaming twin's aligned vector loops non-temporal;
- `pair_bf16_parts`: bf16 loops two vector parts at a time, and their NaN quieting or subnormal
  fixup out of line;
- `reduce_rounded_remainders`: a clamped value's distance to its nearest integer in one
  AVX512DQ `vreduceps` where the rounding trick took an add and a subtraction;
- `saturate_exp2s`: then GELU's exp2 on its argument unclamped, its 2^n by `vscalefps`;
- `same_rsqrt_estimates`: AVX-512's 14-bit estimate for `approx.rsqrt` in every lane, scalar and
  narrower vectors too, so that an element's bits do not depend on its place;
- `prefetch_loads`: software prefetches in compute-heavy vector loops (where the host gains).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xfuse.transforms import (
    ROUNDED_EXACTLY_BELOW,
    ROUNDING_MAGIC,
    is_rounding_magic,
    packed_entry_name,
)

ELEMENT_BYTES = {"half": 2, "bfloat": 2, "i16": 2, "float": 4, "i32": 4, "double": 8, "i64": 8}
"""The bytes of each LLVM element type of a vector that a loop loads or stores."""

_DEFINED_NAME = re.compile(r'@"?([^"(]+)"?\(')


def _defined_name(define_line: str) -> str:
    """The function name of an LLVM IR `define` line (quoted or not)."""
    found = _DEFINED_NAME.search(define_line)
    assert found is not None, define_line
    return found[1]


_VECTOR_STORE = re.compile(
    r"^(\s+store <(\d+) x (half|bfloat|float|double|i16|i32|i64)> .*, align (\d+))(.*)$"
)


def streaming_stores(optimized_ir: str, twins: Sequence[str]) -> str:
    """After O3: in each twin's packed entry, make every vector store that LLVM proved aligned
    to its size non-temporal (`!nontemporal`: `vmovntps`, which needs that alignment). LLVM's
    loop vectorizer does not vectorize loops whose stores are non-temporal before it runs (X86
    takes one as legal only at vector alignment, and an element store has element alignment),
    so the marks go on its output. An unaligned vector store keeps a normal store."""
    lines = optimized_ir.splitlines()
    entries = {packed_entry_name(name) for name in twins}
    inside = False
    for index, line in enumerate(lines):
        if line.startswith("define "):
            inside = _defined_name(line) in entries
        elif line == "}":
            inside = False
        elif inside and (store := _VECTOR_STORE.match(line)):
            lanes, element, align = int(store[2]), store[3], int(store[4])
            if align >= lanes * ELEMENT_BYTES[element]:
                lines[index] = f"{store[1]}, !nontemporal !{{i32 1}}{store[5]}"
    return "\n".join(lines) + "\n"


def has_streaming_stores(optimized_ir: str) -> bool:
    """Whether `streaming_stores` marked any store of the module (none where no twin's loop
    vectorized: below `VECTORIZING_OPT_LEVEL`, or around a scalar libm call)."""
    return "!nontemporal" in optimized_ir


# ---------------------------------------------------------------------------------------------
# bf16 loops on two parts at a time (after O3)
# ---------------------------------------------------------------------------------------------

_PART_LANES = 16
"""Lanes of one vector part of the loops that `pair_bf16_parts` rounds by AVX512_BF16:
`<16 x float>` (AVX-512). Those it rounds in integer ops have the lanes LLVM gave them (16 on
AVX2, two registers a part; 32 on AVX-512 without AVX512_BF16)."""
_NAME = r"%[-\w.$]+"
_ASSIGNMENT = re.compile(rf"^\s+({_NAME}) = (.*)$")
_VECTOR_TYPE = re.compile(r"<(\d+) x (\w+)>")
_PART_ELEMENTS = frozenset({"float", "i32", "i16", "i1", "bfloat"})
_LANE_CROSSING = re.compile(r"\b(shufflevector|insertelement|extractelement|phi <)")
_VECTOR_LITERAL = re.compile(r"<(?:i\d+|half|bfloat|float|double|ptr) ")
"""The elements of a vector constant other than a splat or zero: its lanes may differ."""
_CALLEE = re.compile(r"\bcall\b[^@]*@([-\w.$]+)\(")
_ELEMENTWISE_INTRINSIC = re.compile(
    r"llvm\.(fma|fmuladd|fabs|minnum|maxnum|minimum|maximum|sqrt|copysign|floor|ceil|trunc|rint"
    r"|nearbyint|round|roundeven|smin|smax|umin|umax|abs)\.v\d+\w+$"
)
_VECTOR_LOAD = re.compile(r"= load <")
_VECTOR_STORE_ANY = re.compile(r"^\s+store <")
_PART_LOAD = re.compile(r"^\s+%[-\w.$]+ = load <(\d+) x i16>, ")
_PART_STORE = re.compile(r"^\s+store <(\d+) x i16> ")


@dataclass(frozen=True)
class _PartPatterns:
    """The instructions around the bf16 parts of `lanes` lanes that `pair_bf16_parts` matches."""

    lanes: int
    load: re.Pattern[str]
    """A part's load, as 16-bit integers."""
    widening: re.Pattern[str]
    """Its zero extension to 32 bits ..."""
    shift: re.Pattern[str]
    """... and the shift that makes them f32 bits."""
    store: re.Pattern[str]
    """A part's store, as 16-bit integers."""
    truncation: re.Pattern[str]
    """The 32-bit words whose low halves a store stores, truncated (software rounding)."""
    chosen: re.Pattern[str]
    """Those words: a select of NaN's quieted bits or the rounded ones (software rounding)."""
    quieted: re.Pattern[str]
    """NaN's kept bits with the quiet bit (software rounding)."""
    kept: re.Pattern[str]
    """The high half of a word, shifted down (software rounding)."""
    unordered: re.Pattern[str]
    """The lanes whose f32 value is a NaN (software rounding)."""
    float_load: re.Pattern[str]
    """A part's load of an f32 array (software rounding: an f32 bias beside bf16 arrays)."""

    def bytes(self, element: str = "i16") -> int:
        """The bytes of one part of an array of `element` (bf16's bits: `i16`)."""
        return ELEMENT_BYTES[element] * self.lanes


@functools.cache
def _part_patterns(lanes: int) -> _PartPatterns:
    halves, words = f"<{lanes} x i16>", f"<{lanes} x i32>"
    return _PartPatterns(
        lanes,
        load=re.compile(rf"^\s+({_NAME}) = load {halves}, ptr ({_NAME}), align (\d+)(.*)$"),
        widening=re.compile(rf"= zext {halves} ({_NAME}) to {words}$"),
        shift=re.compile(rf"= shl (?:nuw )?(?:nsw )?{words} ({_NAME}), splat \(i32 16\)$"),
        store=re.compile(rf"^\s+store {halves} ({_NAME}), ptr ({_NAME}), align (\d+)(.*)$"),
        truncation=re.compile(rf"= trunc (?:nuw )?(?:nsw )?{words} ({_NAME}) to {halves}$"),
        chosen=re.compile(
            rf"= select <{lanes} x i1> ({_NAME}), {words} ({_NAME}), {words} ({_NAME})$"
        ),
        quieted=re.compile(rf"= or (?:disjoint )?{words} ({_NAME}), splat \(i32 64\)$"),
        kept=re.compile(rf"= lshr (?:exact )?{words} ({_NAME}), splat \(i32 16\)$"),
        unordered=re.compile(
            rf"= fcmp uno <{lanes} x float> ({_NAME}), (zeroinitializer|{_NAME})$"
        ),
        float_load=re.compile(
            rf"^\s+({_NAME}) = load <{lanes} x float>, ptr ({_NAME}), align (\d+)(.*)$"
        ),
    )


_FIXUP_SELECT = re.compile(
    rf"= select <16 x i1> ({_NAME}), <16 x i16> ({_NAME}), <16 x i16> ({_NAME})$"
)
_FIXUP_SUBTRACT = re.compile(rf"= add <16 x i16> ({_NAME}), splat \(i16 -128\)$")
_ROUNDED_BITS = re.compile(rf"= bitcast <16 x bfloat> ({_NAME}) to <16 x i16>$")
_ROUNDING = re.compile(rf"= fptrunc <16 x float> ({_NAME}) to <16 x bfloat>$")
_TO_FLOATS = re.compile(rf"^\s+({_NAME}) = bitcast <16 x i32> ({_NAME}) to <16 x float>$")
_LIFT_SELECT = re.compile(
    rf"= select <16 x i1> ({_NAME}), <16 x i32> ({_NAME}), <16 x i32> ({_NAME})$"
)
_LIFT = re.compile(rf"= or (?:disjoint )?<16 x i32> ({_NAME}), splat \(i32 8388608\)$")
_BYTE_OFFSET = re.compile(rf"= getelementptr (?:inbounds )?(?:nuw )?i8, ptr ({_NAME}), i64 (\d+)$")
_BRANCH = re.compile(r"^\s+br ")
_RARELY = '!prof !{!"branch_weights", i32 1, i32 1048575}'
"""A conditional branch's metadata: the first successor is rarely taken (block placement puts
it out of the loop's straight line)."""
_CLASSIFY = "llvm.x86.avx512.fpclass.ps.512"
"""AVX512DQ's `vfpclassps` (LLVM's generic `llvm.is.fpclass` becomes three integer ops)."""
_SUBNORMAL_CLASS = 0x20
"""`vfpclassps`'s class of the subnormals (negative and positive)."""
_ROUND_PAIR = "llvm.x86.avx512bf16.cvtne2ps2bf16.512"
_ROUND_PAIR_DECLARATION = f"declare <32 x bfloat> @{_ROUND_PAIR}(<16 x float>, <16 x float>)"


def _indices(order: Sequence[int]) -> str:
    return ", ".join(f"i32 {i}" for i in order)


# A pair of parts holds 32 consecutive elements; in 128-bit lanes j = 0..3 of a 64-byte load,
# the "even" part gets elements 8j..8j+3 and the "odd" part 8j+4..8j+7 (what `vpunpcklwd` and
# `vpunpckhwd` with zero make of it: each element in the upper half of a dword, an f32).
_EVEN_WIDENING = _indices(
    [0 if w % 2 == 0 else 32 + 8 * (w // 8) + (w // 2) % 4 for w in range(2 * _PART_LANES)]
)
_ODD_WIDENING = _indices(
    [0 if w % 2 == 0 else 32 + 8 * (w // 8) + 4 + (w // 2) % 4 for w in range(2 * _PART_LANES)]
)
# `vcvtne2ps2bf16` packs the even part's 16 results, then the odd part's: the quadwords (4
# elements each) 0, 4, 1, 5, ... of that are the elements in order (one `vpermq` or `vpermpd`).
_ELEMENT_ORDER = _indices([0, 4, 1, 5, 2, 6, 3, 7])
_CONCATENATION = _indices(range(2 * _PART_LANES))


@dataclass(frozen=True)
class _Access:
    """A bf16 part's load (widened to f32 bits by a zext and a shift), an f32 part's load, or a
    bf16 part's store: of bits rounded
    by `fptrunc` with the subnormal fixup of `xfuse.transforms.to_llvm.narrow_bf16_in_hardware`,
    or in integer ops by `xfuse.transforms.to_llvm.narrow_bits` (software)."""

    lines: tuple[int, ...]
    """The lines of the load and its widening, or of the rounding, its fixup and the store (in
    software: the truncation and the store)."""
    pointer: str
    align: str
    metadata: str
    value: str
    """For a load: the widened bits (the shift's result; an f32 part's: the value loaded); for a
    store: the f32 value rounded."""
    bits: str = ""
    """For a store: the i32 bits of the f32 value before the fixup lifted its subnormals (in
    software: the bits whose high half a NaN's result keeps)."""
    nan: str = ""
    """For a store in software: the lanes whose value is a NaN, which store `bits`' high half
    quieted."""
    rounded: str = ""
    """For a store in software: the bits whose high half the other lanes store ..."""
    shifted: str = ""
    """... shifted down."""
    words: str = ""
    """For a store in software: the 32-bit words whose low halves it stores."""


class _NotPairable(Exception):
    """A vector loop body that `pair_bf16_parts` leaves as it is."""


def _users(lines: list[str]) -> dict[str, list[int]]:
    """The indices of the lines of `lines` that use each value (an operand, not a definition)."""
    users: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        operands = m[2] if (m := _ASSIGNMENT.match(line)) else line
        for name in dict.fromkeys(re.findall(_NAME, operands)):
            users.setdefault(name, []).append(i)
    return users


class _Block:
    def __init__(self, lines: list[str], patterns: _PartPatterns) -> None:
        self.lines = lines
        self.patterns = patterns
        self.defined = {m[1]: i for i, line in enumerate(lines) if (m := _ASSIGNMENT.match(line))}
        self.uses = _users(lines)

    def users(self, name: str) -> list[int]:
        return self.uses.get(name, [])

    def only_user(self, name: str, pattern: re.Pattern[str]) -> tuple[int, re.Match[str]]:
        users = self.users(name)
        if len(users) != 1 or not (found := pattern.search(self.lines[users[0]])):
            raise _NotPairable
        return users[0], found

    def definition(self, name: str, pattern: re.Pattern[str]) -> tuple[int, re.Match[str]]:
        index = self.defined.get(name)
        if index is None or not (found := pattern.search(self.lines[index])):
            raise _NotPairable
        return index, found

    def assigned(self, index: int) -> str:
        found = _ASSIGNMENT.match(self.lines[index])
        assert found
        return found[1]

    def place(self, pointer: str) -> tuple[str, int]:
        """The base and byte offset of `pointer` (a constant i8 offset of a base, or itself)."""
        index = self.defined.get(pointer)
        found = _BYTE_OFFSET.search(self.lines[index]) if index is not None else None
        return (found[1], int(found[2])) if found else (pointer, 0)

    def load(self, index: int, found: re.Match[str]) -> _Access:
        zext, _ = self.only_user(found[1], self.patterns.widening)
        shift, _ = self.only_user(self.assigned(zext), self.patterns.shift)
        return _Access((index, zext, shift), found[2], found[3], found[4], self.assigned(shift))

    def rounded_in_software(self, index: int, found: re.Match[str]) -> _Access:
        """The store at `index` (matched as `found`) of words chosen between NaN's kept bits,
        quieted, and the high half of other bits (what `narrow_bits` rounds to)."""
        patterns = self.patterns
        truncation, truncated = self.definition(found[1], patterns.truncation)
        _, chosen = self.definition(truncated[1], patterns.chosen)
        _, unordered = self.definition(chosen[1], patterns.unordered)
        _, quieted = self.definition(chosen[2], patterns.quieted)
        _, kept = self.definition(quieted[1], patterns.kept)
        _, rounded = self.definition(chosen[3], patterns.kept)
        if unordered[2] not in ("zeroinitializer", unordered[1]):
            raise _NotPairable
        return _Access(
            (truncation, index),
            found[2],
            found[3],
            found[4],
            unordered[1],
            bits=kept[1],
            nan=chosen[1],
            rounded=rounded[1],
            shifted=chosen[3],
            words=truncated[1],
        )

    def store(self, index: int, found: re.Match[str]) -> _Access:
        select, chosen = self.definition(found[1], _FIXUP_SELECT)
        subtract, lowered = self.definition(chosen[2], _FIXUP_SUBTRACT)
        bits, rounded = self.definition(chosen[3], _ROUNDED_BITS)
        rounding, value = self.definition(rounded[1], _ROUNDING)
        if lowered[1] != chosen[3] or len(self.users(chosen[3])) != 2:
            raise _NotPairable
        for name in (found[1], chosen[2], rounded[1]):
            if len(self.users(name)) != 1:
                raise _NotPairable
        _, lifted_float = self.definition(value[1], _TO_FLOATS)
        _, lift = self.definition(lifted_float[2], _LIFT_SELECT)
        _, lifted = self.definition(lift[2], _LIFT)
        if lift[1] != chosen[1] or lifted[1] != lift[3]:
            raise _NotPairable
        lines = (rounding, bits, subtract, select, index)
        return _Access(lines, found[2], found[3], found[4], value[1], lift[3])


def _pairs(
    block: _Block, accesses: list[_Access], part: int
) -> tuple[list[tuple[_Access, _Access]], set[int]]:
    """The accesses in pairs of parts of `part` bytes, and how many parts each base has: every
    base accessed at 0, 1, 2, ... parts' bytes (its parts in the vectorizer's order), an even
    number of parts."""
    by_base: dict[str, dict[int, _Access]] = {}
    for access in accesses:
        base, offset = block.place(access.pointer)
        if offset in by_base.setdefault(base, {}):
            raise _NotPairable
        by_base[base][offset] = access
    pairs = []
    for parts in by_base.values():
        size = len(parts) * part
        if len(parts) % 2 or sorted(parts) != list(range(0, size, part)):
            raise _NotPairable
        pairs += [(parts[k], parts[k + part]) for k in range(0, size, 2 * part)]
    return pairs, {len(parts) for parts in by_base.values()}


@dataclass(frozen=True)
class _PairedAccesses:
    """A vector loop body's accesses in pairs of parts: (even part, odd part)."""

    loads: list[tuple[_Access, _Access]]
    """The bf16 arrays' loads."""
    stores: list[tuple[_Access, _Access]]
    floats: list[tuple[_Access, _Access]]
    """The f32 arrays' loads (where the body may have them)."""


def _paired_accesses(
    block: _Block,
    store: Callable[[_Block, int, re.Match[str]], _Access],
    float_loads: bool = False,
) -> _PairedAccesses:
    """The bf16 loads and stores of `block` (a vector loop body), each `store` matched by
    `store`, and with `float_loads` its loads of f32 arrays, in pairs of parts; raises
    `_NotPairable` where computing the body's values in another lane order would not keep
    every element's result: an op that is not elementwise (a lane-crossing one, a call that is
    not an elementwise intrinsic, a vector constant whose lanes may differ), another load or
    store, a vector of another width, parts that do not pair, or arrays of different numbers
    of parts."""
    loads, stores, floats = [], [], []
    patterns = block.patterns
    for index, line in enumerate(block.lines):
        for lanes, element in _VECTOR_TYPE.findall(line):
            if int(lanes) != patterns.lanes or element not in _PART_ELEMENTS:
                raise _NotPairable
        callee = _CALLEE.search(line)
        if (
            _LANE_CROSSING.search(line)
            or _VECTOR_LITERAL.search(line)
            or (callee and not _ELEMENTWISE_INTRINSIC.match(callee[1]))
        ):
            raise _NotPairable
        if found := patterns.load.match(line):
            loads.append(block.load(index, found))
        elif float_loads and (found := patterns.float_load.match(line)):
            floats.append(_Access((index,), found[2], found[3], found[4], found[1]))
        elif _VECTOR_LOAD.search(line):
            raise _NotPairable
        elif found := patterns.store.match(line):
            stores.append(store(block, index, found))
        elif _VECTOR_STORE_ANY.match(line):
            raise _NotPairable
    (load_pairs, load_parts), (store_pairs, store_parts), (float_pairs, float_parts) = (
        _pairs(block, loads, patterns.bytes()),
        _pairs(block, stores, patterns.bytes()),
        _pairs(block, floats, patterns.bytes("float")),
    )
    if not store_pairs or len(load_parts | store_parts | float_parts) != 1:
        raise _NotPairable
    return _PairedAccesses(load_pairs, store_pairs, float_pairs)


def _widened_pairs(
    block: _Block,
    load_pairs: list[tuple[_Access, _Access]],
    tag: str,
    widening: Callable[[str, _Access, _Access], list[str]],
    inserted: dict[int, list[str]],
    renamed: dict[str, str],
) -> None:
    """Add to `inserted` the lines that load each pair of parts (`widening(name, even part, odd
    part)`, which defines `name`.even and `name`.odd, the values of each in the pairs' order)
    by the line before which they go, and to `renamed` the new names of the values they
    replace."""
    for number, (even, odd) in enumerate(load_pairs):
        first_use = min(i for access in (even, odd) for i in block.users(access.value))
        if max(block.defined.get(access.pointer, -1) for access in (even, odd)) >= first_use:
            raise _NotPairable
        name = f"%{tag}{number}"
        renamed |= {even.value: f"{name}.even", odd.value: f"{name}.odd"}
        inserted.setdefault(first_use, []).extend(widening(name, even, odd))


def _edited(
    block: _Block, inserted: dict[int, list[str]], renamed: dict[str, str], stores: set[int]
) -> list[str]:
    """The lines of `block` with `inserted` before theirs, the stores at `stores` dropped and
    the values of `renamed` used by their new names."""
    # LLVM numbers unnamed values in order, so the replaced instructions stay (dead: code
    # generation drops them) and the new ones get names; only the old stores go.
    uses = re.compile("|".join(re.escape(name) + r"(?![-\w.$])" for name in renamed))
    result = []
    for index, line in enumerate(block.lines):
        result += inserted.get(index, [])
        if index in stores:
            continue
        if renamed and not (index in block.defined.values() and block.assigned(index) in renamed):
            head, _, tail = line.partition(" = ") if _ASSIGNMENT.match(line) else ("", "", line)
            tail = uses.sub(lambda found: renamed[found[0]], tail)
            line = f"{head} = {tail}" if head else tail
        result.append(line)
    return result


def _round_pair(
    name: str, odd: str, even: str, store: _Access, fixed: str | None = None
) -> list[str]:
    """Lines that round the f32 parts `odd` and `even` to `name` (by `vcvtne2ps2bf16`), its bits
    to `name`.bits, and store those in order where `store` (the even part's) stored; with
    `fixed`, the bits of the subnormals (mask `fixed`.tiny) less 0x0080 first (the fixup of
    `xfuse.transforms.to_llvm.narrow_bf16_in_hardware`)."""
    stored = f"{name}.bits"
    lines = [
        f"  {name} = call <32 x bfloat> @{_ROUND_PAIR}(<16 x float> {odd}, <16 x float> {even})",
        f"  {stored} = bitcast <32 x bfloat> {name} to <32 x i16>",
    ]
    if fixed:
        lines += [
            f"  {fixed}.lowered = add <32 x i16> {stored}, splat (i16 -128)",
            f"  {fixed} = select <32 x i1> {fixed}.tiny, <32 x i16> {fixed}.lowered, "
            f"<32 x i16> {stored}",
        ]
        stored = fixed
    return [
        *lines,
        f"  {name}.quads = bitcast <32 x i16> {stored} to <8 x i64>",
        f"  {name}.ordered = shufflevector <8 x i64> {name}.quads, <8 x i64> poison, "
        f"<8 x i32> <{_ELEMENT_ORDER}>",
        f"  store <8 x i64> {name}.ordered, ptr {store.pointer}, align {store.align}"
        f"{store.metadata}",
    ]


def _fixed_pair(name: str, even: _Access, odd: _Access) -> list[str]:
    """Lines that round the pair of parts stored by `even` and `odd` (in the f32 values
    `name`.even and `name`.odd, their subnormals in the masks `name`.even.subnormal and
    `name`.odd.subnormal) with the subnormal fixup of
    `xfuse.transforms.to_llvm.narrow_bf16_in_hardware` and store the bits (`_round_pair`)."""
    lines = []
    for part, access in (("even", even), ("odd", odd)):
        lifted = f"{name}.{part}.lifted"
        lines += [
            f"  {lifted}.bits = or <16 x i32> {access.bits}, splat (i32 8388608)",
            f"  {lifted}.chosen = select <16 x i1> {name}.{part}.subnormal, "
            f"<16 x i32> {lifted}.bits, <16 x i32> {access.bits}",
            f"  {lifted} = bitcast <16 x i32> {lifted}.chosen to <16 x float>",
        ]
    fixed = f"{name}.fixed"
    return [
        *lines,
        f"  {fixed}.tiny = shufflevector <16 x i1> {name}.even.subnormal, "
        f"<16 x i1> {name}.odd.subnormal, <32 x i32> <{_CONCATENATION}>",
        *_round_pair(f"{fixed}.lifted", f"{name}.odd.lifted", f"{name}.even.lifted", even, fixed),
    ]


def _chained(tag: str, op: str, type_: str, masks: list[str]) -> tuple[list[str], str]:
    """Lines that combine `masks` (of `type_`) with `op`, and the name of the result."""
    lines, result = [], masks[0]
    for number, mask in enumerate(masks[1:]):
        lines.append(f"  %{tag}{number} = {op} {type_} {result}, {mask}")
        result = f"%{tag}{number}"
    return lines, result


def _widened_in_pairs(name: str, even: _Access, _odd: _Access) -> list[str]:
    """One 64-byte load of the pair of parts at `even` and the unpacks with zero that widen
    it (AVX-512: `vpunpcklwd`, `vpunpckhwd`)."""
    return [
        f"  {name} = load <32 x i16>, ptr {even.pointer}, align {even.align}{even.metadata}",
        f"  {name}.even.halves = shufflevector <32 x i16> zeroinitializer, <32 x i16> {name}, "
        f"<32 x i32> <{_EVEN_WIDENING}>",
        f"  {name}.odd.halves = shufflevector <32 x i16> zeroinitializer, <32 x i16> {name}, "
        f"<32 x i32> <{_ODD_WIDENING}>",
        f"  {name}.even = bitcast <32 x i16> {name}.even.halves to <16 x i32>",
        f"  {name}.odd = bitcast <32 x i16> {name}.odd.halves to <16 x i32>",
    ]


def _paired_in_hardware(lines: list[str], tag: str) -> list[str]:
    """`lines` (a vector loop body) with its bf16 parts rounded by AVX512_BF16 in pairs (see
    `pair_bf16_parts`); raises `_NotPairable` where that would not keep every element's result."""
    block = _Block(lines, _part_patterns(_PART_LANES))
    paired = _paired_accesses(block, _Block.store)
    inserted: dict[int, list[str]] = {}
    renamed: dict[str, str] = {}
    _widened_pairs(block, paired.loads, f"{tag}.load", _widened_in_pairs, inserted, renamed)
    if not _BRANCH.match(lines[-1]):
        raise _NotPairable
    stores, nonzeros, subnormals, classifications, fixup = set(), [], [], [], []
    for number, (even, odd) in enumerate(paired.stores):
        name = f"%{tag}.store{number}"
        stores |= {even.lines[-1], odd.lines[-1]}
        inserted.setdefault(max(even.lines[-1], odd.lines[-1]), []).extend(
            [
                f"  {name}.even = bitcast <16 x i32> {even.bits} to <16 x float>",
                f"  {name}.odd = bitcast <16 x i32> {odd.bits} to <16 x float>",
                *_round_pair(name, f"{name}.odd", f"{name}.even", even),
                f"  {name}.magnitude = and <32 x i16> {name}.bits, splat (i16 32767)",
                f"  {name}.nonzero = icmp ne <32 x i16> {name}.magnitude, zeroinitializer",
            ]
        )
        nonzeros.append(f"{name}.nonzero")
        for part in ("even", "odd"):
            subnormals.append(f"{name}.{part}.subnormal")
            classifications.append(
                f"  {subnormals[-1]} = call <16 x i1> @{_CLASSIFY}(<16 x float> "
                f"{name}.{part}, i32 {_SUBNORMAL_CLASS})"
            )
        fixup += _fixed_pair(name, even, odd)
    # The instruction flushes a subnormal to a zero of its sign: an iteration whose results are
    # all nonzero (one mask test a pair) stored what `narrow_bits` gives. One with a zero checks
    # its f32 values for subnormals (a zero is rounded right) and stores those fixed.
    all_nonzero, nonzero = _chained(f"{tag}.nonzero", "and", "<32 x i1>", nonzeros)
    any_subnormal, subnormal = _chained(f"{tag}.subnormal", "or", "<16 x i1>", subnormals)
    inserted.setdefault(len(lines) - 1, []).extend(
        [
            *all_nonzero,
            f"  %{tag}.nonzeros = bitcast <32 x i1> {nonzero} to i32",
            f"  %{tag}.zero = icmp ne i32 %{tag}.nonzeros, -1",
            f"  br i1 %{tag}.zero, label %{tag}.check, label %{tag}.latch, {_RARELY}",
            "",
            f"{tag}.check:",
            *classifications,
            *_out_of_line(tag, "subnormal", any_subnormal, subnormal, _PART_LANES, fixup),
        ]
    )
    return _edited(block, inserted, renamed, stores)


def _out_of_line(
    tag: str, kind: str, combined: list[str], mask: str, lanes: int, fixup: list[str]
) -> list[str]:
    """Lines that end a loop body's block: `combined` (which makes `mask`, of `lanes` lanes),
    a branch, taken rarely where a lane of `mask` is set (a `kind` of value), to the block
    `tag`.fixup of `fixup`, and `tag`.latch, where both go on: the loop's new last block."""
    return [
        *combined,
        f"  %{tag}.{kind}s = bitcast <{lanes} x i1> {mask} to i{lanes}",
        f"  %{tag}.{kind} = icmp ne i{lanes} %{tag}.{kind}s, 0",
        f"  br i1 %{tag}.{kind}, label %{tag}.fixup, label %{tag}.latch, {_RARELY}",
        "",
        f"{tag}.fixup:",
        *fixup,
        f"  br label %{tag}.latch",
        "",
        f"{tag}.latch:",
    ]


def _words_in_pairs(lanes: int) -> Callable[[str, _Access, _Access], list[str]]:
    """What loads a pair of bf16 parts of `lanes` elements as 32-bit words and widens each
    word's halves: the even elements by a shift, the odd ones by a mask."""
    words = f"<{lanes} x i32>"

    def widening(name: str, even: _Access, _odd: _Access) -> list[str]:
        return [
            f"  {name} = load {words}, ptr {even.pointer}, align {even.align}{even.metadata}",
            f"  {name}.even = shl {words} {name}, splat (i32 16)",
            f"  {name}.odd = and {words} {name}, splat (i32 -65536)",
        ]

    return widening


def _floats_in_pairs(lanes: int) -> Callable[[str, _Access, _Access], list[str]]:
    """What loads a pair of f32 parts of `lanes` elements and deals their elements into the
    even ones and the odd ones (two shuffles: the bf16 arrays' order)."""
    floats = f"<{lanes} x float>"
    even_lanes, odd_lanes = _indices(range(0, 2 * lanes, 2)), _indices(range(1, 2 * lanes, 2))

    def widening(name: str, even: _Access, odd: _Access) -> list[str]:
        return [
            f"  {name}.first = load {floats}, ptr {even.pointer}, align {even.align}"
            f"{even.metadata}",
            f"  {name}.second = load {floats}, ptr {odd.pointer}, align {odd.align}{odd.metadata}",
            f"  {name}.even = shufflevector {floats} {name}.first, {floats} {name}.second, "
            f"<{lanes} x i32> <{even_lanes}>",
            f"  {name}.odd = shufflevector {floats} {name}.first, {floats} {name}.second, "
            f"<{lanes} x i32> <{odd_lanes}>",
        ]

    return widening


def _paired_in_software(lines: list[str], tag: str) -> list[str]:
    """`lines` (a vector loop body) with its bf16 parts rounded in integer ops, in pairs (see
    `pair_bf16_parts`); raises `_NotPairable` where that would not keep every element's result."""
    first_load = next((found for line in lines if (found := _PART_LOAD.match(line))), None)
    if first_load is None:
        raise _NotPairable
    lanes = int(first_load[1])
    block = _Block(lines, _part_patterns(lanes))
    paired = _paired_accesses(block, _Block.rounded_in_software, float_loads=True)
    inserted: dict[int, list[str]] = {}
    renamed: dict[str, str] = {}
    _widened_pairs(block, paired.loads, f"{tag}.load", _words_in_pairs(lanes), inserted, renamed)
    _widened_pairs(
        block, paired.floats, f"{tag}.floats", _floats_in_pairs(lanes), inserted, renamed
    )
    words, mask = f"<{lanes} x i32>", f"<{lanes} x i1>"

    def stored(name: str, low: str, high: str, at: _Access) -> list[str]:
        """Lines that store, where `at` stored its part, the words of the low halves of `low`
        (whose high halves are zero) and the high halves of `high`."""
        return [
            f"  {name}.high = and {words} {high}, splat (i32 -65536)",
            f"  {name} = or {words} {low}, {name}.high",
            f"  store {words} {name}, ptr {at.pointer}, align {at.align}{at.metadata}",
        ]

    stores, nans, fixup = set(), [], []
    for number, (even, odd) in enumerate(paired.stores):
        name, fixed = f"%{tag}.store{number}", f"%{tag}.store{number}.fixed"
        stores |= {even.lines[-1], odd.lines[-1]}
        # The straight path stores each word as the rounding of numbers: the even element's
        # 16 bits, its low half, are its rounded bits shifted down; the odd one's, its high
        # half, those bits masked. A NaN's are its kept bits quieted (`narrow_bits`), and
        # (k >> 16 | 64) << 16 is (k | 1 << 22) & -65536.
        nans.append(f"{name}.nan")
        inserted.setdefault(max(even.lines[-1], odd.lines[-1]), []).extend(
            [
                *stored(name, even.shifted, odd.rounded, even),
                f"  {nans[-1]} = fcmp uno <{lanes} x float> {even.value}, {odd.value}",
            ]
        )
        fixup += [
            f"  {fixed}.quieted = or {words} {odd.bits}, splat (i32 4194304)",
            f"  {fixed}.chosen = select {mask} {odd.nan}, {words} {fixed}.quieted, "
            f"{words} {odd.rounded}",
            *stored(fixed, even.words, f"{fixed}.chosen", even),
        ]
    # An iteration with a NaN (one compare a pair) stores its words again, NaNs quieted.
    any_nan, nan = _chained(f"{tag}.nan", "or", mask, nans)
    inserted.setdefault(len(lines) - 1, []).extend(
        _out_of_line(tag, "nan", any_nan, nan, lanes, fixup)
    )
    return _edited(block, inserted, renamed, stores)


def _quieted_out_of_line(lines: list[str], tag: str) -> list[str]:
    """`lines` (a vector loop body whose bf16 parts do not pair) with the NaN quieting of each
    store rounded in integer ops out of line (see `pair_bf16_parts`); raises `_NotPairable`
    where the body has no such store or a store of bf16 parts of other bits."""
    first_store = next((found for line in lines if (found := _PART_STORE.match(line))), None)
    if first_store is None:
        raise _NotPairable
    lanes = int(first_store[1])
    block = _Block(lines, _part_patterns(lanes))
    stores = [
        block.rounded_in_software(index, found)
        for index, line in enumerate(lines)
        if (found := block.patterns.store.match(line))
    ]
    words, halves = f"<{lanes} x i32>", f"<{lanes} x i16>"
    inserted: dict[int, list[str]] = {}
    fixup = []
    for number, store in enumerate(stores):
        name = f"%{tag}.store{number}"
        place = f"ptr {store.pointer}, align {store.align}{store.metadata}"
        inserted[store.lines[-1]] = [
            f"  {name} = trunc {words} {store.shifted} to {halves}",
            f"  store {halves} {name}, {place}",
        ]
        fixup.append(f"  store {halves} {block.assigned(store.lines[0])}, {place}")
    # One compare for two stores' values.
    nans = [f"%{tag}.store{number}.nan" for number in range(0, len(stores), 2)]
    for nan, first, second in itertools.zip_longest(nans, stores[::2], stores[1::2]):
        other = (second or first).value
        inserted[max(inserted)].append(
            f"  {nan} = fcmp uno <{lanes} x float> {first.value}, {other}"
        )
    any_nan, nan = _chained(f"{tag}.nan", "or", f"<{lanes} x i1>", nans)
    inserted.setdefault(len(lines) - 1, []).extend(
        _out_of_line(tag, "nan", any_nan, nan, lanes, fixup)
    )
    return _edited(block, inserted, {}, {store.lines[-1] for store in stores})


def pair_bf16_parts(optimized_ir: str) -> str:
    """After O3: each vector loop body that reads and writes only bf16 arrays (the LLM GELU),
    in `<16 x float>` parts interleaved an even number of times, with every rounding done by
    AVX512_BF16 (`lower_bf16_hardware_narrowings`), computes each pair of parts (32 consecutive
    elements) in another lane order: one 64-byte load and two unpacks with zero (`vpunpcklwd`,
    `vpunpckhwd`: 1 instruction a part) widen what took a zero-extending load and a shift (2),
    and one `vcvtne2ps2bf16` rounds both parts (the same work as one `vcvtneps2bf16`) before
    one `vpermq` (or `vpermpd`) puts the elements back in order. Every op between is elementwise
    and every array is read and written in the same order, so each element's result is the same
    bits; a body with anything else (a lane-crossing op, another load or store, a call that is not
    an elementwise intrinsic, a vector of another width, parts that do not pair) is left as it
    is. The bf16 LLM GELU's loop on Emerald Rapids: 302 instructions -> 288 for 128 elements,
    llvm-mca's bound 200 -> 176 cycles, 0.86-0.88x the CPU time in cache (a loaded host).

    The subnormal fixup of `xfuse.transforms.to_llvm.narrow_bf16_in_hardware` leaves the
    loop's straight path: it rounds the parts as they are and stores them, then one mask test a
    pair checks that no result is a zero (the instruction flushes a subnormal to a zero of its
    sign). An iteration with a zero branches out of line, classifies its f32 values
    (`vfpclassps`), and only if one is subnormal rounds them again with the fixup and stores
    them again (an exact zero needs no fixup, so a zero-heavy output takes the first branch
    only). The LLM GELU's loop: 299 -> 266 instructions, 0.96-0.98x the time in cache and
    0.97x at 2^24; with half its results zero 1.0x, where fixing every iteration that has a
    zero took 1.1x (docs/benchmarks.md).

    Where the host has no AVX512_BF16 (AVX2; AVX-512 before Cooper Lake and Zen 4) the loops
    round in integer ops (`xfuse.transforms.to_llvm.narrow_bits`) in parts of the lanes LLVM
    chose; their pairs take another order, which needs no shuffle for bf16: each pair of parts
    is loaded as 32-bit words, whose low halves (the even elements) a shift widens and whose
    high halves (the odd ones) a mask, where each part took a zero-extending load (a shuffle)
    and a shift; the even results' words keep their low halves, the odd ones' rounding keeps its
    high halves by a mask where it shifted down, and one `or` makes the words stored, where each
    part took a truncation (a pack and a permute on AVX2). An f32 array among them (the LLM
    GELU's f32 bias) takes the same order: two shuffles deal a pair of its parts into the even
    elements and the odd ones. The quieting of NaNs (a select a part) leaves the straight path:
    it stores every word as a number's, one compare a pair finds an iteration with a NaN, and
    that one stores its words again, NaNs quieted. A body whose parts do not pair (one part, an
    f32 output) keeps them; only its NaNs' quieting goes out of line so, one compare for two
    parts. The LLM bf16 GELU's loop as AVX2 code (Intel's tuning): 338 -> 339 instructions for
    64 elements, llvm-mca's simulation of Skylake 132 -> 120 cycles, of Zen 3 (Zen 3's code) 118
    -> 88, 0.72-0.80x the time in cache; with an f32 bias 171 -> 158 instructions for 32,
    0.77-0.87x (docs/benchmarks.md)."""
    if " to <16 x bfloat>" in optimized_ir:
        rewrites: tuple[Callable[[list[str], str], list[str]], ...] = (_paired_in_hardware,)
    elif _ROUNDED_IN_SOFTWARE.search(optimized_ir):
        rewrites = (_paired_in_software, _quieted_out_of_line)
    else:
        # No part rounded to bf16, so no body pairs: skip the scan (~1 ms a small program).
        return optimized_ir

    def paired(body: list[str], number: int) -> list[str]:
        for rewrite in rewrites:
            try:
                return rewrite(body, f"xfuse.pair{number}")
            except _NotPairable:
                pass
        return body

    return _rewrite_vector_bodies(optimized_ir, paired, _ROUND_PAIR_DECLARATION)


_ROUNDED_IN_SOFTWARE = re.compile(r"= trunc (?:nuw )?(?:nsw )?<\d+ x i32> %[-\w.$]+ to <\d+ x i16>")
"""The truncation of words to the 16-bit results of `narrow_bits` in a vector loop."""


_VECTOR_BODY = re.compile(r"(vector\.body[\w.]*):")
_LABEL = re.compile(r"^[-\w.$]+:$")


def _rewrite_vector_bodies(
    optimized_ir: str, rewrite: Callable[[list[str], int], list[str]], declaration: str
) -> str:
    """`optimized_ir` with the instructions of each main vector loop body (a block LLVM's loop
    vectorizer names `vector.body`) replaced by `rewrite(body, number)`, `number` counting the
    bodies from 0 (for names of new values that stay unique); `declaration` (of what the new
    instructions may call) is added if a body calls it and the module declares no function
    of that name (LLVM prints its declarations with attributes). A rewritten body may add blocks
    (labels): the last one then ends the loop, so the phis of the loop's header and of the
    rest of the function name it where they named the body's block."""
    lines = optimized_ir.split("\n")
    result: list[str] = []
    start, number, changed = 0, 0, False
    latches: dict[str, str] = {}  # the function's bodies that got a new last block: its label
    while start < len(lines):
        line = lines[start]
        result.append(_rename_incoming(latches, line))
        latches = {} if line == "}" else latches
        start += 1
        if not (found := _VECTOR_BODY.match(line)):
            continue
        end = next(i for i in range(start, len(lines)) if not lines[i].startswith(" "))
        body = rewrite(lines[start:end], number)
        changed |= body != lines[start:end]
        labels = [i for i, new in enumerate(body) if _LABEL.match(new)]
        if labels:
            latches[found[1]] = body[labels[-1]].removesuffix(":")
        # Its phis name its own latch, and (a remainder loop right after a main loop whose body
        # got blocks) the body before it.
        phis = labels[0] if labels else len(body)
        body[:phis] = [_rename_incoming(latches, new) for new in body[:phis]]
        result += body
        start, number = end, number + 1
    name = re.search(r"@[-\w.$]+\(", declaration)
    assert name, declaration
    declared = re.search(rf"^declare [^@]*{re.escape(name[0])}", optimized_ir, re.MULTILINE)
    if changed and not declared and any(name[0] in line for line in result):
        result.append(declaration)
    return "\n".join(result)


def _rename_incoming(latches: dict[str, str], line: str) -> str:
    """`line` with each incoming block of its phi that `latches` maps renamed so (a line that is
    not a phi as it is)."""
    if not latches or " = phi " not in line:
        return line
    return re.sub(
        r", %([-\w.$]+) \]", lambda found: f", %{latches.get(found[1], found[1])} ]", line
    )


# ---------------------------------------------------------------------------------------------
# Remainders of the rounding trick by AVX512DQ's vreduceps (after O3)
# ---------------------------------------------------------------------------------------------

_REDUCE = "llvm.x86.avx512.mask.reduce.ps.512"
_REDUCE_DECLARATION = f"declare <16 x float> @{_REDUCE}(<16 x float>, i32, <16 x float>, i16, i32)"
_FLAGS = r"(?:[a-z]+ )*"
_CLAMP_COMPARE = re.compile(
    rf"^\s+({_NAME}) = fcmp (ogt|olt) <16 x float> ({_NAME}), splat \(float ([^)]+)\)$"
)
_CLAMP_SELECT = re.compile(
    rf"^\s+({_NAME}) = select {_FLAGS}<16 x i1> ({_NAME}), "
    rf"<16 x float> splat \(float ([^)]+)\), <16 x float> ({_NAME})$"
)
_CONSTANT_SUM = re.compile(
    rf"^\s+({_NAME}) = fadd {_FLAGS}<16 x float> ({_NAME}), splat \(float ([^)]+)\)$"
)
_DIFFERENCE = re.compile(rf"^(\s+)({_NAME}) = fsub {_FLAGS}<16 x float> ({_NAME}), ({_NAME})$")


def _llvm_float(text: str) -> float:
    """The value of a float constant as LLVM prints it: decimal, or a double's bits in hex."""
    if text.startswith("0x"):
        return struct.unpack(">d", bytes.fromhex(text[2:]))[0]
    return float(text)


def _clamped_values(body: list[str]) -> dict[str, tuple[str, float, float]]:
    """Each `<16 x float>` of `body` that selects of `xfuse.transforms.approx._clamp`'s form
    clamp (`select (fcmp ogt v, c), c, v`, then `olt` for a lower bound): the value they clamp
    and the bounds, (-inf, inf) for a side left open."""
    compares: dict[str, tuple[str, str, str]] = {}  # name: (predicate, value, bound)
    clamped: dict[str, tuple[str, float, float]] = {}
    for line in body:
        if "fcmp" in line and (found := _CLAMP_COMPARE.match(line)):
            compares[found[1]] = (found[2], found[3], found[4])
        elif "select" in line and (found := _CLAMP_SELECT.match(line)):
            compare = compares.get(found[2])
            if compare and compare[1:] == (found[4], found[3]):
                source, low, high = clamped.get(found[4], (found[4], -math.inf, math.inf))
                bound = _llvm_float(found[3])
                upper = compare[0] == "ogt"
                clamped[found[1]] = (
                    (source, low, min(high, bound)) if upper else (source, max(low, bound), high)
                )
    return clamped


def _reduced(body: list[str], _number: int) -> list[str]:
    """`body` with each `t - ((t + m) - m)` (m a rounding magic), where t is a `<16 x float>`
    clamped below 2^21 by the selects of `xfuse.transforms.approx`'s clamps, made one
    `vreduceps` of t (`reduce_rounded_remainders`)."""
    clamped = _clamped_values(body)
    sums: dict[str, tuple[str, float]] = {}  # name: (value, the constant added)
    result = []
    for line in body:
        if "fadd" in line and (found := _CONSTANT_SUM.match(line)):
            sums[found[1]] = (found[2], _llvm_float(found[3]))
        elif "fsub" in line and (found := _DIFFERENCE.match(line)):
            value, rounded = found[3], sums.get(found[4])
            shifted = sums.get(rounded[0]) if rounded else None
            _, low, high = clamped.get(value, (value, -math.inf, math.inf))
            if (
                rounded
                and shifted
                and shifted[0] == value
                and is_rounding_magic(shifted[1])
                and rounded[1] == -shifted[1]
                and -ROUNDED_EXACTLY_BELOW < low <= high < ROUNDED_EXACTLY_BELOW
            ):
                line = f"{found[1]}{found[2]} = {_reduction(value)}"
        result.append(line)
    return result


def _reduction(value: str) -> str:
    """The call of `vreduceps` on `value`: imm 0 (round to nearest even, no fraction bits
    kept), `value` where masked (no lane is: mask -1), the current rounding mode (4)."""
    vector = f"<16 x float> {value}"
    return f"call <16 x float> @{_REDUCE}({vector}, i32 0, {vector}, i16 -1, i32 4)"


def reduce_rounded_remainders(optimized_ir: str) -> str:
    """After O3, for hosts with AVX512DQ: in each vector loop body, r = t - ((t + m) - m), the
    rounding trick's distance of t from its nearest integer (ties to even; m is 1.5 * 2^23 plus
    an even offset, `xfuse.transforms.is_rounding_magic`), becomes one `vreduceps` of t (imm 0:
    t minus t rounded to an integer, to nearest even), where t is clamped below 2^21 by two
    selects as `approx._clamp` makes them (the trick rounds exactly only there, and t's NaN
    stays the same NaN). The same value for every t but -0, which `vreduceps` makes +0 and the
    trick -0: the only such r, GELU's exp2 of the logistic (`approx._exp2_of_logistic`), is a
    polynomial's variable added to 2 (2 + r P(r)), where that sign is lost; every seventh
    float32 pattern gives tanh-GELU the same bits. Two vector ops, (t + m) - m and the
    difference, become one (the shifted sum t + m stays: its bits give 2^n): on Zen 4 the bf16
    LLM GELU's loop went from 232 to 215 instructions per 128 elements, 0.88-0.96x the time in
    cache, with an f32 bias 0.90-0.94x; the f32 GELU loops the same time (docs/benchmarks.md)."""
    if "vector.body" not in optimized_ir or "<16 x float>" not in optimized_ir:
        return optimized_ir
    return _rewrite_vector_bodies(optimized_ir, _reduced, _REDUCE_DECLARATION)


_SCALEF = "llvm.x86.avx512.mask.scalef.ps.512"
_SCALEF_DECLARATION = (
    f"declare <16 x float> @{_SCALEF}(<16 x float>, <16 x float>, <16 x float>, i16, i32)"
)
_REDUCTION = re.compile(
    rf"^(\s+)({_NAME}) = call <16 x float> @{re.escape(_REDUCE)}\(<16 x float> ({_NAME}), "
)
_TO_WORDS = re.compile(rf"^\s+({_NAME}) = bitcast <16 x float> ({_NAME}) to <16 x i32>$")
_EXPONENT_SHIFT = re.compile(rf"^\s+({_NAME}) = shl <16 x i32> ({_NAME}), splat \(i32 23\)$")
_PRODUCT = re.compile(rf"^(\s+)({_NAME}) = fmul {_FLAGS}<16 x float> ({_NAME}), ({_NAME})$")
_PLUS_ONE = re.compile(rf"= fadd {_FLAGS}<16 x float> ({_NAME}), splat \(float 1\.000000e\+00\)$")
SATURATED_BELOW = -25.0
"""The lower clamp of an exp2 at or below which 1 + 2^t is 1 exactly (2^t under half an ulp of
1, 2^-24, with its polynomial's error), so that 1 + 2^t of t unclamped is too."""
SATURATED_FROM = 128.0
"""The upper clamp of an exp2 at or above which 2^t overflows to +inf (n at least 128), so
that 2^t of t unclamped is +inf too."""


_EXPONENT_BIAS = "0x" + struct.pack(">d", -(ROUNDING_MAGIC + 127)).hex().upper()
"""-(1.5 * 2^23 + 127) as LLVM prints a float constant exactly (a double's bits in hex): t + m
plus it is n + offset - 127, the exponent the shifted bits of t + m stand for."""


def _saturated(body: list[str], number: int) -> list[str]:
    """`body` with each exp2 of `reduce_rounded_remainders`' form whose clamp only saturates
    1 + 2^t computed on t unclamped, 2^(n-1) applied by `vscalefps` (`saturate_exp2s`)."""
    clamped = _clamped_values(body)
    uses = {name: len(lines) for name, lines in _users(body).items()}  # lines using each value
    shifted: dict[str, str] = {}  # t + m: t
    rounded_back: dict[str, str] = {}  # (t + m) + c, the trick's (t + m) - m: t + m
    reduced: list[str] = []  # the t of each vreduceps(t)
    words: dict[str, str] = {}  # t + m's bits: t + m
    exponents: dict[str, str] = {}  # those shifted left 23: t + m
    scales: dict[str, str] = {}  # those as floats, 2^(n + offset - 127): t + m
    products: dict[str, tuple[str, str]] = {}  # 2 e^r times the scale: (2 e^r, t + m)
    plus_one: set[str] = set()  # the values 1 is added to
    for line in body:
        if found := _PLUS_ONE.search(line):
            plus_one.add(found[1])
        if found := _CONSTANT_SUM.match(line):
            if is_rounding_magic(_llvm_float(found[3])):
                shifted[found[1]] = found[2]
            elif found[2] in shifted:
                rounded_back[found[1]] = found[2]
        elif found := _REDUCTION.match(line):
            reduced.append(found[3])
        elif (found := _TO_WORDS.match(line)) and found[2] in shifted:
            words[found[1]] = found[2]
        elif (found := _EXPONENT_SHIFT.match(line)) and found[2] in words:
            exponents[found[1]] = words[found[2]]
        elif (found := _TO_FLOATS.match(line)) and found[2] in exponents:
            scales[found[1]] = exponents[found[2]]
        elif found := _PRODUCT.match(line):
            for factor, scale in ((found[3], found[4]), (found[4], found[3])):
                if scale in scales:
                    products[found[2]] = (factor, scales[scale])

    def saturating(value: str) -> bool:
        # one remainder and one shifted sum of t: both take t unclamped
        _, low, high = clamped.get(value, (value, -math.inf, math.inf))
        once = reduced.count(value) == 1 and list(shifted.values()).count(value) == 1
        return once and low <= SATURATED_BELOW and high >= SATURATED_FROM

    def only_scaled(shifted_sum: str) -> bool:
        # t + m, its bits, their shift and those as floats feed the scaling alone, but for the
        # trick's (t + m) - m, dead since `vreduceps` took the remainder
        dead = [name for name, sum_ in rounded_back.items() if sum_ == shifted_sum]
        chain = [
            name
            for steps in (words, exponents, scales)
            for name in steps
            if steps[name] == shifted_sum
        ]
        return (
            all(not uses.get(name) for name in dead)
            and uses.get(shifted_sum) == 1 + len(dead)
            and all(uses.get(name) == 1 for name in chain)
        )

    scaled = {
        product: (factor, shifted_sum)
        for product, (factor, shifted_sum) in products.items()
        if uses.get(product) == 1
        and product in plus_one
        and saturating(shifted[shifted_sum])
        and only_scaled(shifted_sum)
    }
    unclamped = {shifted[shifted_sum] for _, shifted_sum in scaled.values()}
    result = []
    for line in body:
        if (found := _CONSTANT_SUM.match(line)) and shifted.get(found[1]) in unclamped:
            source = clamped[found[2]][0]
            line = line.replace(f"> {found[2]}, splat", f"> {source}, splat")
        elif (found := _REDUCTION.match(line)) and found[3] in unclamped:
            line = f"{found[1]}{found[2]} = {_reduction(clamped[found[3]][0])}"
        elif (found := _PRODUCT.match(line)) and found[2] in scaled:
            factor, shifted_sum = scaled[found[2]]
            exponent = f"%xfuse.exponent{number}.{found[2][1:]}"
            result.append(
                f"{found[1]}{exponent} = fadd <16 x float> {shifted_sum}, "
                f"splat (float {_EXPONENT_BIAS})"
            )
            vector = f"<16 x float> {factor}"
            arguments = f"{vector}, <16 x float> {exponent}, {vector}, i16 -1, i32 4"
            line = f"{found[1]}{found[2]} = call <16 x float> @{_SCALEF}({arguments})"
        result.append(line)
    return result


def saturate_exp2s(optimized_ir: str) -> str:
    """After `reduce_rounded_remainders`, for hosts with AVX512DQ: where an exp2 of its form (t
    clamped, t + m, r = `vreduceps`(t), 2^(n + offset - 127) from t + m's bits shifted left 23)
    is only multiplied by 2 e^r (r's only use, as in `approx._exp2_of_logistic`) and added to 1,
    t + m used for nothing else, with a clamp at or below `SATURATED_BELOW` and at or above
    `SATURATED_FROM` (GELU's exp2 of the logistic, [-30, 128.5]), the clamp goes: t + m and r
    take t itself, and the product is AVX512F's `vscalefps` of 2 e^r by the exponent (t + m) -
    (1.5 * 2^23 + 127), which saturates as the clamp did: 1 + 2^t is 1 below the lower bound and
    +inf above the upper; `vreduceps` makes an infinite t's r 0 (the trick's r would be NaN), a
    NaN t stays NaN. Two ops (the clamp's minimum and maximum) and the shift go, an add comes
    (the exponent), and the FMA of the scaling and the add of 1 become a `vscalefps` and an add:
    the same bits (every seventh float32 pattern for tanh-GELU, GELU + bias + residual; every
    bf16 one for the LLM GELUs). On Zen 4, side by side with `reduce_rounded_remainders` alone
    (a prototype making the same loops): GELU + bias + residual 0.79-0.81x the time in cache,
    tanh-GELU 0.96-0.97x, the LLM bf16 GELUs 0.92-0.98x, and the bf16-bias one 72-77% of its
    ceiling at 2^24 against 68-69% (docs/benchmarks.md)."""
    if _REDUCE not in optimized_ir:
        return optimized_ir
    return _rewrite_vector_bodies(optimized_ir, _saturated, _SCALEF_DECLARATION)


# ---------------------------------------------------------------------------------------------
# One reciprocal square root estimate at every width (after O3)
# ---------------------------------------------------------------------------------------------

RAW_RSQRT_ESTIMATES = '"reciprocal-estimates"="sqrtf:0,vec-sqrtf:0"'
"""LLVM's function attribute for f32 reciprocal square root estimates without its Newton step,
which `xfuse.codegen.native.raw_rsqrt_estimates` gives where `approx.rsqrt`'s divisions are the
only estimating ops."""
_RSQRT14 = {
    1: "llvm.x86.avx512.rsqrt14.ss",
    4: "llvm.x86.avx512.rsqrt14.ps.128",
    8: "llvm.x86.avx512.rsqrt14.ps.256",
    16: "llvm.x86.avx512.rsqrt14.ps.512",
}
"""AVX-512's 14-bit reciprocal square root estimate by lanes (1: the scalar one), the 128- and
256-bit ones AVX512VL's."""
_RSQRT14_DECLARATIONS = {
    1: f"declare <4 x float> @{_RSQRT14[1]}(<4 x float>, <4 x float>, <4 x float>, i8)",
    4: f"declare <4 x float> @{_RSQRT14[4]}(<4 x float>, <4 x float>, i8)",
    8: f"declare <8 x float> @{_RSQRT14[8]}(<8 x float>, <8 x float>, i8)",
    16: f"declare <16 x float> @{_RSQRT14[16]}(<16 x float>, <16 x float>, i16)",
}
_ATTRIBUTE_GROUP = re.compile(r"^attributes (#\d+) = \{(.*)\}$")
_DEFINE_GROUP = re.compile(r"^define .* (#\d+) \{$")
_SQRT = re.compile(
    rf"^\s+({_NAME}) = (?:tail )?call {_FLAGS}(float|<(\d+) x float>) "
    rf"@llvm\.sqrt\.(?:f32|v\d+f32)\(\2 ({_NAME})\)$"
)
_ONE_OVER = re.compile(
    rf"^(\s+)({_NAME}) = fdiv ({_FLAGS})(float|<\d+ x float>) "
    rf"(?:1\.000000e\+00|splat \(float 1\.000000e\+00\)), ({_NAME})$"
)


def _rsqrt14(indent: str, name: str, value: str, lanes: int) -> list[str]:
    """`name` = AVX-512's estimate of 1 / sqrt(`value`), a float (`lanes` 1) or a vector."""
    if lanes > 1:
        vector = f"<{lanes} x float>"
        mask = "i16 -1" if lanes == 16 else "i8 -1"
        arguments = f"{vector} {value}, {vector} zeroinitializer, {mask}"
        return [f"{indent}{name} = call {vector} @{_RSQRT14[lanes]}({arguments})"]
    vector, estimate = f"{name}.xfuse.vector", f"{name}.xfuse.rsqrt14"
    four = "<4 x float>"
    return [
        f"{indent}{vector} = insertelement {four} poison, float {value}, i64 0",
        f"{indent}{estimate} = call {four} @{_RSQRT14[1]}({four} {vector}, {four} {vector}, "
        f"{four} zeroinitializer, i8 -1)",
        f"{indent}{name} = extractelement {four} {estimate}, i64 0",
    ]


def same_rsqrt_estimates(optimized_ir: str, widths: Sequence[int] = (1, 4, 8, 16)) -> str:
    """After O3, for hosts with AVX-512: in each function with `RAW_RSQRT_ESTIMATES`, every
    `1 / sqrt(s)` that may be estimated (`arcp`: `approx.rsqrt`'s, there) becomes AVX-512's
    14-bit estimate itself, at each of `widths` (lanes; 1: a float; 4 and 8 need AVX512VL).
    LLVM estimates a `<16 x float>` so (`vrsqrt14ps`) but a float or a narrower vector with the
    12-bit `vrsqrtss`/`vrsqrtps`, and the refinement of `approx.rsqrt`, within a hair of half an
    ulp from either, rounded some results near a tie the other way (on Zen 4, 2 and 4 of the
    2^18 floats around 0.16070688 in calls of 7 and of 24 elements against one call): an
    element's bits depended on whether it fell in the main loop, the remainder or an
    aligned-stores head, and so on the address of a fresh output."""
    groups = {
        found[1]
        for line in optimized_ir.splitlines()
        if (found := _ATTRIBUTE_GROUP.match(line)) and RAW_RSQRT_ESTIMATES in found[2]
    }
    if not groups:
        return optimized_ir
    result: list[str] = []
    used: set[int] = set()
    raw = False
    roots: dict[str, tuple[str, int]] = {}  # sqrt(s): (s, lanes)
    for line in optimized_ir.splitlines():
        if line.startswith("define "):
            raw = bool((found := _DEFINE_GROUP.match(line)) and found[1] in groups)
            roots = {}
        elif raw and (found := _SQRT.match(line)):
            roots[found[1]] = (found[4], int(found[3] or 1))
        elif (
            raw
            and (found := _ONE_OVER.match(line))
            and "arcp" in found[3].split()
            and found[5] in roots
            and roots[found[5]][1] in widths
        ):
            value, lanes = roots[found[5]]
            result += _rsqrt14(found[1], found[2], value, lanes)
            used.add(lanes)
            continue
        result.append(line)
    declared = {
        lanes
        for lanes in used
        if re.search(rf"^declare [^@]*@{re.escape(_RSQRT14[lanes])}\(", optimized_ir, re.MULTILINE)
    }
    result += [_RSQRT14_DECLARATIONS[lanes] for lanes in sorted(used - declared)]
    return "\n".join(result)


# ---------------------------------------------------------------------------------------------
# Prefetching the loads of compute-heavy loops (after O3)
# ---------------------------------------------------------------------------------------------

PREFETCH_DISTANCE = 4096
"""Bytes ahead of each load that a compute-heavy vector loop prefetches (`prefetch_loads`), on
Intel's cores: the LLM GELUs, silu, Mish and GELU + bias + residual at 2^24
(docs/benchmarks.md) took 0.70-1.03x the time without with 4 KiB, as with 2 or 8 KiB; 1 KiB
gained less, 16 KiB less on GELU."""

ZEN3_PREFETCH_DISTANCE = 2048
"""`PREFETCH_DISTANCE` on AMD's Zen 3 (`HostCpu.prefetch_distance`): in three runs at 2^24
(docs/benchmarks.md) GELU + bias + residual ran at 110-111% of its ceiling with 2 KiB against
95-103% with 4 KiB, the rsqrt scale at 107-116% against 101-105%; 1 KiB as 2, 8 and 16 KiB less,
one-input loops (erf-GELU, silu, Mish, softplus) alike at 2 and 4 KiB."""

PREFETCH_MIN_FLOAT_OPS = 2.5
"""Floating-point ops of 64-byte vectors per cache line loaded or stored from which a vector
loop counts as compute-heavy (`prefetch_loads`): the loops of activations with a
transcendental function have 7 or more, the rsqrt scale's 3.75, hardswish's 2.5, a streaming
kernel such as `x + b + r` (the benchmarks' ceiling) 1 or less. At 2^24 on the Intel Xeon
(docs/benchmarks.md) the prefetches took hardswish 0.90-0.93x the time (AVX2 code 0.85x) and
the rsqrt scale 0.92-0.94x (0.89-0.90x); `(x * 0.5 + 1) * x + 2`, 2 ops a line, 0.96x, `x * 2 +
1` 0.97x, `x * y + z` 1.00x. An op on narrower vectors counts for its share of 64 bytes (an
AVX2 host's 32-byte op as half), so that a loop is compute-heavy or not whatever the host's
vector width."""

LIBMVEC_CALL_FLOAT_OPS = 16
"""The floating-point ops a call of a libmvec variant (`call_libmvec`) counts as: the fast
path of `_ZGVeN16v_sinf` is 20 vector ops (glibc 2.36)."""

CACHE_LINEELEMENT_BYTES = 64

_FLOAT_OP = re.compile(
    r"= (fadd|fsub|fmul|fdiv|frem|fneg) |\bcall\b[^@]*@llvm\."
    r"(fma|fmuladd|sqrt|minnum|maxnum|minimum|maximum)\."
)
_VECTOR_ACCESS = re.compile(r"(?:= load|^\s+store) <(\d+) x (\w+)>")
_LOADED_POINTER = re.compile(rf"^\s+{_NAME} = load <\d+ x \w+>, ptr ({_NAME}),")
_OFFSET_POINTER = re.compile(
    rf"^\s+({_NAME}) = getelementptr (?:inbounds )?(?:nuw )?i8, ptr ({_NAME}), i64 (\d+)$"
)
_PREFETCH = "llvm.prefetch.p0"
_PREFETCH_DECLARATION = f"declare void @{_PREFETCH}(ptr, i32 immarg, i32 immarg, i32 immarg)"


def _vector_bytes(line: str) -> int:
    """The bytes of the first vector type in an instruction's `line` (a scalar's: 4)."""
    found = _VECTOR_TYPE.search(line)
    return int(found[1]) * ELEMENT_BYTES.get(found[2], 4) if found else 4


def _prefetched(body: list[str], number: int, distance: int) -> list[str]:
    """`body` (a vector loop body) with a prefetch `distance` bytes ahead of each load that
    starts a cache line of its array's part of an iteration, once a line (the loads that
    `pair_bf16_parts` replaced are still there), if the body is compute-heavy."""
    # The substring tests first: each regex's matches contain them, and they reject most
    # lines at a tenth of a search's cost (the searches took most of a compile's 2-4 ms here).
    accessed = sum(
        int(found[1]) * ELEMENT_BYTES.get(found[2], 1)
        for line in body
        if ("load <" in line or "store <" in line) and (found := _VECTOR_ACCESS.search(line))
    )
    float_op_bytes = sum(
        _vector_bytes(line)
        for line in body
        if ("= f" in line or "@llvm." in line) and _FLOAT_OP.search(line)
    ) + sum(LIBMVEC_CALL_FLOAT_OPS * _vector_bytes(line) for line in body if " @_ZGV" in line)
    if not accessed or float_op_bytes < PREFETCH_MIN_FLOAT_OPS * accessed:
        return body
    # The base and byte offset of each pointer a constant i8 offset of a base (see `_Block.place`).
    places = {
        found[1]: (found[2], int(found[3]))
        for line in body
        if (found := _OFFSET_POINTER.match(line))
    }
    result, lines = [], set()
    for index, line in enumerate(body):
        found = _LOADED_POINTER.match(line)
        place = places.get(found[1], (found[1], 0)) if found else None
        if place and place[1] % CACHE_LINEELEMENT_BYTES == 0 and place not in lines:
            lines.add(place)
            ahead = f"%xfuse.prefetch{number}.{index}"
            result += [
                f"  {ahead} = getelementptr i8, ptr {found[1]}, i64 {distance}",
                f"  call void @{_PREFETCH}(ptr {ahead}, i32 0, i32 3, i32 1)",
            ]
        result.append(line)
    return result


def prefetch_loads(optimized_ir: str, distance: int = PREFETCH_DISTANCE) -> str:
    """After O3: each vector loop body with `PREFETCH_MIN_FLOAT_OPS` or more floating-point ops
    per cache line it loads and stores prefetches the lines it loads `distance` bytes ahead
    (`llvm.prefetch` for reading into every cache level: `prefetcht0`), one prefetch per
    line: one iteration of such a loop is so long that the core's window of instructions
    reaches too few lines ahead to hide memory's latency, and the hardware prefetchers do not
    make up for it (a short loop's window reaches far enough: there prefetches gained nothing).
    A prefetch past an array's end does not fault; it has no effect on any result."""
    if "vector.body" not in optimized_ir:
        return optimized_ir
    return _rewrite_vector_bodies(
        optimized_ir, functools.partial(_prefetched, distance=distance), _PREFETCH_DECLARATION
    )
