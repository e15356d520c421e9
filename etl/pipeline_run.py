"""What the ETL steps share: the run record in staging, interval parsing, the step's spec.

Each step reads ``run.json`` from the folder of the URI the previous step returned, so only
URIs travel between Airflow tasks.
"""

from __future__ import annotations

import importlib
import logging
import re
import subprocess
import threading
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from etl import storage, versions
from etl.errors import PipelineError
from etl.spec import Spec, load_spec

log = logging.getLogger("etl.pipeline")

RUN_FILE = "run.json"
DRAFT_FILE = "_draft.json"
MODES = ("quarantine", "strict")


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


def import_in_background(module: str) -> threading.Thread:
    """Start importing a heavy module while this process waits for Dask workers to start.

    Great Expectations costs about 10 s of CPU to import; a step that needs it in this process
    and in its workers would otherwise pay the two imports one after the other. A failing
    import is raised again, with its traceback, by the step's own import.
    """

    def load() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # the step's own import statement reports it
            log.debug("background import of %s failed", module, exc_info=True)

    thread = threading.Thread(target=load, name=f"import-{module}", daemon=True)
    thread.start()
    return thread


def run_dir_of(step_uri: str) -> str:
    return step_uri.rstrip("/").rsplit("/", 1)[0]


def read_run(step_uri: str) -> dict[str, Any]:
    uri = storage.join(run_dir_of(step_uri), RUN_FILE)
    if not storage.exists(uri):
        raise PipelineError(f"{uri}: no run record; pass a URI returned by the previous step")
    return storage.read_json(uri)


def write_run(run: dict[str, Any]) -> None:
    storage.write_bytes_atomic(storage.join(run["run_dir"], RUN_FILE), storage.json_bytes(run))


def step_spec(spec_name: str, source_uri: str | None = None) -> Spec:
    from etl import images_spec

    if images_spec.is_image_spec(spec_name):  # kind: images, stages in etl/images_etl.py
        return images_spec.load_image_spec(spec_name, source_uri=source_uri)
    spec = load_spec(spec_name)
    if source_uri:
        from dataclasses import replace

        from etl.spec import check_relpath

        src = replace(spec.primary_source, uri=check_relpath(source_uri, "source_uri"))
        spec = replace(spec, sources={**spec.sources, spec.primary: src})
    return spec


def published(root: str, dataset: str, version: str) -> bool:
    return storage.exists(storage.join(versions.version_uri(root, dataset, version),
                                       "manifest.json"))
