"""etl.kinds.tabular.read: a segment's rows on a few real days -- pruned to the window, joined,
strings kept raw, clear read errors, the Dask scheduler a build runs on --; the reader finds
columns by their file headers and names them by identifier, in every format and for lookup
sources too (a missing header refused naming the file, the header and the column that reads
it); timestamp columns with a declared format parsed to ISO text, a bad value named by file,
row and column, a bad declaration refused."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, date, datetime
from pathlib import Path

import pandas as pd
import pytest
import yaml

from etl.authoring.columns import ColumnProfile, column_profiles, null_tokens
from etl.authoring.profile import Origin, profile_frame
from etl.kinds.landing import LandOptions
from etl.kinds.tabular import read
from etl.kinds.tabular.land import land
from etl.kinds.tabular.read import (
    SourceReadError,
    join_lookups,
    parse_timestamps,
    read_lookups,
    read_source_file,
)
from etl.segments import plan
from etl.spec import Source, SpecError, load_spec
from etl.spec.model import column_type


def _three_days(path: Path) -> Path:
    """Flights of 2013-01-01 .. 01-03 landed under ``path``."""
    land(path.as_uri(), "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 4)))
    return path


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _three_days(tmp_path_factory.mktemp("landed"))


@pytest.fixture()
def root(landed: Path, tmp_path: Path) -> str:
    """A private copy of three landed days (tests edit raw files)."""
    return shutil.copytree(landed / "raw", tmp_path / "raw").parent.as_uri()


def _upstream_day_count(root: str, day: str) -> int:
    path = root[len("file://"):] + f"/raw/flights/date={day}/flights.csv"
    return len(Path(path).read_text().splitlines()) - 1


def _joined(root: str, uris: list[str]) -> pd.DataFrame:
    """The files' rows with the lookups joined, as a segment build reads them."""
    spec = load_spec("flights")
    rights, _, _ = read_lookups(root, spec)
    return join_lookups(read.read_files(uris, spec.primary_source)[0], spec, rights)


def test_window_reads_only_its_files_and_joins(root: str) -> None:
    spec = load_spec("flights")
    uris = plan.window_files(root, spec.primary_source, datetime(2013, 1, 2, tzinfo=UTC),
                                datetime(2013, 1, 3, tzinfo=UTC))
    assert [u.rsplit("/raw/", 1)[1] for u in uris] == ["flights/date=2013-01-02/flights.csv"]
    df = _joined(root, uris)
    assert list(df.columns) == list(spec.column_types())
    assert all(pd.api.types.is_string_dtype(t) for t in df.dtypes)  # raw text, typed later
    assert len(df) == _upstream_day_count(root, "2013-01-02")
    assert df["time_hour"].str.startswith("2013-01-02T").all()
    assert df["temp"].notna().mean() > 0.95 and df["plane_year"].notna().mean() > 0.8
    assert not df.duplicated(list(spec.key)).any()
    # a flight's weather is its origin's at the scheduled hour
    row = df[(df.origin == "EWR") & (df.time_hour == "2013-01-02T15:00:00Z")].iloc[0]
    weather = pd.read_csv(root[7:] + "/raw/weather/weather.csv", dtype=str)
    match = weather[(weather.origin == "EWR") & (weather.time_hour == "2013-01-02T15:00:00Z")]
    assert row["temp"] == match["temp"].iloc[0]


def test_unbounded_window_lists_every_day_and_rows_are_cut_on_event_time(root: str) -> None:
    """A window ending at noon keeps the third day's rows before noon (its segment holds the
    clipped day) and every row of the days before."""
    from etl import pipeline, versions

    spec = load_spec("flights")
    end = datetime(2013, 1, 3, 12, tzinfo=UTC)
    uris = plan.window_files(root, spec.primary_source, None, end)
    assert len(uris) == 3
    ts = pd.to_datetime(read.read_files(uris, spec.primary_source)[0]["time_hour"], utc=True)
    before = int((ts < pd.Timestamp(end)).sum())
    on_day3 = int((ts[ts < pd.Timestamp(end)] >= pd.Timestamp("2013-01-03", tz="UTC")).sum())
    assert 0 < on_day3 < _upstream_day_count(root, "2013-01-03")
    result = pipeline.run("flights", root, end, run_id="noon")
    manifest = versions.read_manifest(result.version_uri)
    assert manifest.verdict.evaluated_rows == before
    assert manifest.verdict.quarantined_rows == 0  # cut rows are not misfiled


