"""The pipeline UI app through FastAPI's TestClient on a real storage root.

Pages, pagination, escaping of hostile stored values, 404s and path traversal; plus the
plugin as Airflow itself loads it (``airflow plugins``), with no import errors.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support import ui_fixtures as uf
from training.record import ModelRecord

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "plugins"))

from pipeline_ui import present
from pipeline_ui.app import create_app
from pipeline_ui.catalog import Catalog, InvalidName, Limits, check_relpath


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> uf.BuiltRoot:
    base = tmp_path_factory.mktemp("ui")
    (base / "secret.txt").write_text("TOP-SECRET outside the storage root")
    return uf.build_catalog_root(base / "store")


@pytest.fixture(scope="module")
def client(built: uf.BuiltRoot) -> TestClient:
    return TestClient(create_app(built.uri))


def rows(html: str, cls: str) -> list[str]:
    return re.findall(rf'<tr class="{cls}"[^>]*>(.*?)</tr>', html, flags=re.DOTALL)


def test_datasets_page_lists_safe_dataset_names_only(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    names = re.findall(r'<a href="/datasets/([^"/]+)">', r.text)
    assert names == ["digits", "flights", "hostile"]  # the "<img ...>" folder is not a listable name
    assert "onerror" not in r.text


def test_dataset_page_shows_versions_newest_first_with_their_facts(
        client: TestClient, built: uf.BuiltRoot) -> None:
    html = client.get("/datasets/flights", params={"per_page": 10}).text
    found = re.findall(r'<tr class="version-row" data-version="([^"]+)"', html)
    assert found == list(reversed(built.versions))[:10]
    assert built.incomplete not in html  # no manifest: not a version
    newest = rows(html, "version-row")[0]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", newest)).split())
    assert "train 720 eval 90 test 90" in text and "passed" in text
    assert re.search(r'class="muted small shards">6 shards</div>', newest)  # 3 splits x 2
    run_id = f"scheduled__{uf.FIRST_END.replace(day=2 + len(built.versions) - 1).isoformat()}"
    assert f'href="/dags/etl_flights/runs/{run_id.replace(":", "%3A").replace("+", "%2B")}"' \
        in newest
    assert f'href="/datasets/flights/versions/{built.versions[-1]}/validation"' in newest
    models = re.findall(r'class="model-link" href="([^"]+)"><span class="id pieces">([^<]+)</span></a>',
                        newest)
    assert [m[1] for m in models] == ["20130127T050000Z", "20130127T040000Z", "20130127T030000Z"]
    assert "incomplete" in newest and "Test › AUC" in newest and "0.71" in newest


def test_pagination_bounds(client: TestClient, built: uf.BuiltRoot) -> None:
    last = client.get("/datasets/flights", params={"page": 3, "per_page": 10}).text
    assert len(rows(last, "version-row")) == len(built.versions) - 20
    assert 'rel="prev"' in last and 'rel="next"' not in last
    capped = client.get("/datasets/flights", params={"per_page": 5000}).text
    assert len(rows(capped, "version-row")) == len(built.versions)  # clamped to 100 per page
    beyond = client.get("/datasets/flights", params={"page": 99})
    assert beyond.status_code == 404 and "there is no page 99: 2 page(s)" in beyond.text
    assert client.get("/datasets/flights", params={"page": 0}).status_code == 400
    assert client.get("/datasets/flights", params={"per_page": 10**9}).status_code == 400


def test_listing_is_capped_at_max_items(built: uf.BuiltRoot) -> None:
    capped = TestClient(create_app(built.uri, limits=Limits(max_items=7, default_page_size=5)))
    html = capped.get("/datasets/flights", params={"page": 2}).text
    assert len(rows(html, "version-row")) == 2
    assert "listing capped at 7" in html


def test_version_page_reads_manifest_and_shards(client: TestClient, built: uf.BuiltRoot) -> None:
    version = built.versions[-1]
    r = client.get(f"/datasets/flights/versions/{version}", params={"per_page": 4})
    assert r.status_code == 200
    html = r.text
    manifest = json.loads((built.root / "datasets/flights" / version / "manifest.json").read_text())
    shards = [s for split in manifest["splits"].values() for s in split["shards"]]
    assert len(rows(html, "shard-row")) == 4 and "page 1 of 2" in html
    assert shards[0]["file"] in html and shards[0]["sha256"][:16] in html
    assert "<code>carrier</code>" in html and "1,039.9" in html and "538,000" in html
    assert "shape=[8, 8, 1], encoding=png" in html
    assert len(rows(html, "model-row")) == 3
    assert "&#34;format_version&#34;: 1" in html  # raw manifest, escaped, in <details>


def test_model_page_metrics_plots_and_card(client: TestClient, built: uf.BuiltRoot) -> None:
    version, run = built.versions[-1], built.runs[built.versions[-1]][0]
    html = client.get(f"/datasets/flights/versions/{version}/models/{run}").text
    assert len(rows(html, "metric-row")) == 3 and "Examples per second" in html
    base = f"/datasets/flights/versions/{version}/models/{run}/files/"
    plots = re.findall(r'<img src="([^"]+)" alt="[^"]*"></a><figcaption>', html)
    assert plots == [base + "learning_curves.png", base + "plots/auc.png"]
    for src in plots:
        img = client.get(src)
        assert img.status_code == 200 and img.headers["content-type"] == "image/png"
        assert img.content.startswith(b"\x89PNG")
    assert "<h1>Model card: flights" in html and "<table>" in html
    assert f'<img src="{base}learning_curves.png" alt="learning curves"' in html


def test_incomplete_run_is_shown_without_metrics(client: TestClient, built: uf.BuiltRoot) -> None:
    html = client.get(f"/datasets/flights/versions/{built.versions[-1]}/models/20130127T050000Z")
    assert html.status_code == 200 and "No metrics.json" in html.text


def test_everything_stored_is_escaped(client: TestClient, built: uf.BuiltRoot) -> None:
    version = built.hostile_version
    pages = ["/", "/datasets/hostile", f"/datasets/hostile/versions/{version}",
             f"/datasets/hostile/versions/{version}/models/run1"]
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, url
        own = r.text.lower().replace('<script src="/static/ui.js"></script>', "", 1)
        assert "<script" not in own, url  # only our own static script
        assert "onerror=" not in r.text.replace("onerror=alert(1)&gt;", ""), url
        assert "href=\"javascript" not in r.text, url
    version_html = client.get(pages[2]).text
    assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in version_html
    model_html = client.get(pages[3]).text
    assert "&lt;script&gt;" in model_html and "&lt;img src=x onerror=alert(1)&gt;" in model_html
    assert "script-src 'self';" in r.headers["content-security-policy"]  # our file only
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_data_docs_are_served_sandboxed(client: TestClient, built: uf.BuiltRoot) -> None:
    base = f"/datasets/flights/versions/{built.versions[0]}/files/validation"
    r = client.get(f"{base}/index.html")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert csp.startswith("sandbox ") and "allow-scripts" not in csp and "script-src 'none'" in csp
    assert client.get(f"{base}/static/docs.css").headers["content-type"].startswith("text/css")
    assert client.get(f"{base}/validations/flights_suite/run.html").status_code == 200
    assert client.get(f"{base}/results.json").json()["success"] is True
    manifest = f"/datasets/flights/versions/{built.versions[0]}/files/manifest.json"
    assert client.get(manifest).status_code == 404  # only validation/ is served


@pytest.mark.parametrize("url", [
    "/datasets/..%2F..%2Fsecret.txt",
    "/datasets/%2e%2e/versions/x",
    "/datasets/flights/versions/{v}/files/validation/..%2F..%2F..%2F..%2Fsecret.txt",
    "/datasets/flights/versions/{v}/files/validation/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt",
    "/datasets/flights/versions/{v}/files/validation//etc/passwd",
    "/datasets/flights/versions/{v}/models/..%2F..%2F..%2F..%2F/files/secret.png",
    "/datasets/flights/versions/{v}/models/{run}/files/..%2F..%2F..%2F..%2F..%2Fsecret.txt",
    "/datasets/flights/versions/{v}/models/{run}/files/plots/..%2F..%2Fmetrics.json",
    "/datasets/flights/versions/{v}/models/{run}/files/model.keras",
])
def test_path_traversal_is_refused(client: TestClient, built: uf.BuiltRoot, url: str) -> None:
    v = built.versions[-1]
    r = client.get(url.format(v=v, run=built.runs[v][0]))
    assert r.status_code in (400, 404), (url, r.status_code)
    assert "TOP-SECRET" not in r.text and "PK\x03\x04" not in r.text


@pytest.mark.parametrize("url,status", [
    ("/datasets/nope", 404),
    ("/datasets/flights/versions/20990101T000000Z_all", 404),
    ("/datasets/flights/versions/{incomplete}", 404),
    ("/datasets/flights/versions/{v}/models/nope", 404),
    ("/datasets/flights/versions/{incomplete}/files/validation/index.html", 404),
    ("/datasets/fl..ights", 400),
])
def test_missing_things_are_404(client: TestClient, built: uf.BuiltRoot, url: str,
                                status: int) -> None:
    r = client.get(url.format(v=built.versions[-1], incomplete=built.incomplete))
    assert r.status_code == status, r.text
    assert "<h1>" in r.text and "All datasets" in r.text


def test_empty_root_renders(tmp_path: Path) -> None:
    r = TestClient(create_app(f"file://{tmp_path}")).get("/")
    assert r.status_code == 200 and "Nothing has been published" in r.text


def test_name_checks_and_key_metrics() -> None:
    assert check_relpath("validation/a.html", "p") == ["validation", "a.html"]
    for bad in ("../x", "a/../b", "/abs", "a//b", ".hidden", "a\\b", ""):
        with pytest.raises(InvalidName):
            check_relpath(bad, "p")
    metrics = ModelRecord.from_json(
        {"test_auc": 0.7, "eval": {"auc": 0.69, "loss": 0.4}, "baseline": {"auc": 0.5},
         "accuracy": 0.8, "test": {"loss": 0.41}}, "metrics.json")
    assert present.key_metrics(metrics) == [("test_auc", 0.7), ("accuracy", 0.8),
                                            ("test.loss", 0.41)]
    assert present.human_bytes(1536) == "1.5 KiB" and present.human_bytes(12) == "12 B"


def test_catalog_serves_only_complete_versions(built: uf.BuiltRoot) -> None:
    catalog = Catalog(built.uri)
    ids, truncated = catalog.version_ids("flights")
    assert ids == list(reversed(built.versions)) and not truncated


def test_airflow_loads_the_plugin(tmp_path: Path, built: uf.BuiltRoot) -> None:
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "PIPELINE_STORAGE_ROOT": built.uri,
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db"}
    out = subprocess.run([str(Path(sys.executable).parent / "airflow"), "plugins", "-o", "json"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    plugins = json.loads(out.stdout[out.stdout.index("["):])
    ours = [p for p in plugins if str(p["source"]).startswith("$PLUGINS_FOLDER")]
    # one plugin from our folder: the pipeline_ui package modules are not imported on their own
    assert [p["name"] for p in ours] == ["pipeline_ui"], out.stdout
    assert "Failed to import plugin" not in out.stderr, out.stderr[-3000:]
    assert ours[0]["source"].endswith("pipeline_ui_plugin.py")
    assert ours[0]["fastapi_apps"][0]["url_prefix"] == "/pipeline"
    view = ours[0]["external_views"][0]
    assert (view["url_route"], view["href"], view["destination"]) == (
        "pipeline-datasets", "/pipeline/", "nav")


@pytest.mark.integration
def test_pages_on_a_gcs_root(gcs_root: str, tmp_path: Path) -> None:
    """The same pages from gs:// (the GCS emulator): listings, manifest, plots, Data Docs."""
    from etl import storage

    local = uf.build_catalog_root(tmp_path / "root", n_versions=2)
    fs, path = storage.get_fs(gcs_root)
    fs.put(str(local.root) + "/", path, recursive=True)
    client = TestClient(create_app(gcs_root))
    html = client.get("/datasets/flights").text
    found = re.findall(r'<tr class="version-row" data-version="([^"]+)"', html)
    assert found == list(reversed(local.versions))  # the incomplete one is still left out
    version, run = local.versions[-1], local.runs[local.versions[-1]][0]
    assert len(rows(client.get(f"/datasets/flights/versions/{version}").text, "shard-row")) == 6
    model = client.get(f"/datasets/flights/versions/{version}/models/{run}").text
    assert "Test › AUC" in model and "<h1>Model card" in model
    png = client.get(f"/datasets/flights/versions/{version}/models/{run}/files/plots/auc.png")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    docs = client.get(f"/datasets/flights/versions/{version}/files/validation/index.html")
    assert docs.status_code == 200 and "Validation results" in docs.text
    assert client.get("/datasets/flights/versions/20990101T000000Z_all").status_code == 404


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One day of flights published by the real ETL, plus a model run beside it."""
    root, version = uf.real_etl_root(tmp_path_factory)
    uf.add_model_run(root, uf.DATASET, version, "20130102T060000Z")
    return root, version


def test_pages_on_a_version_from_the_real_etl(real: tuple[Path, str]) -> None:
    root, version = real
    manifest = json.loads((root / "datasets/flights" / version / "manifest.json").read_text())
    client = TestClient(create_app(root.as_uri()))
    html = client.get("/datasets/flights").text
    (row,) = rows(html, "version-row")
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", row)).split())
    for split, info in manifest["splits"].items():
        assert f"{split} {info['num_examples']:,}" in text
    assert "passed" in text and "20130102T060000Z" in text
    quoted = uf.REAL_RUN_ID.replace(":", "%3A").replace("+", "%2B")
    assert f'href="/dags/etl_flights/runs/{quoted}"' in row
    page = client.get(f"/datasets/flights/versions/{version}").text
    n_shards = sum(len(s["shards"]) for s in manifest["splits"].values())
    assert len(rows(page, "shard-row")) == n_shards
    assert len(rows(page, "expectation-row")) == len(manifest["validation"]["expectations"])
    for feature in manifest["schema"]["features"]:
        assert f"<code>{feature}</code>" in page
    docs = client.get(f"/datasets/flights/versions/{version}/files/validation/index.html")
    assert docs.status_code == 200 and "Great Expectations" in docs.text


def test_links_are_relative_to_the_mount_point(built: uf.BuiltRoot) -> None:
    """Mounted like Airflow mounts it (under a prefix, itself under a base path)."""
    from fastapi import FastAPI

    airflow_like = FastAPI(root_path="/airflow")
    airflow_like.mount("/pipeline", create_app(built.uri, url_prefix="/pipeline"))
    client = TestClient(airflow_like)
    html = client.get("/airflow/pipeline/datasets/flights").text
    newest = rows(html, "version-row")[0]
    assert f'href="/airflow/pipeline/datasets/flights/versions/{built.versions[-1]}"' in newest
    assert 'href="/airflow/dags/etl_flights/runs/scheduled__' in newest
    assert 'href="/airflow/pipeline/static/style.css"' in html
    assert client.get("/airflow/pipeline/static/style.css").status_code == 200


def test_version_page_names_a_binary_labels_positive_class(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    root = tmp_path / "store"
    version = uf.write_version(root, "churn", datetime(2024, 1, 2, tzinfo=UTC))
    path = root / "datasets" / "churn" / version / "manifest.json"
    doc = json.loads(path.read_text())
    doc["schema"]["label"].update(task="binary", positive=["yes"])
    path.write_text(json.dumps(doc))
    html = TestClient(create_app(root.as_uri())).get(f"/datasets/churn/versions/{version}").text
    assert "class 1, the positive class: <code>yes</code>" in html


def test_each_version_says_its_training_and_scoring_state(tmp_path: Path) -> None:
    """The dataset and version pages read the states the runs read (training.ledger): done
    with its run, superseded by which version, failed with why, or waiting for what."""
    from datetime import UTC, datetime

    from training import ledger

    root = tmp_path / "store"
    old, mid, new = (uf.write_version(root, "flights", datetime(2013, 1, d, tzinfo=UTC))
                     for d in (2, 3, 4))
    model = root / "models" / "flights" / new / "asset_triggered__9" / "metrics.json"
    model.parent.mkdir(parents=True)
    model.write_text(json.dumps({"dataset": "flights", "version": new, "dag_id": "train_flights",
                                 "run_id": "asset_triggered__9"}))
    ledger.record(root.as_uri(), ledger.VersionState(old, ledger.TRAINING, ledger.SUPERSEDED,
                                                     by=new, run="run asset_triggered__9 of "
                                                     "train_flights"), "flights")
    ledger.fail(root.as_uri(), "flights", ledger.SCORING, new, "run scheduled__3",
                "NoModelError: its serving signature lacks temp")
    client = TestClient(create_app(root.as_uri()))
    html = client.get("/datasets/flights").text
    rows = dict(re.findall(r'<tr class="version-row" data-version="([^"]+)"(.*?)</tr>', html,
                           flags=re.DOTALL))

    def said(version: str) -> list[str]:  # the dataset page: each badge, its line on hover
        return [" ".join(unescape(t).split()) for t in
                re.findall(r'<div class="version-state"[^>]* title="([^"]*)"', rows[version])]

    assert said(new) == ["training: done trained by run asset_triggered__9 of train_flights",
                         ("scoring: failed in run scheduled__3: NoModelError: its serving "
                          "signature lacks temp")]
    assert said(mid)[0] == "training: waiting for a training run"
    assert said(old)[0] == (f"training: superseded by {new} (trained by run "
                            "asset_triggered__9 of train_flights)")
    assert said(old)[1] == "scoring: waiting for a scoring run with a blessed model"
    page = unescape(client.get(f"/datasets/flights/versions/{new}").text)
    assert "training: done" in page and "scoring: failed" in page
