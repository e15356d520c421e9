"""Issue 25's flights ratio against a one-shot run measured once, before its removal: scaled
by the floor so a faster or slower machine does not move it (that chain is gone, so the
baseline can no longer be re-measured)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import segments


def test_oneshot_baseline_is_scaled_by_this_runs_floor(tmp_path: Path, monkeypatch) -> None:
    base = tmp_path / "baseline-oneshot.json"
    base.write_text(json.dumps({"year": {"oneshot_cpu_s": 30.0, "floor_cpu_s": 10.0},
                                "week": {"oneshot_cpu_s": 6.0, "floor_cpu_s": 3.0}}))
    monkeypatch.setattr(segments, "BASELINE", base)
    year = segments.oneshot_ratio(bulk_cpu_s=36.0, floor_cpu_s=12.0, quick=False)
    assert year["flights_bulk_oneshot_ratio"] == 1.0  # the machine is 20% slower: 36 = 30 x 1.2
    assert year["unscaled_ratio"] == 1.2
    assert segments.oneshot_ratio(6.0, 3.0, quick=True)["flights_bulk_oneshot_ratio"] == 1.0
    monkeypatch.setattr(segments, "BASELINE", tmp_path / "absent.json")
    assert segments.oneshot_ratio(1.0, 1.0, False)["flights_bulk_oneshot_ratio"] is None


def test_the_ratio_takes_the_1x_bulk_build_and_the_floor_beside_it(tmp_path: Path,
                                                                     monkeypatch) -> None:
    base = tmp_path / "baseline-oneshot.json"
    base.write_text(json.dumps({"year": {"oneshot_cpu_s": 30.0, "floor_cpu_s": 10.0}}))
    monkeypatch.setattr(segments, "BASELINE", base)
    results = {"etl_scaling": {"1x": {"etl": {"cpu_s": 24.0}, "floor": {"cpu_s": 10.0}}}}
    segments.flights_oneshot(results, quick=False)
    assert results["flights_bulk_oneshot_ratio"] == 0.8
    assert results["flights_oneshot"]["bulk_cpu_s"] == 24.0
    empty: dict = {}
    segments.flights_oneshot(empty, quick=False)
    assert "flights_bulk_oneshot_ratio" not in empty  # no 1x run: not measured, not guessed
