"""One storage API over local disk (``file://``) and GCS (``gs://``), with safe commits.

Object stores have no atomic rename, so every commit here is either a single object
upload (GCS makes it visible whole or not at all) or a temp file + rename (local).
Conditional operations (create-if-absent, compare-and-swap, compare-and-delete) use
GCS generation preconditions and, locally, ``os.link`` or an ``flock`` on the parent
directory. Import-light on purpose: no dask, great_expectations or tensorflow.

This module is the public face; the code lives in ``storage_fs`` (filesystems,
credentials), ``storage_retry``, ``storage_paths``, ``storage_io`` (reads, atomic writes),
``storage_conditional`` and ``storage_listing``. ``DEFAULT_RETRY`` is defined here because
it is the documented knob: ``with_retries`` reads it from this module at call time.
"""

from __future__ import annotations

from etl.storage_conditional import (
    create_if_absent,
    delete_if_match,
    read_with_token,
    replace_if_match,
)
from etl.storage_fs import (
    DEFAULT_CONN_ID,
    _resolve_token,  # noqa: F401 - tests clear its cache
    gcs_token,
    get_fs,
    is_gcs,
)
from etl.storage_io import (
    GCS_WRITE_BLOCK_BYTES,
    READ_BUFFER_BYTES,
    TEMP_MARKER,
    exists,
    json_bytes,
    open_atomic_write,
    open_read,
    read_bytes,
    read_json,
    write_bytes_atomic,
)
from etl.storage_listing import delete_tree, list_dir, remove_temp_files, stat
from etl.storage_paths import join, safe_join
from etl.storage_retry import (
    RetryPolicy,
    is_transient,
    storage_failures,
    transient_cause,
    with_retries,
)

DEFAULT_RETRY = RetryPolicy()

__all__ = [
    "DEFAULT_CONN_ID",
    "DEFAULT_RETRY",
    "GCS_WRITE_BLOCK_BYTES",
    "READ_BUFFER_BYTES",
    "TEMP_MARKER",
    "RetryPolicy",
    "create_if_absent",
    "delete_if_match",
    "delete_tree",
    "exists",
    "gcs_token",
    "get_fs",
    "is_gcs",
    "is_transient",
    "join",
    "json_bytes",
    "list_dir",
    "open_atomic_write",
    "open_read",
    "read_bytes",
    "read_json",
    "read_with_token",
    "remove_temp_files",
    "replace_if_match",
    "safe_join",
    "stat",
    "storage_failures",
    "transient_cause",
    "with_retries",
    "write_bytes_atomic",
]
