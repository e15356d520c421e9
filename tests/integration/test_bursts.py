"""Many runs at once on a real scheduler: a 14-night backfill of ``etl_flights`` while its
trainings run, and two manual runs triggered while a training is busy; afterwards every
published version is trained or superseded by a trained newer one, scored or superseded by a
scored one, the newest is trained and scored, no Asset event is linked to no run (each
``dataset_flights`` event is keyed by its version id, each ``model_flights`` event by its model
folder, and every consumer run's ``partition_key`` is one of those), and the plugin's dataset
page says each version's state (issue 51).

A fresh Airflow home and PostgreSQL database; api-server, scheduler (LocalExecutor),
dag-processor and triggerer as real processes (``tests.integration.airflow_stack``), the three
flights DAGs unpaused. Training takes longer than an ETL run here (TensorFlow's start and a
fit against a one-day build), so publishes land while a training holds the ``gpu`` pool. The
backfill is the command docs/AIRFLOW.md gives, and this test also checks what a backfill
publishes: one version per interval from its own run, LATEST on the newest. Fourteen nights,
what issue 51 asks of this test (a 6-night run took 650 s to 923 s here against 1,072 s, but
the issue's backfill is at least 14); the training budget is one small MLP (every version has
over the 1,000 rows under which training would k-fold). The spec's arrival wait is 0: the one nightly run the scheduler creates for today's
interval fails at once (no raw data for it) instead of waiting beside the test. Skips without
PostgreSQL, but not under CI=true.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from datetime import date
from pathlib import Path

import pytest

from etl.versions import list_versions, version_key
from tests.integration.airflow_stack import BIN, REPO, api, dsn_of, start, task_log
from tests.integration.services import query_rows, wait_for
from training import ledger

psycopg2 = pytest.importorskip("psycopg2")
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(2400)]

RETRY_ON = (OSError, psycopg2.Error)
LANDED = ("2013-01-01", "2013-01-17")  # days 1..16: the backfill's, and the manual windows' last
BACKFILL = ["backfill", "create", "--dag-id", "etl_flights", "--from-date", "2013-01-02",
            "--to-date", "2013-01-15", "--reprocess-behavior", "failed"]  # 14 nights
NIGHTS = (date.fromisoformat(BACKFILL[BACKFILL.index("--to-date") + 1])
          - date.fromisoformat(BACKFILL[BACKFILL.index("--from-date") + 1])).days + 1
MANUAL = [{"interval_end": "2013-01-17T00:00:00+00:00", "window_days": 7},
          {"interval_end": "2013-01-17T00:00:00+00:00", "window_days": 3}]
VERSIONS = NIGHTS + len(MANUAL)  # one per backfill interval and per manual window
NEWEST = "20130117T000000Z_20130114T000000Z"  # the second manual window, by version_key
SPEC = ("\narrival: {wait: 0}\n"
        "training: {family: mlp, epochs: 2, batch_size: 256, min_margin: 0.0}\n")
DAGS = ("etl_flights", "train_flights", "score_flights")
WAIT_S = 1800  # each wait; the whole test took 1,072 s on 2 loaded cores with 14 nights


def _runs(dsn: str, dag_id: str) -> dict[str, tuple[str, str]]:
    """run_id -> (state, run_type)."""
    return {r: (s, t) for r, s, t in query_rows(
        dsn, "SELECT run_id, state, run_type FROM dag_run WHERE dag_id = %s", dag_id)}


def _unlinked(dsn: str, asset: str, dag_id: str) -> list[tuple]:
    """Events of ``asset`` that no run of ``dag_id`` consumed: (timestamp, partition_key).
    Keyed events each have their own pending run of each consumer, so there must be none (an
    unkeyed Asset's one queue row per DAG left an event landing while the scheduler created
    the run from it linked to no run)."""
    return query_rows(dsn, """
        SELECT e.timestamp, e.partition_key FROM asset_event e
        JOIN asset a ON a.id = e.asset_id WHERE a.name = %s AND NOT EXISTS (
            SELECT 1 FROM dagrun_asset_event d JOIN dag_run r ON r.id = d.dag_run_id
            WHERE d.event_id = e.id AND r.dag_id = %s)
        ORDER BY e.timestamp""", asset, dag_id)


def _keys_and_runs(dsn: str, root: Path, published: list[str]) -> None:
    """Each publish's event is keyed by its version, each promotion's by its model folder
    (``<version>/<run folder>``, which exists); each Asset-triggered run of train_flights has a
    published version as its ``partition_key``, each of score_flights one of those keys; and
    the events a run consumed all carry its key: one event, one run."""
    keyed = query_rows(dsn, "SELECT a.name, e.partition_key, count(*) FROM asset_event e "
                            "JOIN asset a ON a.id = e.asset_id WHERE a.name IN "
                            "('dataset_flights', 'model_flights') GROUP BY 1, 2")
    datasets = {k for a, k, _ in keyed if a == "dataset_flights"}
    models = {k for a, k, _ in keyed if a == "model_flights"}
    assert datasets == set(published) and all(n == 1 for *_, n in keyed), keyed
    assert models and None not in models, keyed  # the test ends with a current model
    for key in models:  # a promotion's key names the model it made current
        assert key.split("/")[0] in published, key
        assert (root / "models" / "flights" / key / "metrics.json").is_file(), key
    runs = query_rows(dsn, "SELECT dag_id, run_id, partition_key FROM dag_run WHERE run_type "
                           "= 'asset_triggered' AND dag_id IN ('train_flights', "
                           "'score_flights')")
    assert {k for d, _, k in runs if d == "train_flights"} == set(published), runs
    assert {k for d, _, k in runs if d == "score_flights"} == set(published) | models, runs
    assert len(runs) == len(published) * 2 + len(models), runs  # one run per keyed event
    mixed = query_rows(dsn, """
        SELECT r.dag_id, r.run_id, r.partition_key, e.partition_key FROM dag_run r
        JOIN dagrun_asset_event d ON d.dag_run_id = r.id JOIN asset_event e ON e.id = d.event_id
        WHERE r.dag_id IN ('train_flights', 'score_flights')
          AND e.partition_key IS DISTINCT FROM r.partition_key""")
    assert not mixed, mixed


def test_a_backfill_and_a_burst_leave_every_version_trained_and_scored(
        tmp_path: Path, postgres_db: str, processes) -> None:
    doc = REPO / "docs" / "AIRFLOW.md"  # the command users are told to run
    assert "airflow " + " ".join(BACKFILL) in doc.read_text(), doc
    env = start(tmp_path, postgres_db, processes, lambda spec: spec + SPEC, LANDED,
                unpause=DAGS)
    dsn, root = dsn_of(postgres_db), env["PIPELINE_STORAGE_ROOT"]

    def diagnostics() -> str:
        tis = query_rows(dsn, "SELECT dag_id, run_id, task_id, state FROM task_instance "
                              "ORDER BY dag_id, run_id")
        logs = "\n".join(task_log(env, d, r, t)[-2500:] for d, r, t, s in tis
                         if s in ("failed", "up_for_retry"))
        return f"tasks: {tis}\n{logs}\n{processes.tails()}"

    t0 = time.monotonic()
    made = subprocess.run([str(BIN / "airflow"), *BACKFILL], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]

    def training_busy() -> bool:
        processes.check_alive()
        return bool(query_rows(dsn, "SELECT 1 FROM task_instance WHERE dag_id = 'train_flights'"
                                    " AND task_id = 'train' AND state = 'running'"))

    wait_for("a training to be busy", training_busy, WAIT_S, on_timeout=diagnostics,
             retry_on=RETRY_ON, interval_s=1.0)
    for conf in MANUAL:  # two windows, a few seconds apart, while the training runs
        api(env, "POST", "/dags/etl_flights/dagRuns", {"logical_date": None, "conf": conf})
        time.sleep(3)
    assert training_busy(), "the burst was meant to land while a training holds the GPU"

    def settled() -> bool:
        processes.check_alive()
        etl = {r: s for r, (s, t) in _runs(dsn, "etl_flights").items() if t != "scheduled"}
        if any(s == "failed" for s in etl.values()):
            pytest.fail(f"ETL runs failed: {etl}\n{diagnostics()}", pytrace=False)
        active = query_rows(dsn, "SELECT dag_id, run_id, state FROM dag_run WHERE state IN "
                                 "('queued', 'running') AND run_type != 'scheduled'")
        return len(etl) == VERSIONS and set(etl.values()) == {"success"} and not active

    wait_for("every run to finish", settled, WAIT_S, on_timeout=diagnostics, retry_on=RETRY_ON,
             interval_s=5.0)
    time.sleep(15)  # a run an event queued as the last ones finished would show up now
    assert settled(), diagnostics()
    took = time.monotonic() - t0

    for dag_id in ("train_flights", "score_flights"):
        runs = _runs(dsn, dag_id)
        assert all(s == "success" for s, _ in runs.values()), (dag_id, runs, diagnostics())
    published = list_versions(root, "flights")
    assert len(published) == VERSIONS and published[-1] == NEWEST, published
    _one_version_per_interval(dsn, Path(root.removeprefix("file://")), published)
    for activity in ledger.ACTIVITIES:
        found = {s.version: s for s in ledger.states(root, "flights", activity, published)}
        assert found[NEWEST].state == ledger.DONE, (activity, found[NEWEST])
        for s in found.values():  # done, or superseded by a version that is done
            assert s.state == ledger.DONE or (s.state == ledger.SUPERSEDED and
                                              found[s.by].state == ledger.DONE), (activity, s)
            if s.state == ledger.SUPERSEDED:
                assert version_key(s.by) > version_key(s.version), s
    for asset, dag_id in (("dataset_flights", "train_flights"),
                          ("dataset_flights", "score_flights"),
                          ("model_flights", "score_flights")):
        assert _unlinked(dsn, asset, dag_id) == [], (asset, dag_id, diagnostics())
    events = query_rows(dsn, "SELECT count(*) FROM asset_event e JOIN asset a ON "
                             "a.id = e.asset_id WHERE a.name = 'dataset_flights'")[0][0]
    assert events == VERSIONS
    _keys_and_runs(dsn, Path(root.removeprefix("file://")), published)

    trainings = [v for v in published
                 if ledger.trained(root, "flights", v) is not None]
    skipped = [r for r, (s, _) in _runs(dsn, "train_flights").items() if "Not training flights:"
               in task_log(env, "train_flights", r, "train")]
    print(f"\n{NIGHTS} nights + {len(MANUAL)} manual windows: {len(published)} versions, "
          f"{len(trainings)} trained, {len(_runs(dsn, 'train_flights'))} training runs "
          f"({len(skipped)} skipped), {len(_runs(dsn, 'score_flights'))} score runs in "
          f"{took:.0f} s; no event linked to no run")

    url = (f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/pipeline/datasets/flights"
           "?per_page=50")
    with urllib.request.urlopen(url, timeout=60) as resp:
        page = resp.read().decode()
    for version in published:
        row = page.split(f'data-version="{version}"', 1)[1].split("</tr>", 1)[0]
        for activity in ledger.ACTIVITIES:
            state = next(s for s in ledger.states(root, "flights", activity, [version]))
            assert (f'data-activity="{activity}" data-state="{state.state}"') in row, (
                version, activity, row[:2000])
    current = json.loads((Path(root.removeprefix("file://")) / "models" / "flights" /
                          "current.json").read_text())
    assert version_key(current["version"]) <= version_key(NEWEST)


def _one_version_per_interval(dsn: str, root: Path, published: list[str]) -> None:
    """Each backfill interval published its own version from its own run, in whatever order
    the runs went; each version added its day; LATEST is the newest; one event per version."""
    runs = query_rows(dsn, "SELECT run_id, data_interval_end FROM dag_run WHERE dag_id = "
                           "'etl_flights' AND run_type = 'backfill' ORDER BY data_interval_end")
    nightly = [v for v in published if v.endswith("_all")]
    assert len(runs) == len(nightly) == NIGHTS, (runs, nightly)
    data = root / "datasets" / "flights"
    sizes = []
    for (run_id, end), version in zip(runs, nightly, strict=True):
        manifest = json.loads((data / version / "manifest.json").read_text())
        assert version.startswith(end.strftime("%Y%m%dT000000Z")), (run_id, end, version)
        assert manifest["run_id"] == run_id and manifest["layout"] == "segments", manifest
        sizes.append(manifest["splits"]["train"]["num_examples"])
    assert 0 < sizes[0] and sizes == sorted(set(sizes)), f"each version adds a day: {sizes}"
    assert (data / "LATEST").read_text().strip() == NEWEST
    events = query_rows(dsn, "SELECT extra, source_run_id FROM asset_event WHERE "
                             "source_dag_id = 'etl_flights'")
    assert sorted(e["version"] for e, _ in events) == sorted(published), events
    assert sorted((e["version"], r) for e, r in events if r.startswith("backfill")) == \
        sorted(zip(nightly, (r for r, _ in runs), strict=True)), events
