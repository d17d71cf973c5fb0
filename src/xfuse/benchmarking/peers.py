"""Peer compilers for `xfuse bench --peers`: each one that is installed, none required.

numexpr, numba, jax and torch get the program as code written from the optimized `ew` IR (one
statement per op, the same program xfuse compiles); upstream MLIR gets xfuse's fused IR through
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
from typing import Any

import numpy as np
from xdsl.dialects import func

from xfuse.benchmarking.workload import Variant, Workload
from xfuse.dialects import ew
from xfuse.dialects.dtypes import numpy_dtype
from xfuse.transforms.pipeline import apply_pipeline, only_function

PEERS: tuple[str, ...] = ("numexpr", "numba", "jax", "torch", "torch.compile", "mlir")
MODULES: dict[str, str] = {"torch.compile": "torch"}
"""The module a peer needs, where it is not the peer's name (mlir needs tools, not a module)."""
VARIANT_NAMES: dict[str, str] = {
    "numexpr": "numexpr",
    "numba": "numba",
    "jax": "jax.jit",
    "torch": "torch eager",
    "torch.compile": "torch.compile",
    "mlir": "upstream MLIR",
}
"""The variant (row) name of each peer's measurements."""


class PeerUnsupported(Exception):
    """The peer cannot compute this program (an op it lacks); the peer is skipped."""


NUMPY_SPELLING: dict[str, str] = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "max": "ns.maximum({0}, {1})",
    "min": "ns.minimum({0}, {1})",
    "pow": "ns.power({0}, {1})",
    "neg": "(-{0})",
    "abs": "ns.abs({0})",
    "exp": "ns.exp({0})",
    "log": "ns.log({0})",
    "log1p": "ns.log1p({0})",
    "tanh": "ns.tanh({0})",
    "sigmoid": "(1 / (1 + ns.exp(-{0})))",
    "sqrt": "ns.sqrt({0})",
    "rsqrt": "(1 / ns.sqrt({0}))",
    "relu": "ns.maximum({0}, 0)",
    "softplus": "ns.logaddexp({0}, 0)",
}
"""How each `ew` op reads in numpy-like code (`ns` is the namespace: numpy, jax.numpy)."""

SPELLINGS: dict[str, dict[str, str]] = {
    "numpy": NUMPY_SPELLING,
    "jax": {**NUMPY_SPELLING, "erf": "jax.scipy.special.erf({0})"},
    "torch": {
        **NUMPY_SPELLING,
        # torch.maximum takes no Python float: each operand as a tensor (a constant 0-d)
        "max": "ns.maximum(ns.as_tensor({0}), ns.as_tensor({1}))",
        "min": "ns.minimum(ns.as_tensor({0}), ns.as_tensor({1}))",
        "pow": "ns.pow({0}, {1})",
        "erf": "ns.erf({0})",
        "relu": "ns.relu({0})",
        "softplus": "ns.nn.functional.softplus({0})",
    },
    "numba": {
        **NUMPY_SPELLING,
        "max": "max({0}, {1})",
        "min": "min({0}, {1})",
        "pow": "({0} ** {1})",
        "abs": "abs({0})",
        "exp": "math.exp({0})",
        "log": "math.log({0})",
        "log1p": "math.log1p({0})",
        "tanh": "math.tanh({0})",
        "sigmoid": "(1 / (1 + math.exp(-{0})))",
        "sqrt": "math.sqrt({0})",
        "rsqrt": "(1 / math.sqrt({0}))",
        "erf": "math.erf({0})",
        "relu": "max({0}, 0.0)",
        "softplus": "(max({0}, 0.0) + math.log1p(math.exp(-abs({0}))))",
    },
    "numexpr": {
        key: spelling.replace("ns.", "")
        for key, spelling in NUMPY_SPELLING.items()
        if key not in ("max", "min", "relu", "softplus")
    }
    | {
        "max": "where({0} > {1}, {0}, {1})",
        "min": "where({0} < {1}, {0}, {1})",
        "relu": "where({0} > 0, {0}, 0)",
        "softplus": "where({0} > 0, {0} + log1p(exp(-{0})), log1p(exp({0})))",
    },
}


def _function(workload: Workload) -> func.FuncOp:
    return only_function(workload.module)


def _spell(op: Any, spelling: Mapping[str, str], operands: list[str], peer: str) -> str:
    name = ew.mnemonic(type(op))
    if name not in spelling:
        raise PeerUnsupported(f"{peer} has no '{name}'")
    return spelling[name].format(*operands)


def python_source(workload: Workload, spelling: Mapping[str, str], peer: str) -> str:
    """`def program(x, b, r):` with one statement per op of the optimized IR."""
    function = _function(workload)
    names: dict[Any, str] = {arg: f"in{i}" for i, arg in enumerate(function.args)}
    lines = [f"def program({', '.join(names[a] for a in function.args)}):"]
    for index, op in enumerate(function.body.block.ops):
        if isinstance(op, ew.ConstantOp):
            names[op.result] = repr(op.literal)
        elif isinstance(op, func.ReturnOp):
            lines.append(f"    return ({''.join(names[v] + ', ' for v in op.operands)})")
        else:
            names[op.results[0]] = f"t{index}"
            operands = [names[v] for v in op.operands]
            lines.append(f"    t{index} = {_spell(op, spelling, operands, peer)}")
    return "\n".join(lines) + "\n"


