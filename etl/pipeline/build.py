"""Building a version: the window's segments, then, under the version's writer lease, the
window judged and the version's draft -- everything before ``publish``.

Every dataset kind goes this one way: its builder (``etl.kinds``) plans the window and builds
the segments no earlier run built (waiting for a run building the same ones, and using them);
then the writer lease is taken, the window is judged straight into the version's
``validation/`` folder, and the lease is handed over with the draft (the manifest to be, and
the run record) inside. ``publish`` turns the draft into ``manifest.json``. A version whose interval is
already published is reported, not rebuilt, unless ``force`` asks for a new ``-rN`` revision.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from etl import kinds, storage, versions
from etl.pipeline import summary
from etl.pipeline.publish import acquire_writer, clear_unpublished, target_version
from etl.pipeline.record import RunOptions, RunRecord
from etl.segments.request import BuildRequest, Window

log = logging.getLogger("etl.pipeline")


def build_version(spec_name: str, root: str, interval_end: str | datetime,
                  interval_start: str | datetime | None = None, run_id: str | None = None,
                  options: RunOptions | None = None) -> str:
    """The version URI with its draft written, or the published version's URI when the
    interval's version exists and ``options.force`` is off (``publish`` then reports it)."""
    options = options or RunOptions()
    kind = kinds.kind_of(spec_name)
    spec = kind.load_spec(spec_name, source_uri=options.source_uri)
    record = RunRecord.new(spec, root, interval_end, interval_start, run_id, options)
    target = target_version(record)
    if target is None:
        summary.already_published("build", record, record.version)
        return versions.version_uri(root, spec.name, record.version)
    record.target_version = target
    vuri = versions.version_uri(root, spec.name, target)
    previous = _previous(root, spec.name)
    from etl.segments.compose import compose_manifest
    from etl.write.shards import normalize_compression
    from etl.write.writer import WriteConfig

    config = WriteConfig(target_bytes=int(options.shard_bytes or spec.shard_target_bytes),
                         min_train_shards=spec.min_train_shards,
                         compression=normalize_compression(
                             spec.compression if options.compression is None
                             else options.compression))
    with storage.storage_failures(f"build the segments of {vuri}"):
        window = kind.build(BuildRequest(spec, root, record.start, record.end, record.run_id,
                                         config, options.dask_address, record.run_dir,
                                         previous))
    record.timings.update(window.timings)
    lock = acquire_writer(vuri, record.run_id, options.lock_wait_s)
    if lock is None:
        return vuri  # published meanwhile by another run: publish() reports it
    clear_unpublished(record, lock)
    heartbeat = versions.Heartbeat(lock).start()
    try:
        judged = _judge(kind, window, record, vuri)
        manifest = compose_manifest(window.spec, record.to_json(), config, window.metas,
                                    judged.statistics)
        record.writer_lock = {"owner": lock.owner}
        versions.hand_off_writer_lock(heartbeat.stop(),
                                      {"manifest": manifest.to_json(),
                                       "run": record.to_json()})
    except BaseException:
        versions.release_writer_lock(heartbeat.stop())  # a killed process's lease expires
        raise
    summary.written(spec.name, manifest, record.timings["build_s"], vuri)
    return vuri


def _judge(kind: kinds.DatasetKind, window: Window, record: RunRecord, vuri: str):
    """The window's validation, written into the version's ``validation/`` folder."""
    t0 = time.monotonic()
    results = storage.join(vuri, "validation")
    judged = kind.judge(window, record.options.mode, results)
    record.timings["validate_s"] = round(time.monotonic() - t0, 3)
    summary.validated(record.dataset, judged.summary, record.timings["validate_s"], results)
    record.validation = {**judged.summary, "drift": judged.drift}
    return judged


def _previous(root: str, dataset: str) -> versions.Manifest | None:
    """The newest published manifest (what it holds is what this run may reuse)."""
    latest = versions.latest_version(root, dataset)
    return None if latest is None else \
        versions.read_manifest(versions.version_uri(root, dataset, latest))
