"""What a kind's segment builder is given and returns: one request in, one window out.

Every dataset kind builds a version the same way -- plan the window, build its missing
segments, judge the window -- and only the how differs (``etl.segments.tabular``,
``etl.segments.images``; ``etl.kinds`` picks one). The pipeline holds the version's writer
lease around ``judge`` and writes the manifest from what these carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from etl.versions.manifest import Manifest, SegmentEntry
from etl.versions.segment import SegmentMeta

if TYPE_CHECKING:
    from etl.write.writer import WriteConfig

Metas = list[tuple[str, SegmentMeta]]  # (segment URI, segment.json), in window order


@dataclass(frozen=True)
class Part:
    """One raw partition of a segment: its file and the part of the window it holds."""

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
class SegmentTask:
    """One segment of the window: its id and folder and the consecutive partitions it holds."""

    segment: str
    uri: str
    partition: str  # the label of its partitions: 20130101, or 20130101_20130131
    parts: tuple[Part, ...]
    fingerprint: dict[str, Any]

    @property
    def raw_bytes(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def interval(self) -> tuple[datetime | None, datetime | None]:
        return self.parts[0].start, self.parts[-1].end


@dataclass(frozen=True)
class BuildRequest:
    """One run's window, as a segment builder needs it.

    ``previous``: the newest published manifest of the dataset (which segments hold which
    partitions, the label's classes, the statistics drift is measured against), or None.
    ``scratch_uri``: a run-private folder for anything that is not a segment.
    """

    spec: Any
    root: str
    start: datetime | None
    end: datetime
    run_id: str
    write: WriteConfig
    dask_address: str | None
    scratch_uri: str
    previous: Manifest | None = None


@dataclass
class Window:
    """The window's segments, built or found, in order; ``context`` is the kind's own
    (what its ``judge`` needs: the suite and checks, for tabular data)."""

    spec: Any  # the spec with its label resolved (classes fixed for this version)
    metas: Metas
    new: list[SegmentMeta]  # segments holding partitions the previous version did not
    built: int  # segments this run built (compactions not counted)
    context: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    previous: Manifest | None = None  # the request's: what drift is measured against


@dataclass(frozen=True)
class Judged:
    """The window's validation summary, its statistics (``label_schema`` included) and drift
    against the previous version (None: nothing new, or no previous version)."""

    summary: dict[str, Any]
    statistics: dict[str, Any]
    drift: dict[str, Any] | None = None


def known_segments(previous: Manifest | None) -> list[SegmentEntry]:
    """The ``segments`` entries (id, partitions) of the previous manifest."""
    return list(previous.segments) if previous is not None else []


def new_segments(metas: Metas, previous: Manifest | None) -> list[SegmentMeta]:
    """Segments holding a partition (by digest) the previous version did not hold."""
    seen = {p for seg in known_segments(previous) for p in seg.partitions}
    return [m for _, m in metas if not set(m.partitions) <= seen]
