"""etl.pipeline.summary: the one line per step an operator reads, for a validation and an image
build."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from etl.pipeline import summary


def test_validate_summary_states_mode_expectations_failures_quarantine(
        caplog: pytest.LogCaptureFixture) -> None:
    result = {"mode": "quarantine", "evaluated_rows": 327262, "quarantined_rows": 12,
              "expectations": [{"success": True}] * 40 + [{"success": False}]}
    with caplog.at_level(logging.INFO, logger="etl.pipeline"):
        summary.validated("flights", result, 7.08, "file:///x/validated")
    expected = ("validate flights: 327,262 rows, 41 expectations, 1 failed, 12 quarantined "
                "(quarantine mode), 7.1 s -> file:///x/validated")
    assert caplog.messages == [expected]


def test_image_build_summary_counts_its_files(caplog: pytest.LogCaptureFixture,
                                              tmp_path: Path) -> None:
    """Image segments are built from a file *count*, tabular ones from rows: both summarised."""
    from etl import pipeline
    from etl.kinds import land

    root = tmp_path.as_uri()
    land(root, "digits")
    with caplog.at_level(logging.INFO, logger="etl"):
        pipeline.build_version("digits", root, "2024-01-01T00:00:00Z", run_id="count")
    lines = [m for m in caplog.messages if m.startswith("build digits: ")]
    assert lines and "1 segment built, 1797 image files checked, 0 quarantined" in lines[0], \
        caplog.messages
