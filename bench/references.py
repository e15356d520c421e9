"""A scikit-learn reference for each gauntlet table (``bench.gauntlet``): the same split, the
same feature columns, read back from the published TFRecords, fit by HistGradientBoosting.

The model must reach 95% of the reference's accuracy or macro-F1 (multi-class), 95% of its
accuracy and of its AUC (binary; the reference's AUC from ``predict_proba``), or at most 105%
of its RMSE (regression). The reference is also put through the gate's own baseline checks
(``training.judge.gate``: the point estimates by the run's margin, the paired per-example loss test
beyond noise), so a table whose reference cannot beat the baseline is told apart (issue 39).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

TOLERANCE = 0.05
SEED = 0
# The learned space of a transformed target (``training.tasks.TRANSFORMS``' forward, in numpy):
# the gate scores a regression's outputs there.
LEARNED = {"log1p": np.log1p}


@dataclass(frozen=True)
class Reference:
    """The reference's test scores, and the gate's baseline checks applied to it (``gate``:
    each check's name, whether it passed and its detail)."""

    scores: dict[str, float]
    beats_baseline: bool
    gate: list[dict[str, Any]] = field(default_factory=list)


def split_frame(version_uri: str, split: str) -> tuple[pd.DataFrame, np.ndarray]:
    """(features as a frame, labels) of one split of a published version."""
    import tensorflow as tf

    from etl import versions
    from training.data.tabular import compression_type, feature_specs, shard_files

    manifest = versions.read_manifest(version_uri)
    specs, label = feature_specs(manifest), manifest.schema.label.name
    ds = tf.data.TFRecordDataset(shard_files(version_uri, split, manifest),
                                 compression_type=compression_type(manifest))
    cols: dict[str, list[np.ndarray]] = {}
    for batch in ds.batch(4096).map(lambda b: tf.io.parse_example(b, specs)):
        for name, value in batch.items():
            cols.setdefault(name, []).append(value.numpy())
    data = {k: np.concatenate(v) for k, v in cols.items()}
    y = data.pop(label)
    frame = pd.DataFrame(data)
    for name, feat in manifest.schema.features.items():
        if feat.kind == "categorical":
            frame[name] = frame[name].map(
                lambda v: v.decode() if isinstance(v, bytes) else str(v)).astype("category")
    return frame, y


MAX_CATEGORIES = 255  # HistGradientBoosting's limit on a categorical feature's values


def aligned(x_train: pd.DataFrame, x_test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both splits' categorical columns on the train split's categories (a value train lacks:
    missing); one with more than ``MAX_CATEGORIES`` (HistGradientBoosting refuses the fit)
    enters as its category's code, a number."""
    x_test = x_test.astype({c: pd.CategoricalDtype(x_train[c].cat.categories)
                            for c in x_train.select_dtypes("category")})
    wide = [c for c in x_train.select_dtypes("category")
            if len(x_train[c].cat.categories) > MAX_CATEGORIES]
    codes = [frame.assign(**{c: frame[c].cat.codes.astype(np.float64).replace(-1.0, np.nan)
                             for c in wide}) for frame in (x_train, x_test)]
    return codes[0], codes[1]


def reference(version_uri: str, task: str, margin: float | None = None) -> Reference:
    """HistGradientBoosting fit on train, scored on test (eval unused: its defaults), then
    judged against the task's baseline by the gate's rules (``margin``: the run's, from its
    metrics.json; else the training default)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import accuracy_score, f1_score, mean_squared_error, roc_auc_score

    x_train, y_train = split_frame(version_uri, "train")
    x_test, y_test = split_frame(version_uri, "test")
    x_train, x_test = aligned(x_train, x_test)
    kind = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    model = kind(categorical_features="from_dtype", random_state=SEED).fit(x_train, y_train)
    pred = model.predict(x_test)
    if task == "regression":
        scores = {"rmse": math.sqrt(mean_squared_error(y_test, pred))}
        outputs = pred.reshape(-1, 1)
    else:
        proba = model.predict_proba(x_test)
        scores = {"accuracy": float(accuracy_score(y_test, pred)),
                  "macro_f1": float(f1_score(y_test, pred, average="macro"))}
        if task == "binary":
            scores["auc"] = float(roc_auc_score(y_test, proba[:, 1]))
        outputs = _all_classes(proba, model.classes_)
    return Reference(scores, *gate_checks(version_uri, y_test, outputs, margin))


def _all_classes(proba: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``predict_proba``'s columns (the classes seen in train) as the model's outputs: P(class
    1) for a binary label, else one column per class index up to the largest seen."""
    if len(classes) == 2 and set(classes.tolist()) == {0, 1}:
        return proba[:, 1:2]
    out = np.zeros((len(proba), int(max(classes)) + 1))
    out[:, classes.astype(int)] = proba
    return out


def gate_checks(version_uri: str, y: np.ndarray, outputs: np.ndarray,
                margin: float | None) -> tuple[bool, list[dict[str, Any]]]:
    """The gate's baseline checks (``training.judge.gate``) on the reference's test outputs: does it
    beat the task's baseline by the margin, and beyond noise?"""
    from etl import versions
    from training import tasks
    from training.config import DEFAULT_GATE_CONFIDENCE, DEFAULT_MIN_MARGIN
    from training.judge import gate
    from training.judge.evaluate import gate_scores
    from training.record import Figures

    manifest = versions.read_manifest(version_uri)
    task = tasks.task_of(manifest)
    transform = manifest.schema.label.transform
    if transform:
        if transform not in LEARNED:
            raise ValueError(f"{version_uri}: label transform {transform!r} has no learned "
                             f"space here; add it to bench.references.LEARNED")
        y, outputs = LEARNED[transform](y), LEARNED[transform](outputs)
    if task.name == tasks.MULTICLASS:
        k = len(manifest.schema.label.names or ()) or outputs.shape[1]
        outputs = np.pad(outputs, ((0, 0), (0, max(k - outputs.shape[1], 0))))
    scores = gate_scores(task.name, manifest, y, outputs)
    checks = gate.evidence_checks(task, manifest, Figures.from_json(scores, "reference scores"),
                                  Figures.from_json(task.baseline(y, manifest), "its baseline"),
                                  y, outputs,
                                  DEFAULT_MIN_MARGIN if margin is None else margin,
                                  DEFAULT_GATE_CONFIDENCE)
    return all(c.passed for c in checks), [
        {"name": c.name, "passed": c.passed, "detail": c.detail} for c in checks]


def _quotient(a: float, b: float) -> float:
    """a / b of two errors: 1.0 when both are 0 (equally exact), infinite when only b is (an
    exact target, say a column's square, fitted exactly by one side only); NaN stays NaN."""
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def compare(model: dict[str, Any], ref: dict[str, float], task: str) -> dict[str, Any]:
    """Model vs reference: ratios, whether the model is within ``TOLERANCE``, and ``ratio``:
    one figure per table where higher is better and 1.0 is the reference's level (RMSE:
    reference / model; binary: the lower of the accuracy and AUC ratios, both must hold;
    multi-class: the higher of the accuracy and macro-F1 ratios, either may hold)."""
    if task == "regression":
        ratio = _quotient(model["rmse"], ref["rmse"])
        return {"metric": "rmse", "ratios": {"rmse": ratio}, "met": ratio <= 1 + TOLERANCE,
                "ratio": _quotient(ref["rmse"], model["rmse"])}
    if task == "binary":
        ratios = {m: model[m] / ref[m] if ref[m] else float("nan") for m in ("accuracy", "auc")}
        return {"metric": "accuracy and auc", "ratios": ratios,
                "met": all(r >= 1 - TOLERANCE for r in ratios.values()),
                "ratio": float(np.min(list(ratios.values())))}  # NaN if either is
    ratios = {m: model[m] / ref[m] if ref[m] else float("nan") for m in ("accuracy", "macro_f1")}
    return {"metric": "accuracy or macro_f1", "ratios": ratios,
            "met": any(r >= 1 - TOLERANCE for r in ratios.values()),
            "ratio": float(np.nanmax(list(ratios.values())))}
