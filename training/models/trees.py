"""Gradient-boosted trees: fitted by LightGBM, served as pure TensorFlow.

On tables, boosted trees are the model to beat (Grinsztajn et al., NeurIPS 2022, "Why do
tree-based models still outperform deep learning on tabular data?"): flights' MLP reached
test AUC 0.767 where HistGradientBoosting reached 0.789 in a quarter of the time. LightGBM
fits the trees on arrays read through the version's tf.data pipeline, logging its progress;
``training.models.forest`` compiles them into TensorFlow ops, so the saved ``model.keras`` and
the exported SavedModel need TensorFlow only.

The trees see raw numbers (NaN kept: a missing value goes where LightGBM sent it while
fitting) and categorical vocabulary ids (the MLP's lookups, OOV id 0), as one float32
matrix whose columns are the features in sorted order (``tree_preprocess``).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import keras
import numpy as np

from etl.versions import Manifest
from training.config import ModelConfig
from training.models.forest import Forest, compile_forest
from training.models.tabular import (
    Columns,
    Names,
    Serve,
    TabularModel,
    compose,
    vocabulary_lookup,
)

log = logging.getLogger(__name__)
FEATURES = "features"  # the core's one input: [batch, features] float32
OBJECTIVES = {"binary": ("binary", "binary_logloss", "sigmoid"),
              "multiclass": ("multiclass", "multi_logloss", "softmax"),
              "regression": ("regression", "l2", "identity")}
MIN_LEAF = 20  # rows a leaf needs at least, unless the table is under 10x that
LARGE_TABLE = 50_000  # train rows from which trees get 63 leaves instead of 31
BINNING = {"verbosity": -1, "min_data_in_bin": 1}
"""How LightGBM bins the features: a column of at most 255 (``max_bin``) distinct values gets
one bin per value, as HistGradientBoosting's binning does; LightGBM's default of 3 rows a bin
merges rare values with their neighbours, so a split can never separate them. On a drawn table
whose target is a survey weight (143 distinct values, one feature proportional to it) test RMSE
was 0.0108 with 3 rows a bin against the reference's 0.0015, and 0.00034 with 1; leaves still
need ``min_data_in_leaf`` rows."""
PARALLEL_CELLS = 2_000_000
"""Train rows x features from which LightGBM boosts on every core this process may use; below
it, on one. Measured on 2 cores, 20 features, the same boosting both ways (quiet machine): two
threads took 5.3x one thread's wall time at 1,000 rows (their hand-offs are futex calls: 1.3 s
of system time), 3.3x at 10,000, 1.6x at 50,000, and 0.74x at 200,000. With other work on the
cores (the test suite's two workers) two threads were 5.5 to 15x slower on tables of 114 to
5,000 rows (13 features, 3 classes)."""


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
    names = Names(schema.features)  # the preprocessing's own layers
    raw, cols, columns, categorical = {}, [], [], []
    for name, feat in sorted(schema.features.items()):
        raw[name] = keras.Input(shape=(), name=name, dtype=feat.dtype)
        if feat.kind == "categorical":
            vocab = stats.vocabularies.get(name)
            categorical.append(len(columns))
            cols.append(vocabulary_lookup(where, name, feat, vocab, names)(raw[name]))
        elif feat.kind == "numeric":
            cols.append(raw[name])
        else:
            raise ValueError(f"{where}: feature {name!r} has kind {feat.kind!r}; "
                             "the tree model takes 'numeric' and 'categorical'")
        columns.append(name)
    if not cols:
        raise ValueError(f"{where}: no features to fit trees on")
    matrix = Columns(name=names("columns"))(cols)  # NaN kept: LightGBM sent it a way
    model = keras.Model(raw, {FEATURES: matrix},
                        name=names(f"{manifest.dataset or 'dataset'}_preprocess"))
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
        "verbosity": -1,  # num_threads: ``fit_booster`` decides from the matrix's size
    }
    if task == "multiclass":
        params["num_class"] = classes
    return params


@dataclass(frozen=True)
class Progress:
    """How often a fit says where it is: a line every ``rounds`` rounds or ``seconds``
    seconds, whichever comes first (Keras says so once an epoch; a 16x flights fit ran
    10 minutes without a line, issue 42)."""

    rounds: int = 100
    seconds: float = 30.0
    name: str = "trees"

    def callback(self, total: int) -> Any:
        """A LightGBM callback logging round, eval metric, elapsed and estimated time left
        (at most: early stopping may end the fit sooner) through this module's logger, which
        the Airflow task log receives."""
        start = time.perf_counter()
        last = [start, 0]

        def report(env: Any) -> None:
            done, now = env.iteration + 1, time.perf_counter()
            if done - last[1] < self.rounds and now - last[0] < self.seconds and done < total:
                return
            last[:] = [now, done]
            elapsed = now - start
            scores = ", ".join(f"{data} {metric} {value:.5g}"
                               for data, metric, value, *_ in env.evaluation_result_list
                               if data == "eval")
            log.info("%s: round %d of at most %d, %s, %.0f s elapsed, at most %.0f s left",
                     self.name, done, total, scores or "no eval metric", elapsed,
                     elapsed / done * (total - done))

        report.order = 25  # after record_evaluation (20), before early stopping (30) ends the fit
        return report


def fit_booster(train: tuple[np.ndarray, np.ndarray], evaluate: tuple[np.ndarray, np.ndarray],
                params: dict[str, Any], categorical: list[int], config: ModelConfig,
                weights: np.ndarray | None = None,
                progress: Progress = Progress(),
                stop: bool = True) -> tuple[Any, dict[str, list[float]]]:
    """Boost up to ``config.max_rounds`` rounds, stopping after ``early_stopping_rounds``
    without a better eval loss (unless not ``stop``: then every round, ``evaluate`` only
    logged), logging ``progress``, on one thread below ``PARALLEL_CELLS``; (booster cut at
    its best round, loss per round).

    OpenMP workers wait passively (unless the environment says otherwise): spinning ones on
    cores other processes share made a round 15x slower (2.2 s against 0.14 s, flights-sized,
    2 shared cores). It takes effect when LightGBM's OpenMP runtime loads, at first import.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import lightgbm as lgb

    x, y = train
    cores = len(os.sched_getaffinity(0))
    params = {**params, "num_threads": cores if x.size >= PARALLEL_CELLS else 1}
    data = lgb.Dataset(x, y, weight=weights, categorical_feature=categorical,
                       free_raw_data=False, params=BINNING)
    held = lgb.Dataset(evaluate[0], evaluate[1], reference=data,
                       categorical_feature=categorical)
    curves: dict[str, Any] = {}
    booster = lgb.train(
        params, data, num_boost_round=config.max_rounds, valid_sets=[data, held],
        valid_names=["train", "eval"],
        callbacks=[*([lgb.early_stopping(config.early_stopping_rounds, verbose=False)]
                     if stop else []),
                   lgb.record_evaluation(curves), progress.callback(config.max_rounds)])
    metric = params["metric"]
    history = {"loss": list(curves["train"][metric]), "val_loss": list(curves["eval"][metric])}
    return booster, history


def forest_of(booster: Any, task: str) -> Forest:
    """The booster (at its best round) as a ``Forest`` with the task's link."""
    dump = booster.dump_model(num_iteration=booster.best_iteration or None)
    return Forest.from_arrays(compile_forest(dump), OBJECTIVES[task][2])


def assemble(manifest: Manifest, inputs: TreeInputs, forest: Forest,
             serve: Serve | None = None) -> TabularModel:
    """``TabularModel`` views of the trees: the same contract as the MLP's."""
    dataset = (manifest.dataset or "dataset")
    names = Names([*inputs.raw, inputs.preprocess.name])  # the full model's own layers
    features = keras.Input(shape=(len(inputs.columns),), name=FEATURES, dtype="float32")
    core = keras.Model({FEATURES: features}, forest(features), name=names(f"{dataset}_core"))
    full = compose(inputs.raw, inputs.preprocess, core, serve, manifest.schema.label,
                   f"{dataset}_model")
    return TabularModel(inputs.preprocess, core, full)
