"""One logging setup for every process that runs pipeline code: ours at INFO, libraries at WARNING.

An operator reads a task log to learn what the step did (inputs, rows, outcome, time, output
URI); the pipeline's own loggers say that in a few lines. Third-party libraries log their
internals at INFO, and in a task process those records reach the output because Airflow's
root logger is at INFO and routes every propagating record:

- Great Expectations logs ~214 "Skipping registering function ..." records at INFO from
  ``great_expectations._docs_decorators`` while its modules are *imported* (its public-API
  doc registry), so the level must be set before GX is imported.
- distributed's scheduler and nannies run in the task process (LocalCluster) and log every
  start, connection and retirement at INFO; ``LocalCluster(silence_logs=...)`` only lowers
  distributed's own stream handlers, not the handler Airflow installs on the root.
- TensorFlow and absl write C++ and Python INFO lines; ``TF_CPP_MIN_LOG_LEVEL`` must be set
  before TensorFlow is imported. It is not enough: while ``import tensorflow`` loads its
  shared libraries, absl's C++ log is not initialised yet and writes every record to the
  process's stderr whatever the level (the "All log messages before absl::InitializeLog()"
  notice, oneDNN and CUDA-stub INFO lines). ``import_quietly`` holds file descriptor 2
  during that import and TensorFlow's first GPU query, and passes on only records at WARNING
  or above, less the cuInit "error" of a machine without an NVIDIA driver. On such a machine,
  two known-harmless native "errors" of a fit are filtered out of stderr for the rest of the
  process, each by its exact text: TensorFlow's CPU fallback (oneDNN and DT_INT32), and
  grappler's "topological sort failed" on the trees' walk loop (an optimizer pass it skips;
  every training logged it twice a graph).

``configure`` is called by the command lines (with a handler), by each DAG task body (Airflow
owns the handlers, so only levels change) and, through ``dask_setup``, by every Dask worker.
It is idempotent and imports nothing heavy.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import re
import sys
import tempfile
import threading
from types import ModuleType
from typing import Any, TextIO

OWN_LOGGERS = ("etl", "training", "pipeline_ui")
QUIET_LOGGERS = (
    "great_expectations", "distributed", "dask", "tornado", "asyncio", "tensorflow", "absl",
    "keras", "h5py", "fsspec", "gcsfs", "google", "google_auth_httplib2", "urllib3", "requests",
    "httpx", "httpcore", "aiohttp", "pyarrow", "numexpr", "matplotlib", "PIL", "numba",
    "tfx_bsl", "apache_beam", "tensorflow_datasets", "bokeh",
)
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The level for QUIET_LOGGERS; "NOTSET" leaves them as something else configured them (a
# debugging session). An environment variable, so Dask worker processes follow their parent.
LIBRARY_LEVEL_ENV = "PIPELINE_LIBRARY_LOG_LEVEL"
# Records that are routine at these loggers' own WARNING level: distributed's P2P shuffle
# plugin logs every shuffle's start and end as a warning (a real failure raises in the task).
ROUTINE_WARNINGS = ("distributed.shuffle._scheduler_plugin",)
# absl's C++ INFO records before its log is set up ("I0000 00:00:<unix seconds> <thread>
# port.cc:153] ...": month-day and hour-minute zero, the seconds since 1970) and the
# notice it prints before its first record when nobody called absl::InitializeLog().
NATIVE_INFO = re.compile(r"^(?:I\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] |"
                         r"WARNING: All log messages before absl::InitializeLog\(\))")
# On a machine without NVIDIA's driver, TensorFlow's CUDA build reports its first look for a
# GPU as an error ("E0000 ... failed call to cuInit: ... CUDA error (303)") though nothing
# failed: training runs on the CPU. Dropped only where no driver is installed.
NO_GPU_NOTICE = re.compile(r"^E\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] failed call to cuInit")
NVIDIA_DRIVER = "/proc/driver/nvidia/version"
# A CPU kernel's fallback notice, logged as an error at the first int32 op of a fit:
# "E0000 ... util.cc:131] oneDNN supports DT_INT32 only on platforms with AVX-512. Falling
# back to the default Eigen-based implementation if present." Nothing failed.
CPU_FALLBACK_NOTICE = re.compile(r"^E\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] oneDNN supports "
                                 r"DT_INT32 only on platforms with AVX-512")
# Grappler's dependency optimizer gives up on a graph with a loop it cannot order (the
# compiled forest's tf.while_loop, ``training.models.forest``) and says so as an error, twice
# a graph: "E0000 ... dependency_optimizer.cc:773] Iteration = 0, topological sort failed with
# message: The graph couldn't be sorted in topological order." The pass is skipped; the graph
# runs as built.
GRAPPLER_SORT_NOTICE = re.compile(
    r"^E\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ dependency_optimizer\.cc:\d+\] Iteration = \d+, "
    r"topological sort failed with message: The graph couldn't be sorted in topological order")
_HANDLER_NAME = "flightpipe"
_applied: dict[str, int] = {}  # the library level configure() chose in this process
_pending_filter: list[int] = []  # a filter's pipe, put on fd 2 once the held import ends


def library_level() -> int:
    """The level for third-party loggers: ``$PIPELINE_LIBRARY_LOG_LEVEL``, else WARNING."""
    name = os.environ.get(LIBRARY_LEVEL_ENV, "").strip().upper() or "WARNING"
    level = logging.getLevelName(name)
    return level if isinstance(level, int) else logging.WARNING


class _ComputeFailedEcho(logging.Filter):
    """Drops a Dask worker's "Compute Failed" record: the exception it echoes, traceback
    included, reaches the client, which reports it in one line naming the file and column."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Compute Failed")


