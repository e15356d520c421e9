"""A small version and a quickly trained, blessed model on it: what every scoring test scores
with (module scope: one training per test module)."""

from __future__ import annotations

import pytest

from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.run.train import train

FAST = TrainConfig(input=InputConfig(batch_size=128, shuffle_buffer=1024, seed=1), epochs=2,
                   steps_per_execution=4, min_margin=0.02, model=ModelConfig(family="mlp"))


@pytest.fixture(scope="package")
def store(tmp_path_factory: pytest.TempPathFactory) -> fx.WrittenVersion:
    return fx.write_version(tmp_path_factory.mktemp("score-store"), n=3000, seed=11)


@pytest.fixture(scope="package")
def trained(store: fx.WrittenVersion) -> dict:
    result = train(store.uri, f"{store.root.as_uri()}/models", "run-1", FAST)
    assert result.promoted, result.metrics.to_json()["blessing"]  # scoring needs a current model
    return result
