"""Planning a run: the window's partitions, the segments that already hold them, what to build.

A segment is one build over a contiguous run of raw partitions (days of a day-partitioned
source, the whole of an unpartitioned one), bounded by raw bytes: a nightly run that adds a few
small days builds one segment, a bulk build of N bytes about N / ``SEGMENT_RAW_BYTES``; a
partition larger than that is built as pieces (consecutive row ranges of its file).

Each partition has a digest of everything its rows' bytes depend on -- its raw file (size,
generation), the lookups, the spec and suite files, the label's classes, the part of it inside
the window. A segment lists its partitions with their digests, and its id digests that list,
so an existing segment whose list matches a run of the window's partitions is exactly what this
run would build. The previous version's manifest says which segments hold which partitions:
planning reads it and one listing of the raw files, never a segment of its own. A re-delivered
or changed partition matches nothing, so only the segment that held it is built again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from etl import storage
from etl.provenance import iso
from etl.segments.build import BuildContext
from etl.segments.compose import manifest_schema
from etl.segments.window import Part, SegmentTask
from etl.sources.extract import fingerprint, period_end, window_listing
from etl.sources.lookups import read_lookups
from etl.spec import Spec
from etl.transform.labels import task_of
from etl.validation import (
    DatasetChecks,
    SplitSuite,
    ValidationSpec,
    check_dataset_metrics,
    dataset_checks,
    load_suite,
)
from etl.versions import segments
from etl.write.writer import WriteConfig

# Raw bytes one segment is built from: what one GX run validates in one Dask task, so a bulk
# build still spreads over the workers (a year of flights is a few segments, not one).
SEGMENT_RAW_BYTES = 16 * 2**20
_PERIOD_LABEL = {"day": "%Y%m%d", "hour": "%Y%m%dT%H"}


@dataclass(frozen=True)
class WindowPlan:
    """Every segment of the window in partition order, the lookups, the suite's checks.

    ``known``: ids of the segments the previous version listed that this window reuses.
    """

    tasks: tuple[SegmentTask, ...]
    known: frozenset[str]
    rights: list[Any]
    lookups_dropped: dict[str, int]
    suite: SplitSuite
    checks: DatasetChecks
    vspec: ValidationSpec


def spec_digest(spec: Spec) -> str:
    """sha256 of the spec and suite files: any edit rebuilds the segments."""
    digest = hashlib.sha256()
    for path in (spec.path, spec.expectations):
        digest.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def resolved_spec(spec: Spec, previous_label: dict[str, Any] | None) -> Spec:
    """The spec with the label this version uses (classes inherited from the last version)."""
    return replace(spec, label=task_of(spec.label).inherit(spec.label, previous_label))


def plan_window(root: str, spec: Spec, start: datetime | None, end: datetime,
                label_schema: dict[str, Any] | None,
                known: Sequence[dict[str, Any]] = ()) -> WindowPlan:
    """The window's segments: ``known`` ones (``segments`` entries of the previous manifest)
    wherever their partitions match, new ones of at most ``SEGMENT_RAW_BYTES`` elsewhere.
    ``label_schema`` None while the classes are still unknown (the digests are provisional)."""
    vspec = ValidationSpec.of(spec)
    suite = load_suite(vspec.expectations, vspec.columns)
    check_dataset_metrics(suite, vspec)
    checks = dataset_checks(suite, list(vspec.columns), vspec.key)
    rights, dropped, lookup_uris = read_lookups(root, spec)
    shared = {"dataset": spec.name, "spec": spec_digest(spec),
              "lookups": _digest(_relative(root, fingerprint(lookup_uris)["files"]))
              if lookup_uris else None,
              "label": label_schema}
    parts = in_pieces(window_parts(root, spec, start, end, shared), SEGMENT_RAW_BYTES)
    tasks, reused = [], set()
    for seg, run in cover(parts, known):
        if seg is None:
            tasks += [_task(root, spec, chunk, shared["lookups"])
                      for chunk in chunk_by_bytes(run, SEGMENT_RAW_BYTES)]
        else:
            tasks.append(_task(root, spec, run, shared["lookups"], seg))
            reused.add(seg)
    return WindowPlan(tuple(tasks), frozenset(reused), rights, dropped, suite, checks, vspec)


def window_parts(root: str, spec: Spec, start: datetime | None, end: datetime,
                 shared: dict[str, Any]) -> list[Part]:
    """The window's raw partitions in order, each with its digest."""
    primary = spec.primary_source
    parts = []
    for period, info in window_listing(root, primary, start, end):
        span = None
        if period is None:
            label, lo, hi, whole = "all", start, end, primary.event_time is None
        else:
            stop = period_end(period, primary)
            span = (period, stop)
            lo, hi = max(period, start) if start else period, min(stop, end)
            label = period.strftime(_PERIOD_LABEL[primary.partitioning.granularity])
            whole = primary.event_time is None or (lo, hi) == span
        entry = _relative(root, [info])[0]
        material = {**shared, "partition": label, "files": [entry],
                    "clip": None if whole else [iso(lo), iso(hi)]}
        parts.append(Part(label, info["uri"], lo, hi, span, info, _digest(material)[:16]))
    return parts


