"""TFRecord shards: pure sizing/naming arithmetic, and a streaming writer without TensorFlow.

The writer frames records exactly as ``tf.io.TFRecordWriter`` does (little-endian
uint64 length, masked CRC32C of the length, data, masked CRC32C of the data), gzips
when asked, and streams to storage through ``storage.open_atomic_write``: the shard
appears only when complete, and memory holds one flush buffer, not the shard.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import re
import struct
from collections.abc import Iterable, Iterator
from typing import IO, Any

import google_crc32c

from etl import storage

GZIP = "GZIP"
DEFAULT_SHARD_BYTES = 128 * 2**20  # TFDS/TF guidance: 100-200 MB per shard
DEFAULT_MAX_SHARDS = 1024  # never thousands of tiny files
FLUSH_BYTES = 4 * 2**20
GZIP_LEVEL = 6  # zlib's default, the level TF's GZIP writer uses
_MASK_DELTA = 0xA282EAD8
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_SPLIT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def normalize_compression(compression: str | None) -> str | None:
    """None or "GZIP" (what ``TFRecordDataset(compression_type=...)`` accepts)."""
    if compression in (None, "", "NONE", "none"):
        return None
    if isinstance(compression, str) and compression.upper() == GZIP:
        return GZIP
    raise ValueError(f"compression: expected None or 'GZIP', got {compression!r}")


def num_shards_for(
    total_bytes: int, target_bytes: int = DEFAULT_SHARD_BYTES, max_shards: int = DEFAULT_MAX_SHARDS
) -> int:
    """Shards needed so each holds about ``target_bytes``: at least 1, at most ``max_shards``."""
    if target_bytes <= 0 or max_shards < 1:
        raise ValueError(
            f"target_bytes and max_shards must be positive, got {target_bytes}, {max_shards}"
        )
    if total_bytes < 0:
        raise ValueError(f"total_bytes: expected >= 0, got {total_bytes}")
    return max(1, min(max_shards, math.ceil(total_bytes / target_bytes)))


def shard_filename(
    dataset: str, split: str, index: int, num_shards: int, compression: str | None = None
) -> str:
    """TFDS naming ``<name>-<split>.tfrecord-00000-of-00008`` (``.gz`` appended for GZIP)."""
    if not _NAME.match(dataset) or not _SPLIT.match(split):
        raise ValueError(
            f"shard name: expected snake_case dataset and split, got {dataset!r}, {split!r}"
        )
    if not 0 <= index < num_shards:
        raise ValueError(f"shard index {index} outside 0..{num_shards - 1}")
    suffix = ".gz" if normalize_compression(compression) == GZIP else ""
    return f"{dataset}-{split}.tfrecord-{index:05d}-of-{num_shards:05d}{suffix}"


def masked_crc32c(data: bytes) -> int:
    """CRC32C rotated and offset, as TFRecord stores it (so CRCs of CRCs stay well-spread)."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


_crc32c = google_crc32c.value
_u64, _u32 = struct.Struct("<Q").pack, struct.Struct("<I").pack
_HEADERS: dict[int, bytes] = {}  # record length -> framed header; lengths repeat a lot


def _header(length: int) -> bytes:
    head = _HEADERS.get(length)
    if head is None:
        packed = _u64(length)
        head = packed + _u32(masked_crc32c(packed))
        if len(_HEADERS) < 65536:
            _HEADERS[length] = head
    return head


def frame(record: bytes) -> bytes:
    """One record in TFRecord framing."""
    return b"".join((_header(len(record)), record, _u32(masked_crc32c(record))))


