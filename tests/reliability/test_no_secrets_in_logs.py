"""No credential reaches a log, an error message or a stored file, even at DEBUG.

The ETL runs on the GCS emulator with a real service account (tests/reliability/planted.py)
from the Airflow connection ``google_cloud_default``, set as ``AIRFLOW_CONN_*`` the way a
deployment sets it. etl.storage treats an emulator as anonymous before it looks at any
connection; ``_credentials_despite_emulator`` replaces only that shortcut, so the connection
is read, its key signs a JWT, the JWT is swapped for an access token and gcsfs sends it, as
against real GCS. Every logger is at DEBUG; records (with traceback and ``extra`` fields),
stdout/stderr and, for the command line, its worker processes' output are searched.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from etl import pipeline, storage
from etl.kinds.landing import LandOptions
from etl.storage import retry as storage_retry
from tests.reliability.conftest import DATASET, SHARD_BYTES
from tests.reliability.planted import TOP_LOGGERS, Planted, TokenServer, every_log_at_debug
from tests.support.faultproxy import FaultPlan, FaultProxy

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DAY_END, DAY_START = "2013-01-02T00:00:00Z", "2013-01-01T00:00:00Z"
DAY_VERSION = "20130102T000000Z_20130101T000000Z"
CLI_TIMEOUT_S = 600

# Imported first by every Python process whose PYTHONPATH starts with its folder: the CLI and
# the Dask worker processes it starts. Records print with their `extra=` fields (as structured
# handlers do); the named loggers keep their own handler, as Airflow later replaces root's.
SITECUSTOMIZE = f"""
import functools, logging, sys
class WithExtras(logging.Formatter):
    def format(self, record):
        return super().format(record) + " " + repr(vars(record))
def handler():  # one each: Dask's worker start-up silences the handlers of "distributed"
    h = logging.StreamHandler()
    h.setFormatter(WithExtras("%(processName)s %(name)s %(message)s"))
    return h
logging.basicConfig(level=logging.DEBUG, handlers=[handler()])
for name in {TOP_LOGGERS!r}:
    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler())
    logger.propagate = False
import etl.storage
module = sys.modules[etl.storage.gcs_token.__module__]
@functools.lru_cache(maxsize=8)
def _resolve_token(conn_id, emulator):
    token = module._token_from_airflow(conn_id)
    return token if token is not None else "google_default"
module._resolve_token = _resolve_token
"""


def _credentials_despite_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolve credentials as without an emulator (Airflow connection, else ADC)."""
    module = sys.modules[storage.gcs_token.__module__]  # etl.storage or the module it re-exports

    @functools.lru_cache(maxsize=8)
    def resolve(conn_id: str, emulator: str) -> object:
        token = module._token_from_airflow(conn_id)
        return token if token is not None else "google_default"

    monkeypatch.setattr(module, "_resolve_token", resolve)


@pytest.fixture()
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
            gcs_emulator: object) -> Iterator[Planted]:
    """A fresh key and token server; the connection names them; Airflow already imported."""
    if "AIRFLOW_HOME" not in os.environ:  # Airflow reads its home once; never ~/airflow
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path_factory.mktemp("airflow-home")))
    server = TokenServer().start()
    creds = Planted.make(server)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", creds.connection_env())
    _credentials_despite_emulator(monkeypatch)
    import airflow.sdk  # noqa: F401 - its logging set-up happens now, not inside the capture

    yield creds
    server.stop()


def _stored_text(root: str) -> str:
    """Every small non-shard object under ``root`` (segment.json, draft, manifest, reports) as text."""
    fs, path = storage.get_fs(root)
    names = [n for n, info in fs.find(path, detail=True).items()
             if ".tfrecord" not in n and info["size"] < 2_000_000]
    return "\n".join(fs.cat_file(n).decode("utf-8", "replace") for n in names)


def _assert_clean(creds: Planted, **outputs: str) -> None:
    """No needle in any output; the failure names the output and the secret, never its value."""
    found = {what: leaks for what, text in outputs.items() if (leaks := creds.leaks(text))}
    assert not found, f"credentials leaked: {found}"


def test_capture_catches_a_logged_secret(planted: Planted) -> None:
    """The search is live: a secret in a message, in `extra`, or in a silenced logger is found."""
    with every_log_at_debug() as logs:
        logging.getLogger("etl.scratch").debug("token=%s", planted.server.access_token)
        logging.getLogger("google.auth.scratch").debug("req", extra={"body": planted.keyfile})
    joined = "\n".join(logs)
    assert planted.leaks(joined) == sorted(
        ["access token", "private_key_id"] + [n for n in planted.needles() if "line" in n])


