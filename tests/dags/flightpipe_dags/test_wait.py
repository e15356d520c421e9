"""``schedule: partitioned`` wiring without a scheduler: the timetables the DAG files build,
the interval a partition-keyed run takes, and training skipping a superseded version
(tests/integration/test_partitions.py runs the whole burst on a real Airflow)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags"
if str(DAGS) not in sys.path:
    sys.path.append(str(DAGS))

import flightpipe_dags as fd
from flightpipe_dags.wait import partition_end, run_options

from tests.support.ui_fixtures import write_version


def _settings(tmp_path: Path, text: str):
    from etl.spec.scheduling import read_settings

    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return read_settings(path)


def test_a_partitioned_spec_gets_partitioned_timetables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("PIPELINE_ETL_SCHEDULE", raising=False)
    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", "gs://bucket/p")
    settings = _settings(tmp_path, "schedule: partitioned\narrival: {wait: 2h}\n")
    assert settings.schedule == "partitioned" and settings.arrival_wait == timedelta(hours=2)
    etl = fd.etl_timetable(settings.schedule, "flights")
    assert type(etl).__name__ == "PartitionedAssetTimetable"
    assert (etl.asset_condition.name, etl.asset_condition.uri) == (
        "raw_flights", "gs://bucket/p/raw/flights")
    train = fd.training_schedule("flights", settings)
    assert type(train).__name__ == "PartitionedAssetTimetable"
    assert train.asset_condition == fd.dataset_asset("flights")
    nightly = _settings(tmp_path, "schedule: '0 0 * * *'\n")
    assert fd.training_schedule("flights", nightly) == [fd.dataset_asset("flights")]


def test_a_partition_keyed_run_ends_with_its_day() -> None:
    assert partition_end("2013-01-05") == datetime(2013, 1, 6, tzinfo=UTC)
    assert partition_end(None) is None
    with pytest.raises(ValueError, match="partition_key 'us' refused: expected a day"):
        partition_end("us")
    run = SimpleNamespace(partition_key="2013-01-05", run_after=datetime(2026, 1, 1, tzinfo=UTC))
    opts = run_options({}, None, run)
    assert opts.interval_end == datetime(2013, 1, 6, tzinfo=UTC) and opts.interval_start is None
    nightly = SimpleNamespace(partition_key=None, run_after=datetime(2026, 1, 1, tzinfo=UTC))
    assert run_options({}, datetime(2013, 1, 3, tzinfo=UTC), nightly).interval_end == \
        datetime(2013, 1, 3, tzinfo=UTC)


def test_training_skips_a_version_a_newer_one_superseded(tmp_path: Path, monkeypatch) -> None:
    """Two versions published; the run started by the older one's event skips, naming the
    newer; the newer one's run resolves it; a manual run asking for the older one gets it."""
    from airflow.sdk.exceptions import AirflowSkipException

    root = tmp_path / "root"
    old = write_version(root, "flights", datetime(2013, 1, 3, tzinfo=UTC))
    new = write_version(root, "flights", datetime(2013, 1, 4, tzinfo=UTC))
    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", root.as_uri())
    import dataset_training

    dag = dataset_training.build_training_dag("flights", fd.DagSettings())
    resolve = dag.get_task("resolve_version").python_callable
    asset = fd.dataset_asset("flights")

    def event(version: str) -> SimpleNamespace:
        return SimpleNamespace(extra={"version": version, "version_uri":
                                      f"{root.as_uri()}/datasets/flights/{version}"})

    params = {"version": "latest"}
    with pytest.raises(AirflowSkipException, match=f"Not training flights version {old}: "
                                                   f"version {new} was published since"):
        resolve(params=params, triggering_asset_events={asset: [event(old)]})
    assert resolve(params=params, triggering_asset_events={asset: [event(new)]})["version"] == new
    assert resolve(params={"version": old}, triggering_asset_events={})["version"] == old
