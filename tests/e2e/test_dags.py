"""End to end: the ETL DAG, the training DAG (as ``make demo`` runs them), then the scoring DAG
through ``dag.test()``.

Runs in a cold interpreter with its own Airflow home (SQLite) and storage root, on three
days of 2013, so it neither sees nor changes the Airflow settings of other test modules.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.dagtest import airflow_env, prepare, run_script

E2E_SCRIPT = r"""
import json, sys, time
from pathlib import Path
from sqlalchemy import select
from airflow.dag_processing.dagbag import BundleDagBag
from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetPartitionDagRun
from airflow.utils.session import create_session
folder, etl_conf, train_conf = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
out, t0 = {}, time.monotonic()
etl = bag.dags["etl_flights"].test(logical_date=None, run_conf=etl_conf)
out["etl_s"] = round(time.monotonic() - t0, 1)
with create_session() as session:
    out["events"] = [e.extra for e in session.scalars(select(AssetEvent))]
    out["keys"] = [e.partition_key for e in session.scalars(select(AssetEvent))]
    out["queued"] = [q.target_dag_id for q in session.scalars(select(AssetDagRunQueue))]
    out["pending"] = sorted((p.target_dag_id, p.partition_key)
                            for p in session.scalars(select(AssetPartitionDagRun)))
out["etl"] = {ti.task_id: ti.state for ti in etl.get_task_instances()}
again = bag.dags["etl_flights"].test(logical_date=None, run_conf=etl_conf)  # same interval
out["etl_again"] = {ti.task_id: ti.state for ti in again.get_task_instances()}
with create_session() as session:
    out["events_after_rerun"] = len(session.scalars(select(AssetEvent)).all())
version = (out["events"] or [{}])[-1].get("version", "latest")
t0 = time.monotonic()
train = bag.dags["train_flights"].test(logical_date=None, run_conf={**train_conf, "version": version})
out["train_s"] = round(time.monotonic() - t0, 1)
out["train"] = {ti.task_id: ti.state for ti in train.get_task_instances()}
score = bag.dags["score_flights"].test(logical_date=None, run_conf={"version": version})
out["score"] = {ti.task_id: ti.state for ti in score.get_task_instances()}
print("E2E_RESULT=" + json.dumps(out, default=str))
"""


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_etl_then_training_end_to_end_with_dag_test(tmp_path: Path) -> None:
    """Both DAGs through dag.test() on three days of 2013, in a fresh Airflow home."""
    env, root = airflow_env(tmp_path)
    prepare(env, [sys.executable, "-m", "etl", "land", "--root", root, "--start-day",
                  "2013-01-01", "--end-day", "2013-01-04"])
    etl_conf = {"interval_end": "2013-01-04T00:00:00+00:00", "window_days": 3, "shard_mb": 1}
    # One epoch on ~2,500 flights: the gate only asks to match the majority baseline.
    train_conf = {"epochs": 1, "batch_size": 256, "min_margin": 0.0}
    out = run_script(E2E_SCRIPT, env, etl_conf, train_conf, timeout=540)
    assert out["etl"] == {"wait_for_data": "success", "build": "success", "publish": "success"}, out  # every spec's chain
    version = "20130104T000000Z_20130101T000000Z"
    version_uri = f"{root}/datasets/flights/{version}"
    assert [{k: e[k] for k in ("version", "version_uri")} for e in out["events"]] == [
        {"version": version, "version_uri": version_uri}]
    assert out["events"][0]["verdict"] in ("passed", "passed_with_quarantine"), out["events"]
    # keyed by its version (issue 51): a pending run of each consumer for it alone
    assert out["keys"] == [version] and out["queued"] == [], out
    assert out["pending"] == [["score_flights", version], ["train_flights", version]], out
    # A re-run of the interval publishes nothing new: publish skipped, no second event.
    assert out["etl_again"]["publish"] == "skipped" and out["events_after_rerun"] == 1, out
    manifest = json.loads(
        (tmp_path / "data" / "datasets" / "flights" / version / "manifest.json").read_text())
    assert manifest["layout"] == "segments" and manifest["segments"], manifest.keys()
    assert out["train"] == {"resolve_version": "success", "train": "success",
                             "announce_model": out["train"].get("announce_model")}, out
    assert out["train"]["announce_model"] in ("success", "skipped"), out  # promoted or not
    # The blessed model scores the version's rows: one predictions folder, manifest last.
    assert out["score"] == {"score": "success"}, out
    (scored,) = (tmp_path / "data" / "predictions" / "flights").glob("*/*/manifest.json")
    assert json.loads(scored.read_text())["rows"] > 0
    runs = list((tmp_path / "data" / "models" / "flights" / version).glob("*/metrics.json"))
    assert len(runs) == 1
    metrics = json.loads(runs[0].read_text())
    assert metrics["version"] == version and metrics["family"] in ("trees", "mlp")
    # the Param's one epoch bounds the network; the trees count boosting rounds (eval stops them)
    most = metrics["epochs"] if metrics["family"] == "trees" else 1
    assert 1 <= metrics["epochs_run"] <= most and metrics["family_choice"]["chosen"] == \
        metrics["family"], metrics["family_choice"]
    print(f"e2e wall: etl {out['etl_s']} s, training {out['train_s']} s")
