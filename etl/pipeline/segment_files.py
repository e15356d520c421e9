"""A segment's side files: the dataset-level metric partials (JSON entries in segment.json,
uint64 arrays in an ``.npz``) and the typed key columns (Parquet) that name duplicated keys.
Written by a segment build or a compaction; read when a window is judged."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd

from etl import storage
from etl.errors import PipelineError
from etl.validation import partials as vpartials

PARTIALS_NPZ = "metric_partials.npz"
KEYS_FILE = "keys.parquet"


def write_npz(uri: str, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    storage.write_bytes_atomic(uri, buf.getvalue())


def write_keys(uri: str, keys: pd.DataFrame) -> None:
    buf = io.BytesIO()
    keys.reset_index(drop=True).to_parquet(buf, index=False)
    storage.write_bytes_atomic(uri, buf.getvalue())


def read_metric_partials(uri: str, meta: dict[str, Any]) -> dict:
    """The dataset-level metric partials a segment stored."""
    validation = meta["validation"]
    with np.load(io.BytesIO(storage.read_bytes(storage.join(uri, validation["metric_arrays"]))),
                 allow_pickle=False) as arrays:
        return vpartials.from_stored(validation["metric_partials"], arrays)


def read_keys(uri: str, meta: dict[str, Any]) -> pd.DataFrame:
    """The typed key columns of a segment's valid rows (to name duplicated keys)."""
    name = meta["validation"].get("keys_file")
    if not name:
        raise PipelineError(f"{uri}: the segment stored no keys")
    return pd.read_parquet(io.BytesIO(storage.read_bytes(storage.join(uri, name))))
