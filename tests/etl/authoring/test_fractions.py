"""etl.authoring.fractions: the drafted split shares follow the table's rows and classes."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("rows, classes, fractions, problem", [
    (5000, None, {"train": 0.8, "eval": 0.1, "test": 0.1}, False),
    (214, {"1": 70, "2": 76, "3": 17, "5": 13, "6": 9, "7": 29},
     {"train": 0.6, "eval": 0.2, "test": 0.2}, False),
    (400, None, {"train": 0.8, "eval": 0.1, "test": 0.1}, False),
    (200, None, {"train": 0.7, "eval": 0.15, "test": 0.15}, False),
    (80, None, {"train": 0.6, "eval": 0.2, "test": 0.2}, True),
    (500, {"a": 497, "b": 3}, {"train": 0.6, "eval": 0.2, "test": 0.2}, True),
])
def test_split_shares_follow_rows_and_classes(rows, classes, fractions, problem) -> None:
    from etl.authoring.fractions import draft_fractions

    got = draft_fractions(rows, classes)
    assert got.split() == fractions and bool(got.problem) == problem
