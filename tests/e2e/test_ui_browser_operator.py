"""What an operator meets after the demo, in Chromium at 1280 and 1024 px, light and dark (issue 29).

A real ``airflow api-server`` (tests/e2e/test_ui_browser.py) over a version the real ETL published,
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
import shutil
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from etl.kinds.landing import LandOptions
from tests.e2e.test_ui_browser import (  # noqa: F401 - fixtures used by name
    CHROMIUM_ARGS,
    REPO,
    UI_TIMEOUT_MS,
    Server,
    Store,
    airflow,
    chromium,
)
from tests.support import ui_fixtures as uf
from tests.support import ui_links

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
    # the innermost elements past the right edge, named, so that a failure says what is wide
    past = frame.evaluate("""() => { const w = document.documentElement.clientWidth;
        return [...document.querySelectorAll('body *')].filter(e =>
            e.getBoundingClientRect().right > w + 1 && ![...e.children].some(c =>
                c.getBoundingClientRect().right > w + 1)).slice(0, 5).map(e =>
            `${e.tagName.toLowerCase()}.${e.className} ${Math.round(e.getBoundingClientRect().width)}px: `
            + e.textContent.trim().slice(0, 80)); }""")
    assert wide[0] <= wide[1], (frame.url, wide, past)


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
                        _unbroken(frame)
                        checks[name](frame, mode)
                        page.screenshot(path=str(SHOTS / f"{width}-{mode}-{name}.png"))
                    _errors(page, airflow.base, storage, expect)
                    context.close()
            _bad_token_goes_to_login(browser, airflow)
        finally:
            browser.close()


# ---- issue 34: the operator's day: a first UI run that publishes, links both ways -----------

# The README's "first UI run" Params (README.md, "The first UI run"): the last week of 2013.
FIRST_RUN = {"interval_end": "2014-01-01", "window_days": 7}
FIRST_VERSION = "20140101T000000Z_20131225T000000Z"
REFUSED_DATE, FIRST_RUN_DATE = "2026-11-24", "2026-11-25"  # logical dates: refused one first
ASSET_RUN_ID = "asset_triggered__2026-11-25T07:00:00.123456+00:00_Xy12AbCd"
ASSET_RUN_FOLDER = "asset_triggered__2026-11-25T07_00_00.123456_00_00_Xy12AbCd"  # run_name

# Text tokens split across lines: a figure or a word broken mid-token (URIs, hashes and ids,
# which may wrap, are marked .uri/.hash/.id; a model card's code spans hold URIs too).
BROKEN_TOKENS_JS = """() => {
  const bad = [], walker = document.createTreeWalker(document.querySelector('main'),
                                                      NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('.uri, .hash, .id, pre, article.card code')) continue;
    for (const m of n.data.matchAll(/\\S+/g)) {
      const r = document.createRange();
      r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter(x => x.width > 0)
                               .map(x => Math.round(x.top)));
      if (tops.size > 1) bad.push(m[0]);
    }
  }
  return bad.slice(0, 20);
}"""


def _unbroken(frame) -> None:
    """Item 6: no number or word split across two lines."""
    broken = frame.evaluate(BROKEN_TOKENS_JS)
    assert not broken, (frame.url, broken)


def _airflow(server: Server, args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    """An ``airflow`` command against the server's metadata DB, with the repo's DAGs."""
    env = {**server.env, "PYTHONPATH": str(REPO)}
    out = subprocess.run([str(Path(sys.executable).parent / "airflow"), *args], env=env,
                         cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    (tmp / "airflow.log").open("a").write(f"$ airflow {' '.join(args)}\n{out.stdout}{out.stderr}")
    return out


def _api(server: Server, path: str) -> dict:
    r = httpx.get(f"{server.base}/api/v2{path}", timeout=30,
                  headers={"authorization": f"Bearer {server.token()}"})
    assert r.status_code == 200, (path, r.text)
    return r.json()


def _runs(server: Server, dag_id: str) -> list[dict]:
    return _api(server, f"/dags/{dag_id}/dagRuns?order_by=run_after")["dag_runs"]


def _task(server: Server, dag_id: str, run_id: str, task_id: str) -> dict:
    return _api(server, f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                        f"{task_id}")


def _links(server: Server, dag_id: str, run_id: str, task_id: str) -> dict:
    return _api(server, f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                        f"{task_id}/links")["extra_links"]


def _day_of_runs(server: Server, tmp: Path) -> dict[str, str]:
    """A refused nightly run, then the README's first UI run, then a training run: through
    ``airflow dags test`` on the server's DB (no scheduler). Returns the pages they link."""
    from etl import pipeline

    dags = Path(server.env["AIRFLOW__CORE__DAGS_FOLDER"])
    for name in ("dataset_etl.py", "dataset_training.py", "dataset_scoring.py", "flightpipe_dags",
                 ".airflowignore"):
        if (REPO / "dags" / name).exists() and not (dags / name).exists():
            (dags / name).symlink_to(REPO / "dags" / name)
    root = server.env["PIPELINE_STORAGE_ROOT"]
    pipeline.land(root, uf.DATASET, LandOptions(start=date(2013, 12, 25), end=date(2014, 1, 1)))
    assert _airflow(server, ["dags", "reserialize"], tmp).returncode == 0, \
        (tmp / "airflow.log").read_text()[-3000:]
    # The nightly run of today over 2013's data: refused at once, no 6-hour wait.
    t0 = time.monotonic()
    refused = _airflow(server, ["dags", "test", "etl_flights", REFUSED_DATE], tmp)
    assert refused.returncode != 0 and time.monotonic() - t0 < 300, refused.stdout[-3000:]
    first = _airflow(server, ["dags", "test", "etl_flights", FIRST_RUN_DATE, "--conf",
                              json.dumps(FIRST_RUN)], tmp)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    etl_runs = _runs(server, "etl_flights")
    assert [r["state"] for r in etl_runs] == ["failed", "success"], etl_runs
    refused_id, first_id = (r["dag_run_id"] for r in etl_runs)
    wait = _task(server, "etl_flights", refused_id, "wait_for_data")
    assert (wait["state"], wait["try_number"]) == ("failed", 1), wait
    # the refused night does not hold the next run's publish (no depends_on_past)
    assert _task(server, "etl_flights", first_id, "publish")["state"] == "success"
    version_url = _links(server, "etl_flights", first_id, "publish")["Version page"]
    assert version_url == (f"{server.base}/plugin/pipeline-datasets/pipeline/datasets/"
                           f"{uf.DATASET}/versions/{FIRST_VERSION}"), version_url
    events = _api(server, "/assets/events?source_dag_id=etl_flights")["asset_events"]
    assert [e["extra"]["version_page"] for e in events] == [version_url], events
    assert events[0]["extra"]["verdict"] in ("passed", "passed_with_quarantine"), events

    trained = _airflow(server, ["dags", "test", "train_flights", "--conf", json.dumps(
        {"version": FIRST_VERSION, "min_margin": 0})], tmp)
    assert trained.returncode == 0, (trained.stdout + trained.stderr)[-4000:]
    [train_run] = _runs(server, "train_flights")
    train_id = train_run["dag_run_id"]
    model_url = _links(server, "train_flights", train_id, "train")["Model page"]
    assert f"/versions/{FIRST_VERSION}/models/" in model_url, model_url
    # training stored the run that trained it; an asset-triggered run's model is the same but
    # for its id, which ends with Airflow's random suffix (no scheduler here to create one)
    models = Path(root.removeprefix("file://")) / "models" / uf.DATASET / FIRST_VERSION
    [trained] = [d for d in models.iterdir() if d.is_dir()]
    stored = json.loads((trained / "metrics.json").read_text())
    assert (stored["dag_id"], stored["run_id"]) == ("train_flights", train_id), stored
    # the blessed model scores the version (issue 41): its run's button opens the predictions
    scored = _airflow(server, ["dags", "test", "score_flights", "--conf", json.dumps(
        {"version": FIRST_VERSION})], tmp)
    assert scored.returncode == 0, (scored.stdout + scored.stderr)[-4000:]
    [score_run] = _runs(server, "score_flights")
    predictions_url = _links(server, "score_flights", score_run["dag_run_id"],
                             "score")["Predictions page"]
    assert f"/predictions/{FIRST_VERSION}/" in predictions_url, predictions_url
    asset = models / ASSET_RUN_FOLDER
    shutil.copytree(trained, asset)
    (asset / "metrics.json").write_text(json.dumps({**stored, "run_id": ASSET_RUN_ID,
                                                    "run": ASSET_RUN_FOLDER}))
    return {"version": version_url, "model": model_url, "train_run": train_id,
            "refused_run": refused_id, "first_run": first_id, "predictions": predictions_url,
            "asset_model": model_url.replace(trained.name, ASSET_RUN_FOLDER)}


