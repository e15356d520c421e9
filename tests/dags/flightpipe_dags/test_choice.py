"""What a training or scoring run does with the Asset events it was handed: logs them and lets
storage decide (``flightpipe_dags.choice`` through the DAGs' own task functions, real storage,
events as the Task SDK hands them over). The decision itself is ``training.ledger``'s
(tests/training/test_ledger.py, tests/training/run/test_pending.py); a burst on a real
scheduler is tests/integration/test_bursts.py."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags"
if str(DAGS) not in sys.path:
    sys.path.append(str(DAGS))

import flightpipe_dags as fd
from flightpipe_dags import choice

from tests.support.ui_fixtures import write_version

END = datetime(2014, 1, 1, tzinfo=UTC)


def _event(root: Path, version: str | None) -> SimpleNamespace:
    extra = {"version": version, "version_uri": f"{root.as_uri()}/datasets/flights/{version}"} \
        if version else {}
    return SimpleNamespace(extra=extra, timestamp=END)


def _trained(root: Path, version: str, folder: str, run_id: str) -> None:
    metrics = {"version": version, "run": folder, "dag_id": "train_flights", "run_id": run_id}
    path = root / "models" / "flights" / version / folder / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(metrics))


def test_events_are_logged_and_only_a_manual_run_names_a_version(tmp_path: Path,
                                                                 caplog) -> None:
    events = [_event(tmp_path, "v2"), _event(tmp_path, None), _event(tmp_path, "v1")]
    assert [p.version for p in choice.announced(events)] == ["v2", "v1"]
    assert choice.explicit_version(events, "20130101T000000Z_all") is None  # events: ledger
    assert choice.explicit_version([], "latest") == "latest"  # by hand: a run, trained or not
    assert choice.explicit_version([], "20130101T000000Z_all") == "20130101T000000Z_all"
    caplog.set_level(logging.INFO, logger="airflow.task")
    choice.log_events("flights", events, "trains")
    assert caplog.messages == [("This run's Asset events carried 2 version(s) of flights (v1, v2);"
                               " it trains what waits in storage, whichever versions those are")]


@pytest.fixture
def dags(tmp_path: Path, monkeypatch) -> SimpleNamespace:
    root = tmp_path / "root"
    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", root.as_uri())
    import dataset_scoring
    import dataset_training

    return SimpleNamespace(
        root=root,
        train=dataset_training.build_training_dag("flights", fd.DagSettings()),
        score=dataset_scoring.build_scoring_dag("flights", fd.DagSettings()))


def test_a_run_whose_newest_version_is_trained_skips_naming_the_run(dags, caplog) -> None:
    """The second run of a burst: its own event's version was trained by the first run,
    with the newest; it skips before loading TensorFlow and says by whom."""
    from airflow.sdk.exceptions import AirflowSkipException

    older = write_version(dags.root, "flights", END - timedelta(days=1))
    newest = write_version(dags.root, "flights", END)
    _trained(dags.root, newest, "asset_triggered__1", "asset_triggered__1")
    resolved = dags.train.get_task("resolve_version").python_callable(
        params={"version": "latest"},
        triggering_asset_events={fd.dataset_asset("flights"): [_event(dags.root, older)]})
    assert resolved == {"version": None, "version_uri": None}
    caplog.set_level(logging.INFO)
    with pytest.raises(AirflowSkipException) as skipped:
        dags.train.get_task("train").python_callable(resolved, params={"version": "latest"},
                                                     run_id="asset_triggered__2")
    reason = str(skipped.value)
    assert reason.startswith(f"Not training flights: the newest published version of flights, "
                             f"{newest}, is already trained by run asset_triggered__1 of "
                             "train_flights; 2 published version(s)")
    assert f"{older}: superseded by {newest}" in caplog.text  # recorded, said in the log


def test_a_manual_run_with_a_version_id_checks_its_manifest(dags) -> None:
    from etl.errors import IncompleteVersionError

    older = write_version(dags.root, "flights", END - timedelta(days=1))
    version = write_version(dags.root, "flights", END)
    task = dags.train.get_task("resolve_version")
    got = task.python_callable(params={"version": version}, triggering_asset_events={})
    assert got["version"] == version and got["version_uri"].endswith(f"/flights/{version}")
    _trained(dags.root, version, "asset_triggered__1", "asset_triggered__1")
    latest = task.python_callable(params={"version": "latest"}, triggering_asset_events={})
    assert latest["version"] == version  # the newest, trained before or not: trained again
    assert task.python_callable(params={"version": older},
                                triggering_asset_events={})["version"] == older
    (dags.root / "datasets" / "flights" / version / "manifest.json").unlink()
    with pytest.raises(IncompleteVersionError):
        task.python_callable(params={"version": version}, triggering_asset_events={})


def test_a_score_run_skips_while_no_model_is_blessed_and_when_nothing_waits(
        dags, caplog) -> None:
    """The first publish queues train_ and score_ together: before the first model is
    blessed the score run skips, saying the versions wait for the promotion's run; a run
    asked for by hand fails instead."""
    from airflow.sdk.exceptions import AirflowSkipException

    from training.score.model import NoBlessedModelError

    version = write_version(dags.root, "flights", END)
    task = dags.score.get_task("score")
    events = {fd.dataset_asset("flights"): [_event(dags.root, version)]}
    caplog.set_level(logging.WARNING, logger="airflow.task")
    with pytest.raises(AirflowSkipException) as skipped:
        task.python_callable(params={"version": "latest", "raw": None}, run_id="r1",
                             triggering_asset_events=events)
    reason = str(skipped.value)
    assert reason.startswith("Not scoring flights: flights: no current model")
    assert reason.endswith("the run a promoted model of train_flights starts scores them.")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [reason]
    with pytest.raises(NoBlessedModelError, match="no training run has been blessed yet"):
        task.python_callable(params={"version": version, "raw": []}, run_id="r2",
                             triggering_asset_events={})
    scored = dags.root / "predictions" / "flights" / version / "m" / "manifest.json"
    scored.parent.mkdir(parents=True)
    scored.write_text(json.dumps({"run_id": "r0", "created_at": "2026-11-01T00:00:00Z"}))
    with pytest.raises(AirflowSkipException, match=r"Not scoring flights: nothing waits; 1 "
                                                   r"published version\(s\): 1 done"):
        task.python_callable(params={"version": "latest", "raw": []}, run_id="r3",
                             triggering_asset_events=events)


def test_a_skip_leaves_its_reason_for_the_dataset_page(monkeypatch, caplog) -> None:
    """Issue 51: skipped trainings had no reason on the dataset page. Airflow stores none (the
    exception's message reaches the task log only), so the skip leaves it in an XCom."""
    import airflow.sdk
    from airflow.sdk.exceptions import AirflowSkipException

    pushed: dict[str, str] = {}
    ti = SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))
    monkeypatch.setattr(airflow.sdk, "get_current_context", lambda: {"ti": ti})
    caplog.set_level(logging.WARNING, logger="airflow.task")
    with pytest.raises(AirflowSkipException, match="^Not training flights: nothing waits$"):
        choice.skip("Not training flights: nothing waits")
    assert pushed == {choice.SKIP_KEY: "Not training flights: nothing waits"}
    assert caplog.messages == ["Not training flights: nothing waits"]
    monkeypatch.undo()  # outside a task (a test calling the task's function): the log only
    with pytest.raises(AirflowSkipException):
        choice.skip("Not scoring flights: nothing waits")


