"""The ``_WRITER`` lease: one writer per version while its shards are written and published.

A ``lease`` (heartbeats, dead holders broken by compare-and-delete) plus the version rules:
a published version cannot be locked, and a writer that lost its lease must not publish.
"""

from __future__ import annotations

from typing import Any

from etl import storage
from etl.errors import LeaseHeldError, VersionExistsError, VersionLockedError
from etl.versions import lease
from etl.versions.ids import MANIFEST, WRITER_LOCK

WriterLock = lease.Lease  # the name callers know; ``uri`` is the ``_WRITER`` object
# Publishing takes seconds; a hand-off with less expiry left than this is renewed first.
PUBLISH_MARGIN_S = 120.0


def lock_uri(version_uri: str) -> str:
    return storage.join(version_uri, WRITER_LOCK)


def version_of(lock: lease.Lease) -> str:
    """The version URI a writer lock is on."""
    return lock.uri.rstrip("/").rsplit("/", 1)[0]


def acquire_writer_lock(uri: str, owner: str, *, heartbeat_s: float | None = None,
                        expiry_s: float | None = None) -> WriterLock:
    """Become the only writer of version ``uri`` before writing its shards.

    ``owner`` should be stable across retries of one task (the run id) so a retry after a
    crash re-acquires at once; another owner's lease is broken only once it is dead.

    Raises:
        VersionExistsError: the version is already published.
        VersionLockedError: another owner's live lease holds it.
    """
    manifest_uri = storage.join(uri, MANIFEST)
    if storage.exists(manifest_uri):
        raise VersionExistsError(uri)
    try:
        lock = lease.acquire(lock_uri(uri), owner, heartbeat_s=heartbeat_s, expiry_s=expiry_s)
    except LeaseHeldError as exc:
        raise VersionLockedError(uri, exc.holder) from None
    if storage.exists(manifest_uri):  # a publisher finished between our two checks
        lease.release(lock)
        raise VersionExistsError(uri)
    return lock


def refresh_writer_lock(lock: WriterLock) -> WriterLock:
    """Beat once by hand; VersionLockedError if the lease was taken over."""
    try:
        return lease.refresh(lock)
    except LeaseHeldError as exc:
        raise VersionLockedError(version_of(lock), exc.holder) from None


def hand_off_writer_lock(lock: WriterLock, draft: dict[str, Any]) -> WriterLock:
    """Shards written: keep the lease for the publish step (maybe another process), with the
    version's draft (its manifest to be) inside it."""
    try:
        return lease.hand_off(lock, draft)
    except LeaseHeldError as exc:
        raise VersionLockedError(version_of(lock), exc.holder) from None


def take_handed_off_lock(uri: str) -> WriterLock | None:
    """The publish step takes the lease its build handed off (the draft is its ``payload``);
    None when there is none. VersionLockedError if a builder is working under it."""
    try:
        return lease.handed_off(lock_uri(uri), PUBLISH_MARGIN_S)
    except LeaseHeldError as exc:
        raise VersionLockedError(uri, exc.holder) from None


def current_holder(uri: str) -> dict[str, Any]:
    """The lease's parsed body (``uri`` is the lock object), or {} when gone or unreadable."""
    return lease.current_holder(uri)


def release_writer_lock(lock: WriterLock) -> bool:
    """Drop our lease (only if it is still ours); True if it was deleted."""
    return lease.release(lock)
