"""Wine (multi-class) and diabetes (regression) versions and models for the UI browser tests.

The real ETL publishes each shipped scikit-learn table (``etl land`` + ``etl.pipeline.run``)
and a short real training run (``training.run.train.train``, a small budget) writes its model
folder: metrics with the task's own keys (macro-F1 and a confusion matrix; RMSE/R² and residuals), its plots
and card. Built once per pytest session, then copied into each caller's root.
"""

from __future__ import annotations

import shutil
from pathlib import Path

TASK_DATASETS = ("wine", "diabetes")
TASKS_END = "2026-01-01T00:00:00+00:00"
TASKS_RUN_ID = f"manual__{TASKS_END}"
TASKS_MODEL_RUN = "20260101T010000Z"
# Plots each task's model page must show (training/tasks.py names them).
TASK_PLOTS = {"wine": ("confusion_matrix.png",),
              "diabetes": ("predicted_vs_actual.png", "residuals.png")}
_built: dict[str, object] = {}


def _build(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    from etl import pipeline, versions
    from training.config import InputConfig, ModelConfig, TrainConfig
    from training.run.train import train

    root = tmp_path_factory.mktemp("ui-real-tasks") / "root"
    # A small budget: the pages show whatever figures the run has, so one family (trees, 200
    # rounds at most) fits once, without the small-table k-fold's 2 x 5 folds.
    config = TrainConfig(input=InputConfig(seed=3), model=ModelConfig(family="trees", max_rounds=200),
                         folds=0, min_margin=0.0)
    built = {}
    for name in TASK_DATASETS:
        pipeline.land(root.as_uri(), name)
        result = pipeline.run(name, root.as_uri(), TASKS_END, run_id=TASKS_RUN_ID)
        train(versions.resolve(root.as_uri(), name), f"{root.as_uri()}/models", TASKS_MODEL_RUN,
              config)
        built[name] = str(result.version)
    return root, built


def add_real_tasks(root: Path, tmp_path_factory) -> dict[str, str]:
    """Copy the wine and diabetes versions and model runs into ``root``: name -> version."""
    if not _built:
        built_root, built = _build(tmp_path_factory)
        _built.update(root=built_root, versions=built)
    source = Path(str(_built["root"]))
    for name in TASK_DATASETS:
        for zone in ("datasets", "models"):
            shutil.copytree(source / zone / name, root / zone / name, dirs_exist_ok=True)
    return dict(_built["versions"])  # type: ignore[arg-type]
