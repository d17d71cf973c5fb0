"""A pass's error at one op, as MLIR's `op->emitError()`: the message, then the op."""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation
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
    MLIR `loc("file":line:col)`), else None."""
    location = op.location
    if not isinstance(location, FileLineColLoc):
        return None
    return f"{location.filename.data}:{location.line.data}:{location.column.data}"
