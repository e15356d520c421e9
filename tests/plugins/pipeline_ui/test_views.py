"""Every page of the pipeline UI for every shipped dataset kind, and every link on it (issue 17).

The crawl starts at the datasets page and follows each link the app itself serves; every one
must answer 200. Links into the Airflow UI (``/dags/...``) are checked for shape here and
followed for real in tests/e2e/test_ui_browser.py. Then each reported defect, one test each.
"""

from __future__ import annotations

import json
import re
import sys
from html import unescape
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import pytest
from fastapi.testclient import TestClient

from tests.support import ui_fixtures as uf
from training.record import ModelRecord

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "plugins"))

from pipeline_ui.app import create_app

MAX_PAGES = 400


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> uf.BuiltRoot:
    return uf.build_catalog_root(tmp_path_factory.mktemp("ui-pages") / "store", n_versions=3)


@pytest.fixture(scope="module")
def client(built: uf.BuiltRoot) -> TestClient:
    return TestClient(create_app(built.uri))


def links(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'(?:href|src)="([^"]+)"', html)]


def crawl(client: TestClient, start: str = "/") -> dict[str, int]:
    """Breadth-first over the app's own links; returns url -> status, Airflow links apart."""
    seen: dict[str, int] = {}
    queue = [start]
    while queue and len(seen) < MAX_PAGES:
        url = queue.pop(0)
        if url in seen:
            continue
        r = client.get(url)
        seen[url] = r.status_code
        if r.status_code != 200 or not r.headers["content-type"].startswith("text/html"):
            continue
        for href in links(r.text):
            target = urldefrag(urljoin(url, href))[0]
            if target.startswith("/dags/"):
                assert re.match(r"^/dags/etl_\w+/runs/[^/]+$", target), target
                continue
            if target.startswith("/") and target not in seen:
                queue.append(target)
    return seen


def test_every_link_on_every_page_resolves(client: TestClient, built: uf.BuiltRoot) -> None:
    seen = crawl(client)
    broken = {u: s for u, s in seen.items() if s != 200}
    assert not broken, broken
    image = uf.vid(uf.FIRST_END)
    for kind_pages in (
        [f"/datasets/flights/versions/{built.versions[-1]}",
         f"/datasets/flights/versions/{built.versions[-1]}/validation",
         f"/datasets/flights/versions/{built.versions[-1]}/models/{built.runs[built.versions[-1]][0]}"],
        ["/datasets/digits", f"/datasets/digits/versions/{image}",
         f"/datasets/digits/versions/{image}/validation",
         f"/datasets/digits/versions/{image}/models/20130102T050000Z"],
    ):
        assert set(kind_pages) <= set(seen), sorted(seen)


def test_image_version_pages_render(client: TestClient) -> None:
    """digits stores a file count, not a file list, as its source fingerprint (was a 500)."""
    version = uf.vid(uf.FIRST_END)
    html = client.get(f"/datasets/digits/versions/{version}").text
    assert "121 files" in html and not re.search(r"over [\d,]+ files", html)
    assert "Quarantine limit (rows)" in html
    page = client.get(f"/datasets/digits/versions/{version}/validation")
    assert page.status_code == 200 and "raw/digits/3/bad.png" in page.text
    assert "undecodable: &lt;script&gt;" in page.text and "<script>alert" not in page.text
    assert f'href="/datasets/digits/versions/{version}"' in page.text  # linked back


def test_validation_page_shows_each_expectation(client: TestClient, built: uf.BuiltRoot) -> None:
    version = built.versions[-1]
    html = client.get(f"/datasets/flights/versions/{version}/validation").text
    checks = re.findall(r'<tr class="check-row( failed)?">(.*?)</tr>', html, flags=re.DOTALL)
    assert [bool(f) for f, _ in checks] == [True, False]  # failures first
    failed = " ".join(unescape(re.sub(r"<[^>]+>", " ", checks[0][1])).split())
    assert "distance" in failed and "column values to be between" in failed
    assert "3 (0.33%)" in failed and "903" in failed and '[-1.0, 99999.0, "UA"]' in failed
    version_page = client.get(f"/datasets/flights/versions/{version}").text
    assert f'href="/datasets/flights/versions/{version}/validation"' in version_page
    assert f'href="/datasets/flights/versions/{version}#validation"' in html


