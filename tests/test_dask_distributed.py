"""xfuse kernels on a `dask.distributed` cluster of two worker processes, one of them killed.

Every wait is bounded: the cluster starts within `TIMEOUT_S`, each result comes within it, and
the cluster closes within it, so a broken cluster fails the test instead of hanging the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import xfuse

if TYPE_CHECKING:
    from conftest import Gelu

da = pytest.importorskip(
    "dask.array", reason="dask is an optional extra: pip install 'xfuse[dask]'"
)
distributed = pytest.importorskip("distributed", reason="needs dask.distributed ('xfuse[dask]')")

TIMEOUT_S = 60


SLOW_BLOCKS = """
import time


def slowly(block):
    time.sleep(0.2)
    return block
"""
"""An input stage slow enough that the computation still runs when a worker dies. Workers cannot
import this test module (pytest imports it by path), so it is a module on the workers' path."""

KERNEL_CENSUS = """
import gc

from xfuse.runtime.kernel import Kernel


def live_kernels(frontend_ir, threads):
    return sum(
        isinstance(o, Kernel) and (o.program.frontend_ir, o.threads) == (frontend_ir, threads)
        for o in gc.get_objects()
    )
"""
"""How many kernels of a program and thread count live in a process (run on the workers)."""

SERVER_CALLBACKS = """
def callback_intervals(dask_worker=None, dask_scheduler=None):
    server = dask_worker or dask_scheduler
    return {name: c.callback_time for name, c in server.periodic_callbacks.items()}
"""
"""A dask server's periodic callbacks' intervals in ms, by name (run on a worker or scheduler)."""


@pytest.fixture(scope="module")
def worker_modules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The modules above, importable in this process and in worker processes started after."""
    helpers = tmp_path_factory.mktemp("worker-modules")
    (helpers / "slow_blocks.py").write_text(SLOW_BLOCKS)
    (helpers / "kernel_census.py").write_text(KERNEL_CENSUS)
    (helpers / "server_callbacks.py").write_text(SERVER_CALLBACKS)
    sys.path.insert(0, str(helpers))  # the worker processes start with this process's path
    try:
        yield
    finally:
        sys.path.remove(str(helpers))


@pytest.fixture(scope="module")
def client(worker_modules: None) -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        # The scheduler's HTTP server (health, metrics) on a free port: 8787 may be taken.
        scheduler_kwargs={"dashboard_address": ":0"},
        timeout=TIMEOUT_S,
    )
    client = distributed.Client(cluster, timeout=TIMEOUT_S)
    try:
        yield client
    finally:
        client.close(timeout=TIMEOUT_S)
        cluster.close(timeout=TIMEOUT_S)


def gelu_inputs(rows: int, columns: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(3)
    return (
        rng.standard_normal((rows, columns), dtype=np.float32),
        rng.standard_normal(columns, dtype=np.float32),
        rng.standard_normal((rows, columns), dtype=np.float32),
    )


def test_gelu_on_two_worker_processes_matches_one_process(client: Any, gelu: Gelu) -> None:
    kernel = xfuse.compile(gelu.shaped_source)
    x, b, r = gelu_inputs(1000, 128)
    lazy = kernel(x=da.from_array(x, chunks=(125, 64)), b=da.from_array(b), r=da.from_array(r))
    persisted = client.persist(lazy)
    distributed.wait(persisted, timeout=TIMEOUT_S)
    holders = {w for workers in client.who_has(persisted).values() for w in workers}
    assert len(holders) == 2  # the chunks' kernels ran in both worker processes
    result = client.compute(persisted).result(timeout=TIMEOUT_S)
    np.testing.assert_allclose(result, kernel(x=x, b=b, r=r), rtol=1e-6, atol=1e-6)


def test_each_worker_runs_all_its_tasks_with_one_kernel(client: Any, gelu: Gelu) -> None:
    """dask unpickles a task's kernel with every task: each must find the worker's kernel (its
    plans, split choice and threads), not make one of its own."""
    from kernel_census import live_kernels

    kernel = xfuse.compile(gelu.shaped_source, threads=2)
    x, b, r = gelu_inputs(800, 32)
    lazy = kernel(x=da.from_array(x, chunks=(50, 32)), b=da.from_array(b), r=da.from_array(r))
    persisted = client.persist(lazy)
    distributed.wait(persisted, timeout=TIMEOUT_S)
    kernels = client.run(live_kernels, kernel.program.frontend_ir, 2)
    assert sorted(kernels.values()) == [1, 1]  # 16 tasks, one kernel in each worker


def test_a_worker_killed_mid_computation_still_gives_the_right_result(
    client: Any, gelu: Gelu
) -> None:
    from slow_blocks import slowly

    kernel = xfuse.compile(gelu.shaped_source)
    x, b, r = gelu_inputs(960, 64)
    slow_x = da.from_array(x, chunks=(40, 64)).map_blocks(slowly, dtype=np.float32)
    lazy = kernel(x=slow_x, b=da.from_array(b), r=da.from_array(r, chunks=(40, 64)))
    future = client.compute(lazy)
    deadline = time.monotonic() + TIMEOUT_S
    while not (done := client.run_on_scheduler(finished_kernel_tasks)):
        assert time.monotonic() < deadline, "no kernel task finished"
        time.sleep(0.05)
    assert not future.done()
    # Kill the worker holding the most finished kernel results: they are lost with it.
    victim_address = max(done, key=done.__getitem__)
    victim = next(n for n in client.cluster.workers.values() if n.worker_address == victim_address)
    pid = victim.process.pid
    victim.process.process.kill()  # SIGKILL: no goodbye
    result = future.result(timeout=TIMEOUT_S)
    np.testing.assert_allclose(result, kernel(x=x, b=b, r=r), rtol=1e-6, atol=1e-6)
    assert pid not in client.run(os.getpid).values()


def finished_kernel_tasks(dask_scheduler: Any) -> dict[str, int]:
    """Per worker, how many xfuse tasks it holds in memory (called on the scheduler)."""
    counts: dict[str, int] = {}
    for task in dask_scheduler.tasks.values():
        if str(task.key[0]).startswith("xfuse-") and task.state == "memory":
            for worker in task.who_has:
                counts[worker.address] = counts.get(worker.address, 0) + 1
    return counts


@pytest.fixture(scope="module")
def dask_gelu_benchmark() -> Any:
    """benchmarks/dask_gelu.py as a module (benchmarks are not a package)."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    try:
        import dask_gelu
    finally:
        sys.path.pop(0)
    return dask_gelu


