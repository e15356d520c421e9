"""Shared wiring for the dataset DAGs: spec discovery, Assets, defaults, Params and checks.

Kept import-light on purpose: the dag-processor imports this module on every parse, so it
uses only the standard library, pendulum and ``airflow.sdk``; the pipeline code is imported
inside task bodies. Nothing here touches the metadata database, Variables or connections.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import Asset, CronDataIntervalTimetable, Param

REPO_ROOT = Path(__file__).resolve().parent.parent
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

# Empty, a date, or an ISO 8601 date-time; calendar validity (Feb 30) is checked in the task.
ISO_DATE_TIME = (
    r"^$|^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"([T ]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
# An absolute URI, or a path relative to the storage root that does not climb out of it.
SOURCE_URI = r"^(?!.*\.\.)((file|gs|gcs|memory)://\S+|[A-Za-z0-9_{][^\s:]*)$"
COMPRESSIONS = ("none", "GZIP")
VALIDATION_MODES = ("quarantine", "strict")
TRAIN_OVERRIDES = ("epochs", "batch_size", "min_margin")


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


def etl_params() -> dict[str, Param]:
    """Typed Params for the trigger form; JSON-schema checked before a run is created."""
    return {
        "interval_end": Param(
            None, type=["null", "string"], format="date-time", pattern=ISO_DATE_TIME,
            title="Interval end (override)",
            description="UTC end of the data window, ISO 8601. Empty: the run's data "
            "interval end. The version id is derived from it.",
        ),
        "window_days": Param(
            None, type=["null", "integer"], minimum=1, maximum=3660, title="Window (days)",
            description="Days of raw data before the interval end. Empty: everything "
            "landed up to the interval end.",
        ),
        "source_uri": Param(
            None, type=["null", "string"], pattern=SOURCE_URI, title="Raw source URI (override)",
            description="Where the primary source's raw files are, with the spec's partition "
            "placeholder, e.g. gs://bucket/raw/flights/date={date}/flights.csv; absolute "
            "(file://, gs://) or relative to the storage root. Empty: the spec's.",
        ),
        "shard_mb": Param(
            None, type=["null", "integer"], minimum=1, maximum=4096, title="Shard size (MiB)",
            description="Target uncompressed size of each TFRecord shard. Empty: the spec's "
            "shards.target_bytes.",
        ),
        "compression": Param(
            None, type=["null", "string"], enum=[None, *COMPRESSIONS], title="Shard compression",
            description="TFRecord compression: none or GZIP. Empty: the spec's "
            "shards.compression.",
        ),
        "validation_mode": Param(
            "quarantine", type="string", enum=list(VALIDATION_MODES), title="Validation mode",
            description="quarantine: set failing rows aside and publish the rest; strict: "
            "any failed expectation fails the run and nothing is published.",
        ),
        "force_republish": Param(
            False, type="boolean", title="Force re-publish",
            description="Publish a new revision (-rN) even when this interval's version "
            "already exists.",
        ),
    }


def training_params() -> dict[str, Param]:
    """Params of the training DAG; version only matters for runs not triggered by an Asset."""
    # Keys besides "version" are TrainConfig overrides (TRAIN_OVERRIDES).
    return {
        "version": Param(
            "latest", type="string", pattern=r"^(latest|\d{8}T\d{6}Z_\S+)$",
            title="Dataset version",
            description="Version id to train on, or 'latest'. Ignored when the run was "
            "triggered by a dataset Asset event (the event's version wins).",
        ),
        "epochs": Param(
            None, type=["null", "integer"], minimum=1, maximum=1000, title="Epochs",
            description="Training epochs. Empty: the training default.",
        ),
        "batch_size": Param(
            None, type=["null", "integer"], minimum=1, maximum=65536, title="Batch size",
            description="Examples per batch. Empty: the training default.",
        ),
        "min_margin": Param(
            None, type=["null", "number"], minimum=0, exclusiveMaximum=0.5,
            title="Quality gate margin",
            description="The model must beat the majority-class baseline's test accuracy and "
            "AUC by this much or nothing is published. Empty: the training default.",
        ),
    }


@dataclass(frozen=True)
class EtlOptions:
    """Checked, typed view of one ETL run's Params and data interval."""

    interval_end: datetime
    interval_start: datetime | None = None
    source_uri: str | None = None
    shard_bytes: int | None = None  # None: the spec's setting
    compression: str | None = None  # None: the spec's; else etl's spelling, "none" or "gzip"
    validation_mode: str = "quarantine"
    force_republish: bool = False


