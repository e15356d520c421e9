"""Model families for tabular versions, and the one place that picks between them.

``trees`` (gradient-boosted, ``training.models.trees``) usually wins on tables and fits in
seconds on the CPU; ``mlp`` (``training.models.mlp``) trains under the device's
distribution strategy and can win where smooth interactions dominate. ``family: auto`` (the
default) fits both, trees first, and keeps the trees unless the MLP is better on the eval
split beyond noise (``keep``): in AUC for a binary label (the figure the bench
compares), in the loss otherwise (accuracy on a small eval split ties too often). The test
split is never looked at before the choice.

Each family is a ``Family`` listed in ``FAMILIES``: its ``fit`` (``FitRun -> Fitted``) hands
back the same ``TabularModel`` views for both, so evaluation, the gate and the export do not
know which won; its ``folds`` fits a small table's k-fold (``training.run.folds``).

Before the family, the target of a regression is decided on the data (``choose_target``): a
non-negative train target skewed beyond ``SKEWED`` where the spec sets no ``transform`` is fitted
by the trees family both raw and through ``log1p``, and the lower eval RMSE in the target's units
keeps its target (a price table ended 7% behind a reference on the raw target).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import keras
import numpy as np

from etl import storage
from etl.versions import Manifest
from training import outputs
from training.config import TrainConfig
from training.data.tabular import make_dataset
from training.judge.evaluate import evaluate_split, labels_of, predictions, regression_report
from training.judge.gate import (
    auc_lead_bound,
    example_losses,
    gate_scores,
    lower_bound,
    metric_intervals,
)
from training.models.heads import BINARY, REGRESSION, in_units
from training.models.mlp import build_models, compile_model
from training.models.tabular import TabularModel
from training.models.trees import (
    FEATURES,
    Progress,
    assemble,
    booster_params,
    fit_booster,
    forest_of,
    tree_preprocess,
)
from training.run.runtime import DeviceSetup, EpochSummaries, EpochTimer, StorageBackupAndRestore
from training.tasks import Task

if TYPE_CHECKING:
    from training.run.folds import FoldRows

log = logging.getLogger(__name__)

EVAL_SPLIT, TEST_SPLIT = "eval", "test"
SMALL_TABLE_ROWS = 1000
"""Tables with fewer rows (train + eval + test) choose their family and get their verdict by
repeated k-fold over train and eval (``training.run.folds``, imported for them only): at 1,000
rows a 10% test split holds 100 rows, where one row moves accuracy by 1%; below it one test
split is too little evidence to pick a family or bless a model."""


class FitRun(NamedTuple):
    """What every family needs to fit one version."""

    version_uri: str
    manifest: Manifest
    run_uri: str
    setup: DeviceSetup
    config: TrainConfig
    work_dir: Path
    task: Task
    callbacks: Sequence[keras.callbacks.Callback] = ()
    weights: dict[int, float] | None = None
    rows: FoldRows | None = None  # one fold of a small table (training.run.folds), else None
    refit: Refit | None = None  # a small table's kept family on all train and eval rows


@dataclass
class Fitted:
    """A fitted family: its model views, the compiled core (it evaluates ``eval_ds`` and
    ``test_ds``, which carry its preprocessing) and its metrics.json entries."""

    family: str
    parts: TabularModel
    model: keras.Model
    eval_ds: Any
    test_ds: Any
    eval: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)


class Answers(NamedTuple):
    """One fold's answers: its held-out rows' labels [n] and model outputs [n, k] (learned
    space), and the length its early stopping kept (boosting rounds, or epochs)."""

    labels: np.ndarray
    outputs: np.ndarray
    length: int


FoldFit = Callable[[FitRun], Answers]
"""One fold's fit: its run (``FitRun.rows`` says which rows it trains on) -> its answers."""


class Refit(NamedTuple):
    """How a small table's kept family is fitted after its repeated k-fold: on every train
    and eval row (``rows``), for ``length`` boosting rounds or epochs of ``steps`` steps (the
    median of where its folds' early stopping ended, each fold trained as long as that), with
    no early stopping. Stopped on the eval split's 20 to 80 rows instead, the kept rounds
    disagreed with the folds': HSAUR/BtheB kept 1 round where its ten folds kept a median of
    12, survival/myeloid 119 against 12 (drawn gauntlet, 14 of its 16 blessed-but-behind
    pairs were such tables)."""

    rows: FoldRows
    length: int
    steps: int


