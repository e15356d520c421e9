"""Manifests, the publish protocol under contention, resolution, retention (version ids:
test_ids.py); what publish returns, a typed record that crosses into XCom and the CLI's
``--json`` as JSON and is read back the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from etl import storage, versions
from etl.errors import (
    ChecksumMismatchError,
    IncompleteVersionError,
    NoVersionError,
    VersionExistsError,
    VersionLockedError,
)
from etl.versions.catalog import PublishedVersion
from etl.write import readback, shards

DS = "flights"
V1, V2, V3 = "20130102T000000Z_20130101T000000Z", "20130601T000000Z_all", "20140101T000000Z_all"
REPO = Path(__file__).resolve().parents[3]


def _manifest(version: str, **extra: object) -> versions.Manifest:
    return versions.Manifest.from_json(
        {"format_version": 1, "dataset": DS, "version": version, "splits": {}, **extra}, "test")


def _publish(root: str, version: str, owner: str = "run") -> str:
    uri = versions.version_uri(root, DS, version)
    lock = versions.acquire_writer_lock(uri, owner)
    assert versions.publish_manifest(uri, _manifest(version), lock)
    return uri


# ---------------------------------------------------------------- manifests and resolution


def test_read_manifest(storage_root: str) -> None:
    uri = versions.version_uri(storage_root, DS, V1)
    with pytest.raises(IncompleteVersionError, match="no manifest.json"):
        versions.read_manifest(uri)
    storage.write_bytes_atomic(storage.join(uri, "manifest.json"), b'{"format_version": 9}')
    with pytest.raises(ValueError, match="manifest.json: expected a format_version <= 1"):
        versions.read_manifest(uri)
    storage.write_bytes_atomic(
        storage.join(uri, "manifest.json"),
        storage.json_bytes(_manifest(V1, future_key={"a": 1}).to_json()),
    )
    assert versions.read_manifest(uri).json_extra["future_key"] == {"a": 1}


def test_listing_and_latest_ignore_incomplete_versions(storage_root: str) -> None:
    with pytest.raises(NoVersionError, match="no published version of 'flights'"):
        versions.resolve(storage_root, DS)
    _publish(storage_root, V1)
    _publish(storage_root, V2)
    half = versions.version_uri(storage_root, DS, V3)  # newer, shards only: being written
    storage.write_bytes_atomic(storage.join(half, "flights-train.tfrecord-00000-of-00001"), b"x")
    storage.write_bytes_atomic(
        storage.join(storage_root, "datasets", DS, "not-a-version", "f"), b""
    )
    assert versions.list_versions(storage_root, DS) == [V1, V2]
    assert versions.latest_version(storage_root, DS) == V2
    assert versions.resolve(storage_root, DS).endswith(f"/{V2}")
    assert versions.resolve(storage_root, DS, V1).endswith(f"/{V1}")
    with pytest.raises(IncompleteVersionError):
        versions.resolve(storage_root, DS, V3)


def test_latest_falls_back_to_listing_when_pointer_is_stale(file_root: str) -> None:
    latest = storage.join(versions.dataset_uri(file_root, DS), versions.LATEST)
    _publish(file_root, V1)
    _publish(file_root, V2)
    storage.write_bytes_atomic(latest, f"{V1}\n".encode())  # stale: names an older version
    assert versions.latest_version(file_root, DS) == V2
    storage.write_bytes_atomic(latest, f"{V3}\n".encode())  # names a version that is gone
    assert versions.latest_version(file_root, DS) == V2
    storage.write_bytes_atomic(latest, b"garbage")
    assert versions.latest_version(file_root, DS) == V2
    storage.delete_tree(latest)
    assert versions.latest_version(file_root, DS) == V2


def test_latest_pointer_never_moves_backwards(storage_root: str) -> None:
    ds = versions.dataset_uri(storage_root, DS)
    assert versions.update_latest(ds, V2) is True
    assert versions.update_latest(ds, V1) is False  # a backfill of an older interval
    assert storage.read_bytes(storage.join(ds, versions.LATEST)) == f"{V2}\n".encode()
    assert versions.update_latest(ds, V3) is True


def test_listing_latest_and_retention_follow_the_one_order(file_root: str) -> None:
    """Published in another order than their own: the listing, LATEST and ``latest`` follow
    ``version_key`` (a 7-day window after the full version with the same end, ``-r10`` after
    ``-r2``), and retention keeps the newest by it."""
    demo, window = "20140101T000000Z_all", "20140101T000000Z_20131225T000000Z"
    oldest_first = ["20131231T000000Z_all", demo, f"{demo}-r2", f"{demo}-r10", window]
    for v in (window, f"{demo}-r10", demo, "20131231T000000Z_all", f"{demo}-r2"):
        _publish(file_root, v)
    assert versions.list_versions(file_root, DS) == oldest_first
    assert versions.latest_version(file_root, DS) == window
    latest = storage.join(versions.dataset_uri(file_root, DS), versions.LATEST)
    assert storage.read_bytes(latest) == f"{window}\n".encode()  # never moved back to demo
    assert versions.retain(file_root, DS, 2) == oldest_first[:3]
    assert versions.list_versions(file_root, DS) == oldest_first[3:]


# ---------------------------------------------------------------- the publish protocol


def test_concurrent_publishes_have_exactly_one_winner(storage_root: str) -> None:
    import threading

    uri = versions.version_uri(storage_root, DS, V1)
    results: dict[int, bool] = {}
    barrier = threading.Barrier(6)

    def publish(i: int) -> None:
        barrier.wait()
        results[i] = versions.publish_manifest(uri, _manifest(V1, run_id=f"run-{i}"))

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    assert versions.read_manifest(uri).run_id == f"run-{winners[0]}"
    assert versions.list_versions(storage_root, DS) == [V1]


_WRITER = textwrap.dedent("""
    import json, sys, time
    from etl import storage, versions
    from etl.write import shards
    from etl.errors import VersionExistsError, VersionLockedError
    uri, owner, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    time.sleep(max(0.0, start - time.time()))
    try:
        lock = versions.acquire_writer_lock(uri, owner)
        name = shards.shard_filename("flights", "train", 0, 1)
        entry = shards.write_shard(storage.join(uri, name), [owner.encode()] * 1000)
        manifest = versions.Manifest.from_json(
            {"format_version": 1, "dataset": "flights", "run_id": owner,
             "splits": {"train": {"num_examples": 1000, "shards": [entry]}}}, "test")
        print(json.dumps({"published": versions.publish_manifest(uri, manifest, lock)}))
    except (VersionExistsError, VersionLockedError) as exc:
        print(json.dumps({"refused": type(exc).__name__}))
