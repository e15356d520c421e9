"""Examples and TFRecord shards, without TensorFlow: rows encoded as serialized
``tf.train.Example`` bytes, framed, written and read back; shard sizing and naming.

The encoders: a Python loop building Examples tops out around 20 k rows/s per core, the
ETL's bottleneck. ``encode_batch`` hands an Arrow RecordBatch to tfx-bsl's C++
``RecordBatchToExamplesEncoder``; it writes the feature map in hash order, so its bytes
vary from run to run (the parsed Examples do not). ``encode_batch_vectorized`` builds
the same Examples with numpy/Arrow in bulk, in protobuf's deterministic order: byte
for byte what ``encode_batch_python`` writes, reproducible, and faster than tfx-bsl.
Each flat column becomes one value per row (readers parse ``FixedLenFeature([])``).

The shards: sizing and naming are pure arithmetic; the writer frames records exactly as
``tf.io.TFRecordWriter`` does (little-endian uint64 length, masked CRC32C of the length,
data, masked CRC32C of the data), gzips when asked, and streams to storage through
``storage.open_atomic_write``: the shard appears only when complete, and memory holds one
flush buffer, not the shard. Reading a shard back is ``etl.write.readback``'s.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import re
import struct
import threading
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl import storage

if TYPE_CHECKING:
    from etl.versions.segment import Schema

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
    ``etl.write.readback.read_framed`` yields them), stored as they are: a compaction does not frame or checksum
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


# --- rows to Example bytes -------------------------------------------------------------------

ARROW_TYPES = {"float32": pa.float32(), "int64": pa.int64(), "string": pa.binary()}
_local = threading.local()  # one encoder per thread (Dask workers run tasks in threads)


def feature_dtypes(schema: Schema) -> dict[str, str]:
    """Column → manifest dtype for everything an Example holds: features plus the label."""
    out = {name: str(feature.dtype) for name, feature in schema.features.items()}
    out[schema.label.name] = schema.label.dtype or "int64"
    for name, dtype in out.items():
        if dtype not in ARROW_TYPES:
            raise ValueError(
                f"schema feature {name!r}: dtype {dtype!r}, expected one of {sorted(ARROW_TYPES)}"
            )
    return out


def _as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(
        f"expected a pandas DataFrame or pyarrow Table/RecordBatch, got {type(data).__name__}"
    )


def _column(table: pa.Table, name: str, dtype: str) -> pa.Array:
    if name not in table.column_names:
        raise KeyError(
            f"column {name!r} ({dtype}) is in the schema but not in the data; "
            f"columns are {table.column_names}"
        )
    col = table.column(name).combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if col.null_count and pa.types.is_floating(col.type):
        # pandas' NaN arrives as null: a float Example holds NaN, which the model imputes
        col = pc.fill_null(col, pa.scalar(float("nan"), col.type))
    if col.null_count:
        raise ValueError(
            f"column {name!r}: {col.null_count} null value(s); every Example holds "
            "every feature, so the transform must fill them first (only float features "
            "may be missing: they hold NaN)"
        )
    try:
        return col.cast(ARROW_TYPES[dtype])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"column {name!r}: cannot convert {col.type} to {dtype}: {exc}") from exc


def to_record_batch(data: Any, schema: Schema) -> pa.RecordBatch:
    """Arrow batch of length-1 list columns, typed per the schema (no per-row Python)."""
    table = _as_table(data)
    offsets = pa.array(np.arange(table.num_rows + 1, dtype=np.int32))
    names, arrays = [], []
    for name, dtype in feature_dtypes(schema).items():
        names.append(name)
        arrays.append(pa.ListArray.from_arrays(offsets, _column(table, name, dtype)))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def encode_batch(data: Any, schema: Schema) -> list[bytes]:
    """Serialized Examples for every row, encoded in C++ by tfx-bsl."""
    batch = to_record_batch(data, schema)
    if batch.num_rows == 0:
        return []
    encoder = getattr(_local, "encoder", None)
    if encoder is None:
        from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

        encoder = _local.encoder = RecordBatchToExamplesEncoder(None)
    return encoder.encode(batch)


def encode_batch_python(data: Any, schema: Schema) -> list[bytes]:
    """The same Examples from a Python loop over rows: the baseline the C++ path is measured against."""
    import tensorflow as tf

    batch = to_record_batch(data, schema)
    kinds = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}
    dtypes = feature_dtypes(schema)
    columns = [
        (name, kinds[dtypes[name]], batch.column(name).flatten().to_pylist())
        for name in batch.schema.names
    ]
    out = []
    for i in range(batch.num_rows):
        example = tf.train.Example()
        feature = example.features.feature
        for name, kind, values in columns:
            getattr(feature[name], kind).value.append(values[i])
        out.append(example.SerializeToString(deterministic=True))
    return out


# ---------------------------------------------------------------- vectorized, deterministic encoder
#
# tf.train.Example wire format for one row whose features each hold one value:
#   Example  = 0x0A len(Features) Features
#   Features = for each feature, sorted by name: 0x0A len(entry) entry
#   entry    = 0x0A len(name) name 0x12 len(Feature) Feature
#   Feature  = float: 0x12 0x06 0x0A 0x04 <float32 LE>
#              int64: 0x1A len 0x0A len <varint>   (a packed repeated field)
#              bytes: 0x0A len 0x0A len <bytes>
# Lengths are base-128 varints. Each feature's entries become one Arrow binary column
# built with numpy, and Arrow's C++ ``binary_join_element_wise`` concatenates the
# columns row by row. Entries are in sorted-name order, as protobuf's deterministic
# serialization writes maps, so the bytes equal the Python baseline's, run after run.

_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)  # 10 groups of 7 bits cover a uint64
_MAX_NAME_BYTES = 100  # keeps every per-entry length below 128: a one-byte varint


_VARINT_STEPS = np.uint64(1) << _SHIFTS[1:]  # smallest value needing 2, 3, ... 10 bytes


def _varint_len(values: np.ndarray) -> np.ndarray:
    u = np.asarray(values, np.int64).view(np.uint64)
    lengths = np.ones(len(u), np.int64)
    top = u.max() if len(u) else 0
    for step in _VARINT_STEPS:  # lengths are mostly 1-2 bytes: stop at the largest
        if top < step:
            break
        lengths += u >= step
    return lengths


def _varint_matrix(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, w) varint bytes (w = longest) and each row's length; negative int64 take 10."""
    u = np.asarray(values, np.int64).view(np.uint64)
    lengths = _varint_len(values)
    width = int(lengths.max()) if len(lengths) else 1
    shifts = _SHIFTS[:width]
    more = (np.arange(width)[None, :] < (lengths[:, None] - 1)).astype(np.uint64) << np.uint64(7)
    return (((u[:, None] >> shifts[None, :]) & np.uint64(0x7F)) | more).astype(np.uint8), lengths


