"""`xfuse.compile`: the whole pipeline from `.ew` source (or a traced module) to a `Kernel`.

    frontend -> ew-optimize -> ew-fuse -> ew-bufferize -> ew-workspace -> ew-kernel-to-loops
             -> ew-expand-math -> ew-to-llvm -> convert_module + LLVM O3 -> MCJIT

Compiled programs are cached in memory by source and options (no parse at all on a hit) and by
the frontend's IR and options (a traced function or a differently written identical program).
The cache holds programs weakly plus a small LRU of strong references: engines are freed once no
kernel uses them and they have dropped out of the LRU.
A miss in memory looks in the on-disk cache (`xfuse.runtime.disk_cache`: object code, so a new
process skips the pipeline) before compiling, and a compile writes its entry there.
"""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from xdsl.dialects import llvm
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.ir import Attribute
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline

from xfuse.dialects import ew
from xfuse.dtypes import dtype_name, dtype_of
from xfuse.frontend.builder import DtypeSpec, declared_dims
from xfuse.lowering.workspace import workspace_size_function
from xfuse.passes import ALL_PASSES
from xfuse.passes.pipeline import only_function, pipeline_context
from xfuse.runtime import disk_cache
from xfuse.runtime.arrays import Parameter
from xfuse.runtime.kernel import Kernel, NativeFunction, Program
from xfuse.runtime.native import compile_llvm_dialect

LRU_SIZE = 32
"""How many recently compiled programs stay alive without a kernel referring to them."""


@dataclass(frozen=True)
class Options:
    """Everything besides the program that changes the generated code."""

    fuse: bool = True
    math: str = "approx"
    fastmath: str = "contract"
    reuse: bool = True
    opt_level: int = 3
    extra_passes: str = ""
    """xfuse passes (`xfuse-opt -p` syntax) to run right after `ew-optimize`, e.g. a new one."""

    def _make(self, name: str, **options: Any) -> tuple[str, ModulePass]:
        return name, ALL_PASSES[name]()(**options)

    def tensor_passes(self) -> list[tuple[str, ModulePass]]:
        """(stage name, pass) from the frontend's tensors to bufferized kernels."""
        extra = PassPipeline.parse_spec(ALL_PASSES, self.extra_passes).passes
        return [
            self._make("ew-optimize"),
            *((p.name, p) for p in extra),
            self._make("ew-fuse", mode="greedy" if self.fuse else "none"),
            self._make("ew-bufferize", reuse=self.reuse),
        ]

    def buffer_passes(self) -> list[tuple[str, ModulePass]]:
        """(stage name, pass) from bufferized kernels to the `llvm` dialect."""
        return [
            self._make("ew-workspace"),
            self._make("ew-kernel-to-loops"),
            self._make("ew-expand-math", math=self.math),
            self._make("ew-to-llvm", fastmath=self.fastmath),
        ]


_programs: weakref.WeakValueDictionary[Hashable, Program] = weakref.WeakValueDictionary()
_recent: OrderedDict[Hashable, Program] = OrderedDict()


def _remember(key: Hashable, program: Program) -> None:
    _programs[key] = program
    _recent[key] = program
    _recent.move_to_end(key)
    while len(_recent) > LRU_SIZE:
        _recent.popitem(last=False)


def _recall(key: Hashable) -> Program | None:
    program = _programs.get(key)
    if program is not None:
        _remember(key, program)
    return program


def clear_cache() -> None:
    _programs.clear()
    _recent.clear()


def _parameter(name: str, type_: Attribute, dims: tuple[str, ...] | None = None) -> Parameter:
    shaped = cast(TensorType[Attribute] | MemRefType[Attribute], type_)
    return Parameter(name, dtype_of(shaped.get_element_type()), tuple(shaped.get_shape()), dims)


