"""bench.tuning: a picked table run as a new user runs it, then tuned and trained again; the
second training takes the tuned settings, and both are set against the same reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import tuning
from training.record import read_model_record


@pytest.mark.bench
@pytest.mark.e2e
@pytest.mark.timeout(2400)  # minutes: two trainings and a search (make test starts it early)
def test_a_tuned_table_is_compared_with_its_untuned_run_on_the_same_reference(
        tmp_path: Path) -> None:
    got = tuning.run_all(tmp_path, ["iris"], trials=2, minutes=5)["tables"]["iris"]
    assert got["untuned"]["model"] and got["reference"], got
    assert got["tune"]["ok"] and got["tune"]["trials"] == 2, got["tune"]
    assert got["tune"]["family"] in ("trees", "mlp")
    # the second training took the tuned family and settings from tuned.json, as a nightly
    # run reads it; the first had none to take
    models = tmp_path / "iris" / "data" / "models" / "iris"
    [untuned] = [read_model_record(p.parent.as_uri()) for p in models.glob("*/*/metrics.json")
                 if p.parent.name != tuning.TUNED_RUN]
    [tuned] = [read_model_record(p.parent.as_uri())
               for p in models.glob(f"*/{tuning.TUNED_RUN}/metrics.json")]
    assert untuned is not None and untuned.tuned is None
    assert tuned is not None and tuned.tuned is not None, got["tuned"]
    assert (tuned.tuned.family, tuned.tuned.settings) == (
        got["tune"]["family"], got["tune"]["settings"]), tuned.tuned
    assert got["tuned"]["family"] == tuned.family == got["tune"]["family"], got["tuned"]
    # ... on the same version and test rows, so one reference serves both
    assert (tuned.version, tuned.test.examples) == (untuned.version, untuned.test.examples)
    assert got["untuned"]["model"]["examples"] == got["tuned"]["model"]["examples"]
