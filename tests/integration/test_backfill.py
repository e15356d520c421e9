"""Backfill of the ETL DAG on a real scheduler: one version per interval, LATEST on the newest.

A fresh Airflow home and PostgreSQL database (SQLite answered "database is locked" to
``backfill create`` on a loaded machine), then api-server, scheduler (LocalExecutor) and
dag-processor as real processes. The test runs the backfill command docs/AIRFLOW.md documents over
three daily intervals and checks, from the metadata DB and storage, one version per interval,
each from its own run, and LATEST on the newest whatever order the concurrent runs published in
(``publish`` has no ``depends_on_past`` since issue 34: storage keeps the order). Skips without PostgreSQL, but not
under CI=true. The heavy steps join one shared Dask cluster (``PIPELINE_DASK_ADDRESS``): a
LocalCluster per heavy task costs more CPU than the ETL on 2 cores (tests/etl/test_cluster.py covers
those). ``use_job_schedule`` is off, so neither a wall-clock nightly run of ``etl_flights``
(catchup is off) nor an Asset-triggered training run gets in the way; backfill runs come from
the CLI, not from that loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.services import api_server_env, free_port, query_rows, wait_for

psycopg2 = pytest.importorskip("psycopg2")

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAG_ID = "etl_flights"
# Logical dates (interval starts), both inclusive: three daily intervals, one more than the
# `dask` pool's two slots, so runs queue as well as overlap.
FROM_DATE, TO_DATE = "2013-01-02", "2013-01-04"
# No window_days: each version holds everything landed up to its interval end.
EXPECTED_VERSIONS = ["20130103T000000Z_all", "20130104T000000Z_all", "20130105T000000Z_all"]
# Flights of the three intervals' days, [2013-01-02, 2013-01-05): ~2,700 rows.
LAND_DAYS = ("2013-01-02", "2013-01-05")
BACKFILL_ARGS = ["backfill", "create", "--dag-id", DAG_ID, "--from-date", FROM_DATE,
                 "--to-date", TO_DATE, "--reprocess-behavior", "failed"]
RETRY_ON = (OSError, psycopg2.Error)  # api-server not up, tables not there yet
WAIT_PARSE_S, WAIT_RUNS_S = 180, 600  # bounds for a 2-core machine shared with other jobs
# The shared Dask cluster: scheduler and one 2-thread worker in one process, so Great
# Expectations is imported once (two worker processes cost ~40% more CPU in total).
DASK_CLUSTER = """
import sys, time
from distributed import LocalCluster
with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, host="127.0.0.1",
                  scheduler_port=int(sys.argv[1]), dashboard_address=None):
    while True:
        time.sleep(60)