@pytest.mark.parametrize("url", ["/datasets/flights/versions/not-a-version",
                                 "/datasets/flights/versions/2013",
                                 "/datasets/digits/versions/20130102T000000Z_x/validation"])
def test_malformed_version_ids_are_404_pages(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code == 404 and '<a class="brand"' in r.text and "<h1>Not found</h1>" in r.text


@pytest.mark.parametrize("query", ["page=abc", "page=0", "per_page=x", "page=1.5"])
def test_bad_query_parameters_are_400_pages(client: TestClient, query: str) -> None:
    r = client.get(f"/datasets/flights?{query}")
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/html")
    message = unescape(re.search(r'class="error-message">([^<]*)<', r.text).group(1))
    name = query.split("=")[0]
    assert message.startswith(f"{name} must be a whole number") and "\n" not in message


def test_error_pages_do_not_show_the_storage_root(built: uf.BuiltRoot) -> None:
    anonymous = TestClient(create_app(built.uri, airflow_auth=True))
    r = anonymous.get("/datasets/flights", headers={"accept": "application/json"})
    assert r.status_code in (401, 403) and str(built.root) not in r.text
    r = TestClient(create_app(built.uri)).get("/datasets/nope")
    assert r.status_code == 404 and str(built.root) not in r.text


def test_version_page_uses_readable_labels(client: TestClient, built: uf.BuiltRoot) -> None:
    html = client.get(f"/datasets/flights/versions/{built.versions[-1]}").text
    shown = re.sub(r"<pre>.*?</pre>", "", html, flags=re.DOTALL)  # the raw manifest aside
    assert "Timings (s) › Row level task CPU" in unescape(shown)
    assert "timings_s" not in shown and "row_level" not in shown


def test_task_metric_names_read_as_their_abbreviations() -> None:
    """Multi-class and regression metrics as a reader writes them, not "Macro f1" or "Rmse"."""
    from pipeline_ui import views

    shown = [views.label(k) for k in ("macro_f1", "rmse", "mae", "r2", "test.per_class")]
    assert shown == ["Macro-F1", "RMSE", "MAE", "R²", "Test › Per class"]


def test_model_page_groups_metrics(client: TestClient, built: uf.BuiltRoot) -> None:
    version, run = built.versions[-1], built.runs[built.versions[-1]][0]
    html = client.get(f"/datasets/flights/versions/{version}/models/{run}").text
    head = re.search(r'<table class="grid narrow" id="metric-table">.*?<thead>(.*?)</thead>',
                     html, flags=re.DOTALL).group(1)
    assert re.findall(r"<th[^>]*>([^<]+)</th>", head) == [
        "Metric", "test", "eval", "baseline", "test 95% interval", "lead over baseline"]
    auc = re.search(r'<tr class="metric-row"><td>AUC</td>(.*?)</tr>', html).group(1)
    stored = json.loads((built.root / "models/flights" / version / run / "metrics.json").read_text())
    ci = stored["test"]["intervals"]
    assert re.findall(r"<td[^>]*>([^<]+)</td>", auc)[-2:] == [
        f"{lo:#.4g} – {hi:#.4g}" for lo, hi in (ci["metrics"]["auc"], ci["lead_over_baseline"]["auc"])]
    assert len(re.findall(r'<tr class="history-row">', html)) == 3  # a table, not "[3 items]"
    assert "items]" not in html
    base = f"/datasets/flights/versions/{version}/models/{run}/files/"
    assert f'<a href="{base}learning_curves.png"><code>learning_curves.png</code></a>' in html
    assert '<a href="#raw"><code>metrics.json</code></a>' in html


def test_airflow_links_leave_the_frame(client: TestClient, built: uf.BuiltRoot) -> None:
    html = client.get(f"/datasets/flights/versions/{built.versions[-1]}").text
    assert re.search(r'<a class="dagrun" target="_top" href="/dags/etl_flights/runs/', html)
    assert '<script src="/static/ui.js"></script>' in html
    js = client.get("/static/ui.js")
    assert js.status_code == 200 and "pushState" in js.text and "popstate" in js.text


def test_dark_mode_follows_airflow_and_the_system(client: TestClient) -> None:
    css = client.get("/static/style.css").text
    assert ':root[data-theme="dark"]' in css and "prefers-color-scheme: dark" in css
    js = client.get("/static/ui.js").text
    assert 'contains("dark")' in js and 'getItem("theme")' in js


def test_unknown_things_are_named_in_the_plugins_own_404(client: TestClient,
                                                         built: uf.BuiltRoot) -> None:
    """Issue 29 item 5: no "no manifest.json" for what is not there, no bare JSON 404, no ∞."""
    version = built.versions[-1]
    cases = {"/datasets/nosuch": "dataset &#39;nosuch&#39; does not exist",
             f"/datasets/nosuch/versions/{version}": "dataset &#39;nosuch&#39; does not exist",
             "/datasets/flights/versions/20990101T000000Z_all":
                 "dataset &#39;flights&#39; has no version &#39;20990101T000000Z_all&#39;",
             f"/datasets/flights/versions/{version}?page=9": "there is no page 9: 1 page(s)",
             "/no/such/page": "there is no page at /no/such/page"}
    for url, text in cases.items():
        r = client.get(url)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), url
        assert text in r.text and "manifest.json" not in r.text, (url, r.text[-600:])
    r = client.get("/datasets/flights", params={"page": 0})
    assert r.status_code == 400 and "page must be a whole number, 1 or more" in r.text
    assert "∞" not in r.text


