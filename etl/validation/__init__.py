"""Validation: every row against the dataset's Great Expectations suite, bad rows quarantined,
and a window judged as a whole from what its segments stored.

Modules, one concept each: ``suite`` (what validation needs from a spec: modes, declared
columns, the suite split into row and dataset levels), ``rows`` (row checks of a batch of
segments: valid rows, ``RowCounts`` per expectation, quarantine), ``metrics`` (dataset-level
metric partials, their merge, and the window's judgement), ``report`` (results JSON, Data Docs,
failure messages) and ``gx`` (Great Expectations itself). Importing this package does not
import GX: ``gx`` is imported by the functions that ask it something (``gx.load_suite``
where a build starts, ``check_rows``, the judgement), so planning, publishing and reading versions never pay for it.
(Image files are checked by their kind, ``etl.kinds.images.check``.)
"""

from __future__ import annotations

from etl.validation.metrics import (
    DatasetChecks,
    MetricPartials,
    check_dataset_metrics,
    dataset_checks,
    judge_window,
    merge_metric_partials,
    metric_partials,
    metric_partials_from_json,
    metric_partials_to_json,
)
from etl.validation.report import failure_message, finish
from etl.validation.rows import (
    REASON_COLUMN,
    CheckedRows,
    RowChecks,
    RowCounts,
    RowReport,
    check_rows,
    summed,
    typed_frame,
)
from etl.validation.suite import (
    KEPT_EXAMPLES,
    MODES,
    SplitSuite,
    SuiteError,
    ValidationSpec,
    check_mode,
)

__all__ = [
    "KEPT_EXAMPLES", "MODES", "REASON_COLUMN", "CheckedRows",
    "DatasetChecks", "MetricPartials", "RowChecks", "RowCounts", "RowReport", "SplitSuite",
    "SuiteError", "ValidationSpec", "check_dataset_metrics", "check_mode", "check_rows",
    "dataset_checks", "failure_message", "finish", "judge_window",
    "merge_metric_partials", "metric_partials", "metric_partials_from_json",
    "metric_partials_to_json", "summed", "typed_frame",
]
