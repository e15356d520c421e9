"""Where each row goes and how a segment's shards are written: its split and its shard, both
from its identity hash.

The split is deterministic: each row's identity hash and, for classification, its label pick
train/eval/test. Identity (``spec.split``): the key's text (``by: key``, the default), the
row's whole content plus an occurrence counter (``by: row``, for tables without a unique key),
or the values of ``group_by`` columns (rows sharing them share a split, on purpose: leakage
control). Stratified splits (``stratify: true``) rank the rows of each *unit* and class by
identity hash and place the r-th at ``frac(offset + r / golden ratio)``; the low-discrepancy
sequence gives every class the spec's fractions within a row or two, so a 23-row class
reaches every split (a regression's rows are one class: each split gets its share).

Why the result does not depend on how data is built (day by day, in bulk, any Dask
partitioning): the unit is the row's event-time period for a partitioned source (computed from
the row itself; a row outside its file's period is quarantined as misfiled) and the whole
source otherwise (one file, never cut across partitions). A unit's rows therefore always sit
together in one raw partition and one segment, and new data lands in new units, so a row's
split never changes as more data arrives. The occurrence counter counts identical rows within
their unit: identical rows are indistinguishable, so their order does not matter. All hashing
is integer arithmetic on text (FNV-1a + splitmix64), the same on every run, machine and Python.

The shards: the plan is pure arithmetic (``plan_shards``): bytes per record are measured by
encoding a sample, each split gets ``num_shards_for(records * bytes, target)`` shards, and a
row's shard is the high 32 bits of its identity hash modulo that count (the split used the
low bits). Inside a shard the rows are sorted by that hash, so the same rows always give the
same bytes; they are encoded in chunks of rows (numpy/Arrow, byte-deterministic) and streamed
to ``shards.write_shard``. ``write_shards`` writes a segment's frame in this process and
gives each split's entry with its content hash; the images kind writes a Dask frame with the
same plan and row order, one shard per Dask partition (``etl.kinds.images.window``).
"""

from __future__ import annotations

import gzip
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from etl import storage
from etl.spec import DEFAULT_SHARD_BYTES
from etl.versions.segment import Schema, Shard, SplitInfo
from etl.write import shards

log = logging.getLogger(__name__)

SPLIT_COL = "_split"
HASH_COL = "_hash"
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0  # 1 / golden ratio: the most evenly spread rotation
_COUNTER_MIX = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """Final avalanche so every output bit depends on every input byte."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def key_hash(df: pd.DataFrame, key: tuple[str, ...], salt: str) -> np.ndarray:
    """64-bit hash of ``salt␟k1␟k2…`` (UTF-8): FNV-1a then splitmix64, vectorized in numpy.

    Pure integer arithmetic on the key's text, so it is the same on every run, machine and
    Python; one pass per byte position over all rows instead of a Python call per row.
    """
    cols = [pa.array(df[c].astype("str").fillna(""), type=pa.string()) for c in key]
    joined = pc.binary_join_element_wise(pa.scalar(salt), *cols, "\x1f")
    joined = joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined
    n = len(joined)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset:][: n + 1]
    data = np.frombuffer(joined.buffers()[2], dtype=np.uint8)
    starts, lengths = offsets[:-1].astype(np.int64), np.diff(offsets)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    for i in range(int(lengths.max())):
        live = lengths > i
        byte = data[np.minimum(starts + i, len(data) - 1)].astype(np.uint64)
        h = np.where(live, (h ^ byte) * _FNV_PRIME, h)
    return _splitmix64(h)


def row_hash(df: pd.DataFrame, columns: tuple[str, ...], salt: str,
             units: np.ndarray) -> np.ndarray:
    """Identity of rows without a unique key: their content, plus how many identical rows came
    before them in their unit (the second copy of a row is a row of its own)."""
    content = key_hash(df, columns, salt)
    counter = pd.DataFrame({"u": units, "h": content}).groupby(["u", "h"], sort=False).cumcount()
    bump = counter.to_numpy().astype(np.uint64) * _COUNTER_MIX
    return np.where(bump == 0, content, _splitmix64(content ^ bump))


def unit_of(hashes: np.ndarray) -> np.ndarray:
    """A hash's position in [0, 1), from its low 32 bits (the shard uses the high bits)."""
    return (hashes & np.uint64(0xFFFFFFFF)).astype(np.float64) / 2.0**32


