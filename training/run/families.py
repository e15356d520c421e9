"""The model families for tabular versions: how each is fitted on a version, and readied for a
small table's folds.

``trees`` (gradient-boosted, ``training.models.trees``) usually wins on tables and fits in
seconds on the CPU; ``mlp`` (``training.models.mlp``) trains under the device's
distribution strategy and can win where smooth interactions dominate. Which one a run keeps,
and a regression's target before that, is ``training.run.choice``'s.

Each family is a ``Family`` listed in ``FAMILIES``: its ``fit`` (``FitRun -> Fitted``) hands
back the same ``TabularModel`` views for both, so evaluation, the gate and the export do not
know which won; its ``folds`` fits a small table's k-fold (``training.run.folds``).
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
from training.judge.evaluate import evaluate_split
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
