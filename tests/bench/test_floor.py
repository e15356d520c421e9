"""The bench's floor writes what the ETL writes (no timings)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from tensorflow.core.example import example_pb2

from bench import floor
from etl import pipeline, versions
from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.write.readback import iter_records

START, END = "2013-01-01T00:00:00Z", "2013-01-03T00:00:00Z"


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("landed")
    land(path.as_uri(), "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 3)))
    return path.as_uri()


def test_floor_writes_as_many_records_as_the_etl(client, landed: str, tmp_path: Path) -> None:
    etl = pipeline.run("flights", landed, END, START, run_id="floor-check")
    out = tmp_path / "floor"
    got = floor.run(landed, "flights", out.as_uri(), END, START)
    assert got["rows"] == sum(etl.splits.values()) > 0
    assert set(got["splits"]) == set(etl.splits)
    written = {p.name: sum(1 for _ in iter_records(p.as_uri())) for p in out.iterdir()}
    assert sum(written.values()) == got["rows"]
    schema = versions.read_manifest(etl.version_uri).schema
    record = next(iter_records((out / "flights-train.tfrecord-00000").as_uri()))
    example = example_pb2.Example.FromString(record)
    assert set(example.features.feature) == set(schema.columns)


def test_floor_keeps_only_the_window(landed: str, tmp_path: Path) -> None:
    one_day = floor.run(landed, "flights", tmp_path.as_uri(), "2013-01-02T00:00:00Z", START)
    both = floor.run(landed, "flights", (tmp_path / "b").as_uri(), END, START)
    assert 0 < one_day["source_rows"] < both["source_rows"]


def test_floor_groups_files_by_size_and_writes_a_file_per_group(landed: str, tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.setattr(floor, "GROUP_BYTES", 1)  # every day its own group
    got = floor.run(landed, "flights", tmp_path.as_uri(), END, START)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"flights-{s}.tfrecord-{i:05d}" for s in ("eval", "test", "train")
                     for i in (0, 1)]
    assert sum(sum(1 for _ in iter_records(p.as_uri())) for p in tmp_path.iterdir()) == got["rows"]
