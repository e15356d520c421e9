"""Partition-keyed runs on a real Airflow (issue 28, AIP-76 partitioned Assets).

The flights spec copied with ``schedule: partitioned``: ``etl_flights`` runs once per event of
the Asset ``raw_flights`` whose ``partition_key`` names a landed day, and ``train_flights`` on
the events of ``dataset_flights``, keyed by the version each run published. Twelve days are
landed, then eight events (the last eight days) posted in a burst through
``POST /api/v2/assets/events``, as an upstream job would. Expected: eight ETL runs, one per
day, in day order, one at a time, each building one new segment (its day; the first also the
four days before it) and publishing the version ending with that day, published in day order
and keyed by it; training runs one at a time, one run per published version, at most once per
version (no version has two models), every version trained or superseded by a trained newer
one (``training.ledger``), and the newest version is trained (a run that finds the newest
version trained skips). Eight days prove all of it as thirty did: the burst still queues more
versions than one training takes. Skips without PostgreSQL, but not under CI=true.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.integration.airflow_stack import api, dsn_of, start, task_log
from tests.integration.services import query_rows, wait_for
from training import ledger

psycopg2 = pytest.importorskip("psycopg2")
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(4500)]

RETRY_ON = (OSError, psycopg2.Error)
# Landed: 2013-01-01..01-12. Announced in a burst: the last 8 of those days, oldest first; the
# first run also builds the 4 days before its own (one segment: they are small).
LANDED = ("2013-01-01", "2013-01-13")
HISTORY = 4
DAYS = [date(2013, 1, 1 + HISTORY) + timedelta(days=i) for i in range(8)]
# 8 serial ETL runs and a few trainings on 2 shared cores, measured beside other tests: 836 s
# (load average 11) and 1,356 s (load 14); 3x the slower. Setup (migrate, parse, land) took
# up to 128 s more: the timeout mark above is 4,100 s + 3x that
WAIT_RUNS_S = 4100
# a small budget (docs/TRAINING.md): which versions train, and when, is under test, not the model
TRAINING = "\ntraining: {family: trees, max_rounds: 20, folds: off, min_margin: 0.0}\n"


def _partitioned(spec: str) -> str:
    spec, n = re.subn(r"(?m)^schedule: .*$", "schedule: partitioned", spec)
    assert n == 1
    return spec + TRAINING


def _runs(dsn: str, dag_id: str) -> list[tuple]:
    return query_rows(dsn, "SELECT run_id, state, partition_key, start_date, end_date FROM "
                      "dag_run WHERE dag_id = %s ORDER BY run_after, id", dag_id)


def _train_failures(env: dict, dsn: str) -> dict[str, str]:
    """run_id -> why, for each failed training task; a model not blessed (a young version's
    few rows; only under fail_unblessed) is the model's verdict, not this test's subject."""
    failed = query_rows(dsn, "SELECT run_id FROM task_instance WHERE dag_id = 'train_flights' "
                        "AND task_id = 'train' AND state = 'failed'")
    return {r: ("not blessed" if "ModelNotBlessedError" in task_log(env, "train_flights", r,
                                                                   "train") else "other")
            for (r,) in failed}


def test_eight_announced_days_build_eight_segments_and_train_at_most_once_each(
        tmp_path: Path, postgres_db: str, processes) -> None:
    env = start(tmp_path, postgres_db, processes, _partitioned, LANDED,
                unpause=("etl_flights", "train_flights"))
    dsn = dsn_of(postgres_db)
    assets = api(env, "GET", "/assets?name_pattern=raw_flights")["assets"]
    assert [a["name"] for a in assets] == ["raw_flights"], assets
    versions = [(d + timedelta(days=1)).strftime("%Y%m%dT000000Z") + "_all" for d in DAYS]
    t0 = time.monotonic()
    for day in DAYS:  # the burst: a backfill announcing a week and a day, oldest first
        api(env, "POST", "/assets/events", {"asset_id": assets[0]["id"],
                                            "partition_key": day.isoformat()})

    def diagnostics() -> str:
        tis = query_rows(dsn, "SELECT dag_id, run_id, task_id, state, try_number FROM "
                         "task_instance WHERE state NOT IN ('success', 'skipped')")
        logs = "\n".join(task_log(env, d, r, t)[-2000:] for d, r, t, _, _ in tis)
        return f"not green: {tis}\n{logs}\n{processes.tails()}"

    def all_done() -> bool:
        processes.check_alive()
        etl, train = _runs(dsn, "etl_flights"), _runs(dsn, "train_flights")
        if any(r[1] == "failed" for r in etl) or "other" in _train_failures(env, dsn).values():
            pytest.fail(f"a run failed\n{diagnostics()}", pytrace=False)
        finished = all(r[1] in ("success", "failed") for r in etl + train)
        if not (len(etl) == len(DAYS) and finished and len(train) == len(DAYS)):
            return False
        newest = ledger.states(env["PIPELINE_STORAGE_ROOT"], "flights", ledger.TRAINING,
                               versions[-1:])
        return newest[0].state == ledger.DONE  # the newest version's model is written

    wait_for(f"{len(DAYS)} partition runs and their trainings", all_done, WAIT_RUNS_S,
             on_timeout=diagnostics, retry_on=RETRY_ON, interval_s=5)
    took = time.monotonic() - t0
    etl = _runs(dsn, "etl_flights")
    assert [r[2] for r in etl] == [d.isoformat() for d in DAYS], etl  # one run per day, in order
    for (_, _, _, _, ended), (_, _, _, began, _) in itertools.pairwise(etl):
        assert began >= ended, etl  # one at a time: each version sees the one before
    events = query_rows(dsn, "SELECT e.extra, e.partition_key FROM asset_event e JOIN asset a "
                        "ON a.id = e.asset_id WHERE a.name = 'dataset_flights' "
                        "ORDER BY e.timestamp, e.id")
    assert [e["version"] for e, _ in events] == versions, events  # published in day order
    assert [k for _, k in events] == versions  # keyed by the version, not the ETL run's day
    for run_id, *_ in etl:  # each run built exactly one new segment: its day (+ history)
        log = task_log(env, "etl_flights", run_id, "build")
        assert re.search(r"plan flights: \d+ partition\(s\) in the window, held by \d+ "
                         r"segment\(s\): 1 to build", log), log[-3000:]
    data = Path(env["PIPELINE_STORAGE_ROOT"].removeprefix("file://"), "datasets", "flights")
    newest = json.loads((data / versions[-1] / "manifest.json").read_text())
    held = sorted(p[0] for s in newest["segments"] for p in s["partitions"])
    assert held == [(date(2013, 1, 1) + timedelta(days=i)).strftime("%Y%m%d")
                    for i in range(HISTORY + len(DAYS))], held  # the landed days, all

    train = _runs(dsn, "train_flights")
    assert [r[2] for r in train] == versions, train  # a run per published version, its key
    fits = query_rows(dsn, "SELECT start_date, end_date FROM task_instance WHERE dag_id = "
                      "'train_flights' AND task_id = 'train' AND start_date IS NOT NULL "
                      "ORDER BY start_date")
    for (_, ended), (began, _) in itertools.pairwise(fits):
        assert began >= ended, fits  # never two trainings at once: the gpu pool's one slot
    tis = dict(query_rows(dsn, "SELECT run_id, state FROM task_instance WHERE "
                          "dag_id = 'train_flights' AND task_id = 'train'"))
    trained = [r for r, state in tis.items() if state in ("success", "failed")]
    skipped = [r for r, state in tis.items() if state == "skipped"]
    assert len(trained) + len(skipped) == len(train), tis
    models = data.parent.parent / "models" / "flights"
    gate = _train_failures(env, dsn)
    root = env["PIPELINE_STORAGE_ROOT"]
    states = {s.version: s for s in ledger.states(root, "flights", ledger.TRAINING, versions)}
    assert states[versions[-1]].state == ledger.DONE, states[versions[-1]]  # the newest
    for s in states.values():  # every version trained, or superseded by a trained newer one
        assert s.state == ledger.DONE or (s.state == ledger.SUPERSEDED
                                          and states[s.by].state == ledger.DONE), s
    by_version: dict[str, list[str]] = {}  # version -> the runs that trained it
    for metrics in models.glob("*/*/metrics.json"):  # each model names the run that trained it
        stored = json.loads(metrics.read_text())
        assert stored["dag_id"] == "train_flights" and stored["run_id"] in trained, \
            (metrics, stored.get("dag_id"), stored.get("run_id"), trained)
        by_version.setdefault(metrics.parent.parent.name, []).append(stored["run_id"])
    # every run that trained wrote a model (a not-blessed one too; a run trains again when a
    # newer version was published while it trained), and no version has two
    assert {r for runs in by_version.values() for r in runs} == set(trained), by_version
    assert all(len(runs) == 1 for runs in by_version.values()), by_version  # at most once each
    print(f"\n{len(DAYS)} announced days: {len(etl)} ETL runs, {len(train)} training runs "
          f"({len(trained)} trained, {len(by_version)} versions between them, {len(gate)} failed as "
          f"not blessed; {len(skipped)} skipped as superseded) in {took:.0f} s")
