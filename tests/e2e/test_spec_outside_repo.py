"""A dataset whose spec lives outside the repo, drafted by ``etl spec init``, gets its three DAGs
(ETL, training, scoring) and runs the first two through ``dag.test()`` with the spec's own training settings; its ETL DAG builds
the window's segments and publishes a version composed of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"

SCRIPT = r"""
import json, sys
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag
folder = Path(sys.argv[1])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
out = {"errors": bag.import_errors, "dags": sorted(bag.dags)}
etl = bag.dags["etl_flights_day"]
out["tags"], out["owner"] = sorted(etl.tags), etl.owner
run = etl.test(logical_date=None, run_conf={"interval_end": "2013-01-04T00:00:00+00:00"})
out["etl"] = {ti.task_id: ti.state for ti in run.get_task_instances()}
train = bag.dags["train_flights_day"].test(logical_date=None, run_conf={"version": "latest"})
out["train"] = {ti.task_id: ti.state for ti in train.get_task_instances()}
print("E2E_RESULT=" + json.dumps(out, default=str))
"""


def _run(args: list[str], env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_drafted_spec_outside_the_repo_runs_through_both_dags(tmp_path: Path) -> None:
    root, specs = f"file://{tmp_path / 'data'}", tmp_path / "team_specs"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "PIPELINE_STORAGE_ROOT": root,
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
           "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PIPELINE_SPECS_PATH": str(specs), "PYTHONPATH": str(REPO),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    for key in ("STORAGE_EMULATOR_HOST", "PIPELINE_ETL_SCHEDULE"):
        env.pop(key, None)
    etl_cli = [sys.executable, "-m", "etl"]
    _run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env, 300)
    examples = {k: v for k, v in env.items() if k != "PIPELINE_SPECS_PATH"}  # flights' spec
    _run([*etl_cli, "land", "--root", root, "--start-day", "2013-01-02", "--end-day",
          "2013-01-03"], examples, 300)
    _run([*etl_cli, "spec", "init", "--name", "flights_day", "--label", "arr_delay",
          "--task", "binary", "--source", "raw/flights/date=2013-01-02/flights.csv"], env, 300)
    spec = specs / "flights_day" / "spec.yaml"  # the user's scheduling and training choices
    spec.write_text(spec.read_text() + "owner: ml-team\ntags: [drafted]\n"
                    "training: {family: mlp, epochs: 3, batch_size: 128, min_margin: 0.0}\n")
    _run([*etl_cli, "spec", "check", "flights_day"], env, 300)
    proc = _run([sys.executable, "-c", SCRIPT, str(DAGS)], env, 800)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("E2E_RESULT=")][-1]
    out = json.loads(line.removeprefix("E2E_RESULT="))
    assert out["errors"] == {} and out["dags"] == ["etl_flights_day", "score_flights_day",
                                                    "train_flights_day"]
    assert out["tags"] == ["drafted", "etl", "flights_day"] and out["owner"] == "ml-team"
    assert out["etl"] == {"wait_for_data": "success", "build": "success", "publish": "success"}, out
    (version,) = (tmp_path / "data" / "datasets" / "flights_day").glob("*/manifest.json")
    assert json.loads(version.read_text())["layout"] == "segments"
    assert out["train"] == {"resolve_version": "success", "train": "success",
                             "announce_model": out["train"].get("announce_model")}, out
    assert out["train"]["announce_model"] in ("success", "skipped"), out  # promoted or not
    metrics = json.loads(next((tmp_path / "data" / "models" / "flights_day").rglob(
        "metrics.json")).read_text())
    assert metrics["epochs"] == 3  # the spec's training.epochs (the default is 10)
