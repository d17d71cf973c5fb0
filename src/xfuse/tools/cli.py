"""`xfuse`: the user-facing command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("xfuse: not yet", file=sys.stderr)
    return 1
