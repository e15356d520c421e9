"""``training.record``: a run's metrics.json, read by its type and written back key for key; what
``train`` returns (``Trained``, ``Handover``), read by attribute and carried across a process or
XCom boundary as JSON."""

from __future__ import annotations

import pytest

from training.record import (
    Blessing,
    Check,
    Figures,
    Handover,
    ModelRecord,
    Trained,
    read_model_record,
    trained,
)


def test_a_model_record_reads_and_writes_back_key_for_key(tmp_path) -> None:
    """metrics.json read by its type: a record of older code (no family, a key this code does
    not know) writes back byte for byte; a malformed one names the file and the key."""
    from etl import storage

    stored = {"dataset": "flights", "version": "v", "test": {"auc": 0.8, "loss": 0.4},
              "blessing": {"blessed": True, "reasons": [], "checks": []}, "run": "r",
              "legacy_key": [1, 2], "dag_id": "train_flights", "run_id": "manual__1"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_bytes(storage.json_bytes(stored))
    record = read_model_record(run.as_uri())
    assert record.test.auc == 0.8 and record.family is None and record.run == "r"
    assert record.trained_by == "run manual__1 of train_flights"
    assert storage.json_bytes(record.to_json()) == storage.json_bytes(stored)
    assert read_model_record((tmp_path / "running").as_uri()) is None  # no record yet
    assert ModelRecord.of(run="r").trained_by is None  # trained outside an orchestrator
    (run / "metrics.json").write_text('{"test": [0.8]}')
    with pytest.raises(ValueError, match=r"metrics.json: key 'test': expected an object"):
        read_model_record(run.as_uri())


def test_every_block_reads_typed_and_writes_back_key_for_key() -> None:
    """metrics.json's blocks are typed records too: each reads to attributes, a key this code
    does not know (and an older spelling) survives a read and a write, a malformed block names
    its key path."""
    from training.record import Blessing, Check, Figures, PhaseTimes

    stored = {
        "test": {"auc": 0.81, "loss": 0.4, "examples": 400, "new_metric": 0.5,
                 "intervals": {"level": 0.95, "metrics": {"auc": [0.78, 0.84]},
                               "lead_over_baseline": {"auc": [0.2, 0.3]}}},
        "eval": {"auc": 0.8}, "baseline": {"auc": 0.5, "majority_class": 0, "examples": 400},
        "blessing": {"blessed": False, "reasons": ["no lead"], "rules": "binary: AUC",
                     "checks": [{"name": "baseline:auc", "passed": False, "detail": "no lead",
                                 "since": 2}]},
        "cross_validation": {"rows": 250, "folds": 5, "repeats": 2, "metric": "auc",
                             "families": {"trees": {"mean": 0.8, "per_repeat": [0.79, 0.81],
                                                    "range": [0.79, 0.81], "lengths": [40, 60],
                                                    "median_length": 50}},
                             "chosen": "trees", "why": "better",
                             "refit": {"rows": 250, "length": 50, "unit": "boosting rounds"},
                             "out_of_fold": {"auc": 0.79}, "baseline": {"auc": 0.5}},
        "target_choice": {"chosen": "log1p", "skewness": 2.5, "min": 0.0,
                          "eval_rmse": {"raw": 3.0, "log1p": 2.5}, "why": "skewed"},
        "family_choice": {"chosen": "mlp", "metric": "auc", "eval": {"mlp": 0.8, "trees": 0.7},
                          "why": "better beyond noise"},
        "tuned": {"tuned_at": "t", "version": "v", "family": "trees", "settings": {"a": 1},
                  "metric": "auc", "eval": 0.8, "default_eval": {"trees": 0.7}, "trials": 4,
                  "judged": "eval", "overridden": ["a"]},
        "phases": {"fit": {"seconds": 4.0, "cpu_s": 3.0, "peak_rss_mb": 100.0},
                   "evaluate": {"seconds": 1.0}, "warmup": {"seconds": 0.1}},
    }
    record = ModelRecord.from_json(stored, "metrics.json")

    assert (record.test.auc, record.test.value("new_metric"), record.test.examples) == (
        0.81, 0.5, 400)
    assert record.test.numbers() == {"auc": 0.81, "loss": 0.4, "examples": 400,
                                     "new_metric": 0.5}
    assert record.test.intervals.metrics["auc"] == [0.78, 0.84]
    assert record.baseline.majority_class == 0 and record.eval.value("accuracy") is None
    assert record.blessing == Blessing(False, ("no lead",), (
        Check("baseline:auc", False, "no lead", json_extra={"since": 2}),), "binary: AUC")
    assert "NOT blessed: no lead" in record.blessing.summary()
    cv = record.cross_validation
    assert (cv.families["trees"].median_length, cv.refit.length, cv.out_of_fold.auc) == (
        50, 50, 0.79)
    assert record.target_choice.why == "skewed" and record.family_choice.eval["trees"] == 0.7
    assert record.tuned.overridden == ("a",) and record.tuned.default_eval == {"trees": 0.7}
    assert record.phases.fit.seconds == 4.0 and record.phases.ratio("evaluate", "fit") == 0.25
    assert PhaseTimes().ratio("evaluate", "fit") != PhaseTimes().ratio("evaluate", "fit")  # NaN
    assert record.to_json() == stored
    assert not ModelRecord().test and not Figures() and Figures.of(auc=0.5)
    assert Blessing.of([Check("a", True, "ok")]).to_json() == {
        "blessed": True, "reasons": [], "checks": [{"name": "a", "passed": True,
                                                    "detail": "ok"}], "rules": ""}

    with pytest.raises(ValueError, match=r"key 'blessing.checks\[0\].passed': expected true"):
        ModelRecord.from_json({"blessing": {"blessed": True, "checks": [{"name": "a"}]}},
                              "metrics.json")
    with pytest.raises(ValueError, match=r"key 'test.auc': expected an integer or a number"):
        ModelRecord.from_json({"test": {"auc": "0.8"}}, "metrics.json")


def test_a_verdict_says_why_in_one_line_and_a_record_without_one_is_not_blessed() -> None:
    """The gate's verdict: the failed checks' details are its reasons, its summary one line
    ending with the rules; a record from before the gate counts as not blessed."""
    from training.record import Blessing, Check

    checks = [Check("baseline:auc", True, "auc 0.71 vs 0.50"),
              Check("noise", False, "log loss lead not above zero")]
    verdict = Blessing.of(checks, "binary: auc and log loss")
    assert not verdict.blessed and verdict.reasons == ("log loss lead not above zero",)
    assert Blessing.from_json(verdict.to_json(), "metrics.json") == verdict
    assert verdict.summary() == ("NOT blessed: log loss lead not above zero "
                                 "[rules: binary: auc and log loss]")
    assert Blessing.of(checks[:1]).summary() == "blessed: auc 0.71 vs 0.50"
    assert not Blessing.missing().blessed  # a run from before the gate


def test_scalars_keep_what_xcom_and_lineage_carry() -> None:
    metrics = {"test": {"auc": 0.7, "accuracy": 0.8}, "baseline": {"auc": 0.5},
               "history": {"loss": [0.6, 0.5]}, "epochs": 3, "shards": ["a", "b"]}
    assert ModelRecord.from_json(metrics, "m.json").scalars() == {
        "test": {"auc": 0.7, "accuracy": 0.8}, "baseline": {"auc": 0.5}, "epochs": 3}


def test_scalars_keep_each_splits_scalars_beside_nested_reports() -> None:
    """A multi-class test split carries per-class scores and a confusion matrix: the scalars
    keep its accuracy and macro-F1 (a summary once dropped the whole ``test`` block)."""
    test = {"accuracy": 0.9, "macro_f1": 0.88, "loss": 0.3, "examples": 37,
            "per_class": {"class_0": {"f1": 0.9}}, "confusion_matrix": [[10, 1], [2, 24]]}
    metrics = {"task": "multiclass", "classes": ["class_0", "class_1"], "test": test,
               "baseline": {"accuracy": 0.4, "macro_f1": 0.19, "majority_class": 1},
               "history": {"loss": [0.6, 0.5]}}
    scalars = ModelRecord.from_json(metrics, "m.json").scalars()
    assert scalars["test"] == {"accuracy": 0.9, "macro_f1": 0.88, "loss": 0.3, "examples": 37}
    assert scalars["baseline"] == metrics["baseline"] and scalars["task"] == "multiclass"
    assert "history" not in scalars and "classes" not in scalars


def test_a_result_reads_by_attribute_and_round_trips_through_json() -> None:
    record = ModelRecord.of(dataset="d", version="v1", run="r", model_uri="file:///m/r",
                            test=Figures.of(auc=0.7))
    verdict = Blessing.of([Check("baseline:auc", True, "auc 0.70 vs 0.50")])
    result = trained("file:///m/r", record, verdict, True)
    assert result.version == "v1" and result.promoted and result.blessing.blessed
    back = Trained.from_json(result.to_json(), "XCom")
    assert back.metrics.to_json() == record.to_json() and back.blessing == verdict
    assert back.model_uri == "file:///m/r" and back.promoted


def test_a_result_without_its_record_names_the_key() -> None:
    with pytest.raises(ValueError, match="XCom: key 'metrics'"):
        Trained.from_json({"model_uri": "u", "blessing": {}}, "XCom")


def test_a_handover_names_the_last_run_and_any_promotion() -> None:
    """The train task's XCom: the last run's scalars and verdict; promoted when any run of
    the task made its model current (the newer one may be unblessed); every version, in
    order; what ``announce_model`` reads back by attribute."""
    verdict = Blessing.of([Check("baseline:auc", True, "auc 0.70 vs 0.50")])
    runs = [trained(f"file:///m/{v}/r", ModelRecord.of(
        dataset="d", version=v, test=Figures.of(auc=0.7, per_class={"a": {"f1": 1.0}})),
        verdict, promoted) for v, promoted in (("v1", True), ("v2", False))]
    handover = Handover.of_runs(runs)
    assert (handover.version, handover.model_uri, handover.promoted, handover.trained) == (
        "v2", "file:///m/v2/r", True, ("v1", "v2"))
    assert handover.metrics == {"dataset": "d", "version": "v2", "test": {"auc": 0.7}}
    back = Handover.from_json(handover.to_json(), "XCom")
    assert back == handover and back.blessing.blessed


def test_a_handover_without_its_version_names_the_key() -> None:
    with pytest.raises(ValueError, match="XCom: key 'version'"):
        Handover.from_json({"blessing": {}}, "XCom")
