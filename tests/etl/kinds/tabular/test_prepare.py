"""Transform on a real extracted slice: stable split, derived features, train-only statistics."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pandas as pd
import pytest

from etl import statistics
from etl.kinds.landing import LandOptions
from etl.kinds.tabular import prepare as transform
from etl.kinds.tabular import read as extract
from etl.kinds.tabular.land import land
from etl.kinds.tabular.read import join_lookups, read_lookups
from etl.segments import plan
from etl.spec import Spec, load_spec
from etl.write import writer

LEAKAGE = {"dep_time", "dep_delay", "arr_time", "air_time", "arr_delay"}


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Three real days, read and joined as a segment build reads them (strings)."""
    root = f"file://{tmp_path_factory.mktemp('raw')}"
    land(root, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 4)))
    return joined_window(root, load_spec("flights"), datetime(2013, 1, 4, tzinfo=UTC))


def joined_window(root: str, spec: Spec, end: datetime) -> pd.DataFrame:
    """Every primary row of the window's files with the lookups joined (etl.segments.build)."""
    uris = plan.window_files(root, spec.primary_source, None, end)
    rights, _, _ = read_lookups(root, spec)
    return join_lookups(extract.read_files(uris, spec.primary_source)[0], spec, rights)


def _reference_hash(values: list[str], salt: str) -> int:
    """The documented definition, one row in plain Python: FNV-1a 64 then splitmix64."""
    mask, h = 2**64 - 1, 0xCBF29CE484222325
    for byte in "\x1f".join([salt, *values]).encode():
        h = ((h ^ byte) * 0x100000001B3) & mask
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & mask
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & mask
    return h ^ (h >> 31)


def test_key_hash_is_pinned_and_salted(raw: pd.DataFrame) -> None:
    df = pd.DataFrame({"a": ["2013-01-01T10:00:00Z"], "b": ["UA"], "c": ["1545"]},
                      dtype="string[pyarrow]")
    h = writer.key_hash(df, ("a", "b", "c"), "flights-v1")
    # pinned: a change here moves rows between splits of every future version
    assert int(h[0]) == 0x3ED490EAF0A217B2
    assert writer.key_hash(df, ("a", "b", "c"), "other")[0] != h[0]
    typed = pd.DataFrame({"a": ["2013-01-01T10:00:00Z"], "b": ["UA"], "c": ["1545"]})
    assert writer.key_hash(typed, ("a", "b", "c"), "flights-v1")[0] == h[0]
    key = ("time_hour", "carrier", "flight", "origin")
    sample = raw.iloc[100:2000:97]  # a slice: the vectorized path must honour array offsets
    got = writer.key_hash(sample, key, "s")
    assert [int(v) for v in got] == [_reference_hash([r[c] for c in key], "s")
                                     for _, r in sample.iterrows()]


def test_split_fractions() -> None:
    hashes = np.random.default_rng(0).integers(0, 2**63, 200_000, dtype=np.uint64) * 2
    names = writer.assign_split(hashes, (("train", 0.8), ("eval", 0.1), ("test", 0.1)))
    share = pd.Series(names).value_counts(normalize=True)
    assert abs(share["train"] - 0.8) < 0.005 and abs(share["test"] - 0.1) < 0.005


def test_prepare_derives_features_and_drops_cancelled(raw: pd.DataFrame) -> None:
    spec = load_spec("flights")
    out = transform.prepare_rows(raw, spec)
    cancelled = int(raw["arr_delay"].isna().sum())
    assert cancelled > 0 and len(out) == len(raw) - cancelled
    assert not set(out.columns) & LEAKAGE
    assert list(out.columns) == [f.name for f in spec.features] + ["late", "_split", "_hash",
                                                                  "_missing"]
    kept = raw[raw["arr_delay"].notna()].reset_index(drop=True)
    delay = kept["arr_delay"].astype(float)
    assert (out["late"] == (delay > 15).astype("int64")).all()
    first = kept.index[(kept["carrier"] == "UA") & (kept["flight"] == "1545")
                       & (kept["time_hour"] == "2013-01-01T10:00:00Z")][0]
    row = out.loc[first]
    assert (row["sched_dep_hour"], row["sched_arr_hour"]) == (5.0, 8.0)  # 515 / 819
    assert row["day_of_week"] == 1.0  # 2013-01-01 was a Tuesday
    assert row["plane_age"] == 2013 - 1999  # N14228, built 1999
    assert out["carrier"].notna().all() and (out["plane_type"] == "UNKNOWN").any()


