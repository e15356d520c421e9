"""Planning a run: the window's raw partitions, the segments that already hold them, what to build.

A segment is one build over a contiguous run of raw partitions (days of a day-partitioned
source, the whole of an unpartitioned one), bounded by raw bytes: a nightly run that adds a few
small days builds one segment, a bulk build of N bytes about N / ``SEGMENT_RAW_BYTES``; a
partition larger than that is built as pieces (consecutive row ranges of its file).

Each partition has a digest of everything its rows' bytes depend on -- its raw file (size,
generation), the lookups, the spec and suite files, the label's classes, the part of it inside
the window. A segment lists its partitions with their digests, and its id digests that list,
so an existing segment whose list matches a run of the window's partitions is exactly what this
run would build. The previous version's manifest says which segments hold which partitions:
planning reads it and one listing of the raw files, never a segment of its own. A re-delivered
or changed partition matches nothing, so only the segment that held it is built again.

Planning is pure: the listing, the digests and the previous manifest in, segment tasks out
(``plan_window``). The listing itself is one ``storage.glob_stat`` of the primary source's
partitions (``window_listing``; its gaps, ``window_gaps``, are also what the wait for late
data asks). The build reads the files, the lookups and the suite (the kind's build,
``etl.kinds.tabular.window``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from etl import storage
from etl.errors import PipelineError
from etl.provenance import iso
from etl.spec import Source, Spec
from etl.versions import segment
from etl.versions.manifest import Manifest, SegmentEntry
from etl.versions.segment import Metas, SegmentMeta, json_digest

# Raw bytes one segment is built from: what one GX run validates in one Dask task, so a bulk
# build still spreads over the workers (a year of flights is a few segments, not one).
SEGMENT_RAW_BYTES = 16 * 2**20
_PERIOD_NAME = {"day": "%Y%m%d", "hour": "%Y%m%dT%H"}

Listing = Sequence[tuple[datetime | None, dict[str, Any]]]  # window_listing
T = TypeVar("T")
log = logging.getLogger(__name__)



class SourceFilesError(PipelineError):
    """Files of the window are missing, or no file matched."""


@dataclass(frozen=True)
class RawPartition:
    """One raw partition (a landed file: a day of a day-partitioned source, or the whole of
    an unpartitioned one) and the part of the window it holds."""

    name: str  # 20130101 (its period's), or "all" for an unpartitioned source
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
        """How a segment lists it: the partition's name, with its piece if it is one."""
        return self.name if self.piece is None else \
            f"{self.name}.{self.piece[0] + 1}of{self.piece[1]}"

@dataclass(frozen=True)
class SegmentTask:
    """One segment of the window: its id and folder and the consecutive raw partitions it
    holds."""

    segment: str
    uri: str
    extent: str  # of its raw partitions: 20130101, or 20130101_20130131
    partitions: tuple[RawPartition, ...]
    fingerprint: dict[str, Any]

    @property
    def raw_bytes(self) -> int:
        return sum(p.size for p in self.partitions)

    @property
    def interval(self) -> tuple[datetime | None, datetime | None]:
        return self.partitions[0].start, self.partitions[-1].end


@dataclass(frozen=True)
class Digests:
    """What every raw partition's digest holds besides its own file: the spec and suite
    files (``spec_digest``), the lookup files (``lookups_digest``; None: no joins) and the
    label's classes (None while they are still being learned: the digests are provisional)."""

    spec: str
    lookups: str | None
    label: dict[str, Any] | None


@dataclass(frozen=True)
class WindowPlan:
    """Every segment of the window in raw-partition order; ``known``: ids of the segments the
    previous version listed that this window reuses."""

    tasks: tuple[SegmentTask, ...]
    known: frozenset[str]


