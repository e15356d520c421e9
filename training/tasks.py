"""Label tasks on the training side: one object per task, chosen once from the manifest.

``schema.label.task`` (``binary`` when absent: versions published before tasks existed) picks
a ``Task`` that carries every step that depends on it: the label's encoding in the input
pipeline, the model head and what the exported model returns, loss and metrics, the test
report, the baseline a model must beat and the gate's rules and paired loss, plots and the
model card's lines. ``training.train`` calls these and never tests the task itself; a new task
is one entry in ``TASKS``. (The ETL side, label encoding and class checks, is ``etl.transform.labels``.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras
import numpy as np

from etl.versions import Manifest
from training import outputs
from training.judge import evaluate
from training.judge.evaluate import intervals, scorer
from training.models.heads import (
    BINARY,
    MULTICLASS,
    REGRESSION,
    Head,
    Serve,
    binary_head,
    class_names,
    in_units,
    linear_head,
    model_target,
    serve_units,
    softmax_head,
    transform_of,
)


@dataclass(frozen=True)
class Task:
    """The training-side stage functions of one label task.

    report(labels, outputs, manifest) -> test metrics beyond the compiled ones (labels as the
    input pipeline yields them, outputs of the core model); baseline(labels, manifest) -> the
    baseline's metrics; gate: metric -> ``higher`` | ``lower_relative``
    (``training.judge.gate``); plots(labels, outputs, manifest, folder) -> PNG files;
    about(metrics) -> model card lines.
    """

    name: str
    head: Head
    loss: Callable[[], Any]
    metrics: Callable[[], list]
    report: Callable[[np.ndarray, np.ndarray, dict[str, Any]], dict[str, Any]]
    baseline: Callable[[np.ndarray, dict[str, Any]], dict[str, Any]]
    baseline_name: str
    gate: dict[str, str]
    plots: Callable[[np.ndarray, np.ndarray, dict[str, Any], Path], list[Path]]
    about: Callable[[dict[str, Any]], tuple[str, str]]
    card_metrics: tuple[str, ...]
    output: str
    target: Callable[[dict[str, Any]], Callable | None] = lambda label: None
    serve: Serve | None = None
    curves: tuple[str, ...] = field(default=("loss",))



def task_of(manifest: Manifest) -> Task:
    """The task a version's label declares."""
    name = manifest.schema["label"].get("task", BINARY)
    if name not in TASKS:
        raise ValueError(f"manifest {manifest.dataset}/{manifest.version}: label "
                         f"task {name!r} is not one of {sorted(TASKS)}")
    return TASKS[name]


# --- binary ---------------------------------------------------------------------------------

