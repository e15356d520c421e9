"""Training-side label tasks without the ETL: heads and exported outputs per task, the
metrics and gates on hand-checked numbers, and the task chosen from the manifest."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf

from etl.versions import Manifest
from tests.support import training_fixtures as fx
from training.models.mlp import build_models
from training.tasks import task_of

BASE = fx.build_manifest(fx.DATASET, fx.VERSION, {}, fx.make_rows(300, seed=2))


def _manifest(schema_label: dict, **stats: object) -> Manifest:
    manifest = copy.deepcopy(BASE)
    manifest["schema"]["label"] = schema_label
    manifest["statistics"].update(stats)
    return fx.typed(manifest)


def _raw(rows: list[dict]) -> dict[str, tf.Tensor]:
    return {name: tf.constant([r[name] for r in rows], dtype=feat["dtype"])
            for name, feat in fx.FEATURES.items()}


def test_multiclass_model_returns_one_probability_per_class() -> None:
    manifest = _manifest({"name": "y", "dtype": "int64", "task": "multiclass", "classes": 3,
                          "names": ["a", "b", "c"]}, label_counts={"0": 10, "1": 80, "2": 10})
    task = task_of(manifest)
    parts = build_models(manifest, head=task.head, serve=task.serve)
    probs = parts.full(_raw(fx.make_rows(16, seed=3))).numpy()
    assert probs.shape == (16, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert (probs.argmax(axis=1) == 1).mean() > 0.5  # starts at the train class frequencies


def test_regression_model_learns_log1p_and_serves_the_targets_units() -> None:
    manifest = _manifest({"name": "y", "dtype": "float32", "task": "regression",
                          "transform": "log1p"},
                         label={"mean": 150.0, "var": 5000.0, "min": 25.0, "max": 346.0,
                                "count": 300})
    task = task_of(manifest)
    parts = build_models(manifest, head=task.head, serve=task.serve)
    raw = _raw(fx.make_rows(32, seed=4))
    learned = parts.core(parts.preprocess(raw)).numpy()
    served = parts.full(raw).numpy()
    np.testing.assert_allclose(served, np.expm1(learned), rtol=1e-5)
    assert 20 < np.median(served) < 1000  # the head starts near the train mean, in units
    y = tf.constant([[0.0], [99.0]])
    np.testing.assert_allclose(task.target(manifest.schema.label)(y).numpy(),
                               np.log1p([[0.0], [99.0]]), rtol=1e-6)


def test_binary_manifests_without_a_task_stay_binary_and_unknown_tasks_are_named() -> None:
    assert task_of(fx.typed(BASE)).name == "binary"
    bad = _manifest({"name": "y", "dtype": "int64", "task": "ordinal"})
    with pytest.raises(ValueError, match="label task 'ordinal' is not one of"):
        task_of(bad)
