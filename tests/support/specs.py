"""The shipped specs (``etl/examples``) copied for a test that runs them through a DAG or a
command line, each one named given a training budget of its own (docs/TRAINING.md, a run's
budget): a test that needs *a* model, not its figures, fits one or two instead of the 21 a
table under 1,000 rows gets by default, or 3,000 boosting rounds and an MLP on flights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).resolve().parents[2] / "etl" / "examples"
ONE_FIT: dict[str, Any] = {"family": "trees", "max_rounds": 100, "folds": 0}
"""One family, 100 rounds at most, no small-table k-fold: a model in seconds."""


def budgeted(folder: Path, budgets: dict[str, dict[str, Any]]) -> Path:
    """Every shipped spec copied into ``folder`` (a ``PIPELINE_SPECS_PATH``), the ones named in
    ``budgets`` with that ``training:`` block added; ``folder``."""
    shutil.copytree(SHIPPED, folder, dirs_exist_ok=True)
    for name, training in budgets.items():
        spec = folder / name / "spec.yaml"
        text = spec.read_text(encoding="utf-8")
        assert "\ntraining:" not in text, f"{spec} has a training block of its own"
        spec.write_text(f"{text}\ntraining: {json.dumps(training)}\n", encoding="utf-8")
    return folder
