"""Running a pass pipeline (`xfuse-opt`'s `-p` syntax) on a module, from Python."""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region
from xdsl.irdl.dominance import DominanceInfo
from xdsl.passes import ModulePass, PassPipeline
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.arg_spec import (
    ArgSpec,
    ArgSpecConvertible,
    ParameterType,
    PipelineLexer,
    SpecTokenKind,
    parse_pipeline,
    parse_spec,
)
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException

from xfuse.dialects.ew import DYNAMIC_INDEX, ELEMENTWISE_OPS, ConvertOp, KernelOp
from xfuse.transforms import ALL_PASSES
from xfuse.transforms.options import PassOptionError, PassSpecError, expected_values

_FLOAT_TEXT = re.compile(
    r"[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?|inf(?:inity)?|nan)", re.IGNORECASE
)
"""A float as mlir-opt's options read one (C's `strtod`, less hexadecimal): `1e3`, `inf`, `nan`."""

_UNLEXED_FLOAT = re.compile(
    r"(?<=[=,])([-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*|[0-9]+(?=e))(?:e[-+]?[0-9]+)?"
    r"|\+(?:inf(?:inity)?|nan))(?=[\s,}]|$)",
    re.IGNORECASE,
)
"""An option's value that `strtod` reads as a float, with a point or an exponent, which xDSL's
pipeline lexer cannot read (`.5`: no token starts with a point; `1e+3`, `+1e3`, `-1e-3`,
`+inf`) or reads as a Python float, its spelling lost (`1.0e400` was refused as 'inf', `-2.50`
as '-2.5')."""

_UNLEXED_INTEGER = re.compile(
    r"(?<=[=,])([-+]?0(?:[0-9]+|[xX][0-9a-fA-F]+|[bB][01]+|o[0-7]+)|[-+]0)(?=[\s,}]|$)"
)
"""An option's value that LLVM reads as an integer in another base (`getAsInteger` with radix
0: `010` is 8, `0x10` 16, `0b11` 3, `0o17` 15) and xDSL's lexer reads as decimal (`010`) or
cannot lex (`-0x10`), or a signed zero, which xDSL's reads as 0, its spelling lost."""

_STRING_LITERAL = re.compile(r'("(?:\\.|[^"\\])*")')


def _numbers_quoted(pipeline: str) -> str:
    """`pipeline` with each `_UNLEXED_FLOAT` and `_UNLEXED_INTEGER` value quoted, outside
    string literals: mlir-opt takes `launch-us=.5` and `1e+3`, which were "Error parsing pass
    pipeline specification", and `max-ops=010` (8, which was 10); quoted, `_typed` reads them
    as it reads `1e3` and `0x10`."""
    pieces = _STRING_LITERAL.split(pipeline)  # the literals at the odd indices
    return "".join(
        piece if index % 2 else _UNLEXED_INTEGER.sub(r'"\1"', _UNLEXED_FLOAT.sub(r'"\1"', piece))
        for index, piece in enumerate(pieces)
    )


_SPACED_PUNCTUATION = re.compile(r"\s*([,()])\s*")
"""Spaces around a pipeline's commas and parentheses (outside options), which mlir-opt skips
(`ew-optimize, ew-fuse`) and xDSL's lexer refuses."""

_SPACED_BRACE = re.compile(r"(\s*[{}]\s*)")
"""A brace and the spaces around it, which mlir-opt skips too (`ew-fuse { mode=none }`)."""

_QUOTED = re.compile(r"""("(?:\\.|[^"\\])*"|'[^']*')""")
"""A string literal: double-quoted (with escapes), or single-quoted, which mlir-opt takes for an
option's value too (`fastmath='contract,afn'`) and xDSL's lexer does not."""

_ANCHOR = re.compile(r"(?:^|,)([A-Za-z_][\w.$-]*)\(")
"""An op name and its `(`: an anchor of nested passes (`func.func(cse)`), at a pass's place."""