def _plain_utc(value: datetime) -> datetime:
    """A stdlib UTC datetime: pendulum's subclass breaks timedelta arithmetic in library code."""
    return datetime.fromtimestamp(value.timestamp(), tz=UTC)


def _parse_utc(value: str, name: str) -> datetime:
    try:
        parsed = pendulum.parse(value)
    except ValueError as exc:  # pendulum's ParserError is a ValueError
        raise ValueError(f"Param {name}={value!r}: expected an ISO 8601 date-time") from exc
    if isinstance(parsed, datetime):  # naive values are taken as UTC
        return _plain_utc(pendulum.instance(parsed, tz="UTC"))
    raise ValueError(f"Param {name}={value!r}: expected a date-time, got {type(parsed).__name__}")


def resolve_etl_options(
    params: Mapping[str, Any], data_interval_end: datetime | None, run_after: datetime | None
) -> EtlOptions:
    """Turn Params + the run's interval into options, rejecting bad input before any work.

    The interval end is the ``interval_end`` Param, else the data interval end, else (manual
    runs without a logical date) the run's recorded ``run_after``: never the wall clock, so
    a retry of the same run targets the same version.
    """
    raw_end = params.get("interval_end") or None
    if raw_end is not None:
        end = _parse_utc(str(raw_end), "interval_end")
    elif data_interval_end is not None or run_after is not None:
        end = _plain_utc(data_interval_end or run_after)
    else:
        raise ValueError("run has neither a data interval nor run_after; set Param interval_end")
    window = params.get("window_days")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"Param window_days={window!r}: expected an integer >= 1 or empty")
    source = params.get("source_uri") or None
    if source is not None and not re.match(SOURCE_URI, source):
        raise ValueError(f"Param source_uri={source!r}: expected a file://, gs:// or memory:// "
                         "URI, or a path inside the storage root")
    shard_mb = params.get("shard_mb")
    if shard_mb is not None and (isinstance(shard_mb, bool) or not isinstance(shard_mb, int)
                                 or shard_mb < 1):
        raise ValueError(f"Param shard_mb={shard_mb!r}: expected an integer >= 1 or empty")
    compression = params.get("compression")
    if compression is not None and compression not in COMPRESSIONS:
        raise ValueError(f"Param compression={compression!r}: expected one of {COMPRESSIONS}")
    mode = params.get("validation_mode", "quarantine")
    if mode not in VALIDATION_MODES:
        raise ValueError(f"Param validation_mode={mode!r}: expected one of {VALIDATION_MODES}")
    return EtlOptions(
        interval_end=end,
        interval_start=end - timedelta(days=window) if window else None,
        source_uri=source,
        shard_bytes=shard_mb * 2**20 if shard_mb else None,
        compression=compression.lower() if compression else None,
        validation_mode=mode,
        force_republish=bool(params.get("force_republish", False)),
    )


def choose_version(events: Iterable[Any], requested: str = "latest") -> tuple[str, str | None]:
    """Pick ``(version, version_uri)`` to train on from the triggering Asset events.

    Several publishes may be batched into one training run (a backfill); the newest
    version wins, and version ids sort by interval end. Without events (a manual run)
    the ``version`` Param is used and the URI is left for the caller to resolve.
    """
    published = []
    for event in events:
        extra = getattr(event, "extra", None) or {}
        if extra.get("version") and extra.get("version_uri"):
            published.append((str(extra["version"]), str(extra["version_uri"])))
    if published:
        return max(published)
    return requested or "latest", None


def metrics_summary(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Scalars and flat dicts of scalars from metrics.json: small enough for XCom and the UI."""
    def scalar(v: Any) -> bool:
        return v is None or isinstance(v, (bool, int, float, str))

    return {k: v for k, v in metrics.items()
            if scalar(v) or (isinstance(v, Mapping) and all(scalar(x) for x in v.values()))}


def run_name(run_id: str) -> str:
    """A storage-safe name for a training run folder, derived from the Airflow run id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("_") or "run"
