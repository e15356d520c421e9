"""Bootstrap confidence intervals of the test metrics, and of the model's lead over its baseline.

A 35-row test split can show accuracy 1.0 by luck; the interval says how much the figure can
move. The model and the baseline are scored on the same resamples, so the interval of their
difference (paired) is what the quality gate asks to stay above zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import rankdata

LEVEL = 0.95
RESAMPLES = 200
SEED = 0
Scorer = Callable[[np.ndarray, np.ndarray], dict[str, float]]


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC by ranks (ties share a rank: a constant predictor scores 0.5)."""
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(p)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _macro_f1(y: np.ndarray, pred: np.ndarray, k: int) -> float:
    matrix = np.bincount(y * k + pred, minlength=k * k).reshape(k, k).astype(np.float64)
    tp, support, chosen = np.diag(matrix), matrix.sum(axis=1), matrix.sum(axis=0)
    denom = support + chosen
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1[support > 0].mean()) if (support > 0).any() else float("nan")


def scorer(task: str, classes: int, units: Callable[[np.ndarray], np.ndarray]) -> Scorer:
    """The gate's metrics of one task from labels and model outputs, in plain numpy."""
    if task == "binary":
        return lambda y, out: {"accuracy": float(np.mean((out[:, 0] >= 0.5) == (y == 1))),
                               "auc": _auc(y, out[:, 0])}
    if task == "multiclass":
        def multi(y: np.ndarray, out: np.ndarray) -> dict[str, float]:
            pred, yi = out.argmax(axis=1), y.astype(np.int64)
            return {"accuracy": float(np.mean(pred == yi)),
                    "macro_f1": _macro_f1(yi, pred, classes)}
        return multi

    def reg(y: np.ndarray, out: np.ndarray) -> dict[str, float]:
        err = units(out[:, 0]) - units(y)
        return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}
    return reg


def intervals(score: Scorer, y: np.ndarray, out: np.ndarray, base_out: np.ndarray,
              higher: dict[str, bool], resamples: int = RESAMPLES) -> dict[str, Any]:
    """Percentile bootstrap intervals of each metric and of the model's lead over the baseline
    (positive = better, whichever way the metric points), on the same resamples."""
    rng = np.random.default_rng(SEED)
    n = len(y)
    values: dict[str, list[float]] = {}
    leads: dict[str, list[float]] = {}
    for _ in range(resamples if n else 0):
        idx = rng.integers(0, n, n)
        model, base = score(y[idx], out[idx]), score(y[idx], base_out[idx])
        for name, value in model.items():
            values.setdefault(name, []).append(value)
            if name in higher:
                lead = value - base[name] if higher[name] else base[name] - value
                leads.setdefault(name, []).append(lead)
    bounds = {k: _bounds(v) for k, v in values.items()}
    if "accuracy" in bounds and n:  # a proportion: Wilson's interval is not empty at 0 or 1
        bounds["accuracy"] = wilson(score(y, out)["accuracy"], n)
    return {"level": LEVEL, "method": "percentile bootstrap (accuracy: Wilson score)",
            "resamples": resamples, "metrics": bounds,
            "lead_over_baseline": {k: _bounds(v) for k, v in leads.items()}}


def wilson(p: float, n: int, z: float = 1.959964) -> list[float]:
    """Wilson score interval of a proportion ``p`` of ``n`` (35/35 right: [0.90, 1.0])."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The bounds reach p itself at 0 or 1 exactly (rounding left 1 - 1e-16 above a perfect score).
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return [float(min(low, p)), float(max(high, p))]


def _bounds(samples: list[float]) -> list[float]:
    clean = np.asarray([s for s in samples if np.isfinite(s)])
    if not len(clean):
        return [float("nan"), float("nan")]
    tail = (1 - LEVEL) / 2 * 100
    return [float(np.percentile(clean, tail)), float(np.percentile(clean, 100 - tail))]
