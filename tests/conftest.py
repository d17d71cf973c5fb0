"""The test session's own compile cache, hypothesis profiles, and what many tests share: the
lecture's GELU (`gelu`), a float64 interpreter of `ew` functions (`evaluate_float64`), and
fixtures for tests of the caches (`cache`, `lowerings`), and the order tests start in (the
longest first, for `pytest -n auto`).

The on-disk compile cache goes to a temporary directory of each test process (each
pytest-xdist worker has its own, shared with the processes it starts), never the user's cache
directory; the `cache` fixture gives a test an empty one.

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, settings
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from xfuse.codegen.native import HostCpu, host_cpu
from xfuse.dialects import ew
from xfuse.runtime import bound_calls, compiler
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


SLOW_MODULES_FIRST = (
    "test_large.py",
    "test_concurrency.py",
    "test_random_programs.py",
    "test_half_programs.py",
    "test_gpu.py",
    "test_conversions.py",
    "test_scale.py",
    "test_docs.py",
    "test_frontend_fuzz.py",
    "test_dask_distributed.py",
)
"""The modules with the longest tests (measured: each holds one of 2 s to 12 s of CPU), in this
order. `pytest -n auto` hands tests out in collection order, so a long test collected last keeps
one worker busy after the others finished (the suite's tail was ~7 s of one idle core); started
first, the long tests share out and short ones fill the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return (
            SLOW_MODULES_FIRST.index(name)
            if name in SLOW_MODULES_FIRST
            else len(SLOW_MODULES_FIRST)
        )

    items.sort(key=rank)  # stable: each module's tests keep their order


@pytest.fixture
def host_features() -> str:
    """This host's features, to compile under another CPU's name (code that runs here): with the
    AVX-512 family taken off where the host lacks it, which a list of only what the host has
    (an AVX2 host as `XFUSE_CPU_FEATURES` gives it) leaves to the named CPU's own (LLVM made
    `sapphirerapids` 512 bits wide with Zen 3's list)."""
    features = host_cpu().features
    return features if host_cpu().has("avx512f") else f"{features},-avx512f"


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
    """An empty cache directory of the test's own, and no program in memory. `BOUND_CALL_IR`,
    which a process compiles or loads once and keeps in an entry of the cache it first uses,
    is made before (in the session's cache), so that the test's cache holds its programs'
    entries only."""
    bound_calls.bound_call_methods()
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

    def counting_lower(*arguments):
        lowered.append(arguments[1])  # (module, frontend_ir, function_name, outputs, options)
        return lower(*arguments)

    monkeypatch.setattr(compiler, "_lower", counting_lower)
    return lowered


@dataclass(frozen=True)
class Gelu:
    """examples/gelu.ew, the lecture's program (`out = gelu(x + b) + r` with the tanh form)."""

    path: Path
    source: str

    @property
    def shaped_source(self) -> str:
        """The program with x, r declared [t, d] and the bias b [d]."""
        return "input x[t, d]; input b[d]; input r[t, d];\n" + self.source

    @staticmethod
    def reference(x: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The program written out in float64 numpy, independent of xfuse."""
        x, b, r = (np.asarray(a, dtype=np.float64) for a in (x, b, r))
        h = x + b
        return 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3))) + r


@pytest.fixture(scope="session")
def gelu() -> Gelu:
    path = Path(__file__).resolve().parents[1] / "examples" / "gelu.ew"
    return Gelu(path, path.read_text())


Evaluate = Callable[..., list[np.ndarray]]
"""The type of the `evaluate_float64` fixture."""

Rounding = Callable[[Operation, np.ndarray], np.ndarray]
"""What `evaluate_float64` makes of an op's float64 value (`rounded=`): a kernel's rounding."""


def _evaluate_float64(
    program: ModuleOp | func.FuncOp,
    *args: np.ndarray,
    rounded: Rounding | None = None,
    **named: np.ndarray,
) -> list[np.ndarray]:
    """Run an `ew` function (its only function, for a module) op by op on float64 numpy data,
    each op by its `reference`, its value then passed through `rounded` where given; inputs by
    position or by name (an input named `rounded` by position)."""
    if isinstance(program, ModuleOp):
        (program,) = program.ops
    assert isinstance(program, func.FuncOp)
    arguments = program.body.block.args
    given = list(args) + [named[str(a.name_hint)] for a in arguments[len(args) :]]
    values: dict[SSAValue, np.ndarray] = {
        a: np.asarray(value, dtype=np.float64) for a, value in zip(arguments, given, strict=True)
    }
    for op in program.body.block.ops:
        if isinstance(op, func.ReturnOp):
            return [values[v] for v in op.arguments]
        with np.errstate(all="ignore"):
            if isinstance(op, ew.ConstantOp):
                value = np.float64(op.literal)
            else:
                assert isinstance(op, ew.ElementwiseOp | ew.ConvertOp), op.name
                value = np.asarray(op.reference(*(values[v] for v in op.operands)))
            values[op.results[0]] = value if rounded is None else rounded(op, value)
    raise AssertionError("no func.return")


@pytest.fixture(scope="session")
def evaluate_float64() -> Evaluate:
    """`evaluate_float64(module_or_function, *arrays, **arrays_by_name)`: the function's results
    computed in float64 by each op's `reference` (the oracle for the frontend and the passes)."""
    return _evaluate_float64