def test_every_publish_and_promotion_has_its_own_partition_key(dags, monkeypatch) -> None:
    """Issue 51: unkeyed events share one queue row per DAG and Asset, and one landing while
    the scheduler creates a run from it was linked to no run. Keyed, each event has its own
    pending run: a publish's key is its version id, a promotion's its model folder (never a
    version id, so it never joins the pending scoring run of its version's publish)."""
    import dataset_training
    from airflow.sdk.exceptions import AirflowSkipException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    assert fd.publish_key("20130104T000000Z_all") == "20130104T000000Z_all"
    version, uri = "20130104T000000Z_all", f"{dags.root.as_uri()}/models/flights"
    assert fd.model_key(version, f"{uri}/{version}/asset_triggered__1/") == (
        f"{version}/asset_triggered__1")
    outlets = OutletEventAccessors()
    monkeypatch.setattr(dataset_training, "get_current_context",
                        lambda: {"outlet_events": outlets})
    announce = dags.train.get_task("announce_model").python_callable
    from training.record import Blessing, Handover

    model = Handover.of(version=version, model_uri=f"{uri}/{version}/manual_1",
                        blessing=Blessing.of([]), promoted=True).to_json()
    assert announce(model) == {"version": version, "model_uri": model["model_uri"]}
    assert outlets[fd.model_asset("flights")].partition_keys == {f"{version}/manual_1"}
    with pytest.raises(AirflowSkipException):  # not promoted: skipped, no event at all
        announce({**model, "promoted": False})
    assert outlets[fd.model_asset("flights")].partition_keys == {f"{version}/manual_1"}
