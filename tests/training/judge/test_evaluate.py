"""training.judge.evaluate: the class and regression reports and the mean baseline on hand-checked
numbers."""

from __future__ import annotations

import numpy as np
import pytest

from training.judge import evaluate
from training.judge.gate import baseline_checks


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
