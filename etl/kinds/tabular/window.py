"""The tabular kind's window: start the run, plan, build the missing segments on Dask, compact
-- and each segment's build as six coarse calls into this kind's stages; the kind's ``KIND``.

``build`` reads what every segment of the run shares once -- the suite and its dataset-level
checks, the lookups, the digests of the spec and lookup files (``_start``) -- lists the
window's raw partitions and plans its segments from that listing and the previous manifest
(``etl.segments.plan``, pure), builds the segments no earlier run built and merges small ones
(``etl.segments.build.compact_window``). The window is then judged from the segments' stored
partials (``etl.kinds.tabular.judge``: row counts, dataset-level metrics, key uniqueness
across segments; statistics merged, drift). Nothing here reads a row of a segment that
already exists, so a nightly run costs its new raw partitions plus O(segments).

A segment's build (``_build``) reads as six steps, each one call: the segments are claimed
(``etl.versions.lease``: used if they exist, waited for if a live run builds them), their
rows read with the lookups joined (``read.read_segment_rows``), every row checked against the
suite's row-level expectations -- rejected rows go to the segment's quarantine -- and the
dataset-level metric partials the window needs later taken (``_check_rows``), the rows
prepared (``prepare.prepare``: features, label, split, statistics), the shards written
(``etl.write.writer.write_shards``) and, last, ``segment.json`` recorded
(``etl.segments.build.record``). Batching lives here, in one place: consecutive small segments
go to one Dask task (``batches``), where their rows are checked by one GX run; every other
step is per segment.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

import dask
import pandas as pd

from etl import cluster, statistics, storage
from etl.errors import SegmentGoneError
from etl.kinds import BuildRequest, DatasetKind, Window
from etl.kinds.tabular.judge import judge
from etl.kinds.tabular.prepare import (
    Prepared,
    prepare,
    prepare_rows,
    resolve_label,
    split_partial,
)
from etl.kinds.tabular.read import SegmentRows, read_lookups, read_segment_rows
from etl.provenance import iso
from etl.segments.build import PARTIALS_NPZ, compact_window, record, write_partials
from etl.segments.compose import manifest_schema
from etl.segments.plan import (
    Digests,
    SegmentTask,
    WindowPlan,
    fingerprint,
    group_by_size,
    late_partitions,
    lookups_digest,
    new_segments,
    plan_window,
    spec_digest,
    window_listing,
)
from etl.spec import Spec, load_spec
from etl.spec.labels import label_task
from etl.validation import (
    REASON_COLUMN,
    DatasetChecks,
    RowChecks,
    RowReport,
    SplitSuite,
    ValidationSpec,
    check_dataset_metrics,
    check_rows,
    dataset_checks,
    metric_partials,
    typed_frame,
)
from etl.validation.report import write_parquet
from etl.versions import lease, segment
from etl.versions.segment import (
    Interval,
    Schema,
    SegmentChecks,
    SegmentContents,
    SegmentMeta,
    SegmentOrigin,
    SourceFiles,
)
from etl.write.writer import WriteConfig, write_shards

log = logging.getLogger("etl.pipeline")

MISFILED = "misfiled-00000.parquet"
BATCH_BYTES = 32 * 2**20  # raw bytes of consecutive segments built in one Dask task


@dataclass(frozen=True)
class RunInputs:
    """What every segment of a tabular run reads once, before planning: the suite split by
    level and its dataset-level checks, each column's parse kind, the lookups (joined to every
    segment's rows) and the digests of the spec and lookup files; the judgement reads the
    suite, the checks and the lookups again (``etl.kinds.tabular.judge.Judging``)."""

    suite: SplitSuite
    checks: DatasetChecks
    kinds: dict[str, str]
    lookups: list[pd.DataFrame]  # each join's right side
    spec_digest: str
    lookups_digest: str | None


@dataclass(frozen=True)
class BuildContext:
    """What every segment of a run shares: the spec (label resolved), suite and knobs."""

    spec: Spec
    schema: Schema  # the manifest's schema (features + the label, its classes resolved)
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


# --- the window ----------------------------------------------------------------------------

def build(request: BuildRequest[Spec]) -> Window[Spec, RunInputs]:
    """The window's segments, every missing one built and small ones merged."""
    t0 = time.monotonic()
    spec = _resolved_spec(request)
    gx_import_s = _import_gx()
    inputs = _start(request.root, spec)
    label_schema = spec.label.schema()
    if not label_task(spec.label).fixed(spec.label):
        spec, label_schema = _learn_classes(replace(request, spec=spec), inputs)
    plan = _plan(request, spec, inputs, label_schema)
    ctx = _context(spec, inputs, label_schema, request)
    _say_late(spec.name, *late_partitions(request.root, plan, request.previous),
              request.previous.version if request.previous is not None else None)
    found = {t.segment: segment.read_segment(t.uri) for t in plan.tasks
             if t.segment in plan.known}  # the previous version's: read for judging anyway
    todo = [t for t in plan.tasks if _missing(t, found)]
    log.info("plan %s: %d partition(s) in the window, held by %d segment(s): %d to build, "
             "%d already built -> %s", spec.name, sum(len(t.partitions) for t in plan.tasks),
             len(plan.tasks), len(todo), len(plan.tasks) - len(todo),
             segment.segments_uri(request.root, spec.name))
    groups = batches(todo)
    built = {t.segment: meta for group, metas in zip(groups, _compute(
        build_segments, groups, ctx, inputs.lookups, request.dask_address))
        for t, meta in zip(group, metas)}
    metas = [(t.uri, built.get(t.segment) or found.get(t.segment)
              or segment.read_segment(t.uri)) for t in plan.tasks]
    gone = [uri for uri, meta in metas if meta is None]
    if gone:
        raise SegmentGoneError(f"{len(gone)} segment(s) of the window vanished during the "
                               f"run (deleted by gc or retain?): {gone[:3]}")
    merged = compact_window(request.root, spec.name, [m for _, m in metas],
                            request.write.target_bytes, request.run_id)
    metas = [(segment.segment_uri(request.root, spec.name, m.segment), m) for m in merged]
    seconds = round(time.monotonic() - t0, 3)
    _log_built(spec.name, [built[t.segment] for t in todo], seconds, request)
    return Window(spec, metas, new_segments(metas, request.previous), len(todo), inputs,
                  {"build_s": seconds, "gx_import_s": gx_import_s}, request.previous)


