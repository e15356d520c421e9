"""Segments: the immutable, validated, encoded output of a run of raw partitions.

A segment lives in ``<root>/datasets/<dataset>/segments/<segment id>/``: TFDS-named shards,
the window checks' ``partials.npz`` and ``segment.json`` (``SegmentMeta``), written last
and created only if absent: a folder without it is unfinished and no reader looks inside.
Versions list the segments of their window (each shard entry names its ``segment``), so a
segment is written once and shared by every version whose window holds it.

The id is ``<extent>-<digest>``: the extent of its raw partitions (``20130101``,
``20130101_20130131``, ``all``) and a digest of everything the segment's bytes depend on (the
raw files with their sizes and generations, the lookups, the spec and suite, the label's
classes, the format). A re-delivered day gets a new id, so a published segment is never
rewritten. Import-light: no dask, GX or TF.

``Shard`` and ``SplitInfo`` are a split's entry in ``segment.json`` and in a version's
``manifest.json`` alike (``etl.versions.manifest``).

Both files are typed JSON objects (``etl.jsonobject.JsonObject``), read and written back key
for key: a field is named as its JSON key or says the older key it is stored under, as
``extent`` is under ``partition``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from etl import storage
from etl.jsonobject import SCALARS, JsonObject, key, list_of, mapping_of, nested, pairs, strings
from etl.provenance import code_version, iso
from etl.versions.ids import _PLAIN_NAME, MANIFEST, SEGMENTS_DIR, dataset_uri


@dataclass(frozen=True, kw_only=True)
class Shard(JsonObject):
    """One TFRecord shard: in the version's folder, or in ``segments/<segment>/``."""

    file: str = key(str, required=True)
    records: int | None = key(int)
    bytes: int | None = key(int)
    sha256: str | None = key(str)
    segment: str | None = key(str)  # manifests of segment-composed versions name it


@dataclass(frozen=True, kw_only=True)
class SplitInfo(JsonObject):
    """A split: its records, bytes, the order-free hash of its records and its shards."""

    num_examples: int = key(int, default=0)
    num_bytes: int = key(int, default=0)
    content_hash: str | None = key(str)  # absent in versions written before segments
    shards: tuple[Shard, ...] = key(list, list_of(Shard), default=())


@dataclass(frozen=True, kw_only=True)
class RowCounts(JsonObject):
    """One segment's rows against one row-level expectation (made, summed: etl.validation.rows)."""

    json_order: tuple[str, ...] = field(repr=False, compare=False, default=(  # a new one's keys
        "element_count", "missing_count", "unexpected_count", "values", "examples", "error"))
    element_count: int = key(int, default=0)
    missing_count: int = key(int, default=0)
    unexpected_count: int = key(int, default=0)
    values: tuple[Any, ...] = key(list, strings(object), default=())  # as they arrived
    examples: tuple[Any, ...] = key(list, strings(object), default=())  # key and checked columns
    error: str | None = key(str)  # what GX raised


@dataclass(frozen=True, kw_only=True)
class SegmentChecks(JsonObject):
    """``validation`` of ``segment.json``: row counts, quarantine, the stored partials."""

    rows: int = key(int, default=0)
    quarantined_rows: int = key(int, default=0)
    misfiled_rows: int | None = key(int)
    quarantine_files: tuple[str, ...] = key(list, strings(), default=())
    reasons: Mapping[str, Any] | None = key(dict)  # images: rejected files per reason
    row_partials: tuple[RowCounts, ...] = key(list, list_of(RowCounts), default=())
    metric_partials: list | None = key(list)  # their JSON entries (etl.segments.build)
    metric_arrays: str | None = key(str)  # the side file holding their arrays
    keys: bool | None = key(bool)  # the side file holds the key columns


@dataclass(frozen=True, kw_only=True)
class SourceFiles(JsonObject):
    """``source_fingerprint`` of a segment: its raw files and the lookups' digest."""

    files: tuple[Mapping[str, Any], ...] = key(list, default=())
    lookups: str | None = key(str)


@dataclass(frozen=True, kw_only=True)
class Interval(JsonObject):
    """``data_interval`` of a segment or a version: ISO-8601 start (None: from the beginning) and end."""

    start: str | None = key(str)
    end: str | None = key(str)


