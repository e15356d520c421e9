"""Bad Params meet a real Airflow (issue 28): refused at run creation, or the first task fails once.

A real ``airflow api-server`` over the repo's DAGs (temp home, SQLite, all-admins simple auth):
the issue's four bad values, and the training form's, are each answered 400 by
``POST /api/v2/dags/{id}/dagRuns`` and no run exists afterwards; in Chromium the trigger form
refuses them with Airflow's own alert at the top of the dialog, which names the Param and its
rule (Airflow 3.3.2 has no per-field message for a range or pattern: its form checks only
required fields and JSON). What only code can check (2014-02-30, a source that leaves the
storage root through a link) is run with ``airflow dags test``: the first task,
``wait_for_data``, fails on try 1,
never up for retry, and the reason is the first line of its own in the task's log.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_task_logs import per_task
from tests.e2e.test_ui_browser import (  # noqa: F401 - the chromium fixture is used by name
    CHROMIUM_ARGS,
    REPO,
    UI_TIMEOUT_MS,
    _free_port,
    api_server,
    chromium,
)
from tests.support.dagtest import airflow_env, prepare

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
BIN = Path(sys.executable).parent
SHOTS = REPO / "ui-screenshots" / "trigger-refusals"
DAGS_TEST_TIMEOUT_S = 120
# (dag, conf, the rule's words the refusal must show)
REST_CASES = [
    ("etl_flights", {"window_days": 0}, "a whole number from 1 to 3660"),
    ("etl_flights", {"shard_mb": -5}, "a whole number from 1 to 4096"),
    ("etl_flights", {"source_uri": "../../etc passwd"}, "without '..' or spaces"),
    ("etl_flights", {"interval_end": "2014-13-45"}, "an ISO 8601 date-time"),
    ("train_flights", {"epochs": 0}, "a whole number from 1 to 1000"),
    ("train_flights", {"batch_size": -1}, "a whole number from 1 to 65536"),
    ("train_flights", {"min_margin": 0.5}, "up to (not including) 0.5"),
    ("train_flights", {"version": "v1"}, "'latest' or a version id"),
]


class Api:
    """The running server and an admin's bearer token."""

    def __init__(self, base: str) -> None:
        self.base = base
        token = httpx.get(f"{base}/auth/token").json()["access_token"]  # all-admins mode
        self.headers = {"authorization": f"Bearer {token}"}

    def trigger(self, dag_id: str, conf: dict) -> httpx.Response:
        return httpx.post(f"{self.base}/api/v2/dags/{dag_id}/dagRuns", headers=self.headers,
                          json={"logical_date": None, "conf": conf}, timeout=30)

    def runs(self, dag_id: str) -> int:
        r = httpx.get(f"{self.base}/api/v2/dags/{dag_id}/dagRuns", headers=self.headers)
        assert r.status_code == 200, r.text
        return r.json()["total_entries"]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """``airflow api-server`` with the repo's DAGs serialized into a fresh SQLite DB."""
    home, port = tmp_path_factory.mktemp("refusals-home"), _free_port()
    env, _ = airflow_env(home)
    env.update({
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16)})
    prepare(env, [str(BIN / "airflow"), "dags", "reserialize"])
    with api_server(env, home, port) as base:
        yield Api(base)


@pytest.mark.parametrize(("dag_id", "conf", "rule"), REST_CASES, ids=str)
def test_rest_trigger_of_a_bad_value_is_400_and_creates_no_run(api: Api, dag_id: str,
                                                                 conf: dict, rule: str) -> None:
    (name, value), = conf.items()
    r = api.trigger(dag_id, conf)
    assert r.status_code == 400, r.text
    first, *rest = r.json()["detail"].splitlines()
    assert first.startswith(f"Invalid input for param {name}: {value!r} "), first
    assert rule in "\n".join(rest)
    assert api.runs(dag_id) == 0


def test_rest_trigger_of_good_values_creates_the_run(api: Api) -> None:
    """The same endpoint and values in range: the refusals above are the schema's doing."""
    good = {"window_days": 1, "shard_mb": 4096, "source_uri": "raw/flights/date={date}/x.csv",
            "interval_end": "2014-12-31"}
    r = api.trigger("etl_wine", good)
    assert r.status_code == 200, r.text
    assert api.runs("etl_wine") == 1


# (dag, field label or "json", value typed, param, what the alert must say)
FORM_CASES = [
    ("etl_flights", "Window (days)", "0", "window_days", "less than the minimum of 1"),
    ("etl_flights", "Shard size (MiB)", "-5", "shard_mb", "less than the minimum of 1"),
    ("etl_flights", "#element_source_uri", "../../etc passwd", "source_uri", "does not match"),
    ("etl_flights", "json", '{"interval_end": "2014-13-45"}', "interval_end", "does not match"),
    ("train_flights", "Epochs", "0", "epochs", "less than the minimum of 1"),
]


