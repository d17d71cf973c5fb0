"""The `.ew` frontend: language features, evaluation order, outputs, dtypes, shapes, errors."""

from __future__ import annotations

import contextlib
import inspect
import math
import pickle
import re
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, FileLineColLoc, ModuleOp, TensorType
from xdsl.ir import Operation

import xfuse
from xfuse.dialects import ew
from xfuse.dialects.dtypes import SHORT_DTYPE_NAMES, element_type_for
from xfuse.frontend import language
from xfuse.frontend.builder import FunctionBuilder
from xfuse.frontend.language import (
    EXCERPT_CELLS,
    MAX_NESTING,
    SPELL_CHECK_LIMIT,
    SPELL_CHECK_WORK,
    EwNameWarning,
    EwSyntaxError,
    ParsedProgram,
    parse_program,
)
from xfuse.runtime.compiler import compile_module, distinct_names, parse_ir
from xfuse.runtime.cost_driver import cost_program

if TYPE_CHECKING:
    from conftest import Evaluate, Gelu


def function_of(module: ModuleOp) -> func.FuncOp:
    (function,) = module.ops
    assert isinstance(function, func.FuncOp)
    return function


def body_ops(module: ModuleOp) -> list[Operation]:
    return list(function_of(module).body.block.ops)


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in body_ops(module)]


def input_names(module: ModuleOp) -> list[str | None]:
    return [arg.name_hint for arg in function_of(module).args]


# ---------------------------------------------------------------------------------------------
# The language
# ---------------------------------------------------------------------------------------------


def test_gelu_inputs_ops_and_result(gelu: Gelu, evaluate_float64: Evaluate) -> None:
    module = parse_program(gelu.source)
    module.verify()
    assert input_names(module) == ["x", "b", "r"]
    ops = [op for op in body_ops(module) if not isinstance(op, ew.ConstantOp | func.ReturnOp)]
    assert [op.name for op in ops] == [
        "ew.add",  # h = x + b
        "ew.mul",  # 0.5 * h
        "ew.mul",  # 0.044715 * h
        "ew.mul",  # ... * h
        "ew.mul",  # ... * h
        "ew.add",  # h + ...
        "ew.mul",  # 0.7978845608 * (...)
        "ew.tanh",
        "ew.add",  # 1 + tanh(...)
        "ew.mul",  # y
        "ew.add",  # out = y + r
    ]
    function = function_of(module)
    assert function.sym_name.data == "main"
    f32_vector = TensorType(element_type_for("f32"), [DYNAMIC_INDEX])
    assert function.function_type.inputs.data == (f32_vector,) * 3
    assert function.function_type.outputs.data == (f32_vector,)
    rng = np.random.default_rng(0)
    x, b, r = rng.standard_normal((3, 7))
    (out,) = evaluate_float64(module, x=x, b=b, r=r)
    np.testing.assert_allclose(out, gelu.reference(x, b, r), rtol=1e-14)


@pytest.mark.parametrize(
    "source,expected",
    [
        ("y = 1.25e-1 + 2.5E+2 + .5 + 5. + 1.e1 + 7;", 0.125 + 250 + 0.5 + 5 + 10 + 7),
        ("y = 0.1 * 3;", float(np.float32(np.float32(0.1) * np.float32(3)))),  # f32, as kernels
        ("y = 8 - 4 - 2;", 2.0),  # left associative
        ("y = 8 / 4 / 2;", 1.0),
        ("y = 2 + 3 * 4;", 14.0),  # precedence
        ("y = (2 + 3) * 4;", 20.0),
        ("y = -2 * 3;", -6.0),
        ("y = 2 * -3;", -6.0),
        ("y = - - 3;", 3.0),
        ("y = -(2 + 3);", -5.0),
        ("y = 10 - -3;", 13.0),
        ("y = pow(2, 10) + max(1, 2) - min(1, 2);", 1025.0),
        ("y = 1; # a comment ; y = 2;\n", 1.0),
        ("# leading comment\ny = 3;   # trailing\n# last line without newline", 3.0),
        ("y = 1e400;", math.inf),
        # any number of digits, as float() reads them: no int() and its 4300-digit limit
        (f"y = {'9' * 5000};", math.inf),
        (f"y = -{'9' * 5000}.5;", -math.inf),
        (f"y = 0.{'0' * 5000}1;", 0.0),
    ],
)
def test_constant_expressions(source: str, expected: float, evaluate_float64: Evaluate) -> None:
    (value,) = evaluate_float64(parse_program(source))
    assert float(value) == expected


def test_unary_minus_of_a_literal_is_a_negative_constant_of_a_name_a_neg() -> None:
    module = parse_program("y = -x * -2;")
    assert op_names(module) == ["ew.neg", "ew.constant", "ew.mul", "func.return"]
    constant = next(op for op in body_ops(module) if isinstance(op, ew.ConstantOp))
    assert constant.literal == -2.0


@pytest.mark.parametrize("mnemonic", sorted(ew.OPS_BY_MNEMONIC))
def test_every_function_by_name(mnemonic: str, evaluate_float64: Evaluate) -> None:
    op_type = ew.OPS_BY_MNEMONIC[mnemonic]
    names = ["x", "b", "x"][: ew.arity(op_type)]
    module = parse_program(f"y = {mnemonic}({', '.join(names)});")
    module.verify()
    assert op_names(module) == [op_type.name, "func.return"]
    assert input_names(module) == list(dict.fromkeys(names))
    arrays = {"x": np.array([0.25, 2.0, 9.0, 0.0]), "b": np.array([1.5, -0.5, 0.5, 0.0])}
    (result,) = evaluate_float64(module, **arrays)
    np.testing.assert_array_equal(result, op_type.reference(*(arrays[n] for n in names)))


def test_function_arguments_are_expressions(evaluate_float64: Evaluate) -> None:
    module = parse_program("y = max(x * 2, tanh(b + 1));")
    x, b = np.array([-1.0, 3.0]), np.array([0.5, -4.0])
    np.testing.assert_allclose(
        evaluate_float64(module, x=x, b=b)[0], np.maximum(x * 2, np.tanh(b + 1))
    )


def test_evaluation_is_in_source_order_left_to_right() -> None:
    module = parse_program("y = exp(d) * c + abs(a) * sqrt(b);")
    assert input_names(module) == ["d", "c", "a", "b"]
    assert op_names(module) == ["ew.exp", "ew.mul", "ew.abs", "ew.sqrt", "ew.mul", "ew.add"] + [
        "func.return"
    ]
    module = parse_program("z = w; y = x + z;")
    assert input_names(module) == ["w", "x"]


def test_reassignment_rebinds_the_name(evaluate_float64: Evaluate) -> None:
    module = parse_program("y = x + 1; z = y; y = y * 2; y = y - z;", ["y", "z"])
    x = np.array([1.0, 5.0])
    y, z = evaluate_float64(module, x=x)
    np.testing.assert_array_equal(y, (x + 1) * 2 - (x + 1))
    np.testing.assert_array_equal(z, x + 1)
    assert input_names(module) == ["x"]
    assert [v.name_hint for v in body_ops(module)[-1].operands] == ["y", "z"]


def test_the_first_assignment_of_a_name_may_read_it_as_an_input(evaluate_float64: Evaluate) -> None:
    """`x = x * x;` reads the input x; reading x in an earlier statement is an error (below)."""
    module = parse_program("x = x * x;")
    assert input_names(module) == ["x"]
    np.testing.assert_array_equal(evaluate_float64(module, x=np.array([3.0]))[0], [9.0])
    with pytest.raises(EwSyntaxError, match="'x' is read before it has a value"):
        parse_program("y = x + 1; x = y;")


# ---------------------------------------------------------------------------------------------
# Outputs, dtypes, shapes
# ---------------------------------------------------------------------------------------------


