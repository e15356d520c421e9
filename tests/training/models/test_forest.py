"""The compiled forest: LightGBM's predictions from graph ops, whatever the batch size."""

from __future__ import annotations

import numpy as np
import pytest

from training.config import ModelConfig
from training.models import forest
from training.models.forest import Forest, compile_forest
from training.models.trees import fit_booster


def _fit(zero_as_missing: bool) -> tuple[object, np.ndarray]:
    rng = np.random.default_rng(3)
    n = 3000
    x = np.c_[rng.normal(size=n), rng.integers(0, 40, size=n), rng.normal(size=n),
              rng.integers(0, 3, size=n) * 1.0].astype(np.float32)
    x[rng.random(n) < 0.15, 0] = np.nan
    x[rng.random(n) < 0.2, 2] = 0.0
    y = (np.nan_to_num(x[:, 0], nan=-1) + np.isin(x[:, 1], [1, 4, 9, 16, 25]) + x[:, 2]
         + rng.normal(scale=0.5, size=n) > 0.3).astype(float)
    params = {"objective": "binary", "metric": "binary_logloss", "num_leaves": 31,
              "min_data_in_leaf": 5, "min_data_per_group": 5, "cat_smooth": 1.0,
              "zero_as_missing": zero_as_missing, "seed": 1, "deterministic": True,
              "num_threads": 1, "verbosity": -1}
    booster, _ = fit_booster((x[:2000], y[:2000]), (x[2000:], y[2000:]), params, [1, 3],
                             ModelConfig(max_rounds=80, early_stopping_rounds=80))
    return booster, x


@pytest.mark.parametrize("zero_as_missing", [False, True])
def test_every_batch_size_predicts_what_lightgbm_predicts(zero_as_missing: bool) -> None:
    booster, x = _fit(zero_as_missing)
    dump = booster.dump_model()
    arrays = compile_forest(dump)
    assert len(arrays.cat_feature) > 1, "no categorical split"
    assert max(g[2] for g in arrays.groups) > min(g[2] for g in arrays.groups), "one depth only"
    layer = Forest.from_arrays(arrays, "identity")
    odd = np.asarray([[np.nan, 77, 0.0, -1], [0.0, -3, np.inf, 2], [-np.inf, 2.7, np.nan, 9]],
                     np.float32)
    rows = np.r_[x, odd]
    for size in (1, 3, forest.WALK_ROWS, forest.WALK_ROWS + 5, len(rows)):
        got = np.asarray(layer(rows[-size:]))[:, 0]
        want = booster.predict(rows[-size:], raw_score=True)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{size} rows")


def test_a_leaf_keeps_its_rows_and_children_sit_side_by_side() -> None:
    booster, _ = _fit(False)
    arrays = compile_forest(booster.dump_model())
    leaves = np.isinf(arrays.threshold)
    assert np.array_equal(arrays.child[leaves], np.flatnonzero(leaves))
    splits = np.flatnonzero(~leaves)
    assert (arrays.child[splits] > splits).all()  # children come after, left then right
    assert len(np.unique(arrays.child[splits])) == len(splits)
