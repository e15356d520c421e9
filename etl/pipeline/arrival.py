"""Has a run's window landed? What the wait for late data asks before ``build`` starts.

"Missing" has one definition: the periods of the window with no file
(``etl.segments.plan.window_gaps``), the same the build's ``require_complete`` check
refuses. A source that allows gaps (``require_complete: false``), an unpartitioned source
that exists and an images dataset have nothing to wait for. One listing per check, so the
triggerer can ask again every minute cheaply; no Dask, GX or TensorFlow is imported.

*Overdue, not late*: a partition is waited for until ``arrival.wait`` after it closed. When a
missing partition closed more than ``arrival.wait`` before the window's end, no wait can bring
it in time -- the runs whose windows ended with it already waited for it, or (a first run of a
nightly schedule over old data) the feed stopped long before the window -- so ``overdue`` says
so and the run is refused at once, naming the newest landed partition and what to set. The
window's end is the clock here, not the wall clock, so a retry or a backfill decides the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from etl import kinds, storage
from etl.segments import plan
from etl.segments.plan import period_end, window_gaps
from etl.spec import Spec


@dataclass(frozen=True)
class Arrival:
    """What a window still misses: ``missing`` partitions (the source's own spelling, e.g.
    ``2013-01-03``, or the file URI of an unpartitioned source), in order; ``where`` is the
    source's URI pattern, for messages."""

    dataset: str
    where: str
    missing: tuple[str, ...] = ()
    newest: str | None = None  # the newest partition landed before the window's end
    first_closed: datetime | None = None  # when the first missing partition ended
    last_hole_closed: datetime | None = None  # the end of the last one before ``newest``
    newest_closed: datetime | None = None  # the end of ``newest``

    @property
    def complete(self) -> bool:
        return not self.missing

    def shown(self, limit: int = 10) -> str:
        """The missing partitions, the first ``limit`` of them, for one log line."""
        more = len(self.missing) - limit
        return ", ".join(self.missing[:limit]) + (f" and {more} more" if more > 0 else "")

    def overdue(self, end: datetime, wait: timedelta) -> bool:
        """A missing partition closed more than ``wait`` before the window's ``end``: waiting
        cannot bring it in time (see the module), so the run is refused at once."""
        return self.first_closed is not None and self.first_closed + wait < end

    def overdue_reason(self, end: datetime, wait: timedelta) -> str:
        """One line: what is missing, why it is not waited for, and what to set."""
        day = timedelta(days=1)
        new_end = self.newest_closed if self.newest_closed and self.newest_closed < end else end
        fixes = []
        if self.newest_closed is not None and new_end < end:
            fixes.append(f"interval_end={new_end.isoformat()}")
        if self.last_hole_closed is not None and new_end - self.last_hole_closed >= day:
            fixes.append(f"window_days={(new_end - self.last_hole_closed) // day}")
        landed = (f"the newest landed partition is {self.newest}" if self.newest
                  else "no partition has landed before it")
        publish = (f"To publish what has landed, trigger with Param {' and '.join(fixes)}; "
                   if fixes else "")
        return (f"{len(self.missing)} partition(s) of {self.dataset} missing from the window "
                f"ending {end.isoformat()} ({self.where}): {self.shown()}. Not waiting: the "
                f"first closed more than arrival.wait ({wait}) before the window's end, so it is "
                f"overdue, not late; {landed}. {publish}or land the missing partitions and "
                "clear this run.")


def check_arrival(dataset: str, root: str, end: datetime, start: datetime | None = None,
                  source_uri: str | None = None) -> Arrival:
    """The partitions of ``dataset``'s window [start, end) that have not landed under ``root``.

    ``source_uri``: the run's raw-source override (Param ``source_uri``), as the build uses it.
    """
    spec = kinds.load_spec(dataset, source_uri=source_uri)
    if not isinstance(spec, Spec):  # images: one folder, listed by the build
        return Arrival(dataset, spec.raw_uri)
    source = spec.primary_source
    part = source.partitioning
    if part is None:
        uri = plan.source_uri(root, source)
        return Arrival(dataset, source.uri, () if storage.exists(uri) else (uri,))
    if not part.require_complete:
        return Arrival(dataset, source.uri)
    present, missing = window_gaps(root, source, start, end)
    if not missing:
        return Arrival(dataset, source.uri)
    newest = max(present, default=None)
    if newest is None and start is not None:  # the window holds none: the feed's newest before it
        newest = max(window_gaps(root, source, None, end)[0], default=None)
    holes = [m for m in missing if newest is not None and m < newest]
    return Arrival(dataset, source.uri, tuple(m.strftime(part.format) for m in missing),
                   newest.strftime(part.format) if newest else None,
                   period_end(missing[0], source),
                   period_end(holes[-1], source) if holes else None,
                   period_end(newest, source) if newest else None)
