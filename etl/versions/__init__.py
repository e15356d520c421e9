"""Immutable dataset versions: ids, manifests, the publish protocol, resolution, retention.

A version directory exists for readers only once its manifest.json does. Publishing is
``acquire_writer_lock`` → write shards → ``publish_manifest`` (conditional create, so
two runs cannot both publish one version) → LATEST advanced → lock released. Nothing
is ever renamed, which object stores cannot do atomically. Import-light: no dask/gx/tf.

This module is the public face; the code lives in ``versions_ids`` (ids and URIs),
``versions_lock`` (the writer lock), ``versions_manifest`` (read, verify, publish) and
``versions_catalog`` (listing, latest, the LATEST pointer, retention).
"""

from __future__ import annotations

from etl.versions.catalog import latest_version, list_versions, resolve, retain, update_latest
from etl.versions.ids import (
    LATEST,
    MANIFEST,
    SEGMENTS_DIR,
    WRITER_LOCK,
    VersionId,
    dataset_uri,
    next_revision,
    parse_version_id,
    shard_relpath,
    shard_uri,
    version_id,
    version_uri,
)
from etl.versions.lock import (
    DEFAULT_LOCK_STALE_S,
    WriterLock,
    acquire_writer_lock,
    refresh_writer_lock,
    release_writer_lock,
)
from etl.versions.manifest import (
    FORMAT_VERSION,
    VOLATILE_MANIFEST_KEYS,
    manifest_sha256,
    publish_manifest,
    read_manifest,
    verify_shards,
)

__all__ = [
    "DEFAULT_LOCK_STALE_S",
    "FORMAT_VERSION",
    "LATEST",
    "MANIFEST",
    "SEGMENTS_DIR",
    "VOLATILE_MANIFEST_KEYS",
    "WRITER_LOCK",
    "VersionId",
    "WriterLock",
    "acquire_writer_lock",
    "dataset_uri",
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
    "update_latest",
    "verify_shards",
    "version_id",
    "version_uri",
]
