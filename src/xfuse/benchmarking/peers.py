"""Peer compilers for `xfuse bench --peers`: each one that is installed, none required.

numexpr, numba, jax and torch get the program as code written from the optimized `ew` IR (one
statement per op, the same program xfuse compiles), each op from its facts (`ew.py`): its Python
operator, else the peer's function of its name (xfuse's or numpy's), else its `DEFINITION` in
other ops; upstream MLIR gets xfuse's fused IR through
`xfuse.benchmarking.mlir_peer` (the `ew-to-linalg` export run through `mlir-opt`):
- numexpr: one expression per output (intermediates inlined), evaluated in numexpr's blocked,
  fused virtual machine;
- numba: a scalar function made a ufunc with `numba.vectorize` (one fused, compiled loop);
- jax: the function under `jax.jit` (XLA fuses it);
- torch: the function in eager mode, one torch op at a time (torch's numpy-like baseline);
- torch.compile: the function under `torch.compile` (TorchInductor's fused C++ loop; needs a C++
  compiler; compiled once per program, for any size);
- mlir: upstream MLIR's pipeline with its polynomial approximations, when `mlir-opt` is found.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import subprocess
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from xfuse.benchmarking.workload import Variant, Workload
from xfuse.dialects import ew
from xfuse.frontend.language import parse_program
from xfuse.transforms.pipeline import apply_pipeline, only_function

PEERS: tuple[str, ...] = ("numexpr", "numba", "jax", "torch", "torch.compile", "mlir")
MODULES: dict[str, str] = {"torch.compile": "torch"}
"""The module a peer needs, where it is not the peer's name (mlir needs tools, not a module)."""


class PeerUnsupported(Exception):
    """The peer cannot compute this program (an op it lacks); the peer is skipped."""


Library = Callable[[str], Any]
"""What a peer's code calls: the function of a name (numpy's ufunc name or xfuse's
Python-level one: `maximum`, `sigmoid`), None where the peer has none."""

NUMEXPR_FUNCTIONS = frozenset(
    {"sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh"}
    | {"arcsinh", "arccosh", "arctanh", "log", "log10", "log1p", "exp", "expm1", "sqrt", "abs"}
    | {"floor", "ceil", "trunc"}
)
"""The functions of numexpr's expression language (its documentation's list)."""

NUMEXPR_SPELLINGS: dict[str, str] = {
    "maximum": "where({0} > {1}, {0}, {1})",
    "minimum": "where({0} < {1}, {0}, {1})",
    "where": "where({0} != 0, {1}, {2})",
    "rint": "round({0})",  # ties to even, as numpy's rint
}
"""numexpr has no maximum or minimum: it writes them with `where`, whose condition is a boolean
(a comparison's, or a float's test against 0, as `ew.select`'s)."""


def _where_of_any_condition(where: Callable[..., Any]) -> Callable[..., Any]:
    """A peer's `where` that takes a float condition too, true where nonzero (`ew.select`'s):
    torch's takes booleans only. A comparison's boolean stays one (`!= 0` of it)."""
    return lambda condition, x, y: where(condition != 0, x, y)


def _function_names(op_type: ew.ElementwiseOpType) -> list[str]:
    """The names a library may give the op's function: xfuse's (`sigmoid`), numpy's (`absolute`)."""
    ufunc = ew.numpy_ufunc(op_type)
    names = [ew.python_name(op_type), ufunc.__name__ if ufunc is not None else None]
    return [name for name in dict.fromkeys(names) if name is not None]


@functools.cache
def _definition(op_type: ew.ElementwiseOpType) -> func.FuncOp | None:
    """The op's `DEFINITION` in other ops, as a function of `x` (and `y`)."""
    definition = ew.definition(op_type)
    if definition is None:
        return None
    return only_function(parse_program(f"out = {definition};", filename=op_type.name))


Call = Callable[[str, list[str]], str | None]
"""A peer's code calling a function by name on operand texts; None where the peer lacks it."""

