"""bench.tuning: a picked table run as a new user runs it, then tuned and trained again; the
second training takes the tuned settings, and both are set against the same reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import tuning


@pytest.mark.e2e
def test_a_tuned_table_is_compared_with_its_untuned_run_on_the_same_reference(
        tmp_path: Path) -> None:
    got = tuning.run_all(tmp_path, ["iris"], trials=2, minutes=5)["tables"]["iris"]
    assert got["untuned"]["model"] and got["reference"], got
    assert got["tune"]["ok"] and got["tune"]["trials"] == 2, got["tune"]
    assert got["tune"]["family"] in ("trees", "mlp")
    # the second training used the tuned family (tuned.json, as a nightly run reads it)
    assert got["tuned"]["family"] == got["tune"]["family"], got["tuned"]
    assert got["tuned"]["ratio"] > 0 and got["tuned_over_untuned"] > 0