@dataclass(frozen=True, kw_only=True)
class LabelSchema(JsonObject):
    """``schema.label``: the label column, its task and (a class label) its classes."""

    name: str = key(str, required=True)
    dtype: str | None = key(str)
    task: str | None = key(str)  # binary when absent (versions written before tasks)
    classes: int | None = key(int)
    names: tuple[Any, ...] | None = key(list, strings(SCALARS))
    transform: str | None = key(str)  # regression: what the core learns (log1p)
    # binary: the source values that are class 1 (the spec's ``label.positive``)
    positive: tuple[Any, ...] | None = key(list, strings(SCALARS))

    @property
    def task_name(self) -> str:
        return self.task or "binary"

    @property
    def named_classes(self) -> list[str] | None:
        """The spec's ``names``; a binary ``positive``: ``not <positive>``, ``<positive>``."""
        if self.names:
            return [str(n) for n in self.names]
        if self.positive:
            positive = "/".join(str(v) for v in self.positive)
            return [f"not {positive}", positive]
        return None

    @property
    def class_names(self) -> list[str]:
        """The classes in output order: the named ones, else the class ids (``classes`` of
        them, two for a binary label written before labels carried a count)."""
        return self.named_classes or [str(n) for n in range(int(self.classes or 2))]


@dataclass(frozen=True, kw_only=True)
class FeatureSchema(JsonObject):
    """One entry of ``schema.features``: its Example dtype and kind (an image's shape too)."""

    dtype: str | None = key(str)
    kind: str | None = key(str)
    shape: tuple[int, ...] | None = key(list, strings(SCALARS))
    encoding: str | None = key(str)
    augment: Mapping[str, Any] | None = key(dict)


@dataclass(frozen=True, kw_only=True)
class Schema(JsonObject):
    """``schema`` of a manifest and a segment: key columns, the label, the features (in
    Example order), the spec's training overrides and tuning settings."""

    label: LabelSchema = key(dict, nested(LabelSchema), required=True)
    key_columns: tuple[Any, ...] = key(list, strings(SCALARS), default=(), json="key")
    features: Mapping[str, FeatureSchema] = key(dict, mapping_of(FeatureSchema), default={})
    training: Mapping[str, Any] | None = key(dict)  # the spec's ``training:`` overrides
    tune: Mapping[str, Any] | None = key(dict)  # the spec's ``tune:`` block (training.run.tune)

    @property
    def columns(self) -> list[str]:
        """The Example's columns: the features, then the label."""
        return [*self.features, self.label.name]

    def with_label(self, label: LabelSchema) -> Schema:
        """This schema with the label as a version resolved it (its classes)."""
        return dataclasses.replace(self, label=label)


@dataclass(frozen=True, kw_only=True)
class Moments(JsonObject):
    """A numeric column's train moments in ``statistics`` (``var`` the population variance)."""

    mean: float = key((int, float), default=0.0)
    var: float = key((int, float), default=0.0)
    min: float = key((int, float), default=0.0)
    max: float = key((int, float), default=0.0)
    count: int = key(int, default=0)


@dataclass(frozen=True, kw_only=True)
class Statistics(JsonObject):
    """``statistics`` of a manifest (and of an images segment): what the train split holds,
    from the merged per-segment partials (``etl.statistics.finalize``) or computed whole."""

    computed_on: str | None = key(str)
    num_examples: int | None = key(int)
    numeric: Mapping[str, Moments] = key(dict, mapping_of(Moments), default={})
    label: Moments | None = key(dict, nested(Moments))  # a regression label's
    vocabularies: Mapping[str, list] = key(dict, default={})
    vocabulary_counts: Mapping[str, Mapping[str, int]] = key(dict, default={})
    null_counts: Mapping[str, int] = key(dict, default={})
    label_counts: Mapping[str, int] = key(dict, default={})
    split_counts: Mapping[str, int] = key(dict, default={})
    dropped_rows: Mapping[str, int] | None = key(dict)  # tabular: rows a filter dropped
    images: Mapping[str, Any] | None = key(dict)  # images: height and width ranges


class HoldsSplits:
    """What a version's manifest and a segment's ``segment.json`` both answer from their
    ``splits`` and ``data_interval`` (the fields of both dataclasses)."""

    splits: Mapping[str, SplitInfo]
    data_interval: Interval | None

    @property
    def interval(self) -> Interval:
        return self.data_interval or Interval()

    @property
    def num_examples(self) -> int:
        return sum(info.num_examples for info in self.splits.values())

    @property
    def num_bytes(self) -> int:
        return sum(info.num_bytes for info in self.splits.values())

    @property
    def num_shards(self) -> int:
        return sum(len(info.shards) for info in self.splits.values())

    def split(self, name: str) -> SplitInfo:
        """The split's entry, empty if it holds none of that split."""
        return self.splits.get(name) or SplitInfo()


