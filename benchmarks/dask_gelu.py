"""GELU with bias and residual over a chunked [t, d] float32 array on a local dask cluster.

    python benchmarks/dask_gelu.py [--rows 8192] [--columns 14336] [--chunk-rows 2048]
                                   [--workers 2] [--threads-per-worker 1] [--repeat 3]
                                   [--dask-defaults]

Blocks of 2048 rows (117 MB, 4 tasks) are the size dask's own guidance asks for ("it is rare to
see chunk sizes below 100 MB", docs.dask.org/en/stable/array-best-practices.html; its automatic
chunking aims at 128 MiB). Each task costs dask about the same whatever its size: on 2 idle CPUs
xfuse through dask took 168 ms in 1024-row blocks, 145 ms in these, 125 ms in 4096-row ones
(docs/scale-out.md).
`--workers 1 --threads-per-worker 2` runs one worker with a thread per CPU instead (an xfuse call
releases the GIL: ctypes does).

The cluster wakes its event loops less often than dask's defaults (`QUIET_DASK`, printed; the
same settings for every row): each worker samples its running tasks' stacks every 100 ms, not
10 ms (dask's statistical profiler), and every server checks that its event loop is not blocked
every second, not every 20 ms (`distributed.admin.tick`). With the defaults the 2 workers, 2
nannies and the scheduler woke ~300 times a second and took 100-150 ms of CPU a second (of the
2 CPUs the tasks run on), 40-50 ms with these (docs/scale-out.md); `--dask-defaults` keeps dask's
own settings. Neither changes the work: the tasks, their results and the messages are the same.

The work is the same in every row: from x, r ([t, d]) and b ([d]) already in memory, compute
`gelu(x + b) + r` into a new [t, d] array that stays in memory. On the cluster the inputs are
generated on the workers before timing, each chunk of r on the worker that holds the same chunk of
x (as when r is an earlier result on the same rows), and `persist` keeps each result block on the
worker that computed it (nothing is shipped back to the client). Rows (median of `--repeat`
rounds after a warm-up round; every row runs once a round, in turn, the one-process ones too,
each round starting one row later than the one before; a
dask row's time is `persist` and `wait`: the client's graph optimization, the scheduling, the
tasks and the messages that say they are done; its result is released after the clock stops):
- dask/numpy: the expression written with `dask.array` operators (what a dask user writes today);
  dask fuses its elementwise layers into one task per chunk, each a chain of numpy ops with a
  temporary per op.
- xfuse through dask: the compiled kernel (`threads=1`: the workers' threads are the parallelism)
  called on the same dask arrays (`Kernel.__call__` builds one `blockwise`): one task per chunk,
  one fused loop.
- dask x + r: the cheapest elementwise op dask can run on the same chunks (one add, a new block
  per task): what any dask elementwise task costs in scheduling, its new output block and memory
  traffic (12 bytes per element; GELU with bias and residual moves 16).
- dask, no work: a task per chunk on the same blocks that returns x's block: dask's own cost of
  a persist (graph, scheduling, messages), without work or new memory.
- xfuse, one process: the kernel with `threads=<workers x threads per worker>` on numpy arrays
  holding the same data (no dask), returning a new array that, like a persisted block, lives
  until the clock has stopped (the same work as the dask tasks: the new memory's first touch
  costs page faults in both, its release in neither), and, apart, writing into a preallocated
  output (less work: no new memory).
"Busiest worker in tasks" is, from dask's task stream, the most time one worker spent running
the row's tasks: what the row's time has in common with the one-process call; the rest is dask's.
"dask's threads' CPU" is the CPU time dask's own threads took during the row (the workers' and
the client process's threads other than those running tasks, the benchmark's, or xfuse's slice
threads: event loops, messages, the scheduler), all processes summed: CPU the work did not get,
on a host whose every CPU runs a task.
"Tasks run" is how many tasks the scheduler ran for the result (besides the inputs'), after dask's
graph optimization (which fuses elementwise layers: the dask/numpy expression's 11 ops per chunk
become one task per chunk that still runs 11 numpy ops with a temporary array each).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, get_task_stream, wait

import xfuse
from xfuse.benchmarking.timing import host_summary, milliseconds
from xfuse.tools.cli import positive_int
from xfuse.tools.scripts import run_script, script_parser

GELU = (
    "input x[t, d]; input b[d]; input r[t, d];\n"
    "h = x + b;\n"
    "y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));\n"
    "out = y + r;"
)

QUIET_DASK = {
    "distributed.worker.profile.interval": "100ms",  # dask's default: 10ms
    "distributed.admin.tick.interval": "1s",  # dask's default: 20ms
}
"""Dask settings for the benchmark's cluster: its event loops wake less often (module docstring)."""

WORK_THREADS = ("Dask-Default-Threads", "xfuse-slice")
"""What the names of threads that run the work contain (dask's task threads, xfuse's slices)."""


def dask_numpy_gelu(x: da.Array, b: da.Array, r: da.Array) -> da.Array:
    h = x + b
    return 0.5 * h * (1 + da.tanh(np.float32(0.7978845608) * (h + 0.044715 * h * h * h))) + r


