"""``etl.versions.segment``: ``SegmentMeta`` read from and written back to ``segment.json``
key for key, old layouts loading, malformed files named with the key at fault."""

from __future__ import annotations

import json

import pytest

from etl import storage
from etl.versions import segment
from etl.versions.segment import (
    LabelSchema,
    RowCounts,
    Schema,
    SegmentMeta,
    Shard,
    SplitInfo,
    Statistics,
)

SHARD = {"file": "flights-train.tfrecord-00000-of-00001", "records": 3, "bytes": 120,
         "sha256": "ab" * 32}
TABULAR = {  # as etl.segments.build writes it (format 2)
    "format_version": 2, "dataset": "flights", "segment": "20130101-0123456789abcdef",
    "partition": "20130101", "partitions": [["20130101", "d1"]],
    "data_interval": {"start": None, "end": "2013-01-02T00:00:00Z"},
    "created_at": "2026-01-01T00:00:00Z", "run_id": "r", "code_version": "abc",
    "compression": None, "schema": {"features": {}, "label": {"name": "late"}},
    "splits": {"train": {"num_examples": 3, "num_bytes": 120, "content_hash": "0" * 64,
                         "shards": [SHARD]}},
    "source_fingerprint": {"files": [{"uri": "raw/x.csv", "size": 1}], "lookups": None},
    "built_from": {"spec": "s"},
    "validation": {"rows": 4, "quarantined_rows": 1, "misfiled_rows": 0,
                   "quarantine_files": ["quarantine/part-0.parquet"],
                   "row_partials": [{"element_count": 4, "missing_count": 0,
                                     "unexpected_count": 1, "values": ["x"],
                                     "examples": [], "error": None}],
                   "metric_partials": [], "metric_arrays": "partials.npz", "keys": False},
    "statistics_partial": {"train": {"rows": 3}}, "dropped_rows": {"cancelled": 0},
    "timings": {"wall_s": 1.0, "cpu_s": 0.5, "batch": 1},
}
MERGED = {  # as etl.segments.build's compaction writes it: a level, its inputs
    **{k: v for k, v in TABULAR.items() if k != "timings"}, "level": 1,
    "compacted_from": ["a", "b"], "built_from": None,
}
FORMAT_1 = {"format_version": 1, "dataset": "flights", "segment": "s", "partition": "all",
            "splits": {"train": {"num_examples": 1, "shards": [SHARD]}}}


@pytest.mark.parametrize("body", [TABULAR, MERGED, FORMAT_1], ids=["built", "merged", "v1"])
def test_a_segment_json_reads_and_writes_back_byte_for_byte(tmp_path, body: dict) -> None:
    uri = tmp_path.as_uri()
    data = storage.json_bytes(body)
    storage.write_bytes_atomic(storage.join(uri, segment.SEGMENT_FILE), data)
    meta = segment.read_segment(uri)
    assert isinstance(meta, SegmentMeta)
    assert storage.json_bytes(meta.to_json()) == data
    assert list(meta.to_json()) == list(json.loads(data))  # same keys, in the same order
    assert SegmentMeta.from_json(meta.to_json(), "x") == meta


def test_typed_fields_and_defaults() -> None:
    meta = SegmentMeta.from_json(TABULAR, "segment.json")
    assert meta.splits["train"].shards[0] == Shard.from_json(SHARD, "x")
    assert meta.partitions == (("20130101", "d1"),) and meta.level == 0
    assert meta.checks.row_partials[0].unexpected_count == 1
    assert meta.num_examples == 3
    assert meta.interval.end == "2013-01-02T00:00:00Z" and meta.sources.lookups is None
    old = SegmentMeta.from_json(FORMAT_1, "segment.json")  # absent keys: empty, not errors
    assert old.checks.rows == 0 and old.split("eval") == SplitInfo() and old.level == 0
    assert "validation" not in old.to_json() and "level" not in old.to_json()


def test_unknown_keys_and_nulls_survive_a_round_trip() -> None:
    body = {**TABULAR, "future": {"x": [1]}, "splits": {"train": {
        **TABULAR["splits"]["train"], "shards": [{**SHARD, "extra": 1}], "more": True}}}
    again = SegmentMeta.from_json(body, "segment.json").to_json()
    assert json.dumps(again, sort_keys=True) == json.dumps(body, sort_keys=True)
    assert again["compression"] is None and again["source_fingerprint"]["lookups"] is None


