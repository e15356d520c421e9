"""The bench's floor writes what the ETL writes, and its harness pieces behave (no timings)."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest
from tensorflow.core.example import example_pb2

from bench import floor, peer_envs
from bench.proctree import last_json, run_child
from etl import pipeline, versions
from etl.sources.land import land
from etl.write.shards import iter_records

START, END = "2013-01-01T00:00:00Z", "2013-01-03T00:00:00Z"


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("landed")
    land(path.as_uri(), "flights", start=date(2013, 1, 1), end=date(2013, 1, 3))
    return path.as_uri()


def test_floor_writes_as_many_records_as_the_etl(client, landed: str, tmp_path: Path) -> None:
    etl = pipeline.run("flights", landed, END, START, run_id="floor-check")
    out = tmp_path / "floor"
    got = floor.run(landed, "flights", out.as_uri(), END, START)
    assert got["rows"] == sum(etl["splits"].values()) > 0
    assert set(got["splits"]) == set(etl["splits"])
    written = {p.name: sum(1 for _ in iter_records(p.as_uri())) for p in out.iterdir()}
    assert sum(written.values()) == got["rows"]
    schema = versions.read_manifest(etl["version_uri"]).schema
    record = next(iter_records((out / "flights-train.tfrecord-00000").as_uri()))
    example = example_pb2.Example.FromString(record)
    assert set(example.features.feature) == {*schema["features"], schema["label"]["name"]}


def test_floor_keeps_only_the_window(landed: str, tmp_path: Path) -> None:
    one_day = floor.run(landed, "flights", tmp_path.as_uri(), "2013-01-02T00:00:00Z", START)
    both = floor.run(landed, "flights", (tmp_path / "b").as_uri(), END, START)
    assert 0 < one_day["source_rows"] < both["source_rows"]


def test_child_runs_report_output_and_cost_of_the_tree() -> None:
    code = ("import json, subprocess, sys; subprocess.run([sys.executable, '-c', 'pass']); "
            "print('log line'); print(json.dumps({'rows': 3}))")
    child = run_child([sys.executable, "-c", code])
    assert child.returncode == 0 and last_json(child.stdout) == {"rows": 3}
    assert child.cpu_s > 0 and child.wall_s > 0 and child.peak_rss_mb >= 0
    failed = run_child([sys.executable, "-c", "raise SystemExit('boom')"])
    assert failed.returncode == 1 and "boom" in failed.stderr


def test_last_json_reads_an_indented_object_too() -> None:
    assert last_json('{\n  "created": true\n}\n') == {"created": True}
    with pytest.raises(ValueError, match="no JSON"):
        last_json("nothing here\n")


def test_a_peer_that_cannot_install_is_recorded_with_the_installers_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_uv = tmp_path / "uv"
    fake_uv.write_text("#!/bin/sh\necho 'error: no matching distribution for cp311' >&2\nexit 2\n")
    fake_uv.chmod(0o755)
    monkeypatch.setattr(peer_envs, "_uv", lambda: str(fake_uv))
    monkeypatch.setattr(peer_envs, "ENVS", tmp_path / "envs")
    got = peer_envs.run_peers(["ray_data"], tmp_path, [], tmp_path, 2, [])
    assert got["ray_data"]["absent"] == "install failed"
    assert "no matching distribution for cp311" in got["ray_data"]["error"]
    assert got["tfx_beam"]["absent"] == "not run (--peers)"


def test_floor_groups_files_by_size_and_writes_a_file_per_group(landed: str, tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.setattr(floor, "GROUP_BYTES", 1)  # every day its own group
    got = floor.run(landed, "flights", tmp_path.as_uri(), END, START)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"flights-{s}.tfrecord-{i:05d}" for s in ("eval", "test", "train")
                     for i in (0, 1)]
    assert sum(sum(1 for _ in iter_records(p.as_uri())) for p in tmp_path.iterdir()) == got["rows"]