def residual_block(x_block: np.ndarray, block_id: tuple[int, int]) -> np.ndarray:
    """Chunk `block_id` of r: normal numbers of its own seed (a task on x's block, so the
    scheduler runs it where that block is)."""
    rng = np.random.default_rng([1, *block_id])
    return rng.standard_normal(x_block.shape, dtype=np.float32)


class Run(NamedTuple):
    seconds: float
    dask_cpu: float
    """CPU seconds dask's own threads took during the row (`dask_threads_cpu_seconds`)."""
    tasks: int | None = None
    """How many tasks the scheduler ran (a dask row)."""
    busiest: float | None = None
    """The seconds the busiest worker spent in the tasks (a dask row)."""


def dask_threads_cpu_seconds(in_client: bool) -> float:
    """CPU seconds used so far by this process's threads that are dask's own: all but those
    that run the work (`WORK_THREADS`) and, in the benchmark's process (`in_client`), its main
    thread (in a worker the main thread runs the event loop). Threads that ended do not count;
    dask's are started with the cluster."""
    seconds = 0.0
    for thread in threading.enumerate():
        if any(work in thread.name for work in WORK_THREADS) or (
            in_client and thread is threading.main_thread()
        ):
            continue
        with contextlib.suppress(OSError):  # it ended meanwhile
            seconds += time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
    return seconds


def busiest_worker_seconds(task_stream: list[dict[str, Any]]) -> float:
    """The most seconds one worker spent computing tasks, from dask's task stream."""
    seconds: dict[str, float] = collections.defaultdict(float)
    for task in task_stream:
        for period in task["startstops"]:
            if period["action"] == "compute":
                seconds[task["worker"]] += period["stop"] - period["start"]
    return max(seconds.values(), default=0.0)


def first_block(x_block: np.ndarray, b_block: np.ndarray, r_block: np.ndarray) -> np.ndarray:
    """A task on the same blocks as the kernel's that does nothing: dask's own cost."""
    return x_block


