"""Deployment settings of the dataset DAGs: spec discovery, schedule, pools, storage, Assets.

Kept import-light on purpose: the dag-processor imports this module on every parse, so it
uses only the standard library, pendulum, ``airflow.sdk`` and ``etl.spec.scheduling`` (the
specs search path and scheduling keys; stdlib + PyYAML); the
pipeline code is imported inside task bodies. Nothing here touches the metadata database, Variables or
connections.

Schedule precedence for ``etl_<name>``: ``$PIPELINE_ETL_SCHEDULE`` (deployment override, e.g.
``none`` on a staging deployment) > the spec's ``schedule`` > daily at 00:00 UTC. A spec's
``schedule: partitioned`` runs ``etl_<name>`` once per raw partition announced on the Asset
``raw_<name>`` (an event whose ``partition_key`` is the day, e.g. ``2013-01-05``).

Whatever the schedule, the events of ``dataset_<name>`` and ``model_<name>`` are
partition-keyed (Airflow's partitioned Assets, AIP-76): a publish's key is its version id, a
promotion's ``<version>/<run folder>`` (the model's folder under ``models/<name>/``), so each
event gets its own pending run of each consumer and no event is linked to no run.
``train_<name>`` and ``score_<name>`` are scheduled with ``PartitionedAssetTimetable``, the
only timetable that receives keyed events.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import Asset, CronDataIntervalTimetable, PartitionedAssetTimetable

from etl.spec.scheduling import PARTITIONED, DagSettings, find_specs, read_settings
from flightpipe_dags.failures import RETRY_POLICY

REPO_ROOT = Path(__file__).resolve().parents[2]
ETL_SCHEDULE_ENV = "PIPELINE_ETL_SCHEDULE"

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
    # retries are for transient failures only: a deterministic one fails at once (failures.py)
    "retry_policy": RETRY_POLICY,
}


def spec_names() -> list[str]:
    """Dataset specs on the specs search path (``$PIPELINE_SPECS_PATH``), one pair of DAGs each.

    Only folder names are read (no YAML parsing, no etl import), so a new spec needs no
    DAG code and parsing stays cheap.
    """
    return list(find_specs())


def dataset_settings() -> dict[str, DagSettings]:
    """Every spec's scheduling keys by dataset name: one small YAML read per spec.

    A malformed key raises (naming the file and the field): the DAG file's import error shows
    it in the UI rather than a dataset silently losing its DAGs.
    """
    return {name: read_settings(path) for name, path in find_specs().items()}


def etl_timetable(spec_schedule: str | None = None, name: str = ""
                  ) -> CronDataIntervalTimetable | PartitionedAssetTimetable | None:
    """The ETL DAG's data intervals; ``None`` (no timetable) means manual runs only.

    ``$PIPELINE_ETL_SCHEDULE`` wins (a staging deployment or a test switches every nightly run
    off with ``none``), then the spec's ``schedule``, then daily at 00:00 UTC. ``partitioned``:
    a run per partition-keyed event of ``raw_<name>``. Read from the environment and the spec
    file at parse time, never from the database.
    """
    cron = os.environ.get(ETL_SCHEDULE_ENV, "").strip() or spec_schedule or ETL_CRON
    if cron.lower() == "none":
        return None
    if cron == PARTITIONED:
        return PartitionedAssetTimetable(assets=raw_asset(name))
    return CronDataIntervalTimetable(cron, timezone="UTC")


# How many runs of one ETL DAG may be active at once (a cron or manual schedule). A run waiting
# for late data is deferred and holds no worker or pool slot, and builds share the ``dask``
# pool, so a waiting window must not hold a run of another window: storage keeps the order
# that matters (one writer per version, ``LATEST`` only moves forward), not the scheduler.
ETL_ACTIVE_RUNS = 8


def etl_active_runs(timetable: Any) -> int:
    """``max_active_runs`` of ``etl_<name>``: one at a time for a partitioned schedule, where
    the order the days were announced is the order their versions are published (each run
    starts from the version the previous one published), ``ETL_ACTIVE_RUNS`` otherwise."""
    return 1 if isinstance(timetable, PartitionedAssetTimetable) else ETL_ACTIVE_RUNS


# How many Asset-triggered runs of one training or scoring DAG may be active at once. Every
# event of ``dataset_<name>`` and ``model_<name>`` carries its own partition key (a publish's
# version id, a promotion's model folder), and Airflow keeps one pending run per (DAG, key),
# created from that key's events alone: each publish and each promotion gets its own run, and
# no event lands in a pending run the scheduler is turning into a run at that moment (an
# unkeyed Asset has one shared queue row per DAG, and an event landing while the scheduler
# creates the run from it was linked to no run). The runs wait on the ``gpu`` pool, one slot
# per GPU, not on the run count; a run over this limit stays queued until one ends. Each run
# trains or scores what waits in storage (``training.ledger``), which a run created earlier
# may have done already: it then says so and skips.
ASSET_ACTIVE_RUNS = 64


def training_schedule(name: str) -> PartitionedAssetTimetable:
    """``train_<name>`` runs once per ``dataset_<name>`` event: each carries the published
    version's id as its partition key (identity mapping, so the run's ``partition_key`` is the
    version id)."""
    return PartitionedAssetTimetable(assets=dataset_asset(name))


def scoring_schedule(name: str) -> PartitionedAssetTimetable:
    """``score_<name>`` runs once per publish (key: the version id) and once per promotion of
    a model (key: ``<version>/<run folder>``), which scores the versions that waited for one;
    either Asset's keyed event satisfies the condition on its own."""
    return PartitionedAssetTimetable(assets=dataset_asset(name) | model_asset(name))


