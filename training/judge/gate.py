"""The gate: whether the held-out splits can judge a model at all, and a typed verdict
("blessing", after TFX's Evaluator) on every trained model.

Before fitting, ``check_splits`` refuses what cannot be evaluated, so a split that cannot say
anything fails with what to change in the spec instead of a verdict decided by noise. A 16-row
test split holding one class made the majority baseline score 0.0 and the model 1.0: the split,
not the model, decided the result. Only what cannot be evaluated is refused: a test split under
``min_examples`` rows (``training.config.DEFAULT_MIN_EVAL_EXAMPLES`` says why 20), a test split
missing a class that train has, or an empty eval split. A small table above that is trained,
and its verdict carries intervals (``training.judge.evaluate``).

Every model is written with its metrics, plots and card; the gate only decides whether it is
blessed, and only a blessed model that is no worse than the dataset's current one becomes
current (``models/<dataset>/current.json``, replaced by a conditional write).

Three kinds of check, each kept with its figure and threshold:

- ``baseline:<metric>``: the point estimate beats the task's baseline by ``margin``; the
  lead's 95% bootstrap interval is reported beside it but does not decide. On a small or
  heavy-tailed test split the interval of an RMSE or macro-F1 lead is wide for reasons that
  say nothing about the model (a few squared outliers dominate every resample), and the issue's
  case, RMSE 124.4 against the baseline's 158.3, was refused on it.
- ``noise``: a paired test that suits the data: the per-example loss of the baseline minus
  that of the model (absolute error for a regression, log loss for a classifier), with a
  one-sided paired-bootstrap lower bound at ``confidence`` that must be above zero. Absolute
  error differences are bounded by how far the model's answer moves from the baseline's
  (triangle inequality), not by the target's tail, so a heavy tail does not swamp them; log
  loss is the classifier's own proper score. A model no better than the baseline has
  differences centred on zero and fails.
- ``current:<metric>``: at least as good as the current model, both scored on this version's
  test split (the newest rows both can be judged on: the split is by hashed key, so the
  current model never trained on them), within ``tolerance`` (absolute for scores, relative
  for errors; 0 by default). ``current:newer-data``: a model of a version older than the
  current model's (a backfilled window, a recovered interval) never replaces it.

A binary label is judged on what a model can be better at whatever its class balance
(``evidence_checks``): ``baseline:auc`` (AUC at least 0.5 + ``margin`` and its one-sided
bootstrap lower bound at ``confidence`` above 0.5) and ``noise`` (log loss against a constant
prediction at the train class prior). Accuracy against the majority class is judged only where
the classes are not lopsided (train minority share >= ``BALANCED_SHARE``): with 6% positives no
model beats "always negative" on accuracy, though its AUC and log loss are what it is for. A
model no better than the prior fails both the AUC and the loss check. Each verdict carries its
rules (``Blessing.rules``), written beside the checks in metrics.json and the card.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from etl.errors import PipelineError
from etl.versions import Manifest
from training.config import TrainConfig
from training.judge.current import Current, Scores, promote, read_current, score_current
from training.judge.evaluate import example_losses, gate_scores
from training.models.tabular import BINARY, MULTICLASS, REGRESSION
from training.record import Blessing, Check, Figures, ModelRecord, Trained, trained

log = logging.getLogger(__name__)

RESAMPLES = 1000
SEED = 0
BALANCED_SHARE = 0.20
"""A binary label's accuracy is judged against the majority class only when the train split's
minority class holds at least this share: below it "always the majority" is a bar no useful
model clears (6% positives: 94% accuracy for answering "no"), and AUC and log loss judge."""
CHANCE_AUC = 0.5


@dataclass(frozen=True)
class GateRules:
    """Thresholds of one run's gate (from ``TrainConfig``)."""

    margin: float
    confidence: float
    tolerance: float

    @classmethod
    def of(cls, config: TrainConfig, margin: float | None = None) -> GateRules:
        """A run's rules; ``margin``: an image run's own (``ImageTrainConfig.min_margin``)."""
        return cls(config.min_margin if margin is None else margin, config.gate_confidence,
                   config.promote_tolerance)


