"""The drafted GX suite: what every row read satisfied, ranges widened by a margin.

Row-level expectations check every row (types, nulls, ranges, value sets); dataset-level ones
check the whole dataset (rows present, the key unique). Ranges and value sets get ``mostly``
so that a few odd rows are quarantined while a shifted source fails the run. Drafted from a
sample, ranges widen by ``SAMPLE_WIDEN`` times the margin and types and not-null get
``mostly`` too: rows not read may hold what the sample did not.
"""

from __future__ import annotations

import math
from typing import Any

from etl.authoring.columns import ColumnProfile

TYPE_LISTS = {  # as in etl/examples/flights/expectations.json: what the parsed columns can hold
    "int64": ["int", "int64", "Int64", "int32"],
    "float64": ["int", "float", "int64", "float64", "Int64", "Float64", "float32"],
    "timestamp": ["Timestamp", "datetime64[us]", "datetime64[ns]", "datetime64[ms]",
                  "datetime64[s]"],
}
MOSTLY = 0.99
SAMPLE_WIDEN = 3


def _exp(kind: str, level: str, notes: str | None = None, **kwargs: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"level": level}
    if notes:
        meta["notes"] = notes
    return {"type": kind, "kwargs": kwargs, "meta": meta, "severity": "critical"}


def _column_expectations(p: ColumnProfile, margin: float, seen: str, full: bool
                         ) -> list[dict[str, Any]]:
    out = []
    if p.type in TYPE_LISTS:
        out.append(_exp("expect_column_values_to_be_in_type_list", "row", column=p.name,
                        type_list=TYPE_LISTS[p.type], **({} if full else {"mostly": MOSTLY})))
    if p.nulls == 0:
        out.append(_exp("expect_column_values_to_not_be_null", "row", f"no null in {seen}",
                        column=p.name, **({} if full else {"mostly": MOSTLY})))
    if p.numeric and p.low is not None and p.high is not None:
        widened = margin if full else margin * SAMPLE_WIDEN
        lo, hi = widen(p.low, p.high, widened, p.type == "int64")
        out.append(_exp("expect_column_values_to_be_between", "row",
                        f"range [{p.low:g}, {p.high:g}] of {seen}, widened by {widened:.0%}",
                        column=p.name, min_value=lo, max_value=hi, mostly=MOSTLY))
    if p.values:
        out.append(_exp("expect_column_values_to_be_in_set", "row",
                        f"the {len(p.values)} values of {seen}",
                        column=p.name, value_set=list(p.values), mostly=MOSTLY))
    return out


def draft_suite(name: str, profiles: dict[str, ColumnProfile], key: tuple[str, ...] | None,
                margin: float, full: bool) -> dict[str, Any]:
    """A GX 1.x ExpectationSuite (JSON-able) for the profiled columns; ``full``: every row
    was read (else a sample)."""
    rows = next(iter(profiles.values())).rows if profiles else 0
    seen = f"all {rows:,} rows" if full else f"{rows:,} sampled rows"
    expectations = [e for p in profiles.values()
                    for e in _column_expectations(p, margin, seen, full)]
    expectations.append(_exp("expect_table_row_count_to_be_between", "dataset", min_value=1))
    if key and len(key) == 1:  # GX's compound form needs two or more columns
        expectations.append(_exp("expect_column_values_to_be_unique", "dataset",
                                  f"the dataset key; unique on {seen}", column=key[0]))
    elif key:
        expectations.append(_exp("expect_compound_columns_to_be_unique", "dataset",
                                  f"the dataset key; unique on {seen}", column_list=list(key)))
    return {"name": name, "id": None, "expectations": expectations, "notes": None,
            "meta": {"dataset": name, "notes": f"Drafted by `python -m etl spec init` from "
                     f"{seen}; levels: row = every row, dataset = whole dataset."}}


def widen(low: float, high: float, margin: float, integer: bool) -> tuple[float, float]:
    """``[low, high]`` widened by ``margin`` of its span each way; never below 0 if it was not."""
    pad = (high - low) * margin or abs(high) * margin or 1.0
    lo, hi = low - pad, high + pad
    if low >= 0:
        lo = max(lo, 0.0)
    if integer:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
    return lo, hi
