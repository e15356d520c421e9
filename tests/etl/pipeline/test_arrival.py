"""Waiting for late data: what a window misses (the build's own definition), the trigger that
lists it in the triggerer, the ``arrival`` spec key, and the task's one-line refusal."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.pipeline.arrival import check_arrival
from etl.segments import plan
from etl.spec import load_spec
from etl.spec.scheduling import SpecSettingsError, parse_settings

REPO = Path(__file__).resolve().parents[3]
for folder in (REPO / "plugins", REPO / "dags"):  # where the triggerer and the DAGs import from
    if str(folder) not in sys.path:
        sys.path.append(str(folder))

END = datetime(2013, 1, 5, tzinfo=UTC)
START = datetime(2013, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("arrival")
    land(f"file://{path}", "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 5)))
    return path


@pytest.fixture()
def root(landed: Path, tmp_path: Path) -> str:
    """Days 01-01..01-04 landed, then 01-03 and 01-04 taken away (they land late)."""
    shutil.copytree(landed / "raw", tmp_path / "raw")
    for day in ("2013-01-03", "2013-01-04"):
        shutil.move(tmp_path / f"raw/flights/date={day}", tmp_path / f"late-{day}")
    return f"file://{tmp_path}"


def _deliver(root: str, day: str) -> None:
    base = Path(root.removeprefix("file://"))
    shutil.move(base / f"late-{day}", base / f"raw/flights/date={day}")


def test_missing_is_what_the_build_refuses(root: str) -> None:
    arrival = check_arrival("flights", root, END, START)
    assert arrival.missing == ("2013-01-03", "2013-01-04") and not arrival.complete
    assert arrival.where == "raw/flights/date={date}/flights.csv"
    with pytest.raises(plan.SourceFilesError, match="2 partition.*2013-01-03, 2013-01-04"):
        plan.window_listing(root, load_spec("flights").primary_source, START, END)
    assert check_arrival("flights", root, datetime(2013, 1, 3, tzinfo=UTC), START).complete
    _deliver(root, "2013-01-03")
    _deliver(root, "2013-01-04")
    assert check_arrival("flights", root, END, START).complete


def test_an_unbounded_window_misses_the_gaps_and_the_days_after(root: str) -> None:
    _deliver(root, "2013-01-04")
    assert check_arrival("flights", root, END).missing == ("2013-01-03",)


def test_nothing_landed_misses_every_day(tmp_path: Path) -> None:
    arrival = check_arrival("flights", f"file://{tmp_path}", END, START)
    assert arrival.missing == ("2013-01-01", "2013-01-02", "2013-01-03", "2013-01-04")
    assert arrival.shown(2) == "2013-01-01, 2013-01-02 and 2 more"


def _events(trigger) -> list[dict]:
    async def collect() -> list[dict]:
        return [event.payload async for event in trigger.run()]
    return asyncio.run(collect())


def _trigger(root: str, wait_s: float):
    from flightpipe_arrival import PartitionsLandedTrigger

    deadline = datetime.now(UTC) + timedelta(seconds=wait_s)
    return PartitionsLandedTrigger("flights", root, END.isoformat(), deadline.isoformat(),
                                   START.isoformat(), None, poke_s=0.2, report_s=0.5)


def test_trigger_fires_when_the_late_days_land(root: str, capsys) -> None:
    trigger = _trigger(root, 30)
    classpath, kwargs = trigger.serialize()
    assert classpath == "flightpipe_arrival.PartitionsLandedTrigger"
    assert type(trigger)(**kwargs).serialize() == (classpath, kwargs)  # survives the DB
    timer = threading.Timer(1.0, lambda: (_deliver(root, "2013-01-03"),
                                          _deliver(root, "2013-01-04")))
    timer.start()
    try:
        assert _events(trigger) == [{"status": "landed"}]
    finally:
        timer.join()
    said = [ln for ln in capsys.readouterr().out.splitlines() if "Still missing" in ln]  # structlog
    assert said and "2 partition(s) of flights" in said[0] and "2013-01-03, 2013-01-04" in said[0]
    assert "waiting until" in said[0]


def test_trigger_gives_up_at_the_deadline_with_what_is_missing(root: str) -> None:
    _deliver(root, "2013-01-03")
    t0 = datetime.now(UTC)
    [event] = _events(_trigger(root, 1.5))
    assert event["status"] == "deadline" and event["missing"] == ["2013-01-04"]
    assert datetime.fromisoformat(event["deadline"]) <= datetime.now(UTC)
    assert datetime.now(UTC) - t0 >= timedelta(seconds=1.4)


def test_give_up_is_one_line_without_retries() -> None:
    from airflow.sdk.exceptions import AirflowFailException
    from flightpipe_dags.wait import WaitForData

    task = WaitForData(task_id="wait_for_data", dataset="flights", wait=timedelta(hours=6))
    with pytest.raises(AirflowFailException) as info:
        task.execute_complete({}, {"status": "deadline", "missing": ["2013-01-04"],
                                   "deadline": "2013-01-05T06:00:00.25+00:00",
                                   "where": "raw/flights/date={date}/flights.csv"})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("1 partition(s) of flights not landed by 2013-01-05T06:00:00+00:00 "
                              "(raw/flights/date={date}/flights.csv): 2013-01-04.")
    assert "arrival.wait in " in message and message.endswith("spec.yaml to wait longer.")
    assert task.execute_complete({}, {"status": "landed"}) is None


@pytest.mark.parametrize(("value", "wait", "every"), [
    (None, timedelta(hours=6), timedelta(minutes=1)),
    ({"wait": "90m"}, timedelta(minutes=90), timedelta(minutes=1)),
    ({"wait": 0}, timedelta(0), timedelta(minutes=1)),
    ({"wait": "2d", "every": "30s"}, timedelta(days=2), timedelta(seconds=30)),
])
def test_arrival_key(value, wait, every) -> None:
    raw = {} if value is None else {"arrival": value}
    settings = parse_settings(raw, "spec.yaml")
    assert (settings.arrival_wait, settings.arrival_every) == (wait, every)


@pytest.mark.parametrize(("value", "message"), [
    ({"wait": "6 hours"}, r"spec.yaml.arrival.wait: expected a duration like 6h"),
    ({"wait": True}, r"arrival.wait: expected a duration"),
    ({"every": 0}, r"spec.yaml.arrival.every: expected at least 1s"),
    ({"deadline": "6h"}, r"arrival.deadline: unknown arrival setting"),
    ("6h", r"spec.yaml.arrival: expected a mapping"),
])
def test_bad_arrival_key_names_the_field(value, message) -> None:
    with pytest.raises(SpecSettingsError, match=message):
        parse_settings({"arrival": value}, "spec.yaml")


def test_a_day_landing_after_its_version_is_named_a_re_delivery() -> None:
    from types import SimpleNamespace

    from etl.segments.plan import late_partitions
    from etl.versions import Manifest

    def part(name: str, size: int) -> SimpleNamespace:
        day = datetime.strptime(f"2013{name}", "%Y%m%d").replace(tzinfo=UTC)
        return SimpleNamespace(name=name, file={"uri": f"file:///r/raw/{name}.csv",
                                                "size": size},
                               period=(day, day + timedelta(days=1)))

    previous = Manifest.from_json(
        {"source_fingerprint": {"files": [{"uri": "raw/0101.csv", "size": 1},
                                          {"uri": "raw/0103.csv", "size": 3}]},
         "segments": [{"segment": "s", "partitions": [["0101", "a"], ["0103", "c"]]}]},
        "manifest.json")
    window = SimpleNamespace(tasks=[SimpleNamespace(partitions=[
        part("0101", 1), part("0102", 2), part("0103", 4), part("0104", 5)])])
    # 0102 landed after the version holding 0101 and 0103; 0103 changed; 0104 is simply new
    assert late_partitions("file:///r", window, previous) == (["0103"], ["0102"])
    assert late_partitions("file:///r", window, None) == ([], [])


def test_days_before_the_previous_window_are_not_named_late() -> None:
    """Issue 41 item 3: a recovery of the whole year after a week's version reads the year's
    older days for the first time; none of them landed after that version was published."""
    from types import SimpleNamespace

    from etl.segments.plan import late_partitions
    from etl.versions import Manifest

    def part(day: int) -> SimpleNamespace:
        start = datetime(2013, 12, day, tzinfo=UTC)
        return SimpleNamespace(name=f"201312{day:02d}", period=(start, start + timedelta(1)),
                               file={"uri": f"file:///r/raw/{day}.csv", "size": day})

    week = Manifest.from_json(
        {"data_interval": {"start": "2013-12-25T00:00:00+00:00", "end": "2014-01-01T00:00:00"},
         "source_fingerprint": {"files": [{"uri": f"raw/{d}.csv", "size": d}
                                          for d in (25, 27)]},
         "segments": [{"segment": "s", "partitions": [["20131225", "a"], ["20131227", "c"]]}]},
        "manifest.json")
    year = SimpleNamespace(tasks=[SimpleNamespace(partitions=[part(d) for d in range(1, 28)])])
    # only the 26th, inside the week and missing from it, landed after the week's version
    assert late_partitions("file:///r", year, week) == ([], ["20131226"])


SIX_H = timedelta(hours=6)


def test_a_late_last_day_is_waited_for_not_overdue(root: str) -> None:
    """The nightly case: the window's last day closed at the window's end; it may still land."""
    arrival = check_arrival("flights", root, datetime(2013, 1, 4, tzinfo=UTC), START)
    assert arrival.missing == ("2013-01-03",)
    assert not arrival.overdue(datetime(2013, 1, 4, tzinfo=UTC), SIX_H)


def test_a_window_far_past_the_landed_data_is_overdue_naming_what_to_set(root: str) -> None:
    """Issue 34: a nightly run of today over 2013's data must not wait 6 h for years of days."""
    end = datetime(2026, 11, 25, tzinfo=UTC)
    arrival = check_arrival("flights", root, end)
    assert arrival.newest == "2013-01-02" and arrival.overdue(end, SIX_H)
    reason = arrival.overdue_reason(end, SIX_H)
    assert "\n" not in reason and reason.startswith("5074 partition(s) of flights missing")
    assert "the newest landed partition is 2013-01-02" in reason
    # 01-03 and 01-04 are missing too, so the window publishing what landed ends at 01-03
    assert "trigger with Param interval_end=2013-01-03T00:00:00+00:00;" in reason
    # a bounded window holding no landed day still names the feed's newest partition
    bounded = check_arrival("flights", root, end, end - timedelta(days=3))
    assert bounded.newest == "2013-01-02" and bounded.overdue(end, SIX_H)


