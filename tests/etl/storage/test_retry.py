"""etl.storage.retry: transient errors retried within a budget, the rest raised at once, as a
``StorageError`` naming the operation."""

from __future__ import annotations

import pytest

from etl import storage
from etl.errors import StorageError
from etl.storage import retry as storage_retry


def test_retries_transient_errors_within_budget() -> None:
    calls = []
    policy = storage.RetryPolicy(attempts=4, initial_delay_s=0.001, max_delay_s=0.002)

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("peer reset")
        return "ok"

    assert storage.with_retries(flaky, "flaky op", policy) == "ok" and len(calls) == 3

    def always_down() -> None:
        raise TimeoutError("503-ish")

    with pytest.raises(StorageError, match="always op: gave up after 4 attempts"):
        storage.with_retries(always_down, "always op", policy)

    def missing() -> None:
        calls.append(1)
        raise FileNotFoundError("gs://b/x")

    calls.clear()
    with pytest.raises(FileNotFoundError):
        storage.with_retries(missing, "missing op", policy)
    assert len(calls) == 1  # not transient: no retry


def test_default_retry_is_read_from_the_facade_at_call_time(monkeypatch) -> None:
    """docs/RELIABILITY.md: rebinding ``etl.storage.retry.DEFAULT_RETRY`` tunes every storage call."""
    monkeypatch.setattr(storage_retry, "DEFAULT_RETRY", storage.RetryPolicy(attempts=1))

    def down() -> None:
        raise ConnectionResetError("peer reset")

    with pytest.raises(StorageError, match="gave up after 1 attempts"):
        storage.with_retries(down, "down op")


def test_gcs_http_errors_classified() -> None:
    from gcsfs.retry import HttpError

    assert storage.is_transient(HttpError({"code": 503, "message": "x"}))
    assert storage.is_transient(HttpError({"code": 429, "message": "x"}))
    assert not storage.is_transient(HttpError({"code": 403, "message": "x"}))
    assert not storage.is_transient(FileExistsError("x"))


def test_storage_outage_escaping_dask_becomes_a_storage_error() -> None:
    """Dask re-raises a gcsfs HttpError through a constructor that fails; the cause still counts."""
    from gcsfs.retry import HttpError

    def dask_style_reraise() -> None:
        try:
            raise HttpError({"code": 503, "message": "backend down"})
        except HttpError as exc:
            type(exc)(f"An error occurred while calling read_parquet: {exc}")  # AttributeError

    with (pytest.raises(StorageError, match=r"validate gs://b/x: gave up after .*503") as info,
          storage.storage_failures("validate gs://b/x")):
        dask_style_reraise()
    assert isinstance(info.value.__cause__, AttributeError)
    with pytest.raises(KeyError), storage.storage_failures("validate gs://b/x"):
        raise KeyError("not a storage problem")
