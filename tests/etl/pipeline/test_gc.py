"""``python -m etl gc``: leftovers of dead runs listed, then removed; live and published kept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from etl import storage, versions
from etl.__main__ import main
from etl.pipeline.gc import collect_garbage
from etl.provenance import run_key
from etl.write import shards

DS = "flights"
V1, V2, V3 = (f"2024010{d}T000000Z_all" for d in (1, 2, 3))


def _shard(uri: str, payload: bytes) -> dict:
    return shards.write_shard(storage.join(uri, shards.shard_filename(DS, "train", 0, 1)),
                              [payload])


def _staging(root: str, version: str, run_id: str) -> str:
    uri = storage.safe_join(root, "staging", DS, version, run_key(run_id))
    storage.write_bytes_atomic(storage.join(uri, "run.json"), storage.json_bytes({"run_id": run_id}))
    return uri


def _world(root: str) -> dict[str, str]:
    """A published version with debris, a dead writer's folder, a live writer's, staging."""
    v1, v2, v3 = (versions.version_uri(root, DS, v) for v in (V1, V2, V3))
    lock = versions.acquire_writer_lock(v1, "done-run")
    entry = _shard(v1, b"published")
    manifest = versions.Manifest.from_json(
        {"format_version": 1, "dataset": DS, "version": V1, "run_id": "done-run",
         "splits": {"train": {"num_examples": 1, "shards": [entry]}}}, "test")
    assert versions.publish_manifest(v1, manifest, lock)
    # a publish killed after the manifest leaves the handed-off lease (the draft inside)
    storage.write_bytes_atomic(storage.join(v1, versions.WRITER_LOCK), b"{}")
    versions.acquire_writer_lock(v2, "dead-run", heartbeat_s=0.05, expiry_s=0.2)
    _shard(v2, b"half")
    return {"v1": v1, "v2": v2, "v3": v3, "shard": entry["file"],
            "dead_staging": _staging(root, V2, "dead-run"),
            "done_staging": _staging(root, V1, "done-run"),
            "live_staging": _staging(root, V3, "live-run"),
            "young_staging": _staging(root, V1, "extracting-run")}


def test_gc_lists_then_removes_only_leftovers_of_dead_runs(storage_root: str,
                                                           capsys: pytest.CaptureFixture) -> None:
    w = _world(storage_root)
    live = versions.acquire_writer_lock(w["v3"], "live-run", heartbeat_s=0.1, expiry_s=0.6)
    _shard(w["v3"], b"in flight")
    time.sleep(0.3)  # the dead writer's lease expires
    with versions.Heartbeat(live) as beat:
        assert main(["gc", "--root", storage_root, "--dataset", DS]) == 0
        out = capsys.readouterr().out
        expected = {storage.join(w["v1"], versions.WRITER_LOCK), w["v2"], w["dead_staging"],
                    w["done_staging"]}
        for uri in expected:
            assert f"would remove {uri}" in out, out
        assert f"kept {w['v3']}" in out and "run again with --apply" in out
        assert storage.exists(storage.join(w["v2"], w["shard"]))  # dry run: nothing deleted
        report = collect_garbage(storage_root, DS, apply=True)
        assert {item.uri for item in report.leftovers} == expected
        assert beat.lost is None
    assert versions.list_versions(storage_root, DS) == [V1]
    assert storage.list_dir(w["v1"], include_temp=True) == [w["shard"], versions.MANIFEST]
    assert not storage.exists(w["v2"]) and not storage.exists(w["dead_staging"])
    assert not storage.exists(w["done_staging"])
    for kept in (w["live_staging"], w["young_staging"], storage.join(w["v3"], w["shard"])):
        assert storage.exists(kept), kept
    assert versions.current_holder(storage.join(w["v3"], versions.WRITER_LOCK))["owner"] == \
        "live-run"
    versions.release_writer_lock(beat.lease)


def test_gc_removes_old_temp_files_and_quiet_staging(file_root: str) -> None:
    """Local disk: a killed write's ``.tmp-*`` and a staging folder untouched for hours."""
    w = _world(file_root)
    path = Path(storage.get_fs(w["v1"])[1])
    temp = path / f".{w['shard']}{storage.TEMP_MARKER}0123abcd"
    temp.write_bytes(b"partial")
    young = path / f".{w['shard']}{storage.TEMP_MARKER}fresh"
    young.write_bytes(b"being written")
    quiet = Path(storage.get_fs(w["young_staging"])[1])
    old = time.time() - 13 * 3600
    for p in (temp, *quiet.rglob("*")):
        os.utime(p, (old, old))
    report = collect_garbage(file_root, DS, apply=True)
    removed = {item.uri for item in report.leftovers}
    assert storage.join(w["v1"], temp.name) in removed and not temp.exists()
    assert young.exists()  # may be a write in flight
    assert w["young_staging"] in removed and not quiet.exists()
