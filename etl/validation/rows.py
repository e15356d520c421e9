"""Row checks: every row of a batch of segments against the suite's row-level expectations.

``check_rows`` takes the frames of one or more segments and gives each its valid rows and a
``RowReport`` (the segment's ``RowCounts`` per expectation, which rows were rejected, the
quarantine file written with them and why). ``RowCounts`` is the type ``segment.json`` stores
them as (``etl.versions.segment``, re-exported here); their values and examples are made plain
JSON (``jsonable``) where they are taken from the frame, and ``summed`` is how a window's
segments add up. GX costs about a second per validation call
whatever the rows (it builds a metric graph per expectation), so the frames of a batch are
validated as one frame and every expectation's counts, example values and rejected rows are
split back by row position: each segment gets the report it would have got alone. Where that
split cannot be exact (an expectation without a single ``column``, or per-segment sums that do
not add up to GX's totals) the frames are validated one by one instead.

The declared numeric and timestamp columns arrive as text and are checked as parsed
(``etl.validation.suite.check_views``: a type view and a value view of the batch). Great
Expectations is imported when rows are first checked.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from etl.validation.report import columns_of, describe, jsonable, write_parquet
from etl.validation.suite import (
    KEPT_EXAMPLES,
    TYPE_EXPECTATION,
    SplitSuite,
    ValidationSpec,
    check_views,
)
from etl.versions.segment import RowCounts

REASON_COLUMN = "quarantine_reason"
QUARANTINE_FILE = "part-00000.parquet"


def summed(counts: Sequence[RowCounts]) -> RowCounts:
    """One expectation's counts over several segments (the first error, if any, kept, and at
    most KEPT_EXAMPLES values and examples): how a window is judged and a compaction stores."""
    errors = [c.error for c in counts if c.error]
    return RowCounts(element_count=sum(c.element_count for c in counts),
                     missing_count=sum(c.missing_count for c in counts),
                     unexpected_count=sum(c.unexpected_count for c in counts),
                     values=tuple(v for c in counts for v in c.values)[:KEPT_EXAMPLES],
                     examples=tuple(e for c in counts for e in c.examples)[:KEPT_EXAMPLES],
                     error=errors[0] if errors else None)


@dataclass(frozen=True)
class RowChecks:
    """What checking rows needs: the suite's name and row-level expectation configs, each
    column's parse kind, and the key columns that identify an example row."""

    suite_name: str
    configs: tuple[dict, ...]
    kinds: dict[str, str]
    key: tuple[str, ...]

    @classmethod
    def of(cls, suite: SplitSuite, vspec: ValidationSpec) -> RowChecks:
        return cls(suite.name, tuple(suite.row), vspec.kinds(), tuple(vspec.key))


@dataclass(frozen=True)
class RowReport:
    """One segment's row checks: ``counts[i]`` for row expectation i, the positions of the
    rejected rows, the quarantine file written with them (None when none was rejected)."""

    rows: int
    counts: tuple[RowCounts, ...]
    bad_positions: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    quarantine_file: str | None = None
    cpu_s: float = 0.0  # CPU time of the checks: comparable even on a busy machine


@dataclass(frozen=True)
class CheckedRows:
    """A segment's rows that passed every row-level expectation, and its report."""

    valid: pd.DataFrame
    report: RowReport


def check_rows(frames: Sequence[pd.DataFrame], checks: RowChecks,
               quarantine_uris: Sequence[str]) -> list[CheckedRows]:
    """Each frame's valid rows and report, its rejected rows written (as they arrived, with
    the reasons) to ``quarantine/part-00000.parquet`` under its own ``quarantine_uris`` entry;
    the frames checked by one GX run where the split back is exact."""
    frames = [f.reset_index(drop=True) for f in frames]
    reports = _check_batch(frames, checks, quarantine_uris)
    out = []
    for frame, report in zip(frames, reports):
        keep = np.ones(len(frame), dtype=bool)
        keep[report.bad_positions] = False
        out.append(CheckedRows(frame.iloc[keep], report))
    return out


