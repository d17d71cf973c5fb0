"""`xfuse-opt`: xdsl-opt's options work, and hostile input never shows a traceback.

Every command runs in-process through `main(argv)`, its stdout and stderr captured; a few also
run as a process (as a user runs them), which must give the same exit status and output.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import os
import pickle
import re
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import llvmlite.binding as llvm_binding
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import BytesAttr, FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import DiagnosticException, ParseError, PassFailedException

import xfuse
from xfuse.dialects.failure import OpFailure
from xfuse.frontend.language import parse_program
from xfuse.runtime.compiler import Options, parse_ir
from xfuse.tools.opt import main
from xfuse.transforms import ALL_PASSES
from xfuse.transforms.bufferize import EwBufferizePass
from xfuse.transforms.cost import EwCostPass
from xfuse.transforms.default_pipeline import XfuseDefaultPass, default_pipeline
from xfuse.transforms.expand_math import EwExpandMathPass
from xfuse.transforms.fuse import EwFusePass
from xfuse.transforms.kernel_to_loops import EwKernelToLoopsPass
from xfuse.transforms.options import Math, PassOptionError, Target
from xfuse.transforms.pipeline import (
    PassSpecError,
    parse_passes,
    pass_from_spec,
    pipeline_context,
)
from xfuse.transforms.to_llvm import EwToLlvmPass
from xfuse.transforms.workspace import EwWorkspacePass

if TYPE_CHECKING:
    from conftest import Gelu

GOOD_MLIR = """\
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %one = ew.constant 1.0 : tensor<f32>
  %y = ew.mul %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %y : tensor<?xf32>
}
"""

SPLIT_MLIR = (
    GOOD_MLIR
    + "// -----\n"
    + GOOD_MLIR.replace(
        "%x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>", "%x, %x : tensor<?xf32>"
    )
)

# name -> (file name, file contents)
FILES: dict[str, tuple[str, str | bytes]] = {
    "good": ("good.mlir", GOOD_MLIR),
    "split": ("split.mlir", SPLIT_MLIR),
    "split_bad": (
        "split_bad.mlir",
        GOOD_MLIR
        + "// -----\n"
        + GOOD_MLIR.replace("%y : tensor<?xf32>\n}", "%y : tensor<?xf64>\n}"),
    ),
    "truncated": ("truncated.mlir", GOOD_MLIR[: GOOD_MLIR.index("func.return")]),
    "unknown_op": ("unknown_op.mlir", GOOD_MLIR.replace("ew.mul", "ew.fma")),
    "garbage": ("garbage.mlir", "func.func @f( ]]] {{ %%%"),
    "wrong_type": (
        "wrong_type.mlir",
        GOOD_MLIR.replace(": tensor<?xf32>, tensor<f32> -> tensor<?xf32>", ": tensor<?xf32>"),
    ),
    # xDSL checks an op's place before its regions' ops and an empty block after them: the
    # error was put at another failing op (the `ew.exp` below), or had no location
    "not_a_terminator": (
        "not_a_terminator.mlir",
        "func.func @f(%x: tensor<?xf32>) {\n"
        "  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {\n"
        "  ^bb0(%a: f32):\n"
        '    %t = "ew.exp"(%a) : (f32) -> f32\n'
        "    ew.yield %a : f32\n"
        "  }\n"
        "}\n",
    ),
    "empty_block": ("empty_block.mlir", "func.func @f() {\n^bb0:\n}\n"),
    # an op class that overrides `verify` (llvm.trunc checks before its super's) was put at
    # its function; an op's own `loc(...)` is where mlir-opt puts its error
    # a temporary sized by memref.dim at an argument's axis: an internal error ('Block' object
    # has no attribute 'value')
    "nvvm_dim_index": (
        "nvvm_dim_index.mlir",
        "func.func @main(%x: memref<?xf32>, %o: memref<?xf32>, %i: index) {\n"
        "  %n = memref.dim %x, %i : memref<?xf32>\n"
        "  %t = memref.alloc(%n) : memref<?xf32>\n"
        "  ew.kernel ins(%x : memref<?xf32>) outs(%t : memref<?xf32>) {\n"
        "  ^bb0(%a: f32):\n"
        "    ew.yield %a : f32\n"
        "  }\n"
        "  ew.kernel ins(%t : memref<?xf32>) outs(%o : memref<?xf32>) {\n"
        "  ^bb0(%a: f32):\n"
        "    ew.yield %a : f32\n"
        "  }\n"
        "  func.return\n"
        "}\n",
    ),
    # more errors at one op that had no location (a Python repr of a value, or nothing)
    "llvm_dim_index": (
        "llvm_dim_index.mlir",
        "func.func @f(%a: memref<?xf32>, %i: index) -> index {\n"
        "  %b = memref.dim %a, %i : memref<?xf32>\n"
        "  func.return %b : index\n"
        "}\n",
    ),
    "llvm_alloca": (
        "llvm_alloca.mlir",
        "func.func @f(%i: index) -> f32 {\n"
        "  %a = memref.alloca() : memref<4xf32>\n"
        "  %b = memref.load %a[%i] : memref<4xf32>\n"
        "  func.return %b : f32\n"
        "}\n",
    ),
    "returned_argument": (
        "returned_argument.mlir",
        "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {\n  func.return %a : tensor<?xf32>\n}\n",
    ),
    "f16_tanh": (
        "f16_tanh.mlir",
        "func.func @f(%a: f16) -> f16 {\n  %b = math.tanh %a : f16\n  func.return %b : f16\n}\n",
    ),
    "two_blocks": (
        "two_blocks.mlir",
        "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  cf.br ^bb1\n"
        "^bb1:\n"
        "  %a = ew.exp %x : tensor<?xf32>\n"
        "  func.return %a : tensor<?xf32>\n"
        "}\n",
    ),
    "two_blocks_alloc": (
        "two_blocks_alloc.mlir",
        "func.func @main(%x: memref<?xf32>) {\n"
        "  cf.br ^bb1\n"
        "^bb1:\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %n = memref.dim %x, %c0 : memref<?xf32>\n"
        "  %t = memref.alloc(%n) : memref<?xf32>\n"
        "  func.return\n"
        "}\n",
    ),
    "caller_loc": (
        "caller_loc.mlir",
        "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        '  %a = ew.exp %x : tensor<?xf32> loc(callsite(unknown at "caller.ew":7:8))\n'
        "  func.return %a : tensor<?xf32>\n"
        "}\n",
    ),
    "name_loc": (
        "name_loc.mlir",
        "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        '  %a = ew.exp %x : tensor<?xf32> loc(callsite("n"("n.ew":9:10) at "y.ew":7:8))\n'
        "  func.return %a : tensor<?xf32>\n"
        "}\n",
    ),
    "symbol_clash": (
        "symbol_clash.mlir",
        "func.func @main(%x: memref<?xf32>) {\n  func.return\n}\n"
        "func.func private @main.packed(%x: memref<?xf32>)\n",
    ),
    "llvm_trunc": (
        "llvm_trunc.mlir",
        "func.func @f(%a: i32) -> i64 {\n"
        "  %b = llvm.trunc %a : i32 to i64\n"
        "  func.return %b : i64\n"
        "}\n",
    ),
    "verifier_at_loc": (
        "verifier_at_loc.mlir",
        "func.func @f() {\n"
        '  %c = ew.constant 1.0 : tensor<?xf32> loc("orig.ew":8:3)\n'
        "  func.return\n"
        "}\n",
    ),
    "verifier": (
        "verifier.mlir",
        GOOD_MLIR.replace("-> tensor<?xf32>\n  func", "-> tensor<f32>\n  func")
        .replace("%y : tensor<?xf32>", "%y : tensor<f32>")
        .replace(") -> tensor<?xf32> {", ") -> tensor<f32> {"),
    ),
    "int_type": (
        "int_type.mlir",
        "func.func @f(%x: tensor<4xi32>) {\n  %y = ew.neg %x : tensor<4xi32>\n  func.return\n}\n",
    ),
    "binary": ("binary.mlir", b"\xff\xfe\x00func"),
    "deep": ("deep.mlir", '"builtin.module"() ({' * 3000 + "}) : () -> ()" * 3000),
    "bad_ew": ("bad.ew", "h = x + b;\ny = tanh(h, h);\n"),
    "binary_ew": ("binary.ew", b"y = x;\n\xff = 1;"),
    "empty_ew": ("empty.ew", "# nothing here\n"),
    "rank2_ew": ("rank2.ew", "input x[t, d];\nout = x * 2;\n"),
    "split_rank_ew": (
        "split_rank.ew",
        "input x[n];\nout = x * 2;\n// -----\n# second program\ninput x[t, d];\nout = x * 2;\n",
    ),
    "unknown_ext": ("input.txt", "y = x;"),
    "no_ext": ("program", "y = x;"),
    "bom_ew": ("bom.ew", b"\xef\xbb\xbfy = x;"),
    # xDSL's int() of a literal of over 4300 digits raised a bare ValueError: no location
    "long_int": ("long_int.mlir", GOOD_MLIR.replace("1.0", "9" * 5000)),
    "long_int_split": (
        "long_int_split.mlir",
        GOOD_MLIR + "// -----\n" + GOOD_MLIR.replace("?xf32>) ->", f"{'1' * 4301}xf32>) ->"),
    ),
    "long_hex": ("long_hex.mlir", GOOD_MLIR.replace("1.0", "0x" + "f" * 5000)),
    # reported at the token after its name: the next line's `func.return`
    "unregistered_op": (
        "unregistered_op.mlir",
        "func.func @g() {\n  %r = ew.bogus\n  func.return\n}\n",
    ),
    # a hex literal of leading zeros converts: the long decimal one after it is the error
    "zeros_then_long_int": (
        "zeros_then_long_int.mlir",
        "func.func @f() {\n  %a = arith.constant 0x" + "0" * 4000 + "1 : i64\n"
        "  %b = arith.constant " + "9" * 4301 + " : i64\n  func.return\n}\n",
    ),
    # converted, but out of range: its message printed it in decimal, a bare ValueError
    "long_hex_int": (
        "long_hex_int.mlir",
        "func.func @f() {\n  %c = arith.constant 0x" + "F" * 3700 + " : i64\n  func.return\n}\n",
    ),
    "use_before_def": (
        "use_before_def.mlir",
        "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %b = ew.add %a, %x : tensor<?xf32>\n"
        "  %a = ew.neg %x : tensor<?xf32>\n"
        "  func.return %b : tensor<?xf32>\n"
        "}\n",
    ),
    # xDSL reported a value never defined at the end of the input, not where it is used
    "undefined": (
        "undefined.mlir",
        GOOD_MLIR.replace("%x, %one", "%x, %nowhere").replace("%y :", "%y2 :") + "// end\n",
    ),
    # arguments the passes on tensors would pass through: ew-fuse failed on an AssertionError,
    # ew-bufferize on an AttributeError
    "unranked_arg": (
        "unranked_arg.mlir",
        "func.func @f(%x: tensor<*xf32>) -> tensor<*xf32> {\n  func.return %x : tensor<*xf32>\n}\n",
    ),
    # ew-bufferize's memrefs dropped the encoding without a word
    "encoded_arg": (
        "encoded_arg.mlir",
        'func.func @f(%x: tensor<?xf32, "enc">) -> tensor<?xf32> {\n'
        '  %y = ew.kernel ins(%x : tensor<?xf32, "enc">) -> tensor<?xf32> {\n'
        "  ^bb0(%e: f32):\n"
        "    ew.yield %e : f32\n"
        "  }\n"
        "  func.return %y : tensor<?xf32>\n"
        "}\n",
    ),
    "encoded_temporary": (
        "encoded_temporary.mlir",
        "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        '  %t = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32, "enc"> {\n'
        "  ^bb0(%e: f32):\n"
        "    ew.yield %e : f32\n"
        "  }\n"
        '  %y = ew.kernel ins(%t : tensor<?xf32, "enc">) -> tensor<?xf32> {\n'
        "  ^bb0(%e: f32):\n"
        "    ew.yield %e : f32\n"
        "  }\n"
        "  func.return %y : tensor<?xf32>\n"
        "}\n",
    ),
    "scalar_arg": (
        "scalar_arg.mlir",
        "func.func @f(%x: tensor<?xf32>, %s: f32) -> tensor<?xf32> {\n"
        "  %y = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {\n"
        "  ^bb0(%e: f32):\n"
        "    ew.yield %e : f32\n"
        "  }\n"
        "  func.return %y : tensor<?xf32>\n"
        "}\n",
    ),
    # xDSL fails the symbol table, here the implicit module, which has no line: name the second
    "redefined_symbol": ("redefined_symbol.mlir", GOOD_MLIR + GOOD_MLIR),
    # ew-fuse to ew-kernel-to-loops walk into it; ew-to-llvm then met a Python repr
    "nested_module": (
        "nested_module.mlir",
        "builtin.module {\nbuiltin.module {\n" + GOOD_MLIR + "}\n}\n",
    ),
    # a function named as a pass names the one it adds: xDSL's verifier failed the whole module
    **{
        f"taken_{name}": (
            f"taken_{name}.mlir",
            "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
            "  %a = ew.exp %x : tensor<?xf32>\n"
            "  %b = ew.tanh %a : tensor<?xf32>\n"
            "  %c = ew.add %b, %a : tensor<?xf32>\n"
            "  func.return %c : tensor<?xf32>\n"
            "}\n"
            f"func.func @{symbol}() {{\n  func.return\n}}\n",
        )
        for name, symbol in (
            ("workspace", "f_workspace_bytes"),
            ("kernel", "f.kernel1"),
            ("entry", "f.packed"),
        )
    },
    "empty": ("empty.mlir", ""),
    "comment_only": ("comment_only.mlir", "// nothing but a comment\n"),
    # a function named as a C library function the lowering calls: the calls went to it
    "named_expf": (
        "named_expf.mlir",
        "func.func @expf(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %y = ew.exp %x : tensor<?xf32>\n"
        "  func.return %y : tensor<?xf32>\n"
        "}\n",
    ),
    "nested_tanh": (
        "nested_tanh.mlir",
        "builtin.module {\nbuiltin.module {\n"
        "func.func @n(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %y = ew.tanh %x : tensor<?xf32>\n"
        "  func.return %y : tensor<?xf32>\n"
        "}\n}\n}\n",
    ),
    "named_malloc": (
        "named_malloc.mlir",
        "func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %a = ew.exp %x : tensor<?xf32>\n"
        "  %b = ew.add %a, %x : tensor<?xf32>\n"
        "  func.return %b : tensor<?xf32>\n"
        "}\n"
        "func.func @malloc() {\n  func.return\n}\n",
    ),
}


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


# name -> arguments; `{name}` stands for a path of the `paths` fixture
COMMANDS: dict[str, list[str]] = {
    "gelu": ["{gelu}"],
    "gelu_optimize": ["{gelu}", "-p", "ew-optimize"],
    "gelu_generic": ["{gelu}", "--print-op-generic"],
    "between_passes": ["{good}", "-p", "ew-optimize,canonicalize", "--print-between-passes"],
    "time_passes": ["{good}", "-p", "ew-optimize,canonicalize", "--time-passes"],
    "output_file": ["{good}", "-p", "ew-optimize", "-o", "{out}"],
    "split": ["{split}", "--split-input-file", "-p", "ew-optimize"],
    "split_bad": ["{split_bad}", "--split-input-file"],
    "truncated": ["{truncated}"],
    "unknown_op": ["{unknown_op}"],
    "garbage": ["{garbage}"],
    "wrong_type": ["{wrong_type}"],
    "not_a_terminator": ["{not_a_terminator}"],
    "empty_block": ["{empty_block}"],
    "llvm_trunc": ["{llvm_trunc}"],
    "bufferize_two_blocks": ["{two_blocks}", "-p", "ew-bufferize"],
    "nvvm_two_blocks": ["{two_blocks}", "-p", "ew-to-nvvm"],
    "name_loc": ["{name_loc}", "-p", "ew-bufferize"],
    "caller_loc": ["{caller_loc}", "-p", "ew-bufferize"],
    "workspace_two_blocks": ["{two_blocks_alloc}", "-p", "ew-workspace"],
    "verify_between_passes": ["{gelu}", "-p", "func-to-pdl-rewrite"],
    "symbol_clash": ["{symbol_clash}", "-p", "ew-to-llvm"],
    "llvm_dim_index": ["{llvm_dim_index}", "-p", "ew-to-llvm"],
    "llvm_alloca": ["{llvm_alloca}", "-p", "ew-to-llvm"],
    "llvm_tensor_function": ["{returned_argument}", "-p", "ew-to-llvm"],
    "bufferize_returned_argument": ["{returned_argument}", "-p", "ew-bufferize"],
    "f16_tanh": ["{f16_tanh}", "-p", "ew-expand-math"],
    "nvvm_dim_index": ["{nvvm_dim_index}", "-p", "ew-to-nvvm"],
    "verifier_at_loc": ["{verifier_at_loc}"],
    "verifier": ["{verifier}", "-p", "ew-optimize"],
    "int_type": ["{int_type}"],
    "binary": ["{binary}"],
    "deep": ["{deep}"],
    "bad_ew": ["{bad_ew}"],
    "binary_ew": ["{binary_ew}"],
    "empty_ew": ["{empty_ew}"],
    "unknown_ext": ["{unknown_ext}"],
    "no_ext": ["{no_ext}"],
    "no_ext_as_ew": ["-f", "ew", "{no_ext}"],
    "bom_ew": ["{bom_ew}"],
    "txt_as_ew": ["{unknown_ext}", "-f", "ew"],
    "missing_file": ["{missing}"],
    "directory": ["{directory}"],
    "unknown_pass": ["{good}", "-p", "ew-optimise"],
    "bad_option_value": ["{good}", "-p", "ew-optimize{unsafe-math=maybe}"],
    "unknown_option": ["{good}", "-p", "ew-optimize{fast=true}"],
    "bad_mode": ["{good}", "-p", "ew-fuse{mode=bogus}"],
    "huge_exponent": ["{good}", "-p", "ew-strength-reduce{max-exponent=1000000000}"],
    "bool_for_int": ["{good}", "-p", "ew-fuse{max-ops=true}"],
    "unquoted_list": ["{good}", "-p", "ew-to-llvm{fastmath=contract,afn}"],
    "bool_for_number": ["{good}", "-p", "ew-fuse,ew-cost{launch-us=true}"],
    "bool_for_str_or_int": ["{good}", "-p", "ew-fuse,ew-cost{shape=false}"],
    "repeated_option": ["{good}", "-p", "ew-optimize,ew-fuse{max-ops=3 mode=none max_ops=4}"],
    "long_int": ["{long_int}"],
    "long_int_split": ["{long_int_split}", "--split-input-file"],
    "long_hex": ["{long_hex}"],
    "long_hex_int": ["{long_hex_int}"],
    "zeros_then_long_int": ["{zeros_then_long_int}"],
    "unregistered_op": ["{unregistered_op}"],
    "use_before_def": ["{use_before_def}", "-p", "ew-fuse"],
    "undefined": ["{undefined}"],
    "unranked_arg": ["{unranked_arg}", "-p", "ew-fuse"],
    "scalar_arg": ["{scalar_arg}", "-p", "ew-bufferize"],
    "encoded_arg": ["{encoded_arg}", "-p", "ew-bufferize"],
    "encoded_arg_fuse": ["{encoded_arg}", "-p", "ew-fuse"],
    "encoded_temporary": ["{encoded_temporary}", "-p", "ew-bufferize"],
    "redefined_symbol": ["{redefined_symbol}"],
    "empty": ["{empty}", "-p", "ew-fuse,ew-bufferize"],
    "comment_only": ["{comment_only}"],
    "bufferize_twice": ["{good}", "-p", "ew-fuse,ew-bufferize,ew-bufferize"],
    "bufferize_loops": ["{good}", "-p", "ew-fuse,ew-bufferize,ew-kernel-to-loops,ew-bufferize"],
    "bufferize_unfused": ["{good}", "-p", "ew-bufferize"],
    "fuse_bufferized": ["{gelu}", "-p", "ew-fuse,ew-bufferize,ew-fuse"],
    "llvm_unexpanded": ["{gelu}", "-p", "ew-fuse,ew-bufferize,ew-kernel-to-loops,ew-to-llvm"],
    "linalg_unfused": ["{gelu}", "-p", "ew-to-linalg"],
    "nvvm_twice": ["{gelu}", "-p", "ew-fuse,ew-bufferize,ew-to-nvvm,ew-to-nvvm"],
    "cost_shape_rank": ["{rank2_ew}", "-p", "ew-fuse,ew-cost{shape=4096}"],
    "cost_unknown_epilogue": ["{gelu}", "-p", "ew-fuse,ew-cost{epilogue=zz}"],
    "cost_lowered": ["{rank2_ew}", "-p", "xfuse-default,ew-cost"],
    "cost_split_second": [
        "{split_rank_ew}",
        "--split-input-file",
        "-p",
        "ew-fuse,ew-cost{shape=4096}",
    ],
    "malformed_pipeline": ["{good}", "-p", "ew-optimize{"],
    "bad_output_path": ["{good}", "-o", "{directory}/no/such/dir/out.mlir"],
    "nested_module": ["{nested_module}", "-p", "xfuse-default"],
    "taken_workspace": ["{taken_workspace}", "-p", "ew-fuse{mode=none},ew-bufferize,ew-workspace"],
    "taken_kernel": ["{taken_kernel}", "-p", "ew-fuse{mode=none},ew-bufferize,ew-kernel-to-loops"],
    "taken_entry": ["{taken_entry}", "-p", "xfuse-default"],
    "named_expf": ["{named_expf}", "-p", "xfuse-default{math=libm}"],
    "named_malloc": [
        "{named_malloc}",
        "-p",
        "ew-fuse{mode=none},ew-bufferize,ew-kernel-to-loops,ew-expand-math,ew-to-llvm",
    ],
    "nested_libm": [
        "{nested_tanh}",
        "-p",
        "ew-fuse,ew-bufferize,ew-workspace,ew-kernel-to-loops,ew-expand-math{math=libm}",
    ],
    "llvm_target_unlowered": ["{good}", "-t", "llvm"],
    "asm_target_on_llvm_dialect": ["{good}", "-p", "xfuse-default", "-t", "x86-asm"],
    "wat_target_of_other_ops": ["{good}", "-t", "wat"],
    "verify_diagnostics": ["{verifier}", "--verify-diagnostics"],
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory, gelu: Gelu) -> dict[str, str]:
    """The FILES written to a directory, plus `out`, `missing`, `directory` and `gelu` paths."""
    directory = tmp_path_factory.mktemp("opt")
    paths = {"out": directory / "out.mlir", "missing": directory / "missing.mlir"}
    paths["gelu"] = gelu.path
    paths["directory"] = directory
    for name, (file_name, contents) in FILES.items():
        paths[name] = directory / file_name
        paths[name].write_bytes(contents if isinstance(contents, bytes) else contents.encode())
    return {name: str(path) for name, path in paths.items()}


def resolve(arguments: list[str], paths: dict[str, str]) -> list[str]:
    return [re.sub(r"\{(\w+)\}", lambda m: paths.get(m[1], m[0]), a) for a in arguments]


def run_in_process(arguments: list[str]) -> Run:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        returncode = main(arguments)
    return Run(returncode, stdout.getvalue(), stderr.getvalue())


@pytest.fixture(scope="module")
def runs(paths: dict[str, str]) -> dict[str, Run]:
    return {name: run_in_process(resolve(args, paths)) for name, args in COMMANDS.items()}


@pytest.mark.parametrize("name", ["gelu", "bad_ew", "deep"])
def test_the_process_behaves_as_main(
    name: str, paths: dict[str, str], runs: dict[str, Run]
) -> None:
    """`python -m xfuse.tools.opt` (what the `xfuse-opt` script runs): the same exit status and
    output as the in-process call, for a module, a located diagnostic and a nesting error."""
    command = [sys.executable, "-m", "xfuse.tools.opt", *resolve(COMMANDS[name], paths)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert Run(done.returncode, done.stdout, done.stderr) == runs[name]


@pytest.mark.parametrize("command", ["gelu_optimize", "bf16_cost"])
def test_the_process_loads_neither_llvm_nor_ml_dtypes(command: str, paths: dict[str, str]) -> None:
    """Each RUN line of the FileCheck tests starts xfuse-opt: passes over `ew` IR need neither
    the LLVM JIT nor ml_dtypes (whose import alone takes ~1 s of CPU), bf16 programs included."""
    script = (
        "import sys; from xfuse.tools.opt import main; status = main(sys.argv[1:]); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'llvmlite', 'ml_dtypes'}))"
    )
    arguments = (
        resolve(COMMANDS["gelu_optimize"], paths)
        if command == "gelu_optimize"
        else [
            str(Path(__file__).parents[1] / "filecheck" / "passes" / "ew-cost.mlir"),
            "-p",
            "ew-cost",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def ok(run: Run) -> Run:
    assert run.returncode == 0, run.stderr
    assert not run.stderr
    return run


# ---------------------------------------------------------------------------------------------
# xdsl-opt's options
# ---------------------------------------------------------------------------------------------


def test_gelu_prints_the_module(runs: dict[str, Run]) -> None:
    out = ok(runs["gelu"]).stdout
    assert out.startswith("builtin.module {")
    assert "func.func @main(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>)" in out


def test_gelu_optimized_has_11_compute_ops_and_h_5_users(runs: dict[str, Run]) -> None:
    out = ok(runs["gelu_optimize"]).stdout
    compute = re.findall(r"= ew\.(?!constant)\w+ ", out)
    assert len(compute) == 11
    assert len(re.findall(r"%h\b", out)) == 1 + 5  # its definition and 5 uses


def test_generic_printing_of_ew_input(runs: dict[str, Run]) -> None:
    out = ok(runs["gelu_generic"]).stdout
    assert '"ew.add"(%x, %b)' in out and '"ew.tanh"' in out


def test_print_between_passes_on_stderr(runs: dict[str, Run]) -> None:
    """As mlir-opt's `--mlir-print-ir-after-all`: xDSL printed the modules into stdout's, which
    then did not parse back."""
    run = runs["between_passes"]
    assert run.returncode == 0 and run.stderr.count("IR after ew-optimize:") == 1
    assert "IR after" not in run.stdout
    between = run.stderr.split("IR after ew-optimize:")[1]
    assert "ew.mul" not in between and "ew.mul" not in run.stdout  # x * 1 is gone
    assert parse_ir(run.stdout) is not None


def test_print_between_passes_prints_as_the_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "program.ew"
    path.write_text("out = exp(x) * 1.0;")
    arguments = [str(path), "-p", "ew-optimize,ew-fuse", "--print-between-passes"]
    assert main([*arguments, "--print-op-generic"]) == 0
    between = capsys.readouterr().err.split("IR after ew-optimize:")[1]
    assert '"builtin.module"() ({' in between and '"ew.exp"' in between


def test_each_module_printed_between_passes_is_the_one_that_pass_outputs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One printer for all modules kept the names it had given values, which
    `ew-kernel-to-loops` moves into an outlined kernel whose own numbering gives them again:
    `%2` twice, a module that did not parse back."""
    path = tmp_path / "program.ew"
    path.write_text("input x[4];\nout = exp(x) * x;\n")
    passes = ["ew-fuse{mode=none}", "ew-bufferize", "ew-kernel-to-loops", "dce"]
    assert main([str(path), "-p", ",".join(passes), "--print-between-passes"]) == 0
    printed = re.split(r"IR after (\S+):\n", capsys.readouterr().err)[1:]
    assert printed[::2] == ["ew-fuse", "ew-bufferize", "ew-kernel-to-loops"]
    for count, between in enumerate(printed[1::2], start=1):
        assert main([str(path), "-p", ",".join(passes[:count])]) == 0
        assert between.strip() == capsys.readouterr().out.strip()


