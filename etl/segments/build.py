"""Building one segment, inside one Dask task: read, validate, transform, encode, write.

The task reads the partition's raw files and joins the broadcast lookups, evaluates the
row-level expectations on every row (rejected rows go to the segment's quarantine), computes
the mergeable partials the window needs later (dataset-level metric partials, the key hashes,
split statistics), encodes the rows and writes the shards, the TFDS metadata and, last,
``segment.json`` -- created only if absent. All of it happens under the segment's lease, so
two runs that need the same segment build it once; a killed build leaves a folder without
``segment.json``, which no reader trusts and the next builder clears.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from etl import storage
from etl.errors import ValidationFailed
from etl.provenance import code_version, iso
from etl.segments.claim import claim, try_claim
from etl.segments.files import PARTIALS_NPZ, write_partials
from etl.segments.window import SegmentTask
from etl.sources.extract import event_times, outside_each, read_files
from etl.sources.lookups import join_lookups
from etl.spec import Spec
from etl.transform import tabular
from etl.validation import (
    QUARANTINE_NUMBER_COLUMN,
    REASON_COLUMN,
    RowChecks,
    RowReport,
    check_rows,
    metric_partials_by_group,
    metric_partials_to_json,
    typed_frame,
)
from etl.validation.report import write_parquet
from etl.versions import lease, segments
from etl.write import tfds as tfds_meta
from etl.write import writer

log = logging.getLogger(__name__)

MISFILED = "misfiled-00000.parquet"
PART_COL = "_segment_in_batch"


@dataclass(frozen=True)
class BuildContext:
    """What every segment of a run shares: the spec (label resolved), suite and knobs."""

    spec: Spec
    label_schema: dict[str, Any]
    schema: dict[str, Any]  # the manifest's schema (features + resolved label)
    suite_name: str
    row_configs: tuple[dict, ...]
    kinds: dict[str, str]
    metric_keys: tuple
    metric_columns: tuple[str, ...]
    key_columns: tuple[str, ...]
    write: writer.WriteConfig
    run_id: str
    material: dict[str, Any] = field(default_factory=dict)


def build_batch(tasks: list[SegmentTask], ctx: BuildContext,
                rights: list[pd.DataFrame]) -> dict[str, dict[str, Any]]:
    """Consecutive segments in one Dask task, their rows validated by one GX run
    (``etl.validation.check_rows``); segments another run is building are waited for after, and
    built here only if that run dies."""
    done: dict[str, dict[str, Any]] = {}
    held, deferred = [], []
    for task in tasks:
        meta, ours = try_claim(task.uri, ctx.run_id)
        if meta is not None:
            done[task.segment] = meta
        elif ours is not None:
            held.append((task, ours))
        else:
            deferred.append(task)
    done.update(_build_held(held, ctx, rights))
    for task in deferred:
        meta, ours = claim(task.uri, ctx.run_id)
        done[task.segment] = meta if ours is None else \
            _build_held([(task, ours)], ctx, rights)[task.segment]
    return done


def _build_held(held: list[tuple[SegmentTask, lease.Lease]], ctx: BuildContext,
                rights: list[pd.DataFrame]) -> dict[str, dict[str, Any]]:
    """Build the segments whose leases we hold; each becomes visible (segment.json) only
    while its lease is still ours, and every lease is released, whatever happens."""
    beats = [(task, lease.Heartbeat(h).start()) for task, h in held]
    done: dict[str, dict[str, Any]] = {}
    try:
        todo = []
        for task, beat in beats:
            meta = segments.read_segment(task.uri)  # finished while we took the lease
            if meta is not None:
                done[task.segment] = meta
            else:
                storage.clear_dir(task.uri, keep=segments.SEGMENT_LOCK)  # a killed build's
                todo.append((task, beat))
        if todo:
            t0, cpu0 = time.monotonic(), time.process_time()
            raws = [_read(task, ctx) for task, _ in todo]
            frames = _split(join_lookups(pd.concat([r for r, _ in raws], ignore_index=True),
                                         ctx.spec, rights), [len(r) for r, _ in raws])
            checked = check_rows(frames, _row_checks(ctx),
                                 [storage.join(t.uri, "quarantine") for t, _ in todo])
            valids, reports = [c.valid for c in checked], [c.report for c in checked]
            lengths = [len(v) for v in valids]
            whole, parts = pd.concat(valids, ignore_index=True), np.repeat(
                np.arange(len(valids)), lengths)
            prepared, stats = _prepare_each(whole, parts, len(valids), ctx.spec)
            for (task, _), st in zip(todo, stats):  # before a record is encoded
                _check_classes(task, ctx, st)
            typed, partials = _typed_each(whole, parts, lengths, ctx)
            metas = [_build(task, ctx, typ, part, st, final, report, misfiled)
                     for (task, _), typ, part, st, final, report, (_, misfiled)
                     in zip(todo, typed, partials, stats, _encode_each(prepared, ctx), reports,
                            raws)]
            share = _share(t0, cpu0, len(todo))
            for (task, beat), meta in zip(todo, metas):
                beat.check()  # still ours: only then does the segment become visible
                body = storage.json_bytes({**meta, "timings": share})
                if not storage.create_if_absent(storage.join(task.uri, segments.SEGMENT_FILE),
                                                body):
                    log.warning("%s: another builder published it first; using theirs",
                                task.uri)
                done[task.segment] = segments.read_segment(task.uri)
    finally:
        for _, beat in beats:
            lease.release(beat.stop())
    return done


def _row_checks(ctx: BuildContext) -> RowChecks:
    return RowChecks(ctx.suite_name, tuple(ctx.row_configs), ctx.kinds, tuple(ctx.spec.key))


def _check_classes(task: SegmentTask, ctx: BuildContext, stats: dict[str, Any]) -> None:
    """A label value outside the version's classes fails here, naming the spec's field (and
    then the segment whose rows hold it)."""
    if not ctx.label_schema.get("names"):
        return
    try:
        tabular.resolve_label(stats, ctx.spec)
    except ValidationFailed as exc:
        raise ValidationFailed(f"{exc} (in segment {task.uri})", exc.summary) from None


def _split(frame: pd.DataFrame, lengths: list[int]) -> list[pd.DataFrame]:
    """Consecutive slices of ``frame`` of the given lengths (a batch back into segments)."""
    bounds = np.cumsum([0, *lengths])
    return [frame.iloc[lo:hi].reset_index(drop=True) for lo, hi in itertools.pairwise(bounds)]


def _prepare_each(whole: pd.DataFrame, parts: np.ndarray, n: int, spec: Spec
                  ) -> tuple[list[pd.DataFrame], list[dict[str, Any]]]:
    """The feature transform and the split statistics run once over a batch's valid rows
    (``parts``: each row's segment), split back per segment (per-call costs are paid once,
    not once a day)."""
    prepared = tabular.prepare_partition(whole.assign(**{PART_COL: parts}), spec, carry=PART_COL)
    part = prepared[PART_COL].to_numpy()
    stats = tabular.split_partials(prepared, part, n, spec)
    counts = np.bincount(part, minlength=n)
    return _split(prepared.drop(columns=[PART_COL]), counts.tolist()), stats


def _typed_each(whole: pd.DataFrame, parts: np.ndarray, lengths: list[int], ctx: BuildContext
                ) -> tuple[list[pd.DataFrame], list[dict]]:
    """Each segment's valid rows with the metric columns parsed, and its dataset-level metric
    partials: parsed and computed once per batch."""
    typed = typed_frame(whole[list(ctx.metric_columns)],
                        {c: ctx.kinds[c] for c in ctx.metric_columns})
    return (_split(typed, lengths),
            metric_partials_by_group(typed, parts, len(lengths), ctx.metric_keys))


def _encode_each(prepared: list[pd.DataFrame], ctx: BuildContext) -> list[pd.DataFrame]:
    """Each segment's final rows with their Example bytes, encoded in one call per batch."""
    whole = pd.concat(prepared, ignore_index=True)
    final = writer.encode_rows(tabular.finalize_partition(whole, ctx.spec, ctx.label_schema),
                               ctx.schema, ctx.write)
    return _split(final, [len(p) for p in prepared])


