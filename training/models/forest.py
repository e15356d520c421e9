"""A LightGBM forest compiled into TensorFlow graph ops: every tree of a batch at once.

``compile_forest`` turns ``Booster.dump_model()``'s JSON into flat node arrays; the ``Forest``
layer walks them with a handful of gathers a level, so the saved ``model.keras`` and the
exported SavedModel need TensorFlow only.

Why a traversal, and this one (issue 42, measured on 2 shared cores against LightGBM's own
``predict`` of the same booster on the same rows): a Hummingbird-style GEMM costs every row
trees x internal nodes x leaves multiply-adds (16 M for flights' 2,077 trees of 63 leaves),
and QuickScorer's bitvectors need a bitwise AND-reduce TensorFlow does not have; a leaf-wise
tree of 63 leaves is rarely deeper than 15, so walking it costs a row about depth x trees
steps. The previous walk spent about 20 ops a step (a packed row gather, unstacked, NaN and
missing-type logic per (row, tree) pair, a concat of the whole state each level); here a step
is 8 ops, because everything that depends only on the row is done once before the walk:

- each feature enters as five *views* whose missing values already go where a node of that
  kind sends them (NaN -> 0 when LightGBM treats NaN as zero; NaN, or zero, -> -inf when the
  node sends it left, +inf when right), so a numeric node is ``view <= threshold``;
- a categorical node's ``id in set`` is looked up once per row and distinct (feature, set)
  into one more column of the same table (0 goes left, 1 right; threshold 0.5);
- children are stored side by side, so a step is ``node = child[node] + (value > threshold)``;
  a leaf's child is itself and its threshold +inf (no view holds NaN), so a leaf stays;
- trees are grouped by depth and each group walks only as many levels as it has, with no
  state copied between groups;
- the walk is one XLA cluster (``jit_compile``): its gathers and compares fuse into loops;
  TensorFlow's own CPU kernels spent 5-10 ns an element an op and ran half as fast. Rows go
  in parts of ``WALK_ROWS`` (the last padded), so a server compiles once for large batches.

Leaf values are summed in float64, as LightGBM does, then cast: predictions equal LightGBM's
to 1e-6 (``tests/training/models/test_forest.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

LINKS = ("sigmoid", "softmax", "identity")
_NONE, _ZERO, _NAN = 0, 1, 2  # LightGBM's missing types
_MISSING = {"None": _NONE, "Zero": _ZERO, "NaN": _NAN}
_ZERO_THRESHOLD = 1e-35  # LightGBM's kZeroThreshold: |x| below it is "zero" (missing)
VIEWS = 5  # per feature: NaN as 0; NaN left; NaN right; zero-or-NaN left; zero-or-NaN right
WALK_ROWS = 2048  # rows walked together in one compiled call


class ForestArrays(NamedTuple):
    """Every tree's nodes in one flat table; children side by side, a leaf's child itself."""

    features: int             # columns of the input matrix
    column: np.ndarray        # [nodes] int32: the node's column of the row's value table
    threshold: np.ndarray     # [nodes] float32: goes right when value > it (+inf at leaves)
    child: np.ndarray         # [nodes] int32: left child (right = left + 1); a leaf: itself
    value: np.ndarray         # [nodes] float64: leaf values (0 at splits)
    roots: np.ndarray         # [trees] int32, the deepest trees first
    classes: np.ndarray       # [trees] int32: the class each tree adds to
    groups: list[list[int]]   # [start tree, end tree, depth] of each run of equal depth
    num_class: int
    cat_feature: np.ndarray   # [sets] int32: the feature of each distinct categorical split
    cat_nan_right: np.ndarray  # [sets] int32 (0/1): NaN goes right (else it is id 0)
    cat_offset: np.ndarray    # [sets] int32: start of the set's slice of cat_right
    cat_width: np.ndarray     # [sets] int32: its length (largest id going left + 1)
    cat_right: np.ndarray     # [sum of widths] float32: 1 = the id goes right


def compile_forest(dump: dict[str, Any]) -> ForestArrays:
    """Flatten ``Booster.dump_model()``'s trees (tree i adds to class i % num_class)."""
    features = len(dump.get("feature_names") or []) or int(dump.get("max_feature_idx", 0)) + 1
    trees = dump["tree_info"]
    depths = [_depth(t["tree_structure"]) for t in trees]
    order = np.argsort(-np.asarray(depths, np.int64), kind="stable")
    k = int(dump.get("num_tree_per_iteration", dump.get("num_class", 1)))
    nodes: list[list[Any]] = []  # [column, threshold, child, value]
    sets: dict[tuple[int, int, tuple[int, ...]], int] = {}
    roots = []
    for i in order:
        roots.append(len(nodes))
        nodes.append([0, np.inf, 0, 0.0])
        _lay_out(trees[i]["tree_structure"], roots[-1], nodes, sets, features)
    table = np.asarray([n[:2] for n in nodes], np.float64).reshape(-1, 2)
    widths = [max(ids) + 1 for _, _, ids in sets]
    cat_right = np.ones(sum(widths) or 1, np.float32)
    offsets = np.cumsum([0, *widths])[:-1]
    for (_, _, ids), start in zip(sets, offsets, strict=True):
        cat_right[start + np.asarray(ids)] = 0.0
    groups, ordered = [], [depths[i] for i in order]
    for start, depth in enumerate(ordered):
        if groups and groups[-1][2] == depth:
            groups[-1][1] = start + 1
        else:
            groups.append([start, start + 1, depth])
    return ForestArrays(
        features, table[:, 0].astype(np.int32), _round_down(table[:, 1]),
        np.asarray([n[2] for n in nodes], np.int32).reshape(-1),
        np.asarray([n[3] for n in nodes], np.float64).reshape(-1), np.asarray(roots, np.int32),
        (order % k).astype(np.int32), groups, k,
        np.asarray([f for f, _, _ in sets] or [0], np.int32)[:max(len(sets), 1)],
        np.asarray([m for _, m, _ in sets] or [0], np.int32),
        np.asarray(offsets if len(sets) else [0], np.int32),
        np.asarray(widths or [1], np.int32), cat_right)


