"""Fixed overhead per Airflow task, approximated without Airflow.

Each task of an ETL DAG calls one ``etl.pipeline`` step in the task runner's process; here each
runs as its CLI subcommand (the same functions) in a fresh interpreter, over one window on a
fresh root, as the one chain's DAG runs them: ``etl build`` then ``etl publish --written-uri``.
``build``'s overhead is its wall time minus the build, validation and compose times it records
itself (``build_s``, ``validate_s``, ``compose_s``), plus importing Great Expectations: that is
a fixed cost of every process that validates, but it happens on first use (the suite is read
while the window is planned), inside ``build_s``, so the seconds the build itself records for
that import (``gx_import_s`` in its timings: what GX adds over what the process had already
loaded) are added back. ``gx_import_bare_s``, GX imported alone in a fresh interpreter, is
kept beside it as information: it also counts pandas and the rest that the build loads
anyway.
Publish records no time: its whole wall time is counted. Not included: the Airflow task
runner's own start-up (supervisor, task SDK, XCom), which the DAG end-to-end tests exercise but
this bench does not time.

The compose deployment's workers import GX once, when they start (Celery's ``imports`` on the
default worker, ``--preload`` on the Dask workers), and each task process is forked from them.
``build on a preloading worker`` runs the same ``etl build`` that way: a parent imports
``etl.validation.gx`` and forks a child that runs the CLI's ``main``; the wall time is counted
from the fork, as a task's is. That build must record ``gx_import_s`` 0.0.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from bench.measure import GX_IMPORT, REPO, work_s
from bench.proctree import last_json, run_checked


def _step(args: list[str]) -> tuple[str, dict[str, float]]:
    child = run_checked([sys.executable, "-m", "etl", *args], cwd=REPO)
    return child.stdout, child.figures()


# A worker that imported GX at start, forking a task process that runs one CLI command; the
# child's output is relayed, then one line with the wall time from the fork to its exit.
FORKED = """
import json, os, sys, time
import etl.validation.gx
args = json.loads(sys.argv[1])
read, write = os.pipe()
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    os.close(read)
    os.dup2(write, 1)
    from etl.__main__ import main
    try:
        code = main(args)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    sys.stdout.flush()
    os._exit(code or 0)
os.close(write)
out = b""
while block := os.read(read, 1 << 16):
    out += block
_, status = os.waitpid(pid, 0)
wall = time.monotonic() - t0
sys.stdout.write(out.decode())
print(json.dumps({"forked_wall_s": wall}))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _forked_step(args: list[str]) -> tuple[str, dict[str, float]]:
    """One CLI command in a task process forked from a worker that preloaded GX."""
    import json

    child = run_checked([sys.executable, "-c", FORKED, json.dumps(args)], cwd=REPO)
    lines = child.stdout.strip().splitlines()
    wall = json.loads(lines[-1])["forked_wall_s"]
    return "\n".join(lines[:-1]), {**child.figures(), "wall_s": wall,
                                    "worker_wall_s": child.wall_s}


SEGMENT_WORK = ("build_s", "validate_s", "compose_s")  # what build_version times itself


def gx_import_bare_s() -> float:
    """Seconds a fresh interpreter spends importing Great Expectations (over a bare one),
    kept beside ``build``'s overhead as information."""
    bare, gx = (run_checked([sys.executable, "-c", code], cwd=REPO).wall_s
                for code in ("pass", "import great_expectations"))
    return max(0.0, gx - bare)


def task_overheads(fresh_root: Callable[[str], str], interval_end: str,
                   interval_start: str | None, dataset: str = "flights") -> dict[str, Any]:
    """``build`` then ``publish`` in their own processes over one window (a fresh root: every
    segment of the window is built), as the DAG's ``build -> publish`` runs them."""
    window = ["--interval-end", interval_end] + (
        ["--interval-start", interval_start] if interval_start else [])
    out = {}
    for name, step, folder in (("build", _step, "day-tasks"),
                               ("build on a preloading worker", _forked_step, "day-forked")):
        build_args = ["build", "--dataset", dataset, "--root", fresh_root(folder),
                      "--run-id", "bench-tasks", *window]
        stdout, build = step(build_args)
        draft = stdout.strip().splitlines()[-1]
        stdout, publish = _step(["publish", "--written-uri", draft])
        out[name] = _build_figures(build, last_json(stdout).get("timings", {}))
        out.setdefault("publish", {**publish, "step_s": None, "overhead_s": publish["wall_s"]})
    if out["build on a preloading worker"][GX_IMPORT] != 0.0:
        raise RuntimeError("the forked build imported GX itself: the preload did not hold")
    out["build"]["gx_import_bare_s"] = gx_import_bare_s()
    worker = ("build on a preloading worker", "publish")
    return {"per_task": out, "max_overhead_s": max(out[k]["overhead_s"] for k in worker),
            "fresh_build_overhead_s": out["build"]["overhead_s"],
            "note": "build in a fresh interpreter (LocalExecutor, the CLI) and forked from a "
                    "worker that preloaded GX (the compose workers); the target is the worker's "
                    "(the larger of its build and publish); the Airflow task runner's own "
                    "start-up is not included"}


def _build_figures(build: dict[str, float], timings: dict[str, float]) -> dict[str, Any]:
    """``build``'s overhead: its wall less the work it timed itself, GX's import added back
    (it happens on first use, inside ``build_s``)."""
    own = sum(timings.get(key, 0.0) for key in SEGMENT_WORK)
    return {**build, "step_s": own, "timings": timings, "gx_import_s": timings.get(GX_IMPORT, 0.0),
            "overhead_s": build["wall_s"] - work_s(timings, SEGMENT_WORK)}