def stratified_positions(hashes: np.ndarray, labels: pd.Series, units: np.ndarray,
                         salt: str) -> np.ndarray:
    """Positions in [0, 1) spread evenly within each (unit, class): the r-th row of a group in
    hash order sits at ``frac(offset + r * 0.618...)``, the offset a hash of the group."""
    n = len(hashes)
    if n == 0:
        return np.zeros(0)
    codes, values = pd.factorize(labels.astype("str"), sort=True)
    order = np.lexsort((hashes, codes, units))
    u_s, c_s = units[order], codes[order]
    start = np.r_[True, (u_s[1:] != u_s[:-1]) | (c_s[1:] != c_s[:-1])]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    rank = np.arange(n) - first
    groups = pd.DataFrame({"unit": u_s[start].astype("str"),
                           "label": np.asarray(values, dtype=object)[c_s[start]]})
    offsets = unit_of(key_hash(groups, ("unit", "label"), f"{salt}\x1fstratum"))
    group_of = np.cumsum(start) - 1
    pos = np.empty(n)
    pos[order] = np.mod(offsets[group_of] + rank * _GOLDEN, 1.0)
    return pos


def assign_split(hashes: np.ndarray, fractions: tuple[tuple[str, float], ...],
                 positions: np.ndarray | None = None) -> np.ndarray:
    """Split names from positions in [0, 1) (default: each hash's own, ``unit_of``)."""
    unit = unit_of(hashes) if positions is None else positions
    bounds = np.cumsum([f for _, f in fractions])
    bounds[-1] = 1.0 + 1e-9
    names = np.array([n for n, _ in fractions], dtype=object)
    return names[np.searchsorted(bounds, unit, side="right")]


# --- shards ----------------------------------------------------------------------------------

TFRECORD_FRAMING_BYTES = 16  # length (8) + masked crc of length (4) + masked crc of data (4)
SHARD_COL = "_shard"
RECORD_COL = "_record"  # a row's Example bytes, when encoded before the frame reaches the writer
# vectorized: numpy/Arrow wire format, byte-deterministic (default); tfx: tfx-bsl C++, whose
# feature order varies per call; python: the tf.train.Example loop, the baseline.
ENCODERS = ("vectorized", "tfx", "python")


@dataclass(frozen=True)
class WriteConfig:
    """Shard writing knobs; the defaults suit the flights data on a few cores."""

    target_bytes: int = DEFAULT_SHARD_BYTES
    compression: str | None = None
    encoder: str = "vectorized"  # see ENCODERS
    min_train_shards: int = 1  # the spec's shards.min_train_shards (10 by default)
    sample_rows: int = 2000
    chunk_rows: int = 32768


MIN_RECORDS_PER_SHARD = 1000  # the train-shard minimum never makes files smaller than this
MIN_SHARD_BYTES = 10 * 2**20  # ...nor than this: shards of 10 MB or more read efficiently


@dataclass(frozen=True)
class ShardPlan:
    """How many shards each split gets and where its global shard ids start."""

    splits: tuple[str, ...]
    counts: dict[str, int]
    num_shards: dict[str, int]
    record_bytes: float

    def offset(self, split: str) -> int:
        return sum(self.num_shards[s] for s in self.splits[: self.splits.index(split)])

    @property
    def total(self) -> int:
        return sum(self.num_shards.values())

    def shard_of(self, index: int) -> tuple[str, int]:
        """(split, index within split) of a global shard id."""
        for split in self.splits:
            if index < self.offset(split) + self.num_shards[split]:
                return split, index - self.offset(split)
        raise IndexError(f"shard {index} is outside the plan of {self.total} shards")


def encoder(name: str) -> Callable[[Any, dict[str, Any]], list[bytes]]:
    """The Example encoder ``name`` (``ENCODERS``), or a ValueError listing them."""
    if name not in ENCODERS:
        raise ValueError(f"encoder: expected one of {ENCODERS}, got {name!r}")
    return {"vectorized": shards.encode_batch_vectorized, "tfx": shards.encode_batch,
            "python": shards.encode_batch_python}[name]


