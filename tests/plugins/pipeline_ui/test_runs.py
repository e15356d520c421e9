"""pipeline_ui.runs: a run's state says which task holds it."""

from __future__ import annotations


def test_a_runs_state_says_which_task_holds_it() -> None:
    from pipeline_ui.runs import dataset_of, summarize

    assert summarize("running", [("wait_for_data", "deferred"), ("build", "None")]) == (
        "deferred", "wait_for_data deferred")
    assert summarize("failed", [("publish", "upstream_failed"), ("wait_for_data", "failed"),
                                ("build", "upstream_failed")]) == (
        "failed", "wait_for_data failed, publish upstream failed")
    assert summarize("success", [("publish", "skipped"), ("build", "success")]) == (
        "success", "publish skipped")
    assert [dataset_of(d) for d in ("etl_flights", "train_wine", "etl_", "other")] == [
        "flights", "wine", None, None]


def test_a_waiting_run_says_what_it_waits_for_and_until_when() -> None:
    """Issue 41 item 2: the XCom ``wait_for_data`` left before deferring, beside the run."""
    from pipeline_ui.runs import summarize

    waiting = {"missing": 1, "shown": "2013-01-03", "until": "2026-11-25T06:00:00+00:00"}
    assert summarize("running", [("wait_for_data", "deferred"), ("build", "None")],
                     waiting) == ("deferred", ("wait_for_data deferred: waiting for 1 "
                                   "partition(s) (2013-01-03) until 2026-11-25 06:00 UTC"))
    # once it no longer waits the XCom is history: not said
    assert summarize("failed", [("wait_for_data", "failed")], waiting) == (
        "failed", "wait_for_data failed")
