"""Multi-class (wine) and regression (diabetes) end to end from their specs alone, through the
command lines: ``python -m etl land`` -> ``python -m etl run`` -> ``python -m training train``
-> a model that beats its baseline, an exported model (Keras file and SavedModel) that takes
raw values and returns class probabilities (names in ``label.json``) or the target in its own
units. Bad specs fail ``python -m etl spec check`` and ``python -m etl run`` naming the file
and field; nothing is published.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from etl import pipeline, versions
from etl.errors import ValidationFailed
from etl.kinds.tabular.land import sklearn_frame
from etl.spec import SPECS_DIR, load_spec
from training.config import InputConfig, ModelConfig, TrainConfig
from training.data.tabular import make_dataset
from training.record import ModelRecord
from training.run.train import train
from training.tasks import TASKS

pytestmark = pytest.mark.e2e  # ETL + training per dataset: minutes on a small machine

REPO = Path(__file__).resolve().parents[2]
END = "2026-01-01"
CONFIG = TrainConfig(input=InputConfig(batch_size=32, seed=3), epochs=40, patience=6,
                     steps_per_execution=1, min_margin=0.05)
# A small budget (docs/TRAINING.md): both families fitted once and the better on eval kept,
# without the 2 x 5-fold every table under 1,000 rows gets by default (21 fits, not 2).
TRAIN_FLAGS = ("--epochs", "40", "--patience", "6", "--batch-size", "32", "--data-seed", "3",
               "--steps-per-execution", "1", "--min-margin", "0.05", "--folds", "off",
               "--max-rounds", "300")


def _cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    """``python -m <args>`` in a fresh interpreter, as a user types it."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)
    if ok:
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Wine and diabetes landed and published by the CLI, each by the spec's own upstream."""
    uri = tmp_path_factory.mktemp("tasks").as_uri()
    for name in ("wine", "diabetes"):
        _cli("etl", "land", "--root", uri, "--dataset", name)
        result = json.loads(_cli("etl", "run", "--root", uri, "--dataset", name,
                                 "--interval-end", END, "--json").stdout)
        assert result["created"] and result["version_uri"] == versions.resolve(uri, name)
    return uri


@pytest.fixture(scope="module")
def printed(root: str) -> dict[str, str]:
    """Each dataset trained once by ``python -m training train`` (run ``run-1``): its output."""
    return {name: _cli("training", "train", "--root", root, "--dataset", name, "--run", "run-1",
                       *TRAIN_FLAGS).stdout for name in ("wine", "diabetes")}


@pytest.fixture(scope="module")
def runs(root: str, printed: dict[str, str]) -> dict[str, dict]:
    """The metrics.json of each CLI run."""
    return {name: json.loads((_run_dir(root, name, "run-1") / "metrics.json").read_text())
            for name in printed}


def _raw_test(version_uri: str) -> tuple[dict, np.ndarray]:
    """The test split's raw feature values (what a caller sends) and stored labels."""
    ds = make_dataset(version_uri, "test", config=InputConfig(batch_size=1024))
    features, labels = next(iter(ds))
    return features, labels.numpy().reshape(-1)


def _run_dir(root: str, name: str, run: str) -> Path:
    version = versions.latest_version(root, name)
    return Path(root.removeprefix("file://")) / "models" / name / version / run


def _served(run: Path, features: dict) -> np.ndarray:
    """The SavedModel's ``serve`` endpoint on raw values: what a server without our code runs."""
    loaded = tf.saved_model.load(str(run / "saved_model"))  # held: serve uses its variables
    return loaded.serve(features).numpy()


@pytest.mark.parametrize("name", ["wine", "diabetes"])
def test_train_cli_prints_the_tasks_metrics_against_the_baseline(runs: dict, printed: dict,
                                                                  name: str) -> None:
    metrics = runs[name]
    assert f"model: {metrics['model_uri']}" in printed[name]
    # the budget flags reached the run: no k-fold, both families fitted once, one kept
    assert metrics.get("cross_validation") is None
    assert set(metrics["family_choice"]["eval"]) == {"trees", "mlp"}
    for key in TASKS[metrics["task"]].card_metrics:
        base = metrics["baseline"].get(key)
        shown = f"{base:.4f}" if isinstance(base, float) else "-"
        assert f"test {key:<9} {metrics['test'][key]:.4f}   baseline {shown}" in printed[name]


