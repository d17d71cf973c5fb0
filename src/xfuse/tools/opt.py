"""`xfuse-opt`: xDSL's `xdsl-opt` with the `ew` dialect, the `.ew` frontend and xfuse's passes.

Every bad input ends in a diagnostic on stderr and exit status 1, never a Python traceback:
parse errors point at their line and column, verifier errors at the source line of the failing
operation (for IR read from a file) followed by the module with that operation marked.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import inspect
import io
import itertools
import math
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, cast

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import AttributeInvT, Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.printer import Printer
from xdsl.traits import SymbolTable
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    VerifyException,
)
from xdsl.utils.lexer import Location, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind
from xdsl.xdsl_opt_main import xDSLOptMain

import xfuse
from xfuse.dialects import xdsl_patches
from xfuse.dialects.failure import OpFailure, source_location
from xfuse.frontend.language import LINE_BREAK, EwSyntaxError, parse_program
from xfuse.tools.cli import naming_file, os_error_message, unrecognized_arguments
from xfuse.tools.cli_warnings import command_line_warnings, escalated_warning
from xfuse.tools.closed_stdout import WritingParser, exit_status, stdout_closed
from xfuse.transforms import ALL_PASSES
from xfuse.transforms.options import PassSpecError
from xfuse.transforms.pipeline import from_spec_text, parse_passes, use_before_definition

_EW_STATEMENT = re.compile(r"(?:\s|#[^\n]*)*(?:input\b|output\b|[A-Za-z_]\w*\s*=[^=])")
"""The start of `.ew` source (comments, then a declaration or an assignment `y = ...`), which
MLIR never starts with (its values are `%y`): what a piped program read as MLIR is."""


_UNDEFINED = "values used but not defined"
"""The start of xDSL's message for values never defined, which it reports at the end of input."""


_LOCATION_ALIAS = re.compile(r"^[ \t]*(#[A-Za-z_][\w$.-]*)\s*=\s*(?=loc\()", re.M)
"""The start of a location alias's definition at the start of a line, as mlir-opt writes them
(the parser finds its end: a comment may follow it, or a line break come before `loc(`)."""