def _spaces_skipped(piece: str, depth: int) -> tuple[str, int]:
    """`piece` (no string literal in it) at brace `depth` without the spaces mlir-opt skips,
    and the depth after it; within braces, the spaces between options stay."""
    parts = []
    for part in _SPACED_BRACE.split(piece):
        brace = part.strip()
        if brace in ("{", "}"):
            depth += 1 if brace == "{" else -1
            parts.append(brace)
        else:
            parts.append(part if depth else _SPACED_PUNCTUATION.sub(r"\1", part))
    return "".join(parts), depth


def _unquoted(text: str) -> str:
    """`text` with each string literal's contents left out (what pass names and braces are)."""
    return "".join(
        piece for index, piece in enumerate(_STRING_LITERAL.split(text)) if index % 2 == 0
    )


def _unanchored(pipeline: str) -> str:
    """`pipeline` without the spaces mlir-opt skips, its single-quoted values double-quoted and
    without mlir-opt's `builtin.module(...)` around it; PassSpecError for another anchor
    (xfuse's passes run on the module), an empty pass (`ew-fuse,`, which mlir-opt refuses) or
    none."""
    pieces, depth = [], 0
    for index, piece in enumerate(_QUOTED.split(pipeline.strip())):
        if index % 2 == 0:
            piece, depth = _spaces_skipped(piece, depth)
        elif piece.startswith("'"):
            piece = '"' + piece[1:-1].replace("\\", "\\\\").replace('"', '\\"') + '"'
        pieces.append(piece)
    text = "".join(pieces)
    bare = _unquoted(text)
    if bare.startswith("builtin.module("):
        if not bare.endswith(")") or _closing(bare, len("builtin.module")) != len(bare) - 1:
            raise PassSpecError(
                f"bad pass pipeline {pipeline!r}: 'builtin.module(' whose ')' does not end it"
            )
        text = text[len("builtin.module(") : -1]
        bare = _unquoted(text)
    anchor = _ANCHOR.search(bare)
    if anchor:
        raise PassSpecError(
            f"bad pass pipeline {pipeline!r}: xfuse's passes run on the module, not nested in "
            f"'{anchor.group(1)}(...)': write them as 'a,b' or 'builtin.module(a,b)'"
        )
    names = re.sub(r"\{[^{}]*\}", "", bare)
    if text and not names.strip(","):  # (`"ew-fuse"`, `{mode=none}`)
        raise PassSpecError(f"bad pass pipeline {pipeline!r}: expected a pass name")
    if re.search(r"(?:^|,)(?:,|$)", names) and text:
        raise PassSpecError(f"bad pass pipeline {pipeline!r}: an empty pass name beside a ','")
    return text


def _closing(text: str, opening: int) -> int:
    """The index in `text` (no string literals) of the `)` that closes the `(` at `opening`;
    -1 where none does."""
    depth = 0
    for index in range(opening, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return -1


def _alternatives(field_type: object) -> tuple[object, ...]:
    """The types an option of this type takes: the union's, Optional's (with None), or itself."""
    if typing.get_origin(field_type) in (typing.Union, types.UnionType):
        return typing.get_args(field_type)
    return (field_type,)


def _number_not_bool(field_type: object) -> bool:
    """An option of this type takes an int or a float (alone, Optional, or in a union) and no
    bool: xDSL takes `true` for it as 1, as a bool is an int to Python."""
    alternatives = _alternatives(field_type)
    return bool not in alternatives and any(t in (int, float) for t in alternatives)


_MLIR_BOOLS = {
    **{spelling: True for spelling in ("true", "TRUE", "True", "1", 1)},
    **{spelling: False for spelling in ("false", "FALSE", "False", "0", 0)},
}
"""What mlir-opt's options take for a bool (LLVM's `cl::opt<bool>`), as xDSL's lexer reads them
(`1` an int, `TRUE` a word, `"true"` quoted a string): `stats=1` was "bad value '1'"."""

_INTEGER_TEXT = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0o?[0-7]+|[1-9][0-9]*|0)")
"""An integer as LLVM's options read one (`getAsInteger` with radix 0), quoted (`"5"`) or a
word (`0x10`): decimal, `0x` hexadecimal, `0b` binary, `0o` (not `0O`, as LLVM) or a leading
`0` octal."""


