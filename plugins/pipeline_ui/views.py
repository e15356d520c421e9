"""Readable views of stored documents: labels for raw keys, model runs, fingerprints.

Kept apart from ``present`` (manifest rows, Markdown) so each stays a screenful of rules.
Every function is tolerant of what a manifest or metrics file of any dataset kind may hold:
a value of an unexpected shape is shown as stored, never an error page.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from etl.versions import Manifest
from training.judge.current import Current
from training.record import Intervals, ModelRecord, TunedUse

from .present import flatten, fmt, metric

MAX_HISTORY_EPOCHS = 500
METRIC_SCOPES = ("test", "eval", "baseline")
# Words a reader should not have to decode; anything else is de-snake-cased.
_LABELS = {
    "timings_s": "Timings (s)", "max_quarantined": "Quarantine limit (rows)",
    "reasons": "Quarantine reasons", "evaluated_rows": "Rows evaluated",
    "quarantined_rows": "Rows quarantined", "auc": "AUC", "pr_auc": "PR AUC", "cpu": "CPU",
    "gpu": "GPU", "examples_per_s": "Examples per second", "fit_seconds": "Fit time (s)",
    "stall_ratio": "Input stall ratio", "min_margin": "Required margin over baseline",
    "best_epoch": "Best epoch",
    "epochs_run": "Epochs run", "resumed_from_epoch": "Resumed from epoch",
    "version_uri": "Version URI", "model_uri": "Model URI", "code_version": "Code version",
    "sha256": "SHA-256", "manifest_sha256": "Manifest SHA-256", "lr": "Learning rate",
    "val_loss": "Eval loss", "val_auc": "Eval AUC", "val_accuracy": "Eval accuracy",
    "shard_target_bytes": "Shard target (bytes)", "dask": "Dask", "gx": "GX", "id": "ID",
    "uri": "URI", "macro_f1": "Macro-F1", "rmse": "RMSE", "mae": "MAE", "r2": "R²",
    "per_class": "Per class", "confusion_matrix": "Confusion matrix",
    # the whole fit phase (every family fitted, folds, the choice), not the kept one's fit
    "phases.fit": "Phases › Whole fit phase (each family tried, the choice)",
}
# A trees model's ``epochs*`` keys count boosting rounds (metrics.json names them as a
# network's), and its ``fit_seconds`` is the kept family's own fit, not the fit phase.
_ROUNDS = {"epochs": "Boosting rounds (at most)", "epochs_run": "Boosting rounds run",
           "best_epoch": "Best round", "resumed_from_epoch": "Resumed from round"}


def run_words(record: ModelRecord) -> dict[str, str]:
    """The labels of one model run's own keys: rounds for trees, whose fit it timed."""
    fit = {"fit_seconds": f"Own fit of the kept family, {record.family} (s)"} \
        if record.family else {}
    return {**(_ROUNDS if record.trees else {}), **fit}


def label(key: str, words: dict[str, str] | None = None) -> str:
    """``timings_s.row_level_task_cpu`` -> ``Timings (s) › Row level task CPU``; ``words``:
    labels of keys (dotted from the top: ``phases.fit``) that win over the shared ones."""
    words = {**_LABELS, **(words or {})}
    parts = [p for p in str(key).split(".") if p]
    for cut in range(len(parts), 1, -1):  # a dotted key labelled whole, the rest below it
        if (head := ".".join(parts[:cut])) in words:
            return " › ".join([words[head], *(_label_part(p, words) for p in parts[cut:])])
    return " › ".join(_label_part(p, words) for p in parts)


