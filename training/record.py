"""A run's record, ``metrics.json``: what a training run trained on, how it scored and was
judged, written last by the run (``training.outputs.publish_run``), so a run folder holding it
holds a model. Read by the gate, the training DAG's version choice, scoring, the ledger and
the UI (``read_model_record``), always through these types, never by string key.

A typed JSON object (``etl.jsonobject``): keys are kept as read, so an older record reads and
writes back unchanged. Import-light: no TensorFlow here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from etl.jsonobject import JsonObject
from etl.jsonobject import key as json_field

METRICS_FILE = "metrics.json"  # a run's ModelRecord, written last


@dataclass(frozen=True)
class RunOrigin:
    """The orchestrator run that started a training run, as plain strings written to
    metrics.json (``dag_id``, ``run_id``), so the UI names and links that run however its id
    is spelled. Training never imports the orchestrator; the command line passes none."""

    dag_id: str
    run_id: str

    def fields(self) -> dict[str, str]:
        return {"dag_id": self.dag_id, "run_id": self.run_id}


_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class ModelRecord(JsonObject):
    """A run's ``metrics.json``: the data, the label, the figures per split (``test``,
    ``eval``, the ``baseline`` on test), the gate's verdict (``blessing``), the kept family
    and its fit, the run and the orchestrator run that started it. Written last by a run
    (``training.outputs.publish_run``), so a run folder with it holds a model; read by the
    gate, the training DAG's version choice, scoring and the UI (``read_model_record``). Keys
    are kept as read (``JsonObject``): an older record reads and writes back unchanged."""

    # the data: the version trained on, its label and task
    dataset: str | None = json_field(str)
    version: str | None = json_field(str)
    version_uri: str | None = json_field(str)
    manifest_sha256: str | None = json_field(str)
    examples: Mapping[str, int] = json_field(dict, default={})  # per split
    label: str | None = json_field(str)
    kind: str | None = json_field(str)  # "image" for an images version; absent for a table
    task: str | None = json_field(str)
    classes: list | None = json_field(list)  # class names in output order
    transform: str | None = json_field(str)
    # the figures: per split (test, eval), the baseline's on test, the gate's verdict on them
    split: str | None = json_field(str)
    test: Mapping[str, Any] = json_field(dict, default={})
    eval: Mapping[str, Any] = json_field(dict, default={})
    baseline: Mapping[str, Any] = json_field(dict, default={})
    min_margin: float | None = json_field(_NUMBER)
    blessing: Mapping[str, Any] | None = json_field(dict)  # training.judge.gate.Blessing's
    # a rare-positive or small label's held-out figures from repeated k-fold (training.run.folds)
    cross_validation: Mapping[str, Any] | None = json_field(dict)
    target_choice: Mapping[str, Any] | None = json_field(dict)  # regression: log1p or not, why
    # the kept family and its fit (epochs, or boosting rounds for trees)
    family: str | None = json_field(str)
    family_choice: Mapping[str, Any] | None = json_field(dict)
    epochs: int | None = json_field(int)
    epochs_run: int | None = json_field(int)
    best_epoch: int | None = json_field(int)
    resumed_from_epoch: int = json_field(int, default=0)
    history: Mapping[str, list] = json_field(dict, default={})
    fit_seconds: float | None = json_field(_NUMBER)
    examples_per_s: float | None = json_field(_NUMBER)
    stall_ratio: float | None = json_field(_NUMBER)
    # where and with what it ran
    device: str | None = json_field(str)
    precision: str | None = json_field(str)
    replicas: int | None = json_field(int)
    code_version: str | None = json_field(str)
    hyperparameters: Mapping[str, Any] = json_field(dict, default={})
    tuned: Mapping[str, Any] | None = json_field(dict)  # training.outputs.Tuned's, as used
    phases: Mapping[str, Any] | None = json_field(dict)  # seconds and peak RSS per phase
    created_at: str | None = json_field(str)
    # the run: its folder, the orchestrator run that started it (``RunOrigin``), its files
    run: str | None = json_field(str)
    model_uri: str | None = json_field(str)
    dag_id: str | None = json_field(str)
    run_id: str | None = json_field(str)
    artifacts: list | None = json_field(list)

    @property
    def trained_by(self) -> str | None:
        """``run <run_id> of <dag_id>`` when an orchestrator run started it, else None."""
        return f"run {self.run_id} of {self.dag_id}" if self.run_id and self.dag_id else None

    @property
    def trees(self) -> bool:
        return self.family == "trees"


def read_model_record(run_uri: str) -> ModelRecord | None:
    """The run folder's ``metrics.json``, None while there is none (running, failed, killed).

    Raises:
        ValueError: the file is not a model record (names the file and the key).
    """
    from etl import storage

    path = storage.join(run_uri, METRICS_FILE)
    try:
        obj = storage.read_json(path)
    except FileNotFoundError:
        return None
    return ModelRecord.from_json(obj, path)
