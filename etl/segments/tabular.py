"""Tabular windows: plan, build the missing segments on Dask, compact, judge from partials.

``build`` lists the window's partitions (``etl.segments.plan``), builds the segments no
earlier run built -- consecutive ones in one Dask task each, validated by one GX run
(``etl.segments.build``) -- and merges small ones (``etl.segments.compact``). ``judge`` then
decides the window from the segments' stored partials (row-level totals, dataset-level
metrics, key uniqueness across segments), merges their statistics and measures drift against
the previous version. Nothing here reads a row of a segment that already exists, so a nightly
run costs its new partitions plus O(segments).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from etl import storage
from etl.errors import PipelineError
from etl.segments.window import BuildRequest, Judged, Window, known_segments, new_segments
from etl.versions.segment import SegmentMeta

log = logging.getLogger("etl.pipeline")

BATCH_BYTES = 16 * 2**20  # raw bytes of consecutive segments validated by one GX run


def build(request: BuildRequest) -> Window:
    """The window's segments, every missing one built and small ones merged."""
    from etl.segments.build import build_batch
    from etl.segments.compact import compact_window
    from etl.segments.plan import context, late_partitions, missing, plan_window, resolved_spec
    from etl.transform.labels import task_of
    from etl.versions import segment

    t0 = time.monotonic()
    previous = request.previous
    label = previous.label() if previous is not None else None
    spec = resolved_spec(request.spec, {**label, "version": previous.version}
                         if label else None)
    label_schema = spec.label.schema()
    if not task_of(spec.label).fixed(spec.label):
        spec, label_schema = _learn_classes(replace(request, spec=spec))
    plan = plan_window(request.root, spec, request.start, request.end, label_schema,
                       known_segments(request.previous))
    ctx = context(spec, plan, label_schema, request.write, request.run_id)
    _say_late(spec.name, *late_partitions(request.root, plan, request.previous),
              previous.version if previous is not None else None)
    found = {t.segment: segment.read_segment(t.uri) for t in plan.tasks
             if t.segment in plan.known}  # the previous version's: read for judging anyway
    unbuilt = {t.segment for t in missing(plan)}  # a listed one gone (killed, deleted) too
    todo = [t for t in plan.tasks if t.segment in unbuilt or (
        t.segment in plan.known and found[t.segment] is None)]
    log.info("plan %s: %d partition(s) in the window, held by %d segment(s): %d to build, "
             "%d already built -> %s", spec.name, sum(len(t.parts) for t in plan.tasks),
             len(plan.tasks), len(todo), len(plan.tasks) - len(todo),
             segment.segments_uri(request.root, spec.name))
    built: dict[str, Any] = {}
    for part in _compute(build_batch, _batches(todo), ctx, plan.rights, request.dask_address):
        built.update(part)
    metas = [(t.uri, built.get(t.segment) or found.get(t.segment)
              or segment.read_segment(t.uri)) for t in plan.tasks]
    gone = [uri for uri, meta in metas if meta is None]
    if gone:
        raise PipelineError(f"{len(gone)} segment(s) of the window vanished during the run "
                            f"(deleted by gc or retain?): {gone[:3]}")
    merged = compact_window(request.root, spec.name, [m for _, m in metas],
                            request.write.target_bytes, request.run_id)
    metas = [(segment.segment_uri(request.root, spec.name, m.segment), m) for m in merged]
    seconds = round(time.monotonic() - t0, 3)
    _log_built(spec.name, [built[t.segment] for t in todo], seconds, request)
    return Window(spec, metas, new_segments(metas, request.previous), len(todo), plan,
                  {"build_s": seconds}, request.previous)


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


def judge(window: Window, mode: str, results_uri: str) -> Judged:
    """The window's validation (results and Data Docs into ``results_uri``), statistics
    and drift. Raises ValidationFailed as ``etl.segments.compose.judge`` does."""
    from etl.segments.compose import merged_statistics
    from etl.segments.judge import judge as judge_window

    summary = judge_window(window.spec, window.context, window.metas, mode, results_uri)
    stats = merged_statistics(window.spec, [m for _, m in window.metas])
    return Judged(summary, stats, _drift(window))