Constant = Callable[[float], str]
"""A peer's code for an `ew.constant`'s literal."""


def spell(op: Operation, operands: list[str], call: Call, peer: str, constant: Constant) -> str:
    """Code of `op` on `operands` for a peer, from the op's facts: its Python operator, else the
    peer's function of its name, else its `DEFINITION` spelled the same way (inlined)."""
    op_type = cast(ew.ElementwiseOpType, type(op))
    operator = ew.python_operator(op_type)
    if operator is not None:
        return f"({operator.format(*operands)})"
    for name in _function_names(op_type):
        if (code := call(name, operands)) is not None:
            return code
    function = _definition(op_type)
    if function is None:
        raise PeerUnsupported(f"{peer} has no '{ew.mnemonic(op_type)}'")
    arguments = {arg: operands["xy".index(str(arg.name_hint))] for arg in function.args}
    (result,) = expressions(function, arguments, call, peer, constant)
    return result


def expressions(
    function: func.FuncOp,
    arguments: Mapping[SSAValue, str],
    call: Call,
    peer: str,
    constant: Constant,
) -> list[str]:
    """One expression per result of `function` (intermediates inlined), given its arguments'
    code."""
    text: dict[SSAValue, str] = dict(arguments)
    for op in function.body.block.ops:
        if isinstance(op, ew.ConstantOp):
            text[op.result] = constant(op.literal)
        elif not isinstance(op, func.ReturnOp):
            text[op.results[0]] = spell(op, [text[v] for v in op.operands], call, peer, constant)
    returned = function.get_return_op()
    assert returned is not None
    return [text[v] for v in returned.operands]


def python_source(workload: Workload, library: Library, peer: str) -> tuple[str, dict[str, Any]]:
    """`def program(in0, in1, ...):` with one statement per op of the optimized IR, and the
    functions of `library` it calls, by name (its namespace)."""
    function = only_function(workload.module)
    names: dict[SSAValue, str] = {arg: f"in{i}" for i, arg in enumerate(function.args)}
    called: dict[str, Any] = {}

    def call(name: str, operands: list[str]) -> str | None:
        found = library(name)
        if found is None:
            return None
        called[name] = found
        return f"{name}({', '.join(operands)})"

    lines = [f"def program({', '.join(names[a] for a in function.args)}):"]
    for index, op in enumerate(function.body.block.ops):
        if isinstance(op, ew.ConstantOp):
            names[op.result] = repr(op.literal)
        elif isinstance(op, func.ReturnOp):
            lines.append(f"    return ({''.join(names[v] + ', ' for v in op.operands)})")
        else:
            names[op.results[0]] = f"t{index}"
            code = spell(op, [names[v] for v in op.operands], call, peer, repr)
            lines.append(f"    t{index} = {code}")
    return "\n".join(lines) + "\n", called


def namespaces(*modules: Any) -> Library:
    """A library of modules: a name is the first module's attribute of that name."""
    return lambda name: next((getattr(m, name) for m in modules if hasattr(m, name)), None)


def compile_python(source: str, namespace: Mapping[str, Any]) -> Callable[..., tuple[Any, ...]]:
    scope = dict(namespace)
    exec(compile(source, "<xfuse peer>", "exec"), scope)  # code written from the IR above
    return scope["program"]


def python_program(workload: Workload, library: Library, peer: str) -> Callable[..., Any]:
    """The workload as a Python function calling `library` (`python_source`)."""
    return compile_python(*python_source(workload, library, peer))


