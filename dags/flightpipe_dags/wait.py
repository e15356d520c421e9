"""``wait_for_data``: before ``build``, wait for the window's late partitions, deferred.

The check is the build's own (``etl.pipeline.arrival``: the window's periods with no file).
When some are missing the task defers to ``flightpipe_arrival.PartitionsLandedTrigger``: the
triggerer lists the storage every minute while the task holds no worker and no pool slot.
The deadline is the spec's ``arrival.wait`` after the later of the interval's end and the
run's start (a backfill of old days still gets its wait); past it the task fails once, no
retries, naming the missing partitions and the spec key. ``arrival: {wait: 0}`` fails at once.
A window whose first missing partition closed more than ``arrival.wait`` before the window's
end is refused at once (overdue, not late: ``etl.pipeline.arrival``), naming the newest
landed partition and the Params that publish what has landed.

A run stopped while it waited ("Mark Dag Run as failed": ``wait_for_data`` failed, ``build``
and ``publish`` skipped) is recovered by clearing the whole run ("Clear existing tasks",
docs/AIRFLOW.md). Clearing only the failed task would re-run ``wait_for_data`` alone, nothing
after it, and publish nothing, so ``wait_for_data`` refuses that at once, naming the clear that
publishes.

Import-light like the rest of the package: etl code is imported inside ``execute``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator

from flightpipe_dags.options import EtlOptions, resolve_etl_options
from flightpipe_dags.settings import storage_root

log = logging.getLogger("airflow.task")
POKE_S, REPORT_S = 60.0, 600.0  # list every minute; say what is missing every 10 minutes
# The XCom a waiting run leaves for the dataset page (``pipeline_ui.runs``): what it waits for
# and until when, shown beside the run while its ``wait_for_data`` is deferred.
WAITING_KEY = "waiting"
PARTITION_FORMAT = "%Y-%m-%d"  # the day a raw partition event names (``partition_key``)


class PartitionKeyError(ValueError):
    """A partition-keyed run whose key is not a day: every try of the run has that key, so
    it fails at once (``failures``)."""

    retryable = False


def partition_end(partition_key: str | None) -> datetime | None:
    """The end of the day a partition-keyed run builds (its key is that day, ``2013-01-05``)."""
    if not partition_key:
        return None
    try:
        day = datetime.strptime(partition_key[:10], PARTITION_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise PartitionKeyError(f"partition_key {partition_key!r} refused: expected a day "
                                "like 2013-01-05") from None
    return day + timedelta(days=1)


def run_options(params: Mapping[str, Any], data_interval_end: datetime | None,
                dag_run: Any) -> EtlOptions:
    """The run's checked options; a partition-keyed run's interval ends with its day."""
    end = partition_end(getattr(dag_run, "partition_key", None)) or data_interval_end
    return resolve_etl_options(params, end, dag_run.run_after, storage_root())


class WaitForData(BaseOperator):
    """Succeeds once every partition of the run's window has landed (see the module)."""

    template_fields = ()

    def __init__(self, *, dataset: str, wait: timedelta, poke_s: float = POKE_S,
                 report_s: float = REPORT_S, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dataset, self.wait = dataset, wait
        self.poke_s, self.report_s = poke_s, report_s

    def execute(self, context: Any) -> None:
        from etl.pipeline.arrival import check_arrival

        self._refuse_a_lone_rerun(context)
        self.root = storage_root()
        opts = run_options(context["params"], context.get("data_interval_end"),
                           context["dag_run"])
        arrival = check_arrival(self.dataset, self.root, opts.interval_end,
                                opts.interval_start, opts.source_uri)
        if arrival.complete:
            log.info("Every partition of the window of %s has landed", self.dataset)
            return
        if arrival.overdue(opts.interval_end, self.wait):
            self._refuse_overdue(arrival.overdue_reason(opts.interval_end, self.wait))
        started = getattr(context["dag_run"], "start_date", None) or datetime.now(UTC)
        deadline = max(opts.interval_end, started) + self.wait
        if self.wait <= timedelta(0) or datetime.now(UTC) >= deadline:
            self._give_up(list(arrival.missing), arrival.where, deadline)
        until = deadline.isoformat(timespec="seconds")
        log.info("Missing %d partition(s) of %s (%s): %s; waiting until %s (deferred: no "
                 "worker or pool slot held)", len(arrival.missing), self.dataset,
                 arrival.where, arrival.shown(), until)
        context["ti"].xcom_push(key=WAITING_KEY, value={
            "missing": len(arrival.missing), "shown": arrival.shown(3), "until": until})
        from flightpipe_arrival import PartitionsLandedTrigger

        self.defer(method_name="execute_complete", trigger=PartitionsLandedTrigger(
            self.dataset, self.root, opts.interval_end.isoformat(), deadline.isoformat(),
            opts.interval_start.isoformat() if opts.interval_start else None,
            opts.source_uri, self.poke_s, self.report_s))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> None:
        if event.get("status") == "landed":
            log.info("Every partition of the window of %s has landed", self.dataset)
            return
        deadline = event.get("deadline")
        self._give_up(event.get("missing") or [], event.get("where") or "",
                      datetime.fromisoformat(deadline) if deadline else None, event.get("error"))

    def _refuse_a_lone_rerun(self, context: Mapping[str, Any]) -> None:
        """Fail now, no retries, when this run's later tasks were already skipped: the run was
        stopped ("Mark Dag Run as failed" skips what had not run) and then only this task was
        cleared ("Clear only failed tasks"): nothing after it would run. Airflow judges a run by
        its last tasks, skipped here, so the run still shows green; this task shows red and its
        log names the clear that publishes.

        Outside a task runner (unit tests: no ``get_ti_count``, no DAG) there is nothing to ask."""
        ti, run = context.get("ti"), context.get("dag_run")
        count = getattr(ti, "get_ti_count", None)
        later = sorted(self.downstream_task_ids) if self.has_dag() else []
        if count is None or run is None or not later:
            return
        skipped = count(self.dag_id, task_ids=later, run_ids=[run.run_id], states=["skipped"])
        if not skipped:
            return
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(
            f"this run was stopped while it waited (its {', '.join(later)} "
            f"{'was' if len(later) == 1 else 'were'} skipped) and only {self.task_id} was "
            "cleared: nothing runs after it and nothing is published (Airflow still shows the "
            "run green, as its last task stays skipped). "
            "Clear the whole run instead (Clear Dag Run, 'Clear existing tasks'; REST: POST "
            f"/api/v2/dags/{self.dag_id}/dagRuns/<run_id>/clear with "
            '{"dry_run": false, "only_failed": false}): it waits for the data again, builds '
            "and publishes.")

    def _refuse_overdue(self, reason: str) -> None:
        """Fail now, no retries: the window asks for partitions no wait brings (see
        ``etl.pipeline.arrival``); the reason names the newest landed one and what to set.

        The reason is the log's one line of its own; Airflow logs the exception again with
        its traceback, so the exception says only what happened and points at that line."""
        from airflow.sdk.exceptions import AirflowFailException

        log.error("%s", reason)
        raise AirflowFailException(f"wait_for_data refused the window of {self.dataset}: its "
                                   "missing partitions are overdue, not late (the ERROR line "
                                   "above names them and the Params to set)")

    def _give_up(self, missing: list[str], where: str, deadline: datetime | None,
                 error: str | None = None) -> None:
        """Fail now, no retries: waiting longer is the operator's call (the spec key)."""
        from airflow.sdk.exceptions import AirflowFailException

        from etl.spec.scheduling import find_specs

        spec = find_specs().get(self.dataset, f"the spec of {self.dataset}")
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more"
                                           if len(missing) > 10 else "")
        when = f"by {deadline.isoformat(timespec='seconds')}" if deadline else "by the deadline"
        what = (f"{len(missing)} partition(s) of {self.dataset} not landed {when} ({where}): "
                f"{shown}" if missing else f"cannot list the partitions of {self.dataset} "
                f"{when}: {error}")
        raise AirflowFailException(f"{what}. Land them and clear this run, or set arrival.wait "
                                   f"in {spec} to wait longer.")
