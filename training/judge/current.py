"""The dataset's current model: its pointer, ``models/<dataset>/current.json``, a typed record
(``Current``) replaced only by a conditional write, and the model it names, loaded to be scored
beside a new one. The gate, the scorer, the CLI and the UI read the pointer through
``Current``'s attributes, never by string key.

The gate (``training.judge.gate``) decides whether a new model may replace it; this module
holds what is replaced and how: ``promote`` writes the pointer only if it is still what the
gate compared with, so two trainings judged at once cannot both become current.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etl import storage
from etl.jsonobject import JsonObject
from etl.jsonobject import key as json_field
from training.record import ModelRecord

__all__ = ["CURRENT_FILE", "Current", "Scores", "current_uri", "load_model", "promote",
           "read_current", "score_current"]

log = logging.getLogger(__name__)

Scores = dict[str, float]
CURRENT_FILE = "current.json"
_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class Current(JsonObject):
    """The dataset's current model, as its pointer names it: the run, the metric it was
    promoted on and its value, and when. Keys are kept as read (``JsonObject``)."""

    dataset: str = json_field(str, required=True)
    version: str = json_field(str, required=True)
    run: str = json_field(str, required=True)
    model_uri: str = json_field(str, required=True)
    metric: str = json_field(str, required=True)
    value: float = json_field(_NUMBER, required=True)
    blessed_at: str = json_field(str, required=True)

    def names(self, version: object, run: object) -> bool:
        """Whether this pointer names the run ``run`` of ``version``."""
        return self.version == version and self.run == run


def current_uri(models_root: str, dataset: str) -> str:
    return storage.safe_join(models_root, dataset, CURRENT_FILE)


def read_current(models_root: str, dataset: str) -> tuple[Current | None, str | None]:
    """The current model and the pointer's change token (None, None: no current model)."""
    uri = current_uri(models_root, dataset)
    data, token = storage.read_with_token(uri)
    if data is None:
        return None, None
    return Current.from_json(json.loads(data), uri), token


def load_model(model_uri: str) -> Any:
    """A published run's model as a callable on a batch of raw features: its ``model.keras``,
    else (a model family Keras cannot reload, or a layer saved by older code, such as the
    trees' layer before the compiled forest) its SavedModel's ``serve`` signature, which
    needs none of our code."""
    import keras

    import training.models.trees  # noqa: F401 (registers our layers for model.keras)

    keras_uri = storage.join(model_uri, "model.keras")
    if storage.exists(keras_uri):
        with tempfile.TemporaryDirectory(prefix="current-") as tmp:
            path = Path(tmp) / "model.keras"
            path.write_bytes(storage.read_bytes(keras_uri))
            try:
                return keras.saving.load_model(path)
            except Exception as err:  # noqa: BLE001 - any: the SavedModel is the fallback
                log.info("%s: model.keras does not load with this code (%s); scoring its "
                         "SavedModel", model_uri, str(err).splitlines()[0][:200] if str(err)
                         else type(err).__name__)
    import tensorflow as tf

    fs, root = storage.get_fs(storage.join(model_uri, "saved_model"))
    local = Path(tempfile.mkdtemp(prefix="current-saved-model-"))  # kept: tables read assets
    fs.get(root.rstrip("/") + "/", str(local), recursive=True)
    found = [p.parent for p in local.rglob("saved_model.pb")]
    if not found:
        raise FileNotFoundError(f"{model_uri} holds neither model.keras nor a SavedModel")
    served = tf.saved_model.load(str(found[0]))
    return lambda x, training=False: served.serve(x)


def score_current(current: Current, score: Callable[[Any], Scores]) -> Scores | str:
    """The current model's scores, or a one-line reason it could not be scored."""
    try:
        return score(load_model(current.model_uri))
    except Exception as err:  # noqa: BLE001 - any failure means "not comparable", said so
        log.warning("current model %s could not be scored: %s", current.model_uri, err)
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


def promote(models_root: str, record: ModelRecord, metric: str, token: str | None) -> bool:
    """Make a blessed run current, only if the pointer is still what the gate compared with
    (``token``; None: only if there is none), so two trainings cannot both promote."""
    pointer = Current.of(dataset=str(record.dataset), version=str(record.version),
                         run=str(record.run), model_uri=str(record.model_uri), metric=metric,
                         value=float(record.test.value(metric)),
                         blessed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    uri = current_uri(models_root, str(record.dataset))
    done = storage.replace_if_match(uri, storage.json_bytes(pointer.to_json()), token)
    if not done:
        log.warning("not promoted: %s changed while this run was judged; train again to "
                    "compare with the model it now names", uri)
    return done