def tasks_on_scheduler(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--rows", type=positive_int, default=8192)
    parser.add_argument("--columns", type=positive_int, default=14336)
    parser.add_argument("--chunk-rows", type=positive_int, default=2048)
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--threads-per-worker", type=positive_int, default=1)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument(
        "--dask-defaults", action="store_true", help="dask's own settings, not QUIET_DASK"
    )
    args = parser.parse_args()
    print(host_summary(), flush=True)  # the load before the cluster's own
    settings = {} if args.dask_defaults else QUIET_DASK
    shape, chunks = (args.rows, args.columns), (args.chunk_rows, args.columns)
    threads = args.workers * args.threads_per_worker
    kernel = xfuse.compile(GELU, threads=threads)
    task_kernel = xfuse.compile(GELU)  # one thread per task: the workers' threads are the cores

    with (
        dask.config.set(settings),  # the worker processes get the settings as they start
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=args.threads_per_worker,
            processes=True,
            dashboard_address=None,
            # The scheduler's HTTP server (health, metrics) on a free port: 8787 may be taken.
            scheduler_kwargs={"dashboard_address": ":0"},
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
            "dask, no work (x's block back)": da.blockwise(
                first_block, "td", x, "td", b, "d", r, "td", dtype=np.float32
            ),
        }
        input_tasks = client.run_on_scheduler(tasks_on_scheduler)

        def dask_cpu_seconds() -> float:
            """CPU seconds dask's threads have used so far, in all processes (the workers'
            counts travel with a message: a few ms of dask's CPU, as much in every row)."""
            workers = client.run(dask_threads_cpu_seconds, False)
            return sum(workers.values()) + dask_threads_cpu_seconds(True)

        def persist_and_count(array: da.Array) -> Run:
            """Seconds to persist `array` and wait, the tasks the scheduler ran and the busiest
            worker's seconds in them; then drop it and wait until the scheduler has forgotten
            it, so the next run computes again."""
            with get_task_stream(client) as stream:
                dask_cpu = dask_cpu_seconds()
                start = time.perf_counter()
                result = client.persist(array)
                wait(result)
                seconds = time.perf_counter() - start
                dask_cpu = dask_cpu_seconds() - dask_cpu
            tasks = client.run_on_scheduler(tasks_on_scheduler) - input_tasks
            del result
            while client.run_on_scheduler(tasks_on_scheduler) > input_tasks:
                time.sleep(0.01)
            return Run(seconds, dask_cpu, tasks, busiest_worker_seconds(stream.data))

        # What the client receives are views into its messages' buffers, where an array need
        # not start at a multiple of its itemsize (b did not): copied where misaligned, since a
        # prepared call takes no misaligned input.
        local_x, local_b, local_r = (
            np.require(a, requirements=["C", "A"]) for a in client.gather(client.compute([x, b, r]))
        )
        one_process = f"xfuse, one process, threads={threads}"
        preallocated = kernel.prepare(
            x=local_x, b=local_b, r=local_r, out=np.empty(shape, np.float32)
        )

        def new_array() -> Run:
            """Seconds of one call making a new result, released after the clock has stopped
            (as `persist_and_count` releases a dask row's result): each row then finds the
            memory as the row before it left it (this VM hands memory freed seconds ago back to
            its host, and touching it again is slow: docs/scale-out.md)."""
            dask_cpu = dask_cpu_seconds()
            start = time.perf_counter()
            result = kernel(x=local_x, b=local_b, r=local_r)
            seconds = time.perf_counter() - start
            dask_cpu = dask_cpu_seconds() - dask_cpu
            del result
            return Run(seconds, dask_cpu)

        def into_preallocated() -> Run:
            dask_cpu = dask_cpu_seconds()
            start = time.perf_counter()
            preallocated()
            seconds = time.perf_counter() - start
            return Run(seconds, dask_cpu_seconds() - dask_cpu)

        # Every variant, the one-process calls too, runs once a round, so that a change in the
        # machine's load hits them alike (the cluster idles during the one-process calls).
        measured: dict[str, Callable[[], Run]] = {
            **{
                name: functools.partial(persist_and_count, array)
                for name, array in variants.items()
            },
            one_process: new_array,
            f"{one_process}, preallocated out": into_preallocated,
        }
        runs: dict[str, list[Run]] = {name: [] for name in measured}
        names = list(measured)
        for round_index in range(args.repeat + 1):
            # Each round starts one row later, so no row always follows the same one: the
            # dask/numpy row frees much memory, which this VM is slow to touch again.
            start = round_index % len(names)
            for name in names[start:] + names[:start]:
                runs[name].append(measured[name]())
        rows = {
            name: Run(  # the first run is a warm-up
                statistics.median(run.seconds for run in timed[1:]),
                statistics.median(run.dask_cpu for run in timed[1:]),
                timed[0].tasks,
                None
                if timed[0].busiest is None
                else statistics.median(r.busiest for r in timed[1:]),
            )
            for name, timed in runs.items()
        }
        check = client.compute(variants["xfuse through dask"] - variants["dask/numpy expression"])
        max_difference = float(np.abs(check.result()).max())

    seconds_of = {name: row.seconds for name, row in rows.items()}
    baseline = seconds_of["dask/numpy expression"]
    elements = args.rows * args.columns
    chunks = -(-args.rows // args.chunk_rows)  # (dask clips a chunk to the array: 4 rows of 2048)
    chunk_rows = min(args.chunk_rows, args.rows)
    chunking = f"{chunks} chunk{'s' * (chunks != 1)} of [{chunk_rows}, {args.columns}]"
    if args.rows % chunk_rows:
        last = args.rows % chunk_rows
        chunking += f" (the last of {last} row{'s' * (last != 1)})"
    print(
        f"GELU + bias + residual, [{args.rows}, {args.columns}] float32 in {chunking}, "
        f"{args.workers} worker process{'es' * (args.workers != 1)} x "
        f"{args.threads_per_worker} thread{'s' * (args.threads_per_worker != 1)}; each row makes "
        "a new [t, d] result from inputs in memory and releases it after its clock stops "
        "(except: no work, and into a preallocated one); median of "
        f"{args.repeat} round{'s' * (args.repeat != 1)} after a warm-up round; dask settings: "
        f"{settings or 'dask defaults'}\n"
    )
    print(
        "| variant | time | ns/element | vs dask/numpy | tasks run | busiest worker in tasks "
        "| dask's threads' CPU |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (seconds, dask_cpu, tasks, busiest) in rows.items():
        print(
            f"| {name} | {milliseconds(seconds)} ms | {seconds / elements * 1e9:.2f} | "
            f"{baseline / seconds:.1f}x | {'-' if tasks is None else tasks} | "
            f"{'-' if busiest is None else f'{milliseconds(busiest)} ms'} | "
            f"{milliseconds(dask_cpu)} ms |"
        )
    xfuse_dask = seconds_of["xfuse through dask"]
    fresh, no_work = seconds_of[one_process], seconds_of["dask, no work (x's block back)"]
    in_tasks = rows["xfuse through dask"].busiest
    assert in_tasks is not None
    print(
        f"\nxfuse through dask / {one_process} (each a new result, released after its clock): "
        f"{xfuse_dask / fresh:.2f}x; / preallocated out: "
        f"{xfuse_dask / seconds_of[f'{one_process}, preallocated out']:.2f}x; / dask x + r: "
        f"{xfuse_dask / seconds_of['dask x + r (floor)']:.2f}x\n"
        f"xfuse through dask: its busiest worker in tasks {milliseconds(in_tasks)} ms "
        f"({in_tasks / fresh:.2f}x one process), the rest {milliseconds(xfuse_dask - in_tasks)} ms "
        f"(a persist of tasks that do nothing: {milliseconds(no_work)} ms)"
    )
    print(f"max |xfuse - dask/numpy|: {max_difference:.2e}")


if __name__ == "__main__":
    run_script(main)