def _share(t0: float, cpu0: float, n: int) -> dict[str, Any]:
    """One segment's share of its batch's time."""
    return {"wall_s": round((time.monotonic() - t0) / n, 3),
            "cpu_s": round((time.process_time() - cpu0) / n, 3), "batch": n}


def _build(task: SegmentTask, ctx: BuildContext, typed: pd.DataFrame, partials: dict,
           stats: dict[str, Any], final: pd.DataFrame, report: RowReport,
           misfiled: int) -> dict[str, Any]:
    """Everything after row-level validation, the feature transform and encoding: stored
    partials, shards, metadata (``typed``: the valid rows' metric columns, parsed)."""
    spec = ctx.spec
    entries, arrays = metric_partials_to_json(partials)
    write_partials(storage.join(task.uri, PARTIALS_NPZ), arrays,
                   typed[list(ctx.key_columns)] if ctx.key_columns else None)
    splits = _write_splits(task, ctx, final)
    meta = {
        "format_version": segments.SEGMENT_FORMAT, "dataset": spec.name,
        "segment": task.segment, "partition": task.partition,
        "partitions": [[p.key, p.digest] for p in task.parts],
        "data_interval": {"start": iso(task.interval[0]), "end": iso(task.interval[1])},
        "created_at": iso(datetime.now(UTC)), "run_id": ctx.run_id,
        "code_version": code_version(), "compression": ctx.write.compression,
        "schema": ctx.schema, "splits": splits, "source_fingerprint": task.fingerprint,
        "built_from": ctx.material,
        "validation": {
            "rows": report.rows + misfiled,
            "quarantined_rows": len(report.bad_positions) + misfiled, "misfiled_rows": misfiled,
            "quarantine_files": [f"quarantine/{name}" for name in (
                MISFILED if misfiled else None, report.quarantine_file) if name],
            "row_partials": [c.to_json() for c in report.counts],
            "metric_partials": entries, "metric_arrays": PARTIALS_NPZ,
            "keys": bool(ctx.key_columns),
        },
        "statistics_partial": stats,
        "dropped_rows": {spec.label.drop_reason: int(len(typed) - len(final))},
    }
    tfds_meta.write_dataset_info(task.uri, meta)  # stock TFDS reads the folder
    return meta


