"""Gradient-boosted trees: fitted by LightGBM, served as pure TensorFlow.

On tables, boosted trees are the model to beat (Grinsztajn et al., NeurIPS 2022, "Why do
tree-based models still outperform deep learning on tabular data?"): flights' MLP reached
test AUC 0.767 where HistGradientBoosting reached 0.789 in a quarter of the time. LightGBM
fits the trees on arrays read through the version's tf.data pipeline; ``compile_forest``
turns its documented JSON dump (``Booster.dump_model``) into flat node arrays, and the
``Forest`` layer walks every tree of a batch at once with ``tf.gather``, so the saved
``model.keras`` and the exported SavedModel need TensorFlow only.

The trees see raw numbers (NaN kept: a missing value goes where LightGBM sent it while
fitting) and categorical vocabulary ids (the MLP's lookups, OOV id 0), as one float32
matrix whose columns are the features in sorted order (``tree_preprocess``).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from etl.versions import Manifest
from training.config import ModelConfig
from training.models.heads import Serve
from training.models.tabular import TabularModel, vocabulary_lookup

FEATURES = "features"  # the core's one input: [batch, features] float32
LINKS = ("sigmoid", "softmax", "identity")
OBJECTIVES = {"binary": ("binary", "binary_logloss", "sigmoid"),
              "multiclass": ("multiclass", "multi_logloss", "softmax"),
              "regression": ("regression", "l2", "identity")}
MIN_LEAF = 20  # rows a leaf needs at least, unless the table is under 10x that
LARGE_TABLE = 50_000  # train rows from which trees get 63 leaves instead of 31
_NONE, _ZERO, _NAN = 0, 1, 2  # LightGBM's missing types
_MISSING = {"None": _NONE, "Zero": _ZERO, "NaN": _NAN}
_ZERO_THRESHOLD = 1e-35  # LightGBM's kZeroThreshold: |x| below it is "zero" (missing)


class TreeInputs(NamedTuple):
    """The raw inputs, the model that turns them into the trees' matrix, and its columns."""

    raw: dict[str, Any]
    preprocess: keras.Model
    columns: list[str]
    categorical: list[int]


def tree_preprocess(manifest: Manifest) -> TreeInputs:
    """Raw feature values -> ``{FEATURES: [batch, n] float32}``: numbers as they are (NaN
    kept), categories as vocabulary ids of the train split's vocabularies.

    Raises:
        ValueError: a feature lacks its vocabulary or has a kind trees cannot take (names it).
    """
    schema, stats = manifest.schema, manifest.statistics
    where = f"manifest {manifest.dataset}/{manifest.version}"
    raw, cols, columns, categorical = {}, [], [], []
    for name, feat in sorted(schema.features.items()):
        raw[name] = keras.Input(shape=(), name=name, dtype=feat.dtype)
        if feat.kind == "categorical":
            vocab = stats.vocabularies.get(name)
            ids = vocabulary_lookup(where, name, feat, vocab)(raw[name])
            categorical.append(len(columns))
            cols.append(keras.ops.cast(ids, "float32"))
        elif feat.kind == "numeric":
            cols.append(keras.ops.cast(raw[name], "float32"))
        else:
            raise ValueError(f"{where}: feature {name!r} has kind {feat.kind!r}; "
                             "the tree model takes 'numeric' and 'categorical'")
        columns.append(name)
    matrix = keras.ops.stack(cols, axis=1) if cols else None
    if matrix is None:
        raise ValueError(f"{where}: no features to fit trees on")
    model = keras.Model(raw, {FEATURES: matrix},
                        name=f"{manifest.dataset or 'dataset'}_preprocess")
    return TreeInputs(raw, model, columns, categorical)


