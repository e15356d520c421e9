"""``etl.versions.diff``: what changed between two manifests, and ``python -m etl diff`` on
two versions that real nightly runs published (a night added)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from etl import versions
from etl.__main__ import main
from etl.errors import NoVersionError
from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.versions import diff, diff_text
from tests.support.ui_fixtures import write_version


def _seg(seg: str, *parts: tuple[str, str], records: int = 10) -> dict:
    return {"segment": seg, "partition": "_".join(p[0] for p in parts), "records": records,
            "partitions": [list(p) for p in parts]}


A = {
    "dataset": "flights", "version": "A",
    "segments": [_seg("s1", ("20130101", "d1")), _seg("s2", ("20130102", "d2")),
                 _seg("s3", ("20130103", "d3")), _seg("s7", ("20130105", "d7")),
                 _seg("s8", ("20130106", "d8"))],
    "splits": {"train": {"num_examples": 80}, "eval": {"num_examples": 10},
               "test": {"num_examples": 10}},
    "schema": {"key": ["id"], "label": {"name": "late", "dtype": "int64", "classes": 2},
               "features": {"distance": {"dtype": "float32", "kind": "numeric"},
                            "hour": {"dtype": "int64", "kind": "numeric"},
                            "gone": {"dtype": "string", "kind": "categorical"}}},
    "statistics": {"numeric": {"distance": {"mean": 1000.0, "var": 400.0},
                               "hour": {"mean": 12.0, "var": 0.0}},
                   "vocabularies": {"gone": ["x"], "carrier": ["UA", "AA", "B6"]},
                   "label_counts": {"0": 60, "1": 20}},
}


def _m(obj: dict) -> versions.Manifest:
    return versions.Manifest.from_json(obj, "test")


def _b() -> dict:
    b = copy.deepcopy(A)
    b.update(version="B", segments=[
        _seg("s1", ("20130101", "d1")), _seg("s2x", ("20130102", "d2-redelivered")),
        _seg("s5", ("20130104", "d5")),
        _seg("sm", ("20130105", "d7"), ("20130106", "d8"), records=20)])
    b["splits"]["train"]["num_examples"] = 90
    feats = b["schema"]["features"]
    del feats["gone"]
    feats["hour"] = {"dtype": "float32", "kind": "numeric"}
    feats["month"] = {"dtype": "int64", "kind": "numeric"}
    b["schema"]["label"]["classes"] = 3
    b["statistics"] = {"numeric": {"distance": {"mean": 1010.0, "var": 441.0},
                                   "hour": {"mean": 13.0, "var": 1.0}},
                       "vocabularies": {"carrier": ["UA", "DL", "AA"]},
                       "label_counts": {"0": 60, "1": 20, "2": 10}}
    return b


def test_segments_added_rebuilt_and_dropped() -> None:
    d = diff.diff_manifests(_m(A), _m(_b()))
    assert d.segments_kept == 1
    kinds = {s.segment: (s.kind, s.why, s.replaces) for s in d.segments}
    assert kinds == {
        "s2x": ("rebuilt", "raw data changed: 20130102", ("s2",)),
        "s5": ("added", "", ()),
        "sm": ("rebuilt", "compacted from 2 segments", ("s7", "s8")),
        "s3": ("dropped", "", ())}


def test_rows_schema_and_statistics() -> None:
    d = diff.diff_manifests(_m(A), _m(_b()))
    assert [(s.split, s.a, s.b, s.delta) for s in d.splits] == [
        ("train", 80, 90, 10), ("eval", 10, 10, 0), ("test", 10, 10, 0)]
    assert {(c.field, c.kind, c.a, c.b) for c in d.schema} == {
        ("month", "added", "", "int64 numeric"), ("gone", "removed", "string categorical", ""),
        ("hour", "changed", "int64 numeric", "float32 numeric"),
        ("late (label)", "changed", "int64 2 classes", "int64 3 classes")}
    dist, hour = d.numeric
    assert (dist.feature, dist.std_a, dist.std_b, dist.shift_std) == ("distance", 20.0, 21.0, 0.5)
    assert hour.shift_std is None  # A's std is 0: no shift in std units
    (carrier,) = d.vocabularies
    assert (carrier.size_a, carrier.size_b, carrier.added, carrier.removed) == (
        3, 3, ("DL",), ("B6",))
    assert [(lab.label, lab.count_a, lab.count_b) for lab in d.labels] == [
        ("0", 60, 60), ("1", 20, 20), ("2", 0, 10)]
    assert d.labels[0].share_a == 0.75 and d.labels[0].share_b == pytest.approx(60 / 90)


def test_same_manifest_shows_no_change_and_the_text_is_aligned() -> None:
    same = diff.diff_manifests(_m(A), _m(A))
    assert same.segments == () and same.schema == () and same.segments_kept == 5
    text = diff_text.format_diff(diff.diff_manifests(_m(A), _m(_b())))
    lines = text.splitlines()
    assert lines[:2] == ["flights: A -> B", "segments: 1 kept, 1 added, 2 rebuilt, 1 dropped"]
    rows = [ln for ln in lines if ln.startswith(("  train", "  eval", "  test"))]
    assert len({len(r) for r in rows}) == 1 and rows[0].endswith("+10")  # one column grid
    assert "  distance" in text and "+0.50 std" in text and "+ DL  - B6" in text
    assert json.loads(json.dumps(diff.diff_manifests(_m(A), _m(_b())).to_json()))["splits"][0][
        "delta"] == 10


def test_aliases_and_unknown_versions(tmp_path: Path) -> None:
    for day in (1, 2, 3):
        write_version(tmp_path, "flights", datetime(2014, 1, day, tzinfo=UTC))
    root = tmp_path.as_uri()
    assert diff.resolve_pair(root, "flights", "previous", "latest") == (
        "20140102T000000Z_all", "20140103T000000Z_all")
    with pytest.raises(NoVersionError, match="no published version 'nope'.*20140103T000000Z_all"):
        diff.resolve_pair(root, "flights", "nope", "latest")


def test_latest_and_previous_follow_the_one_order(tmp_path: Path) -> None:
    """A 7-day window published after the full version with the same end is the latest,
    and the full version the previous (the ids' string order has them the other way)."""
    end = datetime(2014, 1, 1, tzinfo=UTC)
    window = write_version(tmp_path, "flights", end, datetime(2013, 12, 25, tzinfo=UTC))
    demo = write_version(tmp_path, "flights", end)
    assert diff.resolve_pair(tmp_path.as_uri(), "flights", "previous", "latest") == (demo, window)


@pytest.fixture
def two_nights(tmp_path: Path) -> str:
    """Two nightly versions of real flights days: the second adds a segment."""
    root = tmp_path.as_uri()
    land(root, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 3)))
    for end in ("2013-01-02", "2013-01-03"):
        assert main(["run", "--json", "--root", root, "--interval-end", end]) == 0
    return root


