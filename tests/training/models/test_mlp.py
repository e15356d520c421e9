"""``training.models.mlp``: the network is built from the manifest alone (its statistics and
vocabularies, no adapt pass) and takes raw values in training and serving alike."""

from __future__ import annotations

import copy

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import training_fixtures as fx
from training.config import ModelConfig
from training.models.mlp import build_model, build_models, embedding_dim
from training.models.tabular import prior_logit

DOC = fx.build_manifest(fx.DATASET, fx.VERSION, {}, fx.make_rows(600, seed=1))
MANIFEST = fx.typed(DOC)


def test_inputs_are_the_raw_features_with_their_dtypes() -> None:
    model = build_model(MANIFEST)
    specs = {name: (t.dtype, tuple(t.shape)) for name, t in model.input.items()}
    assert specs == {name: (f["dtype"], (None,)) for name, f in fx.FEATURES.items()}
    assert model.output.shape == (None, 1)


def test_preprocessing_takes_the_manifest_statistics_and_vocabularies() -> None:
    parts = build_models(MANIFEST, ModelConfig(one_hot_max_vocab=16, embedding_max_dim=6))
    pre, model = parts.preprocess, parts.core
    stats = MANIFEST.statistics
    # every numeric feature normalized in one layer, in name order, with its own statistics
    numeric = sorted(n for n, f in fx.FEATURES.items() if f["kind"] == "numeric")
    norm = pre.get_layer("norm_numeric")
    assert np.allclose(np.ravel(norm.mean), [stats.numeric[n].mean for n in numeric])
    assert np.allclose(np.ravel(norm.variance), [stats.numeric[n].var for n in numeric])
    carrier = pre.get_layer("lookup_carrier").get_vocabulary()
    assert carrier[1:] == stats.vocabularies["carrier"]  # index 0: out of vocabulary
    days = pre.get_layer("lookup_day_of_week").get_vocabulary()
    assert [int(d) for d in days[1:]] == stats.vocabularies["day_of_week"]
    # small vocabularies one-hot, large ones embedded
    assert model.get_layer("onehot_carrier").num_tokens == len(fx.CARRIERS) + 1
    dest = model.get_layer("embed_dest")
    assert dest.input_dim == len(fx.DESTS) + 1 and dest.output_dim == 6
    # the output starts at the training base rate
    bias = model.get_layer("late").bias.numpy()[0]
    assert np.isclose(bias, prior_logit(stats.label_counts), atol=1e-6)


def test_full_model_is_core_of_preprocess_and_shares_its_weights() -> None:
    parts = build_models(MANIFEST)
    assert [layer.name for layer in parts.full.layers if isinstance(layer, keras.Model)] == [
        "flights_preprocess", "flights_core"]
    assert parts.full.get_layer("flights_core") is parts.core
    assert not parts.preprocess.trainable_weights  # statistics are fixed, not learned
    prepared = parts.preprocess.output
    assert prepared["carrier"].dtype == "int64" and tuple(prepared["carrier"].shape) == (None,)
    # the numeric features reach the core as one matrix, not one input each (wide tables)
    numeric = [n for n, f in fx.FEATURES.items() if f["kind"] == "numeric"]
    assert "temp" not in prepared and prepared["numeric"].dtype == "float32"
    assert tuple(prepared["numeric"].shape) == (None, len(numeric))


def test_a_feature_named_numeric_does_not_collide_with_the_numeric_matrix() -> None:
    from training.models.mlp import numeric_key

    assert numeric_key({"a": {}, "numeric": {}, "numeric_": {}}) == "numeric__"
    assert numeric_key(fx.FEATURES) == "numeric"


def test_raw_values_in_probabilities_out_with_unknown_categories() -> None:
    model = build_model(MANIFEST)
    raw = {
        "distance": tf.constant([500.0, 2400.0]), "sched_dep_hour": tf.constant([6.0, 22.0]),
        "temp": tf.constant([30.0, 90.0]), "plane_seats": tf.constant([50, 300], tf.int64),
        "carrier": tf.constant(["UA", "never-seen"]), "dest": tf.constant(["D01", "??"]),
        "day_of_week": tf.constant([0, 99], tf.int64),
    }
    p = model(raw, training=False).numpy()
    assert p.shape == (2, 1) and np.all((p > 0) & (p < 1))


def test_a_missing_numeric_value_is_the_train_mean_in_training_and_serving() -> None:
    """Records keep NaN for `fill: mean` features; the model itself imputes the manifest mean."""
    model = build_model(MANIFEST)
    mean = MANIFEST.statistics.numeric["temp"].mean
    raw = {
        "distance": tf.constant([500.0, 500.0, 500.0]), "sched_dep_hour": tf.constant([6.0] * 3),
        "temp": tf.constant([float("nan"), mean, mean + 40.0]),
        "plane_seats": tf.constant([50] * 3, tf.int64), "carrier": tf.constant(["UA"] * 3),
        "dest": tf.constant(["D01"] * 3), "day_of_week": tf.constant([2] * 3, tf.int64),
    }
    p = model(raw, training=False).numpy()[:, 0]
    assert np.all(np.isfinite(p))
    assert p[0] == pytest.approx(p[1], abs=1e-6)  # NaN -> the mean
    assert p[2] != pytest.approx(p[1], abs=1e-6)  # the input does matter


def test_mixed_precision_keeps_preprocessing_and_output_in_float32() -> None:
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        parts = build_models(MANIFEST)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert parts.preprocess.get_layer("norm_numeric").compute_dtype == "float32"  # fp16 overflows
    assert parts.core.get_layer("dense_0").compute_dtype == "float16"
    assert parts.full.output.dtype == "float32"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["statistics"]["numeric"].pop("temp"), "numeric feature 'temp' has no statistics"),
        (lambda m: m["statistics"]["vocabularies"].pop("dest"), "'dest' has no statistics.vocabularies"),
        (lambda m: m["statistics"]["vocabularies"]["carrier"].append("UA"), "'carrier' has duplicate"),
        (lambda m: m["schema"]["label"].update(classes=3), "has 3 classes"),
    ],
)
def test_manifest_gaps_are_named(edit, message: str) -> None:
    manifest = copy.deepcopy(DOC)
    edit(manifest)
    with pytest.raises(ValueError, match=message):
        build_model(fx.typed(manifest))


def test_embedding_width_grows_slowly_and_is_capped() -> None:
    assert embedding_dim(3, 16) == 3
    assert embedding_dim(41, 16) == 13
    assert embedding_dim(100_000, 16) == 16
