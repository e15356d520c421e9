"""bench.gauntlet_report: the gauntlet's table in make bench's report, one row per public table."""

from __future__ import annotations

from bench import gauntlet_report


def test_the_bench_table_shows_each_tables_verdict_and_seconds() -> None:
    table = {"package": "plotnine", "rows": 234, "task": "regression", "model": {"rmse": 1.1},
             "reference": {"rmse": 1.0}, "ratios": {"rmse": 1.1},
             "spec_init": {"seconds": 1.5}, "etl_read": {"seconds": 0.01},
             "etl_run": {"seconds": 6.0}, "training": {"seconds": 30.0},
             "verdict": {"status": "not blessed", "reason": "RMSE interval | reaches 0"}}
    rows = gauntlet_report.rows({"gauntlet": {"tables": {"mpg": table}}})
    assert rows[-1] == ("| mpg | plotnine | 234 | regression | rmse | 1.100 | 1.000 | 1.10 | "
                        "not blessed: RMSE interval / reaches 0 | 1.5 | 0.01 | 6.0 | 30.0 |")