def test_a_writer_names_exactly_the_keys_it_writes() -> None:
    info = SplitInfo.of(num_examples=3, num_bytes=120, content_hash="1" * 64,
                        shards=(Shard.of(**SHARD),))
    assert info.to_json() == {"num_examples": 3, "num_bytes": 120, "content_hash": "1" * 64,
                              "shards": [SHARD]}
    meta = SegmentMeta.of(format_version=2, splits={"train": info}, compression=None)
    assert meta.to_json() == {"format_version": 2, "splits": {"train": info.to_json()},
                              "compression": None}


def test_row_counts_write_all_six_keys_and_an_older_file_keeps_its_own() -> None:
    """A new RowCounts (a build's, a compaction's sum) writes the six keys every segment.json
    has held, ``error`` as null too; one read from an older file writes back what it read."""
    fresh = RowCounts(element_count=4, unexpected_count=1, values=("9999",),
                      examples=({"flight": 1545, "arr_delay": "9999"},))
    assert fresh.to_json() == {"element_count": 4, "missing_count": 0, "unexpected_count": 1,
                               "values": ["9999"],
                               "examples": [{"flight": 1545, "arr_delay": "9999"}],
                               "error": None}
    assert list(fresh.to_json()) == ["element_count", "missing_count", "unexpected_count",
                                     "values", "examples", "error"]
    assert list(RowCounts().to_json().values()) == [0, 0, 0, [], [], None]
    checks = segment.SegmentChecks.of(row_partials=(fresh,))
    assert checks.to_json()["row_partials"] == [fresh.to_json()]
    assert RowCounts.from_json(fresh.to_json(), "segment.json") == fresh  # tuples back
    assert RowCounts.from_json(fresh.to_json(), "segment.json").values == ("9999",)
    older = {"element_count": 4, "missing_count": 0, "unexpected_count": 0}  # no lists, no error
    read = RowCounts.from_json(older, "segment.json")
    assert (read.values, read.examples, read.error) == ((), (), None)
    assert read.to_json() == older and read == RowCounts(element_count=4)
    nulls = {**older, "values": None, "examples": None, "error": None}
    assert RowCounts.from_json(nulls, "segment.json").to_json() == nulls
    with pytest.raises(ValueError, match=r"key 'values': expected an array, got '9999'"):
        RowCounts.from_json({**older, "values": "9999"}, "segment.json")

@pytest.mark.parametrize(("body", "message"), [
    ({**FORMAT_1, "splits": {"train": {"num_examples": "3"}}},
     r"segment.json: key 'splits.train.num_examples': expected an integer, got '3'"),
    ({**FORMAT_1, "splits": {"train": {"shards": [{"records": 1}]}}},
     r"segment.json: key 'splits.train.shards\[0\].file': expected a string, .* missing"),
    ({**FORMAT_1, "validation": []},
     r"segment.json: key 'validation': expected an object, got \[\]"),
    ({**FORMAT_1, "partitions": "20130101"},
     r"segment.json: key 'partitions': expected an array"),
])
def test_a_malformed_segment_json_names_the_file_and_the_key(tmp_path, body: dict,
                                                             message: str) -> None:
    uri = tmp_path.as_uri()
    storage.write_bytes_atomic(storage.join(uri, segment.SEGMENT_FILE), storage.json_bytes(body))
    with pytest.raises(ValueError, match=message) as err:
        segment.read_segment(uri)
    assert str(err.value).startswith(storage.join(uri, segment.SEGMENT_FILE))


def test_a_newer_or_unversioned_segment_is_refused_and_an_absent_one_is_none(tmp_path) -> None:
    uri = tmp_path.as_uri()
    assert segment.read_segment(uri) is None
    for body in ({**FORMAT_1, "format_version": 3}, {"splits": {}}, {"format_version": 2}):
        storage.write_bytes_atomic(storage.join(uri, segment.SEGMENT_FILE),
                                   storage.json_bytes(body))
        with pytest.raises(ValueError, match="expected a format_version <= 2 segment"):
            segment.read_segment(uri)


