"""The test session's own compile cache, fixtures for tests of the caches, and hypothesis profiles.

The on-disk compile cache goes to a temporary directory for the session (and the processes it
starts), never the user's cache directory; the `cache` fixture gives a test an empty one.

Hypothesis profiles: `ci` (the default: bounded and deterministic) and `fuzz` (long, random).

`pytest` runs the `ci` profile; `pytest -m slow --hypothesis-profile=fuzz` runs the long fuzz.
`ci` does not shrink failures (for the differential tests, where every attempt compiles a
program, shrinking can take many minutes): the failure message shows the whole failing program,
and `--hypothesis-profile=fuzz` (which shrinks) replays it from `print_blob`'s reproduce_failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, settings

from xfuse.codegen.native import HostCpu, host_cpu
from xfuse.runtime import compiler
from xfuse.runtime.compiler import clear_cache

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile("fuzz", max_examples=2000, deadline=None, print_blob=True)
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    os.environ["XFUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="xfuse-test-cache-")
    os.environ.pop("XFUSE_CACHE", None)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ["XFUSE_CACHE_DIR"], ignore_errors=True)


@pytest.fixture
def use_cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str], HostCpu]]:
    """Compile for another CPU in this test: `use_cpu("znver3", "+avx2,+f16c,...")` sets
    `XFUSE_CPU_NAME`/`XFUSE_CPU_FEATURES` and empties the caches that depend on the CPU."""

    def use(name: str, features: str) -> HostCpu:
        monkeypatch.setenv("XFUSE_CPU_NAME", name)
        monkeypatch.setenv("XFUSE_CPU_FEATURES", features)
        host_cpu.cache_clear()
        clear_cache()
        return host_cpu()

    yield use
    host_cpu.cache_clear()
    clear_cache()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache directory of the test's own, and no program in memory."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XFUSE_CACHE_DIR", str(directory))
    clear_cache()
    yield directory
    clear_cache()


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The frontend IR of every program that went through the pipeline (not the disk cache)."""
    lowered: list[str] = []
    lower = compiler._lower

    def counting_lower(module, frontend_ir, output_names, options):
        lowered.append(frontend_ir)
        return lower(module, frontend_ir, output_names, options)

    monkeypatch.setattr(compiler, "_lower", counting_lower)
    return lowered
