"""Plots of a model's test predictions: a confusion matrix for a classifier, predicted vs
actual and residuals for a regressor. PNG via matplotlib's Agg (no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


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
