"""What validation needs from a spec and its suite: the validation modes, the declared columns
and how their text is parsed, and the suite file split into row-level and dataset-level
expectation configs.

Extraction hands every CSV/JSON column over as text (see etl.spec): the declared numeric and
timestamp columns are parsed by their declared kind (``ValidationSpec.kinds``,
``parse_column``) to check types and ranges (``check_views``) and for the dataset metrics
(``typed_frame``), by the same rules as the transform's pandas parsing, so what passes here
parses there; ``etl spec init`` drafts types by the same parse.

Nothing here imports Great Expectations: planning, ``spec check`` and the CLI describe a suite
with these types; reading a suite file needs GX (``etl.validation.gx.load_suite``, which the
callers that validate import when they start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.api import types as ptypes

from etl.errors import PipelineError
from etl.spec.load import spec_path

MODES = ("quarantine", "strict")
"""``quarantine``: rows failing a row-level expectation are set aside while their share stays
under the expectation's ``mostly``; ``strict``: any failing row fails the run."""
ROW = "row"
DATASET = "dataset"
TYPE_EXPECTATION = "expect_column_values_to_be_in_type_list"
KEPT_EXAMPLES = 20  # unexpected values / example rows kept per expectation
# Parse kind of each declared column type (text columns are parsed to check types and ranges).
KINDS = {"int64": "int", "float64": "float", "timestamp": "timestamp", "string": "string"}


def check_mode(mode: str) -> str:
    """``mode`` if it is a validation mode, else a ValueError listing the allowed ones."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    return mode


class SuiteError(PipelineError, ValueError):
    """The expectation suite file is unusable (bad JSON, level, or unknown column)."""


@dataclass(frozen=True)
class SplitSuite:
    """A suite divided by where each expectation is evaluated.

    Attributes:
        name: the suite name, reused for the combined validation result.
        row: expectation configs evaluated on every row of every segment, then summed.
        dataset: expectation configs judged once on the window's merged metric partials.
        meta: suite meta, carried into the results.
    """

    name: str
    row: tuple[dict, ...]
    dataset: tuple[dict, ...]
    meta: dict


@dataclass(frozen=True)
class ValidationSpec:
    """What validation needs from a dataset spec.

    Attributes:
        name: dataset name, used as the suite result's name and in messages.
        key: columns that identify a row (examples and uniqueness).
        columns: expected column -> type (``string``, ``int64``, ``float64``, ``timestamp``).
        expectations: path of the GX ExpectationSuite JSON file.
    """

    name: str
    key: tuple[str, ...]
    columns: dict[str, str]
    expectations: Path

    @classmethod
    def of(cls, spec: Any) -> ValidationSpec:
        """Accept an ``etl.spec.Spec``, a mapping with the same fields, or a ValidationSpec."""
        if isinstance(spec, ValidationSpec):
            return spec
        if isinstance(spec, Mapping):
            name = spec["name"]
            path = Path(spec.get("expectations") or "expectations.json")
            if not path.is_absolute():
                path = Path(spec.get("spec_dir") or spec_path(name).parent) / path
            return cls(name, tuple(spec["key"]), dict(spec["columns"]), path)
        return cls(spec.name, tuple(spec.key), dict(spec.column_types()), Path(spec.expectations))

    def kinds(self) -> dict[str, str]:
        """Column -> parse kind (int/float/timestamp/string) for the row checks' views."""
        return {c: KINDS.get(t, "string") for c, t in self.columns.items()}


# --- the declared columns' text, parsed ----------------------------------------------------------

NUMERIC_KINDS = ("int", "float")


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
    """The frame with declared numeric/timestamp columns parsed (unparseable -> null).

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


def check_views(
    pdf: pd.DataFrame,
    kinds: Mapping[str, str],
    type_cols: Sequence[str],
    value_cols: Sequence[str],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """(type view, value view, dtype of each cleanly parsed text column).

    Type view, for in_type_list checks: a text column that parsed cleanly gets its parsed
    dtype; one with unparseable values becomes an object column of parsed values and the raw
    bad strings, which GX checks value by value, so "12a" fails alone and is named. Value
    view: parsed values, so range checks compare numbers. Each view holds only the columns
    its checks use: GX copies the whole frame for every null filter.
    """
    parsed_cols = {
        c: parse_column(pdf[c], kinds.get(c, "string"))
        for c in dict.fromkeys([*type_cols, *value_cols])
    }
    types = {c: _type_column(pdf[c], kinds.get(c, "string"), parsed_cols[c]) for c in type_cols}
    clean = {
        c: str(col.dtype)
        for c, col in types.items()
        if parsed_cols[c] is not None and col.dtype != object
    }
    values = pd.DataFrame(
        {c: _value_column(pdf[c], parsed_cols[c]) for c in value_cols}, index=pdf.index
    )
    return pd.DataFrame(types, index=pdf.index), values, clean


def _value_column(s: pd.Series, got: tuple | None) -> pd.Series:
    if got is not None:
        return got[0]
    # numpy object strings: GX filters nulls by copying the frame per expectation, and
    # numpy takes are far cheaper than Arrow ones for that
    return s.astype(object).where(s.notna(), None) if ptypes.is_string_dtype(s) else s


def _type_column(s: pd.Series, kind: str, got: tuple | None) -> pd.Series:
    if got is None:
        return s.dt.tz_convert(None) if isinstance(s.dtype, pd.DatetimeTZDtype) else s
    parsed, bad = got
    whole = parsed.isna() | (parsed % 1 == 0) if kind == "int" else None
    if not bad.any() and (whole is None or whole.all()):
        return _clean(parsed, kind)
    obj = parsed.astype(object)
    if kind == "int":
        ints = parsed.notna() & whole
        obj[ints] = parsed[ints].astype("int64").astype(object)
    return obj.where(~bad, s.astype(object)).where(s.notna(), None)


def _clean(parsed: pd.Series, kind: str) -> pd.Series:
    """A cleanly parsed column in a dtype GX's dtype check recognizes.

    Nulls say nothing about a column's type and GX's table.column_types reports nullable
    Int64 as a numpy type it then rejects, so whole-number columns are shown as int64 with
    nulls as 0 (only this type-check view; nulls are counted from the original column).
    """
    if kind == "int":
        return parsed.fillna(0).astype("int64")
    if kind == "timestamp":
        return parsed.dt.tz_convert(None)
    return parsed.astype("float64")
