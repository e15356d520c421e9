"""etl.storage.conditional on local disk and on the GCS emulator: create-if-absent,
compare-and-swap, and an emulator that ignores preconditions refused."""

from __future__ import annotations

import threading

import pytest

from etl import storage
from etl.errors import StorageError
from tests.support.gcs import GcsEmulator


def test_create_if_absent_never_overwrites(storage_root: str) -> None:
    uri = storage.join(storage_root, "v", "manifest.json")
    assert storage.create_if_absent(uri, b"first") is True
    assert storage.create_if_absent(uri, b"second") is False
    assert storage.read_bytes(uri) == b"first"


def test_create_if_absent_race_has_one_winner(storage_root: str) -> None:
    uri = storage.join(storage_root, "race", "manifest.json")
    results: dict[int, bool] = {}
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        barrier.wait()
        results[i] = storage.create_if_absent(uri, f"writer-{i}".encode())

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    assert storage.read_bytes(uri) == f"writer-{winners[0]}".encode()


def test_compare_and_swap_and_delete(storage_root: str) -> None:
    uri = storage.join(storage_root, "LATEST")
    assert storage.read_with_token(uri) == (None, None)
    assert storage.replace_if_match(uri, b"1", None) is True  # None: only if absent
    assert storage.replace_if_match(uri, b"x", None) is False
    data, token = storage.read_with_token(uri)
    assert data == b"1" and token
    assert storage.replace_if_match(uri, b"2", token) is True
    assert storage.replace_if_match(uri, b"3", token) is False  # token is stale now
    assert storage.read_bytes(uri) == b"2"
    assert storage.delete_if_match(uri, token) is False
    assert storage.delete_if_match(uri, storage.read_with_token(uri)[1]) is True
    assert not storage.exists(uri)


@pytest.mark.integration
def test_emulator_without_preconditions_is_refused(monkeypatch) -> None:
    with GcsEmulator(buckets=("stock",), stock=True) as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
        with pytest.raises(StorageError, match="ignores ifGenerationMatch"):
            storage.create_if_absent("gs://stock/v/manifest.json", b"x")
