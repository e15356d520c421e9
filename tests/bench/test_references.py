"""The bench's HistGradientBoosting reference: binary tables are compared on AUC too."""

from __future__ import annotations

from pathlib import Path

from bench.references import compare, reference
from tests.support import training_fixtures as fx


def test_binary_reference_scores_auc_from_probabilities(tmp_path: Path) -> None:
    store = fx.write_version(tmp_path, n=2000, seed=2)
    ref = reference(store.uri, "binary")
    assert set(ref) == {"accuracy", "macro_f1", "auc"}
    assert 0.6 < ref["auc"] <= 1.0  # the fixture's label is learnable, not trivially


def test_binary_comparison_needs_both_accuracy_and_auc() -> None:
    ref = {"accuracy": 0.80, "macro_f1": 0.6, "auc": 0.79}
    good = compare({"accuracy": 0.80, "macro_f1": 0.5, "auc": 0.77}, ref, "binary")
    assert good["metric"] == "accuracy and auc" and good["met"]
    assert set(good["ratios"]) == {"accuracy", "auc"}
    assert not compare({"accuracy": 0.80, "auc": 0.70}, ref, "binary")["met"]
    assert not compare({"accuracy": 0.70, "auc": 0.79}, ref, "binary")["met"]
    assert compare({"accuracy": 0.5, "macro_f1": 0.59}, ref, "multiclass")["met"]