def test_model_run_id_link_and_hyperparameters_as_a_reader_says_them() -> None:
    """Issue 29 item 6: the folder `run_name` made from an Airflow run id gives the id back."""
    from pipeline_ui import views

    run = "manual__2026-11-24T20:01:02.123456+00:00"
    assert views.training_run("manual__2026-11-24T20_01_02.123456_00_00", "wine", None) == (
        run, "train_wine")
    assert views.training_run("20130102T060000Z", "wine", ModelRecord()) == (
        "20130102T060000Z", None)
    assert views.training_run("x", "wine", ModelRecord.of(run_id=run, dag_id="t")) == (run, "t")
    rows = dict(views.hyperparameter_rows({"devices": [], "step_budget": None, "epochs": 10,
                                           "input": {"cycle_length": -1, "batch_size": 64}}))
    assert rows == {"Devices": "all visible", "Step budget": "auto", "Epochs": 10,
                    "Input › Cycle length": "auto", "Input › Batch size": 64}
    card = "# Card\n\n## Metrics\n\nm\n\n## Hyperparameters\n\n| a | b |\n\n## After\n\nz\n"
    assert views.card_without(card, "Hyperparameters") == "# Card\n\n## Metrics\n\nm\n\n## After\n\nz\n"


def test_a_tuned_models_page_shows_its_tuned_settings_and_an_untuned_one_says_so(
        tmp_path: Path) -> None:
    """Issue 41: the settings `python -m training tune` chose, on the model page."""
    version = uf.write_version(tmp_path, "flights", uf.FIRST_END)
    tuned = uf.add_model_run(tmp_path, "flights", version, "run-tuned")
    uf.add_model_run(tmp_path, "flights", version, "run-plain")
    metrics = json.loads((tuned / "metrics.json").read_text())
    metrics["tuned"] = {"tuned_at": "2026-11-27T10:00:00Z", "version": version, "trials": 12,
                        "family": "trees", "settings": {"num_leaves": 127,
                                                        "tree_learning_rate": 0.031},
                        "metric": "auc", "eval": 0.8123,
                        "default_eval": {"trees": 0.8011, "mlp": 0.7702},
                        "overridden": ["min_data_in_leaf"]}
    (tuned / "metrics.json").write_text(json.dumps(metrics))
    client = TestClient(create_app(tmp_path.as_uri()))
    page = client.get(f"/datasets/flights/versions/{version}/models/run-tuned").text
    section = re.sub(r"<[^>]+>", " ", page.split('id="tuned"', 1)[1].split("</section>")[0])
    text = " ".join(unescape(section).split())
    assert f"2026-11-27T10:00:00Z on version {version}, 12 trials" in text
    assert "Family trees Num leaves 127 Tree learning rate 0.031 " in text
    assert "Eval auc 0.8123" in text and "Eval auc at trees defaults 0.8011" in text
    assert "Set by the spec or a flag instead min_data_in_leaf" in text
    plain = client.get(f"/datasets/flights/versions/{version}/models/run-plain").text
    assert "Not tuned: the defaults and the spec" in plain
    metrics["tuned"]["judged"] = "2 x 5-fold cross-validation of train and eval, mean"
    (tuned / "metrics.json").write_text(json.dumps(metrics))  # a small table's search
    page = client.get(f"/datasets/flights/versions/{version}/models/run-tuned").text
    section = re.sub(r"<[^>]+>", " ", page.split('id="tuned"', 1)[1].split("</section>")[0])
    text = " ".join(unescape(section).split())
    assert "auc by 2 x 5-fold cross-validation of train and eval, mean 0.8123" in text
    assert "Eval auc" not in text


