"""Which versions of a dataset are published: publishing, listing, ``latest``, the LATEST
pointer, retention (of versions and of the segments no version lists).

A version counts only once its manifest.json exists: ``publish_manifest`` creates it only if
absent (two runs cannot both publish one version), then advances LATEST and drops the lock.
LATEST is a hint that saves a listing: it is advanced by compare-and-swap and never trusted
over a newer complete version.

What ``etl.pipeline.publish`` (and ``run``, which builds then publishes) returns is a typed
record of its own, ``PublishedVersion``: the version made visible (or found already
published), its rows per split and the steps' timings. Read by the ETL DAG's publish task and
the CLI through attributes; it crosses into Airflow's XCom and the CLI's ``--json`` as
``to_json()`` and is read back with ``from_json``, so no reader takes it apart by string key.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from etl import storage
from etl.errors import IncompleteVersionError, NoVersionError, VersionLockedError
from etl.jsonobject import JsonObject
from etl.jsonobject import key as json_field
from etl.versions import segment
from etl.versions.ids import (
    LATEST,
    MANIFEST,
    WRITER_LOCK,
    dataset_uri,
    is_version_id,
    split_version_uri,
    version_key,
    version_uri,
)
from etl.versions.lease import WriterLock, current_holder, release_writer_lock
from etl.versions.manifest import Manifest

log = logging.getLogger("etl.versions")  # the facade's name, which log configs filter on

_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class PublishedVersion(JsonObject):
    """``created``: whether this call made the version visible (False: it already was);
    ``timings``: the steps' seconds (absent when nothing was built); ``wall_s``: ``run``'s
    seconds end to end."""

    version_uri: str = json_field(str, required=True)
    version: str | None = json_field(str)
    created: bool = json_field(bool, default=False)
    splits: Mapping[str, int] = json_field(dict, default={})  # rows per split
    timings: Mapping[str, float] | None = json_field(dict)
    wall_s: float | None = json_field(_NUMBER)

    @property
    def rows(self) -> int:
        """The version's rows, every split."""
        return sum(self.splits.values())


def _candidates(root: str, dataset: str) -> list[str]:
    names = [n for n in storage.list_dir(dataset_uri(root, dataset)) if is_version_id(n)]
    return sorted(names, key=version_key)


def _complete(root: str, dataset: str, version: str) -> bool:
    return storage.exists(storage.join(version_uri(root, dataset, version), MANIFEST))


def list_versions(root: str, dataset: str) -> list[str]:
    """Complete (published) version ids, oldest first by ``version_key``; directories without
    a manifest are skipped."""
    return [v for v in _candidates(root, dataset) if _complete(root, dataset, v)]


def latest_version(root: str, dataset: str) -> str | None:
    """Newest complete version id (the greatest ``version_key``), or None.

    LATEST is a hint: it is used when it names a complete version and no newer listed
    version is complete; otherwise (missing, stale, or pointing at a deleted version)
    the listing decides.
    """
    pointer = _read_pointer(dataset_uri(root, dataset))
    key = version_key(pointer) if pointer else None
    for v in reversed(_candidates(root, dataset)):
        if key is not None and version_key(v) <= key:
            if _complete(root, dataset, pointer):
                return pointer
            key = None  # stale pointer: keep walking down the listing
        if _complete(root, dataset, v):
            return v
    return None


def resolve(root: str, dataset: str, version: str = "latest") -> str:
    """Version URI for ``version`` ("latest" or an id); only complete versions resolve."""
    if version == "latest":
        found = latest_version(root, dataset)
        if found is None:
            raise NoVersionError(f"no published version of {dataset!r} under {root}")
        return version_uri(root, dataset, found)
    uri = version_uri(root, dataset, version)
    if not storage.exists(storage.join(uri, MANIFEST)):
        raise IncompleteVersionError(f"{uri}: no {MANIFEST}; version not published")
    return uri


def _read_pointer(ds_uri: str) -> str | None:
    try:
        text = storage.read_bytes(storage.join(ds_uri, LATEST)).decode().strip()
    except FileNotFoundError:
        return None
    return text if is_version_id(text) else None


def update_latest(ds_uri: str, version: str, attempts: int = 10) -> bool:
    """Advance ``<dataset>/LATEST`` to ``version`` unless it already names a newer one.

    Compare-and-swap on the pointer's generation, so a backfill publishing an old
    interval after a newer run cannot move LATEST backwards. Returns True if written.
    """
    new_key = version_key(version)
    latest_uri = storage.join(ds_uri, LATEST)
    for _ in range(attempts):
        data, token = storage.read_with_token(latest_uri)
        current = data.decode().strip() if data is not None else ""
        if is_version_id(current) and version_key(current) >= new_key:
            return False
        if storage.replace_if_match(latest_uri, f"{version}\n".encode(), token):
            return True
    log.warning("LATEST under %s not advanced to %s: too much contention", ds_uri, version)
    return False


