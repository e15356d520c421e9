"""A tabular model, whichever family fits it: raw feature values in, the task's answer out.

Both families (``training.models.mlp``, ``training.models.trees``) hand back the same three
views (``TabularModel``), put the train split's vocabularies inside the model as lookups
(``vocabulary_lookup``), and are exported the same way: a SavedModel whose ``serve`` endpoint
takes one dict keyed by the spec's feature names, so serving applies exactly the preprocessing
training did and any valid spec name serves; its flat ``serving_default`` signature keys the
features by position (``serving_keys``, ``export_serving``). Evaluation, the gate and the
export never know which family won.

A Keras model takes a dict keyed by its inputs' names, so a model's inputs are named after the
features, and the names of its own layers and ops share their namespace: every one is given by
the model's ``Names`` (none taken twice, none an input's, whatever the features are called;
issue 53) and its ops live in named layers (``Columns``), never auto-named (``cast``).

The output end is the label task's (``training.tasks`` names which a version's label gets), and
the image CNN's too: a head maps the last hidden features to the task's output and starts where
the train split does (the binary unit at the base rate, the softmax units at the class
frequencies, the linear unit at the mean with the train spread), so the first steps do not
spend themselves finding the label's scale. A regression target may be learned through a
transform (``log1p``): the input pipeline applies it (``model_target``), the exported model
undoes it (``serve_units``, the ``serve`` of ``compose``), and every figure a person reads is
back in the target's units (``in_units``). The class names in output order are the label's
own, ``LabelSchema.class_names``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from etl.versions.segment import FeatureSchema, LabelSchema, Schema, Statistics
from training.config import ModelConfig

OOV_INDICES = 1


class TabularModel(NamedTuple):
    """The three views of one model; they share weights: ``preprocess`` (raw values -> what the
    core takes, run in the tf.data feature map), ``core`` (the part that trains and is
    evaluated) and ``full`` (``core(preprocess(raw))``: what is saved and exported)."""

    preprocess: keras.Model
    core: keras.Model
    full: keras.Model


class Names:
    """The names of one Keras model's own layers and ops: each the name asked for, unless an
    input of the model (a feature) or an earlier layer has it; then with ``_`` appended until
    none has. A functional model refuses two operations of one name (``The name "features"
    is used 2 times in the model``), and a feature may be called anything: ``features``,
    ``dense_0``, ``lookup_<another feature>``, ``<dataset>_core``."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.taken = set(taken)

    def __call__(self, name: str) -> str:
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


@keras.saving.register_keras_serializable(package="flightpipe")
class Columns(keras.layers.Layer):
    """``[batch]`` number tensors -> one ``[batch, columns]`` float32 matrix, in order; a NaN
    in column i becomes ``fill[i]`` (None: NaN stays). One named layer for what were
    ``keras.ops`` calls, which Keras names itself (``cast``, ``stack``), whatever the model's
    inputs are called."""

    def __init__(self, fill: Sequence[float] | None = None, **kwargs: Any) -> None:
        kwargs["dtype"] = "float32"  # not float16 under mixed precision: raw values overflow it
        super().__init__(**kwargs)
        self.fill = None if fill is None else [float(v) for v in fill]

    def call(self, columns: list) -> Any:
        x = keras.ops.stack([keras.ops.cast(c, "float32") for c in columns], axis=1)
        if self.fill is None:
            return x
        return keras.ops.where(keras.ops.isnan(x), np.asarray(self.fill, np.float32), x)

    def compute_output_shape(self, shapes: list) -> tuple:
        return (shapes[0][0], len(shapes))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "fill": self.fill}


