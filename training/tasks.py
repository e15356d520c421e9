"""Label tasks on the training side: one object per task, chosen once from the manifest.

``schema.label.task`` (``binary`` when absent: versions published before tasks existed) picks
a ``Task`` that carries every step that depends on it: the label's encoding in the input
pipeline and the model head with what the exported model returns (``training.models.tabular``),
loss and metrics, the test report and the baseline a model must beat
(``training.judge.evaluate``), the gate's rules (``training.judge.gate``), plots and the model
card's lines (``training.outputs``). A run (``training.run.train``, or the images kind's)
calls these and never tests the task itself; a new task is one entry in ``TASKS``. (The ETL
side, label encoding and class checks, is ``etl.spec.labels``.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras
import numpy as np

from etl.versions import Manifest
from etl.versions.segment import LabelSchema
from training import outputs
from training.judge import evaluate
from training.models.tabular import (
    BINARY,
    MULTICLASS,
    REGRESSION,
    Head,
    Serve,
    binary_head,
    in_units,
    linear_head,
    model_target,
    serve_units,
    softmax_head,
)
from training.record import ModelRecord


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
    about: Callable[[ModelRecord], tuple[str, str]]
    card_metrics: tuple[str, ...]
    output: str
    target: Callable[[LabelSchema], Callable | None] = lambda label: None
    serve: Serve | None = None
    curves: tuple[str, ...] = field(default=("loss",))



def task_of(manifest: Manifest) -> Task:
    """The task a version's label declares."""
    name = manifest.schema.label.task_name
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
    names = manifest.schema.label.class_names
    return [outputs.plot_confusion(matrix, names, folder / "confusion_matrix.png")]


# --- multi-class ----------------------------------------------------------------------------

def _multi_report(y: np.ndarray, out: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    names = manifest.schema.label.class_names
    return {**evaluate.class_report(y, out.argmax(axis=1), names),
            "auc": evaluate.macro_auc(y, out)}


def _multi_baseline(y: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    base = evaluate.majority_baseline(y.astype(np.int64),
                                      manifest.statistics.label_counts)
    majority = np.full(len(y), base["majority_class"])
    names = manifest.schema.label.class_names
    base["macro_f1"] = evaluate.class_report(y, majority, names)["macro_f1"]
    return base


def _multi_plots(y: np.ndarray, out: np.ndarray, manifest: Manifest,
                 folder: Path) -> list[Path]:
    names = manifest.schema.label.class_names
    matrix = evaluate.confusion(y, out.argmax(axis=1), len(names)).tolist()
    return [outputs.plot_confusion(matrix, names, folder / "confusion_matrix.png")]


def _multi_about(metrics: ModelRecord) -> tuple[str, str]:
    base = metrics.baseline
    return ((f"Multi-class classifier for `{metrics.label}` over {len(metrics.classes)} "
            f"classes ({', '.join(map(str, metrics.classes))}); it returns one probability "
            f"per class, in that order."),
            (f"Majority-class baseline: always predicts class {base.majority_class} "
            f"(`{metrics.classes[base.majority_class]}`). Gate: blessed when test accuracy "
            f"and macro-F1 each beat the baseline by {metrics.min_margin} and its log loss "
            f"is lower beyond noise."))


# --- regression -----------------------------------------------------------------------------

def _reg_report(y: np.ndarray, out: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    label = manifest.schema.label
    return evaluate.regression_report(in_units(y, label), in_units(out[:, 0], label))


def _reg_baseline(y: np.ndarray, manifest: Manifest) -> dict[str, Any]:
    moments = manifest.statistics.label
    mean = float(moments.mean) if moments else float("nan")
    return evaluate.mean_baseline(in_units(y, manifest.schema.label), mean)


def _reg_plots(y: np.ndarray, out: np.ndarray, manifest: Manifest,
               folder: Path) -> list[Path]:
    label = manifest.schema.label
    return outputs.plot_regression(in_units(y, label), in_units(out[:, 0], label), folder)


def _reg_about(metrics: ModelRecord) -> tuple[str, str]:
    base, transform = metrics.baseline, metrics.transform
    learned = f" It learns `{transform}` of the target and returns values in the target's " \
              f"units." if transform else ""
    choice = metrics.target_choice
    if choice:
        learned += f" Target decided on the data: {choice.why}."
    return (f"Regressor for `{metrics.label}`.{learned}",
            (f"Mean-predictor baseline: always predicts the train mean {base.predicts:.4g}. "
            f"Gate: blessed when test RMSE is at most the baseline's x (1 - "
            f"{metrics.min_margin}) and its absolute errors are lower beyond noise. MAE, "
            f"RMSE and R² are in the target's units."))


TASKS: dict[str, Task] = {
    BINARY: Task(
        BINARY, binary_head, keras.losses.BinaryCrossentropy,
        lambda: [keras.metrics.AUC(name="auc"), keras.metrics.BinaryAccuracy(name="accuracy")],
        _binary_report, lambda y, m: evaluate.baseline(
            y.astype(np.int64), m.statistics.label_counts),
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
