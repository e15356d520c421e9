"""``training.sanity``: a held-out split that cannot say anything fails training before any
fitting, with one message naming split sizes, classes and what to change in the spec."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.tables import TABLES, land_table
from etl import pipeline
from etl.__main__ import main
from etl.versions import Manifest
from training.config import TrainConfig
from training.sanity import EvaluationSplitError, check_splits
from training.train import train


def _manifest(sizes: dict[str, int], counts: dict[str, int]) -> Manifest:
    return Manifest.from_json({
        "dataset": "d", "version": "v",
        "splits": {s: {"num_examples": n} for s, n in sizes.items()},
        "schema": {"label": {"task": "multiclass", "names": ["a", "b", "c"], "classes": 3}},
        "statistics": {"label_counts": counts}}, "test")


def test_a_split_missing_a_class_or_too_small_is_refused() -> None:
    m = _manifest({"train": 300, "eval": 40, "test": 30}, {"0": 100, "1": 100, "2": 100})
    ok = {"eval": np.array([0, 1, 2] * 13 + [0]), "test": np.array([0, 1, 2] * 10)}
    check_splits(m, ok, 20)  # every class, enough rows: passes
    with pytest.raises(EvaluationSplitError, match=r"test lacks class\(es\) \['b', 'c'\]"):
        check_splits(m, {**ok, "test": np.zeros(30)}, 20)
    with pytest.raises(EvaluationSplitError, match="test holds 30 examples .fewer than 50."):
        check_splits(m, ok, 50)


def test_a_spec_whose_test_split_holds_one_class_fails_training(tmp_path: Path,
                                                                monkeypatch) -> None:
    """The issue's case: penguins split by hashing a non-unique key (species, island, year)."""
    data = tmp_path / "data"
    land_table(TABLES["penguins"], data)
    out = tmp_path / "specs" / "penguins"
    assert main(["spec", "init", "--name", "penguins", "--source", TABLES["penguins"].raw_path,
                 "--root", data.as_uri(), "--label", "species", "--task", "multiclass",
                 "--out", str(out)]) == 0
    doc = yaml.safe_load((out / "spec.yaml").read_text())
    doc["key"] = ["species", "island", "year"]
    doc["split"] = {"fractions": {"train": 0.8, "eval": 0.1, "test": 0.1}, "salt": "penguins-v1"}
    (out / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(out.parent))
    res = pipeline.run("penguins", data.as_uri(), "2100-01-01", run_id="r")
    with pytest.raises(EvaluationSplitError) as err:
        train(res["version_uri"], f"{data.as_uri()}/models", "r", TrainConfig())
    text = str(err.value)
    assert "split sizes {'train': " in text and "lacks class(es)" in text
    assert "split.stratify: true" in text and "split.by: row" in text
    assert "Nothing was trained" in text
