"""The ``_WRITER`` lock: one writer per version while its shards are written.

Built on storage's conditional operations only (create-if-absent, compare-and-swap,
compare-and-delete), so it works on object stores and a stale lock is broken without ever
breaking a fresh one.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from etl import storage
from etl.errors import VersionExistsError, VersionLockedError
from etl.versions.ids import MANIFEST, WRITER_LOCK

log = logging.getLogger("etl.versions")  # the facade's name, which log configs filter on

DEFAULT_LOCK_STALE_S = 2 * 3600.0  # keep above the writing task's execution_timeout


@dataclass(frozen=True)
class WriterLock:
    """Proof of holding a version's ``_WRITER`` object; ``token`` is its generation."""

    version_uri: str
    owner: str
    token: str


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _lock_body(owner: str) -> bytes:
    return storage.json_bytes(
        {
            "owner": owner,
            "acquired_at": _now().isoformat(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "nonce": uuid.uuid4().hex,
        }
    )


def _lock_age_s(holder: dict[str, Any]) -> float:
    try:
        return (_now() - dt.datetime.fromisoformat(holder["acquired_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return float("inf")  # unreadable lock: nobody can prove it is alive


def acquire_writer_lock(
    uri: str, owner: str, stale_after_s: float = DEFAULT_LOCK_STALE_S
) -> WriterLock:
    """Become the only writer of version ``uri`` before writing its shards.

    ``owner`` should be stable across retries of one task (e.g. dag/run/task) so a retry
    after a crash re-acquires at once; a lock from another owner older than
    ``stale_after_s`` is broken by compare-and-delete, so a fresh one never is.

    Raises:
        VersionExistsError: the version is already published.
        VersionLockedError: another owner's live lock holds it.
    """
    lock_uri, manifest_uri = storage.join(uri, WRITER_LOCK), storage.join(uri, MANIFEST)
    if storage.exists(manifest_uri):
        raise VersionExistsError(uri)
    holder: dict[str, Any] = {}
    for _ in range(5):
        body = _lock_body(owner)
        if storage.create_if_absent(lock_uri, body):
            lock = WriterLock(uri, owner, storage.read_with_token(lock_uri)[1] or "")
            if storage.exists(manifest_uri):  # a publisher finished between our two checks
                release_writer_lock(lock)
                raise VersionExistsError(uri)
            return lock
        data, token = storage.read_with_token(lock_uri)
        if data is None:
            continue  # released meanwhile
        holder = _parse_lock(data)
        if holder.get("owner") == owner:
            if storage.replace_if_match(lock_uri, body, token):
                return WriterLock(uri, owner, storage.read_with_token(lock_uri)[1] or "")
        elif _lock_age_s(holder) > stale_after_s:
            log.warning(
                "breaking stale writer lock on %s held by %r since %s",
                uri,
                holder.get("owner"),
                holder.get("acquired_at"),
            )
            storage.delete_if_match(lock_uri, token)
        else:
            raise VersionLockedError(uri, holder)
    raise VersionLockedError(uri, holder)


def _parse_lock(data: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(data)
        return holder if isinstance(holder, dict) else {}
    except ValueError:
        return {}


def refresh_writer_lock(lock: WriterLock) -> WriterLock:
    """Renew the lock's time during a long write; VersionLockedError if it was taken over."""
    lock_uri = storage.join(lock.version_uri, WRITER_LOCK)
    if not storage.replace_if_match(lock_uri, _lock_body(lock.owner), lock.token):
        raise VersionLockedError(lock.version_uri, current_holder(lock_uri))
    return WriterLock(lock.version_uri, lock.owner, storage.read_with_token(lock_uri)[1] or "")


def current_holder(lock_uri: str) -> dict[str, Any]:
    """The lock's parsed body, or {} when it is gone or unreadable."""
    data = storage.read_with_token(lock_uri)[0]
    return _parse_lock(data) if data is not None else {}


def release_writer_lock(lock: WriterLock) -> bool:
    """Drop our lock (only if it is still ours); True if it was deleted."""
    return storage.delete_if_match(storage.join(lock.version_uri, WRITER_LOCK), lock.token)
