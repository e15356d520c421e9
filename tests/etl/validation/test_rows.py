"""Row checks: several segments checked in one GX run report exactly what each would alone."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.kinds.tabular.read import read_source_file
from etl.spec import load_spec
from etl.validation import RowChecks, ValidationSpec, check_rows
from etl.validation.gx import load_suite


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[pd.DataFrame]:
    path = tmp_path_factory.mktemp("parts")
    land(path.as_uri(), "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 4)))
    spec = load_spec("flights")
    frames = [read_source_file(f"{path.as_uri()}/raw/flights/date=2013-01-0{d}/flights.csv",
                               spec.primary_source).head(300) for d in (1, 2, 3)]
    frames[0].loc[3, "distance"] = "12a"  # a type error
    frames[1].loc[5, "carrier"] = None  # a null where none is allowed
    frames[1].loc[7, "sched_dep_time"] = "2475"  # not an HHMM time
    frames[2].loc[[1, 2], "distance"] = "-5"  # out of range
    for f in frames:  # the lookups' columns, as a join without matches adds them
        for col in spec.column_types():
            if col not in f:
                f[col] = pd.Series([None] * len(f), dtype=f["carrier"].dtype)
    return [f[list(spec.column_types())] for f in frames]


def test_parts_report_what_each_would_alone(days: list[pd.DataFrame], tmp_path: Path,
                                            monkeypatch) -> None:
    spec = ValidationSpec.of(load_spec("flights"))
    checks = RowChecks.of(load_suite(spec.expectations, spec.columns), spec)
    alone = [check_rows([f], checks, [(tmp_path / f"a{i}").as_uri()])[0]
             for i, f in enumerate(days)]
    from etl.validation import rows

    def no_fallback(*_):
        raise AssertionError("the parts were validated one by one, not split")

    monkeypatch.setattr(rows, "_one_by_one", no_fallback)
    together = check_rows(days, checks, [(tmp_path / f"t{i}").as_uri() for i in range(len(days))])
    for a, t in zip(alone, together):
        assert a.report.rows == t.report.rows
        assert np.array_equal(a.report.bad_positions, t.report.bad_positions)
        assert a.report.counts == t.report.counts
        pd.testing.assert_frame_equal(a.valid, t.valid)
    assert [len(c.report.bad_positions) for c in together] == [1, 2, 2]
    assert [len(c.valid) for c in together] == [299, 298, 298]
    q = pd.read_parquet(tmp_path / "t1" / together[1].report.quarantine_file)
    assert sorted(q["carrier"].isna()) == [False, True]
    for i in range(len(days)):  # the same rows quarantined, for the same reasons
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"a{i}"),
                                      pd.read_parquet(tmp_path / f"t{i}"))


def test_row_counts_round_trip_and_sum() -> None:
    """What segment.json stores (``row_partials``) loads back equal, and a window's (or a
    compaction's) sum keeps the first error and at most KEPT_EXAMPLES values."""
    from etl.validation import KEPT_EXAMPLES, RowCounts, summed

    a = RowCounts(element_count=10, missing_count=1, unexpected_count=2, values=("12a", "x"),
                  examples=({"flight": 1},))
    b = RowCounts(element_count=5, unexpected_count=30, values=tuple(str(i) for i in range(30)),
                  error="boom")
    assert RowCounts.from_json(json.loads(json.dumps(a.to_json())), "segment.json") == a
    total = summed([a, b])
    assert (total.element_count, total.missing_count, total.unexpected_count) == (15, 1, 32)
    assert total.values[:3] == ("12a", "x", "0") and len(total.values) == KEPT_EXAMPLES
    assert total.examples == ({"flight": 1},) and total.error == "boom"
