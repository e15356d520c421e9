"""The stored validation results (``validation/results.json``) as rows for the UI's own page.

GX's rendered Data Docs need CDN assets, link to pages that are never stored and carry GX's
own footer; this page reads the same results JSON and works offline inside the Airflow frame.
Tabular versions store GX's suite result; image versions store ``{summary, failures}``.

A version whose validation failed is never published, but its results stay in its folder:
the page opens for it too, marked "not published", and says each failed expectation in a
sentence (``temp must have a value in at least 50% of rows; 0% of rows had one``), with the
join that left its column empty where the ETL found one (``meta.join_gaps``:
``etl.kinds.tabular.judge``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

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
    words: str = ""  # the check and its outcome in a sentence
    causes: tuple[str, ...] = ()  # joins that left its column empty (``meta.join_gaps``)


@dataclass(frozen=True)
class ValidationView:
    """What the page shows: an overall result, facts, and one row per check; ``join_gaps``:
    the joins that matched nothing in some partitions, in words."""

    success: bool | None
    facts: dict[str, Any] = field(default_factory=dict)
    rows: list[CheckRow] = field(default_factory=list)
    total: int = 0
    image_failures: bool = False
    join_gaps: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[CheckRow]:
        return [r for r in self.rows if r.success is False]


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


def _expectation_row(item: dict[str, Any], gaps: list[dict[str, Any]]) -> CheckRow:
    config = item.get("expectation_config") or {}
    kwargs = config.get("kwargs") if isinstance(config.get("kwargs"), dict) else {}
    result = item.get("result") if isinstance(item.get("result"), dict) else {}
    examples = result.get("partial_unexpected_list") or []
    rule = {k: v for k, v in kwargs.items()
            if k not in ("column", "column_A", "column_B", "column_list", "batch_id",
                         "result_format")}
    kind = str(config.get("type") or config.get("expectation_type") or "–")
    columns = _columns(kwargs)
    raised = (item.get("exception_info") or {}) if isinstance(item.get("exception_info"),
                                                              dict) else {}
    return CheckRow(
        columns=columns, kind=kind,
        success=item.get("success") if isinstance(item.get("success"), bool) else None,
        observed=_observed(result), unexpected=result.get("unexpected_count"),
        unexpected_percent=result.get("unexpected_percent"),
        evaluated=result.get("element_count"),
        examples=_text(examples[:MAX_EXAMPLES]) if isinstance(examples, list) and examples else "",
        details=_rule(rule) if rule else "",
        words=in_words(kind, kwargs, result, raised.get("exception_message")
                       if raised.get("raised_exception") else None),
        causes=tuple(str(g.get("text")) for g in gaps
                     if set(map(str, g.get("columns") or ())) & set(columns.split(", "))))


# --- a check in a sentence -------------------------------------------------------------------

def _share(mostly: Any) -> str:
    if isinstance(mostly, (int, float)) and not isinstance(mostly, bool) and mostly < 1:
        return f" in at least {mostly * 100:g}% of rows"
    return " in every row"


def _bounds(kwargs: dict[str, Any], scale: float = 1.0, unit: str = "") -> str:
    lo, hi = kwargs.get("min_value"), kwargs.get("max_value")
    low = _value(lo * scale) + unit if isinstance(lo, (int, float)) else None
    high = _value(hi * scale) + unit if isinstance(hi, (int, float)) else None
    if low and high:
        return f"between {low} and {high}"
    return f"at least {low}" if low else f"at most {high}" if high else "within its bounds"


def _rule_words(kind: str, col: str, kwargs: dict[str, Any]) -> str:
    """What the expectation asks, in words (GX's kinds the specs use; others by their name)."""
    share = _share(kwargs.get("mostly"))
    if kind.endswith("proportion_of_non_null_values_to_be_between"):
        return f"{col} must have a value in {_bounds(kwargs, 100, '%')} of rows"
    if kind.endswith("values_to_not_be_null"):
        return f"{col} must have a value{share}"
    if kind.endswith("values_to_be_between"):
        return f"{col} must lie {_bounds(kwargs)}{share}"
    if kind.endswith(("values_to_be_in_type_list", "values_to_be_of_type")):
        types = kwargs.get("type_list") or [kwargs.get("type_")]
        return f"{col} must read as {_value(types)}{share}"
    if kind.endswith("values_to_match_regex"):
        return f"{col} must match {_value(kwargs.get('regex'))}{share}"
    if kind.endswith("values_to_be_in_set"):
        return f"{col} must be one of {_value(kwargs.get('value_set'))}{share}"
    if kind.endswith("values_to_be_valid_hhmm"):
        return f"{col} must be a time of day written HHMM{share}"
    if kind == "expect_table_row_count_to_be_between":
        return f"the window must hold {_bounds(kwargs)} rows"
    if kind.endswith(("values_to_be_unique", "columns_to_be_unique")):
        return f"each {'combination of ' if ', ' in col else ''}{col} must appear once"
    if kind.endswith("kl_divergence_to_be_less_than"):
        return (f"the distribution of {col} must stay close to the expected one (KL "
                f"divergence under {_value(kwargs.get('threshold'))})")
    if kind.endswith("most_common_value_to_be_in_set"):
        return f"the most common value of {col} must be one of {_value(kwargs.get('value_set'))}"
    stat = re.match(r"expect_column_(mean|median|stdev|min|max|sum|unique_value_count)"
                    r"_to_be_between$", kind)
    if stat:
        return f"the {stat.group(1).replace('_', ' ')} of {col} must lie {_bounds(kwargs)}"
    return f"{col}: {kind.removeprefix('expect_').replace('_', ' ')}"


def in_words(kind: str, kwargs: dict[str, Any], result: dict[str, Any],
             raised: str | None = None) -> str:
    """``temp must have a value in at least 50% of rows; 0% of rows had one``."""
    col = _columns(kwargs) or "the table"
    asked = _rule_words(kind, col, kwargs)
    if raised:
        return f"{asked}; the check could not run: {_text(raised)}"
    bad, rows = result.get("unexpected_count"), result.get("element_count")
    if isinstance(bad, int) and isinstance(rows, int):
        return f"{asked}; {bad:,} of {rows:,} rows did not" if bad else f"{asked}; all did"
    observed = result.get("observed_value")
    if kind.endswith("proportion_of_non_null_values_to_be_between") and \
            isinstance(observed, (int, float)):
        return f"{asked}; {_value(observed * 100)}% of rows had one"
    if kind == "expect_table_row_count_to_be_between" and isinstance(observed, int):
        return f"{asked}; it held {observed:,}"
    return f"{asked}; observed {_value(observed)}" if observed is not None else asked


def code_spans(text: str) -> Markup:
    """``text`` escaped, its `backquoted` names as ``<code>`` (the ETL's words for joins)."""
    parts = str(text).split("`")
    return Markup("").join(Markup("<code>{}</code>").format(p) if i % 2 else escape(p)
                           for i, p in enumerate(parts))


def validation_view(results: dict[str, Any]) -> ValidationView:
    """Rows for either stored shape; unknown shapes give an empty table, not an error."""
    if isinstance(results.get("summary"), dict):  # images: {summary, failures}
        summary = results["summary"]
        failures = [f for f in results.get("failures") or [] if isinstance(f, dict)]
        rows = [CheckRow(columns=_text(f.get("uri") or f.get("key")), kind="image file",
                         success=False, details=_text(f.get("reason")))
                for f in failures[:MAX_ROWS]]
        return ValidationView(summary.get("success"), dict(summary), rows, len(failures), True)
    meta = results.get("meta") if isinstance(results.get("meta"), dict) else {}
    gaps = [g for g in meta.get("join_gaps") or [] if isinstance(g, dict)]
    items = [r for r in results.get("results") or [] if isinstance(r, dict)]
    rows = sorted((_expectation_row(r, gaps) for r in items[:MAX_ROWS]),
                  key=lambda r: r.success is not False)
    facts = {**(results.get("statistics") if isinstance(results.get("statistics"), dict) else {}),
             **{k: v for k, v in meta.items() if not isinstance(v, (dict, list))}}
    return ValidationView(results.get("success"), facts, rows, len(items),
                          join_gaps=[str(g.get("text")) for g in gaps])
