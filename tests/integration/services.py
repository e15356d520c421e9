"""Real services in the integration tests: free ports, an api-server's settings, polling."""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api_server_env(port: int) -> dict[str, str]:
    """Airflow settings for one api-server on loopback ``port`` that tasks reach for the
    execution API; fresh signing secrets per test. Each stack serves its scheduler's and
    triggerer's logs on ports of its own (two stacks at once on the fixed 8793 left one
    without), and a task waits up to a minute for the API: with two Airflows and browsers
    on two cores a request took over Airflow's default 5 s, and the task failed on it."""
    return {
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(48),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(48),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
    }


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float, *,
             on_timeout: Callable[[], str] = lambda: "", interval_s: float = 2.0,
             retry_on: tuple[type[BaseException], ...] = (OSError,)) -> Any:
    """Poll ``probe`` until it returns something truthy; fail with context after timeout_s.

    ``retry_on`` are the errors of a service that is not up yet (refused connections, tables
    not created): they are remembered for the failure message, not raised.
    """
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if result := probe():
                return result
        except retry_on as exc:
            last_error = exc
        time.sleep(interval_s)
    pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what} "
                f"(last error: {last_error!r})\n{on_timeout()}", pytrace=False)


def query_rows(dsn: str, sql: str, *args: Any) -> list[tuple]:
    """Rows of one read-only query on the metadata database (no API login needed)."""
    import psycopg2

    conn = psycopg2.connect(dsn, connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        conn.close()
