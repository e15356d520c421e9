"""Late data on a real Airflow: a run waits, deferred, for its window's last day (issue 28).

A fresh Airflow home and PostgreSQL database; api-server, scheduler (LocalExecutor),
dag-processor and triggerer as real processes, one shared Dask cluster, the flights spec copied
with a shortened ``arrival: {wait: 40s, every: 2s}``. The window's days but the last are
landed; a run of ``etl_flights`` for that window is started (through REST, with the interval
end the nightly run would have); its ``wait_for_data`` must defer -- the triggerer lists the
storage while the task holds no worker and no pool slot -- and, once the last day lands a few
seconds later, the run builds and publishes one version. A second run whose last day never
lands fails after the 40 s, once (no retry), with the one line naming the day and the spec key.
Skips without PostgreSQL, but not under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from services import api_server_env, free_port, query_rows, wait_for

psycopg2 = pytest.importorskip("psycopg2")
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAG_ID = "etl_flights"
RETRY_ON = (OSError, psycopg2.Error)
WAIT_PARSE_S, WAIT_RUN_S = 240, 420
ARRIVAL = "\narrival: {wait: 40s, every: 2s}\n"
# Run 1: window [01-01, 01-04), day 01-03 lands late. Run 2: window [01-02, 01-05), 01-04 never.
LATE = {"interval_end": "2013-01-04T00:00:00+00:00", "window_days": 3, "shard_mb": 1}
NEVER = {"interval_end": "2013-01-05T00:00:00+00:00", "window_days": 3, "shard_mb": 1}
DASK_CLUSTER = """
import sys, time
from distributed import LocalCluster
with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, host="127.0.0.1",
                  scheduler_port=int(sys.argv[1]), dashboard_address=None):
    while True:
        time.sleep(60)
