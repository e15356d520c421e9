"""Dataset metrics: whole-window metric values for dataset-level expectations, from mergeable
metric partials, and the plan of which partials a suite needs.

A dataset-level expectation (row count, key uniqueness, mean, null fraction, value
distribution) is only meaningful over all rows: a duplicate key may sit in two segments.
GX tells us which metrics an expectation needs (``get_validation_dependencies``); each
segment's build computes a small metric partial of each (row and non-null counts, a numeric
summary from ``etl.statistics``, value counts, the sorted 64-bit hashes of its keys), stored
beside its rows (``etl.segments.build``: ``partials.npz``); a window merges its segments'
partials in a tree and derives the metric values from the merged ones (``MetricPlan.values``).
GX then judges the expectation from these values exactly as if it had computed them itself
(``etl.kinds.tabular.judge``). Partials of any grouping of rows merge to the same values,
which is what lets a window be judged as a whole from segments built on different nights.

GX is imported only by the functions that ask it something (``etl.validation.gx``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from etl.errors import PipelineError
from etl.statistics import group_counts, merge_moments, moments_of_array
from etl.validation.report import columns_of, describe, jsonable
from etl.validation.suite import (
    KEPT_EXAMPLES,
    SplitSuite,
    SuiteError,
    ValidationSpec,
)

Key = tuple
MetricPartials = dict  # plan key -> one metric partial (a count, a summary, value counts, hashes)
EXAMPLE_ROWS = 20
# merged metric partials, the rows where duplicated keys are looked up -> a metric value
Finalize = Callable[[dict, Any], Any]


def _partial(pdf: pd.DataFrame, key: Key) -> Any:
    """One plan key's partial of one frame of rows."""
    kind = key[0]
    if kind == "rows":
        return len(pdf)
    if kind == "count":
        return int(pdf[key[1]].notna().sum())
    if kind == "num":
        x = pd.to_numeric(pdf[key[1]], errors="coerce").astype("float64").to_numpy()
        return moments_of_array(x[:, None], [""])[""]
    if kind == "vc":
        return _counted(pdf[key[1]])
    if kind == "hashes":
        sub = pdf[list(key[1])]
        keep = considered(sub, key[2])
        return np.sort(pd.util.hash_pandas_object(sub[keep], index=False)
                       .to_numpy(dtype=np.uint64))
    raise KeyError(key)


def _counted(values: pd.Series) -> pd.Series:
    """``values.value_counts(dropna=True)``, most frequent first, ties in a fixed order."""
    uniques, [(code, counts)] = group_counts(values, np.zeros(len(values), dtype=np.int64), 1)
    return pd.Series(counts, name="count", dtype="int64",
                     index=pd.Index(uniques.take(code), name=values.name))


def _merge(key: Key, a: Any, b: Any) -> Any:
    kind = key[0]
    if kind in ("rows", "count"):
        return a + b
    if kind == "num":
        return merge_moments(a, b)
    if kind == "vc":
        return a.add(b, fill_value=0).astype("int64")
    return np.sort(np.concatenate([a, b]))  # hashes


def metric_partials(pdf: pd.DataFrame, keys: Sequence[Key]) -> MetricPartials:
    """Every metric partial a plan needs, for one frame of rows (a segment's valid rows)."""
    return {k: _partial(pdf, k) for k in keys}


def merge_metric_partials(parts: Sequence[MetricPartials]) -> MetricPartials:
    """Merge metric partials in a balanced tree (rounding does not grow with their number)."""
    level = list(parts)
    while len(level) > 1:
        level = [{k: _merge(k, level[i][k], level[i + 1][k]) for k in level[i]}
                 if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0] if level else {}


def considered(sub: pd.DataFrame, ignore_row_if: str) -> np.ndarray:
    """Rows GX would consider for uniqueness, given its ``ignore_row_if`` rule."""
    isna = sub.isna()
    if ignore_row_if == "all_values_are_missing":
        return ~isna.all(axis=1).to_numpy()
    if ignore_row_if == "any_value_is_missing":
        return ~isna.any(axis=1).to_numpy()
    return np.ones(len(sub), dtype=bool)


