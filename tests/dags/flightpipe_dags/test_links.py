"""Links from Airflow to the pipeline UI (issue 34): the pages the extra links and the Asset
event name exist under the plugin's routes, the verdict a downstream DAG gates on, and the
run id of an asset-triggered model read back from its folder or its metrics.json."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from etl.versions.catalog import PublishedVersion
from tests.support import ui_fixtures as uf
from training.record import ModelRecord

REPO = Path(__file__).resolve().parents[3]
for folder in (REPO / "plugins", REPO / "dags"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from flightpipe_dags import links
from pipeline_ui import URL_PREFIX, views
from pipeline_ui.app import create_app


def test_page_urls_open_the_plugin_pages_in_the_airflow_frame(tmp_path: Path) -> None:
    import pipeline_ui_plugin

    built = uf.build_catalog_root(tmp_path / "store", n_versions=2)
    version, run = built.versions[-1], built.runs[built.versions[-1]][0]
    assert links.URL_PREFIX == URL_PREFIX
    assert pipeline_ui_plugin.NAV_ROUTE == links.NAV_ROUTE.removeprefix("/plugin/")
    client = TestClient(create_app(built.uri))
    for url in (links.page_url(uf.DATASET, version, base=""),
                links.page_url(uf.DATASET, version, run, base="")):
        assert url.startswith(links.NAV_ROUTE + URL_PREFIX + "/datasets/"), url
        assert client.get(url.removeprefix(links.NAV_ROUTE + URL_PREFIX)).status_code == 200
    assert links.page_url("d", "v", base="http://af:8080/x").startswith(
        "http://af:8080/x/plugin/pipeline-datasets/pipeline/datasets/d/versions/v")


@pytest.mark.parametrize(("validation", "word"), [
    ({"success": True, "quarantined_rows": 0}, "passed"),
    ({"success": True, "quarantined_rows": 3}, "passed_with_quarantine"),
    ({"success": False, "quarantined_rows": 9}, "failed"),
    ({}, "unknown"), (None, "unknown")])
def test_verdict_is_the_manifests_validation_in_one_word(validation, word) -> None:
    from etl.versions.manifest import Verdict

    typed = None if validation is None else Verdict.from_json(validation, "test")
    assert links.verdict(typed) == word


def test_event_extra_carries_version_page_and_verdict() -> None:
    from etl.versions.manifest import Manifest

    manifest = Manifest.from_json(
        {"validation": {"success": True, "quarantined_rows": 2, "evaluated_rows": 10}}, "test")
    extra = links.event_extra(PublishedVersion.of(version_uri="file:///r/datasets/d/v", version="v"),
                              manifest, "/plugin/pipeline-datasets/pipeline/datasets/d/versions/v")
    assert extra == {"version_uri": "file:///r/datasets/d/v", "version": "v",
                     "version_page": "/plugin/pipeline-datasets/pipeline/datasets/d/versions/v",
                     "verdict": "passed_with_quarantine", "quarantined_rows": 2,
                     "evaluated_rows": 10}


def test_asset_triggered_run_folders_and_metrics_name_their_run() -> None:
    """Airflow adds a random suffix to run ids without a logical date; metrics.json wins."""
    folder = "asset_triggered__2026-11-24T20_01_02.123456_00_00_Ab12CdEf"
    assert views.training_run(folder, "flights", None) == (
        "asset_triggered__2026-11-24T20:01:02.123456+00:00_Ab12CdEf", "train_flights")
    assert views.training_run("manual__2013-01-02T06_00_00_00_00", "flights", ModelRecord()) == (
        "manual__2013-01-02T06:00:00+00:00", "train_flights")
    stored = ModelRecord.of(dag_id="train_flights", run_id="asset_triggered__x:y+00:00_Z")
    assert views.training_run("asset_triggered__x_y_00_00_Z", "flights", stored) == (
        "asset_triggered__x:y+00:00_Z", "train_flights")
    assert views.training_run("20130102T060000Z", "flights", ModelRecord()) == (
        "20130102T060000Z", None)


def test_the_predictions_url_opens_the_plugins_predictions_page(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa

    from training.score.drift import distribution
    from training.score.publish import predictions_uri, publish

    built = uf.build_catalog_root(tmp_path / "store", n_versions=2)
    version = built.versions[-1]
    model = f"{version}--{built.runs[version][0]}"
    publish(predictions_uri(built.uri, uf.DATASET, version, model), "t",
            [pa.table({"prediction": ["0", "1"]})],
            lambda parts: {"distribution": distribution(np.array(["0", "1"]), np.array(["0"]),
                                                        ("0", "1")),
                           "source": {"kind": "version", "version": version},
                           "model": {"version": version, "run": built.runs[version][0]}})
    url = links.predictions_url(uf.DATASET, version, model, base="")
    assert url.startswith(links.NAV_ROUTE + URL_PREFIX + "/datasets/"), url
    client = TestClient(create_app(built.uri))
    assert client.get(url.removeprefix(links.NAV_ROUTE + URL_PREFIX)).status_code == 200


def test_a_failed_build_names_its_validation_page(tmp_path_factory, caplog) -> None:
    """Issue 51 item 6: ``build`` failing its validation logs (and buttons) the page of the
    results it left; the page opens in the plugin although nothing was published."""
    from etl.errors import ValidationFailed
    from tests.support import failed_validation as fv

    root = fv.failed_root(tmp_path_factory)
    results_uri = f"{root.as_uri()}/datasets/flights/{fv.VERSION}/validation"
    caplog.set_level("ERROR", logger="airflow.task")
    caplog.clear()
    with pytest.raises(ValidationFailed, match="expectation"), links.failed_validation("flights"):
        raise ValidationFailed("1 expectation(s) failed", {}, results_uri)
    url = links.validation_url("flights", fv.VERSION, base="")
    assert [r.getMessage() for r in caplog.records if r.name == "airflow.task"] == [
        f"Validation page (not published): {url}"]
    assert url == f"{links.NAV_ROUTE}{URL_PREFIX}/datasets/flights/versions/{fv.VERSION}/validation"
    page = TestClient(create_app(root.as_uri())).get(url.removeprefix(links.NAV_ROUTE + URL_PREFIX))
    assert page.status_code == 200 and "not published" in page.text
    assert links.ValidationPageLink.name == "Validation page"


def test_the_drift_warning_tells_moved_values_from_missing_ones(caplog) -> None:
    """Issue 51: "ten features moved beyond their limits" when eight of them were missing
    values; the publish task's WARNING names the two kinds apart, with the page."""
    import logging

    from etl.versions.manifest import Manifest

    rows = [{"name": n, "kind": k, "drifted": True} for n, k in
            (("dep_hour", "numeric"), ("carrier", "categorical"), ("temp", "missing"),
             ("wind_speed", "missing"))]
    manifest = Manifest.from_json({"validation": {"success": True, "drift": {
        "against": "v1", "features": rows,
        "drifted": ["dep_hour", "carrier", "temp", "wind_speed"]}}}, "test")
    with caplog.at_level(logging.WARNING, logger="airflow.task"):
        links.warn_drift("flights", manifest, "/page")
    assert caplog.messages == [(
        "drift flights: values moved beyond their limits in dep_hour, carrier; more values "
        "missing than their limits allow in temp, wind_speed, against v1; see /page")]
