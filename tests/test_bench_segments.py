"""Issue 25's flights ratio against a one-shot run measured once, before its removal: scaled
by the floor so a faster or slower machine does not move it."""

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
