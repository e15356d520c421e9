"""Claiming a segment to build: use it if it exists, else take its lease, waiting for a live
builder (another run that needs the same segment) instead of failing.

Two runs of one window plan the same segments; the second finds the first building them,
waits, saying so at WARNING at once and every ``WAIT_LOG_EVERY_S``, then uses what the first
built. A dead builder's lease expires (``etl.versions.lease``) and is broken by ``acquire``,
so a killed build blocks the next run for about a minute at most.
"""

from __future__ import annotations

import logging
import time

from etl import storage
from etl.errors import LeaseHeldError
from etl.versions import lease, segment
from etl.versions.segment import SegmentMeta

log = logging.getLogger("etl.pipeline")

WAIT_S = 1800.0  # a live builder is waited for this long (a bulk segment takes minutes)
POLL_S = 1.0
WAIT_LOG_EVERY_S = 30.0


def try_claim(uri: str, run_id: str) -> tuple[SegmentMeta | None, lease.Lease | None]:
    """(segment.json, None) if the segment exists, (None, our lease) if we may build it,
    (None, None) while a live builder holds it."""
    meta = segment.read_segment(uri)
    if meta is not None:
        return meta, None
    try:
        return None, lease.acquire(storage.join(uri, segment.SEGMENT_LOCK), run_id)
    except LeaseHeldError:
        return None, None


def claim(uri: str, run_id: str, wait_s: float = WAIT_S
          ) -> tuple[SegmentMeta | None, lease.Lease | None]:
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
            return None, lease.acquire(storage.join(uri, segment.SEGMENT_LOCK), run_id)
        except LeaseHeldError as exc:
            now = time.monotonic()
            if now - start > wait_s:
                raise
            if now >= next_log:
                log.warning("segment %s is being built by %s; waiting for it (%.0f of %.0f s "
                            "waited)", uri.rstrip("/").rsplit("/", 1)[-1],
                            lease.describe(exc.holder or {}), now - start, wait_s)
                next_log = now + WAIT_LOG_EVERY_S
            time.sleep(POLL_S)
