"""A kernel's repeated call, with the full checks skipped where the arrays are as a call before
had them: one Python function written for the kernel's parameters (`quick_call`; `quick_row_call`
for a call by rows on strided arrays), as `dataclasses` writes an `__init__`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xfuse.runtime.arrays import (
    NewArray,
    extent,
    numpy_dtype,
    share_elements,
)
from xfuse.runtime.bound_calls import fast_data_pointer
from xfuse.runtime.call_plans import PLAN_CACHE_SIZE, CallPlan, NativeFunction, common_head

if TYPE_CHECKING:
    from xfuse.runtime.kernel import Kernel

QUICK_OUTPUT_PAIRS = 4096
"""The most pairs of outputs a quick call tests for overlap, written out (`quick_call`,
`quick_row_call`): a call of a kernel of more (92 outputs and more), given `out=`, takes the
full checks. Their count grows with the square of the outputs: a `.ew` program of 1,000 outputs
took 8.3 s and 2.8 GiB compiling its quick call's one expression at its first call, one of 2,000
a MemoryError. Below the bound the quick call is the faster: `out=` calls of `y<i> = x * <i>`
on 4 elements took 39 us written out at 33 outputs, 77 with the full checks; 110 and 166 at 64;
240 and 269 at 90; 414 at 128 with the full checks, whose first call took 4.2 ms, not the
quick call's ~50 at 90 (Intel Xeon, 2026-12-06). (The tests of each output against each input
grow with the program.)"""

RowKey = tuple[
    tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], int
]
"""What a row plan depends on (`Kernel._row_plan`): the inputs' shapes and strides, the
outputs' strides, and in a call that can stream, the elements before the outputs' first
`STREAMING_ALIGNMENT` line (`common_head`; 0 in any other)."""

RowCallKey = tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]
"""The inputs' shapes and strides: what a `RowCall` is found by (`RowKey` without the outputs'
strides and head)."""


@dataclass(frozen=True)
class RowCall:
    """What a repeated call on strided inputs of one `RowCallKey` needs besides its row plan
    (`quick_row_call`): its results' shapes, how it makes new outputs, and the bytes
    each input spans from its data pointer (`extent`), for the overlap check."""

    result_shapes: tuple[tuple[int, ...], ...]
    result_strides: tuple[tuple[int, ...], ...]
    """The strides of new (C-contiguous) outputs of those shapes."""
    streams: bool
    """The call can stream (`CallPlan.streams`): its row plan depends on where the outputs
    start (`RowKey`)."""
    new_array: NewArray
    extents: tuple[tuple[int, int], ...]


QuickCall = Callable[["Kernel", Sequence[Any], Any], Any]
"""`quick_call`'s function: (kernel, inputs, out) -> the results, or None."""


def _listed(items: Iterable[str]) -> str:
    """A tuple display of the items, "()" for none."""
    return "(" + "".join(f"{item}, " for item in items) + ")"


def _call_names(function: NativeFunction) -> tuple[list[str], ...]:
    """The names a quick call's code gives `function`'s inputs (`a0`, ...), their data pointers
    (`p0`, ...), its results (`r0`, ...) and theirs (`q0`, ...)."""
    inputs, outputs = range(len(function.inputs)), range(len(function.outputs))
    return (
        [f"a{index}" for index in inputs],
        [f"p{index}" for index in inputs],
        [f"r{index}" for index in outputs],
        [f"q{index}" for index in outputs],
    )


def _writes_out_overlaps(results: Sequence[str]) -> bool:
    """Whether a quick call writes out the tests of its outputs' overlaps: at most
    `QUICK_OUTPUT_PAIRS` pairs of them."""
    return len(results) * (len(results) - 1) // 2 <= QUICK_OUTPUT_PAIRS


