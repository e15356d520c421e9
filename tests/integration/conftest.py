"""Fixtures for tests against real local services: PostgreSQL and Redis on loopback.

Nothing here changes the environment at import time (other test modules import Airflow with
their own settings). A service that cannot be reached skips the test with the reason, except
under ``CI=true``, where the environment promises the services and a skip would hide a failure.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", int(os.environ.get("PGPORT", "5432")), "postgres"
REDIS_HOST, REDIS_PORT = "127.0.0.1", int(os.environ.get("REDIS_PORT", "6379"))
# Redis db numbers the tests may claim; 0 is left to whatever else uses this Redis.
REDIS_DBS = range(8, 16)
CLAIM_KEY = "flightpipe:integration-test-claim"


def unavailable(reason: str) -> None:
    """Skip, or fail under CI=true where the services must be present."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


CHROMIUM = Path("/usr/bin/chromium")  # Debian's package, as `make browser` installs it


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The browser the UI tests drive; skips without it, except under CI=true (``unavailable``)."""
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} not installed (`make browser`)")
    return CHROMIUM


@pytest.fixture(scope="session")
def postgres_admin() -> Callable[[], object]:
    """A connect() to the server's maintenance database; skips when the server is down."""
    psycopg2 = pytest.importorskip("psycopg2")

    def connect():
        conn = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres",
                                connect_timeout=5)
        conn.autocommit = True
        return conn

    try:
        connect().close()
    except psycopg2.OperationalError as exc:
        unavailable(f"PostgreSQL at {PG_HOST}:{PG_PORT} (user {PG_USER}) unreachable: {exc}")
    return connect


@pytest.fixture
def postgres_db(postgres_admin) -> Iterator[str]:
    """A fresh, uniquely named database, dropped afterwards; yields its SQLAlchemy URL."""
    name = f"flightpipe_it_{secrets.token_hex(4)}"
    conn = postgres_admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@pytest.fixture
def redis_db() -> Iterator[str]:
    """An empty Redis db number claimed for this test; flushed afterwards."""
    redis = pytest.importorskip("redis")
    try:
        redis.Redis(host=REDIS_HOST, port=REDIS_PORT, socket_timeout=5).ping()
    except redis.exceptions.RedisError as exc:
        unavailable(f"Redis at {REDIS_HOST}:{REDIS_PORT} unreachable: {exc}")
    for number in REDIS_DBS:
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number, socket_timeout=5)
        if client.dbsize() == 0 and client.set(CLAIM_KEY, os.getpid(), nx=True):
            try:
                yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{number}"
            finally:
                client.flushdb()
            return
    pytest.fail(f"no empty Redis db among {list(REDIS_DBS)} to claim")


class Processes:
    """Long-running subprocesses, each in its own session so its children end with it."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: list[str], env: dict[str, str], cwd: Path) -> None:
        log = (self.log_dir / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(args, env=env, cwd=cwd, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"processes exited early: {dead}\n{self.tails(list(dead))}"

    def tails(self, names: list[str] | None = None, lines: int = 40) -> str:
        out = []
        for name in names or list(self.procs):
            text = (self.log_dir / f"{name}.log").read_text(errors="replace").splitlines()
            out.append(f"--- {name} (last {lines} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM each process group we started, then SIGKILL what is left."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers in the group (task processes)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    """Subprocesses that are stopped (and their process groups killed) after the test."""
    log_dir = tmp_path / "process-logs"
    log_dir.mkdir()
    procs = Processes(log_dir)
    try:
        yield procs
    finally:
        procs.stop()
