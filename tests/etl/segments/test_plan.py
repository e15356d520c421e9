"""etl.segments.plan: a window planned purely from one listing and the previous manifest --
known segments reused wherever their partitions match, new runs grouped by bytes -- and the
listing itself: one glob of the source, sizes (and generations on GCS) from it, a missing
partition named."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from etl import storage, versions
from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.segments import plan
from etl.segments.plan import RawPartition
from etl.spec import load_spec
from etl.storage import listing as listing_mod
from etl.versions.manifest import SegmentEntry


@pytest.fixture()
def root(tmp_path: Path) -> str:
    """Three landed days of flights."""
    land(tmp_path.as_uri(), "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 4)))
    return tmp_path.as_uri()


def test_a_window_is_planned_from_the_previous_manifest_and_one_listing(tmp_path: Path) -> None:
    """cover() uses a known segment wherever its partitions (with digests) match, and new
    partitions are grouped by bytes; a changed digest matches nothing."""
    def part(name: str, digest: str, size: int) -> RawPartition:
        return RawPartition(name, f"u/{name}", None, None, None, {"size": size}, digest)

    parts = [part("d1", "a", 10), part("d2", "b", 10), part("d3", "c", 10), part("d4", "d", 50),
             part("d5", "e", 10)]
    known = [SegmentEntry.of(segment="S12", partitions=(("d1", "a"), ("d2", "b"))),
             SegmentEntry.of(segment="S3", partitions=(("d3", "OLD"),))]
    covered = plan.cover(parts, known)
    assert [(seg, [p.name for p in run]) for seg, run in covered] == [
        ("S12", ["d1", "d2"]), (None, ["d3", "d4", "d5"])]
    groups = plan.group_by_size(covered[1][1], lambda p: p.size, 25)
    assert [[p.name for p in g] for g in groups] == [["d3"], ["d4"], ["d5"]]
    assert [[p.name for p in g] for g in plan.group_by_size(parts, lambda p: p.size, 30)] == [
        ["d1", "d2", "d3"], ["d4"], ["d5"]]


def test_planning_is_pure_a_listing_and_the_previous_manifest_in_segment_tasks_out() -> None:
    """No storage is touched: the same listing, digests and manifest give the same tasks, and
    a previous manifest holding the first two days makes them one reused segment."""
    from etl.segments.plan import Digests, plan_window

    spec = load_spec("flights")
    listing = [(datetime(2013, 1, d, tzinfo=UTC),
                {"uri": f"gs://nowhere/raw/flights/date=2013-01-0{d}/flights.csv", "size": 100,
                 "mtime": d}) for d in (1, 2, 3)]
    end, digests = datetime(2013, 1, 4, tzinfo=UTC), Digests("spec", None, None)
    fresh = plan_window("gs://nowhere", spec, None, end, listing, digests)
    assert fresh == plan_window("gs://nowhere", spec, None, end, listing, digests)
    assert [t.extent for t in fresh.tasks] == ["20130101_20130103"] and not fresh.known
    held = [[p.key, p.digest] for p in fresh.tasks[0].partitions[:2]]
    previous = versions.Manifest.from_json(
        {"version": "v", "segments": [{"segment": "S12", "partitions": held}]}, "manifest.json")
    again = plan_window("gs://nowhere", spec, None, end, listing, digests, previous)
    assert [t.extent for t in again.tasks] == ["20130101_20130102", "20130103"]
    assert again.tasks[0].segment == "S12" and again.known == {"S12"}


def test_window_listing_gives_sizes_from_one_listing(root: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each partition's file with its size (and local mtime), from one glob of the source."""
    lists = _count_lists(monkeypatch)
    listing = plan.window_listing(root, load_spec("flights").primary_source, None,
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
    listing = plan.window_listing(gcs_root, source, None, datetime(2013, 1, 3, tzinfo=UTC))
    assert lists == [1] and [p.day for p, _ in listing] == [1, 2]
    for (period, info), (day, body) in zip(listing, sorted(bodies.items())):
        assert info["uri"] == f"{gcs_root}/raw/flights/date=2013-01-0{day}/flights.csv"
        assert info["size"] == len(body)
        assert info["generation"] and info["generation"] != "None"


def test_missing_partition_is_named(root: str) -> None:
    os.remove(root[7:] + "/raw/flights/date=2013-01-02/flights.csv")
    os.rmdir(root[7:] + "/raw/flights/date=2013-01-02")
    with pytest.raises(plan.SourceFilesError, match="missing.*2013-01-02"):
        plan.window_files(root, load_spec("flights").primary_source, None,
                             datetime(2013, 1, 4, tzinfo=UTC))
    with pytest.raises(plan.SourceFilesError, match="2013-01-02"):
        plan.window_files(root, load_spec("flights").primary_source,
                             datetime(2013, 1, 1, tzinfo=UTC), datetime(2013, 1, 3, tzinfo=UTC))


def test_groups_follow_sizes() -> None:
    """The one grouping by size (raw partitions into segments, segments into Dask tasks):
    consecutive items up to the limit, one larger than the limit alone."""
    sizes = [5, 5, 5, 20, 1, 1]
    assert plan.group_by_size(range(6), sizes.__getitem__, 10) == [[0, 1], [2], [3], [4, 5]]
    assert plan.group_by_size(range(6), sizes.__getitem__, 10**9) == [list(range(6))]
    assert plan.group_by_size([], sizes.__getitem__, 10) == []
