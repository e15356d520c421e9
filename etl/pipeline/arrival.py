"""Has a run's window landed? What the wait for late data asks before ``build`` starts.

"Missing" has one definition: the periods of the window with no file
(``etl.sources.extract.window_gaps``), the same the build's ``require_complete`` check
refuses. A source that allows gaps (``require_complete: false``), an unpartitioned source
that exists and an images dataset have nothing to wait for. One listing per check, so the
triggerer can ask again every minute cheaply; no Dask, GX or TensorFlow is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from etl import kinds, storage
from etl.sources.extract import window_gaps
from etl.sources.read import source_uri as resolve_uri


@dataclass(frozen=True)
class Arrival:
    """What a window still misses: ``missing`` partitions (the source's own spelling, e.g.
    ``2013-01-03``, or the file URI of an unpartitioned source), in order; ``where`` is the
    source's URI pattern, for messages."""

    dataset: str
    where: str
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing

    def shown(self, limit: int = 10) -> str:
        """The missing partitions, the first ``limit`` of them, for one log line."""
        more = len(self.missing) - limit
        return ", ".join(self.missing[:limit]) + (f" and {more} more" if more > 0 else "")


def check_arrival(dataset: str, root: str, end: datetime, start: datetime | None = None,
                  source_uri: str | None = None) -> Arrival:
    """The partitions of ``dataset``'s window [start, end) that have not landed under ``root``.

    ``source_uri``: the run's raw-source override (Param ``source_uri``), as the build uses it.
    """
    spec = kinds.load_spec(dataset, source_uri=source_uri)
    source = getattr(spec, "primary_source", None)
    if source is None:  # images: one folder, listed by the build
        return Arrival(dataset, spec.source.uri)
    part = source.partitioning
    if part is None:
        uri = resolve_uri(root, source)
        return Arrival(dataset, source.uri, () if storage.exists(uri) else (uri,))
    if not part.require_complete:
        return Arrival(dataset, source.uri)
    _, missing = window_gaps(root, source, start, end)
    return Arrival(dataset, source.uri, tuple(m.strftime(part.format) for m in missing))
