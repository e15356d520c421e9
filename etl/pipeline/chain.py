"""The ETL chain the DAG tasks and ``python -m etl`` call, one for every dataset kind:
``build_version``, then ``publish``; ``run`` does both, ``land`` fills the raw zone.

Building a version: every dataset kind goes one way -- its builder (``etl.kinds``) plans the
window and builds the segments no earlier run built (waiting for a run building the same
ones, and using them); then the version's writer lease is taken, the window is judged
straight into the version's ``validation/`` folder, and the lease is handed over with the
draft (the manifest to be, and the run record) inside. A version whose interval is already
published is reported, not rebuilt, unless ``force`` asks for a new ``-rN`` revision.

Publishing: ``publish`` takes the handed-over lease (reading it is enough while its expiry is
far off), checks the stored size of every shard the version holds itself and creates
``manifest.json`` only if absent, which is what makes the version visible to readers.

``run`` is ``build_version`` then ``publish`` -- the ETL DAG's two tasks -- with the same
options; a small window is built by this process's threads, a large one on a Dask cluster
started for it (``etl.cluster``).

What a run is told (``RunOptions``: from the CLI flags or the DAG's Params) and what it
records (``RunRecord``: made by ``RunRecord.new`` from the spec and the interval) are each
built once; the record travels inside the version's handed-off writer lease (the draft) from
``build_version`` to ``publish`` (only URIs travel between Airflow tasks). Each step says
what it did in one line for operators (``say_*``: inputs, rows, outcome, time, where the
output is; everything the libraries say stays at WARNING, etl/logs.py), from what the step
already holds, so summarising costs no extra pass over the data.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl import kinds, storage, versions
from etl.errors import PipelineError, VersionExistsError, VersionLockedError
from etl.kinds import BuildRequest, DatasetKind, Window
from etl.provenance import iso, run_key, utc
from etl.spec import DatasetSpec
from etl.validation.suite import check_mode
from etl.versions.catalog import PublishedVersion
from etl.versions.manifest import Interval, Manifest, Verdict

if TYPE_CHECKING:
    from etl.kinds.landing import LandOptions
    from etl.segments.compose import Composed

log = logging.getLogger("etl.pipeline")

LOCK_WAIT_S = 600.0  # a concurrent run of the same interval usually finishes within this


@dataclass(frozen=True)
class RunOptions:
    """How one run builds its version (defaults: the spec's settings).

    ``force``: publish a new ``-rN`` revision when the interval's version exists.
    ``source_uri``: the primary source's URI pattern instead of the spec's.
    ``shard_bytes`` / ``compression``: the spec's ``shards`` settings, overridden.
    """

    mode: str = "quarantine"
    shard_bytes: int | None = None
    compression: str | None = None
    force: bool = False
    source_uri: str | None = None
    dask_address: str | None = None
    lock_wait_s: float = LOCK_WAIT_S

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.shard_bytes is not None and self.shard_bytes < 1:
            raise ValueError(f"shard_bytes: expected a positive number, got {self.shard_bytes}")


@dataclass
class RunRecord:
    """One run of one interval: who, which window, which version, what it measured."""

    spec: str
    dataset: str
    root: str
    version: str  # the interval's version id; ``target_version`` may be its -rN revision
    start: datetime | None
    end: datetime
    run_id: str
    run_dir: str  # scratch space under <root>/staging (learning classes), removed at publish
    options: RunOptions
    target_version: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    validation: dict[str, Any] | None = None
    writer_lock: dict[str, str] | None = None

    @classmethod
    def new(cls, spec: DatasetSpec, root: str, interval_end: str | datetime,
            interval_start: str | datetime | None, run_id: str | None,
            options: RunOptions) -> RunRecord:
        """The record of a run of [start, end) (ValueError unless start < end)."""
        end, start = utc(interval_end, "interval_end"), utc(interval_start, "interval_start")
        if end is None or (start is not None and start >= end):
            raise ValueError(f"interval: expected start < end, got [{start}, {end})")
        version = versions.version_id(end, start)
        run_id = run_id or f"manual__{iso(datetime.now(UTC))}_{uuid.uuid4().hex[:8]}"
        return cls(spec=str(spec.path), dataset=spec.name, root=root, version=version,
                   start=start, end=end, run_id=run_id,
                   run_dir=storage.safe_join(root, "staging", spec.name, version,
                                             run_key(run_id)), options=options)

    @property
    def interval(self) -> dict[str, str | None]:
        return {"start": iso(self.start), "end": iso(self.end)}

    def to_json(self) -> dict[str, Any]:
        """The record as the draft stores it (and ``publish`` reads it, ``from_json``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("start", "end", "options")}
        return {**out, "interval": self.interval, "mode": self.options.mode,
                "force": self.options.force, "source_uri": self.options.source_uri,
                "layout": "segments"}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> RunRecord:
        """The record ``to_json`` wrote (a draft's ``run``); ValueError naming ``where`` and
        the key when it is not one."""
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected the run record as an object, got {obj!r}")  # noqa: TRY004 -- a malformed file
        try:
            interval = Interval.from_json(obj["interval"], where, "interval")
            own = {f.name: obj[f.name] for f in dataclasses.fields(cls)
                   if f.name not in ("start", "end", "options") and f.name in obj}
            options = RunOptions(mode=obj.get("mode", RunOptions.mode),
                                 force=bool(obj.get("force")), source_uri=obj.get("source_uri"))
            return cls(**own, start=utc(interval.start, "interval.start"),
                       end=utc(interval.end, "interval.end"), options=options)
        except (KeyError, TypeError) as e:
            raise ValueError(f"{where}: not a run record ({type(e).__name__}: {e})") from None

    def composed(self, judged: kinds.Judged) -> Composed:
        """What the manifest takes from this run and its window's judgement."""
        from etl.segments.compose import Composed

        return Composed(version=str(self.target_version), run_id=self.run_id,
                        interval=Interval.of(**self.interval),
                        verdict=Verdict.from_json(self.validation or {},
                                                  "the run record's validation"),
                        statistics=judged.statistics, label=judged.label)


def is_published(root: str, dataset: str, version: str) -> bool:
    """The interval's version (or a revision) has its manifest: readers see it."""
    return storage.exists(storage.join(versions.version_uri(root, dataset, version),
                                       "manifest.json"))


# --- the chain -------------------------------------------------------------------------------


def land(root: str, dataset: str = "flights", options: LandOptions | None = None) -> str:
    """Land a dataset's upstream files into ``<root>/raw``; returns the raw zone URI."""
    return kinds.land(root, dataset, options).raw_uri


def run(spec_name: str, root: str, interval_end: str | datetime,
        interval_start: str | datetime | None = None, run_id: str | None = None,
        options: RunOptions | None = None, **fields: Any) -> PublishedVersion:
    """Build and publish the version of [start, end); returns what ``publish`` returns,
    with ``wall_s``.

    ``fields``: ``RunOptions`` fields, for callers that set one or two (``force=True``).
    """
    t0 = time.monotonic()
    options = options or RunOptions(**fields)
    result = publish(build_version(spec_name, root, interval_end, interval_start, run_id,
                                   options))
    return replace(result, wall_s=round(time.monotonic() - t0, 3))



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
        say_already_published("build", record, record.version)
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
        manifest = compose_manifest(window.spec, record.composed(judged), config,
                                    window.metas)
        record.writer_lock = {"owner": lock.owner}
        versions.hand_off_writer_lock(heartbeat.stop(),
                                      {"manifest": manifest.to_json(),
                                       "run": record.to_json()})
    except BaseException:
        versions.release_writer_lock(heartbeat.stop())  # a killed process's lease expires
        raise
    say_written(spec.name, manifest, record.timings["build_s"], vuri)
    return vuri


def _judge(kind: DatasetKind[Any, Any], window: Window[Any, Any], record: RunRecord,
           vuri: str) -> kinds.Judged:
    """The window's validation, written into the version's ``validation/`` folder."""
    t0 = time.monotonic()
    results = storage.join(vuri, "validation")
    judged = kind.judge(window, record.options.mode, results)
    record.timings["validate_s"] = round(time.monotonic() - t0, 3)
    say_validated(record.dataset, judged.summary, record.timings["validate_s"], results)
    record.validation = {**judged.summary,
                         "drift": judged.drift.to_json() if judged.drift is not None else None}
    return judged


def _previous(root: str, dataset: str) -> versions.Manifest | None:
    """The newest published manifest (what it holds is what this run may reuse)."""
    latest = versions.latest_version(root, dataset)
    return None if latest is None else \
        versions.read_manifest(versions.version_uri(root, dataset, latest))


LOCK_POLL_S = 2.0
WAIT_LOG_EVERY_S = 30.0  # a waiting run repeats its WARNING this often


def acquire_writer(version_uri: str, owner: str, wait_s: float) -> versions.WriterLock | None:
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


def clear_unpublished(record: RunRecord, lock: versions.WriterLock) -> None:
    """Remove what a killed attempt left: the version folder's files, a dead run's scratch."""
    vuri = versions.version_of(lock)
    storage.clear_dir(vuri, keep=versions.WRITER_LOCK)
    dead = lock.took_over.get("owner")
    if isinstance(dead, str) and dead != record.run_id:
        log.warning("removing the staging folder of %r, whose writer lease was broken", dead)
        _drop_staging(storage.safe_join(record.root, "staging", record.dataset, record.version,
                                           run_key(dead)))


def target_version(record: RunRecord) -> str | None:
    """The version id to write, or None when the published one must be reported instead.

    A forced run writes the next ``-rN`` revision; its retry (same run id, the revision's
    writer lease still naming it) writes that same revision again, not one more.
    """
    if not is_published(record.root, record.dataset, record.version):
        return record.version
    if not record.options.force:
        return None
    from etl.versions import lease
    from etl.versions.ids import is_version_id

    interval = versions.parse_version_id(record.version)
    for name in storage.list_dir(versions.dataset_uri(record.root, record.dataset)):
        if not is_version_id(name) or is_published(record.root, record.dataset, name):
            continue
        ours = versions.parse_version_id(name)
        held = lease.current_holder(storage.join(
            versions.version_uri(record.root, record.dataset, name), versions.WRITER_LOCK))
        if (ours.end, ours.start) == (interval.end, interval.start) and \
                (held or {}).get("owner") == record.run_id:
            return name
    return versions.next_revision(record.root, record.dataset, record.version)


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


def publish(written_uri: str) -> PublishedVersion:
    """Make a built version visible: manifest.json, created only if absent, under the lease.

    ``written_uri``: what ``build_version`` returned; its handed-off writer lease carries the
    draft (the manifest to be and the run record).
    Returns the version, whether it was created, its rows per split and the steps' timings
    (``etl.versions.catalog.PublishedVersion``).
    """
    try:
        lock = versions.take_handed_off_lock(written_uri)
    except VersionLockedError:
        lock = None  # a builder's lease; unless the version is published, refused below
    if lock is None or not isinstance(lock.payload, dict):
        return _already_published(written_uri)
    manifest = versions.Manifest.from_json(
        lock.payload["manifest"], f"{written_uri}/{versions.WRITER_LOCK} (the draft)")
    record = RunRecord.from_json(lock.payload.get("run"),
                                 f"{written_uri}/{versions.WRITER_LOCK} (the draft's run)")
    _check_shards(written_uri, manifest)
    manifest = replace(manifest, created_at=iso(datetime.now(UTC)))
    created = versions.publish_manifest(written_uri, manifest, lock=lock)
    _drop_staging(record.run_dir)
    say_published(record.dataset, manifest, created, written_uri)
    return PublishedVersion.of(version_uri=written_uri, version=manifest.version, created=created,
                        splits=_split_rows(manifest), timings=record.timings)


def _split_rows(manifest: versions.Manifest) -> dict[str, int]:
    return {s: v.num_examples for s, v in manifest.splits.items()}


def _already_published(written_uri: str) -> PublishedVersion:
    """No draft handed over: the version was published (reported), or nothing can be."""
    if not storage.exists(storage.join(written_uri, versions.MANIFEST)):
        holder = versions.current_holder(storage.join(written_uri, versions.WRITER_LOCK))
        if holder:
            raise VersionLockedError(written_uri, holder)
    manifest = versions.read_manifest(written_uri)  # IncompleteVersionError if none
    say_published(str(manifest.dataset), manifest, False, written_uri)
    return PublishedVersion.of(version_uri=written_uri, version=manifest.version, created=False,
                        splits=_split_rows(manifest))


def _check_shards(written_uri: str, manifest: versions.Manifest) -> None:
    """Every shard the version holds itself has its written size (a segment's were checked
    before its segment.json existed; segments are immutable)."""
    for info in manifest.splits.values():
        for shard in info.shards:
            if shard.segment:
                continue
            size = storage.stat(versions.shard_uri(written_uri, shard))["size"]
            if size != shard.bytes:
                raise PipelineError(f"{written_uri}/{shard.file}: {size} bytes stored, "
                                    f"{shard.bytes} written; not publishing")


# --- each step's line ------------------------------------------------------------------------
def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / 1e6:,.1f} MB"


