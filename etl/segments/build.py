"""Building a segment, whatever builds it: claimed under its lease, its side files written,
its ``segment.json`` recorded last; and compaction, which builds a segment from smaller ones.

A build holds the segment's lease (``etl.versions.lease.claim``: a live builder -- another
run that needs the same segment -- is waited for, a dead one's lease broken), clears what a
killed build left, writes the shards and side files, and records ``segment.json``: created
only if absent, and only while the lease is still ours (``record``; ``build_once`` does it
all for one segment). Two runs that need the same segment build it once; a killed build
leaves a folder without ``segment.json``, which no reader trusts and the next builder clears.

The side files: the dataset-level metric partials (uint64 arrays; their JSON entries live in
``segment.json``) and the typed key columns that name duplicated keys (Parquet bytes),
together in one ``partials.npz`` -- one object per segment, not one per kind of partial --
read when a window is judged; and ``dataset_info.json``, so stock TFDS loads a version. A
version composed of segments is, to TFDS, a dataset spread over folders:
``tfds.builder_from_directories([<dataset>/segments/<id> for each segment the manifest lists])``
reads every folder's ``dataset_info.json`` and adds up their splits, which gives the
version's split sizes exactly. A single ``dataset_info.json`` per version cannot do this:
TFDS's ``SplitInfo`` finds all of a split's shards in one folder under one file template,
and a version's split spans many segment folders. The JSON shapes follow tensorflow-datasets
4.9 (``DatasetInfo`` proto as JSON, ``FeatureConnector.to_json``), written as plain JSON so
the ETL needs no TFDS import. TFDS reads only plain TFRecords: a GZIP segment gets no TFDS
file.

Compaction, as levels: small consecutive segments merged, so a version lists O(log)
segments. A window's segments are read left to right; a run of consecutive small ones (each
under half the shard target) of one level is merged once it holds ``FAN_IN`` segments or
about the target's bytes, into one segment a level up (LSM-style: nightly segments merge
sixteen at a time, those merges sixteen at a time, ...). The merged segment is a new segment
(its id digests its inputs), never a rewrite: versions that list the inputs keep them. Its
records are the inputs' records, copied byte for byte in their TFRecord framing (each input
shard is first checked against its sha256), and before ``segment.json`` is written the
per-split record counts and content hashes are checked against the inputs'. Its partials
are the inputs' merged and it lists the inputs' partitions, so the window is judged the same
from either, and a later window uses it wherever those partitions appear unchanged.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from etl import statistics, storage
from etl.errors import PipelineError
from etl.validation import MetricPartials, merge_metric_partials, summed
from etl.validation.report import jsonable
from etl.versions import lease, segment
from etl.versions.segment import (
    DATASET_INFO,
    SEGMENT_FILE,
    FeatureSchema,
    Interval,
    LabelSchema,
    Schema,
    SegmentChecks,
    SegmentContents,
    SegmentMeta,
    SegmentOrigin,
    SourceFiles,
    SplitInfo,
)
from etl.write import shards
from etl.write.shards import normalize_compression, shard_filename
from etl.write.writer import combine_content, content_hash, record_digest, split_info

log = logging.getLogger("etl.pipeline")

PARTIALS_NPZ = "partials.npz"
_KEYS = "keys_parquet"  # not a metric array name: those are "k<i>"
TFDS_VERSION = "1.0.0"  # TFDS wants semver, the same in every folder; our ids go in the text
FILEPATH_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_PKG = "tensorflow_datasets.core.features"
FAN_IN = 16  # small segments merged at once: about log16(days) levels


# --- claimed, recorded ---------------------------------------------------------------------

def record(uri: str, meta: SegmentMeta, beat: lease.Heartbeat) -> SegmentMeta:
    """Make a built segment visible: its ``dataset_info.json``, then -- only while its lease
    is still ours -- its ``segment.json``, created only if absent (another builder's, if it
    won the race, is used)."""
    write_dataset_info(uri, meta)  # stock TFDS reads the folder
    beat.check()  # still ours: only then does the segment become visible
    if not segment.write_segment(uri, meta):
        log.warning("%s: another builder published it first; using theirs", uri)
    return segment.read_segment(uri) or meta


def build_once(uri: str, run_id: str, make: Callable[[], SegmentMeta]
               ) -> tuple[SegmentMeta, bool]:
    """(the segment at ``uri``, whether this call built it): found, waited for while a live
    run builds it, or built here by ``make`` (shards and side files into ``uri``) under its
    lease, which is released whatever happens."""
    meta, held = lease.claim(uri, run_id)
    if meta is not None:
        return meta, False
    with lease.Heartbeat(held) as beat:
        try:
            storage.clear_dir(uri, keep=segment.SEGMENT_LOCK)  # a killed build's leftovers
            meta = record(uri, make(), beat)
        finally:
            lease.release(beat.stop())
    return meta, True


# --- side files -----------------------------------------------------------------------------


def write_partials(uri: str, partials: MetricPartials, keys: pd.DataFrame | None) -> list:
    """A segment's dataset-level metric partials stored at ``uri`` (``partials.npz``): their
    arrays (the sorted key hashes) and, if the dataset has a key, its typed columns, in one
    object; the JSON entries of the rest, for ``segment.json`` (``validation.metric_partials``,
    each naming its array)."""
    entries, out = _partials_json(partials)
    if keys is not None:
        buf = io.BytesIO()
        keys.reset_index(drop=True).to_parquet(buf, index=False)
        out[_KEYS] = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **out)
    storage.write_bytes_atomic(uri, buf.getvalue())
    return entries


def _partials_json(partials: MetricPartials) -> tuple[list, dict[str, np.ndarray]]:
    """(JSON-able entries, named uint64 arrays) of metric partials; ``_partials_of`` is the
    inverse (value counts keep their values, timestamps as ISO text)."""
    entries, arrays = [], {}
    for i, (key, value) in enumerate(partials.items()):
        kind = key[0]
        if kind == "hashes":
            name = f"k{i}"
            arrays[name] = np.asarray(value, dtype=np.uint64)
            stored: Any = {"array": name}
        elif kind == "vc":
            stored = {"values": [jsonable(v) for v in value.index],
                      "counts": [int(c) for c in value.to_numpy()]}
        else:
            stored = jsonable(value)
        entries.append({"key": [list(k) if isinstance(k, tuple) else k for k in key],
                        "value": stored})
    return entries, arrays


def _partials_of(entries: Sequence[dict], arrays: Mapping[str, np.ndarray]) -> MetricPartials:
    """The metric partials ``_partials_json`` gave."""
    out: MetricPartials = {}
    for entry in entries:
        key = tuple(tuple(k) if isinstance(k, list) else k for k in entry["key"])
        value = entry["value"]
        if key[0] == "hashes":
            value = np.asarray(arrays[value["array"]], dtype=np.uint64)
        elif key[0] == "vc":
            # named as pandas names a fresh value_counts(): GX reads the "count" column
            value = pd.Series(value["counts"], name="count", dtype="int64",
                              index=pd.Index(value["values"], dtype=object, name=key[1]))
        out[key] = value
    return out


def _load(uri: str, meta: SegmentMeta) -> dict[str, np.ndarray]:
    name = meta.checks.metric_arrays
    if name is None:
        raise PipelineError(f"{uri}/{SEGMENT_FILE}: validation.metric_arrays: expected the "
                            "name of the stored partials, the key is missing")
    with np.load(io.BytesIO(storage.read_bytes(storage.join(uri, name))),
                 allow_pickle=False) as arrays:
        return {k: arrays[k] for k in arrays.files}


def read_partials(uri: str, meta: SegmentMeta) -> tuple[dict, pd.DataFrame | None]:
    """(the dataset-level metric partials, the typed key columns or None) a segment stored."""
    arrays = _load(uri, meta)
    raw_keys = arrays.pop(_KEYS, None)
    keys = None if raw_keys is None else pd.read_parquet(io.BytesIO(raw_keys.tobytes()))
    return _partials_of(meta.checks.metric_partials or [], arrays), keys


def read_statistics(meta: SegmentMeta) -> statistics.StatisticsPartial:
    """The split statistics partial a tabular segment stored in its ``segment.json``."""
    return statistics.StatisticsPartial.from_json(meta.statistics_partial,
                                                  f"segment {meta.segment}", "statistics_partial")


def read_keys(uri: str, meta: SegmentMeta) -> pd.DataFrame:
    """The typed key columns of a segment's valid rows (to name duplicated keys)."""
    keys = read_partials(uri, meta)[1]
    if keys is None:
        raise PipelineError(f"{uri}: the segment stored no keys")
    return keys


