"""Shard writing on Dask: one partition per shard, deterministic bytes, parseable Examples."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from etl.sources import extract
from etl.sources.land import land
from etl.sources.lookups import join_lookups, read_lookups
from etl.spec import load_spec
from etl.transform import tabular as transform
from etl.write import shards, writer

LEAKAGE = {"dep_time", "dep_delay", "arr_time", "air_time", "arr_delay"}


@pytest.fixture(scope="module")
def final(client, tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, dict]:
    """Four real days, transformed as a segment build does: the frame the writer gets."""
    root = f"file://{tmp_path_factory.mktemp('raw')}"
    land(root, "flights", start=date(2013, 1, 1), end=date(2013, 1, 5))
    spec = load_spec("flights")
    uris = extract.window_files(root, spec.primary_source, None, datetime(2013, 1, 5, tzinfo=UTC))
    rights, _, _ = read_lookups(root, spec)
    prepared = transform.prepare_rows(
        join_lookups(extract.read_files(uris, spec.primary_source)[0], spec, rights), spec)
    stats = transform.finalize_partial(transform.split_partial(prepared, spec), spec)
    return transform.finalize_rows(prepared, spec, stats["label_schema"]), stats


def _write(frame: pd.DataFrame, stats: dict, out: Path, npartitions: int,
           config: writer.WriteConfig) -> dict[str, list[dict]]:
    spec = load_spec("flights")
    ddf = dd.from_pandas(frame, npartitions=npartitions, sort=False)
    return writer.write_splits(ddf, "flights", f"file://{out}", spec.manifest_schema(),
                               stats["split_counts"], config)


def test_plan_is_pure_arithmetic() -> None:
    plan = writer.plan_shards({"train": 1000, "eval": 100, "test": 10}, 400.0, 100_000)
    assert plan.num_shards["train"] == shards.num_shards_for(400_000, 100_000)
    assert plan.offset("eval") == plan.num_shards["train"]
    assert plan.shard_of(plan.total - 1) == ("test", plan.num_shards["test"] - 1)
    with pytest.raises(IndexError):
        plan.shard_of(plan.total)


def test_an_empty_split_gets_no_shard() -> None:
    plan = writer.plan_shards({"train": 0, "eval": 1, "test": 0}, 400.0, 100_000, 10)
    assert plan.num_shards == {"train": 0, "eval": 1, "test": 0} and plan.total == 1
    assert plan.shard_of(0) == ("eval", 0)


@pytest.mark.parametrize(("train", "least", "expected"), [
    (300_000, 10, 10),  # a year of flights: 10 train files though ~100 MB fit in one
    (300_000, 1, 1),
    (100_000, 10, 3),  # never shards under 10 MiB on average (40 MB: 3 files)
    (4_500, 10, 1),  # ... nor under 1000 records
    (999, 10, 1),
    (50_000_000, 10, 150),  # large data: the byte target decides
])
def test_train_split_gets_at_least_min_train_shards(train, least, expected) -> None:
    plan = writer.plan_shards({"train": train, "eval": train // 8, "test": train // 8}, 400.0,
                              128 * 2**20, least)
    assert plan.num_shards["train"] == expected
    assert plan.num_shards["eval"] == shards.num_shards_for(train // 8 * 400, 128 * 2**20)


def test_shards_hold_their_rows_sorted_and_are_reproducible(final, tmp_path: Path) -> None:
    frame, stats = final
    config = writer.WriteConfig(target_bytes=200_000)  # the default, deterministic encoder
    first = _write(frame, stats, tmp_path / "a", 3, config)
    again = _write(frame.sample(frac=1.0, random_state=7), stats, tmp_path / "b", 5, config)
    assert first == again  # same rows, any order or partitioning: same files, same bytes
    assert len(first["train"]) > 1
    for split, entries in first.items():
        n = len(entries)
        assert [e["file"] for e in entries] == [
            shards.shard_filename("flights", split, i, n, None) for i in range(n)]
        assert sum(e["records"] for e in entries) == stats["split_counts"][split]
        for e in entries:
            data = (tmp_path / "a" / e["file"]).read_bytes()
            assert len(data) == e["bytes"] and hashlib.sha256(data).hexdigest() == e["sha256"]
    sizes = [e["bytes"] for e in first["train"]]
    assert max(sizes) < 2 * 200_000 and min(sizes) > 200_000 / 4


def test_examples_parse_back_without_leakage(final, tmp_path: Path) -> None:
    import tensorflow as tf

    frame, stats = final
    spec = load_spec("flights")
    entries = _write(frame, stats, tmp_path, 2, writer.WriteConfig(compression="gzip"))
    (shard,) = entries["eval"]
    assert shard["file"].endswith(".gz")
    records = list(tf.data.TFRecordDataset(str(tmp_path / shard["file"]),
                                           compression_type="GZIP").as_numpy_iterator())
    assert len(records) == stats["split_counts"]["eval"]
    first = tf.train.Example.FromString(records[0])
    assert set(first.features.feature) == set(spec.manifest_schema()["features"]) | {"late"}
    assert not set(first.features.feature) & LEAKAGE
    expected = frame[frame["_split"] == "eval"].sort_values("_hash").reset_index(drop=True)
    feats = {name: tf.io.FixedLenFeature([], tf.string if f["dtype"] == "string" else
                                         tf.float32 if f["dtype"] == "float32" else tf.int64)
             for name, f in spec.manifest_schema()["features"].items()}
    feats["late"] = tf.io.FixedLenFeature([], tf.int64)
    parsed = tf.io.parse_example(records, feats)
    np.testing.assert_array_equal(parsed["late"].numpy(), expected["late"].to_numpy())
    np.testing.assert_array_equal(parsed["distance"].numpy(), expected["distance"].to_numpy())
    assert [v.decode() for v in parsed["dest"].numpy()] == expected["dest"].tolist()


def test_encoders_write_the_same_examples(final, tmp_path: Path) -> None:
    """The default writes the Python baseline's bytes; tfx-bsl the same Examples (its feature
    order varies per call, so only parsed equality holds)."""
    from tensorflow.core.example import example_pb2

    frame, stats = final
    out = {name: _write(frame, stats, tmp_path / name, 2, writer.WriteConfig(encoder=name))
           for name in writer.ENCODERS}
    assert out["vectorized"] == out["python"]  # same files, records, bytes and sha256
    for split, entries in out["tfx"].items():
        assert [e["records"] for e in entries] == [e["records"] for e in out["python"][split]]
        for a, b in zip(entries, out["python"][split]):
            ra = shards.iter_records(f"file://{tmp_path}/tfx/{a['file']}")
            rb = shards.iter_records(f"file://{tmp_path}/python/{b['file']}")
            assert [example_pb2.Example.FromString(r) for r in ra] == [
                example_pb2.Example.FromString(r) for r in rb]  # same Examples, same order
    with pytest.raises(ValueError, match="encoder"):
        _write(frame, stats, tmp_path / "x", 1, writer.WriteConfig(encoder="fast"))
