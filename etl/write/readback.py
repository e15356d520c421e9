"""Shards read back without TensorFlow: each record with its framing, to copy it unchanged
(compaction: ``etl.segments.build``), or with every CRC checked (verification, an images
segment's content hashes, tests).

A shard is read back only where a run builds from earlier shards or checks them: a build from
raw rows writes its shards (``etl.write.shards``) and hashes each record as it goes.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
from collections.abc import Iterator
from typing import Any

from etl import storage
from etl.write.shards import masked_crc32c, normalize_compression


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
