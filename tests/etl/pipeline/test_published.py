"""``etl.pipeline.published``: what publish returns, a typed record that crosses into XCom
and the CLI's ``--json`` as JSON and is read back the same."""

from __future__ import annotations

import pytest

from etl.pipeline.published import PublishedVersion


def test_a_result_round_trips_through_json_and_reads_by_attribute() -> None:
    made = PublishedVersion.of(version_uri="file:///r/datasets/d/v", version="v", created=True,
                        splits={"train": 8, "eval": 1, "test": 1}, timings={"build_s": 1.5})
    back = PublishedVersion.from_json(made.to_json(), "XCom")
    assert back == made and back.rows == 10 and back.wall_s is None
    assert list(made.to_json()) == ["version_uri", "version", "created", "splits", "timings"]
    already = PublishedVersion.from_json({"version_uri": "u", "version": "v", "created": False,
                                   "splits": {}}, "XCom")
    assert not already.created and already.timings is None


def test_a_result_without_its_version_names_the_key() -> None:
    with pytest.raises(ValueError, match="etl run --json: key 'version_uri'"):
        PublishedVersion.from_json({"created": True}, "etl run --json")
