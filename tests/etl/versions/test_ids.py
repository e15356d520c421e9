"""etl.versions.ids: version ids, their order and round trip, and the dataset names that become
paths."""

from __future__ import annotations

import datetime as dt

import pytest

from etl import versions

V1 = "20130102T000000Z_20130101T000000Z"


def test_version_id_format_and_round_trip() -> None:
    end = dt.datetime(2014, 1, 1, tzinfo=dt.UTC)
    assert versions.version_id(end) == "20140101T000000Z_all"
    assert versions.version_id("2013-01-02T00:00:00Z", "2013-01-01") == V1
    assert versions.version_id(end, revision=3) == "20140101T000000Z_all-r3"
    eastern = dt.timezone(dt.timedelta(hours=-5))
    assert (
        versions.version_id(dt.datetime(2013, 12, 31, 19, tzinfo=eastern)) == "20140101T000000Z_all"
    )
    parsed = versions.parse_version_id("20130102T000000Z_20130101T000000Z-r2")
    assert parsed.start == dt.datetime(2013, 1, 1, tzinfo=dt.UTC) and parsed.revision == 2
    assert str(parsed) == "20130102T000000Z_20130101T000000Z-r2"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "latest",
        "20140101_all",
        "20140101T000000Z_all-r1",
        "20140101T000000Z_all-r0",
        "../20140101T000000Z_all",
        "20140101T000000Z_all/x",
    ],
)
def test_parse_version_id_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="expected <YYYYmmddTHHMMSSZ>"):
        versions.parse_version_id(bad)


def test_the_order_is_interval_end_then_start_then_revision() -> None:
    """``_all`` (no start) before any start with the same end, revisions by number: neither is
    the ids' string order, which puts ``_all`` after a date and ``-r10`` before ``-r2``."""
    oldest_first = [
        "20131231T000000Z_all",
        "20140101T000000Z_all",
        "20140101T000000Z_all-r2",
        "20140101T000000Z_all-r10",
        "20140101T000000Z_20131201T000000Z",
        "20140101T000000Z_20131225T000000Z",
        "20140101T000000Z_20131225T000000Z-r2",
        "20140102T000000Z_20140101T000000Z",
    ]
    shuffled = [oldest_first[i] for i in (5, 1, 7, 3, 0, 6, 2, 4)]
    assert sorted(shuffled, key=versions.version_key) == oldest_first
    assert max(shuffled, key=versions.version_key) == "20140102T000000Z_20140101T000000Z"
    assert sorted(shuffled) != oldest_first  # the string order is another order
    window, demo = "20140101T000000Z_20131225T000000Z", "20140101T000000Z_all"
    assert max(window, demo) == demo and max(window, demo, key=versions.version_key) == window
    parsed = versions.parse_version_id(window)
    assert versions.version_key(parsed) == versions.version_key(window)


def test_the_order_refuses_what_is_not_a_version_id() -> None:
    with pytest.raises(ValueError, match="version id 'latest': expected"):
        versions.version_key("latest")


@pytest.mark.parametrize("name", ["../x", "Flights", "a/b", "", "x" * 65])
def test_dataset_names_that_become_paths_are_checked(file_root: str, name: str) -> None:
    with pytest.raises(ValueError, match="dataset name"):
        versions.version_uri(file_root, name, V1)
