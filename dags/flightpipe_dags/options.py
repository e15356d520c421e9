"""Params and the data interval turned into checked options; the version a training run uses.

Called inside task bodies (and by tests); import-light like the rest of this package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum

from flightpipe_dags.params import COMPRESSIONS, SOURCE_URI, VALIDATION_MODES


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
