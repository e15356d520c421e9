"""The nightly run's cost against history in `make bench` (issues 14 and 25).

``incremental_cpu_ratio``: after a bulk build of the preceding days (one ``etl run`` over
them), the CPU seconds (whole process tree, interpreter start included) of the nightly
``etl run`` that adds the last day, over those of the nightly run that adds day 2: a cost
independent of history reads ~1. The bulk build of the year itself is ``etl_scaling['1x']``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from bench import measure

log = logging.getLogger("bench")


def _end(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def nightly(fresh_root: Callable[..., str], first: date, last: date) -> dict[str, Any]:
    """The figure above; ``[first, last)`` is the landed span. ``fresh_root(name,
    days=(start, end))`` lands a new root."""
    span = (first.isoformat(), last.isoformat())
    log.info("nightly: bulk build to %s, then the night adding it", last - timedelta(days=1))
    history = fresh_root("inc-night-n", days=span)
    measure.etl_cli(history, _end(last - timedelta(days=1)))
    night_n = measure.etl_cli(history, _end(last))
    log.info("nightly: the night adding day 2")
    young = fresh_root("inc-night-1", days=(span[0], (first + timedelta(days=2)).isoformat()))
    measure.etl_cli(young, _end(first + timedelta(days=1)))
    night_1 = measure.etl_cli(young, _end(first + timedelta(days=2)))
    return {
        "night_1": _brief(night_1), "night_n": _brief(night_n),
        "nights": [(first + timedelta(days=1)).isoformat(),
                   (last - timedelta(days=1)).isoformat()],
        "incremental_cpu_ratio": night_n["cpu_s"] / night_1["cpu_s"],
    }


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run[k] for k in ("rows", "wall_s", "cpu_s", "peak_rss_mb", "timings")}
