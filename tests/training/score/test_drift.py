"""The predicted distribution against the model's test predictions, and its verdict."""

from __future__ import annotations

import numpy as np

from training.score.drift import PSI_LIMIT, distribution, psi


def test_psi_is_zero_for_equal_shares_and_grows_with_the_shift() -> None:
    assert psi(np.array([30, 70]), np.array([300, 700])) == 0.0
    small, large = psi(np.array([35, 65]), np.array([30, 70])), psi(np.array([70, 30]),
                                                                      np.array([30, 70]))
    assert 0 < small < PSI_LIMIT < large


def test_classes_counted_and_a_flipped_population_drifts() -> None:
    ref = np.array(["0"] * 80 + ["1"] * 20)
    same = distribution(np.array(["0"] * 40 + ["1"] * 10), ref, ("0", "1"))
    assert same["scored"] == [40, 10] and same["reference"] == [80, 20]
    assert same["scored_shares"] == [0.8, 0.2] and not same["drifted"]
    flipped = distribution(np.array(["0"] * 10 + ["1"] * 40), ref, ("0", "1"))
    assert flipped["drifted"] and flipped["psi"] > PSI_LIMIT


def test_a_class_never_predicted_keeps_psi_finite() -> None:
    found = distribution(np.array(["a"] * 10), np.array(["a", "b", "c"] * 10), ("a", "b", "c"))
    assert np.isfinite(found["psi"]) and found["drifted"] and found["scored"] == [10, 0, 0]


def test_values_binned_at_the_references_deciles() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(0, 1, 5000)
    same = distribution(rng.normal(0, 1, 2000), ref, ())
    assert same["kind"] == "bin" and len(same["labels"]) == 10
    assert sum(same["scored"]) == 2000 and not same["drifted"]
    assert all(abs(s - 0.1) < 0.03 for s in same["reference_shares"])
    shifted = distribution(rng.normal(1.5, 1, 2000), ref, ())
    assert shifted["drifted"] and shifted["labels"][0].startswith("[-inf")


def test_nothing_scored_is_no_verdict() -> None:
    empty = distribution(np.array([], dtype=object), np.array(["0", "1"]), ("0", "1"))
    assert np.isnan(empty["psi"]) and not empty["drifted"]
