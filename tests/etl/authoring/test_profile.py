"""``etl spec init`` reads every row (or a uniform sample over its byte budget) and drafts what
holds on all of it: a file sorted by one column, null tokens in numeric columns, partitions
with gaps, repeated timestamps, messy headers and small tables; each draft runs through
``etl run`` on the same data with nothing quarantined and no edit."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from etl import pipeline, versions
from etl.__main__ import main
from etl.authoring.partitions import matching_files
from etl.authoring.profile import Origin, merge, profile_frame
from etl.authoring.scan import plan, scan
from etl.spec.scheduling import DEFAULT_SPECS_DIR


@pytest.fixture
def specs(tmp_path: Path, monkeypatch) -> Path:
    """A spec folder outside the repo, first on the search path."""
    folder = tmp_path / "specs"
    folder.mkdir()
    monkeypatch.setenv("PIPELINE_SPECS_PATH", os.pathsep.join([str(folder), str(DEFAULT_SPECS_DIR)]))
    return folder


def _init(capsys, *args: str) -> str:
    assert main(["spec", "init", *args]) == 0
    return capsys.readouterr().out


def _published_clean(name: str, root: str, end: str = "2100-01-01") -> dict:
    result = pipeline.run(name, root, end, run_id="drafted")
    assert result.created
    manifest = versions.read_manifest(result.version_uri)
    assert manifest.verdict.quarantined_rows == 0, manifest.verdict.to_json()
    return manifest


def _suite(specs: Path, name: str) -> dict[tuple[str, str | None], dict]:
    raw = json.loads((specs / name / "expectations.json").read_text())["expectations"]
    return {(e["type"], e["kwargs"].get("column")): e["kwargs"] for e in raw}


def test_a_file_sorted_by_one_column_gets_ranges_that_hold_on_every_row(tmp_path, specs, capsys):
    """A head sample of a price-sorted file saw only cheap rows; the draft now reads all."""
    rng = np.random.default_rng(0)
    n = 3000
    frame = pd.DataFrame({"carat": rng.uniform(0.2, 5, n).round(2),
                          "cut": rng.choice(["Fair", "Good", "Ideal"], n),
                          "price": rng.integers(300, 19_000, n)}).sort_values("price")
    frame.loc[frame.index[-5:], "cut"] = "Premium"  # a category only the last rows hold
    path = tmp_path / "raw" / "diamonds.csv"
    path.parent.mkdir(parents=True)
    frame.to_csv(path, index=False)
    out = _init(capsys, "--name", "diamonds", "--source", str(path), "--label", "price",
                "--task", "regression")
    assert "Read: profiled all 3,000 rows of 1 file (csv)" in out
    suite = _suite(specs, "diamonds")
    price = suite[("expect_column_values_to_be_between", "price")]
    assert price["min_value"] <= frame.price.min() and price["max_value"] >= frame.price.max()
    assert "Premium" in suite[("expect_column_values_to_be_in_set", "cut")]["value_set"]
    manifest = _published_clean("diamonds", f"file://{tmp_path / 'data'}")
    assert sum(s.num_examples for s in manifest.splits.values()) == n


def test_null_tokens_in_numeric_columns_are_read_as_nulls(tmp_path, specs, capsys):
    """``nil``, ``?`` and ``-`` among numbers: numeric columns, the tokens as read.null_values
    with a comment naming where they were found; a text column's ``-`` stays a category
    unless a numeric column makes it a token. CSV and JSON lines read them the same way."""
    rows = [{"temp": "nil" if i % 17 == 0 else f"{10 + i % 7}.5",
             "wind": "?" if i % 23 == 0 else ("-" if i % 29 == 0 else str(i % 9)),
             "site": "north" if i % 2 else "south", "y": str(i % 2)} for i in range(300)]
    for fmt in ("csv", "jsonl"):
        path = tmp_path / "raw" / f"w.{fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(rows)
        if fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_json(path, orient="records", lines=True)
        name = f"weather_{fmt}"
        out = _init(capsys, "--name", name, "--source", str(path), "--label", "y")
        spec = yaml.safe_load((specs / name / "spec.yaml").read_text())
        source = spec["sources"][name]
        assert source["columns"]["temp"] == "float64" and source["columns"]["wind"] == "int64"
        assert {"nil", "?", "-"} <= set(source["read"]["null_values"])
        text = (specs / name / "spec.yaml").read_text()
        assert "null_values:  # null tokens found: 'nil' in temp (18 rows); '-', '?' in wind" \
               in text, text
        assert "null tokens found" in out
        suite = _suite(specs, name)
        assert ("expect_column_values_to_not_be_null", "temp") not in suite
        assert ("expect_column_values_to_not_be_null", "site") in suite
        _published_clean(name, f"file://{tmp_path / 'data'}")


def test_an_arbitrary_word_in_a_numeric_column_is_not_a_null_token(tmp_path, specs, capsys):
    path = tmp_path / "t.csv"
    path.write_text("x,y\n" + "".join(f"{i},{i % 2}\n" for i in range(50)) + "broken,1\n")
    _init(capsys, "--name", "t", "--source", str(path), "--label", "y")
    spec = yaml.safe_load((specs / "t" / "spec.yaml").read_text())
    assert spec["sources"]["t"]["columns"]["x"] == "string"
    assert "broken" not in spec["sources"]["t"]["read"]["null_values"]


def _partitioned(root: Path, granularity: str, missing: set[int], periods: int) -> str:
    """One file per period, some missing; readings every 20 minutes (a repeated timestamp
    in period 2 with the same label, so neither it nor (ts, y) is a key)."""
    step = timedelta(hours=1) if granularity == "hour" else timedelta(days=1)
    fmt, key = ("%Y-%m-%dT%H", "hour") if granularity == "hour" else ("%Y-%m-%d", "date")
    start = datetime(2024, 3, 1)
    for p in range(periods):
        if p in missing:
            continue
        t0 = start + p * step
        times = [t0 + timedelta(minutes=20 * i) for i in range(3)] + ([t0] if p == 2 else [])
        folder = root / "raw" / "feed" / f"{key}={t0:{fmt}}"
        folder.mkdir(parents=True)
        pd.DataFrame({"ts": [t.strftime("%Y-%m-%dT%H:%M:%S") for t in times],
                      "level": [f"{(p * 3 + i) % 11}.25" for i in range(len(times))],
                      "y": [(p + i % 3) % 2 for i in range(len(times))]}
                     ).to_csv(folder / "feed.csv", index=False)
    return f"raw/feed/{key}={{{key}}}/feed.csv"


@pytest.mark.parametrize("granularity, periods, missing", [
    ("hour", 48, {5, 6, 30}), ("day", 20, {3, 11})])
def test_partitions_with_gaps_draft_require_complete_false(tmp_path, specs, capsys,
                                                           granularity, periods, missing):
    source = _partitioned(tmp_path / "data", granularity, missing, periods)
    root = f"file://{tmp_path / 'data'}"
    out = _init(capsys, "--name", "feed", "--root", root, "--source", source, "--label", "y")
    unit = "hourly" if granularity == "hour" else "daily"
    assert f"{len(missing)} of {periods} {unit} partitions missing between" in out
    assert f"profiled all {(periods - len(missing)) * 3 + 1:,} rows of " \
           f"{periods - len(missing)} files" in out
    spec = yaml.safe_load((specs / "feed" / "spec.yaml").read_text())
    part = spec["sources"]["feed"]["partitioning"]
    assert part["require_complete"] is False and part["granularity"] == granularity
    assert spec["sources"]["feed"]["event_time"] == "ts"
    assert spec["split"]["by"] == "row"  # the repeated timestamp: no key
    assert "expect_column_values_to_be_unique" not in {t for t, _ in _suite(specs, "feed")}
    assert "key: none drafted" in out
    end = "2024-03-03" if granularity == "hour" else "2024-03-21"
    _published_clean("feed", root, end)


def test_over_the_budget_a_sample_is_spread_across_all_files(tmp_path, specs, capsys):
    """A tiny budget: blocks from files everywhere in the listing, not the newest; no key is
    claimed from a sample, and the sampled draft still publishes."""
    root = tmp_path / "data"
    for day in range(30):
        folder = root / "raw" / "s" / f"date=2024-01-{day + 1:02d}"
        folder.mkdir(parents=True)
        pd.DataFrame({"ts": [f"2024-01-{day + 1:02d}T{h:02d}:00:00" for h in range(24)],
                      "id": [day * 24 + h for h in range(24)], "v": [day] * 24}
                     ).to_csv(folder / "s.csv", index=False)
    files, _ = matching_files(f"file://{root}/raw/s/date={{date}}/s.csv")
    budget = sum(f.size for f in files) // 4
    pieces = plan(files, "csv", budget)
    days = sorted({files.index(p.file) for p in pieces})
    assert days[0] < 10 and days[-1] >= 20 and len(days) < len(files)
    found = scan(files, "csv", budget)
    assert not found.full and found.describe().startswith(f"sampled {found.table.rows:,} rows "
                                                          f"across {len(days)} of 30 files")
    out = _init(capsys, "--name", "s", "--source", "raw/s/date={date}/s.csv", "--root",
                f"file://{root}", "--label", "v", "--task", "regression",
                "--budget-mib", str(budget / 2**20))
    assert "rows were sampled, so no key can be claimed" in out and "Read: sampled" in out
    result = pipeline.run("s", f"file://{root}", "2024-01-31", run_id="drafted")
    assert result.created and sum(result.splits.values()) == 30 * 24


def test_a_header_only_partition_drafts_require_complete_false(tmp_path, specs, capsys):
    root = tmp_path / "data"
    for day in range(1, 4):
        folder = root / "raw" / "h" / f"date=2024-01-0{day}"
        folder.mkdir(parents=True)
        rows = "" if day == 2 else "".join(f"2024-01-0{day}T{h:02d}:00:00,{h % 2}\n"
                                           for h in range(24))
        (folder / "h.csv").write_text("ts,y\n" + rows)
    out = _init(capsys, "--name", "h", "--source", "raw/h/date={date}/h.csv", "--root",
                f"file://{root}", "--label", "y")
    assert "require_complete: false (1 file(s) hold a header only)" in out
    _published_clean("h", f"file://{root}", "2024-01-04")


def test_partial_profiles_merge_as_if_profiled_together() -> None:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x": [f"{v:.2f}" for v in rng.normal(size=400)],
                          "c": rng.choice(list("abc"), 400)}).astype("string[pyarrow]")
    whole = profile_frame(frame, Origin.one("f", 400), seed=0)
    halves = merge(profile_frame(frame[:150], Origin.one("f", 150), seed=0),
                   profile_frame(frame[150:], Origin.one("g", 250), seed=1))
    for col in ("x", "c"):
        a, b = whole.columns[col], halves.columns[col]
        assert (a.rows, a.nulls, a.numbers, a.low, a.high, a.values) == \
               (b.rows, b.nulls, b.numbers, b.low, b.high, b.values)
        assert np.array_equal(a.sketch, b.sketch)


def test_messy_headers_get_identifiers_and_keep_their_source(tmp_path, specs, capsys):
    path = tmp_path / "orders.csv"
    cols = ["Ship Mode", "Sub-Category", "Postal Code", "unit.price", "2nd", "Größe", "class",
            "Sales", "sales"]
    rows = [["First", "Chairs", "10001", "2.5", "1", "3", "A", "10.5", "7"],
            ["Second", "Tables", "10002", "3.5", "0", "4", "B", "11.5", "8"]] * 60
    pd.DataFrame(rows, columns=cols).to_csv(path, index=False)
    out = _init(capsys, "--name", "orders", "--source", str(path), "--label", "Sub-Category",
                "--task", "multiclass")
    assert "not an identifier" not in out
    spec = yaml.safe_load((specs / "orders" / "spec.yaml").read_text())
    columns = spec["sources"]["orders"]["columns"]
    assert columns["ship_mode"] == {"type": "string", "source": "Ship Mode"}
    assert columns["unit_price"] == {"type": "float64", "source": "unit.price"}
    assert columns["c_2nd"] == {"type": "int64", "source": "2nd"}
    assert columns["grosse"] == {"type": "int64", "source": "Größe"}
    assert columns["class_"] == {"type": "string", "source": "class"}
    assert columns["sales"] == {"type": "float64", "source": "Sales"}
    assert columns["sales_2"] == {"type": "int64", "source": "sales"}
    assert spec["label"]["source"] == "sub_category"
    assert "Größe" in (specs / "orders" / "spec.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_draft_with_messy_headers_publishes(tmp_path, specs, capsys, fmt) -> None:
    """End to end: the draft's identifiers and sources read by the ETL, a null token in a
    column whose header is no identifier, every format."""
    cols = ["Ship Mode", "Sub-Category", "unit.price", "2nd", "Größe", "class", "Sales", "sales"]
    rows = [["First", "Chairs", "2.5", "1", "nil", "A", "10.5", "7"],
            ["Second", "Tables", "3.5", "0", "4", "B", "11.5", "8"]] * 60
    path = tmp_path / f"orders.{fmt}"
    frame = pd.DataFrame(rows, columns=cols)
    {"csv": lambda: frame.to_csv(path, index=False), "parquet": lambda: frame.to_parquet(path),
     "jsonl": lambda: frame.to_json(path, orient="records", lines=True)}[fmt]()
    _init(capsys, "--name", "orders", "--source", str(path), "--label", "Sub-Category",
          "--task", "multiclass")
    assert main(["spec", "check", "orders"]) == 0, capsys.readouterr().out
    manifest = _published_clean("orders", f"file://{tmp_path / 'data'}")
    assert {"ship_mode", "unit_price", "c_2nd", "grosse", "class_", "sales", "sales_2"} \
        <= set(manifest.schema.features)


def test_a_small_multiclass_table_drafts_wider_held_out_splits(tmp_path, specs, capsys):
    sizes = {"a": 70, "b": 76, "c": 17, "d": 13, "e": 9, "f": 29}
    labels = [k for k, n in sizes.items() for _ in range(n)]
    path = tmp_path / "glass.csv"
    pd.DataFrame({"ri": [f"1.5{i:03d}" for i in range(len(labels))], "kind": labels}
                 ).to_csv(path, index=False)
    out = _init(capsys, "--name", "glass", "--source", str(path), "--label", "kind",
                "--task", "multiclass")
    assert "smallest class 'e' with 9: 60%/20%/20%" in out
    spec = yaml.safe_load((specs / "glass" / "spec.yaml").read_text())
    assert spec["split"]["fractions"] == {"train": 0.6, "eval": 0.2, "test": 0.2}
    _published_clean("glass", f"file://{tmp_path / 'data'}")


def _dated(path: Path, times: pd.DatetimeIndex, label: np.ndarray) -> None:
    rng = np.random.default_rng(5)
    pd.DataFrame({"when": times.strftime("%Y-%m-%dT%H:%M:%S" if times.hour.any()
                                         else "%Y-%m-%d"),
                  "temp": rng.normal(10, 3, len(times)).round(2),
                  "visits": label}).to_csv(path, index=False)


def test_a_daily_table_gets_the_day_of_the_week_and_whole_float_classes(tmp_path, specs,
                                                                         capsys) -> None:
    """105 days whose label is written ``1.0``/``2.0``/``3.0``: the draft infers multiclass,
    derives the weekday from the date (no hour of day: the values are dates), gives eval and
    test a quarter each, and the run reads the floats as classes ``1``, ``2``, ``3``."""
    days = pd.date_range("2024-01-01", periods=105, freq="D")
    path = tmp_path / "daily.csv"
    _dated(path, days, np.array([f"{1 + d % 3}.0" for d in range(105)]))
    out = _init(capsys, "--name", "daily", "--source", str(path), "--label", "visits")
    assert "task: multiclass, since 'visits' holds 3 whole numbers" in out, out
    assert "when_day_of_week" in out and "dates (daily)" in out
    spec = yaml.safe_load((specs / "daily" / "spec.yaml").read_text())
    assert spec["sources"]["daily"]["columns"]["visits"] == "float64"
    derived = {f["name"]: f["derive"] for f in spec["features"] if "derive" in f}
    assert derived["when_day_of_week"] == {"op": "day_of_week", "columns": ["when"]}
    assert "when_hour_of_day" not in derived
    assert spec["split"]["fractions"] == {"train": 0.5, "eval": 0.25, "test": 0.25}
    manifest = _published_clean("daily", f"file://{tmp_path / 'data'}")
    assert manifest.schema.label.names == ("1", "2", "3")
    for split in ("eval", "test"):  # a quarter of 105 rows, within a row or two
        assert manifest.splits[split].num_examples >= 22, manifest.splits
    weekday = manifest.statistics.numeric["when_day_of_week"]
    assert weekday.min == 0.0 and weekday.max == 6.0  # Monday 0 .. Sunday 6


def test_an_hourly_table_gets_the_hour_of_the_day(tmp_path, specs, capsys) -> None:
    hours = pd.date_range("2024-03-01", periods=300, freq="h")
    path = tmp_path / "hourly.csv"
    _dated(path, hours, np.arange(300) % 7 * 1.5)
    out = _init(capsys, "--name", "hourly", "--source", str(path), "--label", "visits")
    assert "task: regression, since 'visits' holds 7 numeric values" in out, out
    spec = yaml.safe_load((specs / "hourly" / "spec.yaml").read_text())
    derived = {f["name"]: f["derive"]["op"] for f in spec["features"] if "derive" in f}
    assert derived == {"when_year": "year", "when_day_of_year": "day_of_year",
                       "when_day_of_week": "day_of_week", "when_hour_of_day": "hour_of_day"}
    manifest = _published_clean("hourly", f"file://{tmp_path / 'data'}")
    hour = manifest.statistics.numeric["when_hour_of_day"]
    assert hour.min == 0.0 and hour.max == 23.0


def test_a_monthly_table_gets_no_day_of_the_week(tmp_path, specs, capsys) -> None:
    months = pd.date_range("2010-01-01", periods=120, freq="MS")
    path = tmp_path / "monthly.csv"
    _dated(path, months, np.arange(120) % 2)
    out = _init(capsys, "--name", "monthly", "--source", str(path), "--label", "visits")
    assert "task: binary, since 'visits' holds two values" in out
    spec = yaml.safe_load((specs / "monthly" / "spec.yaml").read_text())
    assert spec["label"]["positive"] == 1  # it spells 1
    assert {f["name"] for f in spec["features"] if "derive" in f} == {"when_year",
                                                                        "when_day_of_year"}


def test_months_written_as_text_are_timestamps(tmp_path, specs, capsys) -> None:
    """R writes a year-month as ``1939 Jan``: drafted as a monthly timestamp in that format
    (year and day of year derived), not as a category of 120 values."""
    months = pd.date_range("1939-01-01", periods=120, freq="MS")
    path = tmp_path / "employment.csv"
    rng = np.random.default_rng(3)
    pd.DataFrame({"Month": months.strftime("%Y %b"), "Series": rng.choice(["a", "b"], 120),
                  "Employed": np.arange(120) * 10 + rng.integers(0, 5, 120)}).to_csv(
        path, index=False)
    out = _init(capsys, "--name", "employment", "--source", str(path), "--label", "Employed",
                "--task", "regression")
    assert "timestamps like '%Y %b'" in out, out
    spec = yaml.safe_load((specs / "employment" / "spec.yaml").read_text())
    declared = spec["sources"]["employment"]["columns"]["month"]
    assert declared == {"type": "timestamp", "format": "%Y %b", "source": "Month"}
    assert {f["name"] for f in spec["features"] if "derive" in f} == {"month_year",
                                                                        "month_day_of_year"}
    manifest = _published_clean("employment", f"file://{tmp_path / 'data'}")
    year = manifest.statistics.numeric["month_year"]
    assert year.min == 1939.0 and year.max == 1948.0
