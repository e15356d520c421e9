"""A segment's valid rows made Example-ready: validated strings parsed, features and the
label derived, each row's split picked by its identity hash, the split statistics taken.

The split is a pure function of each row's identity (key, content or group), its label when
stratified, and the spec's salt (``etl.write.writer``), so a row lands in the same split on
every run and machine, built day by day or at once. Statistics (moments of numeric features,
vocabularies of categoricals, label counts) are a mergeable partial per segment
(``etl.statistics``); the manifest's come from the *train* split only. A ``fill: mean``
feature's nulls stay NaN: the model imputes the train mean from those statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from etl import statistics
from etl.errors import ValidationFailed
from etl.spec import Feature, Spec
from etl.spec.labels import label_task
from etl.spec.model import REGRESSION
from etl.write.writer import (
    HASH_COL,
    SPLIT_COL,
    assign_split,
    key_hash,
    row_hash,
    stratified_positions,
)

_DEFAULT_FILL = {"numeric": 0.0, "categorical": ""}
MISSING_COL = "_missing"  # bit i: the i-th filled feature (``filled``) was null before its fill
_MAX_TRACKED = 63


def filled(spec: Spec) -> list[str]:
    """The features whose nulls a constant fill hides (their null counts ride ``MISSING_COL``);
    a ``fill: mean`` feature keeps NaN, so its statistics count its nulls already."""
    return [f.name for f in spec.features if f.fill != "mean"][:_MAX_TRACKED]


def _missing_bit(spec: Spec, name: str) -> int | None:
    names = filled(spec)
    return names.index(name) if name in names else None


def _to_float(s: pd.Series) -> pd.Series:
    """Text to float64: Arrow's C++ parser, pandas' lenient one only if Arrow refuses a value."""
    if pd.api.types.is_numeric_dtype(s):
        return s.astype("float64")
    try:
        parsed = pc.cast(pa.array(s, from_pandas=True), pa.float64())
        return pd.Series(parsed.to_numpy(zero_copy_only=False), index=s.index)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pd.to_numeric(s, errors="coerce").astype("float64")


def coerce_types(df: pd.DataFrame, types: dict[str, str]) -> pd.DataFrame:
    """Strings to the spec's types; anything unparseable becomes null (validation ran first)."""
    out = {}
    for col, kind in types.items():
        s = df[col]
        if kind in ("int64", "float64"):
            out[col] = _to_float(s)
        elif kind == "timestamp":
            out[col] = pd.to_datetime(s, utc=True, errors="coerce", format="ISO8601")
        else:
            out[col] = s.astype("str")
    return pd.DataFrame(out, index=df.index)


def _derive(feat: Feature, typed: pd.DataFrame) -> pd.Series:
    cols = [typed[c] for c in feat.inputs]
    if feat.derive == "copy":
        return cols[0]
    if feat.derive == "hhmm_hour":
        return np.floor(cols[0] / 100.0)
    if feat.derive == "hour_of_day":
        return cols[0].dt.hour.astype("float64")
    if feat.derive in ("year", "day_of_year"):
        return getattr(cols[0].dt, "day_of_year" if feat.derive == "day_of_year" else "year"
                       ).astype("float64")
    if feat.derive == "subtract":
        return cols[0] - cols[1]
    if feat.derive == "day_of_week" and len(cols) == 1:  # of a timestamp (Monday = 0)
        return cols[0].dt.day_of_week.astype("float64")
    if feat.derive == "day_of_week":
        parts = pd.DataFrame({"year": cols[0], "month": cols[1], "day": cols[2]})
        return pd.to_datetime(parts, errors="coerce").dt.day_of_week.astype("float64")
    raise ValueError(f"feature {feat.name!r}: unknown derive op {feat.derive!r}")


