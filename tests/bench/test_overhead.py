"""The task-overhead harness: a CLI command in a process forked from a worker that preloaded
Great Expectations, timed from the fork (the whole bench part runs in ``make bench``)."""

from __future__ import annotations

import pytest

from bench import overhead


def test_a_forked_step_relays_the_commands_output_and_times_it_from_the_fork() -> None:
    out, figures = overhead._forked_step(["--help"])
    assert "usage" in out.lower() and "forked_wall_s" not in out
    assert 0.0 < figures["wall_s"] < figures["worker_wall_s"]


def test_a_forked_step_that_fails_fails_the_bench() -> None:
    with pytest.raises(RuntimeError, match="failed"):
        overhead._forked_step(["build", "--dataset", "no-such-dataset"])


def test_builds_overhead_adds_back_the_gx_import_it_timed_itself() -> None:
    timings = {"build_s": 2.5, "validate_s": 0.2, "gx_import_s": 2.0}
    got = overhead._build_figures({"wall_s": 4.0}, timings)
    assert got["step_s"] == pytest.approx(2.7)
    assert got["overhead_s"] == pytest.approx(4.0 - 2.7 + 2.0)
