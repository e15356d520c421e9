"""The "Airflow standalone" commands (docs/AIRFLOW.md, linked from the README's first UI run)
work as written on a fresh Airflow home.

The fenced block after the ``standalone-commands`` marker is run by bash exactly as the page
prints it, from the repository root; the test only chooses where the Airflow home, storage and
api-server port are (environment variables the block leaves alone when set). It proves what a
fresh clone used to fail at: the pools are created (the database was migrated first) and every
component ``airflow standalone`` starts finds the ``airflow`` command (``.venv/bin`` on PATH),
with the api-server answering its health check on loopback. Then Ctrl-C (SIGINT) stops it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.integration.airflow_stack import standalone_block as readme_block
from tests.integration.services import api_server_env, free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]
START_S = 300  # every component imports Airflow; a shared 2-core machine needs minutes
COMPONENTS = ("scheduler", "dag_processor", "triggerer")


def test_readme_block_is_the_complete_recipe() -> None:
    """The block puts the venv on PATH, migrates before creating pools, then starts."""
    block = readme_block()
    lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
    assert any('PATH="$PWD/.venv/bin:$PATH"' in ln for ln in lines)
    order = [next(i for i, ln in enumerate(lines) if ln.startswith(cmd))
             for cmd in ("airflow db migrate", "airflow pools set dask", "airflow pools set gpu",
                         "airflow standalone")]
    assert order == sorted(order), lines


def _health(port: int) -> dict | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health",
                                timeout=5) as resp:
        body = json.load(resp)
    healthy = all((body.get(c) or {}).get("status") == "healthy" for c in COMPONENTS)
    return body if healthy else None


def test_readme_standalone_commands_start_airflow(tmp_path: Path) -> None:
    """db migrate, pools, standalone: components up, api-server healthy, then shut down."""
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRFLOW") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # A fresh clone's shell: no venv on PATH (the block must add it), no Airflow settings.
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(REPO)))
    env.update(api_server_env(port), AIRFLOW_HOME=str(tmp_path / "home"),
               PIPELINE_STORAGE_ROOT=(tmp_path / "data").as_uri())
    log_path = tmp_path / "standalone.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", readme_block()], cwd=REPO,
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    output = lambda: log_path.read_text(errors="replace")[-6000:]
    try:
        wait_for("the standalone components to report healthy", lambda: _health(port),
                 START_S, on_timeout=output, interval_s=3.0,
                 retry_on=(OSError, ValueError))
        assert proc.poll() is None, output()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    text = log_path.read_text(errors="replace")
    assert "FileNotFoundError" not in text, text[-6000:]
    assert "Database migration required" not in text, text[-6000:]
    pools = subprocess.run([str(REPO / ".venv" / "bin" / "airflow"), "pools", "list", "-o",
                            "json"], env={**env, "PATH": f"{REPO / '.venv' / 'bin'}:{env['PATH']}"},
                           cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    names = {p["pool"]: int(p["slots"]) for p in json.loads(pools.stdout)}
    assert names.get("dask") == 2 and names.get("gpu") == 1, names
