"""Deployment settings of the dataset DAGs: spec discovery, schedule, pools, storage, Assets.

Kept import-light on purpose: the dag-processor imports this module on every parse, so it
uses only the standard library, pendulum and ``airflow.sdk``; the pipeline code is imported
inside task bodies. Nothing here touches the metadata database, Variables or connections.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import Asset, CronDataIntervalTimetable

REPO_ROOT = Path(__file__).resolve().parents[2]
SPECS_DIR = REPO_ROOT / "etl" / "specs"
SPEC_FILE = "spec.yaml"
SPEC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# The flights data is 2013: the first complete daily interval ends on 2013-01-02.
START_DATE = pendulum.datetime(2013, 1, 2, tz="UTC")
ETL_CRON = "0 0 * * *"
DASK_POOL = "dask"
GPU_POOL = "gpu"
GPU_QUEUE = "gpu"

RETRY_DEFAULTS: dict[str, Any] = {
    "owner": "data-platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=15),
}


def spec_names(specs_dir: Path = SPECS_DIR) -> list[str]:
    """Dataset specs present on disk; one ETL and one training DAG is built for each.

    Only folder names are read (no YAML parsing, no etl import), so a new spec needs no
    DAG code and parsing stays cheap.
    """
    if not specs_dir.is_dir():
        return []
    return sorted(
        p.name for p in specs_dir.iterdir()
        if (p / SPEC_FILE).is_file() and SPEC_NAME.match(p.name)
    )


def etl_timetable() -> CronDataIntervalTimetable | None:
    """Daily UTC data intervals, or the cron in ``PIPELINE_ETL_SCHEDULE``; "none": manual only.

    Deployment-level, read from the environment at parse time (no DB): a staging deployment
    or a test can switch the nightly runs off while keeping manual triggers.
    """
    cron = os.environ.get("PIPELINE_ETL_SCHEDULE", "").strip() or ETL_CRON
    if cron.lower() == "none":
        return None
    return CronDataIntervalTimetable(cron, timezone="UTC")


def storage_root() -> str:
    """Storage root URI from the environment (docs/INTERFACES.md), never an Airflow Variable."""
    return os.environ.get("PIPELINE_STORAGE_ROOT") or f"file://{REPO_ROOT / '.data'}"


def dataset_asset(name: str) -> Asset:
    """The Asset the ETL DAG updates and the training DAG is scheduled on."""
    return Asset(name=f"dataset_{name}", uri=f"{storage_root().rstrip('/')}/datasets/{name}")
