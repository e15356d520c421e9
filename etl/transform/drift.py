"""Drift of a run's new data against the previous version's train statistics.

An incremental run compares the train split of the segments it adds (those the previous
version does not list) with the previous version's ``statistics``: for a numeric feature the
shift of the mean in the previous standard deviations, for a categorical feature and a class
label the population stability index (PSI) of the value shares, for a regression label the
mean shift. Both come from mergeable statistics, so nothing reads a row. Drift is reported
(the manifest's validation summary, the UI's version page, a WARNING in the log),
not enforced: a shifted day is information for the person who decides, not a broken file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MEAN_SHIFT_LIMIT = 0.5  # |mean_new - mean_old| / std_old above this: drifted
PSI_LIMIT = 0.2  # the usual reading: < 0.1 stable, 0.1-0.2 moderate, > 0.2 shifted
_SMOOTH = 1e-4  # share given to a value absent on one side, so the log stays finite


def mean_shift(new: Mapping[str, Any], old: Mapping[str, Any]) -> float | None:
    """|new mean - old mean| in old standard deviations (None when either side is empty)."""
    if not new.get("count") or not old.get("count"):
        return None
    std = math.sqrt(max(float(old.get("var") or 0.0), 0.0))
    delta = abs(float(new["mean"]) - float(old["mean"]))
    return delta / std if std > 0 else (0.0 if delta == 0 else math.inf)


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


def _row(name: str, kind: str, statistic: str, value: float | None,
         limit: float) -> dict[str, Any]:
    shown = None if value is None else (round(value, 4) if math.isfinite(value) else "inf")
    return {"name": name, "kind": kind, "statistic": statistic, "value": shown,
            "limit": limit, "drifted": value is not None and value > limit}


def compare(new: Mapping[str, Any], old: Mapping[str, Any], against: str,
            segments: list[str]) -> dict[str, Any]:
    """The drift report of finalized train statistics ``new`` against ``old``."""
    rows = [_row(col, "numeric", "mean shift (old std)", mean_shift(stats, old_stats), MEAN_SHIFT_LIMIT)
            for col, stats in new.get("numeric", {}).items()
            if (old_stats := old.get("numeric", {}).get(col)) is not None]
    rows += [_row(col, "categorical", "PSI", psi(counts, old.get("vocabulary_counts", {})[col]),
                  PSI_LIMIT)
             for col, counts in new.get("vocabulary_counts", {}).items()
             if col in old.get("vocabulary_counts", {})]
    if new.get("label_counts") and old.get("label_counts"):
        rows.append(_row("label", "label", "PSI", psi(new["label_counts"], old["label_counts"]),
                         PSI_LIMIT))
    elif new.get("label") and old.get("label"):
        rows.append(_row("label", "label", "mean shift (old std)",
                         mean_shift(new["label"], old["label"]), MEAN_SHIFT_LIMIT))
    return {"against": against, "segments": segments, "rows": int(new.get("num_examples", 0)),
            "features": rows, "drifted": [r["name"] for r in rows if r["drifted"]]}
