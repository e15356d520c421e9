"""Shared code of the DAG files in ``dags/``: settings, trigger-form Params, option checks,
the version a training run trains (``choice``).

A uniquely named package (Airflow puts the DAGs folder on ``sys.path``, so a generic name
could shadow another module); ``.airflowignore`` keeps the dag-processor from parsing it as
DAG files. Import-light on purpose: stdlib, pendulum and ``airflow.sdk`` only, nothing that
touches the metadata database, Variables or connections. The specs search path and the
per-spec scheduling keys come from ``etl.spec.scheduling`` (stdlib + PyYAML, nothing heavy).
"""

from __future__ import annotations

from flightpipe_dags.options import (
    EtlOptions,
    ParamError,
    resolve_etl_options,
    run_name,
    scored_summary,
    skip_already_published,
    training_overrides,
)
from flightpipe_dags.params import TRAIN_OVERRIDES, etl_params, scoring_params, training_params
from flightpipe_dags.settings import (
    ASSET_ACTIVE_RUNS,
    DASK_POOL,
    GPU_POOL,
    GPU_QUEUE,
    RETRY_DEFAULTS,
    START_DATE,
    DagSettings,
    dag_defaults,
    dataset_asset,
    dataset_settings,
    etl_active_runs,
    etl_timetable,
    model_asset,
    model_key,
    publish_key,
    raw_asset,
    scoring_schedule,
    spec_names,
    storage_root,
    training_schedule,
)

__all__ = [
    "ASSET_ACTIVE_RUNS",
    "DASK_POOL",
    "GPU_POOL",
    "GPU_QUEUE",
    "RETRY_DEFAULTS",
    "START_DATE",
    "TRAIN_OVERRIDES",
    "DagSettings",
    "EtlOptions",
    "ParamError",
    "dag_defaults",
    "dataset_asset",
    "dataset_settings",
    "etl_active_runs",
    "etl_params",
    "etl_timetable",
    "model_asset",
    "model_key",
    "publish_key",
    "raw_asset",
    "resolve_etl_options",
    "run_name",
    "scored_summary",
    "scoring_params",
    "scoring_schedule",
    "skip_already_published",
    "spec_names",
    "storage_root",
    "training_overrides",
    "training_params",
    "training_schedule",
]
