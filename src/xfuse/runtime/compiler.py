"""`xfuse.compile`: the whole pipeline from `.ew` source (or a traced module) to a `Kernel`.

    frontend -> ew-optimize -> ew-fuse -> ew-bufferize -> ew-workspace -> ew-kernel-to-loops
             -> ew-expand-math -> ew-to-llvm -> convert_module + LLVM O3 -> MCJIT

Compiled programs are cached in memory by source and options (no parse at all on a hit) and by
the frontend's IR and options (a traced function or a differently written identical program).
The cache holds programs weakly under both keys, plus an LRU of strong references to the last
`LRU_SIZE` programs (one entry per program, whichever key found it): engines are freed once no
kernel uses them and they have dropped out of the LRU.
A miss in memory looks in the on-disk cache (`xfuse.runtime.disk_cache`: object code, so a new
process skips the pipeline) before compiling, and a compile writes its entry there.

A hit by the source needs no xDSL: this module imports it (and the passes) only where a program
is parsed, checked or compiled, so a new process whose program is cached never loads it. The
options are keyed as given and checked (`Options`) only on a miss: a bad option never made an
entry, so it always misses and raises before anything is compiled.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import numbers
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from xfuse.codegen.native import compile_llvm_dialect, host_cpu
from xfuse.codegen.ptx import MATH_MODES, check_target
from xfuse.dialects.dtypes import dtype_name
from xfuse.frontend.filenames import check_filename
from xfuse.frontend.name_warnings import NameWarning
from xfuse.runtime import disk_cache
from xfuse.runtime.arrays import Parameter
from xfuse.runtime.call_plans import NativeFunction, splittable
from xfuse.runtime.kernel import Kernel, Program
from xfuse.transforms import own_passes_only, workspace_size_function
from xfuse.transforms.options import Math, Target

if TYPE_CHECKING:
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Attribute
    from xdsl.passes import ModulePass

    from xfuse.frontend.builder import DtypeSpec

LRU_SIZE = 32
"""How many recently compiled programs stay alive without a kernel referring to them."""

MATH_CHOICES = MATH_MODES["cpu"]
OPT_LEVELS = (0, 1, 2, 3)
INTERLEAVE_COUNTS = (0, 1, 2, 4, 8, 16)
"""The counts `interleave` takes: LLVM's loop vectorizer ignores a hint that is not a power of two
up to 16 (`LoopVectorizeHints::Hint::validate`), so 6 made the loop LLVM's own choice, silently
(the LLM GELU at 2^16 took 1.75x the time of 8 on Zen 3); 0 gives no hint."""
NOT_EXTRA_PASSES = frozenset(
    {
        "ew-fuse",
        "ew-bufferize",
        "ew-workspace",
        "ew-kernel-to-loops",
        "ew-expand-math",
        "ew-to-llvm",
        "ew-to-nvvm",
        "ew-to-linalg",
        "ew-cost",
        "xfuse-default",
    }
)
"""Passes `extra_passes` may not name: the pipeline's own later stages, the GPU lowering, the
export and the cost analysis, which need fused or lowered IR (extra passes run on tensors right
after ew-optimize)."""

_collector_lock = threading.Lock()
_collector_pauses = 0
_collector_was_enabled = False


def _restore_collector_after_fork() -> None:
    """In a forked child only the forking thread runs, and it is not compiling (a compile does
    not fork): a new lock (another thread may have held the old one), no pause, the collector
    as it was before the other threads' compiles paused it."""
    global _collector_lock, _collector_pauses
    _collector_lock = threading.Lock()
    if _collector_pauses:
        _collector_pauses = 0
        if _collector_was_enabled:
            gc.enable()


