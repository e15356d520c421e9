"""Multi-class and regression through the DAGs: ``etl_<name>`` then ``train_<name>`` with
``dag.test()``, for the wine and diabetes specs, landed by ``python -m etl land``.

A cold interpreter with its own Airflow home (SQLite) and storage root, like
tests/test_dags_e2e.py; the DAG files build these DAGs from the spec folders, no DAG code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.dagtest import airflow_env, prepare, run_script

SCRIPT = r"""
import json, sys
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag
folder, etl_conf, train_conf = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
out = {}
for name in ("wine", "diabetes"):
    etl = bag.dags[f"etl_{name}"].test(logical_date=None, run_conf=etl_conf)
    train = bag.dags[f"train_{name}"].test(logical_date=None, run_conf=train_conf)
    tis = train.get_task_instances()
    out[name] = {"etl": {ti.task_id: ti.state for ti in etl.get_task_instances()},
                 "train": {ti.task_id: ti.state for ti in tis},
                 "xcom": [ti for ti in tis if ti.task_id == "train"][0].xcom_pull(
                     task_ids="train", run_id=train.run_id)}
print("E2E_RESULT=" + json.dumps(out))
"""


@pytest.mark.e2e
@pytest.mark.timeout(1200)
def test_multiclass_and_regression_through_the_dags(tmp_path: Path) -> None:
    env, root = airflow_env(tmp_path)
    prepare(env, [sys.executable, "-m", "etl", "land", "--root", root, "--dataset", "wine"],
            [sys.executable, "-m", "etl", "land", "--root", root, "--dataset", "diabetes"])
    etl_conf = {"interval_end": "2026-01-01T00:00:00+00:00"}
    train_conf = {"epochs": 40, "batch_size": 32, "min_margin": 0.05}
    out = run_script(SCRIPT, env, etl_conf, train_conf, timeout=1100)
    for name, task, rule in (("wine", "multiclass", "accuracy"), ("diabetes", "regression", "rmse")):
        assert out[name]["etl"] == {"wait_for_data": "success", "build": "success", "publish": "success"}, out  # one chain
        train = out[name]["train"]
        assert train == {"resolve_version": "success", "train": "success",
                         "announce_model": train.get("announce_model")}, out
        assert train["announce_model"] in ("success", "skipped"), out  # promoted or not
        runs = list((tmp_path / "data" / "models" / name).glob("*/*/metrics.json"))
        assert len(runs) == 1, runs
        metrics = json.loads(runs[0].read_text())
        assert metrics["task"] == task and metrics["blessing"]["blessed"]
        test, base = metrics["test"][rule], metrics["baseline"][rule]
        # the task's XCom summary keeps each split's scalars (it used to drop a nested test dict)
        summary = out[name]["xcom"]["metrics"]
        assert summary["test"][rule] == test and summary["baseline"][rule] == base, summary
        assert "confusion_matrix" not in summary["test"] and "history" not in summary
        assert (test >= base + 0.05) if rule == "accuracy" else (test <= base * 0.95), metrics
