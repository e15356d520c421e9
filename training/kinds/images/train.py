"""One image training run: the image input pipeline, the CNN, the multi-class task, the outputs.

What ``training.run.train.train`` does for a version whose manifest has an image feature. An image
label is a multi-class label, so the multiclass task of ``training.tasks`` decides once what the
tabular path's task decides: the softmax head, loss and metrics, the test report (accuracy,
macro-F1, per class, macro AUC), the majority-class baseline and the gate's rules
(``training.judge.gate``: accuracy and macro-F1 beat it by ``min_margin``), the confusion
matrix plot and the model card's lines. Only the CNN and the image input pipeline are the
image path's own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from etl import storage
from etl.provenance import code_version
from etl.versions import Manifest
from training import outputs
from training.config import TrainConfig
from training.judge import gate
from training.judge.evaluate import evaluate_split, gate_scores, predictions
from training.kinds.images.config import ImageTrainConfig
from training.kinds.images.data import image_feature, make_image_dataset
from training.kinds.images.model import build_cnn
from training.models.tabular import MULTICLASS
from training.record import ModelRecord, RunOrigin, Trained, read_model_record
from training.tasks import TASKS, Task

TASK: Task = TASKS[MULTICLASS]
INPUTS = "It takes float32 images in [0, 1] of the manifest's shape; decoding is the caller's."


def fit(version_uri: str, manifest: Manifest, config: ImageTrainConfig) -> tuple[
        keras.Model, dict[str, Any]]:
    """Train with early stopping on eval loss; the model and its metrics (test report by the
    task, eval metrics, history)."""
    keras.utils.set_random_seed(config.seed)
    _, feat = image_feature(manifest)
    size = config.image_size or tuple(feat.shape[:2])
    model = build_cnn((*size, feat.shape[2]), manifest, config, TASK.head)
    model.compile(optimizer=keras.optimizers.Adam(config.learning_rate), loss=TASK.loss(),
                  metrics=TASK.metrics())
    train_ds, eval_ds, test_ds = (make_image_dataset(version_uri, s, manifest, config)
                                  for s in ("train", "eval", "test"))
    steps = max(1, math.ceil(manifest.splits["train"].num_examples / config.batch_size))
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=config.patience,
                                            restore_best_weights=True)
    start = time.perf_counter()
    history = model.fit(train_ds, epochs=config.epochs, steps_per_epoch=steps,
                        validation_data=eval_ds, callbacks=[stopper], verbose=2)
    fit_s = time.perf_counter() - start
    test, (labels, probs) = evaluate_split(model, test_ds), predictions(model, test_ds)
    test.update(TASK.report(labels, probs, manifest), examples=len(labels))
    epochs_run = len(history.history.get("loss", []))
    return model, {
        "test": test, "eval": evaluate_split(model, eval_ds), "fit_seconds": fit_s,
        "test_labels": labels, "test_outputs": probs, "test_ds": test_ds,
        "history": {k: [float(x) for x in v] for k, v in history.history.items()},
        "epochs": config.epochs, "epochs_run": epochs_run, "resumed_from_epoch": 0,
        "best_epoch": stopper.best_epoch + 1 if epochs_run else None,
        "examples_per_s": steps * epochs_run * config.batch_size / fit_s if fit_s else None}


def train_images(version_uri: str, manifest: Manifest, models_root: str, run_name: str,
                 config: TrainConfig | None = None,
                 origin: RunOrigin | None = None) -> Trained:
    """What ``training.run.train.train`` does for an image version: fit, judge, publish the run."""
    config = config or TrainConfig()
    run_uri = outputs.run_uri_for(models_root, manifest, run_name)
    done = None if config.overwrite else read_model_record(run_uri)
    if done is not None:
        return gate.stored(models_root, done, config.fail_unblessed)
    icfg = ImageTrainConfig.from_train_config(config)
    model, result = fit(version_uri, manifest, icfg)
    labels, probs = result.pop("test_labels"), result.pop("test_outputs")
    test_ds = result.pop("test_ds")
    base = TASK.baseline(labels, manifest)

    def score(current: keras.Model) -> dict[str, float]:
        return gate_scores(TASK.name, manifest, *predictions(current, test_ds), served=True)

    record = _metrics(version_uri, manifest, run_name, run_uri, icfg, base, result)
    blessing, token = gate.judge(TASK, manifest, record.test, record.baseline, (labels, probs),
                                 gate.GateRules.of(config, icfg.min_margin), models_root, score)
    record = dataclasses.replace(record, blessing=blessing,
                                 **(origin.fields() if origin else {}))
    with tempfile.TemporaryDirectory(prefix="train-images-") as work:
        out = Path(work)
        model.save(out / "model.keras")
        TASK.plots(labels, probs, manifest, out / outputs.PLOTS_DIR)
        record = dataclasses.replace(record, artifacts=outputs.write_run_files(
            out, record, dataclasses.asdict(icfg), TASK.about(record), TASK.card_metrics,
            TASK.output, INPUTS))
        outputs.publish_run(out, run_uri, record, TASK.card_metrics)
    return gate.conclude(models_root, record, blessing, token, TASK.card_metrics[0],
                         config.fail_unblessed)


def _metrics(version_uri: str, manifest: Manifest, run_name: str, run_uri: str,
             config: ImageTrainConfig, base: dict[str, Any],
             result: dict[str, Any]) -> ModelRecord:
    label = manifest.schema.label
    sha = hashlib.sha256(storage.read_bytes(storage.join(version_uri, "manifest.json")))
    return ModelRecord.from_json({"dataset": manifest.dataset, "version": manifest.version,
            "version_uri": version_uri, "label": label.name, "kind": "image",
            "task": TASK.name, "classes": None if label.names is None else list(label.names), "transform": None, "split": "test",
            "baseline": base, "min_margin": config.min_margin,
            "run": run_name, "model_uri": run_uri, "manifest_sha256": sha.hexdigest(),
            "examples": {s: v.num_examples for s, v in manifest.splits.items()},
            "device": "GPU" if tf.config.list_logical_devices("GPU") else "CPU",
            "precision": "float32", "replicas": 1, "stall_ratio": None,
            "code_version": code_version(), "hyperparameters": dataclasses.asdict(config),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **result},
        f"{version_uri}: the run's record")