def _ragged(matrix: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary column whose row i is ``matrix[i, :lengths[i]]``."""
    data = matrix[np.arange(matrix.shape[1])[None, :] < lengths[:, None]]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _varint_column(values: np.ndarray) -> pa.Array:
    return _ragged(*_varint_matrix(values))


def _float_entries(head: bytes, values: pa.Array) -> pa.Array:
    raw = values.to_numpy(zero_copy_only=False).astype("<f4").view(np.uint8).reshape(-1, 4)
    matrix = np.empty((len(values), len(head) + 4), np.uint8)
    matrix[:, : len(head)] = np.frombuffer(head, np.uint8)
    matrix[:, len(head) :] = raw
    return _ragged(matrix, np.full(len(values), matrix.shape[1]))


def _entries(name: str, dtype: str, values: pa.Array) -> pa.Array:
    """One feature's map entry for every row, as a binary column."""
    key = name.encode()
    if len(key) > _MAX_NAME_BYTES:
        raise ValueError(f"feature name {name!r}: at most {_MAX_NAME_BYTES} bytes for this encoder")
    prefix = bytes([0x0A, len(key)]) + key + b"\x12"
    if dtype == "float32":
        return _float_entries(
            bytes([0x0A, len(prefix) + 9]) + prefix + b"\x08\x12\x06\x0a\x04", values
        )
    if dtype == "int64":
        ints, n = values.to_numpy(zero_copy_only=False), len(values)
        varint, lengths = _varint_matrix(ints)
        matrix = np.zeros((n, 2 + len(prefix) + 5 + varint.shape[1]), np.uint8)
        matrix[:, 0] = 0x0A
        matrix[:, 1] = len(prefix) + 5 + lengths  # entry length
        matrix[:, 2 : 2 + len(prefix)] = np.frombuffer(prefix, np.uint8)
        at = 2 + len(prefix)
        matrix[:, at : at + 5] = np.stack(
            [lengths + 4, np.full(n, 0x1A), lengths + 2, np.full(n, 0x0A), lengths], axis=1
        )
        matrix[:, at + 5 :] = varint
        return _ragged(matrix, at + 5 + lengths)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset : values.offset + len(values) + 1
    ]
    n_bytes = np.diff(offsets).astype(np.int64)
    inner = 1 + _varint_len(n_bytes) + n_bytes  # BytesList
    feature = 1 + _varint_len(inner) + inner
    entry = len(prefix) + _varint_len(feature) + feature
    parts = [
        b"\x0a",
        _varint_column(entry),
        prefix,
        _varint_column(feature),
        b"\x0a",
        _varint_column(inner),
        b"\x0a",
        _varint_column(n_bytes),
        values,
    ]
    return _join(parts)


def _join(parts: list[Any]) -> pa.Array:
    args = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*args, pa.scalar(b"", pa.binary()))


def encode_batch_vectorized(data: Any, schema: Schema) -> list[bytes]:
    """Same Examples as ``encode_batch_python``, byte for byte, built in bulk by numpy/Arrow.

    Deterministic (sorted feature map), so re-running a version reproduces its shard bytes.
    """
    batch = to_record_batch(data, schema)
    if batch.num_rows == 0:
        return []
    dtypes = feature_dtypes(schema)
    entries = [
        _entries(name, dtypes[name], batch.column(name).flatten())
        for name in sorted(dtypes, key=lambda s: s.encode())
    ]
    body = sum(pc.binary_length(e).to_numpy().astype(np.int64) for e in entries)
    return _join([b"\x0a", _varint_column(body), *entries]).to_pylist()
