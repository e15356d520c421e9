"""`make bench`'s report: targets judged from the run's own figures, misses shown, docs kept."""

from __future__ import annotations

from pathlib import Path

from bench import report

RESULTS = {
    "machine": {"cores": 2, "memory_gb": 23.5, "gpu": None},
    "etl_rows_per_s": 30_000.0, "etl_python_baseline_rows_per_s": 10_000.0,
    "serialize_vectorized_rows_per_s": 180_000.0, "serialize_python_rows_per_s": 30_000.0,
    "input_examples_per_s": 95.0, "input_ceiling_examples_per_s": 100.0,
    "input_naive_examples_per_s": 5.0, "stall_ratio": 1.2,
    "etl_peak_rss_mb": {"1x": 1000.0, "4x": 1100.0, "16x": 1600.0},
    "etl_scaling": {"1x": {"rows": 10, "rows_per_s": 5.0}},
    "etl_run": {"cpu_s": 12.5}, "etl_python_run": {"cpu_s": 30.0},
    "dag_parse_s": {"a.py": 0.2, "b.py": 0.7},
}


def test_targets_are_ratios_of_this_run_and_misses_are_reported() -> None:
    met = {t["name"]: (round(t["value"], 3), t["met"]) for t in report.check_targets(RESULTS)}
    assert met == {
        "ETL >= 10x pure-Python baseline": (3.0, False),
        "input >= 0.9x raw-read ceiling": (0.95, True),
        "input >= 10x naive pipeline": (19.0, True),
        "stall ratio <= 1.10": (1.2, False),
        "peak RSS 16x <= 1.5x of 1x": (1.6, False),
        "every DAG file parses < 0.5 s": (0.7, False),
    }


def test_a_missing_figure_is_a_miss_not_a_pass() -> None:
    partial = {k: v for k, v in RESULTS.items() if k != "stall_ratio"}
    stall = next(t for t in report.check_targets(partial) if t["name"].startswith("stall"))
    assert stall["value"] is None and stall["met"] is False


def test_table_shows_misses_bound_and_cpu() -> None:
    table = report.table({**RESULTS, "targets": report.check_targets(RESULTS)})
    assert "| ETL >= 10x pure-Python baseline | 3.00 | **MISSED** |" in table
    assert "| ETL ratio bound (vectorized / Python serialization alone) | 6.00x |" in table
    assert "| ETL CPU seconds, baseline encoder, 1x | 30.0 s |" in table
    assert "1,600 MiB" in table


def test_performance_md_block_is_replaced_and_prose_kept(tmp_path: Path) -> None:
    doc = tmp_path / "PERFORMANCE.md"
    doc.write_text(f"# Perf\n\nintro\n{report.BEGIN}\nold table\n{report.END}\n\nhow it works\n")
    report.update_performance_md(doc, "new table")
    text = doc.read_text()
    assert "old table" not in text and "new table" in text
    assert text.startswith("# Perf\n\nintro\n") and text.endswith("how it works\n")
