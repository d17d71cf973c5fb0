"""Pickled kernels and `@xfuse.jit` functions rebuild in another process through the caches."""

from __future__ import annotations

import functools
import gc
import os
import pickle
import subprocess
import sys
import textwrap
import types
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pytest

import xfuse
from xfuse.runtime.compiler import clear_cache, compile_bufferized, parse_ir
from xfuse.runtime.pickling import rebuild_jit

if TYPE_CHECKING:
    from conftest import Gelu


def gelu_inputs(rows: int = 37, columns: int = 19) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "x": rng.standard_normal((rows, columns), dtype=np.float32),
        "b": rng.standard_normal(columns, dtype=np.float32),
        "r": rng.standard_normal((rows, columns), dtype=np.float32),
    }


def test_a_kernel_round_trips_in_process(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.shaped_source, fuse=False, threads=3)
    data = pickle.dumps(kernel)
    assert len(data) < 4000  # the frontend IR and options, no native code
    loaded = pickle.loads(data)
    assert (loaded.signature, loaded.options, loaded.threads) == (
        kernel.signature,
        kernel.options,
        kernel.threads,
    )
    assert loaded.program is kernel.program  # from the in-memory cache
    np.testing.assert_array_equal(loaded(**gelu_inputs()), kernel(**gelu_inputs()))


def test_a_kernel_from_the_disk_cache_round_trips_in_process(gelu: Gelu) -> None:
    """A kernel whose program came from the disk cache (another process compiled it, or this
    one's memory forgot it) unpickles to that program: unpickling looks a program up by its
    frontend IR, which loading it by its source remembers too. (Under `pytest -n`, another
    worker compiling the source first made `test_a_kernel_round_trips_in_process` fail.)"""
    xfuse.compile(gelu.shaped_source, fuse=False, threads=3)  # on disk now
    clear_cache()
    kernel = xfuse.compile(gelu.shaped_source, fuse=False, threads=3)
    assert pickle.loads(pickle.dumps(kernel)).program is kernel.program


def test_unpickling_a_kernel_again_gives_the_kernel_unpickled_before(gelu: Gelu) -> None:
    """A dask worker unpickles a task's kernel with every task: each task must find the kernel
    of the tasks before it, with its call plans, measured split choice and slice threads."""
    data = pickle.dumps(xfuse.compile(gelu.shaped_source, threads=2))
    first = pickle.loads(data)
    first.split_choice.next_call((16, False))
    first.split_choice.record((16, False), True, 1e-9)
    again = pickle.loads(data)
    assert again is first
    assert again.split_choice.classes[16, False].split == (1e-9,)
    other_threads = pickle.loads(pickle.dumps(xfuse.compile(gelu.shaped_source, threads=3)))
    assert other_threads is not first
    assert other_threads.threads == 3


