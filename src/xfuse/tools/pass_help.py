"""`xfuse-opt --list-passes`: each xfuse pass with its summary and options, read off the classes.

An option is a dataclass field of the pass: its kebab-case name (as `-p 'pass{name=value}'` spells
it), its type, its default and the docstring written under the field.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import typing
from dataclasses import dataclass

from xdsl.passes import ModulePass

from xfuse.transforms import ALL_PASSES


@dataclass(frozen=True)
class PassOption:
    name: str
    type: str
    default: object
    doc: str


def _type_name(annotation: object) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(repr(value) for value in typing.get_args(annotation))
    return getattr(annotation, "__name__", None) or str(annotation)


def _field_docs(pass_class: type[ModulePass]) -> dict[str, str]:
    """The string literal under each annotated field of the class body (attribute docstrings)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(pass_class)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in zip(body, body[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def pass_options(pass_class: type[ModulePass]) -> list[PassOption]:
    hints = typing.get_type_hints(pass_class)
    docs = _field_docs(pass_class)
    return [
        PassOption(
            field.name.replace("_", "-"),
            _type_name(hints[field.name]),
            field.default,
            docs.get(field.name, ""),
        )
        for field in dataclasses.fields(pass_class)
    ]


def summary(pass_class: type[ModulePass]) -> str:
    """The first paragraph of the pass's docstring, on one line."""
    doc = inspect.cleandoc(pass_class.__doc__ or "")
    return " ".join(doc.split("\n\n", 1)[0].split())


def describe_passes() -> str:
    """Every xfuse pass: `name: summary`, then one indented entry per option."""
    lines: list[str] = []
    for name, factory in ALL_PASSES.items():
        pass_class = factory()
        lines.append(f"{name}: {summary(pass_class)}")
        for option in pass_options(pass_class):
            default = option.default
            shown = str(default).lower() if isinstance(default, bool) else repr(default)
            lines.append(f"    {option.name}: {option.type} = {shown}")
            lines.extend(f"        {line}" for line in textwrap.wrap(option.doc, 88))
    return "\n".join(lines)