def numexpr_expressions(workload: Workload) -> tuple[list[str], dict[str, np.float32]]:
    """One numexpr expression per output (intermediates inlined, inputs by position: `in0`,
    ..., as an input may have a numexpr function's name, RoPE's `sin`) and the constants,
    passed as float32 variables (a literal would make numexpr compute in double)."""
    function = only_function(workload.module)
    constants: dict[str, np.float32] = {}

    def call(name: str, operands: list[str]) -> str | None:
        if name in NUMEXPR_FUNCTIONS:
            return f"{name}({', '.join(operands)})"
        spelling = NUMEXPR_SPELLINGS.get(name)
        return None if spelling is None else spelling.format(*operands)

    def constant(literal: float) -> str:
        name = f"c{len(constants)}"
        constants[name] = np.float32(literal)
        return name

    arguments = {arg: f"in{index}" for index, arg in enumerate(function.args)}
    return expressions(function, arguments, call, "numexpr", constant), constants


def _inputs(workload: Workload) -> list[np.ndarray]:
    return [workload.arrays[name] for name in workload.input_names]


def _output(workload: Workload, index: int = 0, dtype: Any = np.float32) -> np.ndarray:
    """A buffer for a peer's output `index`: of that output's shape (a flat one of n elements
    was no buffer for an N-d workload's, and the inputs' broadcast shape none for a `[d]` or
    0-d output beside `[t, d]` ones: numexpr and upstream MLIR failed on them)."""
    return np.empty(workload.reference[index].shape, dtype)


def numexpr_variant(workload: Workload, threads: int = 1) -> Variant:
    import numexpr

    numexpr.set_num_threads(threads)
    expressions, constants = numexpr_expressions(workload)
    inputs = {f"in{index}": array for index, array in enumerate(_inputs(workload))}
    variables: dict[str, Any] = {**inputs, **constants}
    outs = [_output(workload, index) for index in range(len(expressions))]

    def run() -> tuple[np.ndarray, ...]:
        for expression, out in zip(expressions, outs, strict=True):
            numexpr.evaluate(expression, local_dict=variables, out=out)  # compiled once, cached
        return tuple(outs)

    return Variant("numexpr", run, "fused")


def numba_variant(workload: Workload, threads: int = 1) -> Variant:
    import math

    import numba

    if len(workload.output_names) != 1:
        raise PeerUnsupported("numba.vectorize makes one output")
    # numpy's ufuncs on scalars (math's floor, ceil and trunc give Python integers, no -0 or
    # inf); np.where is numba's on arrays only
    scalar_where = numba.njit(lambda condition, x, y: x if condition else y)
    rounding = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
    library = namespaces(SimpleNamespace(where=scalar_where, **rounding), math, np)
    program = python_program(workload, library, "numba")
    # numba.vectorize needs named parameters (it cannot compile `lambda *args`).
    parameters = ", ".join(f"in{i}" for i in range(len(workload.input_names)))
    scalar = compile_python(
        f"def program({parameters}):\n    return inner({parameters})[0]\n",
        {"inner": numba.njit(program)},
    )
    signature = f"float32({', '.join(['float32'] * len(workload.input_names))})"
    target = "parallel" if threads > 1 else "cpu"
    ufunc = numba.vectorize([signature], target=target)(scalar)
    out = _output(workload)
    arrays = _inputs(workload)
    return Variant("numba", lambda: ufunc(*arrays, out=out), "fused")


def jax_variant(workload: Workload, threads: int = 1) -> Variant:
    import jax
    import jax.numpy as jnp

    program = python_program(workload, namespaces(jnp, jax.nn, jax.lax), "jax")
    jitted = jax.jit(program)
    arrays = [jnp.asarray(a) for a in _inputs(workload)]

    def run() -> tuple[np.ndarray, ...]:
        results = jitted(*arrays)
        jax.block_until_ready(results)
        return tuple(np.asarray(r) for r in results)

    return Variant("jax.jit", run, "fused")


