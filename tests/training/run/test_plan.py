"""``training.run.plan``: settings chosen from the train size, never over what a caller set."""

from __future__ import annotations

from etl.versions import Manifest
from training.config import InputConfig, TrainConfig
from training.run.plan import class_weight, plan, spec_overrides, tuned_overrides


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
