"""A table whose features are named like the model's own layers and ops (``features``,
``dense_0``, ``lookup_<another feature>``, ``<dataset>_core``, ``cast``, ...) trains, exports
and serves in both families, as numeric features and as categorical ones, and the SavedModel
answers as the Keras model does (issue 53: ``The name "X" is used 2 times in the model``).

The names are every name of the models built for an ordinary table (their layers and ops,
nested models' too), so a layer added later is covered, and those that clashed before the
fix (``SEEN``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from etl.versions import Manifest
from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.models.forest import Forest, compile_forest
from training.models.mlp import build_models
from training.models.tabular import SERVING_KEYS_FILE, export_serving, linear_head, serve_units
from training.models.trees import assemble, tree_preprocess
from training.run.train import train

FAST = {  # tiny budgets: building, exporting and serving are under test, not the fit
    "trees": TrainConfig(input=InputConfig(batch_size=128, seed=1), min_margin=0.0,
                         model=ModelConfig(family="trees", max_rounds=20)),
    "mlp": TrainConfig(input=InputConfig(batch_size=128, seed=1), epochs=1,
                       steps_per_execution=4, min_margin=0.0, model=ModelConfig(family="mlp")),
}
CATEGORICAL = [n for n, f in fx.FEATURES.items() if f["kind"] == "categorical"]


def model_names(model: keras.Model) -> set[str]:
    """Every name in ``model``: its own, its layers' and ops' (an auto-named op also without
    its count: ``cast`` of ``cast_3``), and those of the models nested in it."""
    names = {model.name}
    for op in model.operations:
        names |= {op.name, re.sub(r"_\d+$", "", op.name)}
        if isinstance(op, keras.Model):
            names |= model_names(op)
    return names


def _trivial_forest(columns: int, link: str) -> Forest:
    """A forest of one leaf: the trees' model without fitting it."""
    dump = {"tree_info": [{"tree_structure": {"leaf_value": 0.5}}],
            "feature_names": [f"c{i}" for i in range(columns)], "num_tree_per_iteration": 1}
    return Forest.from_arrays(compile_forest(dump), link)


def _models(manifest: Manifest, config: ModelConfig, **task) -> dict[str, keras.Model]:
    """Both families' full models for ``manifest``; ``task``: ``head`` and ``serve``."""
    inputs = tree_preprocess(manifest)
    forest = _trivial_forest(len(inputs.columns), "identity" if task else "sigmoid")
    return {"mlp": build_models(manifest, config, **task).full,
            "trees": assemble(manifest, inputs, forest, task.get("serve")).full}


def own_names(manifest: Manifest, config: ModelConfig, **task) -> list[str]:
    """The names of the models built for ``manifest`` that are not its features' or label's."""
    schema = manifest.schema
    found = set().union(*(model_names(m) for m in _models(manifest, config, **task).values()))
    return sorted(found - set(schema.features) - {schema.label.name})


ORDINARY = fx.typed(fx.build_manifest(fx.DATASET, fx.VERSION, {}, fx.make_rows(600, seed=1)))
SEEN = {"features", "dense_0", "dropout_0", "onehot_carrier", "norm_numeric", "lookup_carrier",
        "flights_core", "flights_preprocess", "cast", "stack", "where", "is_nan"}
"""Names that clashed before the fix, ops' among them: Keras named the ``keras.ops`` calls
(``cast``, ``stack``, ``where``, ``is_nan``) of the models' graphs itself."""
FOUND = own_names(ORDINARY, FAST["mlp"].model)
OWN = sorted({*FOUND, *SEEN})
NAMES = [*fx.FEATURES, *OWN]
TABLES = {  # the model's own names as numeric features, and as categorical ones
    "numeric": CATEGORICAL,
    "categorical": [*CATEGORICAL, *OWN],
}


