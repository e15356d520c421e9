"""A run's record, ``metrics.json``, typed to its leaves: what a training run trained on, how
it scored and was judged. Written last by the run (``training.outputs.publish_run``), so a run
folder holding it holds a model; read by the gate, the training DAG's version choice, scoring,
the ledger and the UI (``read_model_record``), always through these types, never by string key.

Its blocks are typed records too: the figures per split (``Figures``, with the test split's
``Intervals``), the gate's verdict (``Blessing``, its checks each a ``Check``, made by
``training.judge.gate``), a small table's repeated k-fold (``CrossValidation``, by
``training.run.choice``), a regression's target choice and the kept family's
(``TargetChoice``, ``FamilyChoice``, by ``training.run.choice``), the tuned settings used
(``TunedUse``, of ``training.outputs.Tuned``) and each phase's time (``PhaseTimes``, by
``training.run.runtime.Phases``). They live here, under the modules that write them, because
the record holds them and the gate and the outputs both read it.

What ``training.run.train.train`` returns holds the record and its verdict (``Trained``: the
run's folder, its record, the verdict, whether it became current; made by the gate,
``training.judge.gate.conclude``, ``stored``), and ``Handover`` is what one training task hands
on (its XCom, read by ``announce_model``): the last model it trained, in scalars, whether any
became current, every version it trained. Read by the CLI, the pending-versions loop and the
training DAG through attributes; ``to_json`` / ``from_json`` carry them across a process or
XCom boundary, so no reader takes them apart by string key. Every block is a typed JSON
object (``etl.jsonobject``): keys are kept as read, so an older record (or a key this code does
not know) reads and writes back unchanged. Import-light: no TensorFlow here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Self

from etl.jsonobject import JsonObject, list_of, mapping_of, nested, strings
from etl.jsonobject import key as json_field

_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class Intervals(JsonObject):
    """The test figures' ``intervals`` (``training.judge.evaluate.metric_intervals``): each
    gate metric's interval and its lead over the baseline's, by metric name."""

    level: float | None = json_field(_NUMBER)
    method: str | None = json_field(str)
    resamples: int | None = json_field(int)
    metrics: Mapping[str, list] = json_field(dict, default={})  # metric -> [low, high]
    lead_over_baseline: Mapping[str, list] = json_field(dict, default={})


@dataclass(frozen=True, kw_only=True)
class Figures(JsonObject):
    """A split's figures (``test``, ``eval``, the ``baseline``'s on test, a small table's
    ``out_of_fold``): the metrics the tasks write (``training.tasks``), the test split's
    report and intervals, a baseline's answer. A figure another model family or an older
    run wrote under another name is kept as read (``value``, ``numbers``)."""

    loss: float | None = json_field(_NUMBER)
    auc: float | None = json_field(_NUMBER)
    accuracy: float | None = json_field(_NUMBER)
    macro_f1: float | None = json_field(_NUMBER)
    rmse: float | None = json_field(_NUMBER)
    mae: float | None = json_field(_NUMBER)
    r2: float | None = json_field(_NUMBER)
    examples: int | None = json_field(int)
    positive_rate: float | None = json_field(_NUMBER)  # a binary baseline's: test's share of 1s
    majority_class: int | None = json_field(int)  # a class baseline's answer
    predicts: float | None = json_field(_NUMBER)  # a regression baseline's answer: train mean
    per_class: Mapping[str, Any] | None = json_field(dict)  # class -> precision, recall, ...
    confusion_matrix: list | None = json_field(list)
    intervals: Intervals | None = json_field(dict, nested(Intervals))

    def value(self, name: str) -> Any:
        """A figure by its metric name (a task's gate or card metric), None when absent."""
        if name in _FIGURE_FIELDS:
            return getattr(self, name)
        return self.json_extra.get(name)

    def numbers(self) -> dict[str, float]:
        """Every number among the figures, by name, in the order read."""
        out = {}
        for name, value in self.to_json().items():
            if isinstance(value, _NUMBER) and not isinstance(value, bool):
                out[name] = value
        return out

    def __bool__(self) -> bool:
        return bool(self.to_json())


_FIGURE_FIELDS = frozenset(f.name for f in fields(Figures)) - {"json_order", "json_extra"}


@dataclass(frozen=True)
class Check(JsonObject):
    """One check of the gate: a short name, whether it passed and the figures it compared."""

    name: str = json_field(str, required=True)
    passed: bool = json_field(bool, required=True)
    detail: str = json_field(str, default="")


@dataclass(frozen=True)
class Blessing(JsonObject):
    """The gate's verdict (``training.judge.gate.judge``), metrics.json's ``blessing``:
    ``reasons`` are the details of the failed checks, ``rules`` what the gate applied."""

    blessed: bool = json_field(bool, required=True)
    reasons: tuple[str, ...] = json_field(list, strings(), default=())
    checks: tuple[Check, ...] = json_field(list, list_of(Check), default=())
    rules: str = json_field(str, default="")

    @classmethod
    def of(cls, checks: list[Check], rules: str = "") -> Self:
        failed = tuple(c.detail for c in checks if not c.passed)
        return cls(not failed, failed, tuple(checks), rules)

    @classmethod
    def missing(cls) -> Self:
        """What a record without a verdict (a run from before the gate) counts as."""
        return cls(False, ("no verdict stored",), ())

    def summary(self) -> str:
        """One plain line for a log or a terminal, ending with the rules it applied."""
        rules = f" [rules: {self.rules}]" if self.rules else ""
        if self.blessed:
            return "blessed: " + "; ".join(c.detail for c in self.checks) + rules
        return "NOT blessed: " + "; ".join(self.reasons) + rules


@dataclass(frozen=True, kw_only=True)
class FoldScores(JsonObject):
    """One family's held-out scores over a small table's repeated k-fold."""

    per_repeat: tuple[float, ...] = json_field(list, strings(_NUMBER), default=())
    mean: float | None = json_field(_NUMBER)
    range: tuple[float, ...] = json_field(list, strings(_NUMBER), default=())
    lengths: list | None = json_field(list)  # epochs or rounds each fold's fit kept
    median_length: int | None = json_field(int)


@dataclass(frozen=True, kw_only=True)
class FoldRefit(JsonObject):
    """The kept family refitted on train and eval: rows, and how long (epochs or rounds)."""

    rows: int | None = json_field(int)
    length: int | None = json_field(int)
    unit: str | None = json_field(str)


@dataclass(frozen=True, kw_only=True)
class CrossValidation(JsonObject):
    """A small table's repeated k-fold (``training.run.choice``): the families' scores, the
    kept one and why, and the out-of-fold figures the verdict judged, with the baseline's."""

    rows: int | None = json_field(int)
    folds: int | None = json_field(int)
    repeats: int | None = json_field(int)
    metric: str | None = json_field(str)
    families: Mapping[str, FoldScores] = json_field(dict, mapping_of(FoldScores), default={})
    chosen: str | None = json_field(str)
    why: str | None = json_field(str)
    refit: FoldRefit | None = json_field(dict, nested(FoldRefit))
    out_of_fold: Figures = json_field(dict, nested(Figures), default=Figures())
    baseline: Figures = json_field(dict, nested(Figures), default=Figures())


@dataclass(frozen=True, kw_only=True)
class TargetChoice(JsonObject):
    """A regression's target, decided on the data (``training.run.choice.choose_target``):
    ``raw`` or ``log1p``, the train target's skewness and minimum, the eval RMSE of each
    (when both were fitted) and why."""

    chosen: str | None = json_field(str)
    skewness: float | None = json_field(_NUMBER)
    min: float | None = json_field(_NUMBER)
    eval_rmse: Mapping[str, float] | None = json_field(dict)
    why: str | None = json_field(str)


@dataclass(frozen=True, kw_only=True)
class FamilyChoice(JsonObject):
    """The kept family (``training.run.choice.choose``): the metric judged, each family's
    eval score (or mean over a small table's folds) and why."""

    chosen: str | None = json_field(str)
    metric: str | None = json_field(str)
    eval: Mapping[str, float] = json_field(dict, default={})
    why: str | None = json_field(str)


@dataclass(frozen=True, kw_only=True)
class TunedUse(JsonObject):
    """The tuned settings a run used (``training.outputs.Tuned.summary``): when and on what
    version they were found, what they scored against the defaults, and the ones the spec or
    a flag set instead (``overridden``)."""

    tuned_at: str | None = json_field(str)
    version: str | None = json_field(str)
    family: str | None = json_field(str)
    settings: Mapping[str, Any] = json_field(dict, default={})
    metric: str | None = json_field(str)
    eval: float | None = json_field(_NUMBER)
    default_eval: Mapping[str, float] = json_field(dict, default={})  # family -> eval score
    trials: int | None = json_field(int)
    judged: str = json_field(str, default="eval")  # or a small table's repeated k-fold
    overridden: tuple[str, ...] = json_field(list, strings(), default=())


@dataclass(frozen=True, kw_only=True)
class PhaseTime(JsonObject):
    """One phase of a run: wall seconds, CPU seconds and peak RSS of the process."""

    seconds: float | None = json_field(_NUMBER)
    cpu_s: float | None = json_field(_NUMBER)
    peak_rss_mb: float | None = json_field(_NUMBER)


@dataclass(frozen=True, kw_only=True)
class PhaseTimes(JsonObject):
    """Each phase of a run's time (``training.run.runtime.Phases``)."""

    fit: PhaseTime | None = json_field(dict, nested(PhaseTime))
    evaluate: PhaseTime | None = json_field(dict, nested(PhaseTime))
    export: PhaseTime | None = json_field(dict, nested(PhaseTime))

    def ratio(self, part: str, whole: str) -> float:
        """One phase's seconds over another's; NaN when either is missing."""
        a, b = getattr(self, part), getattr(self, whole)
        if a is None or b is None or not a.seconds or not b.seconds:
            return math.nan
        return a.seconds / b.seconds


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
    test: Figures = json_field(dict, nested(Figures), default=Figures())
    eval: Figures = json_field(dict, nested(Figures), default=Figures())
    baseline: Figures = json_field(dict, nested(Figures), default=Figures())
    min_margin: float | None = json_field(_NUMBER)
    blessing: Blessing | None = json_field(dict, nested(Blessing))
    # a rare-positive or small label's held-out figures from repeated k-fold (training.run.folds)
    cross_validation: CrossValidation | None = json_field(dict, nested(CrossValidation))
    target_choice: TargetChoice | None = json_field(dict, nested(TargetChoice))  # regression
    # the kept family and its fit (epochs, or boosting rounds for trees)
    family: str | None = json_field(str)
    family_choice: FamilyChoice | None = json_field(dict, nested(FamilyChoice))
    epochs: int | None = json_field(int)
    epochs_run: int | None = json_field(int)
    best_epoch: int | None = json_field(int)
    resumed_from_epoch: int = json_field(int, default=0)
    history: Mapping[str, list] = json_field(dict, default={})  # curve name -> per epoch
    fit_seconds: float | None = json_field(_NUMBER)
    examples_per_s: float | None = json_field(_NUMBER)
    stall_ratio: float | None = json_field(_NUMBER)
    # where and with what it ran
    device: str | None = json_field(str)
    precision: str | None = json_field(str)
    replicas: int | None = json_field(int)
    code_version: str | None = json_field(str)
    hyperparameters: Mapping[str, Any] = json_field(dict, default={})
    tuned: TunedUse | None = json_field(dict, nested(TunedUse))
    phases: PhaseTimes | None = json_field(dict, nested(PhaseTimes))
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

    def scalars(self) -> dict[str, Any]:
        """The record's scalars, and the scalars of each per-split block (``test``, ``eval``,
        ``baseline``): small enough for XCom, lineage and the UI. A split's nested parts (a
        confusion matrix, per-class scores) are left out, never the split itself."""
        def scalar(v: Any) -> bool:
            return v is None or isinstance(v, (bool, int, float, str))

        out: dict[str, Any] = {}
        for k, value in self.to_json().items():
            if scalar(value):
                out[k] = value
            elif isinstance(value, Mapping) and (flat := {n: v for n, v in value.items()
                                                         if scalar(v)}):
                out[k] = flat
        return out


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


@dataclass(frozen=True, kw_only=True)
class Trained(JsonObject):
    """One trained run: ``metrics`` is its metrics.json as written, ``blessing`` the verdict
    on it, ``promoted`` whether ``models/<dataset>/current.json`` now names it."""

    model_uri: str | None = json_field(str)
    metrics: ModelRecord = json_field(dict, nested(ModelRecord), required=True)
    blessing: Blessing = json_field(dict, nested(Blessing), required=True)
    promoted: bool = json_field(bool, default=False)

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

    version: str = json_field(str, required=True)
    model_uri: str | None = json_field(str)
    metrics: Mapping[str, Any] = json_field(dict, default={})
    blessing: Blessing = json_field(dict, nested(Blessing), required=True)
    promoted: bool = json_field(bool, default=False)
    trained: tuple[str, ...] = json_field(list, strings(), default=())

    @classmethod
    def of_runs(cls, runs: Sequence[Trained]) -> Self:
        """The hand-over of ``runs`` (``train_pending``'s results, oldest first; not empty)."""
        last = runs[-1]
        return cls.of(version=last.version, model_uri=last.model_uri,
                      metrics=last.metrics.scalars(), blessing=last.blessing,
                      promoted=any(run.promoted for run in runs),
                      trained=tuple(run.version for run in runs))
