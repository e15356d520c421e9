"""One image training run: the image input pipeline, the CNN, the accuracy gate, the outputs.

What ``training.train.train`` does for a version whose manifest has an image feature: fit with
early stopping on eval loss, refuse a model that does not beat the majority class by
``min_margin``, and publish the run folder with metrics.json last.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import keras
import numpy as np

from training.config import ImageTrainConfig, TrainConfig
from training.data.images import image_feature, make_image_dataset
from training.evaluate import check_accuracy, macro_auc, majority_baseline
from training.models.images import build_cnn


def fit(version_uri: str, manifest: dict[str, Any], config: ImageTrainConfig) -> tuple[
        keras.Model, dict[str, Any]]:
    """Train with early stopping on eval loss; returns the model and its metrics."""
    keras.utils.set_random_seed(config.seed)
    _, feat = image_feature(manifest)
    size = config.image_size or tuple(feat["shape"][:2])
    model = build_cnn((*size, feat["shape"][2]), manifest["schema"]["label"]["classes"], config)
    train_ds, eval_ds, test_ds = (make_image_dataset(version_uri, s, manifest, config)
                                  for s in ("train", "eval", "test"))
    steps = max(1, math.ceil(manifest["splits"]["train"]["num_examples"] / config.batch_size))
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=config.patience,
                                            restore_best_weights=True)
    start = time.perf_counter()
    history = model.fit(train_ds, epochs=config.epochs, steps_per_epoch=steps,
                        validation_data=eval_ds, callbacks=[stopper], verbose=2)
    fit_s = time.perf_counter() - start
    test = {k: float(v) for k, v in model.evaluate(test_ds, return_dict=True, verbose=0).items()}
    labels = np.concatenate([y.numpy() for _, y in test_ds])
    test["auc"] = macro_auc(labels, model.predict(test_ds, verbose=0))
    return model, {"test": test, "fit_seconds": fit_s, "test_labels": labels,
                   "history": {k: [float(x) for x in v] for k, v in history.history.items()},
                   "epochs_run": len(history.history.get("loss", [])),
                   "examples_per_s": steps * len(history.history.get("loss", [])) *
                   config.batch_size / fit_s if fit_s else None}


def train_images(version_uri: str, manifest: dict[str, Any], models_root: str, run_name: str,
                 config: TrainConfig | None = None) -> dict[str, Any]:
    """What ``training.train.train`` does for an image version: fit, gate, publish the run."""
    import tempfile
    from pathlib import Path

    from etl import storage
    from etl.provenance import code_version
    from training import outputs

    run_uri = outputs.run_uri_for(models_root, manifest, run_name)
    done = storage.join(run_uri, outputs.METRICS_FILE)
    if not (config and config.overwrite) and storage.exists(done):
        return {"model_uri": run_uri, "metrics": storage.read_json(done)}
    icfg = ImageTrainConfig.from_train_config(config or TrainConfig())
    model, result = fit(version_uri, manifest, icfg)
    labels = result.pop("test_labels")
    base = majority_baseline(labels, manifest["statistics"].get("label_counts", {}))
    check_accuracy(result["test"], base, icfg.min_margin)
    metrics = {"dataset": manifest["dataset"], "version": manifest["version"],
               "version_uri": version_uri, "label": manifest["schema"]["label"]["name"],
               "kind": "image", "split": "test", "baseline": base, "min_margin": icfg.min_margin,
               "passed_quality_gate": True, "run": run_name, "model_uri": run_uri,
               "examples": {s: v["num_examples"] for s, v in manifest["splits"].items()},
               "code_version": code_version(), "hyperparameters": dataclasses.asdict(icfg),
               "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **result}
    with tempfile.TemporaryDirectory(prefix="train-images-") as work:
        out = Path(work)
        model.save(out / "model.keras")
        outputs.plot_learning_curves(metrics["history"], out / outputs.PLOTS_DIR)
        (out / outputs.CARD_FILE).write_text(
            f"# Model card: {metrics['dataset']} / {metrics['version']} / {run_name}\n\n"
            f"Small CNN over {manifest['schema']['label']['classes']} classes; input: float32 "
            f"images in [0, 1]. Test accuracy {result['test']['accuracy']:.4f} vs majority-class "
            f"baseline {base['accuracy']:.4f} (margin required {icfg.min_margin}).\n")
        metrics["artifacts"] = sorted(p.relative_to(out).as_posix() for p in out.iterdir())
        outputs.publish_run(out, run_uri, metrics)
    return {"model_uri": run_uri, "metrics": metrics}