def measure_record_bytes(sample: pd.DataFrame, columns: list[str], schema: Schema,
                         compression: str | None) -> float:
    """Stored bytes per record of a sample: encoded size, framing, and gzip ratio if asked
    (a sample carrying ``RECORD_COL`` is measured from those bytes, not encoded again)."""
    if sample.empty:
        return 512.0  # nothing to measure: any positive guess gives one shard for no rows
    records = (list(sample[RECORD_COL]) if RECORD_COL in sample
               else shards.encode_batch_vectorized(sample[columns], schema))
    raw = sum(len(r) for r in records) + TFRECORD_FRAMING_BYTES * len(records)
    if shards.normalize_compression(compression) == shards.GZIP:
        raw = len(gzip.compress(b"".join(records), compresslevel=6))
    return raw / len(records)


def plan_shards(split_counts: dict[str, int], record_bytes: float, target_bytes: int,
                min_train_shards: int = 1) -> ShardPlan:
    """Shard counts per split from their estimated bytes (pure, testable).

    The train split gets at least ``min_train_shards`` files, so several training workers
    can each read files of their own, but never shards of fewer than
    ``MIN_RECORDS_PER_SHARD`` records or ``MIN_SHARD_BYTES`` on average: a small dataset (or
    segment) keeps fewer, larger files, and compaction merges small ones later. A split
    without records gets no shard (a one-row day writes one file, not three).
    """
    splits = tuple(split_counts)
    num = {s: shards.num_shards_for(int(split_counts[s] * record_bytes), target_bytes)
           if split_counts[s] else 0 for s in splits}  # an empty split: no file at all
    if "train" in num:
        floor = min(min_train_shards, split_counts["train"] // MIN_RECORDS_PER_SHARD,
                    int(split_counts["train"] * record_bytes) // MIN_SHARD_BYTES,
                    shards.DEFAULT_MAX_SHARDS)
        num["train"] = max(num["train"], floor)
    return ShardPlan(splits=splits, counts=dict(split_counts), num_shards=num,
                     record_bytes=record_bytes)


def assign_shards(df: pd.DataFrame, plan: ShardPlan) -> pd.DataFrame:
    """``df`` with each row's global shard id (``SHARD_COL``): its split's offset plus the
    high 32 bits of its identity hash modulo the split's shard count."""
    split = df[SPLIT_COL].to_numpy()
    high = (df[HASH_COL].to_numpy(dtype=np.uint64) >> np.uint64(32)).astype(np.int64)
    shard = np.zeros(len(df), dtype=np.int64)
    for name in plan.splits:
        mask = split == name
        shard[mask] = plan.offset(name) + high[mask] % plan.num_shards[name]
    return df.assign(**{SHARD_COL: shard})


