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
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from etl import storage
from etl.errors import PipelineError
from etl.provenance import code_version, iso
from etl.segments.claim import claim
from etl.segments.files import PARTIALS_NPZ, read_partials, write_partials
from etl.transform import stats as stats_mod
from etl.validation import RowCounts, merge_metric_partials, metric_partials_to_json, summed
from etl.versions import lease, segments
from etl.write import shards
from etl.write import tfds as tfds_meta

log = logging.getLogger("etl.pipeline")

FAN_IN = 16  # small segments merged at once: about log16(days) levels


def _bytes(meta: dict[str, Any]) -> int:
    return sum(info["num_bytes"] for info in meta["splits"].values())


def groups(metas: list[dict[str, Any]], target_bytes: int) -> Iterator[list[dict[str, Any]]]:
    """Runs of consecutive small segments of one level that are due for a merge.

    Only equals merge (days with days, merges of days with their likes), so a window built
    night by night and one built at once end up merged the same way.
    """
    run: list[dict[str, Any]] = []
    for meta in metas:
        if _bytes(meta) >= target_bytes // 2:
            run = []
            continue
        if run and run[-1].get("level", 0) != meta.get("level", 0):
            run = []
        run.append(meta)
        if len(run) >= FAN_IN or sum(_bytes(m) for m in run) >= target_bytes:
            yield run
            run = []


def compact_window(root: str, dataset: str, metas: list[dict[str, Any]], target_bytes: int,
                   run_id: str) -> list[dict[str, Any]]:
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
                 sum(len(m["compacted_from"]) for m in merges), len(merges),
                 sorted({m["level"] for m in merges}), len(current))
    return current


def merged_id(run: list[dict[str, Any]]) -> str:
    first, last = run[0]["partition"].split("_")[0], run[-1]["partition"].split("_")[-1]
    return segments.segment_id(f"{first}_{last}", {"merge": [m["segment"] for m in run]})


def merge_segments(root: str, dataset: str, run: list[dict[str, Any]], target_bytes: int,
                   run_id: str) -> dict[str, Any]:
    """One merged segment from consecutive ones, under its lease (another run merging the
    same ones is waited for); verified before visible."""
    seg = merged_id(run)
    uri = segments.segment_uri(root, dataset, seg)
    existing, held = claim(uri, run_id)
    if existing is not None:
        return existing
    with lease.Heartbeat(held) as beat:
        try:
            storage.clear_dir(uri, keep=segments.SEGMENT_LOCK)  # a killed merge's leftovers
            meta = _merge(root, dataset, seg, uri, run, target_bytes, run_id)
            beat.check()
            storage.create_if_absent(storage.join(uri, segments.SEGMENT_FILE),
                                     storage.json_bytes(meta))
        finally:
            lease.release(beat.stop())
    log.debug("compact %s: %d segment(s) (%s .. %s) merged into %s", dataset, len(run),
              run[0]["partition"], run[-1]["partition"], seg)
    return segments.read_segment(uri) or meta


def _inputs(root: str, dataset: str, run: list[dict[str, Any]]) -> list[str]:
    return [segments.segment_uri(root, dataset, m["segment"]) for m in run]