def _check_batch(frames: list[pd.DataFrame], checks: RowChecks,
                 quarantine_uris: Sequence[str]) -> list[RowReport]:
    """One report per frame, as checking each frame alone would give."""
    if len(frames) == 1 or any("column" not in c["kwargs"] for c in checks.configs):
        return _one_by_one(frames, checks, quarantine_uris)
    cpu0 = time.thread_time()
    whole = pd.concat(frames, ignore_index=True)
    ev = evaluate(whole, checks)
    bounds = list(itertools.pairwise(np.cumsum([0, *(len(f) for f in frames)])))
    missing: dict[str, np.ndarray] = {}
    split = [_segment_counts(whole, ev, checks, lo, hi, missing) for lo, hi in bounds]
    if not _adds_up(ev, split, len(checks.configs)):
        return _one_by_one(frames, checks, quarantine_uris)
    cpu = (time.thread_time() - cpu0) / len(frames)
    reports = []
    for (lo, hi), (counts, rejected), q in zip(bounds, split, quarantine_uris):
        rows = whole.iloc[lo:hi].reset_index(drop=True)
        bad, qfile = quarantine(rows, checks.configs, rejected, q)
        reports.append(RowReport(len(rows), tuple(counts), bad, qfile, cpu))
    return reports


def _one_by_one(frames: list[pd.DataFrame], checks: RowChecks,
                quarantine_uris: Sequence[str]) -> list[RowReport]:
    reports = []
    for frame, q in zip(frames, quarantine_uris):
        cpu0 = time.thread_time()
        ev = evaluate(frame, checks)
        bad, qfile = quarantine(frame, checks.configs, ev.rejected, q)
        counts = tuple(ev.counts.get(i, RowCounts()) for i in range(len(checks.configs)))
        reports.append(RowReport(len(frame), counts, bad, qfile, time.thread_time() - cpu0))
    return reports


@dataclass
class Evaluation:
    """What GX said about one frame: per expectation ordinal the result (absent where a
    strict parse settled a type check), the condensed counts and the rejected positions;
    ``type_bad``: rows a type check rejected, left out of the value checks."""

    results: dict[int, Any]
    counts: dict[int, RowCounts]
    rejected: dict[int, np.ndarray]
    type_bad: np.ndarray


def evaluate(pdf: pd.DataFrame, checks: RowChecks) -> Evaluation:
    """Run the row-level expectations over ``pdf`` (a RangeIndex frame) in two GX calls.

    In-type-list expectations run first on a per-value view; rows they reject are left out
    of the other checks so that one bad "12a" is reported once, as a type error.
    """
    from etl.validation import gx

    configs, key = checks.configs, checks.key
    tagged = [dict(c, meta={**c.get("meta", {}), gx.ORDINAL_META: i})
              for i, c in enumerate(configs)]
    type_cfgs = [c for c in tagged if c["type"] == TYPE_EXPECTATION]
    value_cfgs = [c for c in tagged if c["type"] != TYPE_EXPECTATION]
    type_view, value_view, clean = check_views(
        pdf, checks.kinds, _used_columns(type_cfgs), _used_columns(value_cfgs)
    )
    counts, rejected = _cleanly_typed(pdf, type_cfgs, clean, gx.ORDINAL_META)
    results: dict[int, Any] = {}
    pending = [c for c in type_cfgs if c["meta"][gx.ORDINAL_META] not in counts]
    for i, res in gx.run_rows(type_view[_used_columns(pending)], checks.suite_name,
                              pending).items():
        results[i] = res
        counts[i], rejected[i] = _condensed(res, pdf, configs[i], key)
    type_bad = np.unique(np.concatenate([np.empty(0, np.int64), *rejected.values()]))
    rest = value_view.drop(index=type_bad)
    for i, res in gx.run_rows(rest, checks.suite_name, value_cfgs).items():
        results[i] = res
        counts[i], rejected[i] = _condensed(res, pdf, configs[i], key)
    return Evaluation(results, counts, rejected, type_bad)


