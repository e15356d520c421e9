"""The trigger that waits for a run's late partitions in the triggerer, holding no worker.

``wait_for_data`` (``flightpipe_dags.wait``) defers to ``PartitionsLandedTrigger`` when its
window misses partitions. The triggerer imports this module by path, so it lives in the
plugins folder (on every Airflow component's ``sys.path``) and imports only Airflow's trigger
base at the top; the listing (``etl.pipeline.arrival``, no Dask, GX or TensorFlow) is imported
when the trigger first runs, and runs in a thread so the triggerer's event loop never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CLASSPATH = "flightpipe_arrival.PartitionsLandedTrigger"


class PartitionsLandedTrigger(BaseTrigger):
    """Lists the window's partitions every ``poke_s`` seconds until none is missing
    (event ``landed``) or the deadline passes (event ``deadline`` with what still misses).

    Logs what it misses at start, whenever that changes, and every ``report_s`` seconds.
    """

    def __init__(self, dataset: str, root: str, end: str, deadline: str,
                 start: str | None = None, source_uri: str | None = None,
                 poke_s: float = 60.0, report_s: float = 600.0) -> None:
        super().__init__()
        self.dataset, self.root, self.end, self.start = dataset, root, end, start
        self.deadline, self.source_uri = deadline, source_uri
        self.poke_s, self.report_s = poke_s, report_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {"dataset": self.dataset, "root": self.root, "end": self.end,
                           "deadline": self.deadline, "start": self.start,
                           "source_uri": self.source_uri, "poke_s": self.poke_s,
                           "report_s": self.report_s}

    def _check(self) -> Any:
        from etl.pipeline.arrival import check_arrival

        return check_arrival(self.dataset, self.root, datetime.fromisoformat(self.end),
                             datetime.fromisoformat(self.start) if self.start else None,
                             self.source_uri)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.deadline)
        said, said_at, error = None, datetime.min.replace(tzinfo=UTC), None
        while True:
            try:
                arrival = await asyncio.to_thread(self._check)
                error = None
            except Exception as exc:  # noqa: BLE001 -- a storage hiccup: say it, list again
                arrival, error = None, f"{type(exc).__name__}: {exc}"
                self.log.warning("Cannot list the partitions of %s yet (%s); trying again",
                                 self.dataset, error)
            now = datetime.now(UTC)
            if arrival is not None and arrival.complete:
                self.log.info("Every partition of the window of %s has landed", self.dataset)
                yield TriggerEvent({"status": "landed"})
                return
            missing = list(arrival.missing) if arrival is not None else []
            if now >= deadline:
                yield TriggerEvent({"status": "deadline", "deadline": self.deadline,
                                    "missing": missing, "error": error,
                                    "where": arrival.where if arrival is not None else ""})
                return
            if arrival is not None and (missing != said
                                        or now - said_at >= timedelta(seconds=self.report_s)):
                self.log.info("Still missing %d partition(s) of %s (%s): %s; waiting until %s",
                              len(missing), self.dataset, arrival.where, arrival.shown(),
                              deadline.isoformat(timespec="seconds"))
                said, said_at = missing, now
            await asyncio.sleep(max(0.1, min(self.poke_s, (deadline - now).total_seconds())))
