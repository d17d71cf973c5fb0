"""`python -m xfuse`: the `xfuse` command (the console script of the same name)."""

import sys

from xfuse.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