def _copy_split(uris: list[str], run: list[dict[str, Any]], split: str, out_uri: str,
                dataset: str, compression: str | None, target_bytes: int) -> dict[str, Any]:
    """The inputs' records of one split, ordered by their sha256, into shards of about the
    target; each input shard is checked against its manifest's sha256 and its records are
    copied in their framing.

    Input order would be day order: a reader taking consecutive records from a merged shard
    would then see weeks of one season at a time (training on a segment-composed year lost
    ~0.015 AUC that way). Digest order is as time-free as a segment's own key-hash order,
    and fixed by the records alone, so merging stays deterministic.
    """
    total = sum((m["splits"].get(split) or {}).get("num_bytes", 0) for m in run)
    count = shards.num_shards_for(total, target_bytes)
    records = sorted(
        ((segments.record_digest(data), framed) for uri, m in zip(uris, run)
         for shard in (m["splits"].get(split) or {}).get("shards", [])
         for framed, data in shards.read_framed(storage.join(uri, shard["file"]),
                                                shard["sha256"], compression)),
        key=lambda pair: pair[0])
    n = len(records)
    per = -(-n // count) if n else 0
    entries = []
    for i in range(count):
        name = shards.shard_filename(dataset, split, i, count, compression)
        part = (framed for _, framed in records[i * per:(i + 1) * per])
        entries.append(shards.write_framed(storage.join(out_uri, name), part, compression))
    digests = [digest for digest, _ in records]
    return {"num_examples": sum(e["records"] for e in entries),
            "num_bytes": sum(e["bytes"] for e in entries),
            "content_hash": segments.content_hash(digests),
            "shards": [{k: e[k] for k in ("file", "records", "bytes", "sha256")}
                       for e in entries]}


def _merge(root: str, dataset: str, seg: str, uri: str, run: list[dict[str, Any]],
           target_bytes: int, run_id: str) -> dict[str, Any]:
    uris = _inputs(root, dataset, run)
    first = run[0]
    splits = {split: _copy_split(uris, run, split, uri, dataset, first["compression"],
                                 target_bytes) for split in first["splits"]}
    for split, info in splits.items():
        want = [(m["splits"].get(split) or {}) for m in run]
        expected = (sum(w.get("num_examples", 0) for w in want),
                    segments.combine_content(w["content_hash"] for w in want if w))
        if (info["num_examples"], info["content_hash"]) != expected:
            raise PipelineError(f"compaction into {uri}: split {split!r} holds "
                                f"{info['num_examples']} records (hash {info['content_hash']}), "
                                f"its inputs {expected}; nothing published")
    meta = {**_merged_facts(uris, run), "format_version": segments.SEGMENT_FORMAT,
            "dataset": dataset, "segment": seg,
            "partition": f"{first['partition'].split('_')[0]}_"
                         f"{run[-1]['partition'].split('_')[-1]}",
            "partitions": [p for m in run for p in m["partitions"]],
            "level": run[0].get("level", 0) + 1,
            "compacted_from": [m["segment"] for m in run],
            "data_interval": {"start": first["data_interval"]["start"],
                              "end": run[-1]["data_interval"]["end"]},
            "created_at": iso(datetime.now(UTC)), "run_id": run_id,
            "code_version": code_version(), "compression": first["compression"],
            "schema": first["schema"], "splits": splits, "built_from": first.get("built_from")}
    _store_partials(uri, uris, run, meta)
    tfds_meta.write_dataset_info(uri, meta)  # stock TFDS reads the folder
    return meta


def _merged_facts(uris: list[str], run: list[dict[str, Any]]) -> dict[str, Any]:
    """Statistics, dropped rows, fingerprint and row-level partials of the inputs together."""
    dropped: dict[str, int] = {}
    for m in run:
        for reason, n in m.get("dropped_rows", {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    rows = [list(p) for p in zip(*(m["validation"]["row_partials"] for m in run))]
    return {
        "statistics_partial": stats_mod.merge_all(m["statistics_partial"] for m in run),
        "dropped_rows": dropped,
        "source_fingerprint": {
            "files": [f for m in run for f in m["source_fingerprint"].get("files", [])],
            "lookups": run[0]["source_fingerprint"].get("lookups")},
        "validation": {
            "rows": sum(m["validation"]["rows"] for m in run),
            "quarantined_rows": sum(m["validation"]["quarantined_rows"] for m in run),
            "row_partials": [_sum_row(p) for p in rows],
        },
    }


def _sum_row(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return summed([RowCounts.from_json(p) for p in parts]).to_json()


def _store_partials(uri: str, uris: list[str], run: list[dict[str, Any]],
                    meta: dict[str, Any]) -> None:
    """Merged metric partials and the inputs' keys, and their quarantine, into the merged
    segment (rejected rows stay readable when the inputs are gone)."""
    read = [read_partials(u, m) for u, m in zip(uris, run)]
    entries, arrays = metric_partials_to_json(merge_metric_partials([p for p, _ in read]))
    keyed = all(k is not None for _, k in read)
    write_partials(storage.join(uri, PARTIALS_NPZ), arrays,
                   pd.concat([k for _, k in read], ignore_index=True) if keyed else None)
    meta["validation"].update(metric_partials=entries, metric_arrays=PARTIALS_NPZ, keys=keyed,
                              quarantine_files=[])
    for u, m in zip(uris, run):
        for name in m["validation"].get("quarantine_files") or []:
            dst = f"quarantine/{m['partition'].split('_')[0]}-{name.rsplit('/', 1)[-1]}"
            storage.write_bytes_atomic(storage.join(uri, dst),
                                       storage.read_bytes(storage.join(u, name)))
            meta["validation"]["quarantine_files"].append(dst)