def _import_gx() -> float:
    """Import Great Expectations (the suite is read through it next) and return the seconds
    that took in this process, 0.0 where it was already loaded: a fixed cost of every process
    that validates, inside ``build_s``, which the bench counts as overhead, not work."""
    if "great_expectations" in sys.modules:
        return 0.0
    t0 = time.monotonic()
    from etl.validation import gx  # noqa: F401 -- timed here, on purpose

    return round(time.monotonic() - t0, 3)


def _missing(task: SegmentTask, found: dict[str, SegmentMeta | None]) -> bool:
    """A segment to build: one the previous version lists whose ``segment.json`` is gone
    (killed, deleted), or a new one no earlier attempt finished."""
    if task.segment in found:
        return found[task.segment] is None
    return not storage.exists(storage.join(task.uri, segment.SEGMENT_FILE))


def _resolved_spec(request: BuildRequest[Spec]) -> Spec:
    """The spec with the label this version uses (classes inherited from the last version)."""
    spec, previous = request.spec, request.previous
    label = previous.schema.label if previous is not None and previous.schema else None
    inherited = {**label.to_json(), "version": previous.version} if label else None
    return replace(spec, label=label_task(spec.label).inherit(spec.label, inherited))


def _start(root: str, spec: Spec) -> RunInputs:
    """The suite (checked against what whole-window metrics can answer, before any read),
    the lookups and the digests every segment of the run shares."""
    from etl.validation.gx import load_suite  # GX: loaded (and timed) by ``_import_gx``

    vspec = ValidationSpec.of(spec)
    suite = load_suite(vspec.expectations, vspec.columns)
    check_dataset_metrics(suite, vspec)
    lookups, _, uris = read_lookups(root, spec)
    return RunInputs(suite, dataset_checks(suite, list(vspec.columns), vspec.key),
                     vspec.kinds(), lookups, spec_digest(spec),
                     lookups_digest(root, fingerprint(uris) if uris else None))


def _plan(request: BuildRequest[Spec], spec: Spec, inputs: RunInputs,
          label_schema: dict[str, Any] | None, previous: bool = True) -> WindowPlan:
    """The window's segments from one listing of its raw partitions (and the previous
    manifest, unless ``previous`` is off)."""
    listing = window_listing(request.root, spec.primary_source, request.start, request.end)
    return plan_window(request.root, spec, request.start, request.end, listing,
                       Digests(inputs.spec_digest, inputs.lookups_digest, label_schema),
                       request.previous if previous else None)


