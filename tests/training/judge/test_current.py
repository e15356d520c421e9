"""``training.judge.current``: the current-model pointer, current.json, read and written key for
key as a typed record and replaced only by a conditional write, and the gate's checks against
the model it names (at least as good on the same rows; never replaced by a model of older
data)."""

from __future__ import annotations

import pytest

from etl import storage
from training.judge import gate
from training.judge.current import Current, promote, read_current
from training.record import Figures, ModelRecord


def test_at_least_as_good_as_the_current_model_on_the_same_rows() -> None:
    cur = Current(dataset="d", version="v1", run="r1", model_uri="file:///m", metric="auc",
                  value=0.783, blessed_at="t")
    rules = {"auc": "higher", "rmse": "lower_relative"}
    rows = " on the 600 test rows of version v2"
    ok = gate.current_checks(rules, {"auc": 0.784, "rmse": 10.0}, cur,
                             {"auc": 0.783, "rmse": 10.0}, 0.0, rows)
    assert all(c.passed for c in ok)
    assert ok[0].detail == ("at least as good as the current model (version v1, run r1) on the "
                            "600 test rows of version v2: auc 0.7840 vs 0.7830 (ahead by 0.0010)")
    behind = gate.current_checks(rules, {"auc": 0.782, "rmse": 10.05}, cur,
                                 {"auc": 0.783, "rmse": 10.0}, 0.0, rows)
    assert not any(c.passed for c in behind)
    assert "(behind by 0.0010)" in behind[0].detail and "(behind by 0.0500)" in behind[1].detail
    tolerated = gate.current_checks(rules, {"auc": 0.781, "rmse": 10.05}, cur,
                                    {"auc": 0.783, "rmse": 10.0}, 0.01)
    assert all(c.passed for c in tolerated) and "tolerance 0.01" in tolerated[0].detail
    unscored = gate.current_checks(rules, {"auc": 0.7}, cur, "KeyError: 'temp'", 0.0)
    assert unscored[0].passed and "cannot score" in unscored[0].detail


def test_a_model_of_older_data_never_replaces_the_current_one() -> None:
    cur = Current(dataset="d", version="20130201T000000Z_all", run="r1", model_uri="file:///m",
                  metric="auc", value=0.7, blessed_at="t")
    older = gate.newer_data_check(cur, "20130108T000000Z_20130101T000000Z")
    assert older is not None and not older.passed and older.name == "current:newer-data"
    assert "trained on newer data than version 20130108T000000Z_20130101T000000Z" in older.detail
    # a narrower window that ends later is newer data: judged on the rows, not refused
    assert gate.newer_data_check(cur, "20130202T000000Z_20130126T000000Z") is None
    assert gate.newer_data_check(cur, "20130201T000000Z_all") is None  # a retrain of it


def test_two_promotions_from_one_reading_cannot_both_win(storage_root: str) -> None:
    models = storage.join(storage_root, "models")

    def run(name: str) -> ModelRecord:
        return ModelRecord.of(dataset="d", version="v", model_uri="u", test=Figures.of(auc=0.8),
                              run=name)

    assert read_current(models, "d") == (None, None)
    assert promote(models, run("a"), "auc", None)
    assert not promote(models, run("b"), "auc", None)  # saw no pointer
    current, token = read_current(models, "d")
    assert current.run == "a"
    assert promote(models, run("c"), "auc", token)
    assert not promote(models, run("d"), "auc", token)  # stale token
    assert read_current(models, "d")[0].run == "c"


STORED = {"dataset": "flights", "version": "v1", "run": "r1", "model_uri": "file:///m/r1",
          "metric": "auc", "value": 0.78, "blessed_at": "2026-01-01T00:00:00Z",
          "note": "kept"}


def test_a_pointer_reads_by_attribute_and_writes_back_what_it_read() -> None:
    current = Current.from_json(STORED, "current.json")
    assert (current.dataset, current.run, current.metric, current.value) == \
        ("flights", "r1", "auc", 0.78)
    assert current.names("v1", "r1") and not current.names("v1", "r2")
    assert current.to_json() == STORED  # an unknown key survives a read and a write


def test_a_pointer_missing_a_key_names_the_file_and_the_key() -> None:
    with pytest.raises(ValueError, match=r"current.json: key 'model_uri': expected a string, "
                                         r"the key is missing"):
        Current.from_json({k: v for k, v in STORED.items() if k != "model_uri"}, "current.json")
