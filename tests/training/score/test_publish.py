"""Predictions published manifest-last under a writer lease (no TensorFlow here)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from etl.errors import VersionLockedError
from etl.versions import acquire_writer_lock, release_writer_lock
from training.score.publish import (
    list_published,
    predictions_uri,
    publish,
    read_predictions,
    read_published,
)


def _frames(n: int = 2) -> list[pa.Table]:
    return [pa.table({"id": [i * 10 + j for j in range(3)], "prediction": ["a", "b", "a"]})
            for i in range(n)]


def test_parts_then_the_manifest_and_a_second_publish_changes_nothing(tmp_path) -> None:
    uri = predictions_uri(tmp_path.as_uri(), "d", "w1", "m1")
    done = publish(uri, "owner-1", _frames(), lambda parts: {"parts": [p.to_json() for p in parts]})
    assert done.created and [p["file"] for p in done.manifest["parts"]] == [
        "part-00000.parquet", "part-00001.parquet"]
    assert read_predictions(uri)["id"].tolist() == [0, 1, 2, 10, 11, 12]
    again = publish(uri, "owner-2", _frames(5), lambda parts: {"parts": ["other"]})
    assert not again.created and again.manifest == done.manifest
    assert list_published(tmp_path.as_uri(), "d") == [("w1", "m1")]


def test_a_failure_before_the_manifest_leaves_nothing_and_frees_the_lease(tmp_path) -> None:
    uri = predictions_uri(tmp_path.as_uri(), "d", "w1", "m1")

    def broken():
        yield _frames(1)[0]
        raise RuntimeError("the model failed on batch 2")

    with pytest.raises(RuntimeError, match="batch 2"):
        publish(uri, "owner-1", broken(), lambda parts: {})
    assert read_published(uri) is None and list_published(tmp_path.as_uri(), "d") == []
    assert not (tmp_path / "predictions" / "d" / "w1" / "m1" / "_WRITER").exists()
    done = publish(uri, "owner-2", _frames(1), lambda parts: {"parts": [p.to_json() for p in parts]})
    assert done.created and len(read_predictions(uri)) == 3
    assert sorted(p.name for p in (tmp_path / "predictions/d/w1/m1").iterdir()) == [
        "manifest.json", "part-00000.parquet"]


def test_a_live_writer_holds_off_another(tmp_path) -> None:
    uri = predictions_uri(tmp_path.as_uri(), "d", "w1", "m1")
    lock = acquire_writer_lock(uri, "someone-else")
    try:
        with pytest.raises(VersionLockedError):
            publish(uri, "owner-1", _frames(), lambda parts: {})
    finally:
        release_writer_lock(lock)


def test_names_that_would_leave_the_root_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError):
        predictions_uri(tmp_path.as_uri(), "d", "../x", "m1")