""")


def test_two_processes_publishing_one_version(storage_root: str) -> None:
    uri = versions.version_uri(storage_root, DS, V1)
    start = time.time() + 3.0  # both interpreters are up by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, uri, f"run-{i}", str(start)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=os.environ.copy(),
        )
        for i in range(2)
    ]
    outcomes = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert sorted(o.get("published", False) for o in outcomes) == [False, True], outcomes
    loser = next(o for o in outcomes if not o.get("published"))
    assert loser in (
        {"refused": "VersionLockedError"},
        {"refused": "VersionExistsError"},
        {"published": False},
    )
    manifest = versions.read_manifest(uri)
    winner = manifest.run_id
    assert versions.verify_shards(uri, manifest) == 1
    name = manifest.splits["train"].shards[0].file
    assert set(readback.iter_records(storage.join(uri, name))) == {winner.encode()}
    assert not storage.exists(storage.join(uri, versions.WRITER_LOCK))


def test_writer_lock_owners_retries_and_expiry(storage_root: str) -> None:
    uri = versions.version_uri(storage_root, DS, V1)
    short = {"heartbeat_s": 0.05, "expiry_s": 1.5}  # above a loaded emulator's latency
    first = versions.acquire_writer_lock(uri, "dag/run-1/write", **short)
    again = versions.acquire_writer_lock(uri, "dag/run-1/write", **short)  # the task's retry
    assert again.token != first.token and not again.took_over
    with pytest.raises(VersionLockedError, match="being written by 'dag/run-1/write'") as info:
        versions.acquire_writer_lock(uri, "dag/run-2/write")
    assert info.value.holder["owner"] == "dag/run-1/write"
    assert {"host", "pid", "acquired_at", "heartbeat_at"} <= set(info.value.holder)
    refreshed = versions.refresh_writer_lock(again)
    with pytest.raises(VersionLockedError):
        versions.refresh_writer_lock(again)  # its token is stale now
    time.sleep(2.0)  # no heartbeat for longer than its expiry: the lease is dead
    taker = versions.acquire_writer_lock(uri, "dag/run-2/write")
    assert taker.took_over["owner"] == "dag/run-1/write"
    with pytest.raises(VersionLockedError):  # the old writer must not publish any more
        versions.publish_manifest(uri, _manifest(V1), refreshed)
    assert not versions.release_writer_lock(refreshed)
    assert versions.publish_manifest(uri, _manifest(V1), taker)
    with pytest.raises(VersionExistsError):
        versions.acquire_writer_lock(uri, "dag/run-3/write")


def test_second_publish_is_refused_and_overwrites_nothing(storage_root: str) -> None:
    uri = _publish(storage_root, V1, owner="a")
    before = storage.read_bytes(storage.join(uri, versions.MANIFEST))
    assert versions.publish_manifest(uri, _manifest(V1, run_id="b")) is False
    assert storage.read_bytes(storage.join(uri, versions.MANIFEST)) == before


_KILLED_WRITER = textwrap.dedent("""
    import sys
    from etl import storage, versions
    from etl.write import shards
    uri = sys.argv[1]
    versions.acquire_writer_lock(uri, "dag/run-1/write")
    def records():
        for i in range(10**9):
            if i == 300_000:
                print("WRITING", flush=True)
            yield b"r" * 100
    shards.write_shard(storage.join(uri, shards.shard_filename("flights", "train", 0, 1)), records())
