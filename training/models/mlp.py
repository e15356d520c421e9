"""The MLP family: a Keras 3 network whose preprocessing is built from the manifest.

Normalization takes the train split's mean/variance and the lookups take its vocabularies
straight from the manifest (no ``adapt`` pass over the data). The model comes as the three
views of ``training.models.tabular.TabularModel``, sharing their layers:

- ``preprocess``: raw feature values -> vocabulary ids, and every numeric feature
  normalized into one matrix (``numeric_key``; one input per column made wide tables slow). Training
  runs it in the tf.data feature map, on the host, in parallel with the accelerator: string
  lookups are CPU-only hash tables, and outside the train step they do not stop XLA.
- ``core``: ids and numbers -> the task's head (``training.models.tabular``); the part that
  trains (and can be XLA-compiled).
- ``full``: ``core(preprocess(raw))``, what is saved and exported: it takes raw values, so
  serving applies exactly the preprocessing training did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import keras
import numpy as np

from etl.versions import Manifest
from etl.versions.segment import Moments
from training.config import ModelConfig
from training.models.tabular import (
    OOV_INDICES,
    Columns,
    Head,
    Names,
    Serve,
    TabularModel,
    binary_head,
    compose,
    vocabulary_lookup,
)

_EMBED_SCALE, _EMBED_POWER = 1.6, 0.56  # fastai's rule of thumb for embedding width
NUMERIC = "numeric"


def build_model(manifest: Manifest, config: ModelConfig | None = None) -> keras.Model:
    """The full model: raw feature values in (keyed by feature name), probability out."""
    return build_models(manifest, config).full


def build_models(
    manifest: Manifest,
    config: ModelConfig | None = None,
    core_scope: contextlib.AbstractContextManager | None = None,
    head: Head | None = None,
    serve: Serve | None = None,
) -> TabularModel:
    """Preprocessing, trainable core and their composition, from the manifest alone.

    Args:
        manifest: The version's manifest (schema and train-split statistics).
        config: Hyperparameters; None = the defaults.
        core_scope: Where the trainable variables are created (a distribution strategy's
            scope); preprocessing stays outside it, on the host that runs tf.data.
        head: The label task's output layer (``training.tasks``); None = binary.
        serve: Applied to the core's output in the full model only; None = as is.

    Raises:
        ValueError: the head refuses the label (the binary one: classes != 2), or a feature
            lacks its statistics/vocabulary or has a kind the model cannot encode (each
            names the feature).
    """
    config, head = config or ModelConfig(), head or binary_head
    schema, stats = manifest.schema, manifest.statistics
    where = f"manifest {manifest.dataset}/{manifest.version}"
    names = Names(schema.features)  # the preprocessing's and the full model's own layers
    raw, prepared, sizes, numeric = {}, {}, {}, []
    for name, feat in sorted(schema.features.items()):
        raw[name] = keras.Input(shape=(), name=name, dtype=feat.dtype)
        if feat.kind == "numeric":
            numeric.append(name)
        elif feat.kind == "categorical":
            vocab = stats.vocabularies.get(name)
            prepared[name] = vocabulary_lookup(where, name, feat, vocab, names)(raw[name])
            sizes[name] = len(vocab) + OOV_INDICES
        else:
            raise ValueError(f"{where}: feature {name!r} has kind {feat.kind!r}; "
                             "the tabular model encodes 'numeric' and 'categorical'")
    if numeric:
        prepared[numeric_key(raw)] = _normalize(where, numeric, raw, stats.numeric, names)
    dataset = (manifest.dataset or "dataset")
    preprocess = keras.Model(raw, prepared, name=names(f"{dataset}_preprocess"))
    with core_scope or contextlib.nullcontext():
        core_inputs, encoded = {}, []
        core_names = Names(prepared)  # the core's inputs: ids by feature name, the matrix
        for name, x in prepared.items():  # int64 ids [batch]; the float32 numeric matrix
            core_inputs[name] = keras.Input(shape=x.shape[1:], name=name, dtype=x.dtype)
            encoded.append(_encode(name, sizes[name], core_inputs[name], config, core_names)
                           if name in sizes else core_inputs[name])
        hidden = _hidden(encoded, config, core_names)
        try:
            out = head(hidden, schema, stats, config, core_names)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
        core = keras.Model(core_inputs, out, name=names(f"{dataset}_core"))
    full = compose(raw, preprocess, core, serve, schema.label, f"{dataset}_model")
    return TabularModel(preprocess, core, full)


def compile_model(
    model: keras.Model, config: ModelConfig, steps_per_execution: int = 1,
    jit_compile: bool = False, loss: Any = None, metrics: list | None = None,
) -> keras.Model:
    """Adam + the task's loss and metrics; None = binary cross-entropy with AUC and accuracy
    (AUC since the binary label is imbalanced)."""
    model.compile(
        optimizer=keras.optimizers.Adam(_learning_rate(config)),
        loss=loss or keras.losses.BinaryCrossentropy(),
        metrics=metrics if metrics is not None else [
            keras.metrics.AUC(name="auc"), keras.metrics.BinaryAccuracy(name="accuracy")],
        steps_per_execution=steps_per_execution,
        jit_compile=jit_compile,
    )
    return model


def embedding_dim(vocab_size: int, max_dim: int) -> int:
    """Width that grows sub-linearly with the vocabulary, capped at ``max_dim``."""
    return max(2, min(max_dim, round(_EMBED_SCALE * vocab_size**_EMBED_POWER)))


def _hidden(encoded: list, config: ModelConfig, names: Names) -> Any:
    x = keras.layers.Concatenate(name=names("features"))(encoded)
    for i, units in enumerate(config.hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=names(f"dense_{i}"))(x)
        if config.dropout:
            x = keras.layers.Dropout(config.dropout, name=names(f"dropout_{i}"))(x)
    return x


def numeric_key(features: Mapping[str, Any]) -> str:
    """The name of the core's one input of all numeric features, as a matrix: ``numeric``,
    unless a feature has that name (then ``numeric_``, and so on)."""
    key = NUMERIC
    while key in features:
        key += "_"
    return key


def _normalize(where: str, numeric: list[str], raw: dict[str, Any],
               numeric_stats: Mapping[str, Moments], names: Names) -> Any:
    """The numeric features, in ``numeric`` order, as one normalized [batch, len(numeric)]
    matrix; its layers named by ``names``.

    One matrix, not one input per column: on a 250-row x 750-column table the per-column
    inputs (750 Keras inputs, 750 normalization layers, a 750-tensor dict per batch) made the
    MLP the slow part of a run that timed out (docs/TRAINING.md, "Wide tables": 13x faster)."""
    missing = [n for n in numeric if n not in numeric_stats]
    if missing:
        raise ValueError(f"{where}: numeric feature {missing[0]!r} has no statistics.numeric "
                         "entry")
    mean = np.array([float(numeric_stats[n].mean) for n in numeric], np.float32)
    var = np.array([float(numeric_stats[n].var) for n in numeric], np.float32)
    # A missing value (NaN in the records, or at serving time) becomes the train mean.
    x = Columns(fill=mean, name=names("numeric_columns"))([raw[n] for n in numeric])
    # float32 even under mixed precision: raw values (e.g. variances ~1e6) overflow float16.
    return keras.layers.Normalization(axis=-1, mean=mean, variance=var, dtype="float32",
                                      name=names("norm_numeric"))(x)


def _encode(name: str, size: int, ids: Any, config: ModelConfig, names: Names) -> Any:
    """Small vocabularies one-hot, larger ones a learned embedding."""
    if size <= config.one_hot_max_vocab:
        return keras.layers.CategoryEncoding(size, output_mode="one_hot",
                                             name=names(f"onehot_{name}"))(ids)
    dim = embedding_dim(size, config.embedding_max_dim)
    return keras.layers.Embedding(size, dim, name=names(f"embed_{name}"))(ids)


def _learning_rate(config: ModelConfig) -> Any:
    """Cosine decay to a tenth over the run's step budget: large steps early, fine ones late."""
    if config.lr_schedule == "constant" or not config.decay_steps:
        return config.learning_rate
    return keras.optimizers.schedules.CosineDecay(config.learning_rate, config.decay_steps,
                                                  alpha=0.1)
