"""Whole-dataset metric values for dataset-level expectations, computed with Dask.

A dataset-level expectation (row count, key uniqueness, mean, null fraction, value
distribution) is only meaningful over all rows: a duplicate key may sit in two partitions.
GX tells us which metrics an expectation needs (``get_validation_dependencies``); this module
computes each one on the Dask frame, sharing work (one value_counts per column, one hash
count per key) and running everything in a single ``dask.compute``. GX then judges the
expectation from these values exactly as if it had computed them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from etl.errors import PipelineError
from etl.validation.report import jsonable

EXAMPLE_ROWS = 20
Finalize = Callable[[dict], Any]


class UnsupportedMetricError(PipelineError):
    """A dataset-level expectation needs a metric this module cannot compute on Dask."""


class _Plan:
    """Lazy Dask values shared by the metric providers, computed together once."""

    def __init__(self, ddf: dd.DataFrame) -> None:
        self.ddf = ddf
        self.lazy: dict[tuple, Any] = {}
        self.values: dict[tuple, Any] = {}

    def need(self, key: tuple, make: Callable[[], Any]) -> tuple:
        if key not in self.lazy:
            self.lazy[key] = make()
        return key

    def compute(self) -> None:
        keys = list(self.lazy)
        self.values = dict(zip(keys, dask.compute(*[self.lazy[k] for k in keys])))


def _rows(plan: _Plan) -> tuple:
    return plan.need(("rows",), lambda: plan.ddf.shape[0])


def _count(plan: _Plan, col: str) -> tuple:
    return plan.need(("count", col), lambda: plan.ddf[col].count())


def _value_counts(plan: _Plan, col: str) -> tuple:
    return plan.need(("vc", col), lambda: plan.ddf[col].value_counts(dropna=True))


def _aggregate(op: str) -> Callable[[_Plan, Any], Finalize]:
    def provider(plan: _Plan, mc: Any) -> Finalize:
        col = mc.metric_domain_kwargs["column"]
        make = {
            "mean": lambda: plan.ddf[col].mean(),
            "min": lambda: plan.ddf[col].min(),
            "max": lambda: plan.ddf[col].max(),
            "sum": lambda: plan.ddf[col].sum(),
            "std": lambda: plan.ddf[col].std(ddof=1),
        }[op]
        k = plan.need((op, col), make)
        return lambda v: jsonable(v[k])

    return provider


def _row_count(plan: _Plan, mc: Any) -> Finalize:
    k = _rows(plan)
    return lambda v: int(v[k])


def _columns(plan: _Plan, mc: Any) -> Finalize:
    cols = list(plan.ddf.columns)
    return lambda v: cols


def _column_count(plan: _Plan, mc: Any) -> Finalize:
    n = len(plan.ddf.columns)
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


def _considered(sub: pd.DataFrame, ignore_row_if: str) -> np.ndarray:
    """Rows GX would consider for uniqueness, given its ``ignore_row_if`` rule."""
    isna = sub.isna()
    if ignore_row_if == "all_values_are_missing":
        return ~isna.all(axis=1).to_numpy()
    if ignore_row_if == "any_value_is_missing":
        return ~isna.any(axis=1).to_numpy()
    return np.ones(len(sub), dtype=bool)


def _hashes(pdf: pd.DataFrame, cols: list[str], ignore_row_if: str) -> pd.Series:
    """64-bit hash per considered row of ``cols``."""
    sub = pdf[cols]
    hashed = pd.util.hash_pandas_object(sub[_considered(sub, ignore_row_if)], index=False)
    return pd.Series(hashed.to_numpy(), name="h", dtype="uint64")


def _duplicates(plan: _Plan, cols: list[str], ignore_row_if: str) -> tuple[tuple, tuple]:
    """Lazy (hashes seen more than once with their counts, rows considered).

    A hash of the key per row, counted with a shuffle-free tree reduction over partitions,
    so two copies of a key in different partitions are counted together.
    """
    base = ("dup", tuple(cols), ignore_row_if)

    def hashes() -> dd.Series:
        return plan.ddf.map_partitions(_hashes, cols, ignore_row_if, meta=("h", "uint64"))

    h = plan.need(base + ("h",), hashes)
    counts = plan.need(base + ("counts",), lambda: _dup_counts(plan.lazy[h]))
    total = plan.need(base + ("n",), lambda: plan.lazy[h].shape[0])
    return counts, total


def _dup_counts(h: dd.Series) -> Any:
    vc = h.value_counts(split_out=max(1, h.npartitions // 4))
    return vc[vc > 1]


def _dup_examples(ddf: dd.DataFrame, cols: list[str], ignore: str, dup: pd.Series) -> list[dict]:
    """Rows carrying the first duplicated keys: a second, cheap pass (filter by hash)."""
    wanted = set(dup.sort_index().index[:EXAMPLE_ROWS].tolist())

    def pick(pdf: pd.DataFrame) -> pd.DataFrame:
        sub = pdf[cols]
        h = pd.util.hash_pandas_object(sub, index=False).to_numpy()
        return sub[_considered(sub, ignore) & np.isin(h, list(wanted))]

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
        counts, total = _duplicates(plan, cols, ignore)

        def finalize(v: dict) -> Any:
            dup: pd.Series = v[counts]
            if suffix == "unexpected_count":
                return int(dup.sum())
            if suffix == "filtered_row_count":
                return int(v[total])
            if suffix == "unexpected_index_query":
                return None
            if dup.empty:
                return []
            rows = _dup_examples(plan.ddf, cols, ignore, dup)
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


def compute_metrics(
    ddf: dd.DataFrame, needed: Sequence[tuple[str, Sequence[Any]]]
) -> dict[str, dict[str, Any]]:
    """Metric values for each expectation, in one Dask computation.

    Args:
        ddf: the whole dataset (typed columns).
        needed: (expectation label, its GX MetricConfigurations) pairs.

    Returns:
        {label: {metric configuration id: value}}, ready for ``metrics_validate``.
    """
    plan = _Plan(ddf)
    finals: dict[str, dict[Any, Finalize]] = {}
    for label, configs in needed:
        for mc in configs:
            provider = _PROVIDERS.get(mc.metric_name)
            if provider is None:
                raise UnsupportedMetricError(
                    f"{label}: needs metric {mc.metric_name!r}, which etl.validation.metrics "
                    f"cannot compute on the whole dataset (supported: {sorted(_PROVIDERS)})"
                )
            finals.setdefault(label, {})[mc.id] = provider(plan, mc)
    plan.compute()
    return {label: {i: f(plan.values) for i, f in fs.items()} for label, fs in finals.items()}