def feature_json(feature: FeatureSchema | LabelSchema) -> dict[str, Any]:
    """One FeatureConnector's JSON: Scalar, Text, ClassLabel (a class label) or Image."""
    dtype = feature.dtype
    if isinstance(feature, LabelSchema) and feature.classes is not None:
        return {"pythonClassName": f"{_PKG}.class_label_feature.ClassLabel",
                "classLabel": {"numClasses": str(int(feature.classes))}}
    if isinstance(feature, FeatureSchema) and feature.kind == "image":
        if feature.encoding not in ("png", "jpeg") or len(feature.shape or ()) != 3:
            raise ValueError("image feature: expected shape [h, w, c] and encoding png|jpeg, "
                             f"got {feature.to_json()}")
        dims = [str(-1 if d is None else int(d)) for d in feature.shape or ()]
        return {"pythonClassName": f"{_PKG}.image_feature.Image",
                "image": {"shape": {"dimensions": dims}, "dtype": "uint8",
                          "encodingFormat": feature.encoding}}
    if dtype == "string":
        return {"pythonClassName": f"{_PKG}.text_feature.Text", "text": {}}
    if dtype in ("float32", "int64"):
        return {"pythonClassName": f"{_PKG}.scalar.Scalar",
                "tensor": {"shape": {}, "dtype": dtype, "encoding": "none"}}
    raise ValueError(f"feature dtype {dtype!r}: expected float32, int64 or string")


