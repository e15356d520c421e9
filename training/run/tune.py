"""Tuning: a budgeted search over both families' main settings, judged on the eval split
(on a small table, by repeated k-fold over train and eval).

``python -m training tune`` fits the trees and the MLP with settings drawn by Optuna's TPE
sampler (seeded), each fit judged by the figure ``family: auto`` compares
(``training.run.choice.eval_metric``) the way training judges it: on the eval split, or,
below ``training.run.choice.SMALL_TABLE_ROWS`` rows, as the mean out-of-fold figure of
``training.run.choice.cross_validated`` (one small eval split would pick settings by
luck); the test split is never looked at. The first trials
are each family's defaults, so the best found is never worse on eval than what an untuned
training fits. The search stops at the budget's trials or minutes, whichever comes first (no
trial starts after the minutes; the one running finishes). The best settings are written to
``models/<dataset>/tuned.json`` (``training.outputs.Tuned``); every later training of the
dataset uses them where the spec, a flag or a Param does not set a value, until it is tuned
again (``training.run.train``).
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import keras

from etl import versions
from etl.versions import Manifest
from training import outputs
from training.config import TrainConfig
from training.data.tabular import IMAGE_KIND, make_dataset
from training.judge.evaluate import labels_of
from training.judge.gate import check_splits
from training.outputs import TUNED_SETTINGS, TuneConfig
from training.run import choice, families
from training.run.choice import class_weight, plan, spec_overrides
from training.run.runtime import DeviceSetup, precision_policy, setup_device
from training.tasks import task_of

log = logging.getLogger(__name__)

# The MLP's layer shapes a trial may take (Optuna's categorical values are plain strings).
HIDDEN_UNITS = {"256x128": (256, 128), "128x64": (128, 64), "512x256": (512, 256),
                "64": (64,), "256x128x64": (256, 128, 64)}


class _Search(NamedTuple):
    """What every trial shares: the version, its settings before the trial's, the device."""

    version_uri: str
    manifest: Manifest
    config: TrainConfig
    setup: DeviceSetup
    work: Path
    metric: str
    budget: TuneConfig
    folds: bool  # a small table: each trial judged by repeated k-fold, not the eval split


def tune(version_uri: str, models_root: str, budget: TuneConfig,
         config: TrainConfig | None = None) -> outputs.Tuned:
    """Search, write ``tuned.json`` beside the dataset's models, return what it holds.

    Raises:
        IncompleteVersionError: the version has no manifest.
        EvaluationSplitError: the eval or test split cannot be evaluated.
        ValueError: an images version (its CNN is not tuned), or no trial finished.
    """
    manifest = versions.read_manifest(version_uri)
    if any(f.kind == IMAGE_KIND for f in manifest.schema.features.values()):
        raise ValueError(f"{version_uri}: an images version; tuning covers the tabular "
                         f"families {tuple(TUNED_SETTINGS)} only")
    config = spec_overrides(config or TrainConfig(), manifest)
    task = task_of(manifest)
    check_splits(manifest, {s: labels_of(make_dataset(version_uri, s, manifest, config.input))
                            for s in (families.EVAL_SPLIT, families.TEST_SPLIT)},
                 config.min_eval_examples)
    metric, setup = choice.eval_metric(task), setup_device(config.precision, config.devices)
    folds = choice.folded(config, manifest)
    judged = _judged(config if folds else None)
    log.info("tune %s on %s: up to %d trials or %g min over %s, judged by %s %s",
             manifest.dataset, manifest.version, budget.trials, budget.minutes,
             ", ".join(budget.families), judged, metric)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tune-", dir=config.work_dir) as work, \
            precision_policy(setup.precision):
        trials = _search(_Search(version_uri, manifest, config, setup, Path(work), metric,
                                 budget, folds))
    done = [t for t in trials if math.isfinite(t["eval"])]
    if not done:
        raise ValueError(f"tune {manifest.dataset}: no trial finished within {budget.minutes:g} "
                         f"min; raise tune.minutes in the spec or pass --minutes")
    best = min(done, key=lambda t: choice.rank(t["eval"], metric))
    tuned = outputs.Tuned(
        dataset=manifest.dataset, version=manifest.version,
        label=manifest.schema.label.name, task=task.name,
        tuned_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), family=best["family"],
        settings=best["settings"], metric=metric, eval=best["eval"],
        default_eval={t["family"]: t["eval"] for t in done if t["defaults"]},
        budget={"trials": budget.trials, "minutes": budget.minutes,
                "families": list(budget.families)},
        seconds=round(time.perf_counter() - start, 1), trials=trials, judged=judged)
    uri = outputs.write_tuned(models_root, tuned)
    log.info("tune %s: best of %d trials: %s %s, %s %s %.4f (defaults: %s) -> %s",
             manifest.dataset, len(trials), tuned.family, _text(tuned.settings) or "defaults",
             judged, metric, tuned.eval, _text(tuned.default_eval), uri)
    return tuned


