"""The trigger forms' typed Params.

The JSON schema here carries only what shapes the form (types, choices with readable labels):
Airflow answers any schema refusal with a raw jsonschema dump (the whole schema and regex), so
ranges and patterns are checked by ``options`` in each DAG's first task, whose error names the
field and what it allows in one sentence. Import-light: stdlib, pendulum, ``airflow.sdk`` only.
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
# Labels of the compression choices; the form shows "null" for None without one.
COMPRESSION_LABELS = {"null": "Spec default (shards.compression)", "None": "Spec default "
                      "(shards.compression)", "none": "none (uncompressed)", "GZIP": "GZIP"}
WINDOW_DAYS_MAX, SHARD_MB_MAX = 3660, 4096
EPOCHS_MAX, BATCH_SIZE_MAX, MARGIN_BELOW = 1000, 65536, 0.5
VERSION_ID = r"^(latest|\d{8}T\d{6}Z_\S+)$"


VALIDATION_MODES = ("quarantine", "strict")


TRAIN_OVERRIDES = ("epochs", "batch_size", "min_margin")


def etl_params() -> dict[str, Param]:
    """Typed Params for the trigger form; JSON-schema checked before a run is created."""
    return {
        "interval_end": Param(
            None, type=["null", "string"], format="date-time",
            title="Interval end (override)",
            description="UTC end of the data window, ISO 8601. Empty: the run's data "
            "interval end. The version id is derived from it.",
        ),
        "window_days": Param(
            None, type=["null", "integer"], title="Window (days)",
            description="Days of raw data before the interval end. Empty: everything "
            "landed up to the interval end.",
        ),
        "source_uri": Param(
            None, type=["null", "string"], title="Raw source URI (override)",
            description="Where the primary source's raw files are, with the spec's partition "
            "placeholder, e.g. gs://bucket/raw/flights/date={date}/flights.csv; absolute "
            "(file://, gs://) or relative to the storage root. Empty: the spec's.",
        ),
        "shard_mb": Param(
            None, type=["null", "integer"], title="Shard size (MiB)",
            description="Target uncompressed size of each TFRecord shard. Empty: the spec's "
            "shards.target_bytes.",
        ),
        "compression": Param(
            None, type=["null", "string"], enum=[None, *COMPRESSIONS], title="Shard compression",
            values_display=COMPRESSION_LABELS,
            description="TFRecord compression: none or GZIP. Spec default: the spec's "
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
            "latest", type="string",
            title="Dataset version",
            description="Version id to train on, or 'latest'. Ignored when the run was "
            "triggered by a dataset Asset event (the event's version wins).",
        ),
        "epochs": Param(
            None, type=["null", "integer"], title="Epochs",
            description="Training epochs. Empty: the spec's training.epochs, else the "
            "default.",
        ),
        "batch_size": Param(
            None, type=["null", "integer"], title="Batch size",
            description="Examples per batch. Empty: the spec's training.batch_size, else the "
            "default.",
        ),
        "min_margin": Param(
            None, type=["null", "number"],
            title="Quality gate margin",
            description="The model must beat the majority-class baseline's test accuracy and "
            "AUC by this much or nothing is published. Empty: the spec's "
            "training.min_margin, else the default.",
        ),
    }
