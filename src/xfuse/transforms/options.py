"""Pass options: the words the stringly ones take, and the one error for a value a pass rejects.

As xDSL's passes do (its `from_spec` for a value of the wrong type, a pass for one out of range),
xfuse's raise a `ValueError` for a bad option: a `PassOptionError` naming the pass, the option and
the values it takes. They raise it when made (`__post_init__`), so that a pipeline with one is
rejected before any pass runs: `xfuse-opt` before it reads its input, `xfuse.compile` before it
compiles. No xDSL here: the runtime reads the aliases without importing the passes.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Literal, TypeGuard

if TYPE_CHECKING:
    from xdsl.passes import ModulePass

CpuMath = Literal["approx", "libm"]
"""`ew-expand-math`'s (and `xfuse.compile`'s on the CPU) `math`: vectorizable approximations, or
calls to the C library."""

MathLibrary = Literal["libm", "libdevice"]
"""`ew-expand-math`'s `library`: whose functions the calls it leaves are, the C library's (`exp`,
`expf`) or NVIDIA's libdevice's on the GPU (`__nv_exp`, `__nv_expf`)."""

GpuMath = Literal["approx", "ptx-approx"]
"""`ew-to-nvvm`'s (and `xfuse.compile`'s with `target="cuda"`) `math`."""

Math = CpuMath | GpuMath
"""`xfuse.compile`'s `math`: `CpuMath` with `target="cpu"`, `GpuMath` with `"cuda"`."""

Target = Literal["cpu", "cuda"]
"""`xfuse.compile`'s `target`: the host's CPU, or an NVIDIA GPU."""

FuseMode = Literal["greedy", "none"]
"""`ew-fuse`'s `mode`."""

Recompute = Literal["cheap", "all"]
"""`ew-fuse`'s `recompute`."""


def is_cpu_math(math: str) -> TypeGuard[CpuMath]:
    """Whether `math` is one of `CpuMath`'s words (a checker then knows it is)."""
    return math in typing.get_args(CpuMath)


def is_gpu_math(math: str) -> TypeGuard[GpuMath]:
    """Whether `math` is one of `GpuMath`'s words (a checker then knows it is)."""
    return math in typing.get_args(GpuMath)


class PassSpecError(ValueError):
    """A bad pass pipeline: an unknown pass, or an option a pass lacks or a value it rejects."""


class PassOptionError(PassSpecError):
    """An option given a value its pass rejects:
    `pass: bad value 'value' for option 'option': expected what it takes`."""

    def __init__(self, pass_name: str, option: str, value: object, expected: str):
        self.pass_name = pass_name
        self.option = option
        """Spelled as `-p` takes it (`max-ops`)."""
        self.value = value
        self.expected = expected
        """The values it takes, in words (`one of greedy, none`, `an integer >= 1`)."""
        super().__init__(
            f"{pass_name}: bad value '{_option_text(value)}' for option '{option}': "
            f"expected {expected}"
        )

    def __reduce__(self) -> tuple[type[PassOptionError], tuple[str, str, object, str]]:
        return PassOptionError, (self.pass_name, self.option, self.value, self.expected)


def _option_text(value: object) -> str:
    """A value as `-p` spells it: `true`, `3`, `a,b` for a list."""
    if isinstance(value, list | tuple):
        return ",".join(_option_text(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def expected_values(field_type: object) -> str:
    """What an option of this type accepts, in words: `greedy, none`, `true or false`, ..."""
    if typing.get_origin(field_type) is typing.Literal:
        return "one of " + ", ".join(str(value) for value in typing.get_args(field_type))
    if field_type is bool:
        return "true or false"
    names = {int: "an integer", float: "a number", str: "a string"}
    if field_type in names:
        return names[field_type]
    alternatives = [t for t in typing.get_args(field_type) if t is not type(None)]
    if float in alternatives:  # "a number" says int too
        alternatives = [t for t in alternatives if t is not int]
    return " or ".join(dict.fromkeys(expected_values(t) for t in alternatives)) or str(field_type)


def check_option(pass_: ModulePass, field: str, ok: bool, expected: str) -> None:
    """`PassOptionError` for `pass_`'s option `field` (its dataclass field) unless `ok`."""
    if not ok:
        raise PassOptionError(pass_.name, field.replace("_", "-"), getattr(pass_, field), expected)


def check_choice(pass_: ModulePass, field: str, choices: object) -> None:
    """`PassOptionError` unless `pass_`'s option `field` is one of the `Literal` `choices`."""
    value = getattr(pass_, field)
    check_option(pass_, field, value in typing.get_args(choices), expected_values(choices))
