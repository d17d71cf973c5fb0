"""How fast a new process gets a callable GELU kernel, with the on-disk compile cache cold or warm.

    python benchmarks/compile_cache.py [--processes 9]

Each measurement is a fresh Python process with its own `XFUSE_CACHE_DIR`: the first compiles
(cold cache: parse, xDSL passes, LLVM O3, MCJIT) and writes the entry, the others find it (a hit:
read the entry, link the object code). Per process it times the imports a compile needs
(`import xfuse` and `xfuse.runtime.compiler`) and, separately, the call that returns the kernel:
`xfuse.compile(source)` (a hit by the source text) and `@xfuse.jit` on first call (a trace, then a
hit by the frontend IR; the kernel call itself is included, on 16 elements). Medians and minimums
over `--processes` processes per row. The compile is also given in CPU time (`time.process_time`),
which a loaded machine inflates far less than the wall-clock time. The last line says whether the
process that found the program on disk imported xDSL (it need not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

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


def measure(cache_dir: str) -> dict[str, float]:
    env = {**os.environ, "XFUSE_CACHE_DIR": cache_dir}
    env.pop("XFUSE_CACHE", None)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, GELU], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="xfuse-cache-bench-") as cache_dir:
        cold = [measure(cache_dir)]
        warm = [measure(cache_dir) for _ in range(args.processes)]
    print(
        "| cache | import xfuse + compiler | xfuse.compile(GELU) | its CPU time "
        "| @xfuse.jit first call |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, runs in (("cold (compiles)", cold), ("warm (a hit)", warm)):
        cells = []
        for field in ("import", "compile", "compile_cpu", "jit"):
            values = [run[field] * 1e3 for run in runs]
            cells.append(
                f"{values[0]:.1f} ms"
                if len(values) == 1
                else f"{statistics.median(values):.1f} ms (min {min(values):.1f})"
            )
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"\nxDSL imported by a hit: {any(run['xdsl'] for run in warm)}")
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
