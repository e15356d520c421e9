"""Failures that fail once (issue 51), on Airflow's own run path: ``dag.test()`` runs the real
DAG files' tasks through the task runner, which asks the tasks' ``retry_policy``
(``flightpipe_dags.failures``) when one raises.

One cold interpreter with its own Airflow home (SQLite) runs, on the landed wine table:

- ``etl_wine`` with the store unreachable for ``wait_for_data``'s first look at the raw file
  (fsspec's local ``exists`` raises ConnectionError once; ``build`` and ``publish`` are marked
  success, they are not under test): the task is retried and its second try succeeds;
- ``etl_wine`` in strict mode over a raw file with a null where the suite allows none:
  ``build`` fails in one try, never up for retry;
- ``score_wine`` by hand before any model is blessed: ``score`` fails in one try.

Retry delays are cut to a second (the policy decides whether, not when).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.dagtest import DAGS, REPO, airflow_env, prepare

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SCRIPT = r"""
import json, sys
from datetime import timedelta
from pathlib import Path

import fsspec.implementations.local as local
from airflow.dag_processing.dagbag import BundleDagBag
from airflow.models.taskinstancehistory import TaskInstanceHistory
from airflow.utils.session import create_session

folder, raw = Path(sys.argv[1]), Path(sys.argv[2])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
etl, score = bag.dags["etl_wine"], bag.dags["score_wine"]
for task in [*etl.tasks, *score.tasks]:
    task.retry_delay = timedelta(seconds=1)


def tries(run):
    # each task's state and try now, and the earlier tries Airflow kept (one per retry)
    with create_session() as session:
        rows = session.query(TaskInstanceHistory).filter_by(run_id=run.run_id).all()
        earlier = sorted(f"{h.task_id}#{h.try_number}" for h in rows)
    return {"now": {ti.task_id: [ti.state, ti.try_number] for ti in run.get_task_instances()},
            "earlier": earlier}


out = {}
exists, down = local.LocalFileSystem.exists, []
def unreachable_once(self, path, **kwargs):
    if str(path).endswith("raw/wine/wine.csv") and not down:
        down.append(path)
        raise ConnectionError(f"storage unreachable: {path}")
    return exists(self, path, **kwargs)
local.LocalFileSystem.exists = unreachable_once
out["transient"] = tries(etl.test(logical_date=None, mark_success_pattern="build|publish"))
local.LocalFileSystem.exists = exists

lines = raw.read_text().splitlines()
row = lines[1].split(",")
row[lines[0].split(",").index("alcohol")] = ""  # a null the suite allows in no row
raw.write_text("\n".join([lines[0], ",".join(row), *lines[2:]]) + "\n")
out["validation"] = tries(etl.test(logical_date=None, run_conf={"validation_mode": "strict"}))
out["score"] = tries(score.test(logical_date=None))
print("E2E_RESULT=" + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """(what each run's tasks ended as, the whole output with the task logs)."""
    tmp = tmp_path_factory.mktemp("fail-once")
    env, root = airflow_env(tmp)
    env["PYTHONUNBUFFERED"] = "1"
    prepare(env, [sys.executable, "-m", "etl", "land", "--root", root, "--dataset", "wine"])
    raw = tmp / "data" / "raw" / "wine" / "wine.csv"
    assert raw.is_file(), sorted(os.listdir(tmp / "data"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(DAGS), str(raw)], env=env,
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=800, check=False)
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("E2E_RESULT=")]
    assert proc.returncode == 0 and found, proc.stdout[-6000:]
    return json.loads(found[-1].removeprefix("E2E_RESULT=")), proc.stdout


def _lines(output: str, pattern: str) -> list[str]:
    return [ln for ln in output.splitlines() if re.search(pattern, ln)]


def test_a_validation_failure_fails_in_one_try_saying_deterministic(ran) -> None:
    result, output = ran
    run = result["validation"]
    assert run["now"]["build"] == ["failed", 1], run
    assert run["now"]["publish"][0] == "upstream_failed", run
    assert run["earlier"] == [], run  # no try before it: never up for retry
    said = _lines(output, r"deterministic: ValidationFailed: dataset 'wine': 1 expectation")
    assert len(said) == 1 and re.search(r"; not retried \[airflow\.task\]", said[0]), said
    assert "column 'alcohol'" in said[0]
    assert not _lines(output, r"transient: ValidationFailed")


def test_a_storage_outage_is_retried_saying_transient(ran) -> None:
    result, output = ran
    run = result["transient"]
    assert run["now"]["wait_for_data"] == ["success", 2], run
    assert run["earlier"] == ["wait_for_data#1"], run
    said = _lines(output, r"transient: ConnectionError: storage unreachable: \S+wine\.csv; "
                          r"Airflow retries it \(try 1 of 3\)")
    assert len(said) == 1, _lines(output, "transient|deterministic")
    assert not _lines(output, r"deterministic: ConnectionError")


def test_a_scoring_refusal_fails_in_one_try(ran) -> None:
    """The scoring and training tasks carry the same policy: a run by hand with no blessed
    model fails at once (it was tried twice)."""
    result, output = ran
    run = result["score"]
    assert run["now"]["score"] == ["failed", 1] and run["earlier"] == [], run
    assert len(_lines(output, r"deterministic: NoBlessedModelError: wine: no current model.*"
                              r"; not retried")) == 1
