"""A generated, seeded dataset of one-row daily partitions (issue 25): the shape that made a
segment per raw partition cost 20x the one-shot run, with the same rows as one file beside it.

Two specs in ``bench/specs`` (found through ``PIPELINE_SPECS_PATH``) read the same rows:
``tiny_days`` (one CSV per day, ``raw/tiny_days/date=YYYY-MM-DD/tiny_days.csv``, built
incrementally) and ``tiny_onefile`` (the same rows in ``raw/tiny_onefile/tiny_onefile.csv``,
unpartitioned). Both split by the same key and salt, so their versions hold the same examples.
The rows depend only on the seed and the day count: stdlib ``random``, fixed float formats.
"""

from __future__ import annotations

import math
import os
import random
from datetime import date, timedelta
from pathlib import Path

SPECS_DIR = Path(__file__).resolve().parent / "specs"
PARTITIONED, ONE_FILE = "tiny_days", "tiny_onefile"
START = date(2013, 1, 1)
DAYS = 1461  # four years: 2013-01-01 .. 2016-12-31
SEED = 25
COLUMNS = ("obs_id", "event_time", "station", "condition", "temp_c", "humidity", "wind_kmh",
           "pressure_hpa", "precip_mm")
STATIONS = ("north", "south", "east", "west")
CONDITIONS = ("clear", "cloudy", "rain", "snow", "fog")


def specs_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a child needs to find the tiny specs (and only them)."""
    return {**(os.environ if env is None else env), "PIPELINE_SPECS_PATH": str(SPECS_DIR)}


def day(index: int) -> date:
    """The date of day ``index`` (0-based) of the generated span."""
    return START + timedelta(days=index)


def rows(days: int = DAYS, seed: int = SEED) -> list[list[str]]:
    """One row per day as CSV fields: a seasonal temperature, weather that follows it, and
    precipitation (the label's source: ``wet`` = more than 1 mm)."""
    rng = random.Random(seed)
    out = []
    for i in range(days):
        season = math.sin(2 * math.pi * (i - 100) / 365.25)
        temp = 10 + 12 * season + rng.gauss(0, 3)
        wet = rng.random() < 0.3 - 0.1 * season
        condition = ("snow" if temp < 0 else "rain") if wet else rng.choice(("clear", "cloudy",
                                                                             "fog"))
        out.append([str(i + 1), f"{day(i).isoformat()}T12:00:00Z", rng.choice(STATIONS),
                    condition, f"{temp:.2f}", f"{rng.uniform(30, 100):.1f}",
                    f"{rng.uniform(0, 60):.1f}", f"{rng.gauss(1013, 8):.1f}",
                    f"{rng.expovariate(0.3) if wet else 0.0:.2f}"])
    return out


def _csv(lines: list[list[str]]) -> bytes:
    return ("\n".join(",".join(r) for r in [list(COLUMNS), *lines]) + "\n").encode()


def land(root: str, days: int = DAYS, seed: int = SEED, one_file: bool = True) -> int:
    """Write the first ``days`` days under ``root`` (a ``file://`` URI): one CSV per day for
    ``tiny_days`` and, with ``one_file``, all of them as one CSV for ``tiny_onefile``.

    Returns the number of files written."""
    base = Path(root.removeprefix("file://")) / "raw"
    data = rows(days, seed)
    for i, row in enumerate(data):
        folder = base / PARTITIONED / f"date={day(i).isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{PARTITIONED}.csv").write_bytes(_csv([row]))
    if one_file:
        (base / ONE_FILE).mkdir(parents=True, exist_ok=True)
        (base / ONE_FILE / f"{ONE_FILE}.csv").write_bytes(_csv(data))
    return len(data) + one_file
