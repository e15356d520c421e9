"""Drift of new data against the previous version's statistics: mean shift and PSI."""

from __future__ import annotations

import math

from etl.transform.drift import compare, mean_shift, psi

OLD = {"num_examples": 1000, "numeric": {"distance": {"mean": 1000.0, "var": 400.0 ** 2,
                                                     "count": 1000}},
       "vocabulary_counts": {"carrier": {"UA": 500, "AA": 300, "DL": 200}},
       "label_counts": {"0": 800, "1": 200}}


def test_the_same_distribution_does_not_drift() -> None:
    report = compare(OLD, OLD, "v1", ["s1"])
    assert report["drifted"] == [] and len(report["features"]) == 3
    assert all(f["value"] == 0 for f in report["features"])


def test_a_shifted_mean_a_new_carrier_and_more_late_flights_drift() -> None:
    new = {"num_examples": 100, "numeric": {"distance": {"mean": 1300.0, "var": 1.0, "count": 100}},
           "vocabulary_counts": {"carrier": {"UA": 10, "AA": 10, "B6": 80}},
           "label_counts": {"0": 50, "1": 50}}
    report = compare(new, OLD, "v1", ["s2"])
    assert report["drifted"] == ["distance", "carrier", "label"]
    assert report["features"][0]["value"] == 0.75  # 300 / 400
    assert report["rows"] == 100 and report["against"] == "v1" and report["segments"] == ["s2"]


def test_edge_cases_are_none_or_infinite_never_an_error() -> None:
    assert mean_shift({"count": 0}, OLD["numeric"]["distance"]) is None
    assert mean_shift({"count": 5, "mean": 2.0}, {"count": 5, "mean": 1.0, "var": 0.0}) == math.inf
    assert psi({}, {"a": 1}) is None
    assert 0 < psi({"a": 9, "b": 1}, {"a": 5, "b": 5}) < psi({"a": 1}, {"b": 1})
