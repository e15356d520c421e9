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
    from training.record import Figures, ModelRecord
    from training.tasks import TASKS

    metrics = ModelRecord.of(dataset="d", version="v1", task=task, test=Figures.of(**test),
                             baseline=Figures.of(**base),
                             epochs_run=3, epochs=10, fit_seconds=1.5)
    with caplog.at_level("INFO", logger="training.outputs"):
        outputs.log_summary(metrics, "file:///m/run", TASKS[task].card_metrics)
    assert shown in caplog.text and "3/10 epoch(s)" in caplog.text, caplog.text


def test_a_trees_run_says_boosting_rounds_in_its_log_line_plots_and_card(
        caplog, monkeypatch, tmp_path) -> None:
    """Issue 51: a trees model read in epochs ("loss by epoch"); ``_steps_word`` named its
    rounds in the log line only. The plots, the card and the line now share ``step_unit``,
    and the line's fit time says it is the kept family's own (the fit phase is longer)."""
    import matplotlib.axes

    from training import outputs
    from training.record import Figures, ModelRecord

    titles: list[tuple[str, str]] = []
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda ax, t, *a, **k: titles.append((ax.get_xlabel(), t)))
    metrics = ModelRecord.of(dataset="d", version="v1", task="binary", family="trees",
                             test=Figures.of(auc=0.8), baseline=Figures.of(auc=0.5), epochs_run=183,
                             epochs=3000, best_epoch=83, fit_seconds=0.68,
                             examples={"train": 3200, "eval": 400, "test": 400},
                             history={"loss": [0.6, 0.5], "val_loss": [0.61, 0.55]})
    outputs.write_run_files(tmp_path, metrics, {}, ("what", "gate"), ("auc",), "probability")
    assert titles == [("boosting round", "loss by round")], titles
    card = (tmp_path / outputs.CARD_FILE).read_text()
    assert "183 boosting rounds (best eval loss at round 83)" in card and "poch" not in card
    with caplog.at_level("INFO", logger="training.outputs"):
        outputs.log_summary(metrics, "file:///m/run", ("auc",))
    assert "183/3000 boosting round(s) (trees)" in caplog.text
    assert "fit of the kept family (trees) 0.7 s -> file:///m/run" in caplog.text, caplog.text
    titles.clear()
    outputs.plot_learning_curves({"loss": [0.6]}, tmp_path / "mlp")  # a network: epochs
    assert titles == [("epoch", "loss by epoch")]

