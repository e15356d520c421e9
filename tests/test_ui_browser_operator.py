"""What an operator meets after the demo, in Chromium at 1280 and 1024 px, light and dark (issue 29).

A real ``airflow api-server`` (tests/test_ui_browser.py) over a version the real ETL published,
with a model run stored the way the training DAG stores one (folder named after the Airflow
run id, multi-class, hyperparameters with "auto" sentinels, intervals, a card that lists the
hyperparameters too). A small DAG runs through the demo's own ``dag_test`` (scripts/demo.py)
against the server's metadata DB, so the run's duration and its task log in the Airflow UI
are what the demo leaves. Checked, each in the Airflow frame at both widths and both modes:

1. the demo run's task log opens in the Airflow UI;  2. its duration is real (not years);
3. no page is wider than the frame;  4. a page past the last is a 404 page, no "previous";
5. unknown dataset / version / path and a bad page number get the plugin's page naming the
   problem; a browser with an invalid token is sent to the login;
6. model page: run id as title, link to the training DAG run, hyperparameters once, class
   names, sentinels spelled out, test intervals;  7. validation: observed values formatted,
   rules in words, no empty Observed, no empty schema column;  8. plots dimmed in dark mode.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import ui_fixtures as uf
import ui_links
from test_ui_browser import (  # noqa: F401 - fixtures used by name
    CHROMIUM_ARGS,
    REPO,
    UI_TIMEOUT_MS,
    Server,
    Store,
    airflow,
    chromium,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]
SHOTS = REPO / "ui-screenshots" / "operator"
WIDTHS = (1280, 1024)
RUN_ID = "manual__2013-01-02T06:00:00.123456+00:00"
RUN_FOLDER = "manual__2013-01-02T06_00_00.123456_00_00"  # dags/flightpipe_dags/options.run_name
CLASSES = [f"class_{i}" for i in range(10)]
DEMO_DAG = '''
import logging
import pendulum
from airflow.sdk import dag, task

@dag(dag_id="ui_demo_logs", schedule=None, start_date=pendulum.datetime(2013, 1, 1, tz="UTC"))
def ui_demo_logs():
    @task
    def hello():
        logging.getLogger("demo").info("hello from the demo task")
    hello()

ui_demo_logs()
'''


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root, version = uf.real_etl_root(tmp_path_factory)
    card = "\n## Hyperparameters\n\n| name | value |\n| --- | --- |\n| `epochs` | `10` |\n"
    rdir = uf.add_model_run(root, uf.DATASET, version, RUN_FOLDER, card_extra=card)
    metrics = json.loads((rdir / "metrics.json").read_text())
    metrics.update(classes=CLASSES, hyperparameters={
        "epochs": 10, "devices": [], "step_budget": None,
        "input": {"batch_size": 256, "cycle_length": -1, "prefetch": -1}})
    (rdir / "metrics.json").write_text(json.dumps(metrics))
    return Store(root, version, [RUN_FOLDER], "")


def _demo_run(server: Server, tmp: Path) -> dict:
    """The demo's ``dags test`` of a small DAG against the server's DB; its run as the API has it."""
    sys.path.insert(0, str(REPO / "scripts"))
    import demo

    Path(server.env["AIRFLOW__CORE__DAGS_FOLDER"], "ui_demo_logs.py").write_text(DEMO_DAG)
    demo.dag_test("small DAG", "ui_demo_logs", {}, server.env, tmp / "demo.log")
    runs = httpx.get(f"{server.base}/api/v2/dags/ui_demo_logs/dagRuns",
                     headers={"authorization": f"Bearer {server.token()}"}).json()["dag_runs"]
    assert len(runs) == 1, runs
    return runs[0]


def test_demo_run_has_its_task_log_and_a_real_duration(airflow: Server, chromium: Path,  # noqa: F811
                                                        tmp_path: Path) -> None:
    """Items 1 and 2: what the demo's ``dags test`` leaves, seen in the Airflow UI."""
    from playwright.sync_api import expect, sync_playwright

    started = datetime.now().astimezone()
    run = _demo_run(airflow, tmp_path)
    start, end = (datetime.fromisoformat(run[k]) for k in ("start_date", "end_date"))
    assert started - timedelta(minutes=1) <= start <= end <= datetime.now().astimezone(), run
    assert end - start < timedelta(minutes=5), run  # "4710 days" when start = logical date
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = _context(browser, airflow, WIDTHS[0]).new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{airflow.base}/dags/ui_demo_logs/runs/{quote(run['dag_run_id'], safe='')}"
                      "/tasks/hello")
            expect(page.get_by_text("hello from the demo task").first).to_be_visible()
            page.screenshot(path=str(SHOTS / "demo-task-log.png"), full_page=True)
        finally:
            browser.close()


def _context(browser, server: Server, width: int, **options):
    context = browser.new_context(viewport={"width": width, "height": 900}, **options)
    context.add_cookies([{"name": "_token", "value": server.token(), "url": server.base}])
    return context


def _pages(store: Store) -> dict[str, str]:
    v = f"/pipeline/datasets/{uf.DATASET}/versions/{store.version}"
    return {"dataset": f"/pipeline/datasets/{uf.DATASET}", "version": v,
            "validation": f"{v}/validation", "model": f"{v}/models/{RUN_FOLDER}"}


def _fits(frame) -> None:
    """Item 3: nothing wider than the frame (a cut-off column is a horizontal overflow)."""
    wide = frame.evaluate("[document.documentElement.scrollWidth, "
                          "document.documentElement.clientWidth]")
    assert wide[0] <= wide[1], (frame.url, wide)


