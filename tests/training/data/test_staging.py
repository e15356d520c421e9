"""Staging a version's shards to local disk: verified copies, reuse, refetch, refusal.

Byte-level only (any bytes make a shard here), so these tests need no TensorFlow.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from etl.errors import ChecksumMismatchError
from etl.versions import Manifest, Shard
from training.data import staging

VERSION = "20130102T000000Z_20130101T000000Z"


def _version(root: Path, sizes: dict[str, list[int]]) -> tuple[str, dict]:
    """A version folder with random-byte shards and the manifest entries describing them."""
    path = root / "datasets" / "flights" / VERSION
    path.mkdir(parents=True)
    splits = {}
    for split, shard_sizes in sizes.items():
        entries = []
        for i, size in enumerate(shard_sizes):
            name = f"flights-{split}.tfrecord-{i:05d}-of-{len(shard_sizes):05d}"
            data = hashlib.sha256(f"{split}{i}".encode()).digest() * (size // 32 + 1)
            (path / name).write_bytes(data[:size])
            entries.append({"file": name, "records": 1, "bytes": size,
                            "sha256": hashlib.sha256(data[:size]).hexdigest()})
        splits[split] = {"num_examples": len(entries), "shards": entries}
    return path.as_uri(), {"dataset": "flights", "version": VERSION, "splits": splits}


@pytest.fixture
def version(tmp_path: Path) -> tuple[str, dict]:
    return _version(tmp_path / "store", {"train": [70_000, 50_000, 1], "eval": [3_000]})


def test_stage_copies_only_the_asked_splits_and_verifies(version, tmp_path: Path) -> None:
    uri, manifest = version
    local = staging.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train"], workers=2)
    assert local == tmp_path / "ssd" / "flights" / VERSION
    names = sorted(p.name for p in local.iterdir())
    assert names == sorted(e["file"] for e in manifest["splits"]["train"]["shards"])
    for entry in manifest["splits"]["train"]["shards"]:
        assert staging.mismatch(local / entry["file"], _shard(entry)) is None


def test_verified_copy_is_reused_and_corrupted_copy_refetched(version, tmp_path, caplog) -> None:
    uri, manifest = version
    entry = manifest["splits"]["train"]["shards"][0]
    local = staging.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train"])
    assert staging.stage_shard(uri, local, _shard(entry)) is False  # verified copy: not fetched again

    shard = local / entry["file"]
    data = bytearray(shard.read_bytes())
    data[1234] ^= 0xFF  # same size, one flipped byte: only the checksum can tell
    shard.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="training.data.staging"):
        staging.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train"])
    assert entry["file"] in caplog.text and "sha256" in caplog.text
    assert staging.mismatch(shard, _shard(entry)) is None

    shard.write_bytes(shard.read_bytes()[:-10])  # truncated copy
    assert staging.stage_shard(uri, local, _shard(entry)) is True
    assert staging.mismatch(shard, _shard(entry)) is None


def test_damaged_source_shard_is_refused_with_its_name(version, tmp_path: Path) -> None:
    uri, manifest = version
    entry = manifest["splits"]["eval"]["shards"][0]
    source = Path(uri[len("file://"):]) / entry["file"]
    source.write_bytes(b"x" + source.read_bytes()[1:])
    with pytest.raises(ChecksumMismatchError, match=entry["file"]):
        staging.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["eval"])
    local = tmp_path / "ssd" / "flights" / VERSION
    assert list(local.iterdir()) == []  # no half or wrong file left behind, not even a temp


def test_bad_manifest_entries_are_named(version) -> None:
    _, manifest = version
    with pytest.raises(KeyError, match="no split 'test'"):
        staging.split_shards(_m(manifest), "test")
    manifest["splits"]["eval"]["shards"][0]["file"] = "../escape"
    with pytest.raises(ValueError, match="plain file name"):
        staging.split_shards(_m(manifest), "eval")
    del manifest["splits"]["train"]["shards"][0]["sha256"]
    with pytest.raises(ValueError, match="missing \\['sha256'\\]"):
        staging.split_shards(_m(manifest), "train")


def _m(manifest: dict) -> Manifest:
    return Manifest.from_json(manifest, "the test's manifest")


def _shard(entry: dict) -> Shard:
    return Shard.from_json(entry, "the test's manifest")


def _as_segments(uri: str, manifest: dict) -> None:
    """Move each shard into a segment folder beside the version, as composed versions list them."""
    version_dir = Path(uri[len("file://"):])
    for split, info in manifest["splits"].items():
        for i, entry in enumerate(info["shards"]):
            segment = f"20130101T000000Z_{split}{i}"
            folder = version_dir.parent / "segments" / segment
            folder.mkdir(parents=True)
            (version_dir / entry["file"]).rename(folder / entry["file"])
            entry["segment"] = segment


def test_shards_in_shared_segments_are_verified_and_staged(version, tmp_path) -> None:
    from etl import versions

    uri, manifest = version
    _as_segments(uri, manifest)
    assert versions.verify_shards(uri, _m(manifest)) == 4
    local = staging.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train", "eval"])
    staged = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert staged == sorted(versions.shard_relpath(_shard(e)) for s in ("train", "eval")
                            for e in manifest["splits"][s]["shards"])
    assert all(p.startswith("segments/") for p in staged)
    entry = manifest["splits"]["eval"]["shards"][0]
    (Path(uri[len("file://"):]).parent / versions.shard_relpath(_shard(entry))).write_bytes(b"damaged")
    with pytest.raises(ChecksumMismatchError, match=entry["segment"]):
        versions.verify_shards(uri, _m(manifest))


@pytest.mark.parametrize("segment", ["../escape", "a/b", "", ".."])
def test_a_segment_outside_the_dataset_is_refused(version, segment) -> None:
    _, manifest = version
    manifest["splits"]["eval"]["shards"][0]["segment"] = segment
    with pytest.raises(ValueError, match="segment .* must be a plain file name"):
        staging.split_shards(_m(manifest), "eval")
