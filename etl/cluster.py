"""Which Dask cluster a step runs on, and how much memory the run used.

Order of preference: an address given for this run, then ``PIPELINE_DASK_ADDRESS``, then a
client already active in this process (tests, notebooks), then this process's threads when the
step reads at most ``IN_PROCESS_BYTES`` (a nightly window: a cluster would cost more to start
than the work), else a LocalCluster started for the step and closed after it. Worker
processes (not threads) by default: pandas work and the Python encoder baseline hold the GIL.

Workers fork from a forkserver that has imported the heavy libraries once (pandas, pyarrow,
Dask, Great Expectations: about 12 s of CPU each on a small machine), instead of every spawned
worker importing them again. A forked worker would keep the forkserver's environment, so each
worker gets the step's current environment (credentials, emulator host) from its nanny.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dask
import psutil

from etl import logs

if TYPE_CHECKING:
    from distributed import Client

log = logging.getLogger(__name__)

DASK_ADDRESS_ENV = "PIPELINE_DASK_ADDRESS"
# Raw input bytes up to which a step (or a whole run) computes on this process's threads.
IN_PROCESS_BYTES = 32 * 2**20
IN_PROCESS_THREADS = 1
IN_PROCESS_ENV = "PIPELINE_IN_PROCESS_BYTES"  # overrides it; 0 always starts a cluster
_IN_PROCESS: ContextVar[bool] = ContextVar("etl_in_process", default=False)
DEFAULT_MAX_WORKERS = 4
# The module whose dask_setup() configures logging in each worker process (etl/logs.py).
LOGGING_PRELOAD = "etl.logs"
# The scheduler always serves HTTP (health, metrics); with no dashboard it needs no fixed port,
# and a free one avoids "Port 8787 is already in use" warnings when steps or runs overlap.
SCHEDULER_HTTP = {"dashboard_address": "127.0.0.1:0"}
# What a worker process needs for every ETL stage; the forkserver imports it once (the
# tabular kind's window imports its read, row checks, prepare and writer; GX is separate).
WORKER_PRELOAD = (LOGGING_PRELOAD, "distributed", "numpy", "pandas", "pyarrow", "dask.dataframe",
                  "etl.kinds.tabular.window", "etl.validation.gx")


@dataclass(frozen=True)
class ClusterConfig:
    """LocalCluster shape; ignored when joining an existing scheduler."""

    n_workers: int | None = None  # None: one per core, at most DEFAULT_MAX_WORKERS
    threads_per_worker: int = 1
    memory_limit: str = "auto"
    processes: bool = True
    preload: tuple[str, ...] = WORKER_PRELOAD  # () spawns fresh interpreters instead


def _start_method(preload: tuple[str, ...]) -> str:
    """"forkserver" with our preload list where the platform has it, else "spawn"."""
    if not preload or "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    from distributed.utils import get_mp_context

    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        get_mp_context()  # distributed sets its own preload list once; ours replaces it
    # No effect once this process's forkserver runs: later clusters reuse it as it is.
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
    return "forkserver"


def _workers(config: ClusterConfig) -> int:
    return config.n_workers or max(1, min(os.cpu_count() or 1, DEFAULT_MAX_WORKERS))


def _active_client() -> Client | None:
    if "distributed" not in sys.modules:  # no client can be open: spare a small run the import
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def cluster_at_hand() -> bool:
    """A scheduler is named ($PIPELINE_DASK_ADDRESS) or a client is already open here."""
    return bool(os.environ.get(DASK_ADDRESS_ENV)) or _active_client() is not None


@contextmanager
def spawnable_main() -> Iterator[None]:
    """Hide a script ``__main__`` from the worker processes started meanwhile.

    spawn and forkserver children re-run the parent's main *script* before starting. Under
    Airflow 3's LocalExecutor that script is the ``airflow`` CLI, whose import initialises
    Airflow from the task's deliberately blocked DB URL and kills the child ("Nanny failed to
    start"). ETL workers run only etl code, so they need nothing from ``__main__``; a main
    run with ``-m`` (a module spec) is imported by name and left alone.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def in_process(work_bytes: int | None, address: str | None = None) -> bool:
    """Whether work reading ``work_bytes`` of raw input runs on this process's threads: no
    scheduler named, no client open here, and a known size of at most ``IN_PROCESS_BYTES``."""
    return (work_bytes is not None and work_bytes <= in_process_limit() and not address
            and not cluster_at_hand())


