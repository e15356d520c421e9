"""What a finished run leaves behind, and how it becomes visible.

Plots (learning curves; a confusion matrix for a classifier, predicted vs actual and residuals
for a regressor: PNG via matplotlib's Agg, no display needed), the model card and ``label.json``
beside the saved model. Everything is written to a local folder first, then uploaded file by file to
``models/<dataset>/<version>/<run>/``; ``metrics.json`` goes last, so a run folder without
it (still running or failed) is never taken for a model. A not-blessed model is written too:
its verdict is in metrics.json and the card, and it never becomes current (``training.judge.gate``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from etl import storage
from etl.versions import Manifest
from training.config import DEFAULT_SEED
from training.record import METRICS_FILE, Intervals, ModelRecord, TunedUse

log = logging.getLogger(__name__)

CARD_FILE = "model_card.md"
PLOTS_DIR = "plots"
BACKUP_DIR = "_backup"  # BackupAndRestore's mirror; survives republishing, removed on success
TUNED_FILE = "tuned.json"  # models/<dataset>/tuned.json: the last search's best settings
LABEL_FILE = "label.json"  # what the exported model returns: task, class names, transform
CURVES = ("loss", "auc", "accuracy")
TABULAR_INPUTS = "It takes the raw feature values; normalization and vocabularies are part of " \
                 "the model."


def plot_learning_curves(
    history: dict[str, list[float]], out_dir: Path, first_epoch: int = 1, unit: str = "epoch"
) -> list[Path]:
    """One PNG per metric, train vs eval by ``unit`` (``step_unit``: an epoch, or the trees'
    boosting round; matplotlib's Agg: no display needed).

    ``first_epoch`` is the 1-based number of the first step in ``history`` (a resumed run
    starts later).
    """
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CURVES:
        if name not in history:
            continue
        fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
        epochs = range(first_epoch, first_epoch + len(history[name]))
        ax.plot(epochs, history[name], marker="o", label="train")
        if f"val_{name}" in history:
            ax.plot(epochs, history[f"val_{name}"], marker="o", label="eval")
        ax.set_xlabel(unit)
        ax.set_ylabel(name)
        ax.set_title(f"{name} by {unit.split()[-1]}")  # "loss by round" for trees
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_confusion(matrix: list[list[int]], names: list[str], path: Path) -> Path:
    """Counts of (true, predicted) class on the test split, each cell labelled."""
    plt = _pyplot()
    counts = np.asarray(matrix)
    side = max(4.0, 0.6 * len(names) + 2)
    fig, ax = plt.subplots(figsize=(side, side), dpi=100)
    ax.imshow(counts, cmap="Blues")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    for (i, j), n in np.ndenumerate(counts):
        ax.text(j, i, str(n), ha="center", va="center",
                color="white" if n > counts.max() / 2 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title("confusion matrix (test)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_regression(y: np.ndarray, pred: np.ndarray, out_dir: Path) -> list[Path]:
    """predicted_vs_actual.png (with the identity line) and residuals.png (vs predicted)."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 5), dpi=100)
    ax.scatter(y, pred, s=10, alpha=0.6)
    lo, hi = (float(min(y.min(), pred.min())), float(max(y.max(), pred.max()))) if len(y) \
        else (0.0, 1.0)
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", label="predicted = actual")
    ax.set_xlabel("actual")
    ax.set_ylabel("predicted")
    ax.set_title("predicted vs actual (test)")
    ax.legend()
    fig.tight_layout()
    first = out_dir / "predicted_vs_actual.png"
    fig.savefig(first)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.scatter(pred, y - pred, s=10, alpha=0.6)
    ax.axhline(0.0, color="grey", linestyle="--")
    ax.set_xlabel("predicted")
    ax.set_ylabel("actual - predicted")
    ax.set_title("residuals (test)")
    fig.tight_layout()
    second = out_dir / "residuals.png"
    fig.savefig(second)
    plt.close(fig)
    return [first, second]


def binary_card(metrics: ModelRecord) -> tuple[str, str]:
    """(what the model is, what its baseline and gate are) for a binary label."""
    base, names = metrics.baseline, metrics.classes
    returns = (f"; it returns the probability of the positive class `{names[1]}` (class 1; "
               f"class 0 is `{names[0]}`)" if names else "; it returns the probability of "
               "class 1")
    return ((f"Binary classifier for `{metrics.label}` (positive rate "
            f"{base.positive_rate:.3f} on the test split){returns}."),
            (f"Majority-class baseline: always predicts class {base.majority_class} (AUC 0.5); "
            f"its loss is a constant prediction at the train base rate. Gate: blessed when test "
            f"AUC beats 0.5 by {metrics.min_margin} and its log loss is lower, each beyond "
            f"noise; accuracy is judged against the majority class only when the classes are "
            f"not lopsided (the verdict's rules say which)."))


def write_run_files(out: Path, metrics: ModelRecord, hyperparameters: dict[str, Any],
                    about: tuple[str, str], names: tuple[str, ...], output: str,
                    inputs: str = TABULAR_INPUTS) -> list[str]:
    """Learning curves, the model card and ``label.json`` (the output's description: task,
    class names in output order, target transform) beside the saved model; the file list."""
    plot_learning_curves(metrics.history, out / PLOTS_DIR,
                         first_epoch=metrics.resumed_from_epoch + 1, unit=step_unit(metrics))
    (out / CARD_FILE).write_text(model_card(metrics, hyperparameters, about, names, inputs))
    names = metrics.classes
    if metrics.task == "binary" and names:  # the positive class, by name
        output = f"probability of class 1, {names[1]!r} (class 0: {names[0]!r})"
    (out / LABEL_FILE).write_text(json.dumps(
        {"task": metrics.task, "label": metrics.label, "names": names,
         "transform": metrics.transform, "output": output}, indent=2))
    return sorted(p.relative_to(out).as_posix() for p in out.iterdir())


def _interval(bounds: list[float] | None) -> str:
    return f"[{bounds[0]:.4f}, {bounds[1]:.4f}]" if bounds else "-"


def model_card(metrics: ModelRecord, hyperparameters: dict[str, Any],
               about: tuple[str, str] | None = None,
               names: tuple[str, ...] = ("auc", "accuracy", "loss"),
               inputs: str = TABULAR_INPUTS) -> str:
    """Markdown card: what data, which code, which settings, how good.

    ``about``: the label task's (description, baseline and gate) lines; ``names``: its metrics;
    ``inputs``: what the model takes.
    """
    test, ev, base = metrics.test, metrics.eval, metrics.baseline
    what, gate = about or binary_card(metrics)
    ci = test.intervals or Intervals()
    bounds, leads = ci.metrics, ci.lead_over_baseline
    rows = [f"| {name} | {_cell(test.value(name))} | {_interval(bounds.get(name))} "
            f"| {_cell(ev.value(name))} | {_cell(base.value(name))} "
            f"| {_interval(leads.get(name))} |" for name in names]
    params = "\n".join(f"| `{k}` | `{json.dumps(v)}` |" for k, v in sorted(_flat(hyperparameters)))
    return f"""# Model card: {metrics.dataset} / {metrics.version} / {metrics.run}

{what} {inputs}

## Data

- Dataset version: `{metrics.version}` at `{metrics.version_uri}`
- Manifest sha256: `{metrics.manifest_sha256}`
- Examples: train {metrics.examples['train']}, eval {metrics.examples['eval']}, test {metrics.examples['test']}

## Code and hardware

- Code version: `{metrics.code_version}`
- Device: {metrics.device}, precision {metrics.precision}, {metrics.replicas} replica(s)
- {_fit_line(metrics)}
- Training throughput: {_num(metrics.examples_per_s)} examples/s; stall ratio {_num(metrics.stall_ratio)}

## Verdict

{blessing_text(metrics)}

## Metrics

{gate}

| metric | test | test 95% interval | eval | baseline (test) | lead over baseline, 95% |
| --- | --- | --- | --- | --- | --- |
{chr(10).join(rows)}

Intervals: {ci.method or "none"}, {ci.resamples or 0} resamples of the test
split; the model and its baseline are scored on the same resamples.

## Hyperparameters

{_tuned_line(metrics.tuned)}

| name | value |
| --- | --- |
{params}
"""


def _tuned_line(tuned: TunedUse | None) -> str:
    """Where the settings came from: a tuning (``python -m training tune``) or the defaults."""
    if not tuned:
        return "Not tuned: the defaults, the data-dependent choices and the spec's settings."
    settings = ", ".join(f"`{k}` {json.dumps(v)}" for k, v in tuned.settings.items())
    return (f"Tuned on version `{tuned.version}` at {tuned.tuned_at} ({tuned.trials} "
            f"trials): family {tuned.family}" + (f", {settings}" if settings else "")
            + f"; eval {tuned.metric} {tuned.eval:.4f}"
            + (f" (set by the spec or a flag instead: {', '.join(tuned.overridden)})"
               if tuned.overridden else "") + ".")


def blessing_text(metrics: ModelRecord) -> str:
    """The gate's blessing as Markdown: blessed or not, then every check with its figures."""
    blessing = metrics.blessing
    if not blessing:
        return "No verdict recorded."
    head = ("**Blessed**: it may become the dataset's current model (if no other run was "
            "promoted meanwhile)." if blessing.blessed else
            "**Not blessed**: written for inspection, never made the dataset's current model.")
    lines = [f"- {'pass' if c.passed else 'FAIL'}: {c.detail}" for c in blessing.checks]
    rules = f"\n\nRules: {blessing.rules}." if blessing.rules else ""
    return head + rules + "\n\n" + "\n".join(lines)


def publish_run(local_dir: Path, run_uri: str, metrics: ModelRecord,
                names: tuple[str, ...] = ("accuracy", "auc")) -> None:
    """Upload ``local_dir`` to ``run_uri`` (stale files of an earlier try removed first),
    then write metrics.json last: its presence marks the run complete. ``names``: the task's
    key metrics, for the summary line."""
    fs, root = storage.get_fs(run_uri)
    if fs.exists(root):
        for child in fs.ls(root, detail=False):
            if child.rstrip("/").rsplit("/", 1)[-1] != BACKUP_DIR:
                fs.rm(child, recursive=True)
    files = sorted(p for p in local_dir.rglob("*") if p.is_file())
    remote = [f"{root.rstrip('/')}/{p.relative_to(local_dir).as_posix()}" for p in files]
    if not storage.is_gcs(run_uri):
        for path in {r.rsplit("/", 1)[0] for r in remote}:
            fs.makedirs(path, exist_ok=True)
    if files:
        def put() -> None:
            fs.put([str(p) for p in files], remote)

        storage.with_retries(put, f"upload {run_uri}") if storage.is_gcs(run_uri) else put()
    storage.write_bytes_atomic(storage.join(run_uri, METRICS_FILE), storage.json_bytes(metrics.to_json()))
    log.debug("published %d files and %s to %s", len(files), METRICS_FILE, run_uri)
    log_summary(metrics, run_uri, names)


def _pair(metrics: ModelRecord, name: str) -> str:
    model, base = metrics.test.value(name), metrics.baseline.value(name)
    if not isinstance(model, float):
        return ""
    return f", test {name} {model:.4f}" + (f" (baseline {base:.4f})"
                                             if isinstance(base, float) else "")


def _fit_line(metrics: ModelRecord) -> str:
    """The card's line on how long the kept family fitted (rounds for trees, epochs else)."""
    refit = metrics.cross_validation.refit if metrics.cross_validation else None
    if refit:
        family = f"Model family: {metrics.family}, " if metrics.family else ""
        return (f"{family}{refit.length} {refit.unit} on all {refit.rows} train and "
                f"eval rows: the median its cross-validation folds stopped at")
    if metrics.family == "trees":
        return (f"Model family: trees, {metrics.epochs_run} boosting rounds (best eval loss "
                f"at round {metrics.best_epoch})")
    family = f"Model family: {metrics.family}, " if metrics.family else ""
    return (f"{family}Epochs run: {metrics.epochs_run} (best eval loss at epoch "
            f"{metrics.best_epoch}), resumed from epoch {metrics.resumed_from_epoch}")


def step_unit(metrics: ModelRecord) -> str:
    """What one of ``epochs_run`` is: a boosting round of the trees, else an epoch; every
    place that shows the fit's length (log line, card, plots) says it with this word."""
    return "boosting round" if metrics.trees else "epoch"


def _steps_word(metrics: ModelRecord) -> str:
    return f"{step_unit(metrics)}(s)" + (" (trees)" if metrics.trees else "")


def log_summary(metrics: ModelRecord, run_uri: str,
                names: tuple[str, ...] = ("accuracy", "auc")) -> None:
    """The training task's one line: data, epochs, the task's test metrics (``names``)
    against the baseline, the kept family's own fit time (not the fit phase's)."""
    fit = metrics.fit_seconds
    run, most = metrics.epochs_run, metrics.epochs
    epochs = f"{run}/{most}" if most else f"{run}"
    device = f" on {metrics.device}" if metrics.device else ""
    log.info("train %s on %s: %s %s%s%s, %s %s -> %s", metrics.dataset,
             metrics.version, epochs, _steps_word(metrics), device,
             "".join(_pair(metrics, n) for n in names),
             f"fit of the kept family ({metrics.family})" if metrics.family else "fit",
             f"{fit:.1f} s" if isinstance(fit, (int, float)) else "?", run_uri)


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.extend(_flat(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _cell(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "-"


def _num(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) and value >= 10 else (
        f"{value:.3f}" if isinstance(value, float) else "not measured")


def run_uri_for(models_root: str, manifest: Manifest, run_name: str) -> str:
    """``<models_root>/<dataset>/<version>/<run>``; the run name may not leave that folder."""
    return storage.safe_join(models_root, manifest.dataset, manifest.version, run_name)


# --- tuned settings ---------------------------------------------------------------------------

# What ``python -m training tune`` searches, per family: flat ``with_overrides`` names.
TUNED_SETTINGS = {"trees": ("tree_learning_rate", "num_leaves", "min_data_in_leaf"),
                  "mlp": ("learning_rate", "hidden_units", "dropout")}
DEFAULT_TUNE_TRIALS, DEFAULT_TUNE_MINUTES = 20, 30.0


@dataclass(frozen=True)
class TuneConfig:
    """The budget of one search: it stops at ``trials`` or after ``minutes`` (no trial starts
    after that; the one running finishes), over ``families``; ``seed`` fixes the sampler."""

    trials: int = DEFAULT_TUNE_TRIALS
    minutes: float = DEFAULT_TUNE_MINUTES
    families: tuple[str, ...] = tuple(TUNED_SETTINGS)
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ValueError(f"TuneConfig.trials: expected >= 1, got {self.trials}")
        if not self.minutes > 0:
            raise ValueError(f"TuneConfig.minutes: expected > 0, got {self.minutes}")
        if not self.families or any(f not in TUNED_SETTINGS for f in self.families):
            raise ValueError(f"TuneConfig.families: expected some of {tuple(TUNED_SETTINGS)}, "
                             f"got {self.families}")

    @classmethod
    def of(cls, manifest: Manifest, trials: int | None = None,
           minutes: float | None = None) -> TuneConfig:
        """The spec's ``tune:`` block (carried in ``schema.tune``); a flag given wins."""
        block = (manifest.schema.tune if manifest.schema else None) or {}
        return cls(trials=trials or int(block.get("trials", DEFAULT_TUNE_TRIALS)),
                   minutes=minutes or float(block.get("minutes", DEFAULT_TUNE_MINUTES)),
                   families=tuple(block.get("families", TUNED_SETTINGS)))


@dataclass(frozen=True)
class Tuned:
    """``models/<dataset>/tuned.json``: what ``python -m training tune`` found, read by every
    later training of the dataset until it is tuned again (``training.run.choice.tuned_overrides``).

    ``settings`` are flat ``TrainConfig.with_overrides`` names of the best ``family``;
    ``eval`` its figure as ``judged`` (the eval split, or a small table's repeated k-fold) (``metric``: auc for a binary label, higher is better, else the
    loss, lower is better) against ``default_eval``, each family's figure at its default
    settings (the first trials); ``trials`` one entry per trial run.
    """

    dataset: str
    version: str
    label: str
    task: str
    tuned_at: str
    family: str
    settings: dict[str, Any]
    metric: str
    eval: float
    default_eval: dict[str, float]
    budget: dict[str, Any]
    seconds: float
    trials: list[dict[str, Any]] = field(default_factory=list)
    judged: str = "eval"  # or a small table's repeated k-fold (``training.run.tune``)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tuned:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def summary(self) -> dict[str, Any]:
        """What metrics.json and the model page carry: where the settings came from."""
        return {"tuned_at": self.tuned_at, "version": self.version, "family": self.family,
                "settings": self.settings, "metric": self.metric, "eval": self.eval,
                "default_eval": self.default_eval, "trials": len(self.trials),
                "judged": self.judged}


def tuned_uri(models_root: str, dataset: str) -> str:
    return storage.safe_join(models_root, dataset, TUNED_FILE)


def read_tuned(models_root: str, dataset: str) -> Tuned | None:
    """The dataset's tuned settings, None when it was never tuned."""
    uri = tuned_uri(models_root, dataset)
    if not storage.exists(uri):
        return None
    try:
        return Tuned.from_json(storage.read_json(uri))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{uri}: not a tuned.json written by `python -m training tune` "
                         f"({err}); delete it or tune again") from err


def write_tuned(models_root: str, tuned: Tuned) -> str:
    """Replace the dataset's tuned.json whole (one atomic write); its URI."""
    uri = tuned_uri(models_root, tuned.dataset)
    storage.write_bytes_atomic(uri, storage.json_bytes(tuned.to_json()))
    return uri
