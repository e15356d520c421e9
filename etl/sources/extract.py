"""A run's raw data: the window's raw partitions (one listing), and reading a segment's rows.

Only the files of the window are listed and read (the spec's date partitioning); rows are kept
when their event time is inside [start, end) -- or unparseable, so validation can reject them
with a reason -- and a row whose event time lies outside its file's partition is misfiled.
Values stay strings exactly as the raw files hold them (see ``etl.spec``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from etl import storage
from etl.errors import PipelineError
from etl.provenance import iso
from etl.sources.lookups import join_lookups
from etl.sources.read import as_frame, read_source_table, source_uri
from etl.spec import Source, Spec
from etl.versions.segment import json_digest

log = logging.getLogger(__name__)

T = TypeVar("T")


class SourceFilesError(PipelineError):
    """Files of the window are missing, or no file matched."""


@dataclass(frozen=True)
class RawPartition:
    """One raw partition (a landed file: a day of a day-partitioned source, or the whole of
    an unpartitioned one) and the part of the window it holds."""

    label: str  # 20130101 (its period), or "all" for an unpartitioned source
    uri: str
    start: datetime | None  # the part of the window it holds (None: unbounded)
    end: datetime | None
    period: tuple[datetime, datetime] | None  # the partition's own span, if partitioned
    file: dict[str, Any]  # storage.stat of its file: size, generation or mtime
    digest: str  # of everything its rows' bytes depend on (etl.segments.plan)
    piece: tuple[int, int] | None = None  # (i, k): the i-th of k row ranges of a large file

    @property
    def size(self) -> int:
        whole = int(self.file.get("size") or 0)
        return whole if self.piece is None else whole // self.piece[1]

    @property
    def key(self) -> str:
        """How a segment lists it: the partition's label, with its piece if it is one."""
        return self.label if self.piece is None else \
            f"{self.label}.{self.piece[0] + 1}of{self.piece[1]}"


@dataclass(frozen=True)
class WindowRows:
    """A segment's rows inside the window, lookups joined (``rows``), and the rows whose event
    time lies outside their own file's partition (``misfiled``, as they arrived, with one
    reason each in ``reasons``)."""

    rows: pd.DataFrame
    misfiled: pd.DataFrame
    reasons: list[str]


def _period_step(granularity: str) -> timedelta:
    return timedelta(hours=1) if granularity == "hour" else timedelta(days=1)


def _floor(ts: datetime, granularity: str) -> datetime:
    ts = ts.replace(minute=0, second=0, microsecond=0)
    return ts if granularity == "hour" else ts.replace(hour=0)


def _listed_periods(root: str, source: Source, end: datetime
                    ) -> dict[datetime, dict[str, Any]]:
    """Every landed period of a partitioned source before ``end``, with its file's size and
    generation (mtime): one listing, however many periods."""
    part = source.partitioning
    pattern = source_uri(root, source, **{part.placeholder: "*"})
    prefix, suffix = storage.get_fs(pattern)[1].split("*", 1)
    found: dict[datetime, dict[str, Any]] = {}
    for match, info in storage.glob_stat(pattern).items():
        text = match[len(prefix):len(match) - len(suffix)] if suffix else match[len(prefix):]
        try:
            period = datetime.strptime(text, part.format).replace(tzinfo=end.tzinfo)
        except ValueError:
            log.warning("ignoring %s: %r does not match %s", match, text, part.format)
            continue
        if period < end:
            found[period] = {**info, "uri": source_uri(root, source, **{part.placeholder: text})}
    return found


def window_files(root: str, source: Source, start: datetime | None, end: datetime) -> list[str]:
    """URIs of the files holding events in [start, end), checking none is missing."""
    return [info["uri"] for _, info in window_listing(root, source, start, end)]


def window_listing(root: str, source: Source, start: datetime | None,
                   end: datetime) -> list[tuple[datetime | None, dict[str, Any]]]:
    """(period start, ``storage.stat`` of its file) of each landed partition of the window,
    in period order; one ``(None, stat)`` for an unpartitioned source.

    Raises:
        SourceFilesError: no file holds events of the window, or (``require_complete``) a
            period inside the window has no file.
    """
    part = source.partitioning
    if part is None:
        uri = source_uri(root, source)
        try:
            return [(None, storage.stat(uri))]
        except FileNotFoundError:
            raise SourceFilesError(f"source {source.name!r}: {uri} does not exist") from None
    present, missing = window_gaps(root, source, start, end)
    if not present:
        raise SourceFilesError(f"source {source.name!r}: no file of {source.uri} holds events "
                               f"in [{start or 'unbounded'}, {end})")
    if missing and part.require_complete:
        shown = ", ".join(m.strftime(part.format) for m in missing[:10])
        raise SourceFilesError(f"source {source.name!r}: {len(missing)} partition(s) of the "
                               f"window missing ({source.uri}): {shown}")
    return sorted(present.items())