def _judged(rdir: Path, version: str, blessed: bool, reason: str) -> None:
    """Give a stored run the verdict training writes (metrics.json ``blessing``)."""
    metrics = json.loads((rdir / "metrics.json").read_text())
    check = {"name": "baseline:auc", "passed": blessed, "detail": reason}
    metrics.update(dataset="flights", version=version, run=rdir.name,
                   blessing={"blessed": blessed, "reasons": [] if blessed else [reason],
                             "checks": [check]})
    (rdir / "metrics.json").write_text(json.dumps(metrics))


def test_model_pages_show_blessed_or_not_and_why_and_which_is_current(tmp_path: Path) -> None:
    version = uf.write_version(tmp_path, "flights", uf.FIRST_END)
    good = uf.add_model_run(tmp_path, "flights", version, "run-good")
    bad = uf.add_model_run(tmp_path, "flights", version, "run-bad", auc=0.5)
    _judged(good, version, True, "beats the majority-class baseline: auc 0.7100 vs 0.5000")
    _judged(bad, version, False, "beats the majority-class baseline: auc 0.5000 vs 0.5000, "
                                 "needs >= 0.5100 (margin 0.01)")
    client = TestClient(create_app(tmp_path.as_uri()))
    page = client.get(f"/datasets/flights/versions/{version}/models/run-bad").text
    assert "flights has no current model" in page  # nothing promoted yet
    (tmp_path / "models" / "flights" / "current.json").write_text(json.dumps(
        {"dataset": "flights", "version": version, "run": "run-good", "model_uri": "x",
         "metric": "auc", "value": 0.71, "blessed_at": "2026-01-01T00:00:00Z"}))
    listing = client.get(f"/datasets/flights/versions/{version}").text
    rows = {re.sub(r"<[^>]+>", "", run): cells for run, cells in re.findall(
        r'<tr class="model-row"><td><a[^>]*>(.*?)</a></td>(.*?)</tr>', listing, flags=re.DOTALL)}
    assert "current</span>" in rows["run-good"] and ">blessed</span>" in rows["run-good"]
    assert ">not blessed</span>" in rows["run-bad"] and "current</span>" not in rows["run-bad"]
    assert "needs &gt;= 0.5100 (margin 0.01)" in rows["run-bad"]  # why, in its title
    page = unescape(client.get(f"/datasets/flights/versions/{version}/models/run-bad").text)
    assert "Not blessed" in page and "needs >= 0.5100 (margin 0.01)" in page
    assert f"the current model of flights is {version} / run-good" in re.sub(r"<[^>]+>", "", page)
    good_page = client.get(f"/datasets/flights/versions/{version}/models/run-good").text
    assert "this is the current model of flights" in good_page
    dataset_page = client.get("/datasets/flights").text
    assert ">not blessed</span>" in dataset_page and "current</span>" in dataset_page


