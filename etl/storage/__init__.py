"""One storage API over local disk (``file://``) and GCS (``gs://``), with safe commits.

Object stores have no atomic rename, so every commit here is either a single object
upload (GCS makes it visible whole or not at all) or a temp file + rename (local).
Conditional operations (create-if-absent, compare-and-swap, compare-and-delete) use
GCS generation preconditions and, locally, ``os.link`` or an ``flock`` on the parent
directory. Import-light on purpose: no dask, great_expectations or tensorflow.

Modules: ``fs`` (filesystems, credentials), ``paths`` (joins that cannot leave the root),
``io`` (reads, atomic writes), ``conditional`` (create-if-absent, compare-and-swap),
``listing`` (list, stat, delete) and ``retry`` (the retry budget, ``DEFAULT_RETRY``).
Code outside this package uses the names below; modules inside import each other directly.
"""

from __future__ import annotations

from etl.storage.conditional import (
    create_if_absent,
    delete_if_match,
    read_with_token,
    replace_if_match,
)
from etl.storage.fs import gcs_token, get_fs, is_gcs
from etl.storage.io import (
    TEMP_MARKER,
    exists,
    json_bytes,
    open_atomic_write,
    open_read,
    read_bytes,
    read_json,
    write_bytes_atomic,
)
from etl.storage.listing import (
    clear_dir,
    delete_tree,
    glob_stat,
    list_dir,
    newest_mtime,
    remove_empty_dir,
    remove_temp_files,
    stat,
    temp_files,
)
from etl.storage.paths import join, safe_join
from etl.storage.retry import RetryPolicy, is_transient, storage_failures, with_retries

__all__ = [
    "TEMP_MARKER",
    "RetryPolicy",
    "clear_dir",
    "create_if_absent",
    "delete_if_match",
    "delete_tree",
    "exists",
    "gcs_token",
    "get_fs",
    "glob_stat",
    "is_gcs",
    "is_transient",
    "join",
    "json_bytes",
    "list_dir",
    "newest_mtime",
    "open_atomic_write",
    "open_read",
    "read_bytes",
    "read_json",
    "read_with_token",
    "remove_empty_dir",
    "remove_temp_files",
    "replace_if_match",
    "safe_join",
    "stat",
    "storage_failures",
    "temp_files",
    "with_retries",
    "write_bytes_atomic",
]
