"""What ``training.run.train.train`` returns, as a typed record (``Trained``): the run's
folder, its model record (metrics.json), the gate's verdict and whether it became current.
Made by the gate (``training.judge.gate.conclude``, ``stored``), read by the CLI, the
pending-versions loop and the training DAG through attributes; ``to_json`` / ``from_json``
carry it across a process or XCom boundary, so no reader takes it apart by string key.

``Handover`` is what one training task hands on (its XCom, read by ``announce_model``): the
last model it trained, in scalars, whether any became current, every version it trained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from etl.jsonobject import JsonObject, key, nested, strings
from training.record import Blessing, ModelRecord


@dataclass(frozen=True, kw_only=True)
class Trained(JsonObject):
    """One trained run: ``metrics`` is its metrics.json as written, ``blessing`` the verdict
    on it, ``promoted`` whether ``models/<dataset>/current.json`` now names it."""

    model_uri: str | None = key(str)
    metrics: ModelRecord = key(dict, nested(ModelRecord), required=True)
    blessing: Blessing = key(dict, nested(Blessing), required=True)
    promoted: bool = key(bool, default=False)

    @property
    def version(self) -> str:
        """The version the run trained on."""
        return str(self.metrics.version)

    def summary(self) -> str:
        """The message of ``ModelNotBlessedError``: the run and why it is not current."""
        return (f"model {self.model_uri} was written but is not blessed, so it is not current "
                f"({self.blessing.summary()}); fail_unblessed is set, so this run fails")


def trained(model_uri: Any, record: ModelRecord, blessing: Blessing, promoted: bool) -> Trained:
    """A run's result as the gate concludes it."""
    return Trained.of(model_uri=None if model_uri is None else str(model_uri), metrics=record,
                      blessing=blessing, promoted=bool(promoted))


@dataclass(frozen=True, kw_only=True)
class Handover(JsonObject):
    """A training task's result for XCom and the next task: the last run's version, model
    folder, record scalars (``ModelRecord.scalars``) and verdict; ``promoted``: whether any
    run of the task made its model current; ``trained``: every version trained, oldest
    first."""

    version: str = key(str, required=True)
    model_uri: str | None = key(str)
    metrics: Mapping[str, Any] = key(dict, default={})
    blessing: Blessing = key(dict, nested(Blessing), required=True)
    promoted: bool = key(bool, default=False)
    trained: tuple[str, ...] = key(list, strings(), default=())

    @classmethod
    def of_runs(cls, runs: Sequence[Trained]) -> Self:
        """The hand-over of ``runs`` (``train_pending``'s results, oldest first; not empty)."""
        last = runs[-1]
        return cls.of(version=last.version, model_uri=last.model_uri,
                      metrics=last.metrics.scalars(), blessing=last.blessing,
                      promoted=any(run.promoted for run in runs),
                      trained=tuple(run.version for run in runs))