def _search(search: _Search) -> list[dict[str, Any]]:
    """Run the study: each family's defaults first, then the sampler's draws; one entry per
    trial run."""
    import optuna

    trials: list[dict[str, Any]] = []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="maximize" if search.metric == "auc" else "minimize",
        sampler=optuna.samplers.TPESampler(seed=search.budget.seed))
    for family in search.budget.families:
        study.enqueue_trial({"family": family}, user_attrs={"defaults": True})
    study.optimize(lambda trial: _trial(search, trial, trials), n_trials=search.budget.trials,
                   timeout=search.budget.minutes * 60, catch=(ValueError, ArithmeticError))
    return trials


def _trial(search: _Search, trial: Any, trials: list[dict[str, Any]]) -> float:
    """Fit one family with the trial's settings; its eval figure."""
    manifest = search.manifest
    family = trial.suggest_categorical("family", list(search.budget.families))
    defaults = bool(trial.user_attrs.get("defaults"))
    settings = {} if defaults else _suggest(trial, family,
                                            int(manifest.splits["train"].num_examples))
    planned, _ = plan(search.config.with_overrides(family=family, **settings), manifest)
    weights, _ = class_weight(planned, manifest)
    keras.utils.set_random_seed(planned.seed)
    trial_dir = search.work / f"trial-{trial.number}"
    began = time.perf_counter()
    run = families.FitRun(search.version_uri, manifest, str(trial_dir / "run"), search.setup,
                          planned, trial_dir, task_of(manifest), (), weights)
    if search.folds:
        _, cv, _ = choice.cross_validated(run, {family: families.FAMILIES[family]})
        score = float(cv["families"][family]["mean"])
    else:
        score = choice.eval_figure(run, families.FAMILIES[family].fit(run))
    keras.backend.clear_session()
    trials.append({"number": trial.number, "family": family, "defaults": defaults,
                   "settings": settings, "eval": score,
                   "seconds": round(time.perf_counter() - began, 2)})
    log.info("tune %s: trial %d/%d %s %s: %s %s %.4f, %.1f s", manifest.dataset,
             trial.number + 1, search.budget.trials, family,
             "defaults" if defaults else _text(settings),
             _judged(search.config if search.folds else None), search.metric,
             score,
             trials[-1]["seconds"])
    return score


def _suggest(trial: Any, family: str, n_train: int) -> dict[str, Any]:
    """One family's main settings (``TUNED_SETTINGS``), on scales where a step means as much
    at either end: rates and counts on a log scale."""
    if family == "trees":
        leaf_rows = max(3, min(200, n_train // 20))
        return {"tree_learning_rate": trial.suggest_float("tree_learning_rate", 0.01, 0.3,
                                                          log=True),
                "num_leaves": trial.suggest_int("num_leaves", 7, 255, log=True),
                "min_data_in_leaf": trial.suggest_int("min_data_in_leaf", 2, leaf_rows,
                                                      log=True)}
    shape = trial.suggest_categorical("hidden_units", list(HIDDEN_UNITS))
    return {"learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True),
            "hidden_units": list(HIDDEN_UNITS[shape]),
            "dropout": trial.suggest_float("dropout", 0.0, 0.5)}


def _judged(folded: TrainConfig | None) -> str:
    """What a trial's figure is, as the log, the CLI and the model page say it: ``folded``,
    the config of a run judged by k-fold, else None."""
    if folded is None:
        return "eval"
    return f"{folded.repeats} x {folded.folds}-fold cross-validation of train and eval, mean"


def _text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in values.items())
