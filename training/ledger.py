"""Where every published version stands, for training and for scoring: read from storage.

Airflow hands a run however many Asset events it queued (a run created while the DAG was busy
takes the events up to its queue row's time; later ones can be linked to no run at all), so
neither the training nor the scoring DAG decides anything from its events. Each reads the
published versions and their records here, and every published version is in exactly one
state of each activity:

- ``done``: a model (training) or predictions (scoring) exist for it; ``run`` names the run;
- ``superseded``: ``by`` a newer version whose run (``run``) did it. Training supersedes every
  older version that waits when a newer one is trained (a model of older data never becomes
  current: ``training.judge.gate``); scoring supersedes a version only when a newer version's
  window holds its whole window, so no row goes unscored;
- ``failed``: the last attempt failed (``why``); the next run tries again;
- ``waiting``: published, nothing recorded yet (``why`` says for what).

``done`` is read from the artifacts themselves (a model's metrics.json, a predictions
manifest), so it cannot disagree with them; ``superseded`` and ``failed`` are small JSON records
under ``<root>/ledger/<dataset>/<activity>/<version>.json``, replaced as the state moves. Light
on purpose: the plugin reads it (storage and JSON only, no TensorFlow).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from etl import storage, versions
from etl.versions import parse_version_id, version_key
from training.predictions import read_predictions_manifest, scored_uri
from training.record import read_model_record

log = logging.getLogger(__name__)

TRAINING, SCORING = "training", "scoring"
ACTIVITIES = (TRAINING, SCORING)
DONE, SUPERSEDED, FAILED, WAITING = "done", "superseded", "failed", "waiting"
LEDGER_DIR = "ledger"
MODELS_DIR = "models"


@dataclass(frozen=True)
class VersionState:
    """One version's state in one activity (``run``: the run that did it, or that did the
    newer version which supersedes it; ``by``: that newer version)."""

    version: str
    activity: str
    state: str
    why: str = ""
    run: str | None = None
    by: str | None = None
    at: str | None = None

    @classmethod
    def from_json(cls, obj: dict, where: str) -> VersionState:
        try:
            state = cls(**{k: obj[k] for k in cls.__dataclass_fields__ if k in obj})
        except TypeError as err:
            raise ValueError(f"{where}: not a ledger record ({err})") from None
        if state.state not in (SUPERSEDED, FAILED) or state.activity not in ACTIVITIES:
            raise ValueError(f"{where}: state {state.state!r} of {state.activity!r} is not "
                             f"a recorded state (expected superseded or failed)")
        return state

    def line(self) -> str:
        """The state in one line, as the task log and the UI say it."""
        verb = "trained" if self.activity == TRAINING else "scored"
        if self.state == DONE:
            return f"{self.version}: {verb} by {self.run}"
        if self.state == SUPERSEDED:
            return f"{self.version}: superseded by {self.by} ({verb} by {self.run})"
        if self.state == FAILED:
            return f"{self.version}: failed in {self.run}: {self.why}"
        return f"{self.version}: waiting ({self.why})"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def record_uri(root: str, dataset: str, activity: str, version: str) -> str:
    return storage.safe_join(root, LEDGER_DIR, dataset, activity, f"{version}.json")


def _recorded(root: str, dataset: str, activity: str, version: str) -> VersionState | None:
    uri = record_uri(root, dataset, activity, version)
    try:
        return VersionState.from_json(storage.read_json(uri), uri)
    except FileNotFoundError:
        return None


def record(root: str, state: VersionState, dataset: str) -> None:
    """Write a superseded or failed state (done is never recorded: the artifact says it)."""
    if state.state not in (SUPERSEDED, FAILED):
        raise ValueError(f"only superseded and failed are recorded, not {state.state!r}")
    stamped = state if state.at else VersionState(**{**asdict(state), "at": _now()})
    storage.write_bytes_atomic(record_uri(root, dataset, state.activity, state.version),
                               storage.json_bytes(asdict(stamped)))


def trained(root: str, dataset: str, version: str, skip_run: str | None = None) -> str | None:
    """Who trained ``version``: the newest finished model's run (``run X of train_D``, or
    the run folder for a model trained outside Airflow); None when no model is finished.
    ``skip_run``: a run folder not counted (a cleared run trains its own again)."""
    folder_uri = storage.safe_join(root, MODELS_DIR, dataset, version)
    found: list[tuple[str, str]] = []
    for folder in storage.list_dir(folder_uri):
        if folder == skip_run:
            continue
        model = read_model_record(storage.join(folder_uri, folder))
        if model is not None:  # still training or killed: no metrics.json yet (written last)
            found.append((str(model.created_at or ""), model.trained_by or f"run folder {folder}"))
    return max(found)[1] if found else None


def scored(root: str, dataset: str, version: str) -> str | None:
    """Who scored ``version``: the newest predictions' run id and model, else None."""
    folder = scored_uri(root, dataset, version)
    found: list[tuple[str, str]] = []
    for model_id in storage.list_dir(folder):
        manifest = read_predictions_manifest(storage.join(folder, model_id))
        if manifest is not None:  # None: being written, or killed: not published
            found.append((manifest.created_at or "",
                          f"run {manifest.run_id} (model {model_id})"))
    return max(found)[1] if found else None


