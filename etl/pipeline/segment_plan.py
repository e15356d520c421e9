"""Planning an incremental run: the window's segments, which exist, and what they share.

Each landed partition of the window (a day of a day-partitioned source; the whole source of an
unpartitioned one) is one segment. Its id digests everything its bytes depend on -- the raw
files (size, generation), the lookups, the spec and suite files, the label's classes, the part
of the partition inside the window -- so an existing segment with that id is exactly what this
run would build, and a re-delivered day or an edited spec gets a new id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from etl import storage
from etl.pipeline.segment_build import BuildContext, SegmentTask
from etl.provenance import iso
from etl.sources.extract import fingerprint, period_end, window_partitions
from etl.sources.lookups import read_lookups
from etl.spec import Spec
from etl.transform.labels import task_of
from etl.validation import gx as vgx
from etl.validation.tabular import ValidationSpec, check_dataset_metrics
from etl.validation.window import DatasetChecks, dataset_checks
from etl.versions import segments
from etl.write.writer import WriteConfig

_PERIOD_LABEL = {"day": "%Y%m%d", "hour": "%Y%m%dT%H"}


@dataclass(frozen=True)
class WindowPlan:
    """Every segment of the window in period order, the lookups, the suite's checks."""

    tasks: tuple[SegmentTask, ...]
    rights: list[Any]
    lookups_dropped: dict[str, int]
    suite: vgx.SplitSuite
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
                label_schema: dict[str, Any] | None) -> WindowPlan:
    """The window's segments; ``label_schema`` None while the classes are still unknown
    (ids are then provisional: ``with_label`` gives the final ones)."""
    vspec = ValidationSpec.of(spec)
    suite = vgx.load_suite(vspec.expectations, vspec.columns)
    check_dataset_metrics(suite, vspec)
    checks = dataset_checks(suite, list(vspec.columns), vspec.key)
    primary = spec.primary_source
    rights, dropped, lookup_uris = read_lookups(root, spec)
    shared = {"dataset": spec.name, "spec": spec_digest(spec),
              "lookups": _digest(_relative(root, fingerprint(lookup_uris)["files"]))
              if lookup_uris else None,
              "label": label_schema}
    tasks = []
    for period, uri in window_partitions(root, primary, start, end):
        fp, span = fingerprint([uri]), None
        if period is None:
            label, lo, hi, whole = "all", start, end, primary.event_time is None
        else:
            span = (period, period_end(period, primary))
            stop = period_end(period, primary)
            lo, hi = max(period, start) if start else period, min(stop, end)
            label = period.strftime(_PERIOD_LABEL[primary.partitioning.granularity])
            whole = primary.event_time is None or (lo, hi) == (period, stop)
        material = {**shared, "partition": label, "files": _relative(root, fp["files"]),
                    "clip": None if whole else [iso(lo), iso(hi)]}
        seg = segments.segment_id(label, material)
        tasks.append(SegmentTask(seg, segments.segment_uri(root, spec.name, seg), label, (uri,),
                                 lo, hi, {**fp, "lookups": shared["lookups"]}, span))
    return WindowPlan(tuple(tasks), rights, dropped, suite, checks, vspec)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _relative(root: str, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """File entries keyed by their path under the root: a copied root keeps its segment ids."""
    base = root.rstrip("/") + "/"
    return [{**f, "uri": f["uri"].removeprefix(base)}
            for f in files]


def context(spec: Spec, plan: WindowPlan, label_schema: dict[str, Any], config: WriteConfig,
            run_id: str) -> BuildContext:
    """What every segment build of the run shares."""
    from etl.pipeline.publish import manifest_schema

    return BuildContext(
        spec=spec, label_schema=label_schema,
        schema=manifest_schema(spec, {"label_schema": label_schema}),
        suite_name=plan.suite.name, row_configs=tuple(plan.suite.row),
        kinds=plan.vspec.kinds(), metric_keys=plan.checks.keys,
        metric_columns=plan.checks.columns, key_columns=plan.checks.key_columns,
        write=config, run_id=run_id, material={"spec": spec_digest(spec)})


def missing(plan: WindowPlan) -> list[SegmentTask]:
    """The window's segments not yet built (no ``segment.json``)."""
    return [t for t in plan.tasks
            if not storage.exists(storage.join(t.uri, segments.SEGMENT_FILE))]
