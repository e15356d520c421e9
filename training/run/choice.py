"""Decisions made on the data: a run's settings from its version's train size, a regression's
target, and the one place that picks between the model families.

The settings (``plan``): a step budget, batch size, eval period, patience, learning rate
(square-root scaled with the batch) and its decay, and class weights; and the spec's
``training:`` section and a dataset's tuned settings applied where the run's settings still
hold the defaults (``training.config`` holds the settings and their defaults). Fixed defaults
fit flights (262 k rows) and starve a 250-row table (one step per epoch). A setting left at its
default is chosen here from the train size; one the caller (CLI flag, spec ``training:``
section, DAG Param) changed is kept. Each choice is logged once, with why.

A tiny table gets at most 100 passes for a regression label, 50 for a class label. On classes
a model already gets right, cross-entropy keeps falling as the network sharpens its logits, so
the eval loss gives early stopping nothing to stop on: at 100 passes wine (116 train rows) had
its 25 eval rows all right from the third evaluation while their loss fell a little at each
(0.056 to 0.044 over the last 20 of 50), and test accuracy lost a row (0.946 against 0.973
before adaptive training; a logistic regression on that split scores 0.973 strongly
regularized, C 0.01-0.1, and 0.946 at C 1). A regression loss bottoms out at the noise: cars
still improved from 50 to 100 passes (test RMSE 2.87 to 2.71), and diabetes stops early.

``family: auto`` (the default) fits every family of ``training.run.families.FAMILIES``, trees
first, and keeps the trees unless the MLP is better on the eval split beyond noise
(``keep``): in AUC for a binary label (the figure the bench compares), in the loss otherwise
(accuracy on a small eval split ties too often). The test split is never looked at before
the choice. Below ``SMALL_TABLE_ROWS`` rows the choice (and the gate's evidence) comes from
repeated k-fold over train and eval instead (``cross_validated``, ``training.run.folds``).

Before the family, the target of a regression is decided on the data (``choose_target``): a
non-negative train target skewed beyond ``SKEWED`` where the spec sets no ``transform`` is fitted
by the trees family both raw and through ``log1p``, and the lower eval RMSE in the target's units
keeps its target (a price table ended 7% behind a reference on the raw target).
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Any

import numpy as np

from etl.versions import Manifest
from training.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_EPOCHS,
    DEFAULT_LEARNING_RATE,
    DEFAULT_PATIENCE,
    TrainConfig,
)
from training.data.tabular import make_dataset
from training.judge.evaluate import (
    example_losses,
    gate_scores,
    labels_of,
    metric_intervals,
    predictions,
    regression_report,
)
from training.judge.gate import auc_lead_bound, lower_bound
from training.models.tabular import BINARY, REGRESSION, in_units
from training.run.families import (
    EVAL_SPLIT,
    FAMILIES,
    TEST_SPLIT,
    Family,
    FitRun,
    Fitted,
    Refit,
    fit_trees,
)
from training.tasks import Task

log = logging.getLogger(__name__)

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


# --- the settings, from the train size --------------------------------------------------------


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


# --- a regression's target and the model family ----------------------------------------------

SMALL_TABLE_ROWS = 1000
"""Tables with fewer rows (train + eval + test) choose their family and get their verdict by
repeated k-fold over train and eval (``training.run.folds``, imported for them only): at 1,000
rows a 10% test split holds 100 rows, where one row moves accuracy by 1%; below it one test
split is too little evidence to pick a family or bless a model."""


SKEWED = 1.0
"""Sample skewness of a non-negative regression target (train split) above which training
fits ``log1p`` of it too and keeps the target with the lower eval RMSE; at or below it, or with
a negative value, the target is learned raw. (A log-normal price has skewness ~2 to 6; a
symmetric target 0.)"""
LOG1P = "log1p"


def skewness(y: np.ndarray) -> float:
    """Sample skewness (the third standardized moment); 0 for a constant."""
    y = np.asarray(y, np.float64)
    std = float(y.std()) if len(y) else 0.0
    return float(np.mean((y - y.mean()) ** 3) / std**3) if std > 0 else 0.0


def _eval_rmse(fitted: Fitted, manifest: Manifest) -> float:
    """The eval split's RMSE in the target's units (comparable across target transforms)."""
    label = manifest.schema.label
    y, out = predictions(fitted.model, fitted.eval_ds)
    return regression_report(in_units(y, label), in_units(out[:, 0], label))["rmse"]


def choose_target(run: FitRun) -> tuple[FitRun, dict[str, Fitted], dict[str, Any] | None]:
    """A regression's learned target decided on the data: (the run on the kept target's
    manifest, the trees fitted on it for ``choose`` to reuse, metrics.json's ``target_choice``;
    None where there is nothing to decide: not a regression, or the spec set ``transform``)."""
    label = run.manifest.schema.label
    if run.task.name != REGRESSION or label.transform:
        return run, {}, None
    y = labels_of(make_dataset(run.version_uri, "train", run.manifest, run.config.input,
                               training=False))  # one pass, in order
    skew, low = skewness(y), float(y.min()) if len(y) else 0.0
    if low < 0 or not skew > SKEWED:
        why = (f"raw: the train target has a negative value ({low:.4g})" if low < 0 else
               f"raw: the train target's skewness {skew:.2f} is at most {SKEWED}")
        return run, {}, {"chosen": "raw", "skewness": skew, "min": low, "why": why}
    logged = replace(run.manifest, schema=run.manifest.schema.with_label(
        replace(label, transform=LOG1P)))
    runs = {"raw": run, LOG1P: run._replace(manifest=logged)}
    fits = {name: fit_trees(r) for name, r in runs.items()}
    rmse = {name: _eval_rmse(f, runs[name].manifest) for name, f in fits.items()}
    chosen = min(rmse, key=lambda k: (math.isnan(rmse[k]), rmse[k]))
    why = (f"{chosen}: the train target is non-negative and skewed ({skew:.2f} > {SKEWED}); "
           f"fitted by trees both ways, eval RMSE in the target's units raw {rmse['raw']:.4g}, "
           f"log1p {rmse[LOG1P]:.4g} (lower is kept)")
    log.info("train %s: target %s", run.manifest.dataset, why)
    return runs[chosen], {"trees": fits[chosen]}, {
        "chosen": chosen, "skewness": skew, "min": low, "eval_rmse": rmse, "why": why}


def choose(run: FitRun, done: dict[str, Fitted] | None = None
           ) -> tuple[Fitted, dict[str, Any], dict[str, Any] | None]:
    """Fit the configured family, or every family for ``auto`` and keep one (``keep``);
    (the kept one, metrics.json's ``family_choice``: the eval figures and why, and below
    ``SMALL_TABLE_ROWS`` the repeated k-fold's figures and evidence, else None; ``folds: 0``
    skips it). ``done``: families already fitted on this run (``choose_target``'s)."""
    wanted, done = run.config.model.family, done or {}
    fits = FAMILIES if wanted == "auto" else {wanted: FAMILIES[wanted]}
    if folded(run.config, run.manifest):
        chosen, cv, refit = cross_validated(run, fits)
        kept = FAMILIES[chosen].fit(run._replace(refit=refit))
        # the eval rows trained the kept model: its eval figures are the out-of-fold ones
        kept.eval = {k: v for k, v in cv["out_of_fold"].items() if isinstance(v, float)}
        return kept, {"chosen": chosen, "metric": cv["metric"],
                      "eval": {k: v["mean"] for k, v in cv["families"].items()},
                      "why": cv["why"]}, cv
    metric = eval_metric(run.task)
    # dict order: trees first, it is fast
    fitted = {name: done[name] if name in done else family.fit(run)
              for name, family in fits.items()}
    if len(fitted) == 1:
        # the figure ``auto`` compares (a regression's in the target's units), not the
        # family's own eval loss (in the learned space where log1p was kept)
        scores = {wanted: eval_figure(run, fitted[wanted])}
        chosen, why = wanted, f"family {wanted} was set"
    else:
        answers, labels = {}, None
        for name, f in fitted.items():
            y, answers[name] = predictions(f.model, f.eval_ds)
            if labels is not None and not np.array_equal(y, labels):
                raise RuntimeError(f"train {run.manifest.dataset}: the families read the eval "
                                   "split in different orders; they cannot be compared row by row")
            labels = y
        scores = {name: figure(run.task.name, run.manifest, labels, out)
                  for name, out in answers.items()}
        chosen, how = keep(run.task.name, run.manifest, labels, answers)
        figures = ", ".join(f"{name} {score:.4f}" for name, score in scores.items())
        why = (f"{chosen} is kept: eval {metric} {figures} "
               f"({'higher' if metric == 'auc' else 'lower'} is better); {how}")
    log.info("train %s: model family %s", run.manifest.dataset, why)
    return fitted[chosen], {"chosen": chosen, "metric": metric, "eval": scores, "why": why}, None


CONFIDENCE = 0.95
"""A later family replaces the kept one only where its lead on the same rows has a one-sided
paired-bootstrap lower bound (at this confidence) above 0. A narrower lead is noise, and the
first family (trees) stays: on the first 8 pairs of the drawn gauntlet (seed 1) the MLP won the
cross-validation of five small tables by less than noise, and refitted it ended 11% to 63%
behind the reference on three of them; trees also fit and serve faster."""


def row_losses(task: str, manifest: Manifest, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Each row's loss: for a regression the squared error in the target's units, whatever
    target was learned (``y`` and ``out`` are in the learned space), else the log loss. A
    target learned through log1p is judged as the gate and the reference judge it: compared
    in the log, an MLP that fits small values well won the choice and ended at 9x the
    reference's RMSE (drawn seed 2, fpp3/us_employment)."""
    if task == REGRESSION:
        label = manifest.schema.label
        return (in_units(out[:, 0], label) - in_units(y, label)) ** 2
    return example_losses(task, manifest, y, out)[1]


def figure(task: str, manifest: Manifest, y: np.ndarray, out: np.ndarray) -> float:
    """The figure of answers ``out`` to labels ``y``: AUC for a binary label (higher is
    better), else the mean row loss (lower is better)."""
    if task == BINARY:
        return gate_scores(task, manifest, y, out)["auc"]
    return float(row_losses(task, manifest, y, out).mean())


def eval_figure(run: FitRun, fitted: Fitted) -> float:
    """``figure`` of a fitted family on the eval split (what ``auto`` and tuning compare)."""
    y, out = predictions(fitted.model, fitted.eval_ds)
    return figure(run.task.name, run.manifest, y, out)


def lead(task: str, manifest: Manifest, y: np.ndarray, first: np.ndarray,
         second: np.ndarray) -> tuple[float, float]:
    """(``second``'s lead over ``first`` on the same rows: AUC gained, or mean loss saved; the
    lead's one-sided ``CONFIDENCE`` paired bootstrap lower bound)."""
    if task == BINARY:
        gained = figure(task, manifest, y, second) - figure(task, manifest, y, first)
        return gained, auc_lead_bound(y, first[:, 0], second[:, 0], CONFIDENCE)
    saved = row_losses(task, manifest, y, first) - row_losses(task, manifest, y, second)
    return float(saved.mean()), lower_bound(saved, CONFIDENCE)


def keep(task: str, manifest: Manifest, y: np.ndarray,
         answers: dict[str, np.ndarray]) -> tuple[str, str]:
    """(the family kept, how) of the families' ``answers`` to labels ``y``, in fitting order:
    each later family's lead over the one kept so far, and whether it replaces it."""
    names = list(answers)
    kept, steps = names[0], []
    for name in names[1:]:
        gained, bound = lead(task, manifest, y, answers[kept], answers[name])
        replaces = bool(bound > 0)  # NaN (no figure) never replaces
        steps.append(f"{name} {'replaces' if replaces else 'does not replace'} {kept}: lead "
                     f"{gained:+.4f}, paired bootstrap lower bound {bound:.4f} "
                     f"({CONFIDENCE:.0%} one-sided) needs > 0")
        kept = name if replaces else kept
    return kept, "; ".join(steps)


def cross_validated(run: FitRun, fits: dict[str, Family]
                    ) -> tuple[str, dict[str, Any], Refit]:
    """A small table's choice: ``fits`` over repeated k-fold of train and eval
    (``training.run.folds``), judged; (the family kept, metrics.json's ``cross_validation``,
    the verdict's evidence under ``evidence``: labels and out-of-fold answers averaged over
    the repeats, learned space; how to fit the kept family on all those rows)."""
    from training.run.folds import cross_validate  # small tables only

    oof, (folds, repeats) = cross_validate(run, fits), (run.config.folds, run.config.repeats)
    task, y, n = run.task.name, oof.labels, len(oof.labels)
    figures = {}
    for family, outs in oof.answers.items():
        per_repeat = [figure(task, run.manifest, y, out) for out in outs]
        lengths = oof.lengths[family]
        figures[family] = {"per_repeat": per_repeat, "mean": float(np.mean(per_repeat)),
                           "range": [float(min(per_repeat)), float(max(per_repeat))],
                           "lengths": lengths, "median_length": _median_length(lengths)}
    answers = {family: np.mean(outs, axis=0) for family, outs in oof.answers.items()}
    metric = eval_metric(run.task)
    chosen, how = keep(task, run.manifest, y, answers)  # on the repeats' mean answers
    out = answers[chosen]
    scores = gate_scores(task, run.manifest, y, out)
    scores["intervals"] = metric_intervals(run.manifest, run.task.gate, y, out)
    text = ", ".join(f"{k} {v['mean']:.4f} (repeats "
                     f"{', '.join(f'{x:.4f}' for x in v['per_repeat'])})"
                     for k, v in figures.items())
    why = (f"{chosen} is kept: mean out-of-fold {metric} over {repeats} x {folds}-fold "
           f"cross-validation of the {n} train and eval rows: {text} "
           f"({'higher' if metric == 'auc' else 'lower'} is better)" + (f"; {how}" if how else ""))
    refit = Refit(oof.rows, figures[chosen]["median_length"], oof.steps)
    unit = "boosting rounds" if chosen == "trees" else f"epochs of {oof.steps} steps"
    log.info("train %s: %s; %s is fitted on all %d train and eval rows for %d %s, the median "
             "its folds stopped at (%s)", run.manifest.dataset, why, chosen, n, refit.length,
             unit, ", ".join(map(str, oof.lengths[chosen])))
    return chosen, {"rows": n, "folds": folds, "repeats": repeats, "metric": metric,
                    "families": figures, "chosen": chosen, "why": why,
                    "refit": {"rows": n, "length": refit.length, "unit": unit},
                    "out_of_fold": scores, "evidence": (y, out)}, refit


def _median_length(lengths: list[int]) -> int:
    """The folds' median stopping point, whole and at least 1."""
    return max(1, round(float(np.median(lengths)))) if lengths else 1


def folded(config: TrainConfig, manifest: Manifest) -> bool:
    """Under ``SMALL_TABLE_ROWS`` rows in train, eval and test, and ``config.folds`` not 0: the
    family choice, verdict and tuning's trials are judged by k-fold (``training.run.folds``)."""
    return config.folds > 0 and sum(manifest.splits[s].num_examples if s in manifest.splits else 0
                                    for s in ("train", EVAL_SPLIT, TEST_SPLIT)) < SMALL_TABLE_ROWS


def eval_metric(task: Task) -> str:
    """The eval figure families (and tuning trials) are compared by: AUC for a binary label,
    else the loss."""
    return "auc" if task.name == BINARY else "loss"


def rank(score: float, metric: str) -> float:
    """Smaller is better; NaN (no figure) loses to any number."""
    if math.isnan(score):
        return math.inf
    return -score if metric == "auc" else score
