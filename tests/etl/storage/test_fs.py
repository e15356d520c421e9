"""etl.storage.fs: the credentials a gs:// root is opened with, inside and outside Airflow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from etl import storage
from etl.storage import fs as storage_fs


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
