"""The ETL chain the DAG tasks and ``python -m etl`` call, one for every dataset kind:
``build_version``, then ``publish``; ``run`` does both, ``land`` fills the raw zone.

Building a version: every dataset kind goes one way -- its builder (``etl.kinds``) plans the
window and builds the segments no earlier run built (waiting for a run building the same
ones, and using them); then the version's writer lease is taken, the window is judged
straight into the version's ``validation/`` folder, and the lease is handed over with the
draft (the manifest to be, and the run record) inside. A version whose interval is already
published is reported, not rebuilt, unless ``force`` asks for a new ``-rN`` revision.

Publishing: ``publish`` takes the handed-over lease (reading it is enough while its expiry is
far off), checks the stored size of every shard the version holds itself and creates
``manifest.json`` only if absent, which is what makes the version visible to readers.

``run`` is ``build_version`` then ``publish`` -- the ETL DAG's two tasks -- with the same
options; a small window is built by this process's threads, a large one on a Dask cluster
started for it (``etl.cluster``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl import kinds, storage, versions
from etl.errors import PipelineError, VersionExistsError, VersionLockedError
from etl.pipeline import summary
from etl.pipeline.record import RunOptions, RunRecord, published
from etl.provenance import iso, run_key
from etl.segments.request import BuildRequest, Window

log = logging.getLogger("etl.pipeline")


def land(root: str, dataset: str = "flights", **kwargs: Any) -> str:
    """Land a dataset's upstream files into ``<root>/raw``; returns the raw zone URI."""
    return kinds.land(root, dataset, **kwargs).raw_uri


def run(spec_name: str, root: str, interval_end: str | datetime,
        interval_start: str | datetime | None = None, run_id: str | None = None,
        options: RunOptions | None = None, **fields: Any) -> dict[str, Any]:
    """Build and publish the version of [start, end); returns what ``publish`` returns.

    ``fields``: ``RunOptions`` fields, for callers that set one or two (``force=True``).
    """
    t0 = time.monotonic()
    options = options or RunOptions(**fields)
    result = publish(build_version(spec_name, root, interval_end, interval_start, run_id,
                                   options))
    result["wall_s"] = round(time.monotonic() - t0, 3)
    return result



def build_version(spec_name: str, root: str, interval_end: str | datetime,
                  interval_start: str | datetime | None = None, run_id: str | None = None,
                  options: RunOptions | None = None) -> str:
    """The version URI with its draft written, or the published version's URI when the
    interval's version exists and ``options.force`` is off (``publish`` then reports it)."""
    options = options or RunOptions()
    kind = kinds.kind_of(spec_name)
    spec = kind.load_spec(spec_name, source_uri=options.source_uri)
    record = RunRecord.new(spec, root, interval_end, interval_start, run_id, options)
    target = target_version(record)
    if target is None:
        summary.already_published("build", record, record.version)
        return versions.version_uri(root, spec.name, record.version)
    record.target_version = target
    vuri = versions.version_uri(root, spec.name, target)
    previous = _previous(root, spec.name)
    from etl.segments.compose import compose_manifest
    from etl.write.shards import normalize_compression
    from etl.write.writer import WriteConfig

    config = WriteConfig(target_bytes=int(options.shard_bytes or spec.shard_target_bytes),
                         min_train_shards=spec.min_train_shards,
                         compression=normalize_compression(
                             spec.compression if options.compression is None
                             else options.compression))
    with storage.storage_failures(f"build the segments of {vuri}"):
        window = kind.build(BuildRequest(spec, root, record.start, record.end, record.run_id,
                                         config, options.dask_address, record.run_dir,
                                         previous))
    record.timings.update(window.timings)
    lock = acquire_writer(vuri, record.run_id, options.lock_wait_s)
    if lock is None:
        return vuri  # published meanwhile by another run: publish() reports it
    clear_unpublished(record, lock)
    heartbeat = versions.Heartbeat(lock).start()
    try:
        judged = _judge(kind, window, record, vuri)
        manifest = compose_manifest(window.spec, record.to_json(), config, window.metas,
                                    judged.statistics)
        record.writer_lock = {"owner": lock.owner}
        versions.hand_off_writer_lock(heartbeat.stop(),
                                      {"manifest": manifest.to_json(),
                                       "run": record.to_json()})
    except BaseException:
        versions.release_writer_lock(heartbeat.stop())  # a killed process's lease expires
        raise
    summary.written(spec.name, manifest, record.timings["build_s"], vuri)
    return vuri


def _judge(kind: kinds.DatasetKind, window: Window, record: RunRecord, vuri: str):
    """The window's validation, written into the version's ``validation/`` folder."""
    t0 = time.monotonic()
    results = storage.join(vuri, "validation")
    judged = kind.judge(window, record.options.mode, results)
    record.timings["validate_s"] = round(time.monotonic() - t0, 3)
    summary.validated(record.dataset, judged.summary, record.timings["validate_s"], results)
    record.validation = {**judged.summary, "drift": judged.drift}
    return judged


def _previous(root: str, dataset: str) -> versions.Manifest | None:
    """The newest published manifest (what it holds is what this run may reuse)."""
    latest = versions.latest_version(root, dataset)
    return None if latest is None else \
        versions.read_manifest(versions.version_uri(root, dataset, latest))


LOCK_POLL_S = 2.0
WAIT_LOG_EVERY_S = 30.0  # a waiting run repeats its WARNING this often


