"""etl.authoring.fractions: the drafted split shares follow the table's rows and classes."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("rows, classes, fractions, problem", [
    (5000, None, {"train": 0.8, "eval": 0.1, "test": 0.1}, False),
    (214, {"1": 70, "2": 76, "3": 17, "5": 13, "6": 9, "7": 29},
     {"train": 0.6, "eval": 0.2, "test": 0.2}, False),
    (400, None, {"train": 0.8, "eval": 0.1, "test": 0.1}, False),
    (200, None, {"train": 0.7, "eval": 0.15, "test": 0.15}, False),
    (80, None, {"train": 0.5, "eval": 0.25, "test": 0.25}, True),
    (100, None, {"train": 0.5, "eval": 0.25, "test": 0.25}, False),
    (109, {"a": 60, "b": 49}, {"train": 0.5, "eval": 0.25, "test": 0.25}, False),
    (110, None, {"train": 0.6, "eval": 0.2, "test": 0.2}, False),
    (500, {"a": 497, "b": 3}, {"train": 0.6, "eval": 0.2, "test": 0.2}, True),
])
def test_split_shares_follow_rows_and_classes(rows, classes, fractions, problem) -> None:
    from etl.authoring.fractions import draft_fractions

    got = draft_fractions(rows, classes)
    assert got.split() == fractions and bool(got.problem) == problem


@pytest.mark.parametrize("rows", range(88, 400, 7))
def test_eval_and_test_each_get_22_rows_where_a_quarter_allows(rows) -> None:
    from etl.authoring.fractions import MIN_HELD_OUT, draft_fractions

    got = draft_fractions(rows, {"a": rows // 2, "b": rows - rows // 2})
    assert rows * got.held_out >= MIN_HELD_OUT and got.held_out <= 0.25
