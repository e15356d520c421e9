"""Per-partition partials of the dataset-level metrics, and their exact merge.

A partial is what one part of the rows contributes to a metric: its row count, non-null
counts, a numeric summary (``etl.moments``), value counts, or the sorted 64-bit hashes of its
keys. Partials of any grouping of the rows merge to the same values, so a dataset can be
validated as a whole from parts computed separately (one Dask task each, or parts built on
different nights).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from etl import moments

Key = tuple


def _partial_of(pdf: pd.DataFrame, key: Key) -> Any:
    """One partition's partial for one plan key."""
    kind = key[0]
    if kind == "rows":
        return len(pdf)
    if kind == "count":
        return int(pdf[key[1]].count())
    if kind == "num":
        return moments.of(pdf[key[1]])
    if kind == "vc":
        return pdf[key[1]].value_counts(dropna=True)
    if kind == "hashes":
        return np.sort(hashes_of(pdf, list(key[1]), key[2]).to_numpy())
    raise KeyError(key)


def _merge(key: Key, a: Any, b: Any) -> Any:
    kind = key[0]
    if kind in ("rows", "count"):
        return a + b
    if kind == "num":
        return moments.merge(a, b)
    if kind == "vc":
        return a.add(b, fill_value=0).astype("int64")
    return np.sort(np.concatenate([a, b]))  # hashes


def partition_partials(pdf: pd.DataFrame, keys: Sequence[Key]) -> dict[Key, Any]:
    """Every partial a plan needs, for one partition (one Dask task)."""
    return {k: _partial_of(pdf, k) for k in keys}


def merge_partials(parts: Sequence[dict[Key, Any]]) -> dict[Key, Any]:
    """Merge partition partials in a balanced tree (rounding does not grow with their number)."""
    level = list(parts)
    while len(level) > 1:
        level = [{k: _merge(k, level[i][k], level[i + 1][k]) for k in level[i]}
                 if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0] if level else {}


def considered(sub: pd.DataFrame, ignore_row_if: str) -> np.ndarray:
    """Rows GX would consider for uniqueness, given its ``ignore_row_if`` rule."""
    isna = sub.isna()
    if ignore_row_if == "all_values_are_missing":
        return ~isna.all(axis=1).to_numpy()
    if ignore_row_if == "any_value_is_missing":
        return ~isna.any(axis=1).to_numpy()
    return np.ones(len(sub), dtype=bool)


def hashes_of(pdf: pd.DataFrame, cols: list[str], ignore_row_if: str) -> pd.Series:
    """64-bit hash per considered row of ``cols``."""
    sub = pdf[cols]
    hashed = pd.util.hash_pandas_object(sub[considered(sub, ignore_row_if)], index=False)
    return pd.Series(hashed.to_numpy(), name="h", dtype="uint64")