def _lead_text(bounds: list[float] | None) -> str:
    if not bounds or not all(math.isfinite(b) for b in bounds):
        return ""
    return f", lead 95% interval [{bounds[0]:.4f}, {bounds[1]:.4f}]"


def _figure(figures: Figures, name: str) -> float:
    value = figures.value(name)
    return float("nan") if value is None else float(value)


def baseline_checks(rules: dict[str, str], test: Figures, base: Figures,
                    margin: float, what: str) -> list[Check]:
    """Point estimates against the baseline; rules: metric -> ``higher`` | ``lower_relative``."""
    leads = test.intervals.lead_over_baseline if test.intervals else {}
    out = []
    for name, rule in rules.items():
        got, ref = _figure(test, name), _figure(base, name)
        if rule == "higher":
            ok, need = got >= ref + margin, f"needs >= {ref + margin:.4f} (margin {margin})"
        else:
            ok, need = got <= ref * (1 - margin), \
                f"needs <= {ref * (1 - margin):.4f} (baseline x (1 - {margin}))"
        out.append(Check(f"baseline:{name}", bool(ok),  # NaN fails either way
                         f"beats the {what} baseline: {name} {got:.4f} vs {ref:.4f}, "
                         f"{need}{_lead_text(leads.get(name))}"))
    return out


def lower_bound(diffs: np.ndarray, confidence: float, resamples: int = RESAMPLES) -> float:
    """One-sided paired-bootstrap lower bound of the mean of ``diffs`` at ``confidence``."""
    if not len(diffs):
        return float("nan")
    rng, means = np.random.default_rng(SEED), []
    for start in range(0, resamples, 100):  # 100 resamples at a time bound the memory
        idx = rng.integers(0, len(diffs), (min(100, resamples - start), len(diffs)))
        means.append(diffs[idx].mean(axis=1))
    return float(np.quantile(np.concatenate(means), 1 - confidence))


def noise_check(loss: str, model: np.ndarray, base: np.ndarray, confidence: float,
                what: str) -> Check:
    """Is the model's per-example loss below the baseline's beyond resampling noise?"""
    bound = lower_bound(base - model, confidence)
    return Check("noise", bool(bound > 0),
                 f"better than the {what} baseline beyond noise: mean {loss} "
                 f"{model.mean():.4f} vs {base.mean():.4f}, paired bootstrap lower bound of the "
                 f"lead {bound:.4f} ({confidence:.0%} one-sided) needs > 0")


def minority_share(manifest: Manifest) -> float:
    """The train split's share of its rarest class (binary: of the two); NaN without counts."""
    counts = [int(v) for v in (manifest.statistics.label_counts if manifest.statistics
                                 else {}).values()]
    total = sum(counts)
    if not total:
        return float("nan")
    return min([*counts, *([0] * (2 - len(counts)))]) / total


