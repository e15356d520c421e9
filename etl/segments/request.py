"""What a kind's segment builder is asked and answers: one request in, one window out.

Every dataset kind builds a version the same way -- plan the window, build its missing
segments, judge the window -- and only the how differs (``etl.segments.tabular``,
``etl.segments.images``; ``etl.kinds`` picks one). The pipeline holds the version's writer
lease around ``judge`` and writes the manifest from what these carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from etl.segments.plan import known_segments
from etl.versions.manifest import Manifest
from etl.versions.segment import SegmentMeta

if TYPE_CHECKING:
    from etl.spec import Spec
    from etl.spec.images import ImageSpec
    from etl.validation import DatasetChecks, SplitSuite
    from etl.write.writer import WriteConfig

Metas = list[tuple[str, SegmentMeta]]  # (segment URI, segment.json), in window order


@dataclass(frozen=True)
class BuildRequest:
    """One run's window, as a segment builder needs it.

    ``previous``: the newest published manifest of the dataset (which segments hold which
    partitions, the label's classes, the statistics drift is measured against), or None.
    ``scratch_uri``: a run-private folder for anything that is not a segment.
    """

    spec: Spec | ImageSpec
    root: str
    start: datetime | None
    end: datetime
    run_id: str
    write: WriteConfig
    dask_address: str | None
    scratch_uri: str
    previous: Manifest | None = None


@dataclass(frozen=True)
class RunInputs:
    """What every segment of a tabular run reads once, before planning: the suite split by
    level and its dataset-level checks (what ``judge`` needs too), each column's parse kind,
    the lookups (joined to every segment's rows) and the digests of the spec and lookup files."""

    suite: SplitSuite
    checks: DatasetChecks
    kinds: dict[str, str]
    lookups: list[Any]  # each join's right side (pandas frames)
    spec_digest: str
    lookups_digest: str | None


@dataclass
class Window:
    """The window's segments, built or found, in order; ``context`` is what the kind's
    ``judge`` needs (a tabular run's inputs; images need none)."""

    spec: Spec | ImageSpec  # the spec with its label resolved (classes fixed for this version)
    metas: Metas
    new: list[SegmentMeta]  # segments holding partitions the previous version did not
    built: int  # segments this run built (compactions not counted)
    context: RunInputs | None = None
    timings: dict[str, float] = field(default_factory=dict)
    previous: Manifest | None = None  # the request's: what drift is measured against


@dataclass(frozen=True)
class Judged:
    """The window's validation summary, its statistics (``label_schema`` included) and drift
    against the previous version (None: nothing new, or no previous version)."""

    summary: dict[str, Any]
    statistics: dict[str, Any]
    drift: dict[str, Any] | None = None


def new_segments(metas: Metas, previous: Manifest | None) -> list[SegmentMeta]:
    """Segments holding a raw partition (by digest) the previous version did not hold."""
    seen = {p for seg in known_segments(previous) for p in seg.partitions}
    return [m for _, m in metas if not set(m.partitions) <= seen]
