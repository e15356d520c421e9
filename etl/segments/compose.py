"""A version from its segments: the window judged from their stored partials, and the
manifest composed from their ``segment.json`` files.

The judgement (tabular windows) reads no record: row-level expectations are summed over the
segments and GX judges ``mostly`` on the totals; dataset-level ones (row counts, key
uniqueness across segments, ...) get their metric values from the merged partials
(``etl.validation.metrics.judge_window``). The cost is O(segments); the stored keys are read
only when a duplicate has to be named.

The manifest: the per-split ``content_hash`` combines the segments' (a sum of record
digests), so the same records give the same hash however the window was built -- day by day,
in bulk, after a re-delivery or a compaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from etl.errors import ValidationFailed
from etl.provenance import code_version
from etl.segments.build import read_keys, read_partials
from etl.spec import DatasetSpec, Spec
from etl.validation import (
    DatasetChecks,
    SplitSuite,
    failure_message,
    finish,
    judge_window,
)
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
from etl.write.writer import combine_content

if TYPE_CHECKING:
    from etl.write.writer import WriteConfig


# --- the window judged ------------------------------------------------------------------------

def _examples(metas: Metas) -> Any:
    """A function giving the window's stored keys as one frame (read only on a duplicate)."""

    def frame() -> Any:
        import dask
        import dask.dataframe as dd

        keys = [dask.delayed(read_keys)(uri, meta) for uri, meta in metas]
        empty = read_keys(*metas[0]).iloc[:0]
        return dd.from_delayed(keys, meta=empty, verify_meta=False)

    return frame


def judge_from_partials(spec: Spec, suite: SplitSuite, checks: DatasetChecks, metas: Metas,
                        mode: str, results_uri: str,
                        join_gaps: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The window's validation summary (results and Data Docs written to ``results_uri``):
    ``suite`` split by level, ``checks`` its dataset-level metric needs (``etl.validation``).
    ``join_gaps``: the joins that matched nothing in some partitions (the kind's words for
    them), kept in the results and named beside a failed expectation on one of their columns.

    Raises:
        ValidationFailed: a row-level expectation failed over its ``mostly`` on the window's
            totals, or a dataset-level one (row count, key uniqueness across segments, ...).
    """
    results, levels = judge_window(suite, checks, spec.key, mode,
                                   [m.checks.row_partials for _, m in metas],
                                   [read_partials(uri, m)[0] for uri, m in metas],
                                   _examples(metas) if checks.key_columns else None)
    built = [m for _, m in metas]
    counts = {
        "evaluated_rows": sum(m.checks.rows for m in built),
        "quarantined_rows": sum(m.checks.quarantined_rows for m in built),
        "segments": len(built),
        "quarantine_files": [f"segments/{m.segment}/{name}" for m in built
                             for name in m.checks.quarantine_files],
    }
    summary = finish(spec.name, suite.name, mode, results, levels, counts, results_uri,
                     join_gaps)
    if not summary["success"]:
        failures = [r.to_json_dict() for r in results if not r.success]
        raise ValidationFailed(failure_message(spec.name, failures, mode, results_uri,
                                               join_gaps), summary, results_uri)
    return summary


# --- the manifest ----------------------------------------------------------------------------

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
