"""Fixed overhead per Airflow task, approximated without Airflow.

Each task of an ETL DAG calls one ``etl.pipeline`` step in the task runner's process; here each
step runs as its CLI subcommand (the same functions) in a fresh interpreter, over one window:

- the one-shot chain (``extract|validate|write|publish``): a task's overhead is the child's wall
  time minus the step's work, its time in a ``run --one-shot`` of the same window, where the
  Dask cluster was already up (a step run alone times its own cluster start inside the step,
  so ``run.json`` of the task is kept as information only);
- the segment chain of an ``incremental`` spec (``build|publish``), as the shipped flights DAG
  runs it: ``build``'s overhead is its wall time minus the build, validation and compose times
  it records itself (``build_s``, ``validate_s``, ``compose_s``) and minus GX's import, which
  the one-shot chain counts inside its validate step (see ``gx_import_s``).

Publish records no time: its whole wall time is counted. Not included: the Airflow task
runner's own start-up (supervisor, task SDK, XCom), which the DAG end-to-end tests exercise but
this bench does not time.
"""

from __future__ import annotations

import sys
from typing import Any

from bench.measure import REPO
from bench.proctree import last_json, run_checked

STEPS = (  # subcommand, the step's key in run.json's timings, the flag taking the last URI
    ("extract", "extract_s", None),
    ("validate", "validate_s", "--staged-uri"),
    ("write", "transform_write_s", "--validated-uri"),
    ("publish", None, "--written-uri"),
)


def _step(args: list[str]) -> tuple[str, dict[str, float]]:
    child = run_checked([sys.executable, "-m", "etl", *args], cwd=REPO)
    return child.stdout, child.figures()


def task_overheads(root: str, interval_end: str, interval_start: str | None,
                   work: dict[str, float], dataset: str = "flights") -> dict[str, Any]:
    """Each step in its own process over one window; ``work`` is the steps' ``timings`` from a
    CLI run of the same window on the same data."""
    window = ["--interval-end", interval_end] + (
        ["--interval-start", interval_start] if interval_start else [])
    walls: dict[str, dict[str, float]] = {}
    uri = ""
    for name, _, flag in STEPS:
        args = [name, "--dataset", dataset]
        args += ["--root", root, "--run-id", "bench-tasks", *window] if flag is None else [flag, uri]
        stdout, walls[name] = _step(args)
        if name != "publish":
            uri = stdout.strip().splitlines()[-1]
    timings = last_json(stdout).get("timings", {})
    out: dict[str, Any] = {}
    for name, key, _ in STEPS:
        own = work.get(key, 0.0) if key else 0.0
        out[name] = {**walls[name], "step_s": own if key else None,
                     "step_s_in_task": timings.get(key) if key else None,
                     "overhead_s": walls[name]["wall_s"] - own}
    return {"per_task": out, "max_overhead_s": max(t["overhead_s"] for t in out.values()),
            "note": "CLI step subcommands in fresh interpreters; the Airflow task runner's "
                    "own start-up is not included"}


SEGMENT_WORK = ("build_s", "validate_s", "compose_s")  # what build_version times itself


def gx_import_s() -> float:
    """Seconds a fresh interpreter spends importing Great Expectations (over a bare one).

    The one-shot chain imports GX inside its timed validate step, so its overhead figures count
    the import as validation work; ``build`` imports it with its module, before its timings
    start. It is taken out of ``build_segments``' overhead so both chains count it alike, and
    kept beside it (``gx_import_s``, ``overhead_with_gx_import_s``).
    """
    bare, gx = (run_checked([sys.executable, "-c", code], cwd=REPO).wall_s
                for code in ("pass", "import great_expectations"))
    return max(0.0, gx - bare)


def segment_task_overheads(root: str, interval_end: str, interval_start: str | None,
                           dataset: str = "flights") -> dict[str, Any]:
    """``build`` then ``publish`` in their own processes over one window (a fresh root: every
    segment of the window is built), as ``build_segments -> publish`` runs them."""
    window = ["--interval-end", interval_end] + (
        ["--interval-start", interval_start] if interval_start else [])
    stdout, build = _step(["build", "--dataset", dataset, "--root", root,
                           "--run-id", "bench-segment-tasks", *window])
    draft = stdout.strip().splitlines()[-1]
    stdout, publish = _step(["publish", "--dataset", dataset, "--written-uri", draft])
    timings = last_json(stdout).get("timings", {})
    own = sum(timings.get(key, 0.0) for key in SEGMENT_WORK)
    gx = gx_import_s()
    out = {"build_segments": {**build, "step_s": own, "timings": timings, "gx_import_s": gx,
                              "overhead_with_gx_import_s": build["wall_s"] - own,
                              "overhead_s": build["wall_s"] - own - gx},
           "publish (segments)": {**publish, "step_s": None, "overhead_s": publish["wall_s"]}}
    return {"per_task": out, "max_overhead_s": max(t["overhead_s"] for t in out.values())}
