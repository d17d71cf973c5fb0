"""The expression language of the lecture, parsed straight into `ew` IR.

    h = x + b;                 # bias
    y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));
    out = y + r;               # residual

Grammar (`#` starts a comment to the end of the line; spaces, tabs and form feeds separate
tokens):

    program     := (declaration | outputs | statement)+
    declaration := 'input' [DTYPE] NAME [shape] (',' NAME [shape])* ';'
    outputs     := 'output' NAME (',' NAME)* ';'
    shape       := '[' [dim (',' dim)*] ']'
    dim         := INTEGER | NAME | '?'
    statement   := NAME '=' expr ';'
    expr        := sum [('<' | '<=' | '>' | '>=' | '==' | '!=') sum]
    sum         := term (('+' | '-') term)*
    term        := unary (('*' | '/') unary)*
    unary       := '-' unary | primary
    primary     := NUMBER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

Functions are the `ew` dialect's ops by mnemonic (`tanh(x)`, `max(a, b)`, ...) and the
conversions `f16(x)`, `bf16(x)`, `f32(x)`, `f64(x)`. A comparison is 1 where it holds and 0
elsewhere (NaN compares unequal to everything), and `select(c, a, b)` is `a` where `c` is nonzero,
else `b`, of `a` and `b`'s dtype (numpy's `where`): `select(x > 0, x, 0.01 * x)`. Comparisons
do not chain (`a < b < c` is an error, not Python's `a < b and b < c`). Inputs are the names
read and never assigned, or read in their own first assignment (`acc = acc * x;`; reading a
name before a later assignment is an error); ops are emitted in source order, left to right, a
literal just before the first op that uses it, each op and argument located at the token that
makes it (`_Parser.at`: `loc("file":line:col)` under `--print-debuginfo`). Every mistake raises
`EwSyntaxError` with the line, column and a caret under the spot (of a line over 100 cells wide,
about 100 around the caret). Lines end in `\n`, `\r\n` or `\r`; a leading byte order mark is
ignored.

Declarations give inputs their shapes and dtypes in the program itself, the LLM layer's way:

    input bf16 x[t, d], r[t, d];   # activations: [tokens, d_ff] in bf16
    input f32 b[d];                # the bias: [d_ff] in f32
    h = x + b;                     # f32 (numpy's promotion); broadcast over t
    out = bf16(h * r);             # a conversion picks the output's dtype

A dim is a positive size (static), a name (dynamic; dims of the same name, in any input, must be
equal at call time: the runtime checks it) or `?` (dynamic, unconstrained); `[]` is a scalar.
DTYPE is f16, bf16, f32 or f64; without it (and for undeclared inputs) the dtype and shape come
from the caller (`parse_program`'s `dtype=` and `shapes=`, default float32 `[?]`); a caller's
entry for a declared input must agree with the declaration. Declared inputs are the function's
first arguments, in declaration order (even if unread); undeclared ones follow in order of first
use. A name must be declared before it is read and is never assigned. In a program that
declares inputs, an undeclared name close to a declared or assigned one (`hh` beside `h`) is
still an input, with an `EwNameWarning` asking whether that name was meant; so is a read of
`inf`, `nan` or `pi` (`CONSTANT_NAMES`) in any program. Operands of different
dtypes promote as numpy does (see `xfuse.frontend.builder`); a literal, or an expression of
literals alone (`-(2)`, `2 * 3`, a name bound to one), takes the dtype of the array it meets and
is computed in it; `f16(100000)` is a constant of that dtype (inf) that promotes as an array.
A literal is read as Python's `float()` reads it, of any number of digits: one beyond f64's range
(`1e400`, an integer of 400 or 5000 digits) is inf.
`input` is a keyword only where a name follows it: `input = x;` is an assignment.

`output` declarations name the function's results, in order, the way `input` names its arguments:

    h = x + b;
    y = tanh(h);
    output y, h;                   # two results: y first (anywhere in the program)

Without one the result is the last assigned name. An output is assigned somewhere in the program
(before or after the declaration) or is an input; `parse_program`'s `outputs=` overrides the
declaration (the caller picks the results), as `xfuse.compile(source, outputs=...)` does. Like
`input`, `output` is a keyword only where a name follows it.
"""

from __future__ import annotations

import bisect
import difflib
import functools
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple, NoReturn, cast

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation, OpResult

from xfuse.dialects import ew
from xfuse.dialects.dtypes import element_type_for
from xfuse.frontend.builder import (
    MAX_DIM,
    DtypeSpec,
    FunctionBuilder,
    ShapeSpec,
    Value,
    name_value,
)
from xfuse.frontend.filenames import check_filename
from xfuse.frontend.name_warnings import EwNameWarning as EwNameWarning
from xfuse.frontend.name_warnings import NameWarning, program_digest, warn_name

CONVERSIONS: dict[str, str] = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
}
"""The language's dtype names: declarations use them, and each is a function converting to it."""

