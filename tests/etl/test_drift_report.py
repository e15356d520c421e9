"""``etl.drift_report``: the drift report as a typed record, read and written key for
key, and what drifted told apart by kind."""

from __future__ import annotations

import pytest

from etl.drift_report import DriftReport

STORED = {"against": "v1", "segments": ["s1"], "rows": 700, "baseline": "the spec's limits",
          "excluded": ["month"], "features": [
              {"name": "temp", "kind": "missing", "statistic": "null share rise",
               "value": "inf", "limit": 0.1, "spec_limit": 0.1, "peers": 0, "drifted": True},
              {"name": "distance", "kind": "numeric", "statistic": "mean shift (old std)",
               "value": 0.7, "limit": 0.5, "spec_limit": 0.5, "peers": 0, "drifted": True}],
          "drifted": ["temp", "distance"], "history": {"numeric:distance": [0.1]},
          "later": "kept"}


def test_a_report_reads_by_attribute_and_writes_back_what_it_read() -> None:
    report = DriftReport.from_json(STORED, "manifest.json", "validation.drift")
    assert report.against == "v1" and report.rows == 700 and report.segments == ("s1",)
    assert [r.name for r in report.features if r.drifted] == ["temp", "distance"]
    assert report.drifted_by_kind() == (["distance"], ["temp"])
    assert report.words() == ("values moved beyond their limits in distance; more values "
                              "missing than their limits allow in temp")
    assert report.to_json() == STORED


def test_a_malformed_report_names_the_file_and_the_key() -> None:
    with pytest.raises(ValueError, match=r"manifest.json: key 'validation.drift.features\[0\]"
                                         r".drifted': expected true or false"):
        DriftReport.from_json({"features": [{"drifted": "yes"}]}, "manifest.json",
                              "validation.drift")