def _integer(text: str) -> int:
    """An `_INTEGER_TEXT` integer's value: `010` is 8, as LLVM's."""
    digits = text.lstrip("+-")
    value = int(digits, 8) if len(digits) > 1 and digits[1].isdigit() else int(digits, 0)
    return -value if text.startswith("-") else value


def _typed(spec: ArgSpec, hints: Mapping[str, object]) -> ArgSpec:
    """`spec` with its values read as mlir-opt reads them for the options' types: a value
    spelling a float (`1e3`, `inf`, `nan`) of an option that takes a float and no string a
    float (xDSL's lexer takes those for words: `launch-us=1e3` was "expected a number"; the
    pass then checks the value's range); a quoted integer of an integer option an int; a bool
    option given alone (`{stats}`) true, and LLVM's other spellings of a bool (`TRUE`, `1`,
    quoted `"true"`) that bool."""

    def value(option: str, given: ParameterType) -> ParameterType:
        alternatives = _alternatives(hints.get(option.replace("-", "_")))
        if alternatives == (bool,) and isinstance(given, str | int) and given in _MLIR_BOOLS:
            return _MLIR_BOOLS[given]
        if alternatives == (str,) and isinstance(given, bool):  # (xDSL's lexer's: text to mlir)
            return "true" if given else "false"
        if isinstance(given, str) and str not in alternatives:
            if float in alternatives and _FLOAT_TEXT.fullmatch(given):
                return float(given)
            # (not of a float option, which reads as `strtod`: `launch-us=0b11` is no number)
            if int in alternatives and float not in alternatives and _INTEGER_TEXT.fullmatch(given):
                return _integer(given)
        return given

    def values(option: str, given: tuple[ParameterType, ...]) -> tuple[ParameterType, ...]:
        if not given and _alternatives(hints.get(option.replace("-", "_"))) == (bool,):
            return (True,)
        return tuple(value(option, v) for v in given)

    parameters = {option: values(option, given) for option, given in spec.parameters.items()}
    return ArgSpec(spec.name, parameters)


def pass_from_spec(pass_class: type[ModulePass], spec: ArgSpec) -> ModulePass:
    """`pass_class` with `spec`'s options; PassSpecError naming the pass, the option and the
    values it takes (xDSL's own message names neither the pass nor the option), a
    `PassOptionError` for a bad value."""
    hints = typing.get_type_hints(pass_class)
    spelled, spec = spec, _typed(spec, hints)
    for option, value in spec.parameters.items():
        field_type = hints.get(option.replace("-", "_"))
        if _number_not_bool(field_type) and any(isinstance(v, bool) for v in value):
            raise PassOptionError(spec.name, option, value, expected_values(field_type))
    try:
        return pass_class.from_spec(spec)
    except PassOptionError as error:  # the pass's own check of a value (`__post_init__`)
        raise _as_spelled(error, spelled) from None
    except ValueError:
        pass
    fields = [f.name for f in dataclasses.fields(pass_class) if f.init and f.name != "name"]
    given = spec.normalize_parameter_names().parameters
    for required in sorted(pass_class.required_fields() - set(given)):
        raise PassSpecError(f"{spec.name}: option '{required.replace('_', '-')}' is required")
    for option, value in spec.parameters.items():
        field_name = option.replace("-", "_")
        if field_name not in fields:
            options = ", ".join(f.replace("_", "-") for f in fields) or "none"
            raise PassSpecError(f"{spec.name}: unknown option '{option}' (options: {options})")
        try:
            pass_class.from_spec(ArgSpec(spec.name, {option: value}))
        except PassOptionError:
            raise
        except ValueError:
            field_type = hints[field_name]
            listed = isinstance(value, list | tuple) and len(value) > 1
            # An unquoted comma makes a list, which a string option does not take
            # (`fastmath=contract,afn`); quoted it is the one string the option parses.
            takes_str = field_type is str or str in typing.get_args(field_type)
            text = ",".join(map(str, value)) if listed else value
            quote = f' (quote a list: {option}="{text}")' if listed and takes_str else ""
            raise PassOptionError(
                spec.name, option, value, expected_values(field_type) + quote
            ) from None
    raise PassSpecError(f"{spec.name}: bad options {spec}")