def _edit_day(root: str, day: str, fn) -> str:
    path = root[7:] + f"/raw/flights/date={day}/flights.csv"
    lines = Path(path).read_text().splitlines(keepends=True)
    Path(path).write_text("".join(fn(lines)))
    return path


def test_type_change_reaches_validation_as_text(root: str) -> None:
    def bad_distance(lines: list[str]) -> list[str]:
        cells = lines[5].split(",")
        cells[15] = "12a"
        return lines[:5] + [",".join(cells)] + lines[6:]

    _edit_day(root, "2013-01-02", bad_distance)
    spec = load_spec("flights")
    df = _joined(root, plan.window_files(root, spec.primary_source, None,
                                            datetime(2013, 1, 4, tzinfo=UTC)))
    assert (df["distance"] == "12a").sum() == 1


@pytest.mark.parametrize("edit, message", [
    (lambda ls: [ls[0].replace(",distance,", ",dist,")] + ls[1:],
     r"missing column\(s\) \['distance'\].*renamed\? 'distance' -> 'dist'"),
    (lambda ls: ls[:3] + [ls[3].rstrip() + ",extra\n"] + ls[4:], r"malformed row.*row \d+"),
    (lambda ls: [], "empty file"),
    (lambda ls: [ls[0], ls[1].replace("EWR", "\udcff", 1)], None),
])
def test_bad_files_fail_naming_the_file(client, root: str, edit, message) -> None:
    if message is None:  # invalid UTF-8 bytes
        path = root[7:] + "/raw/flights/date=2013-01-02/flights.csv"
        with open(path, "ab") as f:
            f.write(b"2013,1,2,1,1,1,1,1,1,UA,1,N1,\xffWR,IAH,1,1,1,1,2013-01-02T10:00:00Z\n")
        message = "invalid UTF8"
    else:
        path = _edit_day(root, "2013-01-02", edit)
    spec = load_spec("flights")
    with pytest.raises(read.SourceReadError, match=message) as info:
        read.read_source_file(f"file://{path}", spec.primary_source)
    assert "date=2013-01-02/flights.csv" in str(info.value)


