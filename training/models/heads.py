"""The output end of a model, per label task: its head, the class names in output order and the
target's transform.

A head maps the last hidden features to the task's output and starts where the train split
does (the binary unit at the base rate, the softmax units at the class frequencies, the linear
unit at the mean with the train spread), so the first steps do not spend themselves finding
the label's scale. A regression target may be learned through a transform (``log1p``): the
input pipeline applies it (``model_target``), the exported model undoes it (``serve_units``),
and every figure a person reads is back in the target's units (``in_units``). The label task
(``training.tasks``) names which head and transform a version's label gets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from training.config import ModelConfig

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
# Target transforms: (forward in tf.data, inverse in the exported model, inverse in numpy).
TRANSFORMS: dict[str, tuple[Callable, Callable, Callable]] = {
    "log1p": (tf.math.log1p, keras.ops.expm1, np.expm1),
}

Head = Callable[[Any, dict[str, Any], dict[str, Any], ModelConfig], Any]
"""(hidden features, schema, statistics, config) -> the core's output (the task's head)."""
Serve = Callable[[Any, dict[str, Any]], Any]
"""(core output, schema.label) -> what the exported model returns (e.g. a target's units)."""


def class_names(label: Mapping[str, Any]) -> list[str]:
    """A class label's names in output order: the spec's ``names``; a binary label that names
    its positive class, ``not <positive>`` then ``<positive>``; else the class ids (``classes``
    of them, two for a binary label written before labels carried a count)."""
    return named_classes(label) or [str(n) for n in range(int(label.get("classes", 2)))]


def named_classes(label: Mapping[str, Any]) -> list[str] | None:
    """The classes' names where the spec gave any (``names``, or a binary ``positive``)."""
    if label.get("names"):
        return [str(n) for n in label["names"]]
    if label.get("positive"):
        positive = "/".join(str(v) for v in label["positive"])
        return [f"not {positive}", positive]
    return None


def prior_logit(label_counts: dict[str, int]) -> float:
    """Log-odds of the positive class: the output starts at the base rate, not at 0.5."""
    neg, pos = int(label_counts.get("0", 0)), int(label_counts.get("1", 0))
    if neg + pos == 0:
        return 0.0
    p = min(max(pos / (neg + pos), 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def binary_head(x: Any, schema: dict[str, Any], stats: dict[str, Any], config: ModelConfig) -> Any:
    """One sigmoid unit starting at the train base rate."""
    del config
    if schema["label"].get("classes", 2) != 2:
        raise ValueError(f"label {schema['label']['name']!r} has {schema['label']['classes']} "
                         f"classes; the binary head needs 2")
    bias = keras.initializers.Constant(prior_logit(stats.get("label_counts", {})))
    return keras.layers.Dense(
        1, activation="sigmoid", bias_initializer=bias, dtype="float32", name=schema["label"]["name"]
    )(x)


def softmax_head(x: Any, schema: dict[str, Any], stats: dict[str, Any],
                 config: ModelConfig) -> Any:
    """One softmax unit per class, starting at the train class frequencies."""
    del config
    k = int(schema["label"].get("classes", 0))
    if k < 2:
        raise ValueError(f"label {schema['label']['name']!r}: a multiclass head needs >= 2 "
                         f"classes, the manifest says {k}")
    counts = stats.get("label_counts", {})
    total = sum(int(counts.get(str(i), 0)) for i in range(k)) or 1
    priors = [math.log(max(int(counts.get(str(i), 0)) / total, 1e-4)) for i in range(k)]
    return keras.layers.Dense(k, activation="softmax", dtype="float32", name=schema["label"]["name"],
                              bias_initializer=keras.initializers.Constant(priors))(x)


def linear_head(x: Any, schema: dict[str, Any], stats: dict[str, Any],
                config: ModelConfig) -> Any:
    """One linear unit, scaled so its start is the train mean with the train spread."""
    del config
    mean, std = _target_space(stats, schema["label"])
    z = keras.layers.Dense(1, dtype="float32", name="standardized")(x)
    return keras.layers.Rescaling(std, offset=mean, dtype="float32",
                                  name=schema["label"]["name"])(z)


def transform_of(label: Mapping[str, Any]) -> tuple[Callable, Callable, Callable] | None:
    """The label's target transform (forward, inverse in Keras, inverse in numpy), or None."""
    return TRANSFORMS.get(label.get("transform") or "")


def model_target(label: dict[str, Any]) -> Callable | None:
    """What the core learns: the forward transform of the stored target, if any."""
    found = transform_of(label)
    return found[0] if found else None


def serve_units(out: Any, label: dict[str, Any]) -> Any:
    """The exported model's answer in the target's units (the inverse transform, if any)."""
    found = transform_of(label)
    return found[1](out) if found else out


def in_units(values: np.ndarray, label: Mapping[str, Any]) -> np.ndarray:
    """Learned-space values (labels or outputs) back in the target's units, in numpy."""
    found = transform_of(label)
    return found[2](values) if found else values


def _target_space(stats: dict[str, Any], label: dict[str, Any]) -> tuple[float, float]:
    """Mean and std of the learned target: the train moments, through log1p to first order."""
    moments = stats.get("label") or {}
    mean, std = float(moments.get("mean", 0.0)), math.sqrt(float(moments.get("var", 1.0)))
    if transform_of(label):
        return math.log1p(max(mean, 0.0)), std / (1.0 + max(mean, 0.0)) or 1.0
    return mean, std or 1.0
