"""Whole-dataset metric values for dataset-level expectations, from mergeable partials.

A dataset-level expectation (row count, key uniqueness, mean, null fraction, value
distribution) is only meaningful over all rows: a duplicate key may sit in two partitions.
GX tells us which metrics an expectation needs (``get_validation_dependencies``); this module
computes, for every partition, a small partial of each (row and non-null counts, a numeric
summary, value counts, the key hashes), merges the partials in a tree and derives the metric
values from the merged ones. GX then judges the expectation from these values exactly as if it
had computed them itself. Partials of any grouping of rows merge to the same values, which is
what lets a dataset be validated as a whole from parts built at different times.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd

from etl.errors import PipelineError
from etl.validation.partials import Key, considered
from etl.validation.report import jsonable

EXAMPLE_ROWS = 20
Finalize = Callable[[dict], Any]


class UnsupportedMetricError(PipelineError):
    """A dataset-level expectation needs a metric this module cannot compute on Dask."""


class _Plan:
    """The partials the metric providers need; ``examples`` is the frame (typed, lazily read)
    where rows carrying duplicated keys are looked up, or None when no rows are at hand."""

    def __init__(self, columns: Sequence[str], examples: dd.DataFrame | None = None) -> None:
        self.columns = list(columns)
        self.examples = examples
        self.keys: list[Key] = []
        self.finals: dict[str, dict[Any, Finalize]] = {}

    def need(self, key: Key) -> Key:
        if key not in self.keys:
            self.keys.append(key)
        return key

    def values(self, merged: dict[Key, Any]) -> dict[str, dict[str, Any]]:
        """{expectation label: {metric configuration id: value}} from merged partials."""
        return {label: {i: f(merged) for i, f in fs.items()} for label, fs in self.finals.items()}


MetricPlan = _Plan


def _rows(plan: _Plan) -> Key:
    return plan.need(("rows",))


def _count(plan: _Plan, col: str) -> Key:
    return plan.need(("count", col))


def _value_counts(plan: _Plan, col: str) -> Key:
    return plan.need(("vc", col))


def _numeric_value(op: str, p: dict[str, Any]) -> Any:
    n = p["count"]
    if op == "sum":
        return p["sum"]
    if not n:
        return None
    if op == "std":
        return math.sqrt(p["m2"] / (n - 1)) if n > 1 else None
    return p[op]  # mean, min, max


def _aggregate(op: str) -> Callable[[_Plan, Any], Finalize]:
    def provider(plan: _Plan, mc: Any) -> Finalize:
        k = plan.need(("num", mc.metric_domain_kwargs["column"]))
        return lambda v: jsonable(_numeric_value(op, v[k]))

    return provider


def _row_count(plan: _Plan, mc: Any) -> Finalize:
    k = _rows(plan)
    return lambda v: int(v[k])


def _columns(plan: _Plan, mc: Any) -> Finalize:
    cols = list(plan.columns)
    return lambda v: cols


def _column_count(plan: _Plan, mc: Any) -> Finalize:
    n = len(plan.columns)
    return lambda v: n


def _nonnull_count(plan: _Plan, mc: Any) -> Finalize:
    k = _count(plan, mc.metric_domain_kwargs["column"])
    return lambda v: int(v[k])


def _null_count(plan: _Plan, mc: Any) -> Finalize:
    r, k = _rows(plan), _count(plan, mc.metric_domain_kwargs["column"])
    return lambda v: int(v[r]) - int(v[k])


def _non_null_proportion(plan: _Plan, mc: Any) -> Finalize:
    r, k = _rows(plan), _count(plan, mc.metric_domain_kwargs["column"])
    return lambda v: (int(v[k]) / int(v[r])) if int(v[r]) else None


def _counts_metric(kind: str) -> Callable[[_Plan, Any], Finalize]:
    """Metrics derived from one column's value counts (GX drops nulls here too)."""

    def provider(plan: _Plan, mc: Any) -> Finalize:
        k = _value_counts(plan, mc.metric_domain_kwargs["column"])
        value_kwargs = mc.metric_value_kwargs or {}

        def finalize(v: dict) -> Any:
            vc: pd.Series = v[k]
            if kind == "value_counts":
                sort = value_kwargs.get("sort") or "value"
                if sort == "value":
                    return vc.sort_index()
                return vc.sort_values(ascending=False) if sort == "count" else vc
            if kind == "most_common":
                return [] if vc.empty else list(vc[vc == vc.max()].index)
            if kind == "distinct":
                return set(vc.index)
            if kind == "distinct_count":
                return len(vc)
            outside = sorted(set(vc.index) - set(value_kwargs.get("value_set") or []), key=str)
            return len(outside) if kind == "not_in_set_count" else outside

        return finalize

    return provider


def _duplicates(plan: _Plan, cols: list[str], ignore_row_if: str) -> Key:
    """The sorted 64-bit hashes of every considered row's key, merged over partitions,
    so two copies of a key in different partitions are counted together."""
    return plan.need(("hashes", tuple(cols), ignore_row_if))