def test_outputs_chosen_by_the_caller(evaluate_float64: Evaluate) -> None:
    source = "h = x + b; y = h * h; z = y - 1;"
    default = parse_program(source)
    assert len(function_of(default).function_type.outputs) == 1
    several = parse_program(source, ["y", "h", "x", "y"])
    returned = body_ops(several)[-1]
    assert isinstance(returned, func.ReturnOp)
    hints = [v.name_hint for v in returned.arguments]
    assert hints == ["y", "h", "x", "y"]
    assert returned.arguments[2] is function_of(several).args[0]  # an input as output
    x, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    y, h, x_out, _ = evaluate_float64(several, x=x, b=b)
    np.testing.assert_array_equal(h, x + b)
    np.testing.assert_array_equal(y, (x + b) ** 2)
    np.testing.assert_array_equal(x_out, x)
    assert input_names(parse_program(source, ["x"])) == ["x", "b"]  # unused inputs stay
    # one name as a string, as xfuse.compile takes it (it was its letters: "unknown output 'h'")
    returned = body_ops(parse_program(source, "h"))[-1]
    assert isinstance(returned, func.ReturnOp)
    assert [v.name_hint for v in returned.arguments] == ["h"]


@pytest.mark.parametrize(
    "source", ["out = x;", "y = x; out = y;", "out = 2 * 3;", "y = x * 2; out = y;"]
)
def test_the_default_output_has_the_name_it_is_assigned_to(source: str) -> None:
    kernel = xfuse.compile(source)
    assert kernel.output_names == ("out",)
    assert ParsedProgram(source, None, FunctionBuilder()).output_names == ["out"]


def test_declared_inputs_come_first_wherever_they_are_declared() -> None:
    """As documented: declared inputs first, in declaration order, then the undeclared ones in
    order of first use. A declaration after a statement that read an undeclared input made the
    declared one the second argument, and a positional call bound the arrays the other way."""
    kernel = xfuse.compile("y = a * 10; input b; z = b + y;")
    assert str(kernel.signature) == "(b: float32[?], a: float32[?]) -> (z: float32[?])"
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    np.testing.assert_array_equal(kernel(ones, zeros), ones)  # b = 1, a = 0
    mixed = xfuse.compile("input f64 c[n]; y = a * 10 + q; input b[n]; z = b + y + c;")
    assert [p.name for p in mixed.function.inputs] == ["c", "b", "a", "q"]
    (function,) = mixed.ir("frontend").split("func.func @main(")[1:]
    assert function.startswith('%c: tensor<?xf64> {ew.dims = ["n"]}, %b: tensor<?xf32> {ew.dims')