def _condensed(res: Any, pdf: pd.DataFrame, cfg: dict, key: Sequence[str]
               ) -> tuple[RowCounts, np.ndarray]:
    """Condense one GX result to counts, a few values/examples, and rejected positions."""
    if res.exception_info and res.exception_info.get("raised_exception"):
        msg = str(res.exception_info.get("exception_message"))
        return RowCounts(element_count=len(pdf), error=msg), np.empty(0, np.int64)
    r = res.result or {}
    if "unexpected_count" not in r:  # aggregate verdict (in_type_list on a typed column)
        missing = int(pdf[cfg["kwargs"]["column"]].isna().sum())
        if res.success:
            return RowCounts(element_count=len(pdf), missing_count=missing), np.empty(0, np.int64)
        pos = np.arange(len(pdf), dtype=np.int64)
        observed = f"dtype {r.get('observed_value')}"
        return RowCounts(element_count=len(pdf), missing_count=missing,
                         unexpected_count=len(pdf), values=(observed,),
                         examples=examples(pdf, pos, cfg, key)), pos
    pos = np.asarray(r.get("unexpected_index_list") or [], dtype=np.int64)
    # the values as they arrived ("2475", "12a"), not GX's parsed view of them
    col = cfg["kwargs"].get("column")
    raw = pdf[col].iloc[pos[:KEPT_EXAMPLES]] if col else r.get("unexpected_list") or []
    values = tuple(jsonable(v) for v in list(raw)[:KEPT_EXAMPLES])
    return (
        RowCounts(
            element_count=int(r.get("element_count") or 0),
            missing_count=int(r.get("missing_count") or 0),
            unexpected_count=int(r["unexpected_count"]),
            values=values,
            examples=examples(pdf, pos, cfg, key),
        ),
        pos,
    )


def _used_columns(configs: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(c for cfg in configs for c in columns_of(cfg["kwargs"])))


def examples(pdf: pd.DataFrame, pos: np.ndarray, cfg: dict, key: Sequence[str]) -> tuple:
    """The first rejected rows: their key and the columns the expectation reads."""
    if not len(pos):
        return ()
    cols = list(dict.fromkeys([*key, *columns_of(cfg["kwargs"])]))
    rows = pdf.iloc[pos[:KEPT_EXAMPLES]][cols]
    return tuple({c: jsonable(v) for c, v in row.items()} for _, row in rows.iterrows())


def _cleanly_typed(pdf: pd.DataFrame, type_cfgs: Sequence[dict], clean: Mapping[str, str],
                   ordinal: str) -> tuple[dict[int, RowCounts], dict[int, np.ndarray]]:
    """Type checks already settled by a strict parse: the column parsed whole to a dtype
    the expectation lists, which is the one thing GX's dtype check would look at.

    Skipping GX for them saves a third of the row checks' cost on clean data.
    """
    counts, rejected = {}, {}
    for cfg in type_cfgs:
        col = cfg["kwargs"]["column"]
        if clean.get(col) in (cfg["kwargs"].get("type_list") or ()):
            i = cfg["meta"][ordinal]
            counts[i] = RowCounts(element_count=len(pdf),
                                  missing_count=int(pdf[col].isna().sum()))
            rejected[i] = np.empty(0, np.int64)
    return counts, rejected


def quarantine(pdf: pd.DataFrame, configs: Sequence[dict], rejected: Mapping[int, np.ndarray],
               quarantine_uri: str) -> tuple[np.ndarray, str | None]:
    """Write rejected rows (as they arrived) with the reasons; return their positions."""
    reasons: dict[int, list[str]] = {}
    for i in sorted(rejected):
        for p in rejected[i].tolist():
            reasons.setdefault(p, []).append(describe(configs[i]))
    if not reasons:
        return np.empty(0, np.int64), None
    bad = np.array(sorted(reasons), dtype=np.int64)
    out = pdf.iloc[bad].copy()
    out[REASON_COLUMN] = ["; ".join(reasons[p]) for p in bad.tolist()]
    write_parquet(out, quarantine_uri, QUARANTINE_FILE)
    return bad, QUARANTINE_FILE


