"""Checking numpy arguments against a compiled function's signature, before any native call.

Every mistake raises an `ArgumentError` naming the argument, so a bad call never reaches native
code: no segfault, no partial write. The hierarchy:

    ValueError
      ArgumentError            a bad value: shape, broadcasting, contiguity, `out` aliasing, ...
        ArgumentTypeError      also a TypeError: missing, unknown or repeated arguments, an
                               argument that is not a numpy array, a wrong dtype

An input may be a numpy scalar (`np.float32(2.0)`, an ml_dtypes `bfloat16`): numpy's ufuncs take
one as a 0-d array of its dtype, and so does a kernel. A Python number is refused: it has no
dtype to check. No `out` buffer may be a scalar: a scalar is immutable.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import keyword
import math
import operator
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xfuse.dialects.dtypes import numpy_dtype
from xfuse.frontend.array_kinds import array_kind_problem

DYNAMIC_INDEX = -(2**63)
"""A `?` dimension in a parameter's shape: xDSL's `DYNAMIC_INDEX` (a test checks they agree),
spelled here so that binding a call does not import xDSL."""


class ArgumentError(ValueError):
    """A bad argument to a compiled kernel; the message names the argument."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument error of the kind Python reports as a TypeError: a missing, unknown or repeated
    argument, a value that is not a numpy array, or a numpy array of the wrong dtype."""


def _keyword_name(name: str, taken: set[str]) -> str:
    """`name`, or where a call cannot pass it by keyword (a Python keyword such as `lambda`,
    `out`, or not an identifier), its spelling with a trailing `_` (more until not in `taken`)."""
    if name.isidentifier() and not keyword.iskeyword(name) and name != "out":
        return name
    spelled = re.sub(r"\W|^(?=\d)", "_", name) + "_"
    while spelled in taken:
        spelled += "_"
    return spelled


def _values(names: Sequence[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of `names` (at least one) in a mapping, as a tuple in their order (KeyError
    for a missing one): `operator.itemgetter`, 4x faster than a loop, which gives a tuple only
    for several names."""
    get = operator.itemgetter(*names)
    return get if len(names) > 1 else lambda mapping: (get(mapping),)


