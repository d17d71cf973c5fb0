"""The `.ew` frontend under random and mutated programs (issue 7, hostile input).

Whatever the text, `parse_program` either returns a module that verifies and round-trips through
xDSL's printer and parser, or raises `EwSyntaxError` with a line, a column and a caret excerpt
that point into the source. Any other exception, or a parse that uses more than a few seconds of
CPU time (a hang), fails. The default run checks a few thousand programs; `pytest -m slow` checks
many more.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser

from xfuse.dialects import ew
from xfuse.frontend.language import EXCERPT_CELLS, EwSyntaxError, parse_program

NAMES = ["x", "b", "r", "h", "y", "out", "_t0", "tanh", "max", "exp", "foo"]
FUNCTIONS = sorted(ew.OPS_BY_MNEMONIC)
UNARY_FUNCTIONS = [f for f in FUNCTIONS if issubclass(ew.OPS_BY_MNEMONIC[f], ew.UnaryOp)]
BINARY_FUNCTIONS = [f for f in FUNCTIONS if issubclass(ew.OPS_BY_MNEMONIC[f], ew.BinaryOp)]
TERNARY_FUNCTIONS = [f for f in FUNCTIONS if ew.arity(ew.OPS_BY_MNEMONIC[f]) == 3]
COMPARISONS = ["<", "<=", ">", ">=", "==", "!="]
TOKENS = [
    *NAMES,
    *FUNCTIONS,
    *"=;+-*/(),#\n .[]?<>!",
    *COMPARISONS,
    "input",
    "bf16",
    "f32",
    "14336",
    "0.5",
    "1e-3",
    "2.",
    ".5",
    "1e",
    "1.2.3",
    "0x1F",
    "3abc",
    "'a'",
    "\t",
    "é",
    "\x00",
    "^",
]
CPU_LIMIT_S = 5.0
"""A parse of these programs (a few hundred characters at most) takes milliseconds: one that
uses this much CPU time is a hang or a runaway blow-up. CPU time, not wall time: other processes
on a loaded host stretch the wall clock, not the parse's own CPU time."""
WALL_LIMIT_S = 120.0
"""A backstop for a parse that blocks without using the CPU, which the CPU timer never sees."""


@contextmanager
def time_limit(cpu_s: float = CPU_LIMIT_S, wall_s: float = WALL_LIMIT_S) -> Iterator[None]:
    """Fail instead of hanging: SIGPROF interrupts a parse that has used `cpu_s` of CPU time,
    SIGALRM one still running after `wall_s`."""

    def interrupt(signum: int, frame: object) -> None:
        if signum == signal.SIGPROF:
            raise TimeoutError(f"parse_program used more than {cpu_s} s of CPU time")
        raise TimeoutError(f"parse_program took more than {wall_s} s")

    timers = {signal.SIGPROF: signal.ITIMER_PROF, signal.SIGALRM: signal.ITIMER_REAL}
    previous = {signum: signal.signal(signum, interrupt) for signum in timers}
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.setitimer(signal.ITIMER_REAL, wall_s)
    try:
        yield
    finally:
        for signum, timer in timers.items():
            signal.setitimer(timer, 0)
            signal.signal(signum, previous[signum])


def shown(text: str) -> str:
    """`text` as an excerpt shows it: ASCII control characters but tabs as code points."""
    return re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", lambda m: f"<U+{ord(m[0]):04X}>", text)


def cells(text: str) -> int:
    """The terminal cells of a shown excerpt of these programs' characters, a tab at most 8."""
    return len(text) + 7 * text.count("\t")


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, func.Func, ew.Ew):
        ctx.load_dialect(dialect)
    return ctx


def check(source: str, outputs: list[str] | None = None, dtype: str = "float32") -> None:
    """The frontend's contract on any text: a valid module or a located EwSyntaxError."""
    try:
        with time_limit():
            module = parse_program(source, outputs, dtype=dtype)
    except EwSyntaxError as error:
        lines = source.split("\n")
        assert 1 <= error.line <= len(lines)
        assert 1 <= error.column <= len(lines[error.line - 1]) + 1
        header, excerpt, caret = str(error).split("\n")
        assert header.startswith(f"<source>:{error.line}:{error.column}: error: ")
        assert error.source_line == lines[error.line - 1]
        before = shown(error.source_line[: error.column - 1])
        after = shown(error.source_line[error.column - 1 :])
        if cells(before + after) <= EXCERPT_CELLS:
            assert (excerpt, caret) == (before + after, re.sub(r"[^\t]", " ", before) + "^")
            return
        # a window around the caret, cut at either end or both (`...`), the caret above its place
        head, tail = excerpt[: len(caret) - 1], excerpt[len(caret) - 1 :]
        assert caret == re.sub(r"[^\t]", " ", head) + "^"
        assert head == before or (head.startswith("...") and before.endswith(head[3:]))
        assert tail == after or (tail.endswith("...") and after.startswith(tail[:-3]))
        assert (head, tail) != (before, after) and cells(excerpt) <= EXCERPT_CELLS + 6
        return
    module.verify()
    printed = str(module)
    assert str(Parser(context(), printed).parse_module()) == printed


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