# ---- issue 34: the rough edges of item 6, and runs from Airflow ---------------------------

def test_an_image_versions_sources_count_the_folders_files(tmp_path: Path) -> None:
    """A segment-composed images version lists its folder once with the file count inside."""
    from pipeline_ui import views

    from etl.versions import Manifest

    manifest = Manifest.from_json({"source_fingerprint": {"sha256": "ab", "files": [
        {"uri": "file:///r/raw/digits", "files": 1797, "sha256": "cd"}]}}, "test")
    assert views.fingerprint(manifest).count == 1797


def test_key_metrics_in_listings_read_evenly(client: TestClient, built: uf.BuiltRoot) -> None:
    html = client.get("/datasets/flights").text
    shown = re.findall(r'<span class="metric"><span class="mname">[^<]+</span> ([^<]+)</span>',
                       html)
    assert shown and all(re.fullmatch(r"\d\.\d{4}", v) for v in shown), shown  # not 0.8


class FakeRuns:
    """The plugin's run source as Airflow's DB would answer (the browser test reads a real one)."""

    def __init__(self, names: set[str], rows: list) -> None:
        self.names, self.rows = names, rows

    def dataset_names(self) -> set[str]:
        return self.names

    def recent(self, dataset: str, limit: int = 10) -> list:
        return [r for r in self.rows if r.dag_id.endswith(f"_{dataset}")]


def test_a_dataset_with_dags_but_no_version_is_listed_with_its_runs(built: uf.BuiltRoot) -> None:
    from datetime import UTC, datetime

    from pipeline_ui.runs import RunRow

    when = datetime(2026, 11, 25, 0, 5, tzinfo=UTC)
    rows = [RunRow("etl_newdata", "scheduled__2026-11-25T00:00:00+00:00", "scheduled",
                   "deferred", when, when, None, "wait_for_data deferred"),
            RunRow("etl_newdata", "manual__2026-11-24T10:00:00+00:00_Ab12CdEf", "manual",
                   "failed", when, when, when, "wait_for_data failed")]
    client = TestClient(create_app(built.uri, runs=FakeRuns({"newdata", "flights"}, rows)))
    listing = client.get("/").text
    assert 'href="/datasets/newdata"' in listing and "none yet" in listing
    page = client.get("/datasets/newdata")
    assert page.status_code == 200 and "No version yet" in page.text
    states = re.findall(r'<tr class="run-row" data-state="(\w+)">', page.text)
    assert states == ["deferred", "failed"], states
    assert 'href="/dags/etl_newdata/runs/manual__2026-11-24T10%3A00%3A00%2B00%3A00_Ab12CdEf"' \
        in page.text and "wait_for_data deferred" in page.text
    assert client.get("/datasets/nodags").status_code == 404  # neither DAGs nor a folder
    assert "Recent DAG runs" in client.get("/datasets/flights").text
    assert "Recent DAG runs" not in TestClient(create_app(built.uri)).get(
        "/datasets/flights").text  # standalone: no run source


# ---- issue 51 item 8: words a trees model and its figures are read in ---------------------

