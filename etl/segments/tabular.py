"""Tabular windows: start the build, plan, build the missing segments on Dask, compact, judge.

``build`` reads what every segment of the run shares once -- the suite and its dataset-level
checks, the lookups, the digests of the spec and lookup files (``_start``) -- lists the
window's raw partitions and plans its segments from that listing and the previous manifest
(``etl.segments.plan``, pure), builds the segments no earlier run built -- consecutive small
ones in one Dask task (``etl.segments.build``) -- and merges small ones
(``etl.segments.compact``). ``judge`` then
decides the window from the segments' stored partials (row counts, dataset-level metrics, key
uniqueness across segments), merges their statistics and measures drift against the previous
version. Nothing here reads a row of a segment that already exists, so a nightly run costs its
new raw partitions plus O(segments).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from typing import Any

from etl import storage
from etl.errors import PipelineError
from etl.segments.request import BuildRequest, Judged, RunInputs, Window, new_segments
from etl.spec import Spec
from etl.versions.segment import SegmentMeta

log = logging.getLogger("etl.pipeline")


def build(request: BuildRequest) -> Window:
    """The window's segments, every missing one built and small ones merged."""
    from etl.segments.build import batches, build_segments
    from etl.segments.compact import compact_window
    from etl.segments.plan import late_partitions
    from etl.versions import segment

    t0 = time.monotonic()
    spec = _resolved_spec(request)
    gx_import_s = _import_gx()
    inputs = _start(request.root, spec)
    label_schema = spec.label.schema()
    if not _classes_fixed(spec):
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
        raise PipelineError(f"{len(gone)} segment(s) of the window vanished during the run "
                            f"(deleted by gc or retain?): {gone[:3]}")
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
    from etl.validation import gx  # noqa: F401

    return round(time.monotonic() - t0, 3)


def _missing(task: Any, found: dict[str, Any]) -> bool:
    """A segment to build: one the previous version lists whose ``segment.json`` is gone
    (killed, deleted), or a new one no earlier attempt finished."""
    from etl.versions import segment

    if task.segment in found:
        return found[task.segment] is None
    return not storage.exists(storage.join(task.uri, segment.SEGMENT_FILE))


def _resolved_spec(request: BuildRequest) -> Any:
    """The spec with the label this version uses (classes inherited from the last version)."""
    from etl.spec.labels import label_task

    spec, previous = request.spec, request.previous
    label = previous.label() if previous is not None else None
    previous = {**label, "version": previous.version} if label else None
    return replace(spec, label=label_task(spec.label).inherit(spec.label, previous))


def _classes_fixed(spec: Spec) -> bool:
    from etl.spec.labels import label_task

    return label_task(spec.label).fixed(spec.label)


def _start(root: str, spec: Spec) -> RunInputs:
    """The suite (checked against what whole-window metrics can answer, before any read),
    the lookups and the digests every segment of the run shares."""
    from etl.segments.plan import lookups_digest, spec_digest
    from etl.sources.extract import fingerprint
    from etl.sources.lookups import read_lookups
    from etl.validation import ValidationSpec, check_dataset_metrics, dataset_checks, load_suite

    vspec = ValidationSpec.of(spec)
    suite = load_suite(vspec.expectations, vspec.columns)
    check_dataset_metrics(suite, vspec)
    lookups, _, uris = read_lookups(root, spec)
    return RunInputs(suite, dataset_checks(suite, list(vspec.columns), vspec.key),
                     vspec.kinds(), lookups, spec_digest(spec),
                     lookups_digest(root, fingerprint(uris) if uris else None))


def _plan(request: BuildRequest, spec: Spec, inputs: RunInputs,
          label_schema: dict[str, Any] | None, previous: bool = True) -> Any:
    """The window's segments from one listing of its raw partitions (and the previous
    manifest, unless ``previous`` is off)."""
    from etl.segments.plan import Digests, plan_window
    from etl.sources.extract import window_listing

    listing = window_listing(request.root, spec.primary_source, request.start, request.end)
    return plan_window(request.root, spec, request.start, request.end, listing,
                       Digests(inputs.spec_digest, inputs.lookups_digest, label_schema),
                       request.previous if previous else None)


def _context(spec: Spec, inputs: RunInputs, label_schema: dict[str, Any],
             request: BuildRequest) -> Any:
    """What every segment build of the run is given."""
    from etl.segments.build import BuildContext
    from etl.segments.compose import manifest_schema
    from etl.validation import RowChecks

    return BuildContext(
        spec=spec, label_schema=label_schema,
        schema=manifest_schema(spec, {"label_schema": label_schema}),
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


def judge(window: Window, mode: str, results_uri: str) -> Judged:
    """The window's validation (results and Data Docs into ``results_uri``), statistics
    and drift. Raises ValidationFailed as ``etl.segments.compose.judge`` does."""
    from etl.segments.compose import merged_statistics
    from etl.segments.judge import judge as judge_window

    inputs = window.context
    summary = judge_window(window.spec, inputs.suite, inputs.checks, window.metas, mode,
                           results_uri)
    stats = merged_statistics(window.spec, [m for _, m in window.metas])
    return Judged(summary, stats, _drift(window))


def _drift(window: Window) -> dict[str, Any] | None:
    """The new segments' train statistics against the previous version's, judged by the
    spread over comparable earlier segments (``etl.spec.drift``)."""
    from etl.segments.compose import merged_statistics
    from etl.spec.drift import calendar_features, compare

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
    from etl.spec.drift import PEER_SIZE

    new = {m.segment for m in window.new}
    return [merged_statistics(window.spec, [m]) for _, m in window.metas
            if m.segment not in new and 0 < m.train_rows <= PEER_SIZE * rows]


def _compute(fn: Any, items: list, ctx: Any, lookups: Any, dask_address: str | None,
             *args: Any) -> list[Any]:
    """``fn(item, ctx, lookups, *args)`` for every item (a segment task, or a batch of them),
    one Dask task each, in order.

    Nothing to do starts no cluster (a run whose segments all exist only composes); a
    nightly partition is built by this process's threads (``etl.cluster.IN_PROCESS_BYTES``).
    """
    if not items:
        return []
    import dask

    from etl.cluster import dask_client

    tasks = [t for item in items for t in (item if isinstance(item, list) else [item])]
    with dask_client(dask_address, work_bytes=sum(t.raw_bytes for t in tasks)):
        shared = dask.delayed(lookups, pure=True)  # one graph key, sent once to each worker
        return list(dask.compute(*[dask.delayed(fn, pure=False)(item, ctx, shared, *args)
                                   for item in items]))


def _learn_classes(request: BuildRequest, inputs: RunInputs) -> tuple[Any, dict[str, Any]]:
    """Classes the spec does not list and no version fixed yet: the window's train split's,
    learned by a statistics-only pass before any segment is encoded."""
    from etl import statistics
    from etl.segments.build import probe_statistics
    from etl.transform import tabular

    spec = request.spec
    plan = _plan(request, spec, inputs, None, previous=False)
    stats = _compute(probe_statistics, list(plan.tasks),
                     _context(spec, inputs, spec.label.schema(), request), inputs.lookups,
                     request.dask_address, storage.join(request.scratch_uri, "probe"))
    schema = tabular.resolve_label(statistics.merge_all(stats), spec)
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
