"""``training.judge.trained``: what ``train`` returns, a typed record read by attribute and
carried across a process or XCom boundary as JSON."""

from __future__ import annotations

import pytest

from training.judge.trained import Trained, trained
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
