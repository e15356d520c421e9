"""Stopping and recovering a waiting run on a real Airflow, as docs/AIRFLOW.md says (issue 51).

The same stack as ``test_late_data.py`` (api-server, scheduler, dag-processor and triggerer over
PostgreSQL; a spec copy with a 10-minute ``arrival.wait``). Two runs of ``etl_flights`` wait,
deferred, for the late 2013-01-03. Both are stopped with the docs' first request (what "Mark
Dag Run as... Failed" sends): nothing is published, ``build`` and ``publish`` are skipped.
The day lands. The first run is recovered with the docs' second request (what "Clear Dag Run",
"Clear existing tasks" sends) and publishes its version. The second is cleared the old way,
"Clear only failed tasks": its ``wait_for_data`` refuses the lone re-run at once (red, no
retry), naming the clear that publishes, where it used to succeed and leave the run green with
nothing published. The requests are read from the docs' code block, so the docs and this test
cannot drift apart.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.integration.airflow_stack import api, dsn_of, land, start, task_log
from tests.integration.services import query_rows, wait_for

psycopg2 = pytest.importorskip("psycopg2")
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "etl_flights"
RETRY_ON = (OSError, psycopg2.Error)
WAIT_RUN_S = 420
ARRIVAL = "\narrival: {wait: 10m, every: 2s}\n"  # no give-up while the test runs
# Both windows end with 2013-01-03, which lands late; the second is a day shorter.
RECOVERED = {"interval_end": "2013-01-04T00:00:00+00:00", "window_days": 3, "shard_mb": 1}
ONLY_FAILED = {"interval_end": "2013-01-04T00:00:00+00:00", "window_days": 2, "shard_mb": 1}
VERSIONS = {"recovered": "20130104T000000Z_20130101T000000Z",
            "only_failed": "20130104T000000Z_20130102T000000Z"}
DOC_REQUEST = re.compile(r"""curl -s -X (?P<method>[A-Z]+) "\$AIRFLOW/api/v2(?P<path>[^"]+)"."""
                         r""".*?-d '(?P<body>[^']+)'""", re.DOTALL)


