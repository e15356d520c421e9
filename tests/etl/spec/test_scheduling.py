"""The per-spec scheduling keys (etl.spec.scheduling) the DAG files read: parsed with their
defaults, a bad one named by its field, every training key one that training takes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from etl.spec.scheduling import TRAINING_CHOICES, TRAINING_KEYS, SpecSettingsError, parse_settings
from training.config import TrainConfig


def test_settings_parse_and_default() -> None:
    s = parse_settings({"schedule": "@daily", "start_date": "2024-01-01", "catchup": True,
                        "owner": "ml", "tags": ["a"],
                        "training": {"epochs": 2, "hidden_units": [8, 4], "min_margin": 0}},
                       "x.yaml")
    assert s.schedule == "@daily" and s.catchup and s.owner == "ml" and s.tags == ("a",)
    assert s.start_date == datetime(2024, 1, 1, tzinfo=UTC)
    assert s.training == {"epochs": 2, "hidden_units": (8, 4), "min_margin": 0}
    assert parse_settings({}, "x").schedule is None
    assert parse_settings({"schedule": None}, "x").schedule == "none"


@pytest.mark.parametrize(("raw", "message"), [
    ({"schedule": "daily"}, r"x.yaml.schedule: expected a cron"),
    ({"start_date": "yesterday"}, r"x.yaml.start_date: expected an ISO date"),
    ({"catchup": "yes"}, r"x.yaml.catchup: expected true or false"),
    ({"tags": "a"}, r"x.yaml.tags: expected a list"),
    ({"owner": ""}, r"x.yaml.owner: expected a non-empty string"),
    ({"training": {"epoch": 3}}, r"x.yaml.training.epoch: unknown training setting"),
    ({"training": {"epochs": 0}}, r"x.yaml.training.epochs: expected int >= 1"),
    ({"training": {"min_margin": 0.7}}, r"x.yaml.training.min_margin: expected float"),
    ({"training": {"learning_rate": 0}}, r"x.yaml.training.learning_rate: expected float > 0"),
    ({"training": {"hidden_units": []}}, r"x.yaml.training.hidden_units: expected a non-empty"),
])
def test_bad_settings_name_the_field(raw: dict, message: str) -> None:
    with pytest.raises(SpecSettingsError, match=message):
        parse_settings(raw, "x.yaml")


def test_every_training_key_is_a_train_config_override() -> None:
    """etl.spec.scheduling may not import training, so this keeps the two in step."""
    samples = {int: 2, float: 0.1, list: (8,)}
    for key, (kind, _, _) in TRAINING_KEYS.items():
        for value in TRAINING_CHOICES[key] if kind is str else [samples[kind]]:
            TrainConfig().with_overrides(**{key: value})  # every word the spec allows
