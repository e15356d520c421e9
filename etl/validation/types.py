"""Text columns and the types the spec declares for them.

Extraction hands every CSV/JSON column over as text (see etl.spec); validation parses them
to check types and ranges, and dataset metrics need them typed. Parsing follows the same
rules as the transform's pandas parsing, so what passes here parses there.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.api import types as ptypes

NUMERIC_KINDS = ("int", "float")
KINDS = {"int64": "int", "float64": "float", "timestamp": "timestamp", "string": "string"}


def _arrow_cast(s: pd.Series, kind: str) -> pd.Series | None:
    """Strict C++ parse of a whole text column; None if any value does not parse.

    The common case (clean data) then costs milliseconds; only a column with a bad value
    takes the slower pandas path that finds which values are bad.
    """
    target = pa.float64() if kind in NUMERIC_KINDS else pa.timestamp("us", tz="UTC")
    try:
        out = pc.cast(pa.array(s.array, from_pandas=True), target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if kind in NUMERIC_KINDS:
        return pd.Series(out.to_numpy(zero_copy_only=False), index=s.index, dtype="float64")
    return out.to_pandas().set_axis(s.index).astype("datetime64[us, UTC]")


def parse_column(s: pd.Series, kind: str) -> tuple[pd.Series, pd.Series] | None:
    """Parse a text column declared numeric/timestamp; None when no parsing is needed.

    Returns the parsed series and a mask of values that were present but did not parse
    (same rules as the transform's pandas parsing, so what passes here parses there).
    """
    if kind in NUMERIC_KINDS and not ptypes.is_numeric_dtype(s):
        parsed = _arrow_cast(s, kind)
        if parsed is None:
            parsed = pd.to_numeric(s, errors="coerce").astype("float64")
    elif kind == "timestamp" and not ptypes.is_datetime64_any_dtype(s):
        parsed = _arrow_cast(s, kind)
        if parsed is None:
            parsed = pd.to_datetime(s, errors="coerce", utc=True, format="ISO8601")
            parsed = parsed.astype("datetime64[us, UTC]")
    else:
        return None
    return parsed, s.notna() & parsed.isna()


def typed_frame(pdf: pd.DataFrame, kinds: Mapping[str, str]) -> pd.DataFrame:
    """The partition with declared numeric/timestamp columns parsed (unparseable -> null).

    Integer columns become nullable Int64, so example keys read ``1545``, not ``1545.0``.
    """
    out = pdf.copy(deep=False)
    for col, kind in kinds.items():
        got = parse_column(pdf[col], kind)
        if got is None:
            continue
        values = got[0]
        if kind == "int":  # fractions were rejected by the type check; never cast them
            values = values.where(values.isna() | (values % 1 == 0)).astype("Int64")
        out[col] = values
    return out
