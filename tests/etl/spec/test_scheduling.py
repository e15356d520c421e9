"""etl.spec.scheduling, what the DAG files read: the specs search path shared by etl and the
DAG files (a spec found outside the repo with its settings checked), and the per-spec
scheduling keys parsed with their defaults, a bad one named by its field, every training key
one that training takes."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from etl.spec import SpecError, load_spec
from etl.spec.scheduling import (
    DEFAULT_SPECS_DIR,
    TRAINING_CHOICES,
    TRAINING_KEYS,
    DuplicateSpecError,
    SpecNotFoundError,
    SpecSettingsError,
    find_specs,
    parse_settings,
    search_path,
    spec_file,
)
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


def test_a_training_budget_parses_and_folds_off_is_zero() -> None:
    raw = yaml.safe_load("training: {family: trees, max_rounds: 50, folds: off, repeats: 1}")
    budget = parse_settings(raw, "x.yaml").training
    assert budget == {"family": "trees", "max_rounds": 50, "folds": 0, "repeats": 1}
    config = TrainConfig().with_overrides(**budget)
    assert (config.model.family, config.model.max_rounds, config.folds, config.repeats) == (
        "trees", 50, 0, 1)
    assert parse_settings({"training": {"folds": 3}}, "x").training == {"folds": 3}


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
    ({"training": {"folds": 1}}, r"x.yaml.training.folds: expected 0 or off \(no k-fold\) or"),
    ({"training": {"folds": -2}}, r"x.yaml.training.folds: expected int >= 0"),
    ({"training": {"repeats": 0}}, r"x.yaml.training.repeats: expected int >= 1"),
    ({"training": {"max_rounds": 0}}, r"x.yaml.training.max_rounds: expected int >= 1"),
    ({"tune": 20}, r"x.yaml.tune: expected a mapping like \{trials: 20"),
    ({"tune": {"trial": 5}}, (r"x.yaml.tune.trial: unknown tune setting; expected one of "
                             r"\['families', 'minutes', 'trials'\]")),
    ({"tune": {"trials": 0}}, r"x.yaml.tune.trials: expected an integer >= 1, got 0"),
    ({"tune": {"minutes": "1h"}}, r"x.yaml.tune.minutes: expected a number > 0, got '1h'"),
    ({"tune": {"families": ["trees", "forest"]}},
     r"x.yaml.tune.families: expected a non-empty list of \['trees', 'mlp'\]"),
])
def test_bad_settings_name_the_field(raw: dict, message: str) -> None:
    with pytest.raises(SpecSettingsError, match=message):
        parse_settings(raw, "x.yaml")


def test_the_tune_block_fills_its_defaults_and_training_reads_it_from_the_manifest() -> None:
    from etl.versions.segment import Schema
    from training.outputs import TuneConfig

    assert parse_settings({}, "x").tune == {}  # no block: the manifest carries none
    s = parse_settings({"tune": {"trials": 5, "families": ["trees"]}}, "x")
    assert s.tune == {"trials": 5, "minutes": 30, "families": ["trees"]}

    def manifest(**schema: object) -> object:  # a manifest from that spec: its typed schema
        return type("Carried", (), {"schema": Schema.from_json(
            {"label": {"name": "late"}, **schema}, "manifest.json", "schema")})

    carried = manifest(tune=s.tune)
    assert TuneConfig.of(carried) == TuneConfig(trials=5, minutes=30.0, families=("trees",))
    assert TuneConfig.of(carried, minutes=2).minutes == 2  # a flag wins
    assert TuneConfig.of(manifest()) == TuneConfig()
    assert TuneConfig.of(type("Bare", (), {"schema": None})) == TuneConfig()


def test_every_training_key_is_a_train_config_override() -> None:
    """etl.spec.scheduling may not import training, so this keeps the two in step: every key
    and word the spec allows lands on the ``TrainConfig`` field of its name, changed."""
    samples = {int: 3, float: 0.1, list: (8,)}  # none a default
    for key, (kind, _, _) in TRAINING_KEYS.items():
        for value in TRAINING_CHOICES[key] if kind is str else [samples[kind]]:
            config = TrainConfig().with_overrides(**{key: value})
            part = next(p for p in (config, config.input, config.model) if hasattr(p, key))
            assert getattr(part, key) == value, (key, value)
        if kind is not str:  # the sample is not the default: the override did something
            assert config != TrainConfig(), key

REPO = Path(__file__).resolve().parents[3]


def _spec(folder: Path, name: str, text: str = "") -> Path:
    (folder / name).mkdir(parents=True, exist_ok=True)
    path = folder / name / "spec.yaml"
    path.write_text(f"name: {name}\n{text}")
    return path


def test_default_search_path_is_the_repo_examples(monkeypatch) -> None:
    monkeypatch.delenv("PIPELINE_SPECS_PATH", raising=False)
    assert search_path() == [REPO / "etl" / "examples"] == [DEFAULT_SPECS_DIR]
    assert {"flights", "digits"} <= set(find_specs())


def test_folders_from_the_environment_in_order(tmp_path: Path, monkeypatch) -> None:
    a, b = _spec(tmp_path / "a", "alpha"), _spec(tmp_path / "b", "beta")
    monkeypatch.setenv("PIPELINE_SPECS_PATH",
                       os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b"),
                                        str(tmp_path / "missing")]))
    assert find_specs() == {"alpha": a, "beta": b}
    assert spec_file("beta") == b
    with pytest.raises(SpecNotFoundError, match=r"no spec named 'flights'.*PIPELINE_SPECS_PATH"):
        spec_file("flights")


def test_duplicate_names_across_folders_name_both_files(tmp_path: Path) -> None:
    first, second = _spec(tmp_path / "a", "twin"), _spec(tmp_path / "b", "twin")
    with pytest.raises(DuplicateSpecError) as err:
        find_specs([tmp_path / "a", tmp_path / "b"])
    assert str(first) in str(err.value) and str(second) in str(err.value)


def test_spec_loader_checks_settings_and_finds_specs_outside_the_repo(tmp_path, monkeypatch):
    raw = (REPO / "etl" / "examples" / "flights" / "spec.yaml").read_text()
    folder = tmp_path / "elsewhere" / "flights_copy"
    folder.mkdir(parents=True)
    (folder / "spec.yaml").write_text(raw.replace("name: flights", "name: flights_copy")
                                      + "\ntraining: {epochs: 2}\n")
    (folder / "expectations.json").write_bytes(
        (REPO / "etl" / "examples" / "flights" / "expectations.json").read_bytes())
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(tmp_path / "elsewhere"))
    spec = load_spec("flights_copy")
    assert spec.expectations == folder / "expectations.json"  # relative to the spec file
    (folder / "spec.yaml").write_text(raw.replace("name: flights", "name: other"))
    with pytest.raises(SpecError, match=r"flights_copy/spec.yaml.name: 'other' must match"):
        load_spec("flights_copy")
    (folder / "spec.yaml").write_text(raw.replace("name: flights", "name: flights_copy")
                                      + "\ntraining: {epochz: 2}\n")
    with pytest.raises(SpecError, match=r"spec.yaml.training.epochz: unknown training setting"):
        load_spec("flights_copy")