def doc_requests() -> list[tuple[str, str, dict]]:
    """The docs' stop and recovery requests, as written in "Recovering a stopped or given-up
    run" of docs/AIRFLOW.md: (method, path under /api/v2 with ``$RUN_ID``, JSON body)."""
    text = (REPO / "docs" / "AIRFLOW.md").read_text(encoding="utf-8")
    section = text.split("### Recovering a stopped or given-up run", 1)[1].split("\n### ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    found = [(m["method"], m["path"], json.loads(m["body"])) for m in DOC_REQUEST.finditer(block)]
    assert [(m, p) for m, p, _ in found] == [
        ("PATCH", "/dags/etl_flights/dagRuns/$RUN_ID"),
        ("POST", "/dags/etl_flights/dagRuns/$RUN_ID/clear")], found
    return found


def send(env: dict[str, str], request: tuple[str, str, dict], run_id: str,
         **changed: object) -> object:
    method, path, body = request
    return api(env, method, path.replace("$RUN_ID", quote(run_id, safe="")), {**body, **changed})


def _states(dsn: str, run_id: str) -> dict[str, str | None]:
    rows = query_rows(dsn, "SELECT task_id, state FROM task_instance WHERE dag_id = %s AND "
                      "run_id = %s", DAG_ID, run_id)
    return dict(rows)


def _run_state(dsn: str, run_id: str) -> str:
    return query_rows(dsn, "SELECT state FROM dag_run WHERE run_id = %s", run_id)[0][0]


def test_a_stopped_waiting_run_is_recovered_as_the_docs_say(tmp_path: Path, postgres_db: str,
                                                             processes) -> None:
    stop, recover = doc_requests()
    env = start(tmp_path, postgres_db, processes, lambda spec: spec + ARRIVAL,
                ("2013-01-01", "2013-01-03"), {"PIPELINE_ETL_SCHEDULE": "none"})
    dsn = dsn_of(postgres_db)
    datasets = tmp_path / "data" / "datasets" / "flights"

    def diagnostics() -> str:
        tis = query_rows(dsn, "SELECT run_id, task_id, state, try_number FROM task_instance")
        logs = "\n".join(task_log(env, DAG_ID, r, t)[-3000:] for r, t, s, _ in tis
                         if s not in ("success", None))
        return f"tasks: {tis}\n{logs}\n{processes.tails()}"

    runs = {name: api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                      {"logical_date": None, "conf": conf})["dag_run_id"]
            for name, conf in (("recovered", RECOVERED), ("only_failed", ONLY_FAILED))}
    for run_id in runs.values():
        wait_for(f"{run_id}'s wait_for_data deferred",
                 lambda r=run_id: _states(dsn, r).get("wait_for_data") == "deferred",
                 WAIT_RUN_S, on_timeout=diagnostics, retry_on=RETRY_ON, interval_s=1)

    for run_id in runs.values():  # the docs' stop
        send(env, stop, run_id)
    for run_id in runs.values():
        assert _run_state(dsn, run_id) == "failed"
        assert _states(dsn, run_id) == {"wait_for_data": "failed", "build": "skipped",
                                        "publish": "skipped"}, diagnostics()
    wait_for("the triggerer to drop the stopped runs' triggers", lambda: query_rows(
        dsn, "SELECT count(*) FROM trigger")[0][0] == 0, 120, on_timeout=diagnostics,
        retry_on=RETRY_ON)
    assert not any(datasets.glob("*/manifest.json")), "a stopped run published something"

    land(env, "2013-01-03", "2013-01-04")  # the late day lands
    send(env, recover, runs["recovered"])  # the docs' recovery
    send(env, recover, runs["only_failed"], only_failed=True)  # "Clear only failed tasks"

    def finished(run_id: str) -> str | None:
        processes.check_alive()
        state = _run_state(dsn, run_id)
        return state if state in ("success", "failed") else None

    t0 = time.monotonic()
    assert wait_for("the recovered run to finish", lambda: finished(runs["recovered"]),
                    WAIT_RUN_S, on_timeout=diagnostics, retry_on=RETRY_ON) == "success", \
        diagnostics()
    assert _states(dsn, runs["recovered"]) == {
        "wait_for_data": "success", "build": "success", "publish": "success"}
    assert (datasets / VERSIONS["recovered"] / "manifest.json").is_file()
    events = query_rows(dsn, "SELECT extra FROM asset_event WHERE source_run_id = %s",
                        runs["recovered"])
    assert [e["version"] for (e,) in events] == [VERSIONS["recovered"]], events

    # Airflow judges a run by its last task (publish, still skipped): the run reads success,
    # but wait_for_data is red and says which clear publishes
    wait_for("the run cleared 'only failed' to finish", lambda: finished(runs["only_failed"]),
             WAIT_RUN_S, on_timeout=diagnostics, retry_on=RETRY_ON)
    assert _states(dsn, runs["only_failed"]) == {"wait_for_data": "failed", "build": "skipped",
                                                 "publish": "skipped"}, diagnostics()
    log = task_log(env, DAG_ID, runs["only_failed"], "wait_for_data")
    assert ("this run was stopped while it waited (its build was skipped) and only "
            "wait_for_data was cleared: nothing runs after it and nothing is published") in log \
        and "Clear the whole run instead (Clear Dag Run, 'Clear existing tasks'" in log, log[-3000:]
    tries = query_rows(dsn, "SELECT try_number FROM task_instance WHERE run_id = %s AND "
                       "task_id = 'wait_for_data'", runs["only_failed"])
    assert tries == [(2,)], tries  # refused at once: no retry
    assert not (datasets / VERSIONS["only_failed"] / "manifest.json").exists()
    print(f"\nstopped, landed, cleared: published in {time.monotonic() - t0:.0f} s; "
          "'only failed' refused")
