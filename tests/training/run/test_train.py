"""Training runs end to end on small versions: outputs, serving skew, resume, the verdict."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.data.tabular import make_dataset
from training.run.train import train

FAST = TrainConfig(  # the MLP: these tests check its epochs, backups and TensorBoard logs
    input=InputConfig(batch_size=128, shuffle_buffer=1024, seed=1), epochs=2,
    steps_per_execution=4, min_margin=0.02, model=ModelConfig(family="mlp"),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> fx.WrittenVersion:
    return fx.write_version(tmp_path_factory.mktemp("store"), n=3000, seed=11)


@pytest.fixture(scope="module")
def trained(store: fx.WrittenVersion) -> dict:
    return train(store.uri, f"{store.root.as_uri()}/models", "run-1", FAST)


def _run_dir(store: fx.WrittenVersion, run: str) -> Path:
    return store.root / "models" / fx.DATASET / fx.VERSION / run


def _raw(rows: list[dict]) -> dict[str, tf.Tensor]:
    """Serving-time input: raw values straight from the rows, no TFRecord, no parsing."""
    return {name: tf.constant([r[name] for r in rows], dtype=feat["dtype"])
            for name, feat in fx.FEATURES.items()}


def test_outputs_are_published_with_metrics_last(store, trained) -> None:
    run = _run_dir(store, "run-1")
    assert trained.model_uri == run.as_uri()
    for name in ("model.keras", "saved_model/saved_model.pb", "model_card.md", "plots/loss.png",
                 "plots/auc.png", "plots/accuracy.png", "metrics.json"):
        assert (run / name).is_file(), name
    assert (run / "plots" / "auc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((run / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((run / "logs" / "validation").glob("events.out.tfevents.*"))
    assert not (run / "_backup").exists()  # the resume backup goes once the run is published
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics == json.loads(json.dumps(trained.metrics.to_json()))
    manifest_sha = hashlib.sha256((store.path / "manifest.json").read_bytes()).hexdigest()
    assert metrics["manifest_sha256"] == manifest_sha
    for split in ("test", "eval"):
        assert set(metrics[split]) >= {"auc", "accuracy", "loss"}
    assert metrics["baseline"]["auc"] == 0.5 and metrics["baseline"]["majority_class"] == 0
    assert metrics["test"]["examples"] == len(store.rows["test"])
    assert metrics["test"]["auc"] >= 0.5 + FAST.min_margin
    assert metrics["device"] == "CPU" and metrics["precision"] == "float32"
    assert metrics["blessing"]["blessed"] and trained.promoted, metrics["blessing"]
    assert metrics["epochs_run"] == 2 and metrics["examples_per_s"] > 0
    phases = metrics["phases"]  # issue 42: fit, evaluation and export measured apart
    assert set(phases) == {"fit", "evaluate", "export"}
    assert all(p["seconds"] > 0 and p["cpu_s"] > 0 and p["peak_rss_mb"] > 100
               for p in phases.values()), phases
    assert phases["fit"]["seconds"] >= metrics["fit_seconds"]  # the fit phase holds the fit
    card = (run / "model_card.md").read_text()
    for needle in (fx.VERSION, manifest_sha, metrics["code_version"], "learning_rate", "| auc |"):
        assert needle in card


def test_no_training_serving_skew(store, trained) -> None:
    run = _run_dir(store, "run-1")
    model = keras.saving.load_model(run / "model.keras")
    served = tf.saved_model.load(str(run / "saved_model"))
    rows = store.rows["test"]  # one shard: the pipeline keeps this order
    # the training path: preprocessing in the tf.data feature map, then the core
    preprocess, core = model.get_layer("flights_preprocess"), model.get_layer("flights_core")
    ds = make_dataset(store.uri, "test", store.typed, InputConfig(batch_size=97),
                      preprocess=preprocess)
    via_pipeline = core.predict(ds, verbose=0)
    via_saved_model = served.serve(_raw(rows)).numpy()
    via_keras_raw = model(_raw(rows), training=False).numpy()
    assert via_pipeline.shape == (len(rows), 1)
    np.testing.assert_allclose(via_saved_model, via_pipeline, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(via_keras_raw, via_pipeline, rtol=1e-5, atol=1e-6)
    assert via_pipeline.std() > 0.01  # a model that answers a constant would pass trivially


def test_the_gate_scores_a_current_model_from_its_saved_model_too(store, trained,
                                                                   tmp_path: Path) -> None:
    """A run without model.keras (a model family Keras cannot reload) is scored through its
    SavedModel's serving signature, on the same raw rows."""
    import shutil

    from training.judge.current import load_model
    from training.judge.evaluate import predictions

    copy = tmp_path / "run"
    shutil.copytree(_run_dir(store, "run-1"), copy)
    raw = make_dataset(store.uri, "test", store.typed, InputConfig(batch_size=97, seed=1))
    _, via_keras = predictions(load_model(copy.as_uri()), raw)
    # a model.keras whose layers this code no longer knows (the trees' layer before the
    # compiled forest, say) is scored through the SavedModel, not dropped as not comparable
    import zipfile

    with zipfile.ZipFile(copy / "model.keras") as old:
        files = {n: old.read(n) for n in old.namelist()}
    assert b'"Dense"' in files["config.json"]
    files["config.json"] = files["config.json"].replace(b'"Dense"', b'"RetiredDense"')
    with zipfile.ZipFile(copy / "model.keras", "w") as new:
        for name, data in files.items():
            new.writestr(name, data)
    _, via_retired = predictions(load_model(copy.as_uri()), raw)
    np.testing.assert_allclose(via_retired, via_keras, rtol=1e-5, atol=1e-6)
    (copy / "model.keras").unlink()
    _, via_saved = predictions(load_model(copy.as_uri()), raw)
    np.testing.assert_allclose(via_saved, via_keras, rtol=1e-5, atol=1e-6)


