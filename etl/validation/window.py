"""Judging a whole window from its parts' partials: row-level totals, dataset-level metrics.

Row-level expectations are summed over the parts and GX judges ``mostly`` on the totals;
dataset-level ones get their metric values from merged partials (``etl.validation.metrics``).
The parts are a run's Dask partitions (``etl.validation.tabular``) or the stored segments of a
version's window (``etl.segments.judge``): both end here, so a window is judged the same
way whether its rows were validated tonight or on earlier nights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from etl.validation import gx as vgx
from etl.validation.metrics import MetricPlan, plan_metrics
from etl.validation.partials import Key, merge_partials
from etl.validation.partition import Partial
from etl.validation.report import columns_of, describe


def result_format(key: Sequence[str]) -> dict:
    """SUMMARY results with example rows identified by the dataset key."""
    return {
        "result_format": "SUMMARY",
        "partial_unexpected_count": vgx.PARTIAL_COUNT,
        "unexpected_index_column_names": list(key),
    }


def by_name(needed: Sequence[Any], by_id: Mapping[Any, Any]) -> dict[str, Any]:
    return {mc.metric_name: by_id[mc.id] for mc in needed}


def combine_row(cfg: dict, partials: Sequence[Partial], key: Sequence[str], mode: str):
    """Sum one expectation's partial results and let GX judge the totals."""
    errors = [p.error for p in partials if p.error]
    if errors:
        return vgx.failed_result(cfg, f"{errors[0]} (in {len(errors)} part(s))")
    if mode == "strict":
        kwargs = dict(cfg["kwargs"], mostly=1.0)
        cfg = dict(cfg, kwargs=kwargs, meta={**cfg.get("meta", {}), "strict_mode": True})
    totals = {
        "element_count": sum(p.element_count for p in partials),
        "missing_count": sum(p.missing_count for p in partials),
        "unexpected_count": sum(p.unexpected_count for p in partials),
        "values": [v for p in partials for v in p.values][: vgx.PARTIAL_COUNT],
        "examples": [e for p in partials for e in p.examples][: vgx.PARTIAL_COUNT],
    }
    return vgx.judge_row(cfg, totals, result_format(key))


@dataclass(frozen=True)
class DatasetChecks:
    """The dataset-level expectations' metric needs, planned before any row is read.

    ``columns``: the (typed) columns the partials are computed over; ``key_columns``: those
    whose row hashes the uniqueness checks merge, kept per part to name duplicated keys.
    """

    configs: tuple[dict, ...]
    needed: tuple[tuple[str, list], ...]
    columns: tuple[str, ...]
    key_columns: tuple[str, ...]
    plan: MetricPlan

    @property
    def keys(self) -> tuple[Key, ...]:
        return tuple(self.plan.keys)


def dataset_checks(suite: vgx.SplitSuite, columns: Sequence[str], key: Sequence[str],
                   examples: Any = None) -> DatasetChecks:
    """Plan the dataset-level metrics of ``suite`` over a frame with ``columns``.

    ``examples``: a frame (or a function returning one) where duplicated keys are looked up.
    """
    used = {c for cfg in suite.dataset for c in columns_of(cfg["kwargs"])}
    if any(cfg["type"].startswith("expect_table_column") for cfg in suite.dataset):
        used = set(columns)  # checks on the column list itself see every column
    cols = [c for c in columns if c in used] or list(key)  # parse only these
    fmt = result_format(key)
    needed = tuple((f"{describe(cfg)} (#{i})", vgx.required_metrics(cfg, fmt))
                   for i, cfg in enumerate(suite.dataset))
    plan = plan_metrics(cols, needed, examples)
    hashed = [c for k in plan.keys if k[0] == "hashes" for c in k[1]]
    return DatasetChecks(tuple(suite.dataset), needed, tuple(cols),
                         tuple(dict.fromkeys(hashed)), plan)


def judge_dataset(checks: DatasetChecks, merged: Mapping[Key, Any], key: Sequence[str]) -> list:
    """GX results of the dataset-level expectations from merged partials."""
    values = checks.plan.values(dict(merged))
    fmt = result_format(key)
    return [vgx.combined_result(cfg, by_name(mcs, values.get(label, {})), fmt)
            for (label, mcs), cfg in zip(checks.needed, checks.configs)]


def judge_window(suite: vgx.SplitSuite, checks: DatasetChecks, key: Sequence[str], mode: str,
                 row_partials: Sequence[Sequence[Partial]],
                 metric_partials: Sequence[Mapping[Key, Any]]) -> tuple[list, list[str]]:
    """(results, levels) of a window whose parts stored their partials.

    ``row_partials[j][i]``: part j's partial of row expectation i.
    """
    rows = [combine_row(cfg, [part[i] for part in row_partials], key, mode)
            for i, cfg in enumerate(suite.row)]
    dataset = judge_dataset(checks, merge_partials(list(metric_partials)), key) \
        if suite.dataset else []
    return rows + dataset, [vgx.ROW] * len(rows) + [vgx.DATASET] * len(dataset)