def booster_params(config: ModelConfig, task: str, classes: int, train_rows: int,
                   seed: int) -> dict[str, Any]:
    """LightGBM's settings: ours where they matter, deterministic for ``seed``.

    Unset, 31 leaves (LightGBM's default), 63 from ``LARGE_TABLE`` train rows, where
    deeper interactions have the rows to back them; at least 20 rows a leaf (as
    HistGradientBoosting), a tenth of the train rows on tables under 200. Fewer rows per leaf
    fit the noise of small tables: on cars (332 train rows) test RMSE was 3.22 at 5 rows a
    leaf, 2.92 at 10, 2.70 at 20 (the reference 2.70); Seattle weather's accuracy 0.793 at
    11, 0.807 at 20. LightGBM's 100 rows per categorical group would keep a 200-row table
    from splitting on a category at all: it follows the leaf size.
    """
    objective, metric, _ = OBJECTIVES[task]
    leaf = config.min_data_in_leaf or int(min(MIN_LEAF, max(2, train_rows // 10)))
    leaves = config.num_leaves or (63 if train_rows >= LARGE_TABLE else 31)
    params = {
        "objective": objective, "metric": metric, "learning_rate": config.tree_learning_rate,
        "num_leaves": leaves, "min_data_in_leaf": leaf,
        "min_data_per_group": leaf, "cat_smooth": 10.0, "lambda_l2": 1.0,
        "seed": seed, "deterministic": True, "force_col_wise": True,
        "num_threads": len(os.sched_getaffinity(0)), "verbosity": -1,
    }
    if task == "multiclass":
        params["num_class"] = classes
    return params


def fit_booster(train: tuple[np.ndarray, np.ndarray], evaluate: tuple[np.ndarray, np.ndarray],
                params: dict[str, Any], categorical: list[int], config: ModelConfig,
                weights: np.ndarray | None = None) -> tuple[Any, dict[str, list[float]]]:
    """Boost up to ``config.max_rounds`` rounds, stopping after ``early_stopping_rounds``
    without a better eval loss; (booster cut at its best round, loss per round).

    OpenMP workers wait passively (unless the environment says otherwise): spinning ones on
    cores other processes share made a round 15x slower (2.2 s against 0.14 s, flights-sized,
    2 shared cores). It takes effect when LightGBM's OpenMP runtime loads, at first import.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import lightgbm as lgb

    x, y = train
    data = lgb.Dataset(x, y, weight=weights, categorical_feature=categorical,
                       free_raw_data=False, params={"verbosity": -1})
    held = lgb.Dataset(evaluate[0], evaluate[1], reference=data,
                       categorical_feature=categorical)
    curves: dict[str, Any] = {}
    booster = lgb.train(
        params, data, num_boost_round=config.max_rounds, valid_sets=[data, held],
        valid_names=["train", "eval"],
        callbacks=[lgb.early_stopping(config.early_stopping_rounds, verbose=False),
                   lgb.record_evaluation(curves)])
    metric = params["metric"]
    history = {"loss": list(curves["train"][metric]), "val_loss": list(curves["eval"][metric])}
    return booster, history


class ForestArrays(NamedTuple):
    """Every tree's nodes in one flat table; a leaf's children are itself."""

    roots: np.ndarray        # [trees] int32: node index of each tree's root
    feature: np.ndarray      # [nodes] int32
    threshold: np.ndarray    # [nodes] float32, rounded down: x <= it in float32 iff in float64
    left: np.ndarray         # [nodes] int32
    right: np.ndarray        # [nodes] int32
    default_left: np.ndarray  # [nodes] int32 (0/1): where a missing value goes
    missing: np.ndarray      # [nodes] int32: _NONE / _ZERO / _NAN
    categorical: np.ndarray  # [nodes] int32 (0/1): an "==" split on category ids
    cat_offset: np.ndarray   # [nodes] int32: start of the node's slice of cat_left
    cat_width: np.ndarray    # [nodes] int32: its length (largest id going left + 1)
    cat_left: np.ndarray     # [sum of widths] int32 (0/1): id goes left
    value: np.ndarray        # [nodes] float64: leaf values (0 at splits)
    classes: np.ndarray      # [trees] int32: the class each tree adds to
    active: list[int]        # per level: trees still walking (trees sorted deepest first)
    num_class: int


def compile_forest(dump: dict[str, Any]) -> ForestArrays:
    """Flatten ``Booster.dump_model()``'s trees (tree i adds to class i % num_class), the
    deepest first: level s then walks only the trees deeper than s, so a forest costs the sum
    of its trees' depths rather than trees x the deepest one."""
    nodes: list[dict[str, Any]] = []
    cats: list[int] = []
    roots, depths = [], []
    for tree in dump["tree_info"]:
        roots.append(len(nodes))
        depths.append(_flatten(tree["tree_structure"], nodes, cats, 0))
    n, k = len(nodes), int(dump.get("num_tree_per_iteration", dump.get("num_class", 1)))
    order = np.argsort(-np.asarray(depths, np.int64), kind="stable")
    depth = max(depths, default=0)
    active = [int(np.sum(np.asarray(depths) > level)) for level in range(depth)]

    def column(key: str, dtype: Any) -> np.ndarray:
        return np.asarray([node[key] for node in nodes], dtype=dtype).reshape(n)

    return ForestArrays(
        np.asarray(roots, np.int32)[order], column("feature", np.int32),
        _round_down(column("threshold", np.float64)), column("left", np.int32),
        column("right", np.int32), column("default_left", np.int32),
        column("missing", np.int32), column("categorical", np.int32),
        column("cat_offset", np.int32), column("cat_width", np.int32),
        np.asarray(cats or [0], np.int32), column("value", np.float64),
        (np.arange(len(roots)) % k).astype(np.int32)[order], active, k)


def _flatten(node: dict[str, Any], out: list[dict[str, Any]], cats: list[int],
             level: int) -> int:
    """Append ``node``'s subtree to ``out``; the subtree's depth below ``level``."""
    me = len(out)
    row = {"feature": 0, "threshold": 0.0, "left": me, "right": me, "default_left": 0,
           "missing": _NONE, "categorical": 0, "cat_offset": 0, "cat_width": 0, "value": 0.0}
    out.append(row)
    if "leaf_value" in node:
        row["value"] = float(node["leaf_value"])
        return level
    row.update(feature=int(node["split_feature"]), default_left=int(bool(node["default_left"])),
               missing=_MISSING[node.get("missing_type", "None")])
    if node["decision_type"] == "==":
        ids = [int(v) for v in str(node["threshold"]).split("||")]
        width = max(ids) + 1
        row.update(categorical=1, cat_offset=len(cats), cat_width=width)
        table = [0] * width
        for i in ids:
            table[i] = 1
        cats.extend(table)
    else:
        row["threshold"] = float(node["threshold"])
    row["left"] = len(out)
    deep = _flatten(node["left_child"], out, cats, level + 1)
    row["right"] = len(out)
    return max(deep, _flatten(node["right_child"], out, cats, level + 1))


def _round_down(threshold: np.ndarray) -> np.ndarray:
    """The largest float32 <= each float64 threshold: for a float32 x, ``x <= t`` holds in
    float32 exactly when it does in LightGBM's float64."""
    with np.errstate(over="ignore"):  # 1e300 -> inf, then down to the largest float32
        t32 = threshold.astype(np.float32)
    above = t32.astype(np.float64) > threshold
    t32[above] = np.nextafter(t32[above], np.float32(-np.inf))
    return t32


_PACKED = ("feature", "left", "right", "flags", "cat_offset", "cat_width")  # columns of "nodes"


def _pack(arrays: ForestArrays) -> np.ndarray:
    """[nodes, 6] int32: one gather per step fetches all of a node's integer fields."""
    flags = arrays.default_left | (arrays.missing << 1) | (arrays.categorical << 3)
    return np.stack([arrays.feature, arrays.left, arrays.right, flags, arrays.cat_offset,
                     arrays.cat_width], axis=1).astype(np.int32)


@keras.saving.register_keras_serializable(package="flightpipe")
class Forest(keras.layers.Layer):
    """Boosted trees as a Keras layer: ``[batch, features]`` -> the task's output.

    The node table lives in non-trainable weights, so ``model.keras`` stores it and the
    SavedModel embeds it. Every step moves each (row, tree) pair one level down with
    ``tf.gather``; leaves point to themselves. Level s moves the first ``active[s]`` trees
    (they are stored deepest first), so every row reaches a leaf of every tree.
    """

    def __init__(self, nodes: int, trees: int, cat_size: int, active: list[int],
                 num_class: int, link: str, init_score: float = 0.0, **kwargs: Any) -> None:
        kwargs["dtype"] = "float32"  # not float16 under mixed precision: thresholds are exact
        super().__init__(trainable=False, **kwargs)
        if link not in LINKS:
            raise ValueError(f"Forest link: expected one of {LINKS}, got {link!r}")
        self.nodes, self.trees, self.cat_size = nodes, trees, cat_size
        self.active, self.num_class, self.link = [int(a) for a in active], num_class, link
        self.init_score = init_score
        self.roots = self._table("roots", (trees,), "int32")
        self.classes = self._table("classes", (trees,), "int32")
        self.table = self._table("nodes", (nodes, len(_PACKED)), "int32")
        self.cat_left = self._table("cat_left", (cat_size,), "int32")
        self.threshold = self._table("threshold", (nodes,), "float32")
        self.value = self._table("value", (nodes,), "float64")  # sums as LightGBM's do

    def _table(self, name: str, shape: tuple, dtype: str) -> Any:
        # autocast off: float64 leaf values stay float64 inside call()
        return self.add_weight(shape=shape, dtype=dtype, initializer="zeros", trainable=False,
                               autocast=False, name=name)

    @classmethod
    def from_arrays(cls, arrays: ForestArrays, link: str, name: str = "forest") -> Forest:
        """A layer holding ``arrays``."""
        layer = cls(len(arrays.feature), len(arrays.roots), len(arrays.cat_left), arrays.active,
                    arrays.num_class, link, name=name)
        for weight, value in ((layer.roots, arrays.roots), (layer.classes, arrays.classes),
                              (layer.table, _pack(arrays)),
                              (layer.cat_left, arrays.cat_left),
                              (layer.threshold, arrays.threshold), (layer.value, arrays.value)):
            weight.assign(value)
        return layer

    def call(self, x: Any) -> Any:
        x = tf.convert_to_tensor(x, tf.float32)
        table, threshold = tf.convert_to_tensor(self.table), tf.convert_to_tensor(self.threshold)
        cat_left = tf.convert_to_tensor(self.cat_left)
        batch = tf.shape(x)[0]
        node = tf.tile(tf.expand_dims(tf.convert_to_tensor(self.roots), 0), [batch, 1])
        for n in self.active:
            walking = node[:, :n]
            fields = dict(zip(_PACKED, tf.unstack(tf.gather(table, walking), axis=-1),
                              strict=True))
            left = _goes_left(fields, tf.gather(threshold, walking), cat_left, x)
            moved = tf.where(left, fields["left"], fields["right"])
            node = moved if n == self.trees else tf.concat([moved, node[:, n:]], axis=1)
        leaves = tf.gather(tf.convert_to_tensor(self.value), node)  # [batch, trees] float64
        per_class = tf.one_hot(tf.convert_to_tensor(self.classes), self.num_class,
                               dtype=tf.float64)  # [trees, classes]
        scores = tf.cast(tf.matmul(leaves, per_class) + self.init_score, tf.float32)
        if self.link == "sigmoid":
            return tf.sigmoid(scores)
        return tf.nn.softmax(scores) if self.link == "softmax" else scores

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.num_class)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.pop("trainable", None)
        config.update(nodes=self.nodes, trees=self.trees, cat_size=self.cat_size,
                      active=self.active, num_class=self.num_class, link=self.link,
                      init_score=self.init_score)
        return config


def _goes_left(node: dict[str, tf.Tensor], threshold: tf.Tensor, cat_left: tf.Tensor,
               x: tf.Tensor) -> tf.Tensor:
    """LightGBM's NumericalDecision / CategoricalDecision for each (row, tree)."""
    value = tf.gather(x, node["feature"], batch_dims=1)
    flags = node["flags"]
    missing, nan = tf.bitwise.right_shift(flags, 1) & 3, tf.math.is_nan(value)
    zeroed = tf.where(nan & (missing != _NAN), tf.zeros_like(value), value)
    is_missing = ((missing == _ZERO) & (tf.abs(zeroed) <= _ZERO_THRESHOLD)) | (
        (missing == _NAN) & nan)
    numeric = tf.where(is_missing, (flags & 1) > 0, zeroed <= threshold)
    ids = tf.cast(tf.where(nan, tf.zeros_like(value), value), tf.int32)
    width = node["cat_width"]
    inside = (ids >= 0) & (ids < width) & ~((missing == _NAN) & nan)
    slot = node["cat_offset"] + tf.clip_by_value(ids, 0, tf.maximum(width - 1, 0))
    category = inside & (tf.gather(cat_left, slot) > 0)
    return tf.where((tf.bitwise.right_shift(flags, 3) & 1) > 0, category, numeric)


def forest_of(booster: Any, task: str) -> Forest:
    """The booster (at its best round) as a ``Forest`` with the task's link."""
    dump = booster.dump_model(num_iteration=booster.best_iteration or None)
    return Forest.from_arrays(compile_forest(dump), OBJECTIVES[task][2])


def assemble(manifest: Manifest, inputs: TreeInputs, forest: Forest,
             serve: Serve | None = None) -> TabularModel:
    """``TabularModel`` views of the trees: the same contract as the MLP's."""
    dataset = (manifest.dataset or "dataset")
    features = keras.Input(shape=(len(inputs.columns),), name=FEATURES, dtype="float32")
    core = keras.Model({FEATURES: features}, forest(features), name=f"{dataset}_core")
    served = core(inputs.preprocess(inputs.raw))
    full = keras.Model(inputs.raw, serve(served, manifest.schema.label) if serve
                       else served, name=f"{dataset}_model")
    return TabularModel(inputs.preprocess, core, full)
