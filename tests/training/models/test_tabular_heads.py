"""``training.models.tabular``, the output end: each head starts where the train split does and
refuses a label it cannot serve; the target's transform, written once."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from etl.versions.segment import LabelSchema, Schema, Statistics
from training.config import ModelConfig
from training.models.tabular import (
    binary_head,
    in_units,
    linear_head,
    model_target,
    prior_logit,
    serve_units,
    softmax_head,
)


def _start(head, label: dict, stats: dict) -> np.ndarray:
    """The head's output on all-zero hidden features: where training starts."""
    x = keras.Input(shape=(4,))
    schema = Schema.from_json({"label": label}, "the test's schema")
    model = keras.Model(x, head(keras.layers.Dense(3, kernel_initializer="zeros")(x), schema,
                                Statistics.from_json(stats, "the test's statistics"),
                                ModelConfig()))
    return model(np.zeros((2, 4), np.float32)).numpy()


def test_binary_and_softmax_heads_start_at_the_train_frequencies() -> None:
    counts = {"0": 75, "1": 25}
    assert prior_logit(counts) == pytest.approx(math.log(25 / 75))
    start = _start(binary_head, {"name": "late", "classes": 2}, {"label_counts": counts})
    np.testing.assert_allclose(start, 0.25, rtol=1e-5)
    start = _start(softmax_head, {"name": "y", "classes": 3},
                   {"label_counts": {"0": 10, "1": 80, "2": 10}})
    np.testing.assert_allclose(start[0], [0.1, 0.8, 0.1], rtol=1e-5)


def test_a_head_refuses_a_label_it_cannot_serve() -> None:
    with pytest.raises(ValueError, match="has 3 classes; the binary head needs 2"):
        _start(binary_head, {"name": "y", "classes": 3}, {})
    with pytest.raises(ValueError, match="a multiclass head needs >= 2 classes"):
        _start(softmax_head, {"name": "y", "classes": 1}, {})


def test_the_linear_head_starts_at_the_mean_of_the_learned_target() -> None:
    stats = {"label": {"mean": 150.0, "var": 5000.0}}
    plain = _start(linear_head, {"name": "y"}, stats)
    np.testing.assert_allclose(plain, 150.0, rtol=1e-5)
    learned = _start(linear_head, {"name": "y", "transform": "log1p"}, stats)
    np.testing.assert_allclose(learned, math.log1p(150.0), rtol=1e-5)


def test_the_transform_is_learned_forward_and_served_and_read_back_in_units() -> None:
    label = LabelSchema.of(name="y", transform="log1p")
    y = np.array([[0.0], [99.0], [1e4]], np.float32)
    learned = model_target(label)(y).numpy()
    np.testing.assert_allclose(learned, np.log1p(y), rtol=1e-6)
    np.testing.assert_allclose(serve_units(learned, label).numpy(), y, rtol=1e-5)
    np.testing.assert_allclose(in_units(learned.astype(np.float64), label), y, rtol=1e-5)
    plain = LabelSchema.of(name="y")
    assert model_target(plain) is None
    assert serve_units(learned, plain) is learned and in_units(learned, plain) is learned
