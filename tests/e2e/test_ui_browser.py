"""The pipeline UI in a real browser, inside a real Airflow api-server.

Starts ``airflow api-server`` (temp AIRFLOW_HOME, SQLite, simple auth manager with one
*viewer* user, plugins folder = repo ``plugins/``) over a storage root, then drives Debian's
headless Chromium with Playwright as that user: the nav entry, dataset -> version -> model
click-through, Data Docs and the DAG-run link. A viewer (not all-admins mode) so the test
also shows that the plugin app refuses anonymous requests and lets the lowest role in. Screenshots of each page go to the pytest tmp dir and to
``ui-screenshots/`` at the repo root. Skips without Chromium unless CI=true.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import ui_fixtures as uf

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = REPO / "ui-screenshots"
SERVER_START_TIMEOUT_S = 120
UI_TIMEOUT_MS = 30_000

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing on CI: `make browser` installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} not installed (Debian package chromium; `make browser`)")
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USER = "viewer"


def _airflow_env(home: Path, port: int, password: str) -> dict[str, str]:
    dags = home / "dags"
    dags.mkdir(exist_ok=True)
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({USER: password}))
    return {
        **os.environ, "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
    }


@dataclass(frozen=True)
class Store:
    """The storage root the server reads: a real ETL version, model runs, hostile data."""

    root: Path
    version: str
    runs: list[str]
    hostile: str

    @property
    def uri(self) -> str:
        return self.root.as_uri()

    def manifest(self) -> dict:
        return json.loads((self.root / "datasets/flights" / self.version / "manifest.json")
                          .read_text())


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root, version = uf.real_etl_root(tmp_path_factory)
    runs = ["20130102T060000Z", "20130102T070000Z"]
    for i, run in enumerate(runs):
        uf.add_model_run(root, uf.DATASET, version, run, auc=0.70 + i / 100)
    (root / "models" / uf.DATASET / version / "20130102T080000Z" / "backup").mkdir(parents=True)
    return Store(root, version, runs, uf.write_hostile(root))


@dataclass(frozen=True)
class Server:
    base: str
    password: str
    env: dict[str, str]  # the server's Airflow settings: a CLI run with them shares its DB

    def token(self) -> str:
        """A JWT for the viewer, from the simple auth manager's token endpoint."""
        r = httpx.post(f"{self.base}/auth/token", json={"username": USER, "password": self.password})
        assert r.status_code == 201, r.text
        return r.json()["access_token"]


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest,
            ) -> Iterator[Server]:
    """A running api-server with the plugin loaded over ``storage``; stopped afterwards."""
    home, port, password = tmp_path_factory.mktemp("airflow-home"), _free_port(), secrets.token_hex(8)
    env, bin_dir = _airflow_env(home, port, password), Path(sys.executable).parent
    with open(home / "migrate.log", "wb") as mlog:  # the DB migrates while the ETL runs
        migrate = subprocess.Popen([str(bin_dir / "airflow"), "db", "migrate"], env=env,
                                   stdout=mlog, stderr=subprocess.STDOUT)
        storage: Store = request.getfixturevalue("storage")
        if migrate.wait(timeout=300) != 0:
            pytest.fail(f"airflow db migrate failed:\n{(home / 'migrate.log').read_text()[-3000:]}")
    env["PIPELINE_STORAGE_ROOT"] = storage.uri
    with api_server(env, home, port) as base:
        yield Server(base, password, env)


@contextmanager
def api_server(env: dict[str, str], home: Path, port: int) -> Iterator[str]:
    """``airflow api-server`` on loopback ``port`` with ``env``, its log in ``home``: the base
    URL once it answers healthy; its process group stopped afterwards."""
    log = open(home / "api-server.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server",
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, proc, home / "api-server.log")
        yield base
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


