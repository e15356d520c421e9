"""Full-data validation with Great Expectations 1.x: every row, every partition.

The suite file beside the spec tags each expectation ``meta.level``:

* ``row``: evaluated by GX on every Dask partition in parallel (one GX context per worker
  thread, a pandas batch per partition). Counts are summed over the whole dataset and GX
  judges ``mostly`` on the totals. Rows failing any row-level check go to quarantine with
  the reason; the run fails if a check fails over its ``mostly`` (or at all, in strict mode).
* ``dataset``: evaluated once on whole-dataset metrics that Dask computes over the rows that
  survived (row count, key uniqueness across partitions, means, null fractions, value
  distributions), then judged by GX, so they share the results JSON and Data Docs.

Column names are checked against the spec before GX runs. On failure ``ValidationFailed``
names the expectation, column, counts, threshold and example rows (with their keys); nothing
is written outside ``results_uri`` and ``quarantine_uri``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd

from etl import storage
from etl.errors import ValidationFailed
from etl.spec.load import spec_path
from etl.validation import gx as vgx
from etl.validation import partition as vpart
from etl.validation import types as vtypes
from etl.validation.metrics import compute_partials, unsupported
from etl.validation.modes import check_mode
from etl.validation.report import (
    ValidationOutcome,
    columns_message,
    describe,
    failure_message,
    finish,
)
from etl.validation.window import (
    by_name,
    combine_row,
    dataset_checks,
    judge_dataset,
    result_format,
)

log = logging.getLogger(__name__)


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
        """Column -> parse kind (int/float/timestamp/string) for the partition views."""
        return {c: vtypes.KINDS.get(t, "string") for c, t in self.columns.items()}


def validate_dataset(
    ddf: dd.DataFrame,
    spec: Any,
    mode: str = "quarantine",
    results_uri: str = "",
    quarantine_uri: str = "",
) -> ValidationOutcome:
    """Validate every row of ``ddf`` and the dataset as a whole.

    Raises:
        ValidationFailed: columns differ from the spec, a row-level expectation failed over
            its ``mostly`` (any failing row in strict mode), or a dataset-level one failed.
    """
    check_mode(mode)
    if not results_uri or not quarantine_uri:
        raise ValueError("results_uri and quarantine_uri are required")
    vspec = ValidationSpec.of(spec)
    suite = vgx.load_suite(vspec.expectations, vspec.columns)
    check_dataset_metrics(suite, vspec)
    schema = _schema_result(ddf, vspec)
    if not schema.success:
        finish(
            vspec.name,
            suite.name,
            mode,
            [schema],
            [vgx.DATASET],
            {"evaluated_rows": None},
            results_uri,
        )
        raise ValidationFailed(columns_message(vspec.name, list(vspec.columns), list(ddf.columns)))
    storage.delete_tree(quarantine_uri)  # stale parts of an earlier attempt would mislead
    results, levels, counts, valid = _evaluate(ddf, vspec, suite, mode, quarantine_uri)
    summary = finish(
        vspec.name,
        suite.name,
        mode,
        [schema, *results],
        [vgx.DATASET, *levels],
        counts,
        results_uri,
    )
    if not summary["success"]:
        failures = [r.to_json_dict() for r in results if not r.success]
        raise ValidationFailed(failure_message(vspec.name, failures, mode, results_uri), summary)
    log.debug(  # the step's summary line (etl.pipeline.summary) says this for operators
        "validated %s: %d rows, %d quarantined, timings %s",
        vspec.name,
        counts["evaluated_rows"],
        counts["quarantined_rows"],
        counts["timings_s"],
    )
    return ValidationOutcome(valid=valid, summary=summary)


def _evaluate(
    ddf: dd.DataFrame,
    vspec: ValidationSpec,
    suite: vgx.SplitSuite,
    mode: str,
    quarantine_uri: str,
) -> tuple[list, list[str], dict, dd.DataFrame]:
    """Row-level pass over every partition, then dataset-level checks on the survivors."""
    t0 = time.perf_counter()
    reports = _row_level(ddf, vspec, suite, quarantine_uri)
    row_results = [
        combine_row(cfg, [r.partials[i] for r in reports], vspec.key, mode)
        for i, cfg in enumerate(suite.row)
    ]
    t1 = time.perf_counter()
    valid = _valid_frame(ddf, reports, vspec.key)
    dataset_results = _dataset_level(valid, vspec, suite)
    t2 = time.perf_counter()
    counts = {
        "evaluated_rows": sum(r.rows for r in reports),
        "quarantined_rows": sum(len(r.bad_positions) for r in reports),
        "partitions": len(reports),
        "quarantine_files": [r.quarantine_file for r in reports if r.quarantine_file],
        "timings_s": {
            "row_level": round(t1 - t0, 3),
            "row_level_task_cpu": round(sum(r.cpu_s for r in reports), 3),
            "dataset_level": round(t2 - t1, 3),
        },
    }
    levels = [vgx.ROW] * len(row_results) + [vgx.DATASET] * len(dataset_results)
    return row_results + dataset_results, levels, counts, valid


def check_dataset_metrics(suite: vgx.SplitSuite, vspec: ValidationSpec) -> None:
    """Fail on a dataset-level expectation Dask cannot evaluate, before reading any data."""
    fmt = result_format(vspec.key)
    for cfg in suite.dataset:
        names = [mc.metric_name for mc in vgx.required_metrics(cfg, fmt)]
        missing = unsupported(names)
        if missing:
            raise vgx.SuiteError(
                f"{vspec.expectations}: dataset-level {describe(cfg)} needs metrics "
                f"{missing} that etl.validation.metrics cannot compute on the whole dataset"
            )


def _schema_result(ddf: dd.DataFrame, vspec: ValidationSpec):
    """expect_table_columns_to_match_set(spec columns, exact), judged on the frame's columns."""
    cfg = {
        "type": "expect_table_columns_to_match_set",
        "kwargs": {"column_set": list(vspec.columns), "exact_match": True},
        "meta": {"level": vgx.DATASET, "source": "spec columns"},
    }
    needed = vgx.required_metrics(cfg, result_format(vspec.key))
    metrics = {mc.id: list(ddf.columns) for mc in needed}
    return vgx.combined_result(cfg, by_name(needed, metrics), result_format(vspec.key))


