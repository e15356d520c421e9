"""``training.run.folds``: a table under ``SMALL_TABLE_ROWS`` rows chooses its family and gets
its verdict by repeated k-fold over train and eval; the test split is scored once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import pytest
import yaml

from etl import pipeline
from etl.versions.manifest import read_manifest
from tests.support.training_fixtures import drafted_iris
from training.config import DEFAULT_FOLDS as FOLDS
from training.config import DEFAULT_REPEATS, InputConfig, ModelConfig, TrainConfig
from training.judge.evaluate import predictions
from training.run.choice import SMALL_TABLE_ROWS, plan
from training.run.families import FitRun, fit_trees, mlp_folds, trees_folds
from training.run.folds import FoldRows, fold_ids, mapped, read_rows
from training.run.runtime import setup_device
from training.run.train import train
from training.tasks import task_of


def test_folds_are_stratified_even_and_differ_between_repeats() -> None:
    labels = np.array([0] * 60 + [1] * 30 + [2] * 9)
    first, second = fold_ids(labels, True, 0, FOLDS), fold_ids(labels, True, 1, FOLDS)
    for ids in (first, second):
        sizes = np.bincount(ids, minlength=FOLDS)
        assert sizes.max() - sizes.min() <= 1  # 99 rows: 20 or 19 per fold
        for c, n in ((0, 60), (1, 30), (2, 9)):  # each class dealt over the folds
            per_fold = np.bincount(ids[labels == c], minlength=FOLDS)
            assert per_fold.max() - per_fold.min() <= 1 and per_fold.sum() == n
    assert (first != second).any()
    plain = fold_ids(np.linspace(0, 1, 50), False, 0, FOLDS)
    assert sorted(np.bincount(plain)) == [10] * FOLDS
    assert sorted(np.bincount(fold_ids(np.linspace(0, 1, 50), False, 0, 2))) == [25, 25]


@pytest.mark.timeout(600)
def test_a_150_row_table_is_judged_by_the_k_fold_it_is_given(tmp_path: Path, monkeypatch) -> None:
    """The run's own folds and repeats (3 x 2 here, 5 x 2 unless set); 0 folds: none."""
    data, out = drafted_iris(tmp_path)  # all 150 rows
    assert yaml.safe_load((out / "spec.yaml").read_text())["split"]["stratify"]
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(out.parent))
    res = pipeline.run("iris", data.as_uri(), "2100-01-01", run_id="r")
    folds, repeats = 3, 2
    result = train(res.version_uri, f"{data.as_uri()}/models", "r",
                   TrainConfig(input=InputConfig(seed=1), model=ModelConfig(family="trees"),
                               folds=folds, repeats=repeats))
    m = result.metrics.to_json()
    assert sum(m["examples"].values()) == 150 < SMALL_TABLE_ROWS
    cv = m["cross_validation"]
    assert cv["rows"] == m["examples"]["train"] + m["examples"]["eval"]
    assert (cv["folds"], cv["repeats"], cv["chosen"]) == (folds, repeats, "trees")
    trees = cv["families"]["trees"]
    assert len(trees["per_repeat"]) == repeats
    assert trees["range"][0] <= trees["mean"] <= trees["range"][1]
    oof = cv["out_of_fold"]
    low, high = oof["intervals"]["metrics"]["accuracy"]
    assert low <= oof["accuracy"] <= high and oof["accuracy"] > 0.85  # iris is easy
    assert cv["baseline"]["examples"] == cv["rows"]
    assert f"{repeats} x {folds}-fold cross-validation of the" in m["family_choice"]["why"]
    # the verdict judged the out-of-fold answers; the test split was scored once, apart
    accuracy = next(c for c in result.blessing.checks if c.name == "baseline:accuracy")
    assert f"accuracy {oof['accuracy']:.4f} vs {cv['baseline']['accuracy']:.4f}" in \
        accuracy.detail
    assert m["test"]["examples"] == m["examples"]["test"] and "intervals" in m["test"]
    assert result.blessing.blessed, result.blessing.reasons
    # the kept trees were fitted on every train and eval row for the folds' median rounds,
    # not stopped early on eval (whose rows trained them: its figures are the out-of-fold ones)
    lengths = trees["lengths"]
    assert len(lengths) == repeats * folds and all(n >= 1 for n in lengths)
    median = max(1, round(float(np.median(lengths))))
    assert trees["median_length"] == median
    assert cv["refit"] == {"rows": cv["rows"], "length": median, "unit": "boosting rounds"}
    assert m["epochs_run"] == m["trees"]["rounds"] == median
    assert m["eval"]["accuracy"] == oof["accuracy"]
    assert m["family_choice"]["eval"] == {"trees": trees["mean"]}

    # folds 0: chosen on eval and judged on test, as a larger table is; 20 rounds at most
    off = train(res.version_uri, f"{data.as_uri()}/models", "r0",
                TrainConfig(input=InputConfig(seed=1), folds=0,
                            model=ModelConfig(family="trees", max_rounds=20)))
    m0 = off.metrics.to_json()
    assert m0.get("cross_validation") is None and m0["family_choice"]["why"] == "family trees was set"
    assert 1 <= m0["trees"]["rounds"] <= 20
    accuracy = next(c for c in off.blessing.checks if c.name == "baseline:accuracy")
    assert f"accuracy {m0['test']['accuracy']:.4f} vs" in accuracy.detail


