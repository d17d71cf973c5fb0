"""The docs stay true: the pipeline tour is regenerated and compared."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
