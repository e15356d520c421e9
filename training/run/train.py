"""One training run: version in, published model (or a clear refusal) out.

``train`` is what the Airflow task and ``python -m training train`` call. It reads the
manifest (refusing incomplete versions and splits that cannot be evaluated), trains under the
device's strategy with per-epoch backups in storage, evaluates on the held-out test split and
writes every model with its metrics, plots, card and the gate's verdict
(``training.judge.gate``); metrics.json is written last. Only a blessed model no worse than the
current one becomes the dataset's current model. A version with an image feature is trained by
the images kind (``training.kinds.images``), imported only for one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import keras

from etl import storage, versions
from etl.provenance import code_version
from etl.versions import Manifest
from training import outputs
from training.config import TrainConfig
from training.data.tabular import IMAGE_KIND, make_dataset
from training.judge import gate
from training.judge.evaluate import (
    gate_scores,
    labels_of,
    metric_intervals,
    predictions,
    scores_of,
)
from training.judge.gate import GateRules, ModelNotBlessedError, check_splits
from training.models.tabular import export_serving
from training.record import (
    Blessing,
    CrossValidation,
    ModelRecord,
    PhaseTimes,
    RunOrigin,
    TargetChoice,
    Trained,
    TunedUse,
    read_model_record,
)
from training.run import families
from training.run.choice import (
    choose,
    choose_target,
    class_weight,
    plan,
    spec_overrides,
    tuned_overrides,
)
from training.run.families import EVAL_SPLIT, TEST_SPLIT
from training.run.runtime import DeviceSetup, Phases, delete_backup, precision_policy, setup_device
from training.tasks import TASKS as TASKS_BY_NAME
from training.tasks import Task, task_of

__all__ = ["ModelNotBlessedError", "TrainConfig", "train"]

log = logging.getLogger(__name__)



def train(
    version_uri: str,
    models_root: str,
    run_name: str,
    config: TrainConfig | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    origin: RunOrigin | None = None,
) -> Trained:
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
        ``training.record.Trained``: the run folder, its record (metrics.json), the
        gate's ``Blessing``, whether this run is now the dataset's current model.

    Raises:
        IncompleteVersionError: the version has no manifest.
        EvaluationSplitError: the test split cannot be evaluated (nothing is trained).
        ModelNotBlessedError: ``config.fail_unblessed`` and the model, written, is not blessed.
    """
    config = config or TrainConfig()
    manifest = versions.read_manifest(version_uri)  # raises IncompleteVersionError
    if any(f.kind == IMAGE_KIND for f in manifest.schema.features.values()):
        # the one place a version's kind is chosen: the images kind (its own input pipeline,
        # CNN and run) is imported for an images version only
        from training.kinds.images.train import train_images

        return train_images(version_uri, manifest, models_root, run_name, config, origin)
    manifest_sha = hashlib.sha256(storage.read_bytes(storage.join(version_uri, "manifest.json")))
    run_uri = outputs.run_uri_for(models_root, manifest, run_name)
    done = None if config.overwrite else read_model_record(run_uri)
    if done is not None:
        log.info("run %s is already complete: returning its metrics", run_uri)
        return gate.stored(models_root, done, config.fail_unblessed)
    config, weights, tuned = _adapted(config, manifest, models_root)
    setup = setup_device(config.precision, config.devices)
    keras.utils.set_random_seed(config.seed)
    with tempfile.TemporaryDirectory(prefix="train-", dir=config.work_dir) as work, \
            precision_policy(setup.precision):
        work_dir = Path(work)
        record, evidence, manifest = _fit_and_evaluate(version_uri, manifest, run_uri, setup,
                                                       config, work_dir, callbacks, weights)
        blessing, token = _judge(version_uri, manifest, models_root, config, record, evidence)
        record = dataclasses.replace(
            record, manifest_sha256=manifest_sha.hexdigest(), run=run_name, model_uri=run_uri,
            blessing=blessing, tuned=tuned, **(origin.fields() if origin else {}))
        out = work_dir / "run"
        record = dataclasses.replace(record, artifacts=_write_artifacts(out, record, config))
        outputs.publish_run(out, run_uri, record, TASKS_BY_NAME[str(record.task)].card_metrics)
    delete_backup(storage.join(run_uri, outputs.BACKUP_DIR))
    return gate.conclude(models_root, record, blessing, token,
                         task_of(manifest).card_metrics[0], config.fail_unblessed)