@pytest.mark.parametrize(
    "pipeline",
    [
        "ew-optimize, ew-fuse",
        " ew-optimize ,ew-fuse{ mode=greedy }",
        "ew-optimize,ew-fuse {max-ops=5 mode=greedy}",
        "builtin.module(ew-optimize,ew-fuse)",
        "builtin.module( ew-optimize, ew-fuse )",
        "ew-optimize,ew-fuse{mode='greedy'}",  # (mlir-opt's single quotes)
    ],
)
def test_a_pipeline_as_mlir_opt_spells_it(pipeline: str) -> None:
    """mlir-opt skips spaces around `,`, braces and parentheses, takes single-quoted values
    and its anchor `builtin.module(...)`: xDSL's lexer refused them ("Expected pass name
    here", "Unknown token")."""
    assert [p.name for p in parse_passes(pipeline)] == ["ew-optimize", "ew-fuse"]
    (default,) = parse_passes(
        "xfuse-default{fastmath='contract,afn' math = libm}".replace(" = ", "=")
    )
    assert default.fastmath == "contract,afn"


def test_an_option_with_its_value_gets_a_hint(
    capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """`--pass-pipeline=a,b` (mlir-opt's spelling of -p) was compared with its value."""
    with pytest.raises(SystemExit):
        main(["--pass-pipeline=ew-optimize,ew-fuse"])
    assert "--pass-pipeline=ew-optimize,ew-fuse (did you mean --passes?)" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # (after `--`, an option's own name: no hint)
        main([str(gelu.path), "--", "--passes=ew-fuse"])
    assert "unrecognized arguments: --passes=ew-fuse\n" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("ew-fuse,", "an empty pass name beside a ','"),  # (xDSL took it; mlir-opt refuses it)
        (",ew-fuse", "an empty pass name beside a ','"),
        ("ew-optimize,,ew-fuse", "an empty pass name beside a ','"),
        ("func.func(cse)", "xfuse's passes run on the module, not nested in 'func.func(...)'"),
        ("builtin.module(func.func(cse))", "not nested in 'func.func(...)'"),
        ("builtin.module(ew-fuse", "'builtin.module(' whose ')' does not end it"),
        ("builtin.module(ew-fuse),ew-fuse", "'builtin.module(' whose ')' does not end it"),
        ("builtin.module(builtin.module(ew-fuse))", "not nested in 'builtin.module(...)'"),
        ("ew-fuse,func.func(cse)", "not nested in 'func.func(...)'"),  # (xDSL's Unknown token)
        ('"ew-fuse"', "expected a pass name"),
        ("{mode=none}", "expected a pass name"),
    ],
)
def test_a_pipeline_mlir_opt_refuses_or_anchored_elsewhere_is_an_error(
    pipeline: str, message: str
) -> None:
    with pytest.raises(PassSpecError, match=re.escape(message)):
        parse_passes(pipeline)