def fit_trees(run: FitRun) -> Fitted:
    """LightGBM on the train split's arrays (read through tf.data), stopped on eval."""
    manifest, task, config = run.manifest, run.task, run.config
    inputs = tree_preprocess(manifest)
    datasets = _datasets(run, inputs.preprocess, train_once=True)
    start = time.perf_counter()
    train, held = _arrays(datasets[0]), _arrays(datasets[1])
    booster, params, history = _boost(run, train, held, inputs.categorical)
    fit_s = time.perf_counter() - start
    parts = assemble(manifest, inputs, forest_of(booster, task.name), task.serve)
    model = compile_model(parts.core, config.model, loss=task.loss(), metrics=task.metrics())
    rounds = len(history["loss"])
    details = {"fit_seconds": fit_s, "examples_per_s": rounds * len(train[1]) / fit_s,
               "epochs": run.refit.length if run.refit else config.model.max_rounds,
               "epochs_run": rounds,
               "best_epoch": booster.best_iteration or rounds, "resumed_from_epoch": 0,
               "history": history, "stall_ratio": None,
               "trees": {"rounds": booster.best_iteration or rounds,
                         "leaves": params["num_leaves"],
                         "min_data_in_leaf": params["min_data_in_leaf"],
                         "learning_rate": params["learning_rate"]}}
    return Fitted("trees", parts, model, datasets[1], datasets[2],
                  evaluate_split(model, datasets[1]), details)


def trees_folds(run: FitRun, columns: dict[str, np.ndarray]) -> FoldFit:
    """The trees' fit of one fold: the matrix of every train and eval row is built once,
    each fold boosts on its slice and answers with LightGBM's own predictions (the compiled
    forest equals them to 1e-6; a fold's model is never served)."""
    from training.run.folds import mapped  # small tables only

    inputs = tree_preprocess(run.manifest)
    features, labels = mapped(run, columns, inputs.preprocess)
    x, y = features[FEATURES], labels.reshape(-1)

    def fold(one: FitRun) -> Answers:
        rows = one.rows
        assert rows is not None, "a fold's run carries its rows"
        held = x[rows.held], y[rows.held]
        booster, _, _ = _boost(one, (x[rows.train], y[rows.train]), held, inputs.categorical,
                               Progress(rounds=one.config.model.max_rounds))
        out = booster.predict(held[0], num_iteration=booster.best_iteration or None)
        return Answers(held[1], np.asarray(out, np.float64).reshape(len(held[1]), -1),
                       booster.best_iteration or booster.current_iteration())

    return fold


def _boost(run: FitRun, train: tuple[np.ndarray, np.ndarray],
           held: tuple[np.ndarray, np.ndarray], categorical: list[int],
           progress: Progress | None = None) -> tuple[Any, dict[str, Any], dict[str, list]]:
    """LightGBM on ``train``, stopped on ``held`` (a refit: ``held`` only logged, the
    refit's rounds run), logged; (booster, params, loss history)."""
    manifest, config = run.manifest, run.config
    model = config.model if run.refit is None else replace(config.model,
                                                            max_rounds=run.refit.length)
    weights = None if run.weights is None else np.asarray(
        [run.weights.get(int(c), 1.0) for c in train[1]], np.float64)
    classes = int(manifest.schema.label.classes or 2)
    params = booster_params(config.model, run.task.name, classes, len(train[1]), config.seed)
    start = time.perf_counter()
    booster, history = fit_booster(train, held, params, categorical, model, weights,
                                   progress or Progress(), stop=run.refit is None)
    log.info("train %s: trees: %d rounds kept of %d, %d leaves, %s rows%s, %.1f s (LightGBM, "
             "CPU)", manifest.dataset, booster.best_iteration or len(history["loss"]),
             len(history["loss"]), params["num_leaves"], f"{len(train[1]):,}",
             " (train and eval, the folds' median rounds)" if run.refit else "",
             time.perf_counter() - start)
    return booster, params, history


