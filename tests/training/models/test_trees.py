"""The tree family: LightGBM's trees compiled to TensorFlow give LightGBM's predictions."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.models.forest import Forest, compile_forest
from training.models.trees import Progress, booster_params, fit_booster
from training.run.train import train

fx_make_rows = fx.make_rows

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


def test_every_distinct_value_of_a_column_is_a_split_point() -> None:
    # 120 distinct values, one row each, the target the value itself: one round at learning
    # rate 1 with one row a leaf fits it exactly only if no two values share a bin (LightGBM's
    # default merges rare values, three rows a bin, as a survey-weight table showed)
    x = np.arange(120, dtype=np.float32)[np.random.default_rng(0).permutation(120)][:, None]
    y = x[:, 0].astype(np.float64) * 0.5
    config = ModelConfig(max_rounds=1, early_stopping_rounds=1, tree_learning_rate=1.0,
                         num_leaves=200, min_data_in_leaf=1)
    params = {**booster_params(config, "regression", 2, 120, 7), "lambda_l2": 0.0}
    booster, _ = fit_booster((x, y), (x, y), params, [], config)
    np.testing.assert_allclose(booster.predict(x), y, atol=1e-6)


def test_a_long_fit_says_where_it_is(caplog) -> None:
    x, y = _table("regression", n=3000)
    config = ModelConfig(max_rounds=300, early_stopping_rounds=300)
    params = booster_params(config, "regression", 2, 2000, 7)
    with caplog.at_level(logging.INFO, logger="training.models.trees"):
        fit_booster((x[:2000], y[:2000]), (x[2000:], y[2000:]), params, [1], config,
                    progress=Progress(rounds=50, seconds=3600.0))
    lines = [r.getMessage() for r in caplog.records if r.name == "training.models.trees"]
    assert [line.split(",")[0] for line in lines] == [
        f"trees: round {r} of at most 300" for r in (50, 100, 150, 200, 250, 300)]
    assert all(re.search(r"eval l2 [\d.e+-]+, \d+ s elapsed, at most \d+ s left$", line)
               for line in lines), lines


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


def _step_rows(n: int, seed: int, random_labels: bool = False) -> list[dict]:
    """fx rows whose label is a hard step in temp crossed with a carrier set: a tree states
    it in two splits, a small MLP only approaches it."""
    rows = fx_make_rows(n, seed, random_labels)
    for row in rows:
        row["late"] = int((row["temp"] > 60) != (row["carrier"] in ("UA", "DL", "MQ")))
    return rows


@pytest.fixture(scope="module")
def step_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[fx.WrittenVersion, dict]:
    patch = pytest.MonkeyPatch()
    patch.setattr(fx, "make_rows", _step_rows)
    try:
        store = fx.write_version(tmp_path_factory.mktemp("step"), n=3000, seed=3)
    finally:
        patch.undo()
    config = TrainConfig(input=InputConfig(batch_size=128, seed=1), epochs=2,
                         steps_per_execution=4)
    return store, train(store.uri, f"{store.root.as_uri()}/models", "auto", config)


def test_auto_keeps_the_trees_unless_beaten_beyond_noise_and_says_why(step_run) -> None:
    _, result = step_run
    metrics = result.metrics.to_json()
    choice = metrics["family_choice"]
    assert metrics["family"] == choice["chosen"] == "trees"
    assert choice["metric"] == "auc" and set(choice["eval"]) == {"trees", "mlp"}
    assert choice["eval"]["trees"] > choice["eval"]["mlp"] + 0.02
    assert choice["eval"]["trees"] == pytest.approx(metrics["eval"]["auc"])
    assert choice["why"].startswith("trees is kept: eval auc trees ")
    assert "mlp does not replace trees: lead -" in choice["why"]
    assert metrics["test"]["auc"] > 0.97 and metrics["trees"]["rounds"] == metrics["best_epoch"]


_SERVE_ALONE = """
import json, sys
sys.modules["lightgbm"] = None  # importing it would fail
sys.modules["training"] = None
import tensorflow as tf
row = json.loads(sys.argv[2])
model = tf.saved_model.load(sys.argv[1])
dtypes = {name: spec.dtype for name, spec in model.serve.input_signature[0].items()}
print(float(model.serve({k: tf.constant([v], dtypes[k]) for k, v in row.items()
                         if k in dtypes})[0, 0]))
"""


def test_exported_trees_serve_raw_rows_without_lightgbm(step_run) -> None:
    store, result = step_run
    run = Path(result.model_uri.removeprefix("file://"))
    rows = store.rows["test"][:50] + [{**store.rows["test"][0], "carrier": "ZZ", "dest": "new"}]
    raw = {name: tf.constant([r[name] for r in rows], dtype=feat["dtype"])
           for name, feat in fx.FEATURES.items()}
    exported = tf.saved_model.load(str(run / "saved_model"))  # keep it: it owns the variables
    served = exported.serve(raw).numpy()
    fresh = subprocess.run(  # a process that cannot import lightgbm nor our code
        [sys.executable, "-c", _SERVE_ALONE, str(run / "saved_model"), json.dumps(rows[-1])],
        capture_output=True, text=True, timeout=300, check=False, cwd=run,
        env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert float(fresh.stdout.split()[-1]) == pytest.approx(float(served[-1, 0]), abs=1e-6)
    model = keras.saving.load_model(run / "model.keras")
    np.testing.assert_allclose(served, model(raw).numpy(), rtol=1e-6, atol=1e-7)
    want = np.array([[r["late"]] for r in rows[:50]])
    assert np.mean((served[:50] >= 0.5) == want) > 0.95 and np.isfinite(served[-1]).all()
    assert model.get_layer("flights_core").get_layer("forest").trees > 0


def test_family_trees_fits_trees_only(tmp_path: Path) -> None:
    store = fx.write_version(tmp_path, n=1500, seed=4)
    config = TrainConfig(input=InputConfig(batch_size=128, seed=1), min_margin=0.0,
                         model=ModelConfig(family="trees", max_rounds=50))
    metrics = train(store.uri, f"{tmp_path.as_uri()}/models", "t", config).metrics.to_json()
    assert metrics["family_choice"]["eval"].keys() == {"trees"}
    assert metrics["epochs_run"] <= 50 and "family trees was set" in metrics["family_choice"]["why"]


def test_model_config_refuses_an_unknown_family() -> None:
    with pytest.raises(ValueError, match="family: expected one of"):
        ModelConfig(family="forest")
