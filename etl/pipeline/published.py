"""What ``etl.pipeline.publish`` (and ``run``, which builds then publishes) returns, as a
typed record: the version made visible (or found already published), its rows per split and
the steps' timings. Read by the ETL DAG's publish task and the CLI through attributes; it
crosses into Airflow's XCom and the CLI's ``--json`` as ``to_json()`` and is read back with
``from_json``, so no reader takes it apart by string key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from etl.jsonobject import JsonObject, key

_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class PublishedVersion(JsonObject):
    """``created``: whether this call made the version visible (False: it already was);
    ``timings``: the steps' seconds (absent when nothing was built); ``wall_s``: ``run``'s
    seconds end to end."""

    version_uri: str = key(str, required=True)
    version: str | None = key(str)
    created: bool = key(bool, default=False)
    splits: Mapping[str, int] = key(dict, default={})  # rows per split
    timings: Mapping[str, float] | None = key(dict)
    wall_s: float | None = key(_NUMBER)

    @property
    def rows(self) -> int:
        """The version's rows, every split."""
        return sum(self.splits.values())
