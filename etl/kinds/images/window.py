"""The images kind's window: the landed image folder as one segment, built through the same
chain as a table's.

An image source is not time-partitioned: its one raw partition is every file landed, and its
digest covers the files' listing (paths, sizes, generations) and the spec, so a run with
nothing new reuses the segment and one added or changed image builds a new one. The build
checks every file in parallel (``etl.kinds.images.check``), splits them by the salted hash of
their key and counts them (``prepare_for_write``), and writes the shards into the segment
folder on Dask (``write_splits``: the shared shard plan and row order, one shard per Dask
partition written by a worker straight to storage), under the segment's lease like a tabular
segment (``etl.segments.build.build_once``); ``judge`` applies the run's validation mode to
what it found.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd

from etl import cluster, storage
from etl.errors import ValidationFailed
from etl.kinds import BuildRequest, DatasetKind, Judged, Window
from etl.kinds.images.check import QUARANTINE_FILE, SHOWN_FILES, validate_dataset
from etl.kinds.images.source import ImageSourceError, list_images, source_uri
from etl.kinds.images.spec import KEY_COLUMN, ImageSpec, load_image_spec
from etl.segments.build import build_once
from etl.segments.compose import manifest_schema
from etl.segments.plan import known_segments, new_segments
from etl.versions import segment
from etl.versions.segment import (
    Interval,
    Schema,
    SegmentChecks,
    SegmentContents,
    SegmentMeta,
    SegmentOrigin,
    SourceFiles,
    SplitInfo,
    Statistics,
)
from etl.write import shards
from etl.write.readback import iter_records
from etl.write.writer import (
    HASH_COL,
    SHARD_COL,
    SPLIT_COL,
    WriteConfig,
    assign_shards,
    assign_split,
    content_hash,
    encoder,
    key_hash,
    measure_record_bytes,
    plan_shards,
    record_digest,
    split_info,
    write_one_shard,
)

log = logging.getLogger("etl.pipeline")

FILES_PER_TASK = 256  # image files decoded by one Dask task
RESULTS = ("results.json", "index.html")


def build(request: BuildRequest[ImageSpec]) -> Window[ImageSpec, None]:
    """The window's one segment: found (the previous version's, or an earlier attempt's),
    or built now."""
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
    meta, built = build_once(uri, request.run_id, lambda: _build(
        request, seg, uri, partition, listing, fingerprint))
    if built:
        log.info("build %s: 1 segment built, %d image files checked, %d quarantined, %.1f s",
                 spec.name, meta.checks.rows, meta.checks.quarantined_rows,
                 time.monotonic() - t0)
    metas = [(uri, meta)]
    return Window(spec, metas, new_segments(metas, request.previous), int(built), None,
                  timings={"build_s": round(time.monotonic() - t0, 3)},
                  previous=request.previous)


def _build(request: BuildRequest[ImageSpec], seg: str, uri: str, partition: list[str],
           listing: pd.DataFrame, fingerprint: dict[str, Any]) -> SegmentMeta:
    """Check, split and write every image into the segment folder; its ``segment.json`` to
    be."""
    spec = request.spec
    tasks = max(1, math.ceil(len(listing) / FILES_PER_TASK))
    with cluster.dask_client(request.dask_address, work_bytes=None):
        ddf = dd.from_pandas(listing, npartitions=tasks, sort=False)
        outcome = validate_dataset(ddf, spec, "quarantine",
                                   results_uri=storage.join(uri, "validation"),
                                   quarantine_uri=storage.join(uri, "quarantine"))
        final, stats = prepare_for_write(outcome.valid, spec)
        schema = manifest_schema(spec)
        written = write_splits(final, spec.name, uri, schema, stats.split_counts,
                               request.write)
    splits = {name: _split_entry(uri, entries, request.write.compression)
              for name, entries in written.items()}
    bad = outcome.summary["quarantined_rows"]
    origin = SegmentOrigin(
        dataset=spec.name, segment=seg, extent="all", partitions=(tuple(partition),),
        interval=Interval.of(start=None, end=None),
        sources=SourceFiles.of(files=({"uri": fingerprint["source"],
                                       "files": fingerprint["files"],
                                       "sha256": fingerprint["sha256"]},), lookups=None))
    checks = SegmentChecks.of(
        rows=outcome.summary["evaluated_rows"], quarantined_rows=bad,
        reasons=outcome.summary["reasons"],
        quarantine_files=(f"quarantine/{QUARANTINE_FILE}",) if bad else ())
    return SegmentMeta.new(origin, SegmentContents(
        splits=splits, schema=schema, compression=request.write.compression,
        validation=checks, statistics=stats), request.run_id)


def _split_entry(uri: str, entries: list[dict[str, Any]], compression: str | None
                 ) -> SplitInfo:
    """A split's shards with the content hash of their records (read back once)."""
    digests = [record_digest(rec) for e in entries
               for rec in iter_records(storage.join(uri, e["file"]), compression)]
    return split_info(entries, content_hash(digests))