def test_output_declarations_name_the_results_in_order(evaluate_float64: Evaluate) -> None:
    source = "output y, h;\nh = x + b;\ny = h * h;\nz = y - 1;\noutput x;"
    parsed = ParsedProgram(source, None, FunctionBuilder())
    assert parsed.output_names == ["y", "h", "x"]
    returned = body_ops(parsed.module)[-1]
    assert isinstance(returned, func.ReturnOp)
    assert returned.arguments[2] is function_of(parsed.module).args[0]  # an input as output
    x, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    y, h, x_out = evaluate_float64(parsed.module, x=x, b=b)
    np.testing.assert_array_equal(h, x + b)
    np.testing.assert_array_equal(y, (x + b) ** 2)
    np.testing.assert_array_equal(x_out, x)
    # The caller's choice overrides the declaration.
    assert ParsedProgram(source, ["z"], FunctionBuilder()).output_names == ["z"]
    kernel = xfuse.compile(source)
    assert kernel.output_names == ("y", "h", "x")
    y, h, x_out = kernel(x.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(y, ((x + b) ** 2).astype(np.float32))


def test_an_undeclared_name_close_to_a_known_one_warns(tmp_path: Path) -> None:
    # In a program that declares its inputs, `hh` (a typo of `h`) silently became an input.
    path = tmp_path / "typo.ew"
    path.write_text("input f32 x[n];\nh = x * 2;\nout = hh + 1;\n")
    with pytest.warns(EwNameWarning) as caught:
        module = parse_program(path.read_text(), filename=str(path))
    (warning,) = caught
    assert (warning.filename, warning.lineno) == (str(path), 3)
    assert str(warning.message) == (
        "column 7: 'hh' is neither declared nor assigned, so it is an input: did you mean 'h'?"
    )
    (main,) = (op for op in module.ops if isinstance(op, func.FuncOp))
    assert [arg.name_hint for arg in main.args] == ["x", "hh"]  # still an input, as documented


def test_a_name_warning_made_an_error_is_a_located_error_of_each_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under `-W error` (`PYTHONWARNINGS=error`, as CI runs) the warning is an exception: `xfuse
    cost` and `xfuse bench` showed a traceback, `xfuse-opt` an "internal error" (status 2)."""
    from xfuse.tools import cli, opt

    path = tmp_path / "typo.ew"
    path.write_text("input f32 x;\nh = x * 2;\nout = hh + 1;\n")
    expected = (
        f"{path}:3: error: column 7: 'hh' is neither declared nor assigned, so it is an input: "
        "did you mean 'h'? [EwNameWarning, an error by the warnings filter]\n"
    )
    for main, arguments in [
        (cli.main, ["cost"]),
        (cli.main, ["bench", "--sizes", "16"]),
        (opt.main, []),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert main([*arguments, str(path)]) == 1
        assert capsys.readouterr().err == expected


def test_a_name_warning_shows_once_in_a_command_that_parses_its_program_often(
    tmp_path: Path,
) -> None:
    """`xfuse bench` showed it 5 times, `xfuse lecture` 9 (5 of them at `<source>`): each parse
    of the program warned again. Once per message and line of each file, as Python's own
    warnings are per module: the same typo at the same line of another file shows too."""
    from xfuse.tools import cli

    path = tmp_path / "typo.ew"
    path.write_text("input alpha;\nout = alpah * 2 + alpha;\n")
    commands = [
        ["bench", str(path), "--sizes", "64", "--repeat", "1"],
        ["lecture", "--source", str(path), "--n", "4096", "--repeat", "1"],
    ]
    for arguments in commands:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")  # (Python's: once per message and line)
            assert cli.main(arguments) == 0
        shown = [w for w in caught if issubclass(w.category, EwNameWarning)]
        assert [(w.filename, w.lineno) for w in shown] == [(str(path), 2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for name in ("a.ew", "b.ew", "a.ew"):
            parse_program(path.read_text(), filename=name)
    assert [w.filename for w in caught] == ["a.ew", "b.ew"]


def test_two_programs_of_one_name_each_show_their_name_warning() -> None:
    """The registry was per file name alone: of two different programs compiled without a
    `filename` (both `<source>`), the second's typo at the same line showed nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for source in ("input h; out = hh * h;", "input h; out = hh + h;"):
            parse_program(source)
            parse_program(source)  # (the same program again: once)
    assert [(w.filename, w.lineno) for w in caught] == [("<source>", 1)] * 2


def test_compile_names_the_program_by_its_filename() -> None:
    """`xfuse.compile(source, filename=...)` locates its errors and warnings in that file (as
    Python's `compile`): `xfuse bench` and the lecture compile a file's program so."""
    with pytest.raises(EwSyntaxError) as error:
        xfuse.compile("out = x +* 2;", filename="k.ew")
    assert str(error.value).startswith("k.ew:1:10: error: expected an expression")
    with pytest.warns(EwNameWarning) as caught:
        xfuse.compile("input alpha;\nout = alpah * 3 + alpha;", filename="k.ew")
    assert [(w.filename, w.lineno) for w in caught] == [("k.ew", 2)]
    with pytest.raises(TypeError, match="^filename must be a string or a path, got int"):
        xfuse.compile("out = x * 2;", filename=3)  # type: ignore[arg-type]
    # a path is its string, in `xfuse.bench` too (an AttributeError there: 'encode')
    with pytest.raises(EwSyntaxError, match=r"^k\.ew:1:10: error"):
        xfuse.compile("out = x +* 2;", filename=Path("k.ew"))
    with pytest.raises(EwSyntaxError, match=r"^k\.ew:1:10: error"):
        xfuse.bench("out = x +* 2;", filename=Path("k.ew"))
    with pytest.raises(TypeError, match="^filename must be a string or a path, got NoneType"):
        xfuse.bench("out = x * 2;", filename=None)  # type: ignore[arg-type]
    # and in parse_program and cost_program, which raised a raw AttributeError ('encode')
    with pytest.raises(EwSyntaxError, match=r"^k\.ew:1:10: error"):
        parse_program("out = x +* 2;", filename=Path("k.ew"))
    with pytest.raises(EwSyntaxError, match=r"^k\.ew:1:10: error"):
        cost_program("out = x +* 2;", filename=Path("k.ew"))
    with pytest.raises(TypeError, match="^filename must be a string or a path, got NoneType"):
        parse_program("out = x * 2;", filename=None)  # type: ignore[arg-type]


def test_a_compile_found_in_memory_warns_as_its_parse_would() -> None:
    """A hit in memory skipped the parse and its warning: the same program as `b.ew` showed
    none, nor did a second compile under `-W error` (a disk hit issued it; now both do)."""
    source = "input gamma;\nout = gamam * 3 + gamma;"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # (Python's: once per message and line of a file)
        for name in ("a.ew", "b.ew", "a.ew"):
            xfuse.compile(source, filename=name)
    assert [(w.filename, w.lineno) for w in caught] == [("a.ew", 2), ("b.ew", 2)]
    with warnings.catch_warnings(), pytest.raises(EwNameWarning, match="did you mean 'gamma'"):
        warnings.simplefilter("error")
        xfuse.compile(source, filename="c.ew")


def test_undeclared_names_are_checked_for_typos_up_to_a_limit() -> None:
    """Each check compares with every declared and assigned name: unlimited, a generated
    program of thousands of inputs took quadratic time (21 s for 4,000)."""
    reads = " + ".join(f"hh{i}" for i in range(SPELL_CHECK_LIMIT + 10))
    names = "".join(f"h{i} = x;\n" for i in range(SPELL_CHECK_LIMIT + 10))
    with pytest.warns(EwNameWarning) as caught:
        parse_program(f"input f32 x;\n{names}out = {reads};\n")
    assert len(caught) == SPELL_CHECK_LIMIT  # the first 50 undeclared names, as documented
    # Declared inputs are not undeclared names: a program of 50 of them had no check at all.
    declared = "input " + ", ".join(f"w{i}" for i in range(SPELL_CHECK_LIMIT)) + ";"
    with pytest.warns(EwNameWarning, match="'hh' is neither declared nor assigned"):
        parse_program(f"{declared} h = w0 * 2; y = hh + h;")


def test_spell_checks_compare_a_bounded_number_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """50 checks each against all of 16,000 long look-alike names took 24.5 s, one of 2,000
    names of 199 characters 6.7 s: the checks compare `SPELL_CHECK_WORK` in all (a name's
    length times each other's), a check that would pass that skipped."""
    compared = []
    close_matches = language.difflib.get_close_matches
    monkeypatch.setattr(
        language.difflib,
        "get_close_matches",
        lambda word, names, **k: (
            compared.append(len(word) * sum(map(len, names))) or close_matches(word, names, **k)
        ),
    )
    assigned = "".join(f"hidden_{i} = a * w{i % 60};\n" for i in range(3000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parse_program(f"input a;\n{assigned}")
    assert sum(compared) <= SPELL_CHECK_WORK and len(compared) > 1
    compared.clear()
    long_names = "".join(f"{'ab' * 99}{i} = a;\n" for i in range(2000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parse_program(f"input a;\n{long_names}y = {'ab' * 99}x;\n")
    assert compared == []  # past the bound at once
    with pytest.warns(EwNameWarning, match="did you mean 'value'"):  # a small program: all
        parse_program("input x; value = x; y = " + " + ".join(f"valu{i}" for i in range(60)) + ";")
    assert len(compared) == SPELL_CHECK_LIMIT


def test_warnings_hash_the_program_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each warning hashed the whole source and counted its lines from the start: 16,000
    statements that read their own targets parsed in 12.1 s (now 3.5)."""
    digests = []
    monkeypatch.setattr(language, "program_digest", lambda s: digests.append(s) or "d")
    source = "input x;\n" + "".join(f"a{i} = a{i} * x;\n" for i in range(200))
    with pytest.warns(EwNameWarning) as caught:
        parse_program(source, filename="self.ew")
    assert len(caught) == 200 and len(digests) == 1
    assert [(w.lineno, str(w.message)[:10]) for w in caught][-1] == (201, "column 8: ")


@pytest.mark.parametrize(
    ("source", "outputs", "message"),
    [
        ("y = " + "1" * 100_000 + "x;", None, "'11111111111111111111...111111111111111111"),
        ("y = " + "q" * 100_000 + "(x);", None, "unknown function 'qqqq"),
        ("y = x " + "q" * 100_000 + ";", None, "found 'qqqq"),
        ("".join(f"a{i} = x;\n" for i in range(16_000)), ["nope"], "a19, ... (15980 more)"),
        ("".join(f"a{i} = x;\n" for i in range(16_000)) + "output nope;", None, "(15980 more)"),
    ],
)
def test_messages_stay_short(source: str, outputs: list[str] | None, message: str) -> None:
    """A message quoted a token of 100,000 characters whole, and listed every one of 16,000
    names (117 KB in one line)."""
    with pytest.raises(EwSyntaxError) as info:
        parse_program(source, outputs)
    assert message in info.value.message and len(info.value.message) < 1000


def test_a_constant_name_read_as_an_input_warns_how_to_write_it() -> None:
    """`max(x, -inf)` made an input named `inf`, silently (a call then asked for it)."""
    with pytest.warns(EwNameWarning) as caught:
        module = parse_program("y = max(x, -inf) + NaN * pi;\n")
    assert [str(w.message) for w in caught] == [
        "column 13: 'inf' is an input: `.ew` has no named constants (infinity is 1e999; declare "
        "`input inf;` to keep it one)",
        "column 20: 'NaN' is an input: `.ew` has no named constants (NaN is 0/0; declare "
        "`input NaN;` to keep it one)",
        "column 26: 'pi' is an input: `.ew` has no named constants (pi is 3.141592653589793; "
        "declare `input pi;` to keep it one)",
    ]
    assert [a.name_hint for a in module.ops.first.args] == ["x", "inf", "NaN", "pi"]
    # read in its own first assignment, it cannot be declared (that is an error)
    with pytest.warns(EwNameWarning) as caught:
        parse_program("nan = nan + 1; y = nan;")
    assert [str(w.message) for w in caught] == [
        "column 7: 'nan' is an input: `.ew` has no named constants (NaN is 0/0)"
    ]
    # declared or assigned, it is no constant meant
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_program("input x, inf; pi = 3.14; y = max(x, -inf) * pi;")


def test_a_syntax_error_pickles_with_its_location() -> None:
    """A process pool's worker sends its errors pickled: EwSyntaxError did not unpickle
    (its __init__ takes the source), and the pool broke."""
    with pytest.raises(EwSyntaxError) as info:
        parse_program("a = 1;\r\nb = 2;\nout = a +\tb $ 3;\n", filename="f.ew")
    copied = pickle.loads(pickle.dumps(info.value))
    assert str(copied) == str(info.value)
    assert (copied.line, copied.column, copied.filename) == (3, 13, "f.ew")


def test_a_name_read_in_its_own_first_assignment_warns_so() -> None:
    """It was "'acc' is neither declared nor assigned ...: did you mean 'acc'?", the name
    itself, in a program that declares its inputs."""
    with pytest.warns(EwNameWarning) as caught:
        parse_program("input x;\nacc = acc * x;\n", filename="acc.ew")
    assert [str(w.message) for w in caught] == [
        "column 7: 'acc' is read in its own first assignment, so it is an input: assign it "
        "before, or read a declared input of another name (input x0; x = x0 * 2;)"
    ]
    # past the spell check's limit of undeclared inputs too (it costs no comparisons)
    many = "input x;\ns = " + " + ".join(f"u{i}" for i in range(60)) + ";\nacc = acc * x;\n"
    with pytest.warns(EwNameWarning, match="'acc' is read in its own first assignment"):
        parse_program(many)

    # a RecursionError of a caller's own depth, not the program's, is no syntax error
    def parse_at(depth: int) -> ModuleOp:
        return parse_at(depth - 1) if depth else parse_program("input x[4];\nout = x;")

    frames = len(inspect.stack(0))
    for depth in range(sys.getrecursionlimit() - frames - 80, sys.getrecursionlimit() - frames):
        with contextlib.suppress(RecursionError):  # (somewhere here the parse itself runs out)
            parse_at(depth)


@pytest.mark.parametrize(
    "nested",
    [
        "(" * MAX_NESTING + "x" + ")" * MAX_NESTING,
        "-" * MAX_NESTING + "x",
        "-(" * 50 + "x" + ")" * 50,
    ],
)
def test_nesting_up_to_its_bound_compiles(nested: str) -> None:
    """`MAX_NESTING` levels of parentheses, calls or minus signs are allowed, as its message
    says ("more than 100 levels"): the statement's own expression counted as one, so 100
    were refused."""
    kernel = xfuse.compile(f"y = {nested};")
    np.testing.assert_array_equal(kernel(x=np.float32([2.0])), [2.0])


def test_a_deep_caller_gets_a_syntax_error_for_a_deep_expression() -> None:
    """99 nested calls (allowed) from a caller ~200 frames deep ran out of Python's stack: a
    raw RecursionError, where the nesting bound promised none."""
    source = "y = " + "exp(" * (MAX_NESTING - 1) + "x" + ")" * (MAX_NESTING - 1) + ";"

    def parse_at(depth: int) -> ModuleOp:
        return parse_at(depth - 1) if depth else parse_program(source)

    with pytest.raises(EwSyntaxError, match=r"levels deep, more than Python's stack has room"):
        parse_at(sys.getrecursionlimit() - 300)


@pytest.mark.parametrize(
    "source",
    [
        "h = x * 2; out = hh + 1;",  # no declarations: every undeclared name is an input
        "input f32 x; h = x * 2; out = h + bias;",  # nothing close to `bias`
        "input f64 s; out = s + q;",  # tests/test_shapes.py's mix of declared and undeclared
    ],
)
def test_undeclared_names_without_a_close_one_do_not_warn(source: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", EwNameWarning)
        parse_program(source)


def test_names_ending_in_an_underscore_and_digits_are_kept() -> None:
    """xDSL drops a `_<digits>` suffix from name hints, which named the inputs: `w_1` was the
    kernel's `w`, `w_1` and `w` together "duplicate parameter name: 'w'" (a raw ValueError, for
    `@xfuse.jit def f(w_1, w)` too), and `_1 = _2 * 2;` an empty hint xDSL then rejected."""
    w_1, w = np.float32([1, 2]), np.float32([10, 20])
    kernel = xfuse.compile("input w_1[t]; out = w_1 * 2 + w;")
    assert kernel.input_names == ("w_1", "w")
    np.testing.assert_array_equal(kernel(w=w, w_1=w_1), w_1 * 2 + w)
    with pytest.raises(ValueError, match="'w_1' has t = 2"):  # its `ew.dims` found by name
        xfuse.compile("input w_1[t]; input w[t]; out = w_1 * w;")(w_1, np.float32([1, 2, 3]))
    jitted = xfuse.jit(lambda w_1, w: w_1 * 2 + w)
    np.testing.assert_array_equal(jitted(w=w, w_1=w_1), w_1 * 2 + w)
    kernel = xfuse.compile("_1 = _2 * 2; _3 = _1 + _2;", outputs=["_3", "_1"])
    assert (kernel.input_names, kernel.output_names) == (("_2",), ("_3", "_1"))
    for got, want in zip(kernel(_2=w), [w * 3, w * 2], strict=True):
        np.testing.assert_array_equal(got, want)


def test_output_is_a_keyword_only_before_a_name() -> None:
    parsed = ParsedProgram("output = x + 1;\ny = output * 2;", None, FunctionBuilder())
    assert parsed.output_names == ["y"]
    assert op_names(parsed.module)[-1] == "func.return"


BF16 = np.dtype(ml_dtypes.bfloat16)


def _run_bf16(source: str) -> np.ndarray:
    x = np.array([1.0, -3.0, 0.5], BF16)
    return xfuse.compile(source)(x=x)


def test_a_literal_bound_to_a_name_takes_each_dtype_it_meets() -> None:
    """It was retyped by erasing its op, which the name still held: `Cannot detach`."""
    out = _run_bf16("input bf16 x; c = 2; y = x * c; out = y + c;")
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.astype(np.float32), [4.0, -4.0, 3.0])
    module = parse_program(
        "input bf16 x; input f64 w; c = 2; y = x * c; out = w + c;", ["y", "out"]
    )
    module.verify()
    constants = [op for op in body_ops(module) if isinstance(op, ew.ConstantOp)]
    assert [str(ew.element_type(c.result.type)) for c in constants] == ["bf16", "f64"]


@pytest.mark.parametrize(
    "source",
    [
        "input bf16 x; out = x * -(2);",
        "input bf16 x; out = x * (-1 - 1);",
        "input bf16 x; c = 1 * -2; out = x * c;",
        "input bf16 x; out = x * -2;",
    ],
)
def test_constant_expressions_are_weak_like_literals(source: str) -> None:
    out = _run_bf16(source)
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.astype(np.float32), [-2.0, 6.0, -1.0])


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("dtype", [np.float16, BF16])
@pytest.mark.parametrize("literal", [1.1, 0.1, 1e5, 1e-9, 300.7])
def test_a_literal_is_rounded_to_the_narrow_dtype_it_meets(
    literal: float, dtype: np.dtype, fuse: bool
) -> None:
    """numpy's `x * 1.1` for a bf16 `x` multiplies by 1.1 in bf16 (1.1015625); kernels took
    it in f32, and `x * 1e5` in f16 was finite where numpy's is inf (1e5 overflows f16)."""
    x = np.array([3.625, 0.0022583, -7.5, 0.0, np.inf, 1e-3], dtype)
    with np.errstate(all="ignore"):
        want = [x * literal, x + literal, literal - x, literal / x]
        programs = xfuse.compile(
            f"out0 = x * {literal!r}; out1 = x + {literal!r}; out2 = {literal!r} - x; "
            f"out3 = {literal!r} / x;",
            outputs=["out0", "out1", "out2", "out3"],
            dtype=np.dtype(dtype).name,
            fuse=fuse,
        )(x=x)
    for got, expected in zip(programs, want, strict=True):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))


def test_a_long_shared_constant_chain_is_computed_once_per_node() -> None:
    """`a = a * a / a` 3000 times: a deep graph whose every node is used twice (no recursion,
    no exponential re-evaluation)."""
    module = parse_program("a = 1.5;\n" + "a = a * a / a;\n" * 3000 + "out = x * a;")
    (constant,) = [op for op in body_ops(module) if isinstance(op, ew.ConstantOp)]
    assert constant.literal == 1.5


@pytest.mark.parametrize(
    ("source", "dtype", "want"),
    [
        # 1e-50 is 0 and 1e50 inf in f32, so their product is NaN; f64 has 1
        ("a = 1e-50; b = 1e50; out = x * (a * b);", "float32", math.nan),
        ("a = 1e-50; b = 1e50; out = x * (a * b);", "float64", 1.0),
        # f16 and bf16 kernels compute in f32, rounding the literals and the result only: each
        # step rounded to f16 made 300 * 300 inf (an f16 kernel of arrays of 300 and 1000, and
        # numpy's Python floats, give 90), and bf16 steps 0.046875
        ("out = x * (300 * 300 / 1000);", "float16", 90.0),
        ("out = x * (exp(12) / exp(11));", "float16", float(np.float16(np.e))),
        ("a = 1.0234375; out = x * (a * a - 1);", "bfloat16", 0.04736328125),
        ("out = x * -(0.0 / 0.0);", "float16", -math.nan),  # (the fold's NaN sign kept)
        ("out = x * 1e5;", "float16", 1e5),  # (a bare literal keeps its f64 text)
    ],
)
def test_a_constant_expression_is_computed_as_a_kernel_of_its_dtype(
    source: str, dtype: str, want: float
) -> None:
    module = parse_program(source, dtype=dtype)
    (constant,) = [op for op in body_ops(module) if isinstance(op, ew.ConstantOp)]
    if math.isnan(want):
        assert math.isnan(constant.literal)
        assert math.copysign(1, constant.literal) == math.copysign(1, want)
    else:
        assert constant.literal == want
    assert str(ew.element_type(constant.result.type)) == SHORT_DTYPE_NAMES[dtype]


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize(
    ("source", "want"),
    [
        ("input f32 x; out = x + f16(100000);", math.inf),  # 100000 overflows f16
        ("input f32 x; out = x * bf16(0.1);", 0.10009765625),  # 0.1 rounded to bf16
        ("input f32 x; out = x * f32(bf16(0.1));", 0.10009765625),
        ("input f64 x; out = x * f32(0.1);", float(np.float32(0.1))),
        # Rounded once from float64, as numpy's constructors round (ml_dtypes.bfloat16(c) is
        # 1.0078125): bf16 rounded via f32, 1.0; an expression of literals in float64, as
        # Python computes it (np.float16(300 * 300 / 1000) is 90; step by step in f16, inf).
        (f"input f32 x; out = x * bf16({1 + 2**-8 + 2**-40!r});", 1.0078125),
        (f"input f32 x; out = x * bf16(f64({1 + 2**-8 + 2**-40!r}));", 1.0078125),
        ("input f32 x; out = x * f16(300 * 300 / 1000);", 90.0),
    ],
)
def test_an_explicit_conversion_of_a_literal_is_kept(source: str, want: float, fuse: bool):
    """It was dropped next to a wider operand: the literal was retyped, not converted."""
    dtype = np.float64 if "f64 x" in source else np.float32
    out = xfuse.compile(source, fuse=fuse)(x=np.ones(2, dtype))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, [want, want])


def test_an_explicit_conversion_of_a_literal_is_strongly_typed() -> None:
    """`bf16(2)` is numpy's `np.bfloat16(2)`: it promotes f16 to f32 as an array would."""
    module = parse_program("input f16 x; out = x * bf16(2);")
    returned = function_of(module).get_return_op()
    assert returned is not None
    assert str(ew.element_type(returned.arguments[0].type)) == "f32"


@pytest.mark.parametrize("dtype", ["float16", "bf16", "float32", "f64", np.float32, np.float64])
def test_dtype_selection(dtype: object) -> None:
    module = parse_program("y = 0.5 * x;", dtype=dtype)
    module.verify()
    element = element_type_for(dtype)
    assert function_of(module).args[0].type == TensorType(element, [DYNAMIC_INDEX])
    for op in body_ops(module)[:-1]:
        assert op.results[0].type.get_element_type() == element


def test_unsupported_dtype_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unsupported dtype"):
        parse_program("y = x;", dtype="int32")


def test_shapes_broadcast() -> None:
    module = parse_program("y = x + b; z = y * s;", shapes={"x": [4, None], "b": ["n"], "s": []})
    module.verify()
    args = function_of(module).args
    assert [tuple(a.type.get_shape()) for a in args] == [(4, DYNAMIC_INDEX), (DYNAMIC_INDEX,), ()]
    returned = body_ops(module)[-1].operands[0]
    assert tuple(returned.type.get_shape()) == (4, DYNAMIC_INDEX)


def test_function_and_file_names() -> None:
    module = parse_program("y = x;", function_name="gelu_kernel")
    assert function_of(module).sym_name.data == "gelu_kernel"
    with pytest.raises(EwSyntaxError) as info:
        parse_program("y = ;", filename="model.ew")
    assert str(info.value).startswith("model.ew:1:5: error: ")


# ---------------------------------------------------------------------------------------------
# Bad programs: each raises EwSyntaxError with line, column and a caret under the spot
# ---------------------------------------------------------------------------------------------


BAD_PROGRAMS = [
    # (source, outputs, line, column, message fragment)
    ("h = x +* b;", None, 1, 8, "expected an expression, found '*'"),
    # a token missing at the end of a line is reported there, not at the next line's start
    ("y = x\nz = y;", None, 1, 6, "expected ';' at the end of the statement, found 'z' on line 2"),
    ("y = x + 1  # one\n", None, 1, 10, "expected ';' at the end of the statement, found end of"),
    ("y = (x + b\nz = y;", None, 1, 11, "expected ')' to close '(', found 'z' on line 2"),
    ("y = x", None, 1, 6, "expected ';' at the end of the statement, found end of input"),
    ("y x;", None, 1, 3, "expected '=' after 'y'"),
    # an expression alone said "cannot assign to 'tanh'" and "expected '=' after 'x'"
    ("tanh(x) * y;", None, 1, 1, "found a call of 'tanh': assign the expression to a name (y ="),
    ("x * 2", None, 1, 3, "expected '=' after 'x' (a statement is 'name = expr;'), found '*'"),
    ("y = (x + b;", None, 1, 11, "expected ')' to close '('"),
    ("y = max(x, b,);", None, 1, 14, "expected an expression"),
    ("1 = x;", None, 1, 1, "expected a statement"),
    ("y = x;\n  ;", None, 2, 3, "expected a statement"),
    ("y = x × 2;", None, 1, 7, "unexpected character '×'"),
    ("y = xé;", None, 1, 6, "unexpected character"),
    ("y = foo(x);", None, 1, 5, "unknown function 'foo'"),
    ("a = x;\ny = 2 * softmax(a);", None, 2, 9, "unknown function 'softmax'"),
    ("y = where(x > 0, x, 0);", None, 1, 5, "'where' (numpy's name for 'select'; known: abs"),
    ("y = maximum(x, 0);", None, 1, 5, "'maximum' (numpy's name for 'max'; known"),
    ("y = x < b < 1;", None, 1, 11, "comparisons do not chain"),
    ("y = select(x, b);", None, 1, 5, "'select' takes 3 arguments, got 2"),
    ("y = x !< b;", None, 1, 7, "unexpected character '!'"),
    ("y = tanh(x, b);", None, 1, 5, "'tanh' takes 1 argument, got 2"),
    ("y = max(x);", None, 1, 5, "'max' takes 2 arguments, got 1"),
    ("y = tanh();", None, 1, 5, "'tanh' takes 1 argument, got 0"),  # ("found ')'")
    ("y = x ** 2;", None, 1, 8, "found '*': `**` is no operator, write a power as pow(x, y)"),
    ("y = x ^ 2;", None, 1, 7, "unexpected character '^': write a power as pow(x, y)"),
    # C's and Python's operators were a bare "unexpected character": each names what .ew has
    ("y = x % 2;", None, 1, 7, "unexpected character '%': `.ew` has no remainder operator"),
    ("y = x && b;", None, 1, 7, "'&': no logical operators: comparisons give 1 or 0, so"),
    ("y = x || b;", None, 1, 7, "'|': no logical operators: comparisons give 1 or 0, so"),
    ("y = !x;", None, 1, 5, "'!': no logical operators: 'not a' is a == 0"),
    ("y = x ? 1 : b;", None, 1, 11, "':': no conditional expression: write 'c ? a : b' as select"),
    ("y = x @ b;", None, 1, 7, "'@': `.ew` programs are elementwise: no matrix product"),
    ("y = np.exp(x);", None, 1, 7, "'.': names have no attributes and functions are called"),
    ("y = tanhh(x);", None, 1, 5, "unknown function 'tanhh' (did you mean 'tanh'? known"),
    ("y = gelu(x);", None, 1, 5, "unknown function 'gelu' (known: abs"),  # (no 'relu'?)
    ("y = epx(x);", None, 1, 5, "unknown function 'epx' (did you mean 'exp'? known"),
    ("y = tahn(x);", None, 1, 5, "unknown function 'tahn' (did you mean 'tanh'? known"),
    ("y = tanh;", None, 1, 5, "'tanh' is a function: call it as tanh(...), or declare an input"),
    ("y = x;\ntanh = y;\nz = tanh(tanh) * exp;", None, 3, 18, "'exp' is a function"),
    ("y = h + 1;\nh = x;", None, 1, 5, "'h' is read before it has a value"),
    # a declared input has its value: its assignment is the error ("read before it has a value")
    ("input h;\ny = h + 1;\nh = y;", None, 3, 1, "cannot assign to 'h': it is declared as an"),
    ("y = x;\nz = 2 * q;\nq = y;", None, 2, 9, "first assigned on line 3"),
    ("", None, 1, 1, "empty program"),
    # just after the text, not on a line past the file's last (`3:1` of two lines)
    ("# only a comment\n", None, 1, 17, "empty program"),
    ("# only a comment\n\n", None, 1, 17, "empty program"),
    ("  \n\t", None, 1, 1, "empty program"),
    ("y = x;", ["z"], 1, 7, "unknown output 'z': the program assigns y"),
    ("y = x;\n\n", ["tanh"], 1, 7, "unknown output 'tanh'"),
    ("y = x;", [], 1, 1, "no outputs requested"),
    ("y = 1.2.3 * x;", None, 1, 5, "non-numeric literal '1.2.3'"),
    ("y = 1e * x;", None, 1, 5, "non-numeric literal '1e'"),
    ("y = x * 1e+;", None, 1, 9, "non-numeric literal '1e+'"),  # (it quoted '1e')
    ("y = 1e-x;", None, 1, 5, "non-numeric literal '1e-x'"),
    ("y = 0x1F;", None, 1, 5, "non-numeric literal '0x1F'"),
    ("y = 2x;", None, 1, 5, "non-numeric literal '2x'"),
    ("y = 'one' * x;", None, 1, 5, "non-numeric literal"),
    ('y = "1.0";', None, 1, 5, "non-numeric literal"),
    # (at the first token past MAX_NESTING levels: 100 were refused, "more than 100")
    (
        "y = " + "(" * (MAX_NESTING + 5) + "x" + ")" * (MAX_NESTING + 5) + ";",
        None,
        1,
        5 + MAX_NESTING + 1,
        "nested more than 100 levels deep",
    ),
    ("y = " + "-" * 5000 + "x;", None, 1, 5 + MAX_NESTING + 1, "nested"),
    # Declarations: `input [DTYPE] name[dims], ...;`
    ("input x[t, d]\ny = x;", None, 1, 14, "expected ',' or ';' in the declaration, found 'y' on"),
    ("input x y;", None, 1, 7, "unknown dtype 'x' (known: f16, bf16, f32, f64)"),
    # its `;` forgotten: `a` was taken for a dtype
    ("input a\ny = a;", None, 1, 8, "expected '[', ',' or ';' in the declaration, found 'y' on"),
    ("input bogus a;", None, 1, 7, "unknown dtype 'bogus'"),
    ("input bogus a, b;", None, 1, 7, "unknown dtype 'bogus'"),
    ("input bogus a[n];", None, 1, 7, "unknown dtype 'bogus'"),
    ("input bogus a", None, 1, 7, "unknown dtype 'bogus'"),
    ("input max", None, 1, 10, "expected '[', ',' or ';' in the declaration, found end of"),
    ("input int8 x[4];", None, 1, 7, "unknown dtype 'int8'"),
    ("input bf16;\ny = 1;", None, 1, 11, "expected an input name, found ';'"),
    ("input x, ;\ny = x;", None, 1, 10, "expected an input name, found ';'"),
    ("input x[t d];", None, 1, 11, "expected ']' to close the shape, found 'd'"),
    ("input x[t, -1];", None, 1, 12, "expected a dimension (a positive size, a name or '?')"),
    ("input x[0];", None, 1, 9, "found '0'"),
    ("input x[2.5];", None, 1, 9, "found '2.5'"),
    (
        "input x[4, 99999999999999999999];",
        None,
        1,
        12,
        "dimension 99999999999999999999 is too large",
    ),
    ("input x[9223372036854775808];", None, 1, 9, "too large (at most 9223372036854775807)"),
    ("input x[" + "9" * 5000 + "];", None, 1, 9, "dimension 999999999999999999999999999..."),
    ("input x[007];\ny = x[;", None, 2, 6, "expected ';' at the end of the statement, found '['"),
    ("input x[t,];", None, 1, 11, "expected a dimension"),
    ("input x[t;", None, 1, 10, "expected ']' to close the shape, found ';'"),
    ("input x[4] b;", None, 1, 12, "expected ',' or ';' in the declaration, found 'b'"),
    ("input x[4], x[4];", None, 1, 13, "input 'x' is already declared on line 1"),
    ("input x;\ninput f32 x;", None, 2, 11, "already declared on line 1"),
    ("input f32 bf16;", None, 1, 11, "cannot declare 'bf16': it names a dtype"),
    ("y = x;\ninput x[4];", None, 2, 7, "input 'x' is declared after it is read"),
    ("h = 1;\ninput h;", None, 2, 7, "cannot declare 'h' as an input: it is assigned on line 1"),
    ("input x[4];\nx = 2 * x;", None, 2, 1, "cannot assign to 'x': it is declared as an input"),
    ("input x[4];", None, 1, 12, "the program assigns nothing"),
    ("input x[4], b[5];\ny = x + b;", None, 2, 7, "shapes [4] and [5] do not broadcast"),
    ("input x[2, 3];\ninput b[2];\ny = b * x;", None, 3, 7, "do not broadcast"),
    # inputs no operator combines: at the later declaration (it was an unlocated compile error)
    ("input x[2], y[3];\nz = x;", None, 1, 13, "input 'y' [3] does not broadcast with 'x' [2]"),
    ("input x[2], y[3];\nz = x;\nw = y;\noutput z, w;", None, 1, 13, "one iteration space"),
    ("input x[t, 2];\ninput y[3, 4];\nz = x;", None, 2, 7, "'y' [3, 4] does not broadcast"),
    # a dim name the static sizes give two sizes (it compiled a kernel no call satisfies)
    ("input x[n, n], y[2, 3];\nz = x + y;", None, 1, 7, "dim 'n' of 'x' [n, n] would be 2 and 3"),
    ("input x[2, n], y[n, 3];\nz = x;", None, 1, 16, "a dim name has one size"),
    ("y = f32;", None, 1, 5, "'f32' is a function: call it as f32(...)"),
    ("bf16 = x;", None, 1, 1, "cannot assign to 'bf16': it names a dtype"),
    ("y = f16(x, x);", None, 1, 5, "'f16' takes 1 argument, got 2"),
    # Output declarations: `output name, ...;`
    ("y = x;\noutput y, z;", None, 2, 11, "output 'z' is never assigned (the program assigns y)"),
    ("y = x;\noutput y, y;", None, 2, 11, "output 'y' is already declared on line 2"),
    ("output y;\ny = x;\noutput y;", None, 3, 8, "output 'y' is already declared on line 1"),
    ("y = x;\noutput f16;", None, 2, 8, "cannot declare 'f16' as an output: it names a dtype"),
    ("y = x;\noutput tanh;", None, 2, 8, "output 'tanh' is never assigned (the program assigns y)"),
    ("y = x;\noutput y z;", None, 2, 10, "expected ',' or ';' in the output declaration"),
    ("y = x;\noutput y,;", None, 2, 10, "expected an output name, found ';'"),
    ("y = x;\noutput y\n", None, 2, 9, "expected ',' or ';' in the output declaration, found end"),
    ("output y;", None, 1, 8, "output 'y' is never assigned (the program assigns none)"),
]


@pytest.mark.parametrize("source,outputs,line,column,message", BAD_PROGRAMS)
def test_bad_program(
    source: str, outputs: list[str] | None, line: int, column: int, message: str
) -> None:
    with pytest.raises(EwSyntaxError) as info:
        parse_program(source, outputs)
    error = info.value
    assert message in error.message
    assert (error.line, error.column) == (line, column)
    header, excerpt, caret = str(error).split("\n")
    assert header == f"<source>:{line}:{column}: error: {error.message}"
    quoted = source.split("\n")[line - 1]
    if len(quoted) <= EXCERPT_CELLS:
        assert excerpt == quoted
        assert caret == re.sub(r"[^\t]", " ", excerpt[: column - 1]) + "^"
    else:  # a window of the (ASCII) line, the caret under the same character
        position = caret.index("^")
        assert caret[:position] == " " * position
        assert len(excerpt) <= EXCERPT_CELLS + len("......")
        assert quoted[: column - 1].endswith(excerpt[:position].removeprefix("..."))
        assert quoted[column - 1 :].startswith(excerpt[position:].removesuffix("..."))


@pytest.mark.parametrize("dim", [10**20, 2**63, -3])
def test_a_caller_shape_out_of_range_is_a_value_error_naming_the_input(dim: int) -> None:
    with pytest.raises(ValueError, match=f"input 'x': dimension {dim} is out of range"):
        parse_program("out = x;", shapes={"x": [4, dim]})


def test_an_error_in_a_crlf_file_quotes_the_line_without_its_carriage_return() -> None:
    with pytest.raises(EwSyntaxError) as info:
        parse_program("a = 1;\r\nout = x + ;\r\nz = 2;\r\n")
    assert (info.value.line, info.value.column) == (2, 11)
    assert info.value.source_line == "out = x + ;"
    assert str(info.value).split("\n")[1:] == ["out = x + ;", " " * 10 + "^"]


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"])
def test_a_lone_carriage_return_ends_a_line_as_crlf_and_lf_do(newline: str) -> None:
    """An old Mac file's lines (`\r` alone) were one line: line 1, the whole file quoted with
    its carriage returns (which a terminal prints over the line) and "first assigned on line 1"."""
    with pytest.raises(EwSyntaxError) as info:
        parse_program(newline.join(["a = 1;", "y = a;", "out = y + ;", ""]))
    assert (info.value.line, info.value.column) == (3, 11)
    assert str(info.value).split("\n")[1:] == ["out = y + ;", " " * 10 + "^"]
    with pytest.raises(EwSyntaxError, match="first assigned on line 3") as info:
        parse_program(newline.join(["a = 1;", "y = q + a;", "q = 2;"]))
    assert (info.value.line, info.value.column) == (2, 5)
    with pytest.raises(EwSyntaxError, match="found 'y' on line 2") as info:  # a missing `;`
        parse_program(newline.join(["a = x", "y = a;"]))
    assert (info.value.line, info.value.column) == (1, 6)


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"])
def test_ops_are_located_where_an_error_at_their_token_would_be(newline: str) -> None:
    """Each op's and argument's `loc("file":line:col)` counts as `EwSyntaxError` does: lines
    ended by any of the three line ends, columns in characters (a tab one), the file's name as
    given."""
    source = newline.join(["# a comment", "a = x;", "\tb = a * 2;  # \u00e9", "out =\tb + y;", ""])
    module = parse_program(source, filename="prog.ew")
    function = module.body.block.first_op
    assert isinstance(function, func.FuncOp)
    located = {
        op.name: (op.location.filename.data, op.location.line.data, op.location.column.data)
        for op in function.body.block.ops
        if isinstance(op.location, FileLineColLoc)
    }
    assert located == {
        "ew.constant": ("prog.ew", 3, 8),
        "ew.mul": ("prog.ew", 3, 8),
        "ew.add": ("prog.ew", 4, 9),
        "func.return": ("prog.ew", 4, 12),
    }
    arguments = [(a.location.line.data, a.location.column.data) for a in function.args]
    assert arguments == [(2, 5), (4, 11)]
    for line, column in [*arguments, *(found[1:] for found in located.values())]:
        with pytest.raises(EwSyntaxError) as info:  # an error at the same spot counts alike
            parse_program(source[: _offset(source, line, column)] + "$")
        assert (info.value.line, info.value.column) == (line, column)


def _offset(source: str, line: int, column: int) -> int:
    """The offset of `line`:`column` in `source` (lines ended by any of the three line ends)."""
    starts = [0, *(found.end() for found in re.finditer(r"\r\n|\r|\n", source))]
    return starts[line - 1] + column - 1


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"])
def test_a_comment_ends_at_a_lone_carriage_return(newline: str) -> None:
    """It ran on to the next '\n': in an old Mac file a comment swallowed every later line, and
    the program silently returned the last value assigned before it."""
    source = newline.join(["a = x;  # note", "out = x + 1;", ""])
    parsed = ParsedProgram(source, None, FunctionBuilder())
    assert parsed.output_names == ["out"]
    assert op_names(parsed.module) == ["ew.constant", "ew.add", "func.return"]


def test_a_form_feed_is_a_blank_and_a_vertical_tab_an_error() -> None:
    """A form feed (a page break, blank in Python and C) was "unexpected character '\\x0c'"; it
    is no line end. A vertical tab, which Python rejects (C takes it), stays an error."""
    assert str(parse_program("y = x +\f1;\f\n")) == str(parse_program("y = x + 1;"))
    with pytest.raises(EwSyntaxError, match="expected an expression, found ';'") as info:
        parse_program("a = 1;\f\n\fz = ;")
    assert (info.value.line, info.value.column) == (2, 6)
    assert str(info.value).split("\n")[1:] == ["<U+000C>z = ;", " " * 12 + "^"]
    with pytest.raises(EwSyntaxError, match="unexpected character '\\\\x0b'") as info:
        parse_program("y = x +\v1;")
    assert (info.value.line, info.value.column) == (1, 8)


def test_a_leading_byte_order_mark_is_ignored() -> None:
    """A file read with encoding="utf-8" keeps its BOM: it was "unexpected character '\\ufeff'"
    at 1:1 (the CLI, which reads "utf-8-sig", took the same file)."""
    assert str(parse_program("\ufeffy = x * 2;")) == str(parse_program("y = x * 2;"))
    with pytest.raises(EwSyntaxError) as info:
        parse_program("\ufeffy = x +;")
    assert (info.value.line, info.value.column) == (1, 8)
    assert str(info.value).split("\n")[1:] == ["y = x +;", " " * 7 + "^"]


@pytest.mark.parametrize(
    ("comment", "width"), [("注释", 4), ("ｘ", 2), ("e\u0301", 1), ("é", 1), ("a\u0300b", 2)]
)
def test_the_caret_is_as_far_right_as_the_line_shows(comment: str, width: int) -> None:
    """A wide character (CJK, fullwidth) takes two cells of a terminal, a combining one none:
    the caret after a program of `# 注释` alone stood under the comment, two cells short."""
    source = f"# {comment}"
    with pytest.raises(EwSyntaxError, match="empty program") as info:
        parse_program(source)
    assert info.value.column == len(source) + 1  # counted in characters
    assert str(info.value).split("\n")[2] == " " * (len("# ") + width) + "^"


@pytest.mark.parametrize(
    ("source", "line", "column", "message"),
    [
        ("a = 1;\nout = a + x   # the result\n", 2, 12, "expected ';' at the end of the statement"),
        ("a = 1;\nout = a +\n\n# end\n", 2, 10, "expected an expression, found end of input"),
        ("input x[4];  # no statement\n", 1, 12, "the program assigns nothing"),
        ("y = x;  # done\n\n", 1, 7, "unknown output 'z'"),
    ],
)
def test_the_end_of_input_is_just_after_the_last_token(
    source: str, line: int, column: int, message: str
) -> None:
    """A file's missing last ';' was reported on the line below the file's last (`3:1`), with an
    empty excerpt; after a comment, at the comment's end. Clang points just after the token."""
    with pytest.raises(EwSyntaxError, match=message) as info:
        parse_program(source, ["z"] if "unknown output" in message else None)
    assert (info.value.line, info.value.column) == (line, column)
    assert info.value.source_line == source.split("\n")[line - 1]


def test_the_caret_keeps_the_lines_tabs() -> None:
    """Under the column however wide the tabs show (it was 10 spaces under `\t\ty = x + `)."""
    with pytest.raises(EwSyntaxError) as info:
        parse_program("\t\ty = x + $;")
    assert (info.value.line, info.value.column) == (1, 11)
    assert str(info.value).split("\n")[1:] == ["\t\ty = x + $;", "\t\t" + " " * 8 + "^"]


def test_the_excerpt_shows_control_and_format_characters_as_code_points() -> None:
    """They were printed raw: an ESC in a comment sent the terminal a command (`\x1b[2J` clears
    the screen), a bidi override reordered the line shown, a NUL hid itself from the caret."""
    with pytest.raises(EwSyntaxError, match="unexpected character '\\\\x00'") as info:
        parse_program("y = x;\nz = y\x00;")
    assert info.value.source_line == "z = y\x00;"
    assert str(info.value).split("\n")[1:] == ["z = y<U+0000>;", " " * 5 + "^"]
    with pytest.raises(EwSyntaxError, match="expected an expression") as info:
        parse_program("y = x + ;  # \x1b[2J \u202etxet")
    assert str(info.value).split("\n")[1:] == [
        "y = x + ;  # <U+001B>[2J <U+202E>txet",
        " " * 8 + "^",
    ]
    with pytest.raises(EwSyntaxError, match="empty program") as info:
        parse_program("# \x1b[2J")
    assert str(info.value).split("\n")[1:] == ["# <U+001B>[2J", " " * 13 + "^"]


LONG_SUM = "y = " + "x + " * 5000 + ";"
MIDDLE = "y = " + "x + " * 100 + "$" + " + x" * 100
WIDE = "# " + "注" * 100  # the caret just after it: "empty program"
ESCAPES = "# " + "\x1b" * 300


@pytest.mark.parametrize(
    ("source", "excerpt", "caret"),
    [
        # at the end: the 99 characters before the caret and the caret's own
        (LONG_SUM, "..." + LONG_SUM[-100:], " " * 102 + "^"),
        # in the middle: three quarters of the cells before the caret, the rest after it
        (MIDDLE, f"...{MIDDLE[404 - 75 : 404 + 25]}...", " " * 78 + "^"),
        # near the start: the line's start kept
        ("y = x +" + " " * 50 + ";  # " + "注" * 200, None, " " * 57 + "^"),
        # wide characters take two cells of the window and of the caret's line
        (WIDE, "..." + WIDE[52:], " " * (3 + 2 * 50) + "^"),
        # control characters the cells of their code points
        (ESCAPES, "..." + "<U+001B>" * 12, " " * (3 + 8 * 12) + "^"),
    ],
    ids=["end", "middle", "start", "wide", "control"],
)
def test_a_long_line_is_quoted_around_the_caret(
    source: str, excerpt: str | None, caret: str
) -> None:
    """A line of 20,000 characters (a generated program) was quoted whole, the caret under it."""
    with pytest.raises(EwSyntaxError) as info:
        parse_program(source)
    assert info.value.source_line == source
    if excerpt is None:
        excerpt = source[: 57 + 5 + 19] + "..."  # 57 cells, `;  # `, 19 wide characters
    assert str(info.value).split("\n")[1:] == [excerpt, caret]


def test_shapes_that_do_not_broadcast_point_at_the_operator() -> None:
    with pytest.raises(EwSyntaxError) as info:
        parse_program("y = x * 2;\nz = y + b;", shapes={"x": [3], "b": [4]})
    assert (info.value.line, info.value.column) == (2, 7)
    assert "do not broadcast" in info.value.message


def test_inputs_no_operator_combines_share_the_iteration_space() -> None:
    """A declaration meets the caller's `shapes` at it, two of the caller's are the caller's
    error; sizes of 1 broadcast."""
    with pytest.raises(EwSyntaxError) as info:
        parse_program("input x[2]; z = y; w = x;", ["z", "w"], shapes={"y": [3]})
    assert (info.value.line, info.value.column) == (1, 7)
    assert "'x' [2] does not broadcast with 'y' [3] (the caller's shapes)" in info.value.message
    with pytest.raises(ValueError, match=r"the caller's shapes give 'y' \[3\] and 'x' \[2\]"):
        parse_program("z = x; w = y;", ["z", "w"], shapes={"x": [2], "y": [3]})
    # declared without a shape: the caller's (it was blamed on the declaration)
    with pytest.raises(ValueError, match=r"the caller's shapes give 'y' \[3\] and 'x' \[2\]"):
        parse_program("input x, y; z = x; w = y;", ["z", "w"], shapes={"x": [2], "y": [3]})
    parse_program("input x[n], y[3], s[]; z = x + s; w = y;", ["z", "w"])
    parse_program("input x[2, 1], y[3], s[];\nz = x; w = y;", ["z", "w"])


def test_a_function_name_is_a_value_where_declared_or_assigned() -> None:
    """RoPE's tables are called `cos` and `sin`: a program may declare inputs and assign values
    of a function's name, and still call the function (the name before `(`); read alone, an
    undeclared one stays the missing call it most likely is. The dtypes' names stay reserved."""
    module = parse_program(
        "input cos, sin;\nexp = x * cos - y * sin;\ntanh = sin(exp) + exp;\noutput tanh, exp;"
    )
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert [arg.name_hint for arg in function.body.block.args] == ["cos", "sin", "x", "y"]
    ops = [op.name for op in function.body.block.ops]
    assert ops == ["ew.mul", "ew.mul", "ew.sub", "ew.sin", "ew.add", "func.return"]
    sine = next(op for op in function.body.block.ops if isinstance(op, ew.SinOp))
    assert sine.operand.name_hint == "exp"
    assert [value.name_hint for value in function.body.block.last_op.operands] == ["tanh", "exp"]


def test_names_with_numbered_suffixes_print_as_distinct_values() -> None:
    """xDSL keeps `a_1` as the hint `a` and `a_1_1` as `a_1`, and prints the second value of
    hint `a` as `%a_1`, the one of hint `a_1` as `%a_1` too: these two programs printed as one
    text, the compile cache's key, so the second ran the first's kernel (and the text did not
    parse back)."""
    x = np.float32([1, 2, 3])
    common = "a_1 = x + 1; a_2 = x * 2; a_1_1 = a_1 - a_2;"
    first = xfuse.compile(f"{common} y = a_1_1 * a_2;")
    second = xfuse.compile(f"{common} y = a_1_1 * a_1_1;")
    np.testing.assert_array_equal(first(x=x), (1 - x) * 2 * x)
    np.testing.assert_array_equal(second(x=x), (1 - x) ** 2)
    text = second.ir("frontend")
    assert str(parse_ir(text)) == text
    printed = str(parse_program(f"{common} y = a_1_1 * a_1_1;"))  # as xfuse-opt prints it
    assert str(parse_ir(printed)) == printed

    @xfuse.jit
    def minus(a_1: np.ndarray, a_2: np.ndarray, a_1_1: np.ndarray) -> np.ndarray:
        return a_1_1 - a_2

    @xfuse.jit
    def reversed_minus(a_1: np.ndarray, a_2: np.ndarray, a_1_1: np.ndarray) -> np.ndarray:
        return a_2 - a_1_1

    p, q, r = np.float32([1]), np.float32([10]), np.float32([100])
    np.testing.assert_array_equal(minus(p, q, r), [90])
    np.testing.assert_array_equal(reversed_minus(p, q, r), [-90])


def test_parsed_ir_whose_hints_print_alike_compiles_as_written() -> None:
    """The same collision in IR a user parsed (`%a_1_1` is the hint `a_1`): the kernel's text
    names its values apart, and its input keeps its name."""
    text = (
        "func.func @main(%x_1_1: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %a = ew.add %x_1_1, %x_1_1 : tensor<?xf32>\n"
        "  %a_1 = ew.mul %x_1_1, %x_1_1 : tensor<?xf32>\n"
        "  %a_1_1 = ew.sub %a, %a_1 : tensor<?xf32>\n"
        "  %y = ew.mul %a_1_1, %a_1_1 : tensor<?xf32>\n"
        "  func.return %y : tensor<?xf32>\n}\n"
    )
    kernel = compile_module(parse_ir(text))
    assert kernel.input_names == ("x_1",)
    np.testing.assert_array_equal(kernel(x_1=np.float32([3])), [9])  # (6 - 9)^2
    frontend = kernel.ir("frontend")
    assert str(parse_ir(frontend)) == frontend


@pytest.mark.parametrize("name", ['"a b"', '"a(b"', '"1abc"', '"a\\"b"', '"é"'])
def test_a_function_name_that_needs_quotes_compiles(name: str) -> None:
    """The native entry was looked up as the printed name up to its first `(`, quotes kept:
    `'"a b".packed'` was no native function (and `"a(b"` was `"a`)."""
    text = (
        f"func.func @{name}(%x: tensor<?xf32>) -> tensor<?xf32> {{\n"
        "  %y = ew.add %x, %x : tensor<?xf32>\n  func.return %y : tensor<?xf32>\n}\n"
    )
    kernel = compile_module(parse_ir(text))
    np.testing.assert_array_equal(kernel(np.float32([1, 2])), [2, 4])


def test_parsed_ir_whose_argument_hints_collide_names_them_as_printed() -> None:
    """`%a` and `%a_1` are both the hint `a`: the kernel's inputs are named as xDSL prints
    them, where two inputs named `a` made its signature a ValueError (outputs of one name are
    an error that says to pass output_names)."""
    text = (
        "func.func @f(%a: tensor<?xf32>, %a_1: tensor<?xf32>, %a_2: tensor<?xf32>)"
        " -> (tensor<?xf32>, tensor<?xf32>) {\n"
        "  %r = ew.add %a, %a_1 : tensor<?xf32>\n"
        "  %r_1 = ew.mul %a_1, %a_2 : tensor<?xf32>\n"
        "  func.return %r, %r_1 : tensor<?xf32>, tensor<?xf32>\n}\n"
    )
    kernel = compile_module(parse_ir(text), output_names=["r", "r_1"])
    assert kernel.input_names == ("a", "a_1", "a_2")
    x = np.float32([1, 2])
    out = {"r": np.empty(2, np.float32), "r_1": np.empty(2, np.float32)}
    kernel(a=x, a_1=10 * x, a_2=100 * x, out=out)
    np.testing.assert_array_equal(out["r"], 11 * x)
    np.testing.assert_array_equal(out["r_1"], 1000 * x * x)
    assert distinct_names(["a", "a", "a_1", "a"]) == ["a", "a_2", "a_1", "a_3"]
