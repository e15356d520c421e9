"""The current blessed model as serving runs it: its SavedModel's ``serving_default``.

``served_model`` reads ``models/<dataset>/current.json`` (``training.judge.gate``), the run's
``metrics.json`` and the manifest of the version it was trained on (the features it takes, the
label's task and class names), copies the SavedModel to a local folder (its lookup tables read
assets from disk) and loads it. ``ServedModel.outputs`` calls the flat signature with the keys
the export wrote (``assets.extra/serving_keys.json``) and returns the task's answer per row.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from etl import storage
from etl.errors import PipelineError
from etl.versions import Manifest, read_manifest
from training.judge.current import read_current
from training.models.tabular import BINARY, REGRESSION, SERVING_KEYS_FILE
from training.record import METRICS_FILE, read_model_record


class NoModelError(PipelineError):
    """The dataset has no current (blessed) model, or its files cannot be read."""


class NoBlessedModelError(NoModelError):
    """No training run of the dataset has been blessed yet: nothing can score it."""


@dataclass(frozen=True)
class ServedModel:
    """A loaded SavedModel and what its answers mean."""

    dataset: str
    version: str  # the version it was trained on
    version_uri: str  # ... and where it is (metrics.json's)
    run: str
    model_uri: str
    task: str
    classes: tuple[str, ...]  # output order; empty for a regression
    features: dict[str, str]  # feature name -> dtype the signature takes
    manifest: Manifest  # the trained version's
    signature: Any
    keys: dict[str, str]  # feature name -> signature argument
    loaded: Any  # the SavedModel object: the signature's variables live as long as it does

    @property
    def model_id(self) -> str:
        """The model's folder name under a window's predictions: version and run."""
        return f"{self.version}--{self.run}"

    def outputs(self, features: dict[str, Any]) -> np.ndarray:
        """The model's answers for one batch of raw features: [n, 1] (probability of class 1,
        or the value) or [n, k] (one probability per class)."""
        import tensorflow as tf

        args = {self.keys[name]: tf.convert_to_tensor(features[name], dtype=dtype)
                for name, dtype in self.features.items()}
        out = self.signature(**args)
        value = next(iter(out.values())) if isinstance(out, dict) else out
        arr = np.asarray(value, dtype=np.float64)
        return arr.reshape(len(arr), -1)

    def columns(self, out: np.ndarray) -> dict[str, np.ndarray]:
        """``prediction`` and, for a classifier, ``probability_<class>`` per class."""
        if self.task == REGRESSION:
            return {"prediction": out[:, 0]}
        probs = np.concatenate([1.0 - out, out], axis=1) if self.task == BINARY else out
        names = np.asarray(self.classes, dtype=object)
        cols = {"prediction": names[probs.argmax(axis=1)].astype(str)}
        cols.update({f"probability_{n}": probs[:, i] for i, n in enumerate(self.classes)})
        return cols


def served_model(models_root: str, dataset: str) -> ServedModel:
    """The dataset's current model, loaded from its SavedModel."""
    current, _ = read_current(models_root, dataset)
    if current is None:
        raise NoBlessedModelError(f"{dataset}: no current model under {models_root} (no training run "
                           f"has been blessed yet); train one with python -m training train")
    record = read_model_record(current.model_uri)
    if record is None:
        raise NoModelError(f"{current.model_uri}: no {METRICS_FILE}; the current model's run "
                           f"is incomplete")
    if not record.version_uri:
        raise NoModelError(f"{current.model_uri}: its {METRICS_FILE} names no version_uri")
    manifest = read_manifest(record.version_uri)
    schema = manifest.schema
    if schema is None:
        raise NoModelError(f"{record.version_uri}: its manifest has no schema")
    if any(f.kind == "image" for f in schema.features.values()):
        raise NoModelError(f"{dataset}: scoring takes tabular datasets; this one has images")
    label = schema.label
    task = record.task or label.task_name
    loaded, keys = _load_saved_model(current.model_uri)
    signature = loaded.signatures["serving_default"]
    features = {n: str(f.dtype) for n, f in schema.features.items()}
    missing = sorted(set(features) - set(keys))
    if missing:
        raise NoModelError(f"{current.model_uri}: its serving signature lacks {missing}")
    return ServedModel(dataset, current.version, record.version_uri, current.run,
                       current.model_uri, task,
                       () if task == REGRESSION else tuple(label.class_names), features,
                       manifest, signature, keys, loaded)


def _load_saved_model(model_uri: str) -> tuple[Any, dict[str, str]]:
    import tensorflow as tf

    fs, root = storage.get_fs(storage.join(model_uri, "saved_model"))
    local = Path(tempfile.mkdtemp(prefix="score-saved-model-"))  # kept: tables read assets
    try:
        fs.get(root.rstrip("/") + "/", str(local), recursive=True)
    except FileNotFoundError:
        raise NoModelError(f"{model_uri}: no saved_model folder") from None
    found = [p.parent for p in local.rglob("saved_model.pb")]
    if not found:
        raise NoModelError(f"{model_uri}: no SavedModel under saved_model/")
    loaded = tf.saved_model.load(str(found[0]))
    keys = json.loads((found[0] / SERVING_KEYS_FILE).read_text())
    return loaded, keys