os.register_at_fork(after_in_child=_restore_collector_after_fork)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while compiling, back as it was after.

    The IR is millions of live objects that a compile only adds to, so the collector's passes
    over them find almost nothing: they took a third of the CPU time of the passes on a
    10^4-op program. Cycles made meanwhile (erased ops) are collected after, as usual. Nested
    and concurrent compiles share one pause: the last to finish restores the collector.
    """
    global _collector_pauses, _collector_was_enabled
    with _collector_lock:
        if _collector_pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _collector_pauses += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_pauses -= 1
            if _collector_pauses == 0 and _collector_was_enabled:
                gc.enable()


def check_integer(name: str, value: object, allowed: str, valid: Callable[[int], bool]) -> int:
    """An integer option `value` (`allowed` says which): a TypeError where it is no integer (a
    bool is none, nor is 3.0), a ValueError where it is not `valid`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {allowed}, got {value!r}")
    if not valid(int(value)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(value)


def check_module(taker: str, module: object) -> None:
    """TypeError where `module`, given to `taker`, is no module (a source string was
    "'str' object has no attribute 'verify'", or 'ops')."""
    from xdsl.dialects.builtin import ModuleOp

    if not isinstance(module, ModuleOp):
        raise TypeError(
            f"{taker} takes a builtin.module (parse_program's, parse_ir's), not "
            f"{type(module).__name__}; xfuse.compile takes .ew source"
        )


def check_public(function: func.FuncOp, taker: str) -> None:
    """DiagnosticException where `function`, given to `taker`, is private: LLVM drops it ("no
    native function 'main.packed'")."""
    from xdsl.utils.exceptions import DiagnosticException

    if function.sym_visibility is not None and function.sym_visibility.data == "private":
        raise DiagnosticException(
            f"{taker}: 'func.func' @{function.sym_name.data} is private: a kernel's function is "
            "called from outside its module (drop `private`)"
        )


def check_outputs(outputs: object, option: str = "outputs") -> list[str] | None:
    """`outputs` (of `compile`, `bench`; `compile_module`'s `output_names`: `option`) as a list
    of output names (one name as a list of it; any ordered iterable, `dict.keys()` too), or
    None; TypeError, or ValueError for a name given twice or empty, naming what is wrong."""
    if outputs is None:
        return None
    if isinstance(outputs, str):
        outputs = [outputs]
    elif isinstance(outputs, Iterable) and not isinstance(outputs, set | frozenset | Mapping):
        outputs = list(outputs)  # (a mapping, refused as before: its keys are no stated list)
    if not (isinstance(outputs, list) and all(isinstance(name, str) for name in outputs)):
        unordered = " (a set has no order)" if isinstance(outputs, set | frozenset) else ""
        raise TypeError(f"{option} must be a list of output names, got {outputs!r}{unordered}")
    if len(set(outputs)) < len(outputs):
        # As the language's `output y, y;` is an error: two outputs would be one array.
        repeated = next(name for name in outputs if outputs.count(name) > 1)
        raise ValueError(f"{option}: '{repeated}' is given twice, got {outputs!r}")
    if "" in outputs:  # (`compile_module` named an output so)
        raise ValueError(f"{option}: an output name is empty, got {outputs!r}")
    return outputs


def check_threads(threads: object) -> int:
    return check_integer("threads", threads, "an integer >= 1", lambda value: value >= 1)


def check_input_names(option: str, mapping: Mapping[Any, Any]) -> None:
    """A TypeError naming `option` where a key of `mapping` is not an input's name (a str): the
    cache key sorted them first (`'<' not supported between instances of 'str' and 'int'`)."""
    for name in mapping:
        if not isinstance(name, str):
            raise TypeError(f"{option}: input names must be strings, got {name!r}")


def checked_shapes(shapes: object) -> dict[str, tuple[Any, ...]] | None:
    """`compile`'s `shapes`: input name -> dims, each a size >= 0, a dim name or None; a size
    of any integer type as an int (a numpy int became a `?` dim, its size unchecked)."""
    if shapes is None:
        return None
    if not isinstance(shapes, Mapping):
        raise TypeError(f"shapes must map input names to shapes, got {type(shapes).__name__}")
    check_input_names("shapes", shapes)
    checked = {}
    for name, dims in shapes.items():
        if isinstance(dims, str) or not isinstance(dims, Sequence):
            raise TypeError(
                f"shapes['{name}'] must be a sequence of dims (sizes, names or None), got {dims!r}"
            )
        for dim in dims:
            size = isinstance(dim, numbers.Integral) and not isinstance(dim, bool) and dim >= 0
            if not (dim is None or size or (isinstance(dim, str) and dim.isidentifier())):
                raise ValueError(
                    f"shapes['{name}']: bad dim {dim!r}: expected a size >= 0, a dim name "
                    f"(an identifier) or None"
                )
        checked[name] = tuple(int(d) if isinstance(d, numbers.Integral) else d for d in dims)
    return checked


TARGET_OPTIONS = {
    "cpu": ("interleave", "streaming", "masked_remainder", "aligned_stores"),
    "cuda": ("arch",),
}
"""The options of one target only: the other takes each at its default (as `threads`), where
another value would do nothing."""


@dataclass(frozen=True)
class Options:
    """Everything besides the program that changes the generated code.

    Checked when made: a bad option raises ValueError (TypeError for a wrong type) naming the
    option and its allowed values, before any pass runs.
    """

    fuse: bool = True
    math: Math = "approx"
    fastmath: str = "none"
    reuse: bool = True
    opt_level: int = 3
    extra_passes: str = ""
    """xfuse passes (`xfuse-opt -p` syntax) to run right after `ew-optimize`, e.g. a new one."""
    target: Target = "cpu"
    """"cpu" (the host, MCJIT) or "cuda" (PTX for `arch`, see `xfuse.runtime.cuda`)."""
    arch: str = "sm_90"
    interleave: int | None = None
    """The vector loops' interleave count: 1 (none), 2, 4, 8 or 16 (`INTERLEAVE_COUNTS`), 0 (LLVM's
    cost model chooses); None chooses it from each loop body's length and arrays
    (`xfuse.codegen.native.interleave_count`)."""
    streaming: bool = True
    """Also compile a single-kernel program's streaming twin, whose outputs bypass the cache,
    for calls of one flat loop, or of a loop nest whose output rows are whole 64-byte lines, from
    `xfuse.codegen.native.HostCpu.streaming_bytes` (x86 hosts)."""
    masked_remainder: bool = False
    """Run the elements after the last full block of vectors in a masked vector loop instead
    of LLVM's vector epilogue and scalar loop (`ew-kernel-to-loops{vector-bytes}`): up to ~200 ns
    less per call of a transcendental program, for ~20% more compile time (docs/benchmarks.md).
    Kernels of bf16 arrays always do (`bf16-only`), whose scalar loop took up to ~0.7 us."""
    aligned_stores: bool = True
    """In a loop bound by its loads and stores, run the elements before the first output's first
    64-byte boundary apart (`ew-kernel-to-loops{store-alignment=64}`), so that no vector store
    straddles two cache lines: `x + r` at 2^12 float32 took 0.52-0.55x the time on numpy's
    large arrays (16 bytes past a line), docs/benchmarks.md. False: no such head (to compare)."""

    def __repr__(self) -> str:
        """The options but the other target's, each at its default (`TARGET_OPTIONS`)."""
        other = {
            name
            for target, names in TARGET_OPTIONS.items()
            if target != self.target
            for name in names
        }
        shown = (f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name not in other)
        return f"Options({', '.join(shown)})"

    def __post_init__(self) -> None:
        from xdsl.dialects import llvm

        from xfuse.transforms.options import PassOptionError
        from xfuse.transforms.to_llvm import parse_fastmath

        for name in ("math", "fastmath", "extra_passes", "target", "arch"):
            if isinstance(getattr(self, name), str):  # (a numpy str kept its repr, as an int;
                # str() of a str-mixin Enum's member is 'M.X', str.__str__ its characters)
                object.__setattr__(self, name, str.__str__(getattr(self, name)))
        for name in ("fuse", "reuse", "streaming", "masked_remainder", "aligned_stores"):
            if isinstance(getattr(self, name), np.bool_):  # (as threads takes a numpy int)
                object.__setattr__(self, name, bool(getattr(self, name)))
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        check_target(self.target, self.arch, self.math, threads=1)
        defaults = {field.name: field.default for field in fields(self)}
        for target, names in TARGET_OPTIONS.items():
            for name in names:
                if target != self.target and getattr(self, name) != defaults[name]:
                    raise ValueError(
                        f"{name} applies to target='{target}' only, got {name}="
                        f"{getattr(self, name)!r} with target='{self.target}'"
                    )
        # as ints (a numpy int was kept: its repr, the disk cache's key, and a kernel compiled
        # with 3 after one with np.int64(3) showed it)
        opt_level = check_integer(
            "opt_level", self.opt_level, "0, 1, 2 or 3", OPT_LEVELS.__contains__
        )
        object.__setattr__(self, "opt_level", opt_level)
        if self.interleave is not None:
            interleave = check_integer(
                "interleave",
                self.interleave,
                "None, 0 or a power of two up to 16 (LLVM's loop vectorizer ignores other counts)",
                INTERLEAVE_COUNTS.__contains__,
            )
            object.__setattr__(self, "interleave", interleave)
        if not isinstance(self.fastmath, str):
            raise TypeError(f"fastmath must be a string, got {type(self.fastmath).__name__}")
        try:
            flags = {getattr(flag, "value", flag) for flag in parse_fastmath(self.fastmath).data}
        except PassOptionError as error:
            raise ValueError(f"fastmath must be {error.expected}, got {self.fastmath!r}") from None
        # One spelling of each set of flags (in LLVM's order): `" fast"`, `"afn,contract"` and
        # `"contract,contract"` were options of their own, each another entry of the caches.
        spelled = [flag.value for flag in llvm.FastMathFlag if flag.value in flags]
        every = len(spelled) == len(llvm.FastMathFlag)
        object.__setattr__(self, "fastmath", "fast" if every else ",".join(spelled) or "none")
        self.extra()

    def extra(self) -> list[ModulePass]:
        """The passes of `extra_passes`."""
        from xfuse.transforms import ALL_PASSES
        from xfuse.transforms.pipeline import PassSpecError, parse_passes

        if not isinstance(self.extra_passes, str):
            kind = type(self.extra_passes).__name__
            raise TypeError(f"extra_passes must be a pass pipeline string, got {kind}")
        try:
            passes = parse_passes(self.extra_passes)
        except PassSpecError as error:
            raise ValueError(f"extra_passes: {error}") from None
        for pass_ in passes:
            if pass_.name in NOT_EXTRA_PASSES:
                allowed = ", ".join(n for n in ALL_PASSES if n not in NOT_EXTRA_PASSES)
                raise ValueError(
                    f"extra_passes: '{pass_.name}' cannot run there: extra passes run on tensors "
                    f"right after ew-optimize, before the pipeline's own stages (allowed: "
                    f"{allowed}, or a pass of your own)"
                )
        return passes

    def passes(self) -> tuple[ModulePass, ...]:
        """The pipeline these options compile with (`default_pipeline`), frontend to `llvm`."""
        from xfuse.transforms.default_pipeline import default_pipeline

        return default_pipeline(
            fuse=self.fuse,
            reuse=self.reuse,
            math=self.math,
            fastmath=self.fastmath,
            f16c=self.target == "cpu" and host_cpu().has("f16c"),
            avx512bf16=self.target == "cpu" and host_cpu().rounds_bf16,
            ldexp=self.target == "cpu" and host_cpu().scales_by_ldexp,
            target=self.target,
            masked_remainder=self.masked_remainder,
            aligned_stores=self.aligned_stores,
            extra=self.extra(),
        )

    def _stages(self) -> list[tuple[str, ModulePass]]:
        """(stage name, pass) of every pass: its name, `name#2` for its second run and so on
        (`extra_passes="ew-optimize{...}"` hid the pipeline's own `ew-optimize` stage)."""
        runs: dict[str, int] = {}
        stages = []
        for p in self.passes():
            runs[p.name] = runs.get(p.name, 0) + 1
            stages.append((p.name if runs[p.name] == 1 else f"{p.name}#{runs[p.name]}", p))
        return stages

    def tensor_passes(self) -> list[tuple[str, ModulePass]]:
        """(stage name, pass) from the frontend's tensors to bufferized kernels."""
        stages = self._stages()
        return stages[: [name for name, _ in stages].index("ew-bufferize") + 1]

    def buffer_passes(self) -> list[tuple[str, ModulePass]]:
        """(stage name, pass) from bufferized kernels to the `llvm` dialect."""
        stages = self._stages()
        return stages[[name for name, _ in stages].index("ew-bufferize") + 1 :]


_programs: weakref.WeakValueDictionary[Hashable, Program] = weakref.WeakValueDictionary()
_recent: OrderedDict[Program, None] = OrderedDict()
"""The most recently used programs, oldest first (a program hashes by identity)."""


_recent_lock = threading.Lock()
"""Held while `_recent` changes: another thread's `clear_cache` or eviction between two of its
steps (an entry added, then moved to the end) made the second a KeyError."""


def _new_recent_lock() -> None:
    """A new lock in a forked child (another thread may have held the old one)."""
    global _recent_lock
    _recent_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_recent_lock)


