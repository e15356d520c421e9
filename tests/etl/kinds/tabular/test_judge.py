"""etl.kinds.tabular.judge: the partitions a joined source has no rows for, in words; and
issue 51 item 6 end to end: a one-day window whose weather is missing fails naming the join.
(The window judged from stored partials -- key uniqueness across segments, a failed window,
drift against the previous version -- runs end to end in test_window.py.)"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from etl.kinds.tabular.judge import join_gaps
from etl.spec import load_spec
from etl.versions.segment import Interval, SegmentMeta


@pytest.fixture(scope="module")
def spec():
    return load_spec("flights")  # joins weather on (origin, time_hour), planes on tailnum


def _weather(first: str, last: str, skip: tuple[str, ...] = ()) -> pd.DataFrame:
    """A weather lookup as ``read_lookups`` gives it: hourly instants from ``first`` to
    ``last`` (inclusive), the days ``skip`` left out."""
    hours = pd.date_range(first, last, freq="h", tz="UTC")
    hours = hours[~hours.strftime("%Y-%m-%d").isin(skip)]
    return pd.DataFrame({"origin": "EWR", "temp": 40.0, "__join_time_hour": hours})


def _days(*days: str, start: str | None = None, end: str | None = None) -> list[SegmentMeta]:
    """One segment holding ``days`` (each a day partition), cut to [start, end) if given."""
    keys = tuple((d.replace("-", ""), "digest") for d in days)
    cut = Interval.of(start=start or f"{days[0]}T00:00:00Z",
                      end=end or f"{(pd.Timestamp(days[-1]) + pd.Timedelta(days=1)).date()}"
                                 "T00:00:00Z")
    return [SegmentMeta.of(partitions=keys, data_interval=cut, splits={})]


def _planes() -> pd.DataFrame:
    return pd.DataFrame({"tailnum": ["N1"], "plane_year": [2000]})


def test_a_lookup_that_ends_before_the_window_is_named_with_its_last_day(spec) -> None:
    gaps = join_gaps(spec, [_weather("2013-01-01", "2013-01-04 23:00"), _planes()],
                     _days("2013-01-03", "2013-01-04", "2013-01-05", "2013-01-06"))
    [gap] = gaps  # planes has no time key: nothing to say from it
    assert gap.text() == ("no weather rows joined for 2013-01-05, 2013-01-06: the joined "
                          "source `weather` ends on 2013-01-04")
    assert gap.columns[:2] == ("temp", "dewp") and gap.partitions == ("2013-01-05", "2013-01-06")
    assert gap.to_json()["text"] == gap.text()


def test_a_lookup_that_starts_late_or_has_a_hole_or_nothing(spec) -> None:
    late = join_gaps(spec, [_weather("2013-01-03", "2013-01-09"), _planes()],
                     _days("2013-01-02", "2013-01-03"))
    assert [g.text() for g in late] == [
        "no weather rows joined for 2013-01-02: the joined source `weather` starts on 2013-01-03"]
    hole = join_gaps(spec, [_weather("2013-01-01", "2013-01-04 23:00", skip=("2013-01-03",)),
                            _planes()], _days("2013-01-02", "2013-01-03", "2013-01-04"))
    assert [g.text() for g in hole] == [
        ("no weather rows joined for 2013-01-03: the joined source `weather` holds rows from "
         "2013-01-01 to 2013-01-04 but none for it")]
    empty = join_gaps(spec, [_weather("2013-01-01", "2013-01-01").iloc[:0], _planes()],
                      _days(*[f"2013-01-0{d}" for d in range(1, 8)]))
    assert [g.text() for g in empty] == [
        ("no weather rows joined for 2013-01-01, 2013-01-02, 2013-01-03, 2013-01-04, 2013-01-05 "
         "and 2 more: the joined source `weather` holds no rows")]


def test_only_the_part_of_a_day_inside_the_window_counts(spec) -> None:
    """A window that cuts a day: the weather of its morning does not join its evening."""
    lookups = [_weather("2013-01-01", "2013-01-05 06:00"), _planes()]
    assert join_gaps(spec, lookups, _days("2013-01-05")) == []  # the morning joins
    [gap] = join_gaps(spec, lookups, _days("2013-01-05", start="2013-01-05T12:00:00Z"))
    assert gap.text() == ("no weather rows joined for 2013-01-05: the joined source "
                          "`weather` ends on 2013-01-05")


def test_a_join_not_keyed_on_the_event_time_is_not_judged(spec) -> None:
    weather = dataclasses.replace(spec.joins[0], on=("origin",))
    other = dataclasses.replace(spec, joins=(weather, spec.joins[1]))
    assert join_gaps(other, [_weather("2013-01-01", "2013-01-01"), _planes()],
                     _days("2013-01-05")) == []


def test_a_window_whose_weather_is_missing_fails_naming_the_join(tmp_path) -> None:
    """The ETL itself on a one-day window after the weather file's last day: validation fails
    on ``temp`` and says why, and the results keep the words for the UI's page."""
    import json

    from tests.support import failed_validation as fv

    failed = fv.run_failing_window(tmp_path / "root")
    message = str(failed)
    assert "expect_column_proportion_of_non_null_values_to_be_between on column 'temp'" \
        in message
    assert ("  because no weather rows joined for 2013-01-05: the joined source `weather` ends "
            "on 2013-01-04 (it fills temp)") in message
    folder = tmp_path / "root" / "datasets" / "flights" / fv.VERSION
    results = json.loads((folder / "validation" / "results.json").read_text())
    assert [g["text"] for g in results["meta"]["join_gaps"]] == [
        "no weather rows joined for 2013-01-05: the joined source `weather` ends on 2013-01-04"]
    assert failed.results_uri.endswith(f"{fv.VERSION}/validation")
    assert not (folder / "manifest.json").exists()