def window_gaps(root: str, source: Source, start: datetime | None, end: datetime
                ) -> tuple[dict[datetime, dict[str, Any]], list[datetime]]:
    """(landed periods of the window with their stat, periods of the window with no file) of
    a partitioned source: one listing. The one definition of "missing" -- the build's
    ``require_complete`` check and the wait for late data (``etl.pipeline.arrival``) use it.
    An unbounded window (``start`` None) starts at the first landed period."""
    part = source.partitioning
    assert part is not None
    step = _period_step(part.granularity)
    first = _floor(start, part.granularity) if start else None
    present = {p: info for p, info in _listed_periods(root, source, end).items()
               if first is None or p >= first}
    missing: list[datetime] = []
    p = first or min(present, default=end)
    while p < end:
        if p not in present:
            missing.append(p)
        p += step
    return present, missing


def period_end(period: datetime, source: Source) -> datetime:
    """Where a partition that starts at ``period`` ends."""
    assert source.partitioning is not None
    return period + _period_step(source.partitioning.granularity)


def fingerprint(uris: list[str]) -> dict[str, Any]:
    """Each source file with size and mtime/generation, plus one sha256 over that list."""
    files = []
    for uri in sorted(uris):
        info = storage.stat(uri)
        files.append({"uri": uri, **{k: v for k, v in info.items() if k != "uri"}})
    return {"sha256": json_digest(files), "files": files}


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


def event_times(df: pd.DataFrame, source: Source) -> pd.Series | None:
    """The rows' event times, parsed (unparseable: NaT); None without an event time."""
    if source.event_time is None:
        return None
    return pd.to_datetime(df[source.event_time], utc=True, errors="coerce", format="ISO8601")


def outside_each(times: pd.Series, bounds: list[tuple[datetime | None, datetime | None]],
                 counts: list[int]) -> np.ndarray:
    """Rows whose event time parsed and lies outside their own file's [start, end) (None:
    unbounded): ``bounds`` and ``counts`` per file, in the frame's order. Unparseable times
    stay, so validation rejects them with a reason."""
    stamps = times.dt.tz_convert(None).to_numpy(dtype="datetime64[ns]")

    def per_row(values: list[datetime | None], unbounded: str) -> np.ndarray:
        edges = np.array([np.datetime64(unbounded, "ns") if v is None else
                          np.datetime64(v.replace(tzinfo=None), "ns") for v in values],
                         dtype="datetime64[ns]")
        return np.repeat(edges, counts)

    lo = per_row([b[0] for b in bounds], "1677-09-22")
    hi = per_row([b[1] for b in bounds], "2262-04-11")
    return ~np.isnat(stamps) & ((stamps < lo) | (stamps >= hi))


def read_files(uris: list[str], source: Source,
               pieces: Sequence[tuple[int, int] | None] | None = None
               ) -> tuple[pd.DataFrame, list[int]]:
    """Every row of some files of ``source``, as they arrived (no time filter, no join), and
    each file's row count: read as Arrow tables, made one frame at the end (a frame per file
    costs more than a one-row day's rows). ``pieces[i] = (j, k)`` keeps only the j-th of k
    consecutive, equal row ranges of file i."""
    tables = [_piece(read_source_table(u, source), piece)
              for u, piece in zip(uris, pieces or [None] * len(uris), strict=True)]
    frame = as_frame(pa.concat_tables(tables) if len(tables) > 1 else tables[0])
    return frame, [t.num_rows for t in tables]


def _piece(table: pa.Table, piece: tuple[int, int] | None) -> pa.Table:
    if piece is None:
        return table
    i, k = piece
    lo, hi = table.num_rows * i // k, table.num_rows * (i + 1) // k
    return table.slice(lo, hi - lo)


def read_window(partitions: Sequence[RawPartition], spec: Spec,
                lookups: list[pd.DataFrame]) -> WindowRows:
    """The rows of some consecutive raw partitions inside the window, the spec's lookups
    joined; misfiled rows set apart with their reason, never silently dropped.

    A row of a partition outside the window (a window that cuts a day) is not read. The files
    are read as Arrow tables and made one frame, and both checks run once over it with each
    row's own bounds: a segment of a thousand one-row days costs about what one file of those
    rows does.
    """
    source = spec.primary_source
    raw, counts = read_files([p.uri for p in partitions], source,
                             [p.piece for p in partitions])
    times = event_times(raw, source)
    if times is None:
        return WindowRows(join_lookups(raw, spec, lookups), raw.iloc[:0], [])
    period = [p.period or (None, None) for p in partitions]
    misfiled = outside_each(times, period, counts)
    reasons = [f"{source.event_time} outside the partition {partitions[i].label} "
               f"[{iso(period[i][0])}, {iso(period[i][1])}) of its file"
               for i in np.repeat(np.arange(len(counts)), counts)[misfiled]]
    elsewhere = outside_each(times, [(p.start, p.end) for p in partitions], counts)
    rows = raw[~misfiled & ~elsewhere].reset_index(drop=True)
    return WindowRows(join_lookups(rows, spec, lookups), raw[misfiled].copy(), reasons)
