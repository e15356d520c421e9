"""Copy a version's shards to local disk, verified against the manifest's checksums.

A GPU node reads its epochs from local SSD instead of the object store: each shard is
streamed once (hashing while it downloads), made visible under its final name only when
size and sha256 match the manifest, and reused by later runs after a fresh re-check, so a
corrupted or truncated local copy is fetched again instead of being trained on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from etl import storage, versions
from etl.errors import ChecksumMismatchError
from etl.versions import Manifest, Shard

log = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 2**20


def split_shards(manifest: Manifest, split: str) -> tuple[Shard, ...]:
    """The manifest's shard entries for ``split``.

    Raises:
        KeyError: the split is not in the manifest (names the splits it has).
    """
    if split not in manifest.splits:
        raise KeyError(
            f"manifest of {manifest.dataset}/{manifest.version} has no split "
            f"{split!r}; it has {sorted(manifest.splits)}"
        )
    shards = manifest.splits[split].shards
    for entry in shards:
        _check_entry(entry)
    return shards


def stage_version(
    version_uri: str,
    manifest: Manifest,
    staging_dir: str,
    splits: list[str],
    workers: int = 8,
) -> Path:
    """Make a verified local copy of ``splits``' shards; returns the local version folder.

    Raises:
        ChecksumMismatchError: a freshly fetched shard still differs from the manifest
            (the stored version itself is damaged); names the shard.
    """
    local = Path(staging_dir) / manifest.dataset / manifest.version
    local.mkdir(parents=True, exist_ok=True)
    entries = [e for s in splits for e in split_shards(manifest, s)]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(entries) or 1))) as pool:
        fetched = list(pool.map(lambda e: stage_shard(version_uri, local, e), entries))
    log.info(
        "staged %s/%s into %s: %d shards, %d fetched, %d reused after verification",
        manifest.dataset, manifest.version, local, len(entries), sum(fetched),
        len(entries) - sum(fetched),
    )
    return local


def stage_shard(version_uri: str, local_dir: Path, entry: Shard) -> bool:
    """Ensure ``local_dir/<shard path>`` is a verified copy; True when it had to be fetched."""
    dst = local_dir / versions.shard_relpath(entry)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        problem = mismatch(dst, entry)
        if problem is None:
            return False
        log.warning("staged copy %s is not what the manifest lists (%s): fetching it again", dst, problem)
        dst.unlink()
    src = versions.shard_uri(version_uri, entry)
    if storage.is_gcs(src):
        storage.with_retries(lambda: _download(src, dst, entry), f"stage {src}")
    else:
        _download(src, dst, entry)
    return True


def mismatch(path: Path, entry: Shard) -> str | None:
    """Why the local file differs from its manifest entry, or None when it matches."""
    size = path.stat().st_size
    if size != entry.bytes:
        return f"size {size} != manifest {entry.bytes}"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    if digest.hexdigest() != entry.sha256:
        return f"sha256 {digest.hexdigest()} != manifest {entry.sha256}"
    return None


def _download(src: str, dst: Path, entry: Shard) -> None:
    """Stream ``src`` to a temp file while hashing; publish it under ``dst`` only if it matches."""
    fs, path = storage.get_fs(src)
    tmp = dst.with_name(f".{dst.name}{storage.TEMP_MARKER}{uuid.uuid4().hex}")
    digest, size = hashlib.sha256(), 0
    try:
        with fs.open(path, "rb", block_size=CHUNK_BYTES) as fin, open(tmp, "wb") as fout:
            while chunk := fin.read(CHUNK_BYTES):
                digest.update(chunk)
                size += len(chunk)
                fout.write(chunk)
        if size != entry.bytes or digest.hexdigest() != entry.sha256:
            raise ChecksumMismatchError(
                f"{src}: fetched {size} bytes with sha256 {digest.hexdigest()}, but the manifest "
                f"lists {entry.bytes} bytes with sha256 {entry.sha256}: the stored shard "
                "is damaged; refusing to train on it"
            )
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            tmp.unlink()


def _check_entry(entry: Shard) -> None:
    """Shard entries name plain files in the version or a segment; else a bad manifest."""
    missing = [k for k, v in (("bytes", entry.bytes), ("sha256", entry.sha256)) if v is None]
    if missing:
        raise ValueError(f"manifest shard entry {entry.to_json()!r}: missing {missing}")
    versions.shard_relpath(entry)  # raises ValueError naming the entry