class _LocatingParser(Parser):
    """xDSL's MLIR parser, remembering where each operation starts for verifier diagnostics,
    and where each value not yet defined is first used."""

    def __init__(self, ctx: Context, text: str, name: str, line_offset: int):
        super().__init__(ctx, text, name)
        self.line_offset = line_offset
        self.op_starts: dict[Operation, int] = {}
        self.first_uses: dict[str, Span] = {}
        self.defined_ahead: set[str] = set()
        """The location aliases `define_locations_ahead` defined."""
        self.failed_ahead: dict[str, int] = {}
        """Where each location alias `define_locations_ahead` could not define is defined."""
        self._op_name: MLIRToken | None = None
        """The name of the operation being parsed (`parse_operation`)."""

    def define_locations_ahead(self) -> None:
        """Define each location alias of the input (`#loc3 = loc("a.mlir":2:8)`) before the
        parse: mlir-opt's `--mlir-print-debuginfo` writes most of them after the module that
        uses them, where xDSL's parser took each use for an "undefined symbol alias". One that
        does not parse is reported at its definition, as mlir-opt reports it, where a use of
        it would fail (`failed_ahead`)."""
        text = self.lexer.input.content
        ahead = Parser(self.ctx, text, self.lexer.input.name)
        ahead.attribute_aliases = self.attribute_aliases  # (one may name another)
        for definition in _LOCATION_ALIAS.finditer(text):
            ahead._resume_from(definition.end())
            try:
                self.attribute_aliases[definition[1]] = ahead.parse_attribute()
            except ParseError:
                self.failed_ahead.setdefault(definition[1], definition.end())
                continue
            self.defined_ahead.add(definition[1])

    def _parse_alias_def(self) -> None:
        name = self._current_token.text
        if name not in self.defined_ahead:
            return super()._parse_alias_def()
        self.defined_ahead.discard(name)  # (a second definition is then xDSL's error)
        del self.attribute_aliases[name]
        return super()._parse_alias_def()

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if allow_implicit_module and self._current_token.kind is MLIRTokenKind.EOF:
            return ModuleOp([])  # no operations (or only comments): empty, as for mlir-opt
        self.define_locations_ahead()
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as error:
            alias = re.fullmatch(r"undefined symbol alias '(#.*)'", error.msg)
            if alias is not None and alias[1] in self.failed_ahead:
                # its definition's own error, with every alias the parse has defined since
                again = Parser(self.ctx, self.lexer.input.content, self.lexer.input.name)
                again.attribute_aliases = dict(self.attribute_aliases)
                again._resume_from(self.failed_ahead[alias[1]])
                try:
                    again.parse_attribute()
                except ParseError as definition_error:
                    raise definition_error from None  # (at the definition)
            if not error.msg.startswith(_UNDEFINED):
                raise
            # xDSL points at the end of the input: point at the first use instead.
            uses = sorted(
                (self.first_uses[name] for name in self.forward_ssa_references),
                key=lambda span: span.start,
            )
            others = ", ".join(span.text for span in uses[1:4])
            if len(uses) > 4:
                others += f" and {len(uses) - 4} more"
            raise ParseError(
                uses[0],
                f"{uses[0].text} is used but never defined"
                + (f" (nor are {others})" if others else ""),
            ) from None

    def resolve_operand(
        self, operand: UnresolvedOperand, type: AttributeInvT
    ) -> SSAValue[AttributeInvT]:
        name = operand.operand_name
        if name not in self.ssa_values and name not in self.forward_ssa_references:
            self.first_uses[name] = operand.span  # a forward reference: its definition may follow
        return super().resolve_operand(operand, type)

    def parse_operation(self) -> Operation:
        name = self._op_name = self._name_token()
        try:
            op = super().parse_operation()
        except VerifyException as error:
            # A custom assembly format checks its types' IRDL constraints while it parses (an
            # integer element type): report it at the operation, naming it, as the verifier does.
            quoted = name.text.strip('"')
            self.raise_error(f"'{quoted}' {error}", name.span.start, name.span.end)
        self.op_starts[op] = name.span.start
        return op

    def _get_op_by_name(self, name: str) -> type[Operation]:
        """xDSL's lookup, an unregistered op reported at its name (it was at the token after,
        often the next line's first)."""
        try:
            return super()._get_op_by_name(name)
        except ParseError:
            if self._op_name is None:
                raise
            span = self._op_name.span
            self.raise_error(f"Operation {name} is not registered", span.start, span.end)

    def _name_token(self) -> MLIRToken:
        """The token naming the operation that starts at the current token, after its results
        (`%r = `, `%a, %b = `, `%c:2 = `, comments between), where mlir-opt locates it (`2:8`,
        not `2:3`); the current token where the operation has no results or none is found."""
        current = self._current_token
        if current.kind is not MLIRTokenKind.PERCENT_IDENT:
            return current
        lexer = MLIRLexer(self.lexer.input)
        lexer.pos = current.span.start
        try:
            while (token := lexer.lex()).kind not in (MLIRTokenKind.EQUAL, MLIRTokenKind.EOF):
                pass
            return lexer.lex() if token.kind is MLIRTokenKind.EQUAL else current
        except ParseError:  # (the parse reports it)
            return current

    def overlong_integer(self) -> ParseError | None:
        """A parse error at the input's first integer literal with more digits than Python
        converts to or from an int (`sys.get_int_max_str_digits`, 4300 by default; a hex one
        whose decimal form has more), if any: xDSL's `int()` of it, or its message printing it,
        raised a bare ValueError with no location. None if there is none.
        Lexed again from the start, only after such a ValueError: the parser keeps no
        previous token, and converts every literal it reaches, so the first is the one."""
        limit = sys.get_int_max_str_digits()
        # A hex literal converts at any length, but one past this many digits is past the limit
        # in decimal, where an error message prints it ("out of range for type i64").
        hex_limit = int(limit / math.log10(16))
        lexer = MLIRLexer(self.lexer.input)
        try:
            while (token := lexer.lex()).kind is not MLIRTokenKind.EOF:
                text = token.text
                hexadecimal = text[:2] in ("0x", "0X")
                # (a hex literal's leading zeros are no digits of its decimal form)
                digits = len(text[2:].lstrip("0")) if hexadecimal else len(text)
                most = hex_limit if hexadecimal else limit
                if token.kind is MLIRTokenKind.INTEGER_LIT and digits > most:
                    span = Span(
                        token.span.start, token.span.end, self.lexer.input, self.line_offset
                    )
                    kind = "hex integer literal" if hexadecimal else "integer literal"
                    return ParseError(
                        span,
                        f"{kind} of {digits} digits: at most {most} are taken "
                        "(Python's limit on converting an int to or from a decimal string)",
                    )
        except ParseError:
            return None  # (past the literal the parser converted: it lexed that far)
        return None

    def location_of(self, op: Operation) -> Location | None:
        start = self.op_starts.get(op)
        if start is None:
            return None
        return Span(start, start, self.lexer.input, self.line_offset).get_location()