def _remember(key: Hashable, program: Program) -> None:
    _programs[key] = program
    with _recent_lock:
        _recent[program] = None
        _recent.move_to_end(program)
        while len(_recent) > LRU_SIZE:
            _recent.popitem(last=False)


def _recall(key: Hashable) -> Program | None:
    program = _programs.get(key)
    if program is not None:
        _remember(key, program)
    return program


_source_warnings: dict[str, tuple[NameWarning, ...]] = {}
"""What parsing each remembered source warned (only sources that warned, while their program
is remembered), which a hit in memory issues again as one on disk does: where the parse it
skips would have shown it (another `filename`, a `-W error`), it shows."""


def _remember_warnings(source_key: str, warned: Sequence[NameWarning]) -> None:
    # (a copy of the keys: a thread compiling meanwhile changes the dict, and `in _programs`,
    # a WeakValueDictionary's, runs Python code, where a thread switch can come)
    for forgotten in [key for key in list(_source_warnings) if key not in _programs]:
        _source_warnings.pop(forgotten, None)
    if warned:
        _source_warnings[source_key] = tuple(warned)


def _warn_again(warned: Sequence[NameWarning], filename: str) -> None:
    """Issue what a parse skipped by a cache hit would have warned, at this compile's file."""
    from xfuse.frontend.name_warnings import warn_name

    for warning in warned:
        warn_name(warning._replace(filename=filename))