@dataclass(frozen=True)
class SegmentOrigin:
    """What a segment is built from, which is what names it: its dataset and id, its raw
    partitions (their extent, ``(key, digest)`` each, the interval of the window they hold),
    the files and lookups read, the spec it was built with; a compacted segment's level and
    the segments merged into it. One half of ``SegmentMeta.new``."""

    dataset: str
    segment: str
    extent: str
    partitions: tuple[tuple[str, str], ...]
    interval: Interval
    sources: SourceFiles | None = None
    built_from: Mapping[str, Any] | None = None  # the digests of what its rows depend on
    level: int = 0
    compacted_from: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SegmentContents:
    """What a segment's build wrote and found: its splits' shards (compressed so), the schema
    they follow, its row checks, its statistics (a tabular segment's partial, merged per
    window; an images segment's, computed whole) and the rows a filter dropped. The other
    half of ``SegmentMeta.new``."""

    splits: Mapping[str, SplitInfo]
    schema: Schema | None
    compression: str | None
    validation: SegmentChecks
    statistics: Statistics | None = None
    statistics_partial: Mapping[str, Any] | None = None
    dropped_rows: Mapping[str, int] | None = None


@dataclass(frozen=True, kw_only=True)
class SegmentMeta(JsonObject, HoldsSplits):
    """A segment's ``segment.json``. ``format_version`` 1 (before ``dataset_info.json``) and
    2 read alike; a segment built by compaction has a ``level`` and ``compacted_from``."""

    format_version: int | None = key(int)  # read_segment refuses a file without one
    dataset: str | None = key(str)
    segment: str | None = key(str)
    # the extent of its raw partitions: 20130101, or 20130101_20130131 for a run of them
    # (stored as ``partition``, the key's name in every segment.json written so far)
    extent: str | None = key(str, json="partition")
    partitions: tuple[tuple[str, str], ...] = key(list, pairs(), default=())  # (key, digest) each
    level: int = key(int, default=0)  # compaction level: 0 for a built segment
    compacted_from: tuple[str, ...] | None = key(list, strings())
    data_interval: Interval | None = key(dict, nested(Interval))
    created_at: str | None = key(str)
    run_id: str | None = key(str)
    code_version: str | None = key(str)
    compression: str | None = key(str)
    schema: Schema | None = key(dict, nested(Schema))
    splits: Mapping[str, SplitInfo] = key(dict, mapping_of(SplitInfo), required=True)
    statistics: Statistics | None = key(dict, nested(Statistics))  # images: computed whole
    # tabular: merged per window; the JSON of an ``etl.statistics.StatisticsPartial``, read
    # through it (``etl.segments.build.read_statistics``): training and the UI never import
    # etl.statistics (pyproject.toml), so this record keeps it as the JSON it is stored as
    statistics_partial: Mapping[str, Any] | None = key(dict)
    source_fingerprint: SourceFiles | None = key(dict, nested(SourceFiles))
    built_from: Mapping[str, Any] | None = key(dict)
    validation: SegmentChecks | None = key(dict, nested(SegmentChecks))
    dropped_rows: Mapping[str, int] | None = key(dict)
    timings: Mapping[str, Any] | None = key(dict)

    @property
    def checks(self) -> SegmentChecks:
        """``validation``, empty when the file has none."""
        return self.validation or SegmentChecks()

    @property
    def sources(self) -> SourceFiles:
        return self.source_fingerprint or SourceFiles()

    @classmethod
    def new(cls, origin: SegmentOrigin, contents: SegmentContents, run_id: str) -> SegmentMeta:
        """The ``segment.json`` a build writes -- from raw rows (a kind's) or from smaller
        segments (compaction) --: what the segment is built from and what the build wrote,
        stamped with the run, this code's version and now; optional keys written only when
        set."""
        given = {"source_fingerprint": origin.sources, "level": origin.level or None,
                 "compacted_from": origin.compacted_from, "built_from": origin.built_from,
                 "statistics": contents.statistics,
                 "statistics_partial": contents.statistics_partial,
                 "dropped_rows": contents.dropped_rows}
        return cls.of(
            format_version=SEGMENT_FORMAT, dataset=origin.dataset, segment=origin.segment,
            extent=origin.extent, partitions=origin.partitions, data_interval=origin.interval,
            created_at=iso(datetime.now(UTC)), run_id=run_id, code_version=code_version(),
            compression=contents.compression, schema=contents.schema, splits=contents.splits,
            validation=contents.validation,
            **{k: v for k, v in given.items() if v is not None})


Metas = list[tuple[str, SegmentMeta]]  # (segment URI, segment.json), in window order
SEGMENT_FILE = "segment.json"
DATASET_INFO = "dataset_info.json"  # TFDS's metadata of the folder (etl.segments.build writes it)
SEGMENT_FORMAT = 2  # 2: the folder holds dataset_info.json (a new id, so every segment has it)
SEGMENT_LOCK = "_WRITER"
GRACE_S = 12 * 3600.0  # an unlisted segment younger than this may be a live run's (DAG: 8 h)


