"""The docs stay true: the pipeline tour is regenerated and compared."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

DOCS = Path(__file__).parents[1] / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_pipeline", DOCS / "generate_pipeline.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipeline_tour_is_current() -> None:
    generator = _generator()
    fresh = generator.generate()
    committed = (DOCS / "pipeline.md").read_text()
    assert generator.checked_part(committed) == generator.checked_part(fresh), (
        "docs/pipeline.md is out of date: run python docs/generate_pipeline.py"
    )
    for stage in ("ew.kernel", "scf.for", "llvm.func", 'define void @"main"'):
        assert stage in fresh


def test_readme_python_example_runs(monkeypatch, capsys) -> None:
    """The README's Python block runs as written and its two entry points agree."""
    readme = (DOCS.parent / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(DOCS.parent)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert "ew.kernel" in capsys.readouterr().out
    out, gelu, x, b, r = (namespace[name] for name in ("out", "gelu", "x", "b", "r"))
    assert not np.array_equal(x, b) and not np.array_equal(b, r), "the inputs must differ"
    np.testing.assert_allclose(gelu(x, b, r), out, rtol=1e-6, atol=1e-6)
    h = x.astype(np.float64) + b
    reference = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3))) + r
    np.testing.assert_allclose(out, reference, atol=2e-6)
