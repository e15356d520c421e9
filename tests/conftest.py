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


def _declared_cost(item: pytest.Item) -> float:
    """What a test says it may take: its ``timeout`` mark (the costly ones all carry one)."""
    mark = item.get_closest_marker("timeout")
    return float(mark.args[0]) if mark and mark.args else 0.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Costliest files first, each file's tests in their own order.

    ``make test`` hands whole files to two workers (``--dist loadfile --no-loadscope-reorder``)
    in this order, so the real-scheduler and browser files, which take minutes each, start at
    once and the many quick files fill in beside them; with xdist's default order (files with
    the most tests first) a long one-test file started last and ran alone at the end.
    """
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    cost = {f: max(_declared_cost(i) for i in its) for f, its in by_file.items()}
    ordered = sorted(by_file, key=lambda f: (-cost[f], -len(by_file[f]), f))
    items[:] = [item for f in ordered for item in by_file[f]]
