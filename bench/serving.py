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
from typing import Any

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


def measure(version_uri: str, work: Path, seconds: float = 5.0) -> dict[str, Any]:
    """Fit, export, and time the SavedModel against LightGBM on the test split."""
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
    task = task_of(manifest)
    inputs = tree_preprocess(manifest)
    target = task.target(manifest.schema["label"])

    def split(name: str, preprocess: Any = None) -> Any:
        return make_dataset(version_uri, name, manifest, config.input, training=False,
                            preprocess=preprocess, target=target)

    def matrix(name: str) -> tuple[np.ndarray, np.ndarray]:
        pairs = [(f[FEATURES].numpy(), y.numpy().reshape(-1))
                 for f, y in split(name, inputs.preprocess)]
        return np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])

    train, held, test = matrix("train"), matrix("eval"), matrix("test")
    classes = int(manifest.schema["label"].get("classes", 2))
    params = booster_params(config.model, task.name, classes, len(train[1]), config.seed)
    start = time.perf_counter()
    booster, _ = fit_booster(train, held, params, inputs.categorical, config.model)
    fit_s = time.perf_counter() - start
    parts = assemble(manifest, inputs, forest_of(booster, task.name), task.serve)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        path = Path(tmp) / "saved_model"
        start = time.perf_counter()
        export_serving(parts.full, path)
        export_s = time.perf_counter() - start
        keys = json.loads((path / SERVING_KEYS_FILE).read_text())
        start = time.perf_counter()
        serve = tf.saved_model.load(str(path)).signatures["serving_default"]
        load_s = time.perf_counter() - start
    raw: dict[str, list[np.ndarray]] = {}
    for features, _ in split("test"):
        for name, value in features.items():
            raw.setdefault(name, []).append(value.numpy())
    columns = {keys[name]: np.concatenate(parts_) for name, parts_ in raw.items()}
    rows = len(test[1])

    def served(lo: int, hi: int) -> dict[str, Any]:
        return {k: tf.constant(np.resize(v, (hi - lo, *v.shape[1:])) if hi > rows
                               else v[lo:hi]) for k, v in columns.items()}

    def call(batch: dict[str, Any]) -> Any:
        return serve(**batch)

    start = time.perf_counter()
    outputs = call(served(0, rows))
    first_call_s = time.perf_counter() - start
    want = booster.predict(test[0]).reshape(rows, -1)
    gap = min(float(np.max(np.abs(np.asarray(v, np.float64).reshape(rows, -1)[:, -want.shape[1]:]
                                  - want)))
              for v in outputs.values() if v.dtype.is_floating)
    result: dict[str, Any] = {
        "version_uri": version_uri, "test_rows": rows, "train_rows": len(train[1]),
        "trees": booster.num_trees(), "leaves": params["num_leaves"], "fit_s": fit_s,
        "export_s": export_s, "load_s": load_s, "first_call_s": first_call_s,
        "max_abs_gap_to_lightgbm": gap, "batches": {}}
    for size in BATCHES:
        starts = range(0, max(rows, size), size) if size <= rows else [0]
        tf_batches = [served(lo, min(lo + size, rows) if size <= rows else size)
                      for lo in starts]
        lgb_batches = [np.resize(test[0], (size, test[0].shape[1])) if size > rows
                       else test[0][lo:lo + size] for lo in starts]
        tf_rate = _rate(call, tf_batches, size, seconds)
        lgb_rate = _rate(booster.predict, lgb_batches, size, seconds)
        result["batches"][str(size)] = {"saved_model_rows_per_s": tf_rate,
                                        "lightgbm_rows_per_s": lgb_rate,
                                        "ratio": tf_rate / lgb_rate}
        log.info("serving: %d-row batches: SavedModel %.0f rows/s, LightGBM %.0f, %.2fx",
                 size, tf_rate, lgb_rate, tf_rate / lgb_rate)
    picks = range(0, rows, max(1, rows // LATENCY_CALLS))
    result["single_row"] = {
        "saved_model": _latency(call, [served(i, i + 1) for i in picks]),
        "lightgbm": _latency(booster.predict, [test[0][i:i + 1] for i in picks])}
    result["ratio_min"] = min(b["ratio"] for b in result["batches"].values())
    result["target"] = TARGET
    return result


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
