"""`make bench --parts`: a group of figures taken alone joins the others only when they were
measured on the same ETL code; otherwise it starts a fresh result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import measure, segments


@pytest.fixture(autouse=True)
def _no_git_no_psutil(monkeypatch) -> None:
    monkeypatch.setattr(measure, "machine", lambda: {"cores": 2})
    monkeypatch.setattr(segments, "commit", lambda *paths, at="HEAD":
                        ("etl@" if paths else "head@") + at)


def test_figures_of_the_same_etl_code_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"commit": "old", "etl_code_commit": "etl@HEAD", "quick": False,
                               "tiny_partitions_bulk_ratio": 1.2,
                               "measured": {"segments": {}}}))
    kept = bench_main._start(out, quick=False, parts=("scaling",))
    assert kept["tiny_partitions_bulk_ratio"] == 1.2 and kept["commit"] == "old"
    assert kept["measured"] == {"segments": {}} and kept["machine"] == {"cores": 2}


def test_other_etl_code_quick_figures_or_every_part_start_afresh(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    for stored, parts in (({"etl_code_commit": "etl@other", "quick": False}, ("scaling",)),
                          ({"etl_code_commit": "etl@HEAD", "quick": True}, ("scaling",)),
                          ({"etl_code_commit": "etl@HEAD", "quick": False}, bench_main.PARTS)):
        out.write_text(json.dumps({**stored, "tiny_partitions_bulk_ratio": 1.2}))
        fresh = bench_main._start(out, quick=False, parts=parts)
        assert "tiny_partitions_bulk_ratio" not in fresh and fresh["measured"] == {}


def test_parts_apart_from_the_etl_keep_the_etl_figures_of_other_code(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"commit": "old", "etl_code_commit": "etl@other", "quick": False,
                               "tiny_partitions_bulk_ratio": 1.2,
                               "measured": {"segments": {"commit": "old"}}}))
    kept = bench_main._start(out, quick=False, parts=("drawn",))
    assert kept["tiny_partitions_bulk_ratio"] == 1.2 and kept["etl_code_commit"] == "etl@other"
    assert kept["measured"] == {"segments": {"commit": "old"}}
    assert "tiny_partitions_bulk_ratio" not in bench_main._start(
        out, quick=False, parts=("drawn", "segments"))


def test_older_results_name_their_etl_code_through_their_commit(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"commit": "HEAD", "quick": False, "stall_ratio": 1.3}))
    assert bench_main._start(out, quick=False, parts=("segments",))["stall_ratio"] == 1.3
