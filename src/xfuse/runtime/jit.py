"""`@xfuse.jit`: compile a Python function of arrays by tracing it once per signature.

    @xfuse.jit(math="approx")
    def gelu(x, b, r):
        h = x + b
        return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

On the first call with a new signature (dtypes and traced shapes of the arrays; a new size of
a traced shape takes its kernel, `JitFunction._kernel_for`) the function runs on
`Traced` proxies that record `ew` ops with `FunctionBuilder`; the module is compiled with
`xfuse.compile`'s pipeline and cache. Dims of size 1 are declared 1 (they broadcast), the others
`?`, and arrays all of one shape of two or more dims (but 0-d ones) are traced flat (`[?]`: one
loop that runs them in any layout, `xfuse.runtime.kernel.Kernel.flat_shape`); a parameter's array
default is an argument too (a scalar default a constant). Arrays may mix dtypes: they promote as in
numpy (bf16 + f32 -> f32), Python numbers take the dtype of the array they meet, numpy scalars keep
theirs (numpy 2's NEP 50: `x * np.float64(2)` is float64 for a float32 `x`); `.astype(dtype)`
converts (`ew.convert`). `xfuse.tanh` and friends work on proxies and, outside tracing, on numpy
arrays. A jit function called with proxies (from a function being traced, or itself) is traced into
the caller's kernel; a function that returns a tuple, a list or a namedtuple returns its results
in one of the same kind, of one array too (outputs `out0`, ...); a comparison it returns (a mask)
comes back as numpy's booleans. Dask arrays are traced by their dtype and shape like numpy
arrays, and the kernel then returns lazy dask arrays (`xfuse.runtime.dask_arrays`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsIndex, cast

import numpy as np

from xfuse.codegen.native import host_cpu
from xfuse.dialects.dtypes import dtype_name, numpy_dtype
from xfuse.dialects.ew import broadcast_shapes
from xfuse.frontend.builder import FunctionBuilder
from xfuse.frontend.tracing import LeakedTraceError, NotCombinableError, Traced
from xfuse.runtime.arrays import (
    ArgumentError,
    ArgumentTypeError,
    check_array_kind,
    data_pointer,
    extent,
    keyword_mistake,
    overlapping_spans,
    share_elements,
)
from xfuse.runtime.call_plans import PLAN_CACHE_SIZE
from xfuse.runtime.compiler import Options, check_threads, compile_module, recompiled
from xfuse.runtime.dask_arrays import check_known_chunks, is_dask_array
from xfuse.runtime.kernel import Kernel, fortran_ordered, out_buffers
from xfuse.transforms.options import Math


@dataclasses.dataclass(frozen=True)
class ResultForm:
    """How a call returns its kernel's results: as the traced function returned them."""

    booleans: tuple[bool, ...] = ()
    """Which results are numpy's booleans: a comparison's mask, which the kernel computes as 1
    and 0 of its dtype (empty where none is)."""
    sequence: type | None = None
    """The sequence the function returned its arrays in: tuple, list or a namedtuple's class
    (None: one array, in no sequence)."""

    def rebuilder(self, outputs: int) -> Callable[[Any], Any] | None:
        """What makes the kernel's results (an array where it has one of `outputs`, else a
        tuple) the function's: None where they are already (one array, or a tuple of several)."""
        sequence = self.sequence
        if sequence is None or (sequence is tuple and outputs > 1):
            return None
        if sequence is tuple:
            return _in_a_tuple
        made = sequence if sequence is list else sequence._make  # type: ignore[attr-defined]
        return made if outputs > 1 else lambda array: made((array,))

    @staticmethod
    def of(result: object) -> type | None:
        """The `sequence` of what a traced function returned: tuple for a tuple of any other
        subclass than a namedtuple's (nothing says how such a class is made from the results)."""
        if isinstance(result, list):
            return list
        if not isinstance(result, tuple):
            return None
        kind = type(result)
        return kind if hasattr(kind, "_make") and hasattr(kind, "_fields") else tuple


