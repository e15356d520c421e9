"""Score what the ledger says waits: every published version whose rows no newer version holds.

Like training (``training.run.pending``), a score run reads the published versions and their
states from storage instead of trusting the Asset events it was handed: a run that carried
three events scored only the newest id before, and the weeks published with it got no
predictions and no log line. Now each version not scored yet is scored with the current
model, unless a newer version's window holds all of its rows (then it is recorded as
superseded by that one). With no blessed model yet every waiting version stays waiting, and
the promotion of the first model (its ``model_<name>`` Asset event) starts the run that
scores them.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from training import ledger

if TYPE_CHECKING:  # the scoring itself loads TensorFlow: a run with nothing to score does not
    from training.score.publish import Published
    from training.score.run import ScoreOptions

log = logging.getLogger(__name__)


def pending(root: str, dataset: str) -> tuple[list[ledger.VersionState], list[str]]:
    """(every published version's scoring state, the versions to score now, oldest first)."""
    found = ledger.states(root, dataset, ledger.SCORING)
    return found, ledger.to_score(found)


def nothing_to_score(root: str, dataset: str) -> str | None:
    """Why a run started by an Asset event scores nothing (every published version is scored
    or superseded), or None. Reads storage only: the DAG asks before it loads TensorFlow."""
    found, todo = pending(root, dataset)
    if todo:
        return None
    return f"nothing waits; {ledger.summary(found)}" if found else (
        f"no published version of {dataset} yet")


def score_asked(options: ScoreOptions, asked: bool) -> list[Published]:
    """What a run scores: by hand (``asked``) the version or raw files it names, once;
    otherwise every version that waits (``score_pending``)."""
    from training.score.run import score

    return [score(options)] if asked else score_pending(options)


def score_pending(options: ScoreOptions) -> list[Published]:
    """Score each waiting version with the current model (``options.version`` and ``raw``
    are ignored: the ledger decides), record the ones a newer window supersedes; the
    published folders, oldest first. A failure is recorded on its version, then raised.

    Raises:
        NoBlessedModelError: no blessed model yet (nothing is recorded: the versions wait).
    """
    from training.score.model import served_model
    from training.score.run import score

    served_model(options.models, options.dataset)  # no model: raise before anything
    _, todo = pending(options.root, options.dataset)
    done: list[Published] = []
    for version in todo:
        try:
            done.append(score(replace(options, version=version, raw=())))
        except Exception as err:
            ledger.fail(options.root, options.dataset, ledger.SCORING, version,
                        f"run {options.run_id}", f"{type(err).__name__}: {err}")
            raise
        now = ledger.states(options.root, options.dataset, ledger.SCORING)
        for s in ledger.supersede(options.root, options.dataset, ledger.SCORING, now, version,
                                  f"run {options.run_id}"):
            log.info("scoring ledger of %s: %s", options.dataset, s.line())
    log.info("scoring ledger of %s: %s", options.dataset,
             ledger.summary(ledger.states(options.root, options.dataset, ledger.SCORING)))
    return done
