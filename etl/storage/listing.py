"""Listing, stat and deletion of files and directories/prefixes, local or on GCS.

Readers list directories to find versions and shards, so temp files of unfinished local
writes are hidden here, and swept by ``remove_temp_files`` once their writer is gone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from typing import Any

from etl.storage.fs import get_fs, is_gcs
from etl.storage.io import TEMP_MARKER
from etl.storage.paths import join
from etl.storage.retry import retry_remote, with_retries


def list_dir(uri: str, include_temp: bool = False) -> list[str]:
    """Sorted child names (not URIs) of a directory/prefix; [] when it does not exist."""
    fs, path = get_fs(uri)
    try:
        entries = retry_remote(uri, "list", lambda: fs.ls(path, detail=False))
    except FileNotFoundError:
        return []
    own = path.rstrip("/")
    names = {e.rstrip("/").rsplit("/", 1)[-1] for e in entries if e.rstrip("/") != own}
    if not include_temp:
        names = {n for n in names if TEMP_MARKER not in n}
    return sorted(names)


def delete_tree(uri: str) -> None:
    """Delete a file or a whole directory/prefix; missing is fine (idempotent retries)."""
    fs, path = get_fs(uri)
    try:
        if is_gcs(uri):
            with_retries(lambda: fs.rm(path, recursive=True), f"delete {uri}")
        elif os.path.isdir(path):
            import shutil

            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def stat(uri: str) -> dict[str, Any]:
    """Size plus GCS generation or local mtime: a cheap fingerprint of a source file."""
    fs, path = get_fs(uri)
    if is_gcs(uri):
        from fsspec.asyn import sync

        # the object alone: fs.info also lists the prefix, in case it is a folder
        return _fingerprint(uri, with_retries(lambda: sync(fs.loop, fs._get_object, path),
                                              f"stat {uri}"))
    st = os.stat(path)
    mtime = dt.datetime.fromtimestamp(st.st_mtime, dt.UTC).isoformat()
    return {"uri": uri, "size": st.st_size, "mtime": mtime}


def _fingerprint(uri: str, info: dict[str, Any]) -> dict[str, Any]:
    """``stat``'s answer from a GCS object's listing entry."""
    return {"uri": uri, "size": int(info["size"]), "generation": str(info.get("generation")),
            "mtime": info.get("updated")}


def glob_stat(pattern_uri: str) -> dict[str, dict[str, Any]]:
    """Every file matching a ``*`` pattern, by path, with what ``stat`` says of it.

    On GCS the sizes and generations come with the listing itself: a window of 365 daily
    files costs one or two list requests, not 365 metadata reads.
    """
    fs, path = get_fs(pattern_uri)
    scheme = pattern_uri[:len(pattern_uri) - len(path)] if pattern_uri.endswith(path) else ""
    found = retry_remote(pattern_uri, "list", lambda: fs.glob(path, detail=True))
    out = {}
    for name, info in sorted(found.items()):
        if info.get("type") == "directory":
            continue
        uri = f"{scheme}{name}" if scheme else name
        out[name] = _fingerprint(uri, info) if is_gcs(pattern_uri) else stat(uri)
    return out


def temp_files(dir_uri: str, older_than_s: float = 0.0) -> list[str]:
    """Names of local temp files in a directory not modified for ``older_than_s``.

    GCS never has any: an unfinished resumable upload is not an object.
    """
    if is_gcs(dir_uri):
        return []
    path = get_fs(dir_uri)[1]
    found, now = [], time.time()
    for name in list_dir(dir_uri, include_temp=True):
        if TEMP_MARKER in name and name.startswith("."):
            with contextlib.suppress(FileNotFoundError):
                if now - os.stat(os.path.join(path, name)).st_mtime >= older_than_s:
                    found.append(name)
    return found


def remove_temp_files(dir_uri: str, older_than_s: float = 0.0) -> list[str]:
    """Delete local temp files left by killed writers; returns their names."""
    removed = []
    for name in temp_files(dir_uri, older_than_s):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(get_fs(dir_uri)[1], name))
            removed.append(name)
    return removed


def newest_mtime(uri: str) -> float | None:
    """Epoch seconds of the newest file under ``uri`` (None when empty): is anyone writing?"""
    fs, path = get_fs(uri)
    try:
        found = retry_remote(uri, "list", lambda: fs.find(path, detail=True))
    except FileNotFoundError:
        return None
    times = [_mtime(info) for info in found.values()]
    return max((t for t in times if t is not None), default=None)


def _mtime(info: dict[str, Any]) -> float | None:
    value = info.get("mtime") or info.get("updated")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.timestamp()
    try:
        return dt.datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def remove_empty_dir(uri: str) -> None:
    """Remove a local directory only if it is empty (GCS prefixes vanish with their objects)."""
    if not is_gcs(uri):
        with contextlib.suppress(OSError):
            os.rmdir(get_fs(uri)[1])


def clear_dir(uri: str, keep: str) -> None:
    """Delete everything in folder ``uri`` (temp files too) except the entry named ``keep``
    and its own temp files: what a killed writer left, cleared by whoever now holds the lease
    object ``keep``. A ``keep`` temp file is another run creating the lease right now (write
    a temp file, then link it): deleting it made that run fail instead of finding the lease
    taken."""
    in_flight = f".{keep}{TEMP_MARKER}"
    for name in list_dir(uri, include_temp=True):
        if name != keep and not name.startswith(in_flight):
            delete_tree(join(uri, name))