def test_the_cli_diffs_real_versions(two_nights: str, capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    root = two_nights
    capsys.readouterr()
    assert main(["diff", "--root", root, "--dataset", "flights", "previous", "latest"]) == 0
    text = capsys.readouterr().out
    older, newer = versions.list_versions(root, "flights")
    assert text.startswith(f"flights: {older} -> {newer}\nsegments: 1 kept, 1 added, 0 rebuilt")
    assert "  carrier" in text and "labels (train)" in text
    assert main(["diff", "--root", root, "--json", older, "latest"]) == 0
    got = json.loads(capsys.readouterr().out)
    added = [s for s in got["segments"] if s["kind"] == "added"]
    assert len(added) == 1 and added[0]["extent"].startswith("20130102")
    m_old, m_new = (versions.read_manifest(versions.version_uri(root, "flights", v))
                    for v in (older, newer))
    assert {s["split"]: (s["a"], s["b"]) for s in got["splits"]} == {
        s: (m_old.splits[s].num_examples, m_new.splits[s].num_examples)
        for s in m_new.splits}
    assert main(["diff", "--root", root, "missing", "latest"]) == 1
    assert "no published version 'missing'" in capsys.readouterr().err


def test_a_narrower_window_is_said_so_not_rebuilt() -> None:
    """Issue 41 item 5: the week's segment holds the last days of the year's segment, same raw
    data: B's window is narrower, nothing was rebuilt by new code."""
    year = {**A, "segments": [_seg("y", ("20131229", "d9"), ("20131230", "d0"),
                                     ("20131231", "d1"))]}
    week = {**A, "version": "B", "segments": [_seg("w", ("20131231", "d1"))]}
    (change,) = diff.diff_manifests(_m(year), _m(week)).segments
    assert (change.kind, change.why, change.replaces) == (
        "rebuilt", "B's window holds 1 of the 3 partitions it held (same raw data)", ("y",))