@dataclass(frozen=True)
class Prepared:
    """A segment's valid rows made Example-ready: ``rows`` in the Example dtypes with their
    split and hash, ``statistics`` their mergeable split statistics, ``dropped`` the rows left
    out for a null label."""

    rows: pd.DataFrame
    statistics: statistics.StatisticsPartial
    dropped: int


def prepare(valid: pd.DataFrame, spec: Spec, label_schema: dict[str, Any],
            where: str) -> Prepared:
    """Features, label, split, statistics and Example dtypes of validated rows. A label value
    outside the version's classes fails here, before a record is encoded, naming the spec's
    field and then ``where`` (the segment whose rows hold it)."""
    prepared = prepare_rows(valid, spec)
    stats = split_partial(prepared, spec)
    if label_schema.get("names"):
        try:
            resolve_label(stats, spec)
        except ValidationFailed as exc:
            raise ValidationFailed(f"{exc} (in segment {where})", exc.summary) from None
    return Prepared(finalize_rows(prepared, spec, label_schema), stats,
                    len(valid) - len(prepared))


def prepare_rows(df: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """Features (constant fills applied), label, split and hash of validated rows.

    Rows whose label source is null are dropped here (counted by ``dropped_rows``).
    """
    types = spec.column_types()
    needed = {spec.label.source, *(c for f in spec.features for c in f.inputs)}
    typed = coerce_types(df, {c: t for c, t in types.items() if c in needed})
    label_src = typed[spec.label.source]
    keep = label_src.notna().to_numpy()
    typed, raw = typed[keep], df[keep]
    out, missing = _features(typed, spec)
    out[spec.label.name] = label_task(spec.label).encode(spec.label, typed[spec.label.source],
                                                      types[spec.label.source])
    hashes, positions = split_identity(raw, spec, out[spec.label.name])
    out[SPLIT_COL] = pd.Series(assign_split(hashes, spec.split.fractions, positions),
                               index=typed.index).astype("str")
    out[HASH_COL] = hashes
    out[MISSING_COL] = missing
    return pd.DataFrame(out, index=typed.index).reset_index(drop=True)


def _features(typed: pd.DataFrame, spec: Spec) -> tuple[dict[str, pd.Series], np.ndarray]:
    """Each feature derived from typed columns, constant fills applied; and the bit mask of
    the features that were missing, per row."""
    out: dict[str, Any] = {}
    missing = np.zeros(len(typed), dtype=np.int64)
    for feat in spec.features:
        values = _derive(feat, typed)
        bit = _missing_bit(spec, feat.name)
        if bit is not None:
            missing |= values.isna().to_numpy().astype(np.int64) << bit
        if feat.dtype == "string":
            values = values.astype("str")
        if feat.fill != "mean":
            fill = _DEFAULT_FILL[feat.kind] if feat.fill is None else feat.fill
            values = values.fillna(str(fill) if feat.kind == "categorical" else float(fill))
        out[feat.name] = values
    return out, missing


def feature_rows(valid: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """The features of validated rows in the Example dtypes, the label neither needed nor
    read: what a model is given for rows that have no label yet (``training.score``). The
    same derivations, fills and dtypes as ``prepare_rows`` and ``finalize_rows``."""
    types = spec.column_types()
    needed = {c for f in spec.features for c in f.inputs}
    typed = coerce_types(valid, {c: t for c, t in types.items() if c in needed})
    out, _ = _features(typed, spec)
    dtypes = {"float32": "float32", "int64": "int64", "string": "str"}
    return pd.DataFrame({f.name: out[f.name].astype(dtypes[f.dtype]) for f in spec.features},
                        index=valid.index).reset_index(drop=True)


def split_identity(raw: pd.DataFrame, spec: Spec,
                   labels: pd.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """(identity hash, stratified position or None) of each row, per ``spec.split``."""
    split = spec.split
    if split.group_by:
        return key_hash(raw, split.group_by, split.salt), None
    units = _split_units(raw, spec) if split.by == "row" or split.stratify else None
    if split.by == "row":
        hashes = row_hash(raw, tuple(spec.primary_source.columns), split.salt, units)
    else:
        hashes = key_hash(raw, spec.key, split.salt)
    if not split.stratify:
        return hashes, None
    if spec.label.task == REGRESSION:  # no classes: the rows spread evenly, as one class
        labels = pd.Series("all", index=labels.index)
    return hashes, stratified_positions(hashes, labels, units, split.salt)


def _split_units(raw: pd.DataFrame, spec: Spec) -> np.ndarray:
    """Each row's unit of the split (``etl.write.writer``): its event-time period for a
    partitioned source, else one unit for the whole source."""
    source = spec.primary_source
    if source.partitioning is None or source.event_time is None:
        return np.zeros(len(raw), dtype=np.int64)
    freq = "h" if source.partitioning.granularity == "hour" else "D"
    times = pd.to_datetime(raw[source.event_time], utc=True, errors="coerce", format="ISO8601")
    return times.dt.floor(freq).astype("int64").to_numpy()


def _null_count(part: pd.DataFrame, column: str) -> int:
    return int(part[column].isna().sum())


def _feature_names(spec: Spec) -> tuple[list[str], list[str]]:
    return ([f.name for f in spec.features if f.kind == "numeric"],
            [f.name for f in spec.features if f.kind == "categorical"])


def split_partial(prepared: pd.DataFrame, spec: Spec) -> statistics.StatisticsPartial:
    """The mergeable statistics of one frame of prepared rows, per split."""
    numeric, categorical = _feature_names(spec)
    return statistics.partial(prepared, prepared[SPLIT_COL], [s for s, _ in spec.split.fractions],
                              spec.label.name, numeric, categorical,
                              label_task(spec.label).summary, missing=(MISSING_COL, filled(spec)))


def finalize_partial(merged: statistics.StatisticsPartial, spec: Spec) -> dict[str, Any]:
    """The manifest's statistics (train split) from merged partials.

    ``label_schema`` is the manifest's ``schema.label`` with the classes resolved (raises
    ValidationFailed naming a class value outside them); classification ``label_counts``
    are keyed by the stored value (the class index).
    """
    numeric, categorical = _feature_names(spec)
    stats = statistics.finalize(merged, [s for s, _ in spec.split.fractions], numeric,
                               categorical)
    schema = resolve_label(merged, spec)
    if schema.get("names"):
        train = merged.split("train").labels
        stats["label_counts"] = {str(i): int(train.get(n, 0))
                                 for i, n in enumerate(schema["names"])}
    stats["label_schema"] = schema
    return stats


def resolve_label(partial: statistics.StatisticsPartial, spec: Spec, where: str | None = None
                  ) -> dict[str, Any]:
    """The label's schema with its classes resolved from a partial's label counts; raises
    ValidationFailed naming a class value outside the classes (``where``: the spec's path)."""
    counts = {s: partial.split(s).labels for s, _ in spec.split.fractions}
    return label_task(spec.label).resolve(spec.label, counts, where or str(spec.path))


def finalize_rows(df: pd.DataFrame, spec: Spec,
                       label_schema: dict[str, Any] | None = None) -> pd.DataFrame:
    """The Example dtypes. A missing value of a ``fill: mean`` feature stays NaN.

    The model imputes the train mean from the manifest's statistics (the same in training and
    serving), so a record never depends on the statistics of the window it was published in
    and the same rows encode to the same bytes in every version that holds them.
    """
    out = {}
    for feat in spec.features:
        out[feat.name] = df[feat.name].astype({"float32": "float32", "int64": "int64", "string": "str"}[
            feat.dtype])
    out[spec.label.name] = label_task(spec.label).store(df[spec.label.name],
                                                     label_schema or spec.label.schema())
    out[SPLIT_COL] = df[SPLIT_COL]
    out[HASH_COL] = df[HASH_COL].astype("uint64")
    return pd.DataFrame(out, index=df.index)
