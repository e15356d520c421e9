"""Every pipeline UI page for every shipped dataset, in Chromium, light and dark (issue 17).

A real ``airflow api-server`` (see tests/e2e/test_ui_browser.py) over versions the real ETL
published for flights (tabular, binary), digits (images), wine (tabular, multi-class) and
diabetes (tabular, regression); wine and diabetes carry models from a real short training
run, so their model pages show the task's own metrics and plots. Top level: the pages are
found from the datasets page on by clicking every link on each (tests/support/ui_links.py), then
each is opened in light and dark colour schemes and screenshotted, and every image,
stylesheet and script on it is fetched and must not be 4xx/5xx. Inside the Airflow UI frame:
every page of every dataset opens through the nav route in Airflow's light and dark mode
(the frame follows it) and is screenshotted, and every link on it is clicked there too; the
DAG-run links leave the frame for the Airflow page. Screenshots go to
``ui-screenshots/pipeline-ui-pages/`` (gitignored) and the pytest tmp dir.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest

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
from tests.support import ui_fixtures_tasks as ut
from tests.support import ui_links

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
SHOTS = REPO / "ui-screenshots" / "pipeline-ui-pages"
DARK_BG, LIGHT_BG = "rgb(17, 20, 24)", "rgb(255, 255, 255)"
MAX_PAGES = 60
FLIGHTS_RUN, DIGITS_RUN = "20130102T060000Z", "20240101T010000Z"
# Key metrics each task's model page must list (training/tasks.py), as the page labels them.
TASK_METRICS = {"wine": ("Accuracy", "Macro-F1"), "diabetes": ("RMSE", "MAE", "R²")}
_built: dict[str, dict[str, tuple[str, str]]] = {}  # dataset -> (version, model run)


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root, version = uf.real_etl_root(tmp_path_factory)
    uf.add_model_run(root, uf.DATASET, version, FLIGHTS_RUN)
    digits = uf.add_real_digits(root, tmp_path_factory)
    uf.add_model_run(root, uf.IMAGES_DATASET, digits, DIGITS_RUN)
    shipped = {uf.DATASET: (version, FLIGHTS_RUN), uf.IMAGES_DATASET: (digits, DIGITS_RUN)}
    for name, task_version in ut.add_real_tasks(root, tmp_path_factory).items():
        shipped[name] = (task_version, ut.TASKS_MODEL_RUN)
    _built["shipped"] = shipped
    return Store(root, version, [FLIGHTS_RUN], "")


def every_page() -> list[str]:
    """Each plugin page of each shipped dataset: dataset, version, validation, model."""
    pages = ["/pipeline/"]
    for name, (version, run) in _built["shipped"].items():
        vpath = f"/pipeline/datasets/{name}/versions/{version}"
        pages += [f"/pipeline/datasets/{name}", vpath, f"{vpath}/validation",
                  f"{vpath}/models/{run}"]
    return pages


@pytest.fixture(scope="module", autouse=True)
def fresh_shots_folder() -> None:
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)


class Shots:
    def __init__(self, tmp: Path) -> None:
        self.tmp, self.taken = tmp, []

    def __call__(self, page, name: str) -> None:
        path = self.tmp / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 5_000, f"{name}: screenshot looks empty"
        shutil.copy(path, SHOTS / path.name)
        self.taken.append(name)


def _name(path: str) -> str:
    return path.strip("/").replace("/", "_").replace(":", "-") or "root"


def _plugin_page(url: str, base: str) -> str | None:
    """The plugin page a reached URL is (path and query), or None for a file, anchor or Airflow."""
    parts = urlsplit(urldefrag(url)[0])
    assert f"{parts.scheme}://{parts.netloc}" == base, url  # nothing external
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    if target.startswith("/pipeline/") and "/files/" not in target and "/static/" not in target:
        return target
    return None


def _discover(context, base: str, expect) -> list[str]:
    """Every plugin page from the datasets page on, found by clicking every link on each."""
    page, queue, seen = context.new_page(), ["/pipeline/"], []
    page.set_default_timeout(UI_TIMEOUT_MS)
    open_page = ui_links.top_level(page, base)
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.append(path)
        reached = ui_links.follow_all(page, open_page, path, expect)
        assert base + "/pipeline/" in reached, (path, reached)  # the brand link, at least
        for url in reached:
            if (target := _plugin_page(url, base)) and target not in seen:
                queue.append(target)
    page.close()
    return seen


def _look(context, base: str, scheme: str, pages: list[str], shot: Shots) -> None:
    """Each page in ``scheme``: its colours, a screenshot, every resource it loads fetched."""
    page, checked = context.new_page(), {}
    page.set_default_timeout(UI_TIMEOUT_MS)
    for path in pages:
        response = page.goto(base + path)
        assert response is not None and response.status == 200, (path, response and response.status)
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert bg == (DARK_BG if scheme == "dark" else LIGHT_BG), (path, scheme, bg)
        for img in page.locator("img").all():  # decoded by the browser, not just sent
            assert img.evaluate("i => i.complete && i.naturalWidth > 0"), (path, img)
        shot(page, f"{scheme}-{_name(path)}")
        refs = page.eval_on_selector_all("img[src], link[href], script[src]",
                                         "els => els.map(e => e.src || e.href)")
        for ref in refs:
            assert _plugin_page(ref, base) is None, (path, ref)
            if ref not in checked:
                checked[ref] = context.request.get(ref).status
    broken = {u: s for u, s in checked.items() if s >= 400}
    assert not broken, broken
    page.close()


def _task_model_pages(context, base: str, expect) -> None:
    """Wine's and diabetes's model pages show their own task's metrics and plots."""
    page = context.new_page()
    for name, metrics in TASK_METRICS.items():
        version, run = _built["shipped"][name]
        page.goto(f"{base}/pipeline/datasets/{name}/versions/{version}/models/{run}")
        names = page.locator("tr.metric-row td:first-child").all_inner_texts()
        assert set(metrics) <= set(names), (name, names)
        for plot in ut.TASK_PLOTS[name]:
            expect(page.locator(f'figure.plot img[alt$="{plot}"]')).to_have_count(1)
    page.close()


