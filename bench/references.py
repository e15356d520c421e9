"""A scikit-learn reference for each public table (``bench.tables``): the same split, the same
feature columns, read back from the published TFRecords, fit by HistGradientBoosting.

``run_table`` is what a new user does -- land the file, ``etl spec init`` choosing only the
label and task, ``etl run``, ``training train`` -- then scores the reference on the test split
the model was scored on. The model must reach 95% of the reference's accuracy or macro-F1
(multi-class), 95% of its accuracy and of its AUC (binary; the reference's AUC from
``predict_proba``), or at most 105% of its RMSE (regression).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.tables import TABLES, Table, land_table

TOLERANCE = 0.05
SEED = 0


def split_frame(version_uri: str, split: str) -> tuple[pd.DataFrame, np.ndarray]:
    """(features as a frame, labels) of one split of a published version."""
    import tensorflow as tf

    from etl import versions
    from training.data.tabular import compression_type, feature_specs, shard_files

    manifest = versions.read_manifest(version_uri)
    specs, label = feature_specs(manifest), manifest["schema"]["label"]["name"]
    ds = tf.data.TFRecordDataset(shard_files(version_uri, split, manifest),
                                 compression_type=compression_type(manifest))
    cols: dict[str, list[np.ndarray]] = {}
    for batch in ds.batch(4096).map(lambda b: tf.io.parse_example(b, specs)):
        for name, value in batch.items():
            cols.setdefault(name, []).append(value.numpy())
    data = {k: np.concatenate(v) for k, v in cols.items()}
    y = data.pop(label)
    frame = pd.DataFrame(data)
    for name, feat in manifest["schema"]["features"].items():
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


def run_table(table: Table, work: Path) -> dict[str, Any]:
    """Land, draft, build and train ``table`` under ``work``; the model against the reference."""
    from etl.__main__ import main as etl_main
    from training.__main__ import main as training_main

    shutil.rmtree(work, ignore_errors=True)  # a fresh root: a new draft, a new version
    root, specs = f"file://{work / 'data'}", work / "specs"
    land_table(table, work / "data")
    spec_dir = specs / table.name
    _ok(etl_main(["spec", "init", "--name", table.name, "--source", table.raw_path,
                  "--root", root, "--label", table.label, "--task", table.task,
                  "--out", str(spec_dir), "--force"]), "spec init")
    spec = str(spec_dir / "spec.yaml")
    _ok(etl_main(["run", "--root", root, "--dataset", spec, "--interval-end", "2100-01-01"]),
        "etl run")
    from etl import storage, versions

    version_uri = versions.resolve(root, table.name, "latest")
    _ok(training_main(["train", "--root", root, "--dataset", table.name, "--run", "reference",
                       "--overwrite"]), "training train")
    metrics = storage.read_json(storage.join(root, "models", table.name,
                                             version_uri.rstrip("/").rsplit("/", 1)[-1],
                                             "reference", "metrics.json"))
    ref = reference(version_uri, table.task)
    return {"table": table.name, "task": table.task, "version_uri": version_uri,
            "examples": metrics["examples"], "model": _scalars(metrics["test"]),
            "intervals": metrics["test"].get("intervals"), "reference": ref,
            **compare(metrics["test"], ref, table.task)}


def _ok(rc: int, step: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{step} exited {rc}")


def _scalars(test: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in test.items() if isinstance(v, (int, float))}


def run_all(work: Path) -> dict[str, Any]:
    """Every public table, each in its own storage root."""
    return {name: run_table(table, work / name) for name, table in TABLES.items()}


def main() -> int:
    """``python -m bench.references [--out FILE]``: only the public tables, stored as JSON
    (``make bench`` runs the same inside its whole run, into bench/results.json)."""
    import argparse
    import json
    import logging
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", default="bench/references.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="references-") as work:
        results = run_all(Path(work))
    Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    for name, r in results.items():
        print(f"{name}: {r['metric']} ratios {r['ratios']} -> {'met' if r['met'] else 'MISSED'}")
    return 0 if all(r["met"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
