"""How fast a new process gets a callable GELU kernel, with the on-disk compile cache cold or warm.

    python benchmarks/compile_cache.py [--processes 9] [--against OTHER_CHECKOUT/src]

Each measurement is a fresh Python process with the default cache directory (`XDG_CACHE_HOME`
set to a new directory per source tree): the first compiles (cold cache: parse, xDSL passes, LLVM
O3, MCJIT) and writes the entry, the others find it (a hit: read the entry, link the object code).
Per process it times the imports a compile needs
(`import xfuse` and `xfuse.runtime.compiler`) and, separately, the call that returns the kernel:
`xfuse.compile(source)` (a hit by the source text) and `@xfuse.jit` on first call (a trace, then a
hit by the frontend IR; the kernel call itself is included, on 16 elements). A cold row is one
process; a warm row gives the median and minimum over `--processes` processes. The compile is also
given in CPU time (`time.process_time`), which a loaded machine inflates far less than the
wall-clock time. Prints the host first; at the end, whether the process that found the program on
disk imported xDSL (it need not), and the load average again.

`--against SRC` measures another source tree too (e.g. a `git worktree` of an earlier commit, its
`src` put first on `PYTHONPATH`), with a cache directory of its own; the warm processes of both
alternate, so that the machine's load hits them alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from xfuse.benchmarking.timing import host_summary
from xfuse.tools.cli import option_type, positive_int
from xfuse.tools.scripts import run_script, script_parser

GELU = (Path(__file__).parent.parent / "examples" / "gelu.ew").read_text()

CHILD = """
import json, sys, time
start = time.perf_counter()
import numpy as np
import xfuse
import xfuse.runtime.compiler
imported = time.perf_counter()
cpu = time.process_time()
kernel = xfuse.compile(sys.argv[1])
compiled = time.perf_counter()
compile_cpu = time.process_time() - cpu
xdsl = "xdsl" in sys.modules

@xfuse.jit
def gelu(x, b, r):
    h = x + b
    return 0.5 * h * (1 + xfuse.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) + r

x = np.ones(16, np.float32)
traced = time.perf_counter()
gelu(x, x, x)
called = time.perf_counter()
print(json.dumps({"import": imported - start, "compile": compiled - imported,
                  "compile_cpu": compile_cpu, "jit": called - traced, "xdsl": xdsl}))
"""


@option_type
def source_tree(text: str) -> str:
    """`--against`: a directory with the xfuse package in it (a checkout's `src`): another one
    timed this checkout under its name (the child imports xfuse from PYTHONPATH's first)."""
    if not (Path(text) / "xfuse" / "__init__.py").is_file():
        raise ValueError(f"no xfuse package under {text} (give a checkout's src directory)")
    return text


def measure(cache_dir: str, source: str | None = None) -> dict[str, float]:
    # The default cache directory (under XDG_CACHE_HOME on Linux), as a user gets it.
    env = {**os.environ, "XDG_CACHE_HOME": cache_dir}
    env.pop("XFUSE_CACHE", None)
    env.pop("XFUSE_CACHE_DIR", None)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])
    result = subprocess.run(
        [sys.executable, "-c", CHILD, GELU], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f} ms"
    return f"{statistics.median(values):.1f} ms (min {min(values):.1f})"


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--processes", type=positive_int, default=9, help="warm processes per row")
    parser.add_argument(
        "--against", metavar="SRC", type=source_tree, help="another source tree to time alike"
    )
    args = parser.parse_args()
    print(host_summary())
    sources = {"this checkout": None, **({args.against: args.against} if args.against else {})}
    rows: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="xfuse-cache-bench-") as cache_root:
        cache_dirs = {name: os.path.join(cache_root, str(i)) for i, name in enumerate(sources)}
        for name, source in sources.items():
            rows[f"cold (compiles), {name}"] = [measure(cache_dirs[name], source)]
        warm: dict[str, list[dict[str, float]]] = {name: [] for name in sources}
        for _ in range(args.processes):
            for name, source in sources.items():
                warm[name].append(measure(cache_dirs[name], source))
        rows.update({f"warm (a hit), {name}": runs for name, runs in warm.items()})
    print(
        "| cache | import xfuse + compiler | xfuse.compile(GELU) | its CPU time "
        "| @xfuse.jit first call |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, runs in rows.items():
        fields = ("import", "compile", "compile_cpu", "jit")
        cells = [cell([run[field] * 1e3 for run in runs]) for field in fields]
        print(f"| {name} | {' | '.join(cells)} |")
    xdsl = {name: any(run["xdsl"] for run in runs) for name, runs in warm.items()}
    print(f"\nxDSL imported by a hit: {xdsl}")
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    run_script(main)
