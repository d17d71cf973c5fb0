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
options and the kernels it has compiled so far, so the receiver does not trace again. One of a
script (`__main__`) pickles as both: by value where cloudpickle is installed, by name otherwise
(`rebuild_main_jit`).

Unpickling a kernel whose program the receiver's disk cache holds imports no xDSL.
"""

from __future__ import annotations

import functools
import pickle
import sys
from typing import TYPE_CHECKING, Any

from xfuse.runtime.compiler import LRU_SIZE, Options, program_of_ir
from xfuse.runtime.kernel import Kernel, Program

if TYPE_CHECKING:
    from xfuse.runtime.jit import JitFunction


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


def _named(function: JitFunction) -> bool:
    """True when `module.qualname` names this very object. One of a `functools.partial` or a
    callable object has no `__qualname__` (it was an AttributeError): pickled by value."""
    module = sys.modules.get(function.__module__)
    qualname = getattr(function, "__qualname__", None)
    if module is None or qualname is None:
        return False
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is function


def jit_reduction(function: JitFunction) -> str | tuple[Any, ...]:
    """`JitFunction.__reduce__`: by name where importable, else by value. A decorated function
    of a script (`__main__`) is both: the receiver's `__main__` may be the script (a
    multiprocessing child's) or not (a dask worker's). By value, plain pickle refused it: the
    Python function inside is saved by its name, which names the jit function."""
    if not _named(function):
        return (rebuild_jit, _by_value(function))
    if function.__module__ != "__main__":
        return function.__qualname__
    try:
        import cloudpickle  # (sends `__main__`'s functions by value; dask's)
    except ImportError:
        by_value = None
    else:
        by_value = cloudpickle.dumps(_by_value(function))
    return (rebuild_main_jit, (function.__qualname__, by_value))


def _by_value(function: JitFunction) -> tuple[Any, ...]:
    """`rebuild_jit`'s arguments: the Python function, options and kernels so far."""
    return (
        function.function,
        function.options,
        function.threads,
        function.kernels.copy(),  # (copies: other threads' calls may add to them)
        function.booleans.copy(),
    )


def rebuild_main_jit(qualname: str, by_value: bytes | None) -> JitFunction:
    """A script's jit function: by value where cloudpickle could send it, else the one that
    this process's `__main__` names `qualname` (a multiprocessing child runs the script)."""
    if by_value is not None:
        return rebuild_jit(*pickle.loads(by_value))
    found: Any = sys.modules.get("__main__")
    for part in qualname.split("."):
        found = getattr(found, part, None)
    from xfuse.runtime.jit import JitFunction

    if not isinstance(found, JitFunction):
        raise pickle.UnpicklingError(
            f"the @xfuse.jit function {qualname} of a script is not in this process's "
            "__main__: install cloudpickle (pip install cloudpickle) to send it by value"
        )
    return found


def rebuild_jit(
    function: Any,
    options: Options,
    threads: int,
    kernels: dict[tuple[Any, ...], Kernel],
    booleans: dict[tuple[Any, ...], tuple[bool, ...]] | None = None,
) -> JitFunction:
    """A `JitFunction` with its kernels (and which of their results are booleans: none in a
    pickle from before 0.2.12)."""
    from xfuse.runtime.jit import JitFunction  # imports xDSL, which a kernel does not need

    rebuilt = JitFunction(function, options, threads)
    rebuilt.kernels.update(kernels)
    rebuilt.booleans.update(booleans or {})
    return rebuilt
