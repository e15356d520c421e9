"""``training.data.tfds.builder``: a version URI to the stock TFDS builder, with what TFDS
would misread (GZIP, a deleted segment, a segment without TFDS metadata) refused by name.

file:// only: TFDS reads through TensorFlow's own GCS filesystem, which cannot be
pointed at the loopback emulator.
"""

from __future__ import annotations

import pytest

from etl import storage
from etl.segments import build as tfds_meta
from etl.versions import SEGMENTS_DIR
from tests.support.tfds_fixtures import SPLITS, compose
from training.data import tfds as tfds_data


def test_the_wrapper_gives_the_versions_split_sizes(file_root: str) -> None:
    uri, _ = compose(file_root)
    info = tfds_data.builder(uri).info
    assert {s: info.splits[s].num_examples for s in SPLITS} == {
        s: 2 * n for s, (n, _) in SPLITS.items()}
    assert sum(1 for _ in tfds_data.builder(uri).as_dataset(split="eval")) == 2 * SPLITS["eval"][0]


def test_a_deleted_segment_is_named(file_root: str) -> None:
    uri, metas = compose(file_root)
    seg_uri = storage.join(file_root, "datasets", "flights", SEGMENTS_DIR, metas[1]["segment"])
    storage.delete_tree(storage.join(seg_uri, "segment.json"))
    with pytest.raises(FileNotFoundError, match=f"{metas[1]['segment']}: segment.json is missing"):
        tfds_data.builder(uri)


def test_a_segment_without_tfds_metadata_is_named(file_root: str) -> None:
    uri, metas = compose(file_root)
    seg_uri = storage.join(file_root, "datasets", "flights", SEGMENTS_DIR, metas[0]["segment"])
    storage.delete_tree(storage.join(seg_uri, tfds_meta.DATASET_INFO))
    with pytest.raises(FileNotFoundError, match=f"{metas[0]['segment']}: no dataset_info.json"):
        tfds_data.builder(uri)


def test_gzip_versions_are_refused(file_root: str) -> None:
    uri, _ = compose(file_root, compression="GZIP")
    with pytest.raises(ValueError, match="GZIP shards; TFDS reads only plain TFRecords"):
        tfds_data.builder(uri)
