"""GELU with bias and residual over a chunked [t, d] float32 array on a local dask cluster.

    python benchmarks/dask_gelu.py [--rows 8192] [--columns 14336] [--chunk-rows 512]
                                   [--workers 2] [--repeat 3]

Rows of the table (median of `--repeat` runs after a warm-up, each a `persist` and wait, so the
result stays on the workers and is not shipped back):
- dask/numpy: the expression written with `dask.array` operators (what a dask user writes today);
  dask fuses its elementwise layers into one task per chunk, each a chain of numpy ops with a
  temporary per op.
- xfuse through dask: the compiled kernel called on the same dask arrays (`Kernel.__call__`
  builds one `blockwise`): one task per chunk, one fused loop.
- xfuse, one process: the same kernel with `threads=<workers>` on numpy arrays holding the same
  data, writing into a preallocated output (no dask, no cluster).
The inputs are generated and persisted on the workers before timing. The task counts (besides the
inputs') are those of the graph as built (one per op and chunk for the dask/numpy expression) and
after dask's optimization (which fuses elementwise layers: one task per chunk either way, but the
dask/numpy task still runs 11 numpy ops with a temporary array each).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

import xfuse

GELU = (
    "input x[t, d]; input b[d]; input r[t, d];\n"
    "h = x + b;\n"
    "y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));\n"
    "out = y + r;"
)


def dask_numpy_gelu(x: da.Array, b: da.Array, r: da.Array) -> da.Array:
    h = x + b
    return 0.5 * h * (1 + da.tanh(np.float32(0.7978845608) * (h + 0.044715 * h * h * h))) + r


def median_seconds(run: Callable[[], Any], repeat: int) -> float:
    run()  # warm-up: workers compile (or load) the kernel, pages are touched
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def task_counts(array: da.Array, inputs: list[da.Array]) -> tuple[int, int]:
    """Tasks of `array`'s graph besides its (persisted) inputs: as built, and after dask's
    optimization."""
    (optimized,) = dask.optimize(array)
    input_tasks = sum(len(dict(a.__dask_graph__())) for a in inputs)
    return (
        len(dict(array.__dask_graph__())) - input_tasks,
        len(dict(optimized.__dask_graph__())) - input_tasks,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--columns", type=int, default=14336)
    parser.add_argument("--chunk-rows", type=int, default=512)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shape, chunks = (args.rows, args.columns), (args.chunk_rows, args.columns)
    kernel = xfuse.compile(GELU, threads=args.workers)

    with (
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        rng = da.random.default_rng(0)
        x = rng.standard_normal(shape, chunks=chunks, dtype=np.float32).persist()
        r = rng.standard_normal(shape, chunks=chunks, dtype=np.float32).persist()
        b = rng.standard_normal(args.columns, chunks=args.columns, dtype=np.float32).persist()
        wait([x, r, b])
        variants = {
            "dask/numpy expression": dask_numpy_gelu(x, b, r),
            "xfuse through dask": kernel(x=x, b=b, r=r),
        }

        def run_on_cluster(array: da.Array) -> Callable[[], None]:
            def run() -> None:
                result = client.persist(array)
                wait(result)
                del result

            return run

        rows = []
        for name, array in variants.items():
            seconds = median_seconds(run_on_cluster(array), args.repeat)
            rows.append((name, seconds, *task_counts(array, [x, b, r])))
        check = client.compute(variants["xfuse through dask"] - variants["dask/numpy expression"])
        max_difference = float(np.abs(check.result()).max())
        local = client.gather(client.compute([x, b, r]))

    out = np.empty(shape, np.float32)
    one_process = median_seconds(kernel.prepare(x=local[0], b=local[1], r=local[2], out=out), 5)
    rows.append((f"xfuse, one process, threads={args.workers}", one_process, None, None))

    baseline = rows[0][1]
    elements = args.rows * args.columns
    print(
        f"GELU + bias + residual, [{args.rows}, {args.columns}] float32 in "
        f"{-(-args.rows // args.chunk_rows)} chunks of [{args.chunk_rows}, {args.columns}], "
        f"{args.workers} worker processes x 1 thread\n"
    )
    print("| variant | time | ns/element | vs dask/numpy | tasks (built) | tasks (optimized) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, seconds, built, optimized in rows:
        print(
            f"| {name} | {seconds * 1e3:.0f} ms | {seconds / elements * 1e9:.2f} | "
            f"{baseline / seconds:.1f}x | {built if built is not None else '-'} | "
            f"{optimized if optimized is not None else '-'} |"
        )
    xfuse_dask = rows[1][1]
    print(f"\nxfuse through dask / one process: {xfuse_dask / one_process:.2f}x")
    print(f"max |xfuse - dask/numpy|: {max_difference:.2e}")


if __name__ == "__main__":
    main()
