"""Each dataset's recent DAG runs, from Airflow's metadata database: what storage cannot show.

Storage holds only what was published; a run that failed, was refused or is still waiting for
late data left nothing there. Inside the api-server the plugin reads the runs of ``etl_<name>``,
``train_<name>`` and ``score_<name>`` with Airflow's ORM (the session the api-server itself
uses), the last started first (a run not started yet, queued, above them), and the task that
says why a run is where it is (a deferred ``wait_for_data``, with what it waits for and until
when, from the XCom it left: ``flightpipe_dags.wait``; a failed ``build``; a skipped ``train``,
``score`` or ``publish`` with its reason, from the XCom ``flightpipe_dags.choice.skip`` left:
Airflow keeps no word of a skip but the task log). A dataset with DAGs but nothing published
is still listed.
Standalone (tests, no Airflow) the app gets no run source and shows none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

DAG_PREFIXES = ("etl_", "train_", "score_")
RECENT_RUNS = 15
# A task in one of these states explains its run's state, most telling first.
_TELLING = ("deferred", "failed", "up_for_retry", "upstream_failed", "running", "queued",
            "skipped")


@dataclass(frozen=True)
class RunRow:
    """One DAG run as the dataset page lists it."""

    dag_id: str
    run_id: str
    run_type: str
    state: str  # queued / running / deferred / success / failed
    run_after: datetime | None
    start: datetime | None
    end: datetime | None
    note: str = ""  # e.g. "wait_for_data deferred", "build failed", "train skipped: <why>"


class RunSource(Protocol):
    def dataset_names(self) -> set[str]: ...

    def recent(self, dataset: str, limit: int = RECENT_RUNS) -> list[RunRow]: ...


def dataset_of(dag_id: str) -> str | None:
    """``etl_flights`` / ``train_flights`` / ``score_flights`` -> ``flights``; other DAGs are
    not ours."""
    for prefix in DAG_PREFIXES:
        if dag_id.startswith(prefix) and len(dag_id) > len(prefix):
            return dag_id[len(prefix):]
    return None


WAITING_TASK, WAITING_KEY = "wait_for_data", "waiting"  # flightpipe_dags.wait's XCom
SKIP_KEY = "skipped"  # flightpipe_dags.choice.skip's XCom: a skipped task's reason


def waiting_note(waiting: Any) -> str:
    """What a deferred ``wait_for_data`` waits for and until when, from its XCom
    (``{"missing": 1, "shown": "2013-01-03", "until": "2026-11-25T06:00:00+00:00"}``)."""
    if not isinstance(waiting, dict) or not waiting.get("until"):
        return ""
    try:
        until = datetime.fromisoformat(str(waiting["until"])).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        until = str(waiting["until"])
    return (f"waiting for {waiting.get('missing', '?')} partition(s) "
            f"({waiting.get('shown', '')}) until {until}")


def summarize(state: str, tasks: list[tuple[str, str]], waiting: Any = None,
              skipped: dict[str, Any] | None = None) -> tuple[str, str]:
    """(state shown, note): a running run whose task is deferred reads "deferred"; a
    deferred ``wait_for_data`` says what it waits for and until when (``waiting``), a
    skipped task why (``skipped``: task id -> the reason its ``SKIP_KEY`` XCom holds)."""
    ranked = sorted((t for t in tasks if t[1] in _TELLING), key=lambda t: _TELLING.index(t[1]))
    said, skipped = waiting_note(waiting), skipped or {}

    def why(task: str, s: str) -> str:
        if (task, s) == (WAITING_TASK, "deferred") and said:
            return f": {said}"
        return f": {skipped[task]}" if s == "skipped" and skipped.get(task) else ""

    note = ", ".join(f"{task} {s.replace('_', ' ')}{why(task, s)}" for task, s in ranked[:2])
    if state == "running" and ranked and ranked[0][1] == "deferred":
        return "deferred", note
    return state, note


class AirflowRuns:
    """The api-server's metadata DB, read with Airflow's ORM (imported on first use)."""

    def dataset_names(self) -> set[str]:
        from airflow.models.dag import DagModel
        from airflow.utils.session import create_session
        from sqlalchemy import or_, select

        with create_session() as session:
            ids = session.scalars(select(DagModel.dag_id).where(
                DagModel.is_stale.is_(False),
                or_(*(DagModel.dag_id.like(f"{p}%") for p in DAG_PREFIXES)))).all()
        return {name for name in map(dataset_of, ids) if name}

    def recent(self, dataset: str, limit: int = RECENT_RUNS) -> list[RunRow]:
        from airflow.models.dagrun import DagRun
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        dag_ids = [f"{p}{dataset}" for p in DAG_PREFIXES]
        with create_session() as session:
            runs = session.execute(
                select(DagRun.dag_id, DagRun.run_id, DagRun.run_type, DagRun.state,
                       DagRun.run_after, DagRun.start_date, DagRun.end_date)
                .where(DagRun.dag_id.in_(dag_ids))
                .order_by(DagRun.start_date.desc().nulls_first(), DagRun.run_after.desc())
                .limit(limit)).all()
            run_ids = [r.run_id for r in runs]
            tis = session.execute(
                select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id,
                       TaskInstance.state)
                .where(TaskInstance.dag_id.in_(dag_ids),
                       TaskInstance.run_id.in_(run_ids))).all()
            said = session.execute(
                select(XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.key,
                       XComModel.value)
                .where(XComModel.dag_id.in_(dag_ids), XComModel.run_id.in_(run_ids),
                       XComModel.key.in_((WAITING_KEY, SKIP_KEY)))).all()
            waiting = {(x.dag_id, x.run_id): XComModel.deserialize_value(x) for x in said
                       if (x.task_id, x.key) == (WAITING_TASK, WAITING_KEY)}
            skipped: dict[tuple[str, str], dict[str, Any]] = {}
            for x in said:
                if x.key == SKIP_KEY:
                    skipped.setdefault((x.dag_id, x.run_id), {})[x.task_id] = \
                        XComModel.deserialize_value(x)
        by_run: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for ti in tis:
            by_run.setdefault((ti.dag_id, ti.run_id), []).append((ti.task_id, str(ti.state)))
        rows = []
        for r in runs:
            state, note = summarize(str(r.state), by_run.get((r.dag_id, r.run_id), []),
                                    waiting.get((r.dag_id, r.run_id)),
                                    skipped.get((r.dag_id, r.run_id)))
            rows.append(RunRow(r.dag_id, r.run_id, str(r.run_type), state, r.run_after,
                               r.start_date, r.end_date, note))
        return rows
