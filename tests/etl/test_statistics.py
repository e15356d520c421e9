"""etl.statistics: split statistics partials of any grouping merge to the whole frame's values,
and the moments of a whole frame are each column's moments."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from etl import statistics as stats
from etl.write.writer import SPLIT_COL

SPLITS = ["train", "eval", "test"]
NUMERIC, CATEGORICAL = ["x", "y"], ["c"]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 5000
    x = rng.normal(1e4, 3.0, n)  # a large mean: sums of squares would lose the variance
    x[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({
        "x": x, "y": rng.integers(-50, 50, n).astype("float32"),
        "c": rng.choice(["a", "b", "c", None], n, p=[0.5, 0.3, 0.15, 0.05]),
        "label": rng.integers(0, 2, n), SPLIT_COL: rng.choice(SPLITS, n, p=[0.8, 0.1, 0.1]),
    })


def _partial(df: pd.DataFrame) -> stats.StatisticsPartial:
    return stats.partial(df, df[SPLIT_COL], SPLITS, "label", NUMERIC, CATEGORICAL)


def _final(p: stats.StatisticsPartial) -> dict:
    return stats.finalize(p, SPLITS, NUMERIC, CATEGORICAL)


def test_whole_frame_matches_pandas(frame):
    got = _final(_partial(frame))
    train = frame[frame[SPLIT_COL] == "train"]
    for col in NUMERIC:
        values = train[col].astype("float64").dropna()
        assert got["numeric"][col]["count"] == len(values)
        assert got["numeric"][col]["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert got["numeric"][col]["var"] == pytest.approx(values.var(ddof=0), rel=1e-9)
        assert got["numeric"][col]["min"] == values.min()
        assert got["numeric"][col]["max"] == values.max()
    counts = train["c"].value_counts()
    assert got["vocabulary_counts"]["c"] == {k: int(v) for k, v in counts.items()}
    assert got["vocabularies"]["c"] == list(counts.index)  # by count, descending
    assert got["label_counts"] == {str(k): int(v) for k, v in
                                   sorted(train["label"].value_counts().items())}
    assert got["split_counts"] == {s: int((frame[SPLIT_COL] == s).sum()) for s in SPLITS}


@pytest.mark.parametrize("parts", [2, 7, 365])
def test_any_grouping_merges_to_the_same_statistics(frame, parts):
    whole = _final(_partial(frame))
    chunks = np.array_split(np.arange(len(frame)), parts)
    partials = [_partial(frame.iloc[idx]) for idx in chunks]
    for order in (partials, partials[::-1]):
        merged = _final(stats.merge_all(json.loads(json.dumps(order))))  # stored as JSON
        assert merged["split_counts"] == whole["split_counts"]
        assert merged["vocabularies"] == whole["vocabularies"]
        assert merged["label_counts"] == whole["label_counts"]
        for col in NUMERIC:
            for key in ("mean", "var", "min", "max"):
                assert merged["numeric"][col][key] == pytest.approx(
                    whole["numeric"][col][key], rel=1e-9, abs=1e-12), (col, key)


def test_empty_parts_and_missing_splits_merge_cleanly(frame):
    empty = _partial(frame.iloc[:0])
    only_train = _partial(frame[frame[SPLIT_COL] == "train"].iloc[:10])
    merged = _final(stats.merge_all([empty, only_train, empty]))
    assert merged["split_counts"] == {"train": 10, "eval": 0, "test": 0}
    assert _final(stats.merge_all([]))["num_examples"] == 0
    assert _final(empty)["numeric"]["x"] == {"mean": 0.0, "var": 0.0, "min": 0.0, "max": 0.0,
                                             "count": 0}


def test_moments_of_a_whole_frame_match_column_by_column() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(5, 2, 1000), "big": rng.normal(1e6, 1, 1000),
                          "none": np.nan})
    frame.loc[::7, "a"] = np.nan
    together = stats.moments_of_frame(frame)
    for col in frame:
        alone = stats.moments_of(frame[col])
        assert together[col].keys() == alone.keys()
        for key, value in alone.items():
            if value is None:
                assert together[col][key] is None
            else:
                assert together[col][key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
