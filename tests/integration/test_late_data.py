"""Late data on a real Airflow: a run waits, deferred, for its window's last day (issue 28).

A fresh Airflow home and PostgreSQL database; api-server, scheduler (LocalExecutor),
dag-processor and triggerer as real processes, one shared Dask cluster, the flights spec copied
with a shortened ``arrival: {wait: 40s, every: 2s}``. The window's days but the last are
landed; a run of ``etl_flights`` for that window is started (through REST, with the interval
end the nightly run would have); its ``wait_for_data`` must defer -- the triggerer lists the
storage while the task holds no worker and no pool slot -- and, once the last day lands a few
seconds later, the run builds and publishes one version. A second run whose last day never
lands fails after the 40 s, once (no retry), with the one line naming the day and the spec key.
In headless Chromium, the run's grid shows the waiting task deferred; meanwhile a run of another
window publishes (the waiting one holds it not) and the dataset page lists it first and says
beside the waiting run what it waits for and until when; once the day lands, the run published
(screenshots in ``ui-screenshots/late-data/``). Skips without PostgreSQL (or, the grid's test,
Chromium), but not under CI=true.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.integration.airflow_stack import api, dsn_of, land, start, task_log
from tests.integration.services import query_rows, wait_for

psycopg2 = pytest.importorskip("psycopg2")
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

DAG_ID = "etl_flights"
RETRY_ON = (OSError, psycopg2.Error)
WAIT_RUN_S = 420
ARRIVAL = "\narrival: {wait: 40s, every: 2s}\n"
# Run 1: window [01-01, 01-04), day 01-03 lands late. Run 2: window [01-02, 01-05), 01-04 never.
LATE = {"interval_end": "2013-01-04T00:00:00+00:00", "window_days": 3, "shard_mb": 1}
NEVER = {"interval_end": "2013-01-05T00:00:00+00:00", "window_days": 3, "shard_mb": 1}
OTHER = {"interval_end": "2013-01-03T00:00:00+00:00", "window_days": 2, "shard_mb": 1}  # landed


def _ti(dsn: str, run_id: str, task_id: str) -> tuple[str | None, int]:
    rows = query_rows(dsn, "SELECT state, try_number FROM task_instance WHERE dag_id = %s "
                      "AND run_id = %s AND task_id = %s", DAG_ID, run_id, task_id)
    return rows[0] if rows else (None, 0)


def test_a_run_waits_deferred_for_a_late_day_and_gives_up_on_a_missing_one(
        tmp_path: Path, postgres_db: str, processes) -> None:
    env = start(tmp_path, postgres_db, processes, lambda spec: spec + ARRIVAL,
                ("2013-01-01", "2013-01-03"),  # 01-01 and 01-02; 01-03 is late
                {"PIPELINE_ETL_SCHEDULE": "none"})
    dsn = dsn_of(postgres_db)

    def diagnostics() -> str:
        tis = query_rows(dsn, "SELECT run_id, task_id, state, try_number FROM task_instance")
        logs = "\n".join(task_log(env, DAG_ID, r, t)[-3000:] for r, t, s, _ in tis
                         if s not in ("success", None))
        return f"tasks: {tis}\n{logs}\n{processes.tails()}"

    late = api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                {"logical_date": None, "conf": LATE})["dag_run_id"]
    wait_for("wait_for_data deferred", lambda: _ti(dsn, late, "wait_for_data")[0] == "deferred",
             WAIT_RUN_S, on_timeout=diagnostics, retry_on=RETRY_ON, interval_s=1)
    pools = {p["name"]: p for p in api(env, "GET", "/pools")["pools"]}
    # deferred: counted apart, holding no slot of its pool; nothing runs in dask meanwhile
    assert pools["default_pool"]["deferred_slots"] == 1, pools
    assert pools["default_pool"]["running_slots"] == 0, pools
    assert pools["default_pool"]["occupied_slots"] == 0, pools
    assert pools["dask"]["occupied_slots"] == 0, pools
    time.sleep(3)  # the day lands a few seconds after the run started waiting
    land(env, "2013-01-03", "2013-01-04")

    def finished(run_id: str) -> str | None:
        processes.check_alive()
        state = query_rows(dsn, "SELECT state FROM dag_run WHERE run_id = %s", run_id)[0][0]
        return state if state in ("success", "failed") else None

    assert wait_for("the late run to finish", lambda: finished(late), WAIT_RUN_S,
                    on_timeout=diagnostics, retry_on=RETRY_ON) == "success", diagnostics()
    log = task_log(env, DAG_ID, late, "wait_for_data")
    assert "Missing 1 partition(s) of flights" in log and "2013-01-03" in log, log[-3000:]
    assert "waiting until" in log, log[-3000:]
    events = query_rows(dsn, "SELECT extra FROM asset_event WHERE source_run_id = %s", late)
    assert [e["version"] for (e,) in events] == ["20130104T000000Z_20130101T000000Z"], events
    assert _ti(dsn, late, "wait_for_data") == ("success", 1)

    never = api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                 {"logical_date": None, "conf": NEVER})["dag_run_id"]
    t0 = time.monotonic()
    assert wait_for("the run missing a day to fail", lambda: finished(never), WAIT_RUN_S,
                    on_timeout=diagnostics, retry_on=RETRY_ON) == "failed", diagnostics()
    waited = time.monotonic() - t0
    assert _ti(dsn, never, "wait_for_data") == ("failed", 1), diagnostics()  # no retry
    assert _ti(dsn, never, "build")[0] == "upstream_failed"
    log = task_log(env, DAG_ID, never, "wait_for_data")
    spec = tmp_path / "specs" / "flights" / "spec.yaml"
    line = re.compile(r"1 partition\(s\) of flights not landed by 20\d\d-\d\d-\d\dT[\d:]+\+00:00 "
                      r"\(raw/flights/date=\{date\}/flights\.csv\): 2013-01-04\. Land them and "
                      r"clear this run, or set arrival\.wait in " + re.escape(str(spec))
                      + r" to wait longer\.")
    assert line.search(log), log[-3000:]
    assert waited >= 35, f"gave up after {waited:.0f} s, before the 40 s wait"
    print(f"\nlate day: run waited and published; missing day: failed after {waited:.0f} s")


SHOTS = Path(__file__).resolve().parents[2] / "ui-screenshots" / "late-data"


def test_a_waiting_run_shows_as_deferred_in_the_grid(chromium: Path, tmp_path: Path,
                                                      postgres_db: str, processes) -> None:
    """The operator's view: the run's `wait_for_data` is deferred in the grid (Chromium)."""
    from playwright.sync_api import expect, sync_playwright

    env = start(tmp_path, postgres_db, processes, lambda spec: spec + ARRIVAL.replace(
        "40s", "10m"), ("2013-01-01", "2013-01-03"), {"PIPELINE_ETL_SCHEDULE": "none"})
    dsn = dsn_of(postgres_db)
    run_id = api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                 {"logical_date": None, "conf": LATE})["dag_run_id"]
    wait_for("wait_for_data deferred", lambda: _ti(dsn, run_id, "wait_for_data")[0] == "deferred",
             WAIT_RUN_S, on_timeout=processes.tails, retry_on=RETRY_ON, interval_s=1)
    base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium),
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(f"{base}/dags/{DAG_ID}/runs/{run_id}")
            cell = page.get_by_test_id(f"grid-{run_id}-wait_for_data").get_by_test_id(
                "task-state-badge")
            states = page.get_by_test_id("table-cell-state").get_by_test_id("state-badge")
            table = states.filter(has_text="Deferred")
            expect(table).to_have_count(1, timeout=60_000)  # the task list names the state
            page.screenshot(path=str(SHOTS / "deferred-grid.png"), full_page=True)
            colour = "e => getComputedStyle(e).backgroundColor"
            waiting, deferred = cell.evaluate(colour), table.evaluate(colour)
            queued = page.get_by_test_id(f"grid-{run_id}-build").get_by_test_id(
                "task-state-badge").evaluate(colour)
            # issue 41 item 2: another window's run is not held by the waiting one, and the
            # dataset page says what the waiting run waits for and until when
            other = api(env, "POST", f"/dags/{DAG_ID}/dagRuns",
                        {"logical_date": None, "conf": OTHER})["dag_run_id"]
            wait_for("another window's run to publish while the first waits", lambda: query_rows(
                dsn, "SELECT 1 FROM dag_run WHERE run_id = %s AND state = 'success'", other),
                WAIT_RUN_S, on_timeout=processes.tails, retry_on=RETRY_ON)
            assert _ti(dsn, run_id, "wait_for_data")[0] == "deferred"
            page.goto(f"{base}/plugin/pipeline-datasets/pipeline/datasets/flights")
            frame = page.wait_for_selector("iframe").content_frame()
            rows = frame.locator("tr.run-row")
            expect(rows).to_have_count(2, timeout=60_000)
            shown = [t.replace("\n", "") for t in rows.locator("a.dagrun").all_inner_texts()]
            assert shown == [other, run_id], shown  # the run that started last first
            expect(rows.nth(1)).to_contain_text(re.compile(
                r"wait_for_data deferred: waiting for 1 partition\(s\) \(2013-01-03\) until "
                r"20\d\d-\d\d-\d\d \d\d:\d\d UTC"))
            page.screenshot(path=str(SHOTS / "waiting-dataset-page.png"), full_page=True)
            page.goto(f"{base}/dags/{DAG_ID}/runs/{run_id}")  # back to the waiting run's grid
            land(env, "2013-01-03", "2013-01-04")  # the late day lands: the run goes on
            wait_for("the run to publish", lambda: query_rows(
                dsn, "SELECT 1 FROM dag_run WHERE run_id = %s AND state = 'success'", run_id),
                WAIT_RUN_S, on_timeout=processes.tails, retry_on=RETRY_ON)
            page.reload()
            expect(states.filter(has_text="Success")).to_have_count(3, timeout=60_000)
            page.screenshot(path=str(SHOTS / "published-grid.png"), full_page=True)
            done = cell.evaluate(colour)
        finally:
            browser.close()
    # the grid cell wears the deferred colour (purple), not the colour of a task not started
    assert waiting == deferred and waiting != queued, (waiting, deferred, queued)
    assert done != waiting, done
