"""A tabular model, whichever family fits it: raw feature values in, the task's answer out.

Both families (``training.models.mlp``, ``training.models.trees``) hand back the same three
views (``TabularModel``), put the train split's vocabularies inside the model as lookups
(``vocabulary_lookup``), and are exported the same way: a SavedModel whose ``serve`` endpoint
takes one dict keyed by the spec's feature names, so serving applies exactly the preprocessing
training did and any valid spec name serves (``export_serving``). Evaluation, the gate and the
export never know which family won.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import keras
import numpy as np
import tensorflow as tf

from etl.versions.segment import FeatureSchema

OOV_INDICES = 1


class TabularModel(NamedTuple):
    """The three views of one model; they share weights: ``preprocess`` (raw values -> what the
    core takes, run in the tf.data feature map), ``core`` (the part that trains and is
    evaluated) and ``full`` (``core(preprocess(raw))``: what is saved and exported)."""

    preprocess: keras.Model
    core: keras.Model
    full: keras.Model


def vocabulary_lookup(where: str, name: str, feat: FeatureSchema,
                      vocab: list | None) -> keras.layers.Layer:
    """The categorical feature's train vocabulary as a lookup layer: id 0 for a value it never
    saw (``OOV_INDICES``), 1.. for the rest in vocabulary order. ``where`` names the manifest
    in the errors.

    Raises:
        ValueError: the manifest has no vocabulary for the feature, or one with duplicates.
    """
    if not vocab:
        raise ValueError(f"{where}: categorical feature {name!r} has no statistics.vocabularies entry")
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"{where}: vocabulary of {name!r} has duplicate entries")
    if feat.dtype == "string":
        return keras.layers.StringLookup(
            vocabulary=[str(v) for v in vocab], num_oov_indices=OOV_INDICES, name=f"lookup_{name}"
        )
    return keras.layers.IntegerLookup(
        vocabulary=np.asarray(vocab, dtype="int64"), num_oov_indices=OOV_INDICES,
        name=f"lookup_{name}",
    )


_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")  # TF's rule for a node name


def serving_keys(names: Iterable[str]) -> dict[str, str]:
    """Each feature's key in the SavedModel's flat serving signature: its own name, unless TF
    cannot take that as a signature argument -- a Python keyword (``class``: TF makes each key a
    Python parameter) gets ``_`` appended, a leading ``_`` (no valid TF node name) gets ``x``
    prefixed, the second of two names differing only in case (TF's graph names are unique
    regardless of case) gets ``_`` appended -- made unique against every other name. The
    ``serve`` endpoint takes the features as one dict keyed by the spec's names, whatever
    they are."""
    names, keys, taken = list(names), {}, set()
    for name in names:  # first pass: names TF takes as they are keep them
        if _plain(name) and name.lower() not in taken:
            keys[name] = name
            taken.add(name.lower())
    for name in names:
        if name in keys:
            continue
        key = re.sub(r"[^A-Za-z0-9_]", "_", name) + ("_" if keyword.iskeyword(name) else "")
        key = key if _OP_NAME.match(key) and key[0] != "_" else f"x{key}"
        while key.lower() in taken:
            key += "_"
        taken.add(key.lower())
        keys[name] = key
    return {name: keys[name] for name in names}


def _plain(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and bool(_OP_NAME.match(name))


def serving_signature(model: keras.Model) -> list[dict[str, tf.TensorSpec]]:
    """The export's input signature: one dict keyed by feature name (the ``serve`` endpoint
    takes rows keyed as the spec declares them), each tensor named by ``serving_keys`` (the
    flat ``serving_default`` signature's keys, which TF requires to be Python parameters)."""
    inputs = model.input if isinstance(model.input, dict) else {}
    keys = serving_keys(inputs)
    return [{name: tf.TensorSpec((None, *t.shape[1:]), t.dtype, name=keys[name])
             for name, t in inputs.items()}]


SERVING_KEYS_FILE = "assets.extra/serving_keys.json"  # beside saved_model.pb; TF Serving skips it


def export_serving(model: keras.Model, path: Path) -> None:
    """The SavedModel: ``serve`` takes a dict keyed by the spec's feature names (any valid spec
    name, ``class`` included); ``serving_default`` takes the flat ``serving_keys``, written to
    ``SERVING_KEYS_FILE`` (feature name -> signature key) for clients of the flat signature."""
    signature = serving_signature(model)
    model.export(str(path), verbose=False, input_signature=signature)
    keys = {name: spec.name for name, spec in signature[0].items()}
    (path / SERVING_KEYS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (path / SERVING_KEYS_FILE).write_text(json.dumps(keys, indent=1, sort_keys=True) + "\n")
