"""A version composed of segments: the window judged from stored partials, and its manifest.

Everything here reads ``segment.json`` files and the small partials stored beside them,
never a record: the cost is O(segments). The per-split ``content_hash`` combines the
segments' (a sum of record digests), so the same records give the same hash however the
window was built -- day by day or in one run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from etl.errors import ValidationFailed
from etl.pipeline.segment_files import read_keys, read_metric_partials
from etl.pipeline.segment_plan import WindowPlan
from etl.provenance import code_version
from etl.spec import Spec
from etl.transform import stats as stats_mod
from etl.transform.tabular import finalize_partial
from etl.validation import partition as vpart
from etl.validation.report import failure_message, finish
from etl.validation.window import judge_window
from etl.versions import segments

Metas = list[tuple[str, dict[str, Any]]]


def _row_partials(meta: dict[str, Any]) -> list[vpart.Partial]:
    return [vpart.Partial(**{**p, "values": tuple(p["values"]), "examples": tuple(p["examples"])})
            for p in meta["validation"]["row_partials"]]


def _examples(metas: Metas) -> Any:
    """A function giving the window's stored keys as one frame (read only on a duplicate)."""

    def frame() -> Any:
        import dask
        import dask.dataframe as dd

        parts = [dask.delayed(read_keys)(uri, meta) for uri, meta in metas]
        empty = read_keys(*metas[0]).iloc[:0]
        return dd.from_delayed(parts, meta=empty, verify_meta=False)

    return frame


def judge(spec: Spec, plan: WindowPlan, metas: Metas, mode: str,
          results_uri: str) -> dict[str, Any]:
    """The window's validation summary (results and Data Docs written to ``results_uri``).

    Raises:
        ValidationFailed: a row-level expectation failed over its ``mostly`` on the window's
            totals, or a dataset-level one (row count, key uniqueness across segments, ...).
    """
    if plan.checks.key_columns:
        plan.checks.plan.examples = _examples(metas)
    results, levels = judge_window(plan.suite, plan.checks, spec.key, mode,
                                   [_row_partials(m) for _, m in metas],
                                   [read_metric_partials(uri, m) for uri, m in metas])
    built = [m for _, m in metas]
    counts = {
        "evaluated_rows": sum(m["validation"]["rows"] for m in built),
        "quarantined_rows": sum(m["validation"]["quarantined_rows"] for m in built),
        "partitions": len(built),
        "segments": len(built),
        "quarantine_files": [f"segments/{m['segment']}/{name}" for m in built
                             for name in m["validation"].get("quarantine_files", [])],
    }
    summary = finish(spec.name, plan.suite.name, mode, results, levels, counts, results_uri)
    if not summary["success"]:
        failures = [r.to_json_dict() for r in results if not r.success]
        raise ValidationFailed(failure_message(spec.name, failures, mode, results_uri), summary)
    return summary


def compose_splits(spec: Spec, metas: Metas) -> dict[str, Any]:
    """The manifest's ``splits``: every segment's shards (named by segment), in window order."""
    out = {}
    for split, _ in spec.split.fractions:
        parts = [(m["segment"], m["splits"].get(split) or {}) for _, m in metas]
        out[split] = {
            "num_examples": sum(p.get("num_examples", 0) for _, p in parts),
            "num_bytes": sum(p.get("num_bytes", 0) for _, p in parts),
            "content_hash": segments.combine_content(p["content_hash"] for _, p in parts
                                                     if p.get("content_hash")),
            "shards": [{**shard, "segment": seg} for seg, p in parts
                       for shard in p.get("shards", [])],
        }
    return out


def _fingerprint(metas: Metas) -> dict[str, Any]:
    files = [f for _, m in metas for f in m["source_fingerprint"].get("files", [])]
    lookups = sorted({m["source_fingerprint"].get("lookups") or "" for _, m in metas} - {""})
    digest = hashlib.sha256(json.dumps([files, lookups], sort_keys=True,
                                       default=str).encode()).hexdigest()
    return {"sha256": digest, "files": files, "lookups_sha256": lookups}


def compose_manifest(spec: Spec, run: dict[str, Any], version: str, config: Any,
                     plan: WindowPlan, metas: Metas) -> dict[str, Any]:
    """Every manifest field of docs/INTERFACES.md (``created_at`` is set at publish)."""
    from etl.pipeline.publish import manifest_schema

    merged = stats_mod.merge_all(m["statistics_partial"] for _, m in metas)
    stats = finalize_partial(merged, spec)
    dropped: dict[str, int] = {}
    for _, m in metas:
        for reason, n in m.get("dropped_rows", {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    stats["dropped_rows"] = dropped
    validation = dict(run.get("validation") or {})
    validation.update(results="validation/results.json", data_docs="validation/index.html")
    return {
        "format_version": 1, "layout": "segments", "dataset": spec.name, "version": version,
        "data_interval": run["interval"], "created_at": None, "run_id": run["run_id"],
        "code_version": code_version(), "compression": config.compression,
        "splits": compose_splits(spec, metas), "schema": manifest_schema(spec, stats),
        "statistics": {k: v for k, v in stats.items() if k != "label_schema"},
        "segments": [{"segment": m["segment"], "partition": m["partition"],
                      "records": sum(s["num_examples"] for s in m["splits"].values())}
                     for _, m in metas],
        "source_fingerprint": _fingerprint(metas), "validation": validation,
        "spec": {"name": spec.name, "split": dict(spec.split.fractions),
                 "salt": spec.split.salt, "shard_target_bytes": config.target_bytes,
                 "encoder": config.encoder},
    }