_also_cleared: list[Callable[[], None]] = []
"""What `clear_cache` also clears: other modules' caches that keep programs (`clear_with`)."""


def clear_with(clear: Callable[[], None]) -> None:
    """Have `clear_cache` also call `clear` (a cache of another module that keeps programs:
    unpickling's kernels, whose programs stayed after a `clear_cache`)."""
    _also_cleared.append(clear)


def clear_cache() -> None:
    """Forget the programs this process compiled (the next `compile` of one compiles it again,
    or loads it from the disk cache: `xfuse cache clear` empties that)."""
    _programs.clear()
    with _recent_lock:
        _recent.clear()
    _source_warnings.clear()
    for clear in _also_cleared:
        clear()


def _parameter(name: str, type_: Attribute, dims: tuple[str, ...] | None = None) -> Parameter:
    from xdsl.dialects.builtin import MemRefType, TensorType

    from xfuse.dialects.dtypes import dtype_of

    shaped = cast("TensorType[Attribute] | MemRefType[Attribute]", type_)
    return Parameter(name, dtype_of(shaped.get_element_type()), tuple(shaped.get_shape()), dims)


def signature(
    module: ModuleOp, output_names: Sequence[str] | None
) -> tuple[list[Parameter], list[Parameter]]:
    """Input and output parameters of a frontend (tensor) module, named after the source: the
    outputs by `output_names`, else as `ew-bufferize` names their buffers (a value returned twice
    is two outputs: one name for both left `out=` a mapping unable to tell them apart); a
    ValueError for names that do not fit."""
    from xfuse.dialects.ew import declared_dims, input_name
    from xfuse.transforms.bufferize import output_names as buffer_names
    from xfuse.transforms.pipeline import only_function

    function = only_function(module)
    arguments = function.body.block.args
    input_names = distinct_names([input_name(a) or f"arg{i}" for i, a in enumerate(arguments)])
    inputs = [
        _parameter(name, arg.type, declared_dims(arg))
        for name, arg in zip(input_names, arguments, strict=True)
    ]
    returned = function.get_return_op()
    assert returned is not None
    results = returned.arguments
    names = list(output_names) if output_names is not None else buffer_names(results)
    if len(names) != len(results):
        raise ValueError(
            f"output_names: {len(names)} name{'s' * (len(names) != 1)} for a function of "
            f"{len(results)} results"
        )
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise ValueError(
            f"two outputs are named '{repeated}' ({names}): pass distinct output_names"
        )
    outputs = [_parameter(name, value.type) for name, value in zip(names, results, strict=True)]
    return inputs, outputs