def compose(raw: dict[str, Any], preprocess: keras.Model, core: keras.Model,
            serve: Serve | None, label: LabelSchema,
            name: str) -> keras.Model:
    """The full model, ``serve(core(preprocess(raw)))``, named ``name``: ``serve`` (None: the
    core's output as is) in a model of its own, so the ops it adds (``expm1``) are named where
    no feature is."""
    out = core(preprocess(raw))
    if serve is not None:
        names = Names([*raw, preprocess.name, core.name])
        x = keras.Input(shape=out.shape[1:], dtype=out.dtype, name="output")
        out = keras.Model(x, serve(x, label), name=names("served"))(out)
    return keras.Model(raw, out, name=name)


def vocabulary_lookup(where: str, name: str, feat: FeatureSchema,
                      vocab: list | None, names: Names) -> keras.layers.Layer:
    """The categorical feature's train vocabulary as a lookup layer, named by ``names``
    (``lookup_<name>``): id 0 for a value it never saw (``OOV_INDICES``), 1.. for the rest in
    vocabulary order. ``where`` names the manifest in the errors.

    Raises:
        ValueError: the manifest has no vocabulary for the feature, or one with duplicates.
    """
    if not vocab:
        raise ValueError(f"{where}: categorical feature {name!r} has no statistics.vocabularies entry")
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"{where}: vocabulary of {name!r} has duplicate entries")
    layer = names(f"lookup_{name}")
    if feat.dtype == "string":
        return keras.layers.StringLookup(
            vocabulary=[str(v) for v in vocab], num_oov_indices=OOV_INDICES, name=layer)
    return keras.layers.IntegerLookup(
        vocabulary=np.asarray(vocab, dtype="int64"), num_oov_indices=OOV_INDICES, name=layer)


SERVING_KEY = "feature_{}"  # a feature's key in the flat signature: its position, never its name


def serving_keys(names: Iterable[str]) -> dict[str, str]:
    """Each feature's key in the SavedModel's flat ``serving_default`` signature:
    ``feature_<i>``, ``i`` its position among ``names``, whatever the name.

    A flat signature is a set of named tensors that TF turns into Python keyword arguments,
    of its own functions too: saving calls ``_get_concrete_function_garbage_collected(self,
    *args, **kwargs)`` with them, a caller of the loaded signature a ``ConcreteFunction``'s
    ``__call__(self, *args, **kwargs)``. A key that is a feature's name collides with one of
    their parameters (a column ``self`` failed the export, issue 53) or is no argument at all
    (``class``, ``_x``, ``Price`` beside ``price``); a key that is its position is none of
    those, for every name. The ``serve`` endpoint takes the features as one dict keyed by
    the spec's names."""
    return {name: SERVING_KEY.format(i) for i, name in enumerate(names)}


def serving_signature(model: keras.Model) -> list[dict[str, tf.TensorSpec]]:
    """The export's input signature: one dict keyed by feature name (``serve`` takes rows
    keyed as the spec declares them, as one argument: no name meets a Python parameter),
    each tensor named by ``serving_keys`` (the flat ``serving_default`` signature's keys)."""
    inputs = model.input if isinstance(model.input, dict) else {}
    keys = serving_keys(inputs)
    return [{name: tf.TensorSpec((None, *t.shape[1:]), t.dtype, name=keys[name])
             for name, t in inputs.items()}]


SERVING_KEYS_FILE = "assets.extra/serving_keys.json"  # beside saved_model.pb; TF Serving skips it


def export_serving(model: keras.Model, path: Path) -> None:
    """The SavedModel: ``serve`` takes one dict keyed by the spec's feature names (any valid
    spec name: ``class``, ``self``, ``inputs``); ``serving_default`` takes the positional
    ``serving_keys``, written to ``SERVING_KEYS_FILE`` (feature name -> signature key) for
    clients of the flat signature (TF Serving, ``training.score``)."""
    signature = serving_signature(model)
    model.export(str(path), verbose=False, input_signature=signature)
    keys = {name: spec.name for name, spec in signature[0].items()}
    (path / SERVING_KEYS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (path / SERVING_KEYS_FILE).write_text(json.dumps(keys, indent=1, sort_keys=True) + "\n")


# --- the output end: each task's head and the target's transform -----------------------------

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
