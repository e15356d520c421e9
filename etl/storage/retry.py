"""Retries of whole storage operations, on top of gcsfs' per-request retries.

The budget is the one module attribute ``etl.storage.retry.DEFAULT_RETRY``
(docs/RELIABILITY.md), read at call time, so rebinding it tunes every storage call.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from etl.errors import StorageError
from etl.storage.fs import is_gcs

log = logging.getLogger("etl.storage")  # one logger name for the package, which log configs filter on
T = TypeVar("T")

_TRANSIENT_CODES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """Retry budget for one whole storage operation, on top of gcsfs' per-request retries.

    gcsfs (2026.10) retries each HTTP request 6 times, sleeping min(rand + 2**(n-1), 32) s,
    on 408/429/500-504, connection/payload errors, timeouts, auth refresh and checksum
    errors; never on 403/404/412. What still escapes (its tries spent, or an error outside
    its list) is retried here per operation. Streaming shard uploads rely on gcsfs' per-block
    retries only: a record generator cannot be replayed, so the task retries instead.
    """

    attempts: int = 4
    initial_delay_s: float = 0.5
    max_delay_s: float = 8.0
    budget_s: float = 120.0


# The documented knob: rebinding it tunes every storage call (read at call time).
DEFAULT_RETRY = RetryPolicy()


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: throttling, 5xx, dropped or timed-out connections."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, (FileNotFoundError, FileExistsError, PermissionError, ValueError)):
        return False
    mod = type(exc).__module__
    if mod.startswith("gcsfs"):
        return (
            getattr(exc, "code", None) in _TRANSIENT_CODES or type(exc).__name__ == "ChecksumError"
        )
    return mod.startswith(("aiohttp", "requests", "urllib3"))


def transient_cause(exc: BaseException) -> BaseException | None:
    """The transient storage error behind ``exc``, if any.

    Dask re-raises a reader's error as a new exception of the same type (for gcsfs' HttpError
    that constructor itself fails, leaving an AttributeError), so the cause is found by walking
    ``__cause__``/``__context__``.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if is_transient(cur):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


@contextmanager
def storage_failures(what: str) -> Iterator[None]:
    """Report a storage outage that escapes a Dask computation as a StorageError naming ``what``.

    Inside Dask the reads and writes go through gcsfs, which has already retried each request;
    what escapes means the store stayed unavailable, and the raw error (if it survived Dask's
    re-raising) names neither the step nor the URI.
    """
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        cause = transient_cause(exc)
        if cause is None:
            raise
        raise StorageError(f"{what}: gave up after the storage client's retries: "
                           f"{cause!r}") from exc


def with_retries(fn: Callable[[], T], what: str, policy: RetryPolicy | None = None) -> T:
    """Run ``fn`` again after transient errors, with jittered exponential backoff.

    ``policy=None`` reads ``DEFAULT_RETRY`` (this module) at call time, so a deployment (or a
    test) can shorten the budget for every storage call by rebinding that one attribute.

    Raises:
        StorageError: the budget is spent; names ``what`` and the last error.
    """
    policy = policy or DEFAULT_RETRY
    start, attempt = time.monotonic(), 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if transient_cause(exc) is None:
                raise
            delay = min(policy.max_delay_s, policy.initial_delay_s * 2 ** (attempt - 1))
            delay *= 0.5 + random.random() / 2
            if attempt >= policy.attempts or time.monotonic() - start + delay > policy.budget_s:
                raise StorageError(f"{what}: gave up after {attempt} attempts: {exc!r}") from exc
            log.warning("%s: transient %r, retry %d in %.1fs", what, exc, attempt, delay)
            time.sleep(delay)


def retry_remote(uri: str, what: str, fn: Callable[[], T]) -> T:
    """Retry object-store calls; local calls run once."""
    return with_retries(fn, f"{what} {uri}") if is_gcs(uri) else fn()
