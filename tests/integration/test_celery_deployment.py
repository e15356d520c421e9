"""The compose topology without Docker: Celery, PostgreSQL and Redis on this machine.

A fresh PostgreSQL database, a claimed Redis db, docker/airflow-init.sh (migrate, admin
password, pools), then api-server, scheduler, dag-processor and two Celery workers (queues
``default`` and ``gpu``) as real processes. The test triggers the ETL DAG through the REST
API with Params, waits for the Asset-triggered training DAG, and checks that both succeeded
and which Celery worker ran each task (``celery_taskmeta`` with extended results). The specs
are the shipped ones, flights' with a small training budget (one family, 100 rounds): where
each task ran is under test, not the model's figures.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.services import api_server_env, free_port, wait_for
from tests.support import specs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1080)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Four weeks of January 2013 (~25k flights): small, yet enough to beat the majority baseline.
LANDED_DAYS = (date(2013, 1, 1), date(2013, 1, 29))
ETL_CONF = {"interval_end": "2013-01-29T00:00:00+00:00", "window_days": 28, "shard_mb": 1,
            "validation_mode": "quarantine"}
# etl_flights waits for its window (deferred: the triggerer), builds its segments, then
# publishes (every ETL DAG).
EXPECTED_QUEUE = {"wait_for_data": "default", "build": "default", "publish": "default",
                  "resolve_version": "default", "train": "gpu", "announce_model": "default"}
RETRY_ON = (OSError, ValueError, KeyError)  # api-server not up, answer not complete yet
WAIT_ETL_S, WAIT_TRAIN_S = 480, 300  # generous bounds for a loaded 2-core machine
DEFAULT_WORKER_CELERY_CONFIG = yaml.safe_load((REPO / "docker-compose.yml").read_text())[
    "services"]["airflow-worker"]["environment"]["AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"]


@dataclass
class Deployment:
    base_url: str
    password: str
    env: dict[str, str]
    root: str
    db_url: str
    procs: Any  # conftest.Processes
    token: str = ""

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")

    def api(self, path: str) -> Any:
        status, payload = self.request("GET", f"/api/v2{path}")
        assert status == 200, (path, status, payload)
        return payload


def _env(tmp: Path, db_url: str, redis_url: str, port: int, password: str) -> dict[str, str]:
    home = tmp / "airflow-home"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "PIPELINE_", "STORAGE_EMULATOR"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CELERY__BROKER_URL": redis_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + db_url,
        "AIRFLOW__CELERY__EXTRA_CELERY_CONFIG": '{"result_extended": true}',
        "AIRFLOW__CORE__FERNET_KEY": _fernet_key(),
        **api_server_env(port),
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "auth" / "passwords.json"),
        "_AIRFLOW_WWW_USER_USERNAME": "admin",
        "_AIRFLOW_WWW_USER_PASSWORD": password,
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW_DASK_POOL_SLOTS": "2",
        "AIRFLOW_GPU_POOL_SLOTS": "1",
        "PIPELINE_STORAGE_ROOT": f"file://{tmp / 'data'}",
        "PIPELINE_SPECS_PATH": str(specs.budgeted(tmp / "specs", {"flights": specs.ONE_FIT})),
        # No nightly run for "today" competing with the triggered one.
        "PIPELINE_ETL_SCHEDULE": "none",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    })
    return env


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _land(root: str, env: dict[str, str]) -> None:
    start, end = LANDED_DAYS
    proc = subprocess.run([str(BIN / "python"), "-m", "etl", "land", "--root", root, "--dataset",
                           "flights", "--start-day", start.isoformat(), "--end-day",
                           end.isoformat()], env=env, cwd=REPO, check=False, timeout=300,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"landing the raw data failed:\n{proc.stderr[-3000:]}"


@pytest.fixture
def deployment(tmp_path: Path, postgres_db: str, redis_db: str, processes) -> Deployment:
    """Init + api-server, scheduler, dag-processor and a Celery worker per queue."""
    t0 = time.monotonic()
    port, password = free_port(), secrets.token_urlsafe(16)
    env = _env(tmp_path, postgres_db, redis_db, port, password)
    dep = Deployment(f"http://127.0.0.1:{port}", password, env, env["PIPELINE_STORAGE_ROOT"],
                     postgres_db, processes)
    init = subprocess.run(["bash", str(REPO / "docker" / "airflow-init.sh")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert init.returncode == 0, init.stdout[-3000:] + init.stderr[-3000:]
    airflow = str(BIN / "airflow")
    processes.start("api-server", [airflow, "api-server"], env, REPO)
    processes.start("scheduler", [airflow, "scheduler"], env, REPO)
    processes.start("dag-processor", [airflow, "dag-processor"], env, REPO)
    for queue, concurrency in (("default", "2"), ("gpu", "1")):
        own = {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
        if queue == "default":  # the compose file's: it preloads Great Expectations
            own["AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"] = DEFAULT_WORKER_CELERY_CONFIG
        processes.start(f"worker-{queue}", [airflow, "celery", "worker", "--queues", queue,
                                            "--concurrency", concurrency,
                                            "--celery-hostname", f"{queue}@%h"],
                        {**env, **own}, REPO)
    _land(dep.root, env)
    wait_for("the api-server", lambda: processes.check_alive() or
             dep.request("GET", "/api/v2/monitor/health")[0] == 200, 120,
             on_timeout=processes.tails, retry_on=RETRY_ON)
    print(f"\ndeployment up in {time.monotonic() - t0:.0f} s")
    return dep


def _login(dep: Deployment) -> None:
    status, body = dep.request("POST", "/auth/token",
                               {"username": "admin", "password": dep.password})
    assert status == 201, (status, body)
    dep.token = body["access_token"]
    assert dep.request("GET", "/api/v2/dags")[0] == 200
    wrong = Deployment(dep.base_url, "wrong", {}, "", "", dep.procs)
    assert wrong.request("POST", "/auth/token", {"username": "admin", "password": "nope"})[0] == 401


def _wait_run(dep: Deployment, dag_id: str, run_id: str, timeout_s: float) -> dict:
    def finished() -> dict | None:
        dep.procs.check_alive()
        run = dep.api(f"/dags/{dag_id}/dagRuns/{run_id}")
        if run["state"] == "failed":
            pytest.fail(f"{dag_id} run failed: {_task_states(dep, dag_id, run_id)}\n"
                        f"{_failed_logs(dep, dag_id, run_id)}", pytrace=False)
        return run if run["state"] == "success" else None

    return wait_for(f"{dag_id} run {run_id}", finished, timeout_s,
                    on_timeout=lambda: f"{_task_states(dep, dag_id, run_id)}\n{dep.procs.tails()}",
                    retry_on=RETRY_ON)


def _task_instances(dep: Deployment, dag_id: str, run_id: str) -> list[dict]:
    return dep.api(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]


def _task_states(dep: Deployment, dag_id: str, run_id: str) -> dict[str, str]:
    return {ti["task_id"]: ti["state"] for ti in _task_instances(dep, dag_id, run_id)}


def _failed_logs(dep: Deployment, dag_id: str, run_id: str) -> str:
    out = []
    for ti in _task_instances(dep, dag_id, run_id):
        if ti["state"] in ("failed", "upstream_failed", "up_for_retry"):
            status, body = dep.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/"
                                       f"{ti['task_id']}/logs/{max(ti['try_number'], 1)}")
            text = json.dumps(body)[-4000:] if status == 200 else f"(logs: HTTP {status})"
            out.append(f"--- {ti['task_id']}: {text}")
    return "\n".join(out)


def _celery_workers(db_url: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(dag_id, task_id) -> (TI queue, worker that ran it, queue Celery delivered it on)."""
    import psycopg2

    dsn = db_url.replace("postgresql+psycopg2://", "postgresql://")
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("""SELECT ti.dag_id, ti.task_id, ti.queue, m.worker, m.queue
                       FROM task_instance ti JOIN celery_taskmeta m
                         ON m.task_id = ti.external_executor_id""")
        return {(d, t): (q, w, mq) for d, t, q, w, mq in cur.fetchall()}


