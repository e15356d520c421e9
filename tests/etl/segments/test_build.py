"""Stock TFDS loads a segment-composed version with ``tfds.builder_from_directories`` over
the segment folders its manifest lists: the ETL writes one ``dataset_info.json`` per segment
(``etl.segments.build``). The load step below uses TFDS and the manifest's JSON alone, none of
our code, as a team training elsewhere would.

file:// only: TFDS reads through TensorFlow's own GCS filesystem, which cannot be
pointed at the loopback emulator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from etl import storage
from etl.segments import build as tfds_meta
from etl.versions import SegmentMeta
from etl.versions.segment import Schema
from tests.support.tfds_fixtures import SPLITS, compose, frame


def _stock_load(version_dir: Path):
    """What a plain TFDS user writes: the manifest's segments, one stock call."""
    import tensorflow_datasets as tfds

    manifest = json.loads((version_dir / "manifest.json").read_text())
    segment_dirs = [version_dir.parent / "segments" / s["segment"] for s in manifest["segments"]]
    return manifest, tfds.builder_from_directories(segment_dirs)


def test_stock_tfds_loads_a_composed_version_from_its_segment_folders(file_root: str) -> None:
    import tensorflow_datasets as tfds

    uri, _ = compose(file_root)
    manifest, builder = _stock_load(Path(storage.get_fs(uri)[1]))
    info = builder.info
    assert len(manifest["segments"]) == 2
    for split, (n, num_shards) in SPLITS.items():
        assert info.splits[split].num_examples == manifest["splits"][split]["num_examples"] == 2 * n
        assert info.splits[split].num_shards == 2 * num_shards
    feats = info.features
    assert isinstance(feats["late"], tfds.features.ClassLabel) and feats["late"].num_classes == 2
    assert isinstance(feats["image"], tfds.features.Image) and feats["image"].shape == (8, 8, 1)
    assert isinstance(feats["carrier"], tfds.features.Text)
    rows = list(builder.as_dataset(split="test").as_numpy_iterator())
    expected = pd.concat([frame(5, 29), frame(5, 63)])  # the test rows of each segment
    got = {float(r["distance"]): r for r in rows}
    assert sorted(got) == pytest.approx(sorted(expected["distance"]))
    for row in expected.itertuples():
        assert got[row.distance]["carrier"].decode() == row.carrier
        assert got[row.distance]["late"] == row.late
        assert got[row.distance]["hour"] == row.hour
        assert (got[row.distance]["image"] == row.distance / 1.5).all()
    stored = {p.name for p in Path(storage.get_fs(file_root)[1]).rglob("*")}
    assert "features.json" not in stored  # the features ride inside dataset_info.json


def test_gzip_segments_get_no_tfds_file(file_root: str) -> None:
    compose(file_root, compression="GZIP")
    stored = {p.name for p in Path(storage.get_fs(file_root)[1]).rglob("*")}
    assert tfds_meta.DATASET_INFO not in stored and "segment.json" in stored


def test_shard_names_must_match_the_tfds_template() -> None:
    meta = {"dataset": "flights", "segment": "s", "schema": {"label": {"name": "late"}},
            "splits": {"train": {"shards": [
                {"file": "flights-train.tfrecord-00000-of-00002", "records": 1, "bytes": 1}]}}}
    with pytest.raises(ValueError, match="s: split 'train' shard 0: file "
                                         "'flights-train.tfrecord-00000-of-00002'"):
        tfds_meta.dataset_info_json(SegmentMeta.from_json(meta, "the test's segment.json"))


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"label": {"name": "late", "dtype": "int64"}}, "'classes' is needed"),
        ({"label": {"name": "late", "dtype": "int64", "classes": 2},
          "features": {"x": {"dtype": "float64"}}}, "expected float32, int64 or string"),
        ({"label": {"name": "late", "dtype": "int64", "classes": 2},
          "features": {"im": {"dtype": "string", "kind": "image", "shape": [8, 8],
                              "encoding": "png"}}}, "image feature"),
    ],
)
def test_bad_schemas_are_refused(schema: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tfds_meta.features_json(Schema.from_json(schema, "the test's schema"))


def test_a_segment_s_statistics_partial_is_read_through_its_type() -> None:
    """``read_statistics``: what judge and compaction merge; a segment without one is named."""
    body = {"format_version": 2, "dataset": "flights", "segment": "s1", "splits": {},
            "statistics_partial": {"train": {"rows": 3}, "eval": {"rows": 1}}}
    partial = tfds_meta.read_statistics(SegmentMeta.from_json(body, "segment.json"))
    assert (partial.split("train").rows, partial.split("test").rows) == (3, 0)
    assert partial.to_json() == body["statistics_partial"]
    bare = SegmentMeta.from_json({**body, "statistics_partial": None}, "segment.json")
    with pytest.raises(ValueError, match="segment s1: key 'statistics_partial': expected an"):
        tfds_meta.read_statistics(bare)
