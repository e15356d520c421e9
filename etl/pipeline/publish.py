"""Publishing a version: the writer lease, and the draft turned into ``manifest.json`` last.

``build`` (``etl.pipeline.build``) hands the version's writer lease over with the draft (the
manifest to be) inside it; ``publish`` takes that lease (reading it is enough while its expiry
is far off), checks the stored size of every shard the version holds itself and creates
``manifest.json`` only if absent, which is what makes the version visible to readers.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl import storage, versions
from etl.errors import PipelineError, VersionExistsError, VersionLockedError
from etl.pipeline import summary
from etl.pipeline.record import RunRecord, published
from etl.provenance import iso, run_key

log = logging.getLogger("etl.pipeline")

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


def clear_unpublished(run: RunRecord, lock: versions.WriterLock) -> None:
    """Remove what a killed attempt left: the version folder's files, a dead run's scratch."""
    vuri = versions.version_of(lock)
    storage.clear_dir(vuri, keep=versions.WRITER_LOCK)
    dead = lock.took_over.get("owner")
    if isinstance(dead, str) and dead != run.run_id:
        log.warning("removing the staging folder of %r, whose writer lease was broken", dead)
        _drop_staging(storage.safe_join(run.root, "staging", run.dataset, run.version,
                                        run_key(dead)))


def target_version(run: RunRecord) -> str | None:
    """The version id to write, or None when the published one must be reported instead.

    A forced run writes the next ``-rN`` revision; its retry (same run id, the revision's
    writer lease still naming it) writes that same revision again, not one more.
    """
    if not published(run.root, run.dataset, run.version):
        return run.version
    if not run.options.force:
        return None
    from etl.versions import lease
    from etl.versions.ids import is_version_id

    interval = versions.parse_version_id(run.version)
    for name in storage.list_dir(versions.dataset_uri(run.root, run.dataset)):
        if not is_version_id(name) or published(run.root, run.dataset, name):
            continue
        ours = versions.parse_version_id(name)
        held = lease.current_holder(storage.join(
            versions.version_uri(run.root, run.dataset, name), versions.WRITER_LOCK))
        if (ours.end, ours.start) == (interval.end, interval.start) and \
                (held or {}).get("owner") == run.run_id:
            return name
    return versions.next_revision(run.root, run.dataset, run.version)


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
    run = lock.payload["run"]
    _check_shards(written_uri, manifest)
    manifest = replace(manifest, created_at=iso(datetime.now(UTC)))
    created = versions.publish_manifest(written_uri, manifest, lock=lock)
    _drop_staging(run["run_dir"])
    summary.published(run["dataset"], manifest, created, written_uri)
    return {"version_uri": written_uri, "version": manifest.version, "created": created,
            "splits": _split_rows(manifest), "timings": run.get("timings", {})}


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
