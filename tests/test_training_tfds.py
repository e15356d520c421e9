"""A version composed of segments loads as one TFDS builder (``training.data.tfds``), its
DatasetInfo made from ``segment.json`` and the manifest: no TFDS file is stored.

file:// only: TFDS reads through TensorFlow's own GCS filesystem, which cannot be
pointed at the loopback emulator.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from etl import storage
from etl.versions import SEGMENTS_DIR
from etl.write import encode, shards
from training.data import tfds as tfds_data

SCHEMA = {
    "key": ["id"],
    "label": {"name": "late", "dtype": "int64", "classes": 2},
    "features": {
        "distance": {"dtype": "float32", "kind": "numeric"},
        "hour": {"dtype": "int64", "kind": "numeric"},
        "carrier": {"dtype": "string", "kind": "categorical"},
        "image": {"dtype": "string", "kind": "image", "shape": [8, 8, 1], "encoding": "png"},
    },
}
SPLITS = {"train": (23, 3), "eval": (6, 1), "test": (5, 2)}


def _png(value: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8), value, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _frame(n: int, offset: int) -> pd.DataFrame:
    ids = np.arange(offset, offset + n)
    return pd.DataFrame(
        {
            "distance": ids * 1.5,
            "hour": ids % 24,
            "carrier": ["UA", "AA"] * (n // 2) + ["B6"] * (n % 2),
            "late": ids % 2,
            "image": [_png(i) for i in ids],
        }
    )


def _write_segment(dataset_uri: str, seg: str, offset: int,
                   compression: str | None = None) -> tuple[dict, int]:
    """One segment folder: its shards and ``segment.json``; the next row offset."""
    uri = storage.join(dataset_uri, SEGMENTS_DIR, seg)
    splits = {}
    for split, (n, num_shards) in SPLITS.items():
        records = encode.encode_batch(_frame(n, offset), SCHEMA)
        parts = np.array_split(np.arange(n), num_shards)
        entries = [shards.write_shard(
            storage.join(uri, shards.shard_filename("flights", split, i, num_shards, compression)),
            [records[j] for j in part], compression) for i, part in enumerate(parts)]
        splits[split] = {"num_examples": n, "num_bytes": sum(e["bytes"] for e in entries),
                         "shards": [{**e, "segment": seg} for e in entries]}
        offset += n
    meta = {"format_version": 1, "dataset": "flights", "segment": seg, "splits": splits,
            "schema": SCHEMA, "compression": compression}
    storage.write_bytes_atomic(storage.join(uri, "segment.json"), storage.json_bytes(meta))
    return meta, offset


def _compose(file_root: str, compression: str | None = None) -> tuple[str, list[dict]]:
    """A version listing two segments (the second's rows follow the first's)."""
    dataset_uri = storage.join(file_root, "datasets", "flights")
    first, offset = _write_segment(dataset_uri, "20140101-aaaa", 0, compression)
    second, _ = _write_segment(dataset_uri, "20140102-bbbb", offset, compression)
    splits = {s: {"num_examples": first["splits"][s]["num_examples"] * 2,
                  "shards": first["splits"][s]["shards"] + second["splits"][s]["shards"]}
              for s in SPLITS}
    uri = storage.join(dataset_uri, "20140103T000000Z_all")
    storage.write_bytes_atomic(storage.join(uri, "manifest.json"), storage.json_bytes({
        "format_version": 1, "dataset": "flights", "version": "20140103T000000Z_all",
        "layout": "segments", "compression": compression, "schema": SCHEMA, "splits": splits}))
    return uri, [first, second]


def test_a_composed_version_loads_as_one_builder_without_tfds_files(file_root: str) -> None:
    import tensorflow_datasets as tfds

    uri, _ = _compose(file_root)
    builder = tfds_data.builder(uri)
    info = builder.info
    for split, (n, num_shards) in SPLITS.items():
        assert info.splits[split].num_examples == 2 * n
        assert info.splits[split].num_shards == 2 * num_shards
    feats = info.features
    assert isinstance(feats["late"], tfds.features.ClassLabel) and feats["late"].num_classes == 2
    assert isinstance(feats["image"], tfds.features.Image) and feats["image"].shape == (8, 8, 1)
    assert isinstance(feats["carrier"], tfds.features.Text)
    rows = list(builder.as_dataset(split="test").as_numpy_iterator())
    expected = pd.concat([_frame(5, 29), _frame(5, 63)])  # test rows of each segment
    assert sorted(r["distance"] for r in rows) == pytest.approx(sorted(expected["distance"]))
    got = {float(r["distance"]): r for r in rows}
    for row in expected.itertuples():
        assert got[row.distance]["carrier"].decode() == row.carrier
        assert got[row.distance]["late"] == row.late
        assert (got[row.distance]["image"] == row.distance / 1.5).all()
    stored = {p.name for p in Path(storage.get_fs(file_root)[1]).rglob("*")}
    assert not stored & {"dataset_info.json", "features.json"}


def test_a_deleted_segment_is_named(file_root: str) -> None:
    uri, metas = _compose(file_root)
    seg_uri = storage.join(file_root, "datasets", "flights", SEGMENTS_DIR, metas[1]["segment"])
    storage.delete_tree(storage.join(seg_uri, "segment.json"))
    with pytest.raises(FileNotFoundError, match=f"{metas[1]['segment']}: segment.json is missing"):
        tfds_data.builder(uri)


def test_gzip_versions_are_refused(file_root: str) -> None:
    uri, _ = _compose(file_root, compression="GZIP")
    with pytest.raises(ValueError, match="GZIP shards; TFDS reads only plain TFRecords"):
        tfds_data.builder(uri)


def test_shard_names_must_match_the_tfds_template() -> None:
    manifest = {
        "dataset": "flights",
        "splits": {
            "train": {
                "shards": [
                    {"file": "flights-train.tfrecord-00000-of-00002", "records": 1, "bytes": 1}
                ]
            }
        },
    }
    with pytest.raises(ValueError, match="shard 0: file 'flights-train.tfrecord-00000-of-00002'"):
        tfds_data.dataset_info_json(manifest)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"label": {"name": "late", "dtype": "int64"}}, "'classes' is needed"),
        ({"features": {"x": {"dtype": "float64"}}}, "expected float32, int64 or string"),
        (
            {
                "features": {
                    "im": {"dtype": "string", "kind": "image", "shape": [8, 8], "encoding": "png"}
                }
            },
            "image feature",
        ),
    ],
)
def test_bad_schemas_are_refused(schema: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tfds_data.features_json(schema)
