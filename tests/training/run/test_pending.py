"""``training.run.pending``: a run trains the newest published version while one waits, the
older ones superseded by it, and a version published while it trains too, whatever events
started it. The trainer here writes the model record a finished training leaves (the fit
itself is ``training.run.train``'s, tested in test_train.py); storage and the ledger are real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.test_ledger import DAY1, DAY2, DAY3, publish
from training import ledger
from training.config import TrainConfig
from training.record import RunOrigin
from training.run.pending import PendingRun, nothing_to_train, train_pending

DAY4 = "20130105T000000Z_all"


class Trainer:
    """Writes ``metrics.json`` where ``train`` would; ``during``: versions published while
    the n-th call trains (a burst landing mid-training); ``fails``: versions that raise."""

    def __init__(self, root: Path, during: dict[int, tuple[str, ...]] | None = None,
                 fails: tuple[str, ...] = ()) -> None:
        self.root, self.during, self.fails, self.calls = root, during or {}, fails, []

    def __call__(self, version_uri: str, models_root: str, run_folder: str,
                 config: TrainConfig, origin: RunOrigin | None = None) -> dict:
        version = version_uri.rstrip("/").rsplit("/", 1)[-1]
        self.calls.append(version)
        publish(self.root, *self.during.get(len(self.calls), ()))
        if version in self.fails:
            raise OSError(f"{version_uri}: shard unreadable")
        record = {"dataset": "d", "version": version, "run": run_folder,
                  "created_at": "2026-11-29T00:00:00Z", **(origin.fields() if origin else {})}
        path = self.root / "models" / "d" / version / run_folder / "metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
        return {"model_uri": path.parent.as_uri(), "metrics": record, "promoted": True}


def _run(root: Path) -> PendingRun:
    return PendingRun(root.as_uri(), "d", "asset_triggered__7", TrainConfig(),
                      RunOrigin("train_d", "asset_triggered__7"))


def test_the_newest_is_trained_and_the_older_ones_superseded_by_it(tmp_path: Path,
                                                                  caplog) -> None:
    publish(tmp_path, DAY1, DAY2, DAY3)
    trainer = Trainer(tmp_path)
    caplog.set_level("INFO", logger="training.run.pending")
    assert nothing_to_train(_run(tmp_path)) is None
    results = train_pending(_run(tmp_path), trainer)
    assert trainer.calls == [DAY3] and len(results) == 1
    found = ledger.states(tmp_path.as_uri(), "d", ledger.TRAINING)
    assert [(s.state, s.by) for s in found] == [
        ("superseded", DAY3), ("superseded", DAY3), ("done", None)]
    assert found[0].run == found[2].run == "run asset_triggered__7 of train_d"
    assert (f"training d version {DAY3}, the newest published; the 2 older version(s) waiting "
            "are superseded by it once it is trained") in caplog.text
    assert "training ledger of d: 3 published version(s): 2 superseded, 1 done" in caplog.text
    # the next run, started by one of those publishes' events, finds nothing and says so
    why = nothing_to_train(_run(tmp_path))
    assert why is not None and why.startswith(
        f"the newest published version of d, {DAY3}, is already trained by run "
        "asset_triggered__7 of train_d; 3 published version(s)")


def test_a_version_published_while_training_is_trained_by_the_same_run(tmp_path: Path) -> None:
    publish(tmp_path, DAY1, DAY2)
    trainer = Trainer(tmp_path, during={1: (DAY3, DAY4)})  # two land during the first fit
    train_pending(_run(tmp_path), trainer)
    assert trainer.calls == [DAY2, DAY4]  # DAY3 never trained: DAY4 supersedes it
    states = {s.version: (s.state, s.by) for s in
              ledger.states(tmp_path.as_uri(), "d", ledger.TRAINING)}
    assert states == {DAY1: ("superseded", DAY2), DAY2: ("done", None),
                      DAY3: ("superseded", DAY4), DAY4: ("done", None)}


def test_a_failure_is_recorded_on_its_version_and_raised(tmp_path: Path) -> None:
    publish(tmp_path, DAY1, DAY2)
    with pytest.raises(OSError, match="shard unreadable"):
        train_pending(_run(tmp_path), Trainer(tmp_path, fails=(DAY2,)))
    found = ledger.states(tmp_path.as_uri(), "d", ledger.TRAINING)
    assert [s.state for s in found] == ["waiting", "failed"]  # DAY1 waits for DAY2's model
    assert found[1].why.startswith("OSError: ") and "shard unreadable" in found[1].why
    trainer = Trainer(tmp_path)  # the next run tries the failed newest again
    train_pending(_run(tmp_path), trainer)
    assert trainer.calls == [DAY2]
    assert [s.state for s in ledger.states(tmp_path.as_uri(), "d", ledger.TRAINING)] == [
        "superseded", "done"]


def test_a_version_asked_for_is_trained_again_once(tmp_path: Path) -> None:
    publish(tmp_path, DAY1, DAY2)
    trainer = Trainer(tmp_path)
    train_pending(_run(tmp_path), trainer)
    train_pending(PendingRun(tmp_path.as_uri(), "d", "manual__1", TrainConfig()), trainer,
                  version=DAY1)
    assert trainer.calls == [DAY2, DAY1]
    assert nothing_to_train(_run(tmp_path)) is not None
    assert nothing_to_train(PendingRun((tmp_path / "empty").as_uri(), "d", "r",
                                       TrainConfig())) == "no published version of d yet"
