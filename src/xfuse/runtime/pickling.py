"""Pickling kernels and `@xfuse.jit` functions, for other processes (multiprocessing, dask).

A `Kernel` pickles as its frontend IR, output names, options and thread count: a few KB of text,
no native code. Unpickling compiles it through `xfuse.compile`'s caches, so in a process that has
it in memory it costs a lookup, and where the on-disk cache has it (`xfuse.runtime.disk_cache`) it
costs a load of the object code, not a compile. Unpickling the same kernel again in a process
gives the kernel unpickled before (`rebuilt_kernel`): a dask worker unpickles a task's function
with every task, and a new `Kernel` per task would plan its first call again, measure its split
cost again, start its slice threads again and fault in a new workspace.

A `@xfuse.jit` function pickles as a reference to its module's name when it is importable there
(the usual decorated module-level function), else as its Python function (which pickle must be
able to send: cloudpickle, which dask uses, sends `__main__`'s and local functions by value), its
options and the kernels it has compiled so far, so the receiver does not trace again; so does
one of a script (`__main__`), whose Python function plain pickle sends by name (a
multiprocessing child runs the script) and cloudpickle by value (a dask worker does not).

Unpickling a kernel whose program the receiver's disk cache holds imports no xDSL.
"""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xfuse.runtime.compiler import LRU_SIZE, Options, clear_with, program_of_ir
from xfuse.runtime.kernel import Kernel, Program

if TYPE_CHECKING:
    from collections.abc import Mapping

    from xfuse.runtime.jit import JitFunction, ResultForm


def kernel_reduction(kernel: Kernel) -> tuple[Any, ...]:
    """`Kernel.__reduce__`: rebuild from the frontend IR."""
    if kernel.program.frontend_ir is None:
        raise TypeError(
            "this kernel cannot be pickled: it was compiled from bufferized IR "
            "(compile_bufferized), not from a frontend program"
        )
    return (
        rebuild_kernel,
        (kernel.program.frontend_ir, kernel.output_names, kernel.options, kernel.threads),
    )


def rebuild_kernel(
    frontend_ir: str, output_names: tuple[str, ...], options: Options, threads: int
) -> Kernel:
    return rebuilt_kernel(program_of_ir(frontend_ir, output_names, options), threads)


@functools.lru_cache(maxsize=LRU_SIZE)
def rebuilt_kernel(program: Program, threads: int) -> Kernel:
    """The one kernel of `program` with `threads` that unpickling gives in this process (a
    program hashes by identity: one that the compile cache has replaced gets a new kernel)."""
    return Kernel(program, threads)


clear_with(rebuilt_kernel.cache_clear)


def _found(module_name: str, qualname: str | None) -> Any:
    """What `module.qualname` names now (None where nothing does)."""
    found: Any = sys.modules.get(module_name)
    if found is None or qualname is None:
        return None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def jit_reduction(function: JitFunction, protocol: int) -> str | tuple[Any, ...]:
    """`JitFunction.__reduce_ex__`: by name where importable, else by value: its Python
    function (`_python_function`), options and kernels so far. A decorated function of a
    script (`__main__`) goes by value: the receiver's `__main__` may be the script (a
    multiprocessing child's) or not (a dask worker's)."""
    qualname = getattr(function, "__qualname__", None)  # (none: a partial, a callable object)
    if function.__module__ != "__main__" and _found(function.__module__, qualname) is function:
        return str(qualname)
    return (
        rebuild_jit,
        (
            _python_function(function, protocol),
            function.options,
            function.threads,
            function.kernels.copy(),  # (copies: other threads' calls may add to them)
            function.forms.copy(),
        ),
    )


def _python_function(function: JitFunction, protocol: int) -> Any:
    """The function `function` traces, as pickle can send it: by its name where it has one
    (cloudpickle sends a script's by value), which for a decorated function (or the jit of a
    jit function) names the jit function, not it, and plain pickle refused it ("not the same
    object as __main__.f"): its `__qualname__` becomes `f.function`, which names it. Before
    protocol 4 pickle sends a dotted name as the attribute of what its first part names, the
    jit function, which sent this again (a RecursionError): there it goes as `_ByName`. A
    partial's function (a jit of a partial of a jit function) goes so too, each partial around
    it as a `_Partial` (a jit of a partial of a jit of a partial of a jit function holds two)."""
    return _sent(function.function, function, protocol)


def _sent(python: Any, function: JitFunction, protocol: int) -> Any:
    """`_python_function` of `python`, the function or a partial of it that `function` traces."""
    if isinstance(python, functools.partial):
        return _Partial(_sent(python.func, function, protocol), python.args, python.keywords)
    qualname = getattr(python, "__qualname__", None)
    named = _found(getattr(python, "__module__", ""), qualname)
    if isinstance(named, type(function)) and named.function is python:
        python.__qualname__ = f"{qualname}.function"
    if protocol < 4 and str(getattr(python, "__qualname__", "")).endswith(".function"):
        return _ByName(python.__module__, python.__qualname__)
    return python


@dataclass(frozen=True)
class _Partial:
    """A `functools.partial` sent as its parts, its function as `_python_function` sends one
    (a `_ByName`, which a partial cannot hold: it is not callable), made again where loaded."""

    function: Any
    args: tuple[Any, ...]
    keywords: dict[str, Any]

    def __reduce__(self) -> tuple[Any, ...]:
        return _partial, (self.function, self.args, self.keywords)


def _partial(function: Any, args: tuple[Any, ...], keywords: dict[str, Any]) -> Any:
    return functools.partial(function, *args, **keywords)


@dataclass(frozen=True)
class _ByName:
    """A function sent as its module and dotted name, looked up where it is loaded
    (`_imported`), as protocol 4's `STACK_GLOBAL` looks it up."""

    module: str
    qualname: str

    def __reduce__(self) -> tuple[Any, ...]:
        return _imported, (self.module, self.qualname)


def _imported(module_name: str, qualname: str) -> Any:
    """What `module.qualname` names, the module imported as pickle imports it; pickle's
    AttributeError where nothing does (`_found` read only the modules imported so far: a new
    process got None, and rebuilding the jit function failed on it)."""
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise AttributeError(f"Can't get attribute {qualname!r} on {found!r}") from None
    return found


def rebuild_jit(
    function: Any,
    options: Options,
    threads: int,
    kernels: dict[tuple[Any, ...], Kernel],
    forms: Mapping[tuple[Any, ...], ResultForm | tuple[bool, ...]] | None = None,
) -> JitFunction:
    """A `JitFunction` with its kernels and how their results return (`ResultForm`; in a
    pickle from before 0.2.34 which are booleans, their sequence a tuple, and before 0.2.12
    nothing: none is a boolean)."""
    # (imports xDSL, which a kernel does not need)
    from xfuse.runtime.jit import JitFunction, ResultForm

    rebuilt = JitFunction(function, options, threads)
    rebuilt.kernels.update(kernels)
    for key, kernel in kernels.items():
        form = (forms or {}).get(key, ())
        if not isinstance(form, ResultForm):  # (a sequence of results was returned as a tuple)
            form = ResultForm(form, None if kernel.output_names == ("out",) else tuple)
        rebuilt.forms[key] = form
    return rebuilt
