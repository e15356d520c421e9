"""Which partitions of the window a joined source has no rows for, said in words.

A lookup join is a left join: a row of the primary source whose keys the lookup lacks keeps
nulls in the joined columns, and validation then fails on one of those columns (``temp`` of
flights, when the weather file ends before the window's last day) without saying why. When
a join has a timestamp key that is the primary source's event time, the lookup's own instants
say exactly which partitions of the window it cannot join: none of their rows finds a lookup
row with a time inside the partition. Each such join is named once, in the words the build's
log, the validation failure and the results' ``meta.join_gaps`` (the UI's validation page)
repeat: ``no weather rows joined for 2013-01-05: the joined source `weather` ends on
2013-01-04``. Any spec's joins are judged this way; reading no row of the primary source, it
costs a sort of each time-keyed lookup per run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from etl.kinds.tabular.read import lookup_instants, ts_keys_of
from etl.segments.plan import period_of
from etl.spec import Spec
from etl.versions.segment import SegmentMeta

log = logging.getLogger("etl.pipeline")
SHOWN = 5  # partitions named in one sentence, then "and N more"
_SHOWN_AS = {"day": "%Y-%m-%d", "hour": "%Y-%m-%d %H:00"}


@dataclass(frozen=True)
class JoinGap:
    """A joined source with no rows for some partitions of the window: its columns are null
    in every row of them."""

    source: str
    columns: tuple[str, ...]  # the columns the join adds (output names)
    partitions: tuple[str, ...]  # as shown: 2013-01-05
    reason: str  # "ends on 2013-01-04", "starts on ...", "holds no rows", "has no rows for them"

    def text(self) -> str:
        """``no weather rows joined for 2013-01-05: the joined source `weather` ends on ...``."""
        shown = ", ".join(self.partitions[:SHOWN])
        more = len(self.partitions) - SHOWN
        if more > 0:
            shown += f" and {more} more"
        return (f"no {self.source} rows joined for {shown}: the joined source "
                f"`{self.source}` {self.reason}")

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "columns": list(self.columns),
                "partitions": list(self.partitions), "text": self.text()}


def join_gaps(spec: Spec, lookups: Sequence[pd.DataFrame],
              metas: Sequence[SegmentMeta]) -> list[JoinGap]:
    """The window's joins (``lookups``: their right sides, as ``read_lookups`` gives them) that
    have no row for some of its partitions (the segments' ``metas``), per join."""
    primary = spec.primary_source
    if primary.event_time is None or primary.partitioning is None:
        return []
    spans = _spans(spec, metas)
    gaps = []
    for join, right in zip(spec.joins, lookups):
        if primary.event_time not in ts_keys_of(spec, join):
            continue
        instants = np.sort(_utc(lookup_instants(right, primary.event_time)).dropna().to_numpy())
        empty = [(lo, hi) for lo, hi in spans if not _any_between(instants, lo, hi)]
        if empty:
            fmt = _SHOWN_AS.get(primary.partitioning.granularity, _SHOWN_AS["day"])
            gaps.append(JoinGap(join.source, tuple(join.output_name(c) for c in join.columns),
                                tuple(lo.strftime(fmt) for lo, _ in empty),
                                _reason(instants, empty, fmt)))
    return gaps


def said_join_gaps(spec: Spec, lookups: Sequence[pd.DataFrame],
                   metas: Sequence[SegmentMeta]) -> list[dict[str, Any]]:
    """``join_gaps``, each said in one WARNING line of the build's log (``join flights: no
    weather rows joined for ...``), as the JSON the validation results keep."""
    gaps = join_gaps(spec, lookups, metas)
    for gap in gaps:
        log.warning("join %s: %s", spec.name, gap.text())
    return [gap.to_json() for gap in gaps]


def _spans(spec: Spec, metas: Sequence[SegmentMeta]) -> list[tuple[datetime, datetime]]:
    """Each raw partition of the window once, in order, cut to its segment's interval."""
    spans: dict[datetime, datetime] = {}
    for meta in metas:
        cut = meta.interval
        for key, _ in meta.partitions:
            period = period_of(key, spec.primary_source)
            if period is None:
                continue
            lo = max(period[0], _at(cut.start) or period[0])
            hi = min(period[1], _at(cut.end) or period[1])
            if lo < hi:
                spans.setdefault(lo, hi)
    return sorted(spans.items())


def _at(text: str | None) -> datetime | None:
    return pd.Timestamp(text).tz_convert("UTC").to_pydatetime() if text else None


def _utc(values: pd.Series) -> pd.Series:
    return values.dt.tz_convert("UTC").dt.tz_localize(None)


def _stamp(at: datetime) -> np.datetime64:
    return np.datetime64(at.replace(tzinfo=None), "ns")


def _any_between(instants: np.ndarray, lo: datetime, hi: datetime) -> bool:
    """Whether a sorted array holds an instant in [lo, hi)."""
    return bool(np.searchsorted(instants, _stamp(hi)) > np.searchsorted(instants, _stamp(lo)))


def _reason(instants: np.ndarray, empty: list[tuple[datetime, datetime]], fmt: str) -> str:
    """Why the join has nothing for ``empty``: the lookup ends (or starts) outside them."""
    if not len(instants):
        return "holds no rows"
    first = pd.Timestamp(instants[0]).tz_localize("UTC")
    last = pd.Timestamp(instants[-1]).tz_localize("UTC")
    if all(_stamp(lo) > instants[-1] for lo, _ in empty):
        return f"ends on {last.strftime(fmt)}"
    if all(_stamp(hi) <= instants[0] for _, hi in empty):
        return f"starts on {first.strftime(fmt)}"
    return (f"holds rows from {first.strftime(fmt)} to {last.strftime(fmt)} but none for "
            f"{'it' if len(empty) == 1 else 'them'}")