def features_json(schema: Schema) -> dict[str, Any]:
    """The ``features`` field of a DatasetInfo proto (JSON form): every feature, the label."""
    feats = {name: feature_json(feature) for name, feature in schema.features.items()}
    label = schema.label
    # a float label (regression target) is a Scalar; an integer one is a ClassLabel
    if label.classes is None and label.dtype != "float32":
        raise ValueError(f"schema label {label.name!r}: 'classes' is needed for ClassLabel")
    feats[label.name] = feature_json(label)
    return {"pythonClassName": f"{_PKG}.features_dict.FeaturesDict",
            "featuresDict": {"features": feats}}


def dataset_info_json(meta: SegmentMeta) -> dict[str, Any]:
    """A segment's DatasetInfo proto as JSON, from its ``segment.json`` body; checks that
    shard names follow TFDS's file template (TFDS finds shards by name, not by a list)."""
    dataset, splits = str(meta.dataset), []
    for split, info in meta.splits.items():
        files = info.shards
        for i, shard in enumerate(files):
            expected = shard_filename(dataset, split, i, len(files))
            if shard.file != expected:
                raise ValueError(f"{meta.segment}: split {split!r} shard {i}: file "
                                 f"{shard.file!r}, TFDS expects {expected!r}")
        if files:
            splits.append({"name": split, "filepathTemplate": FILEPATH_TEMPLATE,
                           "numBytes": str(sum(s.bytes for s in files)),
                           "shardLengths": [str(s.records) for s in files]})
    if meta.schema is None:
        raise ValueError(f"{meta.segment}: segment.json has no 'schema', which TFDS needs")
    return {
        "name": dataset, "version": TFDS_VERSION, "fileFormat": "tfrecord",
        "description": f"{dataset} segment {meta.segment} (raw partitions "
                       f"{meta.extent}); load a version with "
                       "tfds.builder_from_directories over the segments its manifest lists",
        "features": features_json(meta.schema),
        "splits": splits,
    }


