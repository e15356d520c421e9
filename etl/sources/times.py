"""Timestamp columns written in a format other than ISO 8601 (``2012/01/01``, epoch seconds).

The reader rewrites them as ISO 8601 text right after reading a file, so validation, the
window filter, joins and the transform parse every timestamp one way; a value that does not
match its declared format fails the read (``etl.sources.read``), naming the file, the row
and the column.
"""

from __future__ import annotations

import pandas as pd

EPOCH_UNITS = {"epoch_s": "s", "epoch_ms": "ms"}
ISO_OUT = "%Y-%m-%dT%H:%M:%SZ"


def parse_timestamps(values: pd.Series, fmt: str | None) -> pd.Series:
    """UTC timestamps from text in ``fmt`` (strftime codes, ``epoch_s``/``epoch_ms``, or None
    for ISO 8601); a value that does not parse becomes NaT."""
    if fmt is None:
        return pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
    if fmt in EPOCH_UNITS:
        numbers = pd.to_numeric(values, errors="coerce")
        return pd.to_datetime(numbers, unit=EPOCH_UNITS[fmt], utc=True, errors="coerce")
    return pd.to_datetime(values, utc=True, errors="coerce", format=fmt)