COMPARISONS: dict[str, ew.ElementwiseOpType] = {
    ew.python_operator(op).split()[1]: op  # "{0} < {1}"
    for op in ew.ELEMENTWISE_OPS
    if issubclass(op, ew.CompareOp)
}
"""The comparison operators and their ops: `<` is `ew.lt`."""
NUMPY_NAMES: dict[str, str] = {
    name: ew.mnemonic(op)
    for op in ew.ELEMENTWISE_OPS
    for name in (ew.python_name(op), getattr(ew.numpy_ufunc(op), "__name__", None))
    if name is not None and name != ew.mnemonic(op)
}
"""numpy's (and `xfuse.`'s) names of the functions the language calls otherwise: `where` is
`select`, `maximum` `max`, `absolute` `abs`; an unknown function's error names them."""
ADDITIVE: dict[str, ew.ElementwiseOpType] = {"+": ew.AddOp, "-": ew.SubOp}
MULTIPLICATIVE: dict[str, ew.ElementwiseOpType] = {"*": ew.MulOp, "/": ew.DivOp}

DECLARATION_KEYWORD = "input"
OUTPUT_KEYWORD = "output"


class EwSyntaxError(Exception):
    """A bad `.ew` program, with its location: `file:line:col: error: ...`, the line, a caret."""

    def __init__(self, message: str, source: str, offset: int, filename: str = "<source>"):
        self.message = message
        self.filename = filename
        self.line = line_number(source, offset)
        line_start = max(source.rfind("\n", 0, offset), source.rfind("\r", 0, offset)) + 1
        line_end = LINE_BREAK.search(source, offset)
        self.column = offset - line_start + 1
        self.source_line = source[line_start : line_end.start() if line_end else len(source)]
        super().__init__(str(self))

    def __reduce__(self) -> tuple[type[EwSyntaxError], tuple[str, str, int, str]]:
        """Pickled (a process pool's worker sends its errors so) as a source of blank lines and
        the error's own: the same message, file, line, column and excerpt."""
        source = "\n" * (self.line - 1) + self.source_line
        return EwSyntaxError, (self.message, source, self.line + self.column - 2, self.filename)

    def __str__(self) -> str:
        line, index = self.source_line, self.column - 1
        start, end = _window(line, index)
        cut = "..." if start > 0 else ""
        before = cut + _shown(line[start:index])
        caret = "".join(_blank(c) for c in before) + "^"
        excerpt = cut + _shown(line[start:end]) + ("..." if end < len(line) else "")
        return (
            f"{self.filename}:{self.line}:{self.column}: error: {self.message}\n{excerpt}\n{caret}"
        )


LINE_BREAK = re.compile(r"\r\n|\r|\n")
r"""What ends a line of a program: `\n`, `\r\n` or a lone `\r` (an old Mac file's)."""


def line_number(source: str, offset: int) -> int:
    r"""The line (from 1) of `offset` in `source`, whose lines end in `\n`, `\r\n` or a lone `\r`
    (an old Mac file's), as in Python and C compilers."""
    breaks = source.count("\n", 0, offset) + source.count("\r", 0, offset)
    return breaks - source.count("\r\n", 0, offset) + 1


def _shown(text: str) -> str:
    """`text` as an excerpt prints it: control and format characters as `<U+001B>`, as clang
    does, so that none moves the terminal's cursor, sends it a command (ESC) or reorders the
    line (a bidi override); tabs kept."""
    return "".join(
        f"<U+{ord(c):04X}>" if c != "\t" and unicodedata.category(c) in ("Cc", "Cf") else c
        for c in text
    )


def _blank(char: str) -> str:
    """A blank as wide on a terminal as `char` (of a shown excerpt) for the caret's line, as
    gcc's caret: a tab kept (however wide a terminal shows it), two for a wide character (CJK),
    none for a combining one; the column stays counted in characters."""
    if char == "\t":
        return char
    if unicodedata.category(char) in ("Mn", "Me"):
        return ""
    return "  " if unicodedata.east_asian_width(char) in ("W", "F") else " "


EXCERPT_CELLS = 100
"""The widest line (in terminal cells) an error quotes whole; of a longer one (a generated
program on one line) it quotes about this many cells around the caret, '...' where it is cut."""


def _cells(char: str) -> int:
    """The terminal cells `char` takes in an excerpt: its `<U+...>` if `_shown` writes one, two
    for a wide character, none for a combining one, and up to 8 for a tab."""
    shown = _shown(char)
    if shown != char:
        return len(shown)
    return 8 if char == "\t" else len(_blank(char))