def _verifying_op(error: BaseException) -> Operation | None:
    """The op whose `Operation.verify` raised `error` (the innermost such call it passed
    through): xDSL checks an op's place in its block before its regions' ops, and its regions'
    blocks (an empty one) after them, neither of which names the op at fault."""
    failing, frame = None, error.__traceback__
    while frame is not None:
        owner = frame.tb_frame.f_locals.get("self")
        # (`verify` of an op class that overrides it too: llvm.trunc's checks before super's)
        if frame.tb_frame.f_code.co_name == "verify" and isinstance(owner, Operation):
            failing = owner
        frame = frame.tb_next
    return failing


def _first_failing_op(op: Operation) -> Operation | None:
    """The operation whose own verifier fails first, in the order `Operation.verify` checks."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                if (failing := _first_failing_op(child)) is not None:
                    return failing
    try:
        op.verify(verify_nested_ops=False)
    except DiagnosticException:
        return op
    return None


def _redefinition(table: Operation) -> Operation | None:
    """The operation redefining a symbol of `table`, if it is a symbol table that has one:
    xDSL fails the table, often the implicit module, which has no place in the text."""
    if not table.has_trait(SymbolTable) or len(table.regions) != 1:
        return None
    seen: set[str] = set()
    for block in table.regions[0].blocks:
        for op in block.ops:
            name = op.get_attr_or_prop("sym_name")
            if isinstance(name, StringAttr):
                if name.data in seen:
                    return op
                seen.add(name.data)
    return None


class _ListPassesAction(argparse.Action):
    def __init__(self, **kwargs: Any):
        super().__init__(nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from xfuse.tools.pass_help import describe_passes

        print(describe_passes())
        parser.exit()


class _PendingOutput(io.StringIO):
    """`-o FILE`'s text, kept when xDSL closes it; `XfuseOptMain.run` writes it to the file once
    every chunk has gone through."""

    text = ""

    def close(self) -> None:
        self.text = self.getvalue()
        super().close()


class _PiecewiseStdout(io.TextIOBase):
    """stdout, written `PIECE` characters at a time, each flushed: xDSL writes the whole module
    in one call, and where the reader went away partway through it (`| head -1` of a large
    module) CPython's text stream dropped the rest without a `BrokenPipeError`: status 0."""

    PIECE = 1 << 16

    def write(self, text: str) -> int:
        for start in range(0, len(text), self.PIECE):
            sys.stdout.write(text[start : start + self.PIECE])
            sys.stdout.flush()
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()


_LINE_BREAK = re.compile(LINE_BREAK.pattern.encode())
"""`LINE_BREAK` on bytes: what ends a line of a `.ew` chunk."""


def _on_stderr(
    callback: PassPipelineCallbackType, timed: bool, printer: Callable[[], Printer] | None
) -> PassPipelineCallbackType:
    """`callback`, and as xDSL's but on stderr, `--time-passes`' line for each pass (`timed`)
    and `--print-between-passes`' module after each pass but the last (by a new `printer()`, which
    prints as the output does: `--print-op-generic`, `--print-debuginfo`): as mlir-opt's
    `--mlir-timing` and `--mlir-print-ir-after-all`, so that the module on stdout still pipes
    into a parser or FileCheck (xDSL printed both into it)."""
    started = time.perf_counter()

    def on_stderr(
        previous: ModulePass | None, module: ModuleOp, following: ModulePass | None
    ) -> None:
        nonlocal started
        if timed and previous is not None:
            print(
                f"Pass {previous.name} took {time.perf_counter() - started} seconds",
                file=sys.stderr,
            )
        callback(previous, module, following)
        if printer is not None and previous is not None and following is not None:
            print(f"IR after {previous.name}:", file=sys.stderr)
            printer().print_op(module)
            print("\n\n", file=sys.stderr)
        if following is not None:
            started = time.perf_counter()

    return on_stderr


