"""The deterministic split: each row's identity hash and, for classification, its label pick
train/eval/test.

Identity (``spec.split``): the key's text (``by: key``, the default), the row's whole content
plus an occurrence counter (``by: row``, for tables without a unique key), or the values of
``group_by`` columns (rows sharing them share a split, on purpose: leakage control).

Stratified splits (``stratify: true``) rank the rows of each *unit* and class by identity hash
and place the r-th at ``frac(offset + r / golden ratio)``; the low-discrepancy sequence gives
every class the spec's fractions within a row or two, so a 23-row class reaches every split.

Why the result does not depend on how data is built (day by day, in bulk, any Dask
partitioning): the unit is the row's event-time period for a partitioned source (computed from
the row itself; a row outside its file's period is quarantined as misfiled) and the whole
source otherwise (one file, never cut across partitions). A unit's rows therefore always sit
together in one raw partition and one segment, and new data lands in new units, so a row's split
never changes as more data arrives. The occurrence counter counts identical rows within their
unit: identical rows are indistinguishable, so their order does not matter. All hashing is
integer arithmetic on text (FNV-1a + splitmix64), the same on every run, machine and Python.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

SPLIT_COL = "_split"
HASH_COL = "_hash"
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0  # 1 / golden ratio: the most evenly spread rotation
_COUNTER_MIX = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """Final avalanche so every output bit depends on every input byte."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def key_hash(df: pd.DataFrame, key: tuple[str, ...], salt: str) -> np.ndarray:
    """64-bit hash of ``salt␟k1␟k2…`` (UTF-8): FNV-1a then splitmix64, vectorized in numpy.

    Pure integer arithmetic on the key's text, so it is the same on every run, machine and
    Python; one pass per byte position over all rows instead of a Python call per row.
    """
    cols = [pa.array(df[c].astype("str").fillna(""), type=pa.string()) for c in key]
    joined = pc.binary_join_element_wise(pa.scalar(salt), *cols, "\x1f")
    joined = joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined
    n = len(joined)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset:][: n + 1]
    data = np.frombuffer(joined.buffers()[2], dtype=np.uint8)
    starts, lengths = offsets[:-1].astype(np.int64), np.diff(offsets)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    for i in range(int(lengths.max())):
        live = lengths > i
        byte = data[np.minimum(starts + i, len(data) - 1)].astype(np.uint64)
        h = np.where(live, (h ^ byte) * _FNV_PRIME, h)
    return _splitmix64(h)


def row_hash(df: pd.DataFrame, columns: tuple[str, ...], salt: str,
             units: np.ndarray) -> np.ndarray:
    """Identity of rows without a unique key: their content, plus how many identical rows came
    before them in their unit (the second copy of a row is a row of its own)."""
    content = key_hash(df, columns, salt)
    counter = pd.DataFrame({"u": units, "h": content}).groupby(["u", "h"], sort=False).cumcount()
    bump = counter.to_numpy().astype(np.uint64) * _COUNTER_MIX
    return np.where(bump == 0, content, _splitmix64(content ^ bump))


def unit_of(hashes: np.ndarray) -> np.ndarray:
    """A hash's position in [0, 1), from its low 32 bits (the shard uses the high bits)."""
    return (hashes & np.uint64(0xFFFFFFFF)).astype(np.float64) / 2.0**32


def stratified_positions(hashes: np.ndarray, labels: pd.Series, units: np.ndarray,
                         salt: str) -> np.ndarray:
    """Positions in [0, 1) spread evenly within each (unit, class): the r-th row of a group in
    hash order sits at ``frac(offset + r * 0.618...)``, the offset a hash of the group."""
    n = len(hashes)
    if n == 0:
        return np.zeros(0)
    codes, values = pd.factorize(labels.astype("str"), sort=True)
    order = np.lexsort((hashes, codes, units))
    u_s, c_s = units[order], codes[order]
    start = np.r_[True, (u_s[1:] != u_s[:-1]) | (c_s[1:] != c_s[:-1])]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    rank = np.arange(n) - first
    groups = pd.DataFrame({"unit": u_s[start].astype("str"),
                           "label": np.asarray(values, dtype=object)[c_s[start]]})
    offsets = unit_of(key_hash(groups, ("unit", "label"), f"{salt}\x1fstratum"))
    group_of = np.cumsum(start) - 1
    pos = np.empty(n)
    pos[order] = np.mod(offsets[group_of] + rank * _GOLDEN, 1.0)
    return pos


def assign_split(hashes: np.ndarray, fractions: tuple[tuple[str, float], ...],
                 positions: np.ndarray | None = None) -> np.ndarray:
    """Split names from positions in [0, 1) (default: each hash's own, ``unit_of``)."""
    unit = unit_of(hashes) if positions is None else positions
    bounds = np.cumsum([f for _, f in fractions])
    bounds[-1] = 1.0 + 1e-9
    names = np.array([n for n, _ in fractions], dtype=object)
    return names[np.searchsorted(bounds, unit, side="right")]