CHILD = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    from xfuse.runtime import compiler

    def no_compiling(*args):
        raise AssertionError("compiled: the disk cache should have had it")

    compiler._lower = no_compiling
    kernel = pickle.loads(open(sys.argv[1], "rb").read())
    inputs = dict(np.load(sys.argv[2]))
    result = kernel(**inputs)
    np.save(sys.argv[3], np.stack(result) if isinstance(result, tuple) else result)
    assert "xdsl" not in sys.modules, "a kernel loaded from the disk cache needs no xDSL"
    """
)


def run_child(script: str, *args: object, path: str | None = None) -> None:
    env = None if path is None else {**os.environ, "PYTHONPATH": path}
    subprocess.run([sys.executable, "-c", script, *map(str, args)], check=True, env=env)


def test_a_kernel_unpickles_in_another_process_from_the_disk_cache(
    tmp_path: Path, gelu: Gelu
) -> None:
    kernel = xfuse.compile(gelu.shaped_source, math="libm")
    inputs = gelu_inputs()
    (tmp_path / "kernel.pickle").write_bytes(pickle.dumps(kernel))
    np.savez(tmp_path / "inputs.npz", **inputs)
    run_child(CHILD, tmp_path / "kernel.pickle", tmp_path / "inputs.npz", tmp_path / "out.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), kernel(**inputs))


def test_a_kernel_of_bufferized_ir_says_why_it_cannot_be_pickled(gelu: Gelu) -> None:
    module = parse_ir(xfuse.compile(gelu.source).ir("ew-bufferize"))
    kernel = compile_bufferized(module, ["x", "b", "r"])
    with pytest.raises(TypeError, match="compiled from bufferized IR"):
        pickle.dumps(kernel)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(37, 19), (1 << 17,)])
def test_a_prepared_call_says_why_it_cannot_be_pickled(
    gelu: Gelu, threads: int, shape: tuple[int, ...]
) -> None:
    """Its copy ran on the original arrays' addresses: it wrote the original's output (and
    returned an unwritten one) in this process, and crashed in another."""
    kernel = xfuse.compile(gelu.source, threads=threads)
    inputs = {name: np.ones(shape, np.float32) for name in ("x", "b", "r")}
    run = kernel.prepare(**inputs, out=np.empty(shape, np.float32))
    with pytest.raises(TypeError, match="^cannot pickle a prepared call .*pickle the kernel"):
        pickle.dumps(run)
    assert pickle.loads(pickle.dumps(kernel))(**inputs).shape == shape


JIT_MODULE = textwrap.dedent(
    """
    import xfuse

    @xfuse.jit(math="libm", threads=2)
    def gelu(x, b, r):
        h = x + b
        return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r
    """
)

JIT_CHILD = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np

    gelu = pickle.loads(open(sys.argv[1], "rb").read())
    import jit_module
    assert gelu is jit_module.gelu, "pickled by reference"
    np.save(sys.argv[3], gelu(**dict(np.load(sys.argv[2]))))
    """
)


def test_an_importable_jit_function_pickles_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jit_module.py").write_text(JIT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import jit_module

    inputs = gelu_inputs()
    expected = jit_module.gelu(**inputs)
    data = pickle.dumps(jit_module.gelu)
    assert b"jit_module" in data and len(data) < 100
    assert pickle.loads(data) is jit_module.gelu
    (tmp_path / "jit.pickle").write_bytes(data)
    np.savez(tmp_path / "inputs.npz", **inputs)
    run_child(
        JIT_CHILD,
        tmp_path / "jit.pickle",
        tmp_path / "inputs.npz",
        tmp_path / "out.npy",
        path=str(tmp_path),
    )
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)


def test_a_local_jit_function_pickles_by_value_with_its_kernels() -> None:
    cloudpickle = pytest.importorskip("cloudpickle", reason="by-value functions need cloudpickle")

    @xfuse.jit(fuse=False)
    def residual_tanh(x, r):
        return xfuse.tanh(x) + r

    x = np.linspace(-3, 3, 64, dtype=np.float32)
    expected = residual_tanh(x, x)
    loaded = pickle.loads(cloudpickle.dumps(residual_tanh))
    assert loaded is not residual_tanh
    assert loaded.options == residual_tanh.options
    assert loaded.kernels.keys() == residual_tanh.kernels.keys()  # no tracing again
    np.testing.assert_array_equal(loaded(x, x), expected)


class _Halves(NamedTuple):
    low: np.ndarray
    high: np.ndarray


