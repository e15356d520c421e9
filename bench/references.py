"""A scikit-learn reference for each gauntlet table (``bench.gauntlet``): the same split, the
same feature columns, read back from the published TFRecords, fit by HistGradientBoosting.

The model must reach 95% of the reference's accuracy or macro-F1 (multi-class), 95% of its
accuracy and of its AUC (binary; the reference's AUC from ``predict_proba``), or at most 105%
of its RMSE (regression).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

TOLERANCE = 0.05
SEED = 0


def split_frame(version_uri: str, split: str) -> tuple[pd.DataFrame, np.ndarray]:
    """(features as a frame, labels) of one split of a published version."""
    import tensorflow as tf

    from etl import versions
    from training.data.tabular import compression_type, feature_specs, shard_files

    manifest = versions.read_manifest(version_uri)
    specs, label = feature_specs(manifest), manifest.schema["label"]["name"]
    ds = tf.data.TFRecordDataset(shard_files(version_uri, split, manifest),
                                 compression_type=compression_type(manifest))
    cols: dict[str, list[np.ndarray]] = {}
    for batch in ds.batch(4096).map(lambda b: tf.io.parse_example(b, specs)):
        for name, value in batch.items():
            cols.setdefault(name, []).append(value.numpy())
    data = {k: np.concatenate(v) for k, v in cols.items()}
    y = data.pop(label)
    frame = pd.DataFrame(data)
    for name, feat in manifest.schema["features"].items():
        if feat["kind"] == "categorical":
            frame[name] = frame[name].map(
                lambda v: v.decode() if isinstance(v, bytes) else str(v)).astype("category")
    return frame, y


def reference(version_uri: str, task: str) -> dict[str, float]:
    """HistGradientBoosting fit on train, scored on test (eval unused: its defaults)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import accuracy_score, f1_score, mean_squared_error, roc_auc_score

    x_train, y_train = split_frame(version_uri, "train")
    x_test, y_test = split_frame(version_uri, "test")
    x_test = x_test.astype({c: pd.CategoricalDtype(x_train[c].cat.categories)
                            for c in x_train.select_dtypes("category")})
    kind = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    model = kind(categorical_features="from_dtype", random_state=SEED).fit(x_train, y_train)
    pred = model.predict(x_test)
    if task == "regression":
        return {"rmse": math.sqrt(mean_squared_error(y_test, pred))}
    out = {"accuracy": float(accuracy_score(y_test, pred)),
           "macro_f1": float(f1_score(y_test, pred, average="macro"))}
    if task == "binary":
        out["auc"] = float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]))
    return out


def compare(model: dict[str, Any], ref: dict[str, float], task: str) -> dict[str, Any]:
    """Model vs reference: ratios and whether the model is within ``TOLERANCE``."""
    if task == "regression":
        ratio = model["rmse"] / ref["rmse"]
        return {"metric": "rmse", "ratios": {"rmse": ratio}, "met": ratio <= 1 + TOLERANCE}
    if task == "binary":
        ratios = {m: model[m] / ref[m] if ref[m] else float("nan") for m in ("accuracy", "auc")}
        return {"metric": "accuracy and auc", "ratios": ratios,
                "met": all(r >= 1 - TOLERANCE for r in ratios.values())}
    ratios = {m: model[m] / ref[m] if ref[m] else float("nan") for m in ("accuracy", "macro_f1")}
    return {"metric": "accuracy or macro_f1", "ratios": ratios,
            "met": any(r >= 1 - TOLERANCE for r in ratios.values())}
