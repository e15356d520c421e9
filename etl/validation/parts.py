"""Row-level validation of several parts (segments) in one GX run, reported part by part.

GX costs about a second per validation call whatever the rows (it builds a metric graph per
expectation), so validating each day of a year alone would cost minutes of pure overhead.
Here consecutive parts are validated as one frame, then every expectation's counts, example
values and rejected rows are split back by row position, so each part gets the report it
would have got alone. Where the split cannot be exact (an expectation without a single
``column``, or per-part sums that do not add up to GX's totals) the parts are validated one by
one instead.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from etl.validation import gx as vgx
from etl.validation.partition import (
    Evaluation,
    Partial,
    PartitionReport,
    evaluate,
    examples,
    fingerprint,
    quarantine,
    validate_partition,
)
from etl.validation.report import jsonable


def validate_parts(frames: Sequence[pd.DataFrame], suite_name: str,
                   row_configs: Sequence[dict], kinds: Mapping[str, str], key: Sequence[str],
                   quarantine_uris: Sequence[str]) -> list[PartitionReport]:
    """One ``PartitionReport`` per frame, as ``validate_partition`` would give each."""
    if len(frames) == 1 or any("column" not in c["kwargs"] for c in row_configs):
        return [validate_partition(f, 0, suite_name, row_configs, kinds, key, q)
                for f, q in zip(frames, quarantine_uris)]
    cpu0 = time.thread_time()
    whole = pd.concat(frames, ignore_index=True)
    ev = evaluate(whole, suite_name, row_configs, kinds, key)
    bounds = np.cumsum([0, *(len(f) for f in frames)])
    missing: dict[str, np.ndarray] = {}
    split = [_part_partials(whole, ev, row_configs, key, lo, hi, missing)
             for lo, hi in itertools.pairwise(bounds)]
    if not _adds_up(ev, split, len(row_configs)):
        return [validate_partition(f, 0, suite_name, row_configs, kinds, key, q)
                for f, q in zip(frames, quarantine_uris)]
    cpu = (time.thread_time() - cpu0) / len(frames)
    reports = []
    for (lo, hi), (partials, rejected), q in zip(itertools.pairwise(bounds), split,
                                                   quarantine_uris):
        part = whole.iloc[lo:hi].reset_index(drop=True)
        bad, qfile = quarantine(part, 0, row_configs, rejected, q)
        reports.append(PartitionReport(0, len(part), fingerprint(part, key), tuple(partials),
                                       bad, qfile, cpu))
    return reports


def _adds_up(ev: Evaluation, split: list[tuple[list[Partial], dict]], n: int) -> bool:
    """The parts' counts sum to GX's totals for every expectation that ran."""
    for i in range(n):
        whole = ev.partials.get(i, Partial())
        if whole.error:
            continue  # every part carries the error
        parts = [p[i] for p, _ in split]
        sums = (sum(p.element_count for p in parts), sum(p.missing_count for p in parts),
                sum(p.unexpected_count for p in parts))
        if sums != (whole.element_count, whole.missing_count, whole.unexpected_count):
            return False
    return True


def _part_partials(whole: pd.DataFrame, ev: Evaluation, configs: Sequence[dict],
                   key: Sequence[str], lo: int, hi: int,
                   missing: dict[str, np.ndarray] | None = None) -> tuple[list[Partial], dict]:
    """Each expectation's partial and rejected positions restricted to rows [lo, hi).
    ``missing``: each column's null mask over ``whole``, computed once per batch."""
    missing = {} if missing is None else missing
    part = _Rows(whole, lo, hi)
    type_bad = ev.type_bad[(ev.type_bad >= lo) & (ev.type_bad < hi)] - lo
    partials, rejected = [], {}
    for i, cfg in enumerate(configs):
        pos = ev.rejected.get(i, np.empty(0, np.int64))
        mine = pos[(pos >= lo) & (pos < hi)] - lo
        rejected[i] = mine
        col = cfg["kwargs"]["column"]
        if col not in missing:
            missing[col] = whole[col].isna().to_numpy()
        partials.append(_one(ev, i, cfg, part, missing[col][lo:hi], type_bad, mine, key))
    return partials, rejected


class _Rows:
    """Rows [lo, hi) of a batch, copied out only if an example or a value is needed (most
    parts of most expectations reject nothing)."""

    def __init__(self, whole: pd.DataFrame, lo: int, hi: int) -> None:
        self._whole, self._lo, self._hi = whole, lo, hi
        self._frame: pd.DataFrame | None = None

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            self._frame = self._whole.iloc[self._lo:self._hi].reset_index(drop=True)
        return self._frame


def _one(ev: Evaluation, i: int, cfg: dict, part: _Rows, na: np.ndarray, type_bad: np.ndarray,
         mine: np.ndarray, key: Sequence[str]) -> Partial:
    whole = ev.partials.get(i, Partial())
    col = cfg["kwargs"]["column"]
    n = len(na)
    if whole.error:
        return Partial(element_count=n, error=whole.error)
    res = ev.results.get(i)
    result = (getattr(res, "result", None) or {}) if res is not None else {}
    if res is None or "unexpected_count" not in result:  # settled by type, or aggregate
        missing = int(na.sum())
        if not len(mine):
            return Partial(n, missing)
        return Partial(n, missing, n, whole.values[:1], examples(part.frame, mine, cfg, key))
    evaluated = np.ones(n, dtype=bool)
    if cfg["type"] != vgx.TYPE_EXPECTATION:
        evaluated[type_bad] = False  # value checks saw only the rows the type checks passed
    missing = int((na & evaluated).sum()) if "missing_count" in result else 0
    if not len(mine):
        return Partial(int(evaluated.sum()), missing, 0, (), ())
    values = tuple(jsonable(v) for v in part.frame[col].iloc[mine[: vgx.PARTIAL_COUNT]])
    return Partial(int(evaluated.sum()), missing, len(mine), values,
                   examples(part.frame, mine, cfg, key))