def _write_splits(task: SegmentTask, ctx: BuildContext, final: pd.DataFrame) -> dict[str, Any]:
    """The segment's shards; per split its records, bytes, content hash and shard entries."""
    digests: dict[str, list[int]] = {}
    written = writer.write_frame(
        final, ctx.spec.name, task.uri, ctx.schema, [s for s, _ in ctx.spec.split.fractions],
        ctx.write,
        lambda split, rec: digests.setdefault(split, []).append(segments.record_digest(rec)))
    return {split: {"num_examples": sum(e["records"] for e in entries),
                    "num_bytes": sum(e["bytes"] for e in entries),
                    "content_hash": segments.content_hash(digests.get(split, [])),
                    "shards": [{k: e[k] for k in ("file", "records", "bytes", "sha256")}
                               for e in entries]}
            for split, entries in written.items()}


def _read(task: SegmentTask, ctx: BuildContext) -> tuple[pd.DataFrame, int]:
    """(the segment's rows inside the window, as they arrived; rows quarantined as misfiled).

    A row whose event time lies outside its file's partition is misfiled: it is quarantined
    with that reason, never silently dropped; rows of a partition outside the window (a
    window that cuts a day) are not this segment's. The files are read as Arrow tables and
    made one frame, and both checks run once over it with each row's own bounds: a segment
    of a thousand one-row days costs about what one file of those rows does.
    """
    source = ctx.spec.primary_source
    raw, counts = read_files([p.uri for p in task.parts], source, [p.piece for p in task.parts])
    times = event_times(raw, source)
    if times is None:
        return raw, 0
    period = [p.period or (None, None) for p in task.parts]
    misfiled = outside_each(times, period, counts)
    if misfiled.any():
        bad = raw[misfiled].copy()
        part_of = np.repeat(np.arange(len(counts)), counts)[misfiled]
        bad[REASON_COLUMN] = [
            f"{source.event_time} outside the partition {task.parts[i].label} "
            f"[{iso(period[i][0])}, {iso(period[i][1])}) of its file" for i in part_of]
        bad[QUARANTINE_NUMBER_COLUMN] = 0
        write_parquet(bad, storage.join(task.uri, "quarantine"), MISFILED)
    elsewhere = outside_each(times, [(p.start, p.end) for p in task.parts], counts)
    return raw[~misfiled & ~elsewhere].reset_index(drop=True), int(misfiled.sum())


def probe_statistics(task: SegmentTask, ctx: BuildContext, rights: list[pd.DataFrame],
                     scratch_uri: str) -> dict[str, Any]:
    """The split statistics of a segment's valid rows, nothing kept: how a run learns the
    train split's classes before any segment is encoded (quarantine goes to ``scratch_uri``)."""
    scratch = replace(task, uri=storage.join(scratch_uri, task.segment))
    raw = join_lookups(_read(scratch, ctx)[0], ctx.spec, rights)
    valid = check_rows([raw], _row_checks(ctx), [storage.join(scratch.uri, "quarantine")])[0].valid
    return tabular.split_partial(tabular.prepare_partition(valid, ctx.spec), ctx.spec)