def say_already_published(step: str, run: RunRecord, version: str) -> None:
    """A step with nothing to do because the interval's version exists; says why and how."""
    uri = storage.join(run.root, "datasets", run.dataset, version)
    log.info("%s %s: version %s is already published (%s); nothing to do, set force_republish "
             "to write a new revision", step, run.dataset, version, uri)


def say_validated(dataset: str, summary: dict[str, Any], seconds: float, uri: str) -> None:
    """validate: rows, expectations evaluated and failed, rows quarantined, mode, time, URI."""
    expectations = summary.get("expectations")
    if expectations is not None:
        failed = sum(1 for e in expectations if not e.get("success"))
        checks = f"{len(expectations)} expectations, {failed} failed"
    else:  # images: every file decoded and checked against the spec
        checks = f"image checks, at most {_n(summary.get('max_quarantined'))} quarantined allowed"
    log.info("validate %s: %s rows, %s, %s quarantined (%s mode), %.1f s -> %s", dataset,
             _n(summary.get("evaluated_rows")), checks, _n(summary.get("quarantined_rows", 0)),
             summary.get("mode"), seconds, uri)


def _split_counts(manifest: Manifest) -> str:
    return ", ".join(f"{name} {_n(info.num_examples)}" for name, info in manifest.splits.items())


def say_written(dataset: str, manifest: Manifest, seconds: float, uri: str) -> None:
    """build: examples per split, shards, bytes, time, the (unpublished) version."""
    log.info("write %s: %s examples (%s) in %d shard(s), %s, %.1f s -> %s (visible once "
             "published)", dataset, _n(manifest.num_examples), _split_counts(manifest),
             manifest.num_shards, _mb(manifest.num_bytes), seconds, uri)


def say_published(dataset: str, manifest: Manifest, created: bool, uri: str) -> None:
    """publish: whether a new version became visible, its size and URI."""
    if created:
        log.info("publish %s: published version %s, %s examples (%s) -> %s", dataset,
                 manifest.version, _n(manifest.num_examples), _split_counts(manifest), uri)
    else:
        log.info("publish %s: version %s was already published; nothing new (set "
                 "force_republish to write a new revision) -> %s", dataset, manifest.version,
                 uri)
