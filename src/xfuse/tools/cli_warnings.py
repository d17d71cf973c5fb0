"""How the CLIs show Python warnings on stderr.

A program's `EwNameWarning` is located (`gelu.ew:2: EwNameWarning: column 15: ...` and the
line) and shows as Python shows it. The others, the compile cache's, are placed at the first
frame outside xfuse, which on the command line is the console script: Python printed
`.../bin/xfuse:6: RuntimeWarning: xfuse: cannot write the compile cache ...` and then that
script's `sys.exit(main())`. A CLI shows them as one line, `xfuse: warning: ...`. Where
`-W error` (or `PYTHONWARNINGS=error`) makes one an exception, a CLI prints it as an error,
located as the warning would have been (`escalated_warning`), with status 1.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from xfuse.frontend.name_warnings import EwNameWarning

_python_format = warnings.formatwarning


def _format_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    if issubclass(category, EwNameWarning):
        return _python_format(message, category, filename, lineno, line)
    return f"xfuse: warning: {str(message).removeprefix('xfuse: ')}\n"


@contextmanager
def command_line_warnings() -> Iterator[None]:
    """Warnings shown inside as the module's docstring says; Python's format again after."""
    formatwarning, warnings.formatwarning = warnings.formatwarning, _format_warning
    try:
        yield
    finally:
        warnings.formatwarning = formatwarning


def escalated_warning(warning: Warning, prefix: str) -> str:
    """The error line of a warning that a filter raised: `gelu.ew:2: error: column 15: ...` for
    an `EwNameWarning`, `<prefix>: error: ...` for another, each naming its category."""
    category = f"[{type(warning).__name__}, an error by the warnings filter]"
    message = str(warning).removeprefix("xfuse: ")
    if isinstance(warning, EwNameWarning) and warning.filename:
        return f"{warning.filename}:{warning.line}: error: {message} {category}"
    return f"{prefix}: error: {message} {category}"
