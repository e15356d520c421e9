"""Which version a training run trains, or why it trains none: ``flightpipe_dags.choice``
through the training DAG's own ``resolve_version`` (real storage, Asset events as the Task SDK
hands them over). tests/integration/test_version_order.py runs the README's first UI run on a
real Airflow."""

from __future__ import annotations

import json
import logging
import shutil
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
T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)  # when the first event was emitted
OWN = "asset_triggered__2026-05-01T12_05_00_abc"  # the run's folder under models/


def _event(root: Path, version: str | None, minutes: float = 0) -> SimpleNamespace:
    extra = {"version": version, "version_uri": f"{root.as_uri()}/datasets/flights/{version}"} \
        if version else {}
    return SimpleNamespace(extra=extra, timestamp=T0 + timedelta(minutes=minutes))


def _published_at(root: Path, version: str, minutes: float) -> None:
    """Set the version's publish time (``created_at``), minutes after the first event."""
    path = root / "datasets" / "flights" / version / "manifest.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "created_at": (T0 + timedelta(minutes=minutes))
                                .isoformat()}))


def _trained(root: Path, version: str, folder: str, run_id: str | None = None) -> None:
    metrics = {"version": version, "run": folder}
    if run_id:
        metrics |= {"dag_id": "train_flights", "run_id": run_id}
    path = root / "models" / "flights" / version / folder / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(metrics))


@pytest.fixture
def resolve(tmp_path: Path, monkeypatch):
    """The DAG's resolve_version, called as Airflow calls it, over ``tmp_path/root``."""
    root = tmp_path / "root"
    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", root.as_uri())
    import dataset_training

    dag = dataset_training.build_training_dag("flights", fd.DagSettings())
    task = dag.get_task("resolve_version")
    asset = fd.dataset_asset("flights")

    def call(events: list, version: str = "latest",
             run_id: str = OWN.replace("_abc", "+abc")) -> str:
        result = task.python_callable(params={"version": version}, run_id=run_id,
                                      triggering_asset_events={asset: events} if events else {})
        return result["version"]

    call.root = root
    return call


def test_the_newest_event_version_by_the_one_order_or_the_param(tmp_path: Path) -> None:
    demo, window = "20140101T000000Z_all", "20140101T000000Z_20131225T000000Z"
    for versions, newest in (([demo, window], window),  # not max() of the strings: demo
                             (["20140101T000000Z_all-r10", "20140101T000000Z_all-r2"],
                              "20140101T000000Z_all-r10"),
                             (["20140102T000000Z_all", window], "20140102T000000Z_all")):
        events = [_event(tmp_path, v) for v in versions] + [_event(tmp_path, None)]
        assert choice.choose_version(events) == (
            newest, f"{tmp_path.as_uri()}/datasets/flights/{newest}")
        assert choice.choose_version(events[::-1])[0] == newest
    assert choice.choose_version([], "20130101T000000Z_all") == ("20130101T000000Z_all", None)
    assert choice.choose_version([_event(tmp_path, None)]) == ("latest", None)
    with pytest.raises(ValueError, match="version id 'v2': expected"):
        choice.choose_version([_event(tmp_path, "v2")])


def test_the_readme_first_ui_run_trains_the_new_window(resolve, caplog) -> None:
    """Issue 41 item 1: the demo's event, queued while training was paused, and the 7-day
    window's, in one run: the window is the newest; the demo's version is superseded by it."""
    caplog.set_level(logging.INFO, logger="airflow.task")
    demo = write_version(resolve.root, "flights", END)
    window = write_version(resolve.root, "flights", END, END - timedelta(days=7))
    assert resolve([_event(resolve.root, demo), _event(resolve.root, window, 5)]) == window
    assert f"Training flights version {window}, the newest of the 2 version(s) this run's " \
           f"Asset events carry (superseded by it, not trained separately: {demo})" in caplog.text
    assert "published" not in caplog.text


def test_a_version_already_trained_is_not_trained_again_and_the_log_names_the_run(
        resolve) -> None:
    """Issue 41 item 7: the skip names the run that trained it, not a publish that did not
    happen; a run trained outside Airflow is named by its folder; a cleared run (its own
    folder) and a manual run train it anyway."""
    from airflow.sdk.exceptions import AirflowSkipException

    demo = write_version(resolve.root, "flights", END)
    _trained(resolve.root, demo, "manual__2026-05-01T10_00_00", "manual__2026-05-01T10:00:00")
    with pytest.raises(AirflowSkipException, match=(
            f"^Not training flights version {demo}: already trained by run "
            f"manual__2026-05-01T10:00:00 of train_flights. Trigger train_flights with "
            f"version={demo} to train it again.$")):
        resolve([_event(resolve.root, demo)])
    assert resolve([], version=demo) == demo
    window = write_version(resolve.root, "flights", END, END - timedelta(days=7))
    _trained(resolve.root, window, "nightly-by-hand")
    with pytest.raises(AirflowSkipException, match="already trained by run folder nightly-by"):
        resolve([_event(resolve.root, demo), _event(resolve.root, window)])
    older = write_version(resolve.root, "flights", END - timedelta(days=1))
    _trained(resolve.root, older, OWN, "asset_triggered__2026-05-01T12:05:00+abc")
    (resolve.root / "models" / "flights" / older / "killed-run").mkdir()  # no metrics: no model
    assert resolve([_event(resolve.root, older)]) == older  # its own model: train returns it
    _trained(resolve.root, older, "asset_triggered__2026-05-01T11_00_00_xyz")
    with pytest.raises(AirflowSkipException, match="already trained by run folder asset_trig"):
        resolve([_event(resolve.root, older)])


