"""bench.drawn: a drawn pair lands in its format with the package's headers, its result is
summarised as issue 39 asks (blessed within 5%, counted apart, the median ratio with failures
as 0, misses grouped by cause), and one pair runs end to end as a new user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench import corpus, drawn, gauntlet_report
from bench.tables import land_table


def _pair(fmt: str, table: str = "MASS/Cars93", label: str = "Type",
          task: str = "multiclass") -> corpus.Pair:
    return corpus.Pair(1, 0, table, label, task, fmt, 93, 28, 5)


def test_dataset_names_are_what_spec_init_takes() -> None:
    assert drawn.dataset_name(_pair("csv")) == "mass_cars93"
    assert drawn.dataset_name(_pair("csv", "Stat2Data/Election08")) == "stat2data_election08"
    assert drawn.dataset_name(_pair("csv", "x/2.Sub-set")) == "x_2_sub_set"
    assert drawn.dataset_name(_pair("csv", "9x/y")) == "t_9x_y"


@pytest.mark.parametrize("fmt", corpus.FORMATS)
def test_a_pair_lands_in_its_format_with_the_packages_headers(fmt: str, tmp_path: Path) -> None:
    table = drawn.table_of(_pair(fmt))
    path = land_table(table, tmp_path)
    assert path == tmp_path / "raw" / "mass_cars93" / f"Cars93.{fmt}"
    read = {"csv": pd.read_csv, "parquet": pd.read_parquet,
            "jsonl": lambda p: pd.read_json(p, lines=True)}[fmt]
    landed = read(path)
    assert list(landed.columns) == list(corpus.load("MASS/Cars93").columns)
    assert {"Min.Price", "Luggage.room", "rownames"} <= set(landed.columns)
    assert len(landed) == 93 and landed["Luggage.room"].isna().sum() == 11


def _result(index: int, status: str, task: str = "binary", met: bool | None = None,
            ratio: float | None = None, ref_beats: bool | None = True, **kw: object) -> dict:
    out = {"index": index, "table": f"P{index}/t", "package": f"P{index % 2}", "label": "y",
           "task": task, "format": "csv", "source_rows": 200,
           "verdict": {"status": status, "traceback_in": [], **kw},
           "met": met, "ratio": ratio}
    if ref_beats is not None:
        out["reference_gate"] = {"beats_baseline": ref_beats, "checks": [
            {"name": "noise", "passed": ref_beats}]}
    if status == "not blessed":
        out["gate"] = {"blessing": {"checks": [{"name": "baseline:accuracy", "passed": False},
                                               {"name": "noise", "passed": True}]}}
    return out


def test_the_summary_counts_blessed_within_five_percent_apart_and_groups_misses() -> None:
    pairs = [
        _result(0, "blessed", met=True, ratio=1.02),
        _result(1, "blessed", met=True, ratio=0.98),
        _result(2, "blessed", "regression", met=False, ratio=0.90),
        _result(3, "not blessed", met=False, ratio=0.97, ref_beats=False),  # apart
        _result(4, "not blessed", met=True, ratio=1.0),  # the reference passes: a miss
        _result(5, "refused", ref_beats=None, step="spec_init",
                message="error: --label 'churn': a binary label compares a numeric column "
                        "with a value, but 'churn' holds string; use --task multiclass"),
        _result(6, "refused", ref_beats=None, step="spec_init",
                message="error: --label 'status': a binary label compares a numeric column "
                        "with a value, but 'status' holds string; use --task multiclass"),
        _result(7, "traceback", ref_beats=None, step="training",
                message="ValueError: shapes (3,) and (4,) differ", traceback_in=["training"]),
        _result(8, "timeout", ref_beats=None, step="training",
                message="2026-11-27 11:14:08 INFO training.device: training on CPU"),
    ]
    s = drawn.summary(pairs)
    assert s["pairs"] == 9 and s["packages"] == 2
    assert s["blessed_within_5pct"] == ["#0 P0/t [y]", "#1 P1/t [y]"]
    assert s["counted_apart"] == ["#3 P3/t [y]"]
    assert s["blessed_within_5pct_share"] == 2 / 9 and s["blessed_or_apart_share"] == 3 / 9
    # ratios 1.02, 0.98, 0.90, 0.97, 1.0 and four pairs without a model (0): median 0.90
    assert s["median_ratio"] == pytest.approx(0.90)
    assert s["median_ratio_with_model"] == pytest.approx(0.98)
    assert s["tracebacks"] == ["#7 P7/t [y]"]
    misses = s["misses_by_cause"]
    refusal = ("refused at spec_init: error: --label '…': a binary label compares a numeric "
               "column with a value, but '…' holds string; use --task multiclass")
    assert misses[refusal] == ["#5 P5/t [y]", "#6 P6/t [y]"]  # one cause, two tables
    assert next(iter(misses)) == refusal  # the largest group first
    assert misses["blessed, more than 5% behind the reference (regression, None)"] == \
        ["#2 P2/t [y]"]
    assert misses["not blessed (binary): fails baseline:accuracy; the reference passes"] == \
        ["#4 P4/t [y]"]
    assert misses["traceback at training: ValueError: shapes (N,) and (N,) differ"] == \
        ["#7 P7/t [y]"]
    assert misses["timeout at training: stopped at the pair's time limit"] == ["#8 P8/t [y]"]
    assert s["apart_by_cause"] == {
        "not blessed (binary): fails baseline:accuracy; the reference fails noise":
            ["#3 P3/t [y]"]}


def test_the_report_prints_each_seeds_summary_and_checks_its_targets() -> None:
    pairs = [_result(i, "blessed", met=True, ratio=1.01) for i in range(100)]
    s = drawn.summary(pairs)
    d = {"corpus": {"tables": 2293, "packages": 77, "eligible_tables": 1028,
                    "eligible_packages": 70}, "rules": {"pair_budget_s": 300},
         "seeds": {"1": {"summary": s, "seconds": 2000, "workers": 2, "pairs": pairs}}}
    checks = {name: value for name, _, value, _, _ in gauntlet_report.drawn_checks({"drawn": d})}
    assert checks["drawn: corpus of >= 1,000 eligible tables (issue 39)"] == 1028
    assert checks["drawn seed 1: >= 100 pairs"] == 100
    assert checks["drawn seed 1: no pair ends in a traceback"] == 0
    assert checks["drawn seed 2: >= 100 pairs"] is None  # not drawn: a miss, not a pass
    assert checks["drawn: both seeds within 90 minutes"] is None
    rows = gauntlet_report.drawn_rows({"drawn": d}, pairs=True)
    assert "| 1 | 100 | 100 | 0 | 100% | 1.010 (1.010) | 0 | blessed 100 | 2000 (2) |" in rows
    assert len([r for r in rows if r.startswith("| 99 | P99/t | y | binary |")]) == 1
    assert gauntlet_report.drawn_rows({}) == []


@pytest.mark.bench
@pytest.mark.e2e
def test_one_drawn_pair_runs_as_a_new_user_runs_it(tmp_path: Path) -> None:
    pair = corpus.Pair(1, 3, "MASS/Melanoma", "sex", "binary", "csv", 205, 8, 7)
    result = drawn.run_pair(pair, tmp_path / "pair")
    detail = json.dumps(result, indent=1, default=str)[:4000]
    assert not result["verdict"]["traceback_in"] and "error" not in result, detail
    # the verdict is the run's own (its metrics.json's blessing, kept beside it)
    blessed = result["gate"]["blessing"]["blessed"]
    assert result["verdict"]["status"] == ("blessed" if blessed else "not blessed"), detail
    assert {"accuracy", "auc"} <= set(result["model"]) and "auc" in result["reference"], detail
    assert isinstance(result["reference_gate"]["beats_baseline"], bool), detail
    assert result["rows"] == 205 and result["format"] == "csv", detail
    # the training read exactly what the ETL published, split by split, and scored the whole
    # test split
    assert result["examples"] == result["splits"], detail
    assert result["model"]["examples"] == result["splits"]["test"], detail
    assert result["metric"] == "accuracy and auc" and result["ratio"] > 0, detail
    assert not (tmp_path / "pair" / "data").exists()  # the landed data and models removed
    assert (tmp_path / "pair" / "training.log").is_file()  # the logs kept


def test_a_message_is_grouped_without_its_names_numbers_and_paths() -> None:
    one = ("error: label 'label' (column 'nadults'): 1 value(s) not in the train split's "
           "classes ['1', '2'] (/tmp/w/seed1/005/specs/a/spec.yaml.label lists none)")
    other = ("error: label 'label' (column 'kids'): 3 value(s) not in the train split's "
             "classes ['0', '1'] (/tmp/w/seed1/017/specs/b/spec.yaml.label lists none)")
    assert drawn._shape(one) == drawn._shape(other) == (
        "error: label '…' (column '…'): N value(s) not in the train split's classes ['…', '…'] "
        "(PATH lists none)")
    assert drawn._shape("error: ds/21000101T000000Z_all: test holds 16 examples") == \
        "error: PATH: test holds N examples"
