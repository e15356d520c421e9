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
"""

from __future__ import annotations

import sys
from typing import Any

from bench.measure import REPO
from bench.proctree import last_json, run_checked


def _step(args: list[str]) -> tuple[str, dict[str, float]]:
    child = run_checked([sys.executable, "-m", "etl", *args], cwd=REPO)
    return child.stdout, child.figures()


SEGMENT_WORK = ("build_s", "validate_s", "compose_s")  # what build_version times itself


def gx_import_bare_s() -> float:
    """Seconds a fresh interpreter spends importing Great Expectations (over a bare one),
    kept beside ``build``'s overhead as information."""
    bare, gx = (run_checked([sys.executable, "-c", code], cwd=REPO).wall_s
                for code in ("pass", "import great_expectations"))
    return max(0.0, gx - bare)


def task_overheads(root: str, interval_end: str, interval_start: str | None,
                   dataset: str = "flights") -> dict[str, Any]:
    """``build`` then ``publish`` in their own processes over one window (a fresh root: every
    segment of the window is built), as the DAG's ``build -> publish`` runs them."""
    window = ["--interval-end", interval_end] + (
        ["--interval-start", interval_start] if interval_start else [])
    stdout, build = _step(["build", "--dataset", dataset, "--root", root,
                           "--run-id", "bench-tasks", *window])
    draft = stdout.strip().splitlines()[-1]
    stdout, publish = _step(["publish", "--written-uri", draft])
    timings = last_json(stdout).get("timings", {})
    own = sum(timings.get(key, 0.0) for key in SEGMENT_WORK)
    gx = timings.get("gx_import_s", 0.0)
    out = {"build": {**build, "step_s": own, "timings": timings, "gx_import_s": gx,
                     "gx_import_bare_s": gx_import_bare_s(),
                     "overhead_s": build["wall_s"] - own + gx},
           "publish": {**publish, "step_s": None, "overhead_s": publish["wall_s"]}}
    return {"per_task": out, "max_overhead_s": max(t["overhead_s"] for t in out.values()),
            "note": "CLI subcommands in fresh interpreters; the Airflow task runner's own "
                    "start-up is not included"}
