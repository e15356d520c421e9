"""pipeline_ui.catalog: a version deleted under the UI is not served from its cache; versions
are listed in the one order of versions (``etl.versions.version_key``)."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

import pytest
from pipeline_ui.catalog import Catalog, Limits, NotFound

from tests.support import ui_fixtures as uf


def test_a_deleted_version_is_not_served_from_cache(tmp_path: Path) -> None:
    built = uf.build_catalog_root(tmp_path / "root", n_versions=2)
    catalog = Catalog(built.uri, Limits(listing_ttl_s=0.0))
    assert catalog.manifest("flights", built.versions[0]).version == built.versions[0]
    shutil.rmtree(built.root / "datasets/flights" / built.versions[0])  # what retain() does
    with pytest.raises(NotFound):
        catalog.manifest("flights", built.versions[0])
    assert catalog.version_ids("flights")[0] == [built.versions[1]]


def test_versions_are_listed_newest_first_in_the_one_order(tmp_path: Path) -> None:
    """The 7-day window that ends with the full version is the newer of the two (as storage's
    LATEST and the training DAG have it); the ids' string order would list the full version
    first. The dataset list names it as the newest, the diff page compares it with the full
    version."""
    from fastapi.testclient import TestClient
    from pipeline_ui.app import create_app

    end = datetime(2014, 1, 1, tzinfo=UTC)
    older = uf.write_version(tmp_path, "flights", datetime(2013, 12, 31, tzinfo=UTC))
    window = uf.write_version(tmp_path, "flights", end, datetime(2013, 12, 25, tzinfo=UTC))
    demo = uf.write_version(tmp_path, "flights", end)
    catalog = Catalog(tmp_path.as_uri(), Limits(listing_ttl_s=0.0))
    assert catalog.version_ids("flights") == ([window, demo, older], False)
    (row,) = catalog.datasets().items
    assert (row.versions, row.latest) == (3, window)
    page = TestClient(create_app(tmp_path.as_uri())).get(
        f"/datasets/flights/versions/{window}/diff")
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", page.text.replace("<wbr>", ""))))
    assert page.status_code == 200 and f"What changed: {demo} → {window}" in text


def test_versions_judged_but_not_published_are_listed_newest_first(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 51 item 6: what a failed build left (results, no manifest) is found for the
    dataset page; a published version and a half-written one (no results) are not."""
    from tests.support import failed_validation as fv

    root = fv.failed_root(tmp_path_factory)
    folder = root / "datasets" / "flights"
    older = "20130105T000000Z_20130104T000000Z"
    shutil.copytree(folder / fv.VERSION, folder / older)  # an earlier failed window
    published = uf.write_version(root, "flights", datetime(2013, 1, 7, tzinfo=UTC))
    half = uf.vid(datetime(2013, 1, 8, tzinfo=UTC))
    (folder / half / "validation").mkdir(parents=True)  # killed before it was judged
    catalog = Catalog(root.as_uri(), Limits(listing_ttl_s=0.0))
    found = catalog.unpublished("flights")
    assert [v for v, _ in found] == [fv.VERSION, older]
    assert found[0][1]["success"] is False and found[0][1]["meta"]["join_gaps"]
    assert [v for v, _ in catalog.unpublished("flights", limit=1)] == [fv.VERSION]
    with pytest.raises(NotFound, match="is published"):
        catalog.unpublished_results("flights", published)
    with pytest.raises(NotFound, match="stored no validation results"):
        catalog.unpublished_results("flights", half)
    assert catalog.unpublished("nope") == []
    data, name = catalog.version_file("flights", fv.VERSION, "validation/results.json")
    assert name == "results.json" and b'"join_gaps"' in data