def test_the_mlir_targets_options_print_as_the_flags(
    capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """xDSL replaced them by the flags': `-t 'mlir{print_generic_format=true}'` printed the
    custom format, as `-t mlir`."""
    arguments = [str(gelu.path), "-t", "mlir{print_generic_format=true}"]
    assert main(arguments) == 0
    assert capsys.readouterr().out.startswith('"builtin.module"() ({')
    assert main([*arguments, "-p", "ew-optimize,ew-fuse", "--print-between-passes"]) == 0
    between = capsys.readouterr().err.split("IR after ew-optimize:")[1]
    assert between.lstrip().startswith('"builtin.module"() ({')


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("mlir{print_generic_format=2}", "bad value '2' for option 'print_generic_format'"),
        (
            "mlir{print_generic_format=true print_generic_format=false}",
            "option 'print-generic-format' given twice",
        ),
        ("mlir{bogus}", "unknown option 'bogus' (options: print-generic-format, "),
    ],
)
def test_a_targets_options_are_read_as_a_passs(
    capsys: pytest.CaptureFixture[str], gelu: Gelu, target: str, error: str
) -> None:
    """`{print_generic_format}` alone was "Incompatible types: given (), expected <class
    'bool'>" (a pass takes it for true), `=1` the same, a repeated key took the last value."""
    for spelled in ("mlir{print_generic_format}", "mlir{print_generic_format=1}"):
        assert main([str(gelu.path), "-t", spelled]) == 0
        assert capsys.readouterr().out.startswith('"builtin.module"() ({')
    with pytest.raises(SystemExit) as info:
        main([str(gelu.path), "-t", target])
    assert info.value.code == 2
    assert f"error: argument -t/--target: mlir: {error}" in capsys.readouterr().err


def test_an_empty_output_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """It ran the pipeline, then failed with "Is a directory: ." (`Path('')`)."""
    with pytest.raises(SystemExit) as info:
        main([str(gelu.path), "-o", ""])
    assert info.value.code == 2
    assert "argument -o/--output-file: expected a file name, not ''" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # ("No such file or directory: ", no name)
        main([""])
    assert info.value.code == 2
    assert "argument input_file: expected a file name, not ''" in capsys.readouterr().err


def test_time_passes_reports_on_stderr(runs: dict[str, Run]) -> None:
    """As mlir-opt's `--mlir-timing`: xDSL printed the lines into the module on stdout, which
    then neither parsed back nor fed FileCheck."""
    run = runs["time_passes"]
    assert run.returncode == 0
    assert re.findall(r"^Pass (\S+) took \S+ seconds$", run.stderr, re.M) == [
        "ew-optimize",
        "canonicalize",
    ]
    assert run.stdout.startswith("builtin.module") and "took" not in run.stdout


def test_output_file(runs: dict[str, Run], paths: dict[str, str]) -> None:
    assert ok(runs["output_file"]).stdout == ""
    written = Path(paths["out"]).read_text()
    assert "func.func @f" in written and "ew.mul" not in written


@pytest.mark.parametrize(
    ("source", "passes"),
    [("bad_ew", []), ("good", ["-p", "ew-to-llvm"]), ("good", ["-p", "ew-optimize{"])],
)
def test_a_failed_run_leaves_the_output_file_alone(
    source: str, passes: list[str], paths: dict[str, str], tmp_path: Path
) -> None:
    """As mlir-opt's: xDSL opened `-o`'s file first, so a syntax or pass error left it empty."""
    output = tmp_path / "kept.mlir"
    output.write_text("// before\n")
    run = run_in_process([paths[source], *passes, "-o", str(output)])
    assert run.returncode == 1 and run.stderr
    assert output.read_text() == "// before\n"


@pytest.mark.parametrize("suffix", ["mlir", "ew"])
def test_the_output_file_may_be_the_input(
    suffix: str, paths: dict[str, str], tmp_path: Path
) -> None:
    """`-o` naming the input writes the result over it, as mlir-opt does (xDSL emptied the file
    before reading it: an empty module, exit status 0, or the .ew source lost)."""
    same = tmp_path / f"same.{suffix}"
    same.write_bytes(Path(paths["good" if suffix == "mlir" else "bom_ew"]).read_bytes())
    ok(run_in_process([str(same), "-p", "ew-optimize", "-o", str(same)]))
    written = same.read_text()
    assert "func.func @" in written
    assert ok(run_in_process(["-f", "mlir", str(same)])).stdout == written  # the module, whole


@pytest.mark.parametrize(
    "arguments",
    [[], ["-"], ["-o", "-"], ["-", "-o", "-"], ["-f", "ew", "-"]],
    ids=["no_file", "dash", "to_dash", "dash_to_dash", "ew_dash"],
)
def test_a_dash_is_stdin_and_stdout(
    arguments: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    gelu: Gelu,
) -> None:
    """As for mlir-opt: `xfuse-opt -` was `[Errno 2] No such file or directory: '-'`, and
    `-o -` wrote a file named `-`."""
    source = gelu.source if "ew" in arguments else GOOD_MLIR
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source.encode())))
    monkeypatch.chdir(tmp_path)
    assert main([*arguments, "-p", "ew-optimize"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("builtin.module {\n  func.func @")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("source", ["y = x * 2;", "# a comment\n\ninput x;\ny = x;"])
def test_ew_source_piped_without_f_ew_says_to_pass_it(
    source: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """stdin is read as MLIR (as mlir-opt reads it): `.ew` source piped in said only "Operation
    y is not registered" (or, after a comment, xDSL's "Expected suffix identifier"). MLIR that
    fails to parse, or `-f mlir`, gets no such note."""
    for arguments, noted in (([], True), (["-f", "mlir"], False)):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source.encode())))
        assert main(arguments) == 1
        err = capsys.readouterr().err
        assert err.startswith("stdin:1:")
        assert ("looks like .ew source: pass -f ew" in err) is noted
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'"foo"() : () -> ()')))
    assert main([]) == 1
    assert "-f ew" not in capsys.readouterr().err


