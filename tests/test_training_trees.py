"""The tree family: LightGBM's trees compiled to TensorFlow give LightGBM's predictions."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from training.config import ModelConfig
from training.models.trees import Forest, booster_params, compile_forest, fit_booster

CONFIG = ModelConfig(max_rounds=60, early_stopping_rounds=20)


def _table(task: str, n: int = 1500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Column 0 numeric with NaNs, 1 a category id (0-29), 2 numeric: a label that needs
    all three, the missing values included."""
    rng = np.random.default_rng(seed)
    x = np.c_[rng.normal(size=n), rng.integers(1, 30, size=n), rng.normal(size=n)]
    x[rng.random(n) < 0.2, 0] = np.nan
    signal = np.nan_to_num(x[:, 0], nan=1.5) + np.isin(x[:, 1], [2, 5, 7, 11, 13]) * 1.5 + x[:, 2]
    if task == "regression":
        y = 10 * signal + rng.normal(size=n)
    elif task == "binary":
        y = (signal + rng.normal(scale=0.5, size=n) > 0.5).astype(float)
    else:
        y = np.digitize(signal + rng.normal(scale=0.5, size=n), [-0.5, 0.5, 1.5]).astype(float)
    return x.astype(np.float32), y


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_compiled_trees_predict_what_lightgbm_predicts(task: str) -> None:
    x, y = _table(task)
    train, held = (x[:1000], y[:1000]), (x[1000:], y[1000:])
    classes = 4 if task == "multiclass" else 2
    booster, history = fit_booster(train, held, booster_params(CONFIG, task, classes, 1000, 7),
                                   [1], CONFIG)
    assert len(history["val_loss"]) >= booster.best_iteration > 1
    dump = booster.dump_model(num_iteration=booster.best_iteration)
    assert any(n["decision_type"] == "==" for n in _splits(dump)), "no categorical split"
    assert any(n["missing_type"] == "NaN" for n in _splits(dump)), "no learned NaN branch"
    rows = np.r_[held[0], [[np.nan, 0, 0.1], [0.2, 77, -1.0], [np.nan, 5, np.nan]]]  # unseen ids
    rows = rows.astype(np.float32)
    link = {"binary": "sigmoid", "multiclass": "softmax", "regression": "identity"}[task]
    got = np.asarray(Forest.from_arrays(compile_forest(dump), link)(rows))
    want = booster.predict(rows, num_iteration=booster.best_iteration)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-5, atol=1e-6)
    raw = Forest.from_arrays(compile_forest(dump), "identity")(rows)
    np.testing.assert_allclose(np.asarray(raw), booster.predict(
        rows, num_iteration=booster.best_iteration, raw_score=True).reshape(got.shape),
        rtol=1e-5, atol=1e-5)


def _splits(dump: dict) -> list[dict]:
    out, todo = [], [t["tree_structure"] for t in dump["tree_info"]]
    while todo:
        node = todo.pop()
        if "split_feature" in node:
            out.append(node)
            todo += [node["left_child"], node["right_child"]]
    return out


def test_forest_survives_keras_save_and_load(tmp_path) -> None:
    x, y = _table("binary", 600)
    booster, _ = fit_booster((x[:400], y[:400]), (x[400:], y[400:]),
                             booster_params(CONFIG, "binary", 2, 400, 1), [1], CONFIG)
    layer = Forest.from_arrays(compile_forest(booster.dump_model()), "sigmoid")
    inp = keras.Input(shape=(3,))
    model = keras.Model(inp, layer(inp))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), booster.predict(x)[:, None],
                               rtol=1e-5, atol=1e-6)