def test_operator_day_first_ui_run_publishes_and_links_both_ways(
        airflow: Server, chromium: Path,  # noqa: F811
        storage: Store, tmp_path: Path) -> None:
    """Issue 34 items 1-6: the README's first UI run publishes although the refused nightly
    run before it failed; the extra links open the version and model pages; the model of a run
    whose id has Airflow's random suffix (as asset-triggered ones have) names and links it; the
    dataset page lists the runs, failed ones too; a dataset with DAGs but no version is listed;
    no token breaks mid-word; at 1280 and 1024 px, light and dark. Issue 41: a score run of the
    version opens its predictions page from its own button, the training run's model page and
    the version page."""
    from playwright.sync_api import expect, sync_playwright

    sys.path.insert(0, str(REPO / "scripts"))
    import demo

    readme = (REPO / "README.md").read_text()
    for key, value in FIRST_RUN.items():  # the Params the README and the demo tell to set
        assert f"`{key}` = `{value}`" in readme and f"{key} = {value}" in demo.FIRST_UI_RUN, key
    day = _day_of_runs(airflow, tmp_path)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            for width in WIDTHS:
                for mode in ("light", "dark"):
                    context = _context(browser, airflow, width, color_scheme=mode)
                    context.add_init_script(f"localStorage.setItem('theme', '{mode}')")
                    page = context.new_page()
                    page.set_default_timeout(UI_TIMEOUT_MS)
                    _walk_the_day(page, airflow, day, expect, f"{width}-{mode}")
                    context.close()
        finally:
            browser.close()


