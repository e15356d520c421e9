"""``training.score.pending``: a score run scores every published version not scored yet whose
rows no newer window holds, with the current model, whatever events started it; no blessed
model: nothing is recorded and the versions wait. Real versions, a real model and SavedModel
(the package's ``trained`` fixture), real storage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import training_fixtures as fx
from training import ledger
from training.score.model import NoBlessedModelError
from training.score.pending import score_pending
from training.score.run import ScoreOptions

WEEK1, WEEK2 = "20130108T000000Z_20130101T000000Z", "20130115T000000Z_20130108T000000Z"
DAY1, DAY2 = "20130114T000000Z_all", "20130115T000000Z_all"


def _options(root: Path) -> ScoreOptions:
    return ScoreOptions(root=root.as_uri(), dataset=fx.DATASET, batch_size=256,
                        run_id="asset_triggered__5")


def test_every_waiting_window_is_scored_once_and_the_held_ones_superseded(
        trained: dict, store: fx.WrittenVersion, tmp_path: Path) -> None:
    root = tmp_path / "root"
    for version, seed in ((WEEK1, 1), (WEEK2, 2), (DAY1, 3), (DAY2, 4)):
        fx.write_version(root, n=300, seed=seed, version=version)
    with pytest.raises(NoBlessedModelError):  # no current model under this root yet
        score_pending(_options(root))
    found = ledger.states(root.as_uri(), fx.DATASET, ledger.SCORING)
    assert {s.state for s in found} == {"waiting"}  # nothing recorded: they wait for one
    current = root / "models" / fx.DATASET / "current.json"
    current.parent.mkdir(parents=True)
    shutil.copy(store.root / "models" / fx.DATASET / "current.json", current)

    done = score_pending(_options(root))
    # by the one order of versions DAY2 (to the 15th, unbounded) is older than WEEK2 (the
    # week to the 15th): WEEK2's window does not hold DAY2's rows, so both are scored; DAY2's
    # holds WEEK1's and DAY1's, which are superseded by it
    assert [p.manifest["window"] for p in done] == [DAY2, WEEK2]
    assert all(p.manifest["run_id"] == "asset_triggered__5" for p in done)
    states = {s.version: (s.state, s.by)
              for s in ledger.states(root.as_uri(), fx.DATASET, ledger.SCORING)}
    assert states == {WEEK1: ("superseded", DAY2), DAY1: ("superseded", DAY2),
                      DAY2: ("done", None), WEEK2: ("done", None)}
    assert score_pending(_options(root)) == []  # nothing waits: nothing scored twice