def _as_spelled(error: PassOptionError, spec: ArgSpec) -> PassOptionError:
    """`error` with the value as the pipeline spelled it where `_typed` read a float from
    it: `launch-us=1e400` is refused as '1e400', not as 'inf'."""
    given = spec.parameters.get(error.option, spec.parameters.get(error.option.replace("-", "_")))
    if given is None or len(given) != 1 or not isinstance(given[0], str):
        return error
    return PassOptionError(error.pass_name, error.option, given[0], error.expected)


def _repeated_option(pipeline: str) -> str | None:
    """`pass: option 'name' given twice` for the first option a pass of `pipeline` (parsed
    already) is given twice (`ew-fuse{mode=greedy mode=none}`): xDSL's parser keeps the last."""
    lexer = PipelineLexer(pipeline)
    pass_name, given, in_options, previous = "", set[str](), False, SpecTokenKind.EOF
    while (token := lexer.lex()).kind is not SpecTokenKind.EOF:
        if token.kind is SpecTokenKind.L_BRACE:
            in_options, given = True, set()
        elif token.kind is SpecTokenKind.R_BRACE:
            in_options = False
        elif token.kind is SpecTokenKind.IDENT and not in_options:
            pass_name = token.text
        elif token.kind is SpecTokenKind.IDENT and previous in (
            SpecTokenKind.L_BRACE,
            SpecTokenKind.SPACE,
        ):  # an option's name (a value follows `=` or `,`)
            option = token.text.replace("_", "-")  # xDSL takes max_ops for max-ops
            if option in given:
                return f"{pass_name}: option '{option}' given twice"
            given.add(option)
        previous = token.kind
    return None


def from_spec_text(convertible: type[ArgSpecConvertible], text: str) -> ArgSpecConvertible:
    """`text` (`name{option=value ...}`) as `convertible`, a pass or an output target (`xfuse-opt
    -t`), its options read as `-p` reads a pass's (`{flag}` alone is true, `1` is true, an option
    given twice refused); PassSpecError naming the option, where xDSL's own was `Incompatible
    types: given (), expected <class 'bool'>`."""
    repeated = _repeated_option(text)
    if repeated is not None:
        raise PassSpecError(repeated)
    return pass_from_spec(convertible, parse_spec(text))  # type: ignore[arg-type]


def parse_passes(
    spec: str, available: Mapping[str, Callable[[], type[ModulePass]]] = ALL_PASSES
) -> list[ModulePass]:
    """The passes of a pipeline in `xfuse-opt -p` syntax (`"ew-optimize,ew-fuse{mode=none}"`);
    PassSpecError for an unknown pass or a bad option."""
    lexed = _numbers_quoted(_unanchored(spec))
    try:
        specs = list(parse_pipeline(lexed))
    except (ArgSpecParseError, ValueError) as error:
        raise PassSpecError(f"bad pass pipeline {spec!r}: {error}") from None
    repeated = _repeated_option(lexed)
    if repeated is not None:
        raise PassSpecError(repeated)
    for unknown in (s.name for s in specs if s.name not in available):
        close = difflib.get_close_matches(unknown, available, n=1)
        raise PassSpecError(
            f"unknown pass '{unknown}'"
            + (f" (did you mean '{close[0]}'?)" if close else "")
            + f"; xfuse's passes are {', '.join(ALL_PASSES)}"
        )
    return [pass_from_spec(available[s.name](), s) for s in specs]