def test_the_benchmark_names_the_chunks_dask_makes(tmp_path: Path) -> None:
    """dask clips a chunk to the array: 4 rows in chunks of 2048 are 1 chunk of [4, 64], which
    the header called "1 chunks of [2048, 64]"; of 5000 rows the last chunk is short."""
    script = Path(__file__).parent.parent / "benchmarks" / "dask_gelu.py"
    for rows, said in (
        ("4", "[4, 64] float32 in 1 chunk of [4, 64], 1 worker"),
        ("5000", "in 3 chunks of [2048, 64] (the last of 904 rows), 1 worker"),
    ):
        options = ["--rows", rows, "--columns", "64", "--chunk-rows", "2048", "--workers", "1"]
        run = subprocess.run(
            [sys.executable, str(script), *options, "--repeat", "1"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert said in run.stdout


def spin(seconds: float) -> None:
    """Use this much CPU time on the calling thread."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_benchmark_counts_dask_threads_cpu_but_not_the_work(dask_gelu_benchmark: Any) -> None:
    """dask's task threads ("0-Dask-Default-Threads-<pid>-0" in a worker) and the benchmark's
    own main thread are the work; any other thread's CPU is dask's."""
    count = dask_gelu_benchmark.dask_threads_cpu_seconds

    def spun_in(name: str) -> float:
        go, done = threading.Event(), threading.Event()

        def run() -> None:
            go.wait()
            spin(0.2)
            done.set()
            time.sleep(TIMEOUT_S)  # still alive when counted

        threading.Thread(target=run, name=name, daemon=True).start()
        before = count(True)
        go.set()
        done.wait(TIMEOUT_S)
        return count(True) - before

    assert spun_in("0-Dask-Default-Threads-123-0") < 0.1
    assert spun_in("xfuse-slice") < 0.1
    assert spun_in("IO loop") >= 0.2
    before_main, before_all = count(True), count(False)
    spin(0.2)
    assert count(True) - before_main < 0.1  # the benchmark's main thread
    assert count(False) - before_all >= 0.2  # a worker's main thread: its event loop


def test_the_benchmark_cluster_wakes_its_event_loops_as_configured(
    dask_gelu_benchmark: Any, worker_modules: None
) -> None:
    """The settings the benchmark starts its cluster under reach the worker processes (which
    get the configuration as they start) and the scheduler."""
    import dask
    from server_callbacks import callback_intervals

    with (
        dask.config.set(dask_gelu_benchmark.QUIET_DASK),
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            # The scheduler's HTTP server (health, metrics) on a free port: 8787 may be taken.
            scheduler_kwargs={"dashboard_address": ":0"},
            timeout=TIMEOUT_S,
        ) as cluster,
        distributed.Client(cluster, timeout=TIMEOUT_S) as client,
    ):
        (worker,) = client.run(callback_intervals).values()
        scheduler = client.run_on_scheduler(callback_intervals)
    assert (worker["profile"], worker["tick"], scheduler["tick"]) == (100, 1000, 1000)