def write_dataset_info(segment_uri: str, meta: SegmentMeta) -> bool:
    """Write the segment's ``dataset_info.json`` (before its ``segment.json``); False, and
    nothing written, for GZIP shards, which TFDS cannot read."""
    if normalize_compression(meta.compression):
        return False
    storage.write_bytes_atomic(storage.join(segment_uri, DATASET_INFO),
                               storage.json_bytes(dataset_info_json(meta)))
    return True


# --- compaction -----------------------------------------------------------------------------
def groups(metas: list[SegmentMeta], target_bytes: int) -> Iterator[list[SegmentMeta]]:
    """Runs of consecutive small segments of one level that are due for a merge.

    Only equals merge (days with days, merges of days with their likes), so a window built
    night by night and one built at once end up merged the same way.
    """
    run: list[SegmentMeta] = []
    for meta in metas:
        if meta.num_bytes >= target_bytes // 2:
            run = []
            continue
        if run and run[-1].level != meta.level:
            run = []
        run.append(meta)
        if len(run) >= FAN_IN or sum(m.num_bytes for m in run) >= target_bytes:
            yield run
            run = []


def compact_window(root: str, dataset: str, metas: list[SegmentMeta], target_bytes: int,
                   run_id: str) -> list[SegmentMeta]:
    """Merge what is due, level by level, until nothing is; returns the window's segments."""
    current, merges = list(metas), []
    while True:
        due = list(groups(current, target_bytes))
        if not due:
            break
        for run in due:
            merged = merge_segments(root, dataset, run, target_bytes, run_id)
            merges.append(merged)
            at = current.index(run[0])
            current[at:at + len(run)] = [merged]
    if merges:
        log.info("compact %s: %d merge(s) of %d segment(s) into %d (levels %s); the window "
                 "lists %d segment(s)", dataset, len(merges),
                 sum(len(m.compacted_from or ()) for m in merges), len(merges),
                 sorted({m.level for m in merges}), len(current))
    return current


def _extent(run: list[SegmentMeta]) -> str:
    """The merged segment's extent: from its first to its last raw partition."""
    return f"{str(run[0].extent).split('_')[0]}_{str(run[-1].extent).split('_')[-1]}"


def merged_id(run: list[SegmentMeta]) -> str:
    return segment.segment_id(_extent(run), {"merge": [m.segment for m in run]})


def merge_segments(root: str, dataset: str, run: list[SegmentMeta], target_bytes: int,
                   run_id: str) -> SegmentMeta:
    """One merged segment from consecutive ones, under its lease (another run merging the
    same ones is waited for); verified before visible."""
    seg = merged_id(run)
    uri = segment.segment_uri(root, dataset, seg)
    meta, _ = build_once(uri, run_id, lambda: _merge(root, dataset, seg, uri, run,
                                                     target_bytes, run_id))
    log.debug("compact %s: %d segment(s) (%s .. %s) merged into %s", dataset, len(run),
              run[0].extent, run[-1].extent, seg)
    return meta


def _inputs(root: str, dataset: str, run: list[SegmentMeta]) -> list[str]:
    return [segment.segment_uri(root, dataset, str(m.segment)) for m in run]