def acquire_writer(version_uri: str, owner: str, wait_s: float) -> versions.WriterLock | None:
    """Take the writer lease; None when another run published the version meanwhile.

    A dead holder's lease is broken by ``acquire`` itself; a live one is waited for, saying
    so at WARNING at once and every ``WAIT_LOG_EVERY_S`` (who, since when, last heartbeat).
    """
    start = time.monotonic()
    deadline, next_log = start + wait_s, start
    while True:
        try:
            return versions.acquire_writer_lock(version_uri, owner)
        except VersionExistsError:
            return None
        except VersionLockedError as exc:
            now = time.monotonic()
            if now > deadline:
                raise
            if now >= next_log:
                log.warning("%s is being written by %s; waiting for it (%.0f of %.0f s waited, "
                            "giving up after %.0f s more)", version_uri,
                            versions.describe(exc.holder), now - start, wait_s, deadline - now)
                next_log = now + WAIT_LOG_EVERY_S
            time.sleep(max(0.0, min(LOCK_POLL_S, deadline - now)))


def clear_unpublished(record: RunRecord, lock: versions.WriterLock) -> None:
    """Remove what a killed attempt left: the version folder's files, a dead run's scratch."""
    vuri = versions.version_of(lock)
    storage.clear_dir(vuri, keep=versions.WRITER_LOCK)
    dead = lock.took_over.get("owner")
    if isinstance(dead, str) and dead != record.run_id:
        log.warning("removing the staging folder of %r, whose writer lease was broken", dead)
        _drop_staging(storage.safe_join(record.root, "staging", record.dataset, record.version,
                                           run_key(dead)))


def target_version(record: RunRecord) -> str | None:
    """The version id to write, or None when the published one must be reported instead.

    A forced run writes the next ``-rN`` revision; its retry (same run id, the revision's
    writer lease still naming it) writes that same revision again, not one more.
    """
    if not published(record.root, record.dataset, record.version):
        return record.version
    if not record.options.force:
        return None
    from etl.versions import lease
    from etl.versions.ids import is_version_id

    interval = versions.parse_version_id(record.version)
    for name in storage.list_dir(versions.dataset_uri(record.root, record.dataset)):
        if not is_version_id(name) or published(record.root, record.dataset, name):
            continue
        ours = versions.parse_version_id(name)
        held = lease.current_holder(storage.join(
            versions.version_uri(record.root, record.dataset, name), versions.WRITER_LOCK))
        if (ours.end, ours.start) == (interval.end, interval.start) and \
                (held or {}).get("owner") == record.run_id:
            return name
    return versions.next_revision(record.root, record.dataset, record.version)


def _drop_staging(run_dir: str) -> None:
    """Delete a run's staging folder and, on local disk, the emptied folders above it."""
    storage.delete_tree(run_dir)
    if not storage.is_gcs(run_dir):
        version_dir = Path(storage.get_fs(run_dir)[1]).parent
        for folder in (version_dir, version_dir.parent):
            try:
                folder.rmdir()
            except OSError:  # not empty (another run) or gone
                break


def publish(written_uri: str) -> dict[str, Any]:
    """Make a built version visible: manifest.json, created only if absent, under the lease.

    ``written_uri``: what ``build_version`` returned; its handed-off writer lease carries the
    draft (the manifest to be and the run record).
    Returns ``{"version_uri", "version", "created", "splits", "timings"}``.
    """
    try:
        lock = versions.take_handed_off_lock(written_uri)
    except VersionLockedError:
        lock = None  # a builder's lease; unless the version is published, refused below
    if lock is None or not isinstance(lock.payload, dict):
        return _already_published(written_uri)
    manifest = versions.Manifest.from_json(
        lock.payload["manifest"], f"{written_uri}/{versions.WRITER_LOCK} (the draft)")
    record = lock.payload["run"]
    _check_shards(written_uri, manifest)
    manifest = replace(manifest, created_at=iso(datetime.now(UTC)))
    created = versions.publish_manifest(written_uri, manifest, lock=lock)
    _drop_staging(record["run_dir"])
    summary.published(record["dataset"], manifest, created, written_uri)
    return {"version_uri": written_uri, "version": manifest.version, "created": created,
            "splits": _split_rows(manifest), "timings": record.get("timings", {})}


def _split_rows(manifest: versions.Manifest) -> dict[str, int]:
    return {s: v.num_examples for s, v in manifest.splits.items()}


def _already_published(written_uri: str) -> dict[str, Any]:
    """No draft handed over: the version was published (reported), or nothing can be."""
    if not storage.exists(storage.join(written_uri, versions.MANIFEST)):
        holder = versions.current_holder(storage.join(written_uri, versions.WRITER_LOCK))
        if holder:
            raise VersionLockedError(written_uri, holder)
    manifest = versions.read_manifest(written_uri)  # IncompleteVersionError if none
    summary.published(str(manifest.dataset), manifest, False, written_uri)
    return {"version_uri": written_uri, "version": manifest.version, "created": False,
            "splits": _split_rows(manifest)}


def _check_shards(written_uri: str, manifest: versions.Manifest) -> None:
    """Every shard the version holds itself has its written size (a segment's were checked
    before its segment.json existed; segments are immutable)."""
    for info in manifest.splits.values():
        for shard in info.shards:
            if shard.segment:
                continue
            size = storage.stat(versions.shard_uri(written_uri, shard))["size"]
            if size != shard.bytes:
                raise PipelineError(f"{written_uri}/{shard.file}: {size} bytes stored, "
                                    f"{shard.bytes} written; not publishing")
