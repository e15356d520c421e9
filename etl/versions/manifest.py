"""A version's manifest.json (``Manifest``): reading it, checking shards against it.

Publishing it (created only if absent, then LATEST advanced) is ``etl.versions.catalog``'s.
``format_version`` 1 is the only one written; a manifest of a version published before
segments has no ``layout``, ``segments`` or per-split ``content_hash`` and reads the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from etl import storage
from etl.drift_report import DriftReport
from etl.errors import ChecksumMismatchError, IncompleteVersionError
from etl.jsonobject import JsonObject, key, list_of, mapping_of, nested, pairs
from etl.versions.ids import MANIFEST
from etl.versions.segment import (
    HoldsSplits,
    Interval,
    Schema,
    SplitInfo,
    Statistics,
    folders,
    json_digest,
    referenced,
    shard_uri,
)

FORMAT_VERSION = 1
VOLATILE_MANIFEST_KEYS = ("created_at", "run_id")  # differ between otherwise equal runs
_HASH_BLOCK = 8 * 2**20  # bytes read at once to hash a shard


@dataclass(frozen=True, kw_only=True)
class SegmentEntry(JsonObject):
    """One of the segments a version lists, in window order."""

    segment: str = key(str, required=True)
    extent: str | None = key(str, json="partition")  # the segment's (``SegmentMeta.extent``)
    records: int | None = key(int)
    partitions: tuple[tuple[str, str], ...] = key(list, pairs(), default=())


@dataclass(frozen=True, kw_only=True)
class VersionSources(JsonObject):
    """``source_fingerprint``: the digest of the raw files and lookups a version holds."""

    sha256: str | None = key(str)
    files: list | int | None = key((list, int))  # an old images version: a file count
    lookups_sha256: list | None = key(list)
    source: str | None = key(str)  # an old images version: the folder counted


@dataclass(frozen=True, kw_only=True)
class Verdict(JsonObject):
    """``validation``: the run's verdict on the window (extra keys kept as they are)."""

    kind: str | None = key(str)
    mode: str | None = key(str)
    success: bool | None = key(bool)
    evaluated_rows: int | None = key(int)
    quarantined_rows: int | None = key(int)
    max_quarantined: int | None = key(int)
    reasons: Mapping[str, Any] | None = key(dict)
    expectations: list | None = key(list)
    quarantine_files: tuple[str, ...] | None = key(list)
    drift: DriftReport | None = key(dict, nested(DriftReport))  # etl.drift_report
    results: str | None = key(str)  # relative paths of the GX results and Data Docs
    data_docs: str | None = key(str)
    timings_s: Mapping[str, Any] | None = key(dict)

    @property
    def drift_history(self) -> Mapping[str, list[float]] | None:
        """The drift report's ``history`` (earlier versions' figures), None without one."""
        return self.drift.history if self.drift is not None else None


@dataclass(frozen=True, kw_only=True)
class SpecFacts(JsonObject):
    """``spec``: what of the spec a version was built with."""

    name: str | None = key(str)
    split: Mapping[str, float] | None = key(dict)
    salt: str | None = key(str)
    shard_target_bytes: int | None = key(int)
    encoder: str | None = key(str)


