"""bench.proctree: a child process's output, and the CPU, wall time and memory of its whole tree."""

from __future__ import annotations

import sys

import pytest

from bench.proctree import last_json, run_child


def test_child_runs_report_output_and_cost_of_the_tree() -> None:
    code = ("import json, subprocess, sys; subprocess.run([sys.executable, '-c', 'pass']); "
            "print('log line'); print(json.dumps({'rows': 3}))")
    child = run_child([sys.executable, "-c", code])
    assert child.returncode == 0 and last_json(child.stdout) == {"rows": 3}
    assert child.cpu_s > 0 and child.wall_s > 0 and child.peak_rss_mb >= 0
    failed = run_child([sys.executable, "-c", "raise SystemExit('boom')"])
    assert failed.returncode == 1 and "boom" in failed.stderr


def test_last_json_reads_an_indented_object_too() -> None:
    assert last_json('{\n  "created": true\n}\n') == {"created": True}
    with pytest.raises(ValueError, match="no JSON"):
        last_json("nothing here\n")
