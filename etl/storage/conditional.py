"""Conditional writes: create-if-absent, compare-and-swap and compare-and-delete.

Publishing a version and holding its writer lock need these so two writers can never both
win. GCS uses generation preconditions; local disk uses ``os.link`` (fails if the target
exists) or an ``flock`` on the parent directory around compare-and-act steps.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from typing import Any

from etl.errors import StorageError
from etl.storage.fs import get_fs, is_gcs
from etl.storage.io import fsync_dir, local_temp_path, open_atomic_write, read_bytes
from etl.storage.retry import with_retries


def create_if_absent(uri: str, data: bytes) -> bool:
    """Create ``uri`` only if nothing is there; False when it already exists.

    GCS uses ``ifGenerationMatch=0``. If the object turns out to exist with exactly
    ``data`` we report True, because gcsfs may have retried our own upload after a lost
    response; give competing writers distinct content (owner, time) to tell them apart.
    """
    if not is_gcs(uri):
        return _local_link_create(get_fs(uri)[1], data)
    fs, path = get_fs(uri)
    _check_preconditions_honoured(fs, path)

    def attempt() -> bool:
        try:
            fs.pipe_file(path, data, mode="create")
            return True
        except FileExistsError:
            return False

    if with_retries(attempt, f"create {uri}"):
        return True
    return read_with_token(uri)[0] == data


def _local_link_create(path: str, data: bytes) -> bool:
    tmp = local_temp_path(path)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)  # atomic, and fails if the target exists
        fsync_dir(os.path.dirname(path))
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def read_with_token(uri: str) -> tuple[bytes | None, str | None]:
    """Content and a change token (GCS generation; local inode/mtime/size), or (None, None).

    The token is taken before the content, so a racing change makes a later
    ``replace_if_match``/``delete_if_match`` fail rather than act on stale data.
    """
    fs, path = get_fs(uri)
    try:
        if is_gcs(uri):
            from fsspec.asyn import sync

            # the object alone (fs.info also lists the prefix): a lease is read every beat
            info = with_retries(lambda: sync(fs.loop, fs._get_object, path), f"stat {uri}")
            token = str(info["generation"])
        else:
            token = _local_token(path)
        return read_bytes(uri), token
    except FileNotFoundError:
        return None, None


def _local_token(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


@contextlib.contextmanager
def _dir_lock(directory: str) -> Iterator[None]:
    """Serialize local compare-and-act steps between processes on this host."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def replace_if_match(uri: str, data: bytes, token: str | None) -> bool:
    """Write ``data`` only if ``uri`` still has ``token`` (None: only if absent)."""
    if token is None:
        return create_if_absent(uri, data)
    fs, path = get_fs(uri)
    if is_gcs(uri):
        from gcsfs.core import quote

        bucket, key, _ = fs.split_path(path)
        url = f"{fs._location}/upload/storage/v1/b/{quote(bucket)}/o"
        try:
            with_retries(
                lambda: fs.call(
                    "POST",
                    url,
                    uploadType="media",
                    name=key,
                    ifGenerationMatch=token,
                    data=data,
                    headers={"Content-Type": "application/octet-stream"},
                ),
                f"replace {uri}",
            )
        except (FileExistsError, FileNotFoundError):
            # 412 may answer gcsfs' retry of our own upload whose response was lost
            return read_with_token(uri)[0] == data
        fs.invalidate_cache(path)
        return True
    with _dir_lock(os.path.dirname(path)):
        try:
            if _local_token(path) != token:
                return False
        except FileNotFoundError:
            return False
        with open_atomic_write(uri) as f:
            f.write(data)
        return True


def delete_if_match(uri: str, token: str) -> bool:
    """Delete ``uri`` only if it still has ``token``: breaking a stale lock never breaks a fresh one."""
    fs, path = get_fs(uri)
    if is_gcs(uri):
        bucket, key, _ = fs.split_path(path)
        try:
            with_retries(
                lambda: fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=token),
                f"delete {uri}",
            )
        except (FileExistsError, FileNotFoundError):
            return False
        fs.invalidate_cache(path)
        return True
    with _dir_lock(os.path.dirname(path)):
        try:
            if _local_token(path) != token:
                return False
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True


_PRECONDITIONS_OK: set[tuple[str, str]] = set()


def _check_preconditions_honoured(fs: Any, path: str) -> None:
    """Refuse an emulator that ignores ``ifGenerationMatch`` (e.g. stock gcp-storage-emulator).

    Real GCS always honours it; an emulator that does not would let two writers both
    "win" a publish, so we fail loudly instead.
    """
    host = os.environ.get("STORAGE_EMULATOR_HOST", "")
    bucket = path.split("/", 1)[0]
    if not host or (host, bucket) in _PRECONDITIONS_OK:
        return
    probe = f"{bucket}/_precondition_probe/{uuid.uuid4().hex}"

    def second_create_refused() -> bool:
        try:
            fs.pipe_file(probe, b"1", mode="create")
            fs.pipe_file(probe, b"2", mode="create")
            return False
        except FileExistsError:  # from the second create, or a retried first one
            return True

    try:
        honoured = with_retries(second_create_refused, f"precondition probe at {host}")
    finally:
        with contextlib.suppress(Exception):
            fs.rm_file(probe)
    if not honoured:
        raise StorageError(
            f"GCS endpoint {host} ignores ifGenerationMatch preconditions; conditional "
            "create cannot be trusted there (start the emulator with tests/gcs.py)"
        )
    _PRECONDITIONS_OK.add((host, bucket))
