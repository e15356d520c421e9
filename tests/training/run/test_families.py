"""``training.run.families``: the families a run can fit, in the order ``auto`` fits them, each
able to fit a version and a small table's folds; an MLP epoch as a whole number of executions.
(Each family fitted: ``test_folds.py`` and ``test_train.py``; which one is kept:
``test_choice.py``.)"""

from __future__ import annotations

from etl.versions import Manifest
from training.config import InputConfig, TrainConfig
from training.run.families import FAMILIES, epoch_steps, fit_mlp, fit_trees


def _train_rows(n: int) -> Manifest:
    return Manifest.from_json({"splits": {"train": {"num_examples": n}}}, "manifest.json")


def test_auto_fits_the_trees_first_then_the_mlp() -> None:
    assert list(FAMILIES) == ["trees", "mlp"]
    assert (FAMILIES["trees"].fit, FAMILIES["mlp"].fit) == (fit_trees, fit_mlp)
    assert all(callable(family.folds) for family in FAMILIES.values())


def test_an_epoch_is_a_whole_number_of_executions_and_one_step_a_call_over_replicas() -> None:
    config = TrainConfig(input=InputConfig(batch_size=100), steps_per_execution=16)
    assert epoch_steps(_train_rows(1300), config) == (13, 13)  # 13 steps: one call of 13
    assert epoch_steps(_train_rows(1700), config) == (32, 16)  # 17 steps: two calls of 16
    assert epoch_steps(_train_rows(1700), config, replicas=2) == (17, 1)
    assert epoch_steps(_train_rows(10), config) == (1, 1)  # at least one step