def test_a_byte_order_mark_starts_an_ew_file(runs: dict[str, Run]) -> None:
    """As in a Python source file (it was `1:1: error: unexpected character '\\ufeff'`)."""
    run = runs["bom_ew"]
    assert (run.returncode, run.stderr) == (0, "")
    assert "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32>" in run.stdout


def test_frontend_option_wins_over_the_file_name(runs: dict[str, Run]) -> None:
    """`-f ew` parsed stdin as `.ew` but not a file without the extension (`Unrecognized file
    extension ''`)."""
    for name in ("no_ext_as_ew", "txt_as_ew"):
        run = runs[name]
        assert (run.returncode, run.stderr) == (0, "")
        assert "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32>" in run.stdout


def test_split_input_file(runs: dict[str, Run]) -> None:
    out = ok(runs["split"]).stdout
    first, second = out.split("// -----\n")
    assert "ew.mul" not in first  # x * 1 folded away
    assert "ew.mul %x, %x : tensor<?xf32>" in second


def test_split_input_file_runs_every_chunk_as_mlir_opt(tmp_path: Path) -> None:
    """A failed chunk's error is printed and the next chunks run, their output between the
    separators, exit 1 (xDSL's run stopped at the first error: the good chunk and the later
    chunk's error were never shown); `-o` is then left as it was."""
    path = tmp_path / "chunks.mlir"
    path.write_text(
        "func.func @a(%x: f32) -> f32 {\n  %c = arith.bitcast %x : f32 to i16\n"
        "  func.return %x : f32\n}\n// -----\nfunc.func @b(%x: f32) -> f32 {\n"
        "  func.return %x : f32\n}\n// -----\nfunc.func @c( {\n"
    )
    run = run_in_process([str(path), "--split-input-file"])
    assert run.returncode == 1
    first, second, third = run.stdout.split("// -----\n")
    assert not first and "func.func @b" in second and not third.strip()
    assert re.search(rf"^{re.escape(str(path))}:2:8: error: 'arith.bitcast'", run.stderr, re.M)
    assert re.search(rf"^{re.escape(str(path))}:10:15\n", run.stderr, re.M)
    output = tmp_path / "out.mlir"
    output.write_text("before")
    run = run_in_process([str(path), "--split-input-file", "-o", str(output)])
    assert run.returncode == 1 and output.read_text() == "before"


def test_a_fused_locations_metadata_parses_and_a_range_is_named(tmp_path: Path) -> None:
    """mlir-opt prints a fused location's metadata (`fused<"tag">[...]`), which xDSL's printer
    prints too but its parser did not read ("'[' expected"); a location's range, which xDSL
    has no attribute for, was "')' expected"."""
    fused = 'loc(fused<"tag">["a":1:2, callsite("b":3:4 at "c":5:6)])'
    path = tmp_path / "fused.mlir"
    path.write_text(f"func.func @f(%x: f32) -> f32 {{\n  func.return %x : f32 {fused}\n}}\n")
    run = ok(run_in_process([str(path), "--print-debuginfo"]))
    assert f"func.return %x : f32 {fused}\n" in run.stdout
    path.write_text(
        'func.func @f(%x: f32) -> f32 {\n  func.return %x : f32 loc("f":9:9 to :12)\n}\n'
    )
    run = run_in_process([str(path)])
    assert run.returncode == 1
    assert f"{path}:2:36\n" in run.stderr
    assert "a location's range (`to ...`): xDSL has no range location" in run.stderr


def test_location_aliases_after_the_module_parse_as_mlir_opt_prints_them(tmp_path: Path) -> None:
    """`mlir-opt --mlir-print-debuginfo` writes most `#locN` aliases after the module: xDSL's
    parser stopped at the first use ("undefined symbol alias '#loc3'"). An error is at the
    alias's location; a second definition of one is still an error."""
    path = tmp_path / "debuginfo.mlir"
    text = (
        '#loc2 = loc("a.mlir":1:14)\nmodule {\n'
        '  func.func @a(%arg0: f32 loc("a.mlir":1:14)) -> f32 {\n'
        "    %0 = arith.addf %arg0, %arg0 : f32 loc(#loc3)\n"
        "    return %0 : f32 loc(#loc4)\n  } loc(#loc1)\n} loc(#loc)\n"
        '#loc = loc("a.mlir":0:0)\n#loc1 = loc("a.mlir":1:1)\n'
        '#loc3 = loc("a.mlir":2:8)\n#loc4 = loc(callsite(#loc3 at #loc1))\n'
    )
    path.write_text(text)
    run = ok(run_in_process([str(path), "--print-debuginfo"]))
    assert 'arith.addf %arg0, %arg0 : f32 loc("a.mlir":2:8)' in run.stdout
    assert 'func.return %0 : f32 loc(callsite("a.mlir":2:8 at "a.mlir":1:1))' in run.stdout
    path.write_text(text.replace("arith.addf %arg0, %arg0 : f32", "arith.extf %arg0 : f32 to f32"))
    failed = run_in_process([str(path)])
    assert failed.returncode == 1 and failed.stderr.startswith("a.mlir:2:8: error: 'arith.extf'")
    path.write_bytes(text.replace("\n", "\r\n").encode())  # (a `\r` ended no alias's line)
    assert 'f32 loc("a.mlir":2:8)' in ok(run_in_process([str(path), "--print-debuginfo"])).stdout
    path.write_text(text + '#loc3 = loc("a.mlir":9:9)\n')
    failed = run_in_process([str(path)])
    assert failed.returncode == 1 and "re-declaration of alias '#loc3'" in failed.stderr


def test_an_op_is_located_at_its_name_past_comments(tmp_path: Path) -> None:
    """A comment between `%r =` and the op's name failed an internal assertion (its name was
    found by a regular expression); mlir-opt locates such an op at its name, 3:5."""
    path = tmp_path / "commented.mlir"
    for op_text in ("arith.addf %x, %x : i32", "arith.extf %x : i32 to i32"):
        path.write_text(
            f"func.func @f(%x: i32) -> i32 {{\n  %r = // why\n    {op_text}\n"
            "  func.return %r : i32\n}\n"
        )
        run = run_in_process([str(path)])
        assert run.returncode == 1 and run.stderr.startswith(f"{path}:3:5"), run.stderr
        assert "Traceback" not in run.stderr and "internal error" not in run.stderr


def test_a_trailing_location_alias_is_read_as_mlir_opt_reads_it(tmp_path: Path) -> None:
    """One with a comment after it, or `loc(` on the next line, was "undefined" at its use, and
    so was one that does not parse (mlir-opt: its error at the definition, 5:23)."""
    path = tmp_path / "alias.mlir"
    head = (
        "func.func @f(%a: f32) -> f32 {\n"
        '  %r = "arith.addf"(%a) : (f32) -> f32 loc(#loc1)\n  return %r : f32\n}\n'
    )
    for definition in ('#loc1 = loc("x.py":7:3) // the add\n', '#loc1 =\n  loc("x.py":7:3)\n'):
        path.write_text(head + definition)
        run = run_in_process([str(path)])
        assert run.returncode == 1 and run.stderr.startswith("x.py:7:3: error: 'arith.addf'")
    path.write_text(head + '#loc1 = loc("x.py":7:3:)\n')
    run = run_in_process([str(path)])
    assert run.returncode == 1 and run.stderr.startswith(f"{path}:5:23\n"), run.stderr
    # an indented alias another names; a definition whose own error is another alias's kind
    indented = '  #loc0 = loc("x.py":1:1)\n' + head + "#loc1 = loc(callsite(#loc0 at #loc0))\n"
    path.write_text(indented)
    assert run_in_process([str(path)]).stderr.startswith("x.py:1:1: error: 'arith.addf'")
    path.write_text('#loc2 = "str"\n' + head + "#loc1 = loc(#loc2)\n")
    run = run_in_process([str(path)])
    assert run.stderr.startswith(f"{path}:6:18\n") and "Expected location alias" in run.stderr


def test_a_pass_failing_on_unverified_input_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under --disable-verify a pass meets IR the verifier refuses: it was an internal error
    (status 2) that did not say the input was never verified."""
    monkeypatch.delenv("XFUSE_TRACEBACK", raising=False)
    path = tmp_path / "select.mlir"
    path.write_text(
        "func.func @f(%c: tensor<3xf64>, %x: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %r = ew.select %c, %x, %x : tensor<3xf64>, tensor<3xf32>, tensor<3xf32> "
        "-> tensor<3xf32>\n"
        "  func.return %r : tensor<3xf32>\n"
        "}\n"
    )
    unverified = run_in_process([str(path), "-p", "ew-fuse", "--disable-verify"])
    assert unverified.returncode == 1 and "internal error" not in unverified.stderr
    assert unverified.stderr.startswith("xfuse-opt: error: TypeError: ")
    assert "(the input was not verified: without --disable-verify the verifier" in unverified.stderr
    verified = run_in_process([str(path), "-p", "ew-fuse"])
    assert verified.returncode == 1
    assert verified.stderr.startswith(f"{path}:2:8: error: 'ew.select' operand 'on_true'")


def test_a_chunk_nested_too_deeply_stops_no_other_chunk(tmp_path: Path) -> None:
    """Its RecursionError ended the run: the later chunks never ran (mlir-opt runs them)."""
    path = tmp_path / "deep.mlir"
    nested = "[" * 300 + "]" * 300
    path.write_text(
        "func.func @e() {\n  func.return\n}\n// -----\n"
        f"func.func @f() attributes {{a = {nested}}} {{\n  func.return\n}}\n// -----\n"
        "func.func @g() {\n  func.return\n}\n"
    )
    run = run_in_process([str(path), "--split-input-file"])
    assert run.returncode == 1 and "@e" in run.stdout and "@g" in run.stdout
    assert f"{path}:4: error: input nested too deeply" in run.stderr


def test_shrink_with_split_input_file_keeps_its_verdict(tmp_path: Path) -> None:
    """`--shrink` says whether the input can shrink (exit 1 where it cannot), with
    `--split-input-file` too (the chunk-by-chunk run dropped the verdict: exit 0)."""
    path = tmp_path / "ok.mlir"
    path.write_text("func.func @f(%a: f32) -> f32 {\n  func.return %a : f32\n}\n")
    for extra in ([], ["--split-input-file"]):
        command = [sys.executable, "-m", "xfuse.tools.opt", str(path), "--shrink", *extra]
        run = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert run.returncode == 1 and "Failure, can't shrink" in run.stdout


@pytest.mark.parametrize(
    ("option", "value"),
    [("-t", ""), ("-t", " mlir"), ("-t", "mlir{"), ("-f", "ew{"), ("-f", ""), ("-f", "mlir{}")],
)
def test_a_target_or_frontend_that_is_no_spec_is_a_usage_error(
    option: str, value: str, capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """As `-t bogus` (status 2, naming the option and its choices): these were xDSL's "Error
    parsing pass pipeline specification", status 1, and `-f ''` was ignored."""
    with pytest.raises(SystemExit) as info:
        main([str(gelu.path), option, value])
    flag = "-t/--target" if option == "-t" else "-f/--frontend"
    assert info.value.code == 2
    assert f"argument {flag}: invalid choice: {value!r} (choose from" in capsys.readouterr().err
    assert main([str(gelu.path), "-t", "mlir{print_generic_format=true}"]) == 0


