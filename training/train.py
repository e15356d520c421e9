"""One training run: version in, published model (or a clear refusal) out.

``train`` is what the Airflow task and ``python -m training train`` call. It reads the
manifest (refusing incomplete versions), trains under the device's strategy with per-epoch
backups in storage, evaluates on the held-out test split, and publishes only a model that
beats the majority-class baseline; the run folder's metrics.json is written last.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras

from etl import storage, versions
from etl.provenance import code_version
from training import adapt, outputs
from training.callbacks import EpochSummaries, EpochTimer, StorageBackupAndRestore, delete_backup
from training.config import RunOrigin, TrainConfig
from training.data.images import image_feature
from training.data.tabular import make_dataset
from training.device import DeviceSetup, precision_policy, setup_device
from training.evaluate import ModelQualityError, evaluate_split, labels_of, predictions
from training.models.tabular import build_models, compile_model
from training.sanity import check_splits
from training.tasks import TASKS as TASKS_BY_NAME
from training.tasks import Task, metric_intervals, task_of
from training.train_images import train_images

__all__ = ["ModelQualityError", "TrainConfig", "train"]

log = logging.getLogger(__name__)

EVAL_SPLIT, TEST_SPLIT = "eval", "test"


def train(
    version_uri: str,
    models_root: str,
    run_name: str,
    config: TrainConfig | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    origin: RunOrigin | None = None,
) -> dict[str, Any]:
    """Train on a published version and publish the model under ``models_root``.

    Args:
        version_uri: URI of a complete version (``datasets/<name>/<version>``).
        models_root: ``<storage root>/models``.
        run_name: Run folder name (e.g. derived from the Airflow run id); a retry with the
            same name resumes from the last finished epoch.
        config: Run settings; None = the defaults.
        callbacks: Extra Keras callbacks, run after ours.
        origin: The orchestrator run that started this one (written to metrics.json).

    Returns:
        ``{"model_uri": run folder URI, "metrics": contents of metrics.json}``.

    Raises:
        IncompleteVersionError: the version has no manifest.
        ModelQualityError: the model does not beat the baseline by ``config.min_margin``.
    """
    config = config or TrainConfig()
    manifest = versions.read_manifest(version_uri)  # raises IncompleteVersionError
    if image_feature(manifest) is not None:  # image versions: CNN + image input pipeline
        return train_images(version_uri, manifest, models_root, run_name, config, origin)
    manifest_sha = hashlib.sha256(storage.read_bytes(storage.join(version_uri, "manifest.json")))
    run_uri = outputs.run_uri_for(models_root, manifest, run_name)
    done = storage.join(run_uri, outputs.METRICS_FILE)
    if not config.overwrite and storage.exists(done):
        log.info("run %s is already complete: returning its metrics", run_uri)
        return {"model_uri": run_uri, "metrics": storage.read_json(done)}
    config, weights = _adapted(config, manifest)
    setup = setup_device(config.precision, config.devices)
    keras.utils.set_random_seed(config.seed)
    with tempfile.TemporaryDirectory(prefix="train-", dir=config.work_dir) as work, \
            precision_policy(setup.precision):
        work_dir = Path(work)
        metrics = _fit_and_evaluate(version_uri, manifest, run_uri, setup, config, work_dir,
                                    callbacks, weights)
        metrics.update(manifest_sha256=manifest_sha.hexdigest(), run=run_name, model_uri=run_uri,
                       **(origin.fields() if origin else {}))
        out = work_dir / "run"
        metrics["artifacts"] = _write_artifacts(out, metrics, config)
        outputs.publish_run(out, run_uri, metrics, TASKS_BY_NAME[metrics["task"]].card_metrics)
    delete_backup(storage.join(run_uri, outputs.BACKUP_DIR))
    return {"model_uri": run_uri, "metrics": metrics}


def _adapted(config: TrainConfig,
             manifest: dict[str, Any]) -> tuple[TrainConfig, dict[int, float] | None]:
    """The spec's training settings, then the data-dependent choices, each logged once."""
    config, lines = adapt.plan(adapt.spec_overrides(config, manifest), manifest)
    weights, why = adapt.class_weight(config, manifest)
    for line in [*lines, why]:
        log.info("train %s: %s", manifest["dataset"], line)
    return config, weights


