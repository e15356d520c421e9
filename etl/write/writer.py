"""Shard writing: a segment's shards by this process (``write_shards``), or a frame's on Dask,
one shard per Dask partition written by a worker straight to storage (images).

The plan is pure arithmetic (``plan_shards``): bytes per record are measured by encoding a
sample, each split gets ``num_shards_for(records * bytes, target)`` shards, and a row's shard
is the high 32 bits of its key hash modulo that count (the split used the low bits). A shuffle
(``set_index`` on the global shard id with known divisions) makes every shard one Dask partition;
inside it rows are sorted by key hash, so the same rows always give the same bytes. Workers
encode in chunks (numpy/Arrow, byte-deterministic) and stream records to ``write_shard``: the client never
holds records.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from etl import storage
from etl.spec import DEFAULT_SHARD_BYTES
from etl.transform.split import HASH_COL, SPLIT_COL
from etl.versions import segment
from etl.versions.segment import SplitInfo
from etl.write import encode, shards

log = logging.getLogger(__name__)

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


def _encoder(name: str):
    if name not in ENCODERS:
        raise ValueError(f"encoder: expected one of {ENCODERS}, got {name!r}")
    return {"vectorized": encode.encode_batch_vectorized, "tfx": encode.encode_batch,
            "python": encode.encode_batch_python}[name]


def measure_record_bytes(sample: pd.DataFrame, columns: list[str], schema: dict[str, Any],
                         compression: str | None) -> float:
    """Stored bytes per record of a sample: encoded size, framing, and gzip ratio if asked
    (a sample carrying ``RECORD_COL`` is measured from those bytes, not encoded again)."""
    if sample.empty:
        return 512.0  # nothing to measure: any positive guess gives one shard for no rows
    records = (list(sample[RECORD_COL]) if RECORD_COL in sample
               else encode.encode_batch_vectorized(sample[columns], schema))
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


def _assign_shards(df: pd.DataFrame, plan: ShardPlan) -> pd.DataFrame:
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


def write_one_shard(part: pd.DataFrame, uri: str, columns: list[str], schema: dict[str, Any],
                    config: WriteConfig,
                    on_record: Callable[[bytes], None] | None = None) -> dict[str, Any]:
    """Encode and write one shard; runs on a worker. ``on_record`` sees every record. Rows
    carrying ``RECORD_COL`` were encoded already: their bytes are written as they are."""
    order = _row_order(part, columns)
    encode_fn = _encoder(config.encoder)

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


def write_splits(ddf: dd.DataFrame, dataset: str, version_uri: str, schema: dict[str, Any],
                 split_counts: dict[str, int], config: WriteConfig) -> dict[str, list[dict]]:
    """Write every split's shards under ``version_uri``; returns manifest shard entries."""
    _encoder(config.encoder)
    columns = [*schema["features"], schema["label"]["name"]]
    sample = ddf.head(config.sample_rows, npartitions=1, compute=True)
    if sample.empty:
        sample = ddf.head(config.sample_rows, npartitions=-1, compute=True)
    plan = plan_shards(split_counts, measure_record_bytes(sample, columns, schema,
                                                          config.compression),
                       config.target_bytes, config.min_train_shards)
    assigned = ddf.map_partitions(_assign_shards, plan, meta=_assign_shards(ddf._meta, plan))
    by_shard = assigned.set_index(SHARD_COL, divisions=list(range(plan.total + 1)))
    parts = by_shard.to_delayed()
    if len(parts) != plan.total:
        raise RuntimeError(f"expected {plan.total} shard partitions, got {len(parts)}")
    tasks, names = [], []
    for index, part in enumerate(parts):
        split, i = plan.shard_of(index)
        name = shards.shard_filename(dataset, split, i, plan.num_shards[split],
                                     config.compression)
        names.append((split, name))
        tasks.append(dask.delayed(write_one_shard)(
            part, storage.join(version_uri, name), columns, schema, config))
    log.debug("writing %d shard(s) for %s (%.0f B/record): %s", plan.total, dataset,
             plan.record_bytes, plan.num_shards)
    entries = dask.compute(*tasks)
    out: dict[str, list[dict]] = {s: [] for s in plan.splits}
    for (split, name), entry in zip(names, entries):
        out[split].append({**entry, "file": name})
    return out


def write_frame(frame: pd.DataFrame, dataset: str, folder_uri: str, schema: dict[str, Any],
                splits: list[str], config: WriteConfig,
                on_record: Callable[[str, bytes], None] | None = None) -> dict[str, list[dict]]:
    """Every split's shards of one in-memory frame (a segment), written by this process.

    The same plan and row order as ``write_splits``, without Dask: one frame small enough
    for one task. ``on_record(split, record)`` sees every record written. A frame with
    ``RECORD_COL`` (see ``encode_rows``) is written without encoding anything again.
    """
    _encoder(config.encoder)
    columns = [*schema["features"], schema["label"]["name"]]
    counts = frame[SPLIT_COL].value_counts()
    plan = plan_shards({s: int(counts.get(s, 0)) for s in splits},
                       measure_record_bytes(frame.head(config.sample_rows), columns, schema,
                                            config.compression),
                       config.target_bytes, config.min_train_shards)
    assigned = _assign_shards(frame, plan)
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


def write_shards(rows: pd.DataFrame, dataset: str, uri: str, schema: dict[str, Any],
                 splits: list[str], config: WriteConfig) -> dict[str, SplitInfo]:
    """A segment's shards from its Example-ready rows (``etl.transform.tabular.prepare``),
    written by this process; per split its records, bytes, content hash and shard entries
    (what ``segment.json`` lists)."""
    digests: dict[str, list[int]] = {}
    written = write_frame(
        encode_rows(rows, schema, config), dataset, uri, schema, splits, config,
        lambda split, rec: digests.setdefault(split, []).append(segment.record_digest(rec)))
    return {split: segment.split_info(entries, segment.content_hash(digests.get(split, [])))
            for split, entries in written.items()}


def encode_rows(frame: pd.DataFrame, schema: dict[str, Any], config: WriteConfig) -> pd.DataFrame:
    """``frame`` with each row's Example bytes in ``RECORD_COL``, encoded in chunks of
    ``config.chunk_rows`` in the frame's order."""
    columns = [*schema["features"], schema["label"]["name"]]
    records = np.empty(len(frame), dtype=object)
    for i in range(0, len(frame), config.chunk_rows):
        chunk = frame.iloc[i:i + config.chunk_rows][columns]
        records[i:i + len(chunk)] = _encoder(config.encoder)(chunk, schema)
    return frame.assign(**{RECORD_COL: records})


def _by_shard(assigned: pd.DataFrame, total: int) -> Iterator[tuple[int, pd.DataFrame]]:
    groups = dict(tuple(assigned.groupby(SHARD_COL, sort=True)))
    for index in range(total):
        yield index, groups.get(index, assigned.iloc[:0])
