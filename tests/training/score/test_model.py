"""The blessed model as scoring serves it: its flat ``serving_default`` called by keyword with
the keys the export wrote, whatever the features are named -- here every parameter name a row
passes through (``self``, ``features``, ``kwargs``: ``fx.parameter_names``, issue 53). The
predictions of a whole scored window are the Keras model's own (``test_run.py``)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.run.train import train
from training.score.model import ServedModel, served_model
from training.score.publish import read_predictions
from training.score.run import ScoreOptions, score

NAMES = fx.parameter_names()
ORDER = ["features", *(n for n in NAMES if n != "features")]  # numeric: test_tabular_params.py
TREES = TrainConfig(input=InputConfig(batch_size=128, seed=1), min_margin=0.0,
                    model=ModelConfig(family="trees", max_rounds=20))


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> tuple[fx.WrittenVersion, ServedModel]:
    store = fx.write_version(tmp_path_factory.mktemp("named"), n=1500, seed=5, names=ORDER)
    models = f"{store.root.as_uri()}/models"
    assert train(store.uri, models, "run-1", TREES).promoted
    return store, served_model(models, fx.DATASET)


def _own(store: fx.WrittenVersion, rows: list[dict]) -> np.ndarray:
    features = store.manifest["schema"]["features"]
    raw = {n: tf.constant([r[n] for r in rows], dtype=f["dtype"]) for n, f in features.items()}
    model = keras.saving.load_model(store.root / "models" / fx.DATASET / fx.VERSION / "run-1"
                                    / "model.keras")
    return model(raw, training=False).numpy()


def test_features_named_like_parameters_are_served_by_keyword(named) -> None:
    store, served = named
    assert sorted(served.features) == sorted(served.keys) == NAMES
    rows = store.rows["test"]
    got = served.outputs({n: np.asarray([r[n] for r in rows]) for n in served.features})
    np.testing.assert_allclose(got, _own(store, rows), rtol=1e-6, atol=1e-7)


def test_a_window_of_such_features_is_scored_with_the_models_own_answers(named) -> None:
    store, _ = named
    frame = read_predictions(score(ScoreOptions(root=store.root.as_uri(), dataset=fx.DATASET,
                                                batch_size=97)).uri)
    test = frame[frame["split"] == "test"].sort_values(["shard", "record"], kind="stable")
    np.testing.assert_allclose(test["probability_1"].to_numpy(),
                               _own(store, store.rows["test"])[:, 0], rtol=1e-5, atol=1e-6)