def test_an_older_interval_published_after_a_trained_newer_one_is_trained(resolve) -> None:
    """Issue 41 item 7's other half: storage holds a newer version, already trained; the run
    of an older window's event trains its version and says nothing was published since."""
    window = write_version(resolve.root, "flights", END, END - timedelta(days=7))
    _trained(resolve.root, window, "first", "asset_triggered__first")
    older = write_version(resolve.root, "flights", END - timedelta(days=7),
                          END - timedelta(days=14))
    assert resolve([_event(resolve.root, older, 30)]) == older


def test_a_newer_untrained_version_published_after_the_run_events_is_left_to_its_run(
        resolve) -> None:
    """A burst: the run of the first event starts after two more versions were published; the
    newest of those (not the one whose id sorts last as a string) is named, and its own run
    trains it. A newer version already trained, published before the run's event, without a
    publish time, or older than the run's version does not hold the run back."""
    from airflow.sdk.exceptions import AirflowSkipException

    first = write_version(resolve.root, "flights", END - timedelta(days=1))
    demo = write_version(resolve.root, "flights", END)
    window = write_version(resolve.root, "flights", END, END - timedelta(days=7))
    for version, minutes in ((first, -0.1), (demo, 1), (window, 2)):
        _published_at(resolve.root, version, minutes)
    with pytest.raises(AirflowSkipException, match=(
            f"^Not training flights version {first}: version {window}, newer, was published "
            "after this run's Asset events and has no model yet; the later run its own Asset "
            r"event starts trains it \(or a version newer still\).$")):
        resolve([_event(resolve.root, first)])
    assert resolve([_event(resolve.root, window, 2.1)]) == window  # the last run: none later
    _trained(resolve.root, window, "by-hand")
    with pytest.raises(AirflowSkipException, match=f"version {demo}, newer, was published"):
        resolve([_event(resolve.root, first)])
    _trained(resolve.root, demo, "by-hand")
    assert resolve([_event(resolve.root, first)]) == first
    shutil.rmtree(resolve.root / "models" / "flights" / demo)
    _published_at(resolve.root, demo, -1)  # published before this run's event: its own ran
    assert resolve([_event(resolve.root, first)]) == first
    path = resolve.root / "datasets" / "flights" / demo / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "created_at": None}))
    assert resolve([_event(resolve.root, first)]) == first  # no publish time: not later
    path.write_text(json.dumps({**json.loads(path.read_text()), "created_at": "2026-05-01T12:01"}))
    with pytest.raises(AirflowSkipException, match=f"version {demo}, newer"):  # naive: UTC
        resolve([_event(resolve.root, first)])
    back = write_version(resolve.root, "flights", END - timedelta(days=3))
    _published_at(resolve.root, back, 3)
    assert resolve([_event(resolve.root, back, 3.1)]) == back


def test_a_manual_run_or_an_event_without_a_version_trains_the_param(resolve) -> None:
    demo = write_version(resolve.root, "flights", END)
    window = write_version(resolve.root, "flights", END, END - timedelta(days=7))
    _trained(resolve.root, window, "first", "asset_triggered__first")
    assert resolve([]) == window  # latest, by the one order, trained or not
    assert resolve([], version=demo) == demo
    assert resolve([_event(resolve.root, None)]) == window


def test_a_score_run_an_event_started_skips_while_no_model_is_blessed(
        tmp_path: Path, monkeypatch, caplog) -> None:
    """The first publish queues train_ and score_ together: before the first model is
    blessed the score run skips, saying what to do; a run asked for by hand fails instead."""
    import dataset_scoring
    from airflow.sdk.exceptions import AirflowSkipException

    from training.score.model import NoBlessedModelError

    root = tmp_path / "root"
    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", root.as_uri())
    version = write_version(root, "flights", END)
    task = dataset_scoring.build_scoring_dag("flights", fd.DagSettings()).get_task("score")
    events = {fd.dataset_asset("flights"): [_event(root, version)]}
    caplog.set_level(logging.WARNING, logger="airflow.task")
    with pytest.raises(AirflowSkipException) as skipped:
        task.python_callable(params={"version": "latest", "raw": []}, run_id="r1",
                             triggering_asset_events=events)
    reason = str(skipped.value)
    assert reason.startswith(f"Not scoring flights version {version}: flights: no current model")
    assert reason.endswith(f"trigger score_flights with version {version}.")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [reason]
    with pytest.raises(NoBlessedModelError, match="no training run has been blessed yet"):
        task.python_callable(params={"version": version, "raw": []}, run_id="r2",
                             triggering_asset_events={})