def _copy_split(uris: list[str], run: list[SegmentMeta], split: str, out_uri: str,
                dataset: str, compression: str | None, target_bytes: int) -> SplitInfo:
    """The inputs' records of one split, ordered by their sha256, into shards of about the
    target; each input shard is checked against its manifest's sha256 and its records are
    copied in their framing.

    Input order would be day order: a reader taking consecutive records from a merged shard
    would then see weeks of one season at a time (training on a segment-composed year lost
    ~0.015 AUC that way). Digest order is as time-free as a segment's own key-hash order,
    and fixed by the records alone, so merging stays deterministic.
    """
    from etl.write.readback import read_framed  # only a merge reads shards back

    total = sum(m.split(split).num_bytes for m in run)
    count = shards.num_shards_for(total, target_bytes)
    records = sorted(
        ((record_digest(data), framed) for uri, m in zip(uris, run)
         for shard in m.split(split).shards
         for framed, data in read_framed(storage.join(uri, shard.file),
                                                shard.sha256, compression)),
        key=lambda pair: pair[0])
    n = len(records)
    per = -(-n // count) if n else 0
    entries = []
    for i in range(count):
        name = shards.shard_filename(dataset, split, i, count, compression)
        part = (framed for _, framed in records[i * per:(i + 1) * per])
        entries.append(shards.write_framed(storage.join(out_uri, name), part, compression))
    digests = [digest for digest, _ in records]
    return split_info(entries, content_hash(digests))


def _merge(root: str, dataset: str, seg: str, uri: str, run: list[SegmentMeta],
           target_bytes: int, run_id: str) -> SegmentMeta:
    """The merged segment's shards (checked against its inputs') and side files; its
    ``segment.json`` to be."""
    uris = _inputs(root, dataset, run)
    first = run[0]
    splits = {split: _copy_split(uris, run, split, uri, dataset, first.compression,
                                 target_bytes) for split in first.splits}
    for split, info in splits.items():
        want = [m.splits.get(split) for m in run]
        expected = (sum(w.num_examples for w in want if w),
                    combine_content(w.content_hash for w in want if w))
        if (info.num_examples, info.content_hash) != expected:
            raise PipelineError(f"compaction into {uri}: split {split!r} holds "
                                f"{info.num_examples} records (hash {info.content_hash}), "
                                f"its inputs {expected}; nothing published")
    dropped: dict[str, int] = {}
    for m in run:
        for reason, n in (m.dropped_rows or {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    origin = SegmentOrigin(
        dataset=dataset, segment=seg, extent=_extent(run),
        partitions=tuple(p for m in run for p in m.partitions),
        interval=Interval.of(start=first.interval.start, end=run[-1].interval.end),
        sources=SourceFiles.of(files=tuple(f for m in run for f in m.sources.files),
                               lookups=run[0].sources.lookups),
        built_from=first.built_from, level=first.level + 1,
        compacted_from=tuple(str(m.segment) for m in run))
    return SegmentMeta.new(origin, SegmentContents(
        splits=splits, schema=first.schema, compression=first.compression,
        validation=_merged_checks(uri, uris, run),
        statistics_partial=statistics.StatisticsPartial.merge_all(
            read_statistics(m) for m in run).to_json(),
        dropped_rows=dropped), run_id)


def _merged_checks(uri: str, uris: list[str], run: list[SegmentMeta]) -> SegmentChecks:
    """The inputs' checks together: rows, row-level partials summed, metric partials merged
    and their keys (``partials.npz``), their quarantine copied into the merged segment
    (rejected rows stay readable when the inputs are gone)."""
    read = [read_partials(u, m) for u, m in zip(uris, run)]
    keyed = all(k is not None for _, k in read)
    entries = write_partials(storage.join(uri, PARTIALS_NPZ),
                             merge_metric_partials([p for p, _ in read]),
                             pd.concat([k for _, k in read], ignore_index=True) if keyed else None)
    quarantined = []
    for u, m in zip(uris, run):
        for name in m.checks.quarantine_files:
            dst = f"quarantine/{str(m.extent).split('_')[0]}-{name.rsplit('/', 1)[-1]}"
            storage.write_bytes_atomic(storage.join(uri, dst),
                                       storage.read_bytes(storage.join(u, name)))
            quarantined.append(dst)
    return SegmentChecks.of(
        rows=sum(m.checks.rows for m in run),
        quarantined_rows=sum(m.checks.quarantined_rows for m in run),
        row_partials=tuple(summed(p) for p in zip(*(m.checks.row_partials for m in run))),
        metric_partials=entries, metric_arrays=PARTIALS_NPZ, keys=keyed,
        quarantine_files=tuple(quarantined))