def test_etl_run_with_a_service_account_logs_no_secret(gcs_root: str, planted: Planted,
                                                       capfd: pytest.CaptureFixture[str],
                                                       dask_client: object) -> None:
    """Land and run one day with the key: it is used, and nothing of it is logged or stored."""
    from etl.kinds.tabular.land import land

    with every_log_at_debug() as logs:
        land(gcs_root, DATASET, LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 2)))
        result = pipeline.run(DATASET, gcs_root, DAY_END, DAY_START, run_id="keyed",
                              shard_bytes=SHARD_BYTES)
    out, err = capfd.readouterr()
    assert result.created
    assert planted.server.assertions, "the service account was never used"
    fs = storage.get_fs(gcs_root)[0]
    assert fs.credentials.credentials.token == planted.server.access_token
    assert any(line.startswith("gcsfs DEBUG") for line in logs), "DEBUG records not captured"
    _assert_clean(planted, logs="\n".join(logs), stdout=out, stderr=err,
                  stored=_stored_text(gcs_root))


def _fast_gcsfs_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """gcsfs' 1..32 s sleeps between its 6 tries become milliseconds."""
    import asyncio
    import types

    import gcsfs.retry

    async def sleep(delay: float, *args: object) -> None:
        await asyncio.sleep(delay * 0.01, *args)

    monkeypatch.setattr(gcsfs.retry, "asyncio", types.SimpleNamespace(sleep=sleep))


def _failure(fn: object) -> str:
    """Run ``fn``, which must fail; its whole exception chain as a traceback would print it."""
    with pytest.raises(Exception) as info:
        fn()
    return "".join(traceback.format_exception(info.value))


def test_refused_key_and_dead_store_log_no_secret(gcs_root: str, planted: Planted,
                                                  gcs_emulator: object,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capfd: pytest.CaptureFixture[str],
                                                  dask_client: object) -> None:
    """The token endpoint refuses the key, then the store answers 503: errors carry no secret."""
    monkeypatch.setattr(storage_retry, "DEFAULT_RETRY", storage.RetryPolicy(
        attempts=2, initial_delay_s=0.05, max_delay_s=0.1, budget_s=5.0))
    _fast_gcsfs_backoff(monkeypatch)
    probe = storage.join(gcs_root, "raw", "probe.json")
    with every_log_at_debug() as logs:
        planted.server.reject = True
        refused = _failure(lambda: storage.write_bytes_atomic(probe, b"{}"))
        planted.server.reject = False
        storage.write_bytes_atomic(probe, b"{}")  # the key works again: a token is issued
        plan = FaultPlan(p_429=0, p_503=1.0, p_drop=0, budget=None)
        with FaultProxy(gcs_emulator.endpoint, plan) as proxy:
            monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
            dead = _failure(lambda: pipeline.run(DATASET, gcs_root, DAY_END, DAY_START,
                                                 run_id="dead"))
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.endpoint)
    out, err = capfd.readouterr()
    assert "401" in refused or "Invalid Credentials" in refused, refused[-2000:]
    assert "503" in dead, dead[-2000:]
    assert len(planted.server.assertions) >= 2 and proxy.counters.faults["503"] > 0
    _assert_clean(planted, refused=refused, dead=dead, logs="\n".join(logs), stdout=out,
                  stderr=err)


def test_command_line_and_its_workers_print_no_secret(gcs_root: str, planted: Planted,
                                                      tmp_path: Path) -> None:
    """``python -m etl build``: its worker processes read and write with the key, all at DEBUG."""
    from etl.kinds.tabular.land import land

    land(gcs_root, DATASET, LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 2)))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "PIPELINE_DASK_ADDRESS": "", "AIRFLOW__LOGGING__LOGGING_LEVEL": "DEBUG",
           "PIPELINE_IN_PROCESS_BYTES": "0"}  # a one-day window would run without workers
    cmd = [sys.executable, "-m", "etl", "-v", "build", "--root", gcs_root, "--interval-end",
           DAY_END, "--interval-start", DAY_START, "--run-id", "cli"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False,
                          timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert DAY_VERSION in proc.stdout  # the built version's URI
    worker_auth = "Worker process (from Nanny) google.auth.transport.requests Making request"
    assert worker_auth in proc.stderr, "no worker process logged its token request at DEBUG"
    assert "Worker process (from Nanny) gcsfs " in proc.stderr
    _assert_clean(planted, stdout=proc.stdout, stderr=proc.stderr)