def _context(browser, server: Server, **options):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, **options)
    context.add_cookies([{"name": "_token", "value": server.token(), "url": server.base}])
    return context


def test_every_page_and_link_light_and_dark(airflow: Server, chromium: Path,  # noqa: F811
                                            storage: Store, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    shot = Shots(tmp_path)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            context = _context(browser, airflow)
            seen = _discover(context, airflow.base, expect)
            _task_model_pages(context, airflow.base, expect)
            context.close()
            missing = set(every_page()) - set(seen)
            assert not missing, (sorted(missing), seen)
            for scheme in ("light", "dark"):
                context = _context(browser, airflow, color_scheme=scheme)
                _look(context, airflow.base, scheme, seen, shot)
                context.close()
        finally:
            browser.close()
    assert len(shot.taken) == 2 * len(seen)


def test_pages_inside_the_airflow_frame(airflow: Server, chromium: Path,  # noqa: F811
                                        storage: Store, tmp_path: Path) -> None:
    """Every page of every dataset in Airflow's frame, light and dark; every link clicked there.

    Airflow's colour mode (next-themes: html class + localStorage 'theme') reaches the frame.
    """
    from playwright.sync_api import expect, sync_playwright

    shot, pages, reached = Shots(tmp_path), every_page(), []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            for mode in ("light", "dark"):
                context = _context(browser, airflow)
                context.add_init_script(f"localStorage.setItem('theme', '{mode}')")
                page = context.new_page()
                page.set_default_timeout(UI_TIMEOUT_MS)
                open_page = ui_links.in_airflow_frame(page, airflow.base, expect)
                for path in pages:
                    page.goto("about:blank")  # Airflow's own page, freshly loaded, each time
                    frame = open_page(path)
                    expect(frame.locator("html")).to_have_attribute("data-theme", mode)
                    shot(page, f"frame-{mode}-{_name(path)}")
                    if mode == "light":
                        reached += ui_links.follow_all(page, open_page, path, expect)
                context.close()
        finally:
            browser.close()
    assert len(shot.taken) == 2 * len(pages)
    # the clicks really went places: every page, and each dataset's DAG run in Airflow
    assert set(pages) <= {_plugin_page(url, airflow.base) for url in reached}
    for name in _built["shipped"]:
        assert any(f"/dags/etl_{name}/runs/" in url for url in reached), (name, reached)


def test_the_diff_page_keeps_figures_and_options_whole(chromium: Path,  # noqa: F811
                                                       tmp_path: Path) -> None:
    """Issue 41 item 5, as the operator sees it (the app served to Chromium straight from a
    TestClient, no Airflow): at widths from a phone's to a laptop's, the command's ``--dataset``
    never wraps between its dashes and the rows' change reads ``-257,264`` on one line."""
    import json
    import sys
    from datetime import UTC, datetime

    from fastapi.testclient import TestClient
    from playwright.sync_api import expect, sync_playwright

    sys.path.insert(0, str(REPO / "plugins"))
    from pipeline_ui.app import create_app

    year = uf.write_version(tmp_path, "flights", datetime(2014, 1, 1, tzinfo=UTC))
    week = uf.write_version(tmp_path, "flights", datetime(2014, 1, 1, tzinfo=UTC),
                            datetime(2013, 12, 25, tzinfo=UTC))
    for version, train in ((year, 262_077), (week, 4_813)):
        path = tmp_path / "datasets" / "flights" / version / "manifest.json"
        doc = json.loads(path.read_text())
        doc["splits"]["train"]["num_examples"] = train  # the year's and the week's figures
        path.write_text(json.dumps(doc))
    client = TestClient(create_app(tmp_path.as_uri()))

    serve = _served_by(client)

    lines = "e => new Set([...e.getClientRects()].map(r => Math.round(r.top))).size"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("http://ui.test/**", serve)
            for width in (360, 480, 768, 1024):
                page.set_viewport_size({"width": width, "height": 900})
                page.goto(f"http://ui.test/datasets/flights/versions/{week}/diff?against={year}")
                option = page.locator("code.command span.nowrap")
                expect(option).to_have_text("--dataset")
                change = page.locator("#rows td.num", has_text="-257,264")
                expect(change).to_have_count(1)
                assert option.evaluate(lines) == 1 and change.evaluate(lines) == 1, width
        finally:
            browser.close()


def test_a_failed_validation_opens_from_the_dataset_page(chromium: Path,  # noqa: F811
                                                         tmp_path_factory) -> None:
    """Issue 51 item 6, as the operator sees it (the app served to Chromium from a TestClient,
    no Airflow), on what the real ETL left when a window's weather was missing: the dataset
    page lists the version as not published; its link opens the validation page, marked so,
    the failure in words naming the join; light and dark, nothing wider than the page.
    Screenshots: ``ui-screenshots/failed-validation/``."""
    import sys

    from fastapi.testclient import TestClient
    from playwright.sync_api import expect, sync_playwright

    from tests.support import failed_validation as fv

    sys.path.insert(0, str(REPO / "plugins"))
    from pipeline_ui.app import create_app

    client = TestClient(create_app(fv.failed_root(tmp_path_factory).as_uri()))
    shots = REPO / "ui-screenshots" / "failed-validation"
    shots.mkdir(parents=True, exist_ok=True)

    serve = _served_by(client)

    wider = "() => document.documentElement.scrollWidth - window.innerWidth"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                page = browser.new_page(color_scheme=scheme, viewport={"width": 1024,
                                                                       "height": 900})
                page.route("http://ui.test/**", serve)
                page.goto("http://ui.test/datasets/flights")
                row = page.locator("tr.unpublished-row")
                expect(row).to_have_count(1)
                expect(row.locator(".badge.not-published")).to_be_visible()
                assert page.evaluate(wider) <= 0, scheme
                page.screenshot(path=str(shots / f"{scheme}-dataset.png"), full_page=True)
                row.locator("a.validation-link").click()
                expect(page).to_have_url(re.compile(f"/versions/{fv.VERSION}/validation$"))
                expect(page.locator("h1 .badge.not-published")).to_have_text("not published")
                expect(page.locator("#not-published")).to_be_visible()
                failure = page.locator("li.failure")
                expect(failure).to_have_count(1)
                expect(failure).to_contain_text(
                    "temp must have a value in at least 50% of rows; 0% of rows had one")
                expect(failure.locator(".cause code")).to_have_text("weather")
                expect(failure.locator(".cause")).to_contain_text("ends on 2013-01-04")
                assert page.evaluate(wider) <= 0, scheme
                page.screenshot(path=str(shots / f"{scheme}-validation.png"), full_page=True)
                page.close()
        finally:
            browser.close()


def _served_by(client):
    """A Playwright route handler answering every request from the app's TestClient."""
    def serve(route) -> None:
        url = urlsplit(route.request.url)
        r = client.get(f"{url.path}?{url.query}")
        route.fulfill(status=r.status_code, body=r.content,
                      headers={"content-type": r.headers.get("content-type", "text/html")})
    return serve