def test_split_ew_source_reports_the_files_lines(tmp_path: Path) -> None:
    """A later `.ew` chunk's errors, locations and warnings counted its lines from the chunk's
    start (line 2 for the file's line 3), where `.mlir` chunks count from the file's."""
    path = tmp_path / "split.ew"
    path.write_text("a = x;\n// -----\nb = $;\n")
    failed = run_in_process([str(path), "--split-input-file"])
    assert failed.returncode == 1 and failed.stderr.startswith(f"{path}:3:5: error:")
    # lines that end in a lone `\r` (or `\r\n`), as the language takes them: xDSL counted the
    # `\n`s before a chunk (line 3 here, for the file's 7)
    for end in ("\r", "\r\n"):
        path.write_bytes(
            end.join(["a = x;", "b = x;", "c = x;", "// -----", "z = x;", "w = $;", ""]).encode()
        )
        failed = run_in_process([str(path), "--split-input-file"])
        assert failed.returncode == 1 and failed.stderr.startswith(f"{path}:6:5: error:")
    path.write_text("a = x;\n// -----\nb = x * 2;\n")
    located = ok(run_in_process([str(path), "--split-input-file", "--print-debuginfo"]))
    second = located.stdout.split("// -----\n")[1]
    assert (
        f'%b = ew.mul %x, %0 : tensor<?xf32>, tensor<f32> -> tensor<?xf32> loc("{path}":3:7)'
        in (second)
    )
    # --parsing-diagnostics prints a chunk's error and goes on, status 0, as for `.mlir` (for
    # `.ew` it did nothing: status 1, the chunks after the bad one never printed).
    path.write_text("a = x * 2;\n// -----\nb = y + ;\n// -----\nc = exp(z);\n")
    diagnosed = run_in_process([str(path), "--split-input-file", "--parsing-diagnostics"])
    assert (diagnosed.returncode, diagnosed.stderr) == (0, "")
    chunks = diagnosed.stdout.split("// -----\n")
    assert (
        chunks[1] == f"{path}:3:9: error: expected an expression, found ';'\nb = y + ;\n        ^\n"
    )
    assert "%c = ew.exp %z : tensor<?xf32>" in chunks[2]
    # A blank chunk's empty program was reported at the file's 1:1; it is on the line below its
    # separator (a file's own blank program stays at 1:1)
    path.write_text("a = x;\n// -----\n\n// -----\nb = y + ;\n// -----\n")
    failed = run_in_process([str(path), "--split-input-file"])
    errors = [line for line in failed.stderr.splitlines() if ": error: " in line]
    assert errors == [
        f"{path}:3:1: error: empty program: expected at least one statement 'name = expr;'",
        f"{path}:5:9: error: expected an expression, found ';'",
        f"{path}:7:1: error: empty program: expected at least one statement 'name = expr;'",
    ]
    path.write_text("\n\n")
    assert run_in_process([str(path), "--split-input-file"]).stderr.startswith(f"{path}:1:1:")


@pytest.mark.parametrize(
    ("body", "pipeline", "message"),
    [
        ('%y = "foo.bar"(%x) : (tensor<?xf32>) -> tensor<?xf32>', "ew-fuse", "cannot fuse"),
        ('"foo.bar"(%x) : (memref<?xf32>) -> ()', "ew-to-llvm", "no lowering for"),
    ],
)
def test_an_unregistered_op_is_named_as_written(
    body: str, pipeline: str, message: str, tmp_path: Path
) -> None:
    """(Every unregistered op was 'builtin.unregistered', xDSL's `name` for all of them.)"""
    signature, returned = (
        ("(%x: tensor<?xf32>) -> tensor<?xf32>", "%y : tensor<?xf32>")
        if "tensor" in body
        else ("(%x: memref<?xf32>)", "")
    )
    path = tmp_path / "unregistered.mlir"
    path.write_text(f"func.func @main{signature} {{\n  {body}\n  func.return {returned}\n}}\n")
    run = run_in_process([str(path), "--allow-unregistered-dialect", "-p", pipeline])
    assert run.returncode == 1 and f"{message} 'foo.bar'" in run.stderr


def test_verify_diagnostics_prints_the_error_and_exits_0(runs: dict[str, Run]) -> None:
    run = runs["verify_diagnostics"]
    assert run.returncode == 0
    assert re.search(r"verifier\.mlir:3:8: error: 'ew\.mul' operand shapes", run.stdout)


# ---------------------------------------------------------------------------------------------
# Hostile input: non-zero exit, a diagnostic with a location, no traceback
# ---------------------------------------------------------------------------------------------