def _context(spec: Spec, inputs: RunInputs, label_schema: dict[str, Any],
             request: BuildRequest[Spec]) -> BuildContext:
    """What every segment build of the run is given."""
    return BuildContext(
        spec=spec, schema=manifest_schema(spec, label_schema),
        rows=RowChecks(inputs.suite.name, tuple(inputs.suite.row), inputs.kinds,
                       tuple(spec.key)),
        metric_keys=inputs.checks.keys,
        metric_columns=inputs.checks.columns, key_columns=inputs.checks.key_columns,
        write=request.write, run_id=request.run_id, material={"spec": inputs.spec_digest})


def _say_late(dataset: str, redelivered: list[str], late: list[str], version: str | None
              ) -> None:
    """One line each for partitions that changed or landed after ``version`` was published."""
    if redelivered:
        log.info("re-delivery %s: %d partition(s) changed since version %s was published: "
                 "%s; the segments holding them are rebuilt", dataset, len(redelivered),
                 version, ", ".join(redelivered[:10]))
    if late:
        log.info("re-delivery %s: %d partition(s) landed after version %s was published: "
                 "%s; built now", dataset, len(late), version, ", ".join(late[:10]))


def _compute(fn: Any, items: list, ctx: BuildContext, lookups: list[pd.DataFrame],
             dask_address: str | None, *args: Any) -> list[Any]:
    """``fn(item, ctx, lookups, *args)`` for every item (a segment task, or a batch of them),
    one Dask task each, in order.

    Nothing to do starts no cluster (a run whose segments all exist only composes); a
    nightly partition is built by this process's threads (``etl.cluster.IN_PROCESS_BYTES``).
    """
    if not items:
        return []
    tasks = [t for item in items for t in (item if isinstance(item, list) else [item])]
    with cluster.dask_client(dask_address, work_bytes=sum(t.raw_bytes for t in tasks)):
        shared = dask.delayed(lookups, pure=True)  # one graph key, sent once to each worker
        return list(dask.compute(*[dask.delayed(fn, pure=False)(item, ctx, shared, *args)
                                   for item in items]))


def _learn_classes(request: BuildRequest[Spec], inputs: RunInputs
                   ) -> tuple[Spec, dict[str, Any]]:
    """Classes the spec does not list and no version fixed yet: those of the window's splits,
    learned by a statistics-only pass before any segment is encoded."""
    spec = request.spec
    plan = _plan(request, spec, inputs, None, previous=False)
    stats = _compute(probe_statistics, list(plan.tasks),
                     _context(spec, inputs, spec.label.schema(), request), inputs.lookups,
                     request.dask_address, storage.join(request.scratch_uri, "probe"))
    schema = resolve_label(statistics.StatisticsPartial.merge_all(stats), spec)
    names = tuple(schema["names"])
    label = replace(spec.label, names=names, classes=len(names),
                    names_from=f"the window's classes {list(names)} ({spec.path}.label "
                               "lists none)")
    return replace(spec, label=label), schema


def _log_built(dataset: str, metas: list[SegmentMeta], seconds: float,
               request: BuildRequest[Spec]) -> None:
    rows = sum(m.checks.rows for m in metas)
    bad = sum(m.checks.quarantined_rows for m in metas)
    log.info("build %s: %d segment(s) built, %s rows read, %s quarantined, %.1f s -> %s",
             dataset, len(metas), f"{rows:,}", f"{bad:,}", seconds,
             request.spec.primary_source.uri)


# --- its segments, in one Dask task --------------------------------------------------------

def batches(tasks: list[SegmentTask]) -> list[list[SegmentTask]]:
    """Consecutive segments in groups of at most ``BATCH_BYTES`` raw bytes (two whole
    segments), a Dask task each: their rows are checked by one GX run, which costs about a
    second whatever the rows (a window of many small segments, e.g. days re-delivered here
    and there, builds about 6x faster so)."""
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
        rows = [read_segment_rows(t.partitions, ctx.spec, lookups) for t, _ in todo]
        checked = _check_rows(rows, ctx, [storage.join(t.uri, "quarantine") for t, _ in todo])
        for (task, beat), found in zip(todo, checked):
            prepared = prepare(found.valid, ctx.spec, ctx.schema.label.to_json(), task.uri)
            splits = write_shards(prepared.rows, ctx.spec.name, task.uri, ctx.schema,
                                  [s for s, _ in ctx.spec.split.fractions], ctx.write)
            done[task.segment] = record(task.uri, _segment_json(
                task, ctx, found, prepared, splits, _share(t0, cpu0, len(todo))), beat)
    finally:
        for _, beat in beats:
            lease.release(beat.stop())
    return done


