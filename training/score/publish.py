"""Predictions published like a version: parts first, ``manifest.json`` last, under a lease.

``<root>/predictions/<dataset>/<window>/<model>/`` (``window``: the version id scored, or
``raw-<digest>`` of the raw files scored; ``model``: ``<trained version>--<run>``) holds
``part-NNNNN.parquet`` files and, once complete, ``manifest.json``. The folder's ``_WRITER``
lease is taken first (``etl.versions.acquire_writer_lock``: a published folder cannot be
locked, a live writer holds it off, a dead one's lease is broken, the same owner re-takes its
own at once), what a killed writer left is cleared, every part is written atomically, and
``etl.versions.commit_manifest`` creates the manifest only if absent. Readers trust only a
folder with a manifest, so a run killed before it leaves nothing visible, and a second run of
the same window and model reports the published one instead of writing again.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from etl import storage, versions
from etl.errors import VersionExistsError
from training.predictions import PREDICTIONS_DIR, PredictionsManifest

log = logging.getLogger(__name__)



def dataset_predictions_uri(root: str, dataset: str) -> str:
    return storage.safe_join(root, PREDICTIONS_DIR, dataset)


def predictions_uri(root: str, dataset: str, window: str, model_id: str) -> str:
    """Where a window's predictions by one model live."""
    return storage.safe_join(root, PREDICTIONS_DIR, dataset, window, model_id)


@dataclass(frozen=True)
class Part:
    """One written Parquet part: its file name, rows, bytes and sha256."""

    file: str
    rows: int
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256}


@dataclass(frozen=True)
class Published:
    """The manifest of the folder at ``uri``; ``created``: this call published it."""

    uri: str
    manifest: dict[str, Any]
    created: bool

    @property
    def record(self) -> PredictionsManifest:
        return PredictionsManifest.from_json(self.manifest, f"{self.uri}/manifest.json")

    @property
    def key(self) -> tuple[str, str]:
        """(window, model): where it lives under ``predictions/<dataset>/``."""
        window, model = self.uri.rstrip("/").rsplit("/", 2)[-2:]
        return window, model

    def summary(self) -> dict[str, Any]:
        """The manifest's scalars for a task's XCom and log: rows, drift, where."""
        m = self.record
        window, model = self.key
        return {"uri": self.uri, "window": window, "model": model, "rows": m.rows,
                "scored": m.scored, "quarantined": m.quarantined, "psi": m.psi,
                "drifted": m.drifted, "created": self.created}


def read_published(uri: str) -> dict[str, Any] | None:
    """The folder's manifest, or None while it is not published."""
    try:
        return storage.read_json(storage.join(uri, versions.MANIFEST))
    except FileNotFoundError:
        return None


def part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def write_part(uri: str, index: int, table: pa.Table) -> Part:
    """One Parquet part, visible whole or not at all."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    data = buf.getvalue()
    name = part_name(index)
    storage.write_bytes_atomic(storage.join(uri, name), data)
    return Part(name, table.num_rows, len(data), hashlib.sha256(data).hexdigest())


def publish(uri: str, owner: str, tables: Iterable[pa.Table],
            manifest_of: Callable[[list[Part]], dict[str, Any]]) -> Published:
    """Write ``tables`` as parts of ``uri`` and publish ``manifest_of(parts)`` last; the
    published manifest, untouched, when the folder is already published.

    Raises:
        VersionLockedError: another live run is writing the same window and model.
    """
    found = read_published(uri)
    if found is not None:
        return Published(uri, found, False)
    try:
        lock = versions.acquire_writer_lock(uri, owner)
    except VersionExistsError:
        return Published(uri, read_published(uri) or {}, False)
    beat = versions.Heartbeat(lock).start()
    try:
        storage.clear_dir(uri, keep=versions.WRITER_LOCK)  # a killed run's parts
        parts = [write_part(uri, i, table) for i, table in enumerate(tables)]
        body = manifest_of(parts)
        beat.check()
    except BaseException:
        versions.release_writer_lock(beat.stop())
        raise
    created = versions.commit_manifest(uri, storage.json_bytes(body), beat.stop())
    if not created:
        log.info("%s was published by another run meanwhile; its manifest stands", uri)
    return Published(uri, read_published(uri) or body, created)


def read_predictions(uri: str) -> pd.DataFrame:
    """A published folder's rows, parts in order; FileNotFoundError when not published."""
    import pyarrow.parquet as pq

    manifest = read_published(uri)
    if manifest is None:
        raise FileNotFoundError(f"{uri}: no {versions.MANIFEST}; nothing published there")
    frames = [pq.read_table(io.BytesIO(storage.read_bytes(storage.join(uri, p["file"]))))
              .to_pandas() for p in manifest["parts"]]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def list_published(root: str, dataset: str) -> list[tuple[str, str]]:
    """(window, model) of every published predictions folder of ``dataset``."""
    base = dataset_predictions_uri(root, dataset)
    out = []
    for window in storage.list_dir(base):
        for model in storage.list_dir(storage.join(base, window)):
            if storage.exists(storage.join(base, window, model, versions.MANIFEST)):
                out.append((window, model))
    return sorted(out)