def distinct_names(names: Sequence[str]) -> list[str]:
    """`names` with each repeat suffixed `_1`, `_2`, ... as xDSL prints repeated SSA names: the
    hints of `%a` and `%a_1` are both `a` (xDSL drops `_<digits>`), and two inputs of one name
    made the kernel's call signature a ValueError."""
    taken = set(names)
    distinct: list[str] = []
    for name in names:
        if name in distinct:
            name = next(f"{name}_{k}" for k in itertools.count(1) if f"{name}_{k}" not in taken)
            taken.add(name)
        distinct.append(name)
    return distinct


def _program(module: ModuleOp, output_names: Sequence[str] | None, options: Options) -> Program:
    from xfuse.frontend.builder import with_distinct_printed_names
    from xfuse.transforms.pipeline import with_static_inputs

    module = with_static_inputs(module)
    _, outputs = signature(module, output_names)
    # (named by the hints first: an output whose printed name repeats another's keeps its own)
    module = with_distinct_printed_names(module)
    return program_of_ir(str(module), tuple(p.name for p in outputs), options, module)


def program_of_ir(
    frontend_ir: str,
    output_names: tuple[str, ...],
    options: Options,
    module: ModuleOp | None = None,
) -> Program:
    """The program of a frontend module's IR: from memory, the disk cache, or compiled (from
    `module`, or `frontend_ir` parsed when it is None)."""
    key = ("ir", frontend_ir, output_names, options)
    program = _recall(key)
    if program is None:
        # (names as a tuple's repr: joined by ",", names of commas gave two programs one key)
        disk_key = ("ir", frontend_ir, repr(tuple(output_names)), repr(options))
        on_disk = own_passes_only(options.extra_passes)
        program = disk_cache.load(disk_key, options.target, _stages) if on_disk else None
        if program is None:
            from xfuse.transforms.pipeline import only_function

            with collector_paused():
                # A module parsed here is not kept past the pause (see `compile`).
                frontend = parse_ir(frontend_ir) if module is None else module
                # (by the module, not its text: `func.func public @main` had no "func.func @",
                # and a string attribute holding one named another function)
                name = only_function(frontend).sym_name.data
                program = _lower(frontend, frontend_ir, name, output_names, options)
                del frontend
            if on_disk:
                disk_cache.store(disk_key, program, name)
        _remember(key, program)
    return program


def _stages(frontend_ir: str, options: Options) -> Stages:
    """The stages of a program loaded from the disk cache, from its frontend IR."""
    passes = [*options.tensor_passes(), *options.buffer_passes()]
    return Stages("frontend", lambda: parse_ir(frontend_ir), passes)


def parse_ir(text: str) -> ModuleOp:
    """A module from its printed IR (any of xfuse's stages)."""
    from xdsl.parser import Parser

    from xfuse.transforms.pipeline import pipeline_context

    return Parser(pipeline_context(), text).parse_module()


def compile_module(
    module: ModuleOp,
    output_names: Sequence[str] | None = None,
    options: Options | None = None,
    threads: int = 1,
) -> Kernel:
    """Compile a frontend module (one `func.func` on tensors of `ew` ops) to a `Kernel`
    (default options: `Options()`); an argument or result of another type is an error naming it
    (a scalar argument was a raw AttributeError). The outputs are named by `output_names`, else
    by their SSA names, `out<i>` for one without a name, returned more than once (`func.return
    %y, %y` gives two outputs, `out0` and `out1`, as `ew-bufferize` names their buffers) or one
    of several results of one op (`%k#0`, `%k#1`)."""
    from xdsl.utils.exceptions import DiagnosticException

    from xfuse.dialects.ew import check_tensor_signature
    from xfuse.transforms.pipeline import only_function

    check_module("compile_module", module)
    options, threads = _checked_options("compile_module", options, threads)
    # (a str was read as names of one letter)
    output_names = check_outputs(output_names, "output_names")
    module.verify()  # (IR xfuse-opt rejects compiled, and its call failed in an IndexError)
    function = only_function(module)
    check_tensor_signature(function, "compile_module")
    check_public(function, "compile_module")
    if not function.function_type.outputs:  # (its call was a SyntaxError of the call glue)
        raise DiagnosticException(
            f"compile_module: 'func.func' @{function.sym_name.data} returns nothing: a kernel "
            "computes at least one output"
        )
    return _kernel(_program(module, output_names, options), threads)


def _checked_options(caller: str, options: object, threads: object) -> tuple[Options, int]:
    """`options` (None: `Options()`) and `threads` of `caller`, checked as `xfuse.compile`
    checks its own: a dict of options was a raw "unhashable type", a CUDA kernel's threads were
    dropped, 0 threads taken."""
    if options is not None and not isinstance(options, Options):
        raise TypeError(
            f"{caller}: options must be an xfuse.runtime.compiler.Options, got "
            f"{type(options).__name__}"
        )
    options = options or Options()
    threads = check_threads(threads)
    check_target(options.target, options.arch, options.math, threads)
    return options, threads


def _lower(
    module: ModuleOp,
    frontend_ir: str,
    function_name: str,
    output_names: Sequence[str],
    options: Options,
) -> Program:
    inputs, outputs = signature(module, output_names)
    program = _run_pipeline(
        module,
        ("frontend", lambda: parse_ir(frontend_ir)),
        options.tensor_passes(),
        function_name,
        inputs,
        outputs,
        options,
    )
    program.frontend_ir = frontend_ir
    return program


