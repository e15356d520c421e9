"""What the ETL steps share: the run record in staging, interval parsing, the step's spec.

Each step reads ``run.json`` from the folder of the URI the previous step returned, so only
URIs travel between Airflow tasks.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

from etl import storage, versions
from etl.errors import PipelineError

log = logging.getLogger("etl.pipeline")

RUN_FILE = "run.json"
DRAFT_FILE = versions.DRAFT


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


def published(root: str, dataset: str, version: str) -> bool:
    return storage.exists(storage.join(versions.version_uri(root, dataset, version),
                                       "manifest.json"))