def signature(
    module: ModuleOp, output_names: Sequence[str] | None
) -> tuple[list[Parameter], list[Parameter]]:
    """Input and output parameters of a frontend (tensor) module, named after the source."""
    function = only_function(module)
    inputs = [
        _parameter(arg.name_hint or f"arg{index}", arg.type, declared_dims(arg))
        for index, arg in enumerate(function.body.block.args)
    ]
    returned = function.get_return_op()
    assert returned is not None
    names = (
        list(output_names)
        if output_names is not None
        else [value.name_hint or f"out{index}" for index, value in enumerate(returned.arguments)]
    )
    outputs = [
        _parameter(name, value.type) for name, value in zip(names, returned.arguments, strict=True)
    ]
    return inputs, outputs


def _program(module: ModuleOp, output_names: Sequence[str] | None, options: Options) -> Program:
    _, outputs = signature(module, output_names)
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
        disk_key = ("ir", frontend_ir, ",".join(output_names), repr(options))
        program = disk_cache.load(disk_key, options, functools.partial(_stages, options=options))
        if program is None:
            if module is None:
                module = parse_ir(frontend_ir)
            program = _lower(module, frontend_ir, output_names, options)
            disk_cache.store(disk_key, program, _main_name(frontend_ir))
        _remember(key, program)
    return program


def _stages(frontend_ir: str, options: Options) -> Stages:
    """The stages of a program loaded from the disk cache, from its frontend IR."""
    passes = [*options.tensor_passes(), *options.buffer_passes()]
    return Stages("frontend", parse_ir(frontend_ir), passes)


def parse_ir(text: str) -> ModuleOp:
    """A module from its printed IR (any of xfuse's stages)."""
    return Parser(pipeline_context(), text).parse_module()


def compile_module(
    module: ModuleOp,
    output_names: Sequence[str] | None = None,
    options: Options = Options(),
    threads: int = 1,
) -> Kernel:
    """Compile a frontend module (one `func.func` on tensors of `ew` ops) to a `Kernel`."""
    return Kernel(_program(module, output_names, options), threads)


def _lower(
    module: ModuleOp, frontend_ir: str, output_names: Sequence[str], options: Options
) -> Program:
    inputs, outputs = signature(module, output_names)
    program = _run_pipeline(
        module,
        "frontend",
        options.tensor_passes(),
        _main_name(frontend_ir),
        inputs,
        outputs,
        options,
    )
    program.frontend_ir = frontend_ir
    return program


class Stages(Mapping[str, str]):
    """The IR after each stage, by stage name in pipeline order.

    Printing every stage took about a third of a warm compile, and it is only for looking at: the
    texts are made on first access by running the passes again on a copy of the first stage.
    """

    def __init__(self, first_name: str, first: ModuleOp, passes: Sequence[tuple[str, ModulePass]]):
        self._first_name = first_name
        self._first = first
        self._passes = passes
        self._texts: dict[str, str] | None = None

    def _print_all(self) -> dict[str, str]:
        if self._texts is None:
            module = self._first.clone()
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
    first_stage: str,
    tensor_passes: Sequence[tuple[str, ModulePass]],
    function_name: str,
    inputs: Sequence[Parameter],
    outputs: Sequence[Parameter],
    options: Options,
) -> Program:
    """Run `tensor_passes`, then the buffer passes, on `module` and JIT the result."""
    first = module.clone()
    ctx = pipeline_context()
    for _, pass_ in tensor_passes:
        pass_.apply(ctx, module)
    # One kernel reads every input element before writing the same element: in-place is safe.
    in_place_allowed = sum(isinstance(op, ew.KernelOp) for op in module.walk()) == 1
    buffer_passes = options.buffer_passes()
    for _, pass_ in buffer_passes:
        pass_.apply(ctx, module)
    symbols = {op.sym_name.data for op in module.ops if isinstance(op, llvm.FuncOp)}
    has_workspace = workspace_size_function(function_name) in symbols
    native = compile_llvm_dialect(module, options.opt_level)
    function = NativeFunction(native, function_name, inputs, outputs, has_workspace)
    stages = Stages(first_stage, first, [*tensor_passes, *buffer_passes])
    return Program(function, stages, in_place_allowed, options)