def _row_level(
    ddf: dd.DataFrame, vspec: ValidationSpec, suite: vgx.SplitSuite, quarantine_uri: str
) -> list[vpart.PartitionReport]:
    """One task per partition, computed together (in parallel on the active scheduler)."""
    parts = ddf.to_delayed()
    task = dask.delayed(vpart.validate_partition, pure=True)
    args = (suite.name, list(suite.row), vspec.kinds(), list(vspec.key), quarantine_uri)
    tasks = [task(part, i, *args) for i, part in enumerate(parts)]
    return list(dask.compute(*tasks))


def _valid_frame(
    ddf: dd.DataFrame, reports: Sequence[vpart.PartitionReport], key: Sequence[str]
) -> dd.DataFrame:
    """The input minus quarantined rows, lazily: each partition re-read and filtered."""
    parts = ddf.to_delayed()
    keep = dask.delayed(vpart.keep_valid, pure=True)
    kept = [keep(part, rep, list(key)) for part, rep in zip(parts, reports)]
    return dd.from_delayed(kept, meta=ddf._meta, divisions=ddf.divisions, verify_meta=False)


def _dataset_level(valid: dd.DataFrame, vspec: ValidationSpec, suite: vgx.SplitSuite) -> list:
    """Judge dataset-level expectations on metrics Dask computes over all surviving rows."""
    if not suite.dataset:
        return []
    checks = dataset_checks(suite, list(valid.columns), vspec.key)
    kinds = {c: k for c, k in vspec.kinds().items() if c in checks.columns}
    typed = valid[list(checks.columns)].map_partitions(
        vtypes.typed_frame, kinds, meta=vtypes.typed_frame(valid._meta[list(checks.columns)],
                                                           kinds)
    )
    checks.plan.examples = typed
    return judge_dataset(checks, compute_partials(typed, checks.keys), vspec.key)
