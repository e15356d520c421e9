"""An operator's first run, in a real browser against a real Airflow (issue 17's done-means).

A fresh Airflow home and a uniquely named PostgreSQL database; api-server, scheduler
(LocalExecutor) and dag-processor as real processes on loopback, the pipeline_ui plugin loaded,
one shared Dask cluster. Headless Chromium logs in through Airflow's login form, triggers
``etl_flights`` from the trigger form with one changed Param (Interval end, typed as a date as
its help shows), and the test waits for that run to publish, for ``train_flights`` to be started by the Asset event and
finish, and for ``score_flights`` (unpaused, as the README's first UI run says) to publish the
version's predictions. Then every plugin page of the published version is opened from inside the Airflow
UI frame, light and dark, and every link on it fetched; the version page says it is trained
and scored, and its predictions page opens from it. Screenshots go to
``ui-screenshots/operator-first-run/``. ``PIPELINE_ETL_SCHEDULE=none`` keeps the nightly
schedule from adding runs of its own. The specs are the shipped ones, flights' with a small
training budget (one family, 100 rounds): the pages show whatever the model scored. Skips
without PostgreSQL or Chromium, but not under CI=true.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urldefrag, urlsplit

import httpx
import pytest

from tests.integration.airflow_stack import DASK_CLUSTER, airflow_env
from tests.integration.services import free_port, query_rows, wait_for
from tests.support import specs, ui_links

psycopg2 = pytest.importorskip("psycopg2")
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SHOTS = REPO / "ui-screenshots" / "operator-first-run"
USER, PASSWORD = "operator", "operator-pw"
# January 2013 (~27k flights): one day is too little for the model to pass its quality gate.
LAND_DAYS, INTERVAL_END_DAY = ("2013-01-01", "2013-02-01"), "2013-02-01"
RETRY_ON = (OSError, httpx.HTTPError, psycopg2.Error)
WAIT_PARSE_S, WAIT_ETL_S, WAIT_TRAIN_S = 240, 600, 600
def _env(tmp: Path, db_url: str, port: int, dask_port: int) -> dict[str, str]:
    """The shared stack's environment, with a real login (one admin user) and no schedule."""
    (tmp / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    env = airflow_env(tmp, db_url, port, dask_port)
    specs.budgeted(Path(env["PIPELINE_SPECS_PATH"]), {"flights": specs.ONE_FIT})  # shipped ones
    env.update({
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "PIPELINE_ETL_SCHEDULE": "none",
    })
    return env


def _start_airflow(tmp: Path, db_url: str, processes) -> dict[str, str]:
    """Dask, landing and the DB migration side by side, then the three Airflow components."""
    dask_port = free_port()
    env = _env(tmp, db_url, free_port(), dask_port)
    processes.start("dask", [str(BIN / "python"), "-c", DASK_CLUSTER, str(dask_port)], env, REPO)
    land = subprocess.Popen([str(BIN / "python"), "-m", "etl", "land", "--root",
                             env["PIPELINE_STORAGE_ROOT"], "--dataset", "flights", "--start-day",
                             LAND_DAYS[0], "--end-day", LAND_DAYS[1]], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=300, check=False)
    assert migrate.returncode == 0, (migrate.stdout + migrate.stderr)[-3000:]
    for name in ("api-server", "scheduler", "dag-processor"):
        processes.start(name, [str(BIN / "airflow"), name], env, REPO)
    landed, _ = land.communicate(timeout=300)
    assert land.returncode == 0 and "rows" in landed, landed[-3000:]
    return env


class Api:
    """The REST API as the operator (token from the simple auth manager) plus DB reads."""

    def __init__(self, env: dict[str, str], db_url: str) -> None:
        self.base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
        self.dsn = db_url.replace("postgresql+psycopg2://", "postgresql://")

    def token(self) -> str:
        r = httpx.post(f"{self.base}/auth/token", json={"username": USER, "password": PASSWORD})
        assert r.status_code == 201, r.text
        return r.json()["access_token"]

    def call(self, method: str, path: str, body: dict) -> httpx.Response:
        return httpx.request(method, f"{self.base}/api/v2{path}", json=body, timeout=30,
                             headers={"authorization": f"Bearer {self.token()}"})

    def rows(self, sql: str, *args: object) -> list[tuple]:
        return query_rows(self.dsn, sql, *args)

    def runs(self, dag_id: str) -> list[tuple[str, str, str]]:
        return self.rows("SELECT run_id, run_type, state FROM dag_run WHERE dag_id = %s",
                         dag_id)

    def diagnostics(self, processes) -> str:
        tasks = self.rows("SELECT dag_id, run_id, task_id, state FROM task_instance")
        return f"tasks: {tasks}\n{processes.tails()}"


def _finished(api: Api, processes, dag_id: str, run_type: str | None = None) -> str | None:
    processes.check_alive()
    runs = [r for r in api.runs(dag_id) if run_type is None or r[1] == run_type]
    if any(state == "failed" for _, _, state in runs):
        pytest.fail(f"{dag_id} failed: {runs}\n{api.diagnostics(processes)}", pytrace=False)
    done = [run_id for run_id, _, state in runs if state == "success"]
    return done[0] if done else None


def test_operator_triggers_a_run_and_browses_what_it_published(chromium: Path, tmp_path: Path,
                                                                postgres_db: str,
                                                                processes) -> None:
    from playwright.sync_api import expect, sync_playwright

    env = _start_airflow(tmp_path, postgres_db, processes)
    api = Api(env, postgres_db)

    def parsed() -> bool:
        processes.check_alive()
        assert not api.rows("SELECT filename, stacktrace FROM import_error")
        found = {d for (d,) in api.rows("SELECT dag_id FROM serialized_dag")}
        return {"etl_flights", "train_flights"} <= found and \
            httpx.get(f"{api.base}/api/v2/monitor/health", timeout=10).status_code == 200

    wait_for("the DAGs parsed and the api-server up", parsed, WAIT_PARSE_S,
             on_timeout=processes.tails, retry_on=RETRY_ON)
    for pool, slots in (("dask", 2), ("gpu", 1)):  # the pools docs/AIRFLOW.md has set up
        assert api.call("POST", "/pools", {"name": pool, "slots": slots}).status_code == 201
    for dag_id in ("etl_flights", "train_flights", "score_flights"):  # README's step 1
        assert api.call("PATCH", f"/dags/{dag_id}", {"is_paused": False}).status_code == 200
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium),
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            page.set_default_timeout(30_000)
            _log_in_and_trigger(page, api.base, expect)
            wait_for("the triggered ETL run to succeed",
                     lambda: _finished(api, processes, "etl_flights"), WAIT_ETL_S,
                     on_timeout=lambda: api.diagnostics(processes), retry_on=RETRY_ON)
            train_run = wait_for(
                "train_flights started by the Asset event to succeed",
                lambda: _finished(api, processes, "train_flights", "asset_triggered"),
                WAIT_TRAIN_S, on_timeout=lambda: api.diagnostics(processes), retry_on=RETRY_ON)
            version = _check_published(env, train_run)
            wait_for("score_flights to publish the version's predictions",
                     lambda: _scored(env, api, processes, version), WAIT_TRAIN_S,
                     on_timeout=lambda: api.diagnostics(processes), retry_on=RETRY_ON)
            _browse_in_frame(browser, context, api.base, version, expect)
            _predictions_page(browser, context, api.base, version, expect)
            _asset_model_links_its_run(browser, context, api.base, version, train_run, expect)
        finally:
            browser.close()


