"""Compaction as levels: small consecutive segments merged, so a version lists O(log) segments.

A window's segments are read left to right; a run of consecutive small ones (each under half
the shard target) of one level is merged once it holds ``FAN_IN`` segments or about the
target's bytes, into one segment a level up (LSM-style: nightly segments merge sixteen at a
time, those merges sixteen at a time, ...). The merged segment is a new segment (its id
digests its inputs), never a rewrite: versions that list the inputs keep them. Its records
are the inputs' records, copied byte for byte in their TFRecord framing (each input shard is
first checked against its sha256), and before ``segment.json`` is written the per-split
record counts and content hashes are checked against the inputs'. Its partials are the
inputs' merged and it lists the inputs' partitions, so the window is judged the same from
either, and a later window uses it wherever those partitions appear unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from etl import statistics, storage
from etl.errors import PipelineError
from etl.provenance import code_version, iso
from etl.segments.files import PARTIALS_NPZ, read_partials, row_counts, write_partials
from etl.validation import merge_metric_partials, metric_partials_to_json, summed
from etl.versions import lease, segment
from etl.versions.segment import (
    Interval,
    RowPartial,
    SegmentChecks,
    SegmentMeta,
    SourceFiles,
    SplitInfo,
)
from etl.write import shards
from etl.write import tfds as tfds_meta

log = logging.getLogger("etl.pipeline")

FAN_IN = 16  # small segments merged at once: about log16(days) levels


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


def _label(run: list[SegmentMeta]) -> str:
    """The merged segment's partition label: its first and last partitions'."""
    return f"{str(run[0].partition).split('_')[0]}_{str(run[-1].partition).split('_')[-1]}"


def merged_id(run: list[SegmentMeta]) -> str:
    return segment.segment_id(_label(run), {"merge": [m.segment for m in run]})


def merge_segments(root: str, dataset: str, run: list[SegmentMeta], target_bytes: int,
                   run_id: str) -> SegmentMeta:
    """One merged segment from consecutive ones, under its lease (another run merging the
    same ones is waited for); verified before visible."""
    seg = merged_id(run)
    uri = segment.segment_uri(root, dataset, seg)
    existing, held = lease.claim(uri, run_id)
    if existing is not None:
        return existing
    with lease.Heartbeat(held) as beat:
        try:
            storage.clear_dir(uri, keep=segment.SEGMENT_LOCK)  # a killed merge's leftovers
            meta = _merge(root, dataset, seg, uri, run, target_bytes, run_id)
            beat.check()
            segment.write_segment(uri, meta)
        finally:
            lease.release(beat.stop())
    log.debug("compact %s: %d segment(s) (%s .. %s) merged into %s", dataset, len(run),
              run[0].partition, run[-1].partition, seg)
    return segment.read_segment(uri) or meta


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
    total = sum(m.split(split).num_bytes for m in run)
    count = shards.num_shards_for(total, target_bytes)
    records = sorted(
        ((segment.record_digest(data), framed) for uri, m in zip(uris, run)
         for shard in m.split(split).shards
         for framed, data in shards.read_framed(storage.join(uri, shard.file),
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
    return segment.split_info(entries, segment.content_hash(digests))


def _merge(root: str, dataset: str, seg: str, uri: str, run: list[SegmentMeta],
           target_bytes: int, run_id: str) -> SegmentMeta:
    uris = _inputs(root, dataset, run)
    first = run[0]
    splits = {split: _copy_split(uris, run, split, uri, dataset, first.compression,
                                 target_bytes) for split in first.splits}
    for split, info in splits.items():
        want = [m.splits.get(split) for m in run]
        expected = (sum(w.num_examples for w in want if w),
                    segment.combine_content(w.content_hash for w in want if w))
        if (info.num_examples, info.content_hash) != expected:
            raise PipelineError(f"compaction into {uri}: split {split!r} holds "
                                f"{info.num_examples} records (hash {info.content_hash}), "
                                f"its inputs {expected}; nothing published")
    meta = SegmentMeta.of(
        **_merged_facts(run), format_version=segment.SEGMENT_FORMAT,
        dataset=dataset, segment=seg, partition=_label(run),
        partitions=tuple(p for m in run for p in m.partitions),
        level=first.level + 1, compacted_from=tuple(str(m.segment) for m in run),
        data_interval=Interval.of(start=first.interval.start, end=run[-1].interval.end),
        created_at=iso(datetime.now(UTC)), run_id=run_id,
        code_version=code_version(), compression=first.compression,
        schema=first.schema, splits=splits, built_from=first.built_from)
    meta = _store_partials(uri, uris, run, meta)
    tfds_meta.write_dataset_info(uri, meta)  # stock TFDS reads the folder
    return meta


def _merged_facts(run: list[SegmentMeta]) -> dict[str, Any]:
    """Statistics, dropped rows, fingerprint and row-level partials of the inputs together."""
    dropped: dict[str, int] = {}
    for m in run:
        for reason, n in (m.dropped_rows or {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    rows = [list(p) for p in zip(*(m.checks.row_partials for m in run))]
    return {
        "statistics_partial": statistics.merge_all(m.statistics_partial for m in run),
        "dropped_rows": dropped,
        "source_fingerprint": SourceFiles.of(
            files=tuple(f for m in run for f in m.sources.files),
            lookups=run[0].sources.lookups),
        "validation": SegmentChecks.of(
            rows=sum(m.checks.rows for m in run),
            quarantined_rows=sum(m.checks.quarantined_rows for m in run),
            row_partials=tuple(_sum_row(p) for p in rows),
        ),
    }


def _sum_row(counts: list[RowPartial]) -> RowPartial:
    return RowPartial.of(**summed([row_counts(p) for p in counts]).to_json())


def _store_partials(uri: str, uris: list[str], run: list[SegmentMeta],
                    meta: SegmentMeta) -> SegmentMeta:
    """Merged metric partials and the inputs' keys, and their quarantine, into the merged
    segment (rejected rows stay readable when the inputs are gone); ``meta`` with them."""
    read = [read_partials(u, m) for u, m in zip(uris, run)]
    entries, arrays = metric_partials_to_json(merge_metric_partials([p for p, _ in read]))
    keyed = all(k is not None for _, k in read)
    write_partials(storage.join(uri, PARTIALS_NPZ), arrays,
                   pd.concat([k for _, k in read], ignore_index=True) if keyed else None)
    quarantined = []
    for u, m in zip(uris, run):
        for name in m.checks.quarantine_files:
            dst = f"quarantine/{str(m.partition).split('_')[0]}-{name.rsplit('/', 1)[-1]}"
            storage.write_bytes_atomic(storage.join(uri, dst),
                                       storage.read_bytes(storage.join(u, name)))
            quarantined.append(dst)
    checks = meta.checks
    checks = replace(checks, json_order=(*checks.json_order, "metric_partials",
                                         "metric_arrays", "keys", "quarantine_files"),
                     metric_partials=entries, metric_arrays=PARTIALS_NPZ, keys=keyed,
                     quarantine_files=tuple(quarantined))
    return replace(meta, validation=checks)
