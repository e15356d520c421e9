"""What every kind's landing shares: its options, its report and the one way a raw file lands.

``etl land`` copies a dataset's upstream files into the raw zone (``<root>/raw``) the way an
upstream system would; each kind knows its upstreams (``etl.kinds.tabular.land``,
``etl.kinds.images.source``) and writes every file through ``land_files``. Landing is
idempotent: a file already there with the same bytes is left alone (so its mtime/generation,
part of every version's source fingerprint, does not change), and a file with *different*
bytes is refused unless ``overwrite`` is set, because the raw zone is never modified.
Not a run's business: the registry imports a kind's landing only for ``etl land``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date

from etl import storage
from etl.errors import PipelineError

WRITE_THREADS = 8


@dataclass(frozen=True)
class LandOptions:
    """How much to land: days in ``[start, end)`` of a day-partitioned source (None:
    unbounded), each flight ``scale`` times (memory tests), replacing files whose content
    differs only with ``overwrite``. A kind refuses the options its sources cannot honour."""

    start: date | None = None
    end: date | None = None
    scale: int = 1
    overwrite: bool = False


@dataclass
class LandReport:
    """What a landing did, per file outcome; ``unit`` is what one landed row is called in
    messages ("1797 images", not "1797 rows")."""

    raw_uri: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    rows: int = 0
    unit: str = "rows"


class LandingConflictError(PipelineError):
    """A raw file exists with different bytes; the raw zone is append-only."""


def land_one(uri: str, data: bytes | Callable[[], bytes], overwrite: bool,
             report: LandReport) -> None:
    """Write one raw file unless the same bytes are there; different bytes need ``overwrite``."""
    data = data() if callable(data) else data
    if storage.exists(uri):
        if storage.read_bytes(uri) == data:
            report.unchanged.append(uri)
            return
        if not overwrite:
            raise LandingConflictError(
                f"{uri}: already landed with different content ({storage.stat(uri)['size']} "
                f"bytes there, {len(data)} new); the raw zone is append-only, pass overwrite=True "
                f"to replace it")
        report.replaced.append(uri)
    else:
        report.written.append(uri)
    storage.write_bytes_atomic(uri, data)


def land_files(jobs: Sequence[tuple[str, bytes | Callable[[], bytes]]], overwrite: bool,
               report: LandReport) -> LandReport:
    """``land_one`` each (URI, bytes or a function making them) on ``WRITE_THREADS`` threads;
    the report's lists sorted."""
    with ThreadPoolExecutor(WRITE_THREADS) as pool:
        for fut in [pool.submit(land_one, uri, data, overwrite, report) for uri, data in jobs]:
            fut.result()
    for outcome in (report.written, report.unchanged, report.replaced):
        outcome.sort()
    return report


def parse_day(text: str) -> date:
    """A CLI/param day (2013-01-01) with the expected format in the error."""
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"expected a day like 2013-01-01, got {text!r}") from exc