def pipeline_context() -> Context:
    """A context with every dialect xfuse's stages use, from `ew` on tensors down to `llvm`."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.cf import Cf
    from xdsl.dialects.llvm import LLVM
    from xdsl.dialects.math import Math
    from xdsl.dialects.memref import MemRef
    from xdsl.dialects.scf import Scf

    from xfuse.dialects.ew import Ew

    ctx = Context()
    for dialect in (Builtin, func.Func, Arith, Math, MemRef, Scf, Cf, LLVM, Ew):
        ctx.load_dialect(dialect)
    return ctx


def only_function(module: ModuleOp) -> func.FuncOp:
    """The module's one `func.func` (xfuse programs have exactly one); ValueError otherwise."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise ValueError(f"expected one function in the module, found {len(functions)}")
    return functions[0]


def check_new_symbol(module: ModuleOp, name: str, pass_name: str, what: str) -> None:
    """Before `pass_name` adds `what`, a function named `name`, to `module`: a clear error where
    the module has that symbol already (xDSL's verifier failed the whole module after the pass,
    naming neither the pass nor the function)."""
    if SymbolTable.lookup_symbol(module, name) is not None:
        raise DiagnosticException(
            f"{pass_name}: the module has a symbol @{name} already, the name of {what}: rename "
            "that symbol"
        )


def declared_already(module: ModuleOp, declaration: Operation, pass_name: str) -> bool:
    """Whether `module` has `declaration` (an external function `pass_name` calls) already: a
    clear error where its name is another symbol (a kernel named `@expf` that calls expf: the
    calls went to the kernel, with its arguments wrong, or it failed naming no pass)."""
    name = cast(StringAttr, declaration.properties["sym_name"]).data
    found = SymbolTable.lookup_symbol(module, name)
    if found is None:
        return False
    if found.is_structurally_equivalent(declaration):
        return True
    raise DiagnosticException(
        f"{pass_name}: the module has a symbol @{name} already, and the code {pass_name} makes "
        f"calls the C library's {name}: rename that symbol"
    )


def check_no_nested_module(module: ModuleOp, pass_name: str) -> None:
    """A clear error where `module` holds a module: `pass_name` declares what it calls at its
    top, which a nested module's functions do not see."""
    if any(isinstance(op, ModuleOp) for op in module.ops):
        raise DiagnosticException(
            f"{pass_name}: the module holds a 'builtin.module': {pass_name} lowers the "
            "functions of the module it is given (lower a nested module by itself)"
        )


def apply_pipeline(module: ModuleOp, pipeline: str | Sequence[ModulePass]) -> ModuleOp:
    """A copy of `module` after `pipeline`: passes, or their `xfuse-opt -p` spelling (e.g.
    `"ew-optimize,ew-fuse{mode=none}"`)."""
    passes = parse_passes(pipeline) if isinstance(pipeline, str) else pipeline
    compiled = module.clone()
    PassPipeline(tuple(passes)).apply(pipeline_context(), compiled)
    return compiled


def use_before_definition(root: Operation) -> tuple[Operation, int] | None:
    """The first (op, operand index) under `root` whose operand does not dominate it, as MLIR's
    verifier defines it: a result must come earlier in the same block, or in a block that
    dominates the use's; the block of a block argument must dominate the use. None if all do.
    Blocks of `builtin.module` form a graph region and are not ordered."""
    positions: dict[Operation, int] = {}
    dominance: dict[Region, DominanceInfo] = {}

    def position(op: Operation) -> int:
        if op not in positions:
            block = op.parent_block()
            assert block is not None
            positions.update((o, i) for i, o in enumerate(block.ops))
        return positions[op]

    def dominates(definer: Block, user: Operation) -> bool:
        """Whether `definer` dominates the block holding `user` or an ancestor of it."""
        region = definer.parent
        ancestor: Operation | None = user
        while ancestor is not None and ancestor.parent_region() is not region:
            ancestor = ancestor.parent_op()
        if ancestor is None:
            return False
        if region is not None and region not in dominance:
            dominance[region] = DominanceInfo(region)
        block = ancestor.parent_block()
        return block is definer or (
            region is not None and dominance[region].dominates(definer, block)
        )

    for op in root.walk():
        for index, operand in enumerate(op.operands):
            if isinstance(operand, BlockArgument):
                if not dominates(operand.block, op):
                    return op, index
                continue
            definer = operand.owner
            assert isinstance(definer, Operation)
            block = definer.parent_block()
            if block is None or not dominates(block, op):
                return op, index
            ancestor: Operation | None = op
            while ancestor is not None and ancestor.parent_block() is not block:
                ancestor = ancestor.parent_op()
            graph_region = isinstance(definer.parent_op(), ModuleOp)
            if (
                ancestor is not None
                and not graph_region
                and position(definer) >= position(ancestor)
            ):
                return op, index
    return None