def _trees_run(root: Path, version: str, **extra: object) -> Path:
    """A trees run as training writes it: ``epochs*`` keys counting boosting rounds, the
    kept family's own fit beside the whole fit phase."""
    rdir = uf.add_model_run(root, "flights", version, "run-trees", auc=0.7788)
    metrics = json.loads((rdir / "metrics.json").read_text())
    metrics.update(family="trees", epochs=3000, epochs_run=183, best_epoch=83,
                   resumed_from_epoch=0, fit_seconds=0.68,
                   phases={"fit": {"seconds": 22.01, "cpu_s": 9.1, "peak_rss_mb": 997.2}},
                   **extra)
    (rdir / "metrics.json").write_text(json.dumps(metrics))
    return rdir


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_a_trees_model_page_counts_boosting_rounds_not_epochs(tmp_path: Path) -> None:
    """The page said "Epochs 3,000" and "183 epochs" of a LightGBM model."""
    version = uf.write_version(tmp_path, "flights", uf.FIRST_END)
    _trees_run(tmp_path, version)
    page = TestClient(create_app(tmp_path.as_uri())).get(
        f"/datasets/flights/versions/{version}/models/run-trees").text
    facts = _text(page.split('id="run-facts"', 1)[1].split("</dl>", 1)[0])
    assert "Boosting rounds (at most) 3,000" in facts and "Boosting rounds run 183" in facts
    assert "Best round 83" in facts and "poch" not in facts, facts
    history = _text(page.split('id="history"', 1)[1].split("</section>", 1)[0])
    assert "Training history 3 boosting rounds Round Loss" in history and "poch" not in history
    mlp = uf.add_model_run(tmp_path, "flights", version, "run-mlp")  # a network keeps its epochs
    metrics = json.loads((mlp / "metrics.json").read_text())
    (mlp / "metrics.json").write_text(json.dumps({**metrics, "family": "mlp", "epochs_run": 3}))
    page = TestClient(create_app(tmp_path.as_uri())).get(
        f"/datasets/flights/versions/{version}/models/run-mlp").text
    assert "Epochs run 3" in _text(page) and "3 epochs Epoch" in _text(page)


def test_the_kept_familys_fit_and_the_fit_phase_are_told_apart(tmp_path: Path) -> None:
    """"Fit time 0.68 s" beside "Phases › Fit 22.01 s": the first is the kept family's own
    fit, the second the whole phase (each family tried, the choice)."""
    version = uf.write_version(tmp_path, "flights", uf.FIRST_END)
    _trees_run(tmp_path, version)
    page = TestClient(create_app(tmp_path.as_uri())).get(
        f"/datasets/flights/versions/{version}/models/run-trees").text
    facts = _text(page.split('id="run-facts"', 1)[1].split("</dl>", 1)[0])
    assert "Own fit of the kept family, trees (s) 0.68" in facts, facts
    assert "Phases › Whole fit phase (each family tried, the choice) › Seconds 22.01" in facts
    assert "Fit time" not in facts and "Phases › Fit ›" not in facts


def test_a_small_tables_page_names_its_out_of_fold_figures(tmp_path: Path) -> None:
    """A small table's eval figures are its out-of-fold ones, which its verdict judged: the
    column and the verdict say so, so 0.7784 beside the test's 0.7788 is two figures."""
    version = uf.write_version(tmp_path, "flights", uf.FIRST_END)
    check = {"name": "baseline:auc", "passed": True, "detail": "auc 0.7784 vs 0.5"}
    _trees_run(tmp_path, version, cross_validation={"out_of_fold": {"auc": 0.7784}},
               blessing={"blessed": True, "reasons": [], "checks": [check]})
    page = TestClient(create_app(tmp_path.as_uri())).get(
        f"/datasets/flights/versions/{version}/models/run-trees").text
    head = re.search(r'id="metric-table">.*?<thead>(.*?)</thead>', page, re.DOTALL).group(1)
    assert re.findall(r"<th[^>]*>([^<]+)</th>", head)[:3] == ["Metric", "test", "out-of-fold"]
    assert "verdict's baseline checks judged the out-of-fold answers" in _text(page)
