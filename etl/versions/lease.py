"""Leases: a lock object in storage that its holder keeps alive with heartbeats, and the two
leases the pipeline takes: a version's ``_WRITER`` and a segment's build lease.

One holder at a time per lease object. The holder rewrites the body every ``heartbeat_s`` from a background
thread (``Heartbeat``), so it stays held through long Dask steps. A lease whose last heartbeat
is older than its ``expiry_s``, or whose process on this host is gone, is dead: the next
acquirer breaks it by compare-and-delete (GCS generation precondition, local ``flock``), so a
dead holder blocks for at most ``expiry_s`` and a live one is never broken. A run may pass a
lease to its next step (another process) with a longer ``handoff`` expiry and a payload (what
that step needs, e.g. a version's draft) inside the same object; see docs/RELIABILITY.md.

The writer lease (``acquire_writer_lock`` ... ``release_writer_lock``) adds the version rules:
a published version cannot be locked, and a writer that lost its lease must not publish.
A segment's lease (``try_claim``, ``claim``) is waited for instead of failing: two runs of one
window plan the same segments, and the second uses what the first built (saying so at WARNING
at once and every ``WAIT_LOG_EVERY_S``); a dead builder's lease expires and is broken.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Self

from etl import storage
from etl.errors import (
    LeaseHeldError,
    LeaseLostError,
    VersionExistsError,
    VersionLockedError,
)
from etl.versions import segment
from etl.versions.ids import MANIFEST, WRITER_LOCK
from etl.versions.segment import SegmentMeta

log = logging.getLogger("etl.versions")  # the facade's name, which log configs filter on

HEARTBEAT_S = 10.0  # how often a holder rewrites its lease
EXPIRY_S = 60.0  # six missed heartbeats: a dead holder blocks for about a minute
HANDOFF_EXPIRY_S = 300.0  # between two steps of a run (no process beats; a scheduler gap)
HEARTBEAT_ENV, EXPIRY_ENV = "PIPELINE_LEASE_HEARTBEAT_S", "PIPELINE_LEASE_EXPIRY_S"
WORKING, HANDOFF = "working", "handoff"
_ATTEMPTS = 5


@dataclass(frozen=True)
class Lease:
    """Proof of holding the lease object at ``uri``; ``token`` is its generation.

    ``took_over`` is the body of a dead holder's lease this acquire broke ({} if none), so
    the new holder can remove what that holder left.
    """

    uri: str
    owner: str
    token: str
    acquired_at: str
    expiry_s: float = EXPIRY_S
    heartbeat_s: float = HEARTBEAT_S
    phase: str = WORKING
    took_over: dict[str, Any] = field(default_factory=dict, compare=False)
    payload: dict[str, Any] | None = field(default=None, compare=False, repr=False)


def periods(heartbeat_s: float | None = None, expiry_s: float | None = None) -> tuple[float, float]:
    """(heartbeat, expiry) seconds: arguments, else $PIPELINE_LEASE_*, else the defaults."""
    beat = float(heartbeat_s or os.environ.get(HEARTBEAT_ENV) or HEARTBEAT_S)
    expiry = float(expiry_s or os.environ.get(EXPIRY_ENV) or EXPIRY_S)
    if not 0 < 2 * beat <= expiry:
        raise ValueError(f"lease: expiry ({expiry} s) must be at least two heartbeats ({beat} s)")
    return beat, expiry


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _host() -> str:
    return socket.gethostname()


def _body(owner: str, acquired_at: str, expiry_s: float, heartbeat_s: float,
          phase: str, payload: dict[str, Any] | None = None) -> bytes:
    body = {
        "owner": owner, "host": _host(), "pid": os.getpid(), "acquired_at": acquired_at,
        "heartbeat_at": _now().isoformat(), "expiry_s": expiry_s, "heartbeat_s": heartbeat_s,
        "phase": phase, "nonce": uuid.uuid4().hex,
    }
    return storage.json_bytes(body if payload is None else {**body, "payload": payload})


def parse(data: bytes | None) -> dict[str, Any]:
    """A lease body as a dict; {} when absent or unreadable."""
    try:
        holder = json.loads(data) if data is not None else {}
        return holder if isinstance(holder, dict) else {}
    except ValueError:
        return {}


def current_holder(uri: str) -> dict[str, Any]:
    """The lease's parsed body, or {} when it is gone or unreadable."""
    return parse(storage.read_with_token(uri)[0])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _time(value: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def heartbeat_age_s(holder: dict[str, Any], now: dt.datetime | None = None) -> float:
    """Seconds since the holder last beat (inf when unknown: nobody can prove it alive)."""
    beat = _time(holder.get("heartbeat_at") or holder.get("acquired_at"))
    return float("inf") if beat is None else ((now or _now()) - beat).total_seconds()


def dead_reason(holder: dict[str, Any], now: dt.datetime | None = None) -> str | None:
    """Why the holder is dead (its lease may be broken), or None while it is alive."""
    if not holder:
        return "its lease is unreadable"
    pid = holder.get("pid")
    if (holder.get("phase", WORKING) == WORKING and holder.get("host") == _host()
            and isinstance(pid, int) and not _pid_alive(pid)):
        return f"its process {pid} on {holder['host']} is gone"
    try:
        expiry = float(holder.get("expiry_s", EXPIRY_S))
    except (TypeError, ValueError):
        expiry = EXPIRY_S
    age = heartbeat_age_s(holder, now)
    return f"no heartbeat for {age:.0f} s (expiry {expiry:.0f} s)" if age > expiry else None


def describe(holder: dict[str, Any], now: dt.datetime | None = None) -> str:
    """One line for logs and errors: who holds it, since when, last heartbeat, expiry."""
    if not holder:
        return "an unreadable lease"
    age = heartbeat_age_s(holder, now)
    beat = "never" if age == float("inf") else f"{age:.1f} s ago"
    return (f"{holder.get('owner')!r} (host {holder.get('host')}, pid {holder.get('pid')}, "
            f"{holder.get('phase', WORKING)}) since {holder.get('acquired_at')}, last heartbeat "
            f"{beat}, expires after {holder.get('expiry_s', EXPIRY_S)} s without one")


def _held(uri: str, owner: str, acquired_at: str, beat: float, expiry: float,
          phase: str = WORKING, took_over: dict[str, Any] | None = None) -> Lease:
    token = storage.read_with_token(uri)[1] or ""
    return Lease(uri, owner, token, acquired_at, expiry, beat, phase, took_over or {})


def acquire(uri: str, owner: str, *, heartbeat_s: float | None = None,
            expiry_s: float | None = None) -> Lease:
    """Take the lease at ``uri``: create it, re-take our own, or break a dead holder's.

    ``owner`` should be stable across retries of one task (e.g. the run id), so a retry after a
    crash re-takes its own lease at once. Start a ``Heartbeat`` on the result.

    Raises:
        LeaseHeldError: a live holder (recent heartbeat, process alive) has it.
    """
    beat, expiry = periods(heartbeat_s, expiry_s)
    holder: dict[str, Any] = {}
    broken: dict[str, Any] = {}
    for _ in range(_ATTEMPTS):
        since = _now().isoformat()
        body = _body(owner, since, expiry, beat, WORKING)
        if storage.create_if_absent(uri, body):
            return _held(uri, owner, since, beat, expiry, took_over=broken)
        data, token = storage.read_with_token(uri)
        if data is None or token is None:
            continue  # released meanwhile
        holder = parse(data)
        if holder.get("owner") == owner:
            if storage.replace_if_match(uri, body, token):
                return _held(uri, owner, since, beat, expiry, took_over=broken)
            continue
        reason = dead_reason(holder)
        if reason is None:
            raise LeaseHeldError(uri, holder)
        log.warning("breaking the lease %s of %s: %s", uri, describe(holder), reason)
        if storage.delete_if_match(uri, token):
            broken = holder
    raise LeaseHeldError(uri, holder)


def refresh(lease: Lease, *, phase: str | None = None, expiry_s: float | None = None) -> Lease:
    """Beat once (optionally entering another phase/expiry); LeaseLostError if not ours."""
    nxt = replace(lease, phase=phase or lease.phase, expiry_s=expiry_s or lease.expiry_s)
    body = _body(nxt.owner, nxt.acquired_at, nxt.expiry_s, nxt.heartbeat_s, nxt.phase,
                 nxt.payload)
    if not storage.replace_if_match(lease.uri, body, lease.token):
        raise LeaseLostError(lease.uri, current_holder(lease.uri))
    return replace(nxt, token=storage.read_with_token(lease.uri)[1] or "", took_over={})


def hand_off(lease: Lease, payload: dict[str, Any] | None = None,
             expiry_s: float | None = None) -> Lease:
    """Keep the lease alive, with no process beating, until the run's next step takes it
    (``handed_off``); ``payload`` is stored in the lease for that step."""
    return refresh(replace(lease, payload=payload), phase=HANDOFF,
                   expiry_s=expiry_s or HANDOFF_EXPIRY_S)


def handed_off(uri: str, margin_s: float) -> Lease | None:
    """The next step of a run takes the lease its previous step handed off, payload included.

    Reading is enough while the lease has ``margin_s`` of its expiry left (nobody may break
    it before then); a later step renews the hand-off first (one write). None when there is
    no lease.

    Raises:
        LeaseHeldError: the lease is not in hand-off (a holder is working under it).
    """
    data, token = storage.read_with_token(uri)
    holder = parse(data)
    if data is None or token is None:
        return None
    if holder.get("phase") != HANDOFF or not isinstance(holder.get("owner"), str):
        raise LeaseHeldError(uri, holder)
    taken = Lease(uri, holder["owner"], token, str(holder.get("acquired_at")),
                  float(holder.get("expiry_s", HANDOFF_EXPIRY_S)),
                  float(holder.get("heartbeat_s", HEARTBEAT_S)), HANDOFF,
                  payload=holder.get("payload"))
    left = taken.expiry_s - heartbeat_age_s(holder)
    if left >= margin_s:
        return taken
    log.info("renewing the hand-off of %s (%.0f s of its expiry left)", uri, left)
    return hand_off(taken, taken.payload)


def release(lease: Lease) -> bool:
    """Drop the lease (only if it is still ours); True if it was deleted."""
    return storage.delete_if_match(lease.uri, lease.token)


class Heartbeat:
    """Background thread that refreshes a lease every period until stopped.

    A thread, not a Dask task, so it beats while the main thread waits on a long compute;
    storage calls release the GIL. If the lease is lost (broken after a stall, or re-taken
    by a retry of the same owner) it stops and ``check`` raises.
    """

    def __init__(self, lease: Lease, period_s: float | None = None) -> None:
        self._lease = lease
        self._period = period_s or lease.heartbeat_s
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None
        self.lost: LeaseLostError | None = None

    @property
    def lease(self) -> Lease:
        with self._mutex:
            return self._lease

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=f"lease-{self._lease.owner}",
                                        daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> Lease:
        """Stop beating; the latest lease (its token) is returned for release or hand-off."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.lease

    def check(self) -> Lease:
        """The current lease; raises LeaseLostError once it was lost."""
        if self.lost is not None:
            raise self.lost
        return self.lease

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            try:
                fresh = refresh(self.lease)
            except LeaseLostError as exc:
                self.lost = exc
                log.error("lost the lease %s: now held by %s", exc.lease_uri, describe(exc.holder))
                return
            except Exception:  # a storage hiccup: the next beat may get through
                log.warning("heartbeat of %s failed; retrying", self._lease.uri, exc_info=True)
                continue
            with self._mutex:
                self._lease = fresh


# --- a version's writer lease ---------------------------------------------------------------

WriterLock = Lease  # the writer lease's name for callers; ``uri`` is the ``_WRITER`` object
# Publishing takes seconds; a hand-off with less expiry left than this is renewed first.
PUBLISH_MARGIN_S = 120.0


def lock_uri(version_uri: str) -> str:
    return storage.join(version_uri, WRITER_LOCK)


def version_of(lock: Lease) -> str:
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
        lock = acquire(lock_uri(uri), owner, heartbeat_s=heartbeat_s, expiry_s=expiry_s)
    except LeaseHeldError as exc:
        raise VersionLockedError(uri, exc.holder) from None
    if storage.exists(manifest_uri):  # a publisher finished between our two checks
        release(lock)
        raise VersionExistsError(uri)
    return lock


def refresh_writer_lock(lock: WriterLock) -> WriterLock:
    """Beat once by hand; VersionLockedError if the lease was taken over."""
    try:
        return refresh(lock)
    except LeaseHeldError as exc:
        raise VersionLockedError(version_of(lock), exc.holder) from None


def hand_off_writer_lock(lock: WriterLock, draft: dict[str, Any]) -> WriterLock:
    """Shards written: keep the lease for the publish step (maybe another process), with the
    version's draft (its manifest to be) inside it."""
    try:
        return hand_off(lock, draft)
    except LeaseHeldError as exc:
        raise VersionLockedError(version_of(lock), exc.holder) from None


def take_handed_off_lock(uri: str) -> WriterLock | None:
    """The publish step takes the lease its build handed off (the draft is its ``payload``);
    None when there is none. VersionLockedError if a builder is working under it."""
    try:
        return handed_off(lock_uri(uri), PUBLISH_MARGIN_S)
    except LeaseHeldError as exc:
        raise VersionLockedError(uri, exc.holder) from None


def release_writer_lock(lock: WriterLock) -> bool:
    """Drop our lease (only if it is still ours); True if it was deleted."""
    return release(lock)


# --- a segment's build lease ----------------------------------------------------------------

SEGMENT_WAIT_S = 1800.0  # a live builder is waited for this long (a bulk segment takes minutes)
POLL_S = 1.0
WAIT_LOG_EVERY_S = 30.0


def try_claim(uri: str, run_id: str) -> tuple[SegmentMeta | None, Lease | None]:
    """(segment.json, None) if the segment exists, (None, our lease) if we may build it,
    (None, None) while a live builder holds it."""
    meta = segment.read_segment(uri)
    if meta is not None:
        return meta, None
    try:
        return None, acquire(storage.join(uri, segment.SEGMENT_LOCK), run_id)
    except LeaseHeldError:
        return None, None


def claim(uri: str, run_id: str, wait_s: float = SEGMENT_WAIT_S
          ) -> tuple[SegmentMeta | None, Lease | None]:
    """Like ``try_claim``, but a live builder is waited for until it publishes the segment
    (then ``(meta, None)``) or dies (then ``(None, our lease)``).

    Raises:
        LeaseHeldError: the builder is still alive after ``wait_s``.
    """
    start = time.monotonic()
    next_log = start
    while True:
        meta = segment.read_segment(uri)
        if meta is not None:
            return meta, None
        try:
            return None, acquire(storage.join(uri, segment.SEGMENT_LOCK), run_id)
        except LeaseHeldError as exc:
            now = time.monotonic()
            if now - start > wait_s:
                raise
            if now >= next_log:
                log.warning("segment %s is being built by %s; waiting for it (%.0f of %.0f s "
                            "waited)", uri.rstrip("/").rsplit("/", 1)[-1],
                            describe(exc.holder or {}), now - start, wait_s)
                next_log = now + WAIT_LOG_EVERY_S
            time.sleep(POLL_S)
