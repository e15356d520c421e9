"""etl.pipeline.chain: the whole ETL chain (build -> publish) on two real days -- publish
protocol, re-runs, failures, a killed writer, concurrency, GCS + CLI -- and the one line per
step an operator reads, for a validation and an image build."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from datetime import date
from pathlib import Path

import pytest

from etl import pipeline, storage, versions
from etl.errors import ValidationFailed, VersionLockedError
from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.pipeline import RunOptions, chain

END = "2013-01-03T00:00:00Z"
VERSION = "20130103T000000Z_all"
LEAKAGE = {"dep_time", "dep_delay", "arr_time", "air_time", "arr_delay"}
MANIFEST_KEYS = {"format_version", "dataset", "version", "data_interval", "created_at", "run_id",
                 "code_version", "compression", "splits", "schema", "statistics",
                 "source_fingerprint", "validation"}


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("landed")
    land(path.as_uri(), "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 3)))
    return path


@pytest.fixture()
def root(landed: Path, tmp_path: Path) -> str:
    shutil.copytree(landed / "raw", tmp_path / "raw")
    return tmp_path.as_uri()


def _flight_rows(root: str) -> tuple[int, int]:
    """(rows, rows with an arrival delay) of the landed days, counted from the raw text."""
    total = kept = 0
    for f in sorted(Path(root[7:], "raw/flights").glob("*/flights.csv")):
        for line in f.read_text().splitlines()[1:]:
            total += 1
            kept += line.split(",")[8] != "NA"
    return total, kept


def test_run_publishes_then_reports_then_force_reproduces(client, root: str) -> None:
    res = pipeline.run("flights", root, END, run_id="r1", shard_bytes=150_000)
    assert res.created and res.version == VERSION
    vuri = res.version_uri
    manifest = versions.read_manifest(vuri).to_json()
    assert MANIFEST_KEYS <= set(manifest)
    total, kept = _flight_rows(root)
    assert sum(res.splits.values()) == kept == manifest["statistics"]["num_examples"] + sum(
        manifest["splits"][s]["num_examples"] for s in ("eval", "test"))
    assert manifest["statistics"]["dropped_rows"] == {"cancelled (no arrival delay)":
                                                      total - kept}
    assert manifest["validation"]["success"] and manifest["validation"]["evaluated_rows"] == total
    assert len(manifest["splits"]["train"]["shards"]) > 1
    assert versions.verify_shards(vuri, versions.read_manifest(vuri)) == sum(
        len(s["shards"]) for s in manifest["splits"].values())
    assert not set(manifest["schema"]["features"]) & LEAKAGE
    files = [f["uri"] for f in manifest["source_fingerprint"]["files"]]
    assert files == ["raw/flights/date=2013-01-01/flights.csv",
                     "raw/flights/date=2013-01-02/flights.csv"]
    assert len(manifest["source_fingerprint"]["lookups_sha256"]) == 1  # weather and planes
    assert manifest["data_interval"] == {"start": None, "end": END}
    assert versions.latest_version(root, "flights") == VERSION
    names = set(storage.list_dir(vuri))
    assert names == {"manifest.json", "validation"}  # the shards live in the segments
    assert {"results.json", "index.html"} <= set(storage.list_dir(f"{vuri}/validation"))
    assert versions.WRITER_LOCK not in names  # the lease, with the draft inside, is gone
    assert storage.list_dir(f"{root}/staging") == []  # staging is gone after publish

    mtimes = {p.name: p.stat().st_mtime_ns for p in Path(vuri[7:]).iterdir()}
    again = pipeline.run("flights", root, END, run_id="r2", shard_bytes=150_000)
    assert not again.created and again.version_uri == vuri
    assert {p.name: p.stat().st_mtime_ns for p in Path(vuri[7:]).iterdir()} == mtimes

    forced = pipeline.run("flights", root, END, run_id="r3", shard_bytes=150_000, force=True)
    assert forced.created and forced.version == f"{VERSION}-r2"
    redo = versions.read_manifest(forced.version_uri).to_json()
    assert redo["splits"] == manifest["splits"]  # same files, records, bytes and sha256
    assert versions.list_versions(root, "flights") == [VERSION, f"{VERSION}-r2"]


def test_dag_steps_survive_a_killed_writer_and_retries(client, root: str) -> None:
    run_id = "scheduled__2013-01-03T00:00:00+00:00"
    version = "20130103T000000Z_20130102T000000Z"
    # a killed first attempt: its lock, a half shard and a temp file are still there
    vuri = versions.version_uri(root, "flights", version)
    versions.acquire_writer_lock(vuri, run_id)
    Path(vuri[7:], "flights-train.tfrecord-00000-of-00009").write_bytes(b"partial")
    Path(vuri[7:], ".flights-test.tfrecord-00000-of-00001.tmp-dead").write_bytes(b"x")
    with pytest.raises(VersionLockedError):  # another run cannot take it over meanwhile
        versions.acquire_writer_lock(vuri, "someone-else")
    written = pipeline.build_version("flights", root, "2013-01-03", "2013-01-02", run_id,
                                     RunOptions(mode="strict", compression="gzip"))
    assert written == vuri
    result = pipeline.publish(written)
    retried = pipeline.publish(written)  # a retried publish task
    assert result.created and not retried.created
    manifest = versions.read_manifest(vuri).to_json()
    assert {p.name for p in Path(vuri[7:]).iterdir()} == {"manifest.json", "validation"}
    shard_names = {s["file"] for v in manifest["splits"].values() for s in v["shards"]}
    assert all(n.endswith(".gz") for n in shard_names) and manifest["compression"] == "GZIP"
    versions.verify_shards(vuri, versions.read_manifest(vuri))
    assert manifest["data_interval"] == {"start": "2013-01-02T00:00:00Z", "end": END}
    first = manifest["source_fingerprint"]["files"][0]["uri"]
    assert first == "raw/flights/date=2013-01-02/flights.csv"


def test_failed_validation_publishes_nothing(client, root: str) -> None:
    day1 = Path(root[7:], "raw/flights/date=2013-01-01/flights.csv")
    dup = day1.read_text().splitlines(keepends=True)[1]
    day1.write_text(day1.read_text() + dup)  # the same flight twice (a key across segments:
    # tests/etl/segments/test_build.py; here a flight's key fixes its day, so it repeats in its file)
    with pytest.raises(ValidationFailed, match="expect_compound_columns_to_be_unique"):
        pipeline.run("flights", root, END, run_id="bad")
    assert versions.list_versions(root, "flights") == []
    vuri = versions.version_uri(root, "flights", VERSION)
    assert not storage.exists(storage.join(vuri, "manifest.json"))
    assert storage.exists(storage.join(vuri, "validation", "results.json"))  # the evidence
    assert not storage.exists(storage.join(vuri, versions.WRITER_LOCK))  # released


def test_rows_under_threshold_are_quarantined_with_the_version(client, root: str) -> None:
    day2 = Path(root[7:], "raw/flights/date=2013-01-02/flights.csv")
    lines = day2.read_text().splitlines(keepends=True)
    cells = lines[7].split(",")
    cells[8] = "9999"  # arr_delay far out of range, on 1 row of ~1,600 (mostly=0.999)
    day2.write_text("".join(lines[:7] + [",".join(cells)] + lines[8:]))
    res = pipeline.run("flights", root, END, run_id="q")
    manifest = versions.read_manifest(res.version_uri)
    assert manifest.verdict.quarantined_rows == 1
    assert sum(res.splits.values()) == _flight_rows(root)[1] - 1
    (listed,) = manifest.verdict.quarantine_files  # under the segment that holds it
    assert listed.startswith("segments/") and "/quarantine/" in listed
    assert storage.exists(f"{root}/datasets/flights/{listed}")
    assert storage.list_dir(f"{root}/staging") == []


def test_concurrent_runs_publish_one_version(client, root: str) -> None:
    results: dict[str, pipeline.PublishedVersion] = {}

    def go(run_id: str) -> None:
        results[run_id] = pipeline.run("flights", root, END, run_id=run_id)

    threads = [threading.Thread(target=go, args=(r,)) for r in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.created for r in results.values()) == [False, True]
    assert {r.version_uri for r in results.values()} == {
        versions.version_uri(root, "flights", VERSION)}
    assert versions.list_versions(root, "flights") == [VERSION]
    assert storage.list_dir(f"{root}/datasets/flights") == [VERSION, "LATEST", "segments"]
    assert len(storage.list_dir(f"{root}/datasets/flights/segments")) == 1  # built once


@pytest.mark.integration
def test_cli_run_on_gcs(client, gcs_root: str, capsys: pytest.CaptureFixture) -> None:
    """The command line end to end on a real GCS JSON-API server; workers write the shards."""
    from etl.__main__ import main

    land(gcs_root, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 2)))
    assert main(["run", "--root", gcs_root, "--interval-end", "2013-01-02",
                 "--shard-bytes", "200000"]) == 0
    out = capsys.readouterr().out
    vuri = f"{gcs_root}/datasets/flights/20130102T000000Z_all"
    assert f"published: {vuri}" in out
    manifest = versions.read_manifest(vuri).to_json()
    for name, split in manifest["splits"].items():
        assert f"{len(split['shards'])} shard(s) in 1 segment(s)" in out, (name, out)
    assert versions.verify_shards(vuri, versions.read_manifest(vuri)) >= 3
    assert storage.list_dir(f"{gcs_root}/staging") == []
    assert main(["show", "--root", gcs_root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == "20130102T000000Z_all"
    assert main(["run", "--root", gcs_root, "--interval-end", "2013-01-02"]) == 0
    assert "already published (nothing written)" in capsys.readouterr().out
    # The same day as a bounded window: its segment is reused, composed into a second version.
    assert main(["run", "--root", gcs_root, "--interval-end", "2013-01-02", "--interval-start",
                 "2013-01-01", "--shard-bytes", "200000"]) == 0
    vuri = f"{gcs_root}/datasets/flights/20130102T000000Z_20130101T000000Z"
    out = capsys.readouterr().out
    assert f"published: {vuri}" in out and "shard(s) in 1 segment(s)" in out, out
    manifest = versions.read_manifest(vuri)
    assert manifest.layout == "segments" and versions.verify_shards(vuri, manifest) >= 3
    assert storage.list_dir(f"{gcs_root}/staging") == []


def test_publish_refuses_when_its_lock_was_taken_over(client, root: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer whose expired lease another run broke must not publish the shards it wrote."""
    from etl.versions import lease

    monkeypatch.setattr(lease, "HANDOFF_EXPIRY_S", 0.5)
    run_id = "scheduled__2013-01-03T00:00:00+00:00"
    written = pipeline.build_version("flights", root, "2013-01-03", "2013-01-02", run_id,
                                     RunOptions(mode="strict"))
    # publish is a separate task, started after the handoff expiry: another run takes over
    time.sleep(1.0)
    taker = versions.acquire_writer_lock(written, "manual__takeover")
    assert taker.took_over["owner"] == run_id and taker.took_over["phase"] == "handoff"
    with pytest.raises(VersionLockedError):
        pipeline.publish(written)
    assert not storage.exists(storage.join(written, "manifest.json"))
    assert versions.list_versions(root, "flights") == []


