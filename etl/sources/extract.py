"""Extract: Dask reads the raw files of a run's window, joins the lookups, stages Parquet.

Only the files of the window are listed and read (the spec's date partitioning), rows are kept
when their event time is inside [start, end) -- or unparseable, so validation can reject them
with a reason -- and the small lookup tables are read once and broadcast to every partition.
Values stay strings exactly as the raw files hold them (see ``etl.spec``); no step collects the
dataset into one process: each partition is a group of files read by a worker.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import dask
import dask.dataframe as dd
import pandas as pd

from etl import storage
from etl.errors import PipelineError
from etl.sources.lookups import join_lookups, join_one, read_lookups, ts_keys_of
from etl.sources.read import STRING, read_source_file, source_uri
from etl.spec import Source, Spec

log = logging.getLogger(__name__)

T = TypeVar("T")
PARTITION_BYTES = 8 * 1024 * 1024  # raw bytes per Dask partition: a few per core at 1x flights
MAX_LISTED_PERIODS = 64  # bounded windows up to this many periods are stat'ed, not listed


class SourceFilesError(PipelineError):
    """Files of the window are missing, or no file matched."""


@dataclass(frozen=True)
class Extracted:
    """Where the staged Parquet is and which raw files (with size/mtime) it came from."""

    uri: str
    fingerprint: dict[str, Any]
    partitions: int
    lookup_duplicates: dict[str, int]


def _period_step(granularity: str) -> timedelta:
    return timedelta(hours=1) if granularity == "hour" else timedelta(days=1)


def _floor(ts: datetime, granularity: str) -> datetime:
    ts = ts.replace(minute=0, second=0, microsecond=0)
    return ts if granularity == "hour" else ts.replace(hour=0)


def _listed_periods(root: str, source: Source, end: datetime) -> dict[datetime, str]:
    """Every landed period of a partitioned source up to ``end`` (an unbounded window)."""
    part = source.partitioning
    pattern = source_uri(root, source, **{part.placeholder: "*"})
    fs, path = storage.get_fs(pattern)
    prefix, suffix = path.split("*", 1)
    found: dict[datetime, str] = {}
    for match in fs.glob(path):
        text = match[len(prefix):len(match) - len(suffix)] if suffix else match[len(prefix):]
        try:
            period = datetime.strptime(text, part.format).replace(tzinfo=end.tzinfo)
        except ValueError:
            log.warning("ignoring %s: %r does not match %s", match, text, part.format)
            continue
        if period < end:
            found[period] = source_uri(root, source, **{part.placeholder: text})
    return found


def window_files(root: str, source: Source, start: datetime | None, end: datetime) -> list[str]:
    """URIs of the files holding events in [start, end), checking none is missing."""
    return [uri for _, uri in window_partitions(root, source, start, end)]


def window_partitions(root: str, source: Source, start: datetime | None,
                      end: datetime) -> list[tuple[datetime | None, str]]:
    """(period start, file URI) of each landed partition of the window, in period order;
    one ``(None, uri)`` for an unpartitioned source. Raises SourceFilesError as
    ``window_files`` does."""
    part = source.partitioning
    if part is None:
        return [(None, source_uri(root, source))]
    step = _period_step(part.granularity)
    first = _floor(start, part.granularity) if start else None
    if first is not None and (end - first) / step <= MAX_LISTED_PERIODS:
        periods = {}
        p = first
        while p < end:
            periods[p] = source_uri(root, source, **{part.placeholder: p.strftime(part.format)})
            p += step
        present = {p: u for p, u in periods.items() if storage.exists(u)}
    else:
        present = {p: u for p, u in _listed_periods(root, source, end).items()
                   if first is None or p >= first}
        p = first or (min(present) if present else end)
        periods = {}
        while p < end:
            periods[p] = present.get(p, "")
            p += step
    if not present:
        raise SourceFilesError(f"source {source.name!r}: no file of {source.uri} holds events "
                               f"in [{start or 'unbounded'}, {end})")
    missing = sorted(p for p in periods if p not in present)
    if missing and part.require_complete:
        shown = ", ".join(m.strftime(part.format) for m in missing[:10])
        raise SourceFilesError(f"source {source.name!r}: {len(missing)} partition(s) of the "
                               f"window missing ({source.uri}): {shown}")
    return [(p, present[p]) for p in sorted(present)]


def period_end(period: datetime, source: Source) -> datetime:
    """Where a partition that starts at ``period`` ends."""
    assert source.partitioning is not None
    return period + _period_step(source.partitioning.granularity)


def window_bytes(root: str, spec: Spec, start: datetime | None, end: datetime,
                 limit: int | None = None) -> int:
    """Raw bytes a run of [start, end) reads: the window's primary files and the lookups.
    With ``limit``, counting stops once the sum exceeds it (what a caller comparing against
    a threshold needs, without a request per file of a long window)."""
    uris = [source_uri(root, spec.sources[j.source]) for j in spec.joins]
    uris += window_files(root, spec.primary_source, start, end)
    total = 0
    for uri in uris:
        total += int(storage.stat(uri).get("size") or 0)
        if limit is not None and total > limit:
            break
    return total


def fingerprint(uris: list[str]) -> dict[str, Any]:
    """Each source file with size and mtime/generation, plus one sha256 over that list."""
    files = []
    for uri in sorted(uris):
        info = storage.stat(uri)
        files.append({"uri": uri, **{k: v for k, v in info.items() if k != "uri"}})
    digest = hashlib.sha256(json.dumps(files, sort_keys=True, default=str).encode()).hexdigest()
    return {"sha256": digest, "files": files}


def group_by_size(items: Iterable[T], size: Callable[[T], int], limit: int) -> list[list[T]]:
    """Consecutive items in groups of about ``limit`` (a group closes once it reaches it)."""
    groups: list[list[T]] = []
    total = limit
    for item in items:
        if total >= limit:
            groups.append([])
            total = 0
        groups[-1].append(item)
        total += size(item)
    return groups


def group_files(files: list[dict[str, Any]], target_bytes: int) -> list[list[str]]:
    """Consecutive files in groups of about ``target_bytes``: one Dask partition per group."""
    return [[f["uri"] for f in group]
            for group in group_by_size(files, lambda f: int(f.get("size") or 0), target_bytes)]


def _read_group(uris: list[str], source: Source, start: datetime | None,
                end: datetime) -> pd.DataFrame:
    """One partition: the files of a group, rows outside the window dropped."""
    frames = [read_source_file(u, source) for u in uris]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if source.event_time is None:
        return df
    return df[~outside(df, source, start, end)].reset_index(drop=True)


def event_times(df: pd.DataFrame, source: Source) -> pd.Series | None:
    """The rows' event times, parsed (unparseable: NaT); None without an event time."""
    if source.event_time is None:
        return None
    return pd.to_datetime(df[source.event_time], utc=True, errors="coerce", format="ISO8601")