class _CountingWriter:
    """Passes bytes through to storage while hashing and counting what is stored."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.sha256, self.bytes = raw, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        self.raw.write(data)
        return len(data)

    def flush(self) -> None:
        self.raw.flush()


def write_shard(
    uri: str, records: Iterable[bytes], compression: str | None = None
) -> dict[str, Any]:
    """Stream ``records`` into one TFRecord shard at ``uri``, visible only when complete.

    Returns:
        The manifest entry: ``{"file", "records", "bytes", "sha256"}`` of the stored object.

    Raises:
        IOError: the stored size differs from what was written (nothing is trusted then).
    """
    return write_framed(uri, map(frame, records), compression)


def write_framed(
    uri: str, framed: Iterable[bytes | memoryview], compression: str | None = None
) -> dict[str, Any]:
    """``write_shard`` of records already in TFRecord framing (``frame``, or as
    ``read_framed`` yields them), stored as they are: a compaction does not frame or checksum
    them again."""

    def fill(sink: Any) -> int:
        count, pending, buffer = 0, 0, []
        for record in framed:  # hot loop: kept free of calls we can avoid
            buffer.append(record)
            pending += len(record)
            count += 1
            if pending >= FLUSH_BYTES:
                sink.write(b"".join(buffer))
                buffer, pending = [], 0
        sink.write(b"".join(buffer))
        return count

    return _write(uri, compression, fill)


def _write(uri: str, compression: str | None, fill: Any) -> dict[str, Any]:
    """One shard written by ``fill(sink)`` (which returns the record count), gzipped when
    asked, hashed and counted as stored, checked against the stored size."""
    compression = normalize_compression(compression)
    with storage.open_atomic_write(uri) as raw:
        out = _CountingWriter(raw)
        sink: Any = (
            gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=GZIP_LEVEL)
            if compression
            else out
        )
        count = fill(sink)
        if compression:
            sink.close()  # writes the gzip trailer into ``out``; ``raw`` stays open
    stored = storage.stat(uri)["size"]
    if stored != out.bytes:
        raise OSError(f"{uri}: wrote {out.bytes} bytes but storage holds {stored}")
    return {
        "file": uri.rstrip("/").rsplit("/", 1)[-1],
        "records": count,
        "bytes": out.bytes,
        "sha256": out.sha256.hexdigest(),
    }


def read_framed(
    uri: str, sha256: str, compression: str | None = None
) -> Iterator[tuple[memoryview, memoryview]]:
    """Each record of a shard as (its framed bytes, its data), for copying it unchanged.

    The shard is read whole (one shard in memory at a time) and checked against ``sha256``,
    the digest its manifest recorded, which covers every byte a per-record CRC would.

    Raises:
        ValueError: the shard's digest differs from ``sha256``, or its framing is truncated;
            the message names the file (and the record).
    """
    stored = storage.read_bytes(uri)
    digest = hashlib.sha256(stored).hexdigest()
    if digest != sha256:
        raise ValueError(f"{uri}: sha256 {digest}, expected {sha256} (its manifest's); "
                         "the shard changed since it was written")
    data = memoryview(gzip.decompress(stored) if normalize_compression(compression) else stored)
    pos, index, size = 0, 0, len(data)
    while pos < size:
        if pos + 12 > size:
            raise ValueError(f"{uri}: record {index}: truncated header")
        end = pos + 16 + _length(data, pos)[0]
        if end > size:
            raise ValueError(f"{uri}: record {index}: truncated data")
        yield data[pos:end], data[pos + 12:end - 4]
        pos, index = end, index + 1


_length = struct.Struct("<Q").unpack_from


def iter_records(uri: str, compression: str | None = None) -> Iterator[bytes]:
    """Read a shard back without TensorFlow, checking every CRC (for verification and tests).

    Raises:
        ValueError: a truncated record or a CRC mismatch, naming the file and record index.
    """
    with storage.open_read(uri) as raw:
        f: Any = (
            gzip.GzipFile(fileobj=raw, mode="rb") if normalize_compression(compression) else raw
        )
        index = 0
        while header := f.read(12):
            if len(header) < 12:
                raise ValueError(f"{uri}: record {index}: truncated header")
            (length,), (crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
            if masked_crc32c(header[:8]) != crc:
                raise ValueError(f"{uri}: record {index}: length CRC mismatch")
            body = f.read(length + 4)
            if len(body) < length + 4:
                raise ValueError(f"{uri}: record {index}: truncated data")
            if masked_crc32c(body[:length]) != struct.unpack("<I", body[length:])[0]:
                raise ValueError(f"{uri}: record {index}: data CRC mismatch")
            yield body[:length]
            index += 1