def quiet_libraries(level: int | None = None) -> None:
    """Raise third-party loggers to ``level`` and keep TensorFlow's C++ INFO lines out."""
    level = library_level() if level is None else level
    if level == logging.NOTSET:
        return
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)
    for name in ROUTINE_WARNINGS:
        logging.getLogger(name).setLevel(max(level, logging.ERROR))
    worker = logging.getLogger("distributed.worker")
    if not any(isinstance(f, _ComputeFailedEcho) for f in worker.filters):
        worker.addFilter(_ComputeFailedEcho())
    # Read by TensorFlow when it is imported; an operator's explicit choice wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def configure(level: int = logging.INFO, *, handler: bool = True,
              stream: TextIO | None = None, libraries: int | None = None) -> None:
    """Pipeline loggers at ``level``, libraries at ``libraries`` (default: ``library_level()``).

    ``handler=False`` is for processes whose handlers belong to someone else (an Airflow task:
    its records go to the task log through Airflow's root handler).
    """
    libraries = library_level() if libraries is None else libraries
    quiet_libraries(libraries)
    _applied["libraries"] = libraries
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(level)
    if not handler:
        return
    root = logging.getLogger()
    ours = [h for h in root.handlers if h.get_name() == _HANDLER_NAME]
    if ours:  # a second entry in one process (tests, a notebook) writes where stderr is now
        for h in ours:
            if isinstance(h, logging.StreamHandler):
                h.stream = stream or sys.stderr  # not setStream: it flushes the old, maybe closed
    else:
        out = logging.StreamHandler(stream or sys.stderr)
        out.set_name(_HANDLER_NAME)
        out.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(out)
    root.setLevel(libraries or logging.INFO)  # loggers nobody named follow the libraries


def import_quietly(name: str = "tensorflow") -> ModuleType:
    """Import ``name`` with native INFO records kept out of stderr; warnings and errors pass.

    Call it where TensorFlow is first imported (the training task body, ``python -m
    training``), after ``configure``; once imported, TensorFlow honours TF_CPP_MIN_LOG_LEVEL.
    """
    if name in sys.modules:
        return sys.modules[name]
    if _applied.get("libraries", library_level()) == logging.NOTSET:  # debugging: all of it
        return importlib.import_module(name)
    quiet_libraries()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            module = importlib.import_module(name)
            if name == "tensorflow":  # its CUDA platform starts on the first device query
                module.config.list_physical_devices("GPU")
                if not os.path.exists(NVIDIA_DRIVER):
                    _filter_stderr((CPU_FALLBACK_NOTICE, GRAPPLER_SORT_NOTICE), saved)
            return module
        finally:
            sys.stderr.flush()
            if _pending_filter:  # fd 2 becomes the filter's pipe, its only write end
                write_fd = _pending_filter.pop()
                os.dup2(write_fd, 2)
                os.close(write_fd)
            else:
                os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            no_gpu = not os.path.exists(NVIDIA_DRIVER)
            kept = [line for line in held.read().splitlines(keepends=True)
                    if not NATIVE_INFO.match(text := line.decode(errors="replace"))
                    and not (no_gpu and NO_GPU_NOTICE.match(text))]
            if kept:
                os.write(2, b"".join(kept))


def _filter_stderr(drop: tuple[re.Pattern[str], ...], target: int) -> None:
    """From now on, lines written to fd 2 reach ``target`` (a dup of the real stderr) through a
    pipe that leaves out those matching one of ``drop``; at exit the pipe is drained.

    Only on machines without an NVIDIA driver: a GPU crash's last native line must never wait
    in a pipe when the process aborts.
    """
    out = os.dup(target)
    read_fd, write_fd = os.pipe()

    def pump() -> None:
        with os.fdopen(read_fd, "rb") as source:
            for line in source:
                text = line.decode(errors="replace")
                if not any(pattern.match(text) for pattern in drop):
                    os.write(out, line)

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()

    def drain() -> None:
        sys.stderr.flush()
        os.dup2(out, 2)  # the pipe's write end closes: the pump reads to its end and stops
        thread.join(timeout=5)

    atexit.register(drain)
    _pending_filter.append(write_fd)


def reapply() -> None:
    """Set the library levels again where configure() ran (a no-op elsewhere).

    ``import distributed`` sets its logger to its own config's level (INFO), undoing an
    earlier configure(); the Dask cluster calls this once distributed is imported.
    """
    if "libraries" in _applied:
        quiet_libraries(_applied["libraries"])


def verbose() -> None:
    """Debugging: libraries keep the levels something else gave them, here and in workers."""
    os.environ[LIBRARY_LEVEL_ENV] = "NOTSET"


def dask_setup(worker: Any = None) -> None:
    """Dask preload hook (``preload=["etl.logs"]``): workers report warnings only, named."""
    del worker
    configure(logging.WARNING)