def in_process_limit() -> int:
    """``IN_PROCESS_BYTES``, or ``$PIPELINE_IN_PROCESS_BYTES`` where set."""
    return int(os.environ.get(IN_PROCESS_ENV) or IN_PROCESS_BYTES)


@contextmanager
def dask_client(address: str | None = None, config: ClusterConfig = ClusterConfig(),
                work_bytes: int | None = None) -> Iterator[Client | None]:
    """A client for one step (None: this process's threads); closes only what it opened.

    ``work_bytes``: the raw bytes the step reads, when known. Steps nested in an in-process
    run (``etl run`` of a small window) stay in its process.
    """
    address = address or os.environ.get(DASK_ADDRESS_ENV) or None
    if address:
        from distributed import Client

        log.info("joining the Dask scheduler at %s", address)
        with Client(address) as client:
            yield client
        return
    active = _active_client()
    if active is not None:
        yield active
        return
    if _IN_PROCESS.get() or in_process(work_bytes):
        token = _IN_PROCESS.set(True)
        try:
            # p2p shuffles need a distributed worker: tasks-based ones run on threads. One
            # thread: the work holds the GIL, so a second one only adds GIL hand-offs (a year's
            # segment build: ~20% more CPU-s, no less wall time)
            with dask.config.set({"scheduler": "threads", "num_workers": IN_PROCESS_THREADS,
                                  "dataframe.shuffle.method": "tasks"}):
                yield None
        finally:
            _IN_PROCESS.reset(token)
        return
    from distributed import Client, LocalCluster

    n = _workers(config)
    logs.reapply()  # importing distributed reset its logger's level to INFO
    # A daemonic process (a Celery prefork child) may not start worker processes.
    processes = config.processes and not multiprocessing.current_process().daemon
    log.info("starting a LocalCluster: %d worker %s x %d thread(s)", n,
             "process(es)" if processes else "thread pool(s) in this daemonic process",
             config.threads_per_worker)
    method = _start_method(config.preload) if processes else "spawn"
    # Worker processes run etl.logs.dask_setup: libraries at WARNING there too, records named.
    nanny = {"env": dict(os.environ), "preload": [LOGGING_PRELOAD]} if processes else {}
    with dask.config.set({"distributed.worker.multiprocessing-method": method}), \
            spawnable_main(), LocalCluster(n_workers=n, threads_per_worker=config.threads_per_worker,
                         processes=processes, memory_limit=config.memory_limit,
                         dashboard_address=None, scheduler_kwargs=SCHEDULER_HTTP,
                         **nanny) as cluster, Client(cluster) as client:
        yield client


class PeakRSS:
    """Samples RSS and CPU time of this process plus its descendants (Dask workers) in a thread.

    The RSS sum is what the machine must hold for the run, the figure that has to stay flat as
    the data grows. CPU seconds (the last sample of every process seen) say what the run cost
    even when other jobs share the cores and make wall-clock times noisy.
    """

    def __init__(self, period_s: float = 0.1) -> None:
        self.period_s = period_s
        self.peak_bytes = 0
        self._cpu: dict[tuple[int, float], float] = {}
        self._base = sum(psutil.Process().cpu_times()[:2])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def cpu_seconds(self) -> float:
        """User + system CPU of the process tree since ``__init__``."""
        return sum(self._cpu.values()) - self._base

    def _sample(self) -> int:
        me = psutil.Process()
        total = 0
        for proc in [me, *me.children(recursive=True)]:
            try:
                with proc.oneshot():
                    total += proc.memory_info().rss
                    self._cpu[(proc.pid, proc.create_time())] = sum(proc.cpu_times()[:2])
            except psutil.Error:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            time.sleep(self.period_s)

    def __enter__(self) -> PeakRSS:  # noqa: PYI034 - final class, Self adds nothing
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._sample())
