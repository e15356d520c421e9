"""A version the real ETL judged and did not publish: a one-day window of 2013 flights whose
landed weather file ends the day before (issue 51 item 6), so validation fails on ``temp``.

``failed_root`` runs the ETL once per pytest session (about 10 s) and hands each caller a
private copy of the root; what it holds is what a failed ``build`` leaves: the version folder
with ``validation/results.json`` and ``index.html``, no manifest.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

DATASET = "flights"
FIRST_DAY, LAST_DAY = date(2013, 1, 4), date(2013, 1, 6)  # landed: 01-04 and 01-05
WINDOW = ("2013-01-05T00:00:00+00:00", "2013-01-06T00:00:00+00:00")  # 01-05 only
VERSION = "20130106T000000Z_20130105T000000Z"
WEATHER_ENDS = "2013-01-04"
_built: dict[str, Path] = {}


def truncate_weather(root: Path, day: str) -> None:
    """Drop the landed weather file's rows from ``day`` on (an upstream feed that stopped)."""
    path = root / "raw" / "weather" / "weather.csv"
    weather = pd.read_csv(path)
    weather[pd.to_datetime(weather["time_hour"], utc=True) < pd.Timestamp(day, tz="UTC")] \
        .to_csv(path, index=False)


def run_failing_window(root: Path) -> Exception:
    """Land two days, cut the weather after the first, run the ETL over the second; the
    ``ValidationFailed`` it raises."""
    from etl import pipeline
    from etl.errors import ValidationFailed
    from etl.kinds.landing import LandOptions

    pipeline.land(root.as_uri(), DATASET, LandOptions(start=FIRST_DAY, end=LAST_DAY))
    truncate_weather(root, "2013-01-05")
    with pytest.raises(ValidationFailed) as failed:
        pipeline.run(DATASET, root.as_uri(), WINDOW[1], WINDOW[0], run_id="manual__weather")
    return failed.value


def failed_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of a root holding the failed version ``VERSION`` (nothing published)."""
    if "root" not in _built:
        root = tmp_path_factory.mktemp("failed-etl") / "root"
        run_failing_window(root)
        _built["root"] = root
    copy = tmp_path_factory.mktemp("failed-etl-copy") / "root"
    shutil.copytree(_built["root"], copy)
    return copy
