"""bench.training: the flights_grouped spec keeps every scaled copy of a flight in the flight's
split (the 16x figures mean nothing otherwise), and differs from the shipped spec only there."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench import measure, training
from etl.spec import load_spec


def test_the_grouped_spec_is_the_flights_spec_with_its_split_grouped(tmp_path: Path) -> None:
    folder = training.grouped_spec(tmp_path)
    grouped = load_spec(folder / training.DATASET / "spec.yaml")
    shipped = load_spec("flights")
    assert grouped.name == "flights_grouped"
    assert grouped.split.group_by == training.GROUP_BY
    assert grouped.split.fractions == shipped.split.fractions
    assert grouped.split.salt == shipped.split.salt
    assert grouped.features == shipped.features and grouped.label == shipped.label


def test_scaled_copies_of_a_flight_land_in_one_split(tmp_path: Path, monkeypatch) -> None:
    """Three copies of each flight of one day: every split holds a whole number of flights."""
    days = ("2013-01-01", "2013-01-02")
    root = measure.fresh_flights_root(tmp_path, "data", 3, days)
    env = {**os.environ, "PIPELINE_SPECS_PATH": str(training.grouped_spec(tmp_path / "specs"))}
    env.pop("PIPELINE_STORAGE_ROOT", None)
    built = measure.etl_cli(root, f"{days[1]}T00:00:00Z", f"{days[0]}T00:00:00Z",
                            training.DATASET, env=env)
    splits = built["splits"]
    assert sum(splits.values()) > 1000 and all(n > 0 for n in splits.values()), splits
    assert all(n % 3 == 0 for n in splits.values()), splits  # copies never split apart
    manifest = json.loads(Path(built["version_uri"].removeprefix("file://"), "manifest.json")
                          .read_text())
    assert manifest["dataset"] == training.DATASET
