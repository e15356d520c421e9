"""Every pipeline UI page for every shipped dataset kind, in Chromium, light and dark (issue 17).

A real ``airflow api-server`` (see tests/test_ui_browser.py) over versions the real ETL
published for flights (tabular) and digits (images). Top level: every page reachable from
the datasets page is opened in light and dark colour schemes, screenshotted, and every link,
image, stylesheet and script on it is fetched and must not be 4xx/5xx. Inside the Airflow UI
frame: each kind's pages open through the nav route in Airflow's light and dark mode (the
frame follows it), and the DAG-run link leaves the frame for the Airflow page. Screenshots go
to ``ui-screenshots/pipeline-ui-pages/`` (gitignored) and the pytest tmp dir.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest
import ui_fixtures as uf
from test_ui_browser import (  # noqa: F401 - fixtures used by name
    CHROMIUM_ARGS,
    REPO,
    UI_TIMEOUT_MS,
    Server,
    Store,
    airflow,
    chromium,
)

pytestmark = pytest.mark.integration
SHOTS = REPO / "ui-screenshots" / "pipeline-ui-pages"
DARK_BG, LIGHT_BG = "rgb(17, 20, 24)", "rgb(255, 255, 255)"
MAX_PAGES = 60
_digits: dict[str, str] = {}


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root, version = uf.real_etl_root(tmp_path_factory)
    uf.add_model_run(root, uf.DATASET, version, "20130102T060000Z")
    digits = uf.add_real_digits(root, tmp_path_factory)
    uf.add_model_run(root, uf.IMAGES_DATASET, digits, "20240101T010000Z")
    _digits["version"] = digits
    return Store(root, version, ["20130102T060000Z"], "")


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


def _crawl(context, base: str, scheme: str, shot: Shots) -> set[str]:
    """Open each plugin page from the datasets page on; fetch everything each one refers to."""
    page, queue, seen, checked = context.new_page(), ["/pipeline/"], set(), {}
    page.set_default_timeout(UI_TIMEOUT_MS)
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        response = page.goto(base + path)
        assert response is not None and response.status == 200, (path, response and response.status)
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert bg == (DARK_BG if scheme == "dark" else LIGHT_BG), (path, scheme, bg)
        shot(page, f"{scheme}-{_name(path)}")
        refs = page.eval_on_selector_all(
            "a[href], img[src], link[href], script[src]",
            "els => els.map(e => e.getAttribute('href') === null ? e.src : e.href)")
        for ref in refs:
            url = urldefrag(ref)[0]
            parts = urlsplit(url)
            assert f"{parts.scheme}://{parts.netloc}" == base, (path, ref)  # nothing external
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            is_page = target.startswith("/pipeline/") and "/files/" not in target \
                and "/static/" not in target
            if is_page:
                queue.append(target)
            elif target not in checked:
                checked[target] = context.request.get(base + target).status
    broken = {u: s for u, s in checked.items() if s >= 400}
    assert not broken, broken
    page.close()
    return seen


def test_every_page_and_link_light_and_dark(airflow: Server, chromium: Path,  # noqa: F811
                                            storage: Store, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    shot = Shots(tmp_path)
    digits = _digits["version"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                context = browser.new_context(viewport={"width": 1440, "height": 900},
                                              color_scheme=scheme)
                context.add_cookies([{"name": "_token", "value": airflow.token(),
                                      "url": airflow.base}])
                seen = _crawl(context, airflow.base, scheme, shot)
                context.close()
                for needed in (f"/pipeline/datasets/flights/versions/{storage.version}/validation",
                               f"/pipeline/datasets/digits/versions/{digits}/validation",
                               f"/pipeline/datasets/digits/versions/{digits}/models/20240101T010000Z",
                               (f"/pipeline/datasets/flights/versions/{storage.version}/"
                                "models/20130102T060000Z")):
                    assert needed in seen, (needed, sorted(seen))
        finally:
            browser.close()


def _in_frame(context, base: str, path: str, mode: str, shot: Shots, expect) -> object:
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(f"{base}/plugin/pipeline-datasets{path}")
    frame = page.frame_locator("iframe")
    expect(frame.locator("main > h1, main > section h1").first).to_be_visible()
    expect(frame.locator("html")).to_have_attribute("data-theme", mode)
    shot(page, f"frame-{mode}-{_name(path)}")
    return page


def test_pages_inside_the_airflow_frame(airflow: Server, chromium: Path,  # noqa: F811
                                        storage: Store, tmp_path: Path) -> None:
    """Airflow's colour mode (next-themes: html class + localStorage 'theme') reaches the frame."""
    from playwright.sync_api import expect, sync_playwright

    shot, digits = Shots(tmp_path), _digits["version"]
    pages = ["/pipeline/", f"/pipeline/datasets/digits/versions/{digits}",
             f"/pipeline/datasets/digits/versions/{digits}/validation",
             f"/pipeline/datasets/flights/versions/{storage.version}",
             f"/pipeline/datasets/flights/versions/{storage.version}/models/20130102T060000Z"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            for mode in ("light", "dark"):
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                context.add_init_script(f"localStorage.setItem('theme', '{mode}')")
                context.add_cookies([{"name": "_token", "value": airflow.token(),
                                      "url": airflow.base}])
                for path in pages:
                    _in_frame(context, airflow.base, path, mode, shot, expect).close()
                context.close()
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            context.add_cookies([{"name": "_token", "value": airflow.token(), "url": airflow.base}])
            page = _in_frame(context, airflow.base, pages[3], "light", shot, expect)
            page.frame_locator("iframe").locator("a.dagrun").first.click()
            page.wait_for_url("**/dags/etl_flights/runs/**")  # the Airflow page, not the frame
            expect(page.get_by_text(uf.REAL_RUN_ID).first).to_be_visible()
            shot(page, "frame-dag-run-link-followed")
        finally:
            browser.close()