def compile_python(source: str, namespace: Mapping[str, Any]) -> Callable[..., tuple[Any, ...]]:
    scope = dict(namespace)
    exec(compile(source, "<xfuse peer>", "exec"), scope)  # code written from the IR above
    return scope["program"]


def numexpr_expressions(workload: Workload) -> tuple[list[str], dict[str, np.float32]]:
    """One numexpr expression per output (intermediates inlined, inputs by name) and the
    constants, passed as float32 variables (a literal would make numexpr compute in double)."""
    spelling = SPELLINGS["numexpr"]
    function = _function(workload)
    text: dict[Any, str] = {arg: str(arg.name_hint) for arg in function.args}
    constants: dict[str, np.float32] = {}
    for op in function.body.block.ops:
        if isinstance(op, ew.ConstantOp):
            text[op.result] = f"c{len(constants)}"
            constants[text[op.result]] = np.float32(op.literal)
        elif not isinstance(op, func.ReturnOp):
            operands = [text[v] for v in op.operands]
            text[op.results[0]] = _spell(op, spelling, operands, "numexpr")
    returned = function.get_return_op()
    assert returned is not None
    return [text[v] for v in returned.operands], constants


def _inputs(workload: Workload) -> list[np.ndarray]:
    return [workload.arrays[name] for name in workload.input_names]


def numexpr_variant(workload: Workload, threads: int = 1) -> Variant:
    import numexpr

    numexpr.set_num_threads(threads)
    expressions, constants = numexpr_expressions(workload)
    variables: dict[str, Any] = {**workload.arrays, **constants}
    outs = [np.empty(workload.n, np.float32) for _ in expressions]

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
    program = compile_python(python_source(workload, SPELLINGS["numba"], "numba"), {"math": math})
    # numba.vectorize needs named parameters (it cannot compile `lambda *args`).
    parameters = ", ".join(f"in{i}" for i in range(len(workload.input_names)))
    scalar = compile_python(
        f"def program({parameters}):\n    return inner({parameters})[0]\n",
        {"inner": numba.njit(program)},
    )
    signature = f"float32({', '.join(['float32'] * len(workload.input_names))})"
    target = "parallel" if threads > 1 else "cpu"
    ufunc = numba.vectorize([signature], target=target)(scalar)
    out = np.empty(workload.n, np.float32)
    arrays = _inputs(workload)
    return Variant("numba", lambda: ufunc(*arrays, out=out), "fused")


def jax_variant(workload: Workload, threads: int = 1) -> Variant:
    import jax
    import jax.numpy as jnp
    import jax.scipy.special  # noqa: F401  (erf)

    program = compile_python(
        python_source(workload, SPELLINGS["jax"], "jax"), {"ns": jnp, "jax": jax}
    )
    jitted = jax.jit(program)
    arrays = [jnp.asarray(a) for a in _inputs(workload)]

    def run() -> tuple[np.ndarray, ...]:
        results = jitted(*arrays)
        jax.block_until_ready(results)
        return tuple(np.asarray(r) for r in results)

    return Variant("jax.jit", run, "fused")


def torch_variant(workload: Workload, threads: int = 1) -> Variant:
    import torch

    torch.set_num_threads(threads)
    program = compile_python(python_source(workload, SPELLINGS["torch"], "torch"), {"ns": torch})
    arrays = [torch.from_numpy(a) for a in _inputs(workload)]

    def run() -> tuple[np.ndarray, ...]:
        with torch.no_grad():
            return tuple(r.numpy() for r in program(*arrays))

    return Variant("torch eager", run, "unfused")


@functools.cache
def _torch_compiled(source: str) -> Callable[..., Any]:
    """One `torch.compile` per program source: a new size recompiles in it, not from scratch."""
    import torch

    program = compile_python(source, {"ns": torch})
    return torch.compile(program)


def torch_compile_variant(workload: Workload, threads: int = 1) -> Variant:
    import torch

    torch.set_num_threads(threads)
    compiled = _torch_compiled(python_source(workload, SPELLINGS["torch"], "torch.compile"))
    arrays = [torch.from_numpy(a) for a in _inputs(workload)]

    def run() -> tuple[np.ndarray, ...]:
        with torch.no_grad():
            return tuple(r.numpy() for r in compiled(*arrays))

    return Variant("torch.compile", run, "fused")


def mlir_variant(workload: Workload, threads: int = 1) -> Variant:
    from xfuse.benchmarking.mlir_peer import compile_with_mlir

    if threads > 1:
        raise PeerUnsupported("the upstream MLIR peer runs one thread")
    kernel = compile_with_mlir(apply_pipeline(workload.module, "ew-fuse"), math="polynomial")
    outs = [np.empty(workload.n, numpy_dtype(p.dtype)) for p in kernel.outputs]
    arrays = dict(zip([p.name for p in kernel.inputs], _inputs(workload), strict=True))
    return Variant("upstream MLIR", lambda: kernel(**arrays, out=outs), "fused")


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
        return found.group(1) if found else text.strip().split("\n")[0]
    try:
        return str(importlib.import_module(MODULES.get(name, name)).__version__)
    except ImportError as error:  # installed but broken: bench says why when it skips the peer
        return f"unusable ({error})"


def peer_versions() -> dict[str, str]:
    """Each installed peer's version, in `PEERS` order."""
    return {name: peer_version(name) for name in available_peers()}
