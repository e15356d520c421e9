"""Which version a training run trains, or why it trains none, said truthfully in its log.

A run started by Asset events trains the newest version they carry, newest by the one order of
versions (``etl.versions.version_key``: interval end, then start, then revision); the older
versions in the same run are superseded by it and not trained separately. It trains nothing,
and says why, when

- that version already has a finished model of another run: "already trained by run X";
- a newer version that no run has trained yet was published after this run's events: the
  later run its own event starts trains it (so a burst of publishes, a backfill or 30
  announced days, trains the newest version when each training starts, not each in turn).
  A version published outside Airflow (``python -m etl run``) sends no Asset event: a manual
  run trains it.

An older interval published after a newer one was trained (a recovery, a backfill's
straggler) is trained by its own run; the gate decides whether its model becomes the current
one. A manual run (no events) trains the ``version`` Param's version, trained before or not.
Called inside task bodies (and by tests): etl is imported there, never at parse time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

_LOG = logging.getLogger("airflow.task")


@dataclass(frozen=True)
class Published:
    """A version an Asset event announced (``publish`` puts its id and URI in the extra)."""

    version: str
    version_uri: str
    timestamp: datetime | None = None  # the event's


def published(events: Iterable[Any]) -> list[Published]:
    """The versions ``events`` carry; an event without one (posted by hand) carries none."""
    out = []
    for event in events:
        extra = getattr(event, "extra", None) or {}
        if extra.get("version") and extra.get("version_uri"):
            out.append(Published(str(extra["version"]), str(extra["version_uri"]),
                                 getattr(event, "timestamp", None)))
    return out


def newest(found: Iterable[Published]) -> Published | None:
    """The newest of ``found`` by the one order of versions (None when empty).

    Raises:
        ValueError: an event's version is not a version id (it is named).
    """
    from etl.versions import version_key

    return max(found, key=lambda p: version_key(p.version), default=None)


def choose_version(events: Iterable[Any], requested: str = "latest") -> tuple[str, str | None]:
    """``(version, version_uri)`` to train: the newest version the triggering Asset events
    carry; without one (a manual run) the ``version`` Param, its URI left to the caller."""
    chosen = newest(published(events))
    if chosen is not None:
        return chosen.version, chosen.version_uri
    return requested or "latest", None


def trained_by(root: str, dataset: str, version: str, own_run: str) -> str | None:
    """Who already trained ``version``: ``run <run_id> of <dag_id>`` of a finished model in a
    run folder other than ``own_run`` (this run's own, which a cleared run trains again), the
    folder itself for a model trained outside Airflow; None when there is no such model."""
    from etl import storage
    from training.config import read_model_record

    runs = storage.safe_join(root, "models", dataset, version)
    for folder in storage.list_dir(runs):
        if folder == own_run:
            continue
        record = read_model_record(storage.join(runs, folder))
        if record is None:
            continue  # still training, or killed: no model (training writes it last)
        return record.trained_by or f"run folder {folder}"
    return None


def newer_untrained(root: str, dataset: str, version: str, since: datetime,
                    own_run: str) -> str | None:
    """The newest published version newer than ``version`` that was published after ``since``
    (this run's last Asset event) and has no model yet, or None.

    Its own Asset event came after this run's, so a later run gets it: a partitioned
    schedule has queued that run already; an Asset schedule creates it when this one ends
    (Airflow creates no run while one is active under ``max_active_runs=1``, and keeps the
    event queued). Read from storage: Airflow 3.3.2's execution API answers 500 for an Asset's
    events while a run they created is still queued (apache/airflow#71360), so
    ``inlet_events`` cannot be read here.
    """
    from etl.versions import list_versions, read_manifest, version_key, version_uri

    key = version_key(version)
    for candidate in reversed(list_versions(root, dataset)):  # newest first
        if version_key(candidate) <= key:
            return None
        stamp = read_manifest(version_uri(root, dataset, candidate)).created_at
        try:
            published_at = datetime.fromisoformat(str(stamp))
        except ValueError:
            continue  # no publish time (an old manifest): not known to be later
        if published_at.tzinfo is None:  # written in UTC, as every time in a manifest
            published_at = published_at.replace(tzinfo=UTC)
        if published_at > since and trained_by(root, dataset, candidate, own_run) is None:
            return candidate
    return None


def why_not_train(dataset: str, version: str, events: Sequence[Any], root: str,
                  own_run: str) -> str | None:
    """Why the run that ``events`` started does not train ``version`` (their newest), or None.

    ``own_run``: this run's folder under ``models/<dataset>/<version>/``.
    """
    done = trained_by(root, dataset, version, own_run)
    if done:
        return (f"Not training {dataset} version {version}: already trained by {done}. "
                f"Trigger train_{dataset} with version={version} to train it again.")
    times = [t for t in (getattr(e, "timestamp", None) for e in events) if t is not None]
    pending = newer_untrained(root, dataset, version, max(times), own_run) if times else None
    if pending:
        return (f"Not training {dataset} version {version}: version {pending}, newer, was "
                "published after this run's Asset events and has no model yet; the later run "
                "its own Asset event starts trains it (or a version newer still).")
    return None


def settle(dataset: str, version: str, events: Sequence[Any], root: str, own_run: str) -> None:
    """An Asset-triggered run: skip it saying why, or log the version it trains and the
    versions of its events that this one supersedes (not trained separately)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from etl.versions import version_key

    reason = why_not_train(dataset, version, events, root, own_run)
    if reason:
        _LOG.warning("%s", reason)
        raise AirflowSkipException(reason)
    others = sorted({p.version for p in published(events)} - {version}, key=version_key)
    _LOG.info("Training %s version %s, the newest of the %d version(s) this run's Asset events "
              "carry%s", dataset, version, len(others) + 1,
              f" (superseded by it, not trained separately: {', '.join(others)})"
              if others else "")


def skip_unscored(dataset: str, version: str, why: Exception,
                  events: Sequence[Any]) -> NoReturn:
    """An Asset-triggered score run of a dataset with no blessed model yet (its first
    versions, while the first training runs beside it): skip it saying why and what to do.
    A run triggered by hand (no ``events``) fails with ``why``: the operator asked for it."""
    from airflow.sdk.exceptions import AirflowSkipException

    if not events:
        raise why

    reason = (f"Not scoring {dataset} version {version}: {why}. When a train_{dataset} run "
              f"blesses a model, the next publish is scored; to score this version, trigger "
              f"score_{dataset} with version {version}.")
    _LOG.warning("%s", reason)
    raise AirflowSkipException(reason)
