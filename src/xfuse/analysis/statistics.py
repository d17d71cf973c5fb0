"""Pass statistics in the spirit of MLIR's `-mlir-pass-statistics`: data, then one renderer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Statistic:
    name: str
    value: int
    description: str


@dataclass(frozen=True)
class PassStatistics:
    """The counters one pass run collected (summed over the functions of a module)."""

    pass_name: str
    statistics: tuple[Statistic, ...]

    def __getitem__(self, name: str) -> int:
        for statistic in self.statistics:
            if statistic.name == name:
                return statistic.value
        raise KeyError(name)


def render_statistics(reports: Sequence[PassStatistics]) -> str:
    """MLIR's report layout: a banner, then per pass `(name) value : description` lines."""
    rule = "===" + "-" * 73 + "==="
    lines = [rule, "Pass statistics report".center(len(rule)).rstrip(), rule]
    for report in reports:
        lines.append(f"'{report.pass_name}'")
        width = max((len(str(s.value)) for s in report.statistics), default=1)
        name_width = max((len(s.name) for s in report.statistics), default=1) + 2
        lines.extend(
            f"  {'(' + s.name + ')':<{name_width}} {s.value:>{width}} : {s.description}"
            for s in report.statistics
        )
    return "\n".join(lines)
