"""The trigger forms' typed Params, JSON-schema checked before a run is created.

Import-light like every module of this package: stdlib, pendulum and ``airflow.sdk`` only.
"""

from __future__ import annotations

from airflow.sdk import Param

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
            description="Training epochs. Empty: the spec's training.epochs, else the "
            "default.",
        ),
        "batch_size": Param(
            None, type=["null", "integer"], minimum=1, maximum=65536, title="Batch size",
            description="Examples per batch. Empty: the spec's training.batch_size, else the "
            "default.",
        ),
        "min_margin": Param(
            None, type=["null", "number"], minimum=0, exclusiveMaximum=0.5,
            title="Quality gate margin",
            description="The model must beat the majority-class baseline's test accuracy and "
            "AUC by this much or nothing is published. Empty: the spec's "
            "training.min_margin, else the default.",
        ),
    }
