"""A published version as a TensorFlow Datasets builder, for users who read data with TFDS.

A version with its own shards is one TFDS folder (``builder_from_directory``); a version
composed of segments is the union of its segments' folders (``builder_from_directories``,
TFDS's reader for "each day a new dataset is produced"), restricted to the segments its
manifest lists, so split sizes are the version's. GZIP shards have no TFDS metadata.
"""

from __future__ import annotations

from typing import Any

from etl import storage, versions
from etl.versions import segments


def _path(uri: str) -> str:
    """What TFDS's epath opens: a local path for ``file://``, the URI itself for ``gs://``."""
    return uri if storage.is_gcs(uri) else storage.get_fs(uri)[1]


def builder(version_uri: str) -> Any:
    """The read-only TFDS builder of a published version.

    >>> b = builder("file:///data/datasets/flights/20140101T000000Z_all")
    >>> ds = b.as_dataset(split="train")

    Raises:
        IncompleteVersionError: the version is not published.
        ValueError: its shards are GZIP-compressed, which TFDS cannot read.
    """
    import tensorflow_datasets as tfds

    manifest = versions.read_manifest(version_uri)
    if manifest.get("compression"):
        raise ValueError(f"{version_uri}: {manifest['compression']} shards; TFDS reads only "
                         "plain TFRecords (publish with compression none)")
    listed = sorted(segments.referenced(manifest))
    if not listed:
        return tfds.builder_from_directory(_path(version_uri))
    dataset_uri = version_uri.rstrip("/").rsplit("/", 1)[0]
    return tfds.builder_from_directories(
        [_path(storage.join(dataset_uri, versions.SEGMENTS_DIR, seg)) for seg in listed])
