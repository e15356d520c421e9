"""The drift column of the dataset list and the per-dataset trend (issue 34, item 5)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support import ui_fixtures as uf

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "plugins"))

from pipeline_ui.app import create_app
from pipeline_ui.trend import sparkline


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> uf.BuiltRoot:
    root = tmp_path_factory.mktemp("ui-drift") / "store"
    built = uf.build_catalog_root(root, n_versions=3)
    for version, drifted in zip(built.versions[1:], [[], ["temp", "dewp", "carrier"]]):
        path = root / "datasets" / uf.DATASET / version / "manifest.json"
        doc = json.loads(path.read_text())
        doc["validation"]["drift"] = {"against": "v", "segments": ["s"], "rows": 700,
                                      "features": [], "drifted": drifted}
        path.write_text(json.dumps(doc))
    return built


def test_the_dataset_list_says_how_many_features_drifted_and_links_the_drift_section(
        built: uf.BuiltRoot) -> None:
    html = TestClient(create_app(built.uri)).get("/").text
    cell = re.search(r'<td class="drift"><a href="([^"]+)">([^<]+)</a>', html)
    assert cell and cell.group(2) == "3 features"
    assert cell.group(1).endswith(f"/{built.versions[-1]}#drift")
    assert "not measured" in html  # the image dataset's single version has no report


def test_the_dataset_page_shows_a_trend_of_rows_drift_and_metrics(built: uf.BuiltRoot) -> None:
    html = TestClient(create_app(built.uri)).get(f"/datasets/{uf.DATASET}").text
    trend = html[html.index('id="trend"'):]
    rows = re.findall(r'<tr class="trend-row">(.*?)</tr>', trend, re.DOTALL)
    assert len(rows) == 3 and "not measured" in rows[0] and "none" in rows[1]
    assert "temp, dewp, carrier" in rows[2] and "0.7" in rows[2]  # the newest model's AUC
    assert trend.count("<svg") == 2 and "http" not in trend.split("</section>")[0].split(
        "<svg")[1]  # inline, nothing fetched


def test_a_sparkline_scales_to_its_box_and_skips_gaps() -> None:
    svg = str(sparkline([1, None, 3], "t"))
    assert 'points="0.0,22.0 120.0,2.0"' in svg and "<title>t</title>" in svg
    assert str(sparkline([None, 2], "t")) == ""


def test_features_gone_missing_are_not_said_to_have_moved(tmp_path: Path) -> None:
    """Issue 51: the version page and the list tell values that moved from missing ones."""
    version = uf.write_version(tmp_path, uf.DATASET, uf.FIRST_END)
    path = tmp_path / "datasets" / uf.DATASET / version / "manifest.json"
    doc = json.loads(path.read_text())
    rows = [{"name": "distance", "kind": "numeric", "statistic": "mean shift", "value": 0.9,
             "limit": 0.5, "drifted": True}] + [
        {"name": n, "kind": "missing", "statistic": "null share rise", "value": 0.9,
         "limit": 0.1, "drifted": True} for n in ("temp", "wind")]
    doc["validation"]["drift"] = {"against": "v", "segments": ["s"], "rows": 700,
                                  "features": rows, "drifted": ["distance", "temp", "wind"]}
    path.write_text(json.dumps(doc))
    client = TestClient(create_app(tmp_path.as_uri()))
    page = client.get(f"/datasets/{uf.DATASET}/versions/{version}").text
    said = re.search(r'<strong class="drifted">([^<]+)</strong>', page).group(1)
    assert said == ("values moved beyond their limits in distance; more values missing than "
                    "their limits allow in temp, wind")
    cell = re.search(r'<td class="drift"><a href="[^"]+">([^<]+)</a>', client.get("/").text)
    assert cell.group(1) == "1 feature, 2 with more missing values"
