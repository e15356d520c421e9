"""What a killed segment build leaves, and what a clean version looks like (test_faults).

Shards live in ``datasets/<name>/segments/<id>/``; a segment is finished once its
``segment.json`` exists. These read any storage root (local or the GCS emulator).
"""

from __future__ import annotations

from etl import storage, versions
from etl.versions import segment
from tests.reliability.conftest import DATASET


def segments_root(root: str) -> str:
    return segment.segments_uri(root, DATASET)


def unfinished(root: str) -> dict[str, list[str]]:
    """Segment folders without ``segment.json``, with what is in them (temp files too)."""
    out = {}
    for seg in storage.list_dir(segments_root(root)):
        names = storage.list_dir(storage.join(segments_root(root), seg), include_temp=True)
        if segment.SEGMENT_FILE not in names:
            out[seg] = names
    return out


def shard_being_written(root: str) -> bool:
    """A segment without ``segment.json`` has a shard or shard temp file: mid-write."""
    return any(".tfrecord" in n for names in unfinished(root).values() for n in names)


def segment_lease_taken(root: str) -> bool:
    """A segment's ``_WRITER`` lease exists (on GCS an upload is invisible until done)."""
    return any(segment.SEGMENT_LOCK in names for names in unfinished(root).values())


def assert_one_clean_version(root: str, version: str) -> None:
    """Shards match the manifest; every segment is finished and holds only its own shards;
    no temp file, draft, lease or killed run's staging is left."""
    vuri = versions.version_uri(root, DATASET, version)
    manifest = versions.read_manifest(vuri)
    versions.verify_shards(vuri, manifest)
    names = set(storage.list_dir(vuri, include_temp=True))
    assert not [n for n in names if storage.TEMP_MARKER in n]
    assert versions.WRITER_LOCK not in names
    assert unfinished(root) == {}, "a killed build's segment folder was left"
    listed = {seg.segment for seg in manifest.segments}
    for seg in storage.list_dir(segments_root(root)):
        seg_uri = storage.join(segments_root(root), seg)
        meta = segment.read_segment(seg_uri)
        own = {s.file for v in meta.splits.values() for s in v.shards}
        found = set(storage.list_dir(seg_uri, include_temp=True))
        assert {n for n in found if ".tfrecord" in n} == own, f"orphan shards in {seg}"
        assert not [n for n in found if storage.TEMP_MARKER in n], seg
        assert segment.SEGMENT_LOCK not in found, f"a lease was left on {seg}"
        if seg in listed:
            assert own == {s.file for v in manifest.splits.values()
                           for s in v.shards if s.segment == seg}
    assert not storage.exists(storage.safe_join(root, "staging", DATASET, version, "killed"))


def assert_killed_mid_write(root: str) -> None:
    """The kill left what it should: a segment with shards but no ``segment.json``."""
    left = unfinished(root)
    assert any(any(".tfrecord" in n for n in names) for names in left.values()), left