def test_split_does_not_depend_on_partitioning(raw: pd.DataFrame) -> None:
    spec = load_spec("flights")
    whole = transform.prepare_rows(raw, spec)
    shuffled = raw.sample(frac=1.0, random_state=1)
    cut = len(shuffled) // 3
    parts = pd.concat([transform.prepare_rows(shuffled.iloc[i:i + cut], spec)
                       for i in range(0, len(shuffled), cut)])
    a = whole.set_index("_hash")["_split"].sort_index()
    b = parts.set_index("_hash")["_split"].sort_index()
    pd.testing.assert_series_equal(a, b)
    assert a.index.is_unique


def test_statistics_use_train_only_and_mean_fills_stay_missing(raw: pd.DataFrame) -> None:
    """Statistics as a window gets them: a partial per segment, merged, then finalized."""
    spec = load_spec("flights")
    cut = len(raw) // 3
    partials = [transform.split_partial(transform.prepare_rows(raw.iloc[i:i + cut], spec),
                                        spec) for i in range(0, len(raw), cut)]
    stats = transform.finalize_partial(statistics.StatisticsPartial.merge_all(partials), spec)
    whole = transform.finalize_partial(transform.split_partial(
        transform.prepare_rows(raw, spec), spec), spec)
    assert stats["split_counts"] == whole["split_counts"]
    assert stats["vocabulary_counts"] == whole["vocabulary_counts"]
    for col, got in stats["numeric"].items():
        assert got == pytest.approx(whole["numeric"][col])
    local = transform.prepare_rows(raw, spec)
    train = local[local["_split"] == "train"]
    assert stats["num_examples"] == len(train) == stats["split_counts"]["train"]
    assert sum(stats["split_counts"].values()) == len(local)
    assert len(raw) - len(local) == int(raw["arr_delay"].isna().sum())  # cancelled: dropped
    for col in ("distance", "temp", "plane_age"):
        got = stats["numeric"][col]
        assert got["mean"] == pytest.approx(train[col].mean())
        assert got["var"] == pytest.approx(train[col].var(ddof=0))
        assert (got["min"], got["max"]) == (train[col].min(), train[col].max())
    assert stats["vocabulary_counts"]["carrier"] == train["carrier"].value_counts().to_dict()
    assert stats["vocabularies"]["carrier"][0] == train["carrier"].value_counts().index[0]
    assert stats["label_counts"] == {str(k): int(v) for k, v in
                                     train["late"].value_counts().sort_index().items()}
    final = transform.finalize_rows(local, spec, stats["label_schema"])
    assert final["distance"].dtype == np.float32 and final["late"].dtype == np.int64
    # Only `fill: mean` features keep missing values (NaN): the model imputes the train mean.
    mean_filled = {f.name for f in spec.features if f.fill == "mean"}
    assert set(final.columns[final.isna().any()]) <= mean_filled
    gust_nulls = local["wind_gust"].isna().to_numpy()
    assert gust_nulls.any()
    kept = final.set_index("_hash").loc[local["_hash"][gust_nulls], "wind_gust"]
    assert kept.isna().all()
    assert stats["numeric"]["wind_gust"]["count"] == int(train["wind_gust"].notna().sum())
    assert not final["precip"].isna().any()  # `fill: 0` is applied in the records
