"""A tabular window judged from its segments' stored partials, never from a record.

Row-level expectations are summed over the segments and GX judges ``mostly`` on the totals;
dataset-level ones (row counts, key uniqueness across segments, ...) get their metric values
from the merged partials (``etl.validation.metrics.judge_window``). The cost is O(segments); the stored keys
are read only when a duplicate has to be named.
"""

from __future__ import annotations

from typing import Any

from etl.errors import ValidationFailed
from etl.segments.files import read_keys, read_partials, row_counts
from etl.segments.request import Metas
from etl.spec import Spec
from etl.validation import (
    DatasetChecks,
    RowCounts,
    SplitSuite,
    failure_message,
    finish,
    judge_window,
)
from etl.versions.segment import SegmentMeta


def _row_partials(meta: SegmentMeta) -> list[RowCounts]:
    return [row_counts(p) for p in meta.checks.row_partials]


def _examples(metas: Metas) -> Any:
    """A function giving the window's stored keys as one frame (read only on a duplicate)."""

    def frame() -> Any:
        import dask
        import dask.dataframe as dd

        keys = [dask.delayed(read_keys)(uri, meta) for uri, meta in metas]
        empty = read_keys(*metas[0]).iloc[:0]
        return dd.from_delayed(keys, meta=empty, verify_meta=False)

    return frame


def judge(spec: Spec, suite: SplitSuite, checks: DatasetChecks, metas: Metas, mode: str,
          results_uri: str) -> dict[str, Any]:
    """The window's validation summary (results and Data Docs written to ``results_uri``):
    ``suite`` split by level, ``checks`` its dataset-level metric needs (``etl.validation``).

    Raises:
        ValidationFailed: a row-level expectation failed over its ``mostly`` on the window's
            totals, or a dataset-level one (row count, key uniqueness across segments, ...).
    """
    results, levels = judge_window(suite, checks, spec.key, mode,
                                   [_row_partials(m) for _, m in metas],
                                   [read_partials(uri, m)[0] for uri, m in metas],
                                   _examples(metas) if checks.key_columns else None)
    built = [m for _, m in metas]
    counts = {
        "evaluated_rows": sum(m.checks.rows for m in built),
        "quarantined_rows": sum(m.checks.quarantined_rows for m in built),
        "partitions": len(built),
        "segments": len(built),
        "quarantine_files": [f"segments/{m.segment}/{name}" for m in built
                             for name in m.checks.quarantine_files],
    }
    summary = finish(spec.name, suite.name, mode, results, levels, counts, results_uri)
    if not summary["success"]:
        failures = [r.to_json_dict() for r in results if not r.success]
        raise ValidationFailed(failure_message(spec.name, failures, mode, results_uri), summary)
    return summary
