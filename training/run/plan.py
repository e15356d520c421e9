"""A run's settings chosen from its version: a step budget, batch size, eval period, patience,
learning rate (square-root scaled with the batch) and its decay, and class weights; and the
spec's ``training:`` section and a dataset's tuned settings applied where the run's settings
still hold the defaults (``training.config`` holds the settings and their defaults).

Fixed defaults fit flights (262 k rows) and starve a 250-row table (one step per epoch). A
setting left at its default is chosen here from the train size; one the caller (CLI flag, spec
``training:`` section, DAG Param) changed is kept. Each choice is logged once, with why.

A tiny table gets at most 100 passes for a regression label, 50 for a class label. On classes
a model already gets right, cross-entropy keeps falling as the network sharpens its logits, so
the eval loss gives early stopping nothing to stop on: at 100 passes wine (116 train rows) had
its 25 eval rows all right from the third evaluation while their loss fell a little at each
(0.056 to 0.044 over the last 20 of 50), and test accuracy lost a row (0.946 against 0.973
before adaptive training; a logistic regression on that split scores 0.973 strongly
regularized, C 0.01-0.1, and 0.946 at C 1). A regression loss bottoms out at the noise: cars
still improved from 50 to 100 passes (test RMSE 2.87 to 2.71), and diabetes stops early.
Import-light: no TensorFlow here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from training.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_EPOCHS,
    DEFAULT_LEARNING_RATE,
    DEFAULT_PATIENCE,
    TrainConfig,
)

if TYPE_CHECKING:
    from etl.versions import Manifest

MIN_BATCH, STEPS_PER_PASS = 16, 16  # a pass over the train split: at least this many steps
# Flights' 4,000 steps (16 passes, fit twice the old 10 epochs) are not cut by patience: its eval
# loss improves at every evaluation. 2,560 steps (10 passes) scored test AUC 0.759 against 0.768.
MIN_STEP_BUDGET = 4000  # steps a table gets even when 10 passes are fewer ...
MAX_PASSES, MAX_CLASS_PASSES = 100, 50  # ... unless that is more passes over it than this
# (a regression label; a class label: see the module doc)
MAX_EVALUATIONS = 50  # eval passes per run (each costs a pass over eval and a backup)
IMBALANCE = 5.0  # largest / smallest train class at which auto class weights turn on
# Class weights stay off unless asked: on Seattle weather (5 classes, 571 to 18 train rows)
# balanced weights raised test macro-F1 from 0.47 to 0.53 but cut accuracy from 0.77 to 0.66
# (means of 3 seeds), below 0.95x of the HistGradientBoosting reference on both.


def _pow2_floor(x: float) -> int:
    return 2 ** math.floor(math.log2(max(x, 1.0)))


def spec_overrides(config: TrainConfig, manifest: Manifest) -> TrainConfig:
    """The spec's ``training:`` settings (carried in ``schema.training``) where ``config``
    still holds the defaults; a CLI flag or DAG Param that changed a value wins."""
    wanted = (manifest.schema.training if manifest.schema else None) or {}
    base, current = TrainConfig(), {}
    for key, value in wanted.items():
        mine, default = _lookup(config, key), _lookup(base, key)
        if mine == default:
            current[key] = tuple(value) if isinstance(value, list) else value
    return config.with_overrides(**current) if current else config


def _lookup(config: TrainConfig, key: str) -> Any:
    for part in (config, config.input, config.model):
        if hasattr(part, key) and key not in ("input", "model"):
            return getattr(part, key)
    return None


def tuned_overrides(config: TrainConfig, settings: dict[str, Any],
                    family: str) -> tuple[TrainConfig, list[str]]:
    """``config`` with the tuned ``settings`` and ``family`` where it still holds the defaults
    (a spec ``training:`` key, CLI flag or DAG Param that changed one wins); the names kept."""
    base, kept, chosen = TrainConfig(), [], {}
    for key, value in {**settings, "family": family}.items():
        if _lookup(config, key) == _lookup(base, key):
            chosen[key] = tuple(value) if isinstance(value, list) else value
        else:
            kept.append(key)
    return (config.with_overrides(**chosen) if chosen else config), kept


def plan(config: TrainConfig, manifest: Manifest) -> tuple[TrainConfig, list[str]]:
    """``config`` with the data-dependent settings filled in, and one line per choice."""
    n = int(manifest.splits["train"].num_examples)
    lines, batch = [], config.input.batch_size
    chosen = batch == DEFAULT_BATCH_SIZE  # the batch (and so the rate) is ours to choose
    if chosen:
        batch = max(MIN_BATCH, min(DEFAULT_BATCH_SIZE, _pow2_floor(n / STEPS_PER_PASS)))
        lines.append(f"batch_size {batch}: {n:,} train examples, >= {STEPS_PER_PASS} steps a pass")
    per_pass = max(1, math.ceil(n / batch))
    regression = manifest.schema.label.task == "regression"
    passes = MAX_PASSES if regression else MAX_CLASS_PASSES
    budget, why = _budget(config, per_pass, passes, chosen and batch < DEFAULT_BATCH_SIZE)
    lines.append(f"step_budget {budget:,}: {why}")
    period, epochs = _evaluations(config, budget, per_pass)
    lines.append(f"eval every {period:,} steps ({period / per_pass:.1f} passes), "
                 f"{epochs} evaluations at most")
    patience = config.patience
    if patience == DEFAULT_PATIENCE:
        patience = max(DEFAULT_PATIENCE, epochs // 5)
        lines.append(f"patience {patience}: a fifth of the evaluations, at least {DEFAULT_PATIENCE}")
    lr = config.model.learning_rate
    if chosen and lr == DEFAULT_LEARNING_RATE and batch < DEFAULT_BATCH_SIZE:  # sqrt rule
        lr = DEFAULT_LEARNING_RATE * math.sqrt(batch / DEFAULT_BATCH_SIZE)
    model = replace(config.model, decay_steps=budget, learning_rate=lr)
    lines.append(f"learning rate {lr:.3g}"
                 + (f" (sqrt(batch / {DEFAULT_BATCH_SIZE}) x {DEFAULT_LEARNING_RATE:g})"
                    if lr != config.model.learning_rate else "") + f", {config.model.lr_schedule}"
                 + (f" decay to a tenth over {budget:,} steps"
                    if config.model.lr_schedule == "cosine" else ""))
    planned = replace(config, input=replace(config.input, batch_size=batch), model=model,
                      steps_per_epoch=period, epochs=epochs, patience=patience,
                      step_budget=budget)
    return planned, lines + ["(override any of these in the spec's training: section)"]


def _budget(config: TrainConfig, per_pass: int, passes: int,
            small: bool) -> tuple[int, str]:
    """Steps of the run, and why. Explicit epochs on a table whose batch was chosen ``small``
    keep the table's own budget as a floor: at the small batch and its lower rate, two passes
    over 116 rows are 16 steps, which leave the model below the majority baseline."""
    if config.step_budget:
        return config.step_budget, "set"
    auto = max(DEFAULT_EPOCHS * per_pass, min(MIN_STEP_BUDGET, passes * per_pass))
    if config.epochs != DEFAULT_EPOCHS:
        asked = config.epochs * (config.steps_per_epoch or per_pass)
        if small and not config.steps_per_epoch and asked < auto:
            return auto, (f"{config.epochs} epochs set ({asked:,} steps) on a table this small: "
                          f"its {auto:,}-step budget is kept as a floor, over {config.epochs} "
                          f"evaluations (set step_budget to train less)")
        return asked, f"{config.epochs} epochs set"
    return auto, (f"{auto / per_pass:.0f} passes of {per_pass:,} steps: at least "
                  f"{DEFAULT_EPOCHS} passes, else {MIN_STEP_BUDGET:,} steps up to "
                  f"{passes} passes")


def _evaluations(config: TrainConfig, budget: int, per_pass: int) -> tuple[int, int]:
    """(steps between evaluations, evaluations): explicit epochs are the evaluations."""
    if config.steps_per_epoch:
        return config.steps_per_epoch, max(1, math.ceil(budget / config.steps_per_epoch))
    if config.epochs != DEFAULT_EPOCHS:
        return math.ceil(budget / config.epochs), config.epochs
    period = max(per_pass, math.ceil(budget / MAX_EVALUATIONS))
    return period, max(1, math.ceil(budget / period))


def class_weight(config: TrainConfig, manifest: Manifest) -> tuple[dict[int, float] | None, str]:
    """Keras ``class_weight`` (inverse train frequency, mean 1) or None, and why."""
    label = manifest.schema.label
    counts = {int(k): int(v) for k, v in
              manifest.statistics.label_counts.items() if int(v) > 0}
    if label.task_name == "regression" or len(counts) < 2:
        return None, "class weights: none"
    ratio = max(counts.values()) / min(counts.values())
    if config.class_weights == "none":  # the default (see IMBALANCE)
        return None, "class weights: none" + (
            f" (largest/smallest train class {ratio:.1f}; class_weights: balanced lifts the "
            f"small classes' recall and macro-F1 at a cost in accuracy)" if ratio >= IMBALANCE
            else "")
    if config.class_weights == "auto" and ratio < IMBALANCE:
        return None, f"class weights: none (largest/smallest train class {ratio:.1f} < {IMBALANCE:g})"
    total, k = sum(counts.values()), len(counts)
    weights = {c: total / (k * v) for c, v in counts.items()}
    return weights, (f"class weights: balanced (largest/smallest train class {ratio:.1f}); "
                     + ", ".join(f"{c}: {w:.2f}" for c, w in sorted(weights.items())))
