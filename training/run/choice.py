"""The one place that picks between the model families, and before them a regression's target.

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
from training.config import TrainConfig
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