def _depth(node: dict[str, Any]) -> int:
    if "leaf_value" in node:
        return 0
    return 1 + max(_depth(node["left_child"]), _depth(node["right_child"]))


def _lay_out(node: dict[str, Any], me: int, out: list[list[Any]],
             sets: dict[tuple[int, int, tuple[int, ...]], int], features: int) -> None:
    """Fill ``out[me]`` from ``node`` and append its children side by side, depth first."""
    if "leaf_value" in node:
        out[me] = [0, np.inf, me, float(node["leaf_value"])]
        return
    feature = int(node["split_feature"])
    missing = _MISSING[node.get("missing_type", "None")]
    if node["decision_type"] == "==":
        ids = tuple(sorted(int(v) for v in str(node["threshold"]).split("||")))
        key = (feature, int(missing == _NAN), ids)
        column = VIEWS * features + sets.setdefault(key, len(sets))
        threshold = 0.5
    else:
        left = bool(node["default_left"])
        view = 0 if missing == _NONE else (1 if left else 2) if missing == _NAN else \
            (3 if left else 4)
        column, threshold = view * features + feature, float(node["threshold"])
    child = len(out)
    out[me] = [column, threshold, child, 0.0]
    out.extend([[0, np.inf, 0, 0.0], [0, np.inf, 0, 0.0]])
    _lay_out(node["left_child"], child, out, sets, features)
    _lay_out(node["right_child"], child + 1, out, sets, features)


def _round_down(threshold: np.ndarray) -> np.ndarray:
    """The largest float32 <= each float64 threshold: for a float32 x, ``x <= t`` holds in
    float32 exactly when it does in LightGBM's float64 (+inf stays +inf)."""
    with np.errstate(over="ignore"):  # 1e300 -> inf, then down to the largest float32
        t32 = threshold.astype(np.float32)
    above = t32.astype(np.float64) > threshold
    t32[above] = np.nextafter(t32[above], np.float32(-np.inf))
    return t32


