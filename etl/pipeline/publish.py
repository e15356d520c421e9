"""Writing and publishing a version: shards under the writer lock, then the manifest last.

``transform_and_write`` writes shards straight into the (unpublished) version folder and a
``_draft.json``; ``publish`` checks the stored shard sizes, writes the TFDS metadata and creates
``manifest.json`` only if absent, which is what makes the version visible to readers.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl import kinds, storage, versions
from etl.errors import PipelineError, VersionExistsError, VersionLockedError
from etl.pipeline import summary
from etl.pipeline.record import DRAFT_FILE, published, read_run, write_run
from etl.provenance import code_version, iso, run_key
from etl.spec import Spec

log = logging.getLogger("etl.pipeline")

LOCK_WAIT_S = 600.0  # a concurrent run of the same interval usually finishes within this
LOCK_POLL_S = 2.0
WAIT_LOG_EVERY_S = 30.0  # a waiting run repeats its WARNING this often


def _acquire(version_uri: str, owner: str, wait_s: float) -> versions.WriterLock | None:
    """Take the writer lease; None when another run published the version meanwhile.

    A dead holder's lease is broken by ``acquire`` itself; a live one is waited for, saying
    so at WARNING at once and every ``WAIT_LOG_EVERY_S`` (who, since when, last heartbeat).
    """
    start = time.monotonic()
    deadline, next_log = start + wait_s, start
    while True:
        try:
            return versions.acquire_writer_lock(version_uri, owner)
        except VersionExistsError:
            return None
        except VersionLockedError as exc:
            now = time.monotonic()
            if now > deadline:
                raise
            if now >= next_log:
                log.warning("%s is being written by %s; waiting for it (%.0f of %.0f s waited, "
                            "giving up after %.0f s more)", version_uri,
                            versions.describe(exc.holder), now - start, wait_s, deadline - now)
                next_log = now + WAIT_LOG_EVERY_S
            time.sleep(max(0.0, min(LOCK_POLL_S, deadline - now)))


def _clear_unpublished(run: dict[str, Any], lock: versions.WriterLock) -> None:
    """Remove what a killed attempt left: the version folder's files, a dead run's staging."""
    vuri = versions.version_of(lock)
    storage.clear_dir(vuri, keep=versions.WRITER_LOCK)
    dead = lock.took_over.get("owner")
    if isinstance(dead, str) and dead != run["run_id"]:
        log.warning("removing the staging folder of %r, whose writer lease was broken", dead)
        _drop_staging(storage.safe_join(run["root"], "staging", run["dataset"], run["version"],
                                        run_key(dead)))


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
    if run.get("target_version") and not published(root, dataset, run["target_version"]):
        return run["target_version"]  # a retried attempt keeps its revision
    if not published(root, dataset, base):
        return base
    return versions.next_revision(root, dataset, base) if force else None


def _compression(value: str | None, default: str | None) -> str | None:
    """None: the spec's choice; "none"/"": uncompressed; "gzip" (any case) -> "GZIP"."""
    from etl.write.shards import normalize_compression

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
    summary.already_published("transform_and_write", run, version)
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
    from etl.write.writer import WriteConfig

    run = read_run(validated_uri)
    force = run.get("force", False) if force is None else force
    version = None if run.get("existing") else _target_version(run, force)
    if version is None:
        return _finish_existing(run, run["version"])
    kind = kinds.kind_of(spec_name)
    spec = kind.stage("load_spec")(spec_name, source_uri=run.get("source_uri"))
    config = WriteConfig(target_bytes=int(shard_bytes or spec.shard_target_bytes),
                         min_train_shards=spec.min_train_shards,
                         compression=_compression(compression, spec.compression), encoder=encoder)
    vuri = versions.version_uri(run["root"], run["dataset"], version)
    run["target_version"] = version
    write_run(run)
    lock = _acquire(vuri, run["run_id"], lock_wait_s)
    if lock is None:
        return _finish_existing(run, version)
    _clear_unpublished(run, lock)
    t0 = time.monotonic()
    heartbeat = versions.Heartbeat(lock).start()
    try:
        with dask_client(dask_address, work_bytes=run.get("input_bytes")), \
                storage.storage_failures(f"write shards to {vuri}"):
            splits, stats = _write_shards(kind, spec, validated_uri, vuri, config)
        _copy_tree(storage.join(run["run_dir"], "validation"), storage.join(vuri, "validation"))
        _copy_tree(storage.join(run["run_dir"], "quarantine"), storage.join(vuri, "quarantine"))
        # publish runs as another task (maybe another process, after a scheduler gap): the
        # lease stays held, unbeaten, for HANDOFF_EXPIRY_S until publish resumes it.
        lock = versions.hand_off_writer_lock(heartbeat.stop())
    except BaseException:
        versions.release_writer_lock(heartbeat.stop())  # a killed process leaves it: it expires
        raise
    manifest = _manifest(spec, run, version, config, splits, stats)
    run.setdefault("timings", {})["transform_write_s"] = round(time.monotonic() - t0, 3)
    run["writer_lock"] = {"owner": lock.owner, "token": lock.token}
    storage.write_bytes_atomic(storage.join(vuri, DRAFT_FILE),
                               storage.json_bytes({"manifest": manifest, "run": run}))
    write_run(run)
    summary.written(spec.name, splits, run["timings"]["transform_write_s"], vuri)
    return vuri


