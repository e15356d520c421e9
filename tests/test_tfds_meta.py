"""A version with our TFDS metadata loads through ``tfds.builder_from_directory``.

file:// only: TFDS reads through TensorFlow's own GCS filesystem, which cannot be
pointed at the loopback emulator.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from etl import storage
from etl.write import encode, shards
from etl.write import tfds as tfds_meta

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


def _write_version(version_uri: str, compression: str | None = None) -> dict:
    splits, offset = {}, 0
    for split, (n, num_shards) in SPLITS.items():
        records = encode.encode_batch(_frame(n, offset), SCHEMA)
        parts = np.array_split(np.arange(n), num_shards)
        entries = [
            shards.write_shard(
                storage.join(
                    version_uri, shards.shard_filename("flights", split, i, num_shards, compression)
                ),
                [records[j] for j in part],
                compression,
            )
            for i, part in enumerate(parts)
        ]
        splits[split] = {
            "num_examples": n,
            "num_bytes": sum(e["bytes"] for e in entries),
            "shards": entries,
        }
        offset += n
    return {
        "format_version": 1,
        "dataset": "flights",
        "version": "20140101T000000Z_all",
        "compression": compression,
        "splits": splits,
        "schema": SCHEMA,
    }


def test_builder_from_directory_loads_the_version(file_root: str) -> None:
    import tensorflow_datasets as tfds

    uri = storage.join(file_root, "datasets", "flights", "20140101T000000Z_all")
    manifest = _write_version(uri)
    written = tfds_meta.write_tfds_metadata(uri, manifest)
    assert [w.rsplit("/", 1)[1] for w in written] == ["features.json", "dataset_info.json"]
    builder = tfds.builder_from_directory(storage.get_fs(uri)[1])
    info = builder.info
    for split, (n, num_shards) in SPLITS.items():
        assert info.splits[split].num_examples == n
        assert info.splits[split].num_shards == num_shards
        assert info.splits[split].shard_lengths == [
            s["records"] for s in manifest["splits"][split]["shards"]
        ]
    feats = info.features
    assert isinstance(feats["late"], tfds.features.ClassLabel) and feats["late"].num_classes == 2
    assert isinstance(feats["image"], tfds.features.Image) and feats["image"].shape == (8, 8, 1)
    assert isinstance(feats["carrier"], tfds.features.Text)
    rows = list(builder.as_dataset(split="test").as_numpy_iterator())
    expected = _frame(5, 29)
    assert sorted(r["distance"] for r in rows) == pytest.approx(sorted(expected["distance"]))
    by_hour = {int(r["hour"]): r for r in rows}  # ids 29..33 have distinct hours
    for row_id, row in zip(range(29, 34), expected.itertuples(), strict=True):
        got = by_hour[row.hour]
        assert got["carrier"].decode() == row.carrier and got["late"] == row.late
        assert got["image"].shape == (8, 8, 1) and (got["image"] == row_id).all()


def test_gzip_versions_get_no_tfds_metadata(file_root: str) -> None:
    uri = storage.join(file_root, "v")
    manifest = _write_version(uri, compression="GZIP")
    assert tfds_meta.write_tfds_metadata(uri, manifest) == []
    assert not storage.exists(storage.join(uri, tfds_meta.DATASET_INFO))


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
        tfds_meta.dataset_info_json(manifest)


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
        tfds_meta.features_json(schema)
