"""A segment's one side file: the dataset-level metric partials (uint64 arrays; their JSON
entries live in segment.json) and the typed key columns that name duplicated keys (Parquet
bytes), together in one ``.npz`` -- one object per segment, not one per kind of partial.
Written by a segment build or a compaction; read when a window is judged."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from etl import storage
from etl.errors import PipelineError
from etl.validation import RowCounts, metric_partials_from_json
from etl.versions.segment import SEGMENT_FILE, RowPartial, SegmentMeta

PARTIALS_NPZ = "partials.npz"
_KEYS = "keys_parquet"  # not a metric array name: those are "k<i>"


def write_partials(uri: str, arrays: dict[str, np.ndarray], keys: pd.DataFrame | None) -> None:
    """The metric arrays and, if the dataset has a key, its typed columns, in one object."""
    out = dict(arrays)
    if keys is not None:
        buf = io.BytesIO()
        keys.reset_index(drop=True).to_parquet(buf, index=False)
        out[_KEYS] = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **out)
    storage.write_bytes_atomic(uri, buf.getvalue())


def _load(uri: str, meta: SegmentMeta) -> dict[str, np.ndarray]:
    name = meta.checks.metric_arrays
    if name is None:
        raise PipelineError(f"{uri}/{SEGMENT_FILE}: validation.metric_arrays: expected the "
                            "name of the stored partials, the key is missing")
    with np.load(io.BytesIO(storage.read_bytes(storage.join(uri, name))),
                 allow_pickle=False) as arrays:
        return {k: arrays[k] for k in arrays.files}


def read_partials(uri: str, meta: SegmentMeta) -> tuple[dict, pd.DataFrame | None]:
    """(the dataset-level metric partials, the typed key columns or None) a segment stored."""
    arrays = _load(uri, meta)
    raw_keys = arrays.pop(_KEYS, None)
    keys = None if raw_keys is None else pd.read_parquet(io.BytesIO(raw_keys.tobytes()))
    return metric_partials_from_json(meta.checks.metric_partials or [], arrays), keys


def read_keys(uri: str, meta: SegmentMeta) -> pd.DataFrame:
    """The typed key columns of a segment's valid rows (to name duplicated keys)."""
    keys = read_partials(uri, meta)[1]
    if keys is None:
        raise PipelineError(f"{uri}: the segment stored no keys")
    return keys


def row_counts(stored: RowPartial) -> RowCounts:
    """One expectation's row counts as ``segment.json`` stores them, back in validation's type
    (summed when a window is judged or segments are compacted)."""
    return RowCounts(element_count=stored.element_count, missing_count=stored.missing_count,
                     unexpected_count=stored.unexpected_count, values=tuple(stored.values or ()),
                     examples=tuple(stored.examples or ()), error=stored.error)