def test_parquet_and_jsonl_give_the_same_strings(root: str, tmp_path: Path) -> None:
    spec = load_spec("flights")
    src = spec.primary_source
    csv_uri = f"{root}/raw/flights/date=2013-01-02/flights.csv"
    expected = read.read_source_file(csv_uri, src)
    typed = pd.read_csv(csv_uri[7:], na_values=["NA"], keep_default_na=False)
    typed["time_hour"] = pd.to_datetime(typed["time_hour"], utc=True)
    typed.to_parquet(tmp_path / "f.parquet")
    typed.drop(columns=["time_hour"]).assign(time_hour=expected["time_hour"]).to_json(
        tmp_path / "f.jsonl", orient="records", lines=True)
    for fmt, name in (("parquet", "f.parquet"), ("jsonl", "f.jsonl")):
        got = read.read_source_file(f"file://{tmp_path}/{name}",
                                       dataclasses.replace(src, format=fmt))
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_runs_on_the_configured_dask_scheduler(client, root: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """PIPELINE_DASK_ADDRESS (or a per-run address) wins over the client already active:
    the segment builds run on that scheduler."""
    from distributed import LocalCluster, default_client

    from etl import pipeline

    def remote() -> LocalCluster:
        return LocalCluster(n_workers=1, processes=False, protocol="tcp", dashboard_address=None)

    with remote() as cluster:
        monkeypatch.setenv("PIPELINE_DASK_ADDRESS", cluster.scheduler_address)
        pipeline.build_version("flights", root, "2013-01-02", run_id="env")
        assert cluster.scheduler.task_prefixes  # the one new segment was built there
    with remote() as cluster:
        monkeypatch.setenv("PIPELINE_DASK_ADDRESS", "tcp://127.0.0.1:9")  # nobody listens
        options = pipeline.RunOptions(dask_address=cluster.scheduler_address)
        pipeline.build_version("flights", root, "2013-01-03", "2013-01-02", run_id="arg",
                               options=options)
        assert cluster.scheduler.task_prefixes
    assert default_client() is client  # the step's client is closed, the active one restored


HEADERS = {"ship_mode": "Ship Mode", "postal_code": "Postal.Code", "score": "2nd score",
           "groesse": "Größe", "shipped": "Ship Date"}
ROWS = pd.DataFrame({"Ship Mode": ["First Class", "Same Day"], "Postal.Code": ["02134", "10001"],
                     "2nd score": [1.5, None], "Größe": [3, 4], "class": ["A", "B"],
                     "Price": [10.5, 20.25], "price": [1.5, 2.5],
                     "Ship Date": ["31.12.2024", "01.01.2025"], "unused col": ["x", "y"]})


def _source(path: Path, fmt: str, **headers: str) -> Source:
    columns = {c: "string" for c in (*HEADERS, "class", "Price", "price")}
    columns["shipped"] = "timestamp"
    return Source(name="orders", uri=path.as_uri(), format=fmt, columns=columns,
                  headers={**HEADERS, **headers}, time_formats={"shipped": "%d.%m.%Y"})


_WRITERS = {"csv": lambda path: ROWS.to_csv(path, index=False),
            "parquet": lambda path: ROWS.to_parquet(path, index=False),
            "jsonl": lambda path: ROWS.to_json(path, orient="records", lines=True,
                                               force_ascii=False)}


def _write(tmp_path: Path, fmt: str) -> Path:
    """The orders table as a file of ``fmt``."""
    path = tmp_path / f"orders.{fmt}"
    _WRITERS[fmt](path)
    return path


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_columns_come_out_by_identifier(tmp_path: Path, fmt: str) -> None:
    source = _source(_write(tmp_path, fmt), fmt)
    df = read_source_file(source.uri, source)
    assert list(df.columns) == list(source.columns)  # identifiers, in spec order
    assert df["ship_mode"].tolist() == ["First Class", "Same Day"]
    assert df["postal_code"].tolist() == ["02134", "10001"]  # text as the file holds it
    assert df["score"].tolist()[0] == "1.5" and pd.isna(df["score"].tolist()[1])
    assert df["groesse"].tolist() == ["3", "4"]
    assert df["Price"].tolist() == ["10.5", "20.25"] and df["price"].tolist() == ["1.5", "2.5"]
    assert df["shipped"].tolist() == ["2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z"]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_a_missing_header_names_file_header_and_column(tmp_path: Path, fmt: str) -> None:
    source = _source(_write(tmp_path, fmt), fmt, ship_mode="Ship mode")
    with pytest.raises(SourceReadError) as info:
        read_source_file(source.uri, source)
    msg = str(info.value)
    assert msg.startswith(f"{source.uri}: missing column(s) ['Ship mode'] ('Ship mode' read as "
                          f"column 'ship_mode')"), msg
    assert "renamed? 'Ship mode' -> 'Ship Mode'" in msg


def test_a_quoted_csv_header_is_listed_as_the_reader_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('"Ship Mode","Postal, Code"\nA,1\n')
    source = Source(name="q", uri=path.as_uri(), format="csv",
                    columns={"ship_mode": "string", "postal_code": "string"},
                    headers={"ship_mode": "Ship Mode", "postal_code": "Postal Code"})
    with pytest.raises(SourceReadError, match=r"found \['Ship Mode', 'Postal, Code'\]"):
        read_source_file(source.uri, source)


def test_a_bad_timestamp_names_the_column_and_its_header(tmp_path: Path) -> None:
    path = _write(tmp_path, "csv")
    path.write_text(path.read_text(encoding="utf-8").replace("01.01.2025", "2025-01-01"),
                    encoding="utf-8")
    source = _source(path, "csv")
    with pytest.raises(SourceReadError, match=r"row 2, column 'shipped' \(header 'Ship Date'\): "
                       r"'2025-01-01' does not parse as a timestamp in format '%d.%m.%Y'"):
        read_source_file(source.uri, source)


def profile_column(name: str, values: pd.Series) -> ColumnProfile:
    """One column of text values profiled on its own, as ``spec init`` profiles a table."""
    frame = pd.DataFrame({name: values.astype("string[pyarrow]")})
    table = profile_frame(frame, Origin.one("", len(frame)), seed=0)
    return column_profiles(table, {name: name}, null_tokens(table))[name]


def _timed_source(path: Path, fmt: str) -> Source:
    return Source(name="s", uri=path.as_uri(), format="csv",
                  columns={"day": "timestamp", "v": "int64"}, time_formats={"day": fmt})


def test_formats_are_read_as_iso_text(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("day,v\n2012/01/31,1\n,2\n")
    got = read_source_file(path.as_uri(), _timed_source(path, "%Y/%m/%d"))
    assert got["day"].tolist()[0] == "2012-01-31T00:00:00Z" and pd.isna(got["day"].iloc[1])
    epoch = parse_timestamps(pd.Series(["1325376000", None]), "epoch_s")
    assert str(epoch.iloc[0]) == "2012-01-01 00:00:00+00:00" and pd.isna(epoch.iloc[1])


def test_a_value_that_does_not_parse_names_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("day,v\n2012/01/31,1\n2012/02/30,2\n2012-03-01,3\n")
    with pytest.raises(SourceReadError) as err:
        read_source_file(path.as_uri(), _timed_source(path, "%Y/%m/%d"))
    assert str(err.value).startswith(f"{path.as_uri()}: row 2, column 'day': '2012/02/30'")
    assert "'%Y/%m/%d' (2 such value(s))" in str(err.value)


def test_declarations_are_checked_and_inferred() -> None:
    assert column_type({"type": "timestamp", "format": "epoch_s"}, "w") == ("timestamp", "epoch_s")
    with pytest.raises(SpecError, match=r"w.format: only a timestamp column takes a format"):
        column_type({"type": "int64", "format": "%Y"}, "w")
    with pytest.raises(SpecError, match="expected strftime codes"):
        column_type({"type": "timestamp", "format": "YYYY"}, "w")
    prof = profile_column("d", pd.Series(["2012/01/01", "2012/12/31", None]))
    assert prof.type == "timestamp" and prof.time_format == "%Y/%m/%d"
    assert profile_column("c", pd.Series(["a1", "b2"])).time_format is None


def test_lookup_sources_join_by_identifier(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    pd.DataFrame({"Order ID": [1, 2, 3], "Region Code": ["n", "s", "x"]}).to_csv(
        tmp_path / "raw" / "orders.csv", index=False)
    pd.DataFrame({"Region Code": ["n", "s"], "Region Name": ["North", "South"]}).to_json(
        tmp_path / "raw" / "regions.jsonl", orient="records", lines=True)
    spec = {
        "name": "orders", "primary": "orders", "key": ["order_id"],
        "sources": {
            "orders": {"uri": "raw/orders.csv", "format": "csv", "columns": {
                "order_id": {"type": "int64", "source": "Order ID"},
                "region": {"type": "string", "source": "Region Code"}}},
            "regions": {"uri": "raw/regions.jsonl", "format": "jsonl", "columns": {
                "region": {"type": "string", "source": "Region Code"},
                "region_name": {"type": "string", "source": "Region Name"}}}},
        "joins": [{"source": "regions", "keys": ["region"], "columns": ["region_name"]}],
        "label": {"name": "late", "source": "order_id", "op": "gt", "value": 1},
        "features": [{"name": "region_name", "kind": "categorical"}],
        "split": {"fractions": {"train": 1.0}}, "expectations": "expectations.json"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    loaded = load_spec(tmp_path / "spec.yaml")
    root = tmp_path.as_uri()
    orders = loaded.primary_source
    rights, dropped, _ = read_lookups(root, loaded)
    left = read_source_file(f"{root}/{orders.uri}", orders)
    joined = join_lookups(left, loaded, rights)
    assert list(joined.columns) == ["order_id", "region", "region_name"]
    assert joined["region_name"].tolist()[:2] == ["North", "South"]
    assert pd.isna(joined["region_name"].tolist()[2]) and dropped == {"regions": 0}
