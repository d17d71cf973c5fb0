"""xfuse: a compiler for elementwise tensor expressions (xDSL + llvmlite).

    import xfuse
    k = xfuse.compile("h = x + b; out = tanh(h) * r;")
    out = k(x=x, b=b, r=r)

The public names load on first use, so `import xfuse` stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

__version__ = importlib.metadata.version("xfuse")

_EXPORTS: dict[str, str] = {
    "compile": "xfuse.runtime.compiler",
    "clear_cache": "xfuse.runtime.compiler",
    "Kernel": "xfuse.runtime.kernel",
    "ArgumentError": "xfuse.runtime.arrays",
    "ArgumentTypeError": "xfuse.runtime.arrays",
    "CudaKernel": "xfuse.runtime.cuda",
    "CudaUnavailableError": "xfuse.runtime.cuda",
    "jit": "xfuse.runtime.tracing",
    "compile_numpy": "xfuse.runtime.baselines",
    "compile_numpy_planned": "xfuse.runtime.baselines",
    "bench": "xfuse.runtime.bench",
}
"""Public names and their modules; the elementwise functions (`xfuse.tanh`, ...) are
`xfuse.runtime.tracing.FUNCTIONS`, derived from the `ew` dialect's ops."""


def versions() -> str:
    """xfuse's version and those of the libraries that decide its output, on one line."""
    xdsl, llvmlite = (importlib.metadata.version(name) for name in ("xdsl", "llvmlite"))
    return f"xfuse {__version__} (xdsl {xdsl}, llvmlite {llvmlite})"


def _functions() -> dict[str, Any]:
    return importlib.import_module("xfuse.runtime.tracing").FUNCTIONS


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted({*_EXPORTS, *_functions()})
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif not name.startswith("__") and name in _functions():
        value = _functions()[name]
    else:
        raise AttributeError(f"module 'xfuse' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_functions()})
