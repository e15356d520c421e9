"""Reading a window on a few real days: one listing, pruning, joins, strings kept raw, clear
read errors, and the Dask scheduler a build runs on."""

from __future__ import annotations

import dataclasses
import os
import shutil
from datetime import UTC, date, datetime
from pathlib import Path

import pandas as pd
import pytest

from etl import storage
from etl.sources import extract, read
from etl.sources.land import land
from etl.sources.lookups import join_lookups, read_lookups
from etl.spec import load_spec
from etl.storage import listing as listing_mod


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("landed")
    land(f"file://{path}", "flights", start=date(2013, 1, 1), end=date(2013, 1, 4))
    return path


@pytest.fixture()
def root(landed: Path, tmp_path: Path) -> str:
    """A private copy of three landed days (tests edit raw files)."""
    shutil.copytree(landed / "raw", tmp_path / "raw")
    return f"file://{tmp_path}"


def _upstream_day_count(root: str, day: str) -> int:
    path = root[len("file://"):] + f"/raw/flights/date={day}/flights.csv"
    return len(Path(path).read_text().splitlines()) - 1


def _joined(root: str, uris: list[str]) -> pd.DataFrame:
    """The files' rows with the lookups joined, as a segment build reads them."""
    spec = load_spec("flights")
    rights, _, _ = read_lookups(root, spec)
    return join_lookups(extract.read_files(uris, spec.primary_source)[0], spec, rights)


def test_window_reads_only_its_files_and_joins(root: str) -> None:
    spec = load_spec("flights")
    uris = extract.window_files(root, spec.primary_source, datetime(2013, 1, 2, tzinfo=UTC),
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


def test_window_listing_gives_sizes_from_one_listing(root: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each partition's file with its size (and local mtime), from one glob of the source."""
    lists = _count_lists(monkeypatch)
    listing = extract.window_listing(root, load_spec("flights").primary_source, None,
                                     datetime(2013, 1, 4, tzinfo=UTC))
    assert [p.day for p, _ in listing] == [1, 2, 3] and lists == [1]
    for period, info in listing:
        path = Path(root[7:]) / f"raw/flights/date={period:%Y-%m-%d}/flights.csv"
        assert info["uri"].endswith(str(path)) and info["size"] == path.stat().st_size
        assert info["mtime"]


def _count_lists(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list counting the storage listings made from now on."""
    calls = [0]
    real = listing_mod.retry_remote

    def counted(uri, what, fn, *args, **kwargs):
        calls[0] += what == "list"
        return real(uri, what, fn, *args, **kwargs)

    monkeypatch.setattr(listing_mod, "retry_remote", counted)
    return calls


@pytest.mark.integration
def test_window_listing_on_gcs_gives_sizes_and_generations(
        gcs_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On GCS the listing carries size and generation: no metadata read per file."""
    source = load_spec("flights").primary_source
    bodies = {day: f"time_hour\n2013-01-0{day}T10:00:00Z\n".encode() * day for day in (1, 2)}
    for day, body in bodies.items():
        storage.write_bytes_atomic(
            f"{gcs_root}/raw/flights/date=2013-01-0{day}/flights.csv", body)
    lists = _count_lists(monkeypatch)

    def no_stat(uri: str):
        raise AssertionError(f"stat({uri}) while listing")

    monkeypatch.setattr(listing_mod, "stat", no_stat)
    listing = extract.window_listing(gcs_root, source, None, datetime(2013, 1, 3, tzinfo=UTC))
    assert lists == [1] and [p.day for p, _ in listing] == [1, 2]
    for (period, info), (day, body) in zip(listing, sorted(bodies.items())):
        assert info["uri"] == f"{gcs_root}/raw/flights/date=2013-01-0{day}/flights.csv"
        assert info["size"] == len(body)
        assert info["generation"] and info["generation"] != "None"


def test_unbounded_window_lists_every_day_and_rows_are_cut_on_event_time(root: str) -> None:
    """A window ending at noon keeps the third day's rows before noon (its segment holds the
    clipped day) and every row of the days before."""
    from etl import pipeline, versions

    spec = load_spec("flights")
    end = datetime(2013, 1, 3, 12, tzinfo=UTC)
    uris = extract.window_files(root, spec.primary_source, None, end)
    assert len(uris) == 3
    ts = pd.to_datetime(extract.read_files(uris, spec.primary_source)[0]["time_hour"], utc=True)
    before = int((ts < pd.Timestamp(end)).sum())
    on_day3 = int((ts[ts < pd.Timestamp(end)] >= pd.Timestamp("2013-01-03", tz="UTC")).sum())
    assert 0 < on_day3 < _upstream_day_count(root, "2013-01-03")
    result = pipeline.run("flights", root, end, run_id="noon")
    manifest = versions.read_manifest(result["version_uri"])
    assert manifest.verdict.evaluated_rows == before
    assert manifest.verdict.quarantined_rows == 0  # cut rows are not misfiled


def test_missing_partition_is_named(root: str) -> None:
    os.remove(root[7:] + "/raw/flights/date=2013-01-02/flights.csv")
    os.rmdir(root[7:] + "/raw/flights/date=2013-01-02")
    with pytest.raises(extract.SourceFilesError, match="missing.*2013-01-02"):
        extract.window_files(root, load_spec("flights").primary_source, None,
                             datetime(2013, 1, 4, tzinfo=UTC))
    with pytest.raises(extract.SourceFilesError, match="2013-01-02"):
        extract.window_files(root, load_spec("flights").primary_source,
                             datetime(2013, 1, 1, tzinfo=UTC), datetime(2013, 1, 3, tzinfo=UTC))


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
    df = _joined(root, extract.window_files(root, spec.primary_source, None,
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


def test_groups_follow_sizes() -> None:
    """How segment builds are batched into Dask tasks (etl.segments.build.batches)."""
    sizes = [5, 5, 5, 20, 1, 1]
    assert extract.group_by_size(range(6), sizes.__getitem__, 10) == [[0, 1], [2, 3], [4, 5]]
    assert extract.group_by_size(range(6), sizes.__getitem__, 10**9) == [list(range(6))]


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
