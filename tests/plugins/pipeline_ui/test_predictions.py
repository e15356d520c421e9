"""The predictions page (``pipeline_ui.predictions``): counts, the predicted distribution
against the model's test predictions with the drift verdict, and links both ways between it,
the version page and the model page. The manifests are published by ``training.score``'s own
publish step and drift figures (no model needed for the page)."""

from __future__ import annotations

import re
import sys
from html import unescape
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from tests.support import ui_fixtures as uf
from training.score.drift import distribution
from training.score.publish import predictions_uri, publish

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "plugins"))

from pipeline_ui.app import create_app
from pipeline_ui.predictions import model_id


def _publish(root: Path, window: str, model: str, predicted: list[str], source: dict,
             quarantined: int = 0) -> str:
    uri = predictions_uri(root.as_uri(), uf.DATASET, window, model)
    reference = np.array(["0"] * 80 + ["1"] * 20)
    publish(uri, "test", [pa.table({"prediction": predicted})], lambda parts: {
        "window": window, "source": source, "rows": len(predicted) + quarantined,
        "scored": len(predicted), "quarantined": quarantined,
        "quarantine": "quarantine/part-00000.parquet" if quarantined else None,
        "model": {"version": model.split("--")[0], "run": model.split("--")[1]},
        "parts": [p.to_json() for p in parts], "run_id": "scheduled__x",
        "distribution": distribution(np.array(predicted), reference, ("0", "1"))})
    return uri


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[uf.BuiltRoot, str, str]:
    built = uf.build_catalog_root(tmp_path_factory.mktemp("ui-predictions"), n_versions=2)
    version = built.versions[-1]
    model = model_id(version, built.runs[version][0])
    _publish(built.root, version, model, ["0"] * 70 + ["1"] * 30,
             {"kind": "version", "version": version})
    _publish(built.root, "raw-0123456789ab", model, ["1"] * 40 + ["0"] * 10,
             {"kind": "raw", "files": [{"uri": "file:///in/tomorrow.csv"}]}, quarantined=2)
    unpublished = built.root / "predictions" / uf.DATASET / built.versions[0] / model
    unpublished.mkdir(parents=True)
    (unpublished / "part-00000.parquet").write_bytes(b"killed")  # no manifest: not listed
    return built, version, model


@pytest.fixture(scope="module")
def client(built) -> TestClient:
    return TestClient(create_app(built[0].uri))


def _hrefs(html: str, cls: str) -> list[str]:
    return [unescape(h) for h in re.findall(rf'class="{cls}" href="([^"]+)"', html)]


def test_the_page_shows_counts_distribution_and_verdict(client, built) -> None:
    _, version, model = built
    page = client.get(f"/datasets/{uf.DATASET}/predictions/{version}/{model}")
    assert page.status_code == 200
    html = page.text
    counts = re.search(r'id="prediction-counts">(.*?)</dl>', html, re.DOTALL).group(1)
    assert "<dt>scored</dt><dd>100</dd>" in counts and "<dt>quarantined</dt><dd>0" in counts
    rows = re.findall(r'<tr class="distribution-row"><td>(\w+)</td><td class="num">(\d+)</td>'
                      r'<td class="num">([\d.]+)%</td><td class="num">(\d+)</td>', html)
    assert rows == [("0", "70", "70.0", "80"), ("1", "30", "30.0", "20")]
    verdict = re.search(r'id="drift-verdict">(.*?)</p>', html, re.DOTALL).group(1)
    assert "no drift" in verdict and "PSI 0.0" in verdict


def test_raw_rows_that_drifted_say_so_with_their_quarantine(client, built) -> None:
    _, _, model = built
    html = client.get(f"/datasets/{uf.DATASET}/predictions/raw-0123456789ab/{model}").text
    assert re.search(r'id="drift-verdict"><span class="badge bad">drifted</span>', html)
    assert "quarantine/part-00000.parquet" in html and "<dt>quarantined</dt><dd>2" in html
    assert "Raw rows with no label yet, from 1 file(s)" in html and "tomorrow.csv" in html


def test_links_both_ways_between_version_model_and_predictions(client, built) -> None:
    b, version, model = built
    run = b.runs[version][0]
    page = f"/datasets/{uf.DATASET}/predictions/{version}/{model}"
    html = client.get(f"/datasets/{uf.DATASET}/predictions/{version}/{model}").text
    assert _hrefs(html, "version-link") == [f"/datasets/{uf.DATASET}/versions/{version}"]
    assert _hrefs(html, "model-link") == [
        f"/datasets/{uf.DATASET}/versions/{version}/models/{run}"]
    from_version = client.get(f"/datasets/{uf.DATASET}/versions/{version}").text
    assert _hrefs(from_version, "predictions-link") == [page]  # its window only, not raw
    from_model = client.get(f"/datasets/{uf.DATASET}/versions/{version}/models/{run}").text
    assert sorted(_hrefs(from_model, "predictions-link")) == sorted(
        [page, f"/datasets/{uf.DATASET}/predictions/raw-0123456789ab/{model}"])
    other = client.get(f"/datasets/{uf.DATASET}/versions/{version}/models/{b.runs[version][1]}")
    assert "This model has scored nothing yet." in other.text


def test_unpublished_or_absent_predictions_are_not_found(client, built) -> None:
    b, _, model = built
    assert client.get(f"/datasets/{uf.DATASET}/predictions/{b.versions[0]}/{model}"
                      ).status_code == 404
    older = client.get(f"/datasets/{uf.DATASET}/versions/{b.versions[0]}").text
    assert "No model has scored this window yet" in older
    assert client.get(f"/datasets/{uf.DATASET}/predictions/x/..%2F..").status_code == 404
