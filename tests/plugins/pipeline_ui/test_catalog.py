"""pipeline_ui.catalog: a version deleted under the UI is not served from its cache."""

from __future__ import annotations

import shutil
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