def publish_key(version: str) -> str:
    """The partition key of a publish's ``dataset_<name>`` event: the version id, unique per
    publish (a re-run of a published interval publishes nothing, ``force_republish`` a new
    ``-rN`` id)."""
    return version


def model_key(version: str, model_uri: str) -> str:
    """The partition key of a promotion's ``model_<name>`` event: the model's folder under
    ``models/<name>/`` (``<version>/<run folder>``), unique per promotion, and never a
    version id, so a promotion never shares the pending scoring run of its version's
    publish."""
    return f"{version}/{model_uri.rstrip('/').rsplit('/', 1)[-1]}"


def dag_defaults(name: str, settings: DagSettings, role: str,
                 retries: int | None = None) -> dict[str, Any]:
    """``start_date``, ``default_args`` (owner, retries and which failures they are for) and
    ``tags`` of one dataset's DAG."""
    args = dict(RETRY_DEFAULTS)
    if settings.owner:
        args["owner"] = settings.owner
    if retries is not None:
        args["retries"] = retries
    start = pendulum.instance(settings.start_date) if settings.start_date else START_DATE
    tags = list(dict.fromkeys([role, name, *settings.tags]))
    return {"start_date": start, "default_args": args, "tags": tags}


def storage_root() -> str:
    """Storage root URI from the environment (docs/INTERFACES.md), never an Airflow Variable."""
    return os.environ.get("PIPELINE_STORAGE_ROOT") or f"file://{REPO_ROOT / '.data'}"


def raw_asset(name: str) -> Asset:
    """The raw data of a ``schedule: partitioned`` dataset: each event announces one landed
    partition (``partition_key`` = its day), posted by the upstream job or an AssetWatcher."""
    return Asset(name=f"raw_{name}", uri=f"{storage_root().rstrip('/')}/raw/{name}")


def model_asset(name: str) -> Asset:
    """Updated when a training run makes a new model current: scoring runs on it."""
    return Asset(name=f"model_{name}", uri=f"{storage_root().rstrip('/')}/models/{name}")


def dataset_asset(name: str) -> Asset:
    """The Asset the ETL DAG updates and the training DAG is scheduled on."""
    return Asset(name=f"dataset_{name}", uri=f"{storage_root().rstrip('/')}/datasets/{name}")
