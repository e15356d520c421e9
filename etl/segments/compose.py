"""A version's manifest composed from its segments' ``segment.json`` files.

The per-split ``content_hash`` combines the segments' (a sum of record digests), so the same
records give the same hash however the window was built -- day by day, in bulk, after a
re-delivery or a compaction; tabular statistics are merged from the segments' partials.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from etl.provenance import code_version
from etl.segments.request import Metas
from etl.spec import Spec
from etl.transform import stats as stats_mod
from etl.transform.tabular import finalize_partial
from etl.versions import segments


def manifest_schema(spec: Spec, stats: dict[str, Any]) -> dict[str, Any]:
    """The spec's schema with the label as the transform resolved it (e.g. the classes taken
    from the train split); ``statistics.label_schema`` is not kept in the manifest."""
    schema = spec.manifest_schema()
    schema["label"] = stats.get("label_schema", schema["label"])
    return schema


def compose_splits(spec: Spec, metas: Metas) -> dict[str, Any]:
    """The manifest's ``splits``: every segment's shards (named by segment), in window order."""
    out = {}
    for split, _ in spec.split.fractions:
        entries = [(m["segment"], m["splits"].get(split) or {}) for _, m in metas]
        out[split] = {
            "num_examples": sum(p.get("num_examples", 0) for _, p in entries),
            "num_bytes": sum(p.get("num_bytes", 0) for _, p in entries),
            "content_hash": segments.combine_content(p["content_hash"] for _, p in entries
                                                     if p.get("content_hash")),
            "shards": [{**shard, "segment": seg} for seg, p in entries
                       for shard in p.get("shards", [])],
        }
    return out


def _fingerprint(metas: Metas) -> dict[str, Any]:
    files = [f for _, m in metas for f in m["source_fingerprint"].get("files", [])]
    lookups = sorted({m["source_fingerprint"].get("lookups") or "" for _, m in metas} - {""})
    digest = hashlib.sha256(json.dumps([files, lookups], sort_keys=True,
                                       default=str).encode()).hexdigest()
    return {"sha256": digest, "files": files, "lookups_sha256": lookups}


def merged_statistics(spec: Spec, metas: list[dict[str, Any]]) -> dict[str, Any]:
    """The statistics of tabular segments together: their partials merged, then finalized
    (the same figures however the rows were grouped into segments)."""
    stats = finalize_partial(stats_mod.merge_all(m["statistics_partial"] for m in metas), spec)
    dropped: dict[str, int] = {}
    for m in metas:
        for reason, n in m.get("dropped_rows", {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    stats["dropped_rows"] = dropped
    return stats


def compose_manifest(spec: Any, run: dict[str, Any], config: Any, metas: Metas,
                     stats: dict[str, Any]) -> dict[str, Any]:
    """Every manifest field of docs/INTERFACES.md (``created_at`` is set at publish);
    ``run``: the run record as JSON, its validation summary included."""
    validation = dict(run.get("validation") or {})
    validation.update(results="validation/results.json", data_docs="validation/index.html")
    return {
        "format_version": 1, "layout": "segments", "dataset": spec.name,
        "version": run["target_version"], "data_interval": run["interval"],
        "created_at": None, "run_id": run["run_id"],
        "code_version": code_version(), "compression": config.compression,
        "splits": compose_splits(spec, metas), "schema": manifest_schema(spec, stats),
        "statistics": {k: v for k, v in stats.items() if k != "label_schema"},
        "segments": [{"segment": m["segment"], "partition": m["partition"],
                      "records": sum(s["num_examples"] for s in m["splits"].values()),
                      "partitions": m["partitions"]} for _, m in metas],
        "source_fingerprint": _fingerprint(metas), "validation": validation,
        "spec": {"name": spec.name, "split": dict(spec.split.fractions),
                 "salt": spec.split.salt, "shard_target_bytes": config.target_bytes,
                 "encoder": config.encoder},
    }
