"""A version's manifest.json: reading it, checking shards against it, and publishing it.

Publishing is the commit point: the manifest is created only if absent (two runs cannot both
publish one version), then LATEST is advanced and the writer lock dropped.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from etl import storage
from etl.errors import ChecksumMismatchError, IncompleteVersionError, VersionLockedError
from etl.versions.catalog import update_latest
from etl.versions.ids import MANIFEST, WRITER_LOCK, shard_uri, split_version_uri
from etl.versions.lock import WriterLock, current_holder, release_writer_lock

FORMAT_VERSION = 1
VOLATILE_MANIFEST_KEYS = ("created_at", "run_id")  # differ between otherwise equal runs
_HASH_CHUNK = 8 * 2**20


def read_manifest(uri: str) -> dict[str, Any]:
    """The version's manifest (extra keys kept); IncompleteVersionError if unpublished."""
    path = storage.join(uri, MANIFEST)
    try:
        manifest = storage.read_json(path)
    except FileNotFoundError:
        raise IncompleteVersionError(
            f"{uri}: no {MANIFEST}, so the version is not published (absent or being written)"
        ) from None
    fmt = manifest.get("format_version") if isinstance(manifest, dict) else None
    if (
        not isinstance(fmt, int)
        or fmt > FORMAT_VERSION
        or not isinstance(manifest.get("splits"), dict)
    ):
        raise ValueError(
            f"{path}: expected a format_version <= {FORMAT_VERSION} manifest with a 'splits' "
            f"object, got format_version={fmt!r}"
        )
    return manifest


def verify_shards(uri: str, manifest: dict[str, Any], checksums: bool = True) -> int:
    """Check every shard's size (and sha256) against the manifest; returns shards checked.

    Raises:
        ChecksumMismatchError: names the file, the expected and the actual value.
    """
    count = 0
    for split, info in manifest["splits"].items():
        for shard in info.get("shards", []):
            path = shard_uri(uri, shard)
            try:
                size = storage.stat(path)["size"]
            except FileNotFoundError:
                raise ChecksumMismatchError(
                    f"{path} ({split}): listed in the manifest but missing"
                ) from None
            if size != shard["bytes"]:
                raise ChecksumMismatchError(
                    f"{path}: expected {shard['bytes']} bytes, found {size}"
                )
            if checksums and (actual := _sha256(path)) != shard["sha256"]:
                raise ChecksumMismatchError(
                    f"{path}: expected sha256 {shard['sha256']}, got {actual}"
                )
            count += 1
    return count


def _sha256(uri: str) -> str:
    digest = hashlib.sha256()
    with storage.open_read(uri) as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_sha256(
    manifest: dict[str, Any], exclude: tuple[str, ...] = VOLATILE_MANIFEST_KEYS
) -> str:
    """Fingerprint of a manifest's content, ignoring per-run keys: equal data, equal hash."""
    kept = {k: v for k, v in manifest.items() if k not in exclude}
    return hashlib.sha256(
        json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def publish_manifest(uri: str, manifest: dict[str, Any], lock: WriterLock | None = None) -> bool:
    """Commit a version: create manifest.json only if absent, advance LATEST, free the lock.

    Returns:
        True if this call published the version; False if a manifest already existed
        (then nothing is overwritten and the caller should report the existing version).

    Raises:
        VersionLockedError: ``lock`` was given and another owner has taken the version over.
            Stop the lock's ``Heartbeat`` first, so its token is the stored one.
    """
    lock_uri = storage.join(uri, WRITER_LOCK)
    if lock is not None and storage.read_with_token(lock_uri)[1] != lock.token:
        holder = current_holder(lock_uri)
        if holder.get("owner") != lock.owner:
            raise VersionLockedError(uri, holder)
    created = storage.create_if_absent(storage.join(uri, MANIFEST), storage.json_bytes(manifest))
    if created:
        ds_uri, version = split_version_uri(uri)
        update_latest(ds_uri, version)
        storage.delete_tree(lock_uri)  # published: any lock on it is moot now
    elif lock is not None:
        release_writer_lock(lock)
    return created


def format_shards(manifest: dict[str, Any]) -> str:
    """The shard table of a manifest: file, records, bytes, per split with totals."""
    lines = [f"{'shard':<52} {'records':>10} {'bytes':>13}"]
    order = {"train": 0, "eval": 1, "validation": 1, "test": 2}
    composed = manifest.get("layout") == "segments"
    for split, info in sorted(manifest["splits"].items(), key=lambda kv: order.get(kv[0], 3)):
        if composed:  # one line per split: a year of daily segments is a thousand shards
            segs = len({s["segment"] for s in info["shards"]})
            where = f"  {len(info['shards'])} shard(s) in {segs} segment(s)"
            lines.append(where)
        else:
            lines += [f"{shard['file']:<52} {shard['records']:>10} {shard['bytes']:>13}"
                      for shard in info["shards"]]
        lines.append(f"{'  ' + split + ' total':<52} {info['num_examples']:>10} "
                     f"{info['num_bytes']:>13}")
    return "\n".join(lines)
