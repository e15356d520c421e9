"""What validation leaves behind: results JSON, Data Docs HTML, quarantine files, messages.

Everything is written through etl.storage, so the same code writes to a local folder or a
bucket, and only under the results/quarantine folders the caller hands over.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from etl import storage

RESULTS_FILE = "results.json"
DOCS_FILE = "index.html"
EXAMPLES_IN_MESSAGE = 5


def jsonable(value: Any) -> Any:
    """Plain JSON value for numpy/pandas scalars, timestamps and NaN (which JSON lacks)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating, Decimal)):
        f = float(value)
        return None if math.isnan(f) else f
    if isinstance(value, (pd.Timestamp, dt.datetime, dt.date, np.datetime64)):
        return pd.Timestamp(value).isoformat()
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, np.ndarray)):
        return [jsonable(v) for v in value]
    return str(value)


def write_parquet(df: pd.DataFrame, folder_uri: str, name: str) -> str:
    """Write one Parquet object atomically (no half file is ever visible under its name)."""
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), buf)
    uri = storage.join(folder_uri, name)
    storage.write_bytes_atomic(uri, buf.getvalue())
    return uri


def write_results(suite_result, results_uri: str) -> dict[str, str]:
    """Store the GX suite validation result as JSON and as a Data Docs page.

    The page is GX's own ValidationResultsPageRenderer output; it loads Bootstrap from a CDN
    but all results are in the HTML itself, so it stays readable offline.
    """
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    body = json.dumps(jsonable(suite_result.to_json_dict()), indent=2, sort_keys=True)
    storage.write_bytes_atomic(storage.join(results_uri, RESULTS_FILE), body.encode("utf-8"))
    document = ValidationResultsPageRenderer().render(suite_result)
    html = DefaultJinjaPageView().render(document).replace("<head>", _OFFLINE_STYLE, 1)
    storage.write_bytes_atomic(storage.join(results_uri, DOCS_FILE), html.encode("utf-8"))
    return {"results": RESULTS_FILE, "data_docs": DOCS_FILE}


# Pass/fail marks without the icon font (a CDN): placed first in <head>, so when the font
# loads its own rules (later, same specificity) win.
_OFFLINE_STYLE = (
    "<head>\n<style>"
    '.fas.fa-check-circle::before{content:"\\2714";color:#28a745}'
    '.fas.fa-times::before{content:"\\2718";color:#dc3545}'
    "</style>"
)


def _fmt(kwargs: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in kwargs.items() if k not in ("batch_id", "result_format")}
    parts = []
    for k, v in shown.items():
        text = repr(v)
        parts.append(f"{k}={text if len(text) <= 60 else text[:57] + '...'}")
    return ", ".join(parts)


def failure_line(res: Mapping[str, Any], mode: str) -> str:
    """One readable paragraph for a failed expectation result (JSON form)."""
    cfg = res["expectation_config"]
    kwargs = cfg.get("kwargs", {})
    column = kwargs.get("column") or kwargs.get("column_list")
    head = f"{cfg['type']} on column {column!r}" if column else cfg["type"]
    exc = res.get("exception_info") or {}
    if exc.get("raised_exception"):
        return f"{head}: raised {exc.get('exception_message')} ({_fmt(kwargs)})"
    r = res.get("result") or {}
    if "unexpected_count" not in r:
        return f"{head}: observed {r.get('observed_value')!r}, expected {_fmt(kwargs)}"
    mostly = kwargs.get("mostly", 1.0)
    considered = int(r.get("element_count", 0)) - int(r.get("missing_count") or 0)
    allowed = math.floor(considered * (1 - mostly) + 1e-9)
    rule = (
        "strict mode: none allowed" if mode == "strict" else f"mostly={mostly}: at most {allowed}"
    )
    lines = [
        f"{head}: {r['unexpected_count']} of {considered} rows failed ({rule}); expected "
        + _fmt(kwargs)
    ]
    values = r.get("partial_unexpected_list") or []
    if values:
        lines.append(f"  unexpected values: {values[:EXAMPLES_IN_MESSAGE]!r}")
    for row in (r.get("partial_unexpected_index_list") or [])[:EXAMPLES_IN_MESSAGE]:
        lines.append(f"  e.g. {json.dumps(row, default=str)}")
    return "\n".join(lines)


