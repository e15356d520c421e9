"""Validation: every row against the dataset's Great Expectations suite, bad rows quarantined,
and what a window is judged by as a whole from what its segments stored (the tabular kind
judges it: ``etl.kinds.tabular.judge``).

Modules, one concept each: ``suite`` (what validation needs from a spec: modes, declared
columns and their text parsed, the suite split into row and dataset levels), ``rows`` (row checks of a batch of
segments: valid rows, ``RowCounts`` per expectation, quarantine), ``metrics`` (dataset-level
metric partials, their merge, and the metric values derived from them), ``report`` (results JSON, Data Docs,
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
    merge_metric_partials,
    metric_partials,
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
)
from etl.validation.suite import (
    KEPT_EXAMPLES,
    MODES,
    SplitSuite,
    SuiteError,
    ValidationSpec,
    check_mode,
    typed_frame,
)

__all__ = [
    "KEPT_EXAMPLES", "MODES", "REASON_COLUMN", "CheckedRows",
    "DatasetChecks", "MetricPartials", "RowChecks", "RowCounts", "RowReport", "SplitSuite",
    "SuiteError", "ValidationSpec", "check_dataset_metrics", "check_mode", "check_rows",
    "dataset_checks", "failure_message", "finish",
    "merge_metric_partials", "metric_partials", "summed", "typed_frame",
]
