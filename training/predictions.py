"""A window's predictions manifest, ``predictions/<dataset>/<window>/<model>/manifest.json``,
as a typed record: written last by ``training.score.publish``, read by the ledger (who scored
a version), the scoring DAG's summary and the UI through attributes, never by string key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from etl import storage, versions
from etl.jsonobject import JsonObject
from etl.jsonobject import key as json_field

PREDICTIONS_DIR = "predictions"
_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class PredictionsManifest(JsonObject):
    """What a score run published: the rows it scored (a version's window, or raw files:
    ``source``), the model that scored them, the counts, the drift verdict and the run.
    Keys are kept as read (``JsonObject``)."""

    format_version: int | None = json_field(int)
    dataset: str | None = json_field(str)
    window: str | None = json_field(str)
    source: Mapping[str, Any] = json_field(dict, default={})  # kind, version(_uri) or files
    model: Mapping[str, Any] = json_field(dict, default={})  # version, run, model_uri, task
    rows: int | None = json_field(int)
    scored: int | None = json_field(int)
    quarantined: int | None = json_field(int)
    quarantine: str | None = json_field(str)
    parts: tuple = json_field(list, default=())
    distribution: Mapping[str, Any] = json_field(dict, default={})  # training.score.drift
    run_id: str | None = json_field(str)
    code_version: str | None = json_field(str)
    seconds: float | None = json_field(_NUMBER)
    created_at: str | None = json_field(str)

    @property
    def model_uri(self) -> str | None:
        return self.model.get("model_uri")

    @property
    def source_uri(self) -> str | None:
        """The version scored (None: raw files)."""
        return self.source.get("version_uri")

    @property
    def psi(self) -> float | None:
        return self.distribution.get("psi")

    @property
    def drifted(self) -> bool | None:
        return self.distribution.get("drifted")


def scored_uri(root: str, dataset: str, scored: str) -> str:
    """``predictions/<dataset>/<scored>/``: the predictions of one version (or raw files) by
    each model."""
    return storage.safe_join(root, PREDICTIONS_DIR, dataset, scored)


def read_predictions_manifest(uri: str) -> PredictionsManifest | None:
    """The folder's manifest, None while it is not published.

    Raises:
        ValueError: the file is not a predictions manifest (names the file and the key).
    """
    path = storage.join(uri, versions.MANIFEST)
    try:
        return PredictionsManifest.from_json(storage.read_json(path), path)
    except FileNotFoundError:
        return None