def _check_rows(rows: list[SegmentRows], ctx: BuildContext,
                quarantine_uris: list[str]) -> list[Checked]:
    """Every row of each segment against the suite's row-level expectations, in one GX run
    (``etl.validation.check_rows``), rejected and misfiled rows quarantined; the valid rows with
    their dataset-level metric partials."""
    for found, uri in zip(rows, quarantine_uris):
        if len(found.misfiled):
            write_parquet(found.misfiled.assign(**{REASON_COLUMN: found.reasons}), uri, MISFILED)
    out = []
    for found, rows_checked in zip(rows, check_rows([r.rows for r in rows], ctx.rows,
                                                    quarantine_uris)):
        valid, report = rows_checked.valid.reset_index(drop=True), rows_checked.report
        typed = typed_frame(valid[list(ctx.metric_columns)],
                            {c: ctx.rows.kinds[c] for c in ctx.metric_columns})
        out.append(Checked(valid, report, len(found.misfiled),
                           metric_partials(typed, ctx.metric_keys),
                           typed[list(ctx.key_columns)] if ctx.key_columns else None))
    return out


def _share(t0: float, cpu0: float, n: int) -> dict[str, Any]:
    """One segment's share of its batch's time so far."""
    return {"wall_s": round((time.monotonic() - t0) / n, 3),
            "cpu_s": round((time.process_time() - cpu0) / n, 3), "batch": n}


def _segment_json(task: SegmentTask, ctx: BuildContext, checked: Checked, prepared: Prepared,
                  splits: dict[str, Any], timings: dict[str, Any]) -> SegmentMeta:
    """The segment's metric partials and keys written (``partials.npz``); its
    ``segment.json`` to be."""
    report, misfiled = checked.report, checked.misfiled
    entries = write_partials(storage.join(task.uri, PARTIALS_NPZ), checked.metric_partials,
                             checked.keys)
    origin = SegmentOrigin(
        dataset=ctx.spec.name, segment=task.segment, extent=task.extent,
        partitions=tuple((p.key, p.digest) for p in task.partitions),
        interval=Interval.of(start=iso(task.interval[0]), end=iso(task.interval[1])),
        sources=SourceFiles.of(**task.fingerprint), built_from=ctx.material)
    checks = SegmentChecks.of(
        rows=report.rows + misfiled,
        quarantined_rows=len(report.bad_positions) + misfiled, misfiled_rows=misfiled,
        quarantine_files=tuple(f"quarantine/{name}" for name in (
            MISFILED if misfiled else None, report.quarantine_file) if name),
        row_partials=report.counts,
        metric_partials=entries, metric_arrays=PARTIALS_NPZ,
        keys=bool(ctx.key_columns),
    )
    meta = SegmentMeta.new(origin, SegmentContents(
        splits=splits, schema=ctx.schema, compression=ctx.write.compression, validation=checks,
        statistics_partial=prepared.statistics.to_json(),
        dropped_rows={ctx.spec.label.drop_reason: prepared.dropped}), ctx.run_id)
    return replace(meta, timings=timings)


def probe_statistics(task: SegmentTask, ctx: BuildContext, lookups: list[pd.DataFrame],
                     scratch_uri: str) -> statistics.StatisticsPartial:
    """The split statistics of a segment's valid rows, nothing kept: how a run learns the
    train split's classes before any segment is encoded (quarantine goes to ``scratch_uri``)."""
    quarantine = storage.join(scratch_uri, task.segment, "quarantine")
    rows = read_segment_rows(task.partitions, ctx.spec, lookups)
    valid = _check_rows([rows], ctx, [quarantine])[0].valid
    return split_partial(prepare_rows(valid, ctx.spec), ctx.spec)


KIND: DatasetKind[Spec, RunInputs] = DatasetKind(
    name="tabular", load_spec=load_spec, build=build, judge=judge)
