"""Targets, the printed table, and the table block in PERFORMANCE.md."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
DAG_PARSE_LIMIT_S = 0.5


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def check_targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 7's targets, each as a ratio from this run, with met/missed."""
    rss = r.get("etl_peak_rss_mb", {})
    checks = [
        ("ETL >= 10x pure-Python baseline",
         _ratio(r.get("etl_rows_per_s"), r.get("etl_python_baseline_rows_per_s")), 10.0, ">="),
        ("input >= 0.9x raw-read ceiling",
         _ratio(r.get("input_examples_per_s"), r.get("input_ceiling_examples_per_s")), 0.9, ">="),
        ("input >= 10x naive pipeline",
         _ratio(r.get("input_examples_per_s"), r.get("input_naive_examples_per_s")), 10.0, ">="),
        ("stall ratio <= 1.10", r.get("stall_ratio"), 1.10, "<="),
        ("peak RSS 16x <= 1.5x of 1x", _ratio(rss.get("16x"), rss.get("1x")), 1.5, "<="),
        ("every DAG file parses < 0.5 s",
         max(r.get("dag_parse_s", {}).values(), default=None), DAG_PARSE_LIMIT_S, "<"),
    ]
    out = []
    for name, value, target, op in checks:
        if value is None:
            met = False
        elif op == ">=":
            met = value >= target
        elif op == "<=":
            met = value <= target
        else:
            met = value < target
        out.append({"name": name, "value": value, "target": target, "op": op, "met": met})
    return out


def _num(value: Any, fmt: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, fmt)


def table(r: dict[str, Any]) -> str:
    m = r["machine"]
    gpu = ", ".join(m["gpu"]) if m.get("gpu") else "none"
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    rows = [
        ("ETL end to end (default vectorized encoder)", r.get("etl_rows_per_s"), "rows/s"),
        ("ETL with pure-Python serialization (baseline)",
         r.get("etl_python_baseline_rows_per_s"), "rows/s"),
        ("CSV read ceiling (pyarrow)", r.get("csv_read_rows_per_s"), "rows/s"),
        ("serialization: tfx-bsl C++ encoder alone", r.get("serialize_ceiling_rows_per_s"),
         "rows/s"),
        ("serialization: vectorized encoder alone", r.get("serialize_vectorized_rows_per_s"),
         "rows/s"),
        ("serialization: Python loop alone", r.get("serialize_python_rows_per_s"), "rows/s"),
        ("input: raw TFRecord read (ceiling)", r.get("input_ceiling_examples_per_s"),
         "examples/s"),
        ("input: our pipeline", r.get("input_examples_per_s"), "examples/s"),
        ("input: naive pipeline", r.get("input_naive_examples_per_s"), "examples/s"),
    ]
    lines = [f"Machine: {m['cores']} cores, {m['memory_gb']} GiB, GPU: {gpu}, measured {when}",
             "", "| figure | value |", "| --- | --- |"]
    lines += [f"| {label} | {_num(value)} {unit} |" for label, value, unit in rows]
    lines.append(f"| stall ratio (demo model) | {_num(r.get('stall_ratio'), '.3f')} |")
    bound = _ratio(r.get("serialize_vectorized_rows_per_s"), r.get("serialize_python_rows_per_s"))
    lines.append(f"| ETL ratio bound (vectorized / Python serialization alone) | "
                 f"{_num(bound, '.2f')}x |")
    for name, run in (("default", r.get("etl_run")), ("baseline", r.get("etl_python_run"))):
        if run and run.get("cpu_s"):
            lines.append(f"| ETL CPU seconds, {name} encoder, 1x | {_num(run['cpu_s'], '.1f')} s |")
    for scale, mb in r.get("etl_peak_rss_mb", {}).items():
        run = r.get("etl_scaling", {}).get(scale, {})
        lines.append(f"| ETL at {scale} ({_num(run.get('rows'))} rows): peak RSS, rows/s | "
                     f"{_num(mb)} MiB, {_num(run.get('rows_per_s'))} rows/s |")
    for name, secs in r.get("dag_parse_s", {}).items():
        lines.append(f"| DAG parse time {name} | {_num(secs, '.3f')} s |")
    lines += ["", "| target | measured | met |", "| --- | --- | --- |"]
    for t in r.get("targets", []):
        met = "yes" if t["met"] else "**MISSED**"
        lines.append(f"| {t['name']} | {_num(t['value'], '.2f')} | {met} |")
    return "\n".join(lines)


def update_performance_md(path: Path, table_md: str) -> None:
    """Replace the generated block in PERFORMANCE.md, leaving the explanations alone."""
    text = path.read_text() if path.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{table_md}\n{END}{tail}")
