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
