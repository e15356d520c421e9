"""pipeline_ui.runs: a run's state says which task holds it."""

from __future__ import annotations

import os

import pytest


def test_a_runs_state_says_which_task_holds_it() -> None:
    from pipeline_ui.runs import dataset_of, summarize

    assert summarize("running", [("wait_for_data", "deferred"), ("build", "None")]) == (
        "deferred", "wait_for_data deferred")
    assert summarize("failed", [("publish", "upstream_failed"), ("wait_for_data", "failed"),
                                ("build", "upstream_failed")]) == (
        "failed", "wait_for_data failed, publish upstream failed")
    assert summarize("success", [("publish", "skipped"), ("build", "success")]) == (
        "success", "publish skipped")
    assert [dataset_of(d) for d in ("etl_flights", "train_wine", "score_wine", "etl_",
                                    "other")] == ["flights", "wine", "wine", None, None]


def test_a_waiting_run_says_what_it_waits_for_and_until_when() -> None:
    """Issue 41 item 2: the XCom ``wait_for_data`` left before deferring, beside the run."""
    from pipeline_ui.runs import summarize

    waiting = {"missing": 1, "shown": "2013-01-03", "until": "2026-11-25T06:00:00+00:00"}
    assert summarize("running", [("wait_for_data", "deferred"), ("build", "None")],
                     waiting) == ("deferred", ("wait_for_data deferred: waiting for 1 "
                                   "partition(s) (2013-01-03) until 2026-11-25 06:00 UTC"))
    # once it no longer waits the XCom is history: not said
    assert summarize("failed", [("wait_for_data", "failed")], waiting) == (
        "failed", "wait_for_data failed")


def test_a_skipped_task_says_why_beside_its_run() -> None:
    """Issue 51: a skipped training read "train skipped" and nothing more; the reason its
    skip left (``flightpipe_dags.choice.SKIP_KEY``) is shown, a task without one as before."""
    from pipeline_ui.runs import SKIP_KEY, summarize

    assert SKIP_KEY == "skipped"
    why = ("Not training flights: the newest published version of flights, v2, is already "
           "trained by run asset_triggered__1 of train_flights")
    assert summarize("success", [("resolve_version", "success"), ("train", "skipped"),
                                 ("announce_model", "skipped")], None, {"train": why}) == (
        "success", f"train skipped: {why}, announce_model skipped")
    assert summarize("success", [("score", "skipped")], None, {}) == ("success", "score skipped")


TINY_DAGS = '''
from airflow.sdk import dag, task
from flightpipe_dags import choice


def tiny(dag_id, reason):
    @dag(dag_id=dag_id, schedule=None)
    def runs():
        @task(task_id={"etl": "publish", "train": "train", "score": "score"}[dag_id.split("_")[0]])
        def work() -> None:
            if reason:
                choice.skip(reason)
        work()
    return runs()


etl_tiny = tiny("etl_tiny", None)
train_tiny = tiny("train_tiny", "Not training tiny: nothing waits")
score_tiny = tiny("score_tiny", "Not scoring tiny: no current model")
'''
RUN_THEM = '''
import json, sys
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag
folder = Path(sys.argv[1])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
for dag_id in ("etl_tiny", "train_tiny", "score_tiny"):
    bag.dags[dag_id].test(logical_date=None)
from pipeline_ui.runs import AirflowRuns
runs = AirflowRuns()
rows = {r.dag_id: [r.state, r.note] for r in runs.recent("tiny")}
print("E2E_RESULT=" + json.dumps({"names": sorted(runs.dataset_names()), "rows": rows}))
'''


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_airflow_runs_lists_score_runs_and_a_skipped_tasks_reason(tmp_path) -> None:
    """The real metadata DB (SQLite), real runs (``dag.test()``) whose tasks skip through
    ``flightpipe_dags.choice.skip``: the dataset page's source lists ``score_<name>`` runs
    beside ``etl_``/``train_`` ones, and each skipped task with the reason it left."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "tiny.py").write_text(TINY_DAGS)
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
           "AIRFLOW__CORE__DAGS_FOLDER": str(folder), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PYTHONPATH": os.pathsep.join(str(repo / p) for p in ("", "dags", "plugins"))}
    airflow = str(Path(sys.executable).parent / "airflow")
    for args in ([airflow, "db", "migrate"], [sys.executable, "-c", RUN_THEM, str(folder)]):
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240,
                              check=False)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("E2E_RESULT=")]
    got = json.loads(line.removeprefix("E2E_RESULT="))
    assert got["names"] == ["tiny"]
    assert got["rows"] == {
        "score_tiny": ["success", "score skipped: Not scoring tiny: no current model"],
        "train_tiny": ["success", "train skipped: Not training tiny: nothing waits"],
        "etl_tiny": ["success", ""]}