"""


def _env(tmp: Path, db_url: str, port: int, dask_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "PIPELINE_", "STORAGE_EMULATOR"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONPATH": str(REPO),
        "AIRFLOW_HOME": str(tmp / "airflow-home"), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),  # the trigger's module
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # train_flights stays paused
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "600",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        **api_server_env(port),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # loopback only
        "PIPELINE_STORAGE_ROOT": f"file://{tmp / 'data'}", "PIPELINE_ETL_SCHEDULE": "none",
        "PIPELINE_SPECS_PATH": str(tmp / "specs"),
        "PIPELINE_DASK_ADDRESS": f"tcp://127.0.0.1:{dask_port}", "TF_CPP_MIN_LOG_LEVEL": "2",
    })
    return env


def _api(env: dict[str, str], method: str, path: str, body: dict | None = None) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2{path}",
                                 data=None if body is None else json.dumps(body).encode(),
                                 method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def _land(env: dict[str, str], first: str, end: str) -> None:
    """``etl land`` of the flights days [first, end)."""
    proc = subprocess.run([str(BIN / "python"), "-m", "etl", "land", "--root",
                           env["PIPELINE_STORAGE_ROOT"], "--dataset", "flights", "--start-day",
                           first, "--end-day", end], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def _start(tmp: Path, db_url: str, processes) -> dict[str, str]:
    spec_dir = tmp / "specs" / "flights"
    shutil.copytree(REPO / "etl" / "specs" / "flights", spec_dir)
    with (spec_dir / "spec.yaml").open("a") as spec:
        spec.write(ARRIVAL)
    dask_port = free_port()
    env = _env(tmp, db_url, free_port(), dask_port)
    processes.start("dask", [str(BIN / "python"), "-c", DASK_CLUSTER, str(dask_port)], env, REPO)
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=300, check=False)
    assert migrate.returncode == 0, (migrate.stdout + migrate.stderr)[-3000:]
    for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
        processes.start(name, [str(BIN / "airflow"), name], env, REPO)
    _land(env, "2013-01-01", "2013-01-03")  # 01-01 and 01-02; 01-03 is late
    dsn = db_url.replace("postgresql+psycopg2://", "postgresql://")

    def ready() -> bool:
        processes.check_alive()
        errors = query_rows(dsn, "SELECT filename, stacktrace FROM import_error")
        assert not errors, f"DAG import errors: {errors}"
        if not query_rows(dsn, "SELECT 1 FROM serialized_dag WHERE dag_id = %s", DAG_ID):
            return False
        return _api(env, "GET", "/monitor/health") is not None

    wait_for(f"{DAG_ID} parsed and the api-server up", ready, WAIT_PARSE_S,
             on_timeout=processes.tails, retry_on=RETRY_ON)
    _api(env, "POST", "/pools", {"name": "dask", "slots": 2, "description": "ETL"})
    _api(env, "PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    return env


def _task_log(env: dict[str, str], run_id: str, task_id: str) -> str:
    """Every log file of the task (the worker's attempts and the triggerer's), as text."""
    folder = (Path(env["AIRFLOW_HOME"]) / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
              / f"task_id={task_id}")
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*")))


def _ti(dsn: str, run_id: str, task_id: str) -> tuple[str | None, int]:
    rows = query_rows(dsn, "SELECT state, try_number FROM task_instance WHERE dag_id = %s "
                      "AND run_id = %s AND task_id = %s", DAG_ID, run_id, task_id)
    return rows[0] if rows else (None, 0)


def test_a_run_waits_deferred_for_a_late_day_and_gives_up_on_a_missing_one(
        tmp_path: Path, postgres_db: str, processes) -> None:
    env = _start(tmp_path, postgres_db, processes)
    dsn = postgres_db.replace("postgresql+psycopg2://", "postgresql://")

    def diagnostics() -> str:
        tis = query_rows(dsn, "SELECT run_id, task_id, state, try_number FROM task_instance")
        logs = "\n".join(_task_log(env, r, t)[-3000:] for r, t, s, _ in tis
                         if s not in ("success", None))
        return f"tasks: {tis}\n{logs}\n{processes.tails()}"

    late = _api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                {"logical_date": None, "conf": LATE})["dag_run_id"]
    wait_for("wait_for_data deferred", lambda: _ti(dsn, late, "wait_for_data")[0] == "deferred",
             WAIT_RUN_S, on_timeout=diagnostics, retry_on=RETRY_ON, interval_s=1)
    pools = {p["name"]: p for p in _api(env, "GET", "/pools")["pools"]}
    # deferred: counted apart, holding no slot of its pool; nothing runs in dask meanwhile
    assert pools["default_pool"]["deferred_slots"] == 1, pools
    assert pools["default_pool"]["running_slots"] == 0, pools
    assert pools["default_pool"]["occupied_slots"] == 0, pools
    assert pools["dask"]["occupied_slots"] == 0, pools
    time.sleep(3)  # the day lands a few seconds after the run started waiting
    _land(env, "2013-01-03", "2013-01-04")

    def finished(run_id: str) -> str | None:
        processes.check_alive()
        state = query_rows(dsn, "SELECT state FROM dag_run WHERE run_id = %s", run_id)[0][0]
        return state if state in ("success", "failed") else None

    assert wait_for("the late run to finish", lambda: finished(late), WAIT_RUN_S,
                    on_timeout=diagnostics, retry_on=RETRY_ON) == "success", diagnostics()
    log = _task_log(env, late, "wait_for_data")
    assert "Missing 1 partition(s) of flights" in log and "2013-01-03" in log, log[-3000:]
    assert "waiting until" in log, log[-3000:]
    events = query_rows(dsn, "SELECT extra FROM asset_event WHERE source_run_id = %s", late)
    assert [e["version"] for (e,) in events] == ["20130104T000000Z_20130101T000000Z"], events
    assert _ti(dsn, late, "wait_for_data") == ("success", 1)

    never = _api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                 {"logical_date": None, "conf": NEVER})["dag_run_id"]
    t0 = time.monotonic()
    assert wait_for("the run missing a day to fail", lambda: finished(never), WAIT_RUN_S,
                    on_timeout=diagnostics, retry_on=RETRY_ON) == "failed", diagnostics()
    waited = time.monotonic() - t0
    assert _ti(dsn, never, "wait_for_data") == ("failed", 1), diagnostics()  # no retry
    assert _ti(dsn, never, "build")[0] == "upstream_failed"
    log = _task_log(env, never, "wait_for_data")
    spec = tmp_path / "specs" / "flights" / "spec.yaml"
    line = ("1 partition(s) of flights not landed by the deadline "
            "(raw/flights/date={date}/flights.csv): 2013-01-04. Land them and clear this run, "
            f"or set arrival.wait in {spec} to wait longer.")
    assert line in log, log[-3000:]
    assert waited >= 35, f"gave up after {waited:.0f} s, before the 40 s wait"
    print(f"\nlate day: run waited and published; missing day: failed after {waited:.0f} s")