def test_a_hole_older_than_the_wait_is_overdue_and_window_days_skips_it(root: str) -> None:
    _deliver(root, "2013-01-04")  # 01-03 is now a hole behind the newest day, 01-04
    arrival = check_arrival("flights", root, END, START)
    assert arrival.missing == ("2013-01-03",) and arrival.newest == "2013-01-04"
    assert arrival.overdue(END, SIX_H) and not arrival.overdue(END, timedelta(days=2))
    assert "trigger with Param window_days=1;" in arrival.overdue_reason(END, SIX_H)


def test_wait_for_data_refuses_an_overdue_window_at_once(root: str, monkeypatch) -> None:
    """The reason is the log's one ERROR line; the exception Airflow logs again points at it."""
    import logging
    from types import SimpleNamespace

    from airflow.sdk.exceptions import AirflowFailException
    from flightpipe_dags.wait import WaitForData

    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", root)
    task = WaitForData(task_id="wait_for_data", dataset="flights", wait=SIX_H)
    run = SimpleNamespace(run_after=datetime(2026, 11, 25, tzinfo=UTC), partition_key=None,
                          start_date=datetime(2026, 11, 25, tzinfo=UTC))
    context = {"params": {}, "data_interval_end": datetime(2026, 11, 25, tzinfo=UTC),
               "dag_run": run}
    records: list[logging.LogRecord] = []  # the task logger's own, whether it propagates or not
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    task_log = logging.getLogger("airflow.task")
    task_log.addHandler(handler)
    try:
        with pytest.raises(AirflowFailException, match="refused the window of flights: its missing "
                           "partitions are overdue, not late .the ERROR line above"):
            task.execute(context)  # no defer: a deferral would raise TaskDeferred instead
    finally:
        task_log.removeHandler(handler)
    errors = [r.getMessage() for r in records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "overdue, not late; the newest landed partition is 2013-01-02" \
        in errors[0], errors
