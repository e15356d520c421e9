"""Held-out evaluation: test reports and the baselines a model is judged against, and the
figures the gate judges by (``baseline_outputs``, ``gate_scores``, ``example_losses``,
``metric_intervals``), which the family choice and the bench reference compute the same way.

With ~23% positives, always answering "not late" scores ~77% accuracy; a model is worth
blessing (``training.judge.gate``) only if it beats that and chance AUC (0.5) by a margin, on data
it never saw; the bootstrap intervals (below) say how far each figure, and the model's lead
over its baseline, can move on a test split this size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from scipy.stats import rankdata

from etl.versions import Manifest
from training.models.tabular import BINARY, REGRESSION, in_units, transform_of

CHANCE_AUC = 0.5


def evaluate_split(model: keras.Model, ds: tf.data.Dataset) -> dict[str, float]:
    """Loss, AUC and accuracy of ``model`` on one split (one full pass; a binary AUC exact,
    from a second pass: ``exact_auc``)."""
    result = {k: float(v) for k, v in model.evaluate(ds, return_dict=True, verbose=0).items()}
    return exact_auc(result, *predictions(model, ds)) if "auc" in result else result


def exact_auc(result: dict[str, float], labels: np.ndarray, out: np.ndarray) -> dict[str, float]:
    """``result`` with a binary model's AUC by ranks, the figure the gate, the family choice
    and the intervals compute: Keras's ``AUC`` interpolates over 200 thresholds, and its
    0.7788 beside the verdict's 0.7784 read as two figures of one thing (issue 51)."""
    if out.ndim == 2 and out.shape[1] == 1:
        result["auc"] = _auc(labels.reshape(-1), out[:, 0])
    return result


def scores_of(loss: Any, metrics: list, labels: np.ndarray, out: np.ndarray) -> dict[str, float]:
    """What ``evaluate_split`` reports, from outputs already predicted: the mean ``loss`` and
    each of ``metrics`` (fresh Keras objects, the ones the model was compiled with) over
    (labels, outputs), so the test split is predicted once and its figures, report, intervals
    and plots all read the same outputs."""
    y = labels.reshape(len(labels), 1).astype(np.float32)
    p = out.astype(np.float32)
    result = {"loss": float(loss(y, p)) if len(y) else float("nan")}
    for metric in metrics:
        metric.update_state(y, p)
        result[metric.name] = float(metric.result())
    return exact_auc(result, labels, out) if "auc" in result and len(y) else result


def baseline(labels: np.ndarray, train_label_counts: dict[str, int]) -> dict[str, Any]:
    """The majority class of the train split, scored on ``labels``.

    Its loss is that of a constant prediction at the train base rate: the best a model
    that ignores the features can do.
    """
    neg, pos = int(train_label_counts.get("0", 0)), int(train_label_counts.get("1", 0))
    majority = 1 if pos > neg else 0
    n = len(labels)
    p = min(max(pos / (neg + pos), 1e-7), 1 - 1e-7) if neg + pos else 0.5
    positives = int(labels.sum())
    loss = -(positives * math.log(p) + (n - positives) * math.log(1 - p)) / n if n else float("nan")
    return {
        "majority_class": majority,
        "accuracy": float(np.mean(labels == majority)) if n else float("nan"),
        "auc": CHANCE_AUC,
        "loss": loss,
        "examples": n,
        "positive_rate": positives / n if n else float("nan"),
    }


def macro_auc(labels: np.ndarray, probs: np.ndarray) -> float:
    """One-vs-rest ROC AUC averaged over the classes present in ``labels`` (a class with no
    examples has no AUC); NaN with fewer than two present."""
    present = np.unique(labels.astype(np.int64))
    if len(present) < 2:
        return float("nan")
    metric = keras.metrics.AUC(multi_label=True, num_labels=len(present))
    metric.update_state(labels.astype(np.int64)[:, None] == present[None, :], probs[:, present])
    return float(metric.result())


