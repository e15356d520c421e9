"""``training.run.choice``: decisions made on the data: the settings chosen from the train size,
never over what a caller set; before the model family is chosen (a
skewed, non-negative regression target is fitted raw and through log1p, and the lower eval RMSE
in the target's units keeps its target, recorded in metrics.json and the card), and the choice
(the first family, trees, is kept unless a later one is better beyond noise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from etl import pipeline
from etl.__main__ import main as etl_main
from etl.versions import Manifest
from training.config import InputConfig, ModelConfig, TrainConfig
from training.run.choice import (
    SKEWED,
    class_weight,
    keep,
    lead,
    plan,
    skewness,
    spec_overrides,
    tuned_overrides,
)
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
    return train(res.version_uri, f"{data.as_uri()}/models", "r", TREES)


def test_skewness_of_a_symmetric_and_a_log_normal_sample() -> None:
    rng = np.random.default_rng(0)
    assert abs(skewness(rng.normal(size=5000))) < 0.2
    assert skewness(np.exp(rng.normal(size=5000))) > 3 * SKEWED
    assert skewness(np.ones(10)) == 0.0


@pytest.mark.timeout(600)
def test_a_skewed_target_is_decided_on_the_eval_split(tmp_path: Path, monkeypatch) -> None:
    result = _trained(tmp_path, monkeypatch, skewed=True)
    m = result.metrics.to_json()
    choice = m["target_choice"]
    assert choice["skewness"] > SKEWED and choice["min"] >= 0
    rmse = choice["eval_rmse"]
    assert set(rmse) == {"raw", "log1p"} and all(np.isfinite(v) for v in rmse.values())
    assert choice["chosen"] == min(rmse, key=rmse.get)  # the lower eval RMSE keeps its target
    assert m["transform"] == (None if choice["chosen"] == "raw" else "log1p")
    assert m["test"]["rmse"] < m["baseline"]["rmse"] and result.blessing.blessed
    # the set family's eval figure is the one ``auto`` compares: squared error in the units
    assert m["family_choice"]["eval"]["trees"] == pytest.approx(rmse[choice["chosen"]] ** 2,
                                                                rel=1e-4)
    run = Path(result.model_uri.removeprefix("file://"))
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
    m = _trained(tmp_path, monkeypatch, skewed=False).metrics.to_json()
    choice = m["target_choice"]
    assert choice["chosen"] == "raw" and "eval_rmse" not in choice
    assert f"is at most {SKEWED}" in choice["why"] and m["transform"] is None


# --- the family kept: trees unless beaten beyond noise ---------------------------------------

def _choice_manifest(task: str, classes: int = 2, transform: str | None = None) -> Manifest:
    label = {"name": "y", "task": task, **({"transform": transform} if transform else {})}
    if task != "regression":
        label.update(names=[f"c{i}" for i in range(classes)], classes=classes)
    return Manifest.from_json({
        "dataset": "d", "version": "v", "splits": {"train": {"num_examples": 400}},
        "schema": {"label": label},
        "statistics": {"label_counts": {str(i): 100 for i in range(classes)},
                       "label": {"mean": 0.0}}}, "test")


def _binary(n: int, signal: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    score = signal * (y - 0.5) + rng.normal(0, 1, n)
    return y, (1 / (1 + np.exp(-score)))[:, None]


def test_a_binary_challenger_replaces_the_trees_only_beyond_noise() -> None:
    m = _choice_manifest("binary")
    y, weak = _binary(300, 0.5, 1)
    _, strong = _binary(300, 3.0, 1)  # same labels (same seed), far better ranking
    kept, how = keep("binary", m, y, {"trees": weak, "mlp": strong})
    assert kept == "mlp" and how.startswith("mlp replaces trees: lead +")
    # a challenger a hair better: the same answers, one positive row ranked a little higher
    nudged = weak.copy()
    nudged[np.flatnonzero(y == 1)[0], 0] += 0.05
    gained, bound = lead("binary", m, y, weak, nudged)
    assert gained >= 0 and bound <= 0
    kept, how = keep("binary", m, y, {"trees": weak, "mlp": nudged})
    assert kept == "trees" and how.startswith("mlp does not replace trees: lead +")
    assert how.endswith("(95% one-sided) needs > 0")


def test_losses_decide_a_regression_and_a_multiclass_label() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(0, 1, 200)
    close, far = (y + rng.normal(0, 0.1, 200))[:, None], (y + rng.normal(0, 1, 200))[:, None]
    reg = _choice_manifest("regression")
    assert keep("regression", reg, y, {"trees": far, "mlp": close})[0] == "mlp"
    assert keep("regression", reg, y, {"trees": close, "mlp": far})[0] == "trees"
    # the same answers but one row: no lead beyond noise, the first family stays
    one = close.copy()
    one[0, 0] = y[0]
    assert keep("regression", reg, y, {"trees": close, "mlp": one})[0] == "trees"
    labels = rng.integers(0, 3, 200)
    sure = np.full((200, 3), 0.05)
    sure[np.arange(200), labels] = 0.9
    flat = np.full((200, 3), 1 / 3)
    multi = _choice_manifest("multiclass", 3)
    assert keep("multiclass", multi, labels, {"trees": flat, "mlp": sure})[0] == "mlp"
    kept, how = keep("multiclass", multi, labels, {"trees": sure, "mlp": flat})
    assert kept == "trees" and how.startswith("mlp does not replace trees: lead -")


def test_a_log1p_target_is_compared_in_its_units() -> None:
    """Answers in the learned (log) space are judged by their squared error in the target's
    units, as the gate and the reference judge them: the family close on the small values
    (lower log-space loss) loses to the one close on the large values (lower RMSE)."""
    rng = np.random.default_rng(4)
    units = np.exp(rng.uniform(0, 10, 400))  # 1 to 22,000: a skewed, non-negative target
    y, big = np.log1p(units), units > np.median(units)
    small_right = np.where(big, np.log1p(units * 1.5), y)[:, None]  # 50% off the large ones
    large_right = np.where(big, np.log1p(units * 1.02), y + 0.5)[:, None]
    assert np.mean((small_right[:, 0] - y) ** 2) < np.mean((large_right[:, 0] - y) ** 2)
    reg = _choice_manifest("regression", transform="log1p")
    kept, how = keep("regression", reg, y, {"trees": small_right, "mlp": large_right})
    assert kept == "mlp" and how.startswith("mlp replaces trees: lead +"), how
    assert keep("regression", reg, y, {"trees": large_right, "mlp": small_right})[0] == "trees"


def test_a_challenger_without_a_figure_never_replaces() -> None:
    y, p = _binary(100, 2.0, 3)
    answers = {"trees": p, "mlp": np.full_like(p, np.nan)}
    assert keep("binary", _choice_manifest("binary"), y, answers)[0] == "trees"


def _manifest(train: int, counts: dict[str, int] | None = None, training: dict | None = None,
              task: str = "binary") -> Manifest:
    schema = {"label": {"name": "y", "task": task}, **({"training": training} if training else {})}
    return Manifest.from_json({"splits": {"train": {"num_examples": train}}, "schema": schema,
                               "statistics": {"label_counts": counts or {}}}, "test")


def test_flights_keeps_its_settings_and_a_small_table_gets_steps() -> None:
    big, lines = plan(TrainConfig(), _manifest(262_000))
    assert (big.input.batch_size, big.steps_per_epoch) == (1024, 256)  # flights' batches
    assert (big.step_budget, big.epochs, big.patience) == (4000, 16, 3)  # 15.6 passes at most
    assert big.model.decay_steps == 4000 and any("cosine" in line for line in lines)
    small, _ = plan(TrainConfig(), _manifest(274))
    assert small.input.batch_size == 16 and small.step_budget == 900  # 50 passes of 18
    assert small.epochs == 50 and small.steps_per_epoch == 18 and small.patience == 10
    numbers, _ = plan(TrainConfig(), _manifest(274, task="regression"))
    assert numbers.step_budget == 1800 and numbers.steps_per_epoch == 36  # 100 passes of 18
    assert small.model.learning_rate == 1e-3 * (16 / 1024) ** 0.5  # flights keeps 1e-3
    assert big.model.learning_rate == 1e-3


def test_what_a_caller_set_is_kept() -> None:
    config = TrainConfig(input=InputConfig(batch_size=64), epochs=3, patience=5)
    got, _ = plan(config, _manifest(274))
    assert got.input.batch_size == 64 and got.patience == 5
    assert got.step_budget == 3 * 5  # three passes of five steps: the epochs asked for


def test_the_specs_training_section_applies_under_the_callers_flags() -> None:
    m = _manifest(274, training={"batch_size": 32, "step_budget": 500, "patience": 3})
    got = spec_overrides(TrainConfig(patience=7), m)
    assert got.input.batch_size == 32 and got.step_budget == 500
    assert got.patience == 7  # the flag wins over the spec


def test_class_weights_only_when_asked_or_imbalanced() -> None:
    counts = {"0": 700, "1": 20, "2": 300}
    m = _manifest(1020, counts, task="multiclass")
    weights, why = class_weight(TrainConfig(), m)  # off by default, and the log says the option
    assert weights is None and "35.0; class_weights: balanced lifts" in why
    weights, why = class_weight(TrainConfig(class_weights="auto"), m)
    assert weights is not None and weights[1] > weights[2] > weights[0] and "35.0" in why
    even = _manifest(1000, {"0": 500, "1": 500}, task="multiclass")
    assert class_weight(TrainConfig(class_weights="auto"), even)[0] is None
    assert class_weight(TrainConfig(), even)[1] == "class weights: none"


def test_explicit_epochs_on_a_tiny_table_keep_its_step_budget_as_a_floor() -> None:
    """Two passes over 116 rows at the chosen batch are 16 steps: too few to beat the baseline.
    The table's own budget stays, spread over the two evaluations asked for; a big table (or a
    batch the caller chose) gets exactly its passes."""
    default, _ = plan(TrainConfig(), _manifest(116))
    tiny, lines = plan(TrainConfig(epochs=2), _manifest(116))
    assert tiny.epochs == 2 and tiny.step_budget == default.step_budget
    assert tiny.steps_per_epoch * 2 >= tiny.step_budget > 2 * 8  # 8 steps a pass at batch 16
    assert sum("kept as a floor" in line for line in lines) == 1
    big, lines = plan(TrainConfig(epochs=2), _manifest(262_000))
    assert (big.epochs, big.steps_per_epoch, big.step_budget) == (2, 256, 512)
    assert not any("floor" in line for line in lines)
    mine, _ = plan(TrainConfig(epochs=2, input=InputConfig(batch_size=16)), _manifest(116))
    assert (mine.epochs, mine.step_budget) == (2, 16)


def test_tuned_settings_apply_where_the_defaults_still_stand() -> None:
    config, kept = tuned_overrides(TrainConfig(patience=7), {"patience": 4, "dropout": 0.3},
                                   "trees")
    assert (config.patience, config.model.dropout, config.model.family) == (7, 0.3, "trees")
    assert kept == ["patience"]  # set by the caller: kept, and named