def states(root: str, dataset: str, activity: str,
           published: Iterable[str] | None = None) -> list[VersionState]:
    """Every published version's state in ``activity``, oldest first (``published``: the
    version ids, when the caller has listed them already)."""
    ids = list(published) if published is not None else versions.list_versions(root, dataset)
    done_by = trained if activity == TRAINING else scored
    out = []
    for version in ids:
        who = done_by(root, dataset, version)
        if who is not None:
            out.append(VersionState(version, activity, DONE, run=who))
            continue
        out.append(_recorded(root, dataset, activity, version)
                   or VersionState(version, activity, WAITING, why=_waiting_for(activity)))
    return out


def _waiting_for(activity: str) -> str:
    return ("for a training run" if activity == TRAINING
            else "for a scoring run with a blessed model")


def covers(newer: str, older: str) -> bool:
    """Whether ``newer``'s data window holds all of ``older``'s (its rows are all scored
    when ``newer`` is): it ends no earlier and starts no later (``all``: unbounded)."""
    n, o = parse_version_id(newer), parse_version_id(older)
    starts_before = n.start is None or (o.start is not None and n.start <= o.start)
    return n.end >= o.end and starts_before


def to_train(found: list[VersionState]) -> str | None:
    """The version a training run trains now: the newest published one, unless it is
    trained already (then none: the older ones are superseded by it)."""
    newest = found[-1] if found else None
    return newest.version if newest is not None and newest.state != DONE else None


def to_score(found: list[VersionState]) -> list[str]:
    """Versions a scoring run scores, oldest first: each not scored yet whose rows no newer
    version's window holds (a window held by a newer one is superseded by it)."""
    pending = [s.version for s in found if s.state != DONE]
    return [v for v in pending if not any(
        version_key(o.version) > version_key(v) and covers(o.version, v) for o in found)]


def supersede(root: str, dataset: str, activity: str, found: list[VersionState], by: str,
              run: str) -> list[VersionState]:
    """Record every version of ``found`` that is not done and that ``by`` (done by ``run``)
    supersedes: for training every older one, for scoring those whose window ``by``'s
    holds. Returns the new states."""
    key = version_key(by)
    out = []
    for s in found:
        if s.state in (DONE, SUPERSEDED):  # the first newer version that did it stays named
            continue
        if version_key(s.version) >= key or (activity == SCORING and not covers(by, s.version)):
            continue
        new = VersionState(s.version, activity, SUPERSEDED, by=by, run=run,
                           why=f"{by} is newer" if activity == TRAINING
                           else f"{by}'s window holds its rows")
        record(root, new, dataset)
        out.append(new)
    return out


def fail(root: str, dataset: str, activity: str, version: str, run: str, why: str) -> None:
    """Record that ``run`` failed to train or score ``version`` (one line of why)."""
    record(root, VersionState(version, activity, FAILED, why=why.splitlines()[0][:300] if why
                              else "failed", run=run), dataset)


def summary(found: list[VersionState]) -> str:
    """One line: how many versions are in each state, and the newest's."""
    counts: dict[str, int] = {}
    for s in found:
        counts[s.state] = counts.get(s.state, 0) + 1
    told = ", ".join(f"{n} {state}" for state, n in counts.items())
    return f"{len(found)} published version(s): {told}" + (
        f"; newest {found[-1].line()}" if found else "")
