"""``training.judge.trained``: what ``train`` returns, a typed record read by attribute and
carried across a process or XCom boundary as JSON."""

from __future__ import annotations

import pytest

from training.judge.trained import Handover, Trained, trained
from training.record import Blessing, Check, Figures, ModelRecord


def test_a_result_reads_by_attribute_and_round_trips_through_json() -> None:
    record = ModelRecord.of(dataset="d", version="v1", run="r", model_uri="file:///m/r",
                            test=Figures.of(auc=0.7))
    verdict = Blessing.of([Check("baseline:auc", True, "auc 0.70 vs 0.50")])
    result = trained("file:///m/r", record, verdict, True)
    assert result.version == "v1" and result.promoted and result.blessing.blessed
    back = Trained.from_json(result.to_json(), "XCom")
    assert back.metrics.to_json() == record.to_json() and back.blessing == verdict
    assert back.model_uri == "file:///m/r" and back.promoted


def test_a_result_without_its_record_names_the_key() -> None:
    with pytest.raises(ValueError, match="XCom: key 'metrics'"):
        Trained.from_json({"model_uri": "u", "blessing": {}}, "XCom")


def test_a_handover_names_the_last_run_and_any_promotion() -> None:
    """The train task's XCom: the last run's scalars and verdict; promoted when any run of
    the task made its model current (the newer one may be unblessed); every version, in
    order; what ``announce_model`` reads back by attribute."""
    verdict = Blessing.of([Check("baseline:auc", True, "auc 0.70 vs 0.50")])
    runs = [trained(f"file:///m/{v}/r", ModelRecord.of(
        dataset="d", version=v, test=Figures.of(auc=0.7, per_class={"a": {"f1": 1.0}})),
        verdict, promoted) for v, promoted in (("v1", True), ("v2", False))]
    handover = Handover.of_runs(runs)
    assert (handover.version, handover.model_uri, handover.promoted, handover.trained) == (
        "v2", "file:///m/v2/r", True, ("v1", "v2"))
    assert handover.metrics == {"dataset": "d", "version": "v2", "test": {"auc": 0.7}}
    back = Handover.from_json(handover.to_json(), "XCom")
    assert back == handover and back.blessing.blessed


def test_a_handover_without_its_version_names_the_key() -> None:
    with pytest.raises(ValueError, match="XCom: key 'version'"):
        Handover.from_json({"blessing": {}}, "XCom")