def _scored(env: dict[str, str], api: Api, processes, version: str) -> bool:
    """The first run's predictions: published by a score run that a publish or the first
    promotion started (the README's first UI run ends with a predictions page)."""
    processes.check_alive()
    if any(state == "failed" for _, _, state in api.runs("score_flights")):
        pytest.fail(f"score_flights failed\n{api.diagnostics(processes)}", pytrace=False)
    root = Path(env["PIPELINE_STORAGE_ROOT"].removeprefix("file://"))
    return bool(list((root / "predictions" / "flights" / version).glob("*/manifest.json")))


def _predictions_page(browser, context, base: str, version: str, expect) -> None:
    """From the version page (its states: trained, scored) to its predictions, in the frame;
    every link on the page resolves."""
    token = next(c["value"] for c in context.cookies() if c["name"] == "_token")
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    ctx.add_cookies([{"name": "_token", "value": token, "url": base}])
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{base}/plugin/pipeline-datasets/pipeline/datasets/flights/versions/{version}")
    frame = page.frame_locator("iframe")
    states = frame.locator(".version-state")
    expect(states.filter(has_text="training: done")).to_have_count(1)
    expect(states.filter(has_text="scoring: done")).to_have_count(1)
    frame.locator("a.predictions-link").first.click()
    page.wait_for_url(re.compile(r"/predictions/[^/]+/[^/]+$"))
    expect(frame.locator("main h1").first).to_contain_text("Predictions")
    _links_resolve(page, ctx, base)
    page.screenshot(path=str(SHOTS / "predictions.png"), full_page=True)
    ctx.close()


def _log_in_and_trigger(page, base: str, expect) -> None:
    """Airflow's own login form, then the trigger form with the interval end set to a day
    that was landed (a manual run's own interval ends now, with no data landed for it)."""
    page.goto(f"{base}/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/dags/etl_flights")
    page.get_by_role("button", name="Trigger").first.click()
    # the trigger form itself: the date picker's popover is a role=dialog element too, and it
    # may still be in the page (closing) when the form is submitted
    dialog = page.locator('[role="dialog"][data-scope="dialog"]')
    expect(dialog.get_by_text("Spec default (shards.compression)")).to_be_visible()
    box = dialog.locator("#element_interval_end")  # a text field: typed as its help shows
    box.fill(INTERVAL_END_DAY)
    box.press("Tab")
    assert box.input_value() == INTERVAL_END_DAY
    page.screenshot(path=str(SHOTS / "01-trigger-form.png"), full_page=True)
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    expect(dialog).to_be_hidden()


