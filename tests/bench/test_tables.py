"""bench.tables: the gauntlet's public tables land offline in the shapes they claim."""

from __future__ import annotations

import dataclasses

from bench.tables import NULL_TOKEN, TABLES, land_table, package_dir


def test_the_gauntlet_covers_the_shapes_issue_33_asks_for() -> None:
    tables = TABLES.values()
    assert len(TABLES) >= 22
    assert len({t.package for t in tables}) >= 4
    assert {t.task for t in tables} == {"binary", "multiclass", "regression"}
    assert {"file", "csv", "jsonl", "parquet", "daily", "hourly"} <= {t.layout for t in tables}
    for t in tables:
        assert t.shape and t.label, t.name
        if t.package != "scikit-learn":
            assert (package_dir(t.package) / t.resource).is_file(), t


def test_an_hourly_landing_leaves_gaps_and_writes_missing_readings_as_nil(tmp_path) -> None:
    table = dataclasses.replace(TABLES["weather_hourly"], window=("2013-01-01", "2013-01-03"))
    folder = land_table(table, tmp_path)
    hours = sorted(p.name for p in folder.iterdir())
    assert hours[0] == "date=2013-01-01T06" and all(len(h) == len("date=2013-01-01T06")
                                                     for h in hours)
    assert len(hours) < 42  # 42 hours in the window: every 41st and upstream's gaps missing
    text = (folder / hours[0] / "weather_hourly.csv").read_text()
    assert f",{NULL_TOKEN}," in text and ",NA," not in text


def test_a_sklearn_frame_lands_with_its_real_column_names(tmp_path) -> None:
    header = land_table(TABLES["wine"], tmp_path).read_text().splitlines()[0]
    assert "od280/od315_of_diluted_wines" in header.split(",")