def _wait_healthy(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"{base}/api/v2/monitor/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-4000:]
    pytest.fail(f"api-server did not become healthy at {base} (exit {proc.poll()}):\n{tail}")


def test_plugin_app_requires_an_airflow_login(airflow: Server) -> None:
    url = f"{airflow.base}/pipeline/datasets/flights"
    anonymous = httpx.get(url, headers={"accept": "application/json"})
    assert anonymous.status_code == 401 and "version-row" not in anonymous.text
    browser = httpx.get(url, headers={"accept": "text/html"})
    assert browser.status_code == 303
    assert browser.headers["location"].startswith("/auth/login?next=")
    forged = httpx.get(url, headers={"authorization": "Bearer not-a-jwt"})
    assert forged.status_code == 403
    viewer = httpx.get(url, headers={"authorization": f"Bearer {airflow.token()}"})
    assert viewer.status_code == 200 and "version-row" in viewer.text


class Shots:
    """Screenshots into the pytest tmp dir and ui-screenshots/ at the repo root."""

    def __init__(self, tmp: Path) -> None:
        self.dirs = [tmp, SCREENSHOTS]
        SCREENSHOTS.mkdir(exist_ok=True)
        self.taken: list[str] = []

    def __call__(self, page, name: str) -> None:
        path = self.dirs[0] / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        shutil.copy(path, self.dirs[1] / path.name)
        assert path.stat().st_size > 5_000, f"{name}: screenshot looks empty"
        self.taken.append(name)


def test_pages_in_chromium(airflow: Server, chromium: Path, storage: Store,
                           tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    shot, dialogs = Shots(tmp_path), []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.add_cookies([{"name": "_token", "value": airflow.token(), "url": airflow.base}])
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        try:
            _airflow_nav(page, airflow.base, shot, expect)
            _click_through(page, airflow.base, storage, shot, expect)
            _hostile(page, airflow.base, storage, shot, expect)
        finally:
            browser.close()
    assert dialogs == []  # no stored script ever ran
    assert len(shot.taken) == 9


def _airflow_nav(page, base: str, shot: Shots, expect) -> None:
    """The Airflow UI shows our nav entry; it opens the app in its iframe."""
    page.goto(f"{base}/")
    nav = page.get_by_role("link", name="Datasets")
    expect(nav.first).to_be_visible()
    shot(page, "01-airflow-home-nav")
    nav.first.click()
    page.wait_for_url(f"{base}/plugin/pipeline-datasets")
    frame = page.frame_locator("iframe")
    expect(frame.locator("#datasets")).to_be_visible()
    frame.get_by_role("link", name="flights", exact=True).click()
    expect(frame.locator("tr.version-row")).to_have_count(1)
    shot(page, "02-airflow-iframe-dataset")


def _click_through(page, base: str, store: Store, shot: Shots, expect) -> None:
    """datasets -> dataset -> version -> model at top level, full-page screenshots."""
    manifest = store.manifest()
    page.goto(f"{base}/pipeline/")
    expect(page.locator("tr.dataset-row")).to_have_count(2)  # flights, hostile; not "<img ..>"
    shot(page, "03-datasets")
    page.get_by_role("link", name="flights", exact=True).click()
    row = page.locator(f'tr.version-row[data-version="{store.version}"]')
    expect(row).to_have_count(1)
    expect(row.locator("a.model-link")).to_have_count(3)
    for split, info in manifest["splits"].items():
        expect(row).to_contain_text(f"{split} {info['num_examples']:,}")
    quoted = uf.REAL_RUN_ID.replace(":", "%3A").replace("+", "%2B")
    expect(row.locator("a.dagrun")).to_have_attribute("href", f"/dags/etl_flights/runs/{quoted}")
    shot(page, "04-dataset-versions")
    row.locator("a.version-link").click()
    shards = sum(len(s["shards"]) for s in manifest["splits"].values())
    expect(page.locator("tr.shard-row")).to_have_count(shards)
    expect(page.locator("#model-table tr.model-row")).to_have_count(3)
    shot(page, "05-version")
    page.locator("#model-table").get_by_role("link", name=store.runs[0], exact=True).click()
    expect(page.locator("tr.metric-row").first).to_be_visible()
    for img in page.locator("figure.plot img").all():  # decoded by the browser, not just sent
        assert img.evaluate("i => i.complete && i.naturalWidth > 0")
    expect(page.locator("article.card h1")).to_contain_text("Model card")
    shot(page, "06-model")
    page.go_back()
    page.locator("#validation a.docs-link").click()
    expect(page.locator("h1")).to_contain_text("Validation of")
    expect(page.locator("tr.check-row")).to_have_count(len(manifest["validation"]["expectations"]))
    shot(page, "07-validation")
    page.go_back()
    page.locator("a.dagrun").first.click()
    page.wait_for_url(f"**/dags/etl_flights/runs/{quoted}")
    expect(page.get_by_text(uf.REAL_RUN_ID).first).to_be_visible()
    shot(page, "08-airflow-dag-run-link")


def _hostile(page, base: str, store: Store, shot: Shots, expect) -> None:
    """Markup stored in a manifest, metrics or card is shown as text; stored pages stay inert."""
    page.goto(f"{base}/pipeline/datasets/hostile/versions/{store.hostile}/files/validation/index.html")
    expect(page.locator("h1")).to_have_text("Validation results")
    assert page.title() == "Data Docs"  # its inline script did not run: CSP sandbox
    page.goto(f"{base}/pipeline/datasets/hostile/versions/{store.hostile}/models/run1")
    expect(page.locator("article.card")).to_contain_text(uf.XSS)
    shot(page, "09-hostile-model-escaped")