def plan_window(root: str, spec: Spec, start: datetime | None, end: datetime,
                listing: Listing, digests: Digests,
                previous: Manifest | None = None) -> WindowPlan:
    """The window's segments: the ``previous`` manifest's wherever their raw partitions
    match, new ones of at most ``SEGMENT_RAW_BYTES`` elsewhere."""
    shared = {"dataset": spec.name, "spec": digests.spec, "lookups": digests.lookups,
              "label": digests.label}
    partitions = in_pieces(window_partitions(root, spec, start, end, listing, shared),
                           SEGMENT_RAW_BYTES)
    tasks, reused = [], set()
    for seg, run in cover(partitions, known_segments(previous)):
        if seg is None:
            tasks += [_task(root, spec, group, digests.lookups)
                      for group in group_by_size(run, lambda p: p.size, SEGMENT_RAW_BYTES)]
        else:
            tasks.append(_task(root, spec, run, digests.lookups, seg))
            reused.add(seg)
    return WindowPlan(tuple(tasks), frozenset(reused))


def known_segments(previous: Manifest | None) -> list[SegmentEntry]:
    """The ``segments`` entries (id, raw partitions) of the previous manifest."""
    return list(previous.segments) if previous is not None else []


def new_segments(metas: Metas, previous: Manifest | None) -> list[SegmentMeta]:
    """Segments holding a raw partition (by digest) the previous version did not hold."""
    seen = {p for seg in known_segments(previous) for p in seg.partitions}
    return [m for _, m in metas if not set(m.partitions) <= seen]


def spec_digest(spec: Spec) -> str:
    """sha256 of the spec and suite files: any edit rebuilds the segments."""
    digest = hashlib.sha256()
    for path in (spec.path, spec.expectations):
        digest.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def lookups_digest(root: str, fingerprint: dict[str, Any] | None) -> str | None:
    """The digest of the lookup files (``fingerprint`` of them, keyed by
    their path under the root); None without joins."""
    return json_digest(_relative(root, fingerprint["files"])) if fingerprint else None


def window_partitions(root: str, spec: Spec, start: datetime | None, end: datetime,
                      listing: Listing, shared: dict[str, Any]) -> list[RawPartition]:
    """The window's raw partitions in order, each with its digest."""
    primary = spec.primary_source
    partitions = []
    for period, info in listing:
        span = None
        if period is None:
            name, lo, hi, whole = "all", start, end, primary.event_time is None
        else:
            stop = period_end(period, primary)
            span = (period, stop)
            lo, hi = max(period, start) if start else period, min(stop, end)
            name = period.strftime(_PERIOD_NAME[primary.partitioning.granularity])
            whole = primary.event_time is None or (lo, hi) == span
        entry = _relative(root, [info])[0]
        material = {**shared, "partition": name, "files": [entry],
                    "clip": None if whole else [iso(lo), iso(hi)]}
        partitions.append(RawPartition(name, info["uri"], lo, hi, span, info,
                                       json_digest(material)[:16]))
    return partitions


def cover(partitions: list[RawPartition], known: Sequence[SegmentEntry]
          ) -> list[tuple[str | None, list[RawPartition]]]:
    """The window as consecutive runs: ``(segment id, its raw partitions)`` where a known
    segment holds exactly those (the longest one that fits), ``(None, partitions)`` for runs no
    segment holds."""
    by_first: dict[tuple[str, str], list[SegmentEntry]] = {}
    for seg in known:
        if seg.partitions:
            by_first.setdefault(seg.partitions[0], []).append(seg)
    out: list[tuple[str | None, list[RawPartition]]] = []
    i = 0
    while i < len(partitions):
        here = [(p.key, p.digest) for p in partitions[i:]]
        fits = [s for s in by_first.get(here[0], [])
                if tuple(here[:len(s.partitions)]) == s.partitions]
        best = max(fits, key=lambda s: len(s.partitions), default=None)
        if best is None:
            if out and out[-1][0] is None:
                out[-1][1].append(partitions[i])
            else:
                out.append((None, [partitions[i]]))
            i += 1
        else:
            n = len(best.partitions)
            out.append((best.segment, partitions[i:i + n]))
            i += n
    return out