class Stages(Mapping[str, str]):
    """The IR after each stage, by stage name in pipeline order.

    Printing every stage took about a third of a warm compile, and it is only for looking at: the
    texts are made on first access by running the passes again on the first stage's module, which
    `first` makes then (parsing the frontend's IR, already printed for the cache keys, costs
    nothing until asked for, where a copy of the module took 4% of a 10^4-op compile).
    """

    def __init__(
        self,
        first_name: str,
        first: Callable[[], ModuleOp],
        passes: Sequence[tuple[str, ModulePass]],
    ):
        self._first_name = first_name
        self._first = first
        self._passes = passes
        self._texts: dict[str, str] | None = None

    def _print_all(self) -> dict[str, str]:
        if self._texts is None:
            from xfuse.transforms.pipeline import pipeline_context

            module = self._first()
            texts = {self._first_name: str(module)}
            ctx = pipeline_context()
            for name, pass_ in self._passes:
                pass_.apply(ctx, module)
                texts[name] = str(module)
            self._texts = texts
        return self._texts

    def __getitem__(self, stage: str) -> str:
        return self._print_all()[stage]

    def __iter__(self) -> Iterator[str]:
        return iter([self._first_name, *(name for name, _ in self._passes)])

    def __len__(self) -> int:
        return 1 + len(self._passes)


def _run_pipeline(
    module: ModuleOp,
    first_stage: tuple[str, Callable[[], ModuleOp]],
    tensor_passes: Sequence[tuple[str, ModulePass]],
    function_name: str,
    inputs: Sequence[Parameter],
    outputs: Sequence[Parameter],
    options: Options,
) -> Program:
    """Run `tensor_passes`, then the buffer passes, on `module` and JIT the result; `first_stage`
    is the name of the stage `module` is at and what makes it again (see `Stages`)."""
    from xdsl.dialects import llvm

    from xfuse.dialects import ew
    from xfuse.transforms.pipeline import only_function, pipeline_context

    ctx = pipeline_context()
    for _, pass_ in tensor_passes:
        pass_.apply(ctx, module)
    # A kernel reads every input element before writing the same element, and the kernels
    # before it read theirs before any output is written: in-place is safe where only the last
    # kernel writes outputs (the others temporaries: a broadcast row's own kernel, an unfused
    # program's), and every input is read. An unread one may make the call's space larger than
    # the kernel's (`input c[], y[t, d]; h = c * 2;`): its slices or rows each ran the kernel
    # whole, each over what the one before had written (`out=c` gave c * 2**8).
    function = only_function(module)
    kernels = [op for op in function.walk() if isinstance(op, ew.KernelOp)]
    # (bufferized: the tensor passes end with ew-bufferize, so a kernel's outputs are buffers)
    assert all(not kernel.results for kernel in kernels), "expected bufferized kernels"
    arguments = function.body.block.args
    in_place_allowed = all(argument.uses for argument in arguments) and not any(
        output in arguments for kernel in kernels[:-1] for output in kernel.outputs
    )
    one_kernel = len(kernels) == 1
    # (a GPU call runs its launches whole: no call by rows)
    repeated_axes = _repeated_axes(kernels, options.math) if options.target == "cpu" else ()
    if options.target == "cuda":
        from xfuse.runtime.cuda import gpu_program

        buffer_passes = options.buffer_passes()
        gpu = gpu_program(module, buffer_passes, inputs, outputs, options.opt_level, options.arch)
        stages = Stages(*first_stage, [*tensor_passes, *buffer_passes])
        return Program(gpu, stages, in_place_allowed, repeated_axes, options)
    buffer_passes = options.buffer_passes()
    for _, pass_ in buffer_passes:
        pass_.apply(ctx, module)
    symbols = {op.sym_name.data for op in module.ops if isinstance(op, llvm.FuncOp)}
    has_workspace = workspace_size_function(function_name) in symbols
    # Splitting a call is safe for one elementwise kernel (each element computed where stored;
    # a call whose outputs are not of its whole space does not stream: `make_plan`); a static
    # first axis splits no call, so a twin would be compiled for nothing.
    streams = options.streaming and one_kernel and splittable((*inputs, *outputs))
    streaming_outputs = len(outputs) if streams else 0
    native = compile_llvm_dialect(
        module,
        options.opt_level,
        options.interleave,
        streaming_outputs,
        libmvec=options.math == "approx",
    )
    function = NativeFunction(native, function_name, inputs, outputs, has_workspace)
    stages = Stages(*first_stage, [*tensor_passes, *buffer_passes])
    return Program(function, stages, in_place_allowed, repeated_axes, options)


def _repeated_axes(kernels: Sequence[Any], math: str) -> tuple[int, ...]:
    """The axes but the last that a kernel making libm calls lacks (missing, or a static 1)
    while another kernel spans them (`Program.repeated_axes`: a row's `sin` in a kernel of its
    own beside the `[t, d]` one, axis 0). Arithmetic a row computes again costs less than a
    copy of its inputs (`x * (b * 2 + 1)` unfused, x `[t, 4096]` of `[t, 4112]`: 11.7 us by
    rows, 20.8 copying at t = 2; 422.1 and 670.9 at 256; Intel Xeon, 2026-12-06)."""
    from xfuse.dialects import ew
    from xfuse.transforms.fuse import calls_libm
    from xfuse.transforms.options import is_cpu_math

    if not is_cpu_math(math):
        return ()
    shapes = [ew.shape_of(kernel.destinations()[0].type) for kernel in kernels]
    rank = max(map(len, shapes), default=0)
    aligned = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    spanned = [any(shape[axis] != 1 for shape in aligned) for axis in range(rank - 1)]
    calling = [
        shape
        for kernel, shape in zip(kernels, aligned, strict=True)
        if any(size != 1 for size in shape) and calls_libm(kernel, math)
    ]
    return tuple(
        axis for axis in range(rank - 1) if spanned[axis] and any(s[axis] == 1 for s in calling)
    )


