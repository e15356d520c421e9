"""bench.scoring: the ceiling times every row it is given, and the part's figures (a tiny run:
two days at 1x and 2x) have their shape, with the ratios computed from the measured numbers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from bench import scoring


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
        assert score["scored"] == score["rows"] == top["read_rows"] == rows
        assert 0 < top["rows"] <= rows
        assert score["rows_per_s"] == pytest.approx(score["scored"] / score["wall_s"])
        assert score["wall_s"] > 0 and score["cpu_s"] > 0 and score["peak_rss_mb"] > 100
        assert run["ratio"] == pytest.approx(score["rows_per_s"] / top["rows_per_s"])
    marginal = result["score_marginal"]
    if marginal["rows_per_s"] is not None:  # the 2x run's wall above the 1x run's
        wall = two["score"]["wall_s"] - one["score"]["wall_s"]
        assert marginal["rows_per_s"] == pytest.approx(one["version_rows"] / wall)
    targets = result["targets"]
    assert targets["score_over_ceiling"]["value"] == two["ratio"]
    assert targets["score_over_ceiling"]["met"] == (two["ratio"] >= scoring.RATE_TARGET)
    growth = two["score"]["peak_rss_mb"] / one["score"]["peak_rss_mb"]
    assert targets["peak_rss_growth"]["value"] == pytest.approx(growth)
    assert targets["peak_rss_growth"]["met"] == (growth <= scoring.RSS_TARGET)
    assert not any(p.name.startswith("scoring-") for p in tmp_path.iterdir())  # cleaned up