def test_trigger_form_refuses_each_bad_value(api: Api, chromium: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=api.base)
        context.add_cookies([{"name": "_token", "value": api.headers["authorization"][7:],
                              "url": api.base}])
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            for dag_id, field, typed, name, says in FORM_CASES:
                before = api.runs(dag_id)
                dialog = _fill_trigger_form(page, api.base, dag_id, field, typed)
                dialog.get_by_role("button", name="Trigger", exact=True).click()
                alert = dialog.get_by_text(f"Invalid input for param {name}:")
                expect(alert).to_be_visible()
                expect(alert).to_contain_text(says)
                expect(dialog.get_by_role("button", name="Trigger", exact=True)).to_be_visible()
                alert.scroll_into_view_if_needed()
                page.screenshot(path=str(SHOTS / f"{dag_id}-{name}.png"))
                assert api.runs(dag_id) == before, f"{name}={typed} created a run"
        finally:
            browser.close()


def test_the_form_takes_the_date_its_help_shows(api: Api, chromium: Path) -> None:  # noqa: F811
    """Issue 41 item 6: ``interval_end`` typed as its help shows it (a date, 2014-01-01: the
    README's first UI run) is taken as typed, and the run is created with it."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        context.add_cookies([{"name": "_token", "value": api.headers["authorization"][7:],
                              "url": api.base}])
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            before = api.runs("etl_wine")
            dialog = _fill_trigger_form(page, api.base, "etl_wine", "#element_interval_end",
                                        "2014-01-01")
            help_text = dialog.get_by_text("a date (2013-01-05)")
            expect(help_text).to_be_visible()
            dialog.get_by_role("button", name="Trigger", exact=True).click()
            expect(dialog).to_be_hidden()
            page.screenshot(path=str(SHOTS.parent / "trigger-form-date.png"))
        finally:
            browser.close()
    r = httpx.get(f"{api.base}/api/v2/dags/etl_wine/dagRuns", headers=api.headers,
                  params={"order_by": "-run_after"})
    assert r.json()["total_entries"] == before + 1, r.text
    assert r.json()["dag_runs"][0]["conf"]["interval_end"] == "2014-01-01", r.text


def _fill_trigger_form(page, base: str, dag_id: str, field: str, typed: str):
    """Open the DAG's trigger dialog and enter ``typed`` as an operator would."""
    page.goto(f"{base}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.locator("[role=dialog][data-scope=dialog]")
    if field == "json":  # Advanced options -> Configuration JSON (a Monaco editor): paste
        dialog.get_by_text("Advanced Options").click()
        page.evaluate("text => navigator.clipboard.writeText(text)", typed)
        dialog.locator(".monaco-editor").first.click()
        for key in ("Control+A", "Delete", "Control+V"):
            page.keyboard.press(key)
        return dialog
    box = dialog.locator(field) if field.startswith("#") else dialog.get_by_label(field,
                                                                                 exact=True)
    box.fill(typed)
    box.press("Tab")  # leaving the field: a top-level minimum would clamp the value here
    assert box.input_value() == typed
    return dialog


@pytest.fixture(scope="module")
def dags_test_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """A fresh Airflow home for ``airflow dags test``; its storage root holds a link out."""
    tmp = tmp_path_factory.mktemp("refusals-dags-test")
    env, root = airflow_env(tmp)
    data = Path(root.removeprefix("file://"))
    (data / "raw").mkdir(parents=True)
    (tmp / "elsewhere").mkdir()
    (data / "raw" / "escape").symlink_to(tmp / "elsewhere")
    prepare(env)
    return env, tmp / "airflow.db"


CODE_CASES = [({"interval_end": "2014-02-30"}, ("Param interval_end='2014-02-30' refused: "
               "interval_end must be a real calendar date")),
              ({"interval_end": "2013-01-03", "source_uri": "raw/escape/date={date}/f.csv"},
               ("Param source_uri='raw/escape/date={date}/f.csv' refused: source_uri must be "
                "a path that stays inside the storage root"))]


@pytest.mark.parametrize(("conf", "reason"), CODE_CASES, ids=["feb-30", "link-out-of-root"])
def test_what_only_code_can_check_fails_the_first_task_once(dags_test_env, conf: dict,
                                                            reason: str) -> None:
    env, db = dags_test_env
    try:  # ~15 s; a retried task would keep `dags test` waiting out the retry delay
        proc = subprocess.run([str(BIN / "airflow"), "dags", "test", "etl_flights", "--conf",
                               json.dumps(conf)], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=DAGS_TEST_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"wait_for_data did not fail for good: dags test still running after "
                    f"{DAGS_TEST_TIMEOUT_S} s (waiting to retry?)")
    first = per_task(proc.stdout + proc.stderr).get("wait_for_data", [])
    assert first, (proc.stdout + proc.stderr)[-4000:]
    with sqlite3.connect(db) as conn:
        state, tries, max_tries = conn.execute(
            "SELECT state, try_number, max_tries FROM task_instance WHERE dag_id='etl_flights' "
            "AND task_id='wait_for_data' ORDER BY start_date DESC LIMIT 1").fetchone()
    assert (state, tries) == ("failed", 1) and max_tries >= 1, (state, tries, max_tries)
    # Airflow folds its pre-execute lines into a group; the first line after it is ours.
    own = first[next(i for i, ln in enumerate(first) if "::endgroup::" in ln) + 1:]
    assert reason in own[0] and "error" in own[0], "\n".join(first)
    assert own[1].find("Task failed with exception") >= 0, "\n".join(first)
    # issue 41 item 8: the reason once; the exception Airflow logs again points at it
    assert sum(reason in ln for ln in first) == 1, "\n".join(first)
