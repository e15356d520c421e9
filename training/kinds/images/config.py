"""The settings of an image run (``training.kinds.images.train``): its own defaults, small
images on a few CPU cores, and which of a tabular ``TrainConfig``'s settings carry over."""

from __future__ import annotations

from dataclasses import dataclass

from training.config import TrainConfig


@dataclass(frozen=True)
class ImageTrainConfig:
    """Settings of an image run; defaults suit small images on a few CPU cores."""

    batch_size: int = 64
    epochs: int = 30
    patience: int = 5
    learning_rate: float = 3e-3
    min_margin: float = 0.2  # test accuracy over the majority-class baseline
    filters: tuple[int, ...] = (32, 64)
    dense_units: int = 128
    dropout: float = 0.3
    image_size: tuple[int, int] | None = None  # None: the manifest's shape
    cache: bool = True
    shuffle_buffer: int = 4096
    seed: int = 42

    @classmethod
    def from_train_config(cls, config: TrainConfig) -> ImageTrainConfig:
        """Take epochs / batch_size / min_margin / seed only where the caller changed them."""
        base, out = TrainConfig(), {}
        if config.epochs != base.epochs:
            out["epochs"] = config.epochs
        if config.input.batch_size != base.input.batch_size:
            out["batch_size"] = config.input.batch_size
        if config.min_margin != base.min_margin:
            out["min_margin"] = config.min_margin
        if config.seed != base.seed:
            out["seed"] = config.seed
        return cls(**out)