def row_values(x: tf.Tensor, arrays: dict[str, tf.Tensor], features: int) -> tf.Tensor:
    """[rows, VIEWS * features + sets] float32: each feature's views, then each categorical
    set's answer (0 left, 1 right). No value is NaN."""
    nan = tf.math.is_nan(x)
    zero = nan | (tf.abs(x) <= _ZERO_THRESHOLD)
    inf = tf.constant(np.inf, tf.float32)
    views = [tf.where(nan, tf.zeros_like(x), x), tf.where(nan, -inf, x), tf.where(nan, inf, x),
             tf.where(zero, -inf, x), tf.where(zero, inf, x)]
    ids = tf.gather(x, arrays["cat_feature"], axis=1)  # [rows, sets]
    width = arrays["cat_width"]
    id_nan = tf.math.is_nan(ids)
    clipped = tf.clip_by_value(tf.where(id_nan, tf.zeros_like(ids), ids), -1.0,
                               tf.cast(tf.reduce_max(width), tf.float32))
    as_int = tf.cast(clipped, tf.int32)  # truncates toward zero, as LightGBM's int cast
    inside = (as_int >= 0) & (as_int < width) & ~(id_nan & (arrays["cat_nan_right"] > 0))
    slot = arrays["cat_offset"] + tf.clip_by_value(as_int, 0, width - 1)
    answer = tf.where(inside, tf.gather(arrays["cat_right"], slot), tf.ones_like(ids))
    return tf.concat([*views, answer], axis=1)


