"""Leases on local disk and the GCS emulator: live holders kept, dead ones broken, waits said.

Periods are shortened through arguments (heartbeat 0.1-0.2 s, expiry ~1 s) so each test takes
seconds; the production values are in etl/versions/lease.py and docs/RELIABILITY.md.
"""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
import threading
import time

import pytest

from etl import storage, versions
from etl.errors import LeaseHeldError, VersionLockedError
from etl.versions import lease

chain = importlib.import_module("etl.pipeline.chain")  # the package re-exports its functions

DS, V1 = "flights", "20240102T000000Z_20240101T000000Z"


def _busy(seconds: float) -> None:
    """A long step that holds the GIL most of the time, like a Python encoder loop."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(10_000))


def test_live_slow_writer_keeps_its_lease(storage_root: str) -> None:
    """A holder beating through a long step is never broken, however often others try."""
    uri = storage.join(storage_root, "locks", "seg")
    held = lease.acquire(uri, "writer", heartbeat_s=0.1, expiry_s=0.6)
    refused = 0
    with lease.Heartbeat(held) as beat:
        end = time.monotonic() + 2.5  # four expiries long
        while time.monotonic() < end:
            _busy(0.2)
            with pytest.raises(LeaseHeldError) as info:
                lease.acquire(uri, "other")
            assert lease.dead_reason(info.value.holder) is None
            refused += 1
    assert refused >= 5 and beat.lost is None
    final = beat.check()
    assert final.token != held.token  # it did beat
    assert lease.current_holder(uri)["owner"] == "writer"
    assert lease.release(final)
    assert not storage.exists(uri)


def test_stalled_holder_expires_and_learns_it_lost(storage_root: str) -> None:
    """No heartbeat for longer than the expiry: broken by compare-and-delete, then refused."""
    uri = storage.join(storage_root, "locks", "seg")
    held = lease.acquire(uri, "writer", heartbeat_s=0.1, expiry_s=0.3)
    time.sleep(0.5)  # the holder stalls: no beat
    taker = lease.acquire(uri, "other")
    assert taker.took_over["owner"] == "writer"
    with pytest.raises(LeaseHeldError):
        lease.refresh(held)
    assert not lease.release(held)
    assert lease.current_holder(uri)["owner"] == "other"


def test_holder_whose_process_is_gone_is_broken_at_once(storage_root: str) -> None:
    """Same host, pid gone: no need to wait for the expiry."""
    uri = storage.join(storage_root, "locks", "seg")
    code = ("import sys; from etl.versions import lease; "
            "lease.acquire(sys.argv[1], 'dead-writer', heartbeat_s=30, expiry_s=3600)")
    subprocess.run([sys.executable, "-c", code, uri], check=True, timeout=120)
    holder = lease.current_holder(uri)
    assert "is gone" in (lease.dead_reason(holder) or "")
    taker = lease.acquire(uri, "other")
    assert taker.took_over["owner"] == "dead-writer"


def test_handoff_survives_the_gap_and_the_next_step_takes_it_by_reading(
        storage_root: str) -> None:
    """Between write and publish no process beats; the handoff expiry covers that gap, and
    the next step reads the lease (payload included) without rewriting it."""
    uri = storage.join(storage_root, "locks", "seg")
    held = lease.acquire(uri, "run-1", heartbeat_s=0.1, expiry_s=0.3)
    handed = lease.hand_off(held, {"draft": [1, 2]}, expiry_s=30.0)
    time.sleep(0.5)  # longer than the working expiry
    with pytest.raises(LeaseHeldError):
        lease.acquire(uri, "run-2")
    taken = lease.handed_off(uri, margin_s=10.0)
    assert taken.owner == "run-1" and taken.payload == {"draft": [1, 2]}
    assert taken.token == handed.token  # read, not rewritten
    renewed = lease.handed_off(uri, margin_s=60.0)  # less expiry left than the step needs
    assert renewed.token != handed.token and renewed.payload == {"draft": [1, 2]}
    assert renewed.acquired_at == handed.acquired_at and renewed.phase == lease.HANDOFF
    assert lease.release(renewed)
    assert lease.handed_off(uri, margin_s=1.0) is None


def test_a_working_lease_is_not_taken_as_a_handoff(storage_root: str) -> None:
    uri = storage.join(storage_root, "locks", "seg")
    lease.acquire(uri, "run-1")
    with pytest.raises(LeaseHeldError):
        lease.handed_off(uri, margin_s=1.0)


def test_waiting_run_says_so_within_a_second(storage_root: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """WARNING lines with holder, since, last heartbeat and the wait left, at once and again."""
    uri = versions.version_uri(storage_root, DS, V1)
    held = versions.acquire_writer_lock(uri, "live-run", heartbeat_s=0.1, expiry_s=1.0)
    monkeypatch.setattr(chain, "WAIT_LOG_EVERY_S", 0.5)
    monkeypatch.setattr(chain, "LOCK_POLL_S", 0.1)
    arrivals: list[tuple[float, logging.LogRecord]] = []

    class Timed(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            arrivals.append((time.monotonic(), record))

    handler = Timed(logging.WARNING)
    logging.getLogger("etl.pipeline").addHandler(handler)
    try:
        with versions.Heartbeat(held):
            started = time.monotonic()
            with pytest.raises(VersionLockedError, match="being written by 'live-run'"):
                chain.acquire_writer(uri, "waiting-run", wait_s=1.6)
    finally:
        logging.getLogger("etl.pipeline").removeHandler(handler)
    waits = [(t, r) for t, r in arrivals if "waiting for it" in r.getMessage()]
    assert len(waits) >= 3, [r.getMessage() for _, r in arrivals]
    assert waits[0][0] - started < 1.0
    line = waits[0][1].getMessage()
    for part in ("'live-run'", "since 20", "last heartbeat", "giving up after"):
        assert part in line, line


def test_heartbeat_runs_while_the_main_thread_waits_on_dask(file_root: str) -> None:
    """A Dask compute in the main thread (threaded workers) does not starve the beat."""
    import dask
    import dask.bag as db

    uri = storage.join(file_root, "locks", "seg")
    held = lease.acquire(uri, "writer", heartbeat_s=0.1, expiry_s=0.5)
    beats: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            beats.append(lease.current_holder(uri).get("heartbeat_at", ""))

    watcher = threading.Thread(target=watch)
    with lease.Heartbeat(held) as beat:
        watcher.start()
        with dask.config.set(scheduler="threads"):
            db.from_sequence(range(8), npartitions=8).map(lambda _: _busy(0.25)).compute()
        stop.set()
        watcher.join()
    assert beat.lost is None and len(set(beats)) >= 4
    lease.release(beat.lease)