@functools.cache
def _torch_library() -> Library:
    """torch and its `nn.functional`; `maximum`/`minimum` take a constant (a Python float,
    which torch's own do not) as a 0-d tensor. One library per process, so that its functions
    are the same objects in every program's namespace (`_torch_compiled`'s key)."""
    import torch

    def of_tensors(function: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        return lambda a, b: function(torch.as_tensor(a), torch.as_tensor(b))

    wrapped = {
        "maximum": of_tensors(torch.maximum),
        "minimum": of_tensors(torch.minimum),
        "where": _where_of_any_condition(torch.where),
        "rint": torch.round,  # ties to even
    }
    functions = namespaces(torch, torch.nn.functional)
    return lambda name: wrapped.get(name) or functions(name)


def torch_variant(workload: Workload, threads: int = 1) -> Variant:
    import torch

    torch.set_num_threads(threads)
    program = python_program(workload, _torch_library(), "torch")
    arrays = [torch.from_numpy(a) for a in _inputs(workload)]

    def run() -> tuple[np.ndarray, ...]:
        with torch.no_grad():
            return tuple(r.numpy() for r in program(*arrays))

    return Variant("torch eager", run, "unfused")


@functools.cache
def _torch_compiled(source: str, namespace: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:
    """One `torch.compile` per program: a new size recompiles in it, not from scratch."""
    import torch

    return torch.compile(compile_python(source, dict(namespace)))


def torch_compile_variant(workload: Workload, threads: int = 1) -> Variant:
    import torch

    torch.set_num_threads(threads)
    source, namespace = python_source(workload, _torch_library(), "torch.compile")
    compiled = _torch_compiled(source, tuple(sorted(namespace.items())))
    arrays = [torch.from_numpy(a) for a in _inputs(workload)]

    def run() -> tuple[np.ndarray, ...]:
        with torch.no_grad():
            return tuple(r.numpy() for r in compiled(*arrays))

    return Variant("torch.compile", run, "fused")


def mlir_variant(workload: Workload, threads: int = 1) -> Variant:
    from xfuse.benchmarking.mlir_peer import compile_with_mlir

    if threads > 1:
        raise PeerUnsupported("the upstream MLIR peer runs one thread")
    fused = apply_pipeline(workload.module, "ew-fuse")
    kernel = compile_with_mlir(fused, math="polynomial", output_names=workload.output_names)
    outs = [_output(workload, index, p.dtype) for index, p in enumerate(kernel.outputs)]
    arrays = _inputs(workload)  # (by position, as `_prepared`: an input may be named `out`)
    return Variant("upstream MLIR", lambda: kernel(*arrays, out=outs), "fused")


BUILDERS: dict[str, Callable[[Workload, int], Variant]] = {
    "numexpr": numexpr_variant,
    "numba": numba_variant,
    "jax": jax_variant,
    "torch": torch_variant,
    "torch.compile": torch_compile_variant,
    "mlir": mlir_variant,
}


def available_peers() -> list[str]:
    """The peers installed here (mlir: when `mlir-opt` and `mlir-translate` are found)."""
    found = [
        name
        for name in PEERS
        if name != "mlir" and importlib.util.find_spec(MODULES.get(name, name))
    ]
    from xfuse.benchmarking.mlir_peer import find_mlir_tool

    if find_mlir_tool("mlir-opt") and find_mlir_tool("mlir-translate"):
        found.append("mlir")
    return found


def peer_version(name: str) -> str:
    """The installed version of a peer: its module's `__version__`, `mlir-opt --version`'s."""
    if name == "mlir":
        from xfuse.benchmarking.mlir_peer import find_mlir_tool

        tool = find_mlir_tool("mlir-opt")
        if tool is None:
            return "not installed"
        text = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"LLVM version (\S+)", text)
        return found.group(1) if found else text.strip().split("\n")[0] or "unknown version"
    try:
        return str(importlib.import_module(MODULES.get(name, name)).__version__)
    except ImportError as error:  # installed but broken: bench says why when it skips the peer
        return f"unusable ({error})"


def peer_versions() -> dict[str, str]:
    """Each installed peer's version, in `PEERS` order."""
    return {name: peer_version(name) for name in available_peers()}
