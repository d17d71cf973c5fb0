"""Temporaries in a caller-owned workspace: `ew-workspace` and the runtime's `WorkspacePool`."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, cast

import numpy as np
import pytest
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import FileLineColLoc, IntegerAttr, ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

import xfuse
from xfuse.frontend.language import parse_program
from xfuse.runtime.call_plans import WORKSPACE_ALIGNMENT, WorkspacePool
from xfuse.transforms.pipeline import apply_pipeline, pipeline_context
from xfuse.transforms.workspace import EwWorkspacePass

if TYPE_CHECKING:
    from conftest import Gelu


def gelu_inputs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, b, r = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    return x, b, r


def aligned(nbytes: int) -> int:
    return -(-nbytes // 64) * 64


def test_unfused_kernel_uses_the_workspace_not_malloc(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source, fuse=False)
    placed = kernel.ir("ew-workspace")
    assert "memref.alloc" not in placed and "memref.dealloc" not in placed
    assert placed.count("memref.view %workspace") == 3  # gelu.source's three planned buffers
    assert "func.func @main_workspace_bytes" in placed
    assert "malloc" not in kernel.llvm_ir and "@free" not in kernel.llvm_ir
    x, b, r = gelu_inputs(1000)
    np.testing.assert_allclose(kernel(x=x, b=b, r=r), gelu.reference(x, b, r), atol=2e-6)


def test_the_workspace_argument_is_printed_beside_declared_dims(gelu: Gelu) -> None:
    """With `ew.dims` on the inputs, each argument has an attribute dictionary: the workspace
    needs one too, or the printed function drops it and the IR of every stage from
    `ew-workspace` to `ew-expand-math` does not parse back (`%workspace` is used, undefined)."""
    kernel = xfuse.compile(gelu.shaped_source, fuse=False)
    for stage in ("ew-workspace", "ew-kernel-to-loops", "ew-expand-math"):
        text = kernel.ir(stage)
        assert "%workspace: memref<?xi8>" in text
        assert Parser(pipeline_context(), text).parse_module().verify() is None


def test_fused_kernel_has_no_workspace(gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source)
    assert kernel.ir("ew-workspace") == kernel.ir("ew-bufferize")
    assert not kernel.function.workspace
    x, b, r = gelu_inputs(100)
    assert kernel.prepare(x=x, b=b, r=r).workspace_bytes == 0


@pytest.mark.parametrize(("n", "threads"), [(1000, 1), (3 * (1 << 15) + 11, 3)])
def test_workspace_bytes_are_the_aligned_buffers(n: int, threads: int, gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.source, fuse=False, threads=threads)
    x, b, r = gelu_inputs(n)
    call = kernel.prepare(x=x, b=b, r=r)
    rows = kernel.function.chunks((n,), threads)  # on cache lines: 16 float32 rows
    assert len(call.argument_lists) == len(rows) == threads
    assert all(lo % 16 == 0 for lo, _ in rows)
    # Each thread's part holds three float32 buffers of its rows, one after another.
    parts = [3 * aligned(4 * (hi - lo)) for lo, hi in rows]
    assert [arguments[-1] for arguments in call.argument_lists] == parts
    assert [arguments[-2] for arguments in call.argument_lists] == [
        sum(parts[:i]) for i in range(threads)
    ]
    assert call.workspace_bytes == sum(parts)
    np.testing.assert_allclose(call(), gelu.reference(x, b, r), atol=2e-6)


def test_one_kernel_across_shapes(gelu: Gelu) -> None:
    """The workspace grows for a larger call and serves smaller ones after (and empty ones)."""
    kernel = xfuse.compile(gelu.source, fuse=False)
    for n in (5, 70_000, 7, 0, 1):
        x, b, r = gelu_inputs(n, seed=n)
        np.testing.assert_allclose(kernel(x=x, b=b, r=r), gelu.reference(x, b, r), atol=2e-6)


def test_static_shapes_and_mixed_dtypes() -> None:
    source = "h = x * b; out = tanh(h) + h * h;"
    unfused = xfuse.compile(
        source,
        fuse=False,
        shapes={"x": ["t", 8], "b": [8]},
        dtype={"x": "float16", "b": "float64"},
    )
    assert "memref.view %workspace" in unfused.ir("ew-workspace")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, 8)).astype(np.float16)
    b = rng.standard_normal(8)
    h = x.astype(np.float64) * b
    np.testing.assert_allclose(unfused(x=x, b=b), np.tanh(h) + h * h, rtol=1e-12, atol=1e-12)


def test_pool_reuses_a_workspace_and_lends_distinct_ones_at_once() -> None:
    pool = WorkspacePool()
    with pool.borrow(100) as first:
        assert first % WORKSPACE_ALIGNMENT == 0
    with pool.borrow(100) as again:
        assert again == first  # reused, not allocated again
        with pool.borrow(100) as concurrent:
            assert abs(concurrent - again) >= 100  # a second call in flight gets its own
    with pool.borrow(1 << 20) as large:
        assert large % WORKSPACE_ALIGNMENT == 0
        ctypes.memset(large, 1, 1 << 20)  # all of it is there to write


def _parse(text: str) -> ModuleOp:
    return Parser(pipeline_context(), text).parse_module()


def test_temporary_inside_a_loop_is_an_error() -> None:
    module = _parse(
        """
