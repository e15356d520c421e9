"""Segment folders and a version listing them, written as the ETL writes them (shards,
``dataset_info.json`` from ``etl.segments.build``, ``segment.json`` last), for the TFDS tests."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from etl import storage
from etl.segments import build as tfds_meta
from etl.versions import SEGMENTS_DIR, SegmentMeta
from etl.versions.segment import Schema
from etl.write import shards

SCHEMA_JSON = {  # as segment.json and manifest.json hold it
    "key": ["id"],
    "label": {"name": "late", "dtype": "int64", "classes": 2},
    "features": {
        "distance": {"dtype": "float32", "kind": "numeric"},
        "hour": {"dtype": "int64", "kind": "numeric"},
        "carrier": {"dtype": "string", "kind": "categorical"},
        "image": {"dtype": "string", "kind": "image", "shape": [8, 8, 1], "encoding": "png"},
    },
}
SCHEMA = Schema.from_json(SCHEMA_JSON, "the test's schema")
SPLITS = {"train": (23, 3), "eval": (6, 1), "test": (5, 2)}  # records, shards per segment
VERSION = "20140103T000000Z_all"


def _png(value: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8), value, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def frame(n: int, offset: int) -> pd.DataFrame:
    ids = np.arange(offset, offset + n)
    return pd.DataFrame({"distance": ids * 1.5, "hour": ids % 24,
                         "carrier": ["UA", "AA"] * (n // 2) + ["B6"] * (n % 2),
                         "late": ids % 2, "image": [_png(i) for i in ids]})


def write_segment(dataset_uri: str, seg: str, offset: int,
                  compression: str | None = None) -> tuple[dict, int]:
    """One segment folder as the builder leaves it; the next row offset."""
    uri = storage.join(dataset_uri, SEGMENTS_DIR, seg)
    splits = {}
    for split, (n, num_shards) in SPLITS.items():
        records = shards.encode_batch(frame(n, offset), SCHEMA)
        parts = np.array_split(np.arange(n), num_shards)
        entries = [shards.write_shard(
            storage.join(uri, shards.shard_filename("flights", split, i, num_shards, compression)),
            [records[j] for j in part], compression) for i, part in enumerate(parts)]
        splits[split] = {"num_examples": n, "num_bytes": sum(e["bytes"] for e in entries),
                         "shards": entries}
        offset += n
    meta = {"format_version": 2, "dataset": "flights", "segment": seg, "partition": seg[:8],
            "splits": splits, "schema": SCHEMA_JSON, "compression": compression}
    tfds_meta.write_dataset_info(uri, SegmentMeta.from_json(meta, "the test's segment.json"))
    storage.write_bytes_atomic(storage.join(uri, "segment.json"), storage.json_bytes(meta))
    return meta, offset


def compose(file_root: str, compression: str | None = None) -> tuple[str, list[dict]]:
    """A published version listing two segments (the second's rows follow the first's)."""
    dataset_uri = storage.join(file_root, "datasets", "flights")
    first, offset = write_segment(dataset_uri, "20140101-aaaa", 0, compression)
    second, _ = write_segment(dataset_uri, "20140102-bbbb", offset, compression)
    splits = {s: {"num_examples": first["splits"][s]["num_examples"] * 2,
                  "shards": [{**sh, "segment": m["segment"]} for m in (first, second)
                             for sh in m["splits"][s]["shards"]]} for s in SPLITS}
    uri = storage.join(dataset_uri, VERSION)
    storage.write_bytes_atomic(storage.join(uri, "manifest.json"), storage.json_bytes({
        "format_version": 1, "dataset": "flights", "version": VERSION, "layout": "segments",
        "compression": compression, "schema": SCHEMA_JSON, "splits": splits,
        "segments": [{"segment": m["segment"], "partition": m["partition"]}
                     for m in (first, second)]}))
    return uri, [first, second]
