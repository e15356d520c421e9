"""The trigger forms' typed Params, and the JSON schema that refuses bad values at creation.

Airflow validates a run's Params against these schemas when the run is created (trigger form
and REST API alike, 400 ``Invalid input for param <name>: <value> ...``) and again when a task
starts, so every range, pattern and choice lives here and nowhere else. What a schema cannot
say (a calendar date such as Feb 30, a symlink out of the storage root) is checked by
``options`` in each DAG's first task, which then fails at once without retries.
Import-light: stdlib, ``airflow.sdk`` only.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

# Empty, a date, or an ISO 8601 date-time; calendar validity (Feb 30) is checked in the task.
# No ``format``: ``date-time`` would make the form a datetime-local picker, which refuses a
# plain date such as 2014-01-01 (the help's own example form, issue 41 item 6), and ``date``
# one that refuses a time; a text field takes both, the pattern checks them.
ISO_DATE_TIME = (r"^$|^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
                 r"([T ]([01]\d|2[0-3])(:[0-5]\d){1,2}(\.\d+)?(Z|[+-]\d\d:?\d\d)?)?$")


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


TRAIN_OVERRIDES = ("epochs", "batch_size", "min_margin", "fail_unblessed")


def _rule(allowed: str, **schema: Any) -> dict[str, Any]:
    """A range or pattern, as an ``allOf`` rule that Airflow checks at run creation.

    Not at the schema's top level, for two reasons seen in Airflow 3.3.2: the form's number
    field clamps a typed value into a top-level minimum/maximum when it loses focus (-5
    silently becomes 1 and that run is created), and a refusal prints the failed (sub)schema:
    this rule alone, its ``description`` saying in words what is allowed, not the whole Param.
    """
    return {"allOf": [{"description": allowed, **schema}]}


def etl_params() -> dict[str, Param]:
    """Typed Params for the trigger form; JSON-schema checked before a run is created."""
    return {
        "interval_end": Param(
            None, type=["null", "string"],
            **_rule("empty, a date or an ISO 8601 date-time", pattern=ISO_DATE_TIME),
            title="Interval end (override)",
            description="UTC end of the data window: a date (2013-01-05) or ISO 8601 "
            "date-time (2013-01-05T06:00:00Z). Empty: the run's data interval end. The "
            "version id is derived from it.",
        ),
        "window_days": Param(
            None, type=["null", "integer"],
            **_rule(f"a whole number from 1 to {WINDOW_DAYS_MAX}", minimum=1,
                    maximum=WINDOW_DAYS_MAX),
            title="Window (days)",
            description=f"Days of raw data before the interval end, 1 to {WINDOW_DAYS_MAX}. "
            "Empty: everything landed up to the interval end.",
        ),
        "source_uri": Param(
            None, type=["null", "string"],
            **_rule("a file://, gs:// or memory:// URI, or a path inside the storage root "
                    "without '..' or spaces", pattern=SOURCE_URI),
            title="Raw source URI (override)",
            description="Where the primary source's raw files are, with the spec's partition "
            "placeholder, e.g. gs://bucket/raw/flights/date={date}/flights.csv; absolute "
            "(file://, gs://, memory://) or a path inside the storage root, without '..' "
            "or spaces. Empty: the spec's.",
        ),
        "shard_mb": Param(
            None, type=["null", "integer"],
            **_rule(f"a whole number from 1 to {SHARD_MB_MAX}", minimum=1,
                    maximum=SHARD_MB_MAX),
            title="Shard size (MiB)",
            description=f"Target uncompressed size of each TFRecord shard, 1 to {SHARD_MB_MAX} "
            "MiB. Empty: the spec's shards.target_bytes.",
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
            **_rule("'latest' or a version id", pattern=VERSION_ID),
            title="Dataset version",
            description="A version id to train (again, if it has a model), such as "
            "20130102T000000Z_all, or 'latest': the newest published version. A run an Asset "
            "event started trains what waits in storage, whatever this says.",
        ),
        "epochs": Param(
            None, type=["null", "integer"], title="Epochs",
            **_rule(f"a whole number from 1 to {EPOCHS_MAX}", minimum=1, maximum=EPOCHS_MAX),
            description=f"Training epochs, 1 to {EPOCHS_MAX}. Empty: the spec's "
            "training.epochs, else the default.",
        ),
        "batch_size": Param(
            None, type=["null", "integer"],
            **_rule(f"a whole number from 1 to {BATCH_SIZE_MAX}", minimum=1,
                    maximum=BATCH_SIZE_MAX),
            title="Batch size",
            description=f"Examples per batch, 1 to {BATCH_SIZE_MAX}. Empty: the spec's "
            "training.batch_size, else the default.",
        ),
        "min_margin": Param(
            None, type=["null", "number"],
            **_rule(f"a number from 0 up to (not including) {MARGIN_BELOW}", minimum=0,
                    exclusiveMaximum=MARGIN_BELOW),
            title="Quality gate margin",
            description="For a blessing, the model must beat the baseline's test metrics "
            f"(accuracy and AUC, macro-F1, or RMSE relative) by this much (0 up to, not "
            f"including, {MARGIN_BELOW}). The model is written either way; only a blessed one "
            "becomes current. Empty: the spec's training.min_margin, else the default.",
        ),
        "fail_unblessed": Param(
            None, type=["null", "boolean"], title="Fail when not blessed",
            description="Fail the train task when the model is not blessed. Empty or off "
            "(the default, as in TFX): the task succeeds, the model is written with its "
            "verdict and is simply not made the dataset's current model.",
        ),
    }


def scoring_params() -> dict[str, Param]:
    """Params of the scoring DAG; both matter only for runs not triggered by an Asset."""
    return {
        "version": Param("latest", type="string", title="Version",
                         **_rule("'latest' or a version id", pattern=VERSION_ID),
                         description="A version id to score, or latest: the newest published "
                         "version. Ignored when raw files are given, and for a run an Asset "
                         "event started, which scores every version that waits."),
        "raw": Param([], type=["null", "array"], items={"type": "string"},
                     title="Raw files (optional)",
                     description="Raw files of the spec's primary source to score instead "
                     "(the label may be absent): full URIs, or paths under the storage root "
                     "such as raw/flights/date=2013-01-05/flights.csv. Empty: score versions."),
    }
