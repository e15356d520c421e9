"""Running moments of a numeric column (count, sum, mean, M2, min, max), mergeable exactly.

Shared by the split statistics (etl.transform.stats) and the dataset-level validation metrics
(etl.validation.metrics): both are computed per part of the data and merged without the rows.
Merging uses Chan et al.'s pairwise update, stable where a sum of squares would lose the
variance of values with a large mean. A summary is JSON-able.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

EMPTY: dict[str, Any] = {"count": 0, "sum": 0.0, "mean": 0.0, "m2": 0.0, "min": None,
                         "max": None}


def of(values: pd.Series) -> dict[str, Any]:
    """The summary of one column's non-missing values (numbers, or text that parses)."""
    x = pd.to_numeric(values, errors="coerce").astype("float64").dropna()
    if x.empty:
        return dict(EMPTY)
    mean = float(x.mean())
    return {"count": len(x), "sum": float(x.sum()), "mean": mean,
            "m2": float(((x - mean) ** 2).sum()), "min": float(x.min()), "max": float(x.max())}


def of_frame(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """``of`` for every (numeric) column at once: one pass of numpy over the block.

    A part with a few hundred rows (a day's segment) would otherwise pay pandas' per-call
    overhead for each column and each moment.
    """
    return of_array(frame.to_numpy(dtype="float64", na_value=np.nan), list(frame.columns))


def of_array(x: np.ndarray, columns: list[str]) -> dict[str, dict[str, Any]]:
    """``of_frame`` of a float64 block (rows x ``columns``, NaN where missing)."""
    seen = ~np.isnan(x)
    count = seen.sum(axis=0)
    total = np.where(seen, x, 0.0).sum(axis=0)
    mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
    m2 = (np.where(seen, x - mean, 0.0) ** 2).sum(axis=0)
    low = np.where(seen, x, np.inf).min(axis=0, initial=np.inf)
    high = np.where(seen, x, -np.inf).max(axis=0, initial=-np.inf)
    return {col: dict(EMPTY) if not count[i] else
            {"count": int(count[i]), "sum": float(total[i]), "mean": float(mean[i]),
             "m2": float(m2[i]), "min": float(low[i]), "max": float(high[i])}
            for i, col in enumerate(columns)}


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The summary of both parts' values."""
    if not a["count"] or not b["count"]:
        return dict(b if b["count"] else a)
    n = a["count"] + b["count"]
    delta = b["mean"] - a["mean"]
    return {"count": n, "sum": a["sum"] + b["sum"], "mean": a["mean"] + delta * b["count"] / n,
            "m2": a["m2"] + b["m2"] + delta * delta * a["count"] * b["count"] / n,
            "min": min(a["min"], b["min"]), "max": max(a["max"], b["max"])}


def group_blocks(keys: np.ndarray, n: int) -> tuple[np.ndarray, list[slice]]:
    """(an order sorting rows by ``keys``, each key's slice of that order), keys in 0..n-1; a
    row keyed -1 belongs to no block. Lets a batch's partials be computed per group at once."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1)).tolist()
    return order, [slice(bounds[k], bounds[k + 1]) for k in range(n)]


def group_counts(values: pd.Series, keys: np.ndarray, n: int
                 ) -> tuple[pd.Index, list[tuple[np.ndarray, np.ndarray]]]:
    """Value counts of every group of rows in one pass: (the distinct present values, per key
    in 0..n-1 the positions of its values in them and their counts, most frequent first)."""
    codes, uniques = pd.factorize(values)
    width = max(len(uniques), 1)
    seen = (codes >= 0) & (keys >= 0)
    flat, counts = np.unique(keys[seen] * width + codes[seen], return_counts=True)
    group, code = np.divmod(flat, width)
    by = np.lexsort((code, -counts, group))
    group, code, counts = group[by], code[by], counts[by]
    bounds = np.searchsorted(group, np.arange(n + 1)).tolist()
    return uniques, [(code[lo:hi], counts[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
