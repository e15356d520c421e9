"""The predicted distribution of a scored window against the model's own on its test split.

A classifier's is the share of rows per predicted class; a regressor's the share of
predictions per bin, the bins cut at the deciles of the model's test predictions. The two are
compared by their population stability index (PSI, the ETL's drift measure for categorical
values, ``etl.spec.drift``), and the window drifts when it exceeds ``PSI_LIMIT`` (the ETL's
default PSI limit): the model is answering a population it was not judged on.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

PSI_LIMIT = 0.2
EPS = 1e-4  # a share of 0 counts as this much: PSI stays finite
BINS = 10


def psi(scored: np.ndarray, reference: np.ndarray) -> float:
    """Population stability index of two share vectors over the same bins."""
    p = np.clip(np.asarray(scored, np.float64), EPS, None)
    q = np.clip(np.asarray(reference, np.float64), EPS, None)
    p, q = p / p.sum(), q / q.sum()
    return float(np.sum((p - q) * np.log(p / q)))


def _shares(counts: np.ndarray) -> list[float]:
    total = counts.sum()
    return (counts / total).tolist() if total else [0.0] * len(counts)


def distribution(predicted: np.ndarray, reference: np.ndarray,
                 classes: tuple[str, ...]) -> dict[str, Any]:
    """Counts and shares per class (or bin) of the scored predictions and the reference's,
    their PSI and the verdict. ``predicted``/``reference``: class names, or values when
    ``classes`` is empty (a regression)."""
    if classes:
        labels = list(classes)
        scored = np.array([(predicted == c).sum() for c in classes], np.int64)
        ref = np.array([(reference == c).sum() for c in classes], np.int64)
        kind = "class"
    else:
        ref_values = np.asarray(reference, np.float64)
        edges = np.unique(np.quantile(ref_values, np.linspace(0, 1, BINS + 1)[1:-1])) \
            if len(ref_values) else np.zeros(0)
        scored = np.bincount(np.searchsorted(edges, np.asarray(predicted, np.float64),
                                             side="right"), minlength=len(edges) + 1)
        ref = np.bincount(np.searchsorted(edges, ref_values, side="right"),
                          minlength=len(edges) + 1)
        bounds = [-np.inf, *edges.tolist(), np.inf]
        labels = [f"[{_num(lo)}, {_num(hi)})" for lo, hi in itertools.pairwise(bounds)]
        kind = "bin"
    value = psi(scored, ref) if scored.sum() and ref.sum() else float("nan")
    return {"kind": kind, "labels": labels, "scored": scored.tolist(),
            "reference": ref.tolist(), "scored_shares": _shares(scored),
            "reference_shares": _shares(ref), "psi": value, "psi_limit": PSI_LIMIT,
            "drifted": bool(value > PSI_LIMIT)}


def _num(x: float) -> str:
    return "-inf" if x == -np.inf else "inf" if x == np.inf else f"{x:.4g}"