def _fit_and_evaluate(
    version_uri: str, manifest: dict[str, Any], run_uri: str, setup: DeviceSetup,
    config: TrainConfig, work_dir: Path, extra: Sequence[keras.callbacks.Callback],
    weights: dict[int, float] | None = None,
) -> dict[str, Any]:
    """Fit with backups and early stopping, gate on the test split, save the model locally."""
    icfg, task = config.input, task_of(manifest)
    steps, per_call = epoch_steps(manifest, config, setup.replicas)
    parts = build_models(manifest, config.model, core_scope=setup.strategy.scope(),
                         head=task.head, serve=task.serve)
    with setup.strategy.scope():
        model = compile_model(parts.core, config.model, per_call, config.jit_compile,
                              loss=task.loss(), metrics=task.metrics())
    # preprocessing runs in the tf.data feature map; the train step sees ids and numbers
    target = task.target(manifest["schema"]["label"])
    train_ds, eval_ds, test_ds = (
        make_dataset(version_uri, split, manifest, icfg, preprocess=parts.preprocess,
                     target=target)
        for split in ("train", EVAL_SPLIT, TEST_SPLIT)
    )
    check_splits(manifest, {s: labels_of(ds) for s, ds in (("eval", eval_ds), ("test", test_ds))},
                 config.min_eval_examples)
    stall = _stall_ratio(model, train_ds, setup, config) if config.measure_stall_batches else None
    backup = StorageBackupAndRestore(storage.join(run_uri, outputs.BACKUP_DIR), work_dir / "backup")
    timer = EpochTimer(icfg.batch_size, steps)
    stopper = keras.callbacks.EarlyStopping(
        monitor="val_loss", patience=config.patience, restore_best_weights=True)
    tensorboard = EpochSummaries(work_dir / "run" / "logs")
    start = time.perf_counter()
    history = model.fit(
        train_ds, epochs=config.epochs, steps_per_epoch=steps, validation_data=eval_ds,
        callbacks=[backup, stopper, timer, tensorboard, *extra], verbose=2, shuffle=False,
        class_weight=weights,
    )
    fit_s = time.perf_counter() - start
    test, (labels, out) = evaluate_split(model, test_ds), predictions(model, test_ds)
    test.update(task.report(labels, out, manifest), examples=len(labels),
                intervals=metric_intervals(manifest, labels, out))
    base, ev = task.baseline(labels, manifest), evaluate_split(model, eval_ds)
    log.debug("test: %s; baseline: %s", test, base)  # the run summary line says this
    task.check(test, base, config.min_margin)
    task.plots(labels, out, manifest, work_dir / "run" / outputs.PLOTS_DIR)
    parts.full.save(work_dir / "run" / "model.keras")  # raw values in: serving needs no code
    parts.full.export(str(work_dir / "run" / "saved_model"), verbose=False)
    return _metrics(manifest, version_uri, setup, config, history.history, backup, stopper,
                    timer, fit_s, test, ev, base, stall)


def epoch_steps(manifest: dict[str, Any], config: TrainConfig,
                replicas: int = 1) -> tuple[int, int]:
    """(steps per epoch, steps per execution): an epoch is a whole number of executions,
    since Keras runs every execution in full (13 steps at 16 per call would run 16).

    Over several replicas Keras 3's multi-step loop fails in graph construction ("You must
    feed a value for placeholder tensor", keras-team/keras#19246, open), so each step is
    its own call there; tests/test_training_gpu_paths.py shows the failure and the fix.
    """
    steps = config.steps_per_epoch or max(
        1, math.ceil(manifest["splits"]["train"]["num_examples"] / config.input.batch_size))
    per_call = min(config.steps_per_execution, steps)
    if replicas > 1 and per_call > 1:
        log.warning("%d replicas: one train step per call instead of %d (keras-team/keras#19246)",
                    replicas, per_call)
        per_call = 1
    return math.ceil(steps / per_call) * per_call, per_call


def _metrics(manifest: dict[str, Any], version_uri: str, setup: DeviceSetup, config: TrainConfig,
             history: dict[str, list], backup: StorageBackupAndRestore,
             stopper: keras.callbacks.EarlyStopping, timer: EpochTimer, fit_s: float,
             test: dict, ev: dict, base: dict, stall: float | None) -> dict[str, Any]:
    epochs_run, label = len(history.get("loss", [])), manifest["schema"]["label"]
    return {
        "dataset": manifest["dataset"], "version": manifest["version"], "version_uri": version_uri,
        "label": label["name"], "task": task_of(manifest).name, "classes": label.get("names"),
        "transform": label.get("transform"), "split": TEST_SPLIT,
        "test": test, "eval": ev, "baseline": base, "min_margin": config.min_margin,
        "passed_quality_gate": True,
        "examples": {s: manifest["splits"][s]["num_examples"] for s in ("train", EVAL_SPLIT, TEST_SPLIT)},
        "examples_per_s": timer.examples_per_s(), "fit_seconds": fit_s, "stall_ratio": stall,
        "device": setup.device, "precision": setup.precision, "replicas": setup.replicas,
        "epochs": config.epochs, "epochs_run": epochs_run,
        "resumed_from_epoch": backup.resumed_from_epoch,
        "best_epoch": stopper.best_epoch + 1 if epochs_run else None,  # 1-based, absolute
        "history": {k: [float(x) for x in v] for k, v in history.items()},
        "code_version": code_version(),  # the same stamp the ETL puts in manifests
        "hyperparameters": dataclasses.asdict(config),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _write_artifacts(out: Path, metrics: dict[str, Any], config: TrainConfig) -> list[str]:
    """Plots, model card and ``label.json`` beside the saved model and TensorBoard logs."""
    task: Task = TASKS_BY_NAME[metrics["task"]]
    return outputs.write_run_files(out, metrics, dataclasses.asdict(config), task.about(metrics),
                                   task.card_metrics, task.output)


def _stall_ratio(model: keras.Model, train_ds: Any, setup: DeviceSetup, config: TrainConfig) -> float:
    """Stall ratio on a copy of the model, so the measurement does not train the real one."""
    from training.bench import stall_ratio

    with setup.strategy.scope():
        clone = keras.models.clone_model(model)
        compile_model(clone, config.model, config.steps_per_execution, config.jit_compile,
                      loss=model.loss, metrics=[])
    return stall_ratio(clone, train_ds, config.measure_stall_batches)["stall_ratio"]