def test_the_names_found_are_the_models_layers() -> None:
    assert {"features", "dense_0", "dropout_0", "onehot_carrier", "embed_dest", "norm_numeric",
            "lookup_carrier", "lookup_dest", "flights_core", "flights_preprocess", "forest",
            "numeric"} <= set(FOUND)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, fx.WrittenVersion]:
    root = tmp_path_factory.mktemp("layer-names")
    return {kind: fx.write_version(root / kind, n=1500, seed=5, names=NAMES,
                                   categorical=categorical)
            for kind, categorical in TABLES.items()}


@pytest.mark.parametrize("kind", sorted(TABLES))
@pytest.mark.parametrize("family", sorted(FAST))
def test_features_named_like_the_models_layers_train_export_and_serve(
        stores: dict[str, fx.WrittenVersion], tmp_path: Path, family: str, kind: str) -> None:
    store = stores[kind]
    features = store.manifest["schema"]["features"]
    assert {n for n in OWN if features[n]["kind"] != kind} == set()
    result = train(store.uri, f"{tmp_path.as_uri()}/models", family, FAST[family])
    assert result.metrics.to_json()["family"] == family
    run = Path(result.model_uri.removeprefix("file://"))
    raw = {name: tf.constant([r[name] for r in store.rows["test"]], dtype=feat["dtype"])
           for name, feat in features.items()}
    _assert_serves_as_keras(keras.saving.load_model(run / "model.keras"), raw,
                            run / "saved_model")


def _assert_serves_as_keras(model: keras.Model, raw: dict[str, tf.Tensor], saved: Path) -> None:
    """The SavedModel at ``saved`` answers ``raw`` as ``model`` does, by name and flat."""
    own = model(raw, training=False).numpy()
    assert np.isfinite(own).all()
    exported = tf.saved_model.load(str(saved))  # kept: it owns the variables
    np.testing.assert_allclose(exported.serve(raw).numpy(), own, rtol=1e-6, atol=1e-7)
    keys = json.loads((saved / SERVING_KEYS_FILE).read_text())
    assert set(keys) == set(raw)
    flat = exported.signatures["serving_default"](**{keys[n]: t for n, t in raw.items()})
    np.testing.assert_allclose(next(iter(flat.values())).numpy(), own, rtol=1e-6, atol=1e-7)


def _regression(own: list[str], categorical: bool) -> Manifest:
    """A regression table (target learned through log1p) whose features carry ``own``."""
    rows = fx.make_rows(300, seed=2)
    names = [*fx.FEATURES, *own]
    copies = fx.named_features(names, [*CATEGORICAL, *(own if categorical else [])])
    doc = fx.build_manifest(fx.DATASET, fx.VERSION, {},
                            [{n: r[c] for n, c in copies.items()} | {"late": r["late"]}
                             for r in rows],
                            {n: fx.FEATURES[c] for n, c in copies.items()})
    doc["schema"]["label"] = {"name": "late", "dtype": "float32", "transform": "log1p"}
    doc["statistics"]["label"] = {"mean": 0.25, "var": 0.2}
    return fx.typed(doc)


@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "categorical"])
def test_a_regression_models_own_names_as_features_build_export_and_serve(
        tmp_path: Path, categorical: bool) -> None:
    task = {"head": linear_head, "serve": serve_units}
    own = sorted({*own_names(_regression([], False), ModelConfig(), **task), *SEEN})
    assert {"standardized", "expm1", "dense_0"} <= set(own)
    manifest = _regression(own, categorical)
    rows = fx.make_rows(20, seed=3)
    copies = fx.named_features([*fx.FEATURES, *own], [*CATEGORICAL, *(own if categorical
                                                                       else [])])
    features = manifest.schema.features
    raw = {n: tf.constant([r[c] for r in rows], dtype=features[n].dtype)
           for n, c in copies.items()}
    for family, model in _models(manifest, ModelConfig(), **task).items():
        export_serving(model, tmp_path / family)
        model.save(tmp_path / f"{family}.keras")
        _assert_serves_as_keras(keras.saving.load_model(tmp_path / f"{family}.keras"), raw,
                                tmp_path / family)
