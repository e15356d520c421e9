"""training.outputs: the run's summary line names the task's own metrics against its baseline."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("task, test, base, shown", [
    ("multiclass", {"accuracy": 0.91, "macro_f1": 0.9, "loss": 0.3, "per_class": {"a": {}},
                    "confusion_matrix": [[1]]},
     {"accuracy": 0.4, "macro_f1": 0.19, "loss": 1.1},
     ", test accuracy 0.9100 (baseline 0.4000), test macro_f1 0.9000 (baseline 0.1900)"),
    ("regression", {"rmse": 52.5, "mae": 41.0, "r2": 0.45},
     {"rmse": 71.25, "mae": 60.0, "r2": -0.01},
     ", test rmse 52.5000 (baseline 71.2500), test mae 41.0000 (baseline 60.0000), test r2"),
])
def test_the_run_summary_line_names_the_tasks_metrics(caplog, task, test, base, shown) -> None:
    """The training task's log line: the task's own metrics against its baseline (it used to
    log only accuracy and AUC, so a regression run said nothing about its quality)."""
    from training import outputs
    from training.config import ModelRecord
    from training.tasks import TASKS

    metrics = ModelRecord.of(dataset="d", version="v1", task=task, test=test, baseline=base,
                             epochs_run=3, epochs=10, fit_seconds=1.5)
    with caplog.at_level("INFO", logger="training.outputs"):
        outputs.log_summary(metrics, "file:///m/run", TASKS[task].card_metrics)
    assert shown in caplog.text and "3/10 epoch(s)" in caplog.text, caplog.text