def _dup_counts(hashes: np.ndarray) -> pd.Series:
    """Hash -> count, for hashes seen more than once (hashes arrive sorted)."""
    if not len(hashes):
        return pd.Series([], dtype="int64")
    values, counts = np.unique(hashes, return_counts=True)
    return pd.Series(counts[counts > 1], index=values[counts > 1], dtype="int64")


def _dup_examples(ddf: Any, cols: list[str], ignore: str,
                  dup: pd.Series) -> list[dict]:
    """Rows carrying the first duplicated keys: a second, cheap pass (filter by hash)."""
    if callable(ddf):  # built only when a duplicate is found: e.g. read from stored parts
        ddf = ddf()
    if ddf is None:
        return []
    wanted = set(dup.sort_index().index[:EXAMPLE_ROWS].tolist())

    def pick(pdf: pd.DataFrame) -> pd.DataFrame:
        sub = pdf[cols]
        h = pd.util.hash_pandas_object(sub, index=False).to_numpy()
        return sub[considered(sub, ignore) & np.isin(h, list(wanted))]

    rows = ddf.map_partitions(pick, meta=ddf._meta[cols]).compute()
    rows = rows.sort_values(cols, kind="stable").head(EXAMPLE_ROWS)
    return [{c: jsonable(v) for c, v in r.items()} for _, r in rows.iterrows()]


def _uniqueness(suffix: str) -> Callable[[_Plan, Any], Finalize]:
    def provider(plan: _Plan, mc: Any) -> Finalize:
        dk = mc.metric_domain_kwargs
        cols = list(dk.get("column_list") or [dk["column"]])
        ignore = dk.get("ignore_row_if") or (
            "all_values_are_missing" if len(cols) > 1 else "any_value_is_missing"
        )
        k = _duplicates(plan, cols, ignore)

        def finalize(v: dict) -> Any:
            dup = _dup_counts(v[k])
            if suffix == "unexpected_count":
                return int(dup.sum())
            if suffix == "filtered_row_count":
                return len(v[k])
            if suffix == "unexpected_index_query":
                return None
            if dup.empty:
                return []
            rows = _dup_examples(plan.examples, cols, ignore, dup)
            return (
                rows
                if suffix == "unexpected_index_list" or len(cols) > 1
                else [r[cols[0]] for r in rows]
            )

        return finalize

    return provider


_PROVIDERS: dict[str, Callable[[_Plan, Any], Finalize]] = {
    "table.row_count": _row_count,
    "table.columns": _columns,
    "table.column_count": _column_count,
    "column.mean": _aggregate("mean"),
    "column.min": _aggregate("min"),
    "column.max": _aggregate("max"),
    "column.sum": _aggregate("sum"),
    "column.standard_deviation": _aggregate("std"),
    "column_values.nonnull.count": _nonnull_count,
    "column_values.nonnull.unexpected_count": _null_count,
    "column.non_null_proportion": _non_null_proportion,
    "column.value_counts": _counts_metric("value_counts"),
    "column.most_common_value": _counts_metric("most_common"),
    "column.distinct_values": _counts_metric("distinct"),
    "column.distinct_values.count": _counts_metric("distinct_count"),
    "column.distinct_values.not_in_set": _counts_metric("not_in_set"),
    "column.distinct_values.not_in_set.count": _counts_metric("not_in_set_count"),
}
for _prefix in ("compound_columns.unique", "column_values.unique"):
    for _suffix in (
        "unexpected_count",
        "filtered_row_count",
        "unexpected_values",
        "unexpected_index_list",
        "unexpected_index_query",
    ):
        _PROVIDERS[f"{_prefix}.{_suffix}"] = _uniqueness(_suffix)


def unsupported(metric_names: Sequence[str]) -> list[str]:
    """The metric names this module cannot compute (checked before any data is read)."""
    return sorted(set(metric_names) - set(_PROVIDERS))


def plan_metrics(
    columns: Sequence[str],
    needed: Sequence[tuple[str, Sequence[Any]]],
    examples: dd.DataFrame | None = None,
) -> MetricPlan:
    """Which partials the expectations need (``plan.keys``); nothing is read yet.

    Args:
        columns: the dataset's columns (for the table.columns metrics).
        needed: (expectation label, its GX MetricConfigurations) pairs.
        examples: where rows with duplicated keys are looked up for the messages.
    """
    plan = _Plan(columns, examples)
    for label, configs in needed:
        for mc in configs:
            provider = _PROVIDERS.get(mc.metric_name)
            if provider is None:
                raise UnsupportedMetricError(
                    f"{label}: needs metric {mc.metric_name!r}, which etl.validation.metrics "
                    f"cannot compute on the whole dataset (supported: {sorted(_PROVIDERS)})"
                )
            plan.finals.setdefault(label, {})[mc.id] = provider(plan, mc)
    return plan