def _binary_report(y: np.ndarray, out: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    del manifest
    return {"confusion_matrix": evaluate.confusion(y, out[:, 0] >= 0.5, 2).tolist()}


def _binary_plots(y: np.ndarray, out: np.ndarray, manifest: Manifest,
                  folder: Path) -> list[Path]:
    matrix = evaluate.confusion(y, out[:, 0] >= 0.5, 2).tolist()
    names = class_names(manifest.schema["label"])
    return [outputs.plot_confusion(matrix, names, folder / "confusion_matrix.png")]


# --- multi-class ----------------------------------------------------------------------------

def _multi_report(y: np.ndarray, out: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    names = class_names(manifest.schema["label"])
    return {**evaluate.class_report(y, out.argmax(axis=1), names),
            "auc": evaluate.macro_auc(y, out)}


def _multi_baseline(y: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    base = evaluate.majority_baseline(y.astype(np.int64),
                                      manifest.statistics.get("label_counts", {}))
    majority = np.full(len(y), base["majority_class"])
    names = class_names(manifest.schema["label"])
    base["macro_f1"] = evaluate.class_report(y, majority, names)["macro_f1"]
    return base


def _multi_plots(y: np.ndarray, out: np.ndarray, manifest: Manifest,
                 folder: Path) -> list[Path]:
    names = class_names(manifest.schema["label"])
    matrix = evaluate.confusion(y, out.argmax(axis=1), len(names)).tolist()
    return [outputs.plot_confusion(matrix, names, folder / "confusion_matrix.png")]


def _multi_about(metrics: dict[str, Any]) -> tuple[str, str]:
    base = metrics["baseline"]
    return ((f"Multi-class classifier for `{metrics['label']}` over {len(metrics['classes'])} "
            f"classes ({', '.join(map(str, metrics['classes']))}); it returns one probability "
            f"per class, in that order."),
            (f"Majority-class baseline: always predicts class {base['majority_class']} "
            f"(`{metrics['classes'][base['majority_class']]}`). Gate: blessed when test accuracy "
            f"and macro-F1 each beat the baseline by {metrics['min_margin']} and its log loss "
            f"is lower beyond noise."))


# --- regression -----------------------------------------------------------------------------

def _reg_report(y: np.ndarray, out: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    label = manifest.schema["label"]
    return evaluate.regression_report(in_units(y, label), in_units(out[:, 0], label))


def _reg_baseline(y: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    mean = float((manifest.statistics.get("label") or {}).get("mean", float("nan")))
    return evaluate.mean_baseline(in_units(y, manifest.schema["label"]), mean)


def _reg_plots(y: np.ndarray, out: np.ndarray, manifest: Manifest,
               folder: Path) -> list[Path]:
    label = manifest.schema["label"]
    return outputs.plot_regression(in_units(y, label), in_units(out[:, 0], label), folder)


def _reg_about(metrics: dict[str, Any]) -> tuple[str, str]:
    base, transform = metrics["baseline"], metrics.get("transform")
    learned = f" It learns `{transform}` of the target and returns values in the target's " \
              f"units." if transform else ""
    return (f"Regressor for `{metrics['label']}`.{learned}",
            (f"Mean-predictor baseline: always predicts the train mean {base['predicts']:.4g}. "
            f"Gate: blessed when test RMSE is at most the baseline's x (1 - "
            f"{metrics['min_margin']}) and its absolute errors are lower beyond noise. MAE, "
            f"RMSE and R² are in the target's units."))


TASKS: dict[str, Task] = {
    BINARY: Task(
        BINARY, binary_head, keras.losses.BinaryCrossentropy,
        lambda: [keras.metrics.AUC(name="auc"), keras.metrics.BinaryAccuracy(name="accuracy")],
        _binary_report, lambda y, m: evaluate.baseline(
            y.astype(np.int64), m.statistics.get("label_counts", {})),
        "majority-class", {"accuracy": "higher", "auc": "higher"}, _binary_plots,
        outputs.binary_card, ("auc", "accuracy", "loss"),
        "probability of class 1", curves=("loss", "auc", "accuracy")),
    MULTICLASS: Task(
        MULTICLASS, softmax_head, keras.losses.SparseCategoricalCrossentropy,
        lambda: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        _multi_report, _multi_baseline, "majority-class",
        {"accuracy": "higher", "macro_f1": "higher"}, _multi_plots, _multi_about,
        ("accuracy", "macro_f1", "loss"), "one probability per class, in the order of names",
        curves=("loss", "accuracy")),
    REGRESSION: Task(
        REGRESSION, linear_head, keras.losses.MeanSquaredError, list, _reg_report,
        _reg_baseline, "mean-predictor", {"rmse": "lower_relative"}, _reg_plots, _reg_about,
        ("rmse", "mae", "r2"), "the target in its own units", target=model_target,
        serve=serve_units),
}



def baseline_outputs(manifest: Manifest, n: int, task: str | None = None) -> np.ndarray:
    """What the task's baseline answers for ``n`` rows, shaped like the model's outputs (in
    the learned space), so ``training.judge.evaluate.intervals`` scores both on the same
    resamples.
    ``task``: the run's, where the label does not say (an image label is multi-class)."""
    label, stats = manifest.schema["label"], manifest.statistics
    task = task or label.get("task", BINARY)
    if task == REGRESSION:
        mean = float((stats.get("label") or {}).get("mean", 0.0))
        return np.full((n, 1), math.log1p(mean) if transform_of(label) else mean)
    counts = {int(k): int(v) for k, v in (stats.get("label_counts") or {}).items()}
    total = sum(counts.values()) or 1
    if task == BINARY:
        return np.full((n, 1), counts.get(1, 0) / total)
    majority = max(counts, key=lambda k: counts[k]) if counts else 0
    out = np.zeros((n, len(class_names(label))))
    out[:, majority] = 1.0
    return out


def metric_intervals(manifest: Manifest, y: np.ndarray, out: np.ndarray) -> dict[str, Any]:
    """Bootstrap intervals of the test metrics and of the lead over the baseline."""
    task = task_of(manifest)
    label = manifest.schema["label"]
    score = scorer(task.name, len(class_names(label)), lambda v: in_units(v, label))
    higher = {m: rule == "higher" for m, rule in task.gate.items()}
    return intervals(score, y, out, baseline_outputs(manifest, len(y)), higher)


def gate_scores(task: str, manifest: Manifest, y: np.ndarray, out: np.ndarray,
                served: bool = False) -> dict[str, float]:
    """The gate's metrics in plain numpy: of the core's outputs (learned space), or with
    ``served`` of the exported model's (the target's units, labels as stored), so a model
    loaded from an earlier run is scored like the new one."""
    def units(v: np.ndarray) -> np.ndarray:
        return v if served else in_units(v, manifest.schema["label"])

    return scorer(task, out.shape[1], units)(y, out)  # the binary scorer ignores the count


def example_losses(task: str, manifest: Manifest, y: np.ndarray,
                   out: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """(loss name, the model's per-example loss, the baseline's) for the gate's paired test:
    absolute error in the target's units for a regression (its differences are bounded by
    the answers' spread, not the target's tail), log loss against the train class
    frequencies for a classifier."""
    stats, label = manifest.statistics, manifest.schema["label"]
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
    counts = stats.get("label_counts") or {}
    freq = np.array([int(counts.get(str(i), 0)) for i in range(k)], dtype=np.float64)
    freq = np.clip(freq / (freq.sum() or 1.0), eps, 1.0)
    return ("log loss", -np.log(np.clip(out[np.arange(len(yi)), yi], eps, 1.0)),
            -np.log(freq[yi]))
