"""``training.predictions``: the predictions manifest read through its type, as published
(parts first, manifest last); nothing until it is published; a wrong file named."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from training.predictions import read_predictions_manifest, scored_uri
from training.score.publish import publish

VERSION = "20130105T000000Z_all"


def test_a_published_manifest_reads_through_its_type(tmp_path: Path) -> None:
    uri = f"{scored_uri(tmp_path.as_uri(), 'd', VERSION)}/{VERSION}--run-1"
    assert read_predictions_manifest(uri) is None  # nothing published yet

    def manifest_of(parts: list) -> dict:
        return {"format_version": 1, "dataset": "d", "window": VERSION,
                "source": {"kind": "version", "version": VERSION,
                           "version_uri": f"file:///x/{VERSION}"},
                "model": {"model_uri": "file:///m/run-1", "run": "run-1"},
                "rows": 3, "scored": sum(p.rows for p in parts), "quarantined": 0,
                "parts": [p.to_json() for p in parts],
                "distribution": {"psi": 0.01, "drifted": False}, "run_id": "manual__1",
                "created_at": "2026-11-29T00:00:00Z"}

    done = publish(uri, "test", [pa.table({"prediction": ["0", "1", "1"]})], manifest_of)
    got = read_predictions_manifest(uri)
    assert got == done.record
    assert (got.scored, got.run_id, got.model_uri, got.source_uri, got.psi, got.drifted) == (
        3, "manual__1", "file:///m/run-1", f"file:///x/{VERSION}", 0.01, False)
    assert done.summary()["window"] == VERSION and done.key == (VERSION, f"{VERSION}--run-1")


def test_a_file_that_is_not_one_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"rows": "many"}))
    with pytest.raises(ValueError, match=r"p/manifest\.json.*rows"):
        read_predictions_manifest(folder.as_uri())