class XfuseOptMain(xDSLOptMain):
    _parser: _LocatingParser | None = None
    _pending: _PendingOutput | None = None
    # `--version`; xDSL fills in its own version.
    version_format = xfuse.versions().replace("{", "{{").replace("}", "}}")

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        # xDSL makes the parser: no abbreviations (`--pass` for `--passes`), as in `xfuse`,
        # and its help fails where stdout is gone, as the module would (`WritingParser`)
        arg_parser.allow_abbrev = False
        arg_parser._print_message = functools.partial(  # type: ignore[method-assign]
            WritingParser._print_message, arg_parser
        )
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--list-passes",
            action=_ListPassesAction,
            help="list xfuse's passes with their options (type, default, meaning) and exit",
        )

        # An unknown option says which one it is closest to, as `xfuse`'s subcommands do
        # (xDSL calls `parse_args` right after this).
        def parse_args(args: Sequence[str] | None = None, namespace: Any = None) -> Any:
            known, unknown = arg_parser.parse_known_args(args, namespace)
            if unknown:
                arg_parser.error(unrecognized_arguments(arg_parser, unknown))
            # `-` is stdin or stdout, as for mlir-opt (xDSL opened a file named `-`)
            if known.input_file == "-":
                known.input_file = None
            elif known.input_file == "":  # (it was "No such file or directory: ", no name)
                arg_parser.error("argument input_file: expected a file name, not ''")
            if known.output_file == "-":
                known.output_file = None
            elif known.output_file == "":  # (the run failed at the end: "Is a directory: .")
                arg_parser.error("argument -o/--output-file: expected a file name, not ''")
            # a value that is no spec (`-t ''`, `-t 'mlir{'`) is a usage error, as `-t bogus`
            # (xDSL's parse raised its pipeline syntax error, status 1; `-f ''` was ignored)
            # (a frontend takes no options here: `-f 'mlir{}'` was an unknown file extension)
            for flag, value, choices in (
                ("-t/--target", known.target, self.available_targets),
                ("-f/--frontend", known.frontend, self.available_frontends),
            ):
                name = value if flag.startswith("-f") else _spec_name(value or "")
                if value is not None and name not in choices:
                    arg_parser.error(
                        f"argument {flag}: invalid choice: {value!r} "
                        f"(choose from {', '.join(choices)})"
                    )
            factory = self.available_targets.get(_spec_name(known.target or "") or "")
            if factory is not None and not inspect.signature(factory).parameters:
                # its options read as a pass's, named where one is bad, and spelled out for
                # xDSL's reading (`{flag}` alone: "Incompatible types: given (), expected bool")
                try:
                    target = from_spec_text(factory(), known.target)
                except PassSpecError as error:
                    arg_parser.error(f"argument -t/--target: {error}")
                known.target = str(target)
                # The mlir target's options, which xDSL replaces by the flags' (`-t 'mlir{print_
                # generic_format=true}'` printed the custom format), as the flags (either turns
                # one on): the output and `--print-between-passes` print so.
                for option, attribute in _MLIR_TARGET_FLAGS.items():
                    if getattr(target, option, False) is True:
                        setattr(known, attribute, True)
            return known

        arg_parser.parse_args = parse_args  # type: ignore[method-assign]

    def prepare_output(self) -> IO[str]:
        # As mlir-opt: nothing written where the run fails (xDSL opened the file first and
        # emptied it), and `-o` may name the input (which xDSL read after emptying it).
        if self.args.output_file is None:
            return _PiecewiseStdout()
        self._pending = _PendingOutput()
        return self._pending

    def run(self) -> None:
        if self.args.split_input_file and not (
            self.args.verify_diagnostics or self.args.parsing_diagnostics or self.args.shrink
        ):
            self._run_each_chunk()
        else:  # xDSL's: it prints each chunk's diagnostic to stdout where asked to (and
            # `--shrink`'s verdict)
            super().run()
        if self._pending is not None:
            path = Path(self.args.output_file)
            with naming_file(path):
                path.write_text(self._pending.text)

    def _run_each_chunk(self) -> None:
        """`--split-input-file` as mlir-opt's: a chunk's error is printed and the next chunk
        runs (xDSL's stopped at the first), its output left out between its `// -----`
        separators; `ChunksFailed` at the end where any failed."""
        chunks, file_extension = self.prepare_input()
        output = self.prepare_output()
        failed = 0
        try:
            for index, (chunk, offset) in enumerate(chunks):
                with contextlib.closing(chunk):
                    if index > 0:
                        output.write("// -----\n")
                    try:
                        module = self.parse_chunk(chunk, file_extension, offset)
                        if module is not None:
                            self.apply_passes(module)
                            output.write(self.output_resulting_program(module))
                    except _DIAGNOSTICS as error:
                        if isinstance(error, ParseError):  # (as xDSL's run places it)
                            error.span = dataclasses.replace(error.span, line_offset=offset)
                        print(_diagnostic(error), file=sys.stderr)
                        failed += 1
                    except RecursionError:  # (one chunk's: it stopped the later chunks)
                        name = self.get_input_name()
                        print(
                            f"{name}:{offset + 1}: error: input nested too deeply", file=sys.stderr
                        )
                        failed += 1
                    output.flush()
        finally:
            if output is not sys.stdout:
                output.close()
        if failed:
            raise ChunksFailed(failed)

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        from xfuse.dialects.ew import Ew

        self.ctx.register_dialect("ew", lambda: Ew)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in ALL_PASSES.items():
            self.register_pass(name, factory)

    def setup_pipeline(self) -> None:
        # The passes are made here, not by xDSL: its messages for a bad option name neither the
        # pass nor the option, and its lexer takes `1e3` or `inf` for a word (`parse_passes`).
        passes = parse_passes(self.args.passes, self.available_passes)
        given, self.args.passes = self.args.passes, ""
        # xDSL's callback reads `time_passes` and `print_between_passes` at each call: they stay
        # off, `_on_stderr` prints instead
        timed, self.args.time_passes = self.args.time_passes, False
        between, self.args.print_between_passes = self.args.print_between_passes, False
        super().setup_pipeline()  # an empty pipeline, for xDSL's callback between passes
        self.args.passes = given
        callback = self.pipeline.callback
        if callback is not None and (timed or between):
            # A new printer per module, as xDSL's callback makes: one keeps the names it gave
            # values, which a later pass moves into a function whose own numbering gives them
            # again (`%2` twice in an outlined kernel: a module that did not parse back)
            printer = functools.partial(
                Printer,
                stream=sys.stderr,
                print_generic_format=self.args.print_op_generic,
                print_properties_as_attributes=self.args.print_no_properties,
                print_debuginfo=self.args.print_debuginfo,
            )
            callback = _on_stderr(callback, timed, printer if between else None)
        self.pipeline = PassPipeline(tuple(passes), callback)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["ew"] = self._parse_ew

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        chunks, extension = super().prepare_input()
        if len(chunks) > 1 and (self.args.frontend or extension) == "ew":
            # xDSL counts the `\n`s before each chunk; `.ew` lines also end in a lone `\r`
            lines = [len(_LINE_BREAK.findall(cast(io.BytesIO, c).getvalue())) for c, _ in chunks]
            starts = itertools.accumulate(lines[:-1], initial=0)
            chunks = [(chunk, start) for (chunk, _), start in zip(chunks, starts, strict=True)]
        return chunks, extension

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        # `-f` names the input's format whatever the file's name (xDSL checked its extension).
        if self.args.input_file is None and sys.stdin is None:  # started with stdin closed
            raise ValueError("no standard input to read the input from (-)")
        stream, extension = super().get_input_stream()
        if self.args.frontend is None and extension not in self.available_frontends:
            stream.close()
            formats = ", ".join(sorted(self.available_frontends))
            known = f"unknown file extension '.{extension}'" if extension else "no file extension"
            raise ValueError(
                f"{self.args.input_file}: {known}: name the input's format with -f ({formats}), "
                "or name the file .ew or .mlir"
            )
        return stream, self.args.frontend or extension

    def _parse_ew(self, stream: IO[bytes]) -> ModuleOp:
        # Undecodable bytes become U+FFFD, which the tokenizer reports with its line and column;
        # a leading byte order mark is dropped, as Python drops it from a source file.
        source = stream.read().decode("utf-8-sig", errors="replace")
        return parse_program(source, filename=self.get_input_name())

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self._parser = None
        if (self.args.frontend or file_extension) != "mlir":
            if start_offset:  # a later chunk of --split-input-file: lines as the file's
                chunk = io.BytesIO(b"\n" * start_offset + chunk.read())
            try:
                return super().parse_chunk(chunk, file_extension, start_offset)
            except EwSyntaxError as error:
                if start_offset and error.line == 1:
                    # Only a blank chunk's error is on the file's first line (an empty program
                    # ends at 1:1): it goes on the line below the chunk's separator.
                    blank_lines = "\n" * (start_offset + 1)
                    error = EwSyntaxError(
                        error.message, blank_lines, len(blank_lines), error.filename
                    )
                if not self.args.parsing_diagnostics:
                    raise error from None
                print(error)  # as xDSL prints a ParseError (to stdout), then the next chunk
                return None
        text = chunk.read().decode(errors="replace")
        try:
            self._parser = _LocatingParser(self.ctx, text, self.get_input_name(), start_offset)
            return self._parser.parse_module(not self.args.no_implicit_module)
        except ValueError:
            located = None if self._parser is None else self._parser.overlong_integer()
            if located is None:
                raise
            raise located from None
        except ParseError as error:
            stdin = self.args.input_file in (None, "-")
            if stdin and self.args.frontend is None and _EW_STATEMENT.match(text):
                error.add_note(
                    "(read as MLIR, the format of stdin; it looks like .ew source: pass -f ew, "
                    "or name the file .ew)"
                )
            raise

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if self.args.target == "llvm":
            xdsl_patches.prepare_llvm_target()
        try:
            printed = super().output_resulting_program(prog)
            # (`wat`, `wgsl` and `csl` skip what is not of their dialects: nothing printed of a
            # module of other ops, and status 0)
            if printed.strip() or not prog.ops.first:
                return printed
            reason = "it printed nothing: its printer skips ops not of its dialects"
        except (NotImplementedError, AssertionError) as error:
            # xDSL's printers of other targets (`llvm`, `x86-asm`, ...) take only IR of their
            # own dialects, and fail on anything else without naming the target.
            reason = (
                str(error)  # e.g. "Conversion not implemented for op: func.func"
                if isinstance(error, NotImplementedError)
                else "its printer met an op it does not take"  # the message is the whole op
            )
        raise DiagnosticException(
            f"error: target '{self.args.target}' cannot print this IR ({reason}): lower it "
            "to that target's dialects first "
            "(`-p xfuse-default -t llvm` prints xfuse's lowering as LLVM IR)"
        ) from None

    def apply_passes(self, prog: ModuleOp) -> None:
        self._verify_with_location(prog)
        try:
            super().apply_passes(prog)
        except OpFailure as error:  # located as mlir-opt's `emitError`: "file:1:2: error: ..."
            location = self._location(error.op)
            at = f"{location}: " if location is not None else ""
            raise DiagnosticException(
                f"{at}error: {error.message}\n{at}note: see current operation: {error.op!s}"
            ) from None
        except DiagnosticException as error:  # of no op (a pass's own check of the module,
            # `PassFailedException`s, the verifier between passes): an `error:` still, as
            # mlir-opt's (they were bare), located where the verifier names an op, with its notes
            failing = _verifying_op(error)
            location = self._location(failing) if failing is not None else None
            wrapped = DiagnosticException(f"{f'{location}: ' if location else ''}error: {error}")
            for note in getattr(error, "__notes__", ()):
                wrapped.add_note(note)
            raise wrapped from None

    def _location(self, op: Operation) -> str | None:
        """Where `op` is, as mlir-opt says it: its own location (a `.ew` token, an MLIR
        `loc("file":line:col)`), else where the parser read it, else None."""
        if (location := source_location(op)) is not None:
            return location
        read = self._parser.location_of(op) if self._parser is not None else None
        return None if read is None else str(read)

    def _verify_with_location(self, prog: ModuleOp) -> None:
        """Verify the parsed module, naming the failing operation's line and column."""
        if self.args.disable_verify:
            return
        try:
            prog.verify()
        except DiagnosticException as error:
            failing = _verifying_op(error) or _first_failing_op(prog)
            if failing is not None:
                failing = _redefinition(failing) or failing
            location = self._location(failing) if failing is not None else None
            if location is None:
                raise
            message = str(error)
            if failing is not None and failing.name not in message:
                message = f"'{failing.name}' {message}"  # xDSL's IRDL messages omit the op
            located = DiagnosticException(f"{location}: error: {message}")
            for note in getattr(error, "__notes__", ()):
                located.add_note(note)
            raise located from None
        # xDSL's verifier does not check dominance; a pass given a use before its definition
        # would fail deep inside (ew-fuse on an AssertionError): reject it as mlir-opt does.
        misuse = use_before_definition(prog)
        if misuse is not None:
            op, index = misuse
            location = self._location(op)
            raise DiagnosticException(
                f"{f'{location}: ' if location else ''}error: '{op.name}' operand #{index} is used "
                f"before its definition (it does not dominate this use)"
            )


