"""``schedule: partitioned`` wiring without a scheduler: the timetables the DAG files build and
the interval a partition-keyed run takes (tests/integration/test_partitions.py runs the whole
burst on a real Airflow; which version each training run trains: test_choice.py)."""

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
    nightly = _settings(tmp_path, "schedule: '0 0 * * *'\n")
    # one run at a time only where the announced order is the publish order (issue 41 item 2)
    assert fd.etl_active_runs(etl) == 1
    assert fd.etl_active_runs(fd.etl_timetable(nightly.schedule, "flights")) > 1
    assert fd.etl_active_runs(None) > 1  # manual runs only


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


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What ``make demo`` lands: every raw partition of flights (UTC days of ``time_hour``)."""
    from etl.kinds.landing import LandOptions
    from etl.kinds.tabular.land import land

    root = tmp_path_factory.mktemp("demo").as_uri()
    land(root, "flights", LandOptions())
    return root


def test_the_nightly_refusal_after_the_demo_is_the_readme_s_and_said_once(
        demo_root: str, monkeypatch, caplog) -> None:
    """Issue 41 items 4 and 8: the nightly run that unpausing etl_flights creates after
    ``make demo`` is refused at once; the README quotes that refusal as it is (the demo's
    newest raw partition is 2014-01-01: New York's evening of Dec 31 is Jan 1 in UTC), and
    the task's log holds it once (the exception Airflow logs again only points at it)."""
    import re

    from airflow.sdk.exceptions import AirflowFailException
    from flightpipe_dags.wait import WaitForData

    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", demo_root)
    yesterday = datetime(2026, 11, 27, tzinfo=UTC)
    run = SimpleNamespace(partition_key=None, run_after=yesterday,
                          start_date=yesterday + timedelta(minutes=5))
    task = WaitForData(task_id="wait_for_data", dataset="flights", wait=timedelta(hours=6))
    caplog.set_level("INFO", logger="airflow.task")
    with pytest.raises(AirflowFailException) as refused:
        task.execute({"params": {}, "data_interval_end": yesterday, "dag_run": run})
    [line] = [r.getMessage() for r in caplog.records if "overdue" in r.getMessage()]
    assert line not in str(refused.value) and "ERROR line above" in str(refused.value)
    readme = (DAGS.parent / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"what has landed: `\.\.\. (.+?)`", readme, re.DOTALL)
    assert quoted, "the README's quoted refusal is gone"
    assert line.endswith(" ".join(quoted.group(1).split())), (line, quoted.group(1))


def test_a_waiting_run_leaves_what_it_waits_for_and_until_when(demo_root: str,
                                                                monkeypatch) -> None:
    """Issue 41 item 2: before it defers, ``wait_for_data`` leaves the XCom the dataset page
    shows beside the run (``pipeline_ui.runs``): how many partitions, which, until when."""
    from airflow.sdk.exceptions import TaskDeferred
    from flightpipe_dags.wait import WAITING_KEY, WaitForData

    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", demo_root)
    monkeypatch.syspath_prepend(str(DAGS.parent / "plugins"))  # the trigger's module
    pushed: dict = {}
    ti = SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))
    started = datetime.now(UTC)
    run = SimpleNamespace(partition_key=None, run_after=started, start_date=started)
    task = WaitForData(task_id="wait_for_data", dataset="flights", wait=timedelta(hours=6))
    with pytest.raises(TaskDeferred):  # 2014-01-02 closed at the window's end: late, waited for
        task.execute({"params": {"interval_end": "2014-01-03", "window_days": 3},
                      "data_interval_end": None, "dag_run": run, "ti": ti})
    waiting = pushed[WAITING_KEY]
    assert (waiting["missing"], waiting["shown"]) == (1, "2014-01-02"), waiting
    until = datetime.fromisoformat(waiting["until"])
    assert abs(until - started - timedelta(hours=6)) < timedelta(seconds=2), waiting
