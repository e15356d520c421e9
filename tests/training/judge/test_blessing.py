"""``training.judge.blessing``: the gate's verdict, written to metrics.json and read back."""

from __future__ import annotations

from training.judge.blessing import Blessing, Check


def test_a_verdict_round_trips_and_says_why_in_one_line() -> None:
    checks = [Check("baseline:auc", True, "auc 0.71 vs 0.50"),
              Check("noise", False, "log loss lead not above zero")]
    verdict = Blessing.of(checks, "binary: auc and log loss")
    assert not verdict.blessed and verdict.reasons == ("log loss lead not above zero",)
    assert Blessing.from_dict(verdict.to_dict()) == verdict
    assert verdict.summary() == ("NOT blessed: log loss lead not above zero "
                                 "[rules: binary: auc and log loss]")
    assert not Blessing.from_dict(None).blessed  # a run from before the gate
