"""Which filesystem serves a URI, and with what credentials (gs:// via gcsfs, else local).

Credentials are resolved once per (connection, emulator) pair: an emulator is anonymous, an
Airflow connection supplies a service account, anything else falls back to ADC.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from typing import Any

import fsspec

log = logging.getLogger("etl.storage")  # the facade's name, which log configs filter on

DEFAULT_CONN_ID = "google_cloud_default"

# gcsfs' default "gs" class (ExtendedGcsFileSystem) asks a gRPC control API for the bucket
# type before many calls and does not cache failures: against an emulator every call waits
# 60 s. We use standard (non-zonal) buckets only, so turn it off for fsspec users in this
# process and its children (Dask workers) unless someone chose otherwise.
_NO_ZONAL_PROBE = os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def is_gcs(uri: str) -> bool:
    """True for ``gs://`` URIs (the object-store code paths)."""
    return uri.startswith(("gs://", "gcs://"))


def gcs_token(conn_id: str | None = None) -> Any:
    """Credentials for gcsfs: emulator → anonymous; Airflow connection; else ADC."""
    conn_id = conn_id or os.environ.get("PIPELINE_GCP_CONN_ID", DEFAULT_CONN_ID)
    return _resolve_token(conn_id, os.environ.get("STORAGE_EMULATOR_HOST", ""))


@functools.lru_cache(maxsize=8)
def _resolve_token(conn_id: str, emulator: str) -> Any:
    if emulator:
        return "anon"
    token = _token_from_airflow(conn_id)
    return token if token is not None else "google_default"


def _inside_airflow(conn_id: str) -> bool:
    env = os.environ
    return (
        "airflow.sdk" in sys.modules
        or "AIRFLOW_CTX_DAG_ID" in env
        or f"AIRFLOW_CONN_{conn_id.upper()}" in env
    )


def _token_from_airflow(conn_id: str) -> Any:
    """Service-account info or key path from an Airflow connection; None → use ADC."""
    if not _inside_airflow(conn_id):
        return None
    try:
        from airflow.sdk import Connection

        extra = Connection.get(conn_id).extra_dejson
    except Exception as exc:  # noqa: BLE001 - absent airflow or connection means ADC
        log.info(
            "GCS credentials: connection %r unavailable (%s); using ADC",
            conn_id,
            type(exc).__name__,
        )
        return None
    for key in ("keyfile_dict", "extra__google_cloud_platform__keyfile_dict"):
        if extra.get(key):
            value = extra[key]
            return json.loads(value) if isinstance(value, str) else dict(value)
    for key in ("key_path", "extra__google_cloud_platform__key_path"):
        if extra.get(key):
            return str(extra[key])
    return None


def get_fs(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """Filesystem and bare path for ``uri``; gs:// listings are never cached (other writers)."""
    if is_gcs(uri):
        endpoint = os.environ.get("STORAGE_EMULATOR_HOST") or None
        if endpoint and not endpoint.startswith("http"):
            endpoint = f"http://{endpoint}"
        from gcsfs.core import GCSFileSystem  # the JSON-API class, see _NO_ZONAL_PROBE

        fs = GCSFileSystem(token=gcs_token(), endpoint_url=endpoint, use_listings_cache=False)
        return fs, fs._strip_protocol(uri)
    fs = fsspec.filesystem("file")
    return fs, fs._strip_protocol(uri)
