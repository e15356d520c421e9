"""The stored validation results (``validation/results.json``) as rows for the UI's own page.

GX's rendered Data Docs need CDN assets, link to pages that are never stored and carry GX's
own footer; this page reads the same results JSON and works offline inside the Airflow frame.
Tabular versions store GX's suite result; image versions store ``{summary, failures}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_ROWS = 1000
MAX_EXAMPLES = 5
MAX_TEXT = 200


@dataclass(frozen=True)
class CheckRow:
    """One expectation (tabular) or one refused file (images)."""

    columns: str
    kind: str
    success: bool | None
    observed: str = ""
    unexpected: Any = None
    unexpected_percent: Any = None
    evaluated: Any = None
    examples: str = ""
    details: str = ""


@dataclass(frozen=True)
class ValidationView:
    """What the page shows: an overall result, facts, and one row per check."""

    success: bool | None
    facts: dict[str, Any] = field(default_factory=dict)
    rows: list[CheckRow] = field(default_factory=list)
    total: int = 0
    image_failures: bool = False


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _columns(kwargs: dict[str, Any]) -> str:
    cols = [kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs]
    cols += list(kwargs.get("column_list") or [])
    return ", ".join(str(c) for c in cols)


def _expectation_row(item: dict[str, Any]) -> CheckRow:
    config = item.get("expectation_config") or {}
    kwargs = config.get("kwargs") if isinstance(config.get("kwargs"), dict) else {}
    result = item.get("result") if isinstance(item.get("result"), dict) else {}
    examples = result.get("partial_unexpected_list") or []
    rule = {k: v for k, v in kwargs.items()
            if k not in ("column", "column_A", "column_B", "column_list", "batch_id",
                         "result_format")}
    return CheckRow(
        columns=_columns(kwargs), kind=str(config.get("type") or config.get("expectation_type")
                                           or "–"),
        success=item.get("success") if isinstance(item.get("success"), bool) else None,
        observed=_text(result.get("observed_value")), unexpected=result.get("unexpected_count"),
        unexpected_percent=result.get("unexpected_percent"),
        evaluated=result.get("element_count"),
        examples=_text(examples[:MAX_EXAMPLES]) if isinstance(examples, list) and examples else "",
        details=_text(rule) if rule else "")


def validation_view(results: dict[str, Any]) -> ValidationView:
    """Rows for either stored shape; unknown shapes give an empty table, not an error."""
    if isinstance(results.get("summary"), dict):  # images: {summary, failures}
        summary = results["summary"]
        failures = [f for f in results.get("failures") or [] if isinstance(f, dict)]
        rows = [CheckRow(columns=_text(f.get("uri") or f.get("key")), kind="image file",
                         success=False, details=_text(f.get("reason")))
                for f in failures[:MAX_ROWS]]
        return ValidationView(summary.get("success"), dict(summary), rows, len(failures), True)
    items = [r for r in results.get("results") or [] if isinstance(r, dict)]
    rows = sorted((_expectation_row(r) for r in items[:MAX_ROWS]),
                  key=lambda r: r.success is not False)
    facts = {**(results.get("statistics") if isinstance(results.get("statistics"), dict) else {}),
             **{k: v for k, v in (results.get("meta") or {}).items()
                if not isinstance(v, (dict, list))}}
    return ValidationView(results.get("success"), facts, rows, len(items))
