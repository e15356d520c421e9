"""What a sample of raw columns holds: types, nulls, ranges, small value sets, a unique key.

Input is what extraction hands over (every value a string exactly as the file holds it), so
the types inferred here are the ones validation will parse the columns to.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import pandas as pd

MAX_SET = 50  # a string column with at most this many values gets a value-set expectation
MAX_VOCAB = 1000  # more distinct strings than this: an id or free text, not a category
MAX_KEY_COLUMNS = 3
MAX_KEY_CANDIDATES = 24  # combinations of 3 among these: ~2,000 checks on the sample
_INT = r"[+-]?\d{1,18}"
_ISO_DATE = r"\d{4}-\d{2}-\d{2}.*"
MIN_GROUPS = 20  # fewer ids than this cannot spread over train/eval/test a group at a time
# An entity's id: `id`, `patient_id`, `uuid`, `row_key` (any case) or camelCase `patientId`.
_ID_NAME = re.compile(r"(?i:(?:^|_)(?:id|uuid|guid|key)$|^id_)|[a-z0-9]I[dD]$")
# Common non-ISO date formats, tried in order on text columns (first that parses every value).
TIME_FORMATS = ("%Y/%m/%d", "%Y/%m/%d %H:%M:%S", "%d/%m/%Y", "%m/%d/%Y", "%Y%m%d", "%d.%m.%Y",
                "%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class ColumnProfile:
    """One column of the sample."""

    name: str
    type: str  # a spec column type: int64, float64, timestamp or string
    rows: int
    nulls: int
    distinct: int
    low: float | None = None  # numeric min / max
    high: float | None = None
    median: float | None = None
    values: tuple[str, ...] = ()  # every value, when there are at most MAX_SET
    time_format: str | None = None  # a timestamp's format when it is not ISO 8601

    @property
    def numeric(self) -> bool:
        return self.type in ("int64", "float64")

    @property
    def unique(self) -> bool:
        return self.nulls == 0 and self.distinct == self.rows


def infer_type(values: pd.Series) -> str:
    """The narrowest spec type every non-null value parses as (strings as the file holds them)."""
    s = values.dropna().astype(str).str.strip()
    if s.empty:
        return "string"
    if s.str.fullmatch(_INT).all():
        return "int64"
    if pd.to_numeric(s, errors="coerce").notna().all():
        return "float64"
    if s.str.fullmatch(_ISO_DATE).all() and pd.to_datetime(
            s, errors="coerce", utc=True, format="ISO8601").notna().all():
        return "timestamp"
    return "string"


def infer_time_format(values: pd.Series) -> str | None:
    """The first of ``TIME_FORMATS`` every non-null value of a text column parses with."""
    s = values.dropna().astype(str).str.strip()
    if s.empty or not s.str.contains(r"\d", regex=True).all():
        return None
    for fmt in TIME_FORMATS:
        if pd.to_datetime(s, errors="coerce", format=fmt).notna().all():
            return fmt
    return None


def profile_column(name: str, values: pd.Series) -> ColumnProfile:
    """Type, nulls, distinct count, numeric range and (small) value set of one column."""
    kind = infer_type(values)
    time_format = infer_time_format(values) if kind == "string" else None
    kind = "timestamp" if time_format else kind
    present = values.dropna().astype(str)
    distinct = int(present.nunique())
    low = high = median = None
    if kind in ("int64", "float64") and not present.empty:
        numbers = pd.to_numeric(present)
        low, high, median = float(numbers.min()), float(numbers.max()), float(numbers.median())
    small = tuple(sorted(present.unique())) if kind == "string" and distinct <= MAX_SET else ()
    return ColumnProfile(name=name, type=kind, rows=len(values), nulls=int(values.isna().sum()),
                         distinct=distinct, low=low, high=high, median=median,
                         values=small, time_format=time_format)


def find_key(frame: pd.DataFrame, profiles: dict[str, ColumnProfile]) -> tuple[str, ...] | None:
    """The smallest column combination unique on the sample, preferring time, text, integers.

    Float columns come last: measurements that happen to be unique make a poor key. Only
    columns without nulls qualify (a key column may not be null).
    """
    order = {"timestamp": 0, "string": 1, "int64": 2, "float64": 3}
    candidates = sorted((p for p in profiles.values() if p.nulls == 0),
                        key=lambda p: (order[p.type], list(profiles).index(p.name)))
    names = [p.name for p in candidates][:MAX_KEY_CANDIDATES]
    for size in range(1, MAX_KEY_COLUMNS + 1):
        for combo in itertools.combinations(names, size):
            if not frame.duplicated(subset=list(combo)).any():
                return combo
    return None


def widen(low: float, high: float, margin: float, integer: bool) -> tuple[float, float]:
    """``[low, high]`` widened by ``margin`` of its span each way; never below 0 if it was not."""
    pad = (high - low) * margin or abs(high) * margin or 1.0
    lo, hi = low - pad, high + pad
    if low >= 0:
        lo = max(lo, 0.0)
    if integer:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
    return lo, hi


def group_candidates(profiles: dict[str, ColumnProfile], skip: set[str]) -> list[str]:
    """Columns that look like an entity's id repeated over its rows (a patient's visits): an
    id-like name, integer or text, no nulls, not unique, at least ``MIN_GROUPS`` values."""
    return [p.name for p in profiles.values()
            if p.name not in skip and _ID_NAME.search(p.name) and p.type in ("int64", "string")
            and p.nulls == 0 and not p.unique and p.distinct >= MIN_GROUPS]
