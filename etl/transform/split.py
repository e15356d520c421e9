"""The deterministic split: a salted 64-bit hash of each row's key picks train/eval/test.

The same key gives the same split on every run and machine, so a re-delivered day or a rerun
never moves a row between splits. Shared by every dataset kind.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

SPLIT_COL = "_split"
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


HASH_COL = "_hash"


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


def assign_split(hashes: np.ndarray, fractions: tuple[tuple[str, float], ...]) -> np.ndarray:
    """Split names from the low 32 bits of the hash (the shard uses the high bits)."""
    unit = (hashes & np.uint64(0xFFFFFFFF)).astype(np.float64) / 2.0**32
    bounds = np.cumsum([f for _, f in fractions])
    bounds[-1] = 1.0 + 1e-9
    names = np.array([n for n, _ in fractions], dtype=object)
    return names[np.searchsorted(bounds, unit, side="right")]
