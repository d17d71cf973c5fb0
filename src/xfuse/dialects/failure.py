"""A pass's error at one op, as MLIR's `op->emitError()`: the message, then the op."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import CallSiteLoc, FileLineColLoc, FusedLoc, NameLoc
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import PassFailedException


class OpFailure(PassFailedException):
    """A pass cannot handle `op`: `message`, then the op as mlir-opt notes it ("see current
    operation"). `xfuse-opt` puts the op's source location first (`source_location`, or where
    its parser read the op)."""

    def __init__(self, message: str, op: Operation) -> None:
        super().__init__(f"{message}\nsee current operation: {op!s}")
        self.message = message
        self.op = op

    def __reduce__(self) -> tuple[type[PassFailedException], tuple[object, ...]]:
        # (the op is a node of a module that does not travel with the error: its text does)
        return PassFailedException, self.args


def source_location(op: Operation) -> str | None:
    """`file:line:col` of an op that carries its source location (a `.ew` program's, or an
    MLIR `loc("file":line:col)`, also inside a name, call site or fused location, as mlir-opt
    reads them: the callee's, the first of a fusion), else None."""
    return _file_line_column(op.location)


def _file_line_column(location: Attribute) -> str | None:
    if isinstance(location, FileLineColLoc):
        return f"{location.filename.data}:{location.line.data}:{location.column.data}"
    if isinstance(location, NameLoc):
        return _file_line_column(location.location)
    if isinstance(location, CallSiteLoc):  # (the caller's where the callee's is unknown)
        return _file_line_column(location.callee) or _file_line_column(location.caller)
    if isinstance(location, FusedLoc):
        return next(filter(None, map(_file_line_column, location.locations)), None)
    return None


def check_one_block(function: func.FuncOp, pass_name: str) -> None:
    """An `OpFailure` at `function` where its body is not one block, which `pass_name` takes
    (the output of ew-fuse): xDSL's `Region.block` failed with a ValueError naming no pass."""
    if len(function.body.blocks) != 1:
        raise OpFailure(
            f"{pass_name}: @{function.sym_name.data} has {len(function.body.blocks)} blocks: "
            f"{pass_name} takes functions of one block, as ew-fuse makes them",
            function,
        )
