"""A version's manifest composed from its segments' ``segment.json`` files.

The per-split ``content_hash`` combines the segments' (a sum of record digests), so the same
records give the same hash however the window was built -- day by day, in bulk, after a
re-delivery or a compaction; tabular statistics are merged from the segments' partials.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from etl import statistics
from etl.provenance import code_version
from etl.segments.request import Metas
from etl.spec import Spec
from etl.transform.tabular import finalize_partial
from etl.versions import segment
from etl.versions.manifest import (
    FORMAT_VERSION,
    Interval,
    Manifest,
    SegmentEntry,
    SpecFacts,
    Verdict,
    VersionSources,
)
from etl.versions.segment import SegmentMeta, SplitInfo, json_digest


def manifest_schema(spec: Spec, stats: dict[str, Any]) -> dict[str, Any]:
    """The spec's schema with the label as the transform resolved it (e.g. the classes taken
    from the train split); ``statistics.label_schema`` is not kept in the manifest."""
    schema = spec.manifest_schema()
    schema["label"] = stats.get("label_schema", schema["label"])
    return schema


def compose_splits(spec: Spec, metas: Metas) -> dict[str, SplitInfo]:
    """The manifest's ``splits``: every segment's shards (named by segment), in window order."""
    out = {}
    for split, _ in spec.split.fractions:
        entries = [(m.segment, m.split(split)) for _, m in metas]
        out[split] = SplitInfo.of(
            num_examples=sum(p.num_examples for _, p in entries),
            num_bytes=sum(p.num_bytes for _, p in entries),
            content_hash=segment.combine_content(p.content_hash for _, p in entries
                                                 if p.content_hash),
            shards=tuple(replace(shard, segment=seg) for seg, p in entries
                         for shard in p.shards),
        )
    return out


def _fingerprint(metas: Metas) -> VersionSources:
    files = [f for _, m in metas for f in m.sources.files]
    lookups = sorted({m.sources.lookups or "" for _, m in metas} - {""})
    return VersionSources.of(sha256=json_digest([files, lookups]), files=files,
                             lookups_sha256=lookups)


def merged_statistics(spec: Spec, metas: list[SegmentMeta]) -> dict[str, Any]:
    """The statistics of tabular segments together: their partials merged, then finalized
    (the same figures however the rows were grouped into segments)."""
    stats = finalize_partial(statistics.merge_all(m.statistics_partial for m in metas), spec)
    dropped: dict[str, int] = {}
    for m in metas:
        for reason, n in (m.dropped_rows or {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    stats["dropped_rows"] = dropped
    return stats


def compose_manifest(spec: Any, run: dict[str, Any], config: Any, metas: Metas,
                     stats: dict[str, Any]) -> Manifest:
    """Every manifest field of docs/INTERFACES.md (``created_at`` is set at publish);
    ``run``: the run record as JSON, its validation summary included."""
    verdict = Verdict.from_json(run.get("validation") or {}, "the run record's validation")
    validation = replace(verdict, results="validation/results.json",
                         data_docs="validation/index.html")
    return Manifest.of(
        format_version=FORMAT_VERSION, layout="segments", dataset=spec.name,
        version=run["target_version"], data_interval=Interval.from_json(
            run["interval"], "the run record's interval"),
        created_at=None, run_id=run["run_id"],
        code_version=code_version(), compression=config.compression,
        splits=compose_splits(spec, metas), schema=manifest_schema(spec, stats),
        statistics={k: v for k, v in stats.items() if k != "label_schema"},
        segments=tuple(SegmentEntry.of(segment=m.segment, partition=m.partition,
                                       records=m.num_examples, partitions=m.partitions)
                       for _, m in metas),
        source_fingerprint=_fingerprint(metas), validation=validation,
        spec=SpecFacts.of(name=spec.name, split=dict(spec.split.fractions),
                          salt=spec.split.salt, shard_target_bytes=config.target_bytes,
                          encoder=config.encoder),
    )
