"""A table whose features are named like the Python parameters a row passes through
(``self``, ``inputs``, ``training``, ``kwargs``, TF's own: ``fx.parameter_names``) trains,
exports and serves in both families (issue 53: a column ``self`` ended ``python -m training
train`` in a traceback at export), and the SavedModel answers as the Keras model does.
Features named like the model's own layers: ``test_tabular_layer_names.py``."""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.models.tabular import SERVING_KEYS_FILE
from training.run.train import train

NAMES = fx.parameter_names()
FAST = {  # tiny budgets: the export is under test, not the fit
    "trees": TrainConfig(input=InputConfig(batch_size=128, seed=1), min_margin=0.0,
                         model=ModelConfig(family="trees", max_rounds=20)),
    "mlp": TrainConfig(input=InputConfig(batch_size=128, seed=1), epochs=1,
                       steps_per_execution=4, min_margin=0.0, model=ModelConfig(family="mlp")),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> fx.WrittenVersion:
    return fx.write_version(tmp_path_factory.mktemp("params"), n=1500, seed=5, names=NAMES)


def test_the_names_hold_the_parameters_that_broke_the_export() -> None:
    assert {"self", "args", "kwargs", "kwds", "inputs", "training", "mask"} <= set(NAMES)


@pytest.mark.parametrize("family", sorted(FAST))
def test_features_named_like_parameters_train_export_and_serve(
        store: fx.WrittenVersion, tmp_path: Path, family: str) -> None:
    result = train(store.uri, f"{tmp_path.as_uri()}/models", family, FAST[family])
    assert result.metrics.to_json()["family"] == family
    run = Path(result.model_uri.removeprefix("file://"))
    features = store.manifest["schema"]["features"]
    assert sorted(features) == NAMES
    raw = {name: tf.constant([r[name] for r in store.rows["test"]], dtype=feat["dtype"])
           for name, feat in features.items()}
    own = keras.saving.load_model(run / "model.keras")(raw, training=False).numpy()
    exported = tf.saved_model.load(str(run / "saved_model"))  # kept: it owns the variables
    np.testing.assert_allclose(exported.serve(raw).numpy(), own, rtol=1e-6, atol=1e-7)
    keys = json.loads((run / "saved_model" / SERVING_KEYS_FILE).read_text())
    assert set(keys) == set(NAMES)
    flat = exported.signatures["serving_default"](**{keys[n]: t for n, t in raw.items()})
    np.testing.assert_allclose(next(iter(flat.values())).numpy(), own, rtol=1e-6, atol=1e-7)
