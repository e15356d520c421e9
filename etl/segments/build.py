"""Building segments, inside one Dask task: claim, read, check, prepare, write, record.

``_build`` reads as the six steps, each one call into its stage: the segments are claimed
(``etl.segments.claim``: used if they exist, waited for if a live run builds them), the
window's rows of their raw partitions read with the lookups joined
(``etl.sources.extract.read_window``), every row checked against the suite's row-level
expectations -- rejected rows go to the segment's quarantine -- and the dataset-level metric
partials the window needs later taken (``_check_rows``), the rows prepared
(``etl.transform.tabular.prepare``: features, label, split, statistics), the shards written
(``etl.write.writer.write_shards``) and, last, ``segment.json`` recorded: created only if
absent, and only while the segment's lease is still ours. Two runs that need the same
segment build it once; a killed build leaves a folder without ``segment.json``, which no
reader trusts and the next builder clears.

Batching lives here, in one place: consecutive small segments go to one Dask task
(``batches``), where their rows are checked by one GX run; every other step is per segment.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from etl import storage
from etl.provenance import code_version, iso
from etl.segments.files import PARTIALS_NPZ, write_partials
from etl.segments.plan import SegmentTask
from etl.sources.extract import WindowRows, group_by_size, read_window
from etl.spec import Spec
from etl.transform.tabular import Prepared, prepare, prepare_rows, split_partial
from etl.validation import (
    QUARANTINE_NUMBER_COLUMN,
    REASON_COLUMN,
    RowChecks,
    RowReport,
    check_rows,
    metric_partials,
    metric_partials_to_json,
    typed_frame,
)
from etl.validation.report import write_parquet
from etl.versions import lease, segment
from etl.versions.segment import (
    Interval,
    RowPartial,
    SegmentChecks,
    SegmentMeta,
    SourceFiles,
    SplitInfo,
)
from etl.write import tfds as tfds_meta
from etl.write.writer import WriteConfig, write_shards

log = logging.getLogger(__name__)

MISFILED = "misfiled-00000.parquet"


@dataclass(frozen=True)
class BuildContext:
    """What every segment of a run shares: the spec (label resolved), suite and knobs."""

    spec: Spec
    label_schema: dict[str, Any]
    schema: dict[str, Any]  # the manifest's schema (features + resolved label)
    rows: RowChecks  # the suite's row-level checks, each column's parse kind, the key
    metric_keys: tuple
    metric_columns: tuple[str, ...]
    key_columns: tuple[str, ...]
    write: WriteConfig
    run_id: str
    material: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Checked:
    """A segment's rows after the row-level checks: the ``valid`` ones, the report (row
    counts per expectation, the quarantine file), the rows quarantined as misfiled, the
    dataset-level metric partials and the typed key columns (None: no key checks)."""

    valid: pd.DataFrame
    report: RowReport
    misfiled: int
    metric_partials: dict
    keys: pd.DataFrame | None


BATCH_BYTES = 16 * 2**20  # raw bytes of consecutive segments built in one Dask task


def batches(tasks: list[SegmentTask]) -> list[list[SegmentTask]]:
    """Consecutive segments in groups of about ``BATCH_BYTES`` raw bytes, a Dask task each:
    their rows are checked by one GX run, which costs about a second whatever the rows (a
    window of many small segments, e.g. days re-delivered here and there, builds about 6x
    faster so)."""
    return group_by_size(tasks, lambda t: t.raw_bytes, BATCH_BYTES)


def build_segments(tasks: list[SegmentTask], ctx: BuildContext,
                   lookups: list[pd.DataFrame]) -> list[SegmentMeta]:
    """Each segment's ``segment.json``: found, built here under its lease, or -- while a live
    run builds it -- waited for after the others, and built here only if that run dies."""
    done: dict[str, SegmentMeta] = {}
    held, deferred = [], []
    for task in tasks:
        meta, ours = lease.try_claim(task.uri, ctx.run_id)
        if meta is not None:
            done[task.segment] = meta
        elif ours is not None:
            held.append((task, ours))
        else:
            deferred.append(task)
    done.update(_build(held, ctx, lookups))
    for task in deferred:
        meta, ours = lease.claim(task.uri, ctx.run_id)
        done[task.segment] = meta if ours is None else \
            _build([(task, ours)], ctx, lookups)[task.segment]
    return [done[t.segment] for t in tasks]


def _build(held: list[tuple[SegmentTask, lease.Lease]], ctx: BuildContext,
           lookups: list[pd.DataFrame]) -> dict[str, SegmentMeta]:
    """Read, check, prepare, write and record the segments whose leases we hold; each
    becomes visible only while its lease is still ours, and every lease is released."""
    beats = [(task, lease.Heartbeat(h).start()) for task, h in held]
    try:
        done = {t.segment: m for t, _ in beats if (m := segment.read_segment(t.uri))}
        todo = [(t, b) for t, b in beats if t.segment not in done]  # else: finished meanwhile
        for task, _ in todo:
            storage.clear_dir(task.uri, keep=segment.SEGMENT_LOCK)  # a killed build's
        if not todo:
            return done
        t0, cpu0 = time.monotonic(), time.process_time()
        rows = [read_window(t.partitions, ctx.spec, lookups) for t, _ in todo]
        checked = _check_rows(rows, ctx, [storage.join(t.uri, "quarantine") for t, _ in todo])
        for (task, beat), found in zip(todo, checked):
            prepared = prepare(found.valid, ctx.spec, ctx.label_schema, task.uri)
            splits = write_shards(prepared.rows, ctx.spec.name, task.uri, ctx.schema,
                                   [s for s, _ in ctx.spec.split.fractions], ctx.write)
            done[task.segment] = _record(task, ctx, found, prepared, splits, beat,
                                         _share(t0, cpu0, len(todo)))
    finally:
        for _, beat in beats:
            lease.release(beat.stop())
    return done


def _check_rows(rows: list[WindowRows], ctx: BuildContext,
                quarantine_uris: list[str]) -> list[Checked]:
    """Every row of each segment against the suite's row-level expectations, in one GX run
    (``etl.validation.check_rows``), rejected and misfiled rows quarantined; the valid rows with
    their dataset-level metric partials."""
    for found, uri in zip(rows, quarantine_uris):
        if len(found.misfiled):
            write_parquet(found.misfiled.assign(**{REASON_COLUMN: found.reasons,
                                                   QUARANTINE_NUMBER_COLUMN: 0}), uri, MISFILED)
    out = []
    for found, rows_checked in zip(rows, check_rows([r.rows for r in rows], ctx.rows,
                                                    quarantine_uris)):
        valid, report = rows_checked.valid.reset_index(drop=True), rows_checked.report
        typed = typed_frame(valid[list(ctx.metric_columns)],
                            {c: ctx.rows.kinds[c] for c in ctx.metric_columns})
        partials = metric_partials(typed, ctx.metric_keys)
        out.append(Checked(valid, report, len(found.misfiled), partials,
                           typed[list(ctx.key_columns)] if ctx.key_columns else None))
    return out


def _share(t0: float, cpu0: float, n: int) -> dict[str, Any]:
    """One segment's share of its batch's time so far."""
    return {"wall_s": round((time.monotonic() - t0) / n, 3),
            "cpu_s": round((time.process_time() - cpu0) / n, 3), "batch": n}


def _record(task: SegmentTask, ctx: BuildContext, checked: Checked, prepared: Prepared,
            splits: dict[str, SplitInfo], beat: lease.Heartbeat, timings: dict[str, Any]
            ) -> SegmentMeta:
    """The segment's side files (metric partials and keys, TFDS metadata) and, last, its
    ``segment.json`` -- created only if absent, and only while its lease is still ours."""
    spec, report, misfiled = ctx.spec, checked.report, checked.misfiled
    entries, arrays = metric_partials_to_json(checked.metric_partials)
    write_partials(storage.join(task.uri, PARTIALS_NPZ), arrays, checked.keys)
    meta = SegmentMeta.of(
        format_version=segment.SEGMENT_FORMAT, dataset=spec.name,
        segment=task.segment, partition=task.label,
        partitions=tuple((p.key, p.digest) for p in task.partitions),
        data_interval=Interval.of(start=iso(task.interval[0]), end=iso(task.interval[1])),
        created_at=iso(datetime.now(UTC)), run_id=ctx.run_id,
        code_version=code_version(), compression=ctx.write.compression,
        schema=ctx.schema, splits=splits, source_fingerprint=SourceFiles.of(**task.fingerprint),
        built_from=ctx.material,
        validation=SegmentChecks.of(
            rows=report.rows + misfiled,
            quarantined_rows=len(report.bad_positions) + misfiled, misfiled_rows=misfiled,
            quarantine_files=tuple(f"quarantine/{name}" for name in (
                MISFILED if misfiled else None, report.quarantine_file) if name),
            row_partials=tuple(RowPartial.of(**c.to_json()) for c in report.counts),
            metric_partials=entries, metric_arrays=PARTIALS_NPZ,
            keys=bool(ctx.key_columns),
        ),
        statistics_partial=prepared.statistics,
        dropped_rows={spec.label.drop_reason: prepared.dropped},
    )
    tfds_meta.write_dataset_info(task.uri, meta)  # stock TFDS reads the folder
    beat.check()  # still ours: only then does the segment become visible
    if not segment.write_segment(task.uri, replace(meta, timings=timings)):
        log.warning("%s: another builder published it first; using theirs", task.uri)
    return segment.read_segment(task.uri)


def probe_statistics(task: SegmentTask, ctx: BuildContext, lookups: list[pd.DataFrame],
                     scratch_uri: str) -> dict[str, Any]:
    """The split statistics of a segment's valid rows, nothing kept: how a run learns the
    train split's classes before any segment is encoded (quarantine goes to ``scratch_uri``)."""
    quarantine = storage.join(scratch_uri, task.segment, "quarantine")
    rows = read_window(task.partitions, ctx.spec, lookups)
    valid = _check_rows([rows], ctx, [quarantine])[0].valid
    return split_partial(prepare_rows(valid, ctx.spec), ctx.spec)