def test_etl_then_asset_triggered_training_on_celery(deployment: Deployment) -> None:
    dep = deployment
    _login(dep)

    def parsed() -> bool:
        errors = dep.api("/importErrors")["import_errors"]
        assert not errors, f"DAG import errors: {errors}"
        return all(dep.request("GET", f"/api/v2/dags/{d}")[0] == 200
                   for d in ("etl_flights", "train_flights"))

    wait_for("both DAGs parsed", parsed, 90, on_timeout=dep.procs.tails, retry_on=RETRY_ON)

    # A bad Param is refused when the run is created: no run, no task.
    status, body = dep.request("POST", "/api/v2/dags/etl_flights/dagRuns",
                               {"logical_date": None, "conf": {**ETL_CONF, "compression": "zip"}})
    assert status == 400 and "compression" in json.dumps(body), (status, body)
    assert dep.api("/dags/etl_flights/dagRuns")["total_entries"] == 0

    status, run = dep.request("POST", "/api/v2/dags/etl_flights/dagRuns",
                              {"logical_date": None, "conf": ETL_CONF})
    assert status == 200, (status, run)
    t0 = time.monotonic()
    _wait_run(dep, "etl_flights", run["dag_run_id"], WAIT_ETL_S)
    print(f"ETL run succeeded after {time.monotonic() - t0:.0f} s")
    published = dep.api(f"/dags/etl_flights/dagRuns/{run['dag_run_id']}/taskInstances/publish/"
                        "xcomEntries/return_value")["value"]
    assert published["version"] == "20130129T000000Z_20130101T000000Z"
    # The default worker imported GX when it started: the build task found it loaded.
    assert published["timings"]["gx_import_s"] == 0.0, published["timings"]

    events = dep.api("/assets/events?source_dag_id=etl_flights")["asset_events"]
    assert [e["extra"].get("version") for e in events] == [published["version"]]
    assert events[0]["extra"]["version_uri"] == published["version_uri"]

    def training_run() -> dict | None:
        runs = dep.api("/dags/train_flights/dagRuns")["dag_runs"]
        return runs[0] if runs else None

    train_run = wait_for("the Asset-triggered training run", training_run, 60,
                         on_timeout=dep.procs.tails, retry_on=RETRY_ON)
    assert train_run["run_type"] == "asset_triggered"
    _wait_run(dep, "train_flights", train_run["dag_run_id"], WAIT_TRAIN_S)
    print(f"ETL start to training success: {time.monotonic() - t0:.0f} s")
    trained = dep.api(f"/dags/train_flights/dagRuns/{train_run['dag_run_id']}/taskInstances/"
                      "train/xcomEntries/return_value")["value"]
    assert trained["version"] == published["version"]
    assert trained["model_uri"].startswith(f"{dep.root}/models/flights/{published['version']}/")
    record = json.loads(Path(trained["model_uri"].removeprefix("file://"), "metrics.json")
                        .read_text())
    assert record["family"] == "trees", record["family_choice"]  # the spec's budget, on Celery

    tis = {(ti["dag_id"], ti["task_id"]): ti
           for d, r in (("etl_flights", run["dag_run_id"]), ("train_flights", train_run["dag_run_id"]))
           for ti in _task_instances(dep, d, r)}
    assert {t for _, t in tis} == set(EXPECTED_QUEUE)
    ran_on = _celery_workers(dep.db_url)
    for (dag_id, task_id), ti in tis.items():
        queue = EXPECTED_QUEUE[task_id]
        ended = ("success", "skipped") if task_id == "announce_model" else ("success",)
        assert ti["state"] in ended and ti["queue"] == queue and ti["hostname"], ti
        ti_queue, worker, delivered_on = ran_on[(dag_id, task_id)]
        assert (ti_queue, delivered_on) == (queue, queue), (task_id, ran_on[(dag_id, task_id)])
        assert worker.startswith(f"{queue}@"), (task_id, worker)
    assert tis[("train_flights", "train")]["pool"] == "gpu"
    assert tis[("etl_flights", "build")]["pool"] == "dask"
