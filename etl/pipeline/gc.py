"""``python -m etl gc``: find and remove what dead runs of a dataset left behind.

Leftovers are temp files (``.tmp-*``), writer leases (with their drafts) inside published versions,
unpublished version folders whose writer is dead or gone, staging folders of runs that are
dead or done, segment folders a killed build left without ``segment.json``, and segments no
version lists that were built longer ago than any run lives. A published version's files and anything a live lease holder (recent
heartbeat) uses are never touched. An unpublished folder is cleared only while gc itself holds
its writer lease (which breaks a dead holder's by compare-and-delete), so a writer that takes
the version at the same moment finds the lease taken and waits, instead of losing its shards.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from etl import storage, versions
from etl.errors import (
    IncompleteVersionError,
    LeaseHeldError,
    VersionExistsError,
    VersionLockedError,
)
from etl.provenance import run_key
from etl.versions import catalog, lease, segment
from etl.versions.ids import is_version_id

log = logging.getLogger("etl.pipeline")

TEMP_MIN_AGE_S = 600.0  # younger temp files may belong to a write in flight
_OWNER = f"gc:{socket.gethostname()}:{os.getpid()}"
STAGING_STALE_S = 12 * 3600.0  # above the DAG's dagrun_timeout (8 h): no live run is that quiet


@dataclass(frozen=True)
class Leftover:
    """One thing to remove, and why it is safe to."""

    uri: str
    why: str


@dataclass
class Report:
    """What gc found (and, with ``apply``, removed) and what it kept because a run is live."""

    leftovers: list[Leftover] = field(default_factory=list)
    kept: list[Leftover] = field(default_factory=list)
    dead_owners: set[str] = field(default_factory=set)
    live_owners: set[str] = field(default_factory=set)


def collect_garbage(root: str, dataset: str, *, apply: bool = False,
                    staging_stale_s: float = STAGING_STALE_S) -> Report:
    """List (and with ``apply`` delete) the leftovers of dead runs of ``dataset``."""
    report = Report()
    ds_uri = versions.dataset_uri(root, dataset)
    for name in storage.temp_files(ds_uri, TEMP_MIN_AGE_S):
        _remove(report, storage.join(ds_uri, name), "temp file of a killed write", apply)
    for name in storage.list_dir(ds_uri):
        if not is_version_id(name):
            continue
        uri = storage.join(ds_uri, name)
        if storage.exists(storage.join(uri, versions.MANIFEST)):
            _published(report, uri, apply)
        else:
            _unpublished(report, uri, apply)
    _segments(report, root, dataset, staging_stale_s, apply)
    staging = storage.safe_join(root, "staging", dataset)
    for version in storage.list_dir(staging):
        for key in storage.list_dir(storage.join(staging, version)):
            _staging(report, root, dataset, version, key, staging_stale_s, apply)
        if apply:
            storage.remove_empty_dir(storage.join(staging, version))
    return report


def _remove(report: Report, uri: str, why: str, apply: bool) -> None:
    report.leftovers.append(Leftover(uri, why))
    if apply:
        storage.delete_tree(uri)
        log.info("gc: removed %s (%s)", uri, why)


def _published(report: Report, uri: str, apply: bool) -> None:
    """A published version is immutable: only a publish killed after its manifest leaves these."""
    lock = storage.join(uri, versions.WRITER_LOCK)
    if storage.exists(lock):
        _remove(report, lock, "left by a publish killed after the manifest", apply)
    for name in storage.temp_files(uri, TEMP_MIN_AGE_S):
        _remove(report, storage.join(uri, name), "temp file in a published version", apply)


def _unpublished(report: Report, uri: str, apply: bool) -> None:
    """A folder without a manifest: kept while its writer lives, else cleared under our lease."""
    holder = versions.current_holder(storage.join(uri, versions.WRITER_LOCK))
    reason = versions.dead_reason(holder) if holder else "no writer holds it"
    if holder and reason is None:
        report.live_owners.add(str(holder.get("owner")))
        report.kept.append(Leftover(uri, f"live writer {versions.describe(holder)}"))
        return
    if holder.get("owner"):
        report.dead_owners.add(str(holder["owner"]))
    why = f"unpublished version, its writer is dead: {reason}"
    if not apply:
        report.leftovers.append(Leftover(uri, why))
        return
    if _clear_held(report, uri, versions.WRITER_LOCK, versions.release_writer_lock,
                   lambda: versions.acquire_writer_lock(uri, _OWNER)):
        report.leftovers.append(Leftover(uri, why))
        log.info("gc: removed %s (%s)", uri, why)


def _clear_held(report: Report, uri: str, lock_name: str, release: Callable[[Any], Any],
                take: Callable[[], Any]) -> bool:
    """Empty folder ``uri`` while holding its lease (``take``); False if a live writer came
    in meanwhile (then nothing is touched and it is reported as kept)."""
    try:
        held = take()
    except (LeaseHeldError, VersionLockedError, VersionExistsError) as exc:
        report.kept.append(Leftover(uri, f"taken meanwhile: {exc}"))
        return False
    storage.clear_dir(uri, keep=lock_name)
    release(held)
    storage.remove_empty_dir(uri)
    return True


def _staging(report: Report, root: str, dataset: str, version: str, key: str,
             stale_s: float, apply: bool) -> None:
    """A run's staging folder: removed once its run is dead, published, or long quiet."""
    uri = storage.join(storage.safe_join(root, "staging", dataset, version), key)
    live = [o for o in report.live_owners if run_key(o) == key]
    if live:
        report.kept.append(Leftover(uri, f"staging of live writer {live[0]!r}"))
        return
    if key in {run_key(o) for o in report.dead_owners}:
        _remove(report, uri, "staging of a run whose writer lease is dead", apply)
        return
    if _published_by(root, dataset, version, key):
        _remove(report, uri, "staging of a run that published (killed before cleaning up)",
                apply)
        return
    newest = storage.newest_mtime(uri)
    if newest is None or time.time() - newest > stale_s:
        _remove(report, uri, f"staging untouched for more than {stale_s / 3600:.0f} h", apply)
        return
    report.kept.append(Leftover(uri, "staging of a run that may be live (recently written)"))


def _segments(report: Report, root: str, dataset: str, stale_s: float, apply: bool) -> None:
    """Unfinished segment folders of dead builders; finished ones no version lists (old)."""
    for seg in segment.unfinished(root, dataset):
        uri = segment.segment_uri(root, dataset, seg)
        lock = storage.join(uri, segment.SEGMENT_LOCK)
        holder = lease.current_holder(lock)
        if holder and lease.dead_reason(holder) is None:
            report.kept.append(Leftover(uri, f"segment being built by {lease.describe(holder)}"))
            continue
        why = "unfinished segment (no segment.json), its builder is gone"
        if not apply or _clear_held(report, uri, segment.SEGMENT_LOCK, lease.release,
                                    lambda lock=lock: lease.acquire(lock, _OWNER)):
            report.leftovers.append(Leftover(uri, why))
    for seg in catalog.unused_segments(root, dataset, stale_s):
        uri = segment.segment_uri(root, dataset, seg)
        report.leftovers.append(Leftover(uri, "segment no version lists, built over "
                                              f"{stale_s / 3600:.0f} h ago"))
        if apply:
            segment.delete_segment(root, dataset, seg)


def _published_by(root: str, dataset: str, version: str, key: str) -> bool:
    """Did the run whose staging key is ``key`` publish ``version``?"""
    try:
        uri = versions.version_uri(root, dataset, version)
        return run_key(str(versions.read_manifest(uri).run_id)) == key
    except (IncompleteVersionError, ValueError):
        return False
