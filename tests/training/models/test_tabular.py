"""The exported SavedModel serves features whatever the spec named them: Python keywords, a
leading underscore, names that differ only in case. ``serve`` takes a dict keyed by the spec's
names; the flat ``serving_default`` takes the positional ``serving_keys``, written beside the
model. Names of Python parameters, trained in both families: ``test_tabular_params.py``."""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from etl.versions import Manifest
from training.models.mlp import build_models
from training.models.tabular import SERVING_KEYS_FILE, export_serving, serving_keys

NUMERIC = ["class", "from", "lambda", "_x", "x1", "Price", "price", "match", "class_", "_", "type",
           "None", "True", "self", "feature_1"]


def _manifest() -> Manifest:
    features = {n: {"dtype": "float32", "kind": "numeric"} for n in NUMERIC}
    features["if"] = {"dtype": "string", "kind": "categorical"}
    return Manifest.from_json({
        "dataset": "names", "version": "v1",
        "schema": {"label": {"name": "y", "dtype": "int64", "classes": 2},
                   "features": features},
        "statistics": {"numeric": {n: {"mean": float(i), "var": 1.0 + i}
                                   for i, n in enumerate(NUMERIC)},
                       "vocabularies": {"if": ["a", "b"]},
                       "label_counts": {"0": 3, "1": 1}},
    }, "test")


def test_keys_are_positions_whatever_the_names() -> None:
    keys = serving_keys(["class", "self", "_x", "Price", "price", "feature_1"])
    assert keys == {"class": "feature_0", "self": "feature_1", "_x": "feature_2",
                    "Price": "feature_3", "price": "feature_4", "feature_1": "feature_5"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "saved_model"
    keras.utils.set_random_seed(3)
    export_serving(build_models(_manifest()).full, path)
    return path


def test_a_row_keyed_by_the_spec_names_is_served(exported: Path) -> None:
    loaded = tf.saved_model.load(str(exported))
    row = {n: tf.constant([float(i), np.nan]) for i, n in enumerate(NUMERIC)}
    row["if"] = tf.constant(["a", "zz"])
    by_name = loaded.serve(row).numpy()
    assert by_name.shape == (2, 1) and np.isfinite(by_name).all()
    keys = json.loads((exported / SERVING_KEYS_FILE).read_text())
    assert set(keys) == set(row) and len(set(keys.values())) == len(row)
    flat = loaded.signatures["serving_default"](**{keys[n]: t for n, t in row.items()})
    np.testing.assert_allclose(next(iter(flat.values())).numpy(), by_name, rtol=1e-6)
    swapped = dict(row, Price=row["price"], price=row["Price"])  # the pair is two inputs
    assert not np.allclose(loaded.serve(swapped).numpy(), by_name)
