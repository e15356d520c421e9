"""A real Airflow for the late-data and partition tests: api-server, scheduler (LocalExecutor),
dag-processor and triggerer as processes on loopback, one shared Dask cluster, a PostgreSQL
metadata DB, and a copy of the flights spec edited by the test (its arrival wait, schedule)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.services import api_server_env, free_port, query_rows, wait_for

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WAIT_PARSE_S = 240
DASK_CLUSTER = """
import sys, time
from distributed import LocalCluster
with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, host="127.0.0.1",
                  scheduler_port=int(sys.argv[1]), dashboard_address=None):
    while True:
        time.sleep(60)
"""


def standalone_block() -> str:
    """The bash block after the ``standalone-commands`` marker in docs/AIRFLOW.md (what
    ``make standalone`` runs, where the README's first UI run starts)."""
    text = (REPO / "docs" / "AIRFLOW.md").read_text(encoding="utf-8")
    after = text[text.index("<!-- standalone-commands:"):]
    match = re.search(r"```bash\n(.*?)```", after, re.DOTALL)
    assert match, "no ```bash block after the standalone-commands marker"
    return match.group(1)


def airflow_env(tmp: Path, db_url: str, port: int, dask_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "PIPELINE_", "STORAGE_EMULATOR"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONPATH": str(REPO),
        "AIRFLOW_HOME": str(tmp / "airflow-home"), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),  # the trigger's module
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "600",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        **api_server_env(port),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # loopback only
        "PIPELINE_STORAGE_ROOT": f"file://{tmp / 'data'}",
        "PIPELINE_SPECS_PATH": str(tmp / "specs"),
        "PIPELINE_DASK_ADDRESS": f"tcp://127.0.0.1:{dask_port}", "TF_CPP_MIN_LOG_LEVEL": "2",
    })
    return env


def api(env: dict[str, str], method: str, path: str, body: dict | None = None) -> Any:
    """One REST call (v2); every caller is admin on this loopback api-server."""
    req = urllib.request.Request(f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2{path}",
                                 data=None if body is None else json.dumps(body).encode(),
                                 method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def land(env: dict[str, str], first: str, end: str) -> None:
    """``etl land`` of the flights days [first, end)."""
    proc = subprocess.run([str(BIN / "python"), "-m", "etl", "land", "--root",
                           env["PIPELINE_STORAGE_ROOT"], "--dataset", "flights", "--start-day",
                           first, "--end-day", end], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def start(tmp: Path, db_url: str, processes, edit_spec: Callable[[str], str],
          landed: tuple[str, str], env_extra: dict[str, str] | None = None,
          unpause: tuple[str, ...] = ("etl_flights",)) -> dict[str, str]:
    """The flights spec copied and edited, the days ``landed`` landed, Airflow up with the
    ``dask`` pool (2) and ``gpu`` pool (1), and ``unpause`` DAGs unpaused."""
    spec_dir = tmp / "specs" / "flights"
    shutil.copytree(REPO / "etl" / "examples" / "flights", spec_dir)
    spec = spec_dir / "spec.yaml"
    spec.write_text(edit_spec(spec.read_text()))
    dask_port = free_port()
    env = {**airflow_env(tmp, db_url, free_port(), dask_port), **(env_extra or {})}
    processes.start("dask", [str(BIN / "python"), "-c", DASK_CLUSTER, str(dask_port)], env, REPO)
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=300, check=False)
    assert migrate.returncode == 0, (migrate.stdout + migrate.stderr)[-3000:]
    for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
        processes.start(name, [str(BIN / "airflow"), name], env, REPO)
    land(env, *landed)
    dsn = dsn_of(db_url)

    def ready() -> bool:
        processes.check_alive()
        errors = query_rows(dsn, "SELECT filename, stacktrace FROM import_error")
        assert not errors, f"DAG import errors: {errors}"
        if len(query_rows(dsn, "SELECT 1 FROM serialized_dag WHERE dag_id = ANY(%s)",
                          list(unpause))) < len(unpause):
            return False
        return api(env, "GET", "/monitor/health") is not None

    wait_for(f"{unpause} parsed and the api-server up", ready, WAIT_PARSE_S,
             on_timeout=processes.tails, retry_on=(OSError, *_pg_errors()))
    api(env, "POST", "/pools", {"name": "dask", "slots": 2, "description": "ETL"})
    api(env, "POST", "/pools", {"name": "gpu", "slots": 1, "description": "GPUs"})
    for dag_id in unpause:
        api(env, "PATCH", f"/dags/{dag_id}", {"is_paused": False})
    return env


def dsn_of(db_url: str) -> str:
    return db_url.replace("postgresql+psycopg2://", "postgresql://")


def _pg_errors() -> tuple[type[BaseException], ...]:
    import psycopg2

    return (psycopg2.Error,)


def task_log(env: dict[str, str], dag_id: str, run_id: str, task_id: str) -> str:
    """Every log file of the task (the worker's attempts and the triggerer's), as text."""
    folder = (Path(env["AIRFLOW_HOME"]) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
              / f"task_id={task_id}")
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*")))