class Evidence(NamedTuple):
    """What the verdict judges: (labels, outputs) against the baseline (``judged``: the test
    split's, or a small table's out-of-fold answers over train and eval), and the test split's,
    which the current model is compared on; ``where``: the metrics.json key of the judged
    figures (``test`` or ``cross_validation``)."""

    judged: tuple[Any, Any]
    test: tuple[Any, Any]
    where: str


def _judge(version_uri: str, manifest: Manifest, models_root: str, config: TrainConfig,
           record: ModelRecord, evidence: Evidence) -> tuple[Blessing, str | None]:
    """The verdict; the current model is scored on this version's raw test rows, through its
    own preprocessing, exactly as it would serve them."""
    raw_test = make_dataset(version_uri, TEST_SPLIT, manifest, config.input)

    def score(model: keras.Model) -> dict[str, float]:
        return gate_scores(task_of(manifest).name, manifest, *predictions(model, raw_test),
                           served=True)

    figures, base = record.test, record.baseline
    if evidence.where == "cross_validation" and record.cross_validation:
        figures = record.cross_validation.out_of_fold
        base = record.cross_validation.baseline
    return gate.judge(task_of(manifest), manifest, figures, base, evidence.judged,
                      GateRules.of(config), models_root, score, compared=evidence.test)


def _adapted(config: TrainConfig, manifest: Manifest, models_root: str,
             ) -> tuple[TrainConfig, dict[int, float] | None, TunedUse | None]:
    """The spec's training settings, then the dataset's tuned ones (``python -m training
    tune``) where still at their defaults, then the data-dependent choices, each logged once;
    metrics.json's ``tuned`` entry (None: not tuned, or tuned for another label)."""
    config, tuned = _tuned(spec_overrides(config, manifest), manifest, models_root)
    config, lines = plan(config, manifest)
    weights, why = class_weight(config, manifest)
    for line in [*lines, why]:
        log.info("train %s: %s", manifest.dataset, line)
    return config, weights, tuned


def _tuned(config: TrainConfig, manifest: Manifest,
           models_root: str) -> tuple[TrainConfig, TunedUse | None]:
    found = outputs.read_tuned(models_root, manifest.dataset)
    if found is None:
        return config, None
    label = manifest.schema.label
    if (found.label, found.task) != (label.name, task_of(manifest).name):
        log.warning("train %s: tuned settings of %s are for the %s label %r, this version's "
                    "is the %s label %r: not used (run `python -m training tune` again)",
                    manifest.dataset, found.tuned_at, found.task, found.label,
                    task_of(manifest).name, label.name)
        return config, None
    config, kept = tuned_overrides(config, found.settings, found.family)
    log.info("train %s: tuned settings (tuned %s on %s, %d trials): family %s, %s%s",
             manifest.dataset, found.tuned_at, found.version, len(found.trials), found.family,
             ", ".join(f"{k} {v}" for k, v in found.settings.items()) or "defaults",
             f"; set in the spec or flags instead: {', '.join(kept)}" if kept else "")
    return config, TunedUse.from_json({**found.summary(), "overridden": kept},
                                      outputs.tuned_uri(models_root, manifest.dataset))


