"""``etl.write.readback``: a shard read back without TensorFlow, each record with its framing
(copied unchanged by a compaction, checked against the shard's sha256) or CRC by CRC; a
corrupt or truncated shard named with its record."""

from __future__ import annotations

import hashlib
import random

import pytest

from etl import storage
from etl.write import readback, shards

RNG = random.Random(7)
RECORDS = [b"", b"y", *(RNG.randbytes(RNG.randint(1, 3000)) for _ in range(200)),
           RNG.randbytes(5 * 2**20)]  # one record bigger than a flush buffer


def test_corrupt_and_truncated_shards_are_detected(file_root: str) -> None:
    import tensorflow as tf

    uri = storage.join(file_root, "s.tfrecord")
    shards.write_shard(uri, RECORDS[:50])
    path = storage.get_fs(uri)[1]
    data = bytearray(storage.read_bytes(uri))
    data[len(data) // 2] ^= 0x01
    storage.write_bytes_atomic(uri, bytes(data))
    with pytest.raises(ValueError, match=r"s\.tfrecord: record \d+: data CRC mismatch"):
        list(readback.iter_records(uri))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(path))
    shards.write_shard(uri, RECORDS[:50])
    storage.write_bytes_atomic(uri, storage.read_bytes(uri)[:-3])
    with pytest.raises(ValueError, match="truncated"):
        list(readback.iter_records(uri))


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_framed_copy_is_byte_identical_and_checks_its_source(file_root: str, compression) -> None:
    src = storage.join(file_root, "a", shards.shard_filename("flights", "train", 0, 1, compression))
    entry = shards.write_shard(src, RECORDS, compression)
    pairs = list(readback.read_framed(src, entry["sha256"], compression))
    assert [bytes(data) for _, data in pairs] == RECORDS
    dst = storage.join(file_root, "b", shards.shard_filename("flights", "train", 0, 1, compression))
    copied = shards.write_framed(dst, (framed for framed, _ in pairs), compression)
    assert {**copied, "file": None} == {**entry, "file": None}
    assert storage.read_bytes(dst) == storage.read_bytes(src)

    with pytest.raises(ValueError, match=r"flights-train\.tfrecord-00000-of-00001.*sha256 "
                                         r"[0-9a-f]{64}, expected 0{64}"):
        next(readback.read_framed(src, "0" * 64, compression))


def test_framed_read_names_a_truncated_record(file_root: str) -> None:
    uri = storage.join(file_root, "s.tfrecord")
    shards.write_shard(uri, RECORDS[:50])
    cut = storage.read_bytes(uri)[:-3]
    storage.write_bytes_atomic(uri, cut)
    with pytest.raises(ValueError, match=r"s\.tfrecord: record 49: truncated data"):
        list(readback.read_framed(uri, hashlib.sha256(cut).hexdigest()))