class CallSignature:
    """How a compiled function takes its inputs: by position, or by keyword under their names,
    then `out=` by keyword. `signature` says it as an `inspect.Signature` (what
    `inspect.signature(kernel)` and `help` show), and `bind` binds calls with it.

    An input that Python cannot take as a keyword parameter (named `lambda`, or `out`, the
    output buffers' keyword) is in the signature with a trailing `_` (PEP 8's spelling:
    `lambda_`, `out_`): a call passes it by position, by that name, or by its own name where
    Python allows (`**{"lambda": x}`).
    """

    def __init__(self, names: Sequence[str]):
        self.names = tuple(names)
        taken = {*self.names, "out"}
        spellings: list[str] = []
        for name in self.names:  # (`%a.b` and `%a-b` are both `a_b_` spelled: the second `a_b__`)
            spellings.append(_keyword_name(name, taken))
            taken.add(spellings[-1])
        self.keyword_names = tuple(spellings)
        self._indices = {
            **{spelled: index for index, spelled in enumerate(self.keyword_names)},
            **{name: index for index, name in enumerate(self.names)},
        }
        """Input position by each keyword that passes the input: its name and its spelling."""
        self._named_values = [_values(self.names[count:]) for count in range(len(self.names))]
        """By how many inputs come by position, the others' values from the keywords, in order."""
        kind = inspect.Parameter
        self.signature = inspect.Signature(
            [kind(name, kind.POSITIONAL_OR_KEYWORD) for name in self.keyword_names]
            + [kind("out", kind.KEYWORD_ONLY, default=None)]
        )

    def ordered(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Sequence[Any] | None:
        """The inputs in the signature's order for the common call, each input given once: the
        first ones by position, the others by their names (any of these parts may be empty);
        None for any other call, which `bind` then binds or rejects."""
        if len(args) + len(kwargs) != len(self.names):
            return None
        if not kwargs:
            return args
        try:
            named = self._named_values[len(args)](kwargs)
        except KeyError:
            return None
        return (*args, *named) if args else named

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """{input name: value} of a call's inputs (`out` apart), as Python binds them.

        ArgumentTypeError for too many, unknown, repeated or missing inputs, naming the first
        mistake Python would (`keyword_mistake`). A call `ordered` takes skips
        `Signature.bind` (microseconds).
        """
        inputs = self.ordered(args, kwargs)
        if inputs is not None:
            return dict(zip(self.names, inputs, strict=True))
        keywords = self._keywords(kwargs)
        try:
            bound = self.signature.bind(*args, **keywords).arguments
        except TypeError as error:
            mistake = keyword_mistake(self.signature, len(args), keywords) or str(error)
            raise ArgumentTypeError(
                f"{mistake} (inputs: {', '.join(self.keyword_names)})"
            ) from None
        pairs = zip(self.names, self.keyword_names, strict=True)
        return {name: bound[spelled] for name, spelled in pairs}

    def _keywords(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords in the order given, each input's under its name in the signature."""
        keywords: dict[str, Any] = {}
        for key, value in kwargs.items():
            index = self._indices.get(key)
            if index is None:
                keywords[key] = value  # no input's: binding reports it
                continue
            spelled = self.keyword_names[index]
            if spelled in keywords:
                name = self.names[index]
                raise ArgumentTypeError(f"input '{name}' given twice (also as '{spelled}')")
            keywords[spelled] = value
        return keywords


def keyword_mistake(
    signature: inspect.Signature, positional: int, kwargs: Mapping[str, Any]
) -> str | None:
    """What Python reports first for a call that `signature.bind` rejects, where it is a
    keyword's mistake: Python checks the keywords, in the order given, before counting the
    arguments (where `Signature.bind` reports a missing argument first). At the first keyword
    that names no parameter it may take: the positional-only parameters given by keyword if any,
    else that keyword; at one naming a parameter given by position too: that parameter. None
    where the keywords are fine (the mistake is the one `Signature.bind` reports)."""
    kind = inspect.Parameter
    parameters = signature.parameters
    any_keyword = any(p.kind is kind.VAR_KEYWORD for p in parameters.values())
    by_position = [
        name
        for name, p in parameters.items()
        if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
    ][:positional]
    for key in kwargs:
        parameter = parameters.get(key)
        if parameter is None or parameter.kind in (kind.POSITIONAL_ONLY, kind.VAR_POSITIONAL):
            if any_keyword:
                continue  # **kwargs takes it
            positional_only = [
                name
                for name in kwargs
                if name in parameters and parameters[name].kind is kind.POSITIONAL_ONLY
            ]
            if positional_only:
                return (
                    "got some positional-only arguments passed as keyword arguments: "
                    f"'{', '.join(positional_only)}'"
                )
            return f"got an unexpected keyword argument '{key}'"
        if key in by_position:
            return f"got multiple values for argument '{key}'"
    return None


@dataclass(frozen=True)
class Parameter:
    """One array argument of a compiled function: name, numpy dtype name, type shape (`?` dims)
    and, for an input declared with named dims, the dims' names (the frontend's `ew.dims`)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    dims: tuple[str, ...] | None = None

    @functools.cached_property
    def dynamic_axes(self) -> tuple[int, ...]:
        return tuple(axis for axis, size in enumerate(self.shape) if size == DYNAMIC_INDEX)

    @functools.cached_property
    def named_axes(self) -> tuple[tuple[int, str], ...]:
        """(axis, name) of each dim with a name: dims of one name must have one size."""
        return tuple((axis, d) for axis, d in enumerate(self.dims or ()) if d.isidentifier())

    def describe(self) -> str:
        """`float32[t, d]` as declared, a named dim another input's static size binds as
        `t=3` (`dimension 0 must be 3 (float32[t])` did not say why)."""
        if self.dims is not None:
            dims = [
                name if size in (DYNAMIC_INDEX, 1) or name == str(size) else f"{name}={size}"
                for name, size in zip(self.dims, self.shape, strict=True)
            ]
            return f"{self.dtype}[{', '.join(dims)}]"
        from xfuse.dialects.ew import format_shape

        return f"{self.dtype}{format_shape(self.shape)}"


def bind_shapes(
    parameters: Sequence[Parameter],
    shapes: Sequence[tuple[int, ...]],
    outputs: Sequence[Parameter] = (),
) -> tuple[int, ...]:
    """Check the arrays' shapes against the parameters; returns the iteration (broadcast) shape.

    Dims are right-aligned as in numpy. A static dim must match exactly; all `?` and static non-1
    sizes on one axis must agree (a `?` never broadcasts: declare a 1 to broadcast); dims with the
    same name must have the same size, whatever their axes. A static non-1 dim of an output must
    agree with the inputs' size on its axis too: the kernels loop over the outputs' shape, and a
    static 3 there (`tensor<?xf32>, tensor<3xf32> -> tensor<3xf32>` with an `ew.constant` of
    shape [3]) read past the end of a `?` input of size 2.
    """
    rank = max((len(p.shape) for p in parameters), default=0)
    sizes: list[tuple[int, str, int] | None] = [None] * rank  # size, argument, its axis
    named: dict[str, tuple[int, str]] = {}
    for parameter, shape in zip(parameters, shapes, strict=True):
        if len(shape) != len(parameter.shape):
            raise ArgumentError(
                f"argument '{parameter.name}': expected {len(parameter.shape)} dimensions "
                f"({parameter.describe()}), got shape {shape}"
            )
        for axis, name in parameter.named_axes:
            size, first = named.setdefault(name, (shape[axis], parameter.name))
            if size != shape[axis]:
                raise ArgumentError(
                    f"argument '{parameter.name}': dimension {axis} ({name}) has size "
                    f"{shape[axis]} but '{first}' has {name} = {size} "
                    f"({parameter.describe()}), got shape {shape}"
                )
        for axis, (declared, actual) in enumerate(zip(parameter.shape, shape, strict=True)):
            if declared != DYNAMIC_INDEX and declared != actual:
                raise ArgumentError(
                    f"argument '{parameter.name}': dimension {axis} must be {declared} "
                    f"({parameter.describe()}), got shape {shape}"
                )
            if declared == 1:
                continue
            position = rank - len(parameter.shape) + axis
            bound = sizes[position]
            if bound is None:
                sizes[position] = (actual, parameter.name, axis)
            elif bound[0] != actual:
                raise ArgumentError(
                    f"argument '{parameter.name}': dimension {axis} has size {actual} but "
                    f"'{bound[1]}' has {bound[0]} there (shapes must match or be declared 1)"
                )
    for output in outputs:
        for axis, declared in enumerate(output.shape):
            position = rank - len(output.shape) + axis
            bound = sizes[position] if position >= 0 else None
            # (an output's 1 is its own broadcast: `m[:, :1]`-shaped outputs beside `m`'s)
            if declared not in (DYNAMIC_INDEX, 1) and bound is not None and bound[0] != declared:
                raise ArgumentError(
                    f"argument '{bound[1]}': dimension {bound[2]} has size {bound[0]} but output "
                    f"'{output.name}' has {declared} there ({output.describe()})"
                )
    return tuple(1 if bound is None else bound[0] for bound in sizes)


def output_shape(parameter: Parameter, iteration: Sequence[int]) -> tuple[int, ...]:
    offset = len(iteration) - len(parameter.shape)
    return tuple(
        iteration[offset + axis] if size == DYNAMIC_INDEX else size
        for axis, size in enumerate(parameter.shape)
    )


def check_array_kind(label: str, value: object, output: bool = False) -> None:
    """ArgumentTypeError, after `label`, for an array whose elements mean more than its memory
    holds (`array_kind_problem`)."""
    problem = array_kind_problem(value, output)
    if problem is not None:
        raise ArgumentTypeError(f"{label}: {problem}")


def check_input(
    parameter: Parameter, value: Any, copy_allowed: bool = True, rows_allowed: bool = False
) -> np.ndarray:
    """The array to pass for an input: checked dtype; a C-contiguous aligned copy if needed
    and `copy_allowed` (not for a prepared call: every run would read the copy made when it was
    prepared, never the array's later contents), else an ArgumentError. With `rows_allowed`, an
    aligned array whose rows are contiguous (`row_axes`) is returned as it is: the caller runs
    it row by row or copies it (`contiguous_input`). A numpy scalar is taken as the 0-d array of
    its value and dtype, as numpy's ufuncs take it (a prepared call may hold that array: the
    scalar is immutable, so no later contents are missed)."""
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        convert = f"pass np.asarray(value, {parameter.dtype!r})"
        number = (
            f" (a Python number has no dtype: {convert})"
            if isinstance(value, int | float | complex)
            else f" ({convert})"
            if isinstance(value, list | tuple)
            else ""
        )
        raise ArgumentTypeError(
            f"argument '{parameter.name}': expected a numpy array of {parameter.describe()}, "
            f"got {type(value).__name__}{number}"
        )
    if type(value) is not np.ndarray:
        check_array_kind(f"argument '{parameter.name}'", value)
    expected = numpy_dtype(parameter.dtype)
    if value.dtype != expected:
        raise ArgumentTypeError(
            f"argument '{parameter.name}': expected dtype {parameter.dtype}, got {value.dtype} "
            f"(convert with .astype)"
        )
    if rows_allowed and row_axes(value) is not None:
        return value
    return contiguous_input(parameter, value, copy_allowed)


def contiguous_input(parameter: Parameter, value: np.ndarray, copy_allowed: bool) -> np.ndarray:
    """`value` if C-contiguous and aligned, else its copy where `copy_allowed`, else (a prepared
    call) an ArgumentError that says what to pass."""
    flags = value.flags
    if flags.c_contiguous and flags.aligned:
        return value
    if not copy_allowed:
        raise ArgumentError(
            f"argument '{parameter.name}': a prepared call takes no strided or misaligned "
            "input that a call copies: it would run on a copy made now, never seeing the "
            "array's later contents; pass a C-contiguous array (np.ascontiguousarray(...)) and "
            "update that one between runs"
        )
    # Documented: inputs not run by rows are copied (`np.ascontiguousarray` makes a 0-d array
    # 1-d, and returns a misaligned C-contiguous one as it is).
    return np.array(value, order="C", copy=True)


def row_axes(array: np.ndarray) -> int | None:
    """For an aligned array that is not C-contiguous but whose blocks over its trailing axes
    are (a slice `x[:, :d]` of a wider array, `x[::-1]`, a broadcast `[t, d]` view): the
    number of leading axes to step over, each block (row) being C-contiguous; None for any
    other array (1-d, misaligned, C-contiguous, or strided in its last axis)."""
    flags = array.flags
    if flags.c_contiguous or not flags.aligned or array.ndim < 2 or array.size == 0:
        return None
    stride = array.itemsize
    for axis in range(array.ndim - 1, 0, -1):
        if array.strides[axis] != stride and array.shape[axis] != 1:
            return axis + 1 if axis + 1 < array.ndim else None
        stride *= array.shape[axis]
    return 1


def _contiguous(array: np.ndarray) -> bool:
    """C-contiguous, as a GPU's device array is (`xfuse.runtime.cuda`)."""
    return not isinstance(array, np.ndarray) or array.flags.c_contiguous


def extent(array: np.ndarray, pointer: int) -> tuple[int, int]:
    """The bytes `array` (at `pointer`) spans: from its lowest to past its highest element."""
    if _contiguous(array):
        return pointer, pointer + array.nbytes
    low = high = pointer
    for size, stride in zip(array.shape, array.strides, strict=True):
        if stride < 0:
            low += (size - 1) * stride
        else:
            high += (size - 1) * stride
    return low, high + array.itemsize


_SCALAR_OUT = (
    "a numpy scalar is immutable, so it cannot be written in place; pass a 0-d array "
    "(np.empty((), dtype)), or no out= for a new result"
)


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides numpy gives a new C-contiguous array of `shape` that has elements (numpy
    gives one of none strides of 0)."""
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def rows_writable(array: np.ndarray) -> bool:
    """Whether an aligned array that is not C-contiguous can be written row by row: its rows
    are C-contiguous (`row_axes`: a slice `buf[:, :d]` of a wider array, rows in reverse) and
    no two of them share an element (no 0 stride, as a broadcast view has: each stride of a
    leading axis, from the smallest, at least the span of the axes of smaller strides)."""
    axes = row_axes(array)
    if axes is None:
        return False
    span = math.prod(array.shape[axes:]) * array.itemsize
    leading = zip(array.shape[:axes], array.strides[:axes], strict=True)
    for stride, size in sorted((abs(stride), size) for size, stride in leading if size > 1):
        if stride < span:
            return False
        span += (size - 1) * stride
    return True


def check_output(
    parameter: Parameter,
    value: Any,
    shape: tuple[int, ...],
    rows_allowed: bool = False,
    fortran_allowed: bool = False,
) -> np.ndarray:
    """A caller's `out` buffer must already be exactly right: it is written in place. With
    `rows_allowed`, one whose rows are contiguous (`rows_writable`) is taken too: the caller
    writes it row by row (`xfuse.runtime.kernel.Kernel._row_plan`). `fortran_allowed`: the
    caller took Fortran-ordered buffers before this check where every array is (the error
    says so)."""
    label = f"out '{parameter.name}'"
    if isinstance(value, np.generic):
        raise ArgumentTypeError(f"{label}: {_SCALAR_OUT}")
    if not isinstance(value, np.ndarray):
        raise ArgumentTypeError(f"{label}: expected a numpy array, got {type(value).__name__}")
    if type(value) is not np.ndarray:
        check_array_kind(label, value, output=True)
    if value.dtype != numpy_dtype(parameter.dtype):
        raise ArgumentTypeError(f"{label}: expected dtype {parameter.dtype}, got {value.dtype}")
    if value.shape != shape:
        raise ArgumentError(f"{label}: expected shape {shape}, got {value.shape}")
    flags = value.flags
    if not flags.aligned or not (flags.c_contiguous or rows_allowed and rows_writable(value)):
        alternatives = (
            ", or an aligned view of C-contiguous rows (buf[:, :d])" if rows_allowed else ""
        )
        if fortran_allowed:
            alternatives += " (or Fortran-ordered, where every input and out buffer is)"
        raise ArgumentError(
            f"{label}: must be C-contiguous and aligned{alternatives}, as the kernel writes it in "
            f"place; into {'another' if rows_allowed else 'a'} strided view, assign the result "
            "instead: view[...] = k(...)"
        )
    if not flags.writeable:
        raise ArgumentError(f"{label}: the array is read-only")
    return value


NewArray = Callable[[tuple[int, ...], np.dtype], np.ndarray]
"""Makes a new C-contiguous array of a shape and dtype (`np.empty`, `aligned_empty`)."""


def aligned_empty(
    shape: tuple[int, ...], dtype: np.dtype, alignment: int = 64, offset: int = 0
) -> np.ndarray:
    """A new C-contiguous array whose data starts `offset` bytes past an `alignment`-byte
    boundary (numpy's own start where the allocator puts them: 16-byte boundaries, for a large
    array 16 bytes into a page)."""
    nbytes = int(np.prod(shape)) * dtype.itemsize
    storage = np.empty(nbytes + alignment, np.uint8)
    start = (offset - data_pointer(storage)) % alignment
    return storage[start : start + nbytes].view(dtype).reshape(shape)


def given_outputs(parameters: Sequence[Parameter], out: Any) -> list[Any]:
    """The caller's `out` (one array, a list/tuple, or a name->array mapping) as one entry per
    output, in the outputs' order, None where a mapping names none; an error for another form,
    an unknown name or a wrong count."""
    names = tuple(p.name for p in parameters)
    if isinstance(out, np.ndarray):
        given: list[Any] = [out]
    elif isinstance(out, Mapping):
        unknown = set(out) - set(names)
        if unknown:
            raise ArgumentTypeError(
                f"out: unknown output(s) {sorted(unknown)}: outputs are {names}"
            )
        given = [out.get(name) for name in names]
    elif isinstance(out, list | tuple):
        given = list(out)
    elif isinstance(out, np.generic):
        raise ArgumentTypeError(f"out: {_SCALAR_OUT}")
    else:
        raise ArgumentTypeError(
            f"out: expected a numpy array, a list/tuple or a name->array mapping, "
            f"got {type(out).__name__}"
        )
    check_out_count(parameters, given, out)
    return given


def check_out_count(parameters: Sequence[Parameter], given: Sequence[Any], out: Any) -> None:
    """`out`'s buffers (`given`) are one per output. Of too many or too few, a sequence holding
    numbers (`out=[0.0] * 8`, or `list(buffer)`'s numpy scalars: data rather than buffers)
    says that `out` takes arrays, not how many it counted (a buffer of the right count that is
    no array: `check_output`)."""
    if len(given) == len(parameters):
        return
    numbers = int | float | complex | np.generic | list | tuple  # np.generic: list(buffer)'s
    data = next((b for b in given if isinstance(b, numbers)), None)
    if data is not None:
        names = ", ".join(repr(p.name) for p in parameters)
        raise ArgumentTypeError(
            f"out: expected a numpy array (or a list/tuple of arrays, one per output: {names}), "
            f"got a {type(out).__name__} holding {type(data).__name__}; pass an array to write "
            "in place (np.empty(shape, dtype)), or no out= for a new result"
        )
    raise ArgumentError(f"out: expected {len(parameters)} buffer(s), got {len(given)}")


def bind_outputs(
    parameters: Sequence[Parameter],
    out: Any,
    shapes: Sequence[tuple[int, ...]],
    new_array: NewArray = np.empty,
    rows_allowed: bool = False,
    fortran_allowed: bool = False,
) -> list[np.ndarray]:
    """The output arrays of a call: new ones of `shapes` (made by `new_array`), or the caller's
    `out` (`given_outputs`; a name a mapping leaves out gets a new array), checked
    (`check_output`, its options as given)."""
    if out is None:
        return [new_array(s, numpy_dtype(p.dtype)) for p, s in zip(parameters, shapes, strict=True)]
    return [
        new_array(shape, numpy_dtype(p.dtype))
        if buffer is None
        else check_output(p, buffer, shape, rows_allowed, fortran_allowed)
        for p, buffer, shape in zip(parameters, given_outputs(parameters, out), shapes, strict=True)
    ]


DATA_FIELD_OFFSET = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
"""Where numpy's array struct keeps its data pointer: right after the object header (refcount
and type), as numpy's own C macro `PyArray_DATA` reads it."""

_MEMORY_WORDS = (ctypes.c_uint64 * (sys.maxsize // 8)).from_address(0)
"""The process's memory as 64-bit words, read only at the data field of a live array: indexing
it makes no ctypes object (`c_void_p.from_address` does, and takes ~1.8x as long)."""


def read_data_field(array: np.ndarray) -> int:
    return _MEMORY_WORDS[(id(array) + DATA_FIELD_OFFSET) // 8]


def _ctypes_data(array: np.ndarray) -> int:
    return array.ctypes.data


def _choose_data_pointer() -> Callable[[np.ndarray], int]:
    """The field read (~9x faster than `.ctypes.data`) where this interpreter's layout has it
    (64-bit words: an object's address, and so the field's, is a multiple of 8 there)."""
    probes = [np.arange(5.0)[1:], np.empty((2, 3), np.float32)]
    if ctypes.sizeof(ctypes.c_void_p) == 8 and all(
        read_data_field(probe) == probe.ctypes.data for probe in probes
    ):
        return read_data_field
    return _ctypes_data


data_pointer = _choose_data_pointer()
"""The address of an array's first element (`xfuse.runtime.bound_calls.fast_data_pointer` reads the
same field natively, where this reads it)."""


SHARED_ELEMENTS_WORK = 1 << 16
"""The most work `np.shares_memory` may do (its `max_work`) to tell whether two arrays whose
extents overlap, one of them strided, have an element in common; beyond it they are taken to.
The halves `buf[:, :d]` and `buf[:, d:]` of one array take it little."""


def share_elements(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether `a` and `b`, whose extents (`extent`) overlap, have an element's bytes in common:
    always where both are C-contiguous, else as `np.shares_memory` finds it within
    `SHARED_ELEMENTS_WORK` (a problem too hard for that counts as yes). An empty array has none
    (one whose address lay inside an input was refused as overlapping it)."""
    if a.size == 0 or b.size == 0:
        return False
    if _contiguous(a) and _contiguous(b):
        return True
    try:
        return bool(np.shares_memory(a, b, max_work=SHARED_ELEMENTS_WORK))
    except np.exceptions.TooHardError:
        return True


def same_elements(a: np.ndarray, pointer_a: int, b: np.ndarray, pointer_b: int) -> bool:
    """Whether `a` (at `pointer_a`) and `b` are the same elements in the same order: the same
    start, shape and dtype, and (where either is strided) strides."""
    return (
        pointer_a == pointer_b
        and a.shape == b.shape
        and a.dtype == b.dtype
        and (_contiguous(a) and _contiguous(b) or a.strides == b.strides)
    )


def overlapping_spans(spans: Sequence[tuple[int, int]], first_checked: int = 0) -> list[list[int]]:
    """For each span `(start, end)` of bytes, the positions of the others it overlaps, of pairs
    where one is at `first_checked` or after (the outputs after the inputs: inputs may share
    bytes): a sweep in the order of their starts, so that N apart cost N log N (each against
    each, a call with 1,000 `out=` buffers took 22.5 ms, now 2.1; Intel Xeon, 2026-12-06),
    and N inputs of one buffer cost N times the outputs."""
    near: list[list[int]] = [[] for _ in spans]
    open_checked: list[int] = []  # those begun whose end may not be passed yet
    open_others: list[int] = []
    for position in sorted(range(len(spans)), key=lambda position: spans[position][0]):
        start, end = spans[position]
        open_checked = [other for other in open_checked if spans[other][1] > start]
        if position >= first_checked:  # (the others pruned only here: outputs are few)
            open_others = [other for other in open_others if spans[other][1] > start]
            candidates = [*open_checked, *open_others]
        else:
            candidates = open_checked
        for other in candidates:
            if spans[other][1] > start and spans[other][0] < end:
                near[position].append(other)
                near[other].append(position)
        (open_checked if position >= first_checked else open_others).append(position)
    return near


def check_aliasing(
    names: Sequence[str],
    arrays: Sequence[np.ndarray],
    pointers: Sequence[int],
    input_count: int,
    in_place_allowed: bool,
    in_place_refusal: str = (
        "an in-place update is safe only in a program that reads all its inputs and writes its "
        "outputs in its last kernel"
    ),
) -> None:
    """Outputs never overlap each other; one may alias an input only as an exact in-place update
    (`same_elements`), where `in_place_allowed` (else the error says `in_place_refusal`).

    `arrays` are the inputs, then the outputs: C-contiguous, but for one a kernel runs row by
    row (`row_axes`, `rows_writable`), whose bytes count from its lowest element to its highest
    (`extent`), and which overlaps another where they share an element (`share_elements`).
    """
    spans = [extent(array, pointer) for array, pointer in zip(arrays, pointers, strict=True)]
    near = overlapping_spans(spans, input_count)
    for out in range(input_count, len(arrays)):
        # the later outputs, then the inputs (an earlier output checked this one)
        for other in sorted(near[out], key=lambda other: (other < input_count, other)):
            if input_count <= other < out or not share_elements(arrays[out], arrays[other]):
                continue
            if other >= input_count:
                raise ArgumentError(f"out '{names[out]}' overlaps out '{names[other]}'")
            same_buffer = same_elements(arrays[out], pointers[out], arrays[other], pointers[other])
            if not (in_place_allowed and same_buffer):
                reason = (
                    "only an exact alias of a same-shaped input is an in-place update"
                    if in_place_allowed
                    else in_place_refusal
                )
                raise ArgumentError(f"out '{names[out]}' overlaps input '{names[other]}': {reason}")
