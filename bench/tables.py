"""Public tables that ship inside installable packages, landed as raw files a new user would
have: the evaluation tests and the bench's references run them end to end, with no network.

penguins (palmerpenguins, 344 rows, CSV): no unique key; species, 3 classes.
cars (vega_datasets, 406 rows, JSON array -> JSON lines): miles per gallon, a regression.
seattle_weather (vega_datasets, 1,461 days, CSV, dates written ``2012/01/01``): the day's
weather, 5 imbalanced classes (sun 714 ... snow 23).
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Table:
    """A packaged table, where it lands under the raw zone, and the label a user would pick."""

    name: str
    package: str
    resource: str
    raw_path: str  # relative to the storage root
    label: str
    task: str


TABLES = {
    "penguins": Table("penguins", "palmerpenguins", "data/penguins.csv",
                      "raw/penguins/penguins.csv", "species", "multiclass"),
    "cars": Table("cars", "vega_datasets", "_data/cars.json", "raw/cars/cars.jsonl",
                  "Miles_per_Gallon", "regression"),
    "seattle_weather": Table("seattle_weather", "vega_datasets", "_data/seattle-weather.csv",
                             "raw/seattle_weather/seattle-weather.csv", "weather", "multiclass"),
}


def package_bytes(table: Table) -> bytes:
    """The table's file as its package ships it."""
    return importlib.resources.files(table.package).joinpath(table.resource).read_bytes()


def land_table(table: Table, root_dir: Path) -> Path:
    """Write the table under ``root_dir`` as a raw file (a JSON array becomes JSON lines)."""
    path = root_dir / table.raw_path
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = package_bytes(table)
    if table.raw_path.endswith(".jsonl"):
        rows = json.loads(raw)
        raw = "".join(json.dumps(row) + "\n" for row in rows).encode()
    path.write_bytes(raw)
    return path


def land_daily(table: Table, root_dir: Path, days: int) -> str:
    """The first ``days`` rows of a daily CSV table as one file per day
    (``raw/<name>_daily/date=YYYY-MM-DD/<name>.csv``); returns the partitioned source URI."""
    lines = package_bytes(table).decode().splitlines()
    header, rows = lines[0], lines[1 : days + 1]
    rel = f"raw/{table.name}_daily/date={{date}}/{table.name}.csv"
    for row in rows:
        day = row.split(",", 1)[0].replace("/", "-")
        path = root_dir / rel.format(date=day)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{header}\n{row}\n", encoding="utf-8")
    return rel
