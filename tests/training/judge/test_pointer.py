"""``training.judge.pointer``: current.json as a typed record, read and written key for key."""

from __future__ import annotations

import pytest

from training.judge.pointer import Current

STORED = {"dataset": "flights", "version": "v1", "run": "r1", "model_uri": "file:///m/r1",
          "metric": "auc", "value": 0.78, "blessed_at": "2026-01-01T00:00:00Z",
          "note": "kept"}


def test_a_pointer_reads_by_attribute_and_writes_back_what_it_read() -> None:
    current = Current.from_json(STORED, "current.json")
    assert (current.dataset, current.run, current.metric, current.value) == \
        ("flights", "r1", "auc", 0.78)
    assert current.names("v1", "r1") and not current.names("v1", "r2")
    assert current.to_json() == STORED  # an unknown key survives a read and a write


def test_a_pointer_missing_a_key_names_the_file_and_the_key() -> None:
    with pytest.raises(ValueError, match=r"current.json: key 'model_uri': expected a string, "
                                         r"the key is missing"):
        Current.from_json({k: v for k, v in STORED.items() if k != "model_uri"}, "current.json")