def _framed(page, url: str, expect):
    """Open an extra link's URL (the Airflow UI with the plugin page in its frame)."""
    page.goto(url)
    frame = page.wait_for_selector("iframe").content_frame()
    assert frame is not None, url
    expect(frame.locator("main").first).to_be_visible()
    time.sleep(0.2)
    _fits(frame)
    _unbroken(frame)
    return frame


def _opens_predictions(frame, expect) -> None:
    """The page's predictions list links the score run's predictions page, which opens."""
    link = frame.locator("a.predictions-link").first
    expect(link).to_be_visible()
    link.click()
    expect(frame.locator("main > h1")).to_contain_text("Predictions of")
    _fits(frame)


def _walk_the_day(page, server: Server, day: dict[str, str], expect, shot: str) -> None:
    # the publish task's "Version page" button, in the Details tab of Airflow's task view
    page.goto(f"{server.base}/dags/etl_flights/runs/{quote(day['first_run'], safe='')}"
              "/tasks/publish/details")
    button = page.get_by_role("link", name="Version page")
    expect(button).to_have_attribute("href", day["version"])
    page.screenshot(path=str(SHOTS / f"{shot}-publish-links.png"))
    frame = _framed(page, day["version"], expect)
    expect(frame.locator("main > h1")).to_contain_text(FIRST_VERSION)
    page.screenshot(path=str(SHOTS / f"{shot}-version-from-link.png"))
    frame = _framed(page, day["model"], expect)
    expect(frame.locator("main > h1")).to_contain_text(day["train_run"])
    expect(frame.locator("a.dagrun")).to_have_attribute(
        "href", f"/dags/train_flights/runs/{quote(day['train_run'], safe='')}")
    page.screenshot(path=str(SHOTS / f"{shot}-model-from-link.png"))
    _opens_predictions(frame, expect)  # from the training run's model page
    frame = _framed(page, day["predictions"], expect)  # the score run's own button
    expect(frame.locator("main > h1")).to_contain_text("Predictions of")
    frame = _framed(page, day["version"], expect)
    _opens_predictions(frame, expect)  # ... and from the version page
    page.screenshot(path=str(SHOTS / f"{shot}-predictions-from-version.png"))
    frame = _framed(page, day["asset_model"], expect)  # an asset-triggered run's model
    expect(frame.locator("main > h1")).to_contain_text(ASSET_RUN_ID)
    expect(frame.locator("a.dagrun")).to_have_attribute(
        "href", f"/dags/train_flights/runs/{quote(ASSET_RUN_ID, safe='')}")
    page.screenshot(path=str(SHOTS / f"{shot}-asset-triggered-model.png"))
    frame = _framed(page, f"{server.base}/plugin/pipeline-datasets/pipeline/datasets/"
                          f"{uf.DATASET}", expect)
    states = dict(zip(frame.locator("tr.run-row a.dagrun").all_inner_texts(),
                      frame.locator("tr.run-row .run-state").all_inner_texts()))
    states = {k.replace("\n", ""): v for k, v in states.items()}
    assert states.get(day["refused_run"]) == "failed", states
    assert states.get(day["first_run"]) == "success", states
    assert states.get(day["train_run"]) == "success", states
    page.screenshot(path=str(SHOTS / f"{shot}-dataset-runs.png"), full_page=True)
    frame = _framed(page, f"{server.base}/plugin/pipeline-datasets/pipeline/", expect)
    expect(frame.locator("tr.dataset-row", has_text="digits")).to_contain_text("none yet")
    # the list's drift column: the README run's version judged against the version before it,
    # its words linking to that version's drift section (tests/plugins/pipeline_ui/test_trend.py: the values)
    expect(frame.locator("thead")).to_contain_text("Drift (newest)")
    drift = frame.locator("tr.dataset-row", has_text=uf.DATASET).locator("td.drift a")
    expect(drift).to_have_text(re.compile(  # values that moved, apart from missing ones
        r"^(none|\d+ features?|(\d+ features?, )?\d+ with more missing values)$"))
    expect(drift).to_have_attribute("href", re.compile(f"/versions/{FIRST_VERSION}#drift$"))
    frame = _framed(page, f"{server.base}/plugin/pipeline-datasets/pipeline/datasets/digits",
                    expect)
    expect(frame.locator("#no-version")).to_contain_text("No version yet")