def compile_bufferized(
    module: ModuleOp,
    input_names: Sequence[str],
    options: Options | None = None,
    threads: int = 1,
) -> Kernel:
    """Compile a bufferized module (the `ew-bufferize` contract: inputs, then output buffers).

    `input_names` says how many leading memref arguments are inputs; the rest are outputs,
    named after their SSA names. The function must be in the form `ew-bufferize` makes
    (`xfuse.runtime.bufferized` checks it, naming the argument or op); as in `compile_module`,
    an argument's `?` takes the static size another buffer has on its axis, so the call checks
    it. Not cached: for hand-written IR and tests of the lowering.
    """
    from xfuse.runtime.bufferized import (
        argument_names,
        check_arguments,
        check_function,
        check_output_sizes,
    )
    from xfuse.transforms.pipeline import only_function, with_static_inputs

    check_module("compile_bufferized", module)
    options, threads = _checked_options("compile_bufferized", options, threads)
    names = argument_names(only_function(module), input_names)
    check_arguments(only_function(module), names)
    module.verify()
    check_function(only_function(module), names, len(input_names))
    check_public(only_function(module), "compile_bufferized")
    module = with_static_inputs(module)
    function = only_function(module)
    args = function.body.block.args
    parameters = [_parameter(name, arg.type) for name, arg in zip(names, args, strict=True)]
    inputs, outputs = parameters[: len(input_names)], parameters[len(input_names) :]
    check_output_sizes(inputs, outputs)
    with collector_paused():
        first = module.clone()
        program = _run_pipeline(
            module,
            ("ew-bufferize", lambda: first),
            [],
            function.sym_name.data,
            inputs,
            outputs,
            options,
        )
    return _kernel(program, threads)


def recompiled(kernel: Kernel, options: Options) -> Kernel:
    """`kernel`'s program compiled with other `options`, from its frontend IR (through the
    caches): a jit function's streaming twin, without tracing the function again."""
    frontend_ir = kernel.program.frontend_ir
    assert frontend_ir is not None, "a kernel of bufferized IR has no frontend program"
    return _kernel(program_of_ir(frontend_ir, kernel.output_names, options), kernel.threads)


def _kernel(program: Program, threads: int) -> Kernel:
    if program.options.target == "cuda":
        from xfuse.runtime.cuda import CudaKernel

        return CudaKernel(program)  # type: ignore[return-value]
    return Kernel(program, threads)


def _main_name(frontend_ir: str) -> str:
    marker = "func.func @"
    start = frontend_ir.index(marker) + len(marker)
    if not frontend_ir.startswith('"', start):
        return frontend_ir[start : frontend_ir.index("(", start)]
    # A quoted name (`@"a b"`, `@"\C3\A9"` for é): its contents, unescaped as xDSL's lexer does
    # (a `(` inside it, or its quotes, made the entry's name wrong).
    from xdsl.utils.lexer import Input
    from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind, StringLiteral

    token = MLIRLexer(Input(frontend_ir[start:], "<ir>")).lex()
    assert token.kind in (MLIRTokenKind.STRING_LIT, MLIRTokenKind.BYTES_LIT)
    return StringLiteral.from_span(token.span).string_contents


def check_source(source: object, function: str = "xfuse.compile") -> None:
    """The source of `function` is the program's text: a file (its path or a file object) is
    an error that says how to pass its text, not the parse error of a path read as a program."""
    if isinstance(source, str):
        name = source.strip()
        if name.endswith(".ew") and not any(c in name for c in ";=\n"):
            raise ValueError(
                f"source {source!r} is a file name, not a program: {function} takes the "
                f"program's text ({function}(open({name!r}).read()))"
            )
        return
    what = type(source).__name__
    if isinstance(source, os.PathLike) or hasattr(source, "read"):
        raise TypeError(
            f"source must be the program's text (a str), got a {what}: pass the file's text, "
            f"{function}(path.read_text()) or {function}(file.read())"
        )
    raise TypeError(f"source must be the program's text (a str), got {what}")