func.func @f(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %t = memref.alloc(%n) : memref<?xf32>
    memref.dealloc %t : memref<?xf32>
  }
  func.return
}"""
    )
    with pytest.raises(DiagnosticException, match="outside the entry block of 'f'"):
        EwWorkspacePass().apply(pipeline_context(), module)


TEMPORARY_G = """
func.func @g(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %t : memref<?xf32>
  func.return
}
"""
"""A function of one temporary, which ew-workspace gives a workspace argument."""


def test_a_called_function_with_temporaries_is_an_error_naming_the_call() -> None:
    """The pass adds a workspace argument: `@main`'s call of `@g` kept two operands, which the
    verifier after the pass reported with no pass name (`--disable-verify` printed it)."""
    module = _parse(
        TEMPORARY_G
        + """func.func @main(%x: memref<?xf32>) {
  func.call @g(%x) : (memref<?xf32>) -> ()
  func.return
}"""
    )
    with pytest.raises(
        DiagnosticException, match=r"(?s)@g has temporaries and is called .*func\.call @g"
    ):
        EwWorkspacePass().apply(pipeline_context(), module)


def test_a_call_in_a_nested_module_is_its_own_modules() -> None:
    """A nested module's `@g` called there is not the outer `@g` (each module its own symbols)."""
    module = _parse(
        TEMPORARY_G
        + """builtin.module {
  func.func private @g(memref<?xf32>)
  func.func @main(%x: memref<?xf32>) {
    func.call @g(%x) : (memref<?xf32>) -> ()
    func.return
  }
}"""
    )
    EwWorkspacePass().apply(pipeline_context(), module)
    outer = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert len(outer.args) == 2  # its workspace added


def test_temporary_with_a_layout_is_an_error_naming_it() -> None:
    module = _parse(
        """
func.func @f() {
  %t = memref.alloc() : memref<4xf32, strided<[2]>>
  memref.dealloc %t : memref<4xf32, strided<[2]>>
  func.return
}"""
    )
    with pytest.raises(
        DiagnosticException, match=r"(?s)a temporary with a layout in 'f'.*strided<\[2\]>"
    ):
        EwWorkspacePass().apply(pipeline_context(), module)


def test_temporaries_of_one_type_cost_one_add_each() -> None:
    """The rounded bytes of a type (and its dynamic sizes) are computed once per function, each
    constant made once: a program of many temporaries does not carry eight index ops per buffer
    into every pass after, and LLVM, in the function and its size function alike."""
    buffers = 20
    allocs = "\n".join(
        f"  %t{i} = memref.alloc(%n) : memref<?xf32>\n  %s{i} = memref.alloc() : memref<3xf16>"
        for i in range(buffers)
    )
    module = _parse(
        f"""
func.func @f(%x: memref<?xf32>) {{
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
{allocs}
  func.return
}}"""
    )
    EwWorkspacePass().apply(pipeline_context(), module)
    for function in module.ops:
        names = [op.name for op in function.walk()]
        assert names.count("arith.andi") == 2, function  # one rounding per type
        assert names.count("arith.addi") <= 2 * buffers + 2  # an offset: one add per buffer
        constants = [op for op in function.walk() if isinstance(op, arith.ConstantOp)]
        values = [cast(IntegerAttr, op.value).value.data for op in constants]
        assert all(values.count(v) == 1 for v in (2, 3, 4, 63, -64)), function


def test_a_temporarys_view_is_located_at_its_kernel() -> None:
    """`ew-bufferize` locates each temporary's `memref.alloc` at the kernel that writes it; the
    `memref.view` and offset arithmetic that replace it were `loc(unknown)`."""
    source = "h = x + b;\nt = exp(h);\nout = t * h;\n"
    module = apply_pipeline(
        parse_program(source, filename="w.ew"), "ew-fuse{mode=none},ew-bufferize,ew-workspace"
    )
    views = [op for op in module.walk() if isinstance(op, memref.ViewOp)]
    offsets = [view.byte_shift.owner for view in views]
    assert len(views) == 2
    assert all(isinstance(op.location, FileLineColLoc) for op in (*views, *offsets))
