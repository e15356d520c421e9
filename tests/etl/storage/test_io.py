"""etl.storage.io on local disk and on the GCS emulator: write, read, list, stat and delete;
a failed write leaves nothing."""

from __future__ import annotations

import os

import pytest

from etl import storage
from etl.storage import io as storage_io


def test_write_read_list_stat_delete(storage_root: str) -> None:
    uri = storage.join(storage_root, "a", "b", "x.json")
    storage.write_bytes_atomic(uri, storage.json_bytes({"k": 1}))
    assert storage.exists(uri)
    assert storage.read_json(uri) == {"k": 1}
    storage.write_bytes_atomic(uri, b"[2]")
    assert storage.read_json(uri) == [2]
    assert storage.list_dir(storage.join(storage_root, "a")) == ["b"]
    assert storage.list_dir(storage.join(storage_root, "a", "b")) == ["x.json"]
    assert storage.list_dir(storage.join(storage_root, "missing")) == []
    st = storage.stat(uri)
    assert st["size"] == 3 and st["uri"] == uri
    assert ("generation" in st) == storage.is_gcs(uri)
    storage.delete_tree(storage.join(storage_root, "a"))
    assert not storage.exists(uri)
    storage.delete_tree(storage.join(storage_root, "a"))  # idempotent


def test_read_errors_name_the_uri(storage_root: str) -> None:
    missing = storage.join(storage_root, "nope.json")
    with pytest.raises(FileNotFoundError, match="nope.json"):
        storage.read_bytes(missing)
    bad = storage.join(storage_root, "bad.json")
    storage.write_bytes_atomic(bad, b"{not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        storage.read_json(bad)


def test_failed_streaming_write_leaves_nothing(storage_root: str, monkeypatch) -> None:
    monkeypatch.setattr(storage_io, "GCS_WRITE_BLOCK_BYTES", 2**18)  # force multi-chunk uploads
    ok, broken = (
        storage.join(storage_root, "d", "ok.bin"),
        storage.join(storage_root, "d", "bad.bin"),
    )
    payload = os.urandom(2**20 + 123)
    with storage.open_atomic_write(ok) as f:
        for i in range(0, len(payload), 100_000):
            f.write(payload[i : i + 100_000])
    assert storage.read_bytes(ok) == payload
    for size in (10, 2**20):  # below and above one upload chunk
        with pytest.raises(RuntimeError), storage.open_atomic_write(broken) as f:
            f.write(payload[:size])
            raise RuntimeError("killed mid-write")
    assert storage.list_dir(storage.join(storage_root, "d"), include_temp=True) == ["ok.bin"]
