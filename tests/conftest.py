"""Shared fixtures: storage roots on local disk and on a real GCS JSON-API server.

``storage_root`` runs a test once per backend (file://, gs://). The gs:// backend is
the product's emulator (etl.storage.emulator) started once per session on a free loopback
port by tests/support/gcs.py; every test gets its own prefix in one bucket, so tests do not
collide.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gcs import GcsEmulator

TEST_BUCKET = "pipeline-test"


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GcsEmulator]:
    """One emulator per session, STORAGE_EMULATOR_HOST pointing at it while it runs."""
    from etl.storage import fs as storage_fs

    with GcsEmulator(buckets=(TEST_BUCKET,)) as emulator, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
        storage_fs._resolve_token.cache_clear()
        yield emulator
    storage_fs._resolve_token.cache_clear()


def _prefix(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def gcs_root(gcs_emulator: GcsEmulator, request: pytest.FixtureRequest) -> str:
    """A fresh ``gs://`` storage root (unique prefix) on the emulator."""
    return f"gs://{TEST_BUCKET}/{_prefix(request)}"


@pytest.fixture
def file_root(tmp_path: Path) -> str:
    """A fresh ``file://`` storage root in the test's tmp dir."""
    root = tmp_path / "root"
    root.mkdir()
    return root.as_uri()


@pytest.fixture(params=["file", pytest.param("gcs", marks=pytest.mark.integration)])
def storage_root(request: pytest.FixtureRequest) -> str:
    """The same test on local disk and on the GCS emulator."""
    return request.getfixturevalue(f"{request.param}_root")


@pytest.fixture(scope="module")
def client():
    """An in-process Dask cluster per test module (threads: fast start on 2 cores).

    Module scope, not session: a distributed Client that outlives its module would stay the
    default and change how later modules' graphs run.
    """
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c
