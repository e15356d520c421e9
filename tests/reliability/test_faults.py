"""Faults while running: damaged shards, a SIGKILLed writer, a flaky or dead object store.

The kill tests run the real command line in its own process group and kill the group as soon
as a segment of the new version is being written (its first temp or shard file, or on GCS its
``_WRITER`` lease); the retry must publish one clean version. The storage tests put tests/support/faultproxy.py (seeded
429/503/dropped connections) between gcsfs and the GCS emulator.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import pytest

from etl import pipeline, storage, versions
from etl.errors import ChecksumMismatchError, StorageError
from etl.kinds.landing import LandOptions
from etl.storage import fs as storage_fs
from etl.storage import retry as storage_retry
from etl.versions import lease
from tests.reliability.conftest import (
    BASE_VERSION,
    DATASET,
    NEXT_END,
    NEXT_START,
    NEXT_VERSION,
    assert_untouched,
)
from tests.reliability.segment_state import (
    assert_killed_mid_write,
    assert_one_clean_version,
    segment_lease_taken,
    shard_being_written,
    unfinished,
)
from tests.support.faultproxy import FaultPlan, FaultProxy

REPO = Path(__file__).resolve().parents[2]
KILL_WAIT_S = 120.0  # bounded: cold CLI start + extract + validate on a loaded 2-core box
DAY_END, DAY_START = "2013-01-02T00:00:00Z", "2013-01-01T00:00:00Z"
DAY_VERSION = "20130102T000000Z_20130101T000000Z"
SHORT_LEASE = {lease.HEARTBEAT_ENV: "0.5", lease.EXPIRY_ENV: "4"}  # the killed writer's
GCSFS_SLEEP_SCALE = 0.02  # dead-store test only: gcsfs' 1..32 s backoff becomes 20..640 ms


def test_damaged_shard_is_refused_at_read_time(root: str, root_path: Path,
                                               tmp_path: Path) -> None:
    """Flipped byte and truncation: the checksum/size check names the shard, training refuses."""
    from training.config import InputConfig
    from training.data.tabular import make_dataset

    vuri = versions.version_uri(root, DATASET, BASE_VERSION)
    manifest = versions.read_manifest(vuri)
    entry = manifest.splits["train"].shards[0]
    shard = entry.file
    path = Path(storage.get_fs(versions.shard_uri(vuri, entry))[1])  # in its segment's folder
    data = path.read_bytes()
    for damaged, expected in ((data[:-7], "bytes"), (data[:40] + bytes([data[40] ^ 1]) + data[41:],
                                                      "sha256")):
        path.write_bytes(damaged)
        with pytest.raises(ChecksumMismatchError, match=f"{shard}.*{expected}"):
            versions.verify_shards(vuri, manifest)
        config = InputConfig(staging_dir=str(tmp_path / f"stage-{expected}"))
        with pytest.raises(ChecksumMismatchError, match=f"{shard}.*refusing to train"):
            make_dataset(vuri, "train", manifest, config)


def _kill_cli_while_writing(root: str, end: str, start: str, started: Callable[[], bool],
                            env: dict[str, str] | None = None) -> float:
    """Run the CLI as run id "killed", SIGKILL its process group once writing started.

    Returns the time.time() of the kill.
    """
    cmd = [sys.executable, "-m", "etl", "run", "--root", root, "--interval-end", end,
           "--interval-start", start, "--run-id", "killed", "--shard-bytes", "4000"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + KILL_WAIT_S
    try:
        while not started() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started: CLI + workers
        killed_at = time.time()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    return killed_at


@pytest.mark.integration
def test_sigkill_while_writing_shards_then_retry(root: str, root_path: Path,
                                                 base_digest: dict[str, str]) -> None:
    """SIGKILL the CLI (and its workers) mid-write; the same run id then publishes cleanly."""
    vdir = root_path / "datasets" / DATASET / NEXT_VERSION
    _kill_cli_while_writing(root, NEXT_END, NEXT_START, lambda: shard_being_written(root))
    assert_killed_mid_write(root)
    assert not (vdir / "manifest.json").exists()
    assert_untouched(root, base_digest)  # the half-written version is invisible to readers

    result = pipeline.run(DATASET, root, NEXT_END, NEXT_START, run_id="killed",
                          shard_bytes=4000)
    assert result.created and result.version == NEXT_VERSION
    assert_one_clean_version(root, NEXT_VERSION)
    assert_untouched(root, base_digest, new_version=NEXT_VERSION)


@pytest.mark.integration
def test_sigkill_then_another_run_id_takes_over_at_once(
        root: str, root_path: Path, base_digest: dict[str, str],
        caplog: pytest.LogCaptureFixture) -> None:
    """Same host, the killed writer's pid is gone: a different run breaks its lease at once."""
    _kill_cli_while_writing(root, NEXT_END, NEXT_START, lambda: shard_being_written(root))
    assert_killed_mid_write(root)
    assert_untouched(root, base_digest)
    with caplog.at_level(logging.WARNING):
        result = pipeline.run(DATASET, root, NEXT_END, NEXT_START, run_id="other",
                              shard_bytes=4000)
    assert result.created and result.version == NEXT_VERSION
    assert any("breaking the lease" in r.getMessage() and "is gone" in r.getMessage()
               for r in caplog.records)
    assert not any("waiting for it" in r.getMessage() for r in caplog.records)
    assert versions.read_manifest(result.version_uri).run_id == "other"
    assert_one_clean_version(root, NEXT_VERSION)
    assert_untouched(root, base_digest, new_version=NEXT_VERSION)


