"""An incremental run: build the window's missing segments, then compose and publish a version.

``plan`` lists the window's segments (``segment_plan``); the missing ones are built in one Dask
job, one task each (``segment_build``); the window is then judged from the segments' stored
partials (row-level totals, dataset-level metrics, key uniqueness across segments), its
statistics merged from theirs, and a version manifest listing their shards is published the
usual way (writer lease, ``_draft.json``, ``publish``). Nothing here reads a row of a segment
that already exists, so a nightly run costs its new partition plus O(segments).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from etl import kinds, storage, versions
from etl.errors import PipelineError
from etl.pipeline import summary
from etl.pipeline.compact import compact_window, cover, leaves, merged_index
from etl.pipeline.compose import compose_manifest, judge
from etl.pipeline.publish import (
    LOCK_WAIT_S,
    _acquire,
    _clear_unpublished,
    _compression,
    _copy_tree,
    _previous_label,
    _target_version,
    publish,
)
from etl.pipeline.record import DRAFT_FILE, write_run
from etl.pipeline.segment_build import build_batch, probe_statistics
from etl.pipeline.segment_plan import WindowPlan, context, missing, plan_window, resolved_spec
from etl.provenance import iso, run_key, utc
from etl.sources.extract import group_by_size
from etl.spec import Spec
from etl.transform import stats as stats_mod
from etl.transform import tabular
from etl.transform.labels import task_of
from etl.validation.modes import check_mode
from etl.versions import segments
from etl.write.writer import WriteConfig

log = logging.getLogger("etl.pipeline")

BATCH_BYTES = 16 * 2**20  # raw bytes of consecutive segments validated by one GX run


def run_incremental(spec_name: str, root: str, interval_end: str | datetime,
                    interval_start: str | datetime | None = None, run_id: str | None = None, *,
                    mode: str = "quarantine", shard_bytes: int | None = None,
                    compression: str | None = None, force: bool = False,
                    source_uri: str | None = None, dask_address: str | None = None,
                    lock_wait_s: float = LOCK_WAIT_S) -> dict[str, Any]:
    """Publish the version of [start, end) from segments; returns what ``publish`` returns."""
    t0 = time.monotonic()
    written = build_version(spec_name, root, interval_end, interval_start, run_id, mode=mode,
                            shard_bytes=shard_bytes, compression=compression, force=force,
                            source_uri=source_uri, dask_address=dask_address,
                            lock_wait_s=lock_wait_s)
    result = publish(spec_name, written)
    result["wall_s"] = round(time.monotonic() - t0, 3)
    return result


def build_version(spec_name: str, root: str, interval_end: str | datetime,
                  interval_start: str | datetime | None = None, run_id: str | None = None, *,
                  mode: str = "quarantine", shard_bytes: int | None = None,
                  compression: str | None = None, force: bool = False,
                  source_uri: str | None = None, dask_address: str | None = None,
                  lock_wait_s: float = LOCK_WAIT_S) -> str:
    """Everything before ``publish``: the version URI (with its draft), or the published
    version's URI when the interval's version exists and ``force`` is off (publish then
    reports it). The ETL DAG of an ``incremental`` spec runs this, then ``publish``."""
    check_mode(mode)
    kind = kinds.kind_of(spec_name)
    if not kind.incremental:
        raise PipelineError(f"dataset {spec_name!r}: segments are built for tabular specs "
                            f"only; a kind: {kind.name} spec builds whole versions "
                            "(python -m etl run --one-shot)")
    spec = kind.stage("load_spec")(spec_name, source_uri=source_uri)
    run = _run_record(spec, root, interval_end, interval_start, run_id, force, source_uri)
    target = _target_version(run, force)
    if target is None:
        summary.already_published("build", run, run["version"])
        return versions.version_uri(root, spec.name, run["version"])
    config = WriteConfig(target_bytes=int(shard_bytes or spec.shard_target_bytes),
                         compression=_compression(compression, spec.compression))
    vuri = versions.version_uri(root, spec.name, target)
    run["target_version"] = target
    spec, plan, metas = _build_window(spec, run, vuri, config, dask_address)
    t1 = time.monotonic()
    outcome = judge(spec, plan, metas, mode, storage.join(run["run_dir"], "validation"))
    run["timings"]["validate_s"] = round(time.monotonic() - t1, 3)
    summary.validated(spec.name, outcome, run["timings"]["validate_s"],
                      storage.join(run["run_dir"], "validation"))
    outcome["drift"] = _drift(spec, run, vuri, metas)
    run["validation"] = outcome
    _write_draft(spec, run, vuri, config, plan, metas, lock_wait_s)
    return vuri


def _drift(spec: Spec, run: dict[str, Any], vuri: str,
           metas: list[tuple[str, dict]]) -> dict[str, Any] | None:
    """The new segments' train statistics against the newest published version's."""
    from etl.transform.drift import compare
    from etl.transform.tabular import finalize_partial

    dataset_uri = vuri.rstrip("/").rsplit("/", 1)[0]
    latest = versions.latest_version(run["root"], spec.name)
    if latest is None:
        return None
    old = versions.read_manifest(storage.join(dataset_uri, latest))
    seen = set()
    for seg in segments.referenced(old):
        meta = segments.read_segment(segments.segment_uri(run["root"], spec.name, seg)) or {}
        seen |= set(leaves(meta)) if meta else {seg}
    new = [m for _, m in metas if not set(leaves(m)) <= seen]
    if not new:
        return None
    stats = finalize_partial(stats_mod.merge_all(m["statistics_partial"] for m in new), spec)
    report = compare(stats, old.get("statistics", {}), latest, [m["segment"] for m in new])
    storage.write_bytes_atomic(storage.join(run["run_dir"], "validation", "drift.json"),
                               storage.json_bytes(report))
    if report["drifted"]:
        log.warning("drift %s: %s moved beyond their limits against %s (%s new rows); see "
                    "validation/drift.json", spec.name, ", ".join(report["drifted"]), latest,
                    f"{report['rows']:,}")
    else:
        log.info("drift %s: %d feature(s) within limits against %s (%s new rows)", spec.name,
                 len(report["features"]), latest, f"{report['rows']:,}")
    return report


def _run_record(spec: Spec, root: str, interval_end: Any, interval_start: Any,
                run_id: str | None, force: bool, source_uri: str | None) -> dict[str, Any]:
    end, start = utc(interval_end, "interval_end"), utc(interval_start, "interval_start")
    if end is None or (start is not None and start >= end):
        raise ValueError(f"interval: expected start < end, got [{start}, {end})")
    version = versions.version_id(end, start)
    run_id = run_id or f"manual__{iso(datetime.now(UTC))}_{uuid.uuid4().hex[:8]}"
    return {"spec": str(spec.path), "dataset": spec.name, "root": root, "version": version,
            "interval": {"start": iso(start), "end": iso(end)}, "run_id": run_id,
            "run_dir": storage.safe_join(root, "staging", spec.name, version, run_key(run_id)),
            "force": force, "source_uri": source_uri, "layout": "segments",
            "_window": (start, end), "timings": {}}


def _build_window(spec: Spec, run: dict[str, Any], vuri: str, config: WriteConfig,
                  dask_address: str | None) -> tuple[Spec, WindowPlan, list[tuple[str, dict]]]:
    """Resolve the label, plan the window, build what is missing: (spec, plan, metas)."""

    t0 = time.monotonic()
    start, end = run["_window"]
    with storage.storage_failures(f"build segments of {vuri}"):
        spec = resolved_spec(spec, _previous_label(vuri))
        label_schema = spec.label.schema()
        if not task_of(spec.label).fixed(spec.label):
            spec, label_schema = _learn_classes(spec, run, config, start, end, dask_address)
        plan = plan_window(run["root"], spec, start, end, label_schema)
        ctx = context(spec, plan, label_schema, config, run["run_id"])
        covering = cover([t.segment for t in plan.tasks], merged_index(run["root"], spec.name))
        todo = [t for t in missing(plan) if t.segment in set(covering)]
        log.info("plan %s: %d partition(s) in the window, held by %d segment(s): %d to build, "
                 "%d already built -> %s", spec.name, len(plan.tasks), len(covering), len(todo),
                 len(covering) - len(todo), segments.segments_uri(run["root"], spec.name))
        built: dict[str, Any] = {}
        for part in _compute(build_batch, _batches(todo, BATCH_BYTES), ctx, plan.rights,
                             dask_address=dask_address):
            built.update(part)
    uris = [segments.segment_uri(run["root"], spec.name, seg) for seg in covering]
    metas = [(uri, built.get(seg) or segments.read_segment(uri))
             for seg, uri in zip(covering, uris)]
    if any(meta is None for _, meta in metas):
        gone = [uri for uri, meta in metas if meta is None]
        raise PipelineError(f"{len(gone)} segment(s) of the window vanished during the run "
                            f"(deleted by gc or retain?): {gone[:3]}")
    merged = compact_window(run["root"], spec.name, [m for _, m in metas], config.target_bytes,
                            run["run_id"])
    metas = [(segments.segment_uri(run["root"], spec.name, m["segment"]), m) for m in merged]
    run["timings"]["build_s"] = round(time.monotonic() - t0, 3)
    _log_built(spec.name, [built[t.segment] for t in todo], run["timings"]["build_s"], plan)
    return spec, plan, metas


def _raw_bytes(tasks: list) -> int:
    return sum(int(f.get("size") or 0) for t in tasks for f in t.fingerprint.get("files", []))


def _batches(tasks: list, limit: int) -> list[list]:
    """Consecutive tasks in groups of about ``limit`` raw bytes (one Dask task each)."""
    return group_by_size(tasks, lambda t: _raw_bytes([t]), limit)


def _compute(fn: Any, items: list, ctx: Any, rights: Any, *args: Any,
             dask_address: str | None = None) -> list[Any]:
    """``fn(item, ctx, rights, *args)`` for every item, one Dask task each, in order.

    Nothing to do starts no cluster (a run whose segments all exist only composes); a nightly
    partition is built by this process's threads (``etl.cluster.IN_PROCESS_BYTES``).
    """
    if not items:
        return []
    import dask

    from etl.cluster import dask_client

    flat = [t for item in items for t in (item if isinstance(item, list) else [item])]
    with dask_client(dask_address, work_bytes=_raw_bytes(flat)):
        shared = dask.delayed(rights, pure=True)  # one graph key, sent once to each worker
        return list(dask.compute(*[dask.delayed(fn, pure=False)(item, ctx, shared, *args)
                                   for item in items]))


def _learn_classes(spec: Spec, run: dict[str, Any], config: WriteConfig, start: Any,
                   end: Any, dask_address: str | None) -> tuple[Spec, dict[str, Any]]:
    """Classes the spec does not list and no version fixed yet: the window's train split's,
    learned by a statistics-only pass before any segment is encoded."""
    plan = plan_window(run["root"], spec, start, end, None)
    ctx = context(spec, plan, spec.label.schema(), config, run["run_id"])
    parts = _compute(probe_statistics, list(plan.tasks), ctx, plan.rights,
                     storage.join(run["run_dir"], "probe"), dask_address=dask_address)
    schema = tabular.resolve_label(stats_mod.merge_all(parts), spec)
    names = tuple(schema["names"])
    label = replace(spec.label, names=names, classes=len(names),
                    names_from=f"the train split's classes {list(names)} ({spec.path}.label "
                               "lists none)")
    return replace(spec, label=label), schema


def _log_built(dataset: str, metas: list[dict], seconds: float, plan: WindowPlan) -> None:
    rows = sum(m["validation"]["rows"] for m in metas)
    bad = sum(m["validation"]["quarantined_rows"] for m in metas)
    where = plan.tasks[0].uri.rsplit("/", 1)[0] if plan.tasks else ""
    log.info("build %s: %d segment(s) built, %s rows read, %s quarantined, %.1f s -> %s",
             dataset, len(metas), f"{rows:,}", f"{bad:,}", seconds, where)


def _write_draft(spec: Spec, run: dict[str, Any], vuri: str, config: WriteConfig,
                 plan: WindowPlan, metas: list[tuple[str, dict]], lock_wait_s: float) -> None:
    """Under the version's writer lease: validation results and ``_draft.json``."""
    t0 = time.monotonic()
    lock = _acquire(vuri, run["run_id"], lock_wait_s)
    if lock is None:
        return  # published meanwhile by another run: publish() reports it
    _clear_unpublished(run, lock)
    heartbeat = versions.Heartbeat(lock).start()
    try:
        _copy_tree(storage.join(run["run_dir"], "validation"), storage.join(vuri, "validation"))
        manifest = compose_manifest(spec, run, run["target_version"], config, plan, metas)
        lock = versions.hand_off_writer_lock(heartbeat.stop())
    except BaseException:
        versions.release_writer_lock(heartbeat.stop())
        raise
    run["timings"]["compose_s"] = round(time.monotonic() - t0, 3)
    run["writer_lock"] = {"owner": lock.owner, "token": lock.token}
    record = {k: v for k, v in run.items() if not k.startswith("_")}
    storage.write_bytes_atomic(storage.join(vuri, DRAFT_FILE),
                               storage.json_bytes({"manifest": manifest, "run": record}))
    write_run(record)
    summary.written(spec.name, manifest["splits"], run["timings"]["compose_s"], vuri)