def outside(df: pd.DataFrame, source: Source, start: datetime | None,
            end: datetime | None, times: pd.Series | None = None) -> pd.Series:
    """Rows whose event time parses and falls outside [start, end) (unparseable ones stay,
    so validation rejects them with a reason); all False without an event time.
    ``times``: ``event_times(df, source)`` when the caller already parsed them."""
    ts = times if times is not None else event_times(df, source)
    if ts is None:
        return pd.Series(False, index=df.index)
    inside = pd.Series(True, index=df.index)
    if end is not None:
        inside &= ts < pd.Timestamp(end)
    if start is not None:
        inside &= ts >= pd.Timestamp(start)
    return ~inside & ts.notna()


def read_primary(uris: list[str], spec: Spec) -> pd.DataFrame:
    """Every row of some primary source files, as they arrived (no time filter, no join)."""
    frames = [read_source_file(u, spec.primary_source) for u in uris]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def joined_part(uris: list[str], spec: Spec, rights: list[pd.DataFrame]) -> pd.DataFrame:
    """Every row of some primary files, joined, in the spec's columns (no time filter)."""
    return join_lookups(read_primary(uris, spec), spec, rights)


def build_frame(root: str, spec: Spec, start: datetime | None, end: datetime,
                partition_bytes: int = PARTITION_BYTES) -> tuple[dd.DataFrame, dict, dict]:
    """The lazy extracted frame plus the source fingerprint and dropped lookup duplicates."""
    primary = spec.primary_source
    files = window_files(root, primary, start, end)
    rights, lookups, lookup_uris = read_lookups(root, spec)
    fp = fingerprint(files + lookup_uris)
    primary_files = [f for f in fp["files"] if f["uri"] in set(files)]
    groups = group_files(sorted(primary_files, key=lambda f: f["uri"]), partition_bytes)
    meta = pd.DataFrame({c: pd.Series([], dtype=STRING) for c in primary.columns})
    ddf = dd.from_map(_read_group, groups, source=primary, start=start, end=end, meta=meta,
                      enforce_metadata=False, label="read-" + primary.name)
    for join, right in zip(spec.joins, rights):
        ts_keys = ts_keys_of(spec, join)
        out_meta = join_one(ddf._meta, right.iloc[:0], list(join.on), ts_keys)
        # one graph key for the lookup, shared by every partition's task
        shared = dask.delayed(right, pure=True)
        ddf = ddf.map_partitions(join_one, shared, list(join.on), ts_keys, meta=out_meta)
    return ddf[list(spec.column_types())], fp, lookups


def extract(root: str, spec: Spec, out_uri: str, start: datetime | None, end: datetime,
            partition_bytes: int = PARTITION_BYTES) -> Extracted:
    """Stage the window as Parquet under ``out_uri`` (one file per partition)."""
    ddf, fp, lookups = build_frame(root, spec, start, end, partition_bytes)
    fs, path = storage.get_fs(out_uri)
    ddf.to_parquet(path, filesystem=fs, write_index=False, overwrite=False)
    log.debug("extracted %d file(s) of %s into %s (%d partitions)", len(fp["files"]), spec.name,
             out_uri, ddf.npartitions)
    return Extracted(uri=out_uri, fingerprint=fp, partitions=ddf.npartitions,
                     lookup_duplicates=lookups)
