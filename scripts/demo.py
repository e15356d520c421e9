"""Run the whole pipeline locally: land raw data, ETL DAG, training DAG, then a summary.

``python scripts/demo.py [DATASET ...]`` runs the named datasets of ``DEMO_DATASETS`` (all by
default: what ``make demo`` runs). Uses the embedded defaults: storage on a local directory
(``PIPELINE_STORAGE_ROOT``, ``file://<repo>/.data``) and an Airflow home with SQLite (``AIRFLOW_HOME``, ``<repo>/.airflow``).
Each DAG runs with ``airflow dags test``, i.e. in this process tree, no scheduler needed;
its runs start now (the window comes from the ``interval_end`` Param, not the logical date),
so Airflow shows real durations, and each task's part of the output is written where the
Airflow UI reads task logs (``scripts/dag_test_logs.py``).

The terminal gets one progress line per step, naming an ETL DAG's tasks
(``wait_for_data -> build -> publish`` for every dataset), and the pipeline's own summary
lines; every command's full output goes to ``.demo/demo.log`` (``DEMO_LOG``), named on the first line and
again, with its last lines, when a step fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dag_test_logs import write_task_logs

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# The demo's run covers all of 2013: the window ends at the data interval end and is unbounded.
DEMO_INTERVAL_END = "2014-01-01T00:00:00+00:00"
# Digits shows the image path through the same DAGs (a spec, no DAG code).
DEMO_DATASETS = ("flights", "digits")
DEFAULT_LOG = REPO / ".demo" / "demo.log"
# A step's own summary lines (etl.pipeline, training) in a DAG test's structlog output.
SUMMARY = re.compile(r"\[info\s*\] (.+?)\s+\[(?:etl\.pipeline|training\.outputs)\]")
TAIL_LINES = 40
# What to do next in the UI: README "The first UI run" (a test holds the Params to it).
FIRST_UI_RUN = ("Next, in the Airflow UI (make standalone, http://localhost:8080): unpause "
                "train_flights and score_flights, trigger etl_flights with interval_end = "
                "2014-01-01 and window_days = 7: it publishes a new version, trains on it and "
                "scores it. README: 'The first UI run'.")


class StepFailed(Exception):
    """A demo step exited non-zero; the message names it and the log."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PIPELINE_STORAGE_ROOT", f"file://{REPO}/.data")
    env.setdefault("AIRFLOW_HOME", str(REPO / ".airflow"))
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
    env["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
    env["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _summaries(output: str) -> list[str]:
    """The steps' summary lines (compaction says its merges in one line)."""
    return [m.group(1) for m in SUMMARY.finditer(output)]


def _run(label: str, args: list[str], env: dict[str, str], log_path: Path,
         on_output: Callable[[str], object] | None = None) -> None:
    """Run one step with its output appended to the log; print one line (plus summaries).

    ``on_output`` gets the step's output, also when the step failed."""
    print(f"{label} ...", end=" ", flush=True)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(args)}\n")
        log.flush()
        start = log.tell()
        t0 = time.monotonic()
        proc = subprocess.run(args, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                              check=False)
    with log_path.open(encoding="utf-8", errors="replace") as log:
        log.seek(start)
        output = log.read()
    print(f"{'ok' if proc.returncode == 0 else 'FAILED'} ({time.monotonic() - t0:.0f} s)")
    for line in _summaries(output):
        print(f"    {line}")
    if on_output is not None:
        on_output(output)
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-TAIL_LINES:])
        raise StepFailed(f"{label}: `{' '.join(args)}` exited with {proc.returncode}; last "
                         f"{TAIL_LINES} lines of {log_path}:\n{tail}")


def dag_test(label: str, dag_id: str, conf: dict[str, str], env: dict[str, str],
             log_path: Path) -> None:
    """``airflow dags test`` without a logical date, so the run starts now and Airflow shows
    its real duration (a logical date would be stored as its start); then its task logs,
    failed ones too, go where the Airflow UI's log view finds them."""
    logs = env.get("AIRFLOW__LOGGING__BASE_LOG_FOLDER") or str(Path(env["AIRFLOW_HOME"]) / "logs")
    _run(label, [str(BIN / "airflow"), "dags", "test", dag_id, "--conf", json.dumps(conf)], env,
         log_path, lambda output: write_task_logs(output, Path(logs)))


def main(datasets: list[str]) -> int:
    """``datasets``: which of ``DEMO_DATASETS`` to run (all when none are named)."""
    unknown = sorted(set(datasets) - set(DEMO_DATASETS))
    if unknown:
        print(f"demo: unknown dataset(s) {unknown}; expected some of {list(DEMO_DATASETS)}",
              file=sys.stderr)
        return 2
    datasets = [d for d in DEMO_DATASETS if d in datasets] or list(DEMO_DATASETS)
    env = _env()
    root = env["PIPELINE_STORAGE_ROOT"]
    log_path = Path(env.get("DEMO_LOG", DEFAULT_LOG))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("", encoding="utf-8")
    print(f"full logs: {log_path}")
    airflow, python = str(BIN / "airflow"), str(BIN / "python")
    _run("airflow db migrate", [airflow, "db", "migrate"], env, log_path)
    for dataset in datasets:
        _run(f"land {dataset}", [python, "-m", "etl", "land", "--root", root, "--dataset",
                                 dataset], env, log_path)
        dag_test(f"ETL DAG etl_{dataset} (wait_for_data -> build -> publish)", f"etl_{dataset}",
                 {"interval_end": DEMO_INTERVAL_END}, env, log_path)
        dag_test(f"training DAG train_{dataset}", f"train_{dataset}", {"version": "latest"},
                 env, log_path)
    sys.stdout.flush()
    subprocess.run([python, str(REPO / "scripts" / "summary.py"), "--root", root,
                    *datasets], env=env, cwd=REPO, check=True)
    print(f"\nfull logs: {log_path}")
    print(FIRST_UI_RUN)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except StepFailed as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        sys.exit(1)
    except subprocess.CalledProcessError as exc:
        print(f"\ndemo failed: {' '.join(exc.cmd)} exited with {exc.returncode}", file=sys.stderr)
        sys.exit(exc.returncode or 1)