def test_an_unpickled_jit_function_returns_its_results_as_the_function_did() -> None:
    """Local jit functions returning a namedtuple and a list of a mask, pickled by value with
    their kernels, return them so without tracing again; a pickle of 0.2.33 or before (which of
    its results are booleans; sequences then came back as tuples) still loads."""
    cloudpickle = pytest.importorskip("cloudpickle", reason="by-value functions need cloudpickle")

    @xfuse.jit
    def halves(x):
        return _Halves(xfuse.minimum(x, 0), xfuse.maximum(x, 0))

    @xfuse.jit
    def listed(x):
        return [x > 0]

    x = np.float32([-1, 2, -3, 4])
    for function, kind in ((halves, _Halves), (listed, list)):
        expected = function(x)
        loaded = pickle.loads(cloudpickle.dumps(function))
        assert loaded.kernels.keys() == function.kernels.keys()  # no tracing again
        assert loaded._traced == {}
        results = loaded(x)
        assert type(results) is kind
        for got, want in zip(results, expected, strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        old = rebuild_jit(
            function.function,
            function.options,
            function.threads,
            function.kernels,
            {key: form.booleans for key, form in function.forms.items()},
        )
        assert type(old(x)) is tuple and old._traced == {}
        np.testing.assert_array_equal(old(x)[0], expected[0])


class _Scaled:
    """A callable object, as `xfuse.jit` takes one."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, a: np.ndarray) -> np.ndarray:
        return a * self.scale


def _leaky(a: np.ndarray, slope: float) -> np.ndarray:
    return np.where(a > 0, a, a * slope)


def test_a_jit_function_of_a_partial_or_a_callable_object_pickles_by_value() -> None:
    """They have no `__qualname__`: pickling one raised AttributeError (jit's own errors
    suggest `functools.partial` for a Python number)."""
    cloudpickle = pytest.importorskip("cloudpickle", reason="by-value functions need cloudpickle")
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    for function in (functools.partial(_leaky, slope=0.2), _Scaled(3.0)):
        jitted = xfuse.jit(function)
        expected = jitted(x)
        loaded = pickle.loads(cloudpickle.dumps(jitted))
        assert loaded.kernels.keys() == jitted.kernels.keys()
        np.testing.assert_array_equal(loaded(x), expected)


SCRIPT_WITH_A_POOL = """
import multiprocessing, pickle, sys, threading
import numpy as np
import xfuse

class Config:
    scale = 2.0

config = Config()
LOCK = threading.Lock()  # (which cloudpickle cannot send: by name it need not)

@xfuse.jit
def doubled_tanh(x):
    with LOCK:
        return np.tanh(x) * config.scale

@xfuse.jit
def scaled(x):
    return x * config.scale

config.kernel = scaled  # (a cycle, which cloudpickle resolves in one pass)
doubled_tanh_libm = xfuse.jit(doubled_tanh, math="libm")  # (its function named by another)

if __name__ == "__main__":
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    for method in ("spawn", "fork"):
        with multiprocessing.get_context(method).Pool(1) as pool:
            for function in (doubled_tanh, doubled_tanh_libm):
                np.testing.assert_array_equal(pool.map(function, [x])[0], function(x))
    try:
        import cloudpickle
    except ImportError:
        pass
    else:  # (by value; it recursed without end over the cycle in a pass of its own)
        np.testing.assert_array_equal(pickle.loads(cloudpickle.dumps(scaled))(x), scaled(x))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):  # (before 4: a RecursionError)
        for function in (doubled_tanh, doubled_tanh_libm):
            copied = pickle.loads(pickle.dumps(function, protocol=protocol))
            np.testing.assert_array_equal(copied(x), function(x))
    sys.stdout.buffer.write(pickle.dumps(doubled_tanh))
"""


def test_a_jit_function_of_a_script_goes_to_a_process_pool(tmp_path: Path) -> None:
    """A decorated function of `__main__` did not pickle with plain pickle (a multiprocessing
    pool's): by value, its Python function was saved by a name that names the jit function
    ("not the same object as __main__.doubled_tanh"), as was that of a jit of it. By value
    still, its Python function named `doubled_tanh.function`; a process whose `__main__` lacks
    it cannot load it, as any function of a script pickled so."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT_WITH_A_POOL)
    env = {**os.environ, "XFUSE_CACHE": "0"}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, env=env)
    assert run.returncode == 0, run.stderr.decode()
    loading = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; pickle.load(sys.stdin.buffer)"],
        input=run.stdout,
        capture_output=True,
        env=env,
    )
    assert b"Can't get attribute 'doubled_tanh.function' on <module '__main__'" in loading.stderr