def fit_mlp(run: FitRun) -> Fitted:
    """The Keras MLP under the device's strategy, with backups and early stopping."""
    parts, model = _mlp(run)
    datasets, details = _train_mlp(run, parts, model)
    return Fitted("mlp", parts, model, datasets[1], datasets[2],
                  evaluate_split(model, datasets[1]), details)


def mlp_folds(run: FitRun, columns: dict[str, np.ndarray]) -> FoldFit:
    """The MLP's fit of one fold: one model, built and compiled once (so its train step is
    traced once), put back to its first weights and optimizer state before each fold; the
    rows run through its preprocessing once, not in every fold's epochs."""
    from training.run.folds import mapped  # small tables only

    parts, model = _mlp(run, scored=False)  # a fold's AUC, updated every step, is never read
    with run.setup.strategy.scope():
        model.optimizer.build(model.trainable_variables)
    start = [v.numpy() for v in model.weights], [v.numpy() for v in model.optimizer.variables]
    rows = mapped(run, columns, parts.preprocess)  # preprocessed once, sliced by every fold

    def fold(one: FitRun) -> Answers:
        assert one.rows is not None, "a fold's run carries its rows"
        for variables, values in zip((model.weights, model.optimizer.variables), start):
            for variable, value in zip(variables, values, strict=True):
                variable.assign(value)
        datasets, details = _train_mlp(one._replace(rows=replace(one.rows, mapped=rows)),
                                       parts, model)
        (x, y), = datasets[1]  # the held-out rows come in one batch: one eager call, no trace
        out = np.asarray(model(x, training=False), np.float64).reshape(len(y), -1)
        return Answers(y.numpy().reshape(-1), out, details["best_epoch"] or details["epochs_run"])

    return fold


def _mlp(run: FitRun, scored: bool = True) -> tuple[TabularModel, keras.Model]:
    """The MLP's views and its compiled core, under the device's strategy; with the task's
    metrics unless not ``scored`` (a fold's: only its loss and answers are read)."""
    manifest, config, setup, task = run.manifest, run.config, run.setup, run.task
    _, per_call = epoch_steps(manifest, config, setup.replicas)
    parts = build_models(manifest, config.model, core_scope=setup.strategy.scope(),
                         head=task.head, serve=task.serve)
    with setup.strategy.scope():
        model = compile_model(parts.core, config.model, per_call, config.jit_compile,
                              loss=task.loss(), metrics=task.metrics() if scored else [])
    return parts, model


def _train_mlp(run: FitRun, parts: TabularModel,
               model: keras.Model) -> tuple[tuple[Any, Any, Any], dict[str, Any]]:
    """Fit ``model`` with early stopping; (train, eval, test batches; metrics.json's details).
    A kept model's fit is backed up each epoch (a retry resumes it) and writes TensorBoard
    summaries; a fold's (``run.rows``) does neither: it is seconds long, redone whole on a
    retry, and never shown. A refit (``run.refit``) trains its epochs with no eval pass
    and no early stopping: the eval rows are among its train rows."""
    manifest, config, setup = run.manifest, run.config, run.setup
    if run.refit is not None:
        config = replace(config, steps_per_epoch=run.refit.steps, epochs=run.refit.length)
    steps, _ = epoch_steps(manifest, config, setup.replicas)
    # preprocessing runs in the tf.data feature map; the train step sees ids and numbers
    train_ds, eval_ds, test_ds = _datasets(run, parts.preprocess)
    stall = _stall_ratio(model, train_ds, setup, config) if config.measure_stall_batches else None
    timer = EpochTimer(config.input.batch_size, steps)
    stopper = keras.callbacks.EarlyStopping(
        monitor="val_loss", patience=config.patience, restore_best_weights=True)
    backup = None
    kept: list[keras.callbacks.Callback] = []
    if run.rows is None:
        backup = StorageBackupAndRestore(storage.join(run.run_uri, outputs.BACKUP_DIR),
                                         run.work_dir / "backup")
        kept = [backup, EpochSummaries(run.work_dir / "run" / "logs")]
    start = time.perf_counter()
    stopping = [stopper] if run.refit is None else []
    history = model.fit(
        train_ds, epochs=config.epochs, steps_per_epoch=steps,
        validation_data=eval_ds if run.refit is None else None,
        callbacks=[*kept, *stopping, timer, *run.callbacks],
        verbose=2 if run.rows is None else 0, shuffle=False, class_weight=run.weights,
    ).history
    fit_s = time.perf_counter() - start
    epochs_run = len(history.get("loss", []))
    details = {"fit_seconds": fit_s, "examples_per_s": timer.examples_per_s(),
               "epochs": config.epochs, "epochs_run": epochs_run,
               "best_epoch": (stopper.best_epoch + 1 if run.refit is None else epochs_run)
               if epochs_run else None,  # 1-based
               "resumed_from_epoch": backup.resumed_from_epoch if backup else 0,
               "stall_ratio": stall,
               "history": {k: [float(x) for x in v] for k, v in history.items()}}
    return (train_ds, eval_ds, test_ds), details


