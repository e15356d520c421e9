"""Params and the data interval turned into checked options; small things tasks report.

Airflow has already held every Param to its JSON schema (``params``) when the run was created
and again when the task started; what is left here is what a schema cannot say: a calendar
date (Feb 30), a source path that leaves the storage root through a symlink. Those fail the
first task at once (``ParamError`` is Airflow's fail-now exception: no retries), its one-line
reason logged first. Called inside task bodies (and by tests); import-light like the package.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

import pendulum
from airflow.sdk.exceptions import AirflowFailException

from flightpipe_dags.params import TRAIN_OVERRIDES

if TYPE_CHECKING:  # parse time stays light: the types only annotate
    from etl.versions.catalog import PublishedVersion

_LOG = logging.getLogger("airflow.task")


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


class ParamError(AirflowFailException, ValueError):
    """A refused Param. ``reason`` says it in one sentence (which field, what it allows, what
    it got) and is the task log's ERROR line; the exception, which Airflow logs again with its
    traceback, only points at that line, so the log says the reason once.

    An ``AirflowFailException``: the task fails at once, without retries (a retry would
    meet the same value)."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.reason = f"Param {name}={value!r} refused: {name} must be {allowed}."
        super().__init__(f"Param {name} refused (the ERROR line above says what it allows)")


def _refuse(name: str, value: Any, allowed: str) -> NoReturn:
    """Log the refusal as the task's first line of its own, then fail the task for good."""
    error = ParamError(name, value, allowed)
    _LOG.error("%s", error.reason)
    raise error


def _plain_utc(value: datetime) -> datetime:
    """A stdlib UTC datetime: pendulum's subclass breaks timedelta arithmetic in library code."""
    return datetime.fromtimestamp(value.timestamp(), tz=UTC)


def _parse_utc(value: str, name: str) -> datetime:
    """The schema's pattern let ``value`` through; only a calendar check is left (Feb 30)."""
    try:
        parsed = pendulum.parse(value)  # a date or date-time: the pattern saw to that
    except ValueError:  # pendulum's ParserError; refused outside this block, so the task
        parsed = None  # log shows no chained parser traceback
    if not isinstance(parsed, datetime):
        _refuse(name, value, "a real calendar date or date-time such as 2013-01-05 or "
                "2013-01-05T06:00:00Z, or empty")
    return _plain_utc(pendulum.instance(parsed, tz="UTC"))  # naive values are taken as UTC


def _inside_root(source: str, root: str) -> str:
    """A relative source stays under the storage root, symlinks resolved; URIs pass."""
    if "://" in source:
        return source
    from etl import storage
    from etl.errors import PathOutsideRootError

    try:
        storage.safe_join(root, source)
    except PathOutsideRootError:
        pass  # refused below, outside this block: no chained traceback in the task log
    else:
        return source
    _refuse("source_uri", source, f"a path that stays inside the storage root {root} (no "
            "backslash, no link that leads out of it)")


def resolve_etl_options(params: Mapping[str, Any], data_interval_end: datetime | None,
                        run_after: datetime | None, root: str) -> EtlOptions:
    """Turn schema-checked Params + the run's interval into options, before any work.

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
    source = params.get("source_uri") or None
    shard_mb = params.get("shard_mb")
    compression = params.get("compression")
    return EtlOptions(
        interval_end=end,
        interval_start=end - timedelta(days=window) if window else None,
        source_uri=_inside_root(source, root) if source else None,
        shard_bytes=shard_mb * 2**20 if shard_mb else None,
        compression=compression.lower() if compression else None,
        validation_mode=params.get("validation_mode") or "quarantine",
        force_republish=bool(params.get("force_republish")),
    )


def training_overrides(params: Mapping[str, Any]) -> dict[str, Any]:
    """The training form's TrainConfig overrides that are set (schema-checked by Airflow)."""
    return {k: params[k] for k in TRAIN_OVERRIDES if params.get(k) is not None}


def skip_already_published(dataset: str, result: PublishedVersion) -> None:
    """Skip publish saying why in its own log (and on the dataset page): the run is green
    but published nothing."""
    from flightpipe_dags import choice

    choice.skip(f"Nothing published: version {result.version} of {dataset} already exists "
                f"at {result.version_uri} (no Asset event, no training). Trigger with "
                "force_republish to publish a new revision.")


def run_name(run_id: str) -> str:
    """A storage-safe name for a training run folder, derived from the Airflow run id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("_") or "run"


def scored_summary(done: Sequence[Any]) -> dict[str, Any]:
    """A score run's XCom: the last published folder's summary and every window it scored
    (``done``: ``training.score.publish.PublishedVersion``, oldest first)."""
    return {**done[-1].summary(), "windows": [one.key[0] for one in done]}
