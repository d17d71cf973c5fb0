"""xfuse: a compiler for elementwise tensor expressions (xDSL + llvmlite).

    import xfuse
    k = xfuse.compile("h = x + b; out = tanh(h) * r;")
    out = k(x=x, b=b, r=r)

The public names load on first use, so `import xfuse` stays cheap: it imports neither xDSL nor
numpy nor dask.
"""

import importlib as _importlib
import typing as _typing

__version__ = "0.2.40"
"""The package's version (pyproject.toml reads it from here): a constant, so that reading it, as
the compile cache's key does, costs nothing."""

_EXPORTS: dict[str, str] = {
    "compile": "xfuse.runtime.compiler",
    "clear_cache": "xfuse.runtime.compiler",
    "release_output_memory": "xfuse.runtime.output_pool",
    "Kernel": "xfuse.runtime.kernel",
    "ArgumentError": "xfuse.runtime.arrays",
    "ArgumentTypeError": "xfuse.runtime.arrays",
    "CudaKernel": "xfuse.runtime.cuda",
    "CudaUnavailableError": "xfuse.runtime.cuda",
    "CudaError": "xfuse.runtime.cuda",
    "LibdeviceNotFoundError": "xfuse.codegen.libdevice",
    "jit": "xfuse.runtime.jit",
    "compile_numpy": "xfuse.benchmarking.baselines",
    "compile_numpy_planned": "xfuse.benchmarking.baselines",
    "bench": "xfuse.benchmarking.bench",
}
"""Public names and their modules; the elementwise functions (`xfuse.tanh`, ...) are
`xfuse.frontend.tracing.FUNCTIONS`, derived from the `ew` dialect's ops."""


def versions() -> str:
    """xfuse's version and those of the libraries that decide its output, on one line."""
    from importlib.metadata import version

    return f"xfuse {__version__} (xdsl {version('xdsl')}, llvmlite {version('llvmlite')})"


def _functions() -> dict[str, _typing.Any]:
    return _importlib.import_module("xfuse.frontend.tracing").FUNCTIONS


def __getattr__(name: str) -> _typing.Any:
    if name == "__all__":
        return sorted({*_EXPORTS, *_functions()})
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module), name)
    elif not name.startswith("__") and name in _functions():
        value = _functions()[name]
    else:
        raise AttributeError(f"module 'xfuse' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_functions()})
