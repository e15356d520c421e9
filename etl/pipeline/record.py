"""What a run is told (``RunOptions``) and what it records (``RunRecord``), each built once.

The options come from the CLI flags or the DAG's Params; the record is made by
``RunRecord.new`` from the spec and the interval, travels inside the version's
handed-off writer lease (the draft) from ``build`` to ``publish`` (only URIs travel between Airflow tasks), and is
what the step summaries print.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from etl import storage, versions
from etl.provenance import iso, run_key, utc
from etl.validation.suite import check_mode

LOCK_WAIT_S = 600.0  # a concurrent run of the same interval usually finishes within this


@dataclass(frozen=True)
class RunOptions:
    """How one run builds its version (defaults: the spec's settings).

    ``force``: publish a new ``-rN`` revision when the interval's version exists.
    ``source_uri``: the primary source's URI pattern instead of the spec's.
    ``shard_bytes`` / ``compression``: the spec's ``shards`` settings, overridden.
    """

    mode: str = "quarantine"
    shard_bytes: int | None = None
    compression: str | None = None
    force: bool = False
    source_uri: str | None = None
    dask_address: str | None = None
    lock_wait_s: float = LOCK_WAIT_S

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.shard_bytes is not None and self.shard_bytes < 1:
            raise ValueError(f"shard_bytes: expected a positive number, got {self.shard_bytes}")


@dataclass
class RunRecord:
    """One run of one interval: who, which window, which version, what it measured."""

    spec: str
    dataset: str
    root: str
    version: str  # the interval's version id; ``target_version`` may be its -rN revision
    start: datetime | None
    end: datetime
    run_id: str
    run_dir: str  # scratch space under <root>/staging (learning classes), removed at publish
    options: RunOptions
    target_version: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    validation: dict[str, Any] | None = None
    writer_lock: dict[str, str] | None = None

    @classmethod
    def new(cls, spec: Any, root: str, interval_end: str | datetime,
            interval_start: str | datetime | None, run_id: str | None,
            options: RunOptions) -> RunRecord:
        """The record of a run of [start, end) (ValueError unless start < end)."""
        end, start = utc(interval_end, "interval_end"), utc(interval_start, "interval_start")
        if end is None or (start is not None and start >= end):
            raise ValueError(f"interval: expected start < end, got [{start}, {end})")
        version = versions.version_id(end, start)
        run_id = run_id or f"manual__{iso(datetime.now(UTC))}_{uuid.uuid4().hex[:8]}"
        return cls(spec=str(spec.path), dataset=spec.name, root=root, version=version,
                   start=start, end=end, run_id=run_id,
                   run_dir=storage.safe_join(root, "staging", spec.name, version,
                                             run_key(run_id)), options=options)

    @property
    def interval(self) -> dict[str, str | None]:
        return {"start": iso(self.start), "end": iso(self.end)}

    def to_json(self) -> dict[str, Any]:
        """The record as the draft stores it (and ``publish`` reads it)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("start", "end", "options")}
        return {**out, "interval": self.interval, "force": self.options.force,
                "source_uri": self.options.source_uri, "layout": "segments"}


def published(root: str, dataset: str, version: str) -> bool:
    return storage.exists(storage.join(versions.version_uri(root, dataset, version),
                                       "manifest.json"))
