"""Where a result came from: the code version, UTC instants and run ids made path-safe.

One copy of each, shared by the pipeline, the version catalog, training and the UI, so a
manifest and a model stamp the same code version and parse times the same way.
"""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path


def utc(value: str | datetime | None, what: str) -> datetime | None:
    """An aware UTC datetime from ISO text ("2014-01-01", "...T00:00:00Z", "+00:00")."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise ValueError(f"{what}: expected an ISO date/time like 2014-01-01T00:00:00Z, "
                             f"got {value!r}") from exc
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def run_key(run_id: str) -> str:
    """A path-safe folder name for a run id (Airflow ids hold ':' and '+')."""
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", run_id).strip("._")[:120] or "run"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Git sha of this checkout when there is one, else the installed package version."""
    repo = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        try:
            return metadata.version("flightpipe")
        except metadata.PackageNotFoundError:
            return "unknown"