def compile(
    source: str,
    outputs: Sequence[str] | None = None,
    *,
    fuse: bool = True,
    math: Math = "approx",
    dtype: DtypeSpec = "float32",
    shapes: Mapping[str, Sequence[int | str | None]] | None = None,
    threads: int = 1,
    fastmath: str = "none",
    reuse: bool = True,
    opt_level: int = 3,
    extra_passes: str = "",
    target: Target = "cpu",
    arch: str = "sm_90",
    interleave: int | None = None,
    streaming: bool = True,
    masked_remainder: bool = False,
    aligned_stores: bool = True,
    filename: str | os.PathLike[str] = "<source>",
) -> Kernel:
    """Compile an `.ew` program to a callable `Kernel`.

    `outputs` names the results (a list of names, or one name; default: the program's `output`
    declarations, else its last assignment);
    `fuse=False` keeps one kernel per op; `math` is "approx" (vectorizable approximations) or
    "libm"; `dtype` the element type ("float32", "float64", "float16", "bfloat16" or a numpy dtype)
    of every input, or a mapping from input names to them (others: float32); `shapes` input shapes
    (ints static, names dynamic dims that must agree wherever they appear, None dynamic; default
    `[?]`). Declarations in the program (`input bf16 x[t, d];`) do the same from the source. Results
    have numpy's promoted dtype of what they are computed from (see `xfuse.frontend.builder`).
    `threads` splits the outermost dimension across threads; `fastmath` sets LLVM's fast-math flags
    on the program's float arithmetic (default "none": each op rounds as written, numpy's bits;
    "contract" allows fused multiply-adds, which may keep an overflow finite: unsafe; "fast" or a
    list like "contract,afn"; the approximations of `math="approx"` always use FMAs);
    `opt_level` is LLVM's (0-3); `interleave` how many vector iterations LLVM's
    loop vectorizer interleaves (0: LLVM's cost model chooses; 1, 2, 4, 8 or 16: that many;
    default None: 4 for a long loop body (8 for a long one of 16-bit floats held in f32
    registers), LLVM's choice for a short one, 1 over more than 16 arrays, see
    `xfuse.codegen.native.interleave_count`); `streaming=False` keeps normal stores in calls
    too large for the cache (see `xfuse.codegen.native.HostCpu.streaming_bytes`);
    `masked_remainder=True` runs the last elements in a masked vector loop; `aligned_stores=False`
    leaves out the head that aligns a load/store-bound loop's stores (see `Options`, which checks
    every option); `extra_passes` adds xfuse passes after `ew-optimize`
    (`"ew-strength-reduce{max-exponent=3}"`). `target="cuda"` compiles PTX for `arch` ("sm_90"
    or "sm_80") instead, into a `xfuse.runtime.cuda.CudaKernel` (`math` "approx" or
    "ptx-approx"; see that module). `filename` names the program in its errors and warnings
    (`gelu.ew:2:7: error: ...`). A bad argument raises ValueError or TypeError naming it and its
    allowed values.
    """
    check_source(source)
    filename = check_filename(filename)
    outputs = check_outputs(outputs)
    threads = check_threads(threads)
    shapes = checked_shapes(shapes)
    check_target(target, arch, math, threads)
    option_values: dict[str, Any] = {  # (unchecked: `Options` checks them)
        "fuse": fuse,
        "math": math,
        "fastmath": fastmath,
        "reuse": reuse,
        "opt_level": opt_level,
        "extra_passes": extra_passes,
        "target": target,
        "arch": arch,
        "interleave": interleave,
        "streaming": streaming,
        "masked_remainder": masked_remainder,
        "aligned_stores": aligned_stores,
    }
    if isinstance(dtype, Mapping):
        check_input_names("dtype", dtype)
        dtype = {input_name: dtype_name(d) for input_name, d in dtype.items()}
        dtype_key: Hashable = tuple(sorted(dtype.items()))
    else:
        dtype = dtype_key = dtype_name(dtype)
    shape_key = tuple(sorted((k, tuple(v)) for k, v in (shapes or {}).items()))
    # The options as given, unchecked (see the module docstring); their reprs, so that an
    # unhashable bad option reaches `Options`, which names it.
    source_key = repr(
        (
            source,
            tuple(outputs) if outputs is not None else None,
            dtype_key,
            shape_key,
            tuple(option_values.items()),
        )
    )
    program = _recall(source_key)
    if program is not None:
        _warn_again(_source_warnings.get(source_key, ()), filename)
    else:
        # A new process finds the program on disk by its source: no parsing, no xDSL.
        disk_key = ("source", source_key)
        # (a pass of the caller's own: its code is in no fingerprint, so a changed one got the
        # old kernel from disk)
        on_disk = isinstance(extra_passes, str) and own_passes_only(extra_passes)
        loaded = disk_cache.load_with_warnings(disk_key, target, _stages) if on_disk else None
        if loaded is not None:  # (also by its frontend IR, as unpickling looks it up)
            program, source_warnings = loaded
            warned = [NameWarning(*fields) for fields in source_warnings]
            _warn_again(warned, filename)
            assert program.frontend_ir is not None
            names = tuple(p.name for p in program.function.outputs)
            _remember(("ir", program.frontend_ir, names, program.options), program)
        else:
            from xfuse.frontend.builder import FunctionBuilder
            from xfuse.frontend.language import ParsedProgram

            options = Options(**option_values)
            with collector_paused():
                parsed = ParsedProgram(source, outputs, FunctionBuilder(dtype, shapes), filename)
                program = _program(parsed.module, parsed.output_names, options)
                warned = parsed.name_warnings
                # Dropped while the collector is off: its first collection then frees the IR
                # (cyclic garbage) at once, instead of finding it alive and again later.
                del parsed
            assert program.frontend_ir is not None
            if on_disk:
                disk_cache.store(disk_key, program, _main_name(program.frontend_ir), warned)
        _remember(source_key, program)
        _remember_warnings(source_key, warned)
    return _kernel(program, threads)
