"""Train what the ledger says waits: the newest published version, until none newer waits.

A run does not trust the versions its trigger carried (``training.ledger`` says why): it
trains the newest published version when no model of it exists, records every older version
that waited as superseded by it, then looks again, since a version published while it
trained has a run of its own only if Airflow linked that version's Asset event to one. So a
burst, a backfill or a catch-up after a pause ends with its newest version trained, whatever
the scheduler did with the events. ``python -m training train --dataset D`` and the
``train_<name>`` DAG both come here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from etl import storage, versions
from training import ledger
from training.config import TrainConfig
from training.record import RunOrigin, Trained

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingRun:
    """Who trains (``run_folder`` under each version's ``models/<name>/<version>/``; ``who``:
    how the ledger names this run) and with what."""

    root: str
    dataset: str
    run_folder: str
    config: TrainConfig
    origin: RunOrigin | None = None

    @property
    def who(self) -> str:
        if self.origin is not None and self.origin.run_id:
            return f"run {self.origin.run_id} of {self.origin.dag_id}"
        return f"run folder {self.run_folder}"


Trainer = Callable[..., Trained]  # training.run.train.train's signature


def nothing_to_train(run: PendingRun) -> str | None:
    """Why this run trains nothing (the newest published version has a model; the older ones
    that waited are recorded superseded by it), or None when a version waits. Reads storage
    only: the DAG asks before it loads TensorFlow."""
    found = ledger.states(run.root, run.dataset, ledger.TRAINING)
    if not found:
        return f"no published version of {run.dataset} yet"
    if ledger.to_train(found) is not None:
        return None
    newest = found[-1]
    for s in ledger.supersede(run.root, run.dataset, ledger.TRAINING, found, newest.version,
                              str(newest.run)):
        log.info("training ledger of %s: %s", run.dataset, s.line())
    return (f"the newest published version of {run.dataset}, {newest.version}, is already "
            f"trained by {newest.run}; {ledger.summary(found)}")


def train_pending(run: PendingRun, trainer: Trainer | None = None,
                  version: str | None = None) -> list[Trained]:
    """Train the newest published version while one waits; each result as ``train`` returns
    it, oldest first (empty: nothing waited). ``version``: train that one (again, if it has a
    model) instead, once. A failure is recorded on its version, then raised."""
    if trainer is None:
        from training.run.train import train as trainer

    models_root = storage.join(run.root, ledger.MODELS_DIR)
    results: list[Trained] = []
    tried: set[str] = set()
    while True:
        found = ledger.states(run.root, run.dataset, ledger.TRAINING)
        target = version if version is not None else ledger.to_train(found)
        if target is None or target in tried:
            break
        tried.add(target)
        waiting = sum(1 for s in found[:-1] if s.state in (ledger.WAITING, ledger.FAILED))
        log.info("training %s version %s, %s%s", run.dataset, target,
                 "as asked" if version is not None else "the newest published",
                 f"; the {waiting} older version(s) waiting are superseded by it once it is "
                 "trained" if waiting else "")
        try:
            results.append(trainer(versions.version_uri(run.root, run.dataset, target),
                                   models_root, run.run_folder, run.config, origin=run.origin))
        except Exception as err:
            ledger.fail(run.root, run.dataset, ledger.TRAINING, target, run.who,
                        f"{type(err).__name__}: {err}")
            raise
        for s in ledger.supersede(run.root, run.dataset, ledger.TRAINING,
                                  ledger.states(run.root, run.dataset, ledger.TRAINING),
                                  target, run.who):
            log.info("training ledger of %s: %s", run.dataset, s.line())
    log.info("training ledger of %s: %s", run.dataset,
             ledger.summary(ledger.states(run.root, run.dataset, ledger.TRAINING)))
    return results
