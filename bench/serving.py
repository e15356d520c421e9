"""`make bench` part `serving` (issue 42): the exported trees against LightGBM, same rows.

One booster is fitted on the flights version (the project's tree path: ``tree_preprocess``,
``fit_booster``, ``forest_of``, ``assemble``, ``export_serving``), then in the same process:
the SavedModel's ``serving_default`` on the test split's raw rows, and LightGBM's ``predict``
of that booster on the same rows' feature matrix, in batches of ``BATCHES`` rows (the test
split tiled when a batch is larger than it); single-row latency of both beside it. Target:
the SavedModel at >= 0.5x LightGBM's rows/s. Both answers are checked equal first.

``python -m bench.serving --version-uri file://.../datasets/flights/<id>`` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

log = logging.getLogger("bench")
BATCHES = (4096, 65536)
TARGET = 0.5  # the SavedModel's rows/s over LightGBM's
LATENCY_CALLS = 200


def _rate(call: Any, batches: list[Any], rows: int, seconds: float) -> float:
    """Rows/s of ``call`` cycling over ``batches`` for at least ``seconds`` (one warm-up)."""
    call(batches[0])
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for batch in batches:
            call(batch)
            done += rows
    return done / (time.perf_counter() - start)


def _latency(call: Any, rows: list[Any]) -> dict[str, float]:
    call(rows[0])
    times = []
    for row in rows:
        start = time.perf_counter()
        call(row)
        times.append(time.perf_counter() - start)
    return {"p50_ms": float(np.percentile(times, 50) * 1e3),
            "p99_ms": float(np.percentile(times, 99) * 1e3)}


class Fitted(NamedTuple):
    """The booster, its exported SavedModel's ``serving_default`` and the test split both
    ways: raw columns keyed as the signature wants them, and the trees' feature matrix."""

    booster: Any
    serve: Any
    columns: dict[str, np.ndarray]
    matrix: np.ndarray
    figures: dict[str, Any]


def fit_and_export(version_uri: str, work: Path) -> Fitted:
    """The project's tree path on the version, exported and loaded back."""
    import tensorflow as tf

    from etl import versions
    from training.config import TrainConfig
    from training.data.tabular import make_dataset
    from training.models.tabular import SERVING_KEYS_FILE, export_serving
    from training.models.trees import (
        FEATURES,
        assemble,
        booster_params,
        fit_booster,
        forest_of,
        tree_preprocess,
    )
    from training.tasks import task_of

    manifest, config = versions.read_manifest(version_uri), TrainConfig()
    task, inputs = task_of(manifest), tree_preprocess(manifest)
    target = task.target(manifest.schema.label)

    def split(name: str, preprocess: Any = None) -> Any:
        return make_dataset(version_uri, name, manifest, config.input, training=False,
                            preprocess=preprocess, target=target)

    def matrix(name: str) -> tuple[np.ndarray, np.ndarray]:
        pairs = [(f[FEATURES].numpy(), y.numpy().reshape(-1))
                 for f, y in split(name, inputs.preprocess)]
        return np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])

    train, held, test = matrix("train"), matrix("eval"), matrix("test")
    classes = int(manifest.schema.label.classes or 2)
    params = booster_params(config.model, task.name, classes, len(train[1]), config.seed)
    start = time.perf_counter()
    booster, _ = fit_booster(train, held, params, inputs.categorical, config.model)
    figures = {"version_uri": version_uri, "test_rows": len(test[1]),
               "train_rows": len(train[1]), "leaves": params["num_leaves"],
               "fit_s": time.perf_counter() - start, "trees": booster.num_trees()}
    parts = assemble(manifest, inputs, forest_of(booster, task.name), task.serve)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        path = Path(tmp) / "saved_model"
        start = time.perf_counter()
        export_serving(parts.full, path)
        figures["export_s"] = time.perf_counter() - start
        keys = json.loads((path / SERVING_KEYS_FILE).read_text())
        serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    raw: dict[str, list[np.ndarray]] = {}
    for features, _ in split("test"):
        for name, value in features.items():
            raw.setdefault(name, []).append(value.numpy())
    columns = {keys[name]: np.concatenate(values) for name, values in raw.items()}
    return Fitted(booster, serve, columns, test[0], figures)


def measure(version_uri: str, work: Path, seconds: float = 5.0) -> dict[str, Any]:
    """Fit, export, and time the SavedModel against LightGBM on the test split."""
    import tensorflow as tf

    fitted = fit_and_export(version_uri, work)
    booster, matrix, rows = fitted.booster, fitted.matrix, len(fitted.matrix)

    def served(lo: int, hi: int) -> dict[str, Any]:
        return {k: tf.constant(np.resize(v, (hi - lo, *v.shape[1:])) if hi > rows
                               else v[lo:hi]) for k, v in fitted.columns.items()}

    def call(batch: dict[str, Any]) -> Any:
        return fitted.serve(**batch)

    start = time.perf_counter()
    outputs = call(served(0, rows))
    result = {**fitted.figures, "first_call_s": time.perf_counter() - start,
              "max_abs_gap_to_lightgbm": gap(outputs, booster.predict(matrix)), "batches": {}}
    for size in BATCHES:
        starts = range(0, rows, size) if size <= rows else [0]
        tf_rate = _rate(call, [served(lo, min(lo + size, rows) if size <= rows else size)
                               for lo in starts], size, seconds)
        lgb_rate = _rate(booster.predict, [np.resize(matrix, (size, matrix.shape[1]))
                                           if size > rows else matrix[lo:lo + size]
                                           for lo in starts], size, seconds)
        result["batches"][str(size)] = {"saved_model_rows_per_s": tf_rate,
                                        "lightgbm_rows_per_s": lgb_rate,
                                        "ratio": tf_rate / lgb_rate}
        log.info("serving: %d-row batches: SavedModel %.0f rows/s, LightGBM %.0f, %.2fx",
                 size, tf_rate, lgb_rate, tf_rate / lgb_rate)
    picks = range(0, rows, max(1, rows // LATENCY_CALLS))
    result["single_row"] = {
        "saved_model": _latency(call, [served(i, i + 1) for i in picks]),
        "lightgbm": _latency(booster.predict, [matrix[i:i + 1] for i in picks])}
    result["ratio_min"] = min(b["ratio"] for b in result["batches"].values())
    result["target"] = TARGET
    return result


def gap(outputs: dict[str, Any], want: np.ndarray) -> float:
    """The smallest largest absolute difference between any float output of the signature
    and LightGBM's predictions (its last columns: a binary head serves [p] or [1 - p, p])."""
    want = want.reshape(len(want), -1)
    return min(float(np.max(np.abs(np.asarray(v, np.float64).reshape(len(want), -1)
                                   [:, -want.shape[1]:] - want)))
               for v in outputs.values() if v.dtype.is_floating)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version-uri", required=True, help="a published flights version")
    parser.add_argument("--work", default=".bench", help="scratch folder")
    parser.add_argument("--seconds", type=float, default=5.0, help="timing per figure")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(args.version_uri, Path(args.work), args.seconds), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