def test_a_jit_of_a_jit_or_of_its_partial_loads_in_a_new_process(tmp_path: Path) -> None:
    """Its Python function goes as a lookup by name before protocol 4, which read only the
    modules imported so far: a new process got None ("None is not a callable object"); a
    partial's function, as the partial's part."""
    (tmp_path / "jitted.py").write_text(
        "import functools, numpy as np, xfuse\n"
        "@xfuse.jit\n"
        "def f(x):\n"
        "    return np.exp(x) + 1\n"
        "g = xfuse.jit(f, threads=1)\n"
        "@xfuse.jit\n"
        "def h(x, y):\n"
        "    return np.exp(x) + y\n"
        "p = xfuse.jit(functools.partial(h, y=np.float64(1.0)))\n"
        "q = xfuse.jit(functools.partial(xfuse.jit(functools.partial(h, y=3.0)), y=1.0))\n"
    )
    env = {**os.environ, "XFUSE_CACHE": "0", "PYTHONPATH": str(tmp_path)}
    # and a jit of a partial of a jit function, at every protocol ("not the same object as
    # jitted.h": its partial's function went by the name of the jit function)
    dump = (
        "import pickle, sys, jitted\n"
        "dumps = [pickle.dumps(jitted.q, k) for k in (2, 5)]\n"  # (first: p's renames h's)
        "dumps += [pickle.dumps(jitted.g, 2), *(pickle.dumps(jitted.p, k) for k in range(6))]\n"
        "sys.stdout.buffer.write(pickle.dumps(dumps))"
    )
    dumped = subprocess.run([sys.executable, "-c", dump], capture_output=True, env=env)
    assert dumped.returncode == 0, dumped.stderr.decode()
    load = (
        "import pickle, sys, numpy as np\n"
        "for dumped in pickle.load(sys.stdin.buffer): print(pickle.loads(dumped)(np.zeros(2)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", load], input=dumped.stdout, capture_output=True, env=env
    )
    assert loaded.returncode == 0 and loaded.stdout.split() == [b"[2.", b"2.]"] * 9, loaded.stderr


def test_a_jit_function_in_a_cycle_pickles_by_value_in_one_pass() -> None:
    """Its function by value in a second pass of its own (an earlier fix) recursed without end
    where what the function reads holds the jit function: cloudpickle's one pass resolves it."""
    cloudpickle = pytest.importorskip("cloudpickle", reason="by-value functions need cloudpickle")
    holder = types.SimpleNamespace(scale=3.0)

    @xfuse.jit
    def scaled(x):
        return x * holder.scale

    holder.kernel = scaled
    x = np.ones(4, np.float32)
    expected = scaled(x)
    loaded = pickle.loads(cloudpickle.dumps(scaled))
    np.testing.assert_array_equal(loaded(x), expected)
    assert loaded.kernels.keys() == scaled.kernels.keys()


UNPICKLED_SIGNATURES = """
import pickle, sys
import numpy as np
kernel, traced = pickle.load(sys.stdin.buffer)
print(kernel.signature, traced.signature)
print(traced(a=np.ones(2, np.float32), \u00e9=np.full(2, 3, np.float32)).tolist())
"""


def test_non_ascii_names_survive_pickling() -> None:
    """xDSL prints a non-ASCII name as escaped bytes (`"t\\C3\\A9"`) and parses it back as a
    `BytesAttr`: a process that parsed the pickled IR (no disk cache) lost the names (a
    VerifyException for a dim `t\u00e9`, `arg1` for an input `\u00e9`)."""
    kernel = xfuse.compile("input x, b; out = x + b;", shapes={"x": ["t\u00e9", "d"], "b": ["d"]})
    traced = xfuse.jit(lambda a, é: a * é)
    x = np.ones(2, np.float32)
    traced(x, x)
    (traced_kernel,) = traced.kernels.values()
    run = subprocess.run(
        [sys.executable, "-c", UNPICKLED_SIGNATURES],
        input=pickle.dumps((kernel, traced_kernel)),
        capture_output=True,
        env={**os.environ, "XFUSE_CACHE": "0"},
        check=False,
    )
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout.decode().splitlines() == [
        f"{kernel.signature} {traced_kernel.signature}",
        "[3.0, 3.0]",
    ]
    assert str(kernel.signature).startswith("(x: float32[t\u00e9, d]")


def test_a_local_jit_function_needs_cloudpickle() -> None:
    @xfuse.jit
    def double(x):
        return x * 2

    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(double)


def test_clear_cache_frees_the_programs_unpickling_rebuilt() -> None:
    """Unpickling's kernels (`rebuilt_kernel`, one per program) kept their programs, and their
    execution engines, past `xfuse.clear_cache()`, which says it forgets them."""
    kernel = xfuse.compile("out = exp(x) * y + 0.25;")
    pickle.loads(pickle.dumps(kernel))
    program = weakref.ref(kernel.program)
    del kernel
    xfuse.clear_cache()
    gc.collect()
    assert program() is None
