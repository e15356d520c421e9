"""The specs search path (etl.spec.folders) shared by etl and the DAG files, and a spec found
outside the repo with its settings checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from etl.spec import SpecError, load_spec
from etl.spec.folders import (
    DEFAULT_SPECS_DIR,
    DuplicateSpecError,
    SpecNotFoundError,
    find_specs,
    search_path,
    spec_file,
)

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