def retain(
    root: str, dataset: str, keep: int, force: bool = False, dry_run: bool = False
) -> list[str]:
    """Delete all but the newest ``keep`` complete versions (by ``version_key``); returns the
    deleted ids.

    A version that a model was trained on (``<root>/models/<dataset>/<version>/``) is
    kept unless ``force``; the newest version is always kept. Segments that no remaining
    version lists (and older than ``segment.GRACE_S``, so no live run's) go too. Each deletion removes
    manifest.json first, so readers stop trusting the version before its shards go.
    """
    if not isinstance(keep, int) or keep < 1:
        raise ValueError(
            f"keep: expected an int >= 1 (the newest version is never deleted), got {keep!r}"
        )
    used = set(storage.list_dir(storage.safe_join(root, "models", dataset)))
    deleted = []
    for version in list_versions(root, dataset)[:-keep]:
        if version in used and not force:
            log.info(
                "retain: keeping %s/%s, a model under models/ was trained on it", dataset, version
            )
            continue
        if not dry_run:
            uri = version_uri(root, dataset, version)
            storage.delete_tree(storage.join(uri, MANIFEST))
            storage.delete_tree(uri)
        deleted.append(version)
    if not dry_run:
        gone = unused_segments(root, dataset, segment.GRACE_S)
        for seg in gone:
            segment.delete_segment(root, dataset, seg)
        if gone:
            log.info("retain: deleted %d segment(s) of %s that no kept version lists", len(gone),
                     dataset)
    return deleted


def publish_manifest(uri: str, manifest: Manifest, lock: WriterLock | None = None) -> bool:
    """Commit a version: create manifest.json only if absent, advance LATEST, free the lock.

    Returns:
        True if this call published the version; False if a manifest already existed
        (then nothing is overwritten and the caller should report the existing version).

    Raises:
        VersionLockedError: ``lock`` was given and another owner has taken the version over.
            Stop the lock's ``Heartbeat`` first, so its token is the stored one.
    """
    created = commit_manifest(uri, storage.json_bytes(manifest.to_json()), lock)
    if created:
        ds_uri, version = split_version_uri(uri)
        update_latest(ds_uri, version)
    return created


def commit_manifest(uri: str, body: bytes, lock: WriterLock | None = None) -> bool:
    """The publish protocol's last step for any folder written under a writer lease (a
    version; a model's predictions, ``training.score``): create ``<uri>/manifest.json`` only
    if absent, then drop the lease. True if this call created it.

    Raises:
        VersionLockedError: ``lock`` was given and another owner has taken the folder over.
    """
    lock_uri = storage.join(uri, WRITER_LOCK)
    if lock is not None and storage.read_with_token(lock_uri)[1] != lock.token:
        holder = current_holder(lock_uri)
        if holder.get("owner") != lock.owner:
            raise VersionLockedError(uri, holder)
    created = storage.create_if_absent(storage.join(uri, MANIFEST), body)
    if created:
        storage.delete_tree(lock_uri)  # published: any lock on it is moot now
    elif lock is not None:
        release_writer_lock(lock)
    return created


def segments_in_use(root: str, dataset: str) -> set[str]:
    """Segments some version lists: published (manifest) or being published (the draft in
    its handed-off writer lease).

    A model trained on a version keeps that version (``retain`` refuses to delete it), so
    its segments are kept through it.
    """
    base = dataset_uri(root, dataset)
    used: set[str] = set()
    for name in storage.list_dir(base):
        if not is_version_id(name):
            continue
        for fname, pick in ((MANIFEST, lambda d: d),
                            (WRITER_LOCK, lambda d: (d.get("payload") or {}).get("manifest"))):
            path = storage.join(base, name, fname)
            try:
                used |= Manifest.from_json(pick(storage.read_json(path)), path).referenced()
            except (FileNotFoundError, ValueError, AttributeError):
                continue
    return used


def unused_segments(root: str, dataset: str, grace_s: float,
                    now: dt.datetime | None = None) -> list[str]:
    """Finished segments no version lists and older than ``grace_s`` (a run composes its
    version from segments it built minutes ago: those are not yet listed anywhere)."""
    now = now or dt.datetime.now(dt.UTC)
    used = segments_in_use(root, dataset)
    out = []
    for seg in segment.list_segments(root, dataset):
        if seg in used:
            continue
        meta = segment.read_segment(segment.segment_uri(root, dataset, seg))
        try:
            age = (now - dt.datetime.fromisoformat(str(meta and meta.created_at))
                   ).total_seconds()
        except ValueError:
            age = grace_s + 1  # unreadable time: old enough, it is listed by nothing
        if age > grace_s:
            out.append(seg)
    return out
