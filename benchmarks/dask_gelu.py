"""GELU with bias and residual over a chunked [t, d] float32 array on a local dask cluster.

    python benchmarks/dask_gelu.py [--rows 8192] [--columns 14336] [--chunk-rows 2048]
                                   [--workers 2] [--threads-per-worker 1] [--repeat 3]

Blocks of 2048 rows (117 MB, 4 tasks) are the size dask's own guidance asks for ("it is rare to
see chunk sizes below 100 MB", docs.dask.org/en/stable/array-best-practices.html; its automatic
chunking aims at 128 MiB). Each task costs dask about the same whatever its size: on 2 idle CPUs
xfuse through dask took 168 ms in 1024-row blocks, 145 ms in these, 125 ms in 4096-row ones
(docs/scale-out.md).
`--workers 1 --threads-per-worker 2` runs one worker with a thread per CPU instead (an xfuse call
releases the GIL: ctypes does).

The work is the same in every row: from x, r ([t, d]) and b ([d]) already in memory, compute
`gelu(x + b) + r` into a new [t, d] array that stays in memory. On the cluster the inputs are
generated on the workers before timing, each chunk of r on the worker that holds the same chunk of
x (as when r is an earlier result on the same rows), and `persist` keeps each result block on the
worker that computed it (nothing is shipped back to the client). Rows (median of `--repeat` runs
after a warm-up; the dask rows take turns, one run each per round; a dask row's time is
`persist` and `wait`: the client's graph optimization, the scheduling and the tasks):
- dask/numpy: the expression written with `dask.array` operators (what a dask user writes today);
  dask fuses its elementwise layers into one task per chunk, each a chain of numpy ops with a
  temporary per op.
- xfuse through dask: the compiled kernel (`threads=1`: the workers' threads are the parallelism)
  called on the same dask arrays (`Kernel.__call__` builds one `blockwise`): one task per chunk,
  one fused loop.
- dask x + r: the cheapest elementwise op dask can run on the same chunks (one add, a new block
  per task): what any dask elementwise task costs in scheduling, its new output block and memory
  traffic (12 bytes per element; GELU with bias and residual moves 16).
- xfuse, one process: the kernel with `threads=<workers x threads per worker>` on numpy arrays
  holding the same data (no dask), returning a new array (the same work as a dask task, whose
  result is a new block: its first touch costs page faults), and, apart, writing into a
  preallocated output (less work: no new memory).
"Tasks run" is how many tasks the scheduler ran for the result (besides the inputs'), after dask's
graph optimization (which fuses elementwise layers: the dask/numpy expression's 11 ops per chunk
become one task per chunk that still runs 11 numpy ops with a temporary array each).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

import xfuse
from xfuse.benchmarking.timing import host_summary, median_seconds

GELU = (
    "input x[t, d]; input b[d]; input r[t, d];\n"
    "h = x + b;\n"
    "y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));\n"
    "out = y + r;"
)


def dask_numpy_gelu(x: da.Array, b: da.Array, r: da.Array) -> da.Array:
    h = x + b
    return 0.5 * h * (1 + da.tanh(np.float32(0.7978845608) * (h + 0.044715 * h * h * h))) + r


def residual_block(x_block: np.ndarray, block_id: tuple[int, int]) -> np.ndarray:
    """Chunk `block_id` of r: normal numbers of its own seed (a task on x's block, so the
    scheduler runs it where that block is)."""
    rng = np.random.default_rng([1, *block_id])
    return rng.standard_normal(x_block.shape, dtype=np.float32)


def tasks_on_scheduler(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--columns", type=int, default=14336)
    parser.add_argument("--chunk-rows", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shape, chunks = (args.rows, args.columns), (args.chunk_rows, args.columns)
    threads = args.workers * args.threads_per_worker
    kernel = xfuse.compile(GELU, threads=threads)
    task_kernel = xfuse.compile(GELU)  # one thread per task: the workers' threads are the cores

    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=args.threads_per_worker,
            processes=True,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        x = da.random.default_rng(0).standard_normal(shape, chunks=chunks, dtype=np.float32)
        x = x.persist()
        wait(x)
        r = x.map_blocks(residual_block, dtype=np.float32).persist()
        b = da.random.default_rng(2).standard_normal(args.columns, dtype=np.float32).persist()
        wait([r, b])
        variants = {
            "dask/numpy expression": dask_numpy_gelu(x, b, r),
            "xfuse through dask": task_kernel(x=x, b=b, r=r),
            "dask x + r (floor)": x + r,
        }
        input_tasks = client.run_on_scheduler(tasks_on_scheduler)

        def persist_and_count(array: da.Array) -> tuple[float, int]:
            """Seconds to persist `array` and wait, and the tasks the scheduler ran; then drop
            it and wait until the scheduler has forgotten it, so the next run computes again."""
            start = time.perf_counter()
            result = client.persist(array)
            wait(result)
            seconds = time.perf_counter() - start
            tasks = client.run_on_scheduler(tasks_on_scheduler) - input_tasks
            del result
            while client.run_on_scheduler(tasks_on_scheduler) > input_tasks:
                time.sleep(0.01)
            return seconds, tasks

        # The variants take turns, so that a change in the machine's load hits them alike.
        runs: dict[str, list[tuple[float, int]]] = {name: [] for name in variants}
        for _ in range(args.repeat + 1):
            for name, array in variants.items():
                runs[name].append(persist_and_count(array))
        rows = []
        for name, timed in runs.items():
            seconds = statistics.median(s for s, _ in timed[1:])  # the first is a warm-up
            rows.append((name, seconds, timed[0][1]))
        check = client.compute(variants["xfuse through dask"] - variants["dask/numpy expression"])
        max_difference = float(np.abs(check.result()).max())
        local = client.gather(client.compute([x, b, r]))

    fresh = median_seconds(lambda: kernel(x=local[0], b=local[1], r=local[2]), 5)
    rows.append((f"xfuse, one process, threads={threads}", fresh, None))
    out = np.empty(shape, np.float32)
    preallocated = median_seconds(kernel.prepare(x=local[0], b=local[1], r=local[2], out=out), 5)
    rows.append((f"xfuse, one process, threads={threads}, preallocated out", preallocated, None))

    baseline = rows[0][1]
    elements = args.rows * args.columns
    print(
        f"GELU + bias + residual, [{args.rows}, {args.columns}] float32 in "
        f"{-(-args.rows // args.chunk_rows)} chunks of [{args.chunk_rows}, {args.columns}], "
        f"{args.workers} worker processes x {args.threads_per_worker} threads; each row makes "
        "a new [t, d] result from inputs in memory (except the last: into a preallocated one)\n"
    )
    print("| variant | time | ns/element | vs dask/numpy | tasks run |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, tasks in rows:
        print(
            f"| {name} | {seconds * 1e3:.0f} ms | {seconds / elements * 1e9:.2f} | "
            f"{baseline / seconds:.1f}x | {tasks if tasks is not None else '-'} |"
        )
    xfuse_dask, floor = rows[1][1], rows[2][1]
    print(
        f"\nxfuse through dask / one process: {xfuse_dask / fresh:.2f}x "
        f"(/ preallocated out: {xfuse_dask / preallocated:.2f}x); "
        f"/ dask x + r: {xfuse_dask / floor:.2f}x"
    )
    print(f"max |xfuse - dask/numpy|: {max_difference:.2e}")
    print(host_summary())


if __name__ == "__main__":
    main()
