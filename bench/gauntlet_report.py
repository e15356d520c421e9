"""The gauntlet's targets (issue 33's "done means") and its per-table rows in the bench table."""

from __future__ import annotations

from typing import Any

MIN_TABLES, MIN_PACKAGES, MIN_SHARE = 20, 4, 0.90


def checks(r: dict[str, Any]) -> list[tuple[str, str, float | None, float, str]]:
    """(name, figure, value, target, op) of each gauntlet target; no gauntlet: all None."""
    s = (r.get("gauntlet") or {}).get("summary") or {}
    tables = s.get("tables")
    flights = s.get("flights_auc") or {}
    auc = (flights["model"] / flights["reference"]
           if flights.get("model") is not None and flights.get("reference") else None)
    return [
        (f"gauntlet: >= {MIN_TABLES} public tables (issue 33)", "gauntlet.summary.tables",
         tables, MIN_TABLES, ">="),
        (f"gauntlet: tables from >= {MIN_PACKAGES} packages", "gauntlet.summary.packages",
         len(s["packages"]) if s.get("packages") else None, MIN_PACKAGES, ">="),
        (f"gauntlet: >= {MIN_SHARE:.0%} blessed within 5% of the HistGradientBoosting reference",
         "gauntlet.summary.blessed_within_5pct_share", s.get("blessed_within_5pct_share"),
         MIN_SHARE, ">="),
        ("gauntlet: no table ends in a traceback", "len(gauntlet.summary.tracebacks)",
         len(s["tracebacks"]) if tables else None, 0, "<="),
        ("gauntlet: flights' test AUC >= the reference's on the same split",
         "gauntlet flights model / reference AUC", auc, 1.0, ">="),
    ]


def _f(value: Any, fmt: str = ".3f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _secs(step: Any) -> str:
    return _f(step.get("seconds"), ".1f") if isinstance(step, dict) else "n/a"


def _metric(t: dict[str, Any]) -> tuple[str, str, str, str]:
    """(metric, model, reference, ratio) -- the table's deciding metric."""
    if t["task"] == "regression":
        names = ["rmse"]
    else:
        names = [m for m in ("auc", "accuracy") if m in (t.get("reference") or {})]
    name = names[0] if names else ("rmse" if t["task"] == "regression" else "accuracy")
    model, ref = (t.get("model") or {}).get(name), (t.get("reference") or {}).get(name)
    ratio = (t.get("ratios") or {}).get(name)
    return name, _f(model), _f(ref), _f(ratio, ".2f")


def _verdict(t: dict[str, Any]) -> str:
    v = t["verdict"]
    text = v["status"] + (f" at {v['step']}" if v.get("step") else "")
    why = v.get("message") or v.get("reason")
    if why:
        text += ": " + why.replace("|", "/")[:160]
    return text


def rows(r: dict[str, Any]) -> list[str]:
    """A markdown table, one row per gauntlet table, after a blank line; none without one."""
    tables = ((r.get("gauntlet") or {}).get("tables")) or {}
    if not tables:
        return []
    lines = ["", ("| gauntlet table | package | rows | task | metric | model | reference | "
             "ratio | verdict | spec init s | ETL read s | etl run s | training s |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, t in tables.items():
        metric, model, ref, ratio = _metric(t)
        read = t.get("etl_read") or {}
        lines.append(
            f"| {name} | {t['package']} | {_f(t.get('rows'), ',')} | {t['task']} | {metric} | "
            f"{model} | {ref} | {ratio} | {_verdict(t)} | {_secs(t.get('spec_init'))} | "
            f"{_f(read.get('seconds'), '.2f')} | {_secs(t.get('etl_run'))} | "
            f"{_secs(t.get('training'))} |")
    return lines
