"""Drift: the report of a run's new data against the previous version, judged by the limits
of the spec's ``drift`` block (per-feature limits, calendar features; parsed with every other
field by ``etl.spec.load``):

```yaml
drift:
  default: {mean_shift: 0.5, psi: 0.2, null_share: 0.1}
  features:
    temp: {mean_shift: 1.0}
    month: {calendar: true}   # a function of the event time: not tested night to night
```

Limits differ by feature on purpose: a weather reading moves more from day to day than a
route's distance, and an operator who knows that should not be warned every night.

The report judges like against like, with a per-segment baseline. A nightly run adds one
day. Its train statistics against the previous version's (a whole year, pooled) always move
for calendar reasons: the month, the weekday, a winter day's
temperature, a Saturday's carrier mix. So each statistic of the new data is judged against
the *spread of the same statistic over comparable earlier segments* (those of at most
``PEER_SIZE`` times the new rows: other nights), each measured against the same pooled
statistics: a new day drifts where it lies outside what past days did, not outside the
year's average. Compaction merges past nights into bigger segments, so each report also
keeps the last ``HISTORY`` figures of nights judged normal (``history``, carried from version
to version): they join the peers. With fewer than ``MIN_PEERS`` figures in all, the spec's
limit alone decides.

Statistics, all from mergeable statistics (nothing reads a row):

- numeric: the shift of the mean in the pooled standard deviations;
- categorical and a class label: the population stability index (PSI) of the value shares,
  only with ``PSI_MIN_ROWS`` new rows (a PSI of a handful of rows is noise);
- every feature: the rise of its share of missing values. A feature whose values vanish is
  the drift that matters most (its mean and PSI are then empty, not shifted).

Features that are functions of the event time (the spec's ``drift.features.X.calendar``, or
derived by a calendar op or from the event-time column) are left out of the shift tests: a
new day's weekday is not drift. Their null share is still tested. Drift is reported
(``etl.drift_report.DriftReport``, in the manifest's validation summary, the UI, a
WARNING in the log), not enforced.

Pure Python (no pandas). Measured only where a run has a previous version to compare with
(``etl.kinds.tabular.judge`` imports this module then). The statistics compared are a version's typed ``statistics`` (``etl.versions.Statistics``,
its numeric columns' ``Moments``), read by attribute; this module sits below
``etl.versions`` and takes them as they come.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from etl.drift_report import DriftReport, DriftRow
from etl.spec.model import DriftLimits, DriftSpec

_SMOOTH = 1e-4  # share given to a value absent on one side, so the log stays finite
PEER_SIZE = 4  # an earlier segment with up to 4x the new train rows is comparable
MIN_PEERS = 5  # fewer comparable segments: the spec's limit alone decides
PEER_MADS = 4.0  # outside median + 4 robust standard deviations of the peers: drifted
PSI_MIN_ROWS = 200  # fewer new rows: the PSI is not tested (sampling noise alone ~ k/n)
CALENDAR_OPS = ("day_of_week", "day_of_year", "year", "hour_of_day")
HISTORY = 30  # figures of past normal nights kept per statistic in the report


def mean_shift(new: Any, old: Any) -> float | None:
    """|new mean - old mean| in old standard deviations, of two ``Moments`` (None when either
    side is empty, or the old values are constant: ten dry days give rain no scale to be
    measured in)."""
    if new is None or old is None or not new.count or not old.count:
        return None
    std = math.sqrt(max(float(old.var or 0.0), 0.0))
    return abs(float(new.mean) - float(old.mean)) / std if std > 0 else None


def psi(new: Mapping[str, int], old: Mapping[str, int]) -> float | None:
    """Population stability index of two count tables (None when either is empty)."""
    n_new, n_old = sum(new.values()), sum(old.values())
    if not n_new or not n_old:
        return None
    total = 0.0
    for value in set(new) | set(old):
        p = max(new.get(value, 0) / n_new, _SMOOTH)
        q = max(old.get(value, 0) / n_old, _SMOOTH)
        total += (p - q) * math.log(p / q)
    return total


def null_rise(new: Any, old: Any, feature: str) -> float | None:
    """The rise of ``feature``'s share of missing values (None where a count is unknown)."""
    shares = [_null_share(s, feature) for s in (new, old)]
    return None if None in shares else shares[0] - shares[1]


def _null_share(stats: Any, feature: str) -> float | None:
    nulls, rows = stats.null_counts.get(feature), stats.num_examples
    return None if nulls is None or not rows else nulls / rows


def calendar_features(spec: Any) -> set[str]:
    """Features that are functions of the event time: declared, or derived by a calendar op or
    from the primary source's event-time column."""
    event_time = spec.primary_source.event_time
    return {f.name for f in spec.features
            if spec.drift.limits(f.name).calendar or f.derive in CALENDAR_OPS
            or (event_time is not None and event_time in f.inputs)}


