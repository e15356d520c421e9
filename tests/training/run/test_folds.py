"""``training.run.folds``: a table under ``SMALL_TABLE_ROWS`` rows chooses its family and gets
its verdict by repeated k-fold over train and eval; the test split is scored once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from etl import pipeline
from tests.support.training_fixtures import drafted_iris
from training.config import InputConfig, ModelConfig, TrainConfig
from training.run.families import SMALL_TABLE_ROWS
from training.run.folds import FOLDS, REPEATS, fold_ids
from training.run.train import train


def test_folds_are_stratified_even_and_differ_between_repeats() -> None:
    labels = np.array([0] * 60 + [1] * 30 + [2] * 9)
    first, second = fold_ids(labels, True, 0), fold_ids(labels, True, 1)
    for ids in (first, second):
        sizes = np.bincount(ids, minlength=FOLDS)
        assert sizes.max() - sizes.min() <= 1  # 99 rows: 20 or 19 per fold
        for c, n in ((0, 60), (1, 30), (2, 9)):  # each class dealt over the folds
            per_fold = np.bincount(ids[labels == c], minlength=FOLDS)
            assert per_fold.max() - per_fold.min() <= 1 and per_fold.sum() == n
    assert (first != second).any()
    plain = fold_ids(np.linspace(0, 1, 50), False, 0)
    assert sorted(np.bincount(plain)) == [10] * FOLDS


@pytest.mark.timeout(600)
def test_a_150_row_table_is_judged_by_repeated_k_fold(tmp_path: Path, monkeypatch) -> None:
    data, out = drafted_iris(tmp_path)  # all 150 rows
    assert yaml.safe_load((out / "spec.yaml").read_text())["split"]["stratify"]
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(out.parent))
    res = pipeline.run("iris", data.as_uri(), "2100-01-01", run_id="r")
    result = train(res["version_uri"], f"{data.as_uri()}/models", "r",
                   TrainConfig(input=InputConfig(seed=1), model=ModelConfig(family="trees")))
    m = result["metrics"]
    assert sum(m["examples"].values()) == 150 < SMALL_TABLE_ROWS
    cv = m["cross_validation"]
    assert cv["rows"] == m["examples"]["train"] + m["examples"]["eval"]
    assert (cv["folds"], cv["repeats"], cv["chosen"]) == (FOLDS, REPEATS, "trees")
    trees = cv["families"]["trees"]
    assert len(trees["per_repeat"]) == REPEATS
    assert trees["range"][0] <= trees["mean"] <= trees["range"][1]
    oof = cv["out_of_fold"]
    low, high = oof["intervals"]["metrics"]["accuracy"]
    assert low <= oof["accuracy"] <= high and oof["accuracy"] > 0.85  # iris is easy
    assert cv["baseline"]["examples"] == cv["rows"]
    assert "cross-validation of the" in m["family_choice"]["why"]
    # the verdict judged the out-of-fold answers; the test split was scored once, apart
    accuracy = next(c for c in result["blessing"].checks if c.name == "baseline:accuracy")
    assert f"accuracy {oof['accuracy']:.4f} vs {cv['baseline']['accuracy']:.4f}" in \
        accuracy.detail
    assert m["test"]["examples"] == m["examples"]["test"] and "intervals" in m["test"]
    assert result["blessing"].blessed, result["blessing"].reasons
