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
from etl.validation.report import jsonable

Key = tuple


def _grouped(pdf: pd.DataFrame, key: Key, groups: np.ndarray, order: np.ndarray,
             blocks: list[slice]) -> list[Any]:
    """One plan key's partial for each group of rows (``order`` sorts the rows by group,
    ``blocks`` are the groups' slices of that order)."""
    kind, n = key[0], len(blocks)
    if kind == "rows":
        return [b.stop - b.start for b in blocks]
    if kind == "count":
        seen = pdf[key[1]].notna().to_numpy(dtype=bool)
        return np.bincount(groups[seen], minlength=n).tolist()
    if kind == "num":
        x = pd.to_numeric(pdf[key[1]], errors="coerce").astype("float64").to_numpy()
        x = x[order][:, None]
        return [moments.of_array(x[b], [""])[""] for b in blocks]
    if kind == "vc":
        return _value_counts(pdf[key[1]], groups, n)
    if kind == "hashes":
        sub = pdf[list(key[1])]
        keep = considered(sub, key[2])
        hashed = pd.util.hash_pandas_object(sub[keep], index=False).to_numpy(dtype=np.uint64)
        group = groups[keep]
        by = np.lexsort((hashed, group))
        hashed, bounds = hashed[by], np.searchsorted(group[by], np.arange(n + 1))
        return [hashed[bounds[g]:bounds[g + 1]] for g in range(n)]
    raise KeyError(key)


def _value_counts(values: pd.Series, groups: np.ndarray, n: int) -> list[pd.Series]:
    """Per group, ``values.value_counts(dropna=True)`` of its rows (most frequent first)."""
    uniques, per_group = moments.group_counts(values, groups, n)
    return [pd.Series(counts, name="count", dtype="int64",
                      index=pd.Index(uniques.take(code), name=values.name))
            for code, counts in per_group]


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
    return group_partials(pdf, np.zeros(len(pdf), dtype=np.int64), 1, keys)[0]


def group_partials(pdf: pd.DataFrame, groups: np.ndarray, n_groups: int,
                   keys: Sequence[Key]) -> list[dict[Key, Any]]:
    """``partition_partials`` of each group of rows (``groups[i]``, in ``0..n_groups-1``, is
    row i's group) at once: a batch of segments pays pandas' per-call costs once, not once
    per segment and key."""
    groups = np.asarray(groups, dtype=np.int64)
    order, blocks = moments.group_blocks(groups, n_groups)
    values = {k: _grouped(pdf, k, groups, order, blocks) for k in keys}
    return [{k: values[k][g] for k in keys} for g in range(n_groups)]


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


def _key_json(key: Key) -> list:
    return [list(k) if isinstance(k, tuple) else k for k in key]


def _key_of(data: list) -> Key:
    return tuple(tuple(k) if isinstance(k, list) else k for k in data)


def to_stored(partials: dict[Key, Any]) -> tuple[list, dict[str, np.ndarray]]:
    """(JSON-able entries, named uint64 arrays) of one part's partials, for storing beside
    the data they describe; ``from_stored`` is the inverse (value counts keep their values,
    timestamps as ISO text)."""
    entries, arrays = [], {}
    for i, (key, value) in enumerate(partials.items()):
        kind = key[0]
        if kind == "hashes":
            name = f"k{i}"
            arrays[name] = np.asarray(value, dtype=np.uint64)
            stored: Any = {"array": name}
        elif kind == "vc":
            stored = {"values": [jsonable(v) for v in value.index],
                      "counts": [int(c) for c in value.to_numpy()]}
        else:
            stored = jsonable(value)
        entries.append({"key": _key_json(key), "value": stored})
    return entries, arrays


def from_stored(entries: Sequence[dict], arrays: Any) -> dict[Key, Any]:
    """The partials ``to_stored`` wrote (``arrays``: a mapping such as an open ``np.load``)."""
    out: dict[Key, Any] = {}
    for entry in entries:
        key, value = _key_of(entry["key"]), entry["value"]
        if key[0] == "hashes":
            value = np.asarray(arrays[value["array"]], dtype=np.uint64)
        elif key[0] == "vc":
            # named as pandas names a fresh value_counts(): GX reads the "count" column
            value = pd.Series(value["counts"], name="count", dtype="int64",
                              index=pd.Index(value["values"], dtype=object, name=key[1]))
        out[key] = value
    return out
