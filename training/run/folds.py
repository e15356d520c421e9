"""Small tables judged on more than one split: repeated k-fold over train and eval.

Below ``training.run.choice.SMALL_TABLE_ROWS`` rows one small test split is all the evidence
the choice of family and the verdict would get: a 214-row table left 44 test rows, where two
rows moved accuracy by 5%. There (``training.run.choice.cross_validated`` calls
``cross_validate``) every candidate family is fitted ``TrainConfig.repeats`` times over
``TrainConfig.folds`` stratified folds of the train and eval rows (2 x 5 unless set; 0 folds
skips all this), each fold's rows predicted by a model that never saw them.
``cross_validated`` chooses the family on the out-of-fold answers (``keep``: trees, unless
another is better beyond noise), and the gate judges them (averaged over the repeats, one per
row) instead of the test split alone; the test split stays held out, is scored once
by the kept family refitted on every train and eval row for the median of where its folds'
early stopping ended (``training.run.families.Refit``), and is what the current-model
comparison uses. The figures, per repeat and with intervals, go in metrics.json's
``cross_validation``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from training.data.tabular import feature_map, make_dataset
from training.models.tabular import REGRESSION

# ``run`` below is a ``training.run.families.FitRun`` and ``families`` its ``Family`` objects;
# families and choice import this module (for small tables only) and choice judges its
# answers, so this one names them without importing them.
FitRun = Any
Family = Any

log = logging.getLogger(__name__)

SEED = 0


Mapped = tuple[dict[str, np.ndarray], np.ndarray]
"""Every train and eval row through a family's preprocessing (features) and the task's target
(labels [n, 1]), in ``read_rows`` order."""


@dataclass(frozen=True)
class FoldRows:
    """The train and eval rows in memory (parsed columns, the label among them), and which
    of them one fold trains on and holds out; ``mapped``, where a family set it (``mapped``
    below), the same rows already through its preprocessing, so no fold runs it again."""

    columns: dict[str, np.ndarray]
    train: np.ndarray
    held: np.ndarray
    mapped: Mapped | None = None

    def datasets(self, run: FitRun, preprocess: keras.Model,
                 train_once: bool) -> tuple[Any, Any, Any]:
        """Train, held-out and (the held-out again, unused) batches, as ``make_dataset``
        yields them: the label split off with the task's target, ``preprocess`` applied.
        The held-out rows come in one batch: a fold's evaluation runs once an epoch."""
        config = run.config.input
        after = None if self.mapped is not None else feature_map(
            run.manifest, preprocess, run.task.target(run.manifest.schema.label))

        def batches(idx: np.ndarray, training: bool, size: int) -> tf.data.Dataset:
            ds = tf.data.Dataset.from_tensor_slices(self._rows(idx))
            if training:
                ds = ds.shuffle(len(idx), seed=config.seed).repeat()
            ds = ds.batch(size)
            return ds if after is None else ds.map(after)

        held = batches(self.held, False, max(1, len(self.held)))
        return batches(self.train, not train_once, config.batch_size), held, held

    def _rows(self, idx: np.ndarray) -> Any:
        """Rows ``idx``: their columns, or (features, labels) where ``mapped`` is set."""
        if self.mapped is None:
            return {k: v[idx] for k, v in self.columns.items()}
        features, y = self.mapped
        return {k: v[idx] for k, v in features.items()}, y[idx]


def mapped(run: FitRun, columns: dict[str, np.ndarray], preprocess: keras.Model) -> Mapped:
    """``columns`` through ``preprocess`` and the task's target, in one pass: a fold's
    datasets then slice arrays instead of running the preprocessing graph (a fresh iterator
    over it cost 11 ms, twice an epoch, half an MLP fold's time on a 474-row table)."""
    every = np.arange(len(next(iter(columns.values()))))
    parts: dict[str, list[np.ndarray]] = {}
    ys = []
    for features, y in FoldRows(columns, every, every).datasets(run, preprocess, True)[0]:
        for name, value in features.items():
            parts.setdefault(name, []).append(value.numpy())
        ys.append(y.numpy())
    return {k: np.concatenate(v) for k, v in parts.items()}, np.concatenate(ys)


