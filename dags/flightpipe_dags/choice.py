"""What a training or scoring run was asked for, and its skip said truthfully in its log.

The runs decide nothing from their Asset events: each event is keyed and starts its own run,
but the run may start after later publishes, or after another run did its work, so
``training.ledger`` reads the published versions and their states from storage, and every run
trains or scores what waits there. The events are only
logged, so an operator can match a run to the publishes that started it. A run triggered by
hand trains or scores the version it names (``latest``: the newest), or for scoring the raw
files it names, whether or not that was done before.
Called inside task bodies (and by tests): etl and training are imported there, never at parse
time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

_LOG = logging.getLogger("airflow.task")
# The XCom a skipped task leaves with its reason, for the dataset page (``pipeline_ui.runs``):
# Airflow stores no word of a skip (the exception's message reaches the task log only).
SKIP_KEY = "skipped"


@dataclass(frozen=True)
class Announced:
    """A version an Asset event announced (``publish`` puts its id and URI in the extra)."""

    version: str
    version_uri: str


def announced(events: Iterable[Any]) -> list[Announced]:
    """The versions ``events`` carry; an event without one (posted by hand) carries none."""
    out = []
    for event in events:
        extra = getattr(event, "extra", None) or {}
        if extra.get("version") and extra.get("version_uri"):
            out.append(Announced(str(extra["version"]), str(extra["version_uri"])))
    return out


def explicit_version(events: Iterable[Any], requested: str | None) -> str | None:
    """What a manual run asked for: a version id, or ``latest`` (the newest version, trained or
    scored again if it was: an operator who triggers by hand wants a run); None for a run an
    Asset event started, which trains or scores whatever the ledger says waits."""
    if list(events):
        return None
    return requested or "latest"


def requested(dataset: str, version: str | None, root: str) -> dict[str, str | None]:
    """``resolve_version``'s answer: the version a manual run named, its manifest checked
    (IncompleteVersionError when it has none), or ``None`` for the ledger to decide."""
    if version is None:
        return {"version": None, "version_uri": None}
    from etl import versions

    version_uri = versions.resolve(root, dataset, version)
    manifest = versions.read_manifest(version_uri)  # raises on an incomplete version
    return {"version": str(manifest.version), "version_uri": version_uri}


def log_events(dataset: str, events: Iterable[Any], activity: str) -> None:
    """One line: the versions this run's Asset events carried, and that storage decides."""
    carried = sorted({p.version for p in announced(events)})
    if carried:
        _LOG.info("This run's Asset events carried %d version(s) of %s (%s); it %s what waits "
                  "in storage, whichever versions those are", len(carried), dataset,
                  ", ".join(carried), activity)


def skip(reason: str) -> NoReturn:
    """End the task skipped, the reason in its log and in its ``SKIP_KEY`` XCom, which the
    dataset page shows beside the run (called outside a task, by a test, the log only)."""
    from airflow.sdk import get_current_context
    from airflow.sdk.exceptions import AirflowSkipException

    _LOG.warning("%s", reason)
    try:
        ti = get_current_context()["ti"]
    except RuntimeError:  # "no context was found": not running as an Airflow task
        ti = None
    if ti is not None:
        ti.xcom_push(key=SKIP_KEY, value=reason)
    raise AirflowSkipException(reason)


def announce(dataset: str, handed: dict[str, Any]) -> dict[str, Any]:
    """``announce_model``: its ``model_<name>`` Asset event only when a model became current
    (a skipped task emits none), so scoring runs for a new model, not for every training.
    ``handed``: the train task's XCom, a ``training.record.Handover`` as JSON."""
    from training.record import Handover

    handover = Handover.from_json(handed, f"the train task's result (train_{dataset})")
    if not handover.promoted:
        skip(f"No Asset event: the current model of {dataset} did not change (the model of "
             f"{handover.version} is not promoted)")
    return {"model_uri": handover.model_uri, "version": handover.version}
