"""etl.statistics: split statistics partials of any grouping merge to the whole frame's values,
a partial reads and writes back the JSON a segment stores byte for byte (old ones too), and the
moments of a whole frame are each column's moments."""

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


def _stored(parts: list[stats.StatisticsPartial]) -> list[stats.StatisticsPartial]:
    """The partials as a segment.json stores them and a later run reads them back."""
    return [stats.StatisticsPartial.from_json(p, "segment.json", "statistics_partial")
            for p in json.loads(json.dumps([p.to_json() for p in parts]))]


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
        merged = _final(stats.StatisticsPartial.merge_all(_stored(order)))
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
    merged = _final(stats.StatisticsPartial.merge_all([empty, only_train, empty]))
    assert merged["split_counts"] == {"train": 10, "eval": 0, "test": 0}
    assert _final(stats.StatisticsPartial.merge_all([]))["num_examples"] == 0
    assert _final(empty)["numeric"]["x"] == {"mean": 0.0, "var": 0.0, "min": 0.0, "max": 0.0,
                                             "count": 0}


# a partial as segment.json stored it before null counts and label moments (etl.versions'
# test fixture holds one with its rows only)
OLD = {"train": {"rows": 3, "labels": {"0": 2, "1": 1},
                 "numeric": {"x": {"count": 2, "sum": 3.0, "mean": 1.5, "m2": 0.5, "min": 1.0,
                                   "max": 2.0}},
                 "vocab": {"c": {"a": 2, "b": 1}}},
       "eval": {"rows": 0, "labels": {}, "numeric": {"x": dict(stats.EMPTY_MOMENTS)},
                "vocab": {"c": {}}}}


def _bytes(obj: dict) -> str:
    return json.dumps(obj)  # key order included: what segment.json holds


@pytest.mark.parametrize("how", ["counts", "moments", "nulls", "old", "rows only"])
def test_a_stored_partial_reads_and_writes_back_byte_for_byte(frame, how):
    framed = frame.assign(_m=np.arange(len(frame)) % 4, reg=frame["y"] / 3)
    stored = {
        "counts": lambda: _partial(frame).to_json(),
        "moments": lambda: stats.partial(framed, frame[SPLIT_COL], SPLITS, "reg", NUMERIC,
                                         CATEGORICAL, "moments", ("_m", ["c", "x"])).to_json(),
        "nulls": lambda: stats.partial(framed, frame[SPLIT_COL], SPLITS, "label", NUMERIC,
                                       CATEGORICAL, missing=("_m", ["c", "x"])).to_json(),
        "old": lambda: OLD, "rows only": lambda: {"train": {"rows": 3}},
    }[how]()
    text = _bytes(stored)
    read = stats.StatisticsPartial.from_json(json.loads(text), "segment.json")
    assert _bytes(read.to_json()) == text
    merged = read.merge(read)  # writes its keys as the dict code wrote them
    assert list(merged.to_json()) == sorted(stored)
    assert merged.split("train").rows == 2 * read.split("train").rows


def test_an_old_partial_merges_with_a_new_one_as_unknown_nulls(frame):
    new = stats.partial(frame.assign(_m=1), frame[SPLIT_COL], SPLITS, "label", NUMERIC,
                        CATEGORICAL, missing=("_m", ["c"]))
    assert new.split("train").nulls == {"c": new.split("train").rows}
    old = stats.StatisticsPartial.from_json(OLD, "segment.json")
    assert old.split("train").nulls is None and old.split("train").label_moments is None
    for merged in (old.merge(new), new.merge(old)):
        train = merged.split("train")
        assert train.nulls is None and "nulls" not in merged.to_json()["train"]
        assert train.label_moments is None
        assert train.rows == 3 + new.split("train").rows
        assert train.vocab["c"]["a"] == 2 + new.split("train").vocab["c"]["a"]
        assert _final(merged)["null_counts"] == {  # the numeric columns' own, "c" unknown
            "x": train.rows - train.numeric["x"]["count"], "y": train.rows - train.numeric[
                "y"]["count"]}
    assert stats.StatisticsPartial().split("train") == stats.SplitPartial()


def test_a_malformed_partial_names_the_file_and_key():
    with pytest.raises(ValueError, match=r"seg-1: key 'statistics_partial.train.rows': "
                                         r"expected an integer"):
        stats.StatisticsPartial.from_json({"train": {"rows": "3"}}, "seg-1", "statistics_partial")
    with pytest.raises(ValueError, match="seg-1: key 'statistics_partial': expected an object"):
        stats.StatisticsPartial.from_json(None, "seg-1", "statistics_partial")


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
