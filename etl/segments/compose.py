"""A version from its segments: the manifest composed from their ``segment.json`` files and
what the kind's judgement found (a tabular window is judged from the segments' stored
partials by ``etl.kinds.tabular.judge``).

The per-split ``content_hash`` combines the segments' (a sum of record digests), so the same
records give the same hash however the window was built -- day by day, in bulk, after a
re-delivery or a compaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from etl.provenance import code_version
from etl.spec import DatasetSpec
from etl.versions.manifest import (
    FORMAT_VERSION,
    Interval,
    Manifest,
    SegmentEntry,
    SpecFacts,
    Verdict,
    VersionSources,
)
from etl.versions.segment import (
    LabelSchema,
    Metas,
    Schema,
    SplitInfo,
    Statistics,
    json_digest,
)
from etl.write.writer import WriteConfig, combine_content


def manifest_schema(spec: DatasetSpec, label: Mapping[str, Any] | None = None) -> Schema:
    """The spec's schema, with ``label`` -- the label as the transform resolved it (e.g. the
    classes taken from the train split) -- where given."""
    where = f"{spec.name}: the spec's schema"
    schema = Schema.from_json(spec.manifest_schema(), where)
    return schema.with_label(LabelSchema.from_json(label, where, "label")) if label else schema


def compose_splits(spec: DatasetSpec, metas: Metas) -> dict[str, SplitInfo]:
    """The manifest's ``splits``: every segment's shards (named by segment), in window order."""
    out = {}
    for split, _ in spec.split.fractions:
        entries = [(m.segment, m.split(split)) for _, m in metas]
        out[split] = SplitInfo.of(
            num_examples=sum(p.num_examples for _, p in entries),
            num_bytes=sum(p.num_bytes for _, p in entries),
            content_hash=combine_content(p.content_hash for _, p in entries
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


@dataclass(frozen=True)
class Composed:
    """What a run gives the manifest besides its segments: the version it publishes, the
    run, its interval, the window's verdict, statistics and resolved label."""

    version: str
    run_id: str
    interval: Interval
    verdict: Verdict
    statistics: Statistics
    label: Mapping[str, Any] | None = None  # the label as the window resolved it


def compose_manifest(spec: DatasetSpec, run: Composed, config: WriteConfig,
                     metas: Metas) -> Manifest:
    """Every manifest field of docs/INTERFACES.md (``created_at`` is set at publish)."""
    validation = replace(run.verdict, results="validation/results.json",
                         data_docs="validation/index.html")
    return Manifest.of(
        format_version=FORMAT_VERSION, layout="segments", dataset=spec.name,
        version=run.version, data_interval=run.interval, created_at=None, run_id=run.run_id,
        code_version=code_version(), compression=config.compression,
        splits=compose_splits(spec, metas), schema=manifest_schema(spec, run.label),
        statistics=run.statistics,
        segments=tuple(SegmentEntry.of(segment=m.segment, extent=m.extent,
                                       records=m.num_examples, partitions=m.partitions)
                       for _, m in metas),
        source_fingerprint=_fingerprint(metas), validation=validation,
        spec=SpecFacts.of(name=spec.name, split=dict(spec.split.fractions),
                          salt=spec.split.salt, shard_target_bytes=config.target_bytes,
                          encoder=config.encoder),
    )