def walk(values: tf.Tensor, arrays: dict[str, tf.Tensor], groups: list[list[int]]) -> tf.Tensor:
    """[rows, trees] int32: the leaf each row reaches in each tree."""
    rows, width = tf.shape(values)[0], tf.shape(values)[1]
    flat = tf.reshape(values, [-1])
    base = tf.expand_dims(tf.range(rows) * width, 1)
    column, threshold, child = arrays["column"], arrays["threshold"], arrays["child"]
    leaves = []
    for start, end, depth in groups:
        def step(level: tf.Tensor, node: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            value = tf.gather(flat, base + tf.gather(column, node))
            right = tf.cast(value > tf.gather(threshold, node), tf.int32)
            return level + 1, tf.gather(child, node) + right

        node = tf.tile(tf.expand_dims(arrays["roots"][start:end], 0), [rows, 1])
        leaves.append(tf.while_loop(lambda level, _, d=depth: level < d, step,
                                    (tf.constant(0), node))[1])
    return tf.concat(leaves, axis=1) if len(leaves) > 1 else leaves[0]


_TABLES = {"column": ("nodes", "int32"), "threshold": ("nodes", "float32"),
           "child": ("nodes", "int32"), "value": ("nodes", "float64"),
           "roots": ("trees", "int32"), "classes": ("trees", "int32"),
           "cat_feature": ("sets", "int32"), "cat_nan_right": ("sets", "int32"),
           "cat_offset": ("sets", "int32"), "cat_width": ("sets", "int32"),
           "cat_right": ("cat_size", "float32")}


@keras.saving.register_keras_serializable(package="flightpipe")
class Forest(keras.layers.Layer):
    """Boosted trees as a Keras layer: ``[batch, features]`` -> the task's output.

    The node tables live in non-trainable weights, so ``model.keras`` stores them and the
    SavedModel embeds them; ``call`` walks the rows ``WALK_ROWS`` at a time in a graph loop.
    """

    def __init__(self, features: int, nodes: int, trees: int, sets: int, cat_size: int,
                 groups: list[list[int]], num_class: int, link: str, **kwargs: Any) -> None:
        kwargs["dtype"] = "float32"  # not float16 under mixed precision: thresholds are exact
        super().__init__(trainable=False, **kwargs)
        if link not in LINKS:
            raise ValueError(f"Forest link: expected one of {LINKS}, got {link!r}")
        self.features, self.nodes, self.trees, self.sets = features, nodes, trees, sets
        self.cat_size, self.num_class, self.link = cat_size, num_class, link
        self.groups = [[int(v) for v in g] for g in groups]
        sizes = {"nodes": nodes, "trees": trees, "sets": sets, "cat_size": cat_size}
        self.tables = {name: self.add_weight(shape=(sizes[size],), dtype=dtype,
                                             initializer="zeros", trainable=False,
                                             autocast=False, name=name)
                       for name, (size, dtype) in _TABLES.items()}

    @classmethod
    def from_arrays(cls, arrays: ForestArrays, link: str, name: str = "forest") -> Forest:
        """A layer holding ``arrays``."""
        layer = cls(arrays.features, len(arrays.column), len(arrays.roots),
                    len(arrays.cat_feature), len(arrays.cat_right), arrays.groups,
                    arrays.num_class, link, name=name)
        for key, weight in layer.tables.items():
            weight.assign(getattr(arrays, key))
        return layer

    def call(self, x: Any) -> Any:
        x = tf.convert_to_tensor(x, tf.float32)
        arrays = {k: tf.convert_to_tensor(w) for k, w in self.tables.items()}
        per_class = tf.one_hot(arrays["classes"], self.num_class, dtype=tf.float64)

        def scores(rows: tf.Tensor) -> tf.Tensor:
            leaves = walk(row_values(rows, arrays, self.features), arrays, self.groups)
            return tf.matmul(tf.gather(arrays["value"], leaves), per_class)  # float64 sums

        out = _in_parts(tf.function(scores, jit_compile=True, reduce_retracing=True), x,
                      self.num_class)
        out = tf.cast(out, tf.float32)
        if self.link == "sigmoid":
            return tf.sigmoid(out)
        return tf.nn.softmax(out) if self.link == "softmax" else out

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.num_class)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.pop("trainable", None)
        config.update(features=self.features, nodes=self.nodes, trees=self.trees,
                      sets=self.sets, cat_size=self.cat_size, groups=self.groups,
                      num_class=self.num_class, link=self.link)
        return config


def _in_parts(fn: Any, x: tf.Tensor, width: int) -> tf.Tensor:
    """``fn`` over parts of ``WALK_ROWS`` rows (the last one padded) in a graph loop, or over
    all rows at once, padded to a power of two, when fewer: XLA compiles ``fn`` once a part
    shape, so a server compiles at most log2(WALK_ROWS) + 2 times; [rows, width] float64."""
    rows = tf.shape(x)[0]

    def small() -> tf.Tensor:  # padded to a power of two: at most log2(WALK_ROWS) + 1 compiles
        size = tf.bitwise.left_shift(1, tf.cast(tf.math.ceil(
            tf.math.log(tf.cast(tf.maximum(rows, 1), tf.float32)) / np.log(2.0) - 1e-4),
            tf.int32))
        return fn(tf.pad(x, [[0, size - rows], [0, 0]]))[:rows]

    def large() -> tf.Tensor:
        parts = (rows + WALK_ROWS - 1) // WALK_ROWS
        padded = tf.pad(x, [[0, parts * WALK_ROWS - rows], [0, 0]])

        def body(i: tf.Tensor, acc: tf.TensorArray) -> tuple[tf.Tensor, tf.TensorArray]:
            return i + 1, acc.write(i, fn(padded[i * WALK_ROWS:(i + 1) * WALK_ROWS]))

        acc = tf.TensorArray(tf.float64, size=parts, element_shape=[WALK_ROWS, width])
        _, acc = tf.while_loop(lambda i, _: i < parts, body, (tf.constant(0), acc))
        return acc.concat()[:rows]

    return tf.reshape(tf.cond(rows <= WALK_ROWS, small, large), [rows, width])
