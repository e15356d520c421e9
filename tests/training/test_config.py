"""``training.config``: the settings, checked when made, and overrides routed to their part."""

from __future__ import annotations

import pytest

from training.config import InputConfig, ModelConfig, TrainConfig


def test_a_flat_override_goes_to_the_part_that_owns_it() -> None:
    config = TrainConfig().with_overrides(batch_size=64, hidden_units=(8,), epochs=3, seed=1)
    assert (config.input.batch_size, config.model.hidden_units, config.epochs) == (64, (8,), 3)
    assert config.seed == 1 and config.input.seed is None  # the run's own field wins
    with pytest.raises(ValueError, match="unknown training setting 'nope'"):
        TrainConfig().with_overrides(nope=1)


@pytest.mark.parametrize("make", [
    lambda: InputConfig(batch_size=0), lambda: InputConfig(cache=" "),
    lambda: ModelConfig(family="forest"), lambda: ModelConfig(num_leaves=1),
    lambda: TrainConfig(folds=1), lambda: TrainConfig(min_margin=0.5),
])
def test_a_setting_out_of_range_is_refused_naming_it(make) -> None:
    with pytest.raises(ValueError, match=r"(InputConfig|ModelConfig|TrainConfig)\.\w+"):
        make()
