"""TFRecord shards written without TensorFlow must read back exactly with TensorFlow."""

from __future__ import annotations

import hashlib
import random

import pytest

from etl import storage
from etl.write import shards

RNG = random.Random(13)
RECORDS = [
    b"",
    b"x",
    *(RNG.randbytes(RNG.randint(1, 2000)) for _ in range(500)),
    RNG.randbytes(5 * 2**20),
]  # one record bigger than a flush buffer


@pytest.mark.parametrize(
    ("total", "target", "cap", "expected"),
    [
        (0, 100, 10, 1),
        (1, 100, 10, 1),
        (100, 100, 10, 1),
        (101, 100, 10, 2),
        (10**12, 128 * 2**20, 1024, 1024),
        (300 * 2**20, 128 * 2**20, 1024, 3),
    ],
)
def test_num_shards_for(total: int, target: int, cap: int, expected: int) -> None:
    assert shards.num_shards_for(total, target, max_shards=cap) == expected


def test_num_shards_for_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="positive"):
        shards.num_shards_for(10, 0)
    with pytest.raises(ValueError, match="total_bytes"):
        shards.num_shards_for(-1, 10)


def test_shard_filename_follows_tfds() -> None:
    assert (
        shards.shard_filename("flights", "train", 3, 8) == "flights-train.tfrecord-00003-of-00008"
    )
    assert (
        shards.shard_filename("flights", "eval", 0, 1, "gzip")
        == "flights-eval.tfrecord-00000-of-00001.gz"
    )
    with pytest.raises(ValueError, match="outside 0..7"):
        shards.shard_filename("flights", "train", 8, 8)
    with pytest.raises(ValueError, match="snake_case"):
        shards.shard_filename("../x", "train", 0, 1)
    with pytest.raises(ValueError, match="compression"):
        shards.shard_filename("flights", "train", 0, 1, "ZLIB")


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_tensorflow_reads_back_exactly_what_was_written(file_root: str, compression) -> None:
    import tensorflow as tf

    name = shards.shard_filename("flights", "train", 0, 1, compression)
    uri = storage.join(file_root, name)
    entry = shards.write_shard(uri, iter(RECORDS), compression)
    path = storage.get_fs(uri)[1]
    read = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression or "")]
    assert read == RECORDS
    stored = storage.read_bytes(uri)
    assert entry == {
        "file": name,
        "records": len(RECORDS),
        "bytes": len(stored),
        "sha256": hashlib.sha256(stored).hexdigest(),
    }


def test_uncompressed_bytes_equal_tf_writer(file_root: str, tmp_path) -> None:
    import tensorflow as tf

    uri = storage.join(file_root, "ours.tfrecord")
    shards.write_shard(uri, RECORDS[:100])
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for record in RECORDS[:100]:
            writer.write(record)
    assert storage.read_bytes(uri) == (tmp_path / "tf.tfrecord").read_bytes()


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_shard_on_any_storage_matches_its_entry(storage_root: str, compression) -> None:
    uri = storage.join(
        storage_root, "v", shards.shard_filename("flights", "test", 0, 2, compression)
    )
    entry = shards.write_shard(uri, RECORDS, compression)
    stored = storage.read_bytes(uri)
    assert (entry["bytes"], entry["sha256"]) == (len(stored), hashlib.sha256(stored).hexdigest())
    assert list(shards.iter_records(uri, compression)) == RECORDS
    again = shards.write_shard(uri, RECORDS, compression)  # deterministic, gzip included
    assert again == entry


def test_failing_record_source_leaves_no_shard(storage_root: str) -> None:
    uri = storage.join(storage_root, "v", shards.shard_filename("flights", "train", 0, 1))

    def records():
        yield from RECORDS
        raise RuntimeError("worker died")

    with pytest.raises(RuntimeError, match="worker died"):
        shards.write_shard(uri, records())
    assert storage.list_dir(storage.join(storage_root, "v"), include_temp=True) == []


def test_corrupt_and_truncated_shards_are_detected(file_root: str) -> None:
    import tensorflow as tf

    uri = storage.join(file_root, "s.tfrecord")
    shards.write_shard(uri, RECORDS[:50])
    path = storage.get_fs(uri)[1]
    data = bytearray(storage.read_bytes(uri))
    data[len(data) // 2] ^= 0x01
    storage.write_bytes_atomic(uri, bytes(data))
    with pytest.raises(ValueError, match=r"s\.tfrecord: record \d+: data CRC mismatch"):
        list(shards.iter_records(uri))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(path))
    shards.write_shard(uri, RECORDS[:50])
    storage.write_bytes_atomic(uri, storage.read_bytes(uri)[:-3])
    with pytest.raises(ValueError, match="truncated"):
        list(shards.iter_records(uri))


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_framed_copy_is_byte_identical_and_checks_its_source(file_root: str, compression) -> None:
    src = storage.join(file_root, "a", shards.shard_filename("flights", "train", 0, 1, compression))
    entry = shards.write_shard(src, RECORDS, compression)
    pairs = list(shards.read_framed(src, entry["sha256"], compression))
    assert [bytes(data) for _, data in pairs] == RECORDS
    dst = storage.join(file_root, "b", shards.shard_filename("flights", "train", 0, 1, compression))
    copied = shards.write_framed(dst, (framed for framed, _ in pairs), compression)
    assert {**copied, "file": None} == {**entry, "file": None}
    assert storage.read_bytes(dst) == storage.read_bytes(src)

    with pytest.raises(ValueError, match=r"flights-train\.tfrecord-00000-of-00001.*sha256 "
                                         r"[0-9a-f]{64}, expected 0{64}"):
        next(shards.read_framed(src, "0" * 64, compression))


def test_framed_read_names_a_truncated_record(file_root: str) -> None:
    uri = storage.join(file_root, "s.tfrecord")
    shards.write_shard(uri, RECORDS[:50])
    cut = storage.read_bytes(uri)[:-3]
    storage.write_bytes_atomic(uri, cut)
    with pytest.raises(ValueError, match=r"s\.tfrecord: record 49: truncated data"):
        list(shards.read_framed(uri, hashlib.sha256(cut).hexdigest()))