def in_pieces(partitions: list[RawPartition], limit: int) -> list[RawPartition]:
    """A partition of more than ``limit`` raw bytes as k pieces of at most that, each a
    consecutive k-th of its rows (a large day, or a large unpartitioned file, is built as k
    segments: bounded memory, spread over the workers)."""
    out = []
    for partition in partitions:
        k = -(-partition.size // limit) if limit > 0 else 1
        out += [partition] if k <= 1 else [replace(partition, piece=(i, k)) for i in range(k)]
    return out


def _task(root: str, spec: Spec, partitions: list[RawPartition], lookups: str | None,
          seg: str | None = None) -> SegmentTask:
    first, last = partitions[0].key, partitions[-1].key
    extent = first if len(partitions) == 1 else f"{first}_{last}"
    seg = seg or segment.segment_id(extent, {"partitions": [[p.key, p.digest] for p in partitions]})
    files = _relative(root, [p.file for p in partitions])
    return SegmentTask(seg, segment.segment_uri(root, spec.name, seg), extent, tuple(partitions),
                       {"files": files, "lookups": lookups})


def _relative(root: str, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """File entries keyed by their path under the root: a copied root keeps its segment ids."""
    base = root.rstrip("/") + "/"
    return [{**f, "uri": f["uri"].removeprefix(base)} for f in files]


def late_partitions(root: str, plan: WindowPlan, previous: Manifest | None
                    ) -> tuple[list[str], list[str]]:
    """(re-delivered, landed late): partitions of the window whose file differs from the one
    the previous version was built from, and partitions older than that version's newest one
    that it did not hold inside its own window (they landed after it was published). A
    partition before that window's start was never that version's to hold: a wider window
    reads it, nothing was late. Their segments are new (their digests changed), so this run
    builds them; the lists only say why."""
    if previous is None:
        return [], []
    listed = previous.sources.files if isinstance(previous.sources.files, list) else []
    files = {f["uri"]: f for f in listed if isinstance(f, dict) and "uri" in f}
    held = [p[0] for seg in previous.segments for p in seg.partitions]
    if not files or not held:
        return [], []
    since = previous.interval.start
    newest, redelivered, late = max(held), [], []
    for partition in (p for t in plan.tasks for p in t.partitions):
        entry = _relative(root, [partition.file])[0]
        if entry["uri"] in files:
            if files[entry["uri"]] != entry:
                redelivered.append(partition.name)
        elif partition.name < newest and _inside(partition, since):
            late.append(partition.name)
    return redelivered, late


def _inside(partition: RawPartition, since: str | None) -> bool:
    """Whether ``partition`` lies in a window that starts at ``since`` (None: the start)."""
    if since is None or partition.period is None:
        return True
    start = datetime.fromisoformat(since)
    return partition.period[0] >= (start if start.tzinfo else start.replace(tzinfo=UTC))


# --- the window's raw partitions, from one listing -------------------------------------------

def source_uri(root: str, source: Source, **fmt: str) -> str:
    """A source file's URI: its pattern with ``fmt`` filled in, under ``root`` unless it is
    an absolute URI."""
    rel = source.uri
    for key, value in fmt.items():
        rel = rel.replace("{" + key + "}", value)
    return rel if "://" in rel else storage.safe_join(root, rel)


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


def period_of(key: str, source: Source) -> tuple[datetime, datetime] | None:
    """The span of the partition a segment lists as ``key`` (``20130105``, or a piece of it,
    ``20130105.1of3``); None for an unpartitioned source's ``all`` or a key of another form."""
    if source.partitioning is None:
        return None
    try:
        start = datetime.strptime(key.split(".", 1)[0],
                                  _PERIOD_NAME[source.partitioning.granularity])
    except (KeyError, ValueError):
        return None
    start = start.replace(tzinfo=UTC)
    return start, period_end(start, source)


def fingerprint(uris: list[str]) -> dict[str, Any]:
    """Each source file with size and mtime/generation, plus one sha256 over that list."""
    files = []
    for uri in sorted(uris):
        info = storage.stat(uri)
        files.append({"uri": uri, **{k: v for k, v in info.items() if k != "uri"}})
    return {"sha256": json_digest(files), "files": files}


def group_by_size(items: Iterable[T], size: Callable[[T], int], limit: int) -> list[list[T]]:
    """Consecutive items in groups of at most ``limit`` (an item larger than that alone): the
    one grouping by size -- raw partitions into segments, segments into the batches of one
    Dask task, sampled pieces into the tasks of ``spec init``."""
    groups: list[list[T]] = []
    total = 0
    for item in items:
        n = size(item)
        if groups and total + n <= limit:
            groups[-1].append(item)
            total += n
        else:
            groups.append([item])
            total = n
    return groups