""")


def test_sigkill_mid_shard_then_retry_publishes_one_clean_version(storage_root: str) -> None:
    uri = versions.version_uri(storage_root, DS, V1)
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, uri],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=os.environ.copy(),
    )
    assert proc.stdout.readline().strip() == "WRITING"
    proc.kill()
    proc.wait()
    assert versions.list_versions(storage_root, DS) == []
    assert storage.list_dir(uri) == [versions.WRITER_LOCK]  # no partial shard visible
    lock = versions.acquire_writer_lock(uri, "dag/run-1/write")  # the retry, at once
    storage.remove_temp_files(uri)
    entry = shards.write_shard(storage.join(uri, shards.shard_filename(DS, "train", 0, 1)), [b"ok"])
    manifest = _manifest(V1, splits={"train": {"num_examples": 1, "shards": [entry]}})
    assert versions.publish_manifest(uri, manifest, lock)
    assert storage.list_dir(uri, include_temp=True) == [entry["file"], versions.MANIFEST]
    assert versions.list_versions(storage_root, DS) == [V1]


# ---------------------------------------------------------------- integrity and retention


def test_verify_shards_names_file_expected_and_actual(storage_root: str) -> None:
    uri = versions.version_uri(storage_root, DS, V1)
    name = shards.shard_filename(DS, "train", 0, 1)
    entry = shards.write_shard(storage.join(uri, name), [b"a" * 50] * 20)
    manifest = _manifest(V1, splits={"train": {"shards": [entry]}})
    assert versions.verify_shards(uri, manifest) == 1
    data = bytearray(storage.read_bytes(storage.join(uri, name)))
    data[100] ^= 0xFF  # same size, one flipped byte
    storage.write_bytes_atomic(storage.join(uri, name), bytes(data))
    assert versions.verify_shards(uri, manifest, checksums=False) == 1
    with pytest.raises(
        ChecksumMismatchError, match=f"{name}: expected sha256 {entry['sha256']}, got"
    ):
        versions.verify_shards(uri, manifest)
    storage.write_bytes_atomic(storage.join(uri, name), bytes(data[:-7]))
    with pytest.raises(ChecksumMismatchError, match=f"expected {entry['bytes']} bytes, found"):
        versions.verify_shards(uri, manifest)
    storage.delete_tree(storage.join(uri, name))
    with pytest.raises(ChecksumMismatchError, match="missing"):
        versions.verify_shards(uri, manifest)


def test_retain_keeps_newest_and_versions_models_use(storage_root: str) -> None:
    for v in (V1, V2, V3):
        _publish(storage_root, v)
    used = storage.join(storage_root, "models", DS, V1, "run-1", "metrics.json")
    storage.write_bytes_atomic(used, b"{}")
    with pytest.raises(ValueError, match="keep"):
        versions.retain(storage_root, DS, 0)
    assert versions.retain(storage_root, DS, 1, dry_run=True) == [V2]
    assert versions.list_versions(storage_root, DS) == [V1, V2, V3]
    assert versions.retain(storage_root, DS, 1) == [V2]
    assert versions.list_versions(storage_root, DS) == [V1, V3]
    assert not storage.exists(versions.version_uri(storage_root, DS, V2))
    assert versions.retain(storage_root, DS, 1, force=True) == [V1]
    assert versions.list_versions(storage_root, DS) == [V3]


def test_next_revision_skips_in_flight_revisions(file_root: str) -> None:
    assert versions.next_revision(file_root, DS, V1) == f"{V1}-r2"
    _publish(file_root, V1)
    _publish(file_root, f"{V1}-r2")
    storage.write_bytes_atomic(
        storage.join(versions.version_uri(file_root, DS, f"{V1}-r3"), "x"), b""
    )
    assert versions.next_revision(file_root, DS, V1) == f"{V1}-r4"
    assert versions.next_revision(file_root, DS, V2) == f"{V2}-r2"


def test_manifest_sha256_ignores_per_run_keys() -> None:
    a = _manifest(V1, run_id="a", created_at="t1", splits={"train": {"num_examples": 1}})
    b = _manifest(V1, run_id="b", created_at="t2", splits={"train": {"num_examples": 1}})
    assert versions.manifest_sha256(a) == versions.manifest_sha256(b)
    b = _manifest(V1, run_id="b", created_at="t2", splits={"train": {"num_examples": 2}})
    assert versions.manifest_sha256(a) != versions.manifest_sha256(b)


def test_a_result_round_trips_through_json_and_reads_by_attribute() -> None:
    made = PublishedVersion.of(version_uri="file:///r/datasets/d/v", version="v", created=True,
                        splits={"train": 8, "eval": 1, "test": 1}, timings={"build_s": 1.5})
    back = PublishedVersion.from_json(made.to_json(), "XCom")
    assert back == made and back.rows == 10 and back.wall_s is None
    assert list(made.to_json()) == ["version_uri", "version", "created", "splits", "timings"]
    already = PublishedVersion.from_json({"version_uri": "u", "version": "v", "created": False,
                                   "splits": {}}, "XCom")
    assert not already.created and already.timings is None


def test_a_result_without_its_version_names_the_key() -> None:
    with pytest.raises(ValueError, match="etl run --json: key 'version_uri'"):
        PublishedVersion.from_json({"created": True}, "etl run --json")