def test_shard_locations_and_folders() -> None:
    own, shared = Shard.of(file="a.tfrecord"), Shard.of(file="a.tfrecord", segment="s1")
    assert segment.shard_relpath(own) == "a.tfrecord"
    assert segment.shard_relpath(shared) == "segments/s1/a.tfrecord"
    assert segment.shard_uri("file:///r/datasets/d/v1", shared) == \
        "file:///r/datasets/d/segments/s1/a.tfrecord"
    with pytest.raises(ValueError, match="must be a plain file name"):
        segment.shard_relpath(Shard.of(file="../x"))
    splits = {"train": SplitInfo.of(shards=(shared, Shard.of(file="b", segment="s0")))}
    assert segment.referenced(splits) == {"s1", "s0"}
    assert segment.folders("file:///r/datasets/d/v1", ["s1"], splits) == [
        "file:///r/datasets/d/segments/s1", "file:///r/datasets/d/segments/s0"]


def test_a_null_where_a_list_is_expected_reads_empty_and_writes_back_null() -> None:
    body = {**FORMAT_1, "splits": {"train": {"num_examples": 0, "shards": None}}}
    meta = SegmentMeta.from_json(body, "segment.json")
    assert meta.splits["train"].shards == ()
    assert meta.to_json() == body


def test_the_class_names_are_the_labels_names_else_the_ids() -> None:
    """One rule for the classes in output order (training's heads, plots, gate and card)."""
    def names(**label: object) -> list[str]:
        return LabelSchema.from_json({"name": "y", **label}, "test").class_names

    assert names(names=["setosa", "virginica"], classes=2) == ["setosa", "virginica"]
    assert names(names=[0, 1, 2]) == ["0", "1", "2"]
    assert names(classes=3) == ["0", "1", "2"]
    assert names() == ["0", "1"]  # a binary label written before labels carried a count
    # a binary label naming its positive class: class 1 is it, class 0 the rest
    assert names(task="binary", positive=["yes"]) == ["not yes", "yes"]
    assert names(task="binary", positive=["a", "b"]) == ["not a/b", "a/b"]
    assert names(task="binary", positive=[True]) == ["not True", "True"]
    assert LabelSchema.from_json({"name": "y", "positive": ["yes"]}, "t").class_names[1] == "yes"
    assert LabelSchema.from_json({"name": "late"}, "test").class_names[1] == "1"
    assert LabelSchema.from_json({"name": "late"}, "test").task_name == "binary"


def test_schema_and_statistics_read_typed_and_write_back_key_for_key() -> None:
    schema = {"key": ["id"], "label": {"name": "late", "dtype": "int64", "classes": 2,
                                       "task": "binary"},
              "features": {"distance": {"dtype": "float32", "kind": "numeric"},
                           "image": {"dtype": "string", "kind": "image",
                                     "shape": [None, None, 3], "encoding": "png"}},
              "training": {"epochs": 3}}
    stats = {"computed_on": "train", "num_examples": 10,
             "numeric": {"distance": {"mean": 1.5, "var": 0.25, "min": 1, "max": 2,
                                      "count": 10}},
             "vocabularies": {"carrier": ["UA", "AA"]}, "label_counts": {"0": 7, "1": 3},
             "split_counts": {"train": 10}, "dropped_rows": {"no label": 1}, "later": True}
    typed, figures = Schema.from_json(schema, "m.json", "schema"), Statistics.from_json(stats, "m")
    assert typed.columns == ["distance", "image", "late"] and typed.key_columns == ("id",)
    assert typed.features["image"].shape == (None, None, 3) and typed.training == {"epochs": 3}
    assert figures.numeric["distance"].var == 0.25 and figures.label is None
    assert json.dumps(typed.to_json()) == json.dumps(schema)
    assert json.dumps(figures.to_json()) == json.dumps(stats)  # unknown keys kept too
    with pytest.raises(ValueError, match=r"m.json: key 'schema.label': expected an object, the "
                                         "key is missing"):
        Schema.from_json({"features": {}}, "m.json", "schema")