class Family(NamedTuple):
    """One model family: ``fit`` one version (the model kept, evaluated and exported), and
    ``folds``, which readies the family for a small table's repeated k-fold over ``columns``
    (every train and eval row, ``training.run.folds.read_rows``) and returns the fit of one
    fold: the answers to its held-out rows. A fold's model is never kept, so a fold skips
    what only a kept model needs and reuses what every fold shares."""

    fit: Callable[[FitRun], Fitted]
    folds: Callable[[FitRun, dict[str, np.ndarray]], FoldFit]


FAMILIES: dict[str, Family] = {"trees": Family(fit_trees, trees_folds),
                               "mlp": Family(fit_mlp, mlp_folds)}
"""``ModelConfig.family`` -> its family; ``auto`` fits them in this order."""


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


def _datasets(run: FitRun, preprocess: keras.Model,
              train_once: bool = False) -> tuple[Any, Any, Any]:
    """Train, eval and test batches through ``preprocess``; train shuffled and repeating
    unless ``train_once`` (one pass in order, to hold in memory); a fold's from its rows, a
    refit's train batches from every train and eval row."""
    if run.rows is not None:
        return run.rows.datasets(run, preprocess, train_once)
    target = run.task.target(run.manifest.schema.label)
    train, held, test = (make_dataset(run.version_uri, split, run.manifest, run.config.input,
                                      training=False if train_once else None,
                                      preprocess=preprocess, target=target)
                         for split in ("train", EVAL_SPLIT, TEST_SPLIT))
    if run.refit is not None:
        train = run.refit.rows.datasets(run, preprocess, train_once)[0]
    return train, held, test


def _arrays(ds: Any) -> tuple[np.ndarray, np.ndarray]:
    """(features [n, columns], labels [n]) of one pass over a finite split."""
    xs, ys = [], []
    for features, y in ds:
        xs.append(features[FEATURES].numpy())
        ys.append(y.numpy().reshape(-1))
    return np.concatenate(xs), np.concatenate(ys)


def epoch_steps(manifest: Manifest, config: TrainConfig,
                replicas: int = 1) -> tuple[int, int]:
    """(steps per epoch, steps per execution): an epoch is a whole number of executions,
    since Keras runs every execution in full (13 steps at 16 per call would run 16).

    Over several replicas Keras 3's multi-step loop fails in graph construction ("You must
    feed a value for placeholder tensor", keras-team/keras#19246, open), so each step is
    its own call there; tests/training/run/test_runtime.py trains over two replicas with
    ``steps_per_execution`` 2 through this path.
    """
    steps = config.steps_per_epoch or max(
        1, math.ceil(manifest.splits["train"].num_examples / config.input.batch_size))
    per_call = min(config.steps_per_execution, steps)
    if replicas > 1 and per_call > 1:
        log.warning("%d replicas: one train step per call instead of %d (keras-team/keras#19246)",
                    replicas, per_call)
        per_call = 1
    return math.ceil(steps / per_call) * per_call, per_call


def _stall_ratio(model: keras.Model, train_ds: Any, setup: DeviceSetup,
                 config: TrainConfig) -> float:
    """Stall ratio on a copy of the model, so the measurement does not train the real one."""
    from training.run.bench import stall_ratio

    with setup.strategy.scope():
        clone = keras.models.clone_model(model)
        compile_model(clone, config.model, config.steps_per_execution, config.jit_compile,
                      loss=model.loss, metrics=[])
    return stall_ratio(clone, train_ds, config.measure_stall_batches)["stall_ratio"]