def _fit_and_evaluate(
    version_uri: str, manifest: Manifest, run_uri: str, setup: DeviceSetup,
    config: TrainConfig, work_dir: Path, extra: Sequence[keras.callbacks.Callback],
    weights: dict[int, float] | None = None,
    ) -> tuple[ModelRecord, Evidence, Manifest]:
    """Decide a regression's target, fit the model family (or the better of them on eval),
    evaluate on the test split, save the model locally; its record (the run's part to come),
    the (labels, outputs) the gate judges and the manifest as trained (its label's
    ``transform`` the target choice's)."""
    task, phases = task_of(manifest), Phases()
    check_splits(manifest, {s: labels_of(make_dataset(version_uri, s, manifest, config.input))
                            for s in (EVAL_SPLIT, TEST_SPLIT)}, config.min_eval_examples)
    with phases.phase("fit", "each family tried, the choice"):
        run, done, target = choose_target(families.FitRun(
            version_uri, manifest, run_uri, setup, config, work_dir, task, extra, weights))
        manifest = run.manifest
        fitted, choice, cv = choose(run, done)
    model, test_ds, ev = fitted.model, fitted.test_ds, fitted.eval
    with phases.phase("evaluate"):
        labels, out = predictions(model, test_ds)  # once: figures, report, intervals, plots
        test = scores_of(task.loss(), task.metrics(), labels, out)
        test.update(task.report(labels, out, manifest), examples=len(labels),
                    intervals=metric_intervals(manifest, task.gate, labels, out))
        base = task.baseline(labels, manifest)
        log.debug("test: %s; baseline: %s", test, base)  # the run summary line says this
        task.plots(labels, out, manifest, work_dir / "run" / outputs.PLOTS_DIR)
    with phases.phase("export"):
        fitted.parts.full.save(work_dir / "run" / "model.keras")  # raw values in: no code
        export_serving(fitted.parts.full, work_dir / "run" / "saved_model")  # any name serves
    log.info("train %s: %s", manifest.dataset, phases.line())
    where = f"{run_uri}: the run's record"
    record = dataclasses.replace(
        _metrics(manifest, version_uri, setup, config, fitted, choice, test, ev, base),
        phases=PhaseTimes.from_json(phases.figures, where, "phases"),
        target_choice=TargetChoice.from_json(target, where, "target_choice") if target else None)
    if cv:  # a small table: the verdict judges the out-of-fold answers, test is reported
        y_oof, out_oof = cv.pop("evidence")
        record = dataclasses.replace(record, cross_validation=CrossValidation.from_json(
            {**cv, "baseline": task.baseline(y_oof, manifest)}, where, "cross_validation"))
        return record, Evidence((y_oof, out_oof), (labels, out), "cross_validation"), manifest
    return record, Evidence((labels, out), (labels, out), "test"), manifest


def _metrics(manifest: Manifest, version_uri: str, setup: DeviceSetup, config: TrainConfig,
             fitted: families.Fitted, choice: dict[str, Any], test: dict, ev: dict,
             base: dict) -> ModelRecord:
    """metrics.json: the run's figures and the kept family's own (epochs or boosting
    rounds, history, fit time) with why it was kept."""
    label = manifest.schema.label
    return ModelRecord.from_json({
        "dataset": manifest.dataset, "version": manifest.version, "version_uri": version_uri,
        "label": label.name, "task": task_of(manifest).name, "classes": label.named_classes,
        "transform": label.transform, "split": TEST_SPLIT,
        "test": test, "eval": ev, "baseline": base, "min_margin": config.min_margin,
        "examples": {s: manifest.splits[s].num_examples for s in ("train", EVAL_SPLIT, TEST_SPLIT)},
        "device": setup.device, "precision": setup.precision, "replicas": setup.replicas,
        "family": fitted.family, "family_choice": choice, **fitted.details,
        "code_version": code_version(),  # the same stamp the ETL puts in manifests
        "hyperparameters": dataclasses.asdict(config),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tuned": None,  # ``train`` sets it; written null when no tuned settings were used
    }, f"{version_uri}: the run's record")


def _write_artifacts(out: Path, record: ModelRecord, config: TrainConfig) -> list[str]:
    """Plots, model card and ``label.json`` beside the saved model and TensorBoard logs."""
    task: Task = TASKS_BY_NAME[str(record.task)]
    return outputs.write_run_files(out, record, dataclasses.asdict(config), task.about(record),
                                   task.card_metrics, task.output)