def hashes_of(pdf: pd.DataFrame, cols: list[str], ignore_row_if: str) -> pd.Series:
    """64-bit hash per considered row of ``cols``."""
    sub = pdf[cols]
    hashed = pd.util.hash_pandas_object(sub[considered(sub, ignore_row_if)], index=False)
    return pd.Series(hashed.to_numpy(), name="h", dtype="uint64")


class UnsupportedMetricError(PipelineError):
    """A dataset-level expectation needs a metric this module cannot compute on Dask."""


class MetricPlan:
    """The metric partials the metric providers need, and how each metric value is derived
    from them (``finals``: per expectation, described, per metric configuration id)."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = list(columns)
        self.keys: list[Key] = []
        self.finals: dict[str, dict[Any, Finalize]] = {}

    def need(self, key: Key) -> Key:
        if key not in self.keys:
            self.keys.append(key)
        return key

    def values(self, merged: dict[Key, Any], examples: Any = None) -> dict[str, dict[str, Any]]:
        """{described expectation: {metric configuration id: value}} from merged metric partials.

        ``examples``: the rows (a Dask frame of the typed key columns, or a function giving
        one, called only when a duplicate is found) where duplicated keys are looked up for the
        messages; None: no rows at hand.
        """
        return {described: {i: f(merged, examples) for i, f in fs.items()}
                for described, fs in self.finals.items()}


def _rows(plan: MetricPlan) -> Key:
    return plan.need(("rows",))


def _count(plan: MetricPlan, col: str) -> Key:
    return plan.need(("count", col))


def _value_counts(plan: MetricPlan, col: str) -> Key:
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


def _aggregate(op: str) -> Callable[[MetricPlan, Any], Finalize]:
    def provider(plan: MetricPlan, mc: Any) -> Finalize:
        k = plan.need(("num", mc.metric_domain_kwargs["column"]))
        return lambda v, _: jsonable(_numeric_value(op, v[k]))

    return provider


def _row_count(plan: MetricPlan, mc: Any) -> Finalize:
    k = _rows(plan)
    return lambda v, _: int(v[k])


def _columns(plan: MetricPlan, mc: Any) -> Finalize:
    cols = list(plan.columns)
    return lambda v, _: cols


def _column_count(plan: MetricPlan, mc: Any) -> Finalize:
    n = len(plan.columns)
    return lambda v, _: n


def _nonnull_count(plan: MetricPlan, mc: Any) -> Finalize:
    k = _count(plan, mc.metric_domain_kwargs["column"])
    return lambda v, _: int(v[k])


def _null_count(plan: MetricPlan, mc: Any) -> Finalize:
    r, k = _rows(plan), _count(plan, mc.metric_domain_kwargs["column"])
    return lambda v, _: int(v[r]) - int(v[k])


def _non_null_proportion(plan: MetricPlan, mc: Any) -> Finalize:
    r, k = _rows(plan), _count(plan, mc.metric_domain_kwargs["column"])
    return lambda v, _: (int(v[k]) / int(v[r])) if int(v[r]) else None


def _counts_metric(kind: str) -> Callable[[MetricPlan, Any], Finalize]:
    """Metrics derived from one column's value counts (GX drops nulls here too)."""

    def provider(plan: MetricPlan, mc: Any) -> Finalize:
        k = _value_counts(plan, mc.metric_domain_kwargs["column"])
        value_kwargs = mc.metric_value_kwargs or {}

        def finalize(v: dict, examples: Any) -> Any:
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


def _duplicates(plan: MetricPlan, cols: list[str], ignore_row_if: str) -> Key:
    """The sorted 64-bit hashes of every considered row's key, merged over segments,
    so two copies of a key in different segments are counted together."""
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


