"""The stored validation results (``validation/results.json``) as rows for the UI's own page.

GX's rendered Data Docs need CDN assets, link to pages that are never stored and carry GX's
own footer; this page reads the same results JSON and works offline inside the Airflow frame.
Tabular versions store GX's suite result; image versions store ``{summary, failures}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .present import fmt

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


def _value(value: Any) -> str:
    """Numbers as the rest of the UI shows them (``1,039.9``, ``9.404e-09``); lists joined."""
    if isinstance(value, list):
        return _text(", ".join(_value(v) for v in value))
    if isinstance(value, dict):
        return _text("; ".join(f"{k} {_value(v)}" for k, v in value.items()))
    return _text(fmt(value) if isinstance(value, (int, float)) else value)


# GX's argument names as a reader says them; others are de-snake-cased.
_RULE_WORDS = {"min_value": "min", "max_value": "max", "value_set": "one of",
               "type_list": "type one of", "type_": "type",
               "strict_min": "min excluded", "strict_max": "max excluded", "regex": "matches"}


def _rule(rule: dict[str, Any]) -> str:
    """``{"min_value": 1.0, "mostly": 0.99}`` -> ``min 1; for at least 99% of rows``."""
    return _text("; ".join(
        f"for at least {v * 100:g}% of rows" if k == "mostly" and isinstance(v, (int, float))
        else f"{_RULE_WORDS.get(k, k.replace('_', ' '))} {_value(v)}" for k, v in rule.items()))


def _observed(result: dict[str, Any]) -> str:
    """The observed value; a per-row check stores none, so say how many rows failed it."""
    if "observed_value" in result:
        return _value(result["observed_value"])
    if isinstance(result.get("unexpected_count"), int) and isinstance(result.get("element_count"), int):
        bad, rows = result["unexpected_count"], result["element_count"]
        return f"all {rows:,} rows pass" if not bad else f"{bad:,} of {rows:,} rows fail"
    return ""


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
        observed=_observed(result), unexpected=result.get("unexpected_count"),
        unexpected_percent=result.get("unexpected_percent"),
        evaluated=result.get("element_count"),
        examples=_text(examples[:MAX_EXAMPLES]) if isinstance(examples, list) and examples else "",
        details=_rule(rule) if rule else "")


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