@pytest.fixture()
def landed_gcs(gcs_root: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Days 01-01 and 01-02 landed on the emulator; the test may repoint gcsfs, this puts it back."""
    from etl.kinds.tabular.land import land

    land(gcs_root, DATASET, LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 3)))
    yield gcs_root
    storage_fs._resolve_token.cache_clear()


def _via(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Send every gcsfs request of this process (Dask workers are threads) to ``endpoint``."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    storage_fs._resolve_token.cache_clear()


@pytest.mark.integration
def test_flaky_store_etl_and_staging_retry_and_succeed(
        gcs_emulator: object, landed_gcs: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, dask_client: object) -> None:
    """Seeded 429/503/drops on the ETL and staging requests: both retry and succeed."""
    from training.data.tabular import stage_version

    # seed 5: the 6 faults (429, 503 and drops) all land in the first ~60 of ~300 requests
    plan = FaultPlan(p_429=0.03, p_503=0.03, p_drop=0.02, seed=5, budget=6, after=5)
    with FaultProxy(gcs_emulator.endpoint, plan) as proxy:
        _via(monkeypatch, proxy.endpoint)
        result = pipeline.run(DATASET, landed_gcs, DAY_END, DAY_START, run_id="flaky",
                              shard_bytes=60_000)
        etl_faults = proxy.counters.total_faults
        manifest = versions.read_manifest(result.version_uri)
        versions.verify_shards(result.version_uri, manifest)
        local = stage_version(result.version_uri, manifest, str(tmp_path), ["train", "eval"])
    assert result.created and result.version == DAY_VERSION
    assert etl_faults > 0, proxy.counters  # the ETL itself went through injected faults
    assert proxy.counters.total_faults == plan.budget, proxy.counters
    assert all(proxy.counters.faults.values()), proxy.counters  # every kind was hit
    _via(monkeypatch, gcs_emulator.endpoint)
    assert versions.list_versions(landed_gcs, DATASET) == [DAY_VERSION]
    staged = sorted(p.name for p in local.rglob("*.tfrecord*"))
    assert staged == sorted(s.file for sp in ("train", "eval")
                            for s in manifest.splits[sp].shards)


@pytest.mark.integration
def test_sigkill_on_gcs_then_another_run_id_publishes_after_expiry(
        gcs_emulator: object, landed_gcs: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, dask_client: object) -> None:
    """On GCS, seen from another host: the dead lease blocks only until its expiry."""
    vuri = versions.version_uri(landed_gcs, DATASET, DAY_VERSION)
    killed_at = _kill_cli_while_writing(landed_gcs, DAY_END, DAY_START,
                                        lambda: segment_lease_taken(landed_gcs),
                                        env=SHORT_LEASE)
    assert unfinished(landed_gcs), "the kill came after the segment was built"
    assert versions.list_versions(landed_gcs, DATASET) == []
    monkeypatch.setattr(lease, "_host", lambda: "another-host")  # no pid check: expiry only
    with caplog.at_level(logging.WARNING):
        result = pipeline.run(DATASET, landed_gcs, DAY_END, DAY_START, run_id="other",
                              shard_bytes=60_000)
    assert result.created and result.version == DAY_VERSION
    waits = [r for r in caplog.records if "waiting for it" in r.getMessage()]
    broke = [r for r in caplog.records if "breaking the lease" in r.getMessage()]
    assert waits and "'killed'" in waits[0].getMessage(), caplog.text
    assert "being built by" in waits[0].getMessage(), caplog.text  # the segment's lease
    assert len(broke) == 1 and "no heartbeat for" in broke[0].getMessage(), caplog.text
    expiry = float(SHORT_LEASE[lease.EXPIRY_ENV])
    assert broke[0].created - killed_at <= expiry + lease.POLL_S + 5.0  # + one poll + slack
    assert versions.list_versions(landed_gcs, DATASET) == [DAY_VERSION]
    assert versions.read_manifest(vuri).run_id == "other"
    assert_one_clean_version(landed_gcs, DAY_VERSION)


def _fast_gcsfs_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scale gcsfs' own retry sleeps down (its 6 tries stay), so a dead store fails in seconds."""
    import asyncio

    import gcsfs.retry

    async def sleep(delay: float, *args: object) -> None:
        await asyncio.sleep(delay * GCSFS_SLEEP_SCALE, *args)

    monkeypatch.setattr(gcsfs.retry, "asyncio", types.SimpleNamespace(sleep=sleep))


@pytest.mark.integration
def test_dead_store_fails_cleanly_without_a_partial_version(
        gcs_emulator: object, landed_gcs: str, monkeypatch: pytest.MonkeyPatch,
        dask_client: object) -> None:
    """The store answers 503 to everything after N requests: a clear error, nothing visible."""
    first = pipeline.run(DATASET, landed_gcs, DAY_END, DAY_START, run_id="base",
                         shard_bytes=60_000)
    vuri = first.version_uri
    before = {n: storage.stat(storage.join(vuri, n))["size"] for n in storage.list_dir(vuri)}
    monkeypatch.setattr(storage_retry, "DEFAULT_RETRY", storage.RetryPolicy(
        attempts=2, initial_delay_s=0.05, max_delay_s=0.1, budget_s=5.0))
    _fast_gcsfs_backoff(monkeypatch)
    plan = FaultPlan(p_429=0, p_503=1.0, p_drop=0, budget=None, after=40)
    with FaultProxy(gcs_emulator.endpoint, plan) as proxy:
        _via(monkeypatch, proxy.endpoint)
        t0 = time.monotonic()
        with pytest.raises(StorageError, match=r"gs://.*gave up after .*503"):
            pipeline.run(DATASET, landed_gcs, "2013-01-03T00:00:00Z", DAY_END, run_id="dead",
                         shard_bytes=60_000)
        elapsed = time.monotonic() - t0
    assert proxy.counters.faults["503"] > 0, proxy.counters
    assert elapsed < 45, f"a dead store took {elapsed:.0f}s to give up"
    _via(monkeypatch, gcs_emulator.endpoint)
    assert versions.list_versions(landed_gcs, DATASET) == [DAY_VERSION]
    assert versions.latest_version(landed_gcs, DATASET) == DAY_VERSION
    after = {n: storage.stat(storage.join(vuri, n))["size"] for n in storage.list_dir(vuri)}
    assert after == before


def test_cli_run_waiting_for_a_live_writer_says_so_on_stderr(root: str, root_path: Path) -> None:
    """Issue 18, as an operator sees it: `python -m etl run` prints who holds the interval."""
    vuri = versions.version_uri(root, DATASET, NEXT_VERSION)
    held = versions.acquire_writer_lock(vuri, "manual__someone_else")
    cmd = [sys.executable, "-m", "etl", "run", "--root", root, "--interval-end", NEXT_END,
           "--interval-start", NEXT_START, "--run-id", "waiter"]
    with versions.Heartbeat(held):  # a live writer: this process, beating
        proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        lines: list[str] = []
        try:
            deadline = time.monotonic() + KILL_WAIT_S
            while time.monotonic() < deadline and proc.poll() is None:
                line = proc.stderr.readline()
                lines.append(line)
                if "is being written by" in line:
                    break
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    waiting = [ln for ln in lines if "is being written by" in ln]
    assert waiting, "".join(lines)[-3000:]
    assert "WARNING" in waiting[0] and "'manual__someone_else'" in waiting[0]
    assert "last heartbeat" in waiting[0] and "giving up after" in waiting[0]
    assert not (root_path / "datasets" / DATASET / NEXT_VERSION / "manifest.json").exists()