def _model_page(frame, expect) -> None:
    """Item 6, and the intervals of issue 27."""
    expect(frame.locator("main > h1")).to_contain_text(RUN_ID)
    link = frame.locator("a.dagrun")
    expect(link).to_have_attribute("href", f"/dags/train_{uf.DATASET}/runs/{quote(RUN_ID, safe='')}")
    expect(frame.get_by_role("heading", name="Hyperparameters", exact=True)).to_have_count(1)
    facts = dict(zip(frame.locator("#run-facts dt").all_inner_texts(),
                     frame.locator("#run-facts dd").all_inner_texts()))
    assert facts.get("Classes") == ", ".join(CLASSES), facts
    params = dict(zip(frame.locator("#hyperparameter-list dt").all_inner_texts(),
                      frame.locator("#hyperparameter-list dd").all_inner_texts()))
    assert params["Input › Cycle length"] == "auto" and params["Devices"] == "all visible", params
    assert params["Step budget"] == "auto", params
    auc = frame.locator("tr.metric-row", has_text="AUC").first.locator("td").all_inner_texts()
    assert re.fullmatch(r"\d\.\d+ – \d\.\d+", auc[-2]), auc


def _validation_page(frame) -> None:
    """Item 7: observed values as numbers read, rules in words, no empty Observed."""
    rules = frame.locator("tr.check-row td:nth-child(4)").all_inner_texts()
    observed = frame.locator("tr.check-row td:nth-child(5)").all_inner_texts()
    assert observed and all(o.strip() for o in observed), observed
    assert not [o for o in observed if re.search(r"\d\.\d{5,}", o)], observed  # 4 digits
    assert not [r for r in rules if '"' in r], rules  # JSON quotes keys and strings


def _version_page(frame) -> None:
    """Item 7: every column of the schema table says something in some row."""
    empty = frame.evaluate("""() => {
        const t = document.querySelector('#features');
        return [...t.tHead.rows[0].cells].map((th, i) => [th.innerText, [...t.tBodies[0].rows]
          .some(r => r.cells[i] && r.cells[i].innerText.trim())]).filter(c => !c[1]); }""")
    assert not empty, empty


def _plots(frame, mode: str) -> None:
    """Item 8: white plots are dimmed and inverted in dark mode, as drawn in light mode."""
    filters = [img.evaluate("i => getComputedStyle(i).filter")
               for img in frame.locator("figure.plot img").all()]
    assert filters, "no plots on the model page"
    assert all(("invert" in f) == (mode == "dark") for f in filters), (mode, filters)


def _errors(page, base: str, store: Store, expect) -> None:
    """Items 4 and 5 at top level: each answer is the plugin's page naming the problem."""
    v = _pages(store)["version"]
    cases = [(f"{v}?page=99", 404, "there is no page 99"),
             ("/pipeline/datasets/nosuch", 404, "dataset 'nosuch' does not exist"),
             (f"/pipeline/datasets/nosuch/versions/{store.version}", 404,
              "dataset 'nosuch' does not exist"),
             (f"/pipeline/datasets/{uf.DATASET}/versions/20990101T000000Z_all", 404,
              "has no version '20990101T000000Z_all'"),
             (f"{v}?page=0", 400, "page must be a whole number, 1 or more"),
             ("/pipeline/no/such/page", 404, "there is no page at /pipeline/no/such/page")]
    for path, status, text in cases:
        response = page.goto(base + path)
        assert response is not None and response.status == status, (path, response and response.status)
        expect(page.locator("p.error-message")).to_contain_text(text)
        expect(page.locator("a[rel=prev]")).to_have_count(0)
        assert "∞" not in page.content() and "manifest.json" not in page.inner_text("main"), path


def _bad_token_goes_to_login(browser, server: Server) -> None:
    context = browser.new_context()
    context.add_cookies([{"name": "_token", "value": "not-a-jwt", "url": server.base}])
    page = context.new_page()
    page.goto(f"{server.base}/pipeline/")
    page.wait_for_url(re.compile(r"/auth/login|/login"), timeout=UI_TIMEOUT_MS)
    context.close()


def test_operator_pages_at_1280_and_1024_light_and_dark(airflow: Server, chromium: Path,  # noqa: F811
                                                        storage: Store) -> None:
    """Items 3-8 in the Airflow frame at both widths and in both colour modes."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    checks = {"dataset": lambda f, m: None, "version": lambda f, m: _version_page(f),
              "validation": lambda f, m: _validation_page(f),
              "model": lambda f, m: (_model_page(f, expect), _plots(f, m))}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            for width in WIDTHS:
                for mode in ("light", "dark"):
                    context = _context(browser, airflow, width)
                    context.add_init_script(f"localStorage.setItem('theme', '{mode}')")
                    page = context.new_page()
                    page.set_default_timeout(UI_TIMEOUT_MS)
                    open_page = ui_links.in_airflow_frame(page, airflow.base, expect)
                    for name, path in _pages(storage).items():
                        page.goto("about:blank")
                        frame = open_page(path)
                        expect(frame.locator("html")).to_have_attribute("data-theme", mode)
                        time.sleep(0.2)  # images laid out before measuring
                        _fits(frame)
                        checks[name](frame, mode)
                        page.screenshot(path=str(SHOTS / f"{width}-{mode}-{name}.png"))
                    _errors(page, airflow.base, storage, expect)
                    context.close()
            _bad_token_goes_to_login(browser, airflow)
        finally:
            browser.close()
