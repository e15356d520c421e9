"""A version's drift report (``manifest.json``'s ``validation.drift``) as a typed record:
written by ``etl.spec.drift.compare``, read by the next run's drift (its ``history``), the
DAGs (the WARNING, lineage) and the UI through attributes, never by string key.

Pure Python, in a layer of its own (pyproject.toml): ``etl.spec.drift`` (its writer)
and ``etl.versions`` (whose ``Verdict`` holds it) are siblings, and both import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from etl.jsonobject import SCALARS, JsonObject, key, list_of, strings

_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class DriftRow(JsonObject):
    """One statistic of one feature: its value on the new data, the limit it was judged by
    (the spec's, or the peers' spread if wider) and the verdict."""

    name: str | None = key(str)
    kind: str | None = key(str)  # numeric, categorical, missing, label
    statistic: str | None = key(str)
    value: float | str | None = key((*_NUMBER, str))  # "inf": a share that came from none
    limit: float | None = key(_NUMBER)
    spec_limit: float | None = key(_NUMBER)
    peers: int | None = key(int)
    drifted: bool | None = key(bool)


@dataclass(frozen=True, kw_only=True)
class DriftReport(JsonObject):
    """The new segments' train statistics against the previous version's: the rows judged,
    the names that drifted and the figures of normal nights carried to the next report."""

    against: str | None = key(str)  # the previous version's id
    segments: tuple[str, ...] = key(list, strings(), default=())
    rows: int | None = key(int)
    baseline: str | None = key(str)
    excluded: tuple[str, ...] = key(list, strings(), default=())
    features: tuple[DriftRow, ...] = key(list, list_of(DriftRow), default=())
    drifted: tuple[str, ...] = key(list, strings(SCALARS), default=())
    history: Mapping[str, list[float]] = key(dict, default={})

    def drifted_by_kind(self) -> tuple[list[str], list[str]]:
        """(features whose values moved beyond their limits: a mean, PSI or label shift;
        features whose share of missing values rose beyond its limit). A feature whose
        values vanish is the second kind, not the first. A report without rows (written by
        hand, or old) has its ``drifted`` names all of the first kind."""
        rows = [r for r in self.features if r.drifted]
        if not rows:
            return [str(n) for n in self.drifted], []
        moved = [str(r.name) for r in rows if r.kind != "missing"]
        missing = [str(r.name) for r in rows if r.kind == "missing"]
        return list(dict.fromkeys(moved)), list(dict.fromkeys(missing))

    def words(self) -> str:
        """What drifted, in words for a log line or a page: "values moved beyond their limits
        in temp, carrier; more values missing than their limits allow in wind_speed"; ""
        when nothing drifted. Eight features gone missing used to read as ten that "moved"."""
        moved, missing = self.drifted_by_kind()
        return "; ".join(
            ([f"values moved beyond their limits in {', '.join(moved)}"] if moved else [])
            + ([f"more values missing than their limits allow in {', '.join(missing)}"]
               if missing else []))