def test_finished_run_is_not_retrained(store, trained) -> None:
    again = train(store.uri, f"{store.root.as_uri()}/models", "run-1", FAST)
    assert again.metrics.to_json()["created_at"] == trained.metrics.to_json()["created_at"]


class _Crash(keras.callbacks.Callback):
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch == 0:
            raise RuntimeError("worker lost after epoch 1")


class _Epochs(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.begun: list[int] = []

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.begun.append(epoch)


def test_retried_run_resumes_after_the_last_finished_epoch(store) -> None:
    config = TrainConfig(input=FAST.input, epochs=3, patience=5, steps_per_execution=4,
                         min_margin=0.0, model=FAST.model)
    models = f"{store.root.as_uri()}/models"
    with pytest.raises(RuntimeError, match="worker lost"):
        train(store.uri, models, "run-resume", config, callbacks=[_Crash()])
    run = _run_dir(store, "run-resume")
    assert not (run / "metrics.json").exists()
    backup = json.loads((run / "_backup" / "training_metadata.json").read_text())
    assert backup["epoch"] == 1

    seen = _Epochs()
    result = train(store.uri, models, "run-resume", config, callbacks=[seen])
    assert seen.begun == [1, 2]  # epoch 2 of 3 (1-based), not a restart at 0
    assert result.metrics.to_json()["resumed_from_epoch"] == 1
    assert result.metrics.to_json()["epochs_run"] == 2


def test_a_model_that_cannot_beat_the_baseline_is_written_not_blessed(tmp_path: Path) -> None:
    noise = fx.write_version(tmp_path, n=1500, seed=5, random_labels=True)
    config = TrainConfig(input=FAST.input, epochs=1, steps_per_execution=4, min_margin=0.05)
    result = train(noise.uri, f"{tmp_path.as_uri()}/models", "run-noise", config)
    assert not result.blessing.blessed and not result.promoted
    reasons = " ".join(result.blessing.reasons)  # names the metric, both numbers, the margin
    assert re.search(r"(accuracy|auc) \d\.\d{4} vs \d\.\d{4}, needs >= \d\.\d{4} .margin 0\.05",
                     reasons), reasons
    run = tmp_path / "models" / fx.DATASET / fx.VERSION / "run-noise"
    for name in ("metrics.json", "model.keras", "saved_model/saved_model.pb", "model_card.md",
                 "plots/loss.png"):
        assert (run / name).is_file(), name
    stored = json.loads((run / "metrics.json").read_text())["blessing"]
    assert stored["blessed"] is False and stored["reasons"] == list(result.blessing.reasons)
    assert "**Not blessed**" in (run / "model_card.md").read_text()
    assert not (tmp_path / "models" / fx.DATASET / "current.json").exists()
