"""etl.storage on local disk and on the GCS emulator: commits, conditions, path safety."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from gcs import GcsEmulator

from etl import storage
from etl.errors import PathOutsideRootError, StorageError
from etl.storage import fs as storage_fs
from etl.storage import io as storage_io
from etl.storage import retry as storage_retry


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


def test_remove_temp_files_only_touches_temps(file_root: str) -> None:
    d = Path(storage.get_fs(file_root)[1])
    (d / f".x.bin{storage.TEMP_MARKER}abc").write_bytes(b"partial")
    (d / "x.bin").write_bytes(b"whole")
    assert storage.list_dir(file_root) == ["x.bin"]
    assert storage.remove_temp_files(file_root, older_than_s=3600) == []
    assert storage.remove_temp_files(file_root) == [f".x.bin{storage.TEMP_MARKER}abc"]
    assert sorted(os.listdir(d)) == ["x.bin"]


def test_clear_dir_spares_the_lease_and_a_run_creating_it_right_now(file_root: str) -> None:
    """A lease holder clears a killed attempt's files; another run's half-made lease temp
    (write, then link) must survive, or that run's create fails instead of losing cleanly.
    CI caught this once in test_concurrent_runs_publish_one_version."""
    from etl.storage.listing import clear_dir

    d = Path(storage.get_fs(file_root)[1])
    for name in ("_WRITER", f"._WRITER{storage.TEMP_MARKER}abc", "part-0.tfrecord",
                 f".part-1.tfrecord{storage.TEMP_MARKER}def", "sub/x"):
        (d / name).parent.mkdir(exist_ok=True)
        (d / name).write_bytes(b"x")
    clear_dir(file_root, keep="_WRITER")
    assert sorted(os.listdir(d)) == [f"._WRITER{storage.TEMP_MARKER}abc", "_WRITER"]
    assert storage.create_if_absent(storage.join(file_root, "_WRITER"), b"y") is False


@pytest.mark.parametrize(
    "part", ["..", "../x", "a/../../b", "/etc", "C:/x", "gs://other/x", "", ".", "a\\b", "a\x00"]
)
def test_safe_join_refuses_escapes(storage_root: str, part: str) -> None:
    with pytest.raises(PathOutsideRootError, match="not allowed"):
        storage.safe_join(storage_root, "datasets", part)


def test_safe_join_refuses_symlink_escape(file_root: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (Path(storage.get_fs(file_root)[1]) / "link").symlink_to(outside)
    with pytest.raises(PathOutsideRootError, match="resolves outside"):
        storage.safe_join(file_root, "link", "x")
    assert storage.safe_join(file_root, "a/b", "c") == f"{file_root}/a/b/c"


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


@pytest.mark.integration
def test_emulator_without_preconditions_is_refused(monkeypatch) -> None:
    with GcsEmulator(buckets=("stock",), stock=True) as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
        with pytest.raises(StorageError, match="ignores ifGenerationMatch"):
            storage.create_if_absent("gs://stock/v/manifest.json", b"x")


def test_credentials_resolution(monkeypatch, tmp_path: Path) -> None:
    storage_fs._resolve_token.cache_clear()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
    assert storage.gcs_token() == "anon"
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    monkeypatch.delenv("AIRFLOW_CTX_DAG_ID", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", raising=False)
    if "airflow.sdk" not in sys.modules:
        assert storage.gcs_token() == "google_default"  # outside Airflow: ADC
    key = {"type": "service_account", "client_email": "etl@p.iam.gserviceaccount.com"}
    conn = {"conn_type": "google_cloud_platform", "extra": {"keyfile_dict": json.dumps(key)}}
    monkeypatch.setenv("AIRFLOW_CONN_GCS_ETL", json.dumps(conn))
    monkeypatch.setenv("PIPELINE_GCP_CONN_ID", "gcs_etl")
    storage_fs._resolve_token.cache_clear()
    assert storage.gcs_token() == key
    conn = {"conn_type": "google_cloud_platform", "extra": {"key_path": str(tmp_path / "k.json")}}
    monkeypatch.setenv("AIRFLOW_CONN_GCS_ETL", json.dumps(conn))
    storage_fs._resolve_token.cache_clear()
    assert storage.gcs_token() == str(tmp_path / "k.json")
    storage_fs._resolve_token.cache_clear()


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