def cover(parts: list[Part], known: Sequence[dict[str, Any]]
          ) -> list[tuple[str | None, list[Part]]]:
    """The window as consecutive runs: ``(segment id, its parts)`` where a known segment
    holds exactly those partitions (the longest one that fits), ``(None, parts)`` for runs
    no segment holds."""
    by_first: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for seg in known:
        listed = [tuple(p) for p in seg.get("partitions") or []]
        if listed:
            by_first.setdefault(listed[0], []).append({**seg, "partitions": listed})
    out: list[tuple[str | None, list[Part]]] = []
    i = 0
    while i < len(parts):
        here = [(p.key, p.digest) for p in parts[i:]]
        fits = [s for s in by_first.get(here[0], [])
                if here[:len(s["partitions"])] == s["partitions"]]
        best = max(fits, key=lambda s: len(s["partitions"]), default=None)
        if best is None:
            if out and out[-1][0] is None:
                out[-1][1].append(parts[i])
            else:
                out.append((None, [parts[i]]))
            i += 1
        else:
            n = len(best["partitions"])
            out.append((best["segment"], parts[i:i + n]))
            i += n
    return out


def in_pieces(parts: list[Part], limit: int) -> list[Part]:
    """A partition of more than ``limit`` raw bytes as k pieces of at most that, each a
    consecutive k-th of its rows (a large day, or a large unpartitioned file, is built as k
    segments: bounded memory, spread over the workers)."""
    out = []
    for part in parts:
        k = -(-part.size // limit) if limit > 0 else 1
        out += [part] if k <= 1 else [replace(part, piece=(i, k)) for i in range(k)]
    return out


def chunk_by_bytes(parts: list[Part], limit: int) -> list[list[Part]]:
    """Consecutive parts in chunks of at most ``limit`` raw bytes (a larger part alone)."""
    chunks: list[list[Part]] = []
    size = 0
    for part in parts:
        if chunks and size + part.size <= limit:
            chunks[-1].append(part)
            size += part.size
        else:
            chunks.append([part])
            size = part.size
    return chunks


def partitions_of(parts: Sequence[Part]) -> list[list[str]]:
    return [[p.key, p.digest] for p in parts]


def _task(root: str, spec: Spec, parts: list[Part], lookups: str | None,
          seg: str | None = None) -> SegmentTask:
    label = parts[0].key if len(parts) == 1 else f"{parts[0].key}_{parts[-1].key}"
    seg = seg or segments.segment_id(label, {"partitions": partitions_of(parts)})
    files = _relative(root, [p.file for p in parts])
    return SegmentTask(seg, segments.segment_uri(root, spec.name, seg), label, tuple(parts),
                       {"files": files, "lookups": lookups})


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _relative(root: str, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """File entries keyed by their path under the root: a copied root keeps its segment ids."""
    base = root.rstrip("/") + "/"
    return [{**f, "uri": f["uri"].removeprefix(base)} for f in files]


def context(spec: Spec, plan: WindowPlan, label_schema: dict[str, Any], config: WriteConfig,
            run_id: str) -> BuildContext:
    """What every segment build of the run shares."""
    return BuildContext(
        spec=spec, label_schema=label_schema,
        schema=manifest_schema(spec, {"label_schema": label_schema}),
        suite_name=plan.suite.name, row_configs=tuple(plan.suite.row),
        kinds=plan.vspec.kinds(), metric_keys=plan.checks.keys,
        metric_columns=plan.checks.columns, key_columns=plan.checks.key_columns,
        write=config, run_id=run_id, material={"spec": spec_digest(spec)})


def late_partitions(root: str, plan: WindowPlan, previous: dict[str, Any] | None
                    ) -> tuple[list[str], list[str]]:
    """(re-delivered, landed late): partitions of the window whose file differs from the one
    the previous version was built from, and partitions older than that version's newest one
    that it did not hold (they landed after it was published). Their segments are new
    (their digests changed), so this run builds them; the lists only say why."""
    files = {f["uri"]: f for f in ((previous or {}).get("source_fingerprint") or {})
             .get("files") or [] if isinstance(f, dict) and "uri" in f}
    held = [p[0] for seg in (previous or {}).get("segments") or []
            for p in seg.get("partitions") or []]
    if not files or not held:
        return [], []
    newest, redelivered, late = max(held), [], []
    for part in (p for t in plan.tasks for p in t.parts):
        entry = _relative(root, [part.file])[0]
        if entry["uri"] in files:
            if files[entry["uri"]] != entry:
                redelivered.append(part.label)
        elif part.label < newest:
            late.append(part.label)
    return redelivered, late


def missing(plan: WindowPlan) -> list[SegmentTask]:
    """The window's new segments not yet built (no ``segment.json``): a segment the previous
    version lists is known to exist; a new one may have been built by an earlier attempt."""
    return [t for t in plan.tasks if t.segment not in plan.known
            and not storage.exists(storage.join(t.uri, segments.SEGMENT_FILE))]
