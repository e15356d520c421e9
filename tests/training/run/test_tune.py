"""Tuning: a budgeted search on eval, its record beside the models, and its reuse by training."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import pytest

from tests.support import training_fixtures as fx
from training.__main__ import main
from training.config import InputConfig, ModelConfig, TrainConfig
from training.outputs import TuneConfig, Tuned, read_tuned, write_tuned
from training.run.choice import rank
from training.run.train import train
from training.run.tune import tune

# small fits: a few hundred MLP steps, the trees' rounds capped; what is tested is the search
QUICK = TrainConfig(input=InputConfig(batch_size=128, shuffle_buffer=1024, seed=1),
                    step_budget=120, epochs=2, min_margin=0.02,
                    model=ModelConfig(max_rounds=60, early_stopping_rounds=10))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> fx.WrittenVersion:
    return fx.write_version(tmp_path_factory.mktemp("tune"), n=1500, seed=5)


def _models(store: fx.WrittenVersion) -> str:
    return f"{store.root.as_uri()}/models"


def test_a_search_runs_both_defaults_first_keeps_the_best_on_eval_and_records_it(store) -> None:
    tuned = tune(store.uri, _models(store), TuneConfig(trials=4, minutes=30, seed=3), QUICK)

    assert len(tuned.trials) == 4  # the budget's trials, no more
    first = tuned.trials[:2]
    assert [t["family"] for t in first] == ["trees", "mlp"] and all(t["defaults"] for t in first)
    assert all(t["settings"] for t in tuned.trials[2:])  # then settings drawn by the sampler
    assert tuned.metric == "auc"  # a binary label: the figure `family: auto` compares
    scores = [t["eval"] for t in tuned.trials if math.isfinite(t["eval"])]
    assert tuned.eval == min(scores, key=lambda s: rank(s, "auc"))
    assert tuned.eval >= max(tuned.default_eval.values())  # never worse than untuned
    assert set(tuned.default_eval) == {"trees", "mlp"}
    on_disk = json.loads((store.root / "models" / fx.DATASET / "tuned.json").read_text())
    assert Tuned.from_json(on_disk) == tuned
    assert read_tuned(_models(store), fx.DATASET) == tuned


def test_the_minutes_budget_stops_the_search_after_the_running_trial(store, tmp_path) -> None:
    models = (tmp_path / "models").as_uri()
    tuned = tune(store.uri, models, TuneConfig(trials=50, minutes=1e-4), QUICK)
    assert len(tuned.trials) == 1  # no trial starts once the minutes are spent
    assert tuned.budget == {"trials": 50, "minutes": 1e-4, "families": ["trees", "mlp"]}


def test_a_small_tables_trials_are_judged_by_repeated_k_fold(tmp_path, caplog) -> None:
    small = fx.write_version(tmp_path / "small", n=300, seed=2)  # under SMALL_TABLE_ROWS
    caplog.set_level(logging.INFO, logger="training")
    tuned = tune(small.uri, f"{small.root.as_uri()}/models", TuneConfig(trials=2, minutes=30),
                 QUICK)
    assert tuned.judged == "2 x 5-fold cross-validation of train and eval, mean"
    # each trial's figure is its family's mean out-of-fold AUC over the repeats, as the
    # cross-validation logged it (one search of one family per trial)
    logged = [re.search(r"over 2 x 5-fold cross-validation of the (\d+) train and eval rows: "
                        r"(trees|mlp) ([0-9.]+) \(repeats", r.getMessage())
              for r in caplog.records]
    logged = [m for m in logged if m]
    assert [(m[2], float(m[3])) for m in logged] == [
        (t["family"], pytest.approx(t["eval"], abs=1e-4)) for t in tuned.trials]
    assert int(logged[0][1]) == sum(small.manifest["splits"][s]["num_examples"]
                                    for s in ("train", "eval"))
    assert any("judged by 2 x 5-fold" in r.getMessage() for r in caplog.records)


def _record(store: fx.WrittenVersion, **changes) -> Tuned:
    base = {"dataset": fx.DATASET, "version": fx.VERSION,
                "label": store.manifest["schema"]["label"]["name"], "task": "binary",
                "tuned_at": "2026-11-27T00:00:00Z", "family": "trees",
                "settings": {"tree_learning_rate": 0.2, "num_leaves": 7, "min_data_in_leaf": 5},
                "metric": "auc", "eval": 0.9, "default_eval": {"trees": 0.85, "mlp": 0.8},
                "budget": {"trials": 3, "minutes": 1, "families": ["trees", "mlp"]}, "seconds": 1.0,
                "trials": [{"number": 0}]}
    return Tuned(**{**base, **changes})


def test_a_later_training_uses_the_tuned_settings_where_nothing_else_sets_them(
        store, tmp_path) -> None:
    models = (tmp_path / "models").as_uri()
    write_tuned(models, _record(store))
    metrics = train(store.uri, models, "after-tune", QUICK).metrics.to_json()

    assert metrics["family"] == "trees"  # the tuned family, not auto's two fits
    assert metrics["trees"]["leaves"] == 7 and metrics["trees"]["min_data_in_leaf"] == 5
    assert metrics["hyperparameters"]["model"]["tree_learning_rate"] == 0.2
    assert metrics["tuned"]["settings"]["num_leaves"] == 7
    assert metrics["tuned"]["tuned_at"] == "2026-11-27T00:00:00Z"
    assert metrics["tuned"]["overridden"] == []
    card = (tmp_path / "models" / fx.DATASET / fx.VERSION / "after-tune" / "model_card.md")
    assert "Tuned on version" in card.read_text() and "`num_leaves` 7" in card.read_text()

    # a setting given on the command line (or in the spec) wins over the tuned one
    flagged = QUICK.with_overrides(num_leaves=15, overwrite=True)
    metrics = train(store.uri, models, "flagged", flagged).metrics.to_json()
    assert metrics["trees"]["leaves"] == 15
    assert metrics["tuned"]["overridden"] == ["num_leaves"]


def test_settings_tuned_for_another_label_are_not_used(store, tmp_path, caplog) -> None:
    models = (tmp_path / "models").as_uri()
    write_tuned(models, _record(store, label="some_other_column"))
    metrics = train(store.uri, models, "other-label",
                    QUICK.with_overrides(family="trees")).metrics.to_json()
    assert metrics["tuned"] is None and metrics["trees"]["leaves"] != 7
    assert "run `python -m training tune` again" in caplog.text


def test_the_command_line_tunes_within_the_flags_budget_and_says_where_it_wrote(
        store, tmp_path, capsys) -> None:
    models = tmp_path / "models"
    code = main(["tune", "--version-uri", store.uri, "--models-root", models.as_uri(),
                 "--trials", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 trials" in out and "best: trees" in out
    assert f"{models.as_uri()}/{fx.DATASET}/tuned.json" in out
    assert read_tuned(models.as_uri(), fx.DATASET).family == "trees"


def test_a_corrupt_tuned_file_is_named_with_the_way_out(store, tmp_path: Path) -> None:
    folder = tmp_path / "models" / fx.DATASET
    folder.mkdir(parents=True)
    (folder / "tuned.json").write_text('{"dataset": "flights"}')
    with pytest.raises(ValueError, match=r"tuned\.json: not a tuned\.json .* tune again"):
        read_tuned((tmp_path / "models").as_uri(), fx.DATASET)