def _window(line: str, index: int) -> tuple[int, int]:
    """The start and end of the part of `line` an excerpt quotes around `index` (the caret's):
    at most `EXCERPT_CELLS` cells, of which up to three quarters before the caret (what led to
    the error), more where the line ends sooner; the whole line if it fits. Walks from the caret
    only, however long the line."""
    start = end = index
    used = 0
    for limit in (EXCERPT_CELLS * 3 // 4, EXCERPT_CELLS):  # before the caret, then what is left
        while start > 0 and used + (width := _cells(line[start - 1])) <= limit:
            start, used = start - 1, used + width
        while end < len(line) and used + (width := _cells(line[end])) <= EXCERPT_CELLS:
            end, used = end + 1, used + width
    # a combining character whose base was cut would sit on the '...'
    while start < index and unicodedata.category(line[start]) in ("Mn", "Me"):
        start += 1
    return start, end


class Token(NamedTuple):
    """A token (a named tuple: a program of 10^4 ops has ~4 * 10^4 of them)."""

    kind: str  # "name", "number", "op" (punctuation) or "end"
    text: str
    offset: int


_TOKEN = re.compile(
    # Blanks are Python's and C's: spaces, tabs, form feeds (a page break in old sources), line
    # ends; not a vertical tab, which Python rejects. A comment ends where its line does, at a
    # lone '\r' too.
    r"(?P<space>[ \t\f\r\n]+|#[^\r\n]*)"
    r"|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>[-+*/;(),\[\]?]|[<>]=?|[=!]=|=)"  # `<=` before `<`; `=` last, after `==`
    r"|(?P<unexpected>.)",  # anything else: an error, so that `finditer` skips nothing
    re.ASCII | re.DOTALL,  # names must stay valid MLIR value names; no Unicode digits in numbers
)
_NUMBER_TAIL = re.compile(r"[\w.]|(?<=[eE])[+-]", re.ASCII)  # (an exponent's sign: `1e+`)
_OPERATOR_HINTS = {
    # what C, Python or numpy users reach for, and what `.ew` has instead
    "^": "write a power as pow(x, y)",
    "%": "`.ew` has no remainder operator",
    "&": "no logical operators: comparisons give 1 or 0, so 'a and b' is (a != 0) * (b != 0)",
    "|": "no logical operators: comparisons give 1 or 0, so 'a or b' is max(a != 0, b != 0)",
    "!": "no logical operators: 'not a' is a == 0 (`!=` is the only operator with '!')",
    ":": "no conditional expression: write 'c ? a : b' as select(c, a, b)",
    "@": "`.ew` programs are elementwise: no matrix product",
    ".": "names have no attributes and functions are called bare: exp(x), not np.exp(x)",
}
MAX_NESTING = 100
"""Deepest nesting of parentheses, calls and unary minus (the parser recurses on each)."""
CONSTANT_NAMES = {
    "inf": "infinity is 1e999",
    "infinity": "infinity is 1e999",
    "nan": "NaN is 0/0",
    "pi": "pi is 3.141592653589793",
}
"""Names of constants in C, numpy or math (case aside) that `.ew` reads as inputs, and how to
write each: an undeclared one is warned of (`max(x, -inf)` made an input named `inf`)."""
SPELL_CHECK_LIMIT = 50
"""Undeclared inputs checked for a declared or assigned name close to theirs (`EwNameWarning`):
each check compares with every such name, which made a generated program of thousands of inputs
quadratic (21 s to parse 4,000); clang's `-fspell-checking-limit` is 50 too."""
SPELL_CHECK_WORK = 2_000_000
"""How much the spell checks compare in all, counted as the length of the name checked times
that of each name it is compared with (difflib's ratio takes time of about their product, up to
~0.3 us a unit: 6 ms for two 199-character names), a check that would pass it skipped: 50
checks of 16,000 look-alike names of ~36 characters took 24.5 s (now 1.2), one of 2,000 names of
199 characters 6.7 s (Intel Xeon, 2026-12-06)."""


LISTED_NAMES = 20
"""The most names a message lists (a program of 16,000 assignments made one of 117 KB)."""


QUOTED_CHARACTERS = 40
"""The most characters of a token a message quotes (one of 100,000 was quoted whole)."""


def _quoted(text: str) -> str:
    """`text` in quotes for a message, its middle cut where it is long (the caret shows it)."""
    if len(text) <= QUOTED_CHARACTERS:
        return f"'{text}'"
    half = QUOTED_CHARACTERS // 2
    return f"'{text[:half]}...{text[-half:]}' ({len(text):,} characters)"


def _some_names(names: Iterable[str]) -> str:
    """`names` for a message: the first `LISTED_NAMES` of them and how many more (or "none")."""
    names = list(names)
    shown = ", ".join(names[:LISTED_NAMES]) or "none"
    more = len(names) - LISTED_NAMES
    return f"{shown}, ... ({more} more)" if more > 0 else shown


def tokenize(source: str, filename: str = "<source>") -> list[Token]:
    tokens: list[Token] = []
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup
        offset = match.start()
        if kind == "unexpected":
            char = source[offset]
            if char in "\"'":
                message = "non-numeric literal: strings are not numbers"
            elif char in _OPERATOR_HINTS:
                message = f"unexpected character {char!r}: {_OPERATOR_HINTS[char]}"
            else:
                message = f"unexpected character {char!r}"
            raise EwSyntaxError(message, source, offset, filename)
        if kind == "number" and _NUMBER_TAIL.match(source, match.end()):
            end = match.end()
            while end < len(source) and _NUMBER_TAIL.match(source, end):
                end += 1
            raise EwSyntaxError(
                f"non-numeric literal {_quoted(source[offset:end])}", source, offset, filename
            )
        if kind != "space":
            tokens.append(Token(cast(str, kind), match.group(), offset))
    # The end of input is just after the last token, where a missing ';' goes (as clang points),
    # not past the comments and blank lines after it: an empty line below the file's last one.
    last = tokens[-1] if tokens else Token("end", "", len(source.rstrip(" \t\f\r\n")))
    tokens.append(Token("end", "", last.offset + len(last.text)))
    return tokens


class _Parser:
    def __init__(self, source: str, filename: str, builder: FunctionBuilder):
        self.source = source
        self.filename = filename
        self.tokens = tokenize(source, filename)
        self.position = 0
        self.builder = builder
        self.values: dict[str, Value] = {}
        self.assigned_at: dict[str, int] = {}
        self.last_assigned: str | None = None
        self.declared_at: dict[str, int] = {}
        self.declared_shapes: dict[str, ShapeSpec] = {}
        self.name_warnings: list[NameWarning] = []
        """Each `EwNameWarning` the parse issued (a compile cache keeps them: `warn_name`)."""
        self.undeclared_inputs = 0
        """The inputs read without a declaration so far (`SPELL_CHECK_LIMIT` of them checked)."""
        self.spell_check_work = SPELL_CHECK_WORK
        """What the spell checks may still compare (`SPELL_CHECK_WORK`)."""
        self.declared_outputs: dict[str, Token] = {}  # by name: a repeat is found in O(1)
        self.depth = 0
        self.line_starts = [0, *(found.end() for found in LINE_BREAK.finditer(source))]
        """Where each line starts: a token's line by bisection (`at`), not by counting."""
        # IR strings are UTF-8: a name's undecodable bytes (`os.fsdecode`'s surrogates) as
        # escapes, as Python's stderr writes them (`\udcff`), not an error when printed.
        self.file_attribute = StringAttr(
            filename.encode("utf-8", "backslashreplace").decode("utf-8")
        )

    # -- helpers
    @property
    def current(self) -> Token:
        return self.tokens[self.position]

    @functools.cached_property
    def digest(self) -> str:
        """`program_digest` of the source, for its warnings."""
        return program_digest(self.source)

    def error(self, message: str, token: Token | None = None) -> EwSyntaxError:
        token = token or self.current
        return EwSyntaxError(message, self.source, token.offset, self.filename)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)

    def line_and_column(self, token: Token) -> tuple[int, int]:
        """`token`'s line and column, as errors count them (characters from 1), by bisection."""
        line = self.line_of(token.offset)
        return line, token.offset - self.line_starts[line - 1] + 1

    def at(self, token: Token) -> None:
        """Make the ops and arguments built next at `token`'s line and column."""
        line, column = self.line_and_column(token)
        self.builder.location = FileLineColLoc(self.file_attribute, _int(line), _int(column))

    def describe(self, token: Token) -> str:
        return "end of input" if token.kind == "end" else _quoted(token.text)

    def accept(self, text: str) -> Token | None:
        if self.current.kind == "op" and self.current.text == text:
            token = self.current
            self.position += 1
            return token
        return None

    def expect(self, text: str, context: str) -> Token:
        token = self.accept(text)
        if token is None:
            raise self.missing(f"'{text}' {context}")
        return token

    def missing(self, expected: str) -> EwSyntaxError:
        """`expected ..., found ...` where the missing token belongs: right after the previous
        token when the next one is on a later line (a `;` forgotten at the end of a line is
        reported there, as C compilers do, not at the next statement's first token)."""
        found = self.current
        previous = self.tokens[self.position - 1] if self.position else None
        end = previous.offset + len(previous.text) if previous else found.offset
        if LINE_BREAK.search(self.source, end, found.offset) is None:
            return self.error(f"expected {expected}, found {self.describe(found)}")
        where = "" if found.kind == "end" else f" on line {self.line_of(found.offset)}"
        message = f"expected {expected}, found {self.describe(found)}{where}"
        return EwSyntaxError(message, self.source, end, self.filename)

    # -- grammar
    def program(self) -> None:
        if self.current.kind == "end":
            raise self.error("empty program: expected at least one statement 'name = expr;'")
        names_assigned = self._names_assigned_later()
        while self.current.kind != "end":
            following = self.tokens[self.position + 1]
            if self.current.text == DECLARATION_KEYWORD and following.kind == "name":
                self.declaration()
            elif self.current.text == OUTPUT_KEYWORD and following.kind == "name":
                self.output_declaration()
            else:
                self.statement(names_assigned)

    def _names_assigned_later(self) -> dict[str, int]:
        """Each name's first assignment (token index), to reject reads that come before it."""
        first: dict[str, int] = {}
        for index in range(len(self.tokens) - 1):
            token, following = self.tokens[index], self.tokens[index + 1]
            at_statement_start = index == 0 or self.tokens[index - 1].text == ";"
            if token.kind == "name" and following.text == "=" and at_statement_start:
                first.setdefault(token.text, index)
        return first

    def statement(self, first_assignment: dict[str, int]) -> None:
        target = self.current
        if target.kind != "name":
            raise self.error(f"expected a statement 'name = expr;', found {self.describe(target)}")
        if _is_function(target.text) and self.tokens[self.position + 1].text == "(":
            raise self.error(  # an expression alone, as `xfuse bench --expr` takes
                f"expected a statement 'name = expr;', found a call of '{target.text}': "
                f"assign the expression to a name (y = {target.text}(...);)"
            )
        if target.text in CONVERSIONS:
            raise self.error(f"cannot assign to '{target.text}': it names a dtype")
        if target.text in self.declared_at:
            line = self.line_of(self.declared_at[target.text])
            raise self.error(
                f"cannot assign to '{target.text}': it is declared as an input on line {line}"
            )
        self.position += 1
        self.expect("=", f"after '{target.text}' (a statement is 'name = expr;')")
        self.first_assignment = first_assignment
        value = self.expr()
        self.expect(";", "at the end of the statement")
        self.values[target.text] = value
        self.assigned_at[target.text] = target.offset
        self.last_assigned = target.text
        if isinstance(value, OpResult):
            name_value(value, target.text)

    def _names_a_dtype(self) -> bool:
        """Whether the declaration's first word is a dtype (one unknown: the caller says so):
        a name follows it, and after that what follows a declared name (`input a` missing its
        `;` read `a` as a dtype)."""
        name = self.tokens[self.position + 1]
        if name.kind != "name":  # (then a token follows it: the tokens end in an "end" one)
            return False
        after = self.tokens[self.position + 2]
        return after.text in ("[", ",", ";") or after.kind == "end"

    def declaration(self) -> None:
        """`input [DTYPE] name[dims], ...;`: each name becomes the next function argument."""
        self.position += 1  # the keyword
        element = None
        if self.current.text in CONVERSIONS:
            element = element_type_for(CONVERSIONS[self.current.text])
            self.position += 1
        elif self._names_a_dtype():
            known = ", ".join(CONVERSIONS)
            raise self.error(f"unknown dtype '{self.current.text}' (known: {known})")
        while True:
            name = self.current
            if name.kind != "name":
                raise self.error(f"expected an input name, found {self.describe(name)}")
            self.position += 1
            shape = self.shape() if self.accept("[") is not None else None
            self.declare(name, element, shape)
            if self.accept(",") is None:
                break
        if self.accept(";") is None:
            expected = "',' or ';'" if shape is not None else "'[', ',' or ';'"
            raise self.missing(f"{expected} in the declaration")

    def output_declaration(self) -> None:
        """`output name, ...;`: the function's results, in order (checked once all is parsed)."""
        self.position += 1  # the keyword
        while True:
            name = self.current
            if name.kind != "name":
                raise self.error(f"expected an output name, found {self.describe(name)}")
            if name.text in CONVERSIONS:
                raise self.error(f"cannot declare '{name.text}' as an output: it names a dtype")
            repeated = self.declared_outputs.get(name.text)
            if repeated is not None:
                line = self.line_of(repeated.offset)
                raise self.error(f"output '{name.text}' is already declared on line {line}")
            self.declared_outputs[name.text] = name
            self.position += 1
            if self.accept(",") is None:
                break
        if self.accept(";") is None:
            raise self.missing("',' or ';' in the output declaration")

    def declared_output_names(self) -> list[str] | None:
        """The `output` declarations' names, each checked to name a value; None without any."""
        if not self.declared_outputs:
            return None
        for name in self.declared_outputs.values():
            if name.text not in self.values and name.text not in self.builder.inputs:
                known = _some_names(self.values)
                raise self.error(
                    f"output '{name.text}' is never assigned (the program assigns {known})", name
                )
        return list(self.declared_outputs)

    def shape(self) -> tuple[int | str | None, ...]:
        """The dims after '[' up to and including ']'."""
        dims: list[int | str | None] = []
        if self.accept("]") is not None:
            return ()
        while True:
            token = self.current
            if token.kind == "number" and token.text.isdigit() and token.text.strip("0"):
                digits = token.text.lstrip("0")  # int() refuses more than 4300 digits
                if len(digits) > len(str(MAX_DIM)) or int(digits) > MAX_DIM:
                    shown = digits if len(digits) <= 30 else digits[:27] + "..."
                    raise self.error(f"dimension {shown} is too large (at most {MAX_DIM})")
                dims.append(int(digits))
            elif token.kind == "name":
                dims.append(token.text)
            elif token.text == "?" and token.kind == "op":
                dims.append(None)
            else:
                raise self.error(
                    "expected a dimension (a positive size, a name or '?'), found "
                    + self.describe(token)
                )
            self.position += 1
            if self.accept(",") is None:
                self.expect("]", "to close the shape")
                return tuple(dims)

    def declare(
        self, name: Token, element: Attribute | None, shape: tuple[int | str | None, ...] | None
    ) -> None:
        text = name.text
        if text in CONVERSIONS:
            raise self.error(f"cannot declare '{text}': it names a dtype", name)
        if text in self.declared_at:
            line = self.line_of(self.declared_at[text])
            raise self.error(f"input '{text}' is already declared on line {line}", name)
        if text in self.values:
            line = self.line_of(self.assigned_at[text])
            raise self.error(
                f"cannot declare '{text}' as an input: it is assigned on line {line}", name
            )
        if text in self.builder.inputs:
            raise self.error(
                f"input '{text}' is declared after it is read: declare inputs before their use",
                name,
            )
        builder = self.builder
        if shape is not None and text in builder.shapes and builder.input_shape(text) != shape:
            raise self.error(
                f"input '{text}' is declared {_format_dims(shape)} but the caller's shapes give "
                f"{_format_dims(builder.input_shape(text))}",
                name,
            )
        given = builder.input_elements.get(text)
        if element is not None and given is not None and given != element:
            raise self.error(
                f"input '{text}' is declared {element} but the caller's dtype gives {given}",
                name,
            )
        self.declared_at[text] = name.offset
        if shape is not None:  # (`input x;` takes the caller's shape, or the default)
            self.declared_shapes[text] = shape
        self.at(name)
        # after the inputs declared so far, before the undeclared ones (`y = a; input b;`)
        builder.input(text, element, shape, position=len(self.declared_at) - 1)

    def check_one_iteration_space(self) -> None:
        """The inputs' static sizes agree on each axis (right-aligned; 1 broadcasts), and each
        dim name takes one size there, as the arrays of one call must: inputs that no operator
        combines (`input x[2], y[3]; z = x;`, `input x[n, n], y[2, 3];`) were refused at
        compile, at no line and naming types only, or made a kernel no call could satisfy. An
        error at the later declaration that gives a shape, else of the caller's `shapes`."""
        shapes = {
            name: self.declared_shapes[name]
            if name in self.declared_shapes
            else self.builder.input_shape(name)
            for name in self.builder.inputs
        }
        rank = max(map(len, shapes.values()), default=0)
        first: dict[int, tuple[int, str]] = {}  # by right-aligned axis: a size and its input
        for name, shape in shapes.items():
            for axis, size in enumerate(shape, start=rank - len(shape)):
                if isinstance(size, int) and size != 1:
                    known, known_name = first.setdefault(axis, (size, name))
                    if known != size:
                        self._clash(shapes, name, known_name)
        named: dict[str, tuple[int, str]] = {}  # by dim name: the size a static one gives it
        for name, shape in shapes.items():
            for axis, size in enumerate(shape, start=rank - len(shape)):
                if isinstance(size, str) and axis in first:
                    static, static_name = first[axis]
                    known, known_name = named.setdefault(size, (static, static_name))
                    if known != static:
                        sources = " and ".join(
                            f"'{source}' {_format_dims(shapes[source])}"
                            for source in dict.fromkeys((known_name, static_name))
                        )
                        self._raise_at(
                            (name, static_name, known_name),
                            f"dim '{size}' of '{name}' {_format_dims(shape)} would be {known} and "
                            f"{static}, the sizes of {sources} on its axes: a dim name has one "
                            "size",
                        )

    def _clash(self, shapes: Mapping[str, ShapeSpec], name: str, other: str) -> NoReturn:
        """Raise that input `name`'s and `other`'s static sizes disagree: at the later of their
        declarations that give a shape, else as the caller's `shapes`'."""
        given = self.declared_shapes
        if name not in given and other not in given:
            raise ValueError(
                f"the caller's shapes give '{name}' {_format_dims(shapes[name])} and '{other}' "
                f"{_format_dims(shapes[other])}, which do not broadcast{_ONE_SPACE}"
            )
        at, other = (name, other) if name in given else (other, name)
        caller = "" if other in given else " (the caller's shapes)"
        self._raise_at(
            (at,),
            f"input '{at}' {_format_dims(shapes[at])} does not broadcast with '{other}' "
            f"{_format_dims(shapes[other])}{caller}{_ONE_SPACE}",
        )

    def _raise_at(self, names: Sequence[str], message: str) -> NoReturn:
        """EwSyntaxError of `message` at the first of `names` declared with a shape, else a
        ValueError of the caller's `shapes`."""
        at = next((name for name in names if name in self.declared_shapes), None)
        if at is None:
            raise ValueError(f"the caller's shapes: {message}")
        raise EwSyntaxError(message, self.source, self.declared_at[at], self.filename)

    @contextmanager
    def nesting(self) -> Iterator[None]:
        """One level deeper (an expression or a unary minus): bounded, so that a parse from a
        shallow stack meets no RecursionError (a deep caller's is an `EwSyntaxError`)."""
        self.depth += 1
        if self.depth > MAX_NESTING + 1:  # (the statement's own expression is no nesting)
            raise self.error(f"expression nested more than {MAX_NESTING} levels deep")
        yield
        self.depth -= 1

    def expr(self) -> Value:
        with self.nesting():
            value = self.sum()
            token = self.accept_one_of(COMPARISONS)
            if token is not None:
                value = self.apply(COMPARISONS[token.text], token, value, self.sum())
                chained = self.accept_one_of(COMPARISONS)
                if chained is not None:
                    raise self.error(
                        "comparisons do not chain: parenthesize one, or write `a < b < c` as "
                        "`select(a < b, b < c, 0)`",
                        chained,
                    )
        return value

    def accept_one_of(self, operators: Mapping[str, ew.ElementwiseOpType]) -> Token | None:
        token = self.current
        if token.kind == "op" and token.text in operators:
            self.position += 1
            return token
        return None

    def sum(self) -> Value:
        return self.left_to_right(self.term, ADDITIVE)

    def term(self) -> Value:
        return self.left_to_right(self.unary, MULTIPLICATIVE)

    def left_to_right(
        self, operand: Callable[[], Value], operators: Mapping[str, ew.ElementwiseOpType]
    ) -> Value:
        """`operand (op operand)*` of one precedence level, applied left to right."""
        value = operand()
        while (token := self.accept_one_of(operators)) is not None:
            value = self.apply(operators[token.text], token, value, operand())
        return value

    def unary(self) -> Value:
        token = self.accept("-")
        if token is None:
            return self.primary()
        if self.current.kind == "number":
            number = self.current
            self.position += 1
            return self.builder.literal(-float(number.text))
        with self.nesting():
            operand = self.unary()
        return self.apply(ew.NegOp, token, operand)

    def primary(self) -> Value:
        token = self.current
        if token.kind == "number":
            self.position += 1
            return self.builder.literal(float(token.text))
        if self.accept("(") is not None:
            value = self.expr()
            self.expect(")", "to close '('")
            return value
        if token.kind != "name":
            power = token.text == "*" and self.tokens[self.position - 1].text == "*"
            hint = ": `**` is no operator, write a power as pow(x, y)" if power else ""
            raise self.error(f"expected an expression, found {self.describe(token)}{hint}")
        self.position += 1
        if self.current.text == "(" and self.current.kind == "op":
            return self.call(token)
        return self.read(token)

    def read(self, token: Token) -> Value:
        name = token.text
        if name in self.values:
            return self.values[name]
        if _is_function(name) and name not in self.declared_at:
            # A function's name is a value only where the program says so: assigned, or
            # declared (RoPE's tables named `cos` and `sin`); read alone it is a missing call.
            declare = (
                "" if name in CONVERSIONS else f", or declare an input of that name (input {name};)"
            )
            raise self.error(f"'{name}' is a function: call it as {name}(...){declare}", token)
        first = self.first_assignment.get(name)
        # (a declared input has its value: its later assignment is the error, said there)
        if first is not None and first > self.position and name not in self.declared_at:
            line = self.line_of(self.tokens[first].offset)
            raise self.error(
                f"'{name}' is read before it has a value (it is first assigned on line {line})",
                token,
            )
        if name not in self.builder.inputs:  # a new argument, at its first read
            if self.declared_at and first is not None:  # read where it is first assigned
                self.warn_name(
                    token,
                    f"'{name}' is read in its own first assignment, so it is an input: assign "
                    "it before, or read a declared input of another name (input x0; x = x0 * 2;)",
                )
            elif name.lower() in CONSTANT_NAMES:
                # (not where it is assigned too: `nan = nan + 1;` would then be an error)
                keep = f"; declare `input {name};` to keep it one" if first is None else ""
                self.warn_name(
                    token,
                    f"'{name}' is an input: `.ew` has no named constants "
                    f"({CONSTANT_NAMES[name.lower()]}{keep})",
                )
            # (the declared inputs counted too: a program of 50 of them had no check at all)
            elif self.declared_at and self.undeclared_inputs < SPELL_CHECK_LIMIT:
                names = [*self.declared_at, *self.first_assignment]
                work = len(name) * sum(map(len, names))
                if work <= self.spell_check_work:
                    self.spell_check_work -= work
                    self.warn_if_close(token, names)
            self.undeclared_inputs += 1
            self.at(token)
        return self.builder.input(name)

    def warn_if_close(self, token: Token, names: list[str]) -> None:
        """An `EwNameWarning` at `token` (a new undeclared input) where `names` (the program's
        declared and assigned ones) has one close to it."""
        close = difflib.get_close_matches(token.text, names, n=1)
        if close:
            self.warn_name(
                token,
                f"'{token.text}' is neither declared nor assigned, so it is an input: did you "
                f"mean '{close[0]}'?",
            )

    def warn_name(self, token: Token, message: str) -> None:
        """An `EwNameWarning` of `message` at `token`, at the .ew line (Python's warning format
        shows that line where the file exists)."""
        # (bisected, the digest made once: counting lines and hashing the source per warning,
        # a program of 16,000 self-reading statements parsed in 12.1 s, now 3.5)
        line, column = self.line_and_column(token)
        warning = NameWarning(f"column {column}: {message}", self.filename, line, self.digest)
        self.name_warnings.append(warning)
        warn_name(warning)

    def call(self, name: Token) -> Value:
        op_type = ew.OPS_BY_MNEMONIC.get(name.text)
        if op_type is None and name.text not in CONVERSIONS:
            functions = sorted([*ew.OPS_BY_MNEMONIC, *CONVERSIONS])
            known = ", ".join(functions)
            numpy = NUMPY_NAMES.get(name.text)
            # Its letters swapped (`epx`, `tahn`), else one closer than difflib's default cutoff
            # (`gelu` is no misspelt `relu`, nor `foo` `floor`).
            close = [f for f in functions if sorted(f) == sorted(name.text)][:1]
            close = close or difflib.get_close_matches(name.text, functions, n=1, cutoff=0.8)
            hint = (
                f"numpy's name for '{numpy}'; "
                if numpy
                else f"did you mean '{close[0]}'? "
                if close
                else ""
            )
            raise self.error(f"unknown function {_quoted(name.text)} ({hint}known: {known})", name)
        self.expect("(", "")
        arity = 1 if op_type is None else ew.arity(op_type)
        if self.current.text == ")" and self.current.kind == "op":  # (not "expected an expression")
            raise self.error(
                f"'{name.text}' takes {arity} argument{'s' if arity > 1 else ''}, got 0", name
            )
        args = [self.expr()]
        while self.accept(",") is not None:
            args.append(self.expr())
        self.expect(")", f"to close the call of '{name.text}'")
        if len(args) != arity:
            raise self.error(
                f"'{name.text}' takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}",
                name,
            )
        if op_type is None:
            element = element_type_for(CONVERSIONS[name.text])
            self.at(name)
            return self.builder.convert(args[0], element, explicit=True)
        return self.apply(op_type, name, *args)

    def apply(self, op_type: ew.ElementwiseOpType, at: Token, *args: Value) -> Value:
        self.at(at)
        try:
            return self.builder.apply(op_type, *args)
        except ValueError as error:
            raise self.error(str(error), at) from None