def test_a_retried_forced_build_keeps_its_revision(client, root: str) -> None:
    """A forced run's build, retried by Airflow under the same run id before publish ran,
    writes the same -rN revision again instead of leaving it behind for a new one."""
    first = pipeline.run("flights", root, END, run_id="base")
    again = RunOptions(force=True)
    vuri = pipeline.build_version("flights", root, END, None, "forced", again)
    assert vuri.endswith(f"{VERSION}-r2")
    assert pipeline.build_version("flights", root, END, None, "forced", again) == vuri
    other = pipeline.build_version("flights", root, END, None, "someone-else", again)
    assert other.endswith(f"{VERSION}-r3")  # another run's forced build is its own revision
    assert pipeline.publish(vuri).created and first.created


def test_validate_summary_states_mode_expectations_failures_quarantine(
        caplog: pytest.LogCaptureFixture) -> None:
    result = {"mode": "quarantine", "evaluated_rows": 327262, "quarantined_rows": 12,
              "expectations": [{"success": True}] * 40 + [{"success": False}]}
    with caplog.at_level(logging.INFO, logger="etl.pipeline"):
        chain.say_validated("flights", result, 7.08, "file:///x/validated")
    expected = ("validate flights: 327,262 rows, 41 expectations, 1 failed, 12 quarantined "
                "(quarantine mode), 7.1 s -> file:///x/validated")
    assert caplog.messages == [expected]


def test_image_build_summary_counts_its_files(caplog: pytest.LogCaptureFixture,
                                              tmp_path: Path) -> None:
    """Image segments are built from a file *count*, tabular ones from rows: both summarised."""
    from etl.kinds import land as land_kind

    root = tmp_path.as_uri()
    land_kind(root, "digits")
    with caplog.at_level(logging.INFO, logger="etl"):
        pipeline.build_version("digits", root, "2024-01-01T00:00:00Z", run_id="count")
    lines = [m for m in caplog.messages if m.startswith("build digits: ")]
    assert lines and "1 segment built, 1797 image files checked, 0 quarantined" in lines[0], \
        caplog.messages