def majority_baseline(labels: np.ndarray, train_counts: dict[str, int]) -> dict[str, Any]:
    """Always answering the train split's most frequent class, scored on ``labels``; its loss
    is a constant prediction at the train class frequencies."""
    majority = int(max(train_counts, key=lambda k: train_counts[k])) if train_counts else 0
    total = sum(train_counts.values()) or 1
    freq = {int(k): max(v / total, 1e-7) for k, v in train_counts.items()}
    loss = float(np.mean([-np.log(freq.get(int(y), 1e-7)) for y in labels])) if len(labels) \
        else float("nan")
    return {"majority_class": majority, "examples": len(labels), "auc": 0.5, "loss": loss,
            "accuracy": float(np.mean(labels == majority)) if len(labels) else float("nan")}


def predictions(model: keras.Model, ds: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """(labels [n], model outputs [n, k]) of a finite dataset, in one pass, in order."""
    ys, ps = [], []
    call = tf.function(lambda x: model(x, training=False), reduce_retracing=True)  # a graph
    for x, y in ds:
        ys.append(y.numpy().reshape(-1))
        ps.append(np.asarray(call(x), dtype=np.float64).reshape(len(ys[-1]), -1))
    if not ys:
        return np.zeros(0), np.zeros((0, 1))
    return np.concatenate(ys), np.concatenate(ps)


def labels_of(ds: tf.data.Dataset) -> np.ndarray:
    """The labels of a finite dataset, in order (no model call)."""
    ys = [y.numpy().reshape(-1) for _, y in ds]
    return np.concatenate(ys) if ys else np.zeros(0)


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """counts[true class, predicted class]."""
    out = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(out, (labels.astype(np.int64), predicted.astype(np.int64)), 1)
    return out


def class_report(labels: np.ndarray, predicted: np.ndarray, names: list[str]) -> dict[str, Any]:
    """Accuracy, macro-F1 and per-class precision/recall/F1/support, plus the confusion matrix.

    A class never predicted has precision 0 (and F1 0): macro-F1 then shows what accuracy hides
    when a model answers the majority class.
    """
    matrix = confusion(labels, predicted, len(names))
    tp = np.diag(matrix).astype(np.float64)
    support, chosen = matrix.sum(axis=1), matrix.sum(axis=0)
    precision = np.divide(tp, chosen, out=np.zeros_like(tp), where=chosen > 0)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    present = support > 0
    return {
        "accuracy": float(tp.sum() / matrix.sum()) if matrix.sum() else float("nan"),
        "macro_f1": float(f1[present].mean()) if present.any() else float("nan"),
        "per_class": {n: {"precision": float(precision[i]), "recall": float(recall[i]),
                          "f1": float(f1[i]), "support": int(support[i])}
                      for i, n in enumerate(names)},
        "confusion_matrix": matrix.tolist(),
    }


def regression_report(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """MAE, RMSE and R² in the target's units (R² 0 = the test mean, below 0 = worse)."""
    err = pred - y
    total = float(np.sum((y - y.mean()) ** 2)) if len(y) else 0.0
    return {"mae": float(np.mean(np.abs(err))) if len(y) else float("nan"),
            "rmse": float(np.sqrt(np.mean(err**2))) if len(y) else float("nan"),
            "r2": 1.0 - float(np.sum(err**2)) / total if total else float("nan")}


def mean_baseline(y: np.ndarray, train_mean: float) -> dict[str, Any]:
    """Always predicting the train split's mean target, scored on ``y``."""
    return {"predicts": float(train_mean), "examples": len(y),
            **regression_report(y, np.full(len(y), float(train_mean)))}

# --- bootstrap intervals --------------------------------------------------------------------------
#
# Bootstrap confidence intervals of the test metrics, and of the model's lead over its baseline.
#
# A 35-row test split can show accuracy 1.0 by luck; the interval says how much the figure can
# move. The model and the baseline are scored on the same resamples, so the interval of their
# difference (paired) is what the quality gate asks to stay above zero.

LEVEL = 0.95
RESAMPLES = 200
SAMPLE = 20_000  # rows resampled at most (intervals below)
SEED = 0
Scorer = Callable[[np.ndarray, np.ndarray], dict[str, float]]


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC by ranks (ties share a rank: a constant predictor scores 0.5)."""
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(p)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _macro_f1(y: np.ndarray, pred: np.ndarray, k: int) -> float:
    matrix = np.bincount(y * k + pred, minlength=k * k).reshape(k, k).astype(np.float64)
    tp, support, chosen = np.diag(matrix), matrix.sum(axis=1), matrix.sum(axis=0)
    denom = support + chosen
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1[support > 0].mean()) if (support > 0).any() else float("nan")


def scorer(task: str, classes: int, units: Callable[[np.ndarray], np.ndarray]) -> Scorer:
    """The gate's metrics of one task from labels and model outputs, in plain numpy."""
    if task == "binary":
        return lambda y, out: {"accuracy": float(np.mean((out[:, 0] >= 0.5) == (y == 1))),
                               "auc": _auc(y, out[:, 0])}
    if task == "multiclass":
        def multi(y: np.ndarray, out: np.ndarray) -> dict[str, float]:
            pred, yi = out.argmax(axis=1), y.astype(np.int64)
            return {"accuracy": float(np.mean(pred == yi)),
                    "macro_f1": _macro_f1(yi, pred, classes)}
        return multi

    def reg(y: np.ndarray, out: np.ndarray) -> dict[str, float]:
        err = units(out[:, 0]) - units(y)
        return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}
    return reg


def intervals(score: Scorer, y: np.ndarray, out: np.ndarray, base_out: np.ndarray,
              higher: dict[str, bool], resamples: int = RESAMPLES,
              sample: int = SAMPLE) -> dict[str, Any]:
    """Percentile bootstrap intervals of each metric and of the model's lead over the baseline
    (positive = better, whichever way the metric points), on the same resamples.

    Above ``sample`` rows the resamples are drawn from a fixed random ``sample`` of the rows
    and their spread around that sample's figure is narrowed by sqrt(sample / rows) and
    centred on the full split's figure (a metric's standard error falls as 1/sqrt(rows)): the
    cost stays ``sample`` x ``resamples`` however large the test split (523 k rows x 200
    resamples took minutes at 16x flights, issue 42)."""
    rng = np.random.default_rng(SEED)
    n = len(y)
    m = min(n, sample)
    pick = np.sort(rng.choice(n, m, replace=False)) if m < n else np.arange(n)
    ys, outs, bases = y[pick], out[pick], base_out[pick]
    shrink = float(np.sqrt(m / n)) if n else 1.0
    full, full_base = (score(y, out), score(y, base_out)) if n else ({}, {})
    here, here_base = (score(ys, outs), score(ys, bases)) if m < n else (full, full_base)
    values: dict[str, list[float]] = {}
    leads: dict[str, list[float]] = {}

    def lead(name: str, model: dict[str, float], base: dict[str, float]) -> float:
        return model[name] - base[name] if higher[name] else base[name] - model[name]

    for _ in range(resamples if n else 0):
        idx = rng.integers(0, m, m)
        model, base = score(ys[idx], outs[idx]), score(ys[idx], bases[idx])
        for name, value in model.items():
            values.setdefault(name, []).append(full[name] + (value - here[name]) * shrink)
            if name in higher:
                leads.setdefault(name, []).append(lead(name, full, full_base) + shrink * (
                    lead(name, model, base) - lead(name, here, here_base)))
    bounds = {k: _bounds(v) for k, v in values.items()}
    if "accuracy" in bounds and n:  # a proportion: Wilson's interval is not empty at 0 or 1
        bounds["accuracy"] = wilson(full["accuracy"], n)
    return {"level": LEVEL, "method": "percentile bootstrap (accuracy: Wilson score)"
            + (f" of a fixed sample of {m:,} rows, scaled to {n:,}" if m < n else ""),
            "resamples": resamples, "metrics": bounds,
            "lead_over_baseline": {k: _bounds(v) for k, v in leads.items()}}


def wilson(p: float, n: int, z: float = 1.959964) -> list[float]:
    """Wilson score interval of a proportion ``p`` of ``n`` (35/35 right: [0.90, 1.0])."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The bounds reach p itself at 0 or 1 exactly (rounding left 1 - 1e-16 above a perfect score).
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return [float(min(low, p)), float(max(high, p))]


def _bounds(samples: list[float]) -> list[float]:
    clean = np.asarray([s for s in samples if np.isfinite(s)])
    if not len(clean):
        return [float("nan"), float("nan")]
    tail = (1 - LEVEL) / 2 * 100
    return [float(np.percentile(clean, tail)), float(np.percentile(clean, 100 - tail))]


# --- the gate's figures: the baseline's answers, scores and per-example losses -------------------

def baseline_outputs(manifest: Manifest, n: int, task: str | None = None) -> np.ndarray:
    """What the task's baseline answers for ``n`` rows, shaped like the model's outputs (in
    the learned space), so ``training.judge.evaluate.intervals`` scores both on the same
    resamples.
    ``task``: the run's, where the label does not say (an image label is multi-class)."""
    label, stats = manifest.schema.label, manifest.statistics
    task = task or label.task_name
    if task == REGRESSION:
        mean = float(stats.label.mean) if stats.label else 0.0
        return np.full((n, 1), math.log1p(mean) if transform_of(label) else mean)
    counts = {int(k): int(v) for k, v in stats.label_counts.items()}
    total = sum(counts.values()) or 1
    if task == BINARY:
        return np.full((n, 1), counts.get(1, 0) / total)
    majority = max(counts, key=lambda k: counts[k]) if counts else 0
    out = np.zeros((n, len(label.class_names)))
    out[:, majority] = 1.0
    return out


def metric_intervals(manifest: Manifest, rules: dict[str, str], y: np.ndarray,
                     out: np.ndarray) -> dict[str, Any]:
    """Bootstrap intervals of the test metrics and of the lead over the baseline; ``rules``:
    the task's gate (metric -> ``higher`` | ``lower_relative``)."""
    label = manifest.schema.label
    score = scorer(label.task_name, len(label.class_names), lambda v: in_units(v, label))
    higher = {m: rule == "higher" for m, rule in rules.items()}
    return intervals(score, y, out, baseline_outputs(manifest, len(y)), higher)


def gate_scores(task: str, manifest: Manifest, y: np.ndarray, out: np.ndarray,
                served: bool = False) -> dict[str, float]:
    """The gate's metrics in plain numpy: of the core's outputs (learned space), or with
    ``served`` of the exported model's (the target's units, labels as stored), so a model
    loaded from an earlier run is scored like the new one."""
    def units(v: np.ndarray) -> np.ndarray:
        return v if served else in_units(v, manifest.schema.label)

    return scorer(task, out.shape[1], units)(y, out)  # the binary scorer ignores the count


def example_losses(task: str, manifest: Manifest, y: np.ndarray,
                   out: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """(loss name, the model's per-example loss, the baseline's) for the gate's paired test:
    absolute error in the target's units for a regression (its differences are bounded by
    the answers' spread, not the target's tail), log loss against the train class
    frequencies for a classifier."""
    stats, label = manifest.statistics, manifest.schema.label
    if task == REGRESSION:
        truth = in_units(y, label)
        base = in_units(baseline_outputs(manifest, len(y), task)[:, 0], label)
        return ("absolute error", np.abs(in_units(out[:, 0], label) - truth),
                np.abs(base - truth))
    eps = 1e-7
    if task == BINARY:
        yi, p = y.astype(np.int64) == 1, np.clip(out[:, 0], eps, 1 - eps)
        prior = float(np.clip(baseline_outputs(manifest, 1, task)[0, 0], eps, 1 - eps))
        return ("log loss", -np.log(np.where(yi, p, 1 - p)),
                -np.log(np.where(yi, prior, 1 - prior)))
    k, yi = out.shape[1], y.astype(np.int64)
    counts = stats.label_counts
    freq = np.array([int(counts.get(str(i), 0)) for i in range(k)], dtype=np.float64)
    freq = np.clip(freq / (freq.sum() or 1.0), eps, 1.0)
    return ("log loss", -np.log(np.clip(out[np.arange(len(yi)), yi], eps, 1.0)),
            -np.log(freq[yi]))
