"""``training.record``: a run's metrics.json, read by its type and written back key for key."""

from __future__ import annotations

import pytest

from training.record import ModelRecord, read_model_record


def test_a_model_record_reads_and_writes_back_key_for_key(tmp_path) -> None:
    """metrics.json read by its type: a record of older code (no family, a key this code does
    not know) writes back byte for byte; a malformed one names the file and the key."""
    from etl import storage

    stored = {"dataset": "flights", "version": "v", "test": {"auc": 0.8, "loss": 0.4},
              "blessing": {"blessed": True, "reasons": [], "checks": []}, "run": "r",
              "legacy_key": [1, 2], "dag_id": "train_flights", "run_id": "manual__1"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_bytes(storage.json_bytes(stored))
    record = read_model_record(run.as_uri())
    assert record.test["auc"] == 0.8 and record.family is None and record.run == "r"
    assert record.trained_by == "run manual__1 of train_flights"
    assert storage.json_bytes(record.to_json()) == storage.json_bytes(stored)
    assert read_model_record((tmp_path / "running").as_uri()) is None  # no record yet
    assert ModelRecord.of(run="r").trained_by is None  # trained outside an orchestrator
    (run / "metrics.json").write_text('{"test": [0.8]}')
    with pytest.raises(ValueError, match=r"metrics.json: key 'test': expected an object"):
        read_model_record(run.as_uri())
