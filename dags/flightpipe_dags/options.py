"""Params and the data interval turned into checked options; the version a training run uses.

Called inside task bodies (and by tests); import-light like the rest of this package.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum

from flightpipe_dags.params import (
    BATCH_SIZE_MAX,
    COMPRESSIONS,
    EPOCHS_MAX,
    ISO_DATE_TIME,
    MARGIN_BELOW,
    SHARD_MB_MAX,
    SOURCE_URI,
    VALIDATION_MODES,
    VERSION_ID,
    WINDOW_DAYS_MAX,
)


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

    def run_options(self) -> Any:
        """These options as the pipeline takes them (``etl.pipeline.RunOptions``), imported
        here because only task bodies call this: parsing a DAG file imports no etl code."""
        from etl.pipeline import RunOptions

        return RunOptions(mode=self.validation_mode, shard_bytes=self.shard_bytes,
                          compression=self.compression, force=self.force_republish,
                          source_uri=self.source_uri)


def _plain_utc(value: datetime) -> datetime:
    """A stdlib UTC datetime: pendulum's subclass breaks timedelta arithmetic in library code."""
    return datetime.fromtimestamp(value.timestamp(), tz=UTC)


def _parse_utc(value: str, name: str) -> datetime:
    try:
        parsed = pendulum.parse(value)
    except ValueError as exc:  # pendulum's ParserError is a ValueError
        raise ParamError(name, value, "an ISO 8601 date or date-time such as "
                         "2013-01-05 or 2013-01-05T06:00:00Z, or empty") from exc
    if isinstance(parsed, datetime):  # naive values are taken as UTC
        return _plain_utc(pendulum.instance(parsed, tz="UTC"))
    raise ParamError(name, value, "a date or date-time, not a duration or time")


class ParamError(ValueError):
    """A refused Param, said in one sentence: which field, what it allows, what it got."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        super().__init__(f"Param {name}={value!r} refused: {name} must be {allowed}.")


def _int_in(params: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParamError(name, value, f"a whole number from {low} to {high}, or empty")
    return value


def _choice(params: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: Any) -> Any:
    value = params.get(name, default)
    if value is not None and value not in allowed:
        raise ParamError(name, value, "one of " + ", ".join(allowed)
                         + (", or empty" if default is None else ""))
    return value


def resolve_etl_options(
    params: Mapping[str, Any], data_interval_end: datetime | None, run_after: datetime | None
) -> EtlOptions:
    """Turn Params + the run's interval into options, rejecting bad input before any work.

    The interval end is the ``interval_end`` Param, else the data interval end, else (manual
    runs without a logical date) the run's recorded ``run_after``: never the wall clock, so
    a retry of the same run targets the same version.
    """
    raw_end = params.get("interval_end") or None
    if raw_end is not None and not re.match(ISO_DATE_TIME, str(raw_end)):
        raise ParamError("interval_end", raw_end, "an ISO 8601 date or date-time such as "
                         "2013-01-05 or 2013-01-05T06:00:00Z, or empty")
    if raw_end is not None:
        end = _parse_utc(str(raw_end), "interval_end")
    elif data_interval_end is not None or run_after is not None:
        end = _plain_utc(data_interval_end or run_after)
    else:
        raise ValueError("run has neither a data interval nor run_after; set Param interval_end")
    window = _int_in(params, "window_days", 1, WINDOW_DAYS_MAX)
    source = params.get("source_uri") or None
    if source is not None and not re.match(SOURCE_URI, str(source)):
        raise ParamError("source_uri", source, "a file://, gs:// or memory:// URI, or a path "
                         "inside the storage root without '..' or spaces, or empty")
    shard_mb = _int_in(params, "shard_mb", 1, SHARD_MB_MAX)
    compression = _choice(params, "compression", COMPRESSIONS, None)
    mode = _choice(params, "validation_mode", VALIDATION_MODES, "quarantine")
    force = params.get("force_republish", False)
    if not isinstance(force, bool):
        raise ParamError("force_republish", force, "true or false")
    return EtlOptions(
        interval_end=end,
        interval_start=end - timedelta(days=window) if window else None,
        source_uri=source,
        shard_bytes=shard_mb * 2**20 if shard_mb else None,
        compression=compression.lower() if compression else None,
        validation_mode=mode,
        force_republish=force,
    )


def check_training_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The training form's overrides, checked; refusals name the field in one sentence."""
    version = params.get("version") or "latest"
    if not isinstance(version, str) or not re.match(VERSION_ID, version):
        raise ParamError("version", version, "'latest' or a version id such as "
                         "20130102T000000Z_all")
    overrides = {"epochs": _int_in(params, "epochs", 1, EPOCHS_MAX),
                 "batch_size": _int_in(params, "batch_size", 1, BATCH_SIZE_MAX)}
    margin = params.get("min_margin")
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float))
                               or not 0 <= margin < MARGIN_BELOW):
        raise ParamError("min_margin", margin, f"a number from 0 up to (not including) "
                         f"{MARGIN_BELOW}, or empty")
    overrides["min_margin"] = margin
    return {k: v for k, v in overrides.items() if v is not None}


def skip_already_published(dataset: str, result: Mapping[str, Any]) -> None:
    """Skip publish saying why in its own log: the run is green but published nothing."""
    from airflow.sdk.exceptions import AirflowSkipException

    reason = (f"Nothing published: version {result['version']} of {dataset} already exists at "
              f"{result['version_uri']} (no Asset event, no training). Trigger with "
              "force_republish to publish a new revision.")
    logging.getLogger("airflow.task").warning(reason)
    raise AirflowSkipException(reason)


def skip_superseded(dataset: str, version: str, newest: str) -> None:
    """Skip a training run whose event's version a newer published one superseded: the
    newer version's own event starts (or queued) the run that trains it."""
    from airflow.sdk.exceptions import AirflowSkipException

    reason = (f"Not training {dataset} version {version}: version {newest} was published since; "
              "the run its event started trains it.")
    logging.getLogger("airflow.task").warning(reason)
    raise AirflowSkipException(reason)


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
    """The scalars of metrics.json, and the scalars of each per-split dict (``test``, ``eval``,
    ``baseline``): small enough for XCom and the UI. A split's nested parts (a confusion
    matrix, per-class scores) are left out, never the split itself."""
    def scalar(v: Any) -> bool:
        return v is None or isinstance(v, (bool, int, float, str))

    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if scalar(value):
            out[key] = value
        elif isinstance(value, Mapping):
            flat = {k: v for k, v in value.items() if scalar(v)}
            if flat:
                out[key] = flat
    return out


def run_name(run_id: str) -> str:
    """A storage-safe name for a training run folder, derived from the Airflow run id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("_") or "run"
