"""Dataflow of a function of `ew` ops or kernels: per value its op, level, users and last use."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from xfuse.dialects import ew


@dataclass(frozen=True)
class ValueInfo:
    value: SSAValue
    name: str
    """The value's name hint, else `%N` with N its position in `Dataflow.values`."""
    op: Operation | None
    """The defining op; None for a function argument."""
    level: int
    """Longest chain of compute ops from the inputs to this value (inputs and constants: 0)."""
    uses: int
    """Operand slots reading the value, the function's return included (`h * h` counts 2)."""
    last_use: int | None
    """Index in `Dataflow.ops` of its last reader (`len(ops)`: the return); None if unread."""


@dataclass(frozen=True)
class Dataflow:
    ops: tuple[Operation, ...]
    """The compute ops (elementwise ops or kernels) in program order; constants are not ops."""
    values: tuple[ValueInfo, ...]
    """Arguments, then every op result (constants included) in program order."""
    depth: int
    """The largest level: the length of the longest dependency chain."""

    def __getitem__(self, key: str | SSAValue) -> ValueInfo:
        for info in self.values:
            if info.value is key or info.name == key:
                return info
        raise KeyError(key)


def analyze_dataflow(function: func.FuncOp) -> Dataflow:
    block = function.body.block
    ops = tuple(
        op for op in block.ops if not isinstance(op, ew.ConstantOp | func.ReturnOp) and op.results
    )
    position = {op: i for i, op in enumerate(ops)}
    position.update({op: len(ops) for op in block.ops if isinstance(op, func.ReturnOp)})
    levels: dict[SSAValue, int] = {arg: 0 for arg in block.args}
    values: list[SSAValue] = list(block.args)
    for op in block.ops:
        level = 1 + max((levels.get(v, 0) for v in op.operands), default=0) if op in ops else 0
        for result in op.results:
            levels[result] = level
            values.append(result)
    infos = tuple(
        ValueInfo(
            value=value,
            name=value.name_hint or f"%{index}",
            op=value.owner if isinstance(value.owner, Operation) else None,
            level=levels[value],
            uses=value.uses.get_length(),
            last_use=max(
                (position[use.operation] for use in value.uses if use.operation in position),
                default=None,
            ),
        )
        for index, value in enumerate(values)
    )
    return Dataflow(ops, infos, max(levels.values(), default=0))