def compile_bufferized(
    module: ModuleOp, input_names: Sequence[str], options: Options = Options(), threads: int = 1
) -> Kernel:
    """Compile a bufferized module (the `ew-bufferize` contract: inputs, then output buffers).

    `input_names` says how many leading memref arguments are inputs; the rest are outputs,
    named after their SSA names. Not cached: for hand-written IR and tests of the lowering.
    """
    function = only_function(module)
    args = function.body.block.args
    names = [*input_names] + [
        arg.name_hint or f"out{i}" for i, arg in enumerate(args[len(input_names) :])
    ]
    parameters = [_parameter(name, arg.type) for name, arg in zip(names, args, strict=True)]
    inputs, outputs = parameters[: len(input_names)], parameters[len(input_names) :]
    program = _run_pipeline(
        module, "ew-bufferize", [], function.sym_name.data, inputs, outputs, options
    )
    return Kernel(program, threads)


def _main_name(frontend_ir: str) -> str:
    marker = "func.func @"
    start = frontend_ir.index(marker) + len(marker)
    return frontend_ir[start : frontend_ir.index("(", start)]


def compile(
    source: str,
    outputs: Sequence[str] | None = None,
    *,
    fuse: bool = True,
    math: str = "approx",
    dtype: DtypeSpec = "float32",
    shapes: Mapping[str, Sequence[int | str | None]] | None = None,
    threads: int = 1,
    fastmath: str = "contract",
    reuse: bool = True,
    opt_level: int = 3,
    extra_passes: str = "",
) -> Kernel:
    """Compile an `.ew` program to a callable `Kernel`.

    `outputs` names the results (default: the last assignment); `fuse=False` keeps one kernel per
    op; `math` is "approx" (vectorizable approximations) or "libm"; `dtype` the element type
    ("float32", "float64", "float16", "bfloat16" or a numpy dtype) of every input, or a mapping
    from input names to them (others: float32); `shapes` input shapes (ints static, names dynamic
    dims that must agree wherever they appear, None dynamic; default `[?]`). Declarations in the
    program (`input bf16 x[t, d];`) do the same from the source. Results have numpy's promoted
    dtype of what they are computed from (see `xfuse.frontend.builder`). `threads` splits the
    outermost dimension across threads; `extra_passes`
    adds xfuse passes after `ew-optimize` (`"ew-strength-reduce{max-exponent=3}"`).
    """
    if math not in ("approx", "libm"):
        raise ValueError(f"math must be 'approx' or 'libm', got {math!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    options = Options(
        fuse=fuse,
        math=math,
        fastmath=fastmath,
        reuse=reuse,
        opt_level=opt_level,
        extra_passes=extra_passes,
    )
    if isinstance(dtype, Mapping):
        dtype = {input_name: dtype_name(d) for input_name, d in dtype.items()}
        dtype_key: Hashable = tuple(sorted(dtype.items()))
    else:
        dtype = dtype_key = dtype_name(dtype)
    shape_key = tuple(sorted((k, tuple(v)) for k, v in (shapes or {}).items()))
    source_key = (
        "source",
        source,
        tuple(outputs) if outputs is not None else None,
        dtype_key,
        shape_key,
        options,
    )
    program = _recall(source_key)
    if program is None:
        # A new process finds the program on disk by its source: no parsing, no printing.
        disk_key = ("source", repr(source_key))
        program = disk_cache.load(disk_key, options, functools.partial(_stages, options=options))
        if program is None:
            from xfuse.frontend.language import parse_program

            module = parse_program(source, outputs, dtype=dtype, shapes=shapes)
            program = _program(module, outputs, options)
            assert program.frontend_ir is not None
            disk_cache.store(disk_key, program, _main_name(program.frontend_ir))
        _remember(source_key, program)
    return Kernel(program, threads)