def bound(limit: float, peers: Sequence[float], robust: bool = False) -> float:
    """The value above which a statistic drifted: the limit, or the peers' spread if wider.

    The spread is the peers' median + ``PEER_MADS`` robust deviations and, unless ``robust``,
    their largest value (weather is heavy-tailed: one foggy day in ten is normal). Null
    shares are judged ``robust``: one earlier outage must not hide the next.
    """
    if len(peers) < MIN_PEERS:
        return limit
    mid = statistics.median(peers)
    mad = statistics.median(abs(p - mid) for p in peers) * 1.4826
    return max(limit, mid + PEER_MADS * mad, limit if robust else max(peers))


class _Judge:
    """One report's rows: a statistic of the new data, of each peer, and the verdict."""

    def __init__(self, old: Any, peers: Sequence[Any],
                 history: Mapping[str, list[float]]) -> None:
        self.old, self.peers, self.rows = old, peers, []
        self.history, self.kept = history, {}

    def add(self, name: str, kind: str, statistic: str, fn: Any, new: Any, limit: float,
            of_peer: Any) -> None:
        value = fn(new, self.old)
        seen = [v for p in self.peers if (v := fn(of_peer(p), self.old)) is not None
                and math.isfinite(v)]
        past = list(self.history.get(f"{kind}:{name}") or [])
        edge = bound(limit, seen + past, robust=kind == "missing")
        drifted = value is not None and value > edge
        shown = None if value is None else (round(value, 4) if math.isfinite(value) else "inf")
        self.rows.append(DriftRow.of(name=name, kind=kind, statistic=statistic, value=shown,
                                     limit=round(edge, 4), spec_limit=limit,
                                     peers=len(seen) + len(past), drifted=drifted))
        if isinstance(shown, float) and not drifted:  # a drifted night must not widen the spread
            past.append(shown)
        self.kept[f"{kind}:{name}"] = past[-HISTORY:]


def compare(new: Any, old: Any, against: str,
            segments: list[str], limits: DriftSpec | None = None,
            calendar: frozenset[str] | set[str] = frozenset(),
            peers: Sequence[Any] = (),
            history: Mapping[str, list[float]] | None = None) -> DriftReport:
    """The drift report of finalized train statistics ``new`` against ``old``.

    ``peers``: the finalized statistics of comparable earlier segments, the baseline spread;
    ``history``: the previous report's ``history`` (figures of earlier normal nights);
    ``calendar``: features left out of the shift tests.
    """
    limits = limits or DriftSpec()
    judge = _Judge(old, peers, history or {})
    old_numeric, old_vocab = old.numeric, old.vocabulary_counts
    for col, moments in new.numeric.items():
        if col in old_numeric and col not in calendar:
            judge.add(col, "numeric", "mean shift (old std)",
                      lambda n, o, c=col: mean_shift(n, o.numeric[c]), moments,
                      limits.limits(col).mean_shift, lambda p, c=col: p.numeric.get(c))
    few = int(new.num_examples or 0) < PSI_MIN_ROWS
    for col, counts in new.vocabulary_counts.items():
        if col in old_vocab and col not in calendar and not few:
            judge.add(col, "categorical", "PSI",
                      lambda n, o, c=col: psi(n, o.vocabulary_counts[c]), counts,
                      limits.limits(col).psi, lambda p, c=col: p.vocabulary_counts.get(c, {}))
    for col in sorted(set(new.null_counts) & set(old.null_counts)):
        judge.add(col, "missing", "null share rise", lambda n, o, c=col: null_rise(n, o, c),
                  new, limits.limits(col).null_share, lambda p: p)
    _label(judge, new, limits.limits("label"), few)
    rows = judge.rows
    drifted = tuple(dict.fromkeys(str(r.name) for r in rows if r.drifted))
    return DriftReport.of(against=against, segments=tuple(segments),
                          rows=int(new.num_examples or 0),
                          baseline=_baseline(peers, history or {}), excluded=tuple(sorted(calendar)),
                          features=tuple(rows), drifted=drifted, history=judge.kept)


def _label(judge: _Judge, new: Any, limits: DriftLimits, few: bool) -> None:
    old = judge.old
    if new.label_counts and old.label_counts and not few:
        judge.add("label", "label", "PSI", lambda n, o: psi(n, o.label_counts),
                  new.label_counts, limits.psi, lambda p: p.label_counts)
    elif new.label and old.label:
        judge.add("label", "label", "mean shift (old std)",
                  lambda n, o: mean_shift(n, o.label), new.label, limits.mean_shift,
                  lambda p: p.label)


def _baseline(peers: Sequence[Mapping[str, Any]], history: Mapping[str, list[float]]) -> str:
    nights = max((len(v) for v in history.values()), default=0)
    seen = f"{len(peers)} comparable earlier segments and {nights} earlier nights' figures"
    if len(peers) + nights < MIN_PEERS:
        return f"the spec's limits ({seen}; {MIN_PEERS} needed for a spread)"
    return f"the spread over {seen}"
