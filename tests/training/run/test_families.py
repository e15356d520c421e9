"""``training.run.families``: decisions made on the data before the model family is chosen; a
skewed, non-negative regression target is fitted raw and through log1p, and the lower eval RMSE
in the target's units keeps its target, recorded in metrics.json and the card."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from etl import pipeline
from etl.__main__ import main as etl_main
from training.config import InputConfig, ModelConfig, TrainConfig
from training.run.families import SKEWED, skewness
from training.run.train import train

TREES = TrainConfig(input=InputConfig(seed=1), model=ModelConfig(family="trees"))


def _table(path: Path, n: int, seed: int, skewed: bool) -> None:
    """``n`` rows of two numeric features and a target: log-normal (``skewed``) or normal."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    signal = 0.9 * x1 - 0.5 * x2 + rng.normal(0, 0.6, n)
    y = np.exp(2.0 + signal) if skewed else 50 + 10 * signal
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x1,x2,price\n" + "".join(
        f"{a:.4f},{b:.4f},{t:.4f}\n" for a, b, t in zip(x1, x2, y, strict=True)))


def _trained(tmp_path: Path, monkeypatch, skewed: bool) -> dict:
    data = tmp_path / "data"
    _table(data / "raw" / "prices" / "prices.csv", 1500, 3, skewed)
    out = tmp_path / "specs" / "prices"
    assert etl_main(["spec", "init", "--name", "prices", "--source", "raw/prices/prices.csv",
                     "--root", data.as_uri(), "--label", "price", "--task", "regression",
                     "--out", str(out)]) == 0
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(out.parent))
    res = pipeline.run("prices", data.as_uri(), "2100-01-01", run_id="r")
    return train(res["version_uri"], f"{data.as_uri()}/models", "r", TREES)


def test_skewness_of_a_symmetric_and_a_log_normal_sample() -> None:
    rng = np.random.default_rng(0)
    assert abs(skewness(rng.normal(size=5000))) < 0.2
    assert skewness(np.exp(rng.normal(size=5000))) > 3 * SKEWED
    assert skewness(np.ones(10)) == 0.0


@pytest.mark.timeout(600)
def test_a_skewed_target_is_decided_on_the_eval_split(tmp_path: Path, monkeypatch) -> None:
    result = _trained(tmp_path, monkeypatch, skewed=True)
    m = result["metrics"]
    choice = m["target_choice"]
    assert choice["skewness"] > SKEWED and choice["min"] >= 0
    rmse = choice["eval_rmse"]
    assert set(rmse) == {"raw", "log1p"} and all(np.isfinite(v) for v in rmse.values())
    assert choice["chosen"] == min(rmse, key=rmse.get)  # the lower eval RMSE keeps its target
    assert m["transform"] == (None if choice["chosen"] == "raw" else "log1p")
    assert m["test"]["rmse"] < m["baseline"]["rmse"] and result["blessing"].blessed
    run = Path(result["model_uri"].removeprefix("file://"))
    card = (run / "model_card.md").read_text()
    assert "Target decided on the data: " + choice["chosen"] in card
    # the served model answers in the target's units whichever target it learned
    served = tf.saved_model.load(str(run / "saved_model"))
    answer = served.serve({"x1": tf.constant([1.0]), "x2": tf.constant([0.0])})
    value = float(np.asarray(next(iter(answer.values())) if isinstance(answer, dict)
                             else answer).reshape(-1)[0])
    assert 5 < value < 60  # exp(2 + 0.9) ~ 18 in the target's units, not its log


@pytest.mark.timeout(600)
def test_a_symmetric_target_stays_raw_and_says_why(tmp_path: Path, monkeypatch) -> None:
    m = _trained(tmp_path, monkeypatch, skewed=False)["metrics"]
    choice = m["target_choice"]
    assert choice["chosen"] == "raw" and "eval_rmse" not in choice
    assert f"is at most {SKEWED}" in choice["why"] and m["transform"] is None