@functools.cache  # a program's lines and columns repeat: each attribute is made once
def _int(value: int) -> IntAttr:
    return IntAttr(value)


def _is_function(name: str) -> bool:
    return name in ew.OPS_BY_MNEMONIC or name in CONVERSIONS


_ONE_SPACE = (
    ": the inputs of a program share one iteration space, whether or not an operator combines them"
)


def _format_dims(shape: ShapeSpec) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def parse_program(
    source: str,
    outputs: Sequence[str] | None = None,
    *,
    dtype: DtypeSpec = "float32",
    shapes: Mapping[str, ShapeSpec] | None = None,
    filename: str | os.PathLike[str] = "<source>",
    function_name: str = "main",
    default_shape: ShapeSpec = (None,),
) -> ModuleOp:
    """Parse an `.ew` program into a module with one `func.func`.

    `outputs` names the function's results (default: the program's `output` declarations, else
    the last assigned name). For inputs the
    program does not declare: `dtype` is the element type (a numpy name or dtype, "float32" by
    default, or a mapping from input names to them), `shapes` maps names to shapes (ints static,
    names and None dynamic), `default_shape` the shape of the others (`[?]`).
    """
    builder = FunctionBuilder(dtype, shapes, function_name, default_shape=default_shape)
    return ParsedProgram(source, outputs, builder, filename).module