def _write_shards(kind: kinds.DatasetKind, spec: Spec, validated_uri: str, version_uri: str,
                  config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dask part of transform_and_write: the kind's statistics pass, then the shard writing."""
    import dask.dataframe as dd

    from etl.write import writer

    fs, path = storage.get_fs(validated_uri)
    final, stats = kind.stage("prepare")(dd.read_parquet(path, filesystem=fs), spec,
                                         _previous_label(version_uri))
    entries = writer.write_splits(final, spec.name, version_uri, manifest_schema(spec, stats),
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


def _previous_label(version_uri: str) -> dict[str, Any] | None:
    """``schema.label`` (with its version id) of the dataset's newest published version."""
    dataset_uri = version_uri.rstrip("/").rsplit("/", 1)[0]
    root, dataset = dataset_uri.rsplit("/", 2)[0], dataset_uri.rsplit("/", 1)[1]
    latest = versions.latest_version(root, dataset)
    if latest is None:
        return None
    label = versions.read_manifest(versions.version_uri(root, dataset, latest))["schema"]["label"]
    return {**label, "version": latest}


def manifest_schema(spec: Spec, stats: dict[str, Any]) -> dict[str, Any]:
    """The spec's schema with the label as the transform resolved it (e.g. the classes taken
    from the train split); ``statistics.label_schema`` is not kept in the manifest."""
    schema = spec.manifest_schema()
    schema["label"] = stats.get("label_schema", schema["label"])
    return schema


def _manifest(spec: Spec, run: dict[str, Any], version: str, config: Any,
              splits: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """Every manifest field of docs/INTERFACES.md except created_at (set at publish)."""
    validation = dict(run.get("validation") or {})
    validation.update(results="validation/results.json", data_docs="validation/index.html")
    return {
        "format_version": 1, "dataset": spec.name, "version": version,
        "data_interval": run["interval"], "created_at": None, "run_id": run["run_id"],
        "code_version": code_version(), "compression": config.compression,
        "splits": splits, "schema": manifest_schema(spec, stats),
        "statistics": {k: v for k, v in stats.items() if k != "label_schema"},
        "source_fingerprint": run.get("fingerprint", {}), "validation": validation,
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
    draft_uri = storage.join(written_uri, DRAFT_FILE)
    if not storage.exists(draft_uri):
        manifest = versions.read_manifest(written_uri)  # IncompleteVersionError if none
        summary.published(manifest["dataset"], manifest, False, written_uri)
        return {"version_uri": written_uri, "version": manifest["version"], "created": False,
                "splits": {s: v["num_examples"] for s, v in manifest["splits"].items()}}
    draft = storage.read_json(draft_uri)
    manifest, run = draft["manifest"], draft["run"]
    held = run.get("writer_lock")
    if held and not storage.exists(storage.join(written_uri, "manifest.json")):
        # Only the run whose lease it still is may publish: a writer whose lease expired and
        # was taken over gets VersionLockedError here; its shards were the taker's to clear.
        lock = versions.resume_writer_lock(written_uri, held["owner"])
        with versions.Heartbeat(lock) as heartbeat:
            _check_draft(written_uri, draft_uri, held["owner"], manifest)
        created = versions.publish_manifest(written_uri, manifest, lock=heartbeat.check())
    else:
        _check_draft(written_uri, draft_uri, None, manifest)
        created = versions.publish_manifest(written_uri, manifest)
    storage.delete_tree(draft_uri)
    _drop_staging(run["run_dir"])
    summary.published(run["dataset"], manifest, created, written_uri)
    return {"version_uri": written_uri, "version": manifest["version"], "created": created,
            "splits": {s: v["num_examples"] for s, v in manifest["splits"].items()},
            "timings": run.get("timings", {})}


def _check_draft(written_uri: str, draft_uri: str, owner: str | None,
                 manifest: dict[str, Any]) -> None:
    """Under the lease: the draft is still ours and every shard has its written size.

    Then the TFDS metadata is written and ``created_at`` set, just before the manifest.
    """
    from etl.write import tfds as tfds_meta

    if owner is not None:
        try:
            again = storage.read_json(draft_uri)["run"].get("writer_lock", {}).get("owner")
        except FileNotFoundError:
            again = None
        if again != owner:
            raise PipelineError(f"{written_uri}: the draft of {owner!r} was replaced or removed "
                                "by another run; not publishing")
    for info in manifest["splits"].values():
        for shard in info["shards"]:
            size = storage.stat(versions.shard_uri(written_uri, shard))["size"]
            if size != shard["bytes"]:
                raise PipelineError(f"{written_uri}/{shard['file']}: {size} bytes stored, "
                                    f"{shard['bytes']} written; not publishing")
    manifest["created_at"] = iso(datetime.now(UTC))
    tfds_meta.write_tfds_metadata(written_uri, manifest)