DESCRIPTION = (
    "xDSL's xdsl-opt with the ew dialect, the .ew frontend and xfuse's passes: parse FILE.ew "
    "or FILE.mlir (stdin, or -: MLIR), run the passes -p names, and print the IR. --list-passes "
    "lists xfuse's passes and their options; docs/commands.md says more."
)


_MLIR_TARGET_FLAGS = {
    "print_generic_format": "print_op_generic",
    "print_properties_as_attributes": "print_no_properties",
    "print_debuginfo": "print_debuginfo",
    "syntax_highlight": "syntax_highlight",
}
"""The `mlir` target's options by the flag that xDSL gives each (`--print-op-generic`, ...)."""


def _spec_name(text: str) -> str | None:
    """The name of a `-t`/`-f` value in xDSL's spec syntax (`mlir{print_generic_format=true}`),
    None where it is none."""
    try:
        return parse_spec(text).name
    except ArgSpecParseError:
        return None


class ChunksFailed(Exception):
    """Chunks of `--split-input-file` failed, their diagnostics printed: exit status 1."""


_DIAGNOSTICS = (EwSyntaxError, ParseError, DiagnosticException, ArgSpecParseError)
"""The errors xfuse-opt prints as diagnostics of the input (no `xfuse-opt: error:` prefix)."""