def _in_a_tuple(array: np.ndarray) -> tuple[np.ndarray]:
    return (array,)


_Plain = tuple[Kernel, Callable[[Any], Any] | None, tuple[bool, ...]]
"""A plain call's kernel, what rebuilds its results as the function returned them
(`ResultForm.rebuilder`), and which results are numpy booleans."""


def _function_name(function: Callable[..., Any]) -> str:
    """`function`'s name: a partial's function's (`f` of `functools.partial(f, alpha=0.2)`, as
    jit's own errors suggest), else its type's (a callable object)."""
    while isinstance(function, functools.partial):
        function = function.func
    return getattr(function, "__name__", None) or type(function).__name__


class _Code(str):
    """Code shown as it is in a signature's text (a default's `repr` is its code)."""

    def __repr__(self) -> str:
        return str(self)


def _literal(value: float) -> str:
    """Code of a Python number (`float('nan')`: `nan` is no name)."""
    return repr(value) if math.isfinite(value) else f"float('{value}')"


def _reads_back(value: object) -> bool:
    """Whether `repr(value)` is code that makes `value` again (a number, a string, None)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or type(value) in (bool, int, str)


class JitFunction:
    """A traced-and-compiled Python function; one `Kernel` per signature, found by the exact
    dtypes and shapes of a call's arrays once it has been called with them."""

    def __init__(self, function: Callable[..., Any], options: Options, threads: int):
        self.function = function
        self.name = _function_name(function)
        """What errors call the function (a partial or callable object has no `__name__`)."""
        self.options = options
        self.threads = threads
        self.signature = inspect.signature(function)
        """The function's own signature, which binds a call's arrays."""
        if "out" in self.signature.parameters:
            raise TypeError(
                f"{self.name}(): a jit function cannot have a parameter named 'out': "
                "out= takes the output buffers"
            )
        self.kernels: dict[tuple[Any, ...], Kernel] = {}
        """The kernel of each call so far, by the (name, dtype, shape) of each argument (calls
        of other sizes of one traced signature share one), for `PLAN_CACHE_SIZE` shapes (then
        forgotten, their kernels kept in `_traced`: 5,000 lengths held 2.8 MiB)."""
        self.forms: dict[tuple[Any, ...], ResultForm] = {}
        """How a call returns a kernel's results (by the key of `kernels`): which as numpy's
        booleans, in which sequence."""
        self._traced: dict[tuple[Any, ...], dict[bool, tuple[Kernel, ResultForm]]] = {}
        """The kernels traced so far (and their `forms`), by what a trace depends on: each
        argument's name, dtype and traced shape (`traced_shapes`), then by whether its calls
        stream; the kernel of every call of arrays of those (`_kernel_for`)."""
        self._plain_calls: dict[tuple[Any, ...], _Plain] = {}
        """The kernels of plain calls (every parameter given a numpy array or scalar), by the names
        given and each array's dtype and shape: a repeated call skips binding its arguments
        (`x * sigmoid(x) * y` on 16 float32: 10.4 us a call, 1.4 of it the kernel's;
        docs/calling-kernels.md)."""
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        parameters = self.signature.parameters.values()
        self._plain_arity = (
            -1 if any(p.kind in variadic for p in parameters) else len(self.signature.parameters)
        )
        """How many arrays a plain call passes (-1: none is plain, the function has `*args`
        or `**kwargs`)."""
        # functools' `updated` would merge the function's `__dict__` into this one's: a callable
        # object's `function` attribute replaced the traced callable (silently wrong results),
        # its `signature` or `threads` broke the calls. Only attributes of other names are copied.
        functools.update_wrapper(self, function, updated=())
        for name, value in getattr(function, "__dict__", {}).items():
            if name not in vars(self) and not hasattr(type(self), name):
                setattr(self, name, value)
        parameters = list(self.signature.parameters.values())
        position = len(parameters)
        if parameters and parameters[-1].kind is inspect.Parameter.VAR_KEYWORD:
            position -= 1  # **kwargs stays last
        out = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)
        parameters.insert(position, out)
        self.__signature__ = self.signature.replace(parameters=parameters)
        """What `inspect.signature` shows: the function's parameters and `out=`."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method's jit function bound to its instance, as Python binds a plain function: the
        instance is the first argument (an array, or the call names it; it said "missing a
        required argument: 'x'", the one given)."""
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return (
            f"<xfuse.jit {self.name}{self.signature}: "
            f"{len(self._compiled())} compiled, {self.options}, "
            f"threads={self.threads}>"
        )

    def _compiled(self) -> set[int]:
        """The ids of its kernels: traced, or unpickled (`kernels`). Over copies of the dicts,
        which calls in other threads may grow meanwhile ("dictionary changed size")."""
        traced = {
            id(kernel)
            for by_stream in list(self._traced.values())
            for kernel, _ in list(by_stream.values())
        }
        return traced | {id(kernel) for kernel in list(self.kernels.values())}

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        """Pickles by name where importable, else as the function and its kernels."""
        from xfuse.runtime.pickling import jit_reduction

        return jit_reduction(self, int(protocol))

    def __call__(self, /, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        plain_key = None
        if len(args) + len(kwargs) == self._plain_arity:
            given = (*args, *kwargs.values())
            arrays_key = [
                (a.dtype, a.shape) for a in given if isinstance(a, np.ndarray | np.generic)
            ]
            if len(arrays_key) == len(given):
                plain_key = (*kwargs, *arrays_key)
                found = self._plain_calls.get(plain_key)
                if found is not None:
                    kernel, rebuild, booleans = found
                    if booleans:
                        results = _call(kernel, booleans, out, args, kwargs)
                    else:  # the call itself: a function call more is 4% of this path
                        results = kernel(*args, out=out, **kwargs)
                    return results if rebuild is None else rebuild(results)
        if any(isinstance(a, Traced) for a in (*args, *kwargs.values())):
            # called from a function being traced: record its ops there (one kernel, the
            # outer function's options), as a plain function would
            if out is not None:
                raise TypeError(
                    f"{self.name}(..., out=) inside @xfuse.jit: the traced function "
                    "returns its results; drop out="
                )
            try:
                return self.function(*args, **kwargs)
            except NotCombinableError as error:
                left = self._array_defaults_left(args, kwargs)
                passed = any(a is error.operand for a in (*args, *kwargs.values()))
                if not left or not isinstance(error.operand, np.ndarray) or passed:
                    raise  # (an array the caller passed, maybe a default's too: no hint)
                # (several parameters may default to the one array: each named)
                met = [n for n in left if self._default(n) is error.operand]
                if not met:  # (an array made of one: it came from one, or from elsewhere)
                    raise TypeError(
                        f"{error} (if it came from an array default of {self.name}(), "
                        f"{' or '.join(repr(n) for n in left)}, pass it to {self.name}())"
                    ) from None
                which = (
                    f"array default '{met[0]}' is an input"
                    if len(met) == 1
                    else f"array defaults {', '.join(map(repr, met))} (one array) are inputs"
                )
                raise TypeError(  # (it met the caller's trace: "cannot combine ... ndarray")
                    f"{self.name}(): its {which} of its own kernel, not of the function "
                    f"tracing it: pass {' and '.join(map(self._how_to_pass, met))}"
                ) from None
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            mistake = keyword_mistake(self.signature, len(args), kwargs) or error
            raise ArgumentTypeError(f"{self.name}(): {mistake}") from None
        # An array default (`def f(x, b=np.zeros(4))`) is an argument, as in numpy: the kernel
        # reads it (a number's or numpy scalar's default stays a constant of the trace). In the
        # signature's order, whichever way the call names them: one kernel per signature.
        arrays = {
            name: bound.arguments.get(name, parameter.default)
            for name, parameter in self.signature.parameters.items()
            if name in bound.arguments or isinstance(parameter.default, np.ndarray)
        }
        for name, value in arrays.items():
            kind = self.signature.parameters[name].kind
            if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                stars = "*" if kind is inspect.Parameter.VAR_POSITIONAL else "**"
                raise ArgumentTypeError(
                    f"{self.name}(): arrays passed through {stars}{name} cannot be "
                    "traced (each array is an input of the kernel by its own name): name each "
                    "array parameter (def f(x, y))"
                )
            if isinstance(value, np.generic):  # a 0-d array of its dtype, as numpy's ufuncs take it
                arrays[name] = value = np.asarray(value)
            if is_dask_array(value):
                check_known_chunks(name, value)  # (`call_bytes` sizes the call before the kernel)
            elif not isinstance(value, np.ndarray):
                called = "fn"  # (the function's name in the hint: none of its parameters')
                while called in self.signature.parameters:
                    called += "_"
                hint = (
                    "; a jit function's arguments are arrays, and a Python number is a constant "
                    "of its trace: pass a 0-d array of your arrays' dtype "
                    f"(np.float32({_literal(value)}))"
                    f", or trace with it fixed: xfuse.jit({self._fixed(name, value, called)}), "
                    f"{called} the undecorated function (this one's .function)"
                    if isinstance(value, int | float) and not isinstance(value, bool)
                    else "; a jit function's arguments are arrays"
                    if value is None
                    else " (pass np.asarray(value), whose dtype the kernel is compiled for)"
                    if isinstance(value, list | tuple)
                    else ""
                )
                raise ArgumentTypeError(
                    f"argument '{name}': expected a numpy array (or a dask array), "
                    f"got {type(value).__name__}{hint}"
                )
        key = tuple((name, a.dtype.name, a.shape) for name, a in arrays.items())
        # Both looked up before either is used: another thread may clear them in between (a
        # mask function's call then returned floats, and its plain calls kept doing so).
        kernel, form = self.kernels.get(key), self.forms.get(key)
        if kernel is None or form is None:
            if len(self.kernels) >= PLAN_CACHE_SIZE:
                self.kernels.clear()
                self.forms.clear()
            kernel, form = self._kernel_for(arrays)
            self.kernels[key], self.forms[key] = kernel, form
        rebuild, booleans = form.rebuilder(len(kernel.output_names)), form.booleans
        if plain_key is not None:  # (the kernel's inputs are the parameters in order: `compile`)
            if len(self._plain_calls) >= PLAN_CACHE_SIZE:
                self._plain_calls.clear()
            self._plain_calls[plain_key] = (kernel, rebuild, booleans)
        results = (
            _call(kernel, booleans, out, (), arrays) if booleans else kernel(out=out, **arrays)
        )
        return results if rebuild is None else rebuild(results)

    def _kernel_for(self, arrays: dict[str, np.ndarray]) -> tuple[Kernel, ResultForm]:
        """The kernel (and its `forms`) of a call of `arrays`, of shapes no call had yet: the one
        traced for other sizes of the same dtypes and traced shapes where there is one (every
        new length of a 1-d argument traced the function again, 1.24 ms, and kept a kernel of
        its own, ~8 KB: a service's calls of varying lengths), its program compiled again where
        this call streams and that kernel's did not, or the reverse (not traced again: the
        values the function reads besides its arguments stay those of its trace), else
        `traced_kernel`'s."""
        try:
            broadcast_shapes(*(a.shape for a in arrays.values()))  # (numpy's: 32 dims at most)
        except ValueError:  # (the kernel's check said "or be declared 1", which a trace does)
            shapes = ", ".join(f"'{name}' {a.shape}" for name, a in arrays.items())
            raise ArgumentError(
                f"{self.name}(): arguments of shapes {shapes} do not broadcast "
                "together: a jit function's arrays are one loop's, so they broadcast as numpy's "
                "operands do (those it does not read too)"
            ) from None
        shapes = traced_shapes(arrays)
        pattern = tuple((name, a.dtype.name, shapes[name]) for name, a in arrays.items())
        traced = self._traced.setdefault(pattern, {})
        if not traced:
            kernel, form = self.traced_kernel(arrays)
            traced[kernel.options.streaming] = kernel, form
            return kernel, form
        first, form = next(iter(traced.values()))
        streams = self._streams(arrays, [numpy_dtype(p.dtype) for p in first.function.outputs])
        if streams not in traced:
            options = dataclasses.replace(first.options, streaming=streams)
            traced[streams] = recompiled(first, options), form
        return traced[streams]

    def _array_defaults_left(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[str]:
        """The parameters a call leaves to array defaults (not 0-d: one combines with a trace,
        as a number does), inputs of this function's own kernel: called from a function being
        traced, none of that one's."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:  # (a wrong call: the function's own error says so)
            return []
        return [
            name
            for name in self.signature.parameters
            if name not in bound.arguments
            and isinstance(default := self._default(name), np.ndarray)
            and default.ndim
        ]

    def _default(self, name: str) -> Any:
        return self.signature.parameters[name].default

    def _fixed(self, name: str, value: float, function: str) -> str:
        """Code of the function (called `function`) with parameter `name` fixed to `value`: a
        partial, by keyword where no parameter after it is passed by position (the partial
        makes those keyword-only), by position for the first parameter (a keyword fails on a
        positional-only one); else a lambda of the other parameters, defaults the function's
        own (an array default printed as `array(...)`, which no code reads back)."""
        number = _literal(value)
        parameters = list(self.signature.parameters.values())
        index = [p.name for p in parameters].index(name)
        by_position = inspect.Parameter.POSITIONAL_OR_KEYWORD
        kind = parameters[index].kind
        if kind is inspect.Parameter.KEYWORD_ONLY or (
            kind is by_position and all(p.kind is not by_position for p in parameters[index + 1 :])
        ):
            return f"functools.partial({function}, {name}={number})"
        if index == 0:
            return f"functools.partial({function}, {number})"
        others = [
            p.replace(
                annotation=inspect.Parameter.empty,
                default=p.default
                if p.default is inspect.Parameter.empty or _reads_back(p.default)
                else _Code(f"inspect.signature({function}).parameters[{p.name!r}].default"),
            )
            for p in parameters
            if p.name != name
        ]
        arguments = [
            number
            if p.name == name
            else f"{p.name}={p.name}"
            if p.kind is inspect.Parameter.KEYWORD_ONLY
            else str(p.replace(default=inspect.Parameter.empty, annotation=inspect.Parameter.empty))
            for p in parameters
        ]
        return f"lambda {str(inspect.Signature(others))[1:-1]}: {function}({', '.join(arguments)})"

    def _how_to_pass(self, name: str) -> str:
        """How a caller passes parameter `name`: by keyword, or by position where it is
        positional-only (`name=` fails there)."""
        if self.signature.parameters[name].kind is not inspect.Parameter.POSITIONAL_ONLY:
            return f"{name}= to it"
        return f"{name} as its argument {list(self.signature.parameters).index(name) + 1}"

    def _streams(self, arrays: Mapping[str, np.ndarray], result_dtypes: Sequence[Any]) -> bool:
        """Whether a call of `arrays` may stream (`xfuse.runtime.call_plans.make_plan`): where none
        can, a kernel needs no streaming twin (GELU + residual's first call on [64, 100]: 91-93
        ms, not 129-133)."""
        bytes_ = call_bytes(arrays, result_dtypes)
        return self.options.streaming and bytes_ >= host_cpu().streaming_bytes

    def compile(self, arrays: dict[str, np.ndarray]) -> Kernel:
        """Trace the function on proxies shaped like `arrays` and compile it."""
        return self.traced_kernel(arrays)[0]

    def traced_kernel(self, arrays: dict[str, np.ndarray]) -> tuple[Kernel, ResultForm]:
        """`compile`, and how a call returns its results (`ResultForm`)."""
        dtypes: dict[str, str] = {}
        for name, array in arrays.items():
            try:
                dtypes[name] = dtype_name(array.dtype)
            except ValueError as error:  # (as a kernel's call says: convert it)
                raise ArgumentTypeError(
                    f"argument '{name}': {error} (convert with .astype: {name}.astype(np.float32))"
                ) from None
        builder = FunctionBuilder(dtypes, traced_shapes(arrays))
        proxies = {name: Traced(builder, builder.input(name), argument=True) for name in arrays}
        call = inspect.BoundArguments(self.signature, proxies)  # type: ignore[arg-type]
        # (the numbers' defaults too: `args` stops at the first parameter it lacks, and an
        # array after a skipped number default went by keyword, refused if positional-only)
        call.apply_defaults()
        result = self.function(*call.args, **call.kwargs)  # positional-only ones by position
        sequence = isinstance(result, tuple | list)
        results = list(result) if sequence else [result]
        bad = [r for r in results if not isinstance(r, Traced)]
        if any(r.builder is not builder for r in results if isinstance(r, Traced)):
            raise LeakedTraceError()
        if not results or bad:
            if inspect.iscoroutine(result):  # (else Python warns it was never awaited)
                result.close()
            kind = type(result).__name__
            if not sequence:
                got = _described(result)
            else:
                got = f"a {kind} holding {_described(bad[0])}" if bad else f"an empty {kind}"
            raise TypeError(
                f"{self.name}() returned {got}: it must return an array computed "
                "from its arguments, or a tuple or list of them"
            )
        booleans = tuple(r.mask for r in results) if any(r.mask for r in results) else ()
        names = [f"out{i}" for i in range(len(results))] if sequence else ["out"]
        module = builder.finish([(n, r.value) for n, r in zip(names, results, strict=True)])
        options = self.options
        if not self._streams(arrays, [r.element_dtype for r in results]):
            options = dataclasses.replace(options, streaming=False)
        form = ResultForm(booleans, ResultForm.of(result))
        return compile_module(module, names, options, self.threads), form


def _call(
    kernel: Kernel,
    booleans: tuple[bool, ...],
    out: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> Any:
    """`kernel(*args, out=out, **kwargs)` of a function with boolean results: each result that
    `booleans` marks made numpy's booleans (its 1 and 0 tested against 0). A boolean `out` buffer
    for one takes the test (the kernel writes its 1 and 0 into a new array); one of the kernel's
    dtype takes the 1 and 0, as numpy casts booleans into a float `out`."""
    names = kernel.output_names
    given = _buffers_by_position(out, names)
    if given is None:  # an `out` that names no buffer per output: the kernel's checks say so
        return kernel(*args, out=out, **kwargs)
    into: list[np.ndarray | None] = []  # a boolean buffer the test writes, per output
    for parameter, buffer, boolean in zip(kernel.function.outputs, given, booleans, strict=True):
        # (anything else, a numpy scalar too, is the kernel's checks' to refuse)
        dtype = buffer.dtype if isinstance(buffer, np.ndarray) else None
        if boolean and dtype is not None and dtype not in (np.dtype(np.bool_), parameter.dtype):
            raise ArgumentTypeError(
                f"out '{parameter.name}': expected dtype bool (the function returns a "
                f"comparison's result) or {parameter.dtype} (its 1 and 0), got {dtype}"
            )
        into.append(buffer if boolean and dtype == np.bool_ else None)
    _check_boolean_buffers(names, given, into)
    # A boolean buffer's stand-in of the kernel's dtype and its shape: the kernel's own checks
    # (its shape) run on it before any native call, and the test writes the buffer after it.
    # Fortran-ordered where the kernel runs on transposes (a C-ordered one among Fortran
    # buffers was refused, "or Fortran-ordered, where every input and out buffer is").
    arrays = [a for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray) and a.ndim]
    order = "F" if fortran_ordered(arrays, out_buffers(given), 0) else "C"
    kept = [
        b if target is None else np.empty(target.shape, numpy_dtype(parameter.dtype), order=order)
        for parameter, b, target in zip(kernel.function.outputs, given, into, strict=True)
    ]
    kernel_out = dict(zip(names, kept, strict=True)) if isinstance(out, Mapping) else kept
    # (no buffer: the caller's `out` as it is, which the kernel's checks refuse with dask inputs)
    results = kernel(*args, out=kernel_out if any(b is not None for b in kept) else out, **kwargs)
    each = results if len(names) > 1 else (results,)
    # a boolean result the kernel wrote into a buffer of its dtype stays its 1 and 0
    tested = [
        _tested(result, target) if boolean and (buffer is None or target is not None) else result
        for result, boolean, buffer, target in zip(each, booleans, given, into, strict=True)
    ]
    return tuple(tested) if len(names) > 1 else tested[0]


def _check_boolean_buffers(
    names: Sequence[str], given: Sequence[Any], into: Sequence[np.ndarray | None]
) -> None:
    """The checks the kernel makes of its own `out` buffers, of the boolean ones it never sees,
    before the call: an array whose elements mean what its memory holds (not a masked array,
    whose mask the result overwrote, nor `np.matrix`), writable, and sharing no byte with
    another `out` buffer (the test wrote over the other's results, silently)."""
    arrays = [b if isinstance(b, np.ndarray) else None for b in given]
    spans = [(0, 0) if a is None else extent(a, data_pointer(a)) for a in arrays]
    near = overlapping_spans(spans)
    for position, (name, target) in enumerate(zip(names, into, strict=True)):
        if target is None:
            continue
        check_array_kind(f"out '{name}'", target, output=True)
        if not target.flags.writeable:
            raise ArgumentError(f"out '{name}': the array is read-only")
        for other in sorted(near[position]):
            if share_elements(target, cast(np.ndarray, arrays[other])):
                raise ArgumentError(f"out '{name}' overlaps out '{names[other]}'")


def _buffers_by_position(out: Any, names: Sequence[str]) -> list[Any] | None:
    """`out`'s buffer (or None) for each output, in order; None where `out` does not name one
    per output (the kernel's own checks then say what is wrong)."""
    if out is None:
        return [None] * len(names)
    if isinstance(out, Mapping):
        return [out.get(name) for name in names] if set(out) <= set(names) else None
    if isinstance(out, list | tuple):
        return list(out) if len(out) == len(names) else None
    return [out] if len(names) == 1 else None


def _tested(values: Any, into: np.ndarray | None) -> Any:
    """numpy's booleans of a mask's 1 and 0 (`values != 0`), into `into` where given (the
    kernel checked its shape, on its stand-in), else in `values`' layout (a Fortran-ordered
    one too, as numpy's); a lazy dask array of them for a dask array."""
    if is_dask_array(values):
        return values != 0
    return np.not_equal(values, 0, out=np.empty_like(values, np.bool_) if into is None else into)


def traced_shapes(arrays: Mapping[str, np.ndarray]) -> dict[str, tuple[int | None, ...]]:
    """The shapes a trace gives the arguments `arrays`: each dim `?` (None) but a 1, which
    broadcasts; arrays of one shape of 2 or more dims (and 0-d ones) flat, `[?]` (`()`), one
    loop whatever that shape (`Kernel.flat_shape`), which streams and splits as a 1-d call
    does (`x + y` on [16384, 1000] float32 0.57-0.63 -> 0.40-0.44 ns/el)."""
    distinct = {a.shape for a in arrays.values() if a.shape}
    if len(distinct) == 1 and len(next(iter(distinct))) >= 2:
        return {name: (None,) if a.shape else () for name, a in arrays.items()}
    return {name: tuple(1 if d == 1 else None for d in a.shape) for name, a in arrays.items()}


def call_bytes(arrays: Mapping[str, Any], result_dtypes: Sequence[np.dtype[Any]]) -> int:
    """The bytes a call of `arrays` reads and writes (results of these dtypes of their
    broadcast shape; of the largest array's elements where they do not broadcast together,
    which the kernel's call then checks)."""
    shapes = [array.shape for array in arrays.values()]
    try:
        elements = math.prod(broadcast_shapes(*shapes))  # (numpy's: 32 dims at most)
    except ValueError:
        elements = max(math.prod(shape) for shape in shapes)
    read = sum(math.prod(array.shape) * array.dtype.itemsize for array in arrays.values())
    return read + sum(elements * dtype.itemsize for dtype in result_dtypes)


def _described(result: object) -> str:
    """What a traced function returned instead of an array (`None`: a missing `return`)."""
    if result is None:
        return "None (is a return statement missing?)"
    if inspect.isgenerator(result) or inspect.iscoroutine(result):
        return f"a {type(result).__name__} (a generator or async function cannot be traced)"
    if isinstance(result, dict):  # (jax.jit returns one: a namedtuple names results as well)
        return "a dict (return a namedtuple to name the results: it comes back as one)"
    return f"a {type(result).__name__}"


def jit(
    function: Callable[..., Any] | None = None,
    *,
    fuse: bool = True,
    math: Math = "approx",
    threads: int = 1,
    fastmath: str = "none",
) -> Any:
    """Decorate a function of numpy arrays to compile it on first call (`@xfuse.jit` or
    `@xfuse.jit(math="libm")`)."""
    options = Options(fuse=fuse, math=math, fastmath=fastmath)  # checks each option
    threads = check_threads(threads)

    def decorate(f: Callable[..., Any]) -> JitFunction:
        if isinstance(f, JitFunction):  # jit of a jit function: its function, these options
            f = f.function
        elif isinstance(f, functools.partial) and isinstance(f.func, JitFunction):  # (its out=
            # was taken for a parameter of the function's: "cannot have a parameter named 'out'")
            f = functools.partial(f.func.function, *f.args, **f.keywords)
        if isinstance(f, staticmethod):  # (called through an instance, the function took
            # it for its first array: "too many positional arguments")
            raise TypeError(
                "xfuse.jit of a staticmethod: put @staticmethod above @xfuse.jit (the decorator "
                "nearest the function is applied first)"
            )
        if isinstance(f, classmethod):
            raise TypeError(
                "xfuse.jit of a classmethod: a jit function's arguments are arrays, and a "
                "classmethod's first is the class; make it a @staticmethod above @xfuse.jit, or "
                "call a jit function from the classmethod"
            )
        if isinstance(f, property | functools.cached_property | functools.partialmethod):
            kind = type(f).__name__  # (Python's "... is not a callable object")
            raise TypeError(
                f"xfuse.jit of a {kind}: a jit function's arguments are arrays, and a {kind}'s "
                "first is the instance; call a jit function from it, or jit a @staticmethod"
            )
        if isinstance(f, np.ufunc):  # (its signature has an `out`: "cannot have a parameter")
            names = ", ".join("xyzw"[i] if i < 4 else f"x{i}" for i in range(f.nin))
            raise TypeError(
                f"xfuse.jit(np.{f.__name__}): a numpy ufunc is not a function to trace: jit "
                f"one that calls it, `lambda {names}: np.{f.__name__}({names})`"
            )
        return JitFunction(f, options, threads)

    return decorate if function is None else decorate(function)