def quick_call(
    function: NativeFunction, plans: Mapping[tuple[tuple[int, ...], ...], CallPlan]
) -> QuickCall:
    """The common call of `function`, as one Python function written for its signature (as
    `dataclasses` writes an `__init__`): a line per array, no loop. The checked call took 1.4x
    as long with the same checks in a loop over the arrays (`docs/benchmarks.md` has the call's
    times).

    It takes the inputs in the signature's order (`CallSignature.ordered`), each a C-contiguous
    aligned numpy array with its dtype (numpy's own object for it; for a 0-d input, a numpy
    scalar of its dtype too, as the full checks take it) and of shapes `plans` has,
    and `out` None or (for one output) one such writable array that overlaps no input (for
    several, a tuple or list of as many, which overlap neither an input nor each other); runs
    the call and returns its results. For any other call it returns None, running nothing: the
    full checks take it (a read-only input, an equal but other dtype object, an in-place call,
    every error). A call of several slices that stays on one thread untimed (most calls of a
    size class where the split loses) is counted and run in native code, as a one-thread
    kernel's call is run (`CallPlan.counted_words`): the Python decision in `Kernel.run_plan`
    (~1.5 us of CPU) took 5-6% of hardswish's CPU time at 2^18, running the interpreter's code
    and objects that the call's 2 MiB evicted from the cache. It takes the kernel as an argument
    (`Kernel.run_plan` for any other call that is not one native call) rather than holding it,
    so the kernel is in no reference cycle.
    """
    inputs, input_pointers, results, output_pointers = _call_names(function)
    accepted = [
        f"type({a}) is ndarray and {a}.dtype is d{index} and {a}.flags.carray"
        for index, a in enumerate(inputs)
    ]
    new_outputs = [
        f"plan.new_array(plan.output_shapes[{index}], e{index})" for index in range(len(results))
    ]
    overlap = [
        f"q0 < {p} + {a}.nbytes and {p} < end" for a, p in zip(inputs, input_pointers, strict=True)
    ]
    pointers = ", ".join([*input_pointers, *output_pointers])
    # A numpy scalar for a 0-d input is a 0-d array of its dtype (`check_input`'s rule).
    scalars = [
        f"    if isinstance({a}, generic):\n        {a} = asarray({a})"
        for a, parameter in zip(inputs, function.inputs, strict=True)
        if parameter.shape == ()
    ]
    lines = [
        "def quick_call(kernel, inputs, out):",
        f"    {_listed(inputs)} = inputs",
        *scalars,
        f"    if not ({' and '.join(accepted) or 'True'}):",
        "        return None",
        f"    plan = plans.get({_listed(f'{a}.shape' for a in inputs)})",
        "    if plan is None:",
        "        return None",
        f"    {_listed(input_pointers)} = {_listed(f'pointer({a})' for a in inputs)}",
        "    if out is None:",
        f"        {_listed(results)} = outputs = {_listed(new_outputs)}",
        f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
    ]
    if len(results) == 1:
        lines += [
            "    elif (type(out) is ndarray and out.dtype is e0",
            "          and out.shape == plan.output_shapes[0] and out.flags.carray):",
            "        q0 = pointer(out)",
            *(
                [
                    "        end = q0 + out.nbytes",
                    f"        if {' or '.join(overlap)}:",
                    "            return None  # an in-place call, or an error to report",
                ]
                if overlap
                else []
            ),
            "        outputs = (out,)",
        ]
    elif _writes_out_overlaps(results):
        given = [
            f"type({r}) is ndarray and {r}.dtype is e{index} and "
            f"{r}.shape == plan.output_shapes[{index}] and {r}.flags.carray"
            for index, r in enumerate(results)
        ]
        ends = [f"{q} + {r}.nbytes" for q, r in zip(output_pointers, results, strict=True)]
        overlaps = [
            f"{q} < {p} + {a}.nbytes and {p} < {end}"
            for q, end in zip(output_pointers, ends, strict=True)
            for a, p in zip(inputs, input_pointers, strict=True)
        ] + [
            f"{output_pointers[i]} < {ends[k]} and {output_pointers[k]} < {ends[i]}"
            for i, k in itertools.combinations(range(len(results)), 2)
        ]
        lines += [
            f"    elif (type(out) is tuple or type(out) is list) and len(out) == {len(results)}:",
            f"        {_listed(results)} = outputs = tuple(out)",
            f"        if not ({' and '.join(given)}):",
            "            return None",
            f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
            f"        if {' or '.join(overlaps)}:",
            "            return None  # an in-place call, or an error to report",
        ]
    lines += [
        "    else:",
        "        return None",
        "    words = plan.one_call_words",
        "    if words is not None:",
        f"        pointer_call(words, {pointers})",
        "    elif (words := plan.counted_words) is None or (",
        f"        counted_call(words, {pointers}) is None",
        "    ):",
        f"        kernel.run_plan(plan, [{pointers}])",
        f"    return {'outputs[0]' if len(results) == 1 else 'outputs'}",
    ]
    namespace = {
        "generic": np.generic,
        "asarray": np.asarray,
        "pointer_call": function.pointer_call,
        "counted_call": function.counted_pointer_call,
        "plans": plans,
    }
    return _compiled_call(function, lines, namespace)