def _diagnostic(error: BaseException) -> str:
    """An exception as a diagnostic: its message, then xDSL's notes (the IR, the op marked)."""
    return "\n".join([str(error), *getattr(error, "__notes__", ())]).rstrip()


def main(args: Sequence[str] | None = None) -> int:
    """Run xfuse-opt; every error becomes a diagnostic on stderr and exit status 1, and where
    the reader of stdout goes away (`| head -1`) it stops quietly with status 141
    (`closed_stdout`)."""
    with command_line_warnings():
        return exit_status(lambda: _run(args), "xfuse-opt")


def _run(args: Sequence[str] | None) -> int:
    opt: XfuseOptMain | None = None
    try:
        opt = XfuseOptMain(DESCRIPTION, args)
        opt.run()
    except BrokenPipeError:  # the reader went away; not an OSError to report
        return stdout_closed()
    except ChunksFailed:  # (each printed)
        return 1
    except _DIAGNOSTICS as error:
        print(_diagnostic(error), file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"xfuse-opt: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"xfuse-opt: error: {os_error_message(error)}", file=sys.stderr)
        return 1
    except RecursionError:  # (the input named: --split-input-file names its chunk's line)
        where = "xfuse-opt" if opt is None else opt.get_input_name()
        print(f"{where}: error: input nested too deeply", file=sys.stderr)
        return 1
    except Warning as warning:
        print(escalated_warning(warning, "xfuse-opt"), file=sys.stderr)
        return 1
    except Exception as error:  # a bug in xfuse or xDSL: still no traceback unless asked for
        if os.environ.get("XFUSE_TRACEBACK"):
            raise
        if opt is not None and opt.args.disable_verify:  # (IR the verifier would refuse)
            print(
                f"xfuse-opt: error: {type(error).__name__}: {error} (the input was not verified: "
                "without --disable-verify the verifier says what is wrong with it, if anything)",
                file=sys.stderr,
            )
            return 1
        print(
            f"xfuse-opt: internal error: {type(error).__name__}: {error} "
            "(set XFUSE_TRACEBACK=1 for the traceback)",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
