"""Segments: the immutable, validated, encoded output of a run of raw partitions.

A segment lives in ``<root>/datasets/<dataset>/segments/<segment id>/``: TFDS-named shards,
the window checks' ``partials.npz`` and ``segment.json``, written last
and created only if absent: a folder without it is unfinished and no reader looks inside.
Versions list the segments of their window (each shard entry names its ``segment``), so a
segment is written once and shared by every version whose window holds it.

The id is ``<partition>-<digest>``: the partition (``20130101``, ``all``) and a digest of
everything the segment's bytes depend on (the raw files with their sizes and generations,
the lookups, the spec and suite, the label's classes, the format). A re-delivered day gets a
new id, so a published segment is never rewritten. Import-light: no dask, GX or TF.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from etl import storage
from etl.versions.ids import (
    _PLAIN_NAME,
    MANIFEST,
    SEGMENTS_DIR,
    WRITER_LOCK,
    dataset_uri,
    is_version_id,
)

SEGMENT_FILE = "segment.json"
DATASET_INFO = "dataset_info.json"  # TFDS's metadata of the folder (etl.write.tfds writes it)
SEGMENT_FORMAT = 2  # 2: the folder holds dataset_info.json (a new id, so every segment has it)
SEGMENT_LOCK = "_WRITER"
GRACE_S = 12 * 3600.0  # an unlisted segment younger than this may be a live run's (DAG: 8 h)
_MOD = 2**256


def segment_id(partition: str, material: Mapping[str, Any]) -> str:
    """``<partition>-<16 hex>`` from a JSON-able description of what the bytes depend on."""
    blob = json.dumps({"format": SEGMENT_FORMAT, **material}, sort_keys=True, default=str)
    seg = f"{partition}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"
    if not _PLAIN_NAME.match(seg):
        raise ValueError(f"segment id {seg!r}: the partition label must be a plain name")
    return seg


def segments_uri(root: str, dataset: str) -> str:
    return storage.join(dataset_uri(root, dataset), SEGMENTS_DIR)


def segment_uri(root: str, dataset: str, seg: str) -> str:
    if not isinstance(seg, str) or not _PLAIN_NAME.match(seg) or ".." in seg:
        raise ValueError(f"segment id {seg!r}: expected a plain name (letters, digits, ._=-)")
    return storage.join(segments_uri(root, dataset), seg)


def read_segment(uri: str) -> dict[str, Any] | None:
    """The segment's ``segment.json``, or None while it is absent (unbuilt or unfinished)."""
    try:
        meta = storage.read_json(storage.join(uri, SEGMENT_FILE))
    except FileNotFoundError:
        return None
    fmt = meta.get("format_version") if isinstance(meta, dict) else None
    if not isinstance(fmt, int) or fmt > SEGMENT_FORMAT or not isinstance(meta.get("splits"),
                                                                          dict):
        raise ValueError(f"{uri}/{SEGMENT_FILE}: expected a format_version <= {SEGMENT_FORMAT} "
                         f"segment with a 'splits' object, got format_version={fmt!r}")
    return meta


def list_segments(root: str, dataset: str) -> list[str]:
    """Ids of the dataset's finished segments (those with ``segment.json``)."""
    base = segments_uri(root, dataset)
    return sorted(name for name in storage.list_dir(base)
                  if storage.exists(storage.join(base, name, SEGMENT_FILE)))


def referenced(manifest: Mapping[str, Any]) -> set[str]:
    """The segments a version manifest lists (empty for a version with its own shards)."""
    return {shard["segment"] for info in manifest.get("splits", {}).values()
            for shard in info.get("shards", []) if shard.get("segment")}


def folders(version_uri: str, manifest: Mapping[str, Any]) -> list[str]:
    """URIs of the segment folders a version lists, in window order: what
    ``tfds.builder_from_directories`` takes to load the version (each holds a
    ``dataset_info.json``); empty for a version with its own shards."""
    ds_uri = version_uri.rstrip("/").rsplit("/", 1)[0]
    listed = [s["segment"] for s in manifest.get("segments") or []]
    listed += sorted(referenced(manifest) - set(listed))
    for seg in listed:
        if not isinstance(seg, str) or not _PLAIN_NAME.match(seg) or ".." in seg:
            raise ValueError(f"{version_uri}/{MANIFEST}: segment {seg!r}: expected a plain name")
    return [storage.join(ds_uri, SEGMENTS_DIR, seg) for seg in listed]


def record_digest(record: bytes | memoryview) -> int:
    return int.from_bytes(hashlib.sha256(record).digest(), "big")


def content_hash(digests: Iterable[int]) -> str:
    """Order-free hash of a multiset of records: the sum of their sha256 values mod 2**256.

    The same records give the same hash however they are grouped into segments and shards,
    and the hashes of parts combine with ``combine_content`` without reading a record.
    """
    return f"{sum(digests) % _MOD:064x}"


def combine_content(hashes: Iterable[str]) -> str:
    return f"{sum(int(h, 16) for h in hashes) % _MOD:064x}"


def in_use(root: str, dataset: str) -> set[str]:
    """Segments some version lists: published (manifest) or being published (the draft in
    its handed-off writer lease).

    A model trained on a version keeps that version (``retain`` refuses to delete it), so
    its segments are kept through it.
    """
    base = dataset_uri(root, dataset)
    used: set[str] = set()
    for name in storage.list_dir(base):
        if not is_version_id(name):
            continue
        for fname, pick in ((MANIFEST, lambda d: d),
                            (WRITER_LOCK, lambda d: (d.get("payload") or {}).get("manifest", {}))):
            try:
                used |= referenced(pick(storage.read_json(storage.join(base, name, fname))))
            except (FileNotFoundError, ValueError, AttributeError):
                continue
    return used


def unused(root: str, dataset: str, grace_s: float,
           now: dt.datetime | None = None) -> list[str]:
    """Finished segments no version lists and older than ``grace_s`` (a run composes its
    version from segments it built minutes ago: those are not yet listed anywhere)."""
    now = now or dt.datetime.now(dt.UTC)
    used = in_use(root, dataset)
    out = []
    for seg in list_segments(root, dataset):
        if seg in used:
            continue
        meta = read_segment(segment_uri(root, dataset, seg)) or {}
        try:
            age = (now - dt.datetime.fromisoformat(str(meta.get("created_at")))).total_seconds()
        except ValueError:
            age = grace_s + 1  # unreadable time: old enough, it is listed by nothing
        if age > grace_s:
            out.append(seg)
    return out


def unfinished(root: str, dataset: str) -> list[str]:
    """Segment folders without ``segment.json``: builds in flight or killed."""
    base = segments_uri(root, dataset)
    return sorted(name for name in storage.list_dir(base)
                  if not storage.exists(storage.join(base, name, SEGMENT_FILE)))


def delete_segment(root: str, dataset: str, seg: str) -> None:
    """``segment.json`` first, so no reader trusts the folder while its shards go."""
    uri = segment_uri(root, dataset, seg)
    storage.delete_tree(storage.join(uri, SEGMENT_FILE))
    storage.delete_tree(uri)