def _adds_up(ev: Evaluation, split: list[tuple[list[RowCounts], dict]], n: int) -> bool:
    """The segments' counts sum to GX's totals for every expectation that ran."""
    for i in range(n):
        whole = ev.counts.get(i, RowCounts())
        if whole.error:
            continue  # every segment carries the error
        parts = [c[i] for c, _ in split]
        sums = (sum(p.element_count for p in parts), sum(p.missing_count for p in parts),
                sum(p.unexpected_count for p in parts))
        if sums != (whole.element_count, whole.missing_count, whole.unexpected_count):
            return False
    return True


def _segment_counts(whole: pd.DataFrame, ev: Evaluation, checks: RowChecks, lo: int, hi: int,
                    missing: dict[str, np.ndarray]) -> tuple[list[RowCounts], dict]:
    """Each expectation's counts and rejected positions restricted to rows [lo, hi).
    ``missing``: each column's null mask over ``whole``, computed once per batch."""
    part = _Rows(whole, lo, hi)
    type_bad = ev.type_bad[(ev.type_bad >= lo) & (ev.type_bad < hi)] - lo
    counts, rejected = [], {}
    for i, cfg in enumerate(checks.configs):
        pos = ev.rejected.get(i, np.empty(0, np.int64))
        mine = pos[(pos >= lo) & (pos < hi)] - lo
        rejected[i] = mine
        col = cfg["kwargs"]["column"]
        if col not in missing:
            missing[col] = whole[col].isna().to_numpy()
        counts.append(_one(ev, i, cfg, part, missing[col][lo:hi], type_bad, mine, checks.key))
    return counts, rejected


class _Rows:
    """Rows [lo, hi) of a batch, copied out only if an example or a value is needed (most
    segments of most expectations reject nothing)."""

    def __init__(self, whole: pd.DataFrame, lo: int, hi: int) -> None:
        self._whole, self._lo, self._hi = whole, lo, hi
        self._frame: pd.DataFrame | None = None

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            self._frame = self._whole.iloc[self._lo:self._hi].reset_index(drop=True)
        return self._frame


def _one(ev: Evaluation, i: int, cfg: dict, part: _Rows, na: np.ndarray, type_bad: np.ndarray,
         mine: np.ndarray, key: Sequence[str]) -> RowCounts:
    whole = ev.counts.get(i, RowCounts())
    col = cfg["kwargs"]["column"]
    n = len(na)
    if whole.error:
        return RowCounts(element_count=n, error=whole.error)
    res = ev.results.get(i)
    result = (getattr(res, "result", None) or {}) if res is not None else {}
    if res is None or "unexpected_count" not in result:  # settled by type, or aggregate
        missing = int(na.sum())
        if not len(mine):
            return RowCounts(element_count=n, missing_count=missing)
        return RowCounts(element_count=n, missing_count=missing, unexpected_count=n,
                         values=whole.values[:1], examples=examples(part.frame, mine, cfg, key))
    evaluated = np.ones(n, dtype=bool)
    if cfg["type"] != TYPE_EXPECTATION:
        evaluated[type_bad] = False  # value checks saw only the rows the type checks passed
    missing = int((na & evaluated).sum()) if "missing_count" in result else 0
    if not len(mine):
        return RowCounts(element_count=int(evaluated.sum()), missing_count=missing)
    values = tuple(jsonable(v) for v in part.frame[col].iloc[mine[:KEPT_EXAMPLES]])
    return RowCounts(element_count=int(evaluated.sum()), missing_count=missing,
                     unexpected_count=len(mine), values=values,
                     examples=examples(part.frame, mine, cfg, key))
