"""Version ids, their one order, and where versions live: ``<root>/datasets/<dataset>/<version>/``.

An id records the data interval it was built from (``<end>_<start|all>[-rN]``), so versions
are ordered by interval (``version_key``, the only order of versions) and a forced re-publish
of one interval gets the next revision, never a clash.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from etl import storage

MANIFEST = "manifest.json"
LATEST = "LATEST"
WRITER_LOCK = "_WRITER"
SEGMENTS_DIR = "segments"  # <root>/datasets/<dataset>/segments/<segment>/: shared by versions
_TS = "%Y%m%dT%H%M%SZ"
_ID = re.compile(r"^(\d{8}T\d{6}Z)_(\d{8}T\d{6}Z|all)(?:-r([1-9]\d*))?$")
_DATASET = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,199}$")
_UNBOUNDED = dt.datetime.min.replace(tzinfo=dt.UTC)  # the start of an ``all`` window


@dataclass(frozen=True)
class VersionId:
    """Parsed version id (``start`` None: the window is unbounded, ``all``)."""

    end: dt.datetime
    start: dt.datetime | None
    revision: int = 1

    def __str__(self) -> str:
        return version_id(self.end, self.start, self.revision)


def version_key(version: str | VersionId) -> tuple[dt.datetime, dt.datetime, int]:
    """The one order of versions: ``sorted(ids, key=version_key)`` is oldest first, and the
    newest version is the one with the greatest key.

    By interval end, then interval start (``all``, the unbounded start, before every date),
    then revision. It is the data interval's order, never the publish time: an old interval
    published late (a backfill, a recovery) does not become the newest. Of two versions
    ending together, the one whose window starts later holds the more recent data on the
    whole, so it is the newer (``20140101T000000Z_20131225T000000Z`` after
    ``20140101T000000Z_all``); a forced re-publish (``-rN``) is newer than the one it
    re-publishes. Storage (listing, LATEST, retention), ``etl diff``, the training DAG's pick
    among its Asset events and the UI all order by this key; never compare ids as strings
    (``_all`` sorts after a date there, and ``-r10`` before ``-r2``).

    Raises:
        ValueError: ``version`` is not a version id.
    """
    v = version if isinstance(version, VersionId) else parse_version_id(version)
    return (v.end, v.start or _UNBOUNDED, v.revision)


def _utc(value: dt.datetime | str, what: str) -> dt.datetime:
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{what}: expected an ISO-8601 time, got {value!r}") from None
    if not isinstance(value, dt.datetime):
        raise TypeError(f"{what}: expected a datetime or ISO string, got {value!r}")
    if value.tzinfo is None:  # naive: taken as UTC, which is what Airflow intervals are
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def version_id(
    end: dt.datetime | str, start: dt.datetime | str | None = None, revision: int = 1
) -> str:
    """``<end>_<start|all>[-rN]``: readable, and it records the data interval (ordered by
    ``version_key``, not as a string)."""
    if not isinstance(revision, int) or revision < 1:
        raise ValueError(f"revision: expected an int >= 1, got {revision!r}")
    end_s = _utc(end, "interval end").strftime(_TS)
    start_s = "all" if start is None else _utc(start, "interval start").strftime(_TS)
    return f"{end_s}_{start_s}" + (f"-r{revision}" if revision > 1 else "")


def parse_version_id(s: str) -> VersionId:
    """Inverse of ``version_id``; ValueError names the bad id and the expected form."""
    m = _ID.match(s) if isinstance(s, str) else None
    if not m or m.group(3) == "1":
        raise ValueError(
            f"version id {s!r}: expected <YYYYmmddTHHMMSSZ>_<YYYYmmddTHHMMSSZ|all>[-rN]"
        )

    def ts(x: str) -> dt.datetime:
        return dt.datetime.strptime(x, _TS).replace(tzinfo=dt.UTC)

    start = None if m.group(2) == "all" else ts(m.group(2))
    return VersionId(ts(m.group(1)), start, int(m.group(3) or 1))


def is_version_id(name: str) -> bool:
    """True for a well-formed id: other names under a dataset are not versions."""
    try:
        parse_version_id(name)
        return True
    except ValueError:
        return False


def dataset_uri(root: str, dataset: str) -> str:
    """``<root>/datasets/<dataset>``; the dataset name is checked because it becomes a path."""
    if not isinstance(dataset, str) or not _DATASET.match(dataset):
        raise ValueError(f"dataset name {dataset!r}: expected lower_snake_case, 1-64 chars")
    return storage.safe_join(root, "datasets", dataset)


def version_uri(root: str, dataset: str, version: str) -> str:
    """``<root>/datasets/<dataset>/<version>`` after validating both names."""
    parse_version_id(version)
    return storage.join(dataset_uri(root, dataset), version)


def split_version_uri(uri: str) -> tuple[str, str]:
    """``(<dataset uri>, <version id>)`` of a version URI."""
    parent, _, version = uri.rstrip("/").rpartition("/")
    return parent, version


def next_revision(root: str, dataset: str, base_id: str) -> str:
    """Id for a forced re-publish of ``base_id``'s interval: one past every existing revision.

    Counts directories with or without a manifest, so an in-flight revision is not reused.
    """
    base = parse_version_id(base_id)
    names = storage.list_dir(dataset_uri(root, dataset))
    same = [parse_version_id(n) for n in names if is_version_id(n)]
    top = max([v.revision for v in same if (v.end, v.start) == (base.end, base.start)], default=0)
    return version_id(base.end, base.start, max(top, base.revision) + 1)
