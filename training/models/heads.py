"""The output end of a model, per label task: its head and the target's transform (the class
names in output order are the label's own, ``LabelSchema.class_names``).

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
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from etl.versions.segment import LabelSchema, Schema, Statistics
from training.config import ModelConfig
from training.models.tabular import Names

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
# Target transforms: (forward in tf.data, inverse in the exported model, inverse in numpy).
TRANSFORMS: dict[str, tuple[Callable, Callable, Callable]] = {
    "log1p": (tf.math.log1p, keras.ops.expm1, np.expm1),
}

Head = Callable[[Any, Schema, Statistics, ModelConfig, Names], Any]
"""(hidden features, schema, statistics, config, the core's ``Names``) -> the core's output
(the task's head); its layers are named by the names given (the label's, unless taken)."""
Serve = Callable[[Any, LabelSchema], Any]
"""(core output, schema.label) -> what the exported model returns (e.g. a target's units)."""


def prior_logit(label_counts: dict[str, int]) -> float:
    """Log-odds of the positive class: the output starts at the base rate, not at 0.5."""
    neg, pos = int(label_counts.get("0", 0)), int(label_counts.get("1", 0))
    if neg + pos == 0:
        return 0.0
    p = min(max(pos / (neg + pos), 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def binary_head(x: Any, schema: Schema, stats: Statistics, config: ModelConfig,
                names: Names | None = None) -> Any:
    """One sigmoid unit starting at the train base rate."""
    del config
    label = schema.label
    if (label.classes or 2) != 2:
        raise ValueError(f"label {label.name!r} has {label.classes} classes; the binary head "
                         "needs 2")
    bias = keras.initializers.Constant(prior_logit(stats.label_counts))
    return keras.layers.Dense(1, activation="sigmoid", bias_initializer=bias, dtype="float32",
                              name=(names or Names())(label.name))(x)


def softmax_head(x: Any, schema: Schema, stats: Statistics, config: ModelConfig,
                 names: Names | None = None) -> Any:
    """One softmax unit per class, starting at the train class frequencies."""
    del config
    label = schema.label
    k = int(label.classes or 0)
    if k < 2:
        raise ValueError(f"label {label.name!r}: a multiclass head needs >= 2 classes, the "
                         f"manifest says {k}")
    counts = stats.label_counts
    total = sum(int(counts.get(str(i), 0)) for i in range(k)) or 1
    priors = [math.log(max(int(counts.get(str(i), 0)) / total, 1e-4)) for i in range(k)]
    return keras.layers.Dense(k, activation="softmax", dtype="float32",
                              name=(names or Names())(label.name),
                              bias_initializer=keras.initializers.Constant(priors))(x)


def linear_head(x: Any, schema: Schema, stats: Statistics, config: ModelConfig,
                names: Names | None = None) -> Any:
    """One linear unit, scaled so its start is the train mean with the train spread."""
    del config
    names = names or Names()
    mean, std = _target_space(stats, schema.label)
    z = keras.layers.Dense(1, dtype="float32", name=names("standardized"))(x)
    return keras.layers.Rescaling(std, offset=mean, dtype="float32",
                                  name=names(schema.label.name))(z)


def transform_of(label: LabelSchema) -> tuple[Callable, Callable, Callable] | None:
    """The label's target transform (forward, inverse in Keras, inverse in numpy), or None."""
    return TRANSFORMS.get(label.transform or "")


def model_target(label: LabelSchema) -> Callable | None:
    """What the core learns: the forward transform of the stored target, if any."""
    found = transform_of(label)
    return found[0] if found else None


def serve_units(out: Any, label: LabelSchema) -> Any:
    """The exported model's answer in the target's units (the inverse transform, if any)."""
    found = transform_of(label)
    return found[1](out) if found else out


def in_units(values: np.ndarray, label: LabelSchema) -> np.ndarray:
    """Learned-space values (labels or outputs) back in the target's units, in numpy."""
    found = transform_of(label)
    return found[2](values) if found else values


def _target_space(stats: Statistics, label: LabelSchema) -> tuple[float, float]:
    """Mean and std of the learned target: the train moments, through log1p to first order."""
    moments = stats.label
    mean = float(moments.mean) if moments else 0.0
    std = math.sqrt(float(moments.var)) if moments else 1.0
    if transform_of(label):
        return math.log1p(max(mean, 0.0)), std / (1.0 + max(mean, 0.0)) or 1.0
    return mean, std or 1.0