class ParsedProgram:
    """A parsed program (`parse_program`'s arguments) and the names of its results.

    The names are the program's, not the IR's: `out = x;` returns the argument `%x` as `out`.
    """

    def __init__(
        self,
        source: str,
        outputs: Sequence[str] | None,
        builder: FunctionBuilder,
        filename: str | os.PathLike[str] = "<source>",
    ):
        filename = check_filename(filename)
        if isinstance(outputs, str):  # one name, as `xfuse.compile` takes it (it was its letters)
            outputs = [outputs]
        # A leading byte order mark (a file read as "utf-8", not "utf-8-sig") is no character of
        # the program, as in a Python source file: dropped, so that columns count from the text.
        source = source.removeprefix("\ufeff")
        parser = _Parser(source, filename, builder)
        try:
            parser.program()
        except RecursionError:  # (~8 frames a level: 100 levels need ~800 of Python's 1000)
            if parser.depth < MAX_NESTING // 10:  # the caller's own depth, not the program's
                raise
            raise parser.error(
                f"expression nested {parser.depth} levels deep, more than Python's stack has "
                "room for here (parse it from a shallower call, or raise sys.setrecursionlimit)"
            ) from None
        declared = parser.declared_output_names()
        if outputs is None and declared is not None:
            outputs = declared
        if outputs is None and parser.last_assigned is None:
            raise EwSyntaxError(
                "the program assigns nothing: expected at least one statement 'name = expr;'",
                source,
                parser.current.offset,
                filename,
            )
        parser.check_one_iteration_space()
        for option, given in (("dtype", builder.input_elements), ("shapes", builder.shapes)):
            unknown = sorted(set(given) - set(builder.inputs))
            if unknown:
                # (an assigned one was "not read", which it may well be: it is no input)
                assigned = [name for name in unknown if name in parser.assigned_at]
                if assigned:
                    raise ValueError(
                        f"{option} given for {', '.join(map(repr, assigned))}, which the program "
                        f"assigns: no input (inputs: {_some_names(builder.inputs)})"
                    )
                raise ValueError(
                    f"{option} given for {', '.join(map(repr, unknown))}, which the program does "
                    f"not read (inputs: {_some_names(builder.inputs)})"
                )
        self.name_warnings = tuple(parser.name_warnings)
        """The `EwNameWarning`s the parse issued."""
        self.declared_inputs = tuple(parser.declared_at)
        """The inputs an `input` declaration names, in order."""
        self.output_names: list[str] = (
            list(outputs) if outputs is not None else [cast(str, parser.last_assigned)]
        )
        if not self.output_names:
            raise EwSyntaxError("no outputs requested", source, 0, filename)
        results: list[tuple[str, Value]] = []
        for name in self.output_names:
            value = parser.values.get(name, builder.inputs.get(name))
            if value is None:
                known = _some_names(parser.values)
                raise EwSyntaxError(
                    f"unknown output '{name}': the program assigns {known}",
                    source,
                    parser.current.offset,
                    filename,
                )
            results.append((name, value))
        parser.at(parser.tokens[-2])  # the return: the program's last token (before its end)
        self.module: ModuleOp = builder.finish(results)
        # The function is the program: at its first token, as mlir-opt's at its keyword (an
        # error at it had no line, `ew-cost`'s of a shape that does not fit; not 1:1, which is
        # another program's of a --split-input-file)
        parser.at(parser.tokens[0])
        cast(Operation, self.module.body.block.first_op).location = builder.location
