"""The README's first UI run, from a fresh demo state, in a real browser (issues 17 and 51).

A fresh Airflow home and storage root are filled by ``scripts/demo.py`` (what ``make demo``
runs, for flights alone: landed, published and trained through ``airflow dags test``; the
shipped specs with small training budgets, so the models take seconds). Then the UI is started
by docs/AIRFLOW.md's standalone block as written (what ``make standalone`` runs: SQLite,
LocalExecutor) and headless Chromium follows the README's steps literally: log in as the admin
whose password standalone generated, unpause ``train_flights`` and ``score_flights`` by their
toggles in the DAG list, trigger ``etl_flights`` from its form with ``interval_end``
2014-01-01 and ``window_days`` 7, "Unpause" left ticked. The test waits for the version the
README names, the Asset-triggered training and the scoring of that version; then every plugin
page of it is opened inside the Airflow UI frame, light and dark, every link fetched; the
version page says it is trained and scored and its predictions page opens from it; the model
names and links the run that trained it. Last, the weather feed is cut before 2014-01-01 and
that day is triggered from the form: the run fails in ``build`` in one try, and the dataset
page lists the version as not published, its validation page opening from it with the
failures in words. Screenshots: ``ui-screenshots/operator-first-run/``.
Skips without Chromium, but not under CI=true.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urldefrag, urlsplit

import httpx
import pytest

from tests.integration.airflow_stack import standalone_block
from tests.integration.services import api_server_env, free_port, wait_for
from tests.support import failed_validation, specs, ui_links

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SHOTS = REPO / "ui-screenshots" / "operator-first-run"
USER = "admin"  # the one user ``airflow standalone`` creates
# README "The first UI run", step 2, and the version step 3 says it publishes
INTERVAL_END_DAY, WINDOW_DAYS = "2014-01-01", "7"
VERSION = "20140101T000000Z_20131225T000000Z"
# a day past the demo's window whose joined weather is cut (the feed stopped the day before)
FAILING_END, FAILING_DAYS = "2014-01-02", "1"
FAILING_VERSION = "20140102T000000Z_20140101T000000Z"
WEATHER_ENDS_BEFORE = "2014-01-01"
RETRY_ON = (OSError, httpx.HTTPError, KeyError, ValueError)
DEMO_S, WAIT_UP_S, WAIT_ETL_S, WAIT_TRAIN_S = 900, 300, 600, 600
COMPONENTS = ("scheduler", "dag_processor", "triggerer")


def _demo(tmp: Path) -> dict[str, str]:
    """``scripts/demo.py`` into a fresh home and storage root; the shell's environment for
    what follows (a fresh clone's: no Airflow settings, the venv not on PATH)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "PIPELINE_", "STORAGE_EMULATOR"))
           and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(REPO)))
    budgets = {"flights": specs.ONE_FIT}
    env.update(AIRFLOW_HOME=str(tmp / "home"), PIPELINE_STORAGE_ROOT=(tmp / "data").as_uri(),
               PIPELINE_SPECS_PATH=str(specs.budgeted(tmp / "specs", budgets)),
               DEMO_LOG=str(tmp / "demo.log"), AIRFLOW__CORE__PARALLELISM="4")
    demo = subprocess.run([str(BIN / "python"), "scripts/demo.py", "flights"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=DEMO_S, check=False)
    assert demo.returncode == 0, (demo.stdout + demo.stderr)[-4000:]
    assert "unpause train_flights and score_flights" in demo.stdout, demo.stdout[-2000:]
    return env


class Api:
    """The REST API as the admin standalone created (its generated password)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
        self.home = Path(env["AIRFLOW_HOME"])

    def password(self) -> str:
        generated = self.home / "simple_auth_manager_passwords.json.generated"
        return json.loads(generated.read_text())[USER]

    def get(self, path: str) -> dict:
        token = httpx.post(f"{self.base}/auth/token",
                           json={"username": USER, "password": self.password()}, timeout=30)
        token.raise_for_status()
        r = httpx.get(f"{self.base}/api/v2{path}", timeout=30,
                      headers={"authorization": f"Bearer {token.json()['access_token']}"})
        r.raise_for_status()
        return r.json()

    def runs(self, dag_id: str) -> list[dict]:
        return self.get(f"/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]

    def diagnostics(self, processes) -> str:
        try:
            runs = {d: [(r["dag_run_id"], r["state"]) for r in self.runs(d)]
                    for d in ("etl_flights", "train_flights", "score_flights")}
        except RETRY_ON as exc:
            runs = repr(exc)
        return f"runs: {runs}\n{processes.tails()}"


def _up(api: Api, processes) -> bool:
    """Every component healthy and the three flights DAGs parsed without import errors."""
    processes.check_alive()
    health = httpx.get(f"{api.base}/api/v2/monitor/health", timeout=10).json()
    if not all((health.get(c) or {}).get("status") == "healthy" for c in COMPONENTS):
        return False
    assert api.get("/importErrors")["total_entries"] == 0, api.get("/importErrors")
    dags = {d["dag_id"]: d for d in api.get("/dags?dag_id_pattern=flights")["dags"]}
    return {"etl_flights", "train_flights", "score_flights"} <= set(dags)


def _finished(api: Api, processes, dag_id: str, run_type: str) -> str | None:
    processes.check_alive()
    runs = [r for r in api.runs(dag_id) if r["run_type"] == run_type]
    if any(r["state"] == "failed" for r in runs):
        pytest.fail(f"{dag_id} failed: {runs}\n{api.diagnostics(processes)}", pytrace=False)
    done = [r["dag_run_id"] for r in runs if r["state"] == "success"]
    return done[0] if done else None


def test_readme_first_ui_run_from_the_demo(chromium: Path, tmp_path: Path, processes) -> None:
    from playwright.sync_api import expect, sync_playwright

    env = _demo(tmp_path)
    env.update(api_server_env(free_port()))
    processes.start("standalone", ["bash", "-euo", "pipefail", "-c", standalone_block()], env,
                    REPO)
    api = Api(env)
    wait_for("airflow standalone up, the DAGs parsed", lambda: _up(api, processes), WAIT_UP_S,
             on_timeout=processes.tails, interval_s=3.0, retry_on=RETRY_ON)
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium),
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            page.set_default_timeout(30_000)
            _log_in(page, api, expect)
            _unpause_by_toggles(page, api, expect)
            _trigger(page, api.base, expect, INTERVAL_END_DAY, WINDOW_DAYS, "01-trigger-form")
            wait_for("the triggered ETL run to succeed",
                     lambda: _finished(api, processes, "etl_flights", "manual"), WAIT_ETL_S,
                     on_timeout=lambda: api.diagnostics(processes), retry_on=RETRY_ON)
            train_run = wait_for(
                "train_flights started by the Asset event to succeed",
                lambda: _finished(api, processes, "train_flights", "asset_triggered"),
                WAIT_TRAIN_S, on_timeout=lambda: api.diagnostics(processes), retry_on=RETRY_ON)
            _check_published(env, train_run)
            wait_for("score_flights to publish the version's predictions",
                     lambda: _scored(env, api, processes), WAIT_TRAIN_S,
                     on_timeout=lambda: api.diagnostics(processes), retry_on=RETRY_ON)
            _browse_in_frame(browser, context, api.base, VERSION, expect)
            _predictions_page(browser, context, api.base, VERSION, expect)
            _asset_model_links_its_run(browser, context, api.base, VERSION, train_run, expect)
            _failed_validation(page, api, env, processes, expect)
        finally:
            browser.close()


def _log_in(page, api: Api, expect) -> None:
    """Airflow's own login form, with the password ``airflow standalone`` generated."""
    page.goto(f"{api.base}/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(api.password())
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{api.base}/")


def _unpause_by_toggles(page, api: Api, expect) -> None:
    """README step 1: the two consumers' toggles in the DAG list (a card per DAG)."""
    page.goto(f"{api.base}/dags")
    for dag_id in ("train_flights", "score_flights"):
        # the list renders its cards after its translations and DAGs have loaded
        expect(page.get_by_role("link", name=dag_id, exact=True)).to_be_visible(timeout=60_000)
        card = page.locator("div").filter(
            has=page.get_by_role("link", name=dag_id, exact=True)).filter(
            has=page.get_by_role("checkbox")).last  # the innermost: the DAG's own card
        expect(card.get_by_role("checkbox")).not_to_be_checked()
        card.locator('[data-scope="switch"][data-part="control"]').click()
        expect(card.get_by_role("checkbox")).to_be_checked(timeout=30_000)
        wait_for(f"{dag_id} unpaused", lambda d=dag_id: not api.get(f"/dags/{d}")["is_paused"],
                 30, retry_on=RETRY_ON)
    page.screenshot(path=str(SHOTS / "00-dag-list.png"), full_page=True)


def _trigger(page, base: str, expect, end: str, days_back: str, shot: str,
             paused: bool = True) -> None:
    """README step 2: the trigger form, interval_end and window_days set, Unpause ticked (the
    form offers it while the DAG is paused)."""
    page.goto(f"{base}/dags/etl_flights")
    trigger = page.get_by_role("button", name="Trigger").first
    expect(trigger).to_be_visible(timeout=90_000)  # the page renders once its data loaded
    trigger.click()
    # the trigger form itself: the date picker's popover is a role=dialog element too, and it
    # may still be in the page (closing) when the form is submitted
    dialog = page.locator('[role="dialog"][data-scope="dialog"]')
    expect(dialog.get_by_text("Spec default (shards.compression)")).to_be_visible()
    box = dialog.locator("#element_interval_end")  # a text field: typed as its help shows
    box.fill(end)
    box.press("Tab")
    assert box.input_value() == end
    days = dialog.get_by_label("Window (days)")  # a number field
    days.fill(days_back)
    days.press("Tab")
    expect(days).to_have_value(days_back)
    unpause = dialog.get_by_role("checkbox", name="Unpause etl_flights on trigger")
    expect(unpause).to_be_checked() if paused else expect(unpause).to_have_count(0)
    page.screenshot(path=str(SHOTS / f"{shot}.png"), full_page=True)
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    expect(dialog).to_be_hidden(timeout=60_000)  # the run is created first: seconds when busy


def _check_published(env: dict[str, str], train_run: str) -> None:
    """The README's version beside the demo's; training wrote its metrics beside it, naming
    the Asset-triggered run that trained it (its id ends with Airflow's random suffix)."""
    root = Path(env["PIPELINE_STORAGE_ROOT"].removeprefix("file://"))
    versions = {p.name for p in (root / "datasets" / "flights").iterdir()
                if p.is_dir() and p.name != "segments"}
    assert versions == {"20140101T000000Z_all", VERSION}, versions
    manifest = json.loads((root / "datasets" / "flights" / VERSION / "manifest.json").read_text())
    assert manifest["run_id"].startswith("manual__"), manifest["run_id"]
    [metrics] = (root / "models" / "flights" / VERSION).glob("*/metrics.json")
    stored = json.loads(metrics.read_text())
    assert (stored["dag_id"], stored["run_id"]) == ("train_flights", train_run), stored
    assert train_run.startswith("asset_triggered__"), train_run


def _scored(env: dict[str, str], api: Api, processes) -> bool:
    """The version's predictions: published by a score run that the publish (or the
    training's promotion) started."""
    processes.check_alive()
    if any(r["state"] == "failed" for r in api.runs("score_flights")):
        pytest.fail(f"score_flights failed\n{api.diagnostics(processes)}", pytrace=False)
    root = Path(env["PIPELINE_STORAGE_ROOT"].removeprefix("file://"))
    return bool(list((root / "predictions" / "flights" / VERSION).glob("*/manifest.json")))


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


def _failed_run(api: Api, processes) -> str | None:
    """The failing window's manual run once it has failed (none of the others may)."""
    processes.check_alive()
    runs = [r for r in api.runs("etl_flights") if r["run_type"] == "manual"]
    failed = [r["dag_run_id"] for r in runs if r["state"] == "failed"]
    return failed[0] if failed else None


def _failed_validation(page, api: Api, env: dict[str, str], processes, expect) -> None:
    """README's failure walk: a window whose joined weather is missing fails in ``build`` in
    one try (a deterministic failure is not retried); the dataset page, inside the frame,
    lists it as not published and opens its validation page, the failures in words."""
    root = Path(env["PIPELINE_STORAGE_ROOT"].removeprefix("file://"))
    failed_validation.truncate_weather(root, WEATHER_ENDS_BEFORE)
    _trigger(page, api.base, expect, FAILING_END, FAILING_DAYS, "02-trigger-failing-window",
             paused=False)
    run_id = wait_for("the failing window's run to fail", lambda: _failed_run(api, processes),
                      WAIT_ETL_S, on_timeout=lambda: api.diagnostics(processes),
                      retry_on=RETRY_ON)
    tis = api.get(f"/dags/etl_flights/dagRuns/{quote(run_id, safe='')}/taskInstances")
    build = next(t for t in tis["task_instances"] if t["task_id"] == "build")
    assert (build["state"], build["try_number"]) == ("failed", 1), build
    page.goto(f"{api.base}/plugin/pipeline-datasets/pipeline/datasets/flights")
    frame = page.frame_locator("iframe")
    row = frame.locator("tr.unpublished-row", has_text=FAILING_VERSION)
    expect(row).to_have_count(1, timeout=30_000)
    expect(row.locator(".badge.not-published")).to_be_visible()
    row.locator("a.validation-link").click()
    page.wait_for_url(re.compile(rf"/versions/{FAILING_VERSION}/validation$"))
    expect(frame.locator("h1 .badge.not-published")).to_have_text("not published")
    expect(frame.locator("li.failure").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "failed-validation.png"), full_page=True)
