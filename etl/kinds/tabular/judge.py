"""The tabular kind's window judged: its validation decided from what its segments stored, the
joins that left columns empty said in words, its statistics merged, drift measured.

Validation reads no record (``judge_from_partials``): row-level expectations are summed over
the segments' ``RowCounts`` and GX judges ``mostly`` on the totals; dataset-level ones (row
counts, key uniqueness across segments, ...) get their metric values from the segments'
merged metric partials (``etl.validation.metrics``: the plan, the partials, how each metric
value derives from them). The cost is O(segments); the stored keys are read only when a
duplicate has to be named.

A lookup join is a left join: a row of the primary source whose keys the lookup lacks keeps
nulls in the joined columns, and validation then fails on one of those columns (``temp`` of
flights, when the weather file ends before the window's last day) without saying why. When a
join has a timestamp key that is the primary source's event time, the lookup's own instants
say exactly which partitions of the window it cannot join (``join_gaps``). Each such join is
named once, in the words the build's log, the validation failure and the results'
``meta.join_gaps`` (the UI's validation page) repeat: ``no weather rows joined for
2013-01-05: the joined source `weather` ends on 2013-01-04``. Any spec's joins are judged this
way; reading no row of the primary source, it costs a sort of each time-keyed lookup per run.

The statistics: the segments' partials merged, then finalized (the same figures however the
rows were grouped); drift: the new segments' train statistics against the previous
version's (``etl.spec.drift``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import pandas as pd

from etl import statistics
from etl.drift_report import DriftReport
from etl.errors import ValidationFailed
from etl.kinds import Judged, Window
from etl.kinds.tabular.prepare import finalize_partial
from etl.kinds.tabular.read import lookup_instants, ts_keys_of
from etl.segments.build import read_keys, read_partials, read_statistics
from etl.segments.plan import period_of
from etl.spec import Spec
from etl.validation import (
    DatasetChecks,
    RowCounts,
    SplitSuite,
    failure_message,
    finish,
    merge_metric_partials,
    summed,
)
from etl.validation.metrics import Key, MetricPartials, result_format
from etl.validation.suite import DATASET, ROW
from etl.versions import Manifest
from etl.versions.segment import Metas, SegmentMeta, Statistics

log = logging.getLogger("etl.pipeline")
SHOWN = 5  # partitions named in one sentence, then "and N more"
_SHOWN_AS = {"day": "%Y-%m-%d", "hour": "%Y-%m-%d %H:00"}


class Judging(Protocol):
    """What the judgement reads of the run's inputs (``window.RunInputs``): the suite split by
    level, its dataset-level checks and the lookups (each join's right side)."""

    suite: SplitSuite
    checks: DatasetChecks
    lookups: list[pd.DataFrame]


def judge(window: Window[Spec, Judging], mode: str, results_uri: str) -> Judged:
    """The window's validation (results and Data Docs into ``results_uri``), statistics
    and drift. Raises ValidationFailed as ``judge_from_partials`` does."""
    inputs = window.context
    summary = judge_from_partials(window.spec, inputs.suite, inputs.checks, window.metas, mode,
                                  results_uri, said_join_gaps(window.spec, inputs.lookups,
                                                              [m for _, m in window.metas]))
    stats, label = merged_statistics(window.spec, [m for _, m in window.metas])
    return Judged(summary, stats, _drift(window), label)


# --- validation, from what the segments stored ---------------------------------------------------

def _examples(metas: Metas) -> Any:
    """A function giving the window's stored keys as one frame (read only on a duplicate)."""

    def frame() -> Any:
        import dask
        import dask.dataframe as dd

        keys = [dask.delayed(read_keys)(uri, meta) for uri, meta in metas]
        empty = read_keys(*metas[0]).iloc[:0]
        return dd.from_delayed(keys, meta=empty, verify_meta=False)

    return frame


def judge_from_partials(spec: Spec, suite: SplitSuite, checks: DatasetChecks, metas: Metas,
                        mode: str, results_uri: str,
                        join_gaps: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The window's validation summary (results and Data Docs written to ``results_uri``):
    ``suite`` split by level, ``checks`` its dataset-level metric needs (``etl.validation``).
    ``join_gaps``: the joins that matched nothing in some partitions (the kind's words for
    them), kept in the results and named beside a failed expectation on one of their columns.

    Raises:
        ValidationFailed: a row-level expectation failed over its ``mostly`` on the window's
            totals, or a dataset-level one (row count, key uniqueness across segments, ...).
    """
    results, levels = judge_window(suite, checks, spec.key, mode,
                                   [m.checks.row_partials for _, m in metas],
                                   [read_partials(uri, m)[0] for uri, m in metas],
                                   _examples(metas) if checks.key_columns else None)
    built = [m for _, m in metas]
    counts = {
        "evaluated_rows": sum(m.checks.rows for m in built),
        "quarantined_rows": sum(m.checks.quarantined_rows for m in built),
        "segments": len(built),
        "quarantine_files": [f"segments/{m.segment}/{name}" for m in built
                             for name in m.checks.quarantine_files],
    }
    summary = finish(spec.name, suite.name, mode, results, levels, counts, results_uri,
                     join_gaps)
    if not summary["success"]:
        failures = [r.to_json_dict() for r in results if not r.success]
        raise ValidationFailed(failure_message(spec.name, failures, mode, results_uri,
                                               join_gaps), summary, results_uri)
    return summary


def judge_dataset(checks: DatasetChecks, merged: Mapping[Key, Any], key: Sequence[str],
                  examples: Any = None) -> list:
    """GX results of the dataset-level expectations from merged metric partials
    (``examples``: see ``MetricPlan.values``)."""
    from etl.validation import gx

    values = checks.plan.values(dict(merged), examples)
    fmt = result_format(key)
    return [gx.combined_result(cfg, _by_name(mcs, values.get(described, {})), fmt)
            for (described, mcs), cfg in zip(checks.needed, checks.configs)]


def judge_window(suite: SplitSuite, checks: DatasetChecks, key: Sequence[str], mode: str,
                 row_counts: Sequence[Sequence[RowCounts]],
                 partials: Sequence[MetricPartials], examples: Any = None
                 ) -> tuple[list, list[str]]:
    """(results, levels) of a window from what its segments stored.

    ``row_counts[j][i]``: segment j's counts of row expectation i; ``partials[j]``: segment
    j's metric partials; ``examples``: where duplicated keys are looked up
    (``MetricPlan.values``).
    """
    rows = [judge_row_counts(cfg, [seg[i] for seg in row_counts], key, mode)
            for i, cfg in enumerate(suite.row)]
    dataset = judge_dataset(checks, merge_metric_partials(list(partials)), key, examples) \
        if suite.dataset else []
    return rows + dataset, [ROW] * len(rows) + [DATASET] * len(dataset)


def _by_name(needed: Sequence[Any], by_id: Mapping[Any, Any]) -> dict[str, Any]:
    return {mc.metric_name: by_id[mc.id] for mc in needed}


def judge_row_counts(cfg: dict, counts: Sequence[RowCounts], key: Sequence[str], mode: str):
    """Sum one row-level expectation's counts over the segments and let GX judge the totals."""
    from etl.validation import gx

    errors = [c.error for c in counts if c.error]
    if errors:
        return gx.failed_result(cfg, f"{errors[0]} (in {len(errors)} part(s))")
    if mode == "strict":
        kwargs = dict(cfg["kwargs"], mostly=1.0)
        cfg = dict(cfg, kwargs=kwargs, meta={**cfg.get("meta", {}), "strict_mode": True})
    total = summed(counts)
    totals = {"element_count": total.element_count, "missing_count": total.missing_count,
              "unexpected_count": total.unexpected_count, "values": list(total.values),
              "examples": list(total.examples)}
    return gx.judge_row(cfg, totals, result_format(key))


# --- the joins that left columns empty -----------------------------------------------------------

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


# --- statistics and drift ------------------------------------------------------------------------

def merged_statistics(spec: Spec, metas: list[SegmentMeta]
                      ) -> tuple[Statistics, dict[str, Any]]:
    """The statistics of segments together: their partials merged, then finalized (the same
    figures however the rows were grouped into segments); and the label as they resolve it."""
    stats = finalize_partial(
        statistics.StatisticsPartial.merge_all(read_statistics(m) for m in metas), spec)
    label = stats.pop("label_schema")
    dropped: dict[str, int] = {}
    for m in metas:
        for reason, n in (m.dropped_rows or {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    stats["dropped_rows"] = dropped
    return Statistics.from_json(stats, f"{spec.name}: the merged statistics"), label


def _drift(window: Window[Spec, Judging]) -> DriftReport | None:
    """The new segments' train statistics against the previous version's, judged by the
    spread over comparable earlier segments (``etl.spec.drift``)."""
    previous = window.previous
    if previous is None or not window.new:
        return None  # a first version: nothing to compare with
    from etl.spec.drift import calendar_features, compare  # from here on

    new = comparable(window.new, previous)
    if not new:
        first, last = window.new[0].interval, window.new[-1].interval
        log.info("drift %s: not measured: the %d new segment(s) (%s to %s) lie before the "
                 "window of version %s (from %s), history it never held, not data that "
                 "follows it", window.spec.name, len(window.new), first.start or "the start",
                 last.end, previous.version, previous.interval.start)
        return None
    stats, _ = merged_statistics(window.spec, new)
    report = compare(stats, previous.statistics or Statistics(), previous.version,
                     [m.segment for m in new], window.spec.drift,
                     calendar_features(window.spec), _peers(window, stats.num_examples or 0),
                     previous.verdict.drift_history)
    name, against, rows = window.spec.name, previous.version, f"{report.rows:,}"
    if report.drifted:
        log.warning("drift %s: %s, against %s (%s new rows; baseline: %s); see the version "
                    "page's Drift section", name, report.words(), against, rows,
                    report.baseline)
    else:
        log.info("drift %s: %d statistic(s) within limits against %s (%s new rows; baseline: "
                 "%s)", name, len(report.features), against, rows, report.baseline)
    return report


def comparable(new: list[SegmentMeta], previous: Manifest) -> list[SegmentMeta]:
    """The new segments drift compares with ``previous``: those ending after its window's
    start. A wider window's older segments (a recovery of the whole year after a week's
    version) are history that version never held; a year against a week is not drift."""
    since = _instant(previous.interval.start)
    if since is None:
        return list(new)
    return [m for m in new if (_instant(m.interval.end) or since) > since]


def _instant(iso_time: str | None) -> datetime | None:
    if not iso_time:
        return None
    stamp = datetime.fromisoformat(iso_time)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _peers(window: Window[Spec, Judging], rows: int) -> list[dict[str, Any]]:
    """The statistics of each earlier segment of comparable size (at most PEER_SIZE times the
    new train rows: other nights, not a compacted month whose spread is narrower)."""
    from etl.spec.drift import PEER_SIZE

    new = {m.segment for m in window.new}
    return [merged_statistics(window.spec, [m])[0] for _, m in window.metas
            if m.segment not in new and 0 < _train_rows(m) <= PEER_SIZE * rows]


def _train_rows(meta: SegmentMeta) -> int:
    """The train rows in a segment's statistics partial (0 without one)."""
    return 0 if meta.statistics_partial is None else read_statistics(meta).split("train").rows