def _uniqueness(suffix: str) -> Callable[[MetricPlan, Any], Finalize]:
    def provider(plan: MetricPlan, mc: Any) -> Finalize:
        dk = mc.metric_domain_kwargs
        cols = list(dk.get("column_list") or [dk["column"]])
        ignore = dk.get("ignore_row_if") or (
            "all_values_are_missing" if len(cols) > 1 else "any_value_is_missing"
        )
        k = _duplicates(plan, cols, ignore)

        def finalize(v: dict, examples: Any) -> Any:
            dup = _dup_counts(v[k])
            if suffix == "unexpected_count":
                return int(dup.sum())
            if suffix == "filtered_row_count":
                return len(v[k])
            if suffix == "unexpected_index_query":
                return None
            if dup.empty:
                return []
            rows = _dup_examples(examples, cols, ignore, dup)
            return (
                rows
                if suffix == "unexpected_index_list" or len(cols) > 1
                else [r[cols[0]] for r in rows]
            )

        return finalize

    return provider


_PROVIDERS: dict[str, Callable[[MetricPlan, Any], Finalize]] = {
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


def plan_metrics(columns: Sequence[str], needed: Sequence[tuple[str, Sequence[Any]]]
                 ) -> MetricPlan:
    """Which metric partials the expectations need (``plan.keys``); nothing is read yet.

    Args:
        columns: the dataset's columns (for the table.columns metrics).
        needed: (the expectation described, its GX MetricConfigurations) pairs.
    """
    plan = MetricPlan(columns)
    for described, configs in needed:
        for mc in configs:
            provider = _PROVIDERS.get(mc.metric_name)
            if provider is None:
                raise UnsupportedMetricError(
                    f"{described}: needs metric {mc.metric_name!r}, which etl.validation.metrics "
                    f"cannot compute on the whole dataset (supported: {sorted(_PROVIDERS)})"
                )
            plan.finals.setdefault(described, {})[mc.id] = provider(plan, mc)
    return plan


def result_format(key: Sequence[str]) -> dict:
    """SUMMARY results with example rows identified by the dataset key."""
    return {
        "result_format": "SUMMARY",
        "partial_unexpected_count": KEPT_EXAMPLES,
        "unexpected_index_column_names": list(key),
    }


@dataclass(frozen=True)
class DatasetChecks:
    """The dataset-level expectations' metric needs, planned before any row is read.

    ``columns``: the (typed) columns the metric partials are computed over; ``key_columns``:
    those whose row hashes the uniqueness checks merge, kept per segment to name duplicated
    keys.
    """

    configs: tuple[dict, ...]
    needed: tuple[tuple[str, list], ...]
    columns: tuple[str, ...]
    key_columns: tuple[str, ...]
    plan: MetricPlan

    @property
    def keys(self) -> tuple[Key, ...]:
        return tuple(self.plan.keys)


def dataset_checks(suite: SplitSuite, columns: Sequence[str], key: Sequence[str]
                   ) -> DatasetChecks:
    """Plan the dataset-level metrics of ``suite`` over a frame with ``columns`` (asks GX
    which metrics each expectation needs)."""
    from etl.validation import gx

    used = {c for cfg in suite.dataset for c in columns_of(cfg["kwargs"])}
    if any(cfg["type"].startswith("expect_table_column") for cfg in suite.dataset):
        used = set(columns)  # checks on the column list itself see every column
    cols = [c for c in columns if c in used] or list(key)  # parse only these
    fmt = result_format(key)
    needed = tuple((f"{describe(cfg)} (#{i})", gx.required_metrics(cfg, fmt))
                   for i, cfg in enumerate(suite.dataset))
    plan = plan_metrics(cols, needed)
    hashed = [c for k in plan.keys if k[0] == "hashes" for c in k[1]]
    return DatasetChecks(tuple(suite.dataset), needed, tuple(cols),
                         tuple(dict.fromkeys(hashed)), plan)


def check_dataset_metrics(suite: SplitSuite, vspec: ValidationSpec) -> None:
    """Fail on a dataset-level expectation no metric partial can answer, before reading any
    data."""
    from etl.validation import gx

    fmt = result_format(vspec.key)
    for cfg in suite.dataset:
        names = [mc.metric_name for mc in gx.required_metrics(cfg, fmt)]
        missing = unsupported(names)
        if missing:
            raise SuiteError(
                f"{vspec.expectations}: dataset-level {describe(cfg)} needs metrics "
                f"{missing} that etl.validation.metrics cannot compute on the whole dataset"
            )