def _label_part(part: str, labels: dict[str, str] = _LABELS) -> str:
    if part in labels:
        return labels[part]
    words = [_LABELS.get(w, w) for w in re.split(r"[_\s]+", part) if w]
    if words and words[-1] == "s" and len(words) > 1:
        words[-1] = "(s)"
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def labelled(obj: Any, skip: tuple[str, ...] = (),
             words: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    """Flattened ``(readable label, value)`` rows, leaving out top-level keys in ``skip``."""
    if not isinstance(obj, dict):
        return []
    return [(label(k, words), v)
            for k, v in flatten({k: v for k, v in obj.items() if k not in skip})]


@dataclass(frozen=True)
class Fingerprint:
    """A source fingerprint as images (a file count) and tables (a file list) store it."""

    sha256: Any
    count: Any
    source: Any
    files: list[dict[str, Any]] = field(default_factory=list)


def fingerprint(manifest: Manifest) -> Fingerprint:
    """``files`` is a list of ``{uri, size, mtime}`` for tables and a count for images."""
    fp = manifest.sources
    files = fp.files
    listed = [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []
    # an images version lists its source folder once, with the folder's file count inside
    count = sum(f["files"] if isinstance(f.get("files"), int) else 1 for f in listed) \
        if isinstance(files, list) else files
    return Fingerprint(fp.sha256, count, fp.source, listed)


@dataclass(frozen=True)
class ModelView:
    """A run's metrics.json grouped the way a reader compares them."""

    scopes: list[str]  # columns present among test / eval / baseline
    quality: list[tuple[str, list[Any]]]  # metric label, value per scope, test interval, lead
    facts: list[tuple[str, Any]]
    hyperparameters: list[tuple[str, Any]]
    history_keys: list[str]
    history: list[list[Any]]  # one row per step: its number, then a value per key
    history_truncated: bool
    level: Any = None  # the intervals' confidence level (0.95), None when none were stored
    tuned: list[tuple[str, Any]] | None = None  # metrics.json ``tuned``: where settings came from
    steps: tuple[str, str] = ("epochs", "Epoch")  # what a history row is: plural, column
    scope_names: dict[str, str] = field(default_factory=dict)  # a column's name, where not its key


def model_view(record: ModelRecord | None) -> ModelView:
    """Quality metrics side by side (test, eval, baseline) with the test intervals stored by
    training (``test.intervals``), hyperparameters once, history."""
    record = record or ModelRecord()
    figures = {"test": record.test, "eval": record.eval, "baseline": record.baseline}
    scopes = [s for s in METRIC_SCOPES if figures.get(s)]
    names: list[str] = []
    for scope in scopes:
        names += [k for k, v in figures[scope].to_json().items()
                  if k not in names and _scalar(v)]
    ci = record.test.intervals or Intervals()
    bounds, leads = ci.metrics, ci.lead_over_baseline
    quality = [(label(n), [*(figures[s].value(n) for s in scopes), interval(bounds.get(n)),
                           interval(leads.get(n))]) for n in names]
    history = record.history
    keys = [k for k, v in history.items() if isinstance(v, list)]
    epochs = max((len(history[k]) for k in keys), default=0)
    rows = [[i + 1, *(history[k][i] if i < len(history[k]) else None for k in keys)]
            for i in range(min(epochs, MAX_HISTORY_EPOCHS))]
    skip = (*scopes, "history", "hyperparameters", "artifacts", "blessing", "tuned")
    return ModelView(scopes, quality, labelled(record.to_json(), skip, run_words(record)),
                     hyperparameter_rows(record.hyperparameters),
                     [label(k) for k in keys], rows, epochs > MAX_HISTORY_EPOCHS,
                     ci.level, tuned_rows(record.tuned),
                     ("boosting rounds", "Round") if record.trees else ("epochs", "Epoch"),
                     # a small table's eval rows trained the kept model: its figures there
                     # are the cross-validation's out-of-fold ones (training.run.families)
                     {"eval": "out-of-fold"} if record.cross_validation else {})


def tuned_rows(tuned: TunedUse | None) -> list[tuple[str, Any]] | None:
    """The tuned settings a run used (``python -m training tune``), with when and on what
    they were found and what they scored on eval against the defaults; None: not tuned."""
    if tuned is None:
        return None
    judged, metric = tuned.judged or "eval", tuned.metric or ""
    figure = f"Eval {metric}" if judged == "eval" else f"{metric} by {judged}"
    rows: list[tuple[str, Any]] = [
        ("Tuned", (f"{tuned.tuned_at or '?'} on version {tuned.version or '?'}, "
                  f"{'?' if tuned.trials is None else tuned.trials} trials")),
        ("Family", tuned.family),
        *((label(k), v) for k, v in tuned.settings.items()),
        (figure, tuned.eval),
        *((f"{figure} at {f} defaults", v) for f, v in tuned.default_eval.items()),
    ]
    overridden = tuned.overridden
    if overridden:
        rows.append(("Set by the spec or a flag instead", ", ".join(map(str, overridden))))
    return rows


@dataclass(frozen=True)
class ModelBadge:
    """What a model's badge shows: the gate's blessing of the run (metrics.json ``blessing``)
    and whether it is current (a version's validation outcome is ``Manifest.verdict``)."""

    state: str  # "blessed", "not blessed", or "no verdict" (a run from before the gate)
    current: bool  # models/<dataset>/current.json names this run
    reasons: list[str]
    checks: list[tuple[bool, str]]  # (passed, the figures and threshold)


def model_badge(record: ModelRecord | None, current: Current | None) -> ModelBadge:
    """Tolerant of runs without a verdict and of a missing or odd pointer."""
    blessing = record.blessing if record else None
    state = "no verdict" if blessing is None else (
        "blessed" if blessing.blessed else "not blessed")
    checks = [(c.passed, c.detail) for c in blessing.checks] if blessing else []
    is_current = current is not None and record is not None and \
        current.names(record.version, record.run)
    return ModelBadge(state, is_current, list(blessing.reasons) if blessing else [], checks)


def interval(bounds: Any) -> str:
    """``[0.81, 0.87]`` -> ``0.81 – 0.87``; anything else (none stored, NaN) -> ``–``."""
    if not (isinstance(bounds, list) and len(bounds) == 2
            and all(isinstance(b, (int, float)) and not math.isnan(b) for b in bounds)):
        return "–"
    return f"{metric(float(bounds[0]))} – {metric(float(bounds[1]))}"


# TrainConfig's "let the code choose" values (training/config.py), as a reader says them.
_AUTOTUNE = -1


def hyperparameter_rows(params: Any) -> list[tuple[str, Any]]:
    """Hyperparameters with their sentinels spelled out: AUTOTUNE (-1) and None are "auto",
    no devices are "all visible", no work_dir is "a temporary folder"."""
    rows = []
    for key, value in flatten(params) if isinstance(params, dict) else []:
        leaf = key.rsplit(".", 1)[-1]
        if leaf == "devices" and value in ("none", None):
            value = "all visible"
        elif leaf == "work_dir" and value is None:
            value = "a temporary folder"
        elif value is None or (value == _AUTOTUNE and key.startswith("input.")):
            value = "auto"
        rows.append((label(key), value))
    return rows


# Airflow-generated run ids, as ``run_name`` (dags/flightpipe_dags/options.py) stored them in
# a folder name before metrics.json recorded them: ``manual__2026-11-24T20:01:02.123+00:00`` ->
# ``manual__2026-11-24T20_01_02.123_00_00``; runs without a logical date (asset-triggered,
# manual through the API) end with Airflow's random suffix, ``..._00_00_AbC12xYz``.
_RUN_FOLDER = re.compile(r"^(manual|scheduled|backfill|asset_triggered)__(\d{4}-\d\d-\d\dT\d\d)_"
                         r"(\d\d)_(\d\d(?:\.\d+)?)_00_00(_[A-Za-z0-9]+)?$")


def training_run(folder: str, dataset: str, record: ModelRecord | None) -> tuple[str, str | None]:
    """(run id, training DAG id or None): the Airflow run that trained the model, when known.

    ``metrics.json``'s own ``run_id``/``dag_id`` win (the training DAG writes them since
    issue 34); else, for older models, the folder name of an Airflow run is turned back into
    its run id; a command-line run keeps its folder name and no link.
    """
    if record is not None and record.run_id:
        return record.run_id, record.dag_id or f"train_{dataset}"
    if m := _RUN_FOLDER.match(folder):
        return f"{m[1]}__{m[2]}:{m[3]}:{m[4]}+00:00{m[5] or ''}", f"train_{dataset}"
    return folder, None


def card_without(card: str, section: str) -> str:
    """The model card less one ``## section`` (the page shows it already, formatted)."""
    out, skipping = [], False
    for line in card.splitlines(keepends=True):
        if line.startswith("## "):
            skipping = line[3:].strip().lower() == section.lower()
        if not skipping:
            out.append(line)
    return "".join(out)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def cell(value: Any) -> str:
    """One table cell: numbers formatted, anything nested shown compactly."""
    if isinstance(value, (dict, list)) and not value:
        return "none"
    return fmt(value) if _scalar(value) else str(value)


def metric_cell(value: Any) -> str:
    """A cell of a metrics table: floats with 4 significant digits (``present.metric``)."""
    return metric(value) if isinstance(value, float) else cell(value)
