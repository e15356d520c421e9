"""Image windows: the landed image folder as one segment, built through the same chain.

An image source is not time-partitioned: its one partition is every file landed, and its
digest covers the files' listing (paths, sizes, generations) and the spec, so a run with
nothing new reuses the segment and one added or changed image builds a new one. The build
checks every file in parallel (``etl.validation.images``), splits and counts
(``etl.transform.images``) and writes the shards into the segment folder, under the segment's
lease like a tabular segment; ``judge`` applies the run's validation mode to what it found.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

from etl import storage
from etl.errors import ValidationFailed
from etl.provenance import code_version, iso
from etl.segments.plan import known_segments
from etl.segments.request import BuildRequest, Judged, Window, new_segments
from etl.versions import lease, segment
from etl.versions.segment import (
    Interval,
    SegmentChecks,
    SegmentMeta,
    SourceFiles,
    SplitInfo,
)

log = logging.getLogger("etl.pipeline")

FILES_PER_TASK = 256  # image files decoded by one Dask task
RESULTS = ("results.json", "index.html")


def build(request: BuildRequest) -> Window:
    """The window's one segment: found (the previous version's, or an earlier attempt's),
    or built now."""
    from etl.sources.images import ImageSourceError, list_images, source_uri

    t0 = time.monotonic()
    spec = request.spec
    listing, fingerprint = list_images(request.root, spec)
    if listing.empty:
        raise ImageSourceError(f"{source_uri(request.root, spec)}: no image files "
                               f"({', '.join(spec.source.extensions)})")
    material = {"dataset": spec.name, "spec": hashlib.sha256(spec.path.read_bytes()).hexdigest(),
                "files": fingerprint["sha256"]}
    partition = ["all", segment.json_digest(material)[:16]]
    seg = next((k.segment for k in known_segments(request.previous)
                if k.partitions == (tuple(partition),)), None) or \
        segment.segment_id("all", {"partitions": [partition]})
    uri = segment.segment_uri(request.root, spec.name, seg)
    meta, held = lease.claim(uri, request.run_id)
    if meta is None:
        with lease.Heartbeat(held) as beat:
            try:
                storage.clear_dir(uri, keep=segment.SEGMENT_LOCK)  # a killed build's
                meta = _build(request, seg, uri, partition, listing, fingerprint)
                beat.check()  # still ours: only then does the segment become visible
                segment.write_segment(uri, meta)
            finally:
                lease.release(beat.stop())
        meta = segment.read_segment(uri) or meta
        log.info("build %s: 1 segment built, %d image files checked, %d quarantined, %.1f s",
                 spec.name, meta.checks.rows, meta.checks.quarantined_rows,
                 time.monotonic() - t0)
    metas = [(uri, meta)]
    return Window(spec, metas, new_segments(metas, request.previous), int(held is not None),
                  timings={"build_s": round(time.monotonic() - t0, 3)},
                  previous=request.previous)


def _build(request: BuildRequest, seg: str, uri: str, partition: list[str], listing: Any,
           fingerprint: dict[str, Any]) -> SegmentMeta:
    """Check, split and write every image into the segment folder; its ``segment.json``."""
    import dask.dataframe as dd

    from etl.cluster import dask_client
    from etl.segments.compose import manifest_schema
    from etl.transform.images import prepare_for_write
    from etl.validation.images import QUARANTINE_FILE, validate_dataset
    from etl.write.tfds import write_dataset_info
    from etl.write.writer import write_splits

    spec = request.spec
    tasks = max(1, math.ceil(len(listing) / FILES_PER_TASK))
    with dask_client(request.dask_address, work_bytes=None):
        ddf = dd.from_pandas(listing, npartitions=tasks, sort=False)
        outcome = validate_dataset(ddf, spec, "quarantine",
                                   results_uri=storage.join(uri, "validation"),
                                   quarantine_uri=storage.join(uri, "quarantine"))
        final, stats = prepare_for_write(outcome.valid, spec)
        schema = manifest_schema(spec, stats)
        written = write_splits(final, spec.name, uri, schema, stats["split_counts"],
                               request.write)
    splits = {name: _split_entry(uri, entries, request.write.compression)
              for name, entries in written.items()}
    bad = outcome.summary["quarantined_rows"]
    meta = SegmentMeta.of(
        format_version=segment.SEGMENT_FORMAT, dataset=spec.name, segment=seg,
        partition="all", partitions=(tuple(partition),), level=0,
        data_interval=Interval.of(start=None, end=None),
        created_at=iso(datetime.now(UTC)), run_id=request.run_id,
        code_version=code_version(), compression=request.write.compression,
        schema=schema, splits=splits, statistics=stats,
        source_fingerprint=SourceFiles.of(files=({"uri": fingerprint["source"],
                                                  "files": fingerprint["files"],
                                                  "sha256": fingerprint["sha256"]},),
                                          lookups=None),
        validation=SegmentChecks.of(
            rows=outcome.summary["evaluated_rows"], quarantined_rows=bad,
            reasons=outcome.summary["reasons"],
            quarantine_files=(f"quarantine/{QUARANTINE_FILE}",) if bad else ()),
    )
    write_dataset_info(uri, meta)  # stock TFDS reads the folder
    return meta


def _split_entry(uri: str, entries: list[dict[str, Any]], compression: str | None
                 ) -> SplitInfo:
    """A split's shards with the content hash of their records (read back once)."""
    from etl.write.shards import iter_records

    digests = [segment.record_digest(rec) for e in entries
               for rec in iter_records(storage.join(uri, e["file"]), compression)]
    return segment.split_info(entries, segment.content_hash(digests))


def judge(window: Window, mode: str, results_uri: str) -> Judged:
    """The segment's checks under this run's mode: ``strict`` allows no rejected file,
    ``quarantine`` the spec's ``quarantine.max_fraction``."""
    uri, meta = window.metas[0]
    spec, found = window.spec, meta.checks
    total, bad = found.rows, found.quarantined_rows
    limit = 0 if mode == "strict" else math.floor(spec.quarantine.max_fraction * total)
    summary = {"kind": "images", "mode": mode, "success": bad <= limit,
               "evaluated_rows": total, "quarantined_rows": bad, "max_quarantined": limit,
               "reasons": dict(found.reasons or {}), "segments": 1,
               "quarantine_files": [f"segments/{meta.segment}/{name}"
                                    for name in found.quarantine_files]}
    for name in RESULTS:
        storage.write_bytes_atomic(storage.join(results_uri, name), storage.read_bytes(
            storage.join(uri, "validation", name)))
    if bad > limit:
        from etl.validation.images import SHOWN_FILES

        failures = storage.read_json(storage.join(uri, "validation", RESULTS[0]))["failures"]
        shown = "; ".join(f"{f['uri']}: {f['reason']}" for f in failures[:SHOWN_FILES])
        raise ValidationFailed(
            f"{spec.name}: {bad} of {total} image file(s) failed the checks, more than the "
            f"{limit} allowed ({mode} mode, quarantine.max_fraction "
            f"{spec.quarantine.max_fraction}): {shown}", summary)
    return Judged(summary, dict(meta.statistics or {}))
