"""Training-side label tasks without the ETL: heads and exported outputs per task, the
metrics and gates on hand-checked numbers, and the task chosen from the manifest."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf
import training_fixtures as fx

from etl.versions import Manifest
from training import evaluate
from training.gate import baseline_checks
from training.models.tabular import build_models
from training.tasks import task_of

BASE = fx.build_manifest(fx.DATASET, fx.VERSION, {}, fx.make_rows(300, seed=2))


def _manifest(schema_label: dict, **stats: object) -> Manifest:
    manifest = copy.deepcopy(BASE)
    manifest["schema"]["label"] = schema_label
    manifest["statistics"].update(stats)
    return fx.typed(manifest)


def _raw(rows: list[dict]) -> dict[str, tf.Tensor]:
    return {name: tf.constant([r[name] for r in rows], dtype=feat["dtype"])
            for name, feat in fx.FEATURES.items()}


def test_multiclass_model_returns_one_probability_per_class() -> None:
    manifest = _manifest({"name": "y", "dtype": "int64", "task": "multiclass", "classes": 3,
                          "names": ["a", "b", "c"]}, label_counts={"0": 10, "1": 80, "2": 10})
    task = task_of(manifest)
    parts = build_models(manifest, head=task.head, serve=task.serve)
    probs = parts.full(_raw(fx.make_rows(16, seed=3))).numpy()
    assert probs.shape == (16, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert (probs.argmax(axis=1) == 1).mean() > 0.5  # starts at the train class frequencies


def test_regression_model_learns_log1p_and_serves_the_targets_units() -> None:
    manifest = _manifest({"name": "y", "dtype": "float32", "task": "regression",
                          "transform": "log1p"},
                         label={"mean": 150.0, "var": 5000.0, "min": 25.0, "max": 346.0,
                                "count": 300})
    task = task_of(manifest)
    parts = build_models(manifest, head=task.head, serve=task.serve)
    raw = _raw(fx.make_rows(32, seed=4))
    learned = parts.core(parts.preprocess(raw)).numpy()
    served = parts.full(raw).numpy()
    np.testing.assert_allclose(served, np.expm1(learned), rtol=1e-5)
    assert 20 < np.median(served) < 1000  # the head starts near the train mean, in units
    y = tf.constant([[0.0], [99.0]])
    np.testing.assert_allclose(task.target(manifest.schema["label"])(y).numpy(),
                               np.log1p([[0.0], [99.0]]), rtol=1e-6)


def test_binary_manifests_without_a_task_stay_binary_and_unknown_tasks_are_named() -> None:
    assert task_of(fx.typed(BASE)).name == "binary"
    bad = _manifest({"name": "y", "dtype": "int64", "task": "ordinal"})
    with pytest.raises(ValueError, match="label task 'ordinal' is not one of"):
        task_of(bad)


def test_class_report_on_a_hand_checked_confusion() -> None:
    labels = np.array([0, 0, 0, 1, 1, 2])
    predicted = np.array([0, 0, 1, 1, 1, 1])
    report = evaluate.class_report(labels, predicted, ["a", "b", "c"])
    assert report["confusion_matrix"] == [[2, 1, 0], [0, 2, 0], [0, 1, 0]]
    assert report["accuracy"] == pytest.approx(4 / 6)
    f1_a, f1_b = 2 * 1 * (2 / 3) / (1 + 2 / 3), 2 * 0.5 * 1 / 1.5
    assert report["macro_f1"] == pytest.approx((f1_a + f1_b + 0.0) / 3)
    assert report["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_regression_report_mean_baseline_and_relative_gate() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    report = evaluate.regression_report(y, y + np.array([1.0, -1.0, 1.0, -1.0]))
    assert report == {"mae": 1.0, "rmse": 1.0, "r2": pytest.approx(1 - 4 / 5)}
    base = evaluate.mean_baseline(y, 2.5)
    assert base["rmse"] == pytest.approx(np.sqrt(1.25)) and base["r2"] == pytest.approx(0.0)
    rules = {"rmse": "lower_relative"}
    assert baseline_checks(rules, {"rmse": 1.0}, base, 0.1, "mean")[0].passed
    [check] = baseline_checks(rules, {"rmse": 1.0}, base, 0.2, "mean")
    assert not check.passed and "rmse 1.0000 vs 1.1180, needs <= 0.8944" in check.detail


@pytest.mark.parametrize("task, test, base, shown", [
    ("multiclass", {"accuracy": 0.91, "macro_f1": 0.9, "loss": 0.3, "per_class": {"a": {}},
                    "confusion_matrix": [[1]]},
     {"accuracy": 0.4, "macro_f1": 0.19, "loss": 1.1},
     ", test accuracy 0.9100 (baseline 0.4000), test macro_f1 0.9000 (baseline 0.1900)"),
    ("regression", {"rmse": 52.5, "mae": 41.0, "r2": 0.45},
     {"rmse": 71.25, "mae": 60.0, "r2": -0.01},
     ", test rmse 52.5000 (baseline 71.2500), test mae 41.0000 (baseline 60.0000), test r2"),
])
def test_the_run_summary_line_names_the_tasks_metrics(caplog, task, test, base, shown) -> None:
    """The training task's log line: the task's own metrics against its baseline (it used to
    log only accuracy and AUC, so a regression run said nothing about its quality)."""
    from training import outputs
    from training.tasks import TASKS

    metrics = {"dataset": "d", "version": "v1", "task": task, "test": test, "baseline": base,
               "epochs_run": 3, "epochs": 10, "fit_seconds": 1.5}
    with caplog.at_level("INFO", logger="training.outputs"):
        outputs.log_summary(metrics, "file:///m/run", TASKS[task].card_metrics)
    assert shown in caplog.text and "3/10 epoch(s)" in caplog.text, caplog.text
