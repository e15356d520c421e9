"""``etl.versions.manifest``: ``Manifest`` read from and written back to ``manifest.json`` key
for key (a version hashes the same before and after), versions published before segments,
unknown keys kept, malformed files named with the key at fault."""

from __future__ import annotations

import json

import pytest

from etl import storage, versions
from etl.versions.manifest import Manifest, SegmentEntry, format_shards

SHARD = {"file": "flights-train.tfrecord-00000-of-00001", "records": 3, "bytes": 120,
         "sha256": "ab" * 32}
COMPOSED = {  # as etl.segments.compose writes it, published
    "format_version": 1, "layout": "segments", "dataset": "flights",
    "version": "20130102T000000Z_all",
    "data_interval": {"start": None, "end": "2013-01-02T00:00:00Z"},
    "created_at": "2026-01-01T00:00:00Z", "run_id": "r", "code_version": "abc",
    "compression": None,
    "splits": {"train": {"num_examples": 3, "num_bytes": 120, "content_hash": "0" * 64,
                         "shards": [{**SHARD, "segment": "20130101-0123456789abcdef"}]}},
    "schema": {"features": {}, "label": {"name": "late", "classes": 2}},
    "statistics": {"numeric": {}, "dropped_rows": {}},
    "segments": [{"segment": "20130101-0123456789abcdef", "partition": "20130101",
                  "records": 3, "partitions": [["20130101", "d1"]]}],
    "source_fingerprint": {"sha256": "1" * 64, "files": [{"uri": "raw/x.csv"}],
                           "lookups_sha256": []},
    "validation": {"dataset": "flights", "mode": "quarantine", "success": True,
                   "evaluated_rows": 4, "quarantined_rows": 1, "expectations": [],
                   "drift": None, "results": "validation/results.json",
                   "data_docs": "validation/index.html"},
    "spec": {"name": "flights", "split": {"train": 0.8}, "salt": "s",
             "shard_target_bytes": 1000, "encoder": "numpy"},
}
BEFORE_SEGMENTS = {  # a version with its own shards: no layout, segments or content hash
    "format_version": 1, "dataset": "flights", "version": "20130102T000000Z_all",
    "dag_id": "flights_etl", "splits": {"train": {"num_examples": 3, "num_bytes": 120,
                                                  "shards": [SHARD]}},
}


def _write(uri: str, body: dict) -> bytes:
    data = storage.json_bytes(body)
    storage.write_bytes_atomic(storage.join(uri, versions.MANIFEST), data)
    return data


@pytest.mark.parametrize("body", [COMPOSED, BEFORE_SEGMENTS], ids=["composed", "own-shards"])
def test_a_manifest_reads_and_writes_back_byte_for_byte(tmp_path, body: dict) -> None:
    uri = tmp_path.as_uri()
    data = _write(uri, body)
    manifest = versions.read_manifest(uri)
    assert storage.json_bytes(manifest.to_json()) == data
    assert list(manifest.to_json()) == list(json.loads(data))
    assert versions.manifest_sha256(manifest) == versions.manifest_sha256(
        Manifest.from_json(json.loads(data), "x"))


def test_typed_fields() -> None:
    m = Manifest.from_json(COMPOSED, "manifest.json")
    assert m.composed and m.num_examples == 3 and m.num_shards == 1 and m.num_bytes == 120
    assert m.segments == (SegmentEntry.of(segment="20130101-0123456789abcdef",
                                          extent="20130101", records=3,
                                          partitions=(("20130101", "d1"),)),)
    assert m.verdict.success and m.verdict.drift is None and m.verdict.drift_history is None
    assert m.interval.end == "2013-01-02T00:00:00Z" and m.schema.label.name == "late"
    assert m.schema.label.class_names == ["0", "1"] and m.schema.label.class_names[1] == "1"
    assert m.statistics.dropped_rows == {} and m.statistics.numeric == {}
    assert m.referenced() == {"20130101-0123456789abcdef"}
    assert m.folders("file:///r/datasets/flights/v") == [
        "file:///r/datasets/flights/segments/20130101-0123456789abcdef"]
    old = Manifest.from_json(BEFORE_SEGMENTS, "manifest.json")
    assert not old.composed and old.segments == () and old.split("train").content_hash is None
    assert old.verdict.success is None and old.referenced() == set() and old.dag_id
    assert "flights-train.tfrecord-00000-of-00001" in format_shards(old)
    assert "1 shard(s) in 1 segment(s)" in format_shards(m)


def test_unknown_keys_survive_a_round_trip(tmp_path) -> None:
    body = {**COMPOSED, "future_key": {"a": 1},
            "validation": {**COMPOSED["validation"], "new_check": [1, 2]}}
    m = Manifest.from_json(body, "manifest.json")
    assert m.json_extra == {"future_key": {"a": 1}}
    assert json.dumps(m.to_json(), sort_keys=True) == json.dumps(body, sort_keys=True)


@pytest.mark.parametrize(("body", "message"), [
    ({**BEFORE_SEGMENTS, "segments": [{"partition": "x"}]},
     r"key 'segments\[0\].segment': expected a string, the key is missing"),
    ({**BEFORE_SEGMENTS, "validation": {"success": "yes"}},
     r"key 'validation.success': expected true or false, got 'yes'"),
    ({**BEFORE_SEGMENTS, "splits": {"train": {"shards": {}}}},
     r"key 'splits.train.shards': expected an array, got \{\}"),
    ({**BEFORE_SEGMENTS, "data_interval": "2013"},
     r"key 'data_interval': expected an object, got '2013'"),
])
def test_a_malformed_manifest_names_the_file_and_the_key(tmp_path, body: dict,
                                                         message: str) -> None:
    uri = tmp_path.as_uri()
    _write(uri, body)
    with pytest.raises(ValueError, match=message) as err:
        versions.read_manifest(uri)
    assert str(err.value).startswith(storage.join(uri, versions.MANIFEST) + ": ")


def test_a_newer_format_is_refused(tmp_path) -> None:
    uri = tmp_path.as_uri()
    _write(uri, {**BEFORE_SEGMENTS, "format_version": 2})
    with pytest.raises(ValueError, match="expected a format_version <= 1 manifest"):
        versions.read_manifest(uri)
