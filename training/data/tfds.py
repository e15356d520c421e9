"""A published version as a TensorFlow Datasets builder: a thin wrapper over stock TFDS.

Every segment folder holds a ``dataset_info.json`` (``etl.segments.build``), so stock
``tfds.builder_from_directories`` over the segments a manifest lists loads the version, and a
team that trains elsewhere needs none of our code. This wrapper stays because our callers have
a version URI, not a folder list: it reads the manifest, refuses what TFDS would misread (an
unpublished version, GZIP shards, a listed segment deleted since) with a message that names
it, and then makes the one stock call. A version written before segments existed has its own
``dataset_info.json`` and is opened with ``builder_from_directory``.
"""

from __future__ import annotations

from typing import Any

from etl import storage, versions
from etl.versions.segment import DATASET_INFO, read_segment


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
        FileNotFoundError: a segment it lists was deleted (named), or was built before
            segments carried ``dataset_info.json`` (format 1; the next run builds new ones).
    """
    import tensorflow_datasets as tfds

    manifest = versions.read_manifest(version_uri)
    if manifest.compression:
        raise ValueError(f"{version_uri}: {manifest.compression} shards; TFDS reads only "
                         "plain TFRecords (publish with compression none)")
    folders = manifest.folders(version_uri)
    if not folders:
        return tfds.builder_from_directory(_path(version_uri))
    for uri in folders:
        if read_segment(uri) is None:
            raise FileNotFoundError(f"{uri}: segment.json is missing; the version lists this "
                                    "segment, so it was deleted after publishing")
        if not storage.exists(storage.join(uri, DATASET_INFO)):
            raise FileNotFoundError(f"{uri}: no {DATASET_INFO}; the segment was built before "
                                    "segments carried TFDS metadata (segment format 1); a "
                                    "run of this code builds format-2 segments for its window")
    return tfds.builder_from_directories([_path(uri) for uri in folders])