def read_rows(run: FitRun) -> dict[str, np.ndarray]:
    """The train then eval rows' stored columns (features and label), in split order."""
    label = run.manifest.schema.label.name
    parts: dict[str, list[np.ndarray]] = {}
    for split in ("train", "eval"):
        for features, y in make_dataset(run.version_uri, split, run.manifest, run.config.input,
                                        training=False):
            for name, value in {**features, label: tf.reshape(y, [-1])}.items():
                parts.setdefault(name, []).append(value.numpy())
    return {name: np.concatenate(values) for name, values in parts.items()}


def fold_ids(labels: np.ndarray, classified: bool, repeat: int, folds: int) -> np.ndarray:
    """Each row's fold (of ``folds``) in one repeat: shuffled, then dealt round-robin within
    each class (a classifier's folds hold every class in its share), or over all rows (a
    regression)."""
    rng = np.random.default_rng(SEED + repeat)
    order = rng.permutation(len(labels))
    out = np.empty(len(labels), np.int64)
    groups = [order[labels[order] == c] for c in np.unique(labels)] if classified else [order]
    start = 0
    for rows in groups:  # continue the deal where the last class stopped: folds stay even
        out[rows] = (start + np.arange(len(rows))) % folds
        start += len(rows)
    return out


class OutOfFold(NamedTuple):
    """Every train and eval row's label (learned space) and, per family, one answer per row
    for each repeat, each from a model that never saw the row, and each fold's stopping
    length (rounds or epochs, repeats in order); ``rows``: all those rows as one train set,
    and ``steps``: the steps of a fold's epoch (the kept family's refit trains as long)."""

    labels: np.ndarray
    answers: dict[str, list[np.ndarray]]
    lengths: dict[str, list[int]]
    rows: FoldRows
    steps: int


def cross_validate(run: FitRun, families: dict[str, Family]) -> OutOfFold:
    """Fit each family over ``repeats`` x ``folds`` folds of train + eval (the run's
    ``TrainConfig``); their out-of-fold answers (judged by
    ``training.run.choice.cross_validated``)."""
    columns = read_rows(run)
    raw = columns[run.manifest.schema.label.name]
    task, n, k = run.task.name, len(raw), run.config.folds
    classified = task != REGRESSION
    folds = [fold_ids(raw.astype(np.int64) if classified else raw, classified, r, k)
             for r in range(run.config.repeats)]
    # every fold trains on about (k - 1) / k of the rows: one epoch length for all,
    # so a family readied once (``Family.folds``) fits each fold the same way
    steps = max(1, math.ceil(n * (k - 1) / k / run.config.input.batch_size))
    run = run._replace(callbacks=(), config=dataclasses.replace(
        run.config, measure_stall_batches=0, steps_per_epoch=steps))
    answers: dict[str, list[np.ndarray]] = {}
    lengths: dict[str, list[int]] = {}
    y_learned = np.zeros(n)
    for family, kind in families.items():
        fit = kind.folds(run, columns)
        answers[family], lengths[family] = [], []
        for r, ids in enumerate(folds):
            out = None
            for f in range(k):
                held, train = np.flatnonzero(ids == f), np.flatnonzero(ids != f)
                work = Path(run.work_dir) / "folds" / f"{family}-{r}-{f}"
                y, o, length = fit(run._replace(rows=FoldRows(columns, train, held),
                                                run_uri=work.joinpath("run").as_uri(),
                                                work_dir=work))
                out = np.zeros((n, o.shape[1])) if out is None else out
                out[held], y_learned[held] = o, y
                lengths[family].append(int(length))
            answers[family].append(out)
    every = np.arange(n)
    return OutOfFold(y_learned, answers, lengths, FoldRows(columns, every, every[:0]), steps)