def _fold_runs(tmp_path: Path, monkeypatch, model: ModelConfig) -> tuple[FitRun, dict, list]:
    """The 150-row iris version as training readies it for its k-fold: (the run, its train
    and eval rows in memory, two folds' runs)."""
    data, out = drafted_iris(tmp_path)
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(out.parent))
    version_uri = pipeline.run("iris", data.as_uri(), "2100-01-01", run_id="r").version_uri
    manifest = read_manifest(version_uri)
    config, _ = plan(TrainConfig(input=InputConfig(seed=1), model=model), manifest)
    keras.utils.set_random_seed(config.seed)
    run = FitRun(version_uri, manifest, (tmp_path / "run").as_uri(), setup_device("float32"),
                 replace(config, steps_per_epoch=8), tmp_path / "work", task_of(manifest))
    columns = read_rows(run)
    ids = fold_ids(columns[manifest.schema.label.name].astype(np.int64), True, 0, FOLDS)
    folds = [run._replace(rows=FoldRows(columns, np.flatnonzero(ids != f),
                                        np.flatnonzero(ids == f))) for f in (0, 1)]
    return run, columns, folds


@pytest.mark.timeout(600)
def test_a_trees_fold_answers_as_its_forest_would(tmp_path: Path, monkeypatch) -> None:
    # a fold answers with LightGBM's own predictions, not the compiled forest the kept model
    # serves: the two must agree on the same fold's held-out rows
    run, columns, (fold, _) = _fold_runs(tmp_path, monkeypatch, ModelConfig(family="trees"))
    y, answers, _ = trees_folds(run, columns)(fold)
    fitted = fit_trees(fold)
    y_kept, served = predictions(fitted.model, fitted.eval_ds)
    assert len(y) == len(fold.rows.held) and answers.shape == (len(y), 3)
    np.testing.assert_array_equal(y, y_kept)
    np.testing.assert_allclose(answers, served, atol=1e-5)
    assert (answers.argmax(1) == y).mean() > 0.7  # iris: chance is 1/3


@pytest.mark.timeout(600)
def test_the_mlp_starts_every_fold_afresh(tmp_path: Path, monkeypatch) -> None:
    # one model serves every fold (traced once); each fold must start from the same weights
    # and optimizer state, so a fold fitted twice answers the same both times, whatever the
    # fold between them did
    model = ModelConfig(family="mlp", dropout=0.0)
    run, columns, (first, second) = _fold_runs(tmp_path, monkeypatch, model)
    fit = mlp_folds(run, columns)
    y, once, length = fit(first)
    _, other, _ = fit(second)
    y_again, again, length_again = fit(first)
    assert length == length_again >= 1
    np.testing.assert_array_equal(y, y_again)
    np.testing.assert_allclose(once, again, rtol=1e-5, atol=1e-6)
    assert other.shape[1] == once.shape[1] == 3


def test_mapped_fold_rows_batch_as_the_preprocessing_would(tmp_path: Path, monkeypatch) -> None:
    # the MLP's folds slice rows preprocessed once: each fold's batches must be the ones the
    # preprocessing would have made of the same rows, in the same shuffled order
    run, columns, (fold, _) = _fold_runs(tmp_path, monkeypatch, ModelConfig(family="mlp"))
    from training.run.families import _mlp

    parts, _ = _mlp(run)
    rows = replace(fold.rows, mapped=mapped(run, columns, parts.preprocess))
    plain = fold.rows.datasets(run, parts.preprocess, False)
    ready = rows.datasets(run, parts.preprocess, False)
    for a, b in zip(plain[0].take(3), ready[0].take(3), strict=True):  # shuffled, repeating
        _assert_same_batch(a, b)
    (x, y), = ready[1]  # the held-out rows: one batch
    assert len(y) == len(fold.rows.held)
    _assert_same_batch((x, y), _one_batch(plain[1]))  # plain: in batches of batch_size


def _one_batch(ds) -> tuple[dict, np.ndarray]:
    xs, ys = [], []
    for x, y in ds:
        xs.append({k: v.numpy() for k, v in x.items()})
        ys.append(y.numpy())
    return {k: np.concatenate([x[k] for x in xs]) for k in xs[0]}, np.concatenate(ys)


def _assert_same_batch(a, b) -> None:
    (xa, ya), (xb, yb) = a, b
    np.testing.assert_array_equal(np.asarray(ya), np.asarray(yb))
    assert set(xa) == set(xb)
    for k in xa:
        np.testing.assert_allclose(np.asarray(xa[k]), np.asarray(xb[k]), rtol=1e-6)


@pytest.mark.timeout(600)
def test_a_kept_mlp_is_refitted_for_its_folds_median_epochs(tmp_path: Path, monkeypatch) -> None:
    data, out = drafted_iris(tmp_path)
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(out.parent))
    res = pipeline.run("iris", data.as_uri(), "2100-01-01", run_id="r")
    m = train(res.version_uri, f"{data.as_uri()}/models", "r",
              TrainConfig(input=InputConfig(seed=1), model=ModelConfig(family="mlp"))).metrics.to_json()
    cv = m["cross_validation"]
    mlp = cv["families"]["mlp"]
    assert len(mlp["lengths"]) == DEFAULT_REPEATS * FOLDS
    assert cv["refit"]["length"] == mlp["median_length"] == m["epochs_run"] == m["best_epoch"]
    assert cv["refit"]["unit"].startswith("epochs of ") and cv["refit"]["rows"] == cv["rows"]
    assert "val_loss" not in m["history"]  # no eval pass: the eval rows are train rows here