def _compiled_call(
    function: NativeFunction, lines: Sequence[str], namespace: dict[str, Any]
) -> QuickCall:
    """The function `lines` define (named by their first), compiled with `namespace` and the
    names every quick call uses: `ndarray`, `pointer` (`fast_data_pointer`), the dtypes of
    `function`'s inputs (`d0`, ...) and outputs (`e0`, ...)."""
    namespace = {
        **namespace,
        "ndarray": np.ndarray,
        "pointer": fast_data_pointer(),
        **{f"d{index}": numpy_dtype(p.dtype) for index, p in enumerate(function.inputs)},
        **{f"e{index}": numpy_dtype(p.dtype) for index, p in enumerate(function.outputs)},
    }
    exec("\n".join(lines), namespace)  # noqa: S102 - the source is ours, built by the caller
    name = lines[0].split("(")[0].removeprefix("def ")
    call: QuickCall = namespace[name]
    return call


def quick_row_call(
    function: NativeFunction,
    row_calls: Mapping[RowCallKey, RowCall],
    row_plans: Mapping[RowKey, tuple[CallPlan | None]],
) -> QuickCall:
    """A call on strided inputs (run by rows: `Kernel._row_plan`) of shapes and strides that a
    checked call has run before, with the checks that depend on the arrays themselves, as one
    Python function written for the signature (as `quick_call` is): numpy arrays of their
    dtypes (numpy's own objects), aligned; `out` None or aligned writable arrays of the
    results' shapes and dtypes (one, or a tuple or list of one per output), with strides a
    checked call wrote by rows (or C-contiguous), whose spans overlap no input's and no other
    output's, or that `Kernel._rows_apart` finds share no element but as an update in place
    (whether two outputs whose spans overlap share an element, RoPE's rotated halves
    `out=(r[..., :h], r[..., h:])`, is remembered by their layouts: `share`). Runs it and
    returns its results; for any other call (or where the row plan is no longer remembered)
    None, running nothing: the full checks take it. With the full checks a call on the
    float32 halves of `[8, 28672]` took 79-83 us, 48-53 with these checks' loops (contiguous
    arrays 37-39; docs/calling-kernels.md); RoPE on the halves of `q` `[1, 32, 128]` into the
    halves of another 13.9 us with those loops, 6.3-6.8 written for the signature
    (docs/benchmarks.md)."""
    inputs, input_pointers, results, output_pointers = _call_names(function)
    accepted = [
        f"type({a}) is ndarray and {a}.dtype is d{index} and {a}.flags.aligned"
        for index, a in enumerate(inputs)
    ]
    given = [
        f"type({r}) is ndarray and {r}.dtype is e{index}"
        f" and {r}.shape == call.result_shapes[{index}]"
        f" and (f{index} := {r}.flags).aligned and f{index}.writeable"
        for index, r in enumerate(results)
    ]
    new_outputs = [
        f"call.new_array(call.result_shapes[{index}], e{index})" for index in range(len(results))
    ]
    pointers = ", ".join([*input_pointers, *output_pointers])
    several = len(results) > 1
    if _writes_out_overlaps(results):
        overlaps = [
            f"s{j} < {p} + h{i} and {p} + l{i} < t{j}"
            for j in range(len(results))
            for i, p in enumerate(input_pointers)
        ] + [
            f"s{j} < t{k} and s{k} < t{j} and share(r{j}, q{j}, r{k}, q{k})"
            for j, k in itertools.combinations(range(len(results)), 2)
        ]
        given_out = [
            "    else:",
            *(
                [
                    "        if not ((type(out) is tuple or type(out) is list)"
                    f" and len(out) == {len(results)}):",
                    "            return None",
                ]
                if several
                else []
            ),
            f"        {_listed(results)} = outputs = {'tuple(out)' if several else '(out,)'}",
            f"        if not ({' and '.join(given)}):",
            "            return None",
            f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
            *(f"        s{j}, t{j} = reach({r}, q{j})" for j, r in enumerate(results)),
            *(
                [f"        {_listed(f'(l{i}, h{i})' for i in range(len(inputs)))} = call.extents"]
                if inputs
                else []
            ),
            f"        if ({' or '.join(overlaps) or 'False'}) and not kernel._rows_apart(",
            f"            inputs, [{', '.join(input_pointers)}], call.extents, outputs,",
            f"            [{', '.join(output_pointers)}]",
            "        ):",
            "            return None  # the full checks: inputs copied first, or the error",
            f"        output_strides = {_listed(f'{r}.strides' for r in results)}",
        ]
    else:
        given_out = ["    else:", "        return None"]  # (out= to the full checks)
    lines = [
        "def quick_row_call(kernel, inputs, out):",
        f"    {_listed(inputs)} = inputs",
        f"    if not ({' and '.join(accepted) or 'True'}):",
        "        return None",
        f"    shapes = {_listed(f'{a}.shape' for a in inputs)}",
        f"    strides = {_listed(f'{a}.strides' for a in inputs)}",
        "    call = row_calls.get((shapes, strides))",
        "    if call is None:",
        "        return None",
        f"    {_listed(input_pointers)} = {_listed(f'pointer({a})' for a in inputs)}",
        "    if out is None:",
        f"        {_listed(results)} = outputs = {_listed(new_outputs)}",
        "        output_strides = call.result_strides",
        f"        {_listed(output_pointers)} = {_listed(f'pointer({r})' for r in results)}",
        *given_out,
        f"    head = common_head(function, {_listed(output_pointers)}) if call.streams else 0",
        "    remembered = row_plans.get((shapes, strides, output_strides, head))",
        "    if remembered is None or remembered[0] is None:",
        "        return None",
        f"    kernel.run_plan(remembered[0], [{pointers}])",
        f"    return {'outputs' if several else 'outputs[0]'}",
    ]
    known: dict[tuple[Any, ...], bool] = {}
    spans: dict[tuple[Any, ...], tuple[int, int]] = {}

    def share(a: np.ndarray, at: int, b: np.ndarray, bt: int) -> bool:
        """`share_elements(a, b)` of arrays at `at` and `bt`: by their layouts (shape,
        strides, element size) and distance, remembered."""
        key = (a.shape, a.strides, a.itemsize, b.shape, b.strides, b.itemsize, bt - at)
        found = known.get(key)
        if found is None:
            if len(known) >= PLAN_CACHE_SIZE:
                known.clear()
            found = known[key] = share_elements(a, b)
        return found

    def reach(array: np.ndarray, at: int) -> tuple[int, int]:
        """`extent(array, at)`, its offsets remembered by the array's layout (shape, strides,
        element size)."""
        key = (array.shape, array.strides, array.itemsize)
        found = spans.get(key)
        if found is None:
            if len(spans) >= PLAN_CACHE_SIZE:
                spans.clear()
            found = spans[key] = extent(array, 0)
        return at + found[0], at + found[1]

    namespace = {
        "row_calls": row_calls,
        "row_plans": row_plans,
        "share": share,
        "reach": reach,
        "common_head": common_head,
        "function": function,
    }
    return _compiled_call(function, lines, namespace)