def _row_order(part: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Positions of the rows by key hash; equal hashes (practically never) fall back to every
    column's value."""
    hashes = part[HASH_COL].to_numpy(dtype=np.uint64)
    order = np.argsort(hashes, kind="stable")
    ranked = hashes[order]
    if not (ranked[1:] == ranked[:-1]).any():
        return order
    by = part[[HASH_COL, *columns]].reset_index(drop=True)
    return by.sort_values([HASH_COL, *columns], kind="mergesort").index.to_numpy()


def write_one_shard(part: pd.DataFrame, uri: str, columns: list[str], schema: Schema,
                    config: WriteConfig,
                    on_record: Callable[[bytes], None] | None = None) -> dict[str, Any]:
    """Encode and write one shard; runs on a worker. ``on_record`` sees every record. Rows
    carrying ``RECORD_COL`` were encoded already: their bytes are written as they are."""
    order = _row_order(part, columns)
    encode_fn = encoder(config.encoder)

    def records() -> Iterator[bytes]:
        if RECORD_COL in part:
            for record in part[RECORD_COL].to_numpy()[order]:
                if on_record is not None:
                    on_record(record)
                yield record
            return
        ordered = part.iloc[order].reset_index(drop=True)
        for i in range(0, len(ordered), config.chunk_rows):
            for record in encode_fn(ordered.iloc[i:i + config.chunk_rows][columns], schema):
                if on_record is not None:
                    on_record(record)
                yield record

    return shards.write_shard(uri, records(), config.compression)


def write_frame(frame: pd.DataFrame, dataset: str, folder_uri: str, schema: Schema,
                splits: list[str], config: WriteConfig,
                on_record: Callable[[str, bytes], None] | None = None) -> dict[str, list[dict]]:
    """Every split's shards of one in-memory frame (a segment), written by this process.

    The same plan and row order as the images kind's Dask writer: one frame small enough
    for one task. ``on_record(split, record)`` sees every record written. A frame with
    ``RECORD_COL`` (see ``encode_rows``) is written without encoding anything again.
    """
    encoder(config.encoder)
    columns = schema.columns
    counts = frame[SPLIT_COL].value_counts()
    plan = plan_shards({s: int(counts.get(s, 0)) for s in splits},
                       measure_record_bytes(frame.head(config.sample_rows), columns, schema,
                                            config.compression),
                       config.target_bytes, config.min_train_shards)
    assigned = assign_shards(frame, plan)
    out: dict[str, list[dict]] = {s: [] for s in plan.splits}
    for index, part in _by_shard(assigned, plan.total):
        split, i = plan.shard_of(index)
        name = shards.shard_filename(dataset, split, i, plan.num_shards[split],
                                     config.compression)
        seen = None if on_record is None else (lambda r, s=split: on_record(s, r))
        entry = write_one_shard(part, storage.join(folder_uri, name), columns, schema, config,
                                seen)
        out[split].append({**entry, "file": name})
    return out


def write_shards(rows: pd.DataFrame, dataset: str, uri: str, schema: Schema,
                 splits: list[str], config: WriteConfig) -> dict[str, SplitInfo]:
    """A segment's shards from its Example-ready rows (``etl.kinds.tabular.prepare.prepare``),
    written by this process; per split its records, bytes, content hash and shard entries
    (what ``segment.json`` lists)."""
    digests: dict[str, list[int]] = {}
    written = write_frame(
        encode_rows(rows, schema, config), dataset, uri, schema, splits, config,
        lambda split, rec: digests.setdefault(split, []).append(record_digest(rec)))
    return {split: split_info(entries, content_hash(digests.get(split, [])))
            for split, entries in written.items()}


# --- content hashes: a split's records, however they are grouped -----------------------------

_MOD = 2**256


def record_digest(record: bytes | memoryview) -> int:
    return int.from_bytes(hashlib.sha256(record).digest(), "big")


def content_hash(digests: Iterable[int]) -> str:
    """Order-free hash of a multiset of records: the sum of their sha256 values mod 2**256.

    The same records give the same hash however they are grouped into segments and shards,
    and the hashes of parts combine with ``combine_content`` without reading a record.
    """
    return f"{sum(digests) % _MOD:064x}"


def combine_content(hashes: Iterable[str]) -> str:
    return f"{sum(int(h, 16) for h in hashes) % _MOD:064x}"


def split_info(entries: Sequence[Mapping[str, Any]], content: str) -> SplitInfo:
    """A split's entry from the shard writer's (``etl.write.shards``: file, records, bytes,
    sha256 each) and the content hash of their records."""
    return SplitInfo.of(
        num_examples=sum(e["records"] for e in entries),
        num_bytes=sum(e["bytes"] for e in entries), content_hash=content,
        shards=tuple(Shard.of(file=e["file"], records=e["records"], bytes=e["bytes"],
                              sha256=e["sha256"]) for e in entries))


def encode_rows(frame: pd.DataFrame, schema: Schema, config: WriteConfig) -> pd.DataFrame:
    """``frame`` with each row's Example bytes in ``RECORD_COL``, encoded in chunks of
    ``config.chunk_rows`` in the frame's order."""
    columns = schema.columns
    records = np.empty(len(frame), dtype=object)
    for i in range(0, len(frame), config.chunk_rows):
        chunk = frame.iloc[i:i + config.chunk_rows][columns]
        records[i:i + len(chunk)] = encoder(config.encoder)(chunk, schema)
    return frame.assign(**{RECORD_COL: records})


def _by_shard(assigned: pd.DataFrame, total: int) -> Iterator[tuple[int, pd.DataFrame]]:
    groups = dict(tuple(assigned.groupby(SHARD_COL, sort=True)))
    for index in range(total):
        yield index, groups.get(index, assigned.iloc[:0])