def _split_rows(part: pd.DataFrame, spec: ImageSpec) -> pd.DataFrame:
    hashes = key_hash(part, (KEY_COLUMN,), spec.split.salt)
    return part.assign(**{HASH_COL: hashes, SPLIT_COL: assign_split(hashes, spec.split.fractions)})


def prepare_for_write(raw: dd.DataFrame, spec: ImageSpec) -> tuple[dd.DataFrame, Statistics]:
    """(the checked images split by the salted hash of their key, ready for ``write_splits``;
    the manifest's statistics). Image classes always come from the spec."""
    final = raw.map_partitions(_split_rows, spec, meta=_split_rows(raw._meta, spec))
    if spec.label_name != "label":
        final = final.rename(columns={"label": spec.label_name})
    small = final[[SPLIT_COL, spec.label_name, "height", "width"]].compute()
    counts = small[SPLIT_COL].value_counts()
    split_counts = {name: int(counts.get(name, 0)) for name, _ in spec.split.fractions}
    train = small[small[SPLIT_COL] == "train"]
    label_counts = {str(i): int((train[spec.label_name] == i).sum())
                    for i in range(len(spec.classes))}
    stats = Statistics.of(
        computed_on="train", numeric={}, vocabularies={}, label_counts=label_counts,
        split_counts=split_counts,
        images={"height": [int(small["height"].min()), int(small["height"].max())]
                if len(small) else None,
                "width": [int(small["width"].min()), int(small["width"].max())]
                if len(small) else None})
    return final, stats


def write_splits(ddf: dd.DataFrame, dataset: str, folder_uri: str, schema: Schema,
                 split_counts: dict[str, int], config: WriteConfig) -> dict[str, list[dict]]:
    """Every split's shards of a Dask frame under ``folder_uri``, one shard per Dask
    partition (a shuffle on the global shard id with known divisions), each written by a
    worker; returns the shard entries per split."""
    encoder(config.encoder)
    columns = schema.columns
    sample = ddf.head(config.sample_rows, npartitions=1, compute=True)
    if sample.empty:
        sample = ddf.head(config.sample_rows, npartitions=-1, compute=True)
    plan = plan_shards(split_counts, measure_record_bytes(sample, columns, schema,
                                                          config.compression),
                       config.target_bytes, config.min_train_shards)
    assigned = ddf.map_partitions(assign_shards, plan, meta=assign_shards(ddf._meta, plan))
    parts = assigned.set_index(SHARD_COL, divisions=list(range(plan.total + 1))).to_delayed()
    if len(parts) != plan.total:
        raise RuntimeError(f"expected {plan.total} shard partitions, got {len(parts)}")
    tasks, names = [], []
    for index, part in enumerate(parts):
        split, i = plan.shard_of(index)
        name = shards.shard_filename(dataset, split, i, plan.num_shards[split],
                                     config.compression)
        names.append((split, name))
        tasks.append(dask.delayed(write_one_shard)(
            part, storage.join(folder_uri, name), columns, schema, config))
    log.debug("writing %d shard(s) for %s (%.0f B/record): %s", plan.total, dataset,
              plan.record_bytes, plan.num_shards)
    out: dict[str, list[dict]] = {s: [] for s in plan.splits}
    for (split, name), entry in zip(names, dask.compute(*tasks)):
        out[split].append({**entry, "file": name})
    return out


def judge(window: Window[ImageSpec, None], mode: str, results_uri: str) -> Judged:
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
        failures = storage.read_json(storage.join(uri, "validation", RESULTS[0]))["failures"]
        shown = "; ".join(f"{f['uri']}: {f['reason']}" for f in failures[:SHOWN_FILES])
        raise ValidationFailed(
            f"{spec.name}: {bad} of {total} image file(s) failed the checks, more than the "
            f"{limit} allowed ({mode} mode, quarantine.max_fraction "
            f"{spec.quarantine.max_fraction}): {shown}", summary)
    return Judged(summary, meta.statistics or Statistics())


KIND: DatasetKind[ImageSpec, None] = DatasetKind(
    name="images", load_spec=load_image_spec, build=build, judge=judge)