@pytest.mark.timeout(900)
def test_wine_classifier_beats_majority_and_returns_class_probabilities(root: str,
                                                                       runs: dict) -> None:
    version_uri = versions.resolve(root, "wine")
    manifest = versions.read_manifest(version_uri)
    assert manifest.schema.label.class_names == ["class_0", "class_1", "class_2"]
    metrics = runs["wine"]
    test, base = metrics["test"], metrics["baseline"]
    assert metrics["task"] == "multiclass" and metrics["classes"] == ["class_0", "class_1", "class_2"]
    assert test["accuracy"] >= base["accuracy"] + CONFIG.min_margin
    assert test["macro_f1"] >= base["macro_f1"] + CONFIG.min_margin
    assert set(test["per_class"]) == {"class_0", "class_1", "class_2"}
    assert np.asarray(test["confusion_matrix"]).sum() == test["examples"] == base["examples"]
    run = _run_dir(root, "wine", "run-1")
    assert (run / "plots" / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run / "label.json").read_text())["names"] == metrics["classes"]
    assert "| macro_f1 |" in (run / "model_card.md").read_text()
    features, labels = _raw_test(version_uri)
    probs = keras.saving.load_model(run / "model.keras")(features).numpy()
    assert probs.shape == (len(labels), 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert np.mean(probs.argmax(axis=1) == labels) == pytest.approx(test["accuracy"])
    np.testing.assert_allclose(_served(run, features), probs, rtol=1e-4, atol=1e-6)


@pytest.mark.timeout(900)
def test_diabetes_regressor_beats_the_mean_in_the_targets_units(root: str, runs: dict) -> None:
    version_uri = versions.resolve(root, "diabetes")
    metrics = runs["diabetes"]
    test, base = metrics["test"], metrics["baseline"]
    assert metrics["task"] == "regression" and metrics["transform"] == "log1p"
    assert test["rmse"] <= base["rmse"] * (1 - CONFIG.min_margin)
    assert test["r2"] > 0.2 and base["r2"] < 0.05
    run = _run_dir(root, "diabetes", "run-1")
    for plot in ("predicted_vs_actual.png", "residuals.png"):
        assert (run / "plots" / plot).read_bytes()[:4] == b"\x89PNG"
    features, y = _raw_test(version_uri)
    pred = keras.saving.load_model(run / "model.keras")(features).numpy().reshape(-1)
    # the exported model undoes log1p: its errors on raw rows are the reported ones, in units
    assert np.sqrt(np.mean((pred - y) ** 2)) == pytest.approx(test["rmse"], rel=1e-4)
    assert 20 < pred.min() and pred.max() < 400
    np.testing.assert_allclose(_served(run, features).reshape(-1), pred, rtol=1e-4)
    assert json.loads((run / "label.json").read_text())["output"] == "the target in its own units"


@pytest.mark.timeout(900)
def test_a_model_that_cannot_beat_the_mean_is_written_not_blessed(root: str) -> None:
    version_uri = versions.resolve(root, "diabetes")
    strict = TrainConfig(input=InputConfig(batch_size=32, seed=3), epochs=1,
                         steps_per_execution=1, min_margin=0.45, folds=0,
                         model=ModelConfig(family="trees", max_rounds=50))
    result = train(version_uri, f"{root}/models", "run-strict", strict)
    assert not result.blessing.blessed and not result.promoted
    assert any("mean-predictor baseline: rmse" in r for r in result.blessing.reasons)
    assert (_run_dir(root, "diabetes", "run-strict") / "metrics.json").exists()


def _set_column(source: str, column: str, dtype: str):
    return lambda spec: spec["sources"][source]["columns"].update({column: dtype})


# case -> (dataset, change to its spec.yaml, what spec check says, what the ETL says), after
# "<file>.label.": each message names the file, the field and what was expected
BAD_SPECS = {
    "unknown task": ("diabetes", lambda s: s["label"].update(task="ordinal"),
                     "task: expected one of", "task: expected one of"),
    "label column missing": ("diabetes", lambda s: s["label"].update(source="hba1c"),
                             "source: 'hba1c' is not an extracted column",
                             "source: 'hba1c' is not an extracted column"),
    "classes not matching the data": (
        "wine", lambda s: s["label"].update(classes=["class_0", "class_1"]),
        "classes: expected the values", "classes ['class_0', 'class_1']: 'class_2'"),
    "regression label not numeric": (
        "diabetes", _set_column("patients", "progression", "string"),
        "source: 'progression' must be numeric (int64/float64) for a regression label, is string",
        "source: 'progression' must be numeric (int64/float64) for a regression label"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_specs_fail_spec_check_and_the_etl_and_publish_nothing(root: str, tmp_path: Path,
                                                                  case: str) -> None:
    """A broken copy of a shipped spec, same name and storage root as the published dataset."""
    name, change, checked, run_error = BAD_SPECS[case]
    folder = tmp_path / name
    shutil.copytree(SPECS_DIR / name, folder)
    raw = yaml.safe_load((folder / "spec.yaml").read_text())
    change(raw)
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    spec_file = str(folder / "spec.yaml")
    datasets = Path(root.removeprefix("file://")) / "datasets" / name
    before = ((datasets / "LATEST").read_bytes(), versions.list_versions(root, name),
              sorted(datasets.rglob("manifest.json")))

    check = _cli("etl", "spec", "check", spec_file, ok=False)
    assert check.returncode == 1 and f"error: {spec_file}.label.{checked}" in check.stdout, \
        check.stdout + check.stderr
    run = _cli("etl", "run", "--root", root, "--dataset", spec_file, "--interval-end",
               "2026-01-02", ok=False)
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    assert f"{spec_file}.label.{run_error}" in run.stderr, run.stderr[-3000:]
    assert ((datasets / "LATEST").read_bytes(), versions.list_versions(root, name),
            sorted(datasets.rglob("manifest.json"))) == before


@pytest.mark.parametrize("name, plots, shown", [
    ("wine", ["confusion_matrix.png"], ("accuracy", "macro_f1")),
    ("diabetes", ["predicted_vs_actual.png", "residuals.png"], ("rmse", "r2")),
])
def test_ui_model_page_shows_the_tasks_metrics_and_plots(root: str, runs: dict, name: str,
                                                          plots: list, shown: tuple) -> None:
    """The UI's model page renders a run of each task, with its plots and key metrics."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))
    from fastapi.testclient import TestClient
    from pipeline_ui import present
    from pipeline_ui.app import create_app

    version = versions.latest_version(root, name)
    html = TestClient(create_app(root)).get(f"/datasets/{name}/versions/{version}/models/run-1")
    assert html.status_code == 200
    for plot in plots:
        assert f"/models/run-1/files/plots/{plot}" in html.text
    record = ModelRecord.from_json(runs[name], f"{name}'s metrics.json")
    keys = [k for k, _ in present.key_metrics(record)]
    assert all(f"test.{m}" in keys for m in shown), keys


def test_classes_taken_from_a_version_hold_for_later_data(root: str, tmp_path: Path) -> None:
    """A spec without ``classes``: the first version fixes them; a new class later fails."""
    raw = yaml.safe_load((SPECS_DIR / "wine" / "spec.yaml").read_text())
    raw.update(name="wine_later")
    raw["label"].pop("classes")
    shutil.copy(SPECS_DIR / "wine" / "expectations.json", tmp_path / "expectations.json")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    frame = sklearn_frame(load_spec("wine"))
    raw_dir = Path(root.removeprefix("file://")) / "raw" / "wine_later"
    raw_dir.mkdir(parents=True)
    frame[frame["cultivar"] != "class_2"].to_csv(raw_dir / "early.csv", index=False)
    frame.to_csv(raw_dir / "full.csv", index=False)
    spec = str(tmp_path / "spec.yaml")
    first = pipeline.run(spec, root, END, source_uri="raw/wine_later/early.csv")
    names = versions.read_manifest(first.version_uri).schema.label.class_names
    assert names == ["class_0", "class_1"]
    with pytest.raises(ValidationFailed) as info:
        pipeline.run(spec, root, "2026-01-02", source_uri="raw/wine_later/full.csv")
    assert "'class_2'" in str(info.value) and first.version in str(info.value)
    assert versions.list_versions(root, "wine_later") == [first.version]