def _auc_groups(y: np.ndarray, p: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC AUC of each row of ``weights`` [r, n] (bootstrap counts of the rows); ties count
    half, as ranks do."""
    groups = np.unique(p, return_inverse=True)[1].reshape(-1)
    pos, k = (y == 1), int(groups.max()) + 1 if len(groups) else 0
    out = np.empty(len(weights))
    for i, w in enumerate(weights):
        wp = np.bincount(groups, weights=w * pos, minlength=k)
        wn = np.bincount(groups, weights=w * ~pos, minlength=k)
        denom = wp.sum() * wn.sum()
        below = np.cumsum(wn) - wn
        out[i] = float(np.sum(wp * (below + 0.5 * wn)) / denom) if denom else float("nan")
    return out


def _auc_bound(y: np.ndarray, score: Callable[[np.ndarray], np.ndarray], confidence: float,
               resamples: int) -> float:
    """One-sided bootstrap lower bound of ``score(counts)``: an AUC figure of each row of
    ``counts`` [r, n], the rows' bootstrap counts (NaN resamples dropped)."""
    rng, samples = np.random.default_rng(SEED), []
    for start in range(0, resamples if len(y) else 0, 100):  # 100 at a time bound the memory
        idx = rng.integers(0, len(y), (min(100, resamples - start), len(y)))
        counts = np.stack([np.bincount(row, minlength=len(y)) for row in idx]).astype(np.float64)
        samples.append(score(counts))
    clean = np.concatenate(samples) if samples else np.zeros(0)
    clean = clean[np.isfinite(clean)]
    return float(np.quantile(clean, 1 - confidence)) if len(clean) else float("nan")


def auc_lead_bound(y: np.ndarray, first: np.ndarray, second: np.ndarray, confidence: float,
                   resamples: int = RESAMPLES) -> float:
    """One-sided paired-bootstrap lower bound of AUC(second) - AUC(first) on the same rows
    (each resample scores both on the same rows)."""
    y = y.astype(np.int64).reshape(-1)
    a, b = (np.asarray(x, np.float64).reshape(-1) for x in (first, second))
    return _auc_bound(y, lambda w: _auc_groups(y, b, w) - _auc_groups(y, a, w), confidence,
                      resamples)


def auc_check(y: np.ndarray, p: np.ndarray, margin: float, confidence: float,
              resamples: int = RESAMPLES) -> Check:
    """Does the model rank positives above negatives better than chance, by ``margin`` and
    beyond resampling noise (one-sided bootstrap lower bound of the AUC above 0.5)?"""
    y, p = y.astype(np.int64).reshape(-1), np.asarray(p, np.float64).reshape(-1)
    got = float(_auc_groups(y, p, np.ones((1, len(y))))[0]) if len(y) else float("nan")
    bound = _auc_bound(y, lambda w: _auc_groups(y, p, w), confidence, resamples)
    ok = got >= CHANCE_AUC + margin and bound > CHANCE_AUC  # NaN fails either way
    return Check("baseline:auc", bool(ok),
                 f"ranks better than chance beyond noise: auc {got:.4f} vs {CHANCE_AUC}, needs "
                 f">= {CHANCE_AUC + margin:.4f} (margin {margin}) and a bootstrap lower bound "
                 f"> {CHANCE_AUC}: {bound:.4f} ({confidence:.0%} one-sided)")


def gate_rules(task: str, manifest: Manifest, margin: float, confidence: float) -> str:
    """The rules a verdict applies, in words (stored with it, shown in the card)."""
    noise = (f"its per-example {{}} is lower than the {{}}'s beyond noise (paired bootstrap, "
             f"{confidence:.0%} one-sided)")
    if task == REGRESSION:
        return (f"regression: RMSE at most the mean predictor's x (1 - {margin}), and "
                + noise.format("absolute error", "mean predictor"))
    if task == MULTICLASS:
        return (f"multiclass: accuracy and macro-F1 each beat the majority class by {margin}, "
                "and " + noise.format("log loss", "train class frequencies"))
    share = minority_share(manifest)
    balanced = share >= BALANCED_SHARE
    accuracy = (f"accuracy beats the majority class by {margin} (minority share {share:.3f} "
                f">= {BALANCED_SHARE})" if balanced else
                f"accuracy is not judged (minority share {share:.3f} < {BALANCED_SHARE}: the "
                "classes are lopsided, so the majority class is a bar no useful model clears)")
    return (f"binary: AUC at least 0.5 + {margin} with its bootstrap lower bound above 0.5 "
            f"({confidence:.0%} one-sided); " + noise.format("log loss", "class prior")
            + f"; {accuracy}")


def evidence_checks(task: Any, manifest: Manifest, test: Figures, base: Figures,
                    y: np.ndarray, out: np.ndarray, margin: float,
                    confidence: float) -> list[Check]:
    """The checks of a model's held-out outputs against its task's baseline (``test``: its
    scores with their intervals, ``base``: the baseline's), by the rules ``gate_rules`` states:
    the verdict's, and the bench reference's."""
    if task.name != BINARY:
        checks = baseline_checks(task.gate, test, base, margin, task.baseline_name)
        return [*checks, noise_check(*example_losses(task.name, manifest, y, out), confidence,
                                     task.baseline_name)]
    share = minority_share(manifest)
    if share >= BALANCED_SHARE:
        checks = baseline_checks({"accuracy": "higher"}, test, base, margin, task.baseline_name)
    else:
        checks = [Check("baseline:accuracy", True,
                        f"accuracy not judged: the train minority share {share:.3f} is under "
                        f"{BALANCED_SHARE} (test accuracy {_figure(test, 'accuracy'):.4f}"
                        f", the majority class's {_figure(base, 'accuracy'):.4f})")]
    checks.append(auc_check(y, out[:, 0], margin, confidence))
    return [*checks, noise_check(*example_losses(task.name, manifest, y, out), confidence,
                                 "class-prior")]


def current_checks(rules: dict[str, str], new: Scores, current: Current,
                   scores: Scores | str, tolerance: float, rows: str = "") -> list[Check]:
    """The new model against the current one on the same test split (``scores``: the
    current's, or why it could not be scored; ``rows``: which rows, as the card says it)."""
    who = f"the current model (version {current.version}, run {current.run})"
    if isinstance(scores, str):
        # a changed schema: the old model cannot serve this version's rows at all
        return [Check("current", True, f"{who} cannot score this version's test split "
                                       f"({scores}): not compared")]
    out = []
    for name, rule in rules.items():
        got, ref = new[name], scores[name]
        ok = got >= ref - tolerance if rule == "higher" else got <= ref * (1 + tolerance)
        lead = got - ref if rule == "higher" else ref - got
        out.append(Check(f"current:{name}", bool(ok),
                         f"at least as good as {who}{rows}: {name} {got:.4f} vs {ref:.4f} "
                         f"({'ahead' if lead >= 0 else 'behind'} by {abs(lead):.4f}"
                         + (f", tolerance {tolerance}" if tolerance else "")
                         + ("" if rule == "higher" or not tolerance else " relative") + ")"))
    return out


def newer_data_check(current: Current, version: str) -> Check | None:
    """A model of an older window never replaces one of newer data (a backfilled week, a
    recovery of an old interval): the check that says so, or None when this version is not
    older than the current model's (by the one order of versions)."""
    from etl.versions import version_key

    if version_key(version) >= version_key(current.version):
        return None
    return Check("current:newer-data", False,
                 f"the current model (version {current.version}, run {current.run}) was "
                 f"trained on newer data than version {version}: a model of an older window "
                 "never replaces it")


class ModelNotBlessedError(PipelineError):
    """Raised after the run is written when ``fail_unblessed`` is set; carries the result."""

    def __init__(self, result: Trained) -> None:
        self.result = result
        super().__init__(result.summary())


def judge(task: Any, manifest: Manifest, test: Figures, base: Figures,
          evidence: tuple[np.ndarray, np.ndarray], rules: GateRules, models_root: str,
          score: Callable[[Any], Scores],
          compared: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Blessing, str | None]:
    """The verdict on a model from its held-out outputs (``evidence``: labels and core outputs,
    as the input pipeline yields them; ``test`` and ``base``: their figures and the
    baseline's), and the current pointer's token it was judged against. ``score``: the
    current model's gate scores on the test split; ``compared``: the new model's test labels
    and outputs for that comparison, where ``evidence`` is not the test split (a small table's
    out-of-fold answers)."""
    y, out = evidence
    checks = evidence_checks(task, manifest, test, base, y, out, rules.margin, rules.confidence)
    current, token = read_current(models_root, manifest.dataset)
    if current is None:
        checks.append(Check("current", True, "no current model yet"))
    elif (older := newer_data_check(current, str(manifest.version))) is not None:
        checks.append(older)
    else:  # the newest rows both can be judged on: this version's test split
        y_test, out_test = compared or evidence
        checks += current_checks(task.gate, gate_scores(task.name, manifest, y_test, out_test),
                                 current, score_current(current, score), rules.tolerance,
                                 f" on the {len(y_test)} test rows of version "
                                 f"{manifest.version}")
    return Blessing.of(checks, gate_rules(task.name, manifest, rules.margin,
                                          rules.confidence)), token


def conclude(models_root: str, record: ModelRecord, blessing: Blessing,
             token: str | None, metric: str, fail_unblessed: bool) -> Trained:
    """Promote a blessed, published run; log the verdict; the result (``Trained``: the run,
    its record, the verdict, whether it was promoted), or ModelNotBlessedError with it,
    under ``fail_unblessed``."""
    promoted = blessing.blessed and promote(models_root, record, metric, token)
    log.info("verdict on %s/%s run %s: %s", record.dataset, record.version, record.run,
             blessing.summary())
    log.info("%s", f"current model of {record.dataset}: " + (
        "this run" if promoted else "unchanged (this run is not blessed)" if not blessing.blessed
        else "unchanged (the pointer moved meanwhile)"))
    result = trained(record.model_uri, record, blessing, promoted)
    if fail_unblessed and not blessing.blessed:
        raise ModelNotBlessedError(result)
    return result


def stored(models_root: str, record: ModelRecord, fail_unblessed: bool) -> Trained:
    """The result of a run finished earlier, from its metrics.json (whether it is current is
    read from the pointer); ModelNotBlessedError as for a fresh run under ``fail_unblessed``."""
    blessing = record.blessing or Blessing.missing()
    current, _ = read_current(models_root, str(record.dataset))
    result = trained(record.model_uri, record, blessing,
                     bool(current and current.model_uri == record.model_uri))
    if fail_unblessed and not blessing.blessed:
        raise ModelNotBlessedError(result)
    return result


# --- before fitting: can the held-out splits say anything? ----------------------------------------

class EvaluationSplitError(PipelineError):
    """A test split too small or missing classes that train has, or no eval rows."""


def check_splits(manifest: Manifest, labels: dict[str, np.ndarray],
                 min_examples: int) -> None:
    """Raise EvaluationSplitError naming split sizes, classes and the spec fields to change.

    labels: the stored labels of the test split (classification) or any values; ``eval``
    too where given (its classes are only reported).
    """
    sizes = {s: int(manifest.splits[s].num_examples) for s in ("train", "eval", "test")}
    total, label = sum(sizes.values()), manifest.schema.label
    problems, fixes = [], []
    if sizes["test"] < min_examples:
        share = math.ceil(100 * min_examples / max(total, 1)) / 100
        problems.append(f"test holds {sizes['test']} examples (fewer than {min_examples})")
        fixes.append(f"a test share of at least {share:.2f} in split.fractions "
                     f"({min_examples} of {total} rows)" if share < 0.5 else
                     f"more rows: {total} rows cannot spare {min_examples} for the test split")
    if sizes["eval"] < 1:
        problems.append("eval holds no examples (early stopping watches it)")
        fixes.append("an eval share in split.fractions")
    classes = ""
    if label.task_name != "regression":
        names = label.class_names
        train = {int(k) for k, v in manifest.statistics.label_counts.items()
                 if int(v) > 0}
        counts = {s: np.bincount(labels[s].astype(np.int64), minlength=len(names))
                  for s in ("eval", "test") if s in labels}
        missing = [names[i] for i in sorted(train) if i < len(counts["test"])
                   and counts["test"][i] == 0]
        held = sum(counts.values())
        rows = {names[i]: int(manifest.statistics.label_counts.get(str(i), 0)) + int(held[i])
                for i in range(min(len(names), len(held)))}
        share = sizes["test"] / max(total, 1)
        rare = [name for name in missing if rows.get(name, 0) * share < 1]
        if rare:  # under one row of each expected in test: not the split's fault
            log.warning("%s/%s: test lacks class(es) %s, too rare to expect a row in test "
                        "(%s rows in all, test holds %.0f%% of the rows): the test figures say "
                        "nothing of them", manifest.dataset, manifest.version, rare,
                        ", ".join(str(rows.get(name, 0)) for name in rare), 100 * share)
        missing = [name for name in missing if name not in rare]
        if missing:
            problems.append(f"test lacks class(es) {missing} that train has")
            fixes.append("split.stratify: true spreads every class over the splits; split.by: "
                         "row if the key is not unique")
        classes = "; classes per split: " + "; ".join(
            f"{s} {dict(zip(names, map(int, c), strict=True))}" for s, c in counts.items())
    if problems:
        raise EvaluationSplitError(
            f"{manifest.dataset}/{manifest.version}: the held-out evaluation would mean "
            f"nothing: " + "; ".join(problems) + f" (split sizes {sizes}{classes}). Change the "
            f"spec: " + "; ".join(fixes) + "; or training.min_eval_examples. Nothing was "
            "trained.")