def _expressions() -> st.SearchStrategy[str]:
    """Well-formed expressions over literals, every function and names `@0`, `@1`, ...

    Built once: `programs` replaces each `@i` by a readable name (strategies are slow to build).
    """
    leaves = st.one_of(
        st.integers(0, 9).map(lambda i: f"@{i}"),
        st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(repr),
        st.sampled_from(["0", "1", "0.5", "1e-30", "3.4e38", ".25", "7."]),
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(" ".join),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"-{e}"),
            st.tuples(st.sampled_from(UNARY_FUNCTIONS), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(BINARY_FUNCTIONS), inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]})"
            ),
            st.tuples(inner, st.sampled_from(COMPARISONS), inner).map(
                lambda t: f"({' '.join(t)})"  # comparisons do not chain
            ),
            st.tuples(st.sampled_from(TERNARY_FUNCTIONS), inner, inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]}, {t[3]})"
            ),
        )

    return st.recursive(leaves, extend, max_leaves=12)


EXPRESSIONS = _expressions()


@st.composite
def programs(draw: st.DrawFn) -> str:
    """A valid program: statements assigning fresh or reused names, with comments."""
    readable = ["x", "b", "r"]
    statements = []
    for index in range(draw(st.integers(1, 6))):
        target = draw(st.sampled_from(["h", "y", "out", f"t{index}", *readable[3:]]))
        expression = re.sub(
            r"@(\d)", lambda m: readable[int(m[1]) % len(readable)], draw(EXPRESSIONS)
        )
        comment = draw(st.sampled_from(["", "  # note", "# x = y;"]))
        statements.append(f"{target} = {expression};{comment}")
        readable.append(target)
    return "\n".join(statements) + draw(st.sampled_from(["", "\n", "\n# end"]))


@st.composite
def mutated_programs(draw: st.DrawFn) -> str:
    """A valid program with a few characters or tokens deleted, inserted, swapped or cut."""
    source = draw(programs())
    for _ in range(draw(st.integers(1, 3))):
        if not source:
            break
        at = draw(st.integers(0, len(source)))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "truncate", "duplicate"]))
        length = draw(st.integers(1, 4))
        if kind == "delete":
            source = source[:at] + source[at + length :]
        elif kind == "insert":
            source = source[:at] + draw(st.sampled_from(TOKENS)) + source[at:]
        elif kind == "replace":
            source = source[:at] + draw(st.sampled_from(TOKENS)) + source[at + length :]
        elif kind == "truncate":
            source = source[:at]
        else:
            source = source[:at] + source[at : at + 2 * length] + source[at:]
    return source


token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
random_text = st.text(alphabet="xbyh=;+-*/(),#.eE0123456789 \n\t_'\"^é<>!", max_size=80)
output_lists = st.one_of(
    st.none(), st.lists(st.sampled_from(["x", "b", "h", "y", "out", "t1", "zz"]), max_size=3)
)
dtypes = st.sampled_from(["float16", "bfloat16", "float32", "float64"])

FAST = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
SLOW = settings(FAST, max_examples=20_000)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


@FAST
@given(programs(), output_lists, dtypes)
def test_valid_programs_parse_or_name_a_bad_output(source: str, outputs, dtype: str) -> None:
    check(source, outputs, dtype)
    if outputs is None:
        parse_program(source, dtype=dtype).verify()  # generated programs are valid


@settings(FAST, max_examples=400)
@given(mutated_programs())
def test_mutated_programs(source: str) -> None:
    check(source)


@settings(FAST, max_examples=750)
@given(st.one_of(token_soup, random_text))
def test_random_text(source: str) -> None:
    check(source)


@pytest.mark.slow
@SLOW
@given(st.one_of(mutated_programs(), token_soup, random_text), output_lists, dtypes)
def test_long_fuzz(source: str, outputs, dtype: str) -> None:
    check(source, outputs, dtype)


def test_the_time_limit_stops_a_parse_that_spins() -> None:
    with pytest.raises(TimeoutError, match="CPU time"), time_limit(cpu_s=0.1):
        while True:
            pass


def test_the_time_limit_counts_cpu_time_not_a_loaded_hosts_wall_clock() -> None:
    # A parse stretched by other processes on the host waits without using the CPU, as a sleep.
    with time_limit(cpu_s=0.1, wall_s=30):
        time.sleep(0.3)


def test_the_time_limit_stops_a_parse_that_blocks() -> None:
    with pytest.raises(TimeoutError, match="took more than"), time_limit(cpu_s=30, wall_s=0.1):
        time.sleep(30)
