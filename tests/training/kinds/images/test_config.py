"""``training.kinds.images.config``: an image run takes a tabular config's settings only where
the caller changed them; the rest are the image run's own defaults."""

from __future__ import annotations

from training.config import InputConfig, TrainConfig
from training.kinds.images.config import ImageTrainConfig


def test_an_image_run_keeps_its_own_defaults_under_a_default_train_config() -> None:
    assert ImageTrainConfig.from_train_config(TrainConfig()) == ImageTrainConfig()


def test_what_the_caller_changed_carries_over_and_nothing_else() -> None:
    config = TrainConfig(input=InputConfig(batch_size=16), epochs=3, min_margin=0.1, seed=7,
                         patience=9)
    got = ImageTrainConfig.from_train_config(config)
    assert (got.epochs, got.batch_size, got.min_margin, got.seed) == (3, 16, 0.1, 7)
    assert got.patience == ImageTrainConfig().patience  # a tabular patience is not the CNN's