"""


class MetaDB:
    """Read-only queries on the metadata DB: the test needs no API login for them."""

    def __init__(self, url: str) -> None:
        self.dsn = url.replace("postgresql+psycopg2://", "postgresql://")

    def rows(self, sql: str, *args: Any) -> list[tuple]:
        return query_rows(self.dsn, sql, *args)

    def runs(self) -> dict[str, tuple[str, str, str]]:
        """run_id -> (state, run_type, data interval end as YYYY-MM-DD) for the ETL DAG."""
        return {r: (s, t, e.date().isoformat()) for r, s, t, e in self.rows(
            "SELECT run_id, state, run_type, data_interval_end FROM dag_run WHERE dag_id = %s",
            DAG_ID)}

    def task_states(self) -> dict[tuple[str, str], tuple[str | None, int]]:
        """(run_id, task_id) -> (state, try_number)."""
        return {(r, t): (s, n) for r, t, s, n in self.rows(
            "SELECT run_id, task_id, state, try_number FROM task_instance WHERE dag_id = %s",
            DAG_ID)}


@pytest.fixture
def services(processes) -> Iterator[Any]:
    """``processes``, plus the task processes they fork: those leave the process groups."""
    try:
        yield processes
    finally:
        tree = []
        for proc in processes.procs.values():
            try:
                tree += psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        processes.stop()
        for child in tree:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass


def _env(tmp: Path, db_url: str, port: int, dask_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "PIPELINE_", "STORAGE_EMULATOR"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "AIRFLOW_HOME": str(tmp / "airflow-home"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # train_flights stays paused
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        # Parse once (a bundle is listed at start whatever the interval): CPU is scarce.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "600",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        **api_server_env(port),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        # Loopback only; spares a login for the two setup calls (pool, unpause).
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "PIPELINE_STORAGE_ROOT": f"file://{tmp / 'data'}",
        "PIPELINE_DASK_ADDRESS": f"tcp://127.0.0.1:{dask_port}",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    })
    return env


def _api(env: dict[str, str], method: str, path: str, body: dict) -> Any:
    """One REST call (v2) to the test's api-server; every caller is admin there."""
    req = urllib.request.Request(f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2{path}",
                                 data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def _run(args: list[str], env: dict[str, str], timeout_s: float = 300) -> str:
    proc = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    assert proc.returncode == 0, f"{args} failed:\n{(proc.stdout + proc.stderr)[-4000:]}"
    return proc.stdout


def _log_line(line: str) -> str:
    """A task log record (JSON lines in Airflow 3) as one readable line, with its error."""
    try:
        rec = json.loads(line)
    except ValueError:
        return line
    error = f" {json.dumps(rec['error_detail'])[-1500:]}" if rec.get("error_detail") else ""
    return f"{rec.get('timestamp', '')} {rec.get('level', '')} {rec.get('event', '')}{error}"


def _task_logs(home: Path, states: dict[tuple[str, str], tuple[str | None, int]]) -> str:
    """The tails of the log files of every task instance that did not succeed."""
    out = []
    for (run_id, task_id), (state, _) in sorted(states.items()):
        if state in ("success", "skipped"):
            continue
        out.append(f"=== {run_id} {task_id}: {state}")
        folder = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
        for log in sorted(folder.glob("attempt=*.log")):
            lines = log.read_text(errors="replace").splitlines()[-60:]
            out.append(f"--- {log.name}\n" + "\n".join(map(_log_line, lines)))
    return "\n".join(out)


def test_backfill_publishes_one_version_per_interval(tmp_path: Path, postgres_db: str,
                                                              services) -> None:
    doc = REPO / "docs" / "AIRFLOW.md"  # the command users are told to run
    assert "airflow " + " ".join(BACKFILL_ARGS) in doc.read_text(), doc

    processes = services
    t0 = time.monotonic()
    dask_port = free_port()
    env = _env(tmp_path, postgres_db, free_port(), dask_port)
    home, root = Path(env["AIRFLOW_HOME"]), env["PIPELINE_STORAGE_ROOT"]
    airflow = str(BIN / "airflow")
    processes.start("dask", [str(BIN / "python"), "-c", DASK_CLUSTER, str(dask_port)], env, REPO)
    land = subprocess.Popen([str(BIN / "python"), "-m", "etl", "land", "--root", root,
                             "--dataset", "flights", "--start-day", LAND_DAYS[0],
                             "--end-day", LAND_DAYS[1]], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _run([airflow, "db", "migrate"], env)
    for name in ("api-server", "scheduler", "dag-processor"):
        processes.start(name, [airflow, name], env, REPO)
    landed, _ = land.communicate(timeout=300)
    assert land.returncode == 0, f"landing failed:\n{landed[-3000:]}"

    db = MetaDB(postgres_db)

    def ready() -> bool:
        processes.check_alive()
        errors = db.rows("SELECT filename, stacktrace FROM import_error")
        assert not errors, f"DAG import errors: {errors}"
        if not db.rows("SELECT 1 FROM serialized_dag WHERE dag_id = %s", DAG_ID):
            return False
        # Tasks report to the api-server's execution API: it must be up before they start.
        health = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2/monitor/health"
        with urllib.request.urlopen(health, timeout=10) as resp:
            return resp.status == 200

    wait_for(f"{DAG_ID} parsed and the api-server up", ready, WAIT_PARSE_S,
             on_timeout=processes.tails, retry_on=RETRY_ON)
    _api(env, "POST", "/pools", {"name": "dask", "slots": 2, "description": "ETL"})
    _api(env, "PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    print(f"\nAirflow up, data landed, DAG parsed: {time.monotonic() - t0:.0f} s")

    t1 = time.monotonic()
    _run([airflow, *BACKFILL_ARGS], env)
    runs = db.runs()
    assert len(runs) == len(EXPECTED_VERSIONS), runs
    assert {t for _, t, _ in runs.values()} == {"backfill"}, runs

    def diagnostics() -> str:
        states = db.task_states()
        return (f"runs: {db.runs()}\ntasks: {states}\n{_task_logs(home, states)}\n"
                f"{processes.tails()}")

    def all_succeeded() -> bool:
        processes.check_alive()
        states = db.task_states()
        bad = {k: v for k, v in states.items()
               if v[0] in ("failed", "upstream_failed", "up_for_retry")}
        if bad:  # retries back off for minutes: fail now, with the logs
            pytest.fail(f"backfill tasks failed: {bad}\n{diagnostics()}", pytrace=False)
        return all(s == "success" for s, _, _ in db.runs().values())

    wait_for("every backfill run to succeed", all_succeeded, WAIT_RUNS_S,
             on_timeout=diagnostics, retry_on=RETRY_ON)
    print(f"backfill ran in {time.monotonic() - t1:.0f} s")
    _check_versions(db, root)


def _check_versions(db: MetaDB, root: str) -> None:
    """One version per interval, each from its own run; LATEST on the newest."""
    by_end = sorted(db.runs().items(), key=lambda item: item[1][2])  # by data interval end
    run_ids = [run_id for run_id, _ in by_end]
    states = db.task_states()
    assert {s for s, _ in states.values()} == {"success"}, states
    assert all(n == 1 for _, n in states.values()), f"a task needed a retry: {states}"

    ds = Path(root.removeprefix("file://"), "datasets", "flights")
    # every version lists its days' segments, shared in one folder
    assert sorted(p.name for p in ds.iterdir() if p.is_dir()) == [*EXPECTED_VERSIONS, "segments"]
    manifests = [json.loads((ds / v / "manifest.json").read_text()) for v in EXPECTED_VERSIONS]
    assert {m["layout"] for m in manifests} == {"segments"}, manifests
    for (run_id, (_, _, end)), version, manifest in zip(by_end, EXPECTED_VERSIONS, manifests,
                                                       strict=True):
        assert version.startswith(end.replace("-", "") + "T000000Z"), (run_id, end, version)
        assert manifest["version"] == version and manifest["run_id"] == run_id, manifest
        assert manifest["data_interval"]["end"].startswith(end), (manifest, end)
    assert (ds / "LATEST").read_text().strip() == EXPECTED_VERSIONS[-1]
    sizes = [m["splits"]["train"]["num_examples"] for m in manifests]
    assert 0 < sizes[0] and sizes == sorted(set(sizes)), f"each version adds a day: {sizes}"
    # one event per version, from its own run, in whatever order the runs published
    events = db.rows("SELECT extra, source_run_id FROM asset_event WHERE source_dag_id = %s",
                     DAG_ID)
    assert sorted((extra["version"], run_id) for extra, run_id in events) == \
        list(zip(EXPECTED_VERSIONS, run_ids, strict=True)), events
    assert not db.rows("SELECT run_id FROM dag_run WHERE dag_id = 'train_flights'")
