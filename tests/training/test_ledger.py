"""``training.ledger``: every published version in exactly one state of training and of scoring,
read from storage (models, predictions, the ledger's records), never from Asset events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import ledger
from training.ledger import DONE, FAILED, SCORING, SUPERSEDED, TRAINING, WAITING

DAY1, DAY2, DAY3 = ("20130102T000000Z_all", "20130103T000000Z_all", "20130104T000000Z_all")
WEEK1, WEEK2 = "20130108T000000Z_20130101T000000Z", "20130115T000000Z_20130108T000000Z"


def publish(root: Path, *versions: str) -> str:
    """Versions as listing sees them: a folder with a manifest (states read no more)."""
    for v in versions:
        folder = root / "datasets" / "d" / v
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").write_text("{}")
    (root / "datasets" / "d" / "unfinished-dir").mkdir(exist_ok=True)
    return root.as_uri()


def model(root: Path, version: str, folder: str, run_id: str | None = None,
          at: str = "2026-11-01T00:00:00Z") -> None:
    record = {"dataset": "d", "version": version, "run": folder, "created_at": at}
    if run_id:
        record |= {"dag_id": "train_d", "run_id": run_id}
    path = root / "models" / "d" / version / folder / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def predictions(root: Path, version: str, run_id: str) -> None:
    path = root / "predictions" / "d" / version / f"{version}--r" / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_id": run_id, "created_at": "2026-11-01T00:00:00Z"}))


def by_version(found: list[ledger.VersionState]) -> dict[str, tuple[str, str | None]]:
    return {s.version: (s.state, s.by) for s in found}


def test_done_comes_from_the_artifacts_and_the_rest_waits(tmp_path: Path) -> None:
    root = publish(tmp_path, DAY1, DAY2, DAY3)
    model(tmp_path, DAY1, "cli-run")  # trained outside Airflow
    model(tmp_path, DAY2, "old", "manual__1", at="2026-11-01T00:00:00Z")
    model(tmp_path, DAY2, "new", "manual__2", at="2026-11-02T00:00:00Z")
    (tmp_path / "models" / "d" / DAY3 / "killed").mkdir(parents=True)  # no metrics.json
    found = ledger.states(root, "d", TRAINING)
    assert [s.version for s in found] == [DAY1, DAY2, DAY3]  # oldest first, folders skipped
    assert [s.state for s in found] == [DONE, DONE, WAITING]
    assert found[0].run == "run folder cli-run"
    assert found[1].run == "run manual__2 of train_d"  # the newest model of the version
    assert found[2].line() == f"{DAY3}: waiting (for a training run)"
    assert ledger.to_train(found) == DAY3
    model(tmp_path, DAY3, "r3", "asset_triggered__3")
    assert ledger.to_train(ledger.states(root, "d", TRAINING)) is None


def test_training_supersedes_every_older_version_that_waits(tmp_path: Path) -> None:
    root = publish(tmp_path, DAY1, DAY2, DAY3)
    model(tmp_path, DAY1, "r1", "asset_triggered__1")
    ledger.fail(root, "d", TRAINING, DAY2, "run asset_triggered__2 of train_d",
                "OSError: bucket unreachable\nmore lines")
    model(tmp_path, DAY3, "r3", "asset_triggered__3")
    found = ledger.states(root, "d", TRAINING)
    assert found[1].state == FAILED and found[1].why == "OSError: bucket unreachable"
    new = ledger.supersede(root, "d", TRAINING, found, DAY3, "run asset_triggered__3 of train_d")
    assert [s.version for s in new] == [DAY2]  # DAY1 is done: left as it is
    assert by_version(ledger.states(root, "d", TRAINING)) == {
        DAY1: (DONE, None), DAY2: (SUPERSEDED, DAY3), DAY3: (DONE, None)}
    line = ledger.states(root, "d", TRAINING)[1].line()
    assert line == f"{DAY2}: superseded by {DAY3} (trained by run asset_triggered__3 of train_d)"
    assert ledger.supersede(root, "d", TRAINING, ledger.states(root, "d", TRAINING), DAY3,
                            "x") == []  # recorded once
    summary = ledger.summary(ledger.states(root, "d", TRAINING))
    assert summary.startswith("3 published version(s): 2 done, 1 superseded; newest ")


def test_scoring_supersedes_only_a_window_a_newer_one_holds(tmp_path: Path) -> None:
    everything = "20130116T000000Z_all"
    assert ledger.covers(DAY3, DAY1) and not ledger.covers(DAY1, DAY3)
    assert ledger.covers(everything, WEEK1)  # an unbounded start holds every earlier row
    assert not ledger.covers(DAY3, WEEK1)  # ends before the week does
    assert not ledger.covers(WEEK2, WEEK1) and not ledger.covers(WEEK1, DAY1)
    root = publish(tmp_path, WEEK1, WEEK2)
    assert ledger.to_score(ledger.states(root, "d", SCORING)) == [WEEK1, WEEK2]  # both weeks
    root = publish(tmp_path, DAY1)
    assert ledger.to_score(ledger.states(root, "d", SCORING)) == [DAY1, WEEK1, WEEK2]
    root = publish(tmp_path, everything)  # holds all the rows before it
    found = ledger.states(root, "d", SCORING)
    assert ledger.to_score(found) == [everything]
    predictions(tmp_path, everything, "asset_triggered__9")
    new = ledger.supersede(root, "d", SCORING, ledger.states(root, "d", SCORING), everything,
                           "run asset_triggered__9")
    assert [s.version for s in new] == [DAY1, WEEK1, WEEK2]
    assert ledger.to_score(ledger.states(root, "d", SCORING)) == []


def test_scoring_states_and_records(tmp_path: Path) -> None:
    root = publish(tmp_path, DAY1, DAY2, DAY3)
    assert ledger.to_score(ledger.states(root, "d", SCORING)) == [DAY3]
    predictions(tmp_path, DAY3, "asset_triggered__3")
    found = ledger.states(root, "d", SCORING)
    assert found[2].state == DONE and found[2].run == f"run asset_triggered__3 (model {DAY3}--r)"
    ledger.supersede(root, "d", SCORING, found, DAY3, "run asset_triggered__3")
    assert by_version(ledger.states(root, "d", SCORING)) == {
        DAY1: (SUPERSEDED, DAY3), DAY2: (SUPERSEDED, DAY3), DAY3: (DONE, None)}
    assert by_version(ledger.states(root, "d", TRAINING))[DAY1] == (WAITING, None)  # apart


def test_a_record_that_is_not_one_is_named(tmp_path: Path) -> None:
    root = publish(tmp_path, DAY1)
    bad = tmp_path / "ledger" / "d" / "training" / f"{DAY1}.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"version": DAY1, "activity": "training", "state": "done"}))
    with pytest.raises(ValueError, match=rf"{DAY1}\.json: state 'done' of 'training' is not a "
                                         "recorded state"):
        ledger.states(root, "d", TRAINING)
    with pytest.raises(ValueError, match="only superseded and failed are recorded"):
        ledger.record(root, ledger.VersionState(DAY1, TRAINING, DONE), "d")


def test_deciding_that_nothing_waits_loads_no_tensorflow() -> None:
    """A burst's runs that find nothing to do skip in seconds: the ledger and both pending
    decisions import no TensorFlow (each import is a task process start on the GPU slot)."""
    import subprocess
    import sys

    code = ("import sys, training.ledger, training.run.pending, training.score.pending; "
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
