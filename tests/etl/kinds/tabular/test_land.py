"""Landing: one CSV per UTC day with the upstream lines untouched, idempotent, append-only."""

from __future__ import annotations

import os
import zipfile
from datetime import date
from pathlib import Path

import pytest

from etl.kinds.landing import LandingConflictError, LandOptions
from etl.kinds.tabular.land import land, package_data_dir

DAYS = (date(2013, 1, 1), date(2013, 1, 3))


def _upstream_lines() -> list[str]:
    with zipfile.ZipFile(package_data_dir() / "flights.csv.zip") as zf:
        return zf.read(zf.namelist()[0]).decode().splitlines(keepends=True)


def test_flights_land_one_file_per_day_untouched(tmp_path: Path) -> None:
    report = land(f"file://{tmp_path}", "flights", LandOptions(start=DAYS[0], end=DAYS[1]))
    raw = tmp_path / "raw"
    days = sorted(p.name for p in (raw / "flights").iterdir())
    assert days == ["date=2013-01-01", "date=2013-01-02"]
    upstream = _upstream_lines()
    landed = []
    for day in days:
        lines = (raw / "flights" / day / "flights.csv").read_text().splitlines(keepends=True)
        assert lines[0] == upstream[0]  # the header, byte for byte
        assert {line.rstrip().split(",")[-1][:10] for line in lines[1:]} == {day[5:]}
        landed += lines[1:]
    # per day, in upstream order
    expected = [line for day in ("2013-01-01", "2013-01-02") for line in upstream[1:]
                if line.rstrip()[-20:-10] == day]
    assert landed == expected and report.rows == len(expected) > 1000
    for name in ("weather", "planes", "airlines", "airports"):
        data = (raw / name / f"{name}.csv").read_bytes()
        assert data == (package_data_dir() / f"{name}.csv").read_bytes()


def test_land_is_idempotent_and_append_only(tmp_path: Path) -> None:
    root = f"file://{tmp_path}"
    first = land(root, "flights", LandOptions(start=DAYS[0], end=DAYS[1]))
    day_file = tmp_path / "raw/flights/date=2013-01-01/flights.csv"
    mtime = os.stat(day_file).st_mtime_ns
    again = land(root, "flights", LandOptions(start=DAYS[0], end=DAYS[1]))
    assert again.written == [] and again.replaced == []
    assert sorted(again.unchanged) == sorted(first.written)
    assert os.stat(day_file).st_mtime_ns == mtime  # the source fingerprint stays the same
    day_file.write_text(day_file.read_text() + "2013,1,1,x\n")
    with pytest.raises(LandingConflictError, match="date=2013-01-01/flights.csv"):
        land(root, "flights", LandOptions(start=DAYS[0], end=DAYS[1]))
    fixed = land(root, "flights", LandOptions(start=DAYS[0], end=DAYS[1], overwrite=True))
    assert [u.rsplit("/", 2)[-2] for u in fixed.replaced] == ["date=2013-01-01"]


def test_scale_repeats_flights_with_unique_keys_and_their_weather(tmp_path: Path) -> None:
    one = land(f"file://{tmp_path}/a", "flights", LandOptions(start=DAYS[0], end=date(2013, 1, 2)))
    four = land(f"file://{tmp_path}/b", "flights", LandOptions(start=DAYS[0], end=date(2013, 1, 2), scale=4))
    assert four.rows == 4 * one.rows
    lines = (tmp_path / "b/raw/flights/date=2013-01-01/flights.csv").read_text().splitlines()
    rows = [r.split(",") for r in lines[1:]]
    assert len({(r[-1], r[9], r[10], r[12]) for r in rows}) == four.rows  # keys unique
    assert {r[-1][:10] for r in rows} == {"2013-01-01"}  # copies stay in their day
    assert {r[-1][14:16] for r in rows} == {"00", "01", "02", "03"}  # minutes apart
    weather = (tmp_path / "b/raw/weather/weather.csv").read_text().splitlines()
    original = (package_data_dir() / "weather.csv").read_text().splitlines()
    assert len(weather) - 1 == 4 * (len(original) - 1)
    stamps = {line.rsplit(",", 1)[1] for line in weather[1:]}
    assert {r[-1] for r in rows} <= stamps  # every copy still finds its weather
    with pytest.raises(ValueError, match="scale"):
        land(f"file://{tmp_path}/c", "flights", LandOptions(scale=61))
