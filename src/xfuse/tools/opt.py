"""`xfuse-opt`: xDSL's `xdsl-opt` with the `ew` dialect, the `.ew` frontend and xfuse's passes."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from xfuse.frontend.language import EwSyntaxError, parse_program
from xfuse.passes import ALL_PASSES


class XfuseOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        from xfuse.dialects.ew import Ew

        self.ctx.register_dialect("ew", lambda: Ew)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in ALL_PASSES.items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["ew"] = self._parse_ew

    def _parse_ew(self, stream: IO[bytes]) -> ModuleOp:
        return parse_program(stream.read().decode(), filename=self.get_input_name())


def main(args: Sequence[str] | None = None) -> int:
    """Run xfuse-opt; every error becomes a diagnostic on stderr and exit status 1."""
    try:
        XfuseOptMain(args=args).run()
    except (EwSyntaxError, ParseError, DiagnosticException) as error:
        print(error, file=sys.stderr)
        return 1
    except (ValueError, OSError) as error:
        print(f"xfuse-opt: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