@dataclass(frozen=True, kw_only=True)
class Manifest(JsonObject, HoldsSplits):
    """A version's ``manifest.json`` (docs/INTERFACES.md)."""

    format_version: int | None = key(int)
    layout: str | None = key(str)  # "segments": its shards live in segment folders
    dataset: str | None = key(str)
    version: str | None = key(str)
    data_interval: Interval | None = key(dict, nested(Interval))
    created_at: str | None = key(str)  # set when published
    run_id: str | None = key(str)
    dag_id: str | None = key(str)
    code_version: str | None = key(str)
    compression: str | None = key(str)
    splits: Mapping[str, SplitInfo] = key(dict, mapping_of(SplitInfo), default={})
    schema: Schema | None = key(dict, nested(Schema))
    statistics: Statistics | None = key(dict, nested(Statistics))
    segments: tuple[SegmentEntry, ...] = key(list, list_of(SegmentEntry), default=())
    source_fingerprint: VersionSources | None = key(dict, nested(VersionSources))
    validation: Verdict | None = key(dict, nested(Verdict))
    spec: SpecFacts | None = key(dict, nested(SpecFacts))

    @property
    def verdict(self) -> Verdict:
        """``validation``, empty when the manifest has none."""
        return self.validation or Verdict()

    @property
    def sources(self) -> VersionSources:
        return self.source_fingerprint or VersionSources()

    @property
    def composed(self) -> bool:
        """Its shards live in segment folders (``layout`` "segments")."""
        return self.layout == "segments"

    def referenced(self) -> set[str]:
        """The segments its shards are stored in (empty for a version with its own)."""
        return referenced(self.splits)

    def folders(self, version_uri: str) -> list[str]:
        """The segment folders it lists, in window order (``etl.versions.segment.folders``)."""
        return folders(version_uri, [s.segment for s in self.segments], self.splits)


def read_manifest(uri: str) -> Manifest:
    """The version's manifest (extra keys kept); IncompleteVersionError if unpublished."""
    path = storage.join(uri, MANIFEST)
    try:
        obj = storage.read_json(path)
    except FileNotFoundError:
        raise IncompleteVersionError(
            f"{uri}: no {MANIFEST}, so the version is not published (absent or being written)"
        ) from None
    fmt = obj.get("format_version") if isinstance(obj, dict) else None
    if not isinstance(fmt, int) or fmt > FORMAT_VERSION or not isinstance(obj.get("splits"),
                                                                           dict):
        raise ValueError(
            f"{path}: expected a format_version <= {FORMAT_VERSION} manifest with a 'splits' "
            f"object, got format_version={fmt!r}"
        )
    return Manifest.from_json(obj, path)


def verify_shards(uri: str, manifest: Manifest, checksums: bool = True) -> int:
    """Check every shard's size (and sha256) against the manifest; returns shards checked.

    Raises:
        ChecksumMismatchError: names the file, the expected and the actual value.
    """
    count = 0
    for split, info in manifest.splits.items():
        for shard in info.shards:
            path = shard_uri(uri, shard)
            try:
                size = storage.stat(path)["size"]
            except FileNotFoundError:
                raise ChecksumMismatchError(
                    f"{path} ({split}): listed in the manifest but missing"
                ) from None
            if size != shard.bytes:
                raise ChecksumMismatchError(f"{path}: expected {shard.bytes} bytes, found {size}")
            if checksums and (actual := _sha256(path)) != shard.sha256:
                raise ChecksumMismatchError(
                    f"{path}: expected sha256 {shard.sha256}, got {actual}"
                )
            count += 1
    return count


def _sha256(uri: str) -> str:
    digest = hashlib.sha256()
    with storage.open_read(uri) as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def manifest_sha256(
    manifest: Manifest, exclude: tuple[str, ...] = VOLATILE_MANIFEST_KEYS
) -> str:
    """Fingerprint of a manifest's content, ignoring per-run keys: equal data, equal hash."""
    return json_digest({k: v for k, v in manifest.to_json().items() if k not in exclude})


def format_shards(manifest: Manifest) -> str:
    """The shard table of a manifest: file, records, bytes, per split with totals."""
    lines = [f"{'shard':<52} {'records':>10} {'bytes':>13}"]
    order = {"train": 0, "eval": 1, "validation": 1, "test": 2}
    for split, info in sorted(manifest.splits.items(), key=lambda kv: order.get(kv[0], 3)):
        if manifest.composed:  # one line per split: a year of daily segments is 1000 shards
            segs = len({s.segment for s in info.shards})
            lines.append(f"  {len(info.shards)} shard(s) in {segs} segment(s)")
        else:
            lines += [f"{shard.file:<52} {shard.records:>10} {shard.bytes:>13}"
                      for shard in info.shards]
        lines.append(f"{'  ' + split + ' total':<52} {info.num_examples:>10} "
                     f"{info.num_bytes:>13}")
    return "\n".join(lines)
