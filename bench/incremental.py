"""Incremental runs in `make bench` (issue 14): a nightly run's cost against history, and a
bulk build into segments against the one-shot run, measured in the same `make bench` run.

``incremental_cpu_ratio``: after a bulk build of the preceding days, the CPU seconds (whole
process tree, interpreter start included) of the nightly run that adds the last day, over
those of the nightly run that adds day 2: a cost independent of history reads ~1.
``incremental_bulk_ratio``: the CPU seconds of building every day's segment of the same data
in one run, over those of the one-shot run (``etl_scaling['1x']``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from bench import measure

log = logging.getLogger("bench")
# The spec's own chain (flights sets incremental: true): no flag, so the figures keep their
# meaning when issue 25 makes one chain for every spec and retires --incremental.
INCREMENTAL = measure.SPEC_CHAIN


def _end(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def incremental(fresh_root: Callable[..., str], first: date, last: date,
                one_shot: dict[str, Any]) -> dict[str, Any]:
    """The figures above; ``[first, last)`` is the landed span, ``one_shot`` the CLI run of
    it measured in this run. ``fresh_root(name, days=(start, end))`` lands a new root."""
    span = (first.isoformat(), last.isoformat())
    log.info("incremental: bulk build of %s .. %s into segments", *span)
    bulk = measure.etl_cli(fresh_root("inc-bulk", days=span), _end(last), steps=INCREMENTAL)
    log.info("incremental: nightly run adding %s after a bulk build", last - timedelta(days=1))
    history = fresh_root("inc-night-n", days=span)
    measure.etl_cli(history, _end(last - timedelta(days=1)), steps=INCREMENTAL)
    night_n = measure.etl_cli(history, _end(last), steps=INCREMENTAL)
    log.info("incremental: nightly run adding day 2")
    young = fresh_root("inc-night-1", days=(span[0], (first + timedelta(days=2)).isoformat()))
    measure.etl_cli(young, _end(first + timedelta(days=1)), steps=INCREMENTAL)
    night_1 = measure.etl_cli(young, _end(first + timedelta(days=2)), steps=INCREMENTAL)
    return {
        "bulk": _brief(bulk), "night_1": _brief(night_1), "night_n": _brief(night_n),
        "nights": [(first + timedelta(days=1)).isoformat(),
                   (last - timedelta(days=1)).isoformat()],
        "incremental_cpu_ratio": night_n["cpu_s"] / night_1["cpu_s"],
        "incremental_bulk_ratio": bulk["cpu_s"] / one_shot["cpu_s"],
        "incremental_bulk_wall_ratio": bulk["wall_s"] / one_shot["wall_s"],
    }


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run[k] for k in ("rows", "wall_s", "cpu_s", "peak_rss_mb", "timings")}