def _check_published(env: dict[str, str], train_run: str) -> str:
    """The run's version carries the changed Param; training wrote its metrics beside it,
    naming the asset-triggered run that trained it (its id ends with Airflow's random
    suffix)."""
    root = Path(env["PIPELINE_STORAGE_ROOT"].removeprefix("file://"))
    # the flights spec sets incremental: true: one version, composed of the days' segments
    version, segments = sorted(p.name for p in (root / "datasets" / "flights").iterdir()
                               if p.is_dir())
    manifest = json.loads((root / "datasets" / "flights" / version / "manifest.json").read_text())
    assert segments == "segments" and manifest["layout"] == "segments", (segments, manifest)
    assert manifest["data_interval"]["end"].startswith(INTERVAL_END_DAY), manifest
    assert version.startswith(INTERVAL_END_DAY.replace("-", "")), version
    assert manifest["run_id"].startswith("manual__")
    [metrics] = (root / "models" / "flights" / version).glob("*/metrics.json")
    stored = json.loads(metrics.read_text())
    assert (stored["dag_id"], stored["run_id"]) == ("train_flights", train_run), stored
    assert stored["family"] == "trees", stored["family_choice"]  # the spec's training budget
    assert train_run.startswith("asset_triggered__"), train_run
    return version


def _browse_in_frame(browser, context, base: str, version: str, expect) -> None:
    """Each plugin page from the Airflow nav entry, light and dark; every link must resolve."""
    token = next(c["value"] for c in context.cookies() if c["name"] == "_token")
    for mode in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        ctx.add_cookies([{"name": "_token", "value": token, "url": base}])
        ctx.add_init_script(f"localStorage.setItem('theme', '{mode}')")
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/")
        page.get_by_role("link", name="Datasets").first.click()
        frame = page.frame_locator("iframe")
        v = re.escape(version)
        # (page, link to click next, where the Airflow page's URL then says the frame is)
        steps = [("datasets", "flights", r"/pipeline/datasets/flights$"),
                 ("dataset", version, rf"/versions/{v}$"),
                 ("version", "every check", rf"/versions/{v}/validation$"),
                 ("validation", "Back to the version", rf"/versions/{v}#validation$"),
                 ("version-again", None, None)]
        page.wait_for_url(re.compile(r"/plugin/pipeline-datasets(/pipeline/)?$"))
        for name, link, lands_on in steps:
            expect(frame.locator("main h1").first).to_be_visible()
            expect(frame.locator("html")).to_have_attribute("data-theme", mode)
            _links_resolve(page, ctx, base)
            page.screenshot(path=str(SHOTS / f"{mode}-{name}.png"), full_page=True)
            if link:
                frame.get_by_role("link", name=link).first.click()
                page.wait_for_url(re.compile(lands_on))
        frame.locator("a.model-link").first.click()
        page.wait_for_url(re.compile(r"/models/[^/]+$"))
        expect(frame.locator("#metric-table")).to_be_visible()
        _links_resolve(page, ctx, base)
        page.screenshot(path=str(SHOTS / f"{mode}-model.png"), full_page=True)
        ctx.close()


def _asset_model_links_its_run(browser, context, base: str, version: str, run_id: str,
                               expect) -> None:
    """Issue 34 item 3 on the production path: the model trained by the Asset-triggered run
    names that run and links it, at 1280 and 1024 px, light and dark; the link opens the run
    in Airflow's own UI."""
    token = next(c["value"] for c in context.cookies() if c["name"] == "_token")
    run_href = f"/dags/train_flights/runs/{quote(run_id, safe='')}"
    for width, mode in itertools.product((1280, 1024), ("light", "dark")):
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        ctx.add_cookies([{"name": "_token", "value": token, "url": base}])
        ctx.add_init_script(f"localStorage.setItem('theme', '{mode}')")
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/plugin/pipeline-datasets/pipeline/datasets/flights/versions/{version}")
        frame = page.frame_locator("iframe")
        frame.locator("a.model-link").first.click()
        page.wait_for_url(re.compile(r"/models/[^/]+$"))
        expect(frame.locator("main > h1")).to_contain_text(run_id)
        expect(frame.locator("a.dagrun")).to_have_attribute("href", run_href)
        _links_resolve(page, ctx, base)
        page.screenshot(path=str(SHOTS / f"asset-model-{width}-{mode}.png"), full_page=True)
        frame.locator("a.dagrun").click()
        page.wait_for_url(re.compile(re.escape(run_href)))
        expect(page.get_by_text(run_id).first).to_be_visible()
        ctx.close()


def _links_resolve(page, ctx, base: str) -> None:
    frame = next(f for f in page.frames if f != page.main_frame)
    ui_links.settle(page, frame, frame.url)  # Airflow will not move it while its links are read
    refs = frame.eval_on_selector_all(
        "a[href], img[src], link[href], script[src]",
        "els => els.map(e => e.getAttribute('href') === null ? e.src : e.href)")
    for ref in {urldefrag(r)[0] for r in refs}:
        parts = urlsplit(ref)
        assert f"{parts.scheme}://{parts.netloc}" == base, ref
        status = ctx.request.get(ref).status
        assert status < 400, (frame.url, ref, status)
