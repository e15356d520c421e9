"""The bench's HistGradientBoosting reference: binary tables are compared on AUC too."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor

from bench.references import MAX_CATEGORIES, aligned, compare, reference
from tests.support import training_fixtures as fx


def test_binary_reference_scores_auc_from_probabilities(tmp_path: Path) -> None:
    store = fx.write_version(tmp_path, n=2000, seed=2)
    ref = reference(store.uri, "binary")
    assert set(ref.scores) == {"accuracy", "macro_f1", "auc"}
    assert 0.6 < ref.scores["auc"] <= 1.0  # the fixture's label is learnable, not trivially
    # the gate's own baseline checks, on the reference: the label is learnable, so its point
    # estimates beat the majority class (its log loss, from HistGradientBoosting's uncalibrated
    # probabilities, need not beat the base rate beyond noise: it does not on this fixture)
    checks = {c["name"]: c["passed"] for c in ref.gate}
    assert set(checks) == {"baseline:accuracy", "baseline:auc", "noise"}
    assert checks["baseline:accuracy"] and checks["baseline:auc"]
    assert ref.beats_baseline == all(checks.values())


def test_binary_comparison_needs_both_accuracy_and_auc() -> None:
    ref = {"accuracy": 0.80, "macro_f1": 0.6, "auc": 0.79}
    good = compare({"accuracy": 0.80, "macro_f1": 0.5, "auc": 0.77}, ref, "binary")
    assert good["metric"] == "accuracy and auc" and good["met"]
    assert set(good["ratios"]) == {"accuracy", "auc"}
    assert not compare({"accuracy": 0.80, "auc": 0.70}, ref, "binary")["met"]
    assert not compare({"accuracy": 0.70, "auc": 0.79}, ref, "binary")["met"]
    assert compare({"accuracy": 0.5, "macro_f1": 0.59}, ref, "multiclass")["met"]


def test_a_reference_on_a_label_of_noise_does_not_beat_the_baseline(tmp_path: Path) -> None:
    store = fx.write_version(tmp_path, n=2000, seed=3, random_labels=True)
    ref = reference(store.uri, "binary")
    assert not ref.beats_baseline
    assert not next(c for c in ref.gate if c["name"] == "noise")["passed"]


def test_one_ratio_per_table_is_higher_when_better() -> None:
    assert compare({"rmse": 2.0}, {"rmse": 1.0}, "regression")["ratio"] == 0.5
    # an exact target (wooldridge's agesq, a column's square): errors of 0 compare, no NaN
    exact = compare({"rmse": 0.0}, {"rmse": 0.0137}, "regression")
    assert exact["ratio"] == math.inf and exact["met"]
    assert compare({"rmse": 0.0}, {"rmse": 0.0}, "regression")["ratio"] == 1.0
    behind = compare({"rmse": 0.01}, {"rmse": 0.0}, "regression")
    assert behind["ratio"] == 0.0 and not behind["met"]
    ref = {"accuracy": 0.8, "macro_f1": 0.5, "auc": 0.8}
    assert compare({"accuracy": 0.8, "auc": 0.4}, ref, "binary")["ratio"] == 0.5
    assert compare({"accuracy": 0.4, "macro_f1": 0.5}, ref, "multiclass")["ratio"] == 1.0


def test_a_categorical_wider_than_histgradientboosting_takes_enters_as_codes() -> None:
    # sandwich/InstInnovation's 'company' (801 values) failed the reference's fit
    rng = np.random.default_rng(0)
    names = [f"c{i}" for i in range(MAX_CATEGORIES + 45)]
    train = pd.DataFrame({"company": pd.Categorical(rng.choice(names, 900)),
                          "size": pd.Categorical(rng.choice(["s", "m", "l"], 900)),
                          "x": rng.normal(size=900)})
    test = pd.DataFrame({"company": pd.Categorical(["c3", "unseen"]),
                         "size": pd.Categorical(["m", "xl"]), "x": [0.0, 1.0]})
    x_train, x_test = aligned(train, test)
    assert x_train["company"].dtype == np.float64 and x_train["size"].dtype == "category"
    assert x_test["company"].iloc[0] == list(train["company"].cat.categories).index("c3")
    assert np.isnan(x_test["company"].iloc[1]) and pd.isna(x_test["size"].iloc[1])
    model = HistGradientBoostingRegressor(categorical_features="from_dtype", max_iter=5)
    assert model.fit(x_train, rng.normal(size=900)).predict(x_test).shape == (2,)