def _drift(window: Window) -> dict[str, Any] | None:
    """The new segments' train statistics against the previous version's, judged by the
    spread over comparable earlier segments (``etl.transform.drift``)."""
    from etl.segments.compose import merged_statistics
    from etl.transform.drift import calendar_features, compare

    previous = window.previous
    if previous is None or not window.new:
        return None
    stats = merged_statistics(window.spec, window.new)
    report = compare(stats, previous.statistics or {}, previous.version,
                     [m.segment for m in window.new], window.spec.drift,
                     calendar_features(window.spec), _peers(window, stats["num_examples"]),
                     previous.verdict.drift_history)
    name, against, rows = window.spec.name, previous.version, f"{report['rows']:,}"
    if report["drifted"]:
        log.warning("drift %s: %s moved beyond their limits against %s (%s new rows; baseline: "
                    "%s); see the version page's Drift section", name,
                    ", ".join(report["drifted"]), against, rows, report["baseline"])
    else:
        log.info("drift %s: %d statistic(s) within limits against %s (%s new rows; baseline: "
                 "%s)", name, len(report["features"]), against, rows, report["baseline"])
    return report


def _peers(window: Window, rows: int) -> list[dict[str, Any]]:
    """The statistics of each earlier segment of comparable size (at most PEER_SIZE times the
    new train rows: other nights, not a compacted month whose spread is narrower)."""
    from etl.segments.compose import merged_statistics
    from etl.transform.drift import PEER_SIZE

    new = {m.segment for m in window.new}
    return [merged_statistics(window.spec, [m]) for _, m in window.metas
            if m.segment not in new and 0 < m.train_rows <= PEER_SIZE * rows]


def _batches(tasks: list) -> list[list]:
    """Consecutive segments in groups of about ``BATCH_BYTES`` raw bytes (a Dask task each)."""
    from etl.sources.extract import group_by_size

    return group_by_size(tasks, lambda t: t.raw_bytes, BATCH_BYTES)


def _compute(fn: Any, items: list, ctx: Any, rights: Any, dask_address: str | None,
             *args: Any) -> list[Any]:
    """``fn(item, ctx, rights, *args)`` for every item, one Dask task each, in order.

    Nothing to do starts no cluster (a run whose segments all exist only composes); a
    nightly partition is built by this process's threads (``etl.cluster.IN_PROCESS_BYTES``).
    """
    if not items:
        return []
    import dask

    from etl.cluster import dask_client

    flat = [t for item in items for t in (item if isinstance(item, list) else [item])]
    with dask_client(dask_address, work_bytes=sum(t.raw_bytes for t in flat)):
        shared = dask.delayed(rights, pure=True)  # one graph key, sent once to each worker
        return list(dask.compute(*[dask.delayed(fn, pure=False)(item, ctx, shared, *args)
                                   for item in items]))


def _learn_classes(request: BuildRequest) -> tuple[Any, dict[str, Any]]:
    """Classes the spec does not list and no version fixed yet: the window's train split's,
    learned by a statistics-only pass before any segment is encoded."""
    from etl.segments.build import probe_statistics
    from etl.segments.plan import context, plan_window
    from etl.transform import stats as stats_mod
    from etl.transform import tabular

    spec = request.spec
    plan = plan_window(request.root, spec, request.start, request.end, None)
    ctx = context(spec, plan, spec.label.schema(), request.write, request.run_id)
    parts = _compute(probe_statistics, list(plan.tasks), ctx, plan.rights,
                     request.dask_address, storage.join(request.scratch_uri, "probe"))
    schema = tabular.resolve_label(stats_mod.merge_all(parts), spec)
    names = tuple(schema["names"])
    label = replace(spec.label, names=names, classes=len(names),
                    names_from=f"the train split's classes {list(names)} ({spec.path}.label "
                               "lists none)")
    return replace(spec, label=label), schema


def _log_built(dataset: str, metas: list[SegmentMeta], seconds: float,
               request: BuildRequest) -> None:
    rows = sum(m.checks.rows for m in metas)
    bad = sum(m.checks.quarantined_rows for m in metas)
    log.info("build %s: %d segment(s) built, %s rows read, %s quarantined, %.1f s -> %s",
             dataset, len(metas), f"{rows:,}", f"{bad:,}", seconds,
             request.spec.primary_source.uri)