HOSTILE: dict[str, str] = {
    # name -> a regex the diagnostic on stderr must contain (the location first)
    "taken_workspace": r"^error: ew-workspace: the module has a symbol @f_workspace_bytes already, "
    r"the name of the function that sizes @f's workspace: rename that symbol\n$",
    "taken_kernel": r"^error: ew-kernel-to-loops: the module has a symbol @f.kernel1 already, the "
    r"name of a kernel of @f: rename that symbol\n$",
    "taken_entry": r"^error: ew-to-llvm: the module has a symbol @f.packed already, the name of "
    r"@f's entry: rename that symbol\n$",
    "nested_module": r"^error: ew-to-llvm: the module holds a 'builtin.module': ew-to-llvm lowers "
    r"the functions of the module it is given \(lower a nested module by itself\)\n$",
    "nested_libm": r"^error: ew-expand-math: the module holds a 'builtin.module': ew-expand-math "
    r"lowers the functions of the module it is given \(lower a nested module by itself\)\n$",
    "named_expf": r"^error: ew-expand-math: the module has a symbol @expf already, and the code "
    r"ew-expand-math makes calls the C library's expf: rename that symbol\n$",
    "named_malloc": r"^error: ew-to-llvm: the module has a symbol @malloc already, and the code "
    r"ew-to-llvm makes calls the C library's malloc: rename that symbol\n$",
    "split_bad": r"split_bad\.mlir:10:15\n.*\n *\^\^\n *operand is used with type tensor<\?xf64>",
    "truncated": r"truncated\.mlir:4:3\n",
    # at its name (it was at its first operand, 3:15)
    "unknown_op": r"unknown_op\.mlir:3:8\n.*ew\.fma.*\n *\^{6}\n *Operation ew\.fma is not",
    "garbage": r"garbage\.mlir:1:15\n",
    "wrong_type": r"wrong_type\.mlir:3:19\n.*\n.*\n *operand is used with type tensor<\?xf32>",
    "not_a_terminator": (
        r"^\S*not_a_terminator\.mlir:2:8: error: Operation ew\.kernel terminates block in "
        r"single-block region but is not a terminator"
    ),
    "nvvm_dim_index": (
        r"^\S*nvvm_dim_index\.mlir:3:8: error: ew-to-nvvm: a temporary's size must be an "
        r"argument's, at a constant axis"
    ),
    "llvm_dim_index": (
        r"^\S*llvm_dim_index\.mlir:2:8: error: ew-to-llvm: memref\.dim needs a constant index\n"
        r"\S*llvm_dim_index\.mlir:2:8: note: see current operation: %b = memref\.dim"
    ),
    "llvm_alloca": (
        r"^\S*llvm_alloca\.mlir:2:8: error: ew-to-llvm: a memref that does not come from an "
        r"argument or memref\.alloc \('memref\.alloca' makes it\)"
    ),
    "llvm_tensor_function": (
        r"^\S*returned_argument\.mlir:1:1: error: ew-to-llvm: 'func\.func' @f takes or returns "
        r"tensor<\?xf32>"
    ),
    # its output buffer was never written, silently
    "bufferize_returned_argument": (
        r"^\S*returned_argument\.mlir:2:3: error: ew-bufferize: result #0 is the function's "
        r"argument #0 \(%a\): no kernel writes its output buffer \(run ew-fuse first"
    ),
    "f16_tanh": (
        r"^\S*f16_tanh\.mlir:2:8: error: ew-expand-math: 'math\.tanh' on f16: only f32 and f64 "
        r"have a lowering"
    ),
    # xDSL's `Region.block` failed: "'block' property of Region class is only available for
    # single-block regions", naming no pass, op or line
    "bufferize_two_blocks": (
        r"^\S*two_blocks\.mlir:1:1: error: ew-bufferize: @main has 2 blocks: ew-bufferize takes "
        r"functions of one block"
    ),
    "nvvm_two_blocks": r"^\S*two_blocks\.mlir:1:1: error: ew-to-nvvm: @main has 2 blocks",
    # a location inside a name and a call site, as mlir-opt reads it (the callee's file)
    "workspace_two_blocks": (
        r"^\S*two_blocks_alloc\.mlir:1:1: error: ew-workspace: @main has 2 blocks"
    ),
    "caller_loc": r"^caller\.ew:7:8: error: ew-bufferize: 'ew\.exp' is not inside an ew\.kernel",
    # the verifier between passes: its note with the IR kept (the `error:` wrapper dropped it)
    "verify_between_passes": (
        r"error: the pattern must contain at least one `pdl\.operation`(.|\n)*\^\^\^"
    ),
    "name_loc": r"^n\.ew:9:10: error: ew-bufferize: 'ew\.exp' is not inside an ew\.kernel",
    # a pass's own check of the module: an `error:` as any (it was the bare message)
    "symbol_clash": r"^error: ew-to-llvm: the module has a symbol @main\.packed already",
    "llvm_trunc": r"^\S*llvm_trunc\.mlir:2:8: error: 'llvm\.trunc' invalid cast opcode",
    "verifier_at_loc": r"^orig\.ew:8:3: error: 'ew\.constant' result must have a static shape",
    "empty_block": (
        r"^\S*empty_block\.mlir:1:1: error: Operation func\.func contains empty block in "
        r"single-block region"
    ),
    "verifier": (
        r"verifier\.mlir:3:8: error: 'ew\.mul' operand shapes \[\?\], \[\] do not broadcast to "
        r"the result shape \[\]\n(.|\n)*\^\^\^\^\^(.|\n)*\| Operation does not verify"
    ),
    "int_type": (
        r"int_type\.mlir:2:8: error: 'ew\.neg' operand 'operand' at position 0 does not verify:\n"
        r"expected a tensor of f16, bf16, f32 or f64\n"
        r"Underlying verification failure: Unexpected attribute i32"
    ),
    "binary": r"binary\.mlir:1:1\n.*\n\^\nUnexpected character",
    "deep": r"^\S*deep\.mlir: error: input nested too deeply",  # (it named no file)
    "bad_ew": r"bad\.ew:2:5: error: 'tanh' takes 1 argument, got 2\ny = tanh\(h, h\);\n    \^",
    "binary_ew": r"binary\.ew:2:1: error: unexpected character",
    "empty_ew": r"empty\.ew:1:15: error: empty program",
    # xDSL's "Could not parse entire input!", at 1:1 of a file with nothing in it
    # xDSL's "Unrecognized file extension 'txt'" said neither what it takes nor about -f
    "unknown_ext": (
        r"xfuse-opt: error: .*/input\.txt: unknown file extension '\.txt': name the input's "
        r"format with -f \(ew, mlir\), or name the file \.ew or \.mlir"
    ),
    "no_ext": r"xfuse-opt: error: .*/program: no file extension: name the input's format with -f",
    "missing_file": r"xfuse-opt: error: No such file or directory: .*missing\.mlir$",
    "directory": r"xfuse-opt: error: .*Is a directory",
    "unknown_pass": (
        r"xfuse-opt: error: unknown pass 'ew-optimise' \(did you mean 'ew-optimize'\?\)"
    ),
    "bad_option_value": (
        r"xfuse-opt: error: ew-optimize: bad value 'maybe' for option 'unsafe-math': "
        r"expected true or false"
    ),
    "bad_mode": (
        r"xfuse-opt: error: ew-fuse: bad value 'bogus' for option 'mode': "
        r"expected one of greedy, none"
    ),
    "bool_for_int": (
        r"xfuse-opt: error: ew-fuse: bad value 'true' for option 'max-ops': expected an integer"
    ),
    # xDSL reads an unquoted comma list as a list, which a string option does not take
    "unquoted_list": (
        r"xfuse-opt: error: ew-to-llvm: bad value 'contract,afn' for option 'fastmath': "
        r"expected a string \(quote a list: fastmath=\"contract,afn\"\)$"
    ),
    "bool_for_number": (
        r"xfuse-opt: error: ew-cost: bad value 'true' for option 'launch-us': expected a number$"
    ),
    "bool_for_str_or_int": (
        r"xfuse-opt: error: ew-cost: bad value 'false' for option 'shape': expected a string or "
        r"an integer$"
    ),
    "repeated_option": r"xfuse-opt: error: ew-fuse: option 'max-ops' given twice",
    "huge_exponent": (
        r"xfuse-opt: error: ew-strength-reduce: bad value '1000000000' for option "
        r"'max-exponent': expected an integer from 2 to 16$"
    ),
    "unknown_option": (
        r"xfuse-opt: error: ew-optimize: unknown option 'fast' \(options: unsafe-math\)"
    ),
    "long_int": (
        r"/long_int\.mlir:2:22\n.*\n *\^{5000}\n *integer literal of 5000 digits: at most 4300"
    ),
    "long_int_split": r"/long_int_split\.mlir:7:25\n(.|\n)*integer literal of 4301 digits",
    # hexadecimal has no digit limit: the value parses, and is no float's bits
    "long_hex": r"/long_hex\.mlir:2:22\n(.|\n)*hexadecimal float must be the 64 bits of an f64",
    "unregistered_op": (
        r"/unregistered_op\.mlir:2:8\n.*\n *\^{8}\n *Operation ew\.bogus is not registered"
    ),
    "zeros_then_long_int": r"/zeros_then_long_int\.mlir:3:23\n(.|\n)*integer literal of 4301",
    "long_hex_int": (
        r"/long_hex_int\.mlir:2:23\n(.|\n)*hex integer literal of 3700 digits: at most 3571"
    ),
    "use_before_def": (
        r"use_before_def\.mlir:2:8: error: 'ew\.add' operand #0 is used before its definition"
    ),
    "undefined": (
        r"undefined\.mlir:3:19\n.*\n *\^{8}\n *%nowhere is used but never defined "
        r"\(nor are %y2\)"
    ),
    "redefined_symbol": (
        r"^\S*redefined_symbol\.mlir:6:1: error: 'func\.func' Redefinition of symbol \"f\"\n"
    ),
    "unranked_arg": (
        r"^\S*unranked_arg\.mlir:1:1: error: "
        r"ew-fuse: 'func\.func' @f argument #0 \(%x\) has type tensor<\*xf32>: ew-fuse takes "
        r"functions whose arguments and results are ranked tensors of f16, bf16, f32 or f64 "
        r"with no encoding"
    ),
    "encoded_arg": (
        r"^\S*encoded_arg\.mlir:1:1: error: "
        r"ew-bufferize: 'func\.func' @f argument #0 \(%x\) has type tensor<\?xf32, \"enc\">: "
        r"ew-bufferize takes functions whose arguments and results are ranked tensors of f16, "
        r"bf16, f32 or f64 with no encoding"
    ),
    "encoded_arg_fuse": (
        r"^\S*encoded_arg\.mlir:1:1: error: "
        r"ew-fuse: 'func\.func' @f argument #0 \(%x\) has type tensor<\?xf32, \"enc\">"
    ),
    "encoded_temporary": (
        r"^\S*encoded_temporary\.mlir:2:8: error: ew-bufferize: 'ew\.kernel' result #0 has type "
        r"tensor<\?xf32, \"enc\">: ew-bufferize takes tensors with no encoding\n"
    ),
    "scalar_arg": (
        r"^\S*scalar_arg\.mlir:1:1: error: ew-bufferize: 'func\.func' @f argument #1 \(%s\) "
        r"has type f32: ew-bufferize takes"
    ),
    "bufferize_twice": (
        r"ew-bufferize: 'ew\.kernel' is already bufferized \(on memrefs\): ew-bufferize "
        r"takes ew\.kernel ops on tensors \(the output of ew-fuse\)"
    ),
    # loops are past ew-bufferize: "run ew-fuse first" sent the user the wrong way
    "bufferize_loops": (
        r"^error: ew-bufferize: '[a-z]+\.[a-z_]+' is not inside an ew\.kernel \(ew-bufferize takes "
        r"ew\.kernel ops on tensors, the output of ew-fuse\)"
    ),
    # a pass's error at an op is located as mlir-opt's: at the op's place in an MLIR file, at
    # its source token in a .ew program (it was the message, then the op's Python repr)
    "bufferize_unfused": (
        r"^\S*good\.mlir:2:10: error: ew-bufferize: 'ew\.constant' is not inside an ew\.kernel "
        r"\(run ew-fuse first\)\n\S*good\.mlir:2:10: note: see current operation: %one = "
        r"ew\.constant 1\.0"
    ),
    "llvm_unexpanded": (
        r"^\S*gelu\.ew:\d+:\d+: error: ew-to-llvm: no lowering for 'math\.tanh' \(ew-expand-math "
        r"(.|\n)*\n\S*gelu\.ew:\d+:\d+: note: see current operation: %\d+ = math\.tanh"
    ),
    # a GPU entry's ops are at its kernel's location (they were loc(unknown))
    # a .ew program's function is at its start (an error at it had no line), and an error of
    # no op is an `error:` too (both were the bare message)
    "cost_shape_rank": (
        r"^\S*rank2\.ew:1:1: error: ew-cost: shape 4096 has 1 dims but the function has rank-2 "
        r"tensors"
    ),
    "cost_unknown_epilogue": r"^error: ew-cost: no function has an input named 'zz'$",
    "cost_lowered": r"^\S*rank2\.ew:1:1: error: ew-cost: 'llvm\.func' @main is lowered to LLVM",
    # (a split file's second program's function was at 1:1, the first's)
    "cost_split_second": r"\S*split_rank\.ew:5:1: error: ew-cost: shape 4096 has 1 dims",
    "nvvm_twice": (
        r"^\S*gelu\.ew:4:9: error: ew-to-nvvm: no GPU lowering for '[a-z_.]+'\n"
        r"\S*gelu\.ew:4:9: note: see current operation"
    ),
    "linalg_unfused": (
        r"^\S*gelu\.ew:2:7: error: ew-to-linalg: 'ew\.add' is not inside a kernel; run ew-fuse "
        r"first\n\S*gelu\.ew:2:7: note: see current operation: %h = ew\.add"
    ),
    "fuse_bufferized": (
        r"^\S*gelu\.ew:\d+:\d+: error: ew-fuse: cannot fuse 'ew\.kernel': ew-fuse takes ew ops "
        r"on tensors in one block \(run it before ew-bufferize\)\n\S*gelu\.ew:\d+:\d+: note: "
        r"see current operation: ew\.kernel ins\("
    ),
    "malformed_pipeline": r"pass-pipeline:1:13\new-optimize\{\n *\^\n *Expected argument name",
    "bad_output_path": r"xfuse-opt: error: .*No such file or directory: .*out\.mlir",
    # xDSL's printers of other targets raised NotImplementedError and AssertionError
    "llvm_target_unlowered": (
        r"^error: target 'llvm' cannot print this IR \(Conversion not implemented for op: "
        r"func\.func\): lower it to that target's dialects first \(`-p xfuse-default -t llvm`"
    ),
    "asm_target_on_llvm_dialect": (
        r"^error: target 'x86-asm' cannot print this IR \(its printer met an op it does not "
        r"take\)"
    ),
    # and the wat, wgsl and csl printers printed nothing of ops not of their dialects: status 0
    "wat_target_of_other_ops": (
        r"^error: target 'wat' cannot print this IR \(it printed nothing: its printer skips ops "
        r"not of its dialects\)"
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_fails_politely(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    assert run.returncode == 1
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    assert re.search(HOSTILE[name], run.stderr), run.stderr


def test_every_command_is_checked() -> None:
    checked_elsewhere = {"gelu", "gelu_optimize", "gelu_generic", "between_passes", "output_file"}
    checked_elsewhere |= {"time_passes"}
    checked_elsewhere |= {"split", "verify_diagnostics", "no_ext_as_ew", "txt_as_ew", "bom_ew"}
    checked_elsewhere |= {"empty", "comment_only"}
    assert set(COMMANDS) == set(HOSTILE) | checked_elsewhere


def test_help_says_what_xfuse_opt_is(capsys: pytest.CaptureFixture[str]) -> None:
    """It was xdsl-opt's "xDSL modular optimizer driver", naming neither .ew nor the passes."""
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "the .ew frontend and xfuse's passes" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("name", ["empty", "comment_only"])
def test_an_input_without_operations_is_an_empty_module(runs: dict[str, Run], name: str) -> None:
    """As for mlir-opt (xDSL's parser said "Could not parse entire input!")."""
    run = runs[name]
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.strip() == "builtin.module {\n}"


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag\n"),
        # abbreviations are not options: a later option would change what they mean; a
        # misspelt option says which it is closest to, as `xfuse`'s subcommands do
        (["--list-pass"], "unrecognized arguments: --list-pass (did you mean --list-passes?)"),
        (["--pass", "ew-fuse", "-f", "ew"], "unrecognized arguments: --pass (did you mean"),
        (["--passs", "ew-fuse"], "unrecognized arguments: --passs (did you mean --passes?)"),
        (["gelu.ew", "-"], "unrecognized arguments: -\n"),  # stdin: no "did you mean -v?"
        (["-t", "nope", "gelu.ew"], "invalid choice: 'nope'"),
        (["-f", "nope", "gelu.ew"], "invalid choice: 'nope'"),
    ],
)
def test_bad_command_lines_are_argparse_errors(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(arguments)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# A bad option value: one error, naming the pass, the option and what it takes, before any pass
# ---------------------------------------------------------------------------------------------

FLAGS = "reassoc, nnan, ninf, nsz, arcp, contract, afn"
BAD_OPTIONS: dict[str, str] = {
    # -p's pass and option -> what the option takes
    "ew-fuse{mode=bogus}": "one of greedy, none",
    "ew-fuse{max-ops=0}": "an integer from 1 to 2^63 - 1",
    "ew-fuse{max-ops=9223372036854775808}": "an integer from 1 to 2^63 - 1",  # (was no limit)
    "ew-strength-reduce{max-exponent=1}": "an integer from 2 to 16",
    "ew-kernel-to-loops{vector-bytes=48}": "0 or a power of two up to 64",
    "ew-kernel-to-loops{vector-bytes=-64}": "0 or a power of two up to 64",
    "ew-kernel-to-loops{vector-bytes=128}": "0 or a power of two up to 64",
    "ew-kernel-to-loops{vector-bytes=4611686018427387904}": "0 or a power of two up to 64",
    "ew-kernel-to-loops{store-alignment=24}": "0 or a power of two up to 64",
    "ew-kernel-to-loops{store-alignment=128}": "0 or a power of two up to 64",
    "ew-kernel-to-loops{max-loop-depth=0}": "an integer from 1 to 2^63 - 1",
    "ew-kernel-to-loops{max-loop-depth=9223372036854775808}": "an integer from 1 to 2^63 - 1",
    "ew-workspace{alignment=3}": "a power of two from 8 to 4096",
    "ew-workspace{alignment=4}": "a power of two from 8 to 4096",
    "ew-workspace{alignment=8192}": "a power of two from 8 to 4096",
    "ew-workspace{alignment=4611686018427387904}": "a power of two from 8 to 4096",
    "ew-expand-math{math=fast}": "one of approx, libm",
    "ew-expand-math{library=svml}": "one of libm, libdevice",
    "ew-to-nvvm{math=libm}": "one of approx, ptx-approx",
    "ew-to-llvm{fastmath=turbo}": f"none, fast or a comma list of {FLAGS}",
    "ew-expand-math{fastmath=turbo}": f"none, fast or a comma list of {FLAGS}",
    # mlir-opt rejects `fastmath<>` and `fastmath<contract,,afn>`; both meant none before
    'ew-expand-math{fastmath=""}': f"none, fast or a comma list of {FLAGS}",
    'ew-to-llvm{fastmath="contract,,afn"}': f"none, fast or a comma list of {FLAGS}",
    "ew-cost{device=tpu}": (
        "one of h100-sxm, h100-pcie, h200, a100-80gb, b200, h100, a100, h200-sxm"
    ),
    "ew-cost{dtype=int8}": "one of float16, bfloat16, float32, float64, f16, bf16, f32, f64 or ir",
    # numpy's codes are not the option's names (`float` priced float64): as `xfuse cost --dtype`
    "ew-cost{dtype=float}": "one of float16, bfloat16, float32, float64, f16, bf16, f32, f64 or ir",
    "ew-cost{dtype=f4}": "one of float16, bfloat16, float32, float64, f16, bf16, f32, f64 or ir",
    "ew-cost{shape=4x-5}": (
        "sizes >= 0 joined by 'x' (like 4096x14336), fewer than 2**63 elements in all"
    ),
    "ew-cost{launch-us=-1}": "a finite number >= 0",
    "xfuse-default{math=ptx-approx}": "one of approx, libm",
    'xfuse-default{fastmath="contract,turbo"}': f"none, fast or a comma list of {FLAGS}",
}


def bad_option(spec: str) -> tuple[type[ModulePass], str, object, str]:
    """The pass class, the option, its value as `-p` parses it, and the expected message."""
    ((name, parameters),) = [(s.name, s.parameters) for s in parse_pipeline(spec)]
    ((option, (value,)),) = parameters.items()
    text = spec[spec.index("=") + 1 : -1].strip('"')
    message = f"{name}: bad value '{text}' for option '{option}': expected {BAD_OPTIONS[spec]}"
    return ALL_PASSES[name](), option, value, message


@pytest.mark.parametrize("spec", BAD_OPTIONS)
def test_a_bad_option_is_one_error_before_any_pass_runs(
    spec: str, capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """`xfuse-opt` reports it as `xfuse-opt: error: pass: bad value ... for option ...:
    expected ...` and nothing else: the passes before it (`ew-cost` reports to stderr) never run.
    Before, a value out of range was seen in `apply`, as a ValueError in some passes and a
    DiagnosticException in others, each in its own words."""
    _, _, _, message = bad_option(spec)
    assert main([str(gelu.path), "-p", f"ew-fuse,ew-cost,{spec}"]) == 1
    assert capsys.readouterr() == ("", f"xfuse-opt: error: {message}\n")


@pytest.mark.parametrize("spec", BAD_OPTIONS)
def test_a_pass_made_with_a_bad_option_raises_its_option_error(spec: str) -> None:
    pass_class, option, value, message = bad_option(spec)
    with pytest.raises(PassOptionError) as info:
        pass_class(**{option.replace("-", "_"): value})
    assert str(info.value) == message and isinstance(info.value, ValueError)


@pytest.mark.parametrize("spec", BAD_OPTIONS)
def test_a_pass_option_error_pickles(spec: str) -> None:
    """(A process pool's worker sends its errors pickled: one that does not unpickle broke it.)"""
    pass_class, option, value, message = bad_option(spec)
    with pytest.raises(PassOptionError) as info:
        pass_class(**{option.replace("-", "_"): value})
    copied = pickle.loads(pickle.dumps(info.value))
    assert (str(copied), copied.option, copied.value) == (message, info.value.option, value)


def test_sizes_up_to_their_bounds_are_options() -> None:
    """A page's alignment and AVX-512's vector width are the largest each pass takes (beyond,
    the index arithmetic near 2**63 could overflow), and they are taken."""
    assert EwWorkspacePass(alignment=4096).alignment == 4096
    assert EwKernelToLoopsPass(vector_bytes=64).vector_bytes == 64


@pytest.mark.parametrize(
    ("target", "math", "message"),
    [
        (
            "cuda",
            "libm",
            "ew-to-nvvm: bad value 'libm' for option 'math': expected one of approx, ",
        ),
        (
            "cpu",
            "ptx-approx",
            "ew-expand-math: bad value 'ptx-approx' for option 'math': expected ",
        ),
    ],
)
def test_default_pipeline_takes_the_math_of_its_target(
    target: Target, math: Math, message: str
) -> None:
    """Each target's `math` words, in the words of the pass that takes them."""
    with pytest.raises(PassOptionError, match=f"^{re.escape(message)}"):
        default_pipeline(target=target, math=math)


def test_compile_options_reject_an_extra_pass_with_a_bad_option_before_compiling() -> None:
    with pytest.raises(ValueError, match="^extra_passes: ew-strength-reduce: bad value '1' for"):
        Options(extra_passes="ew-strength-reduce{max-exponent=1}")


# ---------------------------------------------------------------------------------------------
# Every pass on the IR of every stage: a result that verifies, or a diagnostic naming the op
# ---------------------------------------------------------------------------------------------


def stage_modules(source: str, fuse: bool) -> dict[str, ModuleOp]:
    """The program after each stage of `xfuse.compile`'s pipeline."""
    module = parse_program(source)
    modules = {"frontend": module.clone()}
    ctx = pipeline_context()
    options = Options(fuse=fuse)
    for pass_ in options.passes():
        pass_.apply(ctx, module)
        modules[pass_.name] = module.clone()
    return modules


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_every_pass_on_every_stage_verifies_or_names_the_op(fuse: bool, gelu: Gelu) -> None:
    """Each pass given the input of an earlier stage or the output of a later one (ew-bufferize
    twice, ew-fuse on memrefs, ew-cost on loops) fails with a diagnostic naming the op it cannot
    handle, never a raw Python exception from deep inside it."""
    ctx = pipeline_context()
    for stage, module in stage_modules(gelu.source, fuse).items():
        for name, factory in ALL_PASSES.items():
            result = module.clone()
            try:
                with contextlib.redirect_stderr(io.StringIO()):  # ew-cost's report
                    factory()().apply(ctx, result)
            except DiagnosticException as error:
                assert re.search(r"'\w+\.[\w.]+'", str(error)), (stage, name, str(error))
            else:
                result.verify()


@pytest.mark.parametrize(
    "spec, options",
    [
        ("xfuse-default", {}),
        ("xfuse-default{fuse=false math=libm}", {"fuse": False, "math": "libm"}),
    ],
)
def test_xfuse_default_runs_the_pipeline_of_xfuse_compile(
    spec: str, options: dict[str, object], capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    main([str(gelu.path), "-p", spec])
    compiled = xfuse.compile(gelu.source, **options)  # type: ignore[arg-type]
    assert capsys.readouterr().out.strip() == compiled.ir("ew-to-llvm").strip()


def test_every_entry_point_defaults_to_the_programs_arithmetic_as_written() -> None:
    # The default is spelled where each entry point is declared (the compile driver does not
    # import xDSL to read it): they must agree, on IEEE's rounding of each op (no FMA).
    defaults = {
        inspect.signature(function).parameters["fastmath"].default
        for function in (xfuse.compile, xfuse.jit, default_pipeline)
    }
    defaults |= {Options().fastmath, XfuseDefaultPass().fastmath, EwToLlvmPass().fastmath}
    defaults.add(EwExpandMathPass().fastmath)
    assert defaults == {"none"}


@dataclass(frozen=True)
class OptionalOptionsPass(ModulePass):
    """A pass whose numeric options are optional or unions, as none of xfuse's passes has yet."""

    name = "optional-options"

    limit: int | None = None
    depth: typing.Optional[int] = None  # noqa: UP045 - the spelling the check must see through
    factor: float | int | None = None
    flag: bool | None = None
    label: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Nothing: only its options are tested."""


def parsed_options(options: str) -> OptionalOptionsPass:
    """`optional-options{<options>}` through `parse_passes`, as `xfuse-opt -p` reads it."""
    (parsed,) = parse_passes(
        f"optional-options{{{options}}}", {"optional-options": lambda: OptionalOptionsPass}
    )
    return typing.cast(OptionalOptionsPass, parsed)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (".5", 0.5),
        ("-.5", -0.5),
        ("+.25e1", 2.5),
        ("1e+3", 1000.0),
        ("1.5E+3", 1500.0),
        ("+1e3", 1000.0),  # (a malformed pipeline to xDSL's lexer)
        ("-1e-3", -0.001),
        ("-2.50", -2.5),
    ],
)
def test_a_float_option_takes_what_xdsl_lexer_cannot(text: str, value: float) -> None:
    """`.5` and `1e+3`, which mlir-opt's `strtod` reads, were "Error parsing pass pipeline
    specification" (no token of xDSL's lexer starts with a point; `1e+3` lexed as `1e`, `+3`)."""
    assert parsed_options(f"factor={text} limit=2").factor == value
    assert parsed_options(f"limit=2 factor={text}").factor == value


def test_a_quoted_string_keeps_what_looks_like_a_float() -> None:
    assert parsed_options('label="x=.5,1e+3" factor=.5').label == "x=.5,1e+3"


def test_an_integer_option_refuses_a_point_float_by_its_name() -> None:
    with pytest.raises(
        PassSpecError, match="^optional-options: bad value '.5' for option 'limit': expected an"
    ):
        parsed_options("limit=.5")


@pytest.mark.parametrize("option", ["limit", "depth", "factor"])
@pytest.mark.parametrize("value", ["true", "false"])
def test_a_bool_for_an_optional_number_option_names_the_option(option: str, value: str) -> None:
    """xDSL takes `true` for an int option as 1 (a bool is an int to Python): refused for every
    option typed int or float, optional or in a union, not only one typed exactly `int`."""
    expected = "a number" if option == "factor" else "an integer"
    (spec,) = parse_pipeline(f"optional-options{{{option}={value}}}")
    with pytest.raises(
        PassSpecError,
        match=f"^optional-options: bad value '{value}' for option '{option}': expected {expected}$",
    ):
        pass_from_spec(OptionalOptionsPass, spec)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e3", 1000.0),
        ("1E3", 1000.0),
        ("1e-3", 0.001),
        ("1.5e-3", 0.0015),
        ('"1e+3"', 1000.0),  # unquoted, xDSL's lexer splits it at the `+`
        ("inf", math.inf),
        ("-inf", -math.inf),
        ("-0.0", -0.0),
    ],
)
def test_a_float_option_takes_a_float_spelled_as_mlir_opt_takes_it(text: str, value: float) -> None:
    """xDSL's lexer takes `1e3`, `inf` and `nan` for words: they were strings, "expected a
    number"; mlir-opt reads a float option with C's `strtod`, which takes them all."""
    (spec,) = parse_pipeline(f"optional-options{{factor={text}}}")
    factor = pass_from_spec(OptionalOptionsPass, spec).factor
    assert factor == value and math.copysign(1, factor) == math.copysign(1, value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("stats", True),
        ("stats=1", True),
        ("stats=TRUE", True),
        ("stats=True", True),
        ("stats=0", False),
        ("stats=FALSE", False),
        ("stats=False", False),
        # quoted, as mlir-opt takes them (they were "bad value 'true' ... expected true or false")
        ('stats="true"', True),
        ('stats="1"', True),
        ('stats="false"', False),
    ],
)
def test_a_bool_option_takes_what_mlir_opt_takes(text: str, value: bool) -> None:
    """mlir-opt's `{stats}` (a bool given alone is true) and LLVM's other spellings of a bool
    were "bad value '' for option 'stats'" (and '1', 'TRUE')."""
    (spec,) = parse_pipeline(f"ew-fuse{{{text}}}")
    fuse = pass_from_spec(EwFusePass, spec)
    assert fuse.stats is value


@pytest.mark.parametrize("text", ["2", "yes", '"2"', '"yes"'])
def test_a_bool_option_refuses_other_words(text: str) -> None:
    (spec,) = parse_pipeline(f"ew-fuse{{stats={text}}}")
    with pytest.raises(PassSpecError, match="^ew-fuse: bad value .* for option 'stats': expected"):
        pass_from_spec(EwFusePass, spec)


def test_a_string_option_takes_true_as_text() -> None:
    """mlir-opt reads a string option's `true` as text; xDSL's lexer made it a bool ("expected
    a string"): `ew-cost{epilogue=true}` names an input `true`."""
    (spec,) = parse_pipeline("ew-cost{epilogue=true}")
    assert pass_from_spec(EwCostPass, spec).epilogue == "true"
    (spec,) = parse_pipeline("ew-cost{epilogue=false}")
    assert pass_from_spec(EwCostPass, spec).epilogue == "false"


def test_an_integer_option_takes_a_quoted_integer() -> None:
    """As mlir-opt does (`canonicalize{max-iterations="3"}`): it was "expected an integer"."""
    (spec,) = parse_pipeline('ew-fuse{max-ops="5"}')
    assert pass_from_spec(EwFusePass, spec).max_ops == 5
    (spec,) = parse_pipeline('ew-fuse{max-ops="5x"}')
    with pytest.raises(PassSpecError, match="^ew-fuse: bad value '5x' for option 'max-ops'"):
        pass_from_spec(EwFusePass, spec)


@pytest.mark.parametrize(
    ("value", "read"),
    [("010", 8), ("0x10", 16), ("0X1f", 31), ("0b11", 3), ("0o17", 15), ('"010"', 8), ("10", 10)],
)
def test_an_integer_option_reads_bases_as_mlir_opt(value: str, read: int) -> None:
    """LLVM's options read an integer with radix 0 (`canonicalize{max-iterations=010}` is 8 to
    mlir-opt 22, `0x10` 16, `0b11` 3, `0o17` 15): `010` was 10, `0x40` "expected an integer"."""
    (fuse,) = parse_passes(f"ew-fuse{{max-ops={value}}}")
    assert cast(EwFusePass, fuse).max_ops == read
    with pytest.raises(PassSpecError, match="^ew-fuse: bad value '09' for option 'max-ops'"):
        parse_passes("ew-fuse{max-ops=09}")  # (not octal: as mlir-opt, refused)
    with pytest.raises(PassSpecError, match="^ew-fuse: bad value '-0x10' for option 'max-ops'"):
        parse_passes("ew-fuse{max-ops=-0x10}")  # (xDSL's lexer could not read it)
    with pytest.raises(PassSpecError, match="^ew-fuse: bad value '0O17' for option 'max-ops'"):
        parse_passes("ew-fuse{max-ops=0O17}")  # (LLVM's `0o` is lower case only)
    for zero in ("-0", "+0"):  # (named as spelled: `-0` was '0', xDSL's lexer's int)
        with pytest.raises(PassSpecError, match=f"^ew-fuse: bad value '\\{zero}' for option"):
            parse_passes(f"ew-fuse{{max-ops={zero}}}")
    for float_option in ("launch-us=0b11", "launch-us=0o17"):  # (strtod reads neither)
        with pytest.raises(PassSpecError, match="expected a finite number >= 0|expected a number"):
            parse_passes(f"ew-cost{{{float_option}}}")


def test_a_float_option_takes_nan() -> None:
    (spec,) = parse_pipeline("optional-options{factor=nan}")
    factor = pass_from_spec(OptionalOptionsPass, spec).factor
    assert factor is not None and math.isnan(factor)


def test_an_integer_option_still_refuses_a_float() -> None:
    (spec,) = parse_pipeline("optional-options{limit=1e3}")
    with pytest.raises(
        PassSpecError, match="^optional-options: bad value '1e3' for option 'limit'"
    ):
        pass_from_spec(OptionalOptionsPass, spec)


def test_xfuse_opt_takes_a_float_option_in_exponent_form(
    capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """It was `ew-cost: bad value '1e3' for option 'launch-us': expected a number`."""
    assert main([str(gelu.path), "-p", "ew-fuse,ew-cost{launch-us=1e3}"]) == 0
    assert "launch 1000 us" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+inf", "+nan", "+Infinity"])
def test_xfuse_opt_names_the_option_that_must_be_finite(
    value: str, capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """In the pass's own words for its range (they were "expected a number", as for a word)."""
    assert main([str(gelu.path), "-p", f"ew-fuse,ew-cost{{launch-us={value}}}"]) == 1
    expected = f"ew-cost: bad value '{value}' for option 'launch-us': expected a finite number >= 0"
    assert capsys.readouterr() == ("", f"xfuse-opt: error: {expected}\n")


@pytest.mark.parametrize("value", ["1e400", "-.5", "-1e+3", "1.0e400", "-2.50", "-1.5e3"])
def test_a_refused_float_is_named_as_spelled(value: str) -> None:
    """The pass refused the float read from it: `1e400` was named 'inf', `-.5` '-0.5'."""
    with pytest.raises(
        PassOptionError,
        match=f"^ew-cost: bad value '{re.escape(value)}' for option 'launch-us': expected a finite",
    ):
        parse_passes(f"ew-cost{{launch-us={value}}}")


def test_numbers_and_bools_where_an_option_takes_them_still_parse() -> None:
    (spec,) = parse_pipeline("optional-options{limit=3 depth=4 factor=0.5 flag=true}")
    parsed = pass_from_spec(OptionalOptionsPass, spec)
    assert parsed == OptionalOptionsPass(limit=3, depth=4, factor=0.5, flag=True)


def test_debuginfo_of_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    """A file name's undecodable byte (`os.fsdecode`'s surrogate) failed `--print-debuginfo`
    ("'utf-8' codec can't encode character '\\udcff'"): it is an escape in the location."""
    program = Path(os.fsdecode(bytes(tmp_path) + b"/\xffg.ew"))
    program.write_text("y = x * 2;\n")
    done = subprocess.run(
        [sys.executable, "-m", "xfuse.tools.opt", str(program), "--print-debuginfo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert f'loc("{tmp_path}/\\\\udcffg.ew":1:7)' in done.stdout


def test_the_loops_of_a_kernel_are_at_its_location(
    gelu: Gelu, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As MLIR's lowerings locate what they make: the loops, loads and stores were
    `loc(unknown)`, and `ew-cost` on them said so with no line."""
    passes = "ew-fuse,ew-bufferize,ew-kernel-to-loops"
    assert main([str(gelu.path), "-p", passes, "--print-debuginfo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    lowered = [
        line for line in lines if re.search(r"scf\.for|memref\.(load|store)|^ {4,}\} loc", line)
    ]
    assert len(lowered) > 4 and not [line for line in lowered if "loc(unknown)" in line]
    # several kernels: the calls of the outlined ones, those functions, and the buffers
    # ew-bufferize allocates and frees are at their kernels' too
    program = tmp_path / "two_kernels.ew"
    program.write_text("input x[t, d], w[t, 1];\na = exp(x) * w;\nout = a + x;\n")
    each = "ew-fuse{max-ops=1},ew-bufferize,ew-kernel-to-loops"
    assert main([str(program), "-p", each, "--print-debuginfo"]) == 0
    printed = capsys.readouterr().out.splitlines()
    unknown = [line.strip() for line in printed if "loc(unknown)" in line]
    assert unknown == ["} loc(unknown)"]  # (the module's own: the function is at the program's)
    assert main([str(gelu.path), "-p", f"{passes},ew-cost"]) == 1
    assert re.match(r"^\S*gelu\.ew:\d+:\d+: error: ew-cost: 'scf\.for'", capsys.readouterr().err)


def test_debuginfo_of_a_non_ascii_file_name_parses_back(tmp_path: Path) -> None:
    """xDSL prints `dé` escaped (`"d\\C3\\A9"`) and lexed that back as bytes, which a location
    does not take ("Unexpected location syntax": `--print-debuginfo`'s output did not parse
    back) and a string attribute kept as a `BytesAttr`."""
    program = tmp_path / "dé.ew"
    program.write_text("y = exp(x) * 2;\n")
    assert main([str(program), "--print-debuginfo", "-o", str(tmp_path / "once.mlir")]) == 0
    printed = (tmp_path / "once.mlir").read_text()
    assert 'd\\C3\\A9.ew":1:5)' in printed
    assert (
        main([str(tmp_path / "once.mlir"), "--print-debuginfo", "-o", str(tmp_path / "2.mlir")])
        == 0
    )
    assert (tmp_path / "2.mlir").read_text() == printed
    module = parse_ir(printed)
    exp = next(op for op in module.walk() if op.name == "ew.exp")
    assert exp.location == FileLineColLoc(StringAttr(str(program)), IntAttr(1), IntAttr(5))
    function = parse_ir(
        'func.func @f(%x: f32 {a = "t\\C3\\A9", b = "\\FF"}) {\n  func.return\n}'
    ).body.block.first_op
    assert isinstance(function, func.FuncOp) and function.arg_attrs is not None
    attributes = function.arg_attrs.data[0].data
    assert attributes["a"] == StringAttr("té") and isinstance(attributes["b"], BytesAttr)


def test_llvm_target_prints_the_same_flags_in_every_process(tmp_path: Path) -> None:
    """xDSL's `llvm` target listed fast-math flags in a frozenset's order, which the string
    hash decides: each process printed its own order (`fmul afn contract`, `fmul contract
    afn`). Now LLVM's, as mlir-translate prints them."""
    program = tmp_path / "fmp.ew"
    program.write_text("y = x * b + c / x;\n")
    command = [sys.executable, "-m", "xfuse.tools.opt", str(program), "-t", "llvm"]
    outputs = [
        subprocess.run(
            [*command, "-p", "xfuse-default{fastmath=fast}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(1, 4)
    ]
    assert outputs[0] == outputs[1] == outputs[2]
    assert " = fmul reassoc nnan ninf nsz arcp contract afn float " in outputs[0]


def test_llvm_target_keeps_a_nans_sign_and_payload(tmp_path: Path) -> None:
    """llvmlite wrote each f16 constant through `struct`'s `e` format, which makes every NaN
    0x7E00: `-t llvm` printed `half 0x7FF8000000000000` for 0x7E05 and 0xFC01 (signalling,
    negative); it quieted a signalling f32 one (0x7F800001, as mlir-translate prints it
    `float 0x7FF0000020000000`). LLVM reads them back bit for bit now, in a vector and alone."""
    program = tmp_path / "nans.mlir"
    program.write_text(
        "llvm.func @v() -> vector<4xf16> {\n"
        "  %0 = llvm.mlir.constant(dense<[0x7E05, 0xFC01, 0x7C00, 0x3C00]> : vector<4xf16>)"
        " : vector<4xf16>\n"
        "  llvm.return %0 : vector<4xf16>\n}\n"
        "llvm.func @s() -> f16 {\n"
        "  %0 = llvm.mlir.constant(0xFE01 : f16) : f16\n"
        "  llvm.return %0 : f16\n}\n"
        "llvm.func @f() -> vector<2xf32> {\n"
        "  %0 = llvm.mlir.constant(dense<[0x7F800001, 0xFFC12345]> : vector<2xf32>)"
        " : vector<2xf32>\n"
        "  llvm.return %0 : vector<2xf32>\n}\n"
    )
    run = ok(run_in_process([str(program), "-t", "llvm"]))
    read_back = str(llvm_binding.parse_assembly(run.stdout))
    assert "ret <4 x half> <half 0xH7E05, half 0xHFC01, half 0xH7C00, half 0xH3C00>" in read_back
    assert "ret half 0xHFE01" in read_back
    assert "ret <2 x float> <float 0x7FF0000020000000, float 0xFFF82468A0000000>" in read_back


def test_a_string_left_open_is_an_error_at_once() -> None:
    """xDSL's lexer took time tripling with each 2 characters of a string literal left open
    (`@"aaaa...` on one line: minutes at 40 characters); the literal's escapes still read."""
    source = 'func.func @"' + "a" * 200 + " x\n"
    done = subprocess.run(
        [sys.executable, "-m", "xfuse.tools.opt", "-f", "mlir"],
        input=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "End of file reached before closing string literal." in done.stderr
    escaped = 'func.func @"a\\"b\\0A\\\\c"() {\n  func.return\n}\n'
    module = parse_ir(escaped)
    assert next(iter(module.ops)).sym_name.data == 'a"b\n\\c'


@pytest.mark.parametrize(
    ("line", "prefix"), [("# a comment", "#"), ("%  = arith.constant 1 : i32", "%"), ("^ :", "^")]
)
def test_a_prefix_no_name_follows_is_named_in_the_error(line: str, prefix: str) -> None:
    """xDSL's lexer printed its message's placeholder ("after {first_char}")."""
    source = f"func.func @f() {{\n  {line}\n  func.return\n}}\n"
    with pytest.raises(ParseError) as info:
        parse_ir(source)
    assert info.value.msg == f"Expected suffix identifier after '{prefix}'"
    assert info.value.span.start == source.index(prefix)  # (the prefix, not the line)


def test_a_pass_failure_at_an_op_names_it_and_pickles() -> None:
    """A pass's error at an op holds the op (for `xfuse-opt` to locate) and its text, and a
    process pool's worker can send it (the op does not travel: the text does)."""
    module = parse_ir(GOOD_MLIR)
    with pytest.raises(OpFailure) as info:
        EwBufferizePass().apply(Context(), module)
    constant = next(op for op in module.walk() if op.name == "ew.constant")
    assert info.value.op is constant
    assert str(info.value) == (
        "ew-bufferize: 'ew.constant' is not inside an ew.kernel (run ew-fuse first)\n"
        f"see current operation: {constant!s}"
    )
    copied = pickle.loads(pickle.dumps(info.value))
    assert type(copied) is PassFailedException and str(copied) == str(info.value)
