"""Immutable dataset versions: ids, manifests, the publish protocol, resolution, retention.

A version directory exists for readers only once its manifest.json does. Publishing is
``acquire_writer_lock`` → write → ``hand_off_writer_lock`` (the draft inside the lease) →
``take_handed_off_lock`` → ``publish_manifest`` (conditional create, so
two runs cannot both publish one version) → LATEST advanced → lock released. Nothing
is ever renamed, which object stores cannot do atomically. Import-light: no dask/gx/tf.

This module is the public face; the code lives in ``ids`` (ids, their order, URIs), ``lease``
(locks kept alive by heartbeats, dead holders broken: the ``_WRITER`` lease, a segment's lease),
``manifest`` (``Manifest``: read, verify), ``segment`` (``SegmentMeta``, segment ids, content
hashes, folders) and ``catalog`` (publishing and what it returns, ``PublishedVersion``;
listing, latest, LATEST, retention).
"""

from __future__ import annotations

from etl.versions.catalog import (
    commit_manifest,
    latest_version,
    list_versions,
    publish_manifest,
    resolve,
    retain,
    update_latest,
)
from etl.versions.ids import (
    LATEST,
    MANIFEST,
    SEGMENTS_DIR,
    WRITER_LOCK,
    VersionId,
    dataset_uri,
    next_revision,
    parse_version_id,
    version_id,
    version_key,
    version_uri,
)
from etl.versions.lease import (
    EXPIRY_S,
    HANDOFF_EXPIRY_S,
    HEARTBEAT_S,
    Heartbeat,
    Lease,
    WriterLock,
    acquire_writer_lock,
    current_holder,
    dead_reason,
    describe,
    hand_off_writer_lock,
    refresh_writer_lock,
    release_writer_lock,
    take_handed_off_lock,
    version_of,
)
from etl.versions.manifest import (
    FORMAT_VERSION,
    VOLATILE_MANIFEST_KEYS,
    Manifest,
    manifest_sha256,
    read_manifest,
    verify_shards,
)
from etl.versions.segment import SegmentMeta, Shard, SplitInfo, shard_relpath, shard_uri

__all__ = [
    "EXPIRY_S",
    "FORMAT_VERSION",
    "HANDOFF_EXPIRY_S",
    "HEARTBEAT_S",
    "LATEST",
    "MANIFEST",
    "SEGMENTS_DIR",
    "VOLATILE_MANIFEST_KEYS",
    "WRITER_LOCK",
    "Heartbeat",
    "Lease",
    "Manifest",
    "SegmentMeta",
    "Shard",
    "SplitInfo",
    "VersionId",
    "WriterLock",
    "acquire_writer_lock",
    "commit_manifest",
    "current_holder",
    "dataset_uri",
    "dead_reason",
    "describe",
    "hand_off_writer_lock",
    "latest_version",
    "list_versions",
    "manifest_sha256",
    "next_revision",
    "parse_version_id",
    "publish_manifest",
    "read_manifest",
    "refresh_writer_lock",
    "release_writer_lock",
    "resolve",
    "retain",
    "shard_relpath",
    "shard_uri",
    "take_handed_off_lock",
    "update_latest",
    "verify_shards",
    "version_id",
    "version_key",
    "version_of",
    "version_uri",
]
