"""The test session's own compile cache, and hypothesis profiles.

The on-disk compile cache goes to a temporary directory for the session (and the processes it
starts), never the user's cache directory.

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

import pytest
from hypothesis import Phase, settings

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
