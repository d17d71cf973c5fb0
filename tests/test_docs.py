"""The docs stay true: the pipeline tour is regenerated and compared."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import subprocess
import textwrap
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import Gelu

DOCS = Path(__file__).parents[1] / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_pipeline", DOCS / "generate_pipeline.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROOT = DOCS.parent

DOTTED_NAME = re.compile(r"`(xfuse(?:\.[A-Za-z_]\w*)+)")
"""A name the docs and docstrings give as a path to it (`xfuse.runtime.kernel.Kernel`)."""

NOT_PYTHON_NAMES = frozenset({"xfuse.fptrunc.f32.bf16"})
"""Dotted names that are not Python's: an LLVM function of xfuse's own."""


@functools.cache  # (one parse a module, not one a reference)
def _top_level_names(module: object) -> frozenset[str]:
    """What `module`'s own code defines (not what it imports from another module)."""
    names: set[str] = set()
    for node in ast.parse(Path(module.__file__).read_text()).body:  # type: ignore[attr-defined]
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


def _resolves(dotted: str) -> bool:
    """Whether `dotted` names a module, or a name that its module defines and its attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        rest = parts[split:]
        if rest and split > 1 and rest[0] not in _top_level_names(target):
            return False  # (imported there, defined elsewhere: the docs point at a copy)
        for attribute in rest:
            if is_dataclass(target) and attribute in {f.name for f in fields(target)}:
                return attribute == rest[-1]  # (a field made by a factory: no class attribute)
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_dotted_name_in_the_docs_is_where_it_says() -> None:
    # A module split or a rename leaves the prose behind: a reader following
    # `xfuse.runtime.kernel.SplitChoice` must find it there.
    texts = [ROOT / "README.md", *DOCS.glob("*.md")]
    texts += [*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    stale = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match[1]}"
        for path in texts
        for text in [path.read_text()]
        for match in DOTTED_NAME.finditer(text)
        if match[1] not in NOT_PYTHON_NAMES and not _resolves(match[1])
    ]
    assert not stale, "names that are not where the text says:\n" + "\n".join(stale)


def test_pipeline_tour_is_current() -> None:
    generator = _generator()
    fresh = generator.generate()
    committed = (DOCS / "pipeline.md").read_text()
    assert generator.checked_part(committed) == generator.checked_part(fresh), (
        "docs/pipeline.md is out of date: run python docs/generate_pipeline.py"
    )
    for stage in ("ew.kernel", "scf.for", "llvm.func", 'define void @"main"'):
        assert stage in fresh


def test_readme_python_example_runs(monkeypatch, capsys, gelu: Gelu) -> None:
    """The README's Python block runs as written and its two entry points agree."""
    readme = (DOCS.parent / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(DOCS.parent)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert "ew.kernel" in capsys.readouterr().out
    out, traced, x, b, r = (namespace[name] for name in ("out", "gelu", "x", "b", "r"))
    assert not np.array_equal(x, b) and not np.array_equal(b, r), "the inputs must differ"
    np.testing.assert_allclose(traced(x, b, r), out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out, gelu.reference(x, b, r), atol=2e-6)


def test_readme_lists_every_function_of_the_language() -> None:
    from xfuse.dialects import ew
    from xfuse.frontend.language import CONVERSIONS

    readme = (DOCS.parent / "README.md").read_text()
    sentence = re.search(r"the functions (.*?) convert\.", readme, re.S)
    assert sentence is not None, "README.md's sentence listing the .ew functions is gone"
    listed = re.findall(r"`(\w+)`", sentence[1])
    missing = sorted({*ew.OPS_BY_MNEMONIC, *CONVERSIONS} - set(listed))
    assert not missing, f"README.md's sentence 'the functions ... convert.' lacks {missing}"
    assert sorted(listed) == sorted([*ew.OPS_BY_MNEMONIC, *CONVERSIONS])


def test_the_max_ops_weights_quoted_are_scalar_sizes() -> None:
    """README.md and `ew-fuse`'s docs quote what `max-ops` counts a tanh as: 25 after the math
    library's rewrite made it 15 (a kernel of tanh holds 8 of them, not 5)."""
    from xfuse.dialects import ew
    from xfuse.transforms import fuse

    readme = (DOCS.parent / "README.md").read_text()
    sources = {"README.md": readme, "transforms/fuse.py": Path(fuse.__file__).read_text()}
    for name, text in sources.items():
        # "`tanh` 15, `add` 1" and "a `tanh` is 15, an `add` 1" (the module docstring said 25)
        quoted = re.findall(r"`tanh` (?:is )?(\d+), (?:an )?`add` (\d+)", text)
        assert quoted, f"{name} no longer quotes `tanh` N, `add` N"
        want = (str(fuse.scalar_size(ew.TanhOp)), str(fuse.scalar_size(ew.AddOp)))
        assert set(quoted) == {want}, f"{name} quotes {quoted}: scalar_size gives {want}"


WALKTHROUGHS = ("writing-a-pass.md", "adding-an-op.md")
"""Docs whose every code block is checked: `sh` blocks run, and an `mlir` block right after one is
its exact output; `python` blocks run in order in one namespace, `python excerpt` blocks must be
code of src/ (docstrings aside); other `mlir` blocks must be part of a filecheck file."""

CODE_BLOCK = re.compile(r"^```(?P<info>[^\n]*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class CodeBlock:
    language: str
    excerpt: bool
    code: str
    line: int
    follows_directly: bool
    """Only blank lines separate it from the block before."""


def code_blocks(document: str) -> list[CodeBlock]:
    blocks, previous_end = [], None
    for match in CODE_BLOCK.finditer(document):
        language, _, rest = match["info"].partition(" ")
        between = document[previous_end : match.start()] if previous_end is not None else "x"
        blocks.append(
            CodeBlock(
                language,
                rest.strip() == "excerpt",
                match["code"],
                document.count("\n", 0, match.start()) + 1,
                not between.strip(),
            )
        )
        previous_end = match.end()
    return blocks


@functools.cache  # each excerpt is looked for in every source file
def _without_docstrings(code: str) -> str:
    """The code with every docstring's lines dropped and each line stripped of indentation."""
    tree = ast.parse(textwrap.dedent(code))
    dropped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(
            node, clean=False
        ):
            docstring = node.body[0]
            dropped.update(range(docstring.lineno, (docstring.end_lineno or 0) + 1))
    lines = textwrap.dedent(code).splitlines()
    return "\n".join(line.strip() for n, line in enumerate(lines, 1) if n not in dropped)


@pytest.mark.parametrize("name", WALKTHROUGHS)
def test_walkthrough_code_blocks_hold(name: str, tmp_path: Path, monkeypatch) -> None:
    root = DOCS.parent
    monkeypatch.chdir(root)
    blocks = code_blocks((DOCS / name).read_text())
    sources = {
        path: path.read_text()
        for path in (*root.glob("src/xfuse/**/*.py"), *root.glob("filecheck/**/*.mlir"))
    }
    namespace: dict[str, object] = {}
    last_output: str | None = None
    for block in blocks:
        where = f"{name}:{block.line}"
        if block.language == "sh":
            ran = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block.code],
                capture_output=True,
                text=True,
                cwd=root,
            )
            assert ran.returncode == 0, f"{where}: {ran.stderr}"
            last_output = ran.stdout
        elif block.language == "mlir" and block.follows_directly and last_output is not None:
            assert last_output.strip() == block.code.strip(), (
                f"{where}: not what the command prints"
            )
        elif block.language == "mlir":
            assert any(
                block.code in text for path, text in sources.items() if path.suffix == ".mlir"
            ), f"{where}: this IR is in no filecheck file"
        elif block.language == "python" and block.excerpt:
            code = _without_docstrings(block.code)
            assert any(
                code in _without_docstrings(text)
                for path, text in sources.items()
                if path.suffix == ".py"
            ), f"{where}: this excerpt is not the code in src/"
        elif block.language == "python":
            exec(compile(block.code, where, "exec"), namespace)
        if block.language != "sh":
            last_output = None
