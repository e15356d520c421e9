"""bench.scoring: the ceiling times every row it is given, and the part's figures (a tiny run:
two days at 1x and 2x) have their shape, with the ratios computed from the measured numbers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from bench import report, scoring


class _Model:
    def __init__(self) -> None:
        self.features = {"x": "float32"}
        self.calls: list[int] = []

    def outputs(self, features: dict[str, np.ndarray]) -> np.ndarray:
        self.calls.append(len(features["x"]))
        time.sleep(0.01)
        return np.zeros((len(features["x"]), 1))


def test_the_ceiling_counts_every_row_of_one_timed_pass() -> None:
    model = _Model()
    batches = [{"x": np.zeros(n, np.float32)} for n in (8, 8, 3)]
    top = scoring.ceiling(model, batches)
    assert model.calls == [8, 8, 3] * 2  # an untimed pass, then the timed one
    assert top["rows"] == 19 and top["batches"] == 3
    model.calls.clear()  # at most the batches that hold max_rows: the first two here
    assert scoring.ceiling(model, batches, max_rows=9)["rows"] == 16
    assert model.calls == [8, 8] * 2
    assert top["rows_per_s"] == pytest.approx(19 / top["seconds"])
    assert 19 / 0.1 < top["rows_per_s"] < 19 / 0.03


@pytest.mark.bench
@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_the_part_scores_each_scale_beside_its_ceiling(tmp_path: Path) -> None:
    days = ("2013-01-01", "2013-01-03")
    result = scoring.measure_all(tmp_path, (1, 2), days, small_days=("2013-01-01", "2013-01-02"))
    assert result["model"]["days"] == list(days) and result["model"]["family"]
    json.dumps(result)  # what bench/scoring.json holds
    one, two = result["scales"]["1x"], result["scales"]["2x"]
    assert two["version_rows"] == 2 * one["version_rows"] > 1000
    assert "small_model" not in one and result["small_model"]["days"] == ["2013-01-01",
                                                                            "2013-01-02"]
    for run, rows in ((one, one["version_rows"]), (two, two["version_rows"]),
                      (two["small_model"], two["version_rows"])):
        score, top = run["score"], run["ceiling"]
        # counted three ways apart: what score's manifest says it scored, what the ceiling read
        # from the version, what the ETL published
        assert score["scored"] == score["rows"] == top["read_rows"] == rows
        assert 0 < top["rows"] <= rows
        assert score["wall_s"] > 0 and score["cpu_s"] > 0 and score["peak_rss_mb"] > 100
        # two clocks apart: score runs the same model over every row and reads, checks and
        # writes them too, so per row it is slower than the model alone on rows in memory
        assert 0 < score["rows_per_s"] < top["rows_per_s"], (score, top)
    # the targets are the largest scale's and the smallest's, and make bench's report shows them
    targets = result["targets"]
    assert (targets["score_over_ceiling"]["at"], targets["peak_rss_growth"]["of"]) == \
        ("2x", "2x / 1x")
    assert targets["score_over_ceiling"]["value"] == two["ratio"] != one["ratio"]
    shown = {c["figure"]: c for c in report.check_targets({"scoring": result})}
    for key in ("score_over_ceiling", "peak_rss_growth"):
        check = shown[f"scoring.targets.{key}"]
        assert check["value"] == targets[key]["value"] and check["value"] > 0, check
    assert not any(p.name.startswith("scoring-") for p in tmp_path.iterdir())  # cleaned up