def json_digest(value: Any) -> str:
    """sha256 (hex) of a JSON-able value, keys sorted (anything else as its ``str``): the one
    digest of a description -- a segment's material, a partition's, a source listing."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def segment_id(extent: str, material: Mapping[str, Any]) -> str:
    """``<extent>-<16 hex>`` from the segment's extent and a JSON-able description of what its
    bytes depend on."""
    seg = f"{extent}-{json_digest({'format': SEGMENT_FORMAT, **material})[:16]}"
    if not _PLAIN_NAME.match(seg):
        raise ValueError(f"segment id {seg!r}: the segment's extent must be a plain name")
    return seg


def segments_uri(root: str, dataset: str) -> str:
    return storage.join(dataset_uri(root, dataset), SEGMENTS_DIR)


def segment_uri(root: str, dataset: str, seg: str) -> str:
    if not isinstance(seg, str) or not _PLAIN_NAME.match(seg) or ".." in seg:
        raise ValueError(f"segment id {seg!r}: expected a plain name (letters, digits, ._=-)")
    return storage.join(segments_uri(root, dataset), seg)


def read_segment(uri: str) -> SegmentMeta | None:
    """The segment's ``segment.json``, or None while it is absent (unbuilt or unfinished)."""
    path = storage.join(uri, SEGMENT_FILE)
    try:
        obj = storage.read_json(path)
    except FileNotFoundError:
        return None
    fmt = obj.get("format_version") if isinstance(obj, dict) else None
    if not isinstance(fmt, int) or fmt > SEGMENT_FORMAT or not isinstance(obj.get("splits"),
                                                                          dict):
        raise ValueError(f"{uri}/{SEGMENT_FILE}: expected a format_version <= {SEGMENT_FORMAT} "
                         f"segment with a 'splits' object, got format_version={fmt!r}")
    return SegmentMeta.from_json(obj, path)


def write_segment(uri: str, meta: SegmentMeta) -> bool:
    """Create ``segment.json`` only if absent (the segment becomes visible); False if another
    builder created it first."""
    return storage.create_if_absent(storage.join(uri, SEGMENT_FILE),
                                    storage.json_bytes(meta.to_json()))


def list_segments(root: str, dataset: str) -> list[str]:
    """Ids of the dataset's finished segments (those with ``segment.json``)."""
    base = segments_uri(root, dataset)
    return sorted(name for name in storage.list_dir(base)
                  if storage.exists(storage.join(base, name, SEGMENT_FILE)))


def referenced(splits: Mapping[str, SplitInfo]) -> set[str]:
    """The segments whose shards ``splits`` lists (empty for a version with its own shards)."""
    return {shard.segment for info in splits.values() for shard in info.shards if shard.segment}


def folders(version_uri: str, listed: Iterable[str], splits: Mapping[str, SplitInfo]
            ) -> list[str]:
    """URIs of the segment folders a version lists (``listed``, its ``segments`` in window
    order, then any other its shards name): what ``tfds.builder_from_directories`` takes to
    load the version (each holds a ``dataset_info.json``); empty for a version with its own
    shards."""
    ds_uri = version_uri.rstrip("/").rsplit("/", 1)[0]
    listed = list(listed)
    listed += sorted(referenced(splits) - set(listed))
    for seg in listed:
        if not isinstance(seg, str) or not _PLAIN_NAME.match(seg) or ".." in seg:
            raise ValueError(f"{version_uri}/{MANIFEST}: segment {seg!r}: expected a plain name")
    return [storage.join(ds_uri, SEGMENTS_DIR, seg) for seg in listed]


def shard_relpath(shard: Shard) -> str:
    """A shard's path below its dataset folder's version or segment.

    ``file`` alone lives in the version folder (every version published before segments);
    with ``segment`` it lives in ``segments/<segment>/``, shared by the versions that list it.
    Both must be plain names, so a manifest cannot point outside the dataset.
    """
    name, seg = shard.file, shard.segment
    for what, value in (("file", name), ("segment", seg)):
        if (value is not None or what == "file") and not (
                isinstance(value, str) and _PLAIN_NAME.match(value) and ".." not in value):
            raise ValueError(f"manifest shard entry {shard.to_json()!r}: {what} {value!r} must "
                             "be a plain file name (letters, digits, '.', '_', '=', '-')")
    return f"{SEGMENTS_DIR}/{seg}/{name}" if seg else name


def shard_uri(version_uri: str, shard: Shard) -> str:
    """Where a shard listed in the manifest of ``version_uri`` is stored."""
    rel = shard_relpath(shard)
    base = version_uri.rstrip("/")
    return storage.join(base.rsplit("/", 1)[0] if shard.segment else base, rel)


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