def with_static_inputs(module: ModuleOp) -> ModuleOp:
    """`module`, or a copy whose arguments have each `?` dim that another value of the function
    has statically (not 1) on the same axis made that size (right-aligned, as numpy's).

    A `?` never broadcasts, so such an argument must be that size, which its type then says (and
    the call checks): with `%t = ew.add %x, %c : tensor<?xf32>, tensor<3xf32> -> tensor<3xf32>`
    then `%y = ew.add %t, %x : ... -> tensor<?xf32>`, an `x` of 5 read past the end of `t`; in
    bufferized IR, a kernel writing a `memref<8xf32>` temporary from an `x` of 2 read past its end.
    Static sizes that disagree on an axis are an error naming both types.
    """
    function = only_function(module)
    values = [*function.args, *(v for op in function.walk() for v in (*op.operands, *op.results))]
    # (the arguments too: an unused one of higher rank set the axes' alignment of none)
    types = [value.type for value in values if isinstance(value.type, TensorType | MemRefType)]
    rank = max((len(type_.get_shape()) for type_ in types), default=0)
    sizes: list[tuple[int, Attribute] | None] = [None] * rank
    for type_ in types:
        shape = type_.get_shape()
        for axis, size in enumerate(shape):
            known = sizes[rank - len(shape) + axis]
            if size in (1, DYNAMIC_INDEX) or (known is not None and known[0] == size):
                continue
            if known is not None:
                raise DiagnosticException(
                    f"'{function.sym_name.data}': a {type_} has {size} where a {known[1]} has "
                    f"{known[0]} on the same axis (one iteration space: static sizes other than 1 "
                    "must agree)"
                )
            sizes[rank - len(shape) + axis] = (size, type_)

    def refined(type_: Attribute) -> Attribute:
        if not isinstance(type_, TensorType | MemRefType):
            return type_
        shape = type_.get_shape()
        offset = rank - len(shape)
        static = [
            known[0] if size == DYNAMIC_INDEX and (known := sizes[offset + axis]) else size
            for axis, size in enumerate(shape)
        ]
        if static == list(shape):
            return type_
        if isinstance(type_, TensorType):
            return TensorType(type_.element_type, static)
        return MemRefType(type_.element_type, static)  # (no layout: `compile_bufferized` checks)

    if all(refined(arg.type) == arg.type for arg in function.args):
        return module
    module = module.clone()
    function = only_function(module)
    for arg in function.args:
        if refined(arg.type) != arg.type:
            # (`ew.dims` and `ew.name` are the function's argument attributes: they stay)
            Rewriter.replace_value_with_new_type(arg, refined(arg.type)).name_hint = arg.name_hint
    # and the ops' results computed from them (tensor kernels too, as `xfuse-opt -p ew-fuse`
    # prints them): a kernel of a static input and a `?` result (`exp(x) + y` with a y[3]) left
    # `ew-bufferize` no operand to size its output by, and the verifier refuses it
    for op in [
        op for op in function.walk() if isinstance(op, (*ELEMENTWISE_OPS, ConvertOp, KernelOp))
    ]:
        for result in op.results:
            if refined(result.type) != result.type:
                Rewriter.replace_value_with_new_type(result, refined(result.type))
    function.update_function_type()
    return module