def failure_message(
    dataset: str, failures: Sequence[Mapping[str, Any]], mode: str, results_uri: str,
    join_gaps: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The message of ValidationFailed: every failed expectation, each followed by the join
    that left its column empty where there is one (``join_gaps``: ``columns`` and ``text``),
    then where to look."""
    lines = [f"dataset {dataset!r}: {len(failures)} expectation(s) failed ({mode} mode):"]
    for failure in failures:
        lines.append(failure_line(failure, mode))
        lines += [f"  because {why}" for why in join_causes(failure, join_gaps)]
    lines.append(f"full results: {storage.join(results_uri, RESULTS_FILE)}")
    return "\n".join(lines)


def join_causes(failure: Mapping[str, Any], join_gaps: Sequence[Mapping[str, Any]]
                ) -> list[str]:
    """The joins that matched nothing in some partitions and fill a column ``failure`` checks:
    ``no weather rows joined for 2013-01-05: the joined source `weather` ends on 2013-01-04
    (it fills temp)``."""
    checked = set(columns_of(failure.get("expectation_config", {}).get("kwargs", {})))
    out = []
    for gap in join_gaps:
        hit = [c for c in gap.get("columns") or () if c in checked]
        if hit:
            out.append(f"{gap.get('text')} (it fills {', '.join(map(str, hit))})")
    return out


def columns_of(kwargs: Mapping[str, Any]) -> list[str]:
    """Columns an expectation's kwargs name (column, column_A/B, column_list)."""
    cols = [kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs]
    return cols + list(kwargs.get("column_list") or [])


def describe(cfg: Mapping[str, Any]) -> str:
    """Short human label, e.g. ``expect_column_values_to_be_between(distance)``."""
    cols = columns_of(cfg.get("kwargs", {}))
    return f"{cfg['type']}({', '.join(cols)})" if cols else cfg["type"]


def finish(
    dataset: str,
    suite_name: str,
    mode: str,
    results: list,
    levels: Sequence[str],
    counts: dict,
    results_uri: str,
    join_gaps: Sequence[Mapping[str, Any]] = (),
) -> dict:
    """Write results.json + Data Docs and build the summary the caller publishes;
    ``join_gaps`` (joins that matched nothing in some partitions) go to the results' meta."""
    from great_expectations import __version__ as gx_version
    from great_expectations.core import ExpectationSuiteValidationResult

    success = all(r.success for r in results)
    ok = sum(1 for r in results if r.success)
    suite_result = ExpectationSuiteValidationResult(
        success=success,
        results=results,
        suite_name=suite_name,
        statistics={
            "evaluated_expectations": len(results),
            "successful_expectations": ok,
            "unsuccessful_expectations": len(results) - ok,
            "success_percent": 100.0 * ok / len(results) if results else 100.0,
        },
        meta={
            "great_expectations_version": gx_version,
            "dataset": dataset,
            "mode": mode,
            **jsonable(counts),
            **({"join_gaps": jsonable(list(join_gaps))} if join_gaps else {}),
        },
    )
    paths = write_results(suite_result, results_uri)
    per = []
    for r, level in zip(results, levels):
        d = r.to_json_dict()
        res = d.get("result") or {}
        per.append(
            {
                "expectation": describe(d["expectation_config"]),
                "level": level,
                "success": bool(d["success"]),
                "element_count": res.get("element_count"),
                "unexpected_count": res.get("unexpected_count"),
                "observed_value": jsonable(res.get("observed_value")),
                "mostly": d["expectation_config"]["kwargs"].get("mostly"),
            }
        )
    return {
        "dataset": dataset,
        "mode": mode,
        "success": success,
        **jsonable(counts),
        "expectations": per,
        **paths,
    }

