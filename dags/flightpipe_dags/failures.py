"""Which task failures Airflow retries: the one place that decides, for every task.

A **deterministic** failure fails the task at once, no retries: a re-run would meet the same
input. That is any error whose class says ``retryable = False``: the project's own refusals
(``etl.errors.PipelineError`` and its family: validation failed, a raw file missing or
unparseable, a spec error, an evaluation split refused, a version without a manifest), the
spec-path errors and a partition key that is not a day; and ``AirflowFailException`` (a
refused Param, ``wait_for_data`` past its deadline), which Airflow never retries anyway.

A **transient** failure keeps the task's retries (``settings.RETRY_DEFAULTS``): a store or
network error anywhere in the error's chain (``ConnectionError``, ``TimeoutError``, gcsfs'
5xx/429, as ``etl.storage.retry`` judges them), a class that says ``retryable = True``
(``StorageError`` when the storage retries are spent, a lease another run holds), and
everything the project did not raise on purpose (a plain ``OSError``, a lost Dask worker or
``CommClosedError``, a timeout, a bug): as before this policy, Airflow retries those.

Either way the task log gets one plain line right after Airflow's traceback (the first line
of its "Post Execute" group): ``deterministic: <error>; not retried`` or ``transient: <error>;
Airflow retries it (try N of M)``. Applied to every task through the DAGs' ``default_args`` as
Airflow 3.3's ``retry_policy`` (``settings.RETRY_DEFAULTS``), which the worker asks once a task
has raised, with the try number: no task body carries it, and a new task gets it too.
Import-light: ``airflow.sdk`` at module level; etl code only inside ``classify``, once a task
has failed.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import RetryDecision, RetryPolicy
from airflow.sdk.exceptions import AirflowFailException

DETERMINISTIC, TRANSIENT = "deterministic", "transient"
MAX_SHOWN = 300  # characters of the error's message in the log line
_LOG = logging.getLogger("airflow.task")


def _storage_cause(error: BaseException) -> BaseException | None:
    """The transient store or network error in ``error``'s chain, as the storage retries judge
    it (Dask re-raises a reader's error as a new exception, so the chain is walked)."""
    from etl.storage.retry import transient_cause

    return transient_cause(error)


def classify(error: BaseException) -> str:
    """``DETERMINISTIC`` or ``TRANSIENT`` (rules in the module docstring).

    A store error in the chain wins over a class's ``retryable = False``: when in doubt the
    task keeps its retries, as it did before the classes said anything."""
    if isinstance(error, AirflowFailException):
        return DETERMINISTIC
    if _storage_cause(error) is not None:
        return TRANSIENT
    return DETERMINISTIC if getattr(error, "retryable", None) is False else TRANSIENT


def shown(error: BaseException) -> str:
    """The error in one line: its class and its message's lines joined, shortened (the whole
    message is in Airflow's traceback just above)."""
    text = " ".join(str(error).split())
    if len(text) > MAX_SHOWN:
        text = text[:MAX_SHOWN - 3].rstrip() + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def retry_line(error: BaseException, try_number: int, max_tries: int) -> str:
    """The task log's line: which kind, and what Airflow does next.

    ``max_tries`` is Airflow's (the retries; a cleared task's grows with its tries): try
    ``try_number`` of ``max_tries + 1``, retried while ``try_number <= max_tries``."""
    if classify(error) == DETERMINISTIC:
        return f"{DETERMINISTIC}: {shown(error)}; not retried"
    tries = max_tries + 1
    then = "Airflow retries it" if try_number < tries else "no retries left"
    return f"{TRANSIENT}: {shown(error)}; {then} (try {try_number} of {tries})"


class FailOnce(RetryPolicy):
    """Fail a deterministic failure at once; leave a transient one to the task's retries."""

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Any = None) -> RetryDecision:
        line = retry_line(exception, try_number, max_tries)
        # no ``reason``: Airflow would log it again, as a key=value pair
        if classify(exception) == DETERMINISTIC:
            _LOG.error("%s", line)
            return RetryDecision.fail()
        _LOG.warning("%s", line)
        return RetryDecision.default()  # the task's own retries, delay and backoff

    def serialize(self) -> dict[str, Any]:
        return {"__type": type(self).__name__}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> FailOnce:
        return cls()


RETRY_POLICY = FailOnce()
