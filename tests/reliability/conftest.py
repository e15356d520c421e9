"""Fixtures for the reliability suite: real landed days, one published version to protect.

Every bad-input and fault test starts from a private copy of a storage root in which the
day 2013-01-01 is already published (``BASE_VERSION``) and days 01-02..01-03 are landed. The
test then corrupts a raw file, runs the next interval and checks, with ``assert_untouched``,
that the published version is byte-for-byte what it was and that readers see nothing new.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from etl.kinds.landing import LandOptions

DATASET = "flights"
BASE_END = "2013-01-02T00:00:00Z"
BASE_START = "2013-01-01T00:00:00Z"
BASE_VERSION = "20130102T000000Z_20130101T000000Z"
NEXT_START, NEXT_END = "2013-01-02T00:00:00Z", "2013-01-04T00:00:00Z"
NEXT_VERSION = "20130104T000000Z_20130102T000000Z"
SHARD_BYTES = 60_000  # a few shards per split even for one day


@pytest.fixture(scope="session")
def dask_client() -> Iterator[object]:
    """One in-process cluster for the suite (threads: fast start, 2 cores)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


@pytest.fixture(scope="session")
def published_template(tmp_path_factory: pytest.TempPathFactory, dask_client: object) -> Path:
    """Days 01-01..01-03 landed and [01-01, 01-02) published once per session."""
    from etl import pipeline
    from etl.kinds.tabular.land import land

    path = tmp_path_factory.mktemp("published")
    land(path.as_uri(), DATASET, LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 4)))
    res = pipeline.run(DATASET, path.as_uri(), BASE_END, BASE_START, run_id="base",
                       shard_bytes=SHARD_BYTES)
    assert res.created and res.version == BASE_VERSION
    return path


@pytest.fixture()
def root_path(published_template: Path, tmp_path: Path) -> Path:
    """A private copy of the template (tests corrupt raw files in it)."""
    dst = tmp_path / "root"
    shutil.copytree(published_template, dst, symlinks=True)
    return dst


@pytest.fixture()
def root(root_path: Path) -> str:
    return root_path.as_uri()


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` by relative name: equal digests = equal bytes."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def day_file(root_path: Path, day: str) -> Path:
    """The landed raw CSV of one UTC day."""
    return root_path / "raw" / "flights" / f"date={day}" / "flights.csv"


def assert_untouched(root: str, before: dict[str, str], new_version: str | None = None) -> None:
    """The published version is byte-identical and readers see only what they may.

    ``new_version`` is the one version a successful run may add; it must be complete.
    """
    from etl import storage, versions

    vpath = Path(storage.get_fs(versions.version_uri(root, DATASET, BASE_VERSION))[1])
    assert tree_digest(vpath) == before, "the published version changed"
    expected = sorted(filter(None, [BASE_VERSION, new_version]))
    assert versions.list_versions(root, DATASET) == expected
    latest = new_version or BASE_VERSION
    assert versions.latest_version(root, DATASET) == latest
    ds = Path(storage.get_fs(storage.join(root, "datasets", DATASET))[1])
    assert (ds / versions.LATEST).read_text().strip() == latest
    for folder in ds.iterdir():  # anything else is invisible: no manifest, never resolved
        if folder.is_dir() and folder.name not in expected:
            assert not (folder / "manifest.json").exists(), folder
    assert versions.resolve(root, DATASET, "latest").endswith(latest)


@pytest.fixture()
def base_digest(root_path: Path) -> dict[str, str]:
    return tree_digest(root_path / "datasets" / DATASET / BASE_VERSION)
