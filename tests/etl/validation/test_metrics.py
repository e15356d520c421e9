"""Dataset-level metric partials: any grouping of the rows merges to the whole frame's values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from etl.statistics import EMPTY_MOMENTS, merge_moments, moments_of
from etl.validation.metrics import hashes_of, merge_metric_partials, metric_partials

KEYS = [("rows",), ("count", "x"), ("num", "x"), ("vc", "c"),
        ("hashes", ("k1", "k2"), "all_values_are_missing")]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 3000
    x = rng.normal(5e5, 2.0, n)
    x[rng.random(n) < 0.1] = np.nan
    df = pd.DataFrame({"x": x, "c": rng.choice(["EWR", "JFK", "LGA", None], n),
                       "k1": np.arange(n), "k2": rng.choice(["a", "b"], n)})
    df.loc[[10, 2990], ["k1", "k2"]] = [7, "z"]  # one key twice, far apart: other partitions
    return df


@pytest.mark.parametrize("parts", [1, 3, 10, 300])
def test_partials_of_any_grouping_merge_to_the_whole(frame, parts):
    chunks = [frame.iloc[i] for i in np.array_split(np.arange(len(frame)), parts)]
    got = merge_metric_partials([metric_partials(c, KEYS) for c in chunks])
    assert got[("rows",)] == len(frame)
    assert got[("count", "x")] == frame["x"].count()
    summary = got[("num", "x")]
    assert summary["count"] == frame["x"].count()
    assert summary["mean"] == pytest.approx(frame["x"].mean(), rel=1e-12)
    assert summary["m2"] / (summary["count"] - 1) == pytest.approx(frame["x"].var(), rel=1e-9)
    assert (summary["min"], summary["max"]) == (frame["x"].min(), frame["x"].max())
    assert got[("vc", "c")].sort_index().to_dict() == \
        frame["c"].value_counts().sort_index().to_dict()
    hashes = got[("hashes", ("k1", "k2"), "all_values_are_missing")]
    whole = np.sort(hashes_of(frame, ["k1", "k2"], "all_values_are_missing").to_numpy())
    assert np.array_equal(hashes, whole)
    _, counts = np.unique(hashes, return_counts=True)
    assert counts.max() == 2 and (counts == 2).sum() == 1  # the duplicate across partitions


def test_empty_parts_merge_cleanly(frame):
    empty = metric_partials(frame.iloc[:0], KEYS)
    some = metric_partials(frame.iloc[:5], KEYS)
    got = merge_metric_partials([empty, some, empty])
    assert got[("rows",)] == 5
    assert got[("num", "x")] == merge_moments(EMPTY_MOMENTS, some[("num", "x")])
    assert merge_metric_partials([]) == {}


def test_a_segments_partials_are_its_own_rows_figures(frame):
    """What a segment stores is what its rows give: counts, moments, value counts (named,
    most frequent first) and sorted key hashes -- an empty segment included."""
    groups = np.random.default_rng(5).integers(0, 6, len(frame))
    groups[groups == 2] = 3
    for g in range(6):
        rows = frame[groups == g]
        part = metric_partials(rows, KEYS)
        assert part[("rows",)] == len(rows)
        assert part[("count", "x")] == rows["x"].count()
        want = moments_of(rows["x"])
        assert part[("num", "x")].keys() == want.keys()
        assert {k: v for k, v in part[("num", "x")].items() if k in ("count", "min", "max")} \
            == {k: v for k, v in want.items() if k in ("count", "min", "max")}
        if len(rows):
            assert part[("num", "x")]["mean"] == pytest.approx(want["mean"], rel=1e-12)
            assert part[("num", "x")]["m2"] == pytest.approx(want["m2"], rel=1e-9)
        counts = part[("vc", "c")]
        assert counts.to_dict() == rows["c"].value_counts().to_dict()
        assert (counts.name, counts.index.name) == ("count", "c")
        assert list(counts) == sorted(counts, reverse=True)
        assert np.array_equal(part[("hashes", ("k1", "k2"), "all_values_are_missing")],
                              np.sort(hashes_of(rows, ["k1", "k2"],
                                                "all_values_are_missing").to_numpy()))
